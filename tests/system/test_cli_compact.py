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


# Two functions in __text with one in __cold between them in the file: the assembler
# gives __cold the addresses after __text, so the FDEs' order is not the addresses'.
SECTIONS_OUT_OF_ORDER = """\t.section __TEXT,__text,regular,pure_instructions
\t.globl _f1
_f1:
\t.cfi_startproc
\tpushq %rbp
\t.cfi_def_cfa_offset 16
\t.cfi_offset %rbp, -16
\tmovq %rsp, %rbp
\t.cfi_def_cfa_register %rbp
\tpopq %rbp
\tretq
\t.cfi_endproc
\t.section __TEXT,__cold,regular,pure_instructions
\t.globl _f2
_f2:
\t.cfi_startproc
\tretq
\t.cfi_endproc
\t.section __TEXT,__text,regular,pure_instructions
\t.globl _f3
_f3:
\t.cfi_startproc
\tpushq %rbp
\t.cfi_def_cfa_offset 16
\t.cfi_offset %rbp, -16
\tmovq %rsp, %rbp
\t.cfi_def_cfa_register %rbp
\tpopq %rbp
\tretq
\t.cfi_endproc
.subsections_via_symbols
"""


def _llvm_symbols(obj: Path) -> dict[str, int]:
    """The functions' addresses in the object, as llvm-nm-14 reads them."""
    text = subprocess.run(["llvm-nm-14", str(obj)], capture_output=True, text=True,
                          check=True).stdout
    return {line.split()[2]: int(line.split()[0], 16) for line in text.splitlines()
            if len(line.split()) == 3 and line.split()[2].startswith("_f")}


def test_listings_are_in_address_order(tmp_path: Path) -> None:
    """An object whose FDEs are not in address order (was listed 0x0, 0xc, 0x6): its
    functions listed by address (llvm-nm's), text and JSON; from the assembly, each
    section's functions by address and the object's own rows matched to the functions
    by name (``_f2`` at 0x0 of __cold was compared with ``_f1`` at 0x0 of __text:
    "1 differ", where both are LLVM's own 0x01000000, as llvm-objdump reads them)."""
    require("llvm-mc", "llvm-nm-14", "llvm-objdump-14")
    source = tmp_path / "e.s"
    source.write_text(SECTIONS_OUT_OF_ORDER)
    obj = tmp_path / "e.o"
    subprocess.run(["llvm-mc", "-triple", "x86_64-apple-macosx10.15", "-filetype=obj",
                    str(source), "-o", str(obj)], check=True)
    addresses = _llvm_symbols(obj)
    assert addresses["_f2"] > addresses["_f3"] > addresses["_f1"]  # the premise
    expected = sorted(addresses, key=addresses.__getitem__)
    listing = run("compact", "e.o", cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    names = [line.split()[0] for line in listing.stdout.splitlines()
             if line.split()[:1] and line.split()[0] in addresses][:3]
    assert names == expected
    as_json = json.loads(run("compact", "e.o", "--json", cwd=tmp_path).stdout)
    assert [(f["name"], f["start"]) for f in as_json] == [(n, addresses[n]) for n in expected]
    own = subprocess.run(["llvm-objdump-14", "--unwind-info", str(obj)], capture_output=True,
                         text=True, check=True).stdout
    assert own.count("compact encoding:     0x01000000") == 2  # _f1's and _f3's rows
    from_asm = run("compact", "e.s", cwd=tmp_path)
    assert from_asm.returncode == 0, from_asm.stderr
    lines = from_asm.stdout.splitlines()
    assert [line.split()[0] for line in lines[:3]] == ["_f1", "_f3", "_f2"]
    assert "2 rows as computed here, 0 differ" in from_asm.stdout, from_asm.stdout


INVALID_CFI_TWO_ROWS = """\
\t.section\t__TEXT,__text,regular,pure_instructions
\t.globl\t_f
_f:
\t.cfi_startproc
\t.cfi_restore_state
\tnop
\tnop
\tnop
\tnop
\tret
\t.cfi_endproc
\t.section\t__LD,__compact_unwind,regular,debug
\t.quad\t_f
\t.long\t2
\t.long\t0x02010000
\t.quad\t0
\t.quad\t0
\t.quad\t_f+2
\t.long\t3
\t.long\t0x02010000
\t.quad\t0
\t.quad\t0
"""


def test_fuzz_finding_rows_per_state_over_invalid_cfi(tmp_path: Path) -> None:
    """Two __compact_unwind rows in one function (one per state, as --ranges writes)
    whose CFI the interpreter refuses (``.cfi_restore_state`` with nothing remembered):
    ``verify`` was an internal error (exit 70: the per-range check zipped the CFI's
    rows, none, with their ends, one).  Invalid CFI has no rows to compare a row with,
    as for a function's one row: each row counted as checked, no problem."""
    require("llvm-mc")
    source = tmp_path / "r.s"
    source.write_text(INVALID_CFI_TWO_ROWS)
    obj = tmp_path / "r.o"
    subprocess.run(["llvm-mc", "-triple", "x86_64-apple-macosx10.15", "-filetype=obj",
                    str(source), "-o", str(obj)], check=True)
    proc = run("verify", "r.o", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout == "r.o: 2 __compact_unwind rows, 2 checked against their DWARF CFI, " \
                          "0 problems\n", proc.stdout
