"""LEB128 numbers (DWARF 5 section 7.6): the package's decoder and encoder in Python (the
compiled core reads them on its own in ``csrc/dwarf_replay.c`` and ``csrc/dwarf_cfi.c``)."""

from __future__ import annotations

from ..errors import DecodeError


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
