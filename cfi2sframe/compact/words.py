"""The compact unwind word's bit layout: ``compact_unwind_encoding.h`` in Python.

The flags and mode field every target shares, each target's modes, and the register
permutation frameless x86 encodings store (a Lehmer code).  The fields inside each
mode (stack size, register slots) are still read and written by ``x86.py`` and
``arm64.py`` themselves.
"""

from __future__ import annotations

NOT_FUNCTION_START = 0x80000000
HAS_LSDA = 0x40000000
PERSONALITY_MASK = 0x30000000
PERSONALITY_SHIFT = 28  # the 1-based index into the table's personality routines
MODE_MASK = 0x0F000000

X86_RBP_FRAME, X86_STACK_IMMD, X86_STACK_IND, X86_DWARF = (0x01000000, 0x02000000,
                                                           0x03000000, 0x04000000)
ARM64_FRAMELESS, ARM64_DWARF, ARM64_FRAME = 0x02000000, 0x03000000, 0x04000000

# Radices of the frameless register permutation, per register count.
_RADICES = {1: (1,), 2: (5, 1), 3: (20, 4, 1), 4: (60, 12, 3, 1), 5: (120, 24, 6, 2, 1),
            6: (120, 24, 6, 2, 1, 0)}


def is_dwarf(encoding: int, arch: str) -> bool:
    return encoding & MODE_MASK == (ARM64_DWARF if arch == "arm64" else X86_DWARF)


def permutation(regs: list[int]) -> int:
    """The Lehmer code of compact register numbers (1..6), lowest address first."""
    if not regs:
        return 0
    digits = []
    for i, reg in enumerate(regs):
        digits.append(reg - 1 - sum(1 for r in regs[:i] if r < reg))
    return sum(d * r for d, r in zip(digits, _RADICES[len(regs)], strict=False))


def unpermute(count: int, perm: int) -> list[int] | None:
    """Compact register numbers for ``count`` registers, lowest address first."""
    if count == 0:
        return []
    digits = []
    for radix in _RADICES[count]:
        if radix:
            digits.append(perm // radix)
            perm -= digits[-1] * radix
        else:
            digits.append(0)
    unused = [1, 2, 3, 4, 5, 6]
    out = []
    for digit in digits:
        if digit >= len(unused):
            return None
        out.append(unused.pop(digit))
    return out
