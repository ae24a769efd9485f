"""verify judges coverage: a function the file's own CFI describes and SFrame can hold,
but that has no SFrame FDE, fails it (exit 1, one line naming how many and the first);
and a file without .sframe is judged on the section the conversion would add, never
on where that section would go in the file.

The expected functions come from binutils: readelf's interpretation of the program's
.eh_frame (``readelf_frames``), ``readelf --sframe`` for the FDEs GNU ld 2.40 wrote
(its PLT's, in V1, which that readelf reads), ``nm`` for the names; whether SFrame V2
holds a function is judged by hand from the spec (AMD64: CFA rsp or rbp + offset, RA
at CFA - 8, RBP unchanged or saved at CFA + offset; an undefined RA is an outermost
frame, which V2 cannot hold; a linker's PLT expression, rsp + 8 or 16 by the PC's
place in its 16-byte entry, is the PC-mask FDE the spec made for it).
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
from pathlib import Path

from tests.conftest import HELLO_C, cfi2sframe, readelf_section, require, require_path

from .readelf_frames import UNCHANGED, UNDEFINED, Fde, Reading, read_fdes

RSP, RBP = 7, 6
HELPER_C = "int lonely(int x) { return x * 7 + 1; }\n"


def _v2_holds(fde: Fde) -> bool:
    """Whether SFrame V2 holds the function (False: an outermost frame); any other
    shape is one this test does not expect of gcc's output, and fails it."""
    reading = Reading(fde, "x86_64", RBP)
    rules = [reading.rules(row) for row in fde.rows]
    if any(ra == UNDEFINED for _, ra, _ in rules):
        return False
    for cfa, ra, fp in rules:
        assert (cfa[0] == "reg" and cfa[1] in (RSP, RBP) and not cfa[3]) or \
            (cfa[0] == "plt" and cfa[1] == RSP), (fde, cfa)
        assert ra == ("at", None, -8), (fde, ra)
        assert fp == UNCHANGED or fp[:2] == ("at", None), (fde, fp)
    return True


def _sframe_ranges(program: Path) -> list[tuple[int, int]]:
    """[start, end) of each FDE of the program's .sframe as readelf 2.40 reads it (V1)."""
    text = subprocess.run(["readelf", "--sframe", str(program)], capture_output=True,
                          text=True, check=True).stdout
    assert "SFRAME_VERSION_1" in text, text[:300]
    return [(int(start, 16), int(start, 16) + int(size))
            for start, size in re.findall(r"pc = (0x[0-9a-f]+), size = (\d+) bytes", text)]


def _names(program: Path) -> dict[int, str]:
    """Address -> the function symbol nm gives there (the first listed)."""
    text = subprocess.run(["nm", "--defined-only", str(program)], capture_output=True,
                          text=True, check=True).stdout
    names: dict[int, str] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "Tt":
            names.setdefault(int(parts[0], 16), parts[2])
    return names


def _name(program: Path, address: int) -> str:
    """The name verify gives a function: its symbol's, else ``pc+ADDR`` (dwarf/cfi.py)."""
    return _names(program).get(address, f"pc+{address:#x}")


def _build(folder: Path, *objects: Path, name: str = "prog") -> Path:
    program = folder / name
    subprocess.run(["gcc", *map(str, objects), "-o", str(program)], check=True,
                   capture_output=True)
    return program


def _compile(folder: Path, name: str, source: str, *flags: str) -> Path:
    c_file = folder / f"{name}.c"
    c_file.write_text(source)
    obj = folder / f"{name}.o"
    subprocess.run(["gcc", "-O1", *flags, "-c", str(c_file), "-o", str(obj)], check=True)
    return obj


def _gap_line(program: Path, count: int, name: str, address: int) -> str:
    plural = "s have" if count != 1 else " has"
    them = "them" if count != 1 else "it"
    return (f"{program}: not covered: {count} function{plural} no SFrame FDE though SFrame "
            f"can describe {them}; the first: '{name}' at {address:#x}")


def test_a_program_with_only_lds_plt_sframe_fails(tmp_path: Path) -> None:
    """Objects given V2 .sframe, which GNU ld 2.40 drops ("no .sframe will be created")
    while it keeps its own PLT section: every function of the objects is a gap."""
    require("gcc", "readelf", "nm")
    objects = []
    for name, source in (("main", HELLO_C), ("helper", HELPER_C)):
        plain = _compile(tmp_path, name, source)
        objects.append(tmp_path / f"{name}.sf.o")
        # --linker-reads any: V2, which ld 2.40 drops (its default would be V1, merged)
        assert cfi2sframe(str(plain), "--sframe-version", "2", "--linker-reads", "any",
                          "-o", str(objects[-1]), cwd=tmp_path).returncode == 0
    program = _build(tmp_path, *objects)
    covered = _sframe_ranges(program)
    assert covered, "ld 2.40 writes its PLT's SFrame"
    gaps = sorted(fde.lo for fde in read_fdes(program)
                  if not any(start < fde.hi and fde.lo < end for start, end in covered)
                  and _v2_holds(fde))
    names = _names(program)
    assert {"main", "lonely"} <= {names.get(lo) for lo in gaps}, (gaps, names)
    proc = cfi2sframe("verify", "-q", str(program), cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout
    assert _gap_line(program, len(gaps), _name(program, gaps[0]), gaps[0]) \
        in proc.stdout.splitlines(), proc.stdout
    assert " 0 mismatches" in proc.stdout
    # A run over many files: the record and the summary carry the same.
    twin = tmp_path / "twin"
    shutil.copy(program, twin)
    proc = cfi2sframe("verify", "--json", str(program), str(twin), cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout
    out = json.loads(proc.stdout)
    for record in out["files"]:
        check = record["verify"]
        assert record["status"] == "mismatch" and not check["ok"], record
        assert check["uncovered"] == len(gaps)
        assert check["first_uncovered"] == {"name": _name(program, gaps[0]), "section": "",
                                            "address": gaps[0]}
    assert out["total"]["verified"]["uncovered"] == 2 * len(gaps)
    lines = cfi2sframe("verify", str(program), str(twin), cwd=tmp_path).stdout
    assert f"{len(gaps)} function" in lines and f"the first: '{_name(program, gaps[0])}'" \
        in lines and "FAILED" in lines


def test_a_fully_converted_program_passes(tmp_path: Path) -> None:
    """--in-place gives every function SFrame V2 holds an FDE: verify passes, and the
    functions left out are exactly the outermost frames readelf shows."""
    require("gcc", "readelf")
    program = _build(tmp_path, _compile(tmp_path, "main", HELLO_C),
                     _compile(tmp_path, "helper", HELPER_C))
    assert cfi2sframe("--in-place", "-q", str(program), cwd=tmp_path).returncode == 0
    held = [_v2_holds(fde) for fde in read_fdes(program)]
    proc = cfi2sframe("verify", "-q", str(program), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout
    assert "not covered" not in proc.stdout
    assert proc.stdout.endswith(f": {sum(held)} functions checked at every PC, 0 mismatches, "
                                f"{held.count(False)} without SFrame, 0 only in SFrame\n")


def _drop_last_fde(data: bytearray, sframe_offset: int) -> int:
    """The last FDE of a V2 section taken out of its header's counts (its FREs, the
    last in the FRE sub-section, with it): the start address of its function.  The
    layout is the V2 spec's: a 28-byte header (num_fdes at 8, num_fres at 12, fre_len at
    16), 20-byte FDEs (start, size, FRE offset, FRE count, ...), PC-relative starts."""
    version, flags, aux, fdes, fres = struct.unpack_from("<xxBBxxxBII", data, sframe_offset)
    assert version == 2 and flags & 4, (version, flags)  # SFRAME_F_FDE_FUNC_START_PCREL
    fde_off = struct.unpack_from("<I", data, sframe_offset + 20)[0]
    field = sframe_offset + 28 + aux + fde_off + 20 * (fdes - 1)
    start, _, fre_off, count = struct.unpack_from("<iIII", data, field)
    struct.pack_into("<III", data, sframe_offset + 8, fdes - 1, fres - count, fre_off)
    return field + start  # the field's address is its offset here: see the caller


def test_a_program_missing_one_functions_fde_fails_naming_it(tmp_path: Path) -> None:
    """A converted program whose .sframe lost the FDE of its last function (the
    helper's, linked last): one gap, named."""
    require("gcc", "readelf", "nm")
    program = _build(tmp_path, _compile(tmp_path, "main", HELLO_C),
                     _compile(tmp_path, "helper", HELPER_C))
    assert cfi2sframe("--in-place", "-q", str(program), cwd=tmp_path).returncode == 0
    address, offset = readelf_section(program, ".sframe")
    data = bytearray(program.read_bytes())
    start = _drop_last_fde(data, offset) - offset + address
    cut = tmp_path / "cut"
    cut.write_bytes(bytes(data))
    last = max(fde.lo for fde in read_fdes(program) if _v2_holds(fde))
    assert start == last and _name(program, last) == "lonely"
    proc = cfi2sframe("verify", str(cut), cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout
    assert f"{cut}: no SFrame FDE for 'lonely' [encodable]" in proc.stdout.splitlines()
    assert _gap_line(cut, 1, "lonely", last) in proc.stdout.splitlines(), proc.stdout
    assert cfi2sframe("verify", "-q", str(program), cwd=tmp_path).returncode == 0


INSTALLED = ("/usr/bin/grep", "/usr/bin/gzip", "/usr/bin/diff")


def test_installed_files_without_sframe_verify_whatever_their_layout(tmp_path: Path) -> None:
    """Files whose in-place conversion asks a layout question (Linux before 5.18 wants
    their program headers kept where they are: --old-kernels) still verify: the section
    is checked, not its place; every function readelf shows is checked or outermost."""
    require("readelf")
    require_path(*INSTALLED)
    tree = tmp_path / "tree"
    (tree / "bin").mkdir(parents=True)
    for path in INSTALLED:
        held = [_v2_holds(fde) for fde in read_fdes(Path(path))]
        proc = cfi2sframe("verify", "-q", path, cwd=tmp_path)
        assert proc.returncode == 0, (path, proc.stdout, proc.stderr)
        assert proc.stdout == (f"{path}: {sum(held)} functions checked at every PC, "
                               f"0 mismatches, {held.count(False)} without SFrame, 0 only "
                               "in SFrame\n"), proc.stdout
        shutil.copy(path, tree / "bin")
    shutil.copy("/usr/bin/ls", tree)
    proc = cfi2sframe("verify", "-r", str(tree), "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout
    out = json.loads(proc.stdout)
    assert out["total"]["statuses"] == {"ok": 4}
    assert all(r["verify"]["made"] and r["verify"]["uncovered"] == 0 for r in out["files"])
