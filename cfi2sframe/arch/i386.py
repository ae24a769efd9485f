"""i386 (32-bit x86): DWARF register numbers from the i386 psABI, GNU as CIE defaults.

SFrame defines no i386 ABI, so this target serves compact unwind only; the
SFrame pipeline refuses it with a clear error.
"""

from __future__ import annotations

from .base import Arch

_GPR32 = ["eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi"]

I386 = Arch(
    name="i386",
    address_size=4,
    big_endian=False,
    sp=4,
    fp=5,
    ra=8,
    code_alignment=1,
    data_alignment=-4,
    cie_ops=(("def_cfa", 4, 4), ("offset", 8, -4)),
    registers={**{name: num for num, name in enumerate(_GPR32)}, "eip": 8},
    comment_chars="#",
    sframe_abi=0,
    sframe_fixed_fp_offset=0,
    sframe_fixed_ra_offset=0,
    pc=8,
    elf_machine="EM_386",
    elf_machine_number=3,
    elf_relative_relocation=8,  # R_386_RELATIVE (REL: the addend is in place)
    default_assembler="as --32",
    compact="i386",
    darwin_assembler="llvm-mc -triple i386-apple-macosx10.15 -filetype=obj",
    compact_regs=(3, 1, 2, 7, 6, 5),  # ebx ecx edx edi esi ebp
    compact_sub_opcode=b"\x81\xec",  # sub $imm32, %esp
    push_registers=(0, 1, 2, 3, 4, 5, 6, 7),  # eax ecx edx ebx esp ebp esi edi
    frame_moves=(b"\x89\xe5", b"\x8b\xec"),  # mov %esp, %ebp
    sub_imm8_opcode=b"\x83\xec",  # sub $imm8, %esp
)
