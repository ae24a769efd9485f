"""s390x (64-bit z/Architecture ELF ABI): DWARF register numbers, GNU as CIE defaults.

The CFA is the caller's SP + 160 (the register save area), so the CIE says
``def_cfa r15, 160`` and the caller's SP is CFA - 160 (``sp_val_offset``).
SFrame stores CFA offsets as (offset - 160) / 8 on this ABI.
"""

from __future__ import annotations

from .base import Arch

# DWARF numbers 16-31 name the FPRs in this order (s390x ELF ABI supplement).
_FPR_ORDER = (0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15)


def _registers() -> dict[str, int]:
    regs = {f"r{n}": n for n in range(16)}
    for dwarf, fpr in enumerate(_FPR_ORDER, start=16):
        regs[f"f{fpr}"] = dwarf
    regs.update({f"c{n}": 32 + n for n in range(16)})
    regs.update({f"a{n}": 48 + n for n in range(16)})
    regs.update({"pswm": 64, "pswa": 65})
    return regs


S390X = Arch(
    name="s390x",
    address_size=8,
    big_endian=True,
    sp=15,
    fp=11,
    ra=14,
    code_alignment=2,
    data_alignment=-8,
    cie_ops=(("def_cfa", 15, 160),),
    registers=_registers(),
    comment_chars="#",
    sframe_abi=4,
    sframe_fixed_fp_offset=0,
    sframe_fixed_ra_offset=0,
    elf_machine="EM_S390",
    elf_machine_number=22,
    # R_390_PC32, PC64, 64, 32
    elf_relocations={5: (4, True), 23: (8, True), 22: (8, False), 4: (4, False)},
    pcrel_relocations=(5, 23),
    elf_relative_relocation=12,
    sframe_abi_name="s390x big-endian",
    sframe_section_align=8,
    sframe_ra_padding=True,
    sframe_register_words=True,
    sframe_abi_errata1=True,
    sp_copy_is_cfa=True,
    default_assembler="s390x-linux-gnu-as",
    sp_val_offset=-160,
    cfa_adjustment=160,
    cfa_alignment=8,
    flex=True,
)
