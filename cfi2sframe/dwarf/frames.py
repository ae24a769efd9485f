"""The CIE/FDE entry walker of ``.eh_frame`` and ``.debug_frame`` (DWARF 5 section 6.4.1,
LSB ``.eh_frame``): the one place in Python entry lengths, 64-bit escapes, zero
terminators and CIE ids are read.  The ELF reader and the assembler probe's FDE count
both use it; the compiled core's ``.eh_frame`` walker (``csrc/dwarf_cfi.c``) reads them
too, held equal by ``tests/differential/test_core_eh.py``."""

from __future__ import annotations

import struct
from collections.abc import Iterator

from ..errors import DecodeError

# (start, end, ident_at, body_at, ident, is_cie): the entry's first byte and one past
# its last, where its CIE id / CIE pointer field is and what follows it, that field's
# value, and whether the entry is a CIE.
Entry = tuple[int, int, int, int, int, bool]


def entries(data: bytes, is_eh: bool, little: bool, pos: int = 0) -> Iterator[Entry]:
    """Every CIE and FDE of a CFI section in order from ``pos`` (zero terminators are
    skipped).

    ``.eh_frame`` marks a CIE with id 0, ``.debug_frame`` with all ones; an entry
    that runs past the end of ``data`` is a ``DecodeError`` at its start.
    """
    order = "<" if little else ">"
    words = struct.Struct(order + "II").unpack_from
    size = len(data)
    while pos + 4 <= size:
        start = pos
        if pos + 8 <= size:
            length, ident = words(data, pos)
        else:
            length, ident = _fixed(data, pos, 4, little), -1
        pos += 4
        offset_size = 4
        if length == 0xFFFFFFFF:
            length = _fixed(data, pos, 8, little)
            pos += 8
            offset_size = 8
            ident = -1
        if length == 0:
            # A zero terminator; linked files may hold several, and padding can be
            # megabytes of zeros: go to the word holding the next non-zero byte.
            pos += (_next_nonzero(data, pos) - pos) // 4 * 4
            continue
        end = pos + length
        if end > size:
            raise DecodeError(start, f"CFI entry of {length} bytes runs past the end")
        if ident < 0:
            ident = _fixed(data, pos, offset_size, little)
        is_cie = ident == 0 if is_eh else ident == (1 << (8 * offset_size)) - 1
        yield start, end, pos, pos + offset_size, ident, is_cie
        pos = end


def _next_nonzero(data: bytes, pos: int) -> int:
    """Where the first non-zero byte at or after ``pos`` is (the end when none), in
    blocks that double in size: a short gap costs little, and a long one is
    compared with zeros (``memcmp``) a megabyte at a time."""
    step = 64
    while pos < len(data):
        block = data[pos:pos + step]
        if block != bytes(len(block)):
            return pos + len(block) - len(block.lstrip(b"\0"))
        pos += len(block)
        step = min(step * 2, 1 << 20)
    return len(data)


def _fixed(data: bytes, pos: int, size: int, little: bool) -> int:
    if pos + size > len(data):
        raise DecodeError(pos, "truncated CFI entry")
    return int.from_bytes(data[pos:pos + size], "little" if little else "big")


def count_fdes(data: bytes, is_eh: bool, little: bool) -> int:
    """How many FDEs a CFI section holds."""
    return sum(not entry[5] for entry in entries(data, is_eh, little))
