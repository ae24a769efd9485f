"""The distribution recipes, run for real: a tiny package (built with -g: a dynamic and
a static program, a program with a 1 MB ``.bss`` (its file far shorter than its memory
image), a shared library linked with ``-z max-page-size=0x200000`` (2 MiB segment
alignment, older GNU ld's x86-64 default) and a program using it) is built with
debhelper (``execute_after_dh_strip``) and with rpmbuild (after rpm's own
``__spec_install_post``: brp-strip and the rest), unpacked, its programs run natively
and under qemu-user, ``verify -r`` is clean, and the library grows by its ``.sframe``
and less than a page, not by its 2 MiB alignment.  The recipes are the ones
docs/post-link.md gives."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import cfi2sframe, require

HELLO_C = ("#include <stdio.h>\nint work(int n) { return n * 3; }\n"
           "int main(int c, char **v) { (void)v; printf(\"%d\\n\", work(c)); return 0; }\n")
# A large static array, used (its address escapes through a volatile pointer), so the
# file is some 1 MB shorter than its memory image.
BSS_C = ("#include <stdio.h>\nstatic char scratch[1000000];\n"
         "int main(int c, char **v) {\n    char *volatile p = scratch;\n    (void)v;\n"
         "    p[sizeof scratch - 1] = (char)c;\n"
         "    printf(\"%d\\n\", p[sizeof scratch - 1] * 3);\n    return 0;\n}\n")
TINY_C = "int tiny_work(int n) { return n * 3; }\n"
USELIB_C = ("#include <stdio.h>\nint tiny_work(int n);\n"
            "int main(int c, char **v) { (void)v; printf(\"%d\\n\", tiny_work(c)); return 0; }\n")
SOURCES = {"hello.c": HELLO_C, "bss.c": BSS_C, "tiny.c": TINY_C, "uselib.c": USELIB_C}
MAKEFILE = ("all: hello hello-static hello-bss libtiny.so.1 hello-lib\n"
            "hello: hello.c\n\t$(CC) -g -O2 -o $@ $<\n"
            "hello-static: hello.c\n\t$(CC) -g -O2 -static -o $@ $<\n"
            "hello-bss: bss.c\n\t$(CC) -g -O2 -o $@ $<\n"
            "libtiny.so.1: tiny.c\n\t$(CC) -g -O2 -fPIC -shared -Wl,-soname,libtiny.so.1 "
            "-Wl,-z,max-page-size=0x200000 -o $@ $<\n"
            "hello-lib: uselib.c libtiny.so.1\n\t$(CC) -g -O2 -o $@ uselib.c libtiny.so.1\n"
            "install:\n"
            "\tinstall -D -m 755 hello $(DESTDIR)/usr/bin/hello\n"
            "\tinstall -D -m 755 hello-static $(DESTDIR)/usr/bin/hello-static\n"
            "\tinstall -D -m 755 hello-bss $(DESTDIR)/usr/bin/hello-bss\n"
            "\tinstall -D -m 755 hello-lib $(DESTDIR)/usr/bin/hello-lib\n"
            "\tinstall -D -m 755 libtiny.so.1 $(DESTDIR)/usr/lib/libtiny.so.1\n")
PROGRAMS = ["hello", "hello-bss", "hello-lib", "hello-static"]
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
Source2: bss.c
Source3: tiny.c
Source4: uselib.c

%description
It prints its argument count times three.

%prep
cp %{SOURCE0} %{SOURCE1} %{SOURCE2} %{SOURCE3} %{SOURCE4} .

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
/usr/bin/hello-bss
/usr/bin/hello-lib
/usr/lib/libtiny.so.1
"""
COMMAND = f"{sys.executable} -m cfi2sframe"


def _readelf(*args: str) -> str:
    return subprocess.run(["readelf", *args], capture_output=True, text=True,
                          check=True).stdout


def _loads(path: Path) -> list[tuple[int, int, int]]:
    """(file size, memory size, alignment) of each PT_LOAD, as readelf reads them."""
    return [(int(row[4], 16), int(row[5], 16), int(row[-1], 16))
            for row in (line.split() for line in _readelf("-lW", str(path)).splitlines())
            if row[:1] == ["LOAD"]]


def _sframe_size(path: Path) -> int:
    """The size of ``.sframe`` as readelf's section table gives it."""
    for line in _readelf("-SW", str(path)).splitlines():
        row = line.replace("[ ", "[").split()
        if row[1:2] == [".sframe"]:
            return int(row[5], 16)
    raise AssertionError(f"{path}: no .sframe")


# The library's growth beyond its .sframe, against a copy of the library built here
# and stripped as the packaging tool strips it: at most a page (the layout's promise:
# the moved program header table and the section headers) and a debug link.
GROWTH_BOUND = 4096 + 256


def _check_unpacked(root: Path, built_library: Path, strip: list[list[str]]) -> None:
    """The package's files, unpacked at ``root``: they run, verify and are small.
    ``built_library``: libtiny.so.1 as make built it; ``strip``: the commands the
    packaging tool strips it with (the file name appended)."""
    programs = sorted((root / "usr" / "bin").iterdir())
    library = root / "usr" / "lib" / "libtiny.so.1"
    assert [p.name for p in programs] == PROGRAMS
    env = {**os.environ, "LD_LIBRARY_PATH": str(library.parent)}
    for program in programs:
        for runner in ([], ["qemu-x86_64"]):
            proc = subprocess.run([*runner, str(program)], capture_output=True, text=True,
                                  env=env, check=False)
            assert (proc.returncode, proc.stdout) == (0, "3\n"), (runner, program, proc.stderr)
    for path in [*programs, library]:
        sections = _readelf("-SW", str(path))
        assert " .sframe " in sections and " .debug_info " not in sections  # stripped first
    # The premises: a file far shorter than its memory image, a library aligned to 2 MiB.
    assert sum(memsz - filesz for filesz, memsz, _ in _loads(root / "usr/bin/hello-bss")) \
        >= 1_000_000
    assert sum(align == 0x200000 for _, _, align in _loads(library)) >= 2
    reference = root.parent / "reference.so"
    shutil.copyfile(built_library, reference)
    for command in strip:
        subprocess.run([*command, str(reference)], check=True)
    growth = library.stat().st_size - reference.stat().st_size - _sframe_size(library)
    assert growth <= GROWTH_BOUND, (library.stat().st_size, reference.stat().st_size)
    proc = cfi2sframe("verify", "-r", str(root), "-q", cwd=root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "5 files with .sframe: 5 correct, 0 not" in proc.stdout


@pytest.mark.slow
def test_debhelper_recipe(tmp_path: Path) -> None:
    require("dpkg-buildpackage", "dh", "dpkg-deb", "qemu-x86_64", "readelf")
    source = tmp_path / "tiny"
    (source / "debian" / "source").mkdir(parents=True)
    for name, text in SOURCES.items():
        (source / name).write_text(text)
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
    # dh_strip: strip --remove-section=.comment --remove-section=.note --strip-unneeded
    _check_unpacked(unpacked, source / "libtiny.so.1",
                    [["strip", "--remove-section=.comment", "--remove-section=.note",
                      "--strip-unneeded"]])


@pytest.mark.slow
def test_rpm_recipe(tmp_path: Path) -> None:
    require("rpmbuild", "rpm2archive", "qemu-x86_64", "readelf")
    (tmp_path / "SOURCES").mkdir()
    for name, text in SOURCES.items():
        (tmp_path / "SOURCES" / name).write_text(text)
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
    (built,) = (tmp_path / "BUILD").rglob("libtiny.so.1")
    # brp-strip (strip -g), then brp-strip-comment-note
    _check_unpacked(unpacked, built, [["strip", "-g"], ["strip", "-R", ".comment", "-R",
                                                         ".note"]])
