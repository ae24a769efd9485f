"""The compact unwind command line: `cfi2sframe compact` and `--format compact-unwind`.

Expected encodings are derived by hand from compact_unwind_encoding.h (and agree
with LLVM 14's for these shapes, tests/differential/test_compact.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import require

SOURCE = """\t.text
\t.globl rbpframe
rbpframe:
\t.cfi_startproc
\tpushq %rbp
\t.cfi_def_cfa_offset 16
\t.cfi_offset %rbp, -16
\tmovq %rsp, %rbp
\t.cfi_def_cfa_register %rbp
\tpushq %rbx
\tpushq %rax
\t.cfi_offset %rbx, -24
\tnop
\tpopq %rax
\tpopq %rbx
\tpopq %rbp
\tretq
\t.cfi_endproc
\t.globl bigframe
bigframe:
\t.cfi_startproc
\tpushq %rbx
\t.cfi_def_cfa_offset 16
\tsubq $5000, %rsp
\t.cfi_def_cfa_offset 5016
\t.cfi_offset %rbx, -16
\tnop
\taddq $5000, %rsp
\tpopq %rbx
\tretq
\t.cfi_endproc
\t.globl realigned
realigned:
\t.cfi_startproc
\tpushq %rbp
\t.cfi_def_cfa_offset 16
\t.cfi_offset %rbp, -16
\tmovq %rsp, %rbp
\t.cfi_def_cfa %rbp, 24
\tnop
\tpopq %rbp
\tretq
\t.cfi_endproc
"""
# rbpframe: RBP frame, 1 register (offset 1), slot 0 = RBX (1): 0x01010001.
# bigframe: STACK_IND, imm32 at +4 (after push %rbx and 48 81 ec), adjust 2, one
# register RBX: 0x03000000 | 4 << 16 | 2 << 13 | 1 << 10 | 0 = 0x03044400.
# realigned: CFA = rbp+24 is not an RBP frame: DWARF mode 0x04000000.
EXPECTED = {"rbpframe": 0x01010001, "bigframe": 0x03044400, "realigned": 0x04000000}


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cfi2sframe", *args], capture_output=True,
                          text=True, cwd=cwd, check=False)


def test_compact_text_json_and_elf_input(tmp_path):
    require("as")
    (tmp_path / "f.s").write_text(SOURCE)
    text = run("compact", "f.s", cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    for name, encoding in EXPECTED.items():
        line = next(line for line in text.stdout.splitlines() if line.startswith(name))
        assert f"{encoding:#010x}" in line
    assert "DWARF: frame-cfa-not-fp-16" in text.stdout
    assert "RBP frame; saved rbx at [rbp-8]" in text.stdout
    data = json.loads(run("compact", "--json", "f.s", cwd=tmp_path).stdout)
    assert {f["name"]: int(f["rows"][0]["encoding"], 16) for f in data} == EXPECTED
    subprocess.run(["as", "f.s", "-o", "f.o"], cwd=tmp_path, check=True)
    from_obj = json.loads(run("compact", "--json", "f.o", cwd=tmp_path).stdout)
    assert {f["name"]: int(f["rows"][0]["encoding"], 16) for f in from_obj} == EXPECTED
    ranges = json.loads(run("compact", "--json", "--ranges", "f.s", cwd=tmp_path).stdout)
    first = ranges[0]["rows"]
    assert [int(r["encoding"], 16) for r in first] == [
        0x02010000, 0x82020405, 0x81000000, 0x81010001]  # entry, push rbp, frame, body
    assert first[0]["start"] == 0 and sum(r["length"] for r in first) == ranges[0]["length"]


def test_format_compact_unwind_rows(tmp_path):
    require("as")
    (tmp_path / "f.s").write_text(SOURCE)
    proc = run("f.s", "--format", "compact-unwind", "-o", "rows.bin", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "[frame-cfa-not-fp-16]" in proc.stderr  # the DWARF function is reported
    rows = (tmp_path / "rows.bin").read_bytes()
    assert len(rows) == 3 * 32
    assert [int.from_bytes(rows[i + 12:i + 16], "little") for i in range(0, 96, 32)] == \
        list(EXPECTED.values())
    asm = run("f.s", "--format", "compact-unwind", "-o", "rows.s", cwd=tmp_path)
    assert asm.returncode == 0
    assert "__LD,__compact_unwind" in (tmp_path / "rows.s").read_text()
    bad = run("f.s", "--format", "compact-unwind", "-o", "x.o", cwd=tmp_path)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1
    assert not (tmp_path / "x.o").exists()


def test_i386_is_compact_only(tmp_path):
    require("as")
    (tmp_path / "f.s").write_text("\t.text\nf:\n\t.cfi_startproc\n\tpushl %ebp\n"
                                  "\t.cfi_def_cfa_offset 8\n\t.cfi_offset %ebp, -8\n"
                                  "\tmovl %esp, %ebp\n\t.cfi_def_cfa_register %ebp\n"
                                  "\tnop\n\tpopl %ebp\n\tret\n\t.cfi_endproc\n")
    sframe = run("--arch", "i386", "f.s", "-o", "f.sframe", cwd=tmp_path)
    assert sframe.returncode == 1 and "SFrame has no ABI for i386" in sframe.stderr
    compact = run("compact", "--arch", "i386", "f.s", cwd=tmp_path)
    assert compact.returncode == 0 and "0x01000000" in compact.stdout  # EBP frame, no saves
