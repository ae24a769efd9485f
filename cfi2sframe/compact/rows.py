"""``__LD,__compact_unwind`` rows, as assembly (the header's example shape) or bytes.

A row is (range start, range length, encoding, personality, LSDA): 32 bytes on
64-bit targets.  In assembly the start is the function's symbol plus the row's
offset, so the assembler makes the relocation; personality and LSDA are the
``.cfi_personality`` / ``.cfi_lsda`` symbols, else 0.  As bytes (for tools that
place them themselves) starts are the functions' offsets and symbols are 0.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from .lower import CompactFunction

ROW_SIZE_64 = 32


def rows_asm(functions: Sequence[CompactFunction], comment: str = "##") -> str:
    """Assembly for every row of ``functions`` in a ``__LD,__compact_unwind`` section."""
    lines = [f"{comment} compact unwind rows written by cfi2sframe",
             "\t.section __LD,__compact_unwind,regular,debug", "\t.p2align 3"]
    for func in functions:
        for row in func.rows:
            start = func.name if row.start == 0 else f"{func.name} + {row.start:#x}"
            lines += [f"\t.quad {start}", f"\t.long {row.length:#x}",
                      f"\t.long {row.encoding:#010x}",
                      f"\t.quad {func.personality or 0}",
                      f"\t.quad {func.lsda or 0}"]
    return "\n".join(lines) + "\n"


def rows_binary(functions: Sequence[CompactFunction]) -> bytes:
    """The rows as 32-byte little-endian records, starts as function offsets."""
    out = bytearray()
    for func in functions:
        for row in func.rows:
            out += struct.pack("<QIIQQ", func.start + row.start, row.length, row.encoding,
                               0, 0)
    return bytes(out)
