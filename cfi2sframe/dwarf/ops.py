"""DWARF call-frame operations: the one vocabulary both frontends produce.

``.cfi_*`` directives become these operations exactly as an assembler encodes
them, and CFI bytes (``.cfi_escape`` now, ``.eh_frame`` later) decode straight
into them.  Offsets are stored in bytes, already multiplied by the
alignment factors.
"""

from __future__ import annotations

from typing import NamedTuple

from ..arch.base import ByteOrder
from ..errors import DecodeError
from ..model import Name
from .leb128 import read_sleb, read_uleb, sleb, uleb
from .opcodes import ADVANCE_SIZES, CFA, HIGH_MASK, LOW_MASK

__all__ = ["Op", "OpName", "decode_ops", "read_sleb", "read_uleb", "sleb", "uleb"]


class OpName(Name):
    """A DWARF CFA operation after decoding: ``advance`` covers every advance_loc form,
    ``offset`` every offset form (with the data alignment applied), and so on."""

    advance = "advance"
    set_loc = "set_loc"
    nop = "nop"
    args_size = "args_size"
    def_cfa = "def_cfa"
    def_cfa_register = "def_cfa_register"
    def_cfa_offset = "def_cfa_offset"
    def_cfa_expression = "def_cfa_expression"
    undefined = "undefined"
    same_value = "same_value"
    offset = "offset"
    val_offset = "val_offset"
    register = "register"
    expression = "expression"
    val_expression = "val_expression"
    restore = "restore"
    remember_state = "remember_state"
    restore_state = "restore_state"
    window_save = "window_save"  # AArch64 negate_ra_state
    negate_ra_state_with_pc = "negate_ra_state_with_pc"


class Op(NamedTuple):
    """One DWARF CFA operation; ``line`` is the source line it came from, if any.

    A named tuple: CFI decoding creates millions of these for large libraries.
    """

    name: OpName
    reg: int = 0
    offset: int = 0
    expr: bytes = b""
    line: int = 0


def _block(data: bytes, pos: int) -> tuple[bytes, int]:
    length, pos = read_uleb(data, pos)
    if pos + length > len(data):
        raise DecodeError(pos, f"expression block of {length} bytes runs past the end")
    return data[pos : pos + length], pos + length


def _fixed(data: bytes, pos: int, size: int, big_endian: bool) -> tuple[int, int]:
    if pos + size > len(data):
        raise DecodeError(pos, f"truncated {size}-byte operand")
    order: ByteOrder = "big" if big_endian else "little"
    return int.from_bytes(data[pos : pos + size], order), pos + size


def decode_ops(
    data: bytes,
    code_align: int,
    data_align: int,
    address_size: int = 8,
    big_endian: bool = False,
    line: int = 0,
) -> list[Op]:
    """Decode a DW_CFA instruction stream into operations.

    Advances come out as ``advance`` ops whose ``offset`` is the delta in
    bytes; ``set_loc`` carries the raw address operand.
    """
    ops: list[Op] = []
    append = ops.append
    pos, end = 0, len(data)
    while pos < end:
        at = pos
        byte = data[pos]
        pos += 1
        high = byte & HIGH_MASK
        if high == _ADVANCE_LOC:  # the most common operation
            append(Op(_ADVANCE, 0, (byte & LOW_MASK) * code_align, b"", line))
            continue
        if high == _OFFSET or byte == _DEF_CFA_OFFSET:
            if pos < end and data[pos] < 0x80:  # one-byte ULEB128: decode inline
                value = data[pos]
                pos += 1
            else:
                value, pos = read_uleb(data, pos)
            if byte == _DEF_CFA_OFFSET:
                append(Op(_SET_CFA_OFFSET, 0, value, b"", line))
            else:
                append(Op(_SAVE, byte & LOW_MASK, value * data_align, b"", line))
            continue
        if high == _RESTORE:
            append(Op(_RESTORE_OP, byte & LOW_MASK, 0, b"", line))
            continue
        op, pos = _decode_extended(data, pos, byte, code_align, data_align, address_size,
                                   big_endian, at)
        append(op._replace(line=line) if line else op)
    return ops


def _decode_extended(
    data: bytes,
    pos: int,
    code: int,
    code_align: int,
    data_align: int,
    address_size: int,
    big_endian: bool,
    at: int,
) -> tuple[Op, int]:
    """Decode one operation whose opcode is in the low range (0x00-0x3f)."""
    if code == CFA.nop:
        return Op(OpName.nop), pos
    if code == CFA.set_loc:
        addr, pos = _fixed(data, pos, address_size, big_endian)
        return Op(OpName.set_loc, offset=addr), pos
    size = ADVANCE_SIZES.get(code)
    if size is not None:
        delta, pos = _fixed(data, pos, size, big_endian)
        return Op(OpName.advance, offset=delta * code_align), pos
    name = _NO_OPERAND.get(code)
    if name is not None:
        return Op(name), pos
    name = _REGISTER_ONLY.get(code)
    if name is not None:
        reg, pos = read_uleb(data, pos)
        return Op(name, reg), pos
    if code == CFA.register:
        reg, pos = read_uleb(data, pos)
        reg2, pos = read_uleb(data, pos)
        return Op(OpName.register, reg, reg2), pos
    if code in (CFA.offset_extended, CFA.val_offset):
        reg, pos = read_uleb(data, pos)
        off, pos = read_uleb(data, pos)
        return Op(OpName.offset if code == CFA.offset_extended else OpName.val_offset,
                  reg, off * data_align), pos
    if code in (CFA.offset_extended_sf, CFA.val_offset_sf):
        reg, pos = read_uleb(data, pos)
        off, pos = read_sleb(data, pos)
        return Op(OpName.offset if code == CFA.offset_extended_sf else OpName.val_offset,
                  reg, off * data_align), pos
    if code == CFA.GNU_negative_offset_extended:
        reg, pos = read_uleb(data, pos)
        off, pos = read_uleb(data, pos)
        return Op(OpName.offset, reg, -off * data_align), pos
    if code == CFA.def_cfa:
        reg, pos = read_uleb(data, pos)
        off, pos = read_uleb(data, pos)
        return Op(OpName.def_cfa, reg, off), pos
    if code == CFA.def_cfa_sf:
        reg, pos = read_uleb(data, pos)
        off, pos = read_sleb(data, pos)
        return Op(OpName.def_cfa, reg, off * data_align), pos
    if code == CFA.def_cfa_offset:
        off, pos = read_uleb(data, pos)
        return Op(OpName.def_cfa_offset, offset=off), pos
    if code == CFA.def_cfa_offset_sf:
        off, pos = read_sleb(data, pos)
        return Op(OpName.def_cfa_offset, offset=off * data_align), pos
    if code == CFA.def_cfa_expression:
        expr, pos = _block(data, pos)
        return Op(OpName.def_cfa_expression, expr=expr), pos
    if code in (CFA.expression, CFA.val_expression):
        reg, pos = read_uleb(data, pos)
        expr, pos = _block(data, pos)
        return Op(OpName.expression if code == CFA.expression else OpName.val_expression,
                  reg, expr=expr), pos
    if code == CFA.GNU_args_size:
        size, pos = read_uleb(data, pos)
        return Op(OpName.args_size, offset=size), pos
    raise DecodeError(at, f"unknown DW_CFA opcode {code:#04x}")


# The operations of the hot loop, bound once.
_ADVANCE, _SET_CFA_OFFSET, _SAVE = OpName.advance, OpName.def_cfa_offset, OpName.offset
_RESTORE_OP = OpName.restore
# The opcodes of the hot loop, as plain ints.
_ADVANCE_LOC, _OFFSET, _RESTORE = int(CFA.advance_loc), int(CFA.offset), int(CFA.restore)
_DEF_CFA_OFFSET = int(CFA.def_cfa_offset)
# Operations without operands, and those with one register operand, by their Op name.
_NO_OPERAND: dict[int, OpName] = {
    CFA.remember_state: OpName.remember_state, CFA.restore_state: OpName.restore_state,
    CFA.AARCH64_negate_ra_state: OpName.window_save,
    CFA.AARCH64_negate_ra_state_with_pc: OpName.negate_ra_state_with_pc}
_REGISTER_ONLY: dict[int, OpName] = {
    CFA.restore_extended: OpName.restore, CFA.undefined: OpName.undefined,
    CFA.same_value: OpName.same_value, CFA.def_cfa_register: OpName.def_cfa_register}
