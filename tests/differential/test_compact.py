"""Compact unwind against LLVM 14 (llvm-mc for Mach-O, llvm-objdump --unwind-info).

The same code goes to LLVM as Mach-O assembly and to cfi2sframe as ELF
assembly (GNU as), function names kept.  Wherever LLVM's encoding unwinds as
the CFI says (our decoder, with the real code bytes for STACK_IND, against the
body-state row), ours must be identical; every other function is classified
and counted: LLVM wrong, LLVM without a row, LLVM DWARF where we are exact,
both DWARF.
"""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from cfi2sframe.arch import get_arch
from cfi2sframe.compact.convert import compact_functions
from cfi2sframe.compact.encoding import Code, decode, is_dwarf
from cfi2sframe.compact.lower import CompactRules, body_row, row_rules
from cfi2sframe.elfread import open_elf
from cfi2sframe.frontend.asm import parse_asm
from cfi2sframe.frontend.probe import Assembler
from tests.conftest import require
from tests.corpus import CSMITH_INCLUDE, corpus_dir

MC, OBJDUMP, CLANG, LLC = "llvm-mc-14", "llvm-objdump-14", "clang-14", "llc-14"
TRIPLE = "x86_64-apple-macosx10.15"


def llvm_encodings(macho_asm: str, tmp: Path) -> dict[str, int]:
    """Function name -> LLVM's compact encoding (a function without a row is absent)."""
    src, obj = tmp / "m.s", tmp / "m.o"
    src.write_text(macho_asm)
    subprocess.run([MC, f"-triple={TRIPLE}", "-filetype=obj", str(src), "-o", str(obj)],
                   check=True)
    out = subprocess.run([OBJDUMP, "--unwind-info", str(obj)], capture_output=True, text=True,
                         check=True).stdout
    found = re.findall(r"start:\s+0x[0-9a-f]+ (\S+)\s+length:\s+0x[0-9a-f]+\s+"
                       r"compact encoding:\s+(0x[0-9a-f]+)", out)
    return {name: int(enc, 16) for name, enc in found}


_MACHO_ONLY = re.compile(r"^\s*\.(build_version|subsections_via_symbols|indirect_symbol|"
                         r"alt_entry|data_region|end_data_region|macosx_version_min)\b")


def elf_asm(macho_asm: str) -> str:
    """The same code for GNU as: Mach-O sections and directives rewritten or dropped."""
    out = []
    for line in macho_asm.splitlines():
        stripped = line.split("##", 1)[0].strip()
        if _MACHO_ONLY.match(line):
            continue
        if stripped.startswith(".section"):
            name = stripped.split(None, 1)[1]
            if name.startswith("__TEXT,__text"):
                out.append("\t.text")
            elif name.startswith("__TEXT"):
                out.append("\t.section .rodata")
            else:
                out.append("\t.data")
            continue
        if stripped.startswith(".zerofill"):
            parts = [p.strip() for p in stripped.split(None, 1)[1].split(",")]
            if len(parts) >= 4:
                out.append(f"\t.local {parts[2]}\n\t.comm {parts[2]},{parts[3]},"
                           f"{1 << int(parts[4]) if len(parts) > 4 else 1}")
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def compare(macho_asm: str, tmp: Path, counts: Counter, examples: dict) -> None:
    """Classify every function of one file (see the module docstring)."""
    llvm = llvm_encodings(macho_asm, tmp)
    arch = get_arch("x86_64")
    unit, _ = parse_asm(elf_asm(macho_asm), "m.s", arch, Assembler.from_string("as"))
    ours = {f.name: f for f in compact_functions(unit.timelines, unit.obj, "x86_64")}
    view = open_elf(unit.obj, "object")
    for timeline in unit.timelines:
        func = ours[timeline.name]
        mine = func.rows[0].encoding if func.rows else None
        code = Code(view.section_data(timeline.section)[timeline.start:
                                                       timeline.start + timeline.size])
        body = body_row(timeline.rows)
        want = row_rules(body, "x86_64") if body is not None else None
        theirs = llvm.get(timeline.name)
        if mine is not None and not is_dwarf(mine, "x86_64"):
            assert decode(mine, "x86_64", code) == want  # ours unwinds as the CFI says
        if theirs is None:
            kind = "LLVM no row" + ("; ours compact" if func.reason is None else "; both DWARF")
        elif is_dwarf(theirs, "x86_64"):
            kind = "both DWARF" if func.reason else "LLVM DWARF, ours exact compact"
        elif isinstance(want, CompactRules) and decode(theirs, "x86_64", code) == want:
            assert mine == theirs, (timeline.name, hex(mine or 0), hex(theirs))
            kind = "identical"
        else:
            kind = "LLVM wrong" + ("; ours compact" if func.reason is None else
                                   f"; ours DWARF ({func.reason})")
        counts[kind] += 1
        examples.setdefault(kind, timeline.name)


HAND = {
    # name: body (Mach-O x86-64); the expected classification follows notes section 4.7.
    "rbp_frame": """pushq %rbp
 .cfi_def_cfa_offset 16
 .cfi_offset %rbp, -16
 movq %rsp, %rbp
 .cfi_def_cfa_register %rbp
 pushq %r15
 pushq %r14
 pushq %rbx
 pushq %rax
 .cfi_offset %rbx, -40
 .cfi_offset %r14, -32
 .cfi_offset %r15, -24
 nop
 addq $8, %rsp
 popq %rbx
 popq %r14
 popq %r15
 popq %rbp
 retq""",
    "rbp_frame_descending": """pushq %rbp
 .cfi_def_cfa_offset 16
 .cfi_offset %rbp, -16
 movq %rsp, %rbp
 .cfi_def_cfa_register %rbp
 pushq %r15
 pushq %r14
 pushq %rbx
 pushq %rax
 .cfi_offset %r15, -24
 .cfi_offset %r14, -32
 .cfi_offset %rbx, -40
 nop
 addq $8, %rsp
 popq %rbx
 popq %r14
 popq %r15
 popq %rbp
 retq""",
    "frameless": """pushq %r15
 .cfi_def_cfa_offset 16
 pushq %r14
 .cfi_def_cfa_offset 24
 pushq %rbx
 .cfi_def_cfa_offset 32
 subq $16, %rsp
 .cfi_def_cfa_offset 48
 .cfi_offset %rbx, -32
 .cfi_offset %r14, -24
 .cfi_offset %r15, -16
 nop
 addq $16, %rsp
 popq %rbx
 popq %r14
 popq %r15
 retq""",
    "frameless_descending": """pushq %r15
 .cfi_def_cfa_offset 16
 pushq %r14
 .cfi_def_cfa_offset 24
 pushq %rbx
 .cfi_def_cfa_offset 32
 .cfi_offset %r15, -16
 .cfi_offset %r14, -24
 .cfi_offset %rbx, -32
 nop
 popq %rbx
 popq %r14
 popq %r15
 retq""",
    "stack_ind": """pushq %rbx
 .cfi_def_cfa_offset 16
 subq $5000, %rsp
 .cfi_def_cfa_offset 5016
 .cfi_offset %rbx, -16
 nop
 addq $5000, %rsp
 popq %rbx
 retq""",
    "stack_ind_extra_insn": """movq %rdi, %rax
 pushq %rbx
 .cfi_def_cfa_offset 16
 subq $5000, %rsp
 .cfi_def_cfa_offset 5016
 .cfi_offset %rbx, -16
 nop
 addq $5000, %rsp
 popq %rbx
 retq""",
    "spill_not_at_top": """subq $24, %rsp
 .cfi_def_cfa_offset 32
 movq %rbx, (%rsp)
 .cfi_offset %rbx, -32
 nop
 movq (%rsp), %rbx
 addq $24, %rsp
 retq""",
    "rbp_not_at_cfa_16": """pushq %rbx
 .cfi_def_cfa_offset 16
 pushq %rbp
 .cfi_def_cfa_offset 24
 .cfi_offset %rbp, -24
 .cfi_offset %rbx, -16
 movq %rsp, %rbp
 .cfi_def_cfa_register %rbp
 nop
 popq %rbp
 popq %rbx
 retq""",
    "cfa_offset_12": """subq $4, %rsp
 .cfi_def_cfa_offset 12
 nop
 addq $4, %rsp
 retq""",
    "leaf_no_cfi": """nop
 retq""",
    "gap_in_frame": """pushq %rbp
 .cfi_def_cfa_offset 16
 .cfi_offset %rbp, -16
 movq %rsp, %rbp
 .cfi_def_cfa_register %rbp
 pushq %rbx
 pushq %rax
 pushq %r12
 .cfi_offset %rbx, -24
 .cfi_offset %r12, -40
 nop
 popq %r12
 popq %rax
 popq %rbx
 popq %rbp
 retq""",
}


def _macho(functions: dict[str, str]) -> str:
    parts = ["\t.section __TEXT,__text,regular,pure_instructions"]
    for name, body in functions.items():
        parts.append(f"\t.globl _{name}\n_{name}:\n\t.cfi_startproc\n\t"
                     + body.replace("\n ", "\n\t") + "\n\t.cfi_endproc")
    return "\n".join(parts) + "\n"


def test_hand_written_prologues_against_llvm(tmp_path: Path, report) -> None:
    require(MC, OBJDUMP, "as")
    counts: Counter = Counter()
    examples: dict = {}
    for name, body in HAND.items():
        compare(_macho({name: body}), tmp_path, counts, examples)
    report(f"compact vs LLVM 14, {len(HAND)} hand-written x86-64 prologues: {dict(counts)}; "
           f"examples {examples}")
    assert counts["identical"] >= 3
    # Notes section 4.7: LLVM encodes these wrongly, and we must not.
    assert counts["LLVM wrong; ours compact"] + counts["LLVM wrong; ours DWARF "
                                                       "(saves-not-contiguous)"] >= 1
    wrong = {v for k, v in examples.items() if k.startswith("LLVM wrong")}
    assert wrong


@pytest.mark.parametrize("opt,llc_opts", [("-O0", ["-O0"]), ("-O2", ["-O2"]),
                                          ("-Os", ["-O2"]),
                                          ("-O2", ["-O2", "-frame-pointer=all"])])
def test_csmith_through_llc_against_llvm(opt: str, llc_opts: list[str], tmp_path: Path,
                                         report) -> None:
    require(MC, OBJDUMP, CLANG, LLC, "csmith", "as")
    counts: Counter = Counter()
    examples: dict = {}
    folder = corpus_dir() / "compact"
    folder.mkdir(parents=True, exist_ok=True)
    files = 0
    for seed in range(1, 35):
        c_file = folder / f"p{seed}.c"
        if not c_file.exists():
            c_file.write_text(subprocess.run(["csmith", "--seed", str(seed)],
                                             capture_output=True, text=True,
                                             check=True).stdout)
        ll = tmp_path / "t.ll"
        subprocess.run([CLANG, opt, "-S", "-emit-llvm", "-w", f"-I{CSMITH_INCLUDE}",
                        str(c_file), "-o", str(ll)], check=True)
        macho = subprocess.run([LLC, *llc_opts, f"-mtriple={TRIPLE}", str(ll), "-o", "-"],
                               capture_output=True, text=True, check=True).stdout
        compare(macho, tmp_path, counts, examples)
        files += 1
    report(f"compact vs LLVM 14, {files} csmith files (clang {opt}, llc "
           f"{' '.join(llc_opts)}): {dict(counts)}")
    assert counts["identical"] > 0


def test_assembly_rows_read_back_by_llvm(tmp_path: Path, report) -> None:
    """Our __compact_unwind rows, assembled by llvm-mc (Mach-O) next to the same code
    without CFI, are read back by llvm-objdump as the same encodings."""
    require(MC, OBJDUMP, "as")
    from cfi2sframe.compact.rows import rows_asm

    macho = _macho(HAND)
    unit, _ = parse_asm(elf_asm(macho), "m.s", get_arch("x86_64"),
                        Assembler.from_string("as"))
    functions = compact_functions(unit.timelines, unit.obj, "x86_64", ranges=True)
    code_only = "\n".join(line for line in macho.splitlines()
                          if not line.strip().startswith(".cfi_"))
    got = llvm_encodings(code_only + "\n" + rows_asm(functions), tmp_path)
    src = tmp_path / "m.s"
    out = subprocess.run([OBJDUMP, "--unwind-info", str(tmp_path / "m.o")],
                         capture_output=True, text=True, check=True).stdout
    encodings = [int(e, 16) for e in re.findall(r"compact encoding:\s+(0x[0-9a-f]+)", out)]
    assert encodings == [row.encoding for f in functions for row in f.rows], src
    assert {f.name: f.rows[0].encoding for f in functions} == got
    report(f"compact rows as assembly: {len(encodings)} rows ({len(functions)} functions, "
           "--ranges) read back by llvm-objdump 14 unchanged")
