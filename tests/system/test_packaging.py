"""The distribution recipes, run for real: a tiny package (a dynamic and a static
program, built with -g) is built with debhelper (``execute_after_dh_strip``) and with
rpmbuild (after rpm's own ``__spec_install_post``: brp-strip and the rest), unpacked,
its programs run natively and under qemu-user, and ``verify -r`` is clean.  The
recipes are the ones docs/post-link.md gives."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import cfi2sframe, require

HELLO_C = ("#include <stdio.h>\nint work(int n) { return n * 3; }\n"
           "int main(int c, char **v) { (void)v; printf(\"%d\\n\", work(c)); return 0; }\n")
MAKEFILE = ("all: hello hello-static\nhello: hello.c\n\t$(CC) -g -O2 -o $@ $<\n"
            "hello-static: hello.c\n\t$(CC) -g -O2 -static -o $@ $<\ninstall:\n"
            "\tinstall -D -m 755 hello $(DESTDIR)/usr/bin/hello\n"
            "\tinstall -D -m 755 hello-static $(DESTDIR)/usr/bin/hello-static\n")
CONTROL = """Source: tiny
Section: devel
Priority: optional
Maintainer: cfi2sframe tests <tests@example.invalid>
Build-Depends: debhelper-compat (= 13)
Standards-Version: 4.6.2

Package: tiny
Architecture: any
Depends: ${shlibs:Depends}, ${misc:Depends}
Description: a tiny program for the cfi2sframe recipe test
 It prints its argument count times three.
"""
# The recipe (docs/post-link.md): after dh_strip, every ELF file of the package tree.
RULES = ("#!/usr/bin/make -f\n%:\n\tdh $@\n\n"
         "execute_after_dh_strip:\n\t$(CFI2SFRAME) --in-place -r debian/tiny\n")
SPEC = """Name: tiny
Version: 1.0
Release: 1
Summary: a tiny program for the cfi2sframe recipe test
License: MIT
Source0: hello.c
Source1: Makefile

%description
It prints its argument count times three.

%prep
cp %{SOURCE0} %{SOURCE1} .

%build
make

%install
make install DESTDIR=%{buildroot}

# After rpm's own post-install steps (brp-strip and the rest): SFrame for every ELF file.
%global __spec_install_post %{?__spec_install_post} \\
  %{cfi2sframe} --in-place -r %{buildroot}

%files
/usr/bin/hello
/usr/bin/hello-static
"""
COMMAND = f"{sys.executable} -m cfi2sframe"


def _check_unpacked(root: Path) -> None:
    programs = sorted((root / "usr" / "bin").iterdir())
    assert [p.name for p in programs] == ["hello", "hello-static"]
    for program in programs:
        for runner in ([], ["qemu-x86_64"]):
            proc = subprocess.run([*runner, str(program)], capture_output=True, text=True,
                                  check=False)
            assert (proc.returncode, proc.stdout) == (0, "3\n"), (runner, program, proc.stderr)
        sections = subprocess.run(["readelf", "-SW", str(program)], capture_output=True,
                                  text=True, check=True).stdout
        assert " .sframe " in sections and " .debug_info " not in sections  # stripped first
    proc = cfi2sframe("verify", "-r", str(root), "-q", cwd=root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 files with .sframe: 2 correct, 0 not" in proc.stdout


@pytest.mark.slow
def test_debhelper_recipe(tmp_path: Path) -> None:
    require("dpkg-buildpackage", "dh", "dpkg-deb", "qemu-x86_64", "readelf")
    source = tmp_path / "tiny"
    (source / "debian" / "source").mkdir(parents=True)
    (source / "hello.c").write_text(HELLO_C)
    (source / "Makefile").write_text(MAKEFILE)
    (source / "debian" / "control").write_text(CONTROL)
    (source / "debian" / "changelog").write_text(
        "tiny (1.0) unstable; urgency=medium\n\n  * Test.\n\n"
        " -- cfi2sframe tests <tests@example.invalid>  Tue, 24 Nov 2026 00:00:00 +0000\n")
    (source / "debian" / "source" / "format").write_text("3.0 (native)\n")
    rules = source / "debian" / "rules"
    rules.write_text(RULES)
    rules.chmod(0o755)
    env = {**os.environ, "CFI2SFRAME": COMMAND}
    proc = subprocess.run(["dpkg-buildpackage", "-us", "-uc", "-b", "-d"], cwd=source,
                          env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "rewritten: " in proc.stdout  # the recipe ran, after dh_strip
    assert proc.stdout.index("dh_strip") < proc.stdout.index("--in-place -r debian/tiny")
    unpacked = tmp_path / "out"
    subprocess.run(["dpkg-deb", "-x", str(tmp_path / "tiny_1.0_amd64.deb"), str(unpacked)],
                   check=True)
    _check_unpacked(unpacked)


@pytest.mark.slow
def test_rpm_recipe(tmp_path: Path) -> None:
    require("rpmbuild", "rpm2archive", "qemu-x86_64", "readelf")
    (tmp_path / "SOURCES").mkdir()
    (tmp_path / "SOURCES" / "hello.c").write_text(HELLO_C)
    (tmp_path / "SOURCES" / "Makefile").write_text(MAKEFILE)
    spec = tmp_path / "tiny.spec"
    spec.write_text(SPEC)
    proc = subprocess.run(["rpmbuild", "-bb", "--define", f"_topdir {tmp_path}", "--define",
                           f"cfi2sframe {COMMAND}", str(spec)], capture_output=True,
                          text=True, check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    assert output.index("brp-strip ") < output.index("--in-place -r")  # after rpm's strip
    (package,) = (tmp_path / "RPMS").rglob("tiny-1.0-1.*.rpm")
    unpacked = tmp_path / "out"
    unpacked.mkdir()
    with package.open("rb") as rpm:
        archive = subprocess.run(["rpm2archive", "-"], stdin=rpm, capture_output=True,
                                 check=True).stdout
    subprocess.run(["tar", "-xz", "-C", str(unpacked)], input=archive, check=True)
    _check_unpacked(unpacked)
