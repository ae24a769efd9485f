"""The CFI interpreter on hand-written DWARF programs (expected rows derived by hand)."""

from __future__ import annotations

import pytest

from cfi2sframe.dwarf import ops
from cfi2sframe.dwarf.cfi import Cfi, Cie, Fde
from cfi2sframe.dwarf.interpret import interpret
from cfi2sframe.dwarf.ops import decode_ops, sleb, uleb
from cfi2sframe.errors import Cfi2SframeError, CfiError
from cfi2sframe.model import CfaExpr, CfaReg, Rule

CIE = (ops.DefCfa(7, 8), ops.Offset(16, -8))


def cfas(rows):
    return [(row.start, row.cfa) for row in rows]


def test_register_after_a_cfa_expression_reuses_the_last_register_and_offset():
    # libgcrypt's hand-written assembly does this; GCC's unwinder and readelf -wF
    # both continue from the register and offset fields (rsp+56 -> rax+56, then rsp+56).
    expr = bytes([0x77]) + sleb(536) + bytes([0x06, 0x23, 56])
    program = [(13, ops.DefCfaOffset(56)), (30, ops.DefCfaRegister(0)),
               (49, ops.DefCfaExpression(expr)), (60, ops.DefCfaRegister(7)),
               (62, ops.DefCfaOffset(48))]
    assert cfas(interpret(CIE, program, 100)) == [
        (0, CfaReg(7, 8)), (13, CfaReg(7, 56)), (30, CfaReg(0, 56)), (49, CfaExpr(expr)),
        (60, CfaReg(7, 56)), (62, CfaReg(7, 48))]


def test_an_offset_after_a_cfa_expression_keeps_the_expression():
    # DW_CFA_def_cfa_offset sets only the offset field: GCC's unwind-dw2.c ("cfa_how
    # deliberately not set"), gdb's dwarf2/frame.c and readelf -wF (CFA "exp") keep the
    # expression as the rule; a def_cfa_register after it is register + that offset.
    expr = b"\x77\x08"
    program = [(0, ops.DefCfaExpression(expr)), (2, ops.DefCfaOffset(24)),
               (4, ops.DefCfaRegister(6))]
    assert cfas(interpret((), program, 10)) == [(0, CfaExpr(expr)), (4, CfaReg(6, 24))]
    assert cfas(interpret(CIE, program[:2], 10)) == [(0, CfaExpr(expr))]


def test_without_any_register_rule_it_is_invalid():
    program = [(0, ops.DefCfaExpression(b"\x77\x08")), (2, ops.DefCfaRegister(6))]
    with pytest.raises(CfiError, match="without a register-based CFA rule"):
        interpret((), program, 10)
    with pytest.raises(CfiError, match="without a register-based CFA rule"):
        interpret((), [(0, ops.DefCfaOffset(8))], 10)


def test_remember_restore_brings_back_rules_and_ra_signing():
    program = [(0, ops.RememberState()), (1, ops.NegateRaState()), (1, ops.DefCfaOffset(16)),
               (2, ops.RestoreState())]
    rows = interpret(CIE, program, 4)
    assert [(r.start, r.cfa.offset, r.ra_signed) for r in rows] == [
        (0, 8, False), (1, 16, True), (2, 8, False)]


def test_restore_goes_back_to_the_cie_rule():
    program = [(1, ops.Offset(16, -16)), (1, ops.Offset(3, -24)), (2, ops.Restore(16)),
               (2, ops.Restore(3))]
    rows = interpret(CIE, program, 3)
    assert rows[-1].regs == ((16, Rule("offset", -8)),)


def test_rows_past_the_end_are_dropped_and_equal_rows_merge():
    program = [(1, ops.Offset(3, -16)), (2, ops.Offset(3, -16)),
               (5, ops.DefCfaOffset(16))]
    rows = interpret(CIE, program, 5)
    assert [r.start for r in rows] == [0, 1]


def test_decode_ops_every_encoding():
    data = bytes([
        0x41,              # advance_loc 1
        0x0E, 0x10,        # def_cfa_offset 16
        0x86, 0x02,        # offset r6, 2 * -8
        0xC6,              # restore r6
        0x03, 0x2C, 0x01,  # advance_loc2 300
        0x11, 0x03, 0x7E,  # offset_extended_sf r3, -2 * -8
        0x2E, 0x08,        # GNU_args_size 8
        0x0A, 0x0B,        # remember_state, restore_state
        0x0C, 0x07, 0x10,  # def_cfa r7, 16
        0x2F, 0x06, 0x01,  # GNU_negative_offset_extended r6, -(1 * -8)
    ]) + bytes([0x04]) + (70000).to_bytes(4, "little") + bytes([0x16, 0x03, 0x02, 0x77,
                                                                0x08])
    assert decode_ops(data, 1, -8) == [
        ops.AdvanceLoc(1), ops.DefCfaOffset(16), ops.Offset(6, -16), ops.Restore(6),
        ops.AdvanceLoc(300), ops.Offset(3, 16), ops.ArgsSize(8),
        ops.RememberState(), ops.RestoreState(), ops.DefCfa(7, 16),
        ops.Offset(6, 8), ops.AdvanceLoc(70000), ops.ValExpression(3, bytes([0x77, 0x08]))]
    assert uleb(300) == b"\xac\x02" and sleb(-2) == b"\x7e"


def test_negate_ra_state_with_pc_marks_the_pc_as_diversifier_while_signed():
    """DW_CFA_AARCH64_negate_ra_state_with_pc (0x2c) toggles the signed-RA state as
    negate_ra_state (0x2d) does; the PC mark lasts while the RA stays signed."""
    decoded = decode_ops(bytes([0x2C, 0x41, 0x2D, 0x41, 0x2C]), 4, -8)
    assert decoded == [ops.NegateRaStateWithPc(), ops.AdvanceLoc(4), ops.NegateRaState(),
                       ops.AdvanceLoc(4), ops.NegateRaStateWithPc()]
    placed = [(0, decoded[0]), (4, decoded[2]), (8, decoded[4])]
    rows = interpret([ops.DefCfa(31, 0)], placed, 12)
    assert [(r.start, r.ra_signed, r.ra_signed_pc) for r in rows] == [
        (0, True, True), (4, False, False), (8, True, True)]


def test_operations_are_equal_only_to_the_same_operation():
    """Named tuples with equal operands compare equal; operations must not, or the CIE
    cache (keyed by the CIE's operations) would give one CIE's rules to another."""
    assert ops.DefCfaRegister(7) != ops.Undefined(7)
    assert ops.Offset(16, -8) != ops.ValOffset(16, -8)
    assert len({ops.Undefined(16), ops.SameValue(16), ops.Undefined(16)}) == 2
    undefined = interpret((ops.DefCfa(7, 8), ops.Undefined(16)), [], 4)
    same = interpret((ops.DefCfa(7, 8), ops.SameValue(16)), [], 4)
    assert undefined[0].rule(16).kind == "undefined"
    assert same[0].rule(16).kind == "same_value"


def test_a_cut_body_is_an_error_at_its_byte_in_the_section():
    """A body cut inside an operand is the input's error at that byte of the section:
    the body starts at 0x58, advance_loc (0x41) at 0x58, def_cfa_offset (0x0e) at 0x59,
    its LEB128 operand missing at 0x5a.  Both cores: the compiled replay leaves a cut
    body to the interpreter, whose decoder raises."""
    cie = Cie(1, -8, 16, 0x1B, 0xFF, False, False, True, bytes([0x0C, 7, 8, 0x90, 1]), 8)
    fde = Fde("f", "", 0x1000, 16, cie, 0, b"\x41\x0e", 0x40, 0x58)
    cfi = Cfi("lib.so", "EM_X86_64", "ET_DYN", (fde,), ".eh_frame")
    with pytest.raises(Cfi2SframeError) as raised:
        cfi.rows(fde, {})
    assert str(raised.value) == "lib.so: error: .eh_frame: at byte 0x5a: truncated LEB128 number"
