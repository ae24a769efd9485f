"""DWARF call-frame operations: the one vocabulary both frontends produce.

``.cfi_*`` directives become these operations exactly as an assembler encodes
them, and CFI bytes (``.cfi_escape``, ``.eh_frame``, ``.debug_frame``) decode
straight into them.  One type per operation, with the operands it has (as gimli's
``CallFrameInstruction``); offsets are in bytes, already multiplied by the alignment
factors.  The types are named tuples (cheap to build and to create at import, where
dataclasses added to every command's start-up) made ``_distinct``: two operations
with the same operands are not equal (``DefCfaRegister(7)`` is not ``Undefined(7)``).
"""

from __future__ import annotations

from ..errors import DecodeError
from ..typed import TYPE_CHECKING, NamedTuple, TypeVar
from .leb128 import read_sleb, read_uleb, sleb, uleb
from .opcodes import ADVANCE_SIZES, CFA, HIGH_MASK, LOW_MASK

if TYPE_CHECKING:
    from ..arch.base import ByteOrder

__all__ = ["CIE_OPS", "LOCATIONS", "AdvanceLoc", "ArgsSize", "DefCfa", "DefCfaExpression",
           "DefCfaOffset", "DefCfaRegister", "Expression", "NegateRaState",
           "NegateRaStateWithPc", "Nop", "Offset", "Op", "Register", "RememberState",
           "Restore", "RestoreState", "SameValue", "SetLoc", "Undefined", "ValExpression",
           "ValOffset", "decode_ops", "read_sleb", "read_uleb", "sleb", "uleb"]


_T = TypeVar("_T")


def _same_operation(self: tuple[object, ...], other: object) -> bool:
    return type(other) is type(self) and tuple.__eq__(self, other)


def _other_operation(self: tuple[object, ...], other: object) -> bool:
    return not _same_operation(self, other)


def _operation_hash(self: tuple[object, ...]) -> int:
    return hash((type(self).__name__, tuple.__hash__(self)))


def _distinct(cls: type[_T]) -> type[_T]:
    """Compare and hash an operation with its type: a named tuple alone would make
    ``DefCfaRegister(7) == Undefined(7)`` (and the CIE cache would mix them up).
    ``setattr``: the type checker refuses assignments to methods."""
    setattr(cls, "__eq__", _same_operation)  # noqa: B010
    setattr(cls, "__ne__", _other_operation)  # noqa: B010
    setattr(cls, "__hash__", _operation_hash)  # noqa: B010
    return cls


@_distinct
class AdvanceLoc(NamedTuple):
    """DW_CFA_advance_loc, advance_loc1/2/4: the next row starts ``delta`` bytes on."""

    delta: int
    line: int = 0


@_distinct
class SetLoc(NamedTuple):
    """DW_CFA_set_loc: the next row starts at ``address`` (the raw operand)."""

    address: int
    line: int = 0


@_distinct
class Nop(NamedTuple):
    """DW_CFA_nop."""

    line: int = 0


@_distinct
class ArgsSize(NamedTuple):
    """DW_CFA_GNU_args_size: outgoing argument bytes; no recovery rule changes."""

    size: int
    line: int = 0


@_distinct
class DefCfa(NamedTuple):
    """DW_CFA_def_cfa, def_cfa_sf: the CFA is ``register`` + ``offset``."""

    register: int
    offset: int
    line: int = 0


@_distinct
class DefCfaRegister(NamedTuple):
    """DW_CFA_def_cfa_register: the CFA's register changes, its offset stays."""

    register: int
    line: int = 0


@_distinct
class DefCfaOffset(NamedTuple):
    """DW_CFA_def_cfa_offset, def_cfa_offset_sf: the CFA's offset changes."""

    offset: int
    line: int = 0


@_distinct
class DefCfaExpression(NamedTuple):
    """DW_CFA_def_cfa_expression: the CFA is the value of a DWARF expression."""

    expression: bytes
    line: int = 0


@_distinct
class Undefined(NamedTuple):
    """DW_CFA_undefined: ``register`` cannot be recovered."""

    register: int
    line: int = 0


@_distinct
class SameValue(NamedTuple):
    """DW_CFA_same_value: ``register`` keeps its value in the caller."""

    register: int
    line: int = 0


@_distinct
class Offset(NamedTuple):
    """DW_CFA_offset and its extended, _sf and GNU negative forms: ``register`` is
    saved at CFA + ``offset``."""

    register: int
    offset: int
    line: int = 0


@_distinct
class ValOffset(NamedTuple):
    """DW_CFA_val_offset, val_offset_sf: ``register``'s value is CFA + ``offset``."""

    register: int
    offset: int
    line: int = 0


@_distinct
class Register(NamedTuple):
    """DW_CFA_register: ``register`` is saved in register ``source``."""

    register: int
    source: int
    line: int = 0


@_distinct
class Expression(NamedTuple):
    """DW_CFA_expression: ``register`` is saved at the address an expression gives."""

    register: int
    expression: bytes
    line: int = 0


@_distinct
class ValExpression(NamedTuple):
    """DW_CFA_val_expression: ``register``'s value is what an expression gives."""

    register: int
    expression: bytes
    line: int = 0


@_distinct
class Restore(NamedTuple):
    """DW_CFA_restore, restore_extended: ``register`` goes back to the CIE's rule."""

    register: int
    line: int = 0


@_distinct
class RememberState(NamedTuple):
    """DW_CFA_remember_state: push every rule."""

    line: int = 0


@_distinct
class RestoreState(NamedTuple):
    """DW_CFA_restore_state: pop the rules pushed last."""

    line: int = 0


@_distinct
class NegateRaState(NamedTuple):
    """DW_CFA_AARCH64_negate_ra_state (SPARC's window_save number): toggle signed RA."""

    line: int = 0


@_distinct
class NegateRaStateWithPc(NamedTuple):
    """DW_CFA_AARCH64_negate_ra_state_with_pc: toggle RA signed with the PC as well."""

    line: int = 0


# One DWARF call-frame instruction, as gimli's ``CallFrameInstruction``: one type per
# operation, each with the operands it has.  Offsets are in bytes (alignment applied).
Op = (AdvanceLoc | SetLoc | Nop | ArgsSize | DefCfa | DefCfaRegister | DefCfaOffset
      | DefCfaExpression | Undefined | SameValue | Offset | ValOffset | Register | Expression
      | ValExpression | Restore | RememberState | RestoreState | NegateRaState
      | NegateRaStateWithPc)

# Operations that only move the location (not rules).
LOCATIONS = (AdvanceLoc, SetLoc)
# The two-operand operations a target's CIE starts with (``Arch.cie_ops`` names them,
# as data below this layer).
CIE_OPS: dict[str, type[DefCfa] | type[Offset]] = {"def_cfa": DefCfa, "offset": Offset}


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
    """Decode a DW_CFA instruction stream into operations, each marked with ``line``."""
    ops: list[Op] = []
    append = ops.append
    pos, end = 0, len(data)
    while pos < end:
        at = pos
        byte = data[pos]
        pos += 1
        high = byte & HIGH_MASK
        if high == _ADVANCE_LOC:  # the most common operation
            append(AdvanceLoc((byte & LOW_MASK) * code_align, line))
            continue
        if high == _OFFSET or byte == _DEF_CFA_OFFSET:
            if pos < end and data[pos] < 0x80:  # one-byte ULEB128: decode inline
                value = data[pos]
                pos += 1
            else:
                value, pos = read_uleb(data, pos)
            if byte == _DEF_CFA_OFFSET:
                append(DefCfaOffset(value, line))
            else:
                append(Offset(byte & LOW_MASK, value * data_align, line))
            continue
        if high == _RESTORE:
            append(Restore(byte & LOW_MASK, line))
            continue
        op, pos = _decode_extended(data, pos, byte, code_align, data_align, address_size,
                                   big_endian, at, line)
        append(op)
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
    line: int,
) -> tuple[Op, int]:
    """Decode one operation whose opcode is in the low range (0x00-0x3f)."""
    if code == CFA.nop:
        return Nop(line), pos
    if code == CFA.set_loc:
        addr, pos = _fixed(data, pos, address_size, big_endian)
        return SetLoc(addr, line), pos
    size = ADVANCE_SIZES.get(code)
    if size is not None:
        delta, pos = _fixed(data, pos, size, big_endian)
        return AdvanceLoc(delta * code_align, line), pos
    no_operand = _NO_OPERAND.get(code)
    if no_operand is not None:
        return no_operand(line), pos
    register_only = _REGISTER_ONLY.get(code)
    if register_only is not None:
        reg, pos = read_uleb(data, pos)
        return register_only(reg, line), pos
    if code == CFA.register:
        reg, pos = read_uleb(data, pos)
        reg2, pos = read_uleb(data, pos)
        return Register(reg, reg2, line), pos
    if code in (CFA.offset_extended, CFA.val_offset):
        reg, pos = read_uleb(data, pos)
        off, pos = read_uleb(data, pos)
        saved = Offset if code == CFA.offset_extended else ValOffset
        return saved(reg, off * data_align, line), pos
    if code in (CFA.offset_extended_sf, CFA.val_offset_sf):
        reg, pos = read_uleb(data, pos)
        off, pos = read_sleb(data, pos)
        saved = Offset if code == CFA.offset_extended_sf else ValOffset
        return saved(reg, off * data_align, line), pos
    if code == CFA.GNU_negative_offset_extended:
        reg, pos = read_uleb(data, pos)
        off, pos = read_uleb(data, pos)
        return Offset(reg, -off * data_align, line), pos
    if code == CFA.def_cfa:
        reg, pos = read_uleb(data, pos)
        off, pos = read_uleb(data, pos)
        return DefCfa(reg, off, line), pos
    if code == CFA.def_cfa_sf:
        reg, pos = read_uleb(data, pos)
        off, pos = read_sleb(data, pos)
        return DefCfa(reg, off * data_align, line), pos
    if code == CFA.def_cfa_offset:
        off, pos = read_uleb(data, pos)
        return DefCfaOffset(off, line), pos
    if code == CFA.def_cfa_offset_sf:
        off, pos = read_sleb(data, pos)
        return DefCfaOffset(off * data_align, line), pos
    if code == CFA.def_cfa_expression:
        expr, pos = _block(data, pos)
        return DefCfaExpression(expr, line), pos
    if code in (CFA.expression, CFA.val_expression):
        reg, pos = read_uleb(data, pos)
        expr, pos = _block(data, pos)
        by_expr = Expression if code == CFA.expression else ValExpression
        return by_expr(reg, expr, line), pos
    if code == CFA.GNU_args_size:
        size, pos = read_uleb(data, pos)
        return ArgsSize(size, line), pos
    raise DecodeError(at, f"unknown DW_CFA opcode {code:#04x}")


# The opcodes of the hot loop, as plain ints.
_ADVANCE_LOC, _OFFSET, _RESTORE = int(CFA.advance_loc), int(CFA.offset), int(CFA.restore)
_DEF_CFA_OFFSET = int(CFA.def_cfa_offset)
# Operations without operands, and those with one register operand, by opcode.
_NO_OPERAND: dict[int, type[RememberState | RestoreState | NegateRaState
                            | NegateRaStateWithPc]] = {
    CFA.remember_state: RememberState, CFA.restore_state: RestoreState,
    CFA.AARCH64_negate_ra_state: NegateRaState,
    CFA.AARCH64_negate_ra_state_with_pc: NegateRaStateWithPc}
_REGISTER_ONLY: dict[int, type[Restore | Undefined | SameValue | DefCfaRegister]] = {
    CFA.restore_extended: Restore, CFA.undefined: Undefined,
    CFA.same_value: SameValue, CFA.def_cfa_register: DefCfaRegister}
