"""LEB128 numbers for the tests' hand-made CFI bytes, written here from DWARF 5 section
7.6 rather than taken from the package (``cfi2sframe/dwarf/leb128.py`` is what they
test)."""

from __future__ import annotations


def uleb(value: int) -> bytes:
    """ULEB128 (DWARF 5 section 7.6), written here rather than taken from the package."""
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def sleb(value: int) -> bytes:
    """SLEB128 (DWARF 5 section 7.6)."""
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        done = (value == 0 and not byte & 0x40) or (value == -1 and byte & 0x40)
        out.append(byte | (0 if done else 0x80))
        if done:
            return bytes(out)
