"""The shape of an architecture description: registers, ABI constants, CIE rules.

``Arch`` holds registers, SP/FP/RA, CIE ops, the ELF machine number and relocation types
(and the dynamic ``R_*_RELATIVE`` type), the SFrame ABI id, name and fixed offsets, the
caller SP (``sp_val_offset``), the SFrame layout facts (``sframe_cfa_encoded``,
``sframe_ra_padding``, ``sframe_register_words``, ``sframe_section_align``,
``sp_copy_is_cfa``, V1 PC-mask repetition), FLEX use, the compact flavour, registers and
pairs; ``ByteOrder``."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from types import MappingProxyType

from ..typed import TYPE_CHECKING, NamedTuple

# The byte order names int.from_bytes / int.to_bytes take.
if TYPE_CHECKING:
    from typing import Literal
    ByteOrder = Literal["little", "big"]


class Arch(NamedTuple):
    """Everything target-specific the pipeline needs, as plain data.

    Register numbers are DWARF numbers.  ``cie_ops`` are the initial
    instructions GNU as puts in the CIE for ``.cfi_startproc`` (not ``simple``),
    written as (operation, operand, operand) triples of the CFI interpreter.

    A named tuple (a class costs a tenth of a frozen dataclass to create, and every
    command creates these at start-up), equal only to itself as the frozen dataclass
    it was: targets are compared and hashed by identity, which keeps the caches keyed
    by target (``sframe.fastpath``, ``sframe.encode``) from hashing all its fields.
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
    # An assembler that writes Mach-O for assembly written for Apple targets (clang's
    # and LLVM's macOS output); None where compact unwind has no such target here.
    darwin_assembler: str | None = None
    # The smallest page the target's kernels use: every PT_LOAD is aligned to it.
    min_page_size: int = 4096
    # The largest page the target's kernels use (GNU ld's maximum page size for it): a
    # segment added to a linked file is aligned to it, and to no more than it, however
    # large the file's own PT_LOAD alignment (old x86-64 libraries have 2 MiB).
    max_page_size: int = 4096
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
    # x86 prologues as ``verify`` reads them from code (compact/prologue.py): the DWARF
    # numbers of the registers ``push`` opcodes 0x50-0x57 name (x86-64: with REX.B,
    # r8-r15, DWARF 8-15),
    # the encodings of ``mov %sp, %fp``, and the bytes before ``sub $imm8, %sp``'s
    # immediate.
    push_registers: tuple[int, ...] = ()
    frame_moves: tuple[bytes, ...] = ()
    sub_imm8_opcode: bytes = b""
    # arm64 prologues: (name, mask, value) of the instruction words read (stp of a
    # pair, pre-indexed or at an offset, of x or d registers; sub/add immediate).
    prologue_words: tuple[tuple[str, int, int], ...] = ()
    # arm64: (mask, value) of the words that move the stack pointer (add/sub
    # immediate or extended register, and/orr/eor immediate into sp; a pair or
    # register load/store with writeback of sp) or call (bl, blr): a function with
    # none of them keeps its CFA at sp and its return address in the link register.
    frame_changes: tuple[tuple[int, int], ...] = ()

    @property
    def byteorder(self) -> ByteOrder:
        """``big`` or ``little``, for ``int.from_bytes``."""
        return "big" if self.big_endian else "little"

    @property
    def line_comment(self) -> str:
        """What starts a comment in assembly we write."""
        return self.comment_chars[:1] or "//"

    # ELF: the e_machine number (``elf_machine`` is its name); the relocation types the
    # CFI readers apply, type -> (bytes, PC-relative); the 32- and 64-bit PC-relative
    # types the object writer relocates FDE start fields with ((0, 0): none).
    elf_machine_number: int = 0
    elf_relocations: Mapping[int, tuple[int, bool]] = MappingProxyType({})
    pcrel_relocations: tuple[int, int] = (0, 0)
    # The dynamic relocation that adds the load base to an addend (R_*_RELATIVE): what
    # places a PIE's absolute addresses (XRay's instrumentation map); 0: none known.
    elf_relative_relocation: int = 0
    # SFrame, beyond the header's ids: the ABI's name (readelf's words); the section's
    # alignment (its end is zero-padded to it); an RA padding word when the FP is saved
    # and the RA is not; V2 FP/RA words that may name a register (``reg << 1 | 1``).
    sframe_abi_name: str = ""
    # What a V1 PC-mask FDE's repetition size is (V1 has no field for it; GNU ld 2.40
    # writes such FDEs for the 16-byte x86-64 lazy PLT entries only); 0: none.
    sframe_v1_pcmask_rep: int = 0
    # The ABI id came with SFrame V2 errata 1 (s390x): V1, and V2 as GNU ld 2.41-2.44
    # read it (without the PC-relative flag), have none for it.
    sframe_abi_errata1: bool = False
    sframe_section_align: int = 1
    sframe_ra_padding: bool = False
    sframe_register_words: bool = False
    # A saved copy of the caller's SP (on the stack or in a register) is the CFA less
    # ``cfa_adjustment`` by the ABI's definition of the CFA, so it needs no SP rule.
    sp_copy_is_cfa: bool = False
    # The size of the branch-target landing pad an outermost function may open with
    # before its CFI makes the return address undefined (glibc's ``_start``: AArch64
    # ``bti c``, or the ``nop`` in its place where BTI is off; x86-64 ``endbr64``);
    # 0: none.  ``sframe.lower`` still calls such a function an outermost frame.
    landing_pad: int = 0

    @property
    def sframe_cfa_encoded(self) -> bool:
        """SFrame stores CFA offsets as (offset - cfa_adjustment) / cfa_alignment."""
        return self.cfa_alignment != 1

    @property
    def tracks_ra(self) -> bool:
        """SFrame stores the RA per row (no fixed RA offset in the header)."""
        return self.sframe_fixed_ra_offset == 0

    @property
    def register_names(self) -> dict[int, str]:
        """DWARF number -> the register's preferred (first) name, made once per target
        (a Mach-O listing asks for it per row)."""
        return _register_names(self)

    def reg_name(self, number: int) -> str:
        """Preferred name of a DWARF register, or ``rN`` when it has none."""
        for name, num in self.registers.items():
            if num == number:
                return name
        return f"r{number}"

    def __repr__(self) -> str:
        """One short line: the target's name says which of the few module constants
        this is (its 40 fields made every message and traceback holding it a page)."""
        return f"<Arch {self.name}>"

    def __eq__(self, other: object) -> bool:
        return self is other

    def __ne__(self, other: object) -> bool:
        return self is not other

    def __hash__(self) -> int:
        return id(self)


@cache  # a few targets, module constants, hashed by identity
def _register_names(arch: Arch) -> dict[int, str]:
    return {num: name for name, num in reversed(list(arch.registers.items()))}
