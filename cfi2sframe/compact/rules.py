"""What a compact unwind encoding restores, in CFA terms, and the code it may read.

- CFA = ``cfa_reg`` + ``cfa_offset`` (for x86 STACK_IND the offset needs the
  ``sub $imm32, %rsp`` immediate, read from the code);
- RA saved at CFA + ``ra_offset`` (None: still in the link register, arm64);
- ``saved``: (DWARF register, CFA offset) of every callee-saved register.
"""

from __future__ import annotations

from ..typed import NamedTuple


class CompactRules(NamedTuple):
    """What an encoding restores, in CFA terms (see the module docstring)."""

    cfa_reg: int
    cfa_offset: int
    ra_offset: int | None
    saved: tuple[tuple[int, int], ...]  # sorted (DWARF register, CFA offset)


class Code(NamedTuple):
    """The bytes of a function, for STACK_IND's ``sub $imm32, %rsp`` immediate."""

    data: bytes

    def imm32_at(self, offset: int) -> int | None:
        if offset < 0 or offset + 4 > len(self.data):
            return None
        return int.from_bytes(self.data[offset:offset + 4], "little")
