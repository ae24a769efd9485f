"""Mach-O, read by our own code: objects clang-14 writes for x86-64 and arm64 macOS, and
a universal file llvm-lipo makes of them.  The oracle for the reader is
``llvm-objdump --unwind-info`` (the ``__compact_unwind`` rows: start, length, encoding,
personality, LSDA); the oracle for the encodings computed from an x86-64 object's
``__eh_frame`` is LLVM's own encoder, whose rows the object holds."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from cfi2sframe.macho.read import open_macho
from cfi2sframe.macho.unwind import compact_unwind_rows
from tests.conftest import cfi2sframe, require

CXX = """int g(int);
struct S { ~S(); };
int f(int x) { S s; return g(x) + 1; }
int leaf(int x) { return x * 3; }
int big(int a, int b, int c, int d, int e, int f2) {
  int v[64]; for (int i = 0; i < 64; i++) v[i] = g(i + a); return v[b & 63] + c + d + e + f2; }
"""
TARGETS = {"x86_64": "x86_64-apple-macosx10.15", "arm64": "arm64-apple-macosx11"}


def _objects(tmp_path: Path) -> dict[str, Path]:
    require("clang-14", "llvm-objdump-14", "llvm-lipo-14")
    source = tmp_path / "f.cc"
    source.write_text(CXX)
    out = {}
    for arch, target in TARGETS.items():
        obj = tmp_path / f"{arch}.o"
        subprocess.run(["clang-14", "-target", target, "-O2", "-c", "-x", "c++",
                        str(source), "-o", str(obj)], check=True, capture_output=True)
        out[arch] = obj
    fat = tmp_path / "fat.o"
    subprocess.run(["llvm-lipo-14", "-create", str(out["x86_64"]), str(out["arm64"]),
                    "-output", str(fat)], check=True)
    out["fat"] = fat
    return out


def _objdump_rows(path: Path, arch: str | None = None) -> list[tuple]:
    """(start, length, encoding, personality, LSDA) of each row as llvm-objdump prints
    them."""
    text = subprocess.run(["llvm-objdump-14", "--unwind-info", *(
        [f"--arch-name={arch}"] if arch else []), str(path)], capture_output=True,
        text=True, check=True).stdout
    rows = []
    for block in text.split("Entry at offset")[1:]:
        fields = dict(re.findall(r"^\s+([a-zA-Z ]+):\s+(0x[0-9a-f]+)", block, re.M))
        person = re.search(r"personality function: 0x[0-9a-f]+ (\S+)", block)
        rows.append((int(fields["start"], 16), int(fields["length"], 16),
                     int(fields["compact encoding"], 16), person.group(1) if person else None,
                     int(fields["LSDA"], 16) if "LSDA" in fields else None))
    return rows


def test_compact_unwind_rows_as_llvm_objdump_reads_them(tmp_path: Path) -> None:
    objects = _objects(tmp_path)
    for arch in TARGETS:
        ours = [(r.start, r.length, r.encoding, r.personality, r.lsda)
                for r in compact_unwind_rows(open_macho(objects[arch].read_bytes()))]
        assert ours == _objdump_rows(objects[arch]) and len(ours) == 3, arch
        # each slice of the universal file is the thin file
        sliced = compact_unwind_rows(open_macho(objects["fat"].read_bytes(), arch))
        assert [(r.start, r.length, r.encoding) for r in sliced] == [o[:3] for o in ours]


def test_compact_reads_mach_o_and_agrees_with_llvm(tmp_path: Path) -> None:
    objects = _objects(tmp_path)
    proc = cfi2sframe("compact", str(objects["x86_64"]), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "3 rows as computed here, 0 differ, 0 not computed (no FDE)" in proc.stdout
    # clang writes no __eh_frame for arm64: the rows are read and decoded only
    proc = cfi2sframe("compact", str(objects["arm64"]), cwd=tmp_path)
    assert proc.returncode == 0 and "0 rows as computed here, 0 differ, 3 not computed" \
        in proc.stdout
    assert "frameless, stack 0; no DWARF CFI here" in proc.stdout  # leaf: 0x02000000
    proc = cfi2sframe("compact", str(objects["fat"]), cwd=tmp_path)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1
    assert "slices for x86_64, arm64: pick one with --arch" in proc.stderr
    for arch in ("x86_64", "aarch64"):
        proc = cfi2sframe("compact", str(objects["fat"]), "--arch", arch, cwd=tmp_path)
        assert proc.returncode == 0 and "3 rows" in proc.stdout, proc.stderr
    for command in (["dump"], ["verify"], ["-o", str(tmp_path / "x.sframe")]):
        proc = cfi2sframe(*command, str(objects["x86_64"]), cwd=tmp_path)
        assert proc.returncode == 1
        assert "'cfi2sframe compact' reads Mach-O files" in proc.stderr


@pytest.mark.slow
def test_encodings_from_eh_frame_agree_with_llvm_on_csmith(tmp_path: Path) -> None:
    """csmith programs (preprocessed for Linux by clang, compiled for macOS x86-64 at
    four levels): every function's encoding computed here from the object's DWARF CFI is
    LLVM's own row, personality and LSDA bits aside."""
    require("csmith", "clang-14")
    agree = 0
    for seed in range(1, 9):
        source = tmp_path / f"s{seed}.c"
        source.write_text(subprocess.run(["csmith", "--seed", str(seed), "--max-funcs", "12"],
                                         capture_output=True, text=True, check=True).stdout)
        pre = tmp_path / f"s{seed}.i"
        subprocess.run(["clang-14", "-E", "-P", "-I/usr/include/csmith", str(source), "-o",
                        str(pre)], check=True, capture_output=True)
        for level in ("-O0", "-O1", "-O2", "-Os"):
            obj = tmp_path / f"s{seed}{level}.o"
            subprocess.run(["clang-14", "-target", TARGETS["x86_64"], level, "-w", "-c",
                            str(pre), "-o", str(obj)], check=True, capture_output=True)
            out = cfi2sframe("compact", str(obj), cwd=tmp_path).stdout
            found = re.search(r"(\d+) rows as computed here, (\d+) differ, (\d+) not", out)
            assert found and found.group(2) == "0" and found.group(3) == "0", out
            agree += int(found.group(1))
    assert agree >= 150, agree
