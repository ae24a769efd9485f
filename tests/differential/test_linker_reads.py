"""Static libraries converted with this system's GNU ld 2.40 on PATH (it merges SFrame V1
only) link with ``-Wl,--fatal-warnings``, the programs run, and the ``.sframe`` ld 2.40
made from our V1 members means what the linked file's ``.eh_frame`` says at every PC
(our ``verify``; readelf 2.40 reads the V1 section: the version and FDE count).  An
object from assembly matches ``as --gsframe`` (2.40, V1) byte for byte but the flags."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import at_least, cfi2sframe, require, require_path

LIBS = Path("/usr/lib/x86_64-linux-gnu")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PROGRAM = ("#include <bzlib.h>\n#include <zlib.h>\n#include <stdio.h>\n"
           "int main(void) { printf(\"%s %s\\n\", BZ2_bzlibVersion(), zlibVersion());\n"
           "  return 0; }\n")


def _ld_240() -> None:
    first = subprocess.run(["ld", "--version"], capture_output=True, text=True,
                           check=True).stdout.splitlines()[0]
    if not re.search(r"\b2\.40\b", first):
        pytest.skip(f"the ld on PATH is not GNU ld 2.40: {first}")


def _convert(tmp_path: Path, name: str, *options: str) -> Path:
    out = tmp_path / name
    proc = cfi2sframe(str(LIBS / name), "-o", str(out), "-w", *options, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return out


def _link(tmp_path: Path, output: str, *inputs: str) -> subprocess.CompletedProcess:
    return subprocess.run(["gcc", "prog.c", "-o", output, *inputs, "-Wl,--fatal-warnings"],
                          cwd=tmp_path, capture_output=True, text=True, check=False)


def _linked_sframe(tmp_path: Path, program: str) -> int:
    """readelf 2.40 on the linked file: V1, sorted; its FDE count."""
    text = subprocess.run(["readelf", "--sframe", program], cwd=tmp_path, capture_output=True,
                          text=True, check=True).stdout
    assert "Version: SFRAME_VERSION_1" in text and "SFRAME_F_FDE_SORTED" in text, text[:400]
    return int(re.search(r"Num FDEs: (\d+)", text).group(1))


def _verify(tmp_path: Path, program: str) -> int:
    check = cfi2sframe("verify", program, cwd=tmp_path)
    found = re.search(r"(\d+) functions checked at every PC, 0 mismatches", check.stdout)
    assert found is not None, check.stdout[-600:]
    assert " 0 only in SFrame" in check.stdout
    return int(found.group(1))


def test_libbz2_and_libz_link_with_fatal_warnings_and_run(tmp_path):
    require("gcc", "ld", "readelf")
    require_path(LIBS / "libbz2.a", LIBS / "libz.a")
    _ld_240()
    (tmp_path / "prog.c").write_text(PROGRAM)
    bz2, z = _convert(tmp_path, "libbz2.a"), _convert(tmp_path, "libz.a")
    linked = _link(tmp_path, "prog", str(bz2), str(z))
    assert linked.returncode == 0 and linked.stderr == "", linked.stderr
    expected = subprocess.run([str(tmp_path / "prog")], capture_output=True, text=True,
                              check=True).stdout
    assert expected.startswith("1.0.") and len(expected.split()) == 3
    at_least("FDEs ld 2.40 merged", _linked_sframe(tmp_path, "prog"), 40)
    at_least("functions verified", _verify(tmp_path, "prog"), 40)
    # Without the linker's choice (V2, as before), every member is an error to ld 2.40.
    old = _convert(tmp_path, "libbz2.a", "--linker-reads", "any")
    failed = _link(tmp_path, "prog2", str(old), str(z))
    assert failed.returncode != 0 and "no .sframe will be created" in failed.stderr


def test_libc_static_link_with_fatal_warnings_and_run(tmp_path):
    """A static program whose C library is our converted libc.a (every member V1)."""
    require("gcc", "ld", "readelf")
    require_path(LIBS / "libc.a", LIBS / "libbz2.a", LIBS / "libz.a")
    _ld_240()
    (tmp_path / "prog.c").write_text(PROGRAM)
    libs = [str(_convert(tmp_path, name)) for name in ("libbz2.a", "libz.a", "libc.a")]
    linked = subprocess.run(
        ["gcc", "-static", "prog.c", "-o", "prog", libs[0], libs[1], "-nostdlib",
         str(LIBS / "crt1.o"), str(LIBS / "crti.o"),
         subprocess.run(["gcc", "-print-file-name=crtbeginT.o"], capture_output=True,
                        text=True, check=True).stdout.strip(),
         "-Wl,--start-group", libs[2], "-lgcc", "-lgcc_eh", "-Wl,--end-group",
         subprocess.run(["gcc", "-print-file-name=crtend.o"], capture_output=True,
                        text=True, check=True).stdout.strip(),
         str(LIBS / "crtn.o"), "-Wl,--fatal-warnings"],
        cwd=tmp_path, capture_output=True, text=True, check=False)
    assert linked.returncode == 0 and linked.stderr == "", linked.stderr
    out = subprocess.run([str(tmp_path / "prog")], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("1.0.")
    at_least("FDEs ld 2.40 merged", _linked_sframe(tmp_path, "prog"), 500)
    at_least("functions verified", _verify(tmp_path, "prog"), 500)


@pytest.mark.parametrize("example", ["frame_pointer.s", "frameless.s"])
def test_object_from_assembly_is_what_gas_240_writes(tmp_path, example):
    """``cfi2sframe foo.s -o foo.o`` with ld 2.40: the .sframe bytes of ``as --gsframe``
    2.40 (V1)."""
    require("as", "objcopy")
    _ld_240()
    source = EXAMPLES / example
    ours = cfi2sframe(str(source), "-o", "ours.o", cwd=tmp_path)
    assert ours.returncode == 0, ours.stderr
    subprocess.run(["as", "--gsframe", str(source), "-o", "gas.o"], cwd=tmp_path, check=True)
    sections = []
    for obj in ("ours.o", "gas.o"):
        subprocess.run(["objcopy", "-O", "binary", "--only-section=.sframe", obj,
                        obj + ".sframe"], cwd=tmp_path, check=True)
        sections.append((tmp_path / (obj + ".sframe")).read_bytes())
    # The flags byte apart: ours says SORTED where the FDEs are (one text section), as
    # our V2 and V3 objects do; gas 2.40 sets no flag in an object.
    assert sections[0][2] == 1 and sections[0][3] == 1 and sections[1][3] == 0
    assert sections[0][:3] + sections[0][4:] == sections[1][:3] + sections[1][4:]
