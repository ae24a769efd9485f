"""The shape of an architecture description: registers, ABI constants, CIE rules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# The byte order names int.from_bytes / int.to_bytes take.
ByteOrder = Literal["little", "big"]


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
    # The smallest page the target's kernels use: every PT_LOAD is aligned to it.
    min_page_size: int = 4096
    # DWARF number of the program counter, as DWARF expressions read it (linkers'
    # PLT CFI does); None where the ABI gives it none.
    pc: int | None = None
    # The caller's SP as the value CFA + this (DWARF: no SP rule means this).
    sp_val_offset: int = 0
    # SFrame stores CFA offsets as (offset - cfa_adjustment) / cfa_alignment (s390x).
    cfa_adjustment: int = 0
    cfa_alignment: int = 1
    # V3 FLEX FDEs are written for this target (GNU as 2.46: AMD64 and s390x).
    flex: bool = False
    # Apple compact unwind: the flavour ("x86_64", "i386", "arm64"; None: not defined),
    # x86: DWARF numbers of compact registers 1..6 and the bytes before the imm32 of
    # ``sub $imm32, %sp``; arm64: the saved pairs (mode bit, first, second DWARF number).
    compact: str | None = None
    compact_regs: tuple[int, ...] = ()
    compact_sub_opcode: bytes = b""
    compact_pairs: tuple[tuple[int, int, int], ...] = ()

    @property
    def byteorder(self) -> ByteOrder:
        """``big`` or ``little``, for ``int.from_bytes``."""
        return "big" if self.big_endian else "little"

    @property
    def line_comment(self) -> str:
        """What starts a comment in assembly we write."""
        return self.comment_chars[:1] or "//"

    @property
    def s390x(self) -> bool:
        """The s390x SFrame rules: encoded CFA offsets, RA padding word, V2
        register numbers in FP/RA words (``(reg << 1) | 1``)."""
        return self.cfa_alignment != 1

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
