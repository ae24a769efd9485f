"""AArch64 (AAPCS64): DWARF register numbers from the AArch64 DWARF ABI, GNU as CIE defaults."""

from __future__ import annotations

from .base import Arch


def _registers() -> dict[str, int]:
    regs = {f"x{n}": n for n in range(31)}
    regs.update({f"w{n}": n for n in range(31)})
    regs.update({"fp": 29, "lr": 30, "sp": 31, "wsp": 31})
    for prefix in ("v", "d", "s", "q", "h", "b"):
        regs.update({f"{prefix}{n}": 64 + n for n in range(32)})
    regs["ra_sign_state"] = 34
    return regs


AARCH64 = Arch(
    name="aarch64",
    address_size=8,
    big_endian=False,
    sp=31,
    fp=29,
    ra=30,
    code_alignment=4,
    data_alignment=-8,
    cie_ops=(("def_cfa", 31, 0),),
    registers=_registers(),
    comment_chars="",
    sframe_abi=2,
    max_page_size=0x10000,  # 4, 16 and 64 KiB kernels
    sframe_fixed_fp_offset=0,
    sframe_fixed_ra_offset=0,
    pc=32,
    elf_machine="EM_AARCH64",
    elf_machine_number=183,
    # R_AARCH64_PREL32, PREL64, ABS64, ABS32
    elf_relocations={261: (4, True), 260: (8, True), 257: (8, False), 258: (4, False)},
    pcrel_relocations=(261, 260),
    elf_relative_relocation=1027,
    landing_pad=4,  # one A64 instruction: bti c (hint #34) or nop (hint #0)
    sframe_abi_name="AARCH64 little-endian",
    default_assembler="aarch64-linux-gnu-as",
    compact="arm64",
    darwin_assembler="llvm-mc -triple arm64-apple-macosx11 -filetype=obj",
    # x19/x20 ... x27/x28 (bits 0-4), then d8/d9 ... d14/d15 (bits 8-11).
    compact_pairs=((0x1, 19, 20), (0x2, 21, 22), (0x4, 23, 24), (0x8, 25, 26), (0x10, 27, 28),
                   (0x100, 72, 73), (0x200, 74, 75), (0x400, 76, 77), (0x800, 78, 79)),
    # A64 encodings (Arm ARM C6): STP Xt1, Xt2, [Xn, #imm]! and [Xn, #imm]; STP Dt1,
    # Dt2 likewise; SUB and ADD (immediate, 64-bit).
    prologue_words=(("stp_x_pre", 0xFFC00000, 0xA9800000), ("stp_x", 0xFFC00000, 0xA9000000),
                    ("stp_d_pre", 0xFFC00000, 0x6D800000), ("stp_d", 0xFFC00000, 0x6D000000),
                    ("sub_imm", 0xFF800000, 0xD1000000), ("add_imm", 0xFF800000, 0x91000000)),
    frame_changes=((0xBF80001F, 0x9100001F),  # add/sub (immediate), 64-bit, to sp
                   (0xBFE0001F, 0x8B20001F),  # add/sub (extended register) to sp
                   (0x9F80001F, 0x9200001F),  # and/orr/eor (immediate) to sp
                   (0x3A8003E0, 0x288003E0),  # ldp/stp, pre- or post-indexed sp
                   (0x3B2007E0, 0x380007E0),  # ldr/str (immediate), pre/post sp
                   (0xFC000000, 0x94000000),  # bl
                   (0xFFFFFC1F, 0xD63F0000)),  # blr
)

# Big-endian AArch64 (aarch64_be): the same registers and rules, SFrame ABI 1.
# Compact unwind is defined for little-endian arm64 only.
AARCH64_BE = AARCH64._replace(name="aarch64_be", big_endian=True, sframe_abi=1,
                     sframe_abi_name="AARCH64 big-endian",
                     default_assembler="aarch64-linux-gnu-as -EB", compact=None,
                     darwin_assembler=None)
