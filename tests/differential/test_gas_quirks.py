"""Where GNU as 2.40 writes wrong SFrame data, we write what the CFI says.

Each case assembles a small function with ``as --gsframe`` and checks both
sides: GNU as's output is pinned to its known-wrong value (so a changed
oracle is noticed), ours to the value derived by hand from DWARF.
"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import require

from .compare import ours
from .gas import gas_sframe

HEAD = "\t.text\n"


def _both(tmp_path: Path, body: str):
    require("as", "readelf")
    src = tmp_path / "q.s"
    src.write_text(HEAD + body)
    mine, skips = ours(src)
    theirs, _ = gas_sframe(src, tmp_path)
    return mine, skips, theirs


def test_def_cfa_register_after_offset_at_same_pc(tmp_path):
    # push %rbp (1 byte); def_cfa_offset 16 and def_cfa_register rbp at PC 1.
    # DWARF: CFA = rbp+16 from PC 1.  GNU as takes the offset of the previous
    # row and writes rbp+8 (seen with this machine's as --gsframe).
    body = """q1:
\t.cfi_startproc
\tpush %rbp
\t.cfi_def_cfa_offset 16
\t.cfi_offset 6, -16
\t.cfi_def_cfa_register 6
\tmov %rsp, %rbp
\tleave
\t.cfi_def_cfa 7, 8
\tret
\t.cfi_endproc
"""
    mine, _, theirs = _both(tmp_path, body)
    key = (".text", 0)
    assert mine[key][1][1] == (1, ("fp", 16, -16))
    assert theirs[key][1][1] == (1, ("fp", 8, -16))


def test_ra_saved_elsewhere_is_left_out_not_described_wrongly(tmp_path):
    # The return address is at CFA-16: SFrame V2 on AMD64 can only say CFA-8.
    body = """q3:
\t.cfi_startproc
\tpush %rbp
\t.cfi_def_cfa_offset 16
\t.cfi_offset rip, -16
\tnop
\tret
\t.cfi_endproc
"""
    mine, skips, theirs = _both(tmp_path, body)
    key = (".text", 0)
    assert key not in mine and skips[key].reason == "ra-not-at-fixed-offset"
    assert key in theirs  # GNU as emits it, with RA at the fixed CFA-8: wrong


def test_outermost_frame_is_left_out_not_described_as_a_normal_frame(tmp_path):
    body = """q4:
\t.cfi_startproc
\t.cfi_undefined rip
\tnop
\tret
\t.cfi_endproc
"""
    mine, skips, theirs = _both(tmp_path, body)
    key = (".text", 0)
    assert key not in mine and skips[key].reason == "ra-undefined"
    assert theirs[key][1] == ((0, ("sp", 8, None)),)  # a caller that does not exist


def test_remember_state_at_entry_is_emitted(tmp_path):
    # GNU as 2.40 drops this function; DWARF gives CFA sp+8, sp+16, sp+24, sp+16, sp+8.
    body = """q2:
\t.cfi_startproc
\t.cfi_remember_state
\tpush %rax
\t.cfi_adjust_cfa_offset 8
\t.cfi_remember_state
\tpush %rax
\t.cfi_adjust_cfa_offset 8
\tnop
\t.cfi_restore_state
\tpop %rax
\t.cfi_restore_state
\tpop %rax
\tret
\t.cfi_endproc
"""
    mine, _, theirs = _both(tmp_path, body)
    key = (".text", 0)
    assert key not in theirs
    assert [(start, m[1]) for start, m in mine[key][1]] == [(0, 8), (1, 16), (2, 24), (3, 16),
                                                            (4, 8)]


def test_stack_realignment_is_left_out_by_both(tmp_path):
    body = (Path(__file__).resolve().parents[2] / "examples" / "realigned.s").read_text()
    mine, skips, theirs = _both(tmp_path, body)
    assert not mine and not theirs
    assert [s.reason for s in skips.values()] == ["cfa-not-sp-fp"]
