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
from cfi2sframe.compact.encoding import decode
from cfi2sframe.compact.inputs import compact_functions
from cfi2sframe.compact.lower import CompactRules, body_row, row_rules
from cfi2sframe.compact.rules import Code
from cfi2sframe.compact.words import is_dwarf
from cfi2sframe.elf.read import open_elf
from cfi2sframe.frontend.probe import Assembler
from cfi2sframe.frontend.timelines import parse_asm
from tests.conftest import at_least, require
from tests.corpus import CSMITH_INCLUDE, corpus_dir, csmith_source

MC, OBJDUMP, CLANG, LLC = "llvm-mc-14", "llvm-objdump-14", "clang-14", "llc-14"
# target -> (LLVM triple, our architecture, our assembler)
TARGETS = {
    "x86_64": ("x86_64-apple-macosx10.15", "x86_64", "as"),
    "i386": ("i386-apple-macosx10.15", "i386", "as --32"),
    "arm64": ("arm64-apple-macosx11", "aarch64", "aarch64-linux-gnu-as"),
}


def llvm_encodings(macho_asm: str, tmp: Path, target: str = "x86_64") -> dict[str, int]:
    """Function name -> LLVM's compact encoding (a function without a row is absent)."""
    src, obj = tmp / "m.s", tmp / "m.o"
    src.write_text(macho_asm)
    subprocess.run([MC, f"-triple={TARGETS[target][0]}", "-filetype=obj", str(src), "-o",
                    str(obj)], check=True)
    out = subprocess.run([OBJDUMP, "--unwind-info", str(obj)], capture_output=True, text=True,
                         check=True).stdout
    found = re.findall(r"start:\s+0x[0-9a-f]+ (\S+)\s+length:\s+0x[0-9a-f]+\s+"
                       r"compact encoding:\s+(0x[0-9a-f]+)", out)
    return {name: int(enc, 16) for name, enc in found}


_MACHO_ONLY = re.compile(r"^\s*\.(build_version|subsections_via_symbols|indirect_symbol|"
                         r"alt_entry|data_region|end_data_region|macosx_version_min|loh)\b")


_ARM64_RELOCS = [(re.compile(r"(\S+)@GOTPAGEOFF"), r":got_lo12:\1"),
                 (re.compile(r"(\S+)@GOTPAGE"), r":got:\1"),
                 (re.compile(r"(\S+)@PAGEOFF"), r":lo12:\1"),
                 (re.compile(r"(\S+)@PAGE"), r"\1")]


def elf_asm(macho_asm: str, target: str = "x86_64") -> str:
    """The same code for GNU as: Mach-O sections and directives rewritten or dropped,
    arm64 page relocations in ELF spelling."""
    if target == "arm64":
        for pattern, spelling in _ARM64_RELOCS:
            macho_asm = pattern.sub(spelling, macho_asm)
    out = []
    for line in macho_asm.splitlines():
        if target == "arm64" and ";" in line and '"' not in line:
            line = line.replace(";", "//", 1)  # arm64 Mach-O comments; GNU as: //
        stripped = re.split(r"##|//|;", line, maxsplit=1)[0].strip()
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


def compare(macho_asm: str, tmp: Path, counts: Counter, examples: dict,
            target: str = "x86_64", coverage: Counter | None = None) -> None:
    """Classify every function of one file (see the module docstring); ``coverage``
    adds up function bytes and the bytes our --ranges rows describe exactly."""
    llvm = llvm_encodings(macho_asm, tmp, target)
    _, arch_name, assembler = TARGETS[target]
    unit, _ = parse_asm(elf_asm(macho_asm, target), "m.s", get_arch(arch_name),
                        Assembler.from_string(assembler))
    ours = {f.name: f for f in compact_functions(unit.timelines, unit.obj, target)}
    if coverage is not None:
        for func in compact_functions(unit.timelines, unit.obj, target, ranges=True):
            coverage["bytes"] += func.size
            coverage["exact"] += func.exact_bytes
        for func in ours.values():
            coverage["single"] += func.exact_bytes
            if func.reason is None:
                coverage["single_compact"] += func.size
    view = open_elf(unit.obj, "object")
    for timeline in unit.timelines:
        func = ours[timeline.name]
        mine = func.rows[0].encoding if func.rows else None
        code = Code(view.section_data(timeline.section)[timeline.start:
                                                       timeline.start + timeline.size])
        body = body_row(timeline.rows, target)
        want = row_rules(body, target) if body is not None else None
        theirs = llvm.get(timeline.name)
        if target == "arm64" and theirs is None and timeline.start == 0:
            theirs = llvm.get("ltmp0")  # llvm-objdump's name for offset 0 (notes 11.1)
        if mine is not None and not is_dwarf(mine, target):
            assert decode(mine, target, code) == want  # ours unwinds as the CFI says
        if theirs is None:
            kind = "LLVM no row" + ("; ours compact" if func.reason is None else "; both DWARF")
        elif is_dwarf(theirs, target):
            kind = "both DWARF" if func.reason else "LLVM DWARF, ours exact compact"
        elif isinstance(want, CompactRules) and decode(theirs, target, code) == want:
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
    "with_lsda": """.cfi_personality 155, ___gxx_personality_v0
 .cfi_lsda 16, Lexception0
 pushq %rbp
 .cfi_def_cfa_offset 16
 .cfi_offset %rbp, -16
 movq %rsp, %rbp
 .cfi_def_cfa_register %rbp
 nop
 popq %rbp
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


def _macho(functions: dict[str, str], target: str = "x86_64") -> str:
    parts = ["\t.section __TEXT,__text,regular,pure_instructions"]
    if target == "arm64":
        parts.append("\t.p2align 2")
    for name, body in functions.items():
        parts.append(f"\t.globl _{name}\n_{name}:\n\t.cfi_startproc\n\t"
                     + body.replace("\n ", "\n\t") + "\n\t.cfi_endproc")
        if "Lexception0" in body:
            parts.append("\t.section __TEXT,__gcc_except_tab\nLexception0:\n\t.byte 0xff\n"
                         "\t.section __TEXT,__text,regular,pure_instructions")
    return "\n".join(parts) + "\n"


def test_hand_written_prologues_against_llvm(tmp_path: Path, report) -> None:
    require(MC, OBJDUMP, "as")
    counts: Counter = Counter()
    examples: dict = {}
    for name, body in HAND.items():
        compare(_macho({name: body}), tmp_path, counts, examples)
    report(f"compact vs LLVM 14, {len(HAND)} hand-written x86-64 prologues: {dict(counts)}; "
           f"examples {examples}")
    assert counts["identical"] >= 4
    assert examples["identical"] and "LLVM wrong; ours compact" in counts
    # Notes section 4.7: LLVM encodes these wrongly, and we must not.
    assert counts["LLVM wrong; ours compact"] + counts["LLVM wrong; ours DWARF "
                                                       "(saves-not-contiguous)"] >= 1
    wrong = {v for k, v in examples.items() if k.startswith("LLVM wrong")}
    assert wrong


HAND_I386 = {
    "ebp_frame": """pushl %ebp
 .cfi_def_cfa_offset 8
 .cfi_offset %ebp, -8
 movl %esp, %ebp
 .cfi_def_cfa_register %ebp
 pushl %edi
 pushl %esi
 pushl %ebx
 .cfi_offset %ebx, -20
 .cfi_offset %esi, -16
 .cfi_offset %edi, -12
 nop
 popl %ebx
 popl %esi
 popl %edi
 popl %ebp
 retl""",
    "frameless32": """pushl %esi
 .cfi_def_cfa_offset 8
 subl $5000, %esp
 .cfi_def_cfa_offset 5008
 .cfi_offset %esi, -8
 nop
 addl $5000, %esp
 popl %esi
 retl""",
    "descending32": """pushl %esi
 .cfi_def_cfa_offset 8
 pushl %ebx
 .cfi_def_cfa_offset 12
 .cfi_offset %esi, -8
 .cfi_offset %ebx, -12
 nop
 popl %ebx
 popl %esi
 retl""",
}

HAND_ARM64 = {
    "frame": """stp x20, x19, [sp, #-32]!
 stp x29, x30, [sp, #16]
 add x29, sp, #16
 .cfi_def_cfa w29, 16
 .cfi_offset w30, -8
 .cfi_offset w29, -16
 .cfi_offset w19, -24
 .cfi_offset w20, -32
 nop
 ldp x29, x30, [sp, #16]
 ldp x20, x19, [sp], #32
 ret""",
    "leaf": """sub sp, sp, #32
 .cfi_def_cfa_offset 32
 nop
 add sp, sp, #32
 ret""",
    "frame_swapped_pair": """stp x19, x20, [sp, #-32]!
 stp x29, x30, [sp, #16]
 add x29, sp, #16
 .cfi_def_cfa w29, 16
 .cfi_offset w30, -8
 .cfi_offset w29, -16
 .cfi_offset w20, -24
 .cfi_offset w19, -32
 nop
 ldp x29, x30, [sp, #16]
 ldp x19, x20, [sp], #32
 ret""",
    "frame_lr_fp_swapped": """stp x30, x29, [sp, #-16]!
 add x29, sp, #8
 .cfi_def_cfa w29, 8
 .cfi_offset w29, -8
 .cfi_offset w30, -16
 nop
 ldp x30, x29, [sp], #16
 ret""",
}


@pytest.mark.parametrize("target,cases", [("i386", HAND_I386), ("arm64", HAND_ARM64)])
def test_hand_written_i386_and_arm64_against_llvm(target: str, cases: dict, tmp_path: Path,
                                                   report) -> None:
    require(MC, OBJDUMP, TARGETS[target][2].split()[0])
    counts: Counter = Counter()
    examples: dict = {}
    for name, body in cases.items():
        compare(_macho({name: body}, target), tmp_path, counts, examples, target)
    report(f"compact vs LLVM 14, {len(cases)} hand-written {target} prologues: "
           f"{dict(counts)}; examples {examples}")
    assert counts["identical"] >= 2


# (target, clang flags for the IR, llc flags); the frame-pointer choice is an IR
# attribute, so it is given to clang.
FP = "-fno-omit-frame-pointer"
CSMITH_SETS = [
    ("x86_64", "-O0", "-O0"), ("x86_64", "-O2", "-O2"), ("x86_64", "-Os", "-O2"),
    ("x86_64", f"-O2 {FP}", "-O2"),
    ("i386", "-O0", "-O0"), ("i386", "-O2", "-O2"),
    ("arm64", "-O2", "-O2"), ("arm64", f"-O2 {FP}", "-O2"),
]


# (target, clang flags) -> floors of (files, functions classified, identical to LLVM's):
# 10% below what a run here compared (the comment at each line; at least 1).
CSMITH_FLOORS = {
    ("x86_64", "-O0"): (30, 1170, 1170),  # 34, 1300, 1300
    ("x86_64", "-O2"): (30, 54, 29),  # 34, 61, 33
    ("x86_64", "-Os"): (30, 55, 29),  # 34, 62, 33
    ("x86_64", f"-O2 {FP}"): (30, 54, 54),  # 34, 61, 61
    ("i386", "-O0"): (30, 1170, 1170),  # 34, 1300, 1300
    ("i386", "-O2"): (30, 54, 54),  # 34, 61, 60
    ("arm64", "-O2"): (30, 54, 1),  # 34, 61, 1
    ("arm64", f"-O2 {FP}"): (30, 54, 54),  # 34, 61, 61
}


@pytest.mark.parametrize("target,opt,llc_opt", CSMITH_SETS)
def test_csmith_through_llc_against_llvm(target: str, opt: str, llc_opt: str,
                                         tmp_path: Path, report) -> None:
    require(MC, OBJDUMP, CLANG, LLC, "csmith", TARGETS[target][2].split()[0])
    counts: Counter = Counter()
    coverage: Counter = Counter()
    examples: dict = {}
    folder = corpus_dir() / "compact"
    folder.mkdir(parents=True, exist_ok=True)
    files = 0
    for seed in range(1, 35):
        c_file = folder / f"p{seed}.c"
        if not c_file.exists():
            c_file.write_bytes(csmith_source(seed))
        ll = tmp_path / "t.ll"
        subprocess.run([CLANG, *opt.split(), "-S", "-emit-llvm", "-w", f"-I{CSMITH_INCLUDE}",
                        str(c_file), "-o", str(ll)], check=True)
        macho = subprocess.run([LLC, llc_opt, f"-mtriple={TARGETS[target][0]}", str(ll),
                                "-o", "-"], capture_output=True, text=True, check=True).stdout
        compare(macho, tmp_path, counts, examples, target, coverage)
        files += 1
    total = sum(counts.values())
    ours_compact = total - sum(v for k, v in counts.items()
                               if k.endswith("both DWARF") or "ours DWARF" in k)
    theirs_compact = counts["identical"] + sum(v for k, v in counts.items()
                                               if k.startswith("LLVM wrong"))
    report(f"compact vs LLVM 14, {target}, {files} csmith files (clang {opt}, llc "
           f"{llc_opt}): {dict(counts)}; compact: ours {ours_compact}/{total}, "
           f"LLVM {theirs_compact}/{total}; bytes: one row per function exact at "
           f"{coverage['single']} of {coverage['bytes']} and wrong at "
           f"{coverage['single_compact'] - coverage['single']} (prologues, epilogues); "
           f"--ranges exact at {coverage['exact']}, DWARF for the other "
           f"{coverage['bytes'] - coverage['exact']}, wrong at 0")
    assert counts["identical"] > 0
    files_floor, total_floor, identical_floor = CSMITH_FLOORS[(target, opt)]
    at_least("csmith files", files, files_floor)
    at_least("functions classified", total, total_floor)
    at_least("functions identical to LLVM's", counts["identical"], identical_floor)


@pytest.mark.parametrize("target", ["x86_64", "i386", "arm64"])
def test_assembly_rows_read_back_by_llvm(target: str, tmp_path: Path, report) -> None:
    """Our __compact_unwind rows, assembled by llvm-mc (Mach-O) next to the same code
    without CFI, are read back by llvm-objdump as the same encodings."""
    _, arch_name, assembler = TARGETS[target]
    require(MC, OBJDUMP, assembler.split()[0])
    from cfi2sframe.compact.writer import rows_asm

    cases = {"x86_64": HAND, "i386": HAND_I386, "arm64": HAND_ARM64}[target]
    macho = _macho(cases, target)
    unit, _ = parse_asm(elf_asm(macho, target), "m.s", get_arch(arch_name),
                        Assembler.from_string(assembler))
    # i386: 'sym + N' becomes a scattered relocation, which llvm-objdump 14 aborts on
    # (llvm-mc accepts it); so one row per function there.
    ranges = target != "i386"
    functions = compact_functions(unit.timelines, unit.obj, target, ranges=ranges)
    code_only = "\n".join(line for line in macho.splitlines()
                          if not line.strip().startswith(".cfi_"))
    llvm_encodings(code_only + "\n" + rows_asm(functions, target), tmp_path, target)
    out = subprocess.run([OBJDUMP, "--unwind-info", str(tmp_path / "m.o")],
                         capture_output=True, text=True, check=True).stdout
    encodings = [int(e, 16) for e in re.findall(r"compact encoding:\s+(0x[0-9a-f]+)", out)]
    assert encodings == [row.encoding for f in functions for row in f.rows]
    report(f"compact rows as assembly, {target}: {len(encodings)} rows ({len(functions)} "
           f"functions{', --ranges' if ranges else ''}) read back by llvm-objdump 14 "
           "unchanged")
