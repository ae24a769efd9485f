"""A second independent SFrame generator: LLVM MC (clang 22, from ``pip install ziglang``).

The csmith corpus is assembled by that clang with ``-Wa,--gsframe``, and by us with
the same clang as ``--assembler`` (so both have the same code layout).  Where the
two sections differ by meaning, LLVM's own DWARF says LLVM is wrong (``verify``);
ours verifies everywhere.  LLVM ignores the RA in a register, an undefined SP and
``.cfi_window_save`` on x86-64: a hand-written file shows each, and that we leave
those functions out with the reason.  LLVM's objects are ``--replace`` inputs too.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cfi2sframe import convert_asm
from cfi2sframe.analysis.compare import diff_sections, verify_elf
from cfi2sframe.sframe.load import load_sframe
from tests.conftest import at_least, require, require_module
from tests.corpus import csmith_asm

from .test_gas import SEEDS

CLANG = [sys.executable, "-m", "ziglang", "cc", "-c", "-target", "x86_64-linux-gnu"]
GSFRAME = ["-Wa,--gsframe", "-Wa,--allow-experimental-sframe"]

WRONG_IN_LLVM = """\
\t.text
\t.globl ra_reg
\t.type ra_reg,@function
ra_reg:
\t.cfi_startproc
\tmovq (%rsp), %rax
\t.cfi_register %rip, %rax
\taddq $8, %rsp
\t.cfi_def_cfa_offset 0
\tjmp *%rax
\t.cfi_endproc
\t.globl sp_undef
\t.type sp_undef,@function
sp_undef:
\t.cfi_startproc
\tnop
\t.cfi_undefined %rsp
\tnop
\tret
\t.cfi_endproc
\t.globl wsave
\t.type wsave,@function
wsave:
\t.cfi_startproc
\tnop
\t.cfi_window_save
\tnop
\tret
\t.cfi_endproc
\t.globl good
\t.type good,@function
good:
\t.cfi_startproc
\tpushq %rbp
\t.cfi_def_cfa_offset 16
\t.cfi_offset %rbp, -16
\tpopq %rbp
\t.cfi_def_cfa_offset 8
\tret
\t.cfi_endproc
"""


def require_clang22() -> None:
    """clang 22 comes from ``pip install ziglang`` (the test extra)."""
    require_module("ziglang")


def _clang(source: Path, out: Path) -> None:
    subprocess.run([*CLANG, *GSFRAME, str(source), "-o", str(out)], check=True,
                   capture_output=True)


def _keyed(loaded):
    return lambda fde: (loaded.section_of(fde.field_offset), fde.start_address)


def _mismatched(path: Path) -> set[str]:
    result, _ = verify_elf(str(path))
    return {timeline.name for timeline, _ in result.mismatches}


def test_llvm_and_we_mean_the_same_where_llvm_is_right(tmp_path: Path, report) -> None:
    require_clang22()
    require("as", "csmith", "gcc")
    files = csmith_asm(SEEDS)[::2]
    same = wrong = only_ours = 0
    assembler = " ".join(CLANG)
    for asm in files:
        llvm = tmp_path / "llvm.o"
        _clang(asm, llvm)
        ours = tmp_path / "ours.o"
        ours.write_bytes(convert_asm(asm.read_text(), str(asm), assembler=assembler).obj())
        a, b = load_sframe(str(llvm)), load_sframe(str(ours))
        diff = diff_sections(a.section, b.section, _keyed(a), _keyed(b))
        result, _ = verify_elf(str(ours))
        assert result.ok and not result.extra, (asm, result.mismatches[:1])
        llvm_check, _ = verify_elf(str(llvm))
        bad = {(t.section, t.start) for t, _ in llvm_check.mismatches}
        # Every difference is a function LLVM's own DWARF says LLVM got wrong.
        for d in diff.differing:
            assert d.address in {start for _, start in bad}, (asm, d)
        for fde in diff.only_a:
            assert _keyed(a)(fde) in bad, (asm, fde)
        same += diff.same
        wrong += len(bad)
        only_ours += len(diff.only_b)
    report(f"LLVM MC (clang 22) SFrame V2 vs ours on {len(files)} csmith files: {same} "
           f"functions mean the same, {wrong} wrong in LLVM by its own DWARF, "
           f"{only_ours} only in ours")
    # Measured here: 63 files, 1486 functions mean the same; floors 10% lower.
    at_least("files", len(files), 56)
    at_least("functions that mean the same", same, 1337)


def test_what_llvm_gets_wrong_and_we_leave_out(tmp_path: Path) -> None:
    require_clang22()
    source = tmp_path / "wrong.s"
    source.write_text(WRONG_IN_LLVM)
    llvm = tmp_path / "llvm.o"
    _clang(source, llvm)
    assert _mismatched(llvm) == {"ra_reg", "sp_undef", "wsave"}
    conversion = convert_asm(WRONG_IN_LLVM, str(source), assembler=" ".join(CLANG))
    assert sorted((s.name, s.reason) for s in conversion.skips) == [
        ("ra_reg", "ra-not-at-fixed-offset"), ("sp_undef", "sp-not-cfa"),
        ("wsave", "ra-signed")]
    assert [f.name for f in conversion.functions] == ["good"]
    ours = tmp_path / "ours.o"
    ours.write_bytes(conversion.obj())
    result, _ = verify_elf(str(ours))
    assert result.ok and result.checked == 1


def test_llvm_objects_are_replace_inputs(tmp_path: Path) -> None:
    require_clang22()
    require("csmith", "gcc")
    files = csmith_asm(SEEDS)[:5]
    checked = 0
    for asm in files:
        llvm = tmp_path / "llvm.o"
        _clang(asm, llvm)
        out = tmp_path / "replaced.o"
        proc = subprocess.run([sys.executable, "-m", "cfi2sframe", str(llvm), "--replace",
                               "-w", "-o", str(out)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        result, _ = verify_elf(str(out))
        assert result.ok and not result.extra, (asm, result.mismatches[:1])
        checked += result.checked
    # Measured here: 5 objects, 117 functions verified; floors 10% lower.
    at_least("objects", len(files), 4)
    at_least("functions verified", checked, 105)
