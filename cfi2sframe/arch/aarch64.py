"""AArch64 (AAPCS64): DWARF register numbers from the AArch64 DWARF ABI, GNU as CIE defaults."""

from __future__ import annotations

from dataclasses import replace

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
    sframe_fixed_fp_offset=0,
    sframe_fixed_ra_offset=0,
    elf_machine="EM_AARCH64",
    default_assembler="aarch64-linux-gnu-as",
)

# Big-endian AArch64 (aarch64_be): the same registers and rules, SFrame ABI 1.
AARCH64_BE = replace(AARCH64, name="aarch64_be", big_endian=True, sframe_abi=1,
                     default_assembler="aarch64-linux-gnu-as -EB")
