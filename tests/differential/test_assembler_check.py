"""The assembler's own CFI is checked against the directives (issue 14): clang 14's
wrong .eh_frame after .cfi_restore_state + .cfi_adjust_cfa_offset is reported with
the function, the PC range and both rules; GNU as and clang agree with us on
compiler output.

A function placed by the assembler's own FDE agrees by construction (its FDE has the
function's operations, ``frontend.timelines.place_by_cfi``); clang 14's FDE above has
other operations, so probes place that function and the check compares its rows.
On compiler output the check runs on the probe run (``probes=True``), where it
compares every function, and the run by the assembler's FDEs must agree too."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

from cfi2sframe import convert_asm
from tests.conftest import at_least, require
from tests.corpus import csmith_asm

CLANG_AS = "clang-14 -c -x assembler"

# Directives, derived by hand: push %rbp -> CFA rsp+16; remember; the early-return
# path pops back to rsp+8; restore -> rsp+16; push %rbx (+8) -> rsp+24; sub $16
# (+16) -> rsp+40.  clang 14's .eh_frame says rsp+16 and rsp+32 there (it drops the
# adjustments after a restore), GNU as's what the directives say.  Offsets: push 1,
# test 2, je 2, pop 1, ret 1 (.L2 = 0x7), push 1 (rsp+24 from 0x8), sub 4 (rsp+40
# from 0xc), add 4, pop 1, pop 1, ret 1 (end 0x13).
REMEMBER_ADJUST = """\
\t.text
\t.globl\tf
\t.type\tf, @function
f:
\t.cfi_startproc
\tpushq\t%rbp
\t.cfi_def_cfa_offset 16
\t.cfi_offset 6, -16
\ttestl\t%edi, %edi
\tje\t.L2
\t.cfi_remember_state
\tpopq\t%rbp
\t.cfi_def_cfa_offset 8
\tret
.L2:
\t.cfi_restore_state
\tpushq\t%rbx
\t.cfi_adjust_cfa_offset 8
\tsubq\t$16, %rsp
\t.cfi_adjust_cfa_offset 16
\taddq\t$16, %rsp
\tpopq\t%rbx
\tpopq\t%rbp
\tret
\t.cfi_endproc
\t.size\tf, .-f
"""


def test_clang_14_remember_restore_adjust_is_reported(tmp_path: Path) -> None:
    require("as", "clang-14")
    assert convert_asm(REMEMBER_ADJUST, "r.s").unit.agrees
    clang = convert_asm(REMEMBER_ADJUST, "r.s", assembler=CLANG_AS)
    assert clang.unit.probed  # (its FDE has other operations)
    found = clang.assembler_disagreements()
    cfas = [(f.directives.cfa.offset, f.assembler.cfa.offset) for f in found]
    assert cfas == [(24, 16), (40, 32)], cfas
    source = tmp_path / "r.s"
    source.write_text(REMEMBER_ADJUST)
    run = [sys.executable, "-m", "cfi2sframe", str(source), "--assembler", CLANG_AS]
    proc = subprocess.run([*run, "-o", str(tmp_path / "r.sframe")], capture_output=True,
                          text=True)
    assert proc.returncode == 0
    assert (f"{source}:5: warning: the assembler's CFI for 'f' differs from the directives "
            "at [0xc, 0x13): directives CFA=rsp+40 rbp=c-16 rip=c-8; assembler CFA=rsp+32 "
            "rbp=c-16 rip=c-8 [assembler-disagrees]") in proc.stderr, proc.stderr
    strict = subprocess.run([*run, "--strict-assembler", "-o", str(tmp_path / "s.sframe")],
                            capture_output=True, text=True)
    assert strict.returncode == 1 and len(strict.stderr.splitlines()) == 1
    assert "error:" in strict.stderr and not (tmp_path / "s.sframe").exists()


def test_gnu_as_and_clang_agree_with_us_on_compiler_output(report) -> None:
    """The gcc csmith corpus through GNU as and through clang 14's assembler, and clang's
    own assembly through it: what the cross-check finds."""
    require("as", "gcc", "csmith", "clang-14")
    counts: Counter[str] = Counter()
    agreed: Counter[str] = Counter()
    # (files, functions) each corpus must cross-check at least: measured here
    # (125, 2880), (50, 2656) and (24, 377); floors 10% lower.
    floors = {"gcc -S, GNU as": (112, 2592), "gcc -S, clang-14 as": (45, 2390),
              "clang-14 -S, clang-14 as": (21, 339)}
    corpora = {
        "gcc -S, GNU as": (csmith_asm(range(1, 26)), None),
        "gcc -S, clang-14 as": (csmith_asm(range(1, 26), ["O2", "O0"]), CLANG_AS),
        "clang-14 -S, clang-14 as": (csmith_asm(range(1, 13), ["O2", "O0"],
                                                compiler="clang-14", tag="clang14"),
                                     CLANG_AS),
    }
    for name, (files, assembler) in corpora.items():
        functions = 0
        for path in files:
            conversion = convert_asm(path.read_text(), str(path), assembler=assembler,
                                     probes=True)
            functions += len(conversion.unit.timelines)
            found = conversion.assembler_disagreements()
            assert found == [], (name, path, [f.message(conversion.arch) for f in found])
            # Placed by the assembler's FDEs where they have the functions' operations
            # (for GNU as, every file: assembled once, no probe).
            placed = convert_asm(path.read_text(), str(path), assembler=assembler).unit
            assert placed.timelines == conversion.unit.timelines
            agreed[name] += placed.agrees
            assert placed.agrees or assembler is not None, path
        counts[name] = functions
        at_least(f"{name}: files", len(files), floors[name][0])
        at_least(f"{name}: functions", functions, floors[name][1])
    report(f"assembler cross-check: no disagreement in {dict(counts)} functions; files "
           f"placed by the assembler's FDEs: {dict(agreed)}")
