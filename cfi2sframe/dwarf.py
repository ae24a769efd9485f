"""DWARF call-frame operations: the one vocabulary both frontends produce.

``.cfi_*`` directives become these operations exactly as an assembler encodes
them, and CFI bytes (``.cfi_escape`` now, ``.eh_frame`` later) decode straight
into them.  Offsets are stored in bytes, already multiplied by the
alignment factors.
"""

from __future__ import annotations

from typing import NamedTuple

from .arch.base import ByteOrder
from .errors import DecodeError


class Op(NamedTuple):
    """One DWARF CFA operation; ``line`` is the source line it came from, if any.

    A named tuple: CFI decoding creates millions of these for large libraries.
    """

    name: str
    reg: int = 0
    offset: int = 0
    expr: bytes = b""
    line: int = 0


def read_uleb(data: bytes, pos: int) -> tuple[int, int]:
    """Decode an unsigned LEB128 at ``pos``; return (value, next position)."""
    result = shift = 0
    while True:
        if pos >= len(data):
            raise DecodeError(pos, "truncated LEB128 number")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return result, pos


def read_sleb(data: bytes, pos: int) -> tuple[int, int]:
    """Decode a signed LEB128 at ``pos``; return (value, next position)."""
    start = pos
    value, pos = read_uleb(data, pos)
    bits = 7 * (pos - start)
    if data[pos - 1] & 0x40:
        value -= 1 << bits
    return value, pos


def uleb(value: int) -> bytes:
    """Encode ``value`` (>= 0) as unsigned LEB128."""
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def sleb(value: int) -> bytes:
    """Encode ``value`` as signed LEB128."""
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        done = (value == 0 and not byte & 0x40) or (value == -1 and byte & 0x40)
        out.append(byte if done else byte | 0x80)
        if done:
            return bytes(out)


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
        high = byte & 0xC0
        if high == 0x40:  # DW_CFA_advance_loc: the most common operation
            append(Op("advance", 0, (byte & 0x3F) * code_align, b"", line))
            continue
        if high == 0x80 or byte == 0x0E:  # DW_CFA_offset, DW_CFA_def_cfa_offset
            if pos < end and data[pos] < 0x80:  # one-byte ULEB128: decode inline
                value = data[pos]
                pos += 1
            else:
                value, pos = read_uleb(data, pos)
            if byte == 0x0E:
                append(Op("def_cfa_offset", 0, value, b"", line))
            else:
                append(Op("offset", byte & 0x3F, value * data_align, b"", line))
            continue
        if high == 0xC0:
            append(Op("restore", byte & 0x3F, 0, b"", line))
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
    if code == 0x00:
        return Op("nop"), pos
    if code == 0x01:
        addr, pos = _fixed(data, pos, address_size, big_endian)
        return Op("set_loc", offset=addr), pos
    if code in (0x02, 0x03, 0x04):
        delta, pos = _fixed(data, pos, {0x02: 1, 0x03: 2, 0x04: 4}[code], big_endian)
        return Op("advance", offset=delta * code_align), pos
    if code == 0x1D:  # DW_CFA_MIPS_advance_loc8
        delta, pos = _fixed(data, pos, 8, big_endian)
        return Op("advance", offset=delta * code_align), pos
    simple = {0x0A: "remember_state", 0x0B: "restore_state", 0x2D: "window_save",
              0x2C: "negate_ra_state_with_pc"}
    if code in simple:
        return Op(simple[code]), pos
    if code in (0x06, 0x07, 0x08, 0x0D):
        reg, pos = read_uleb(data, pos)
        name = {0x06: "restore", 0x07: "undefined", 0x08: "same_value",
                0x0D: "def_cfa_register"}[code]
        return Op(name, reg), pos
    if code == 0x09:
        reg, pos = read_uleb(data, pos)
        reg2, pos = read_uleb(data, pos)
        return Op("register", reg, reg2), pos
    if code in (0x05, 0x14):
        reg, pos = read_uleb(data, pos)
        off, pos = read_uleb(data, pos)
        return Op("offset" if code == 0x05 else "val_offset", reg, off * data_align), pos
    if code in (0x11, 0x15):
        reg, pos = read_uleb(data, pos)
        off, pos = read_sleb(data, pos)
        return Op("offset" if code == 0x11 else "val_offset", reg, off * data_align), pos
    if code == 0x2F:  # DW_CFA_GNU_negative_offset_extended
        reg, pos = read_uleb(data, pos)
        off, pos = read_uleb(data, pos)
        return Op("offset", reg, -off * data_align), pos
    if code == 0x0C:
        reg, pos = read_uleb(data, pos)
        off, pos = read_uleb(data, pos)
        return Op("def_cfa", reg, off), pos
    if code == 0x12:
        reg, pos = read_uleb(data, pos)
        off, pos = read_sleb(data, pos)
        return Op("def_cfa", reg, off * data_align), pos
    if code == 0x0E:
        off, pos = read_uleb(data, pos)
        return Op("def_cfa_offset", offset=off), pos
    if code == 0x13:
        off, pos = read_sleb(data, pos)
        return Op("def_cfa_offset", offset=off * data_align), pos
    if code == 0x0F:
        expr, pos = _block(data, pos)
        return Op("def_cfa_expression", expr=expr), pos
    if code in (0x10, 0x16):
        reg, pos = read_uleb(data, pos)
        expr, pos = _block(data, pos)
        return Op("expression" if code == 0x10 else "val_expression", reg, expr=expr), pos
    if code == 0x2E:
        size, pos = read_uleb(data, pos)
        return Op("args_size", offset=size), pos
    raise DecodeError(at, f"unknown DW_CFA opcode {code:#04x}")
