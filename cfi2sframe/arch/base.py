"""The shape of an architecture description: registers, ABI constants, CIE rules."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, eq=False)
class Arch:
    """Everything target-specific the pipeline needs, as plain data.

    Register numbers are DWARF numbers.  ``cie_ops`` are the initial
    instructions GNU as puts in the CIE for ``.cfi_startproc`` (not ``simple``),
    written as (operation, operand, operand) triples of the CFI interpreter.
    """

    name: str
    address_size: int
    big_endian: bool
    sp: int
    fp: int
    ra: int
    code_alignment: int
    data_alignment: int
    cie_ops: tuple[tuple[str, int, int], ...]
    registers: dict[str, int]
    comment_chars: str
    sframe_abi: int
    sframe_fixed_fp_offset: int
    sframe_fixed_ra_offset: int
    elf_machine: str
    default_assembler: str = "as"

    @property
    def line_comment(self) -> str:
        """What starts a comment in assembly we write."""
        return self.comment_chars[:1] or "//"

    @property
    def tracks_ra(self) -> bool:
        """SFrame stores the RA per row (no fixed RA offset in the header)."""
        return self.sframe_fixed_ra_offset == 0

    def reg_name(self, number: int) -> str:
        """Preferred name of a DWARF register, or ``rN`` when it has none."""
        for name, num in self.registers.items():
            if num == number:
                return name
        return f"r{number}"
