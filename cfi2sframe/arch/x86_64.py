"""x86-64 (AMD64): DWARF register numbers from the psABI, GNU as CIE defaults."""

from __future__ import annotations

from .base import Arch

_GPR64 = ["rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp"]


def _registers() -> dict[str, int]:
    regs = {name: num for num, name in enumerate(_GPR64)}
    regs.update({f"r{n}": n for n in range(8, 16)})
    regs["rip"] = 16
    regs.update({f"xmm{n}": 17 + n for n in range(16)})
    regs.update({f"st{n}": 33 + n for n in range(8)})
    regs.update({f"st({n})": 33 + n for n in range(8)})
    regs.update({f"mm{n}": 41 + n for n in range(8)})
    regs["rflags"] = 49
    regs.update({"es": 50, "cs": 51, "ss": 52, "ds": 53, "fs": 54, "gs": 55})
    regs.update({"fs.base": 58, "gs.base": 59, "tr": 62, "ldtr": 63, "mxcsr": 64})
    regs.update({"fcw": 65, "fsw": 66})
    regs.update({f"xmm{n}": 67 + n - 16 for n in range(16, 32)})
    regs.update({f"k{n}": 118 + n for n in range(8)})
    # 32-bit names map to the same DWARF columns, as GNU as accepts them.
    regs.update({"eax": 0, "edx": 1, "ecx": 2, "ebx": 3, "esi": 4, "edi": 5})
    regs.update({"ebp": 6, "esp": 7, "eip": 16})
    return regs


X86_64 = Arch(
    name="x86_64",
    address_size=8,
    big_endian=False,
    sp=7,
    fp=6,
    ra=16,
    code_alignment=1,
    data_alignment=-8,
    cie_ops=(("def_cfa", 7, 8), ("offset", 16, -8)),
    registers=_registers(),
    comment_chars="#",
    sframe_abi=3,
    sframe_fixed_fp_offset=0,
    sframe_fixed_ra_offset=-8,
    pc=16,
    elf_machine="EM_X86_64",
    elf_machine_number=62,
    # R_X86_64_PC32, PC64, 64, 32, 32S
    elf_relocations={2: (4, True), 24: (8, True), 1: (8, False), 10: (4, False),
                     11: (4, False)},
    pcrel_relocations=(2, 24),
    elf_relative_relocation=8,
    sframe_abi_name="AMD64 little-endian",
    sframe_v1_pcmask_rep=16,
    flex=True,
    landing_pad=4,  # endbr64: F3 0F 1E FA
    compact="x86_64",
    darwin_assembler="llvm-mc -triple x86_64-apple-macosx10.15 -filetype=obj",
    compact_regs=(3, 12, 13, 14, 15, 6),  # rbx r12 r13 r14 r15 rbp
    compact_sub_opcode=b"\x48\x81\xec",  # sub $imm32, %rsp
    push_registers=(0, 2, 1, 3, 7, 6, 4, 5),  # rax rcx rdx rbx rsp rbp rsi rdi
    frame_moves=(b"\x48\x89\xe5", b"\x48\x8b\xec"),  # mov %rsp, %rbp
    sub_imm8_opcode=b"\x48\x83\xec",  # sub $imm8, %rsp
)
