"""``__LD,__compact_unwind`` rows, as assembly (the header's example shape) or bytes.

A row is (range start, range length, encoding, personality, LSDA): 32 bytes on
64-bit targets, 20 on i386, where pointers are 4 bytes.  In assembly the start
is the function's symbol plus the row's offset, so the assembler makes the
relocation; personality and LSDA are the ``.cfi_personality`` / ``.cfi_lsda``
symbols, else 0.  As bytes (for tools that place them themselves) starts are
the functions' offsets and symbols are 0.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..arch import by_compact
from ..macho.layout import widths
from .lower import CompactFunction


def rows_asm(functions: Sequence[CompactFunction], arch: str = "x86_64",
             comment: str = "##") -> str:
    """Assembly for every row of ``functions`` in a ``__LD,__compact_unwind`` section."""
    ptr, align = (".long", 2) if by_compact(arch).address_size == 4 else (".quad", 3)
    lines = [f"{comment} compact unwind rows written by cfi2sframe",
             "\t.section __LD,__compact_unwind,regular,debug", f"\t.p2align {align}"]
    for func in functions:
        for row in func.rows:
            start = func.name if row.start == 0 else f"{func.name} + {row.start:#x}"
            lines += [f"\t{ptr} {start}", f"\t.long {row.length:#x}",
                      f"\t.long {row.encoding:#010x}",
                      f"\t{ptr} {func.personality or 0}",
                      f"\t{ptr} {func.lsda or 0}"]
    return "\n".join(lines) + "\n"


def rows_binary(functions: Sequence[CompactFunction], arch: str = "x86_64") -> bytes:
    """The rows as little-endian records (32 or 20 bytes), starts as function offsets."""
    entry = widths(by_compact(arch).address_size).compact_unwind_entry
    out = bytearray()
    for func in functions:
        for row in func.rows:
            out += entry.pack(func.start + row.start, row.length, row.encoding, 0, 0)
    return bytes(out)
