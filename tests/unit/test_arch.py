"""The target registry: every target is found by each key it declares, and its compact
unwind tables match Apple's ``compact_unwind_encoding.h``."""

from __future__ import annotations

import pytest

from cfi2sframe.arch import (
    ARCHES,
    arch_for_machine,
    by_compact,
    by_elf_machine,
    by_sframe_abi,
    get_arch,
)
from cfi2sframe.errors import Cfi2SframeError


@pytest.mark.parametrize("name", sorted(ARCHES))
def test_every_target_is_found_by_each_key_it_declares(name: str) -> None:
    arch = ARCHES[name]
    assert get_arch(name) is arch
    assert by_elf_machine(arch.elf_machine, arch.big_endian) is arch
    if arch.sframe_abi:
        assert by_sframe_abi(arch.sframe_abi) is arch
    if arch.compact:
        assert by_compact(arch.compact) is arch
    for reg in (arch.sp, arch.fp, arch.ra, *arch.compact_regs):
        assert reg in arch.registers.values()


def test_sframe_abi_ids_from_the_spec() -> None:
    """SFRAME_ABI_AARCH64_ENDIAN_BIG 1, _LITTLE 2, SFRAME_ABI_AMD64_ENDIAN_LITTLE 3,
    SFRAME_ABI_S390X_ENDIAN_BIG 4."""
    assert {abi: by_sframe_abi(abi).name for abi in (1, 2, 3, 4)} == {
        1: "aarch64_be", 2: "aarch64", 3: "x86_64", 4: "s390x"}


def test_compact_registers_from_apples_header() -> None:
    """UNWIND_X86_64_REG_RBX..RBP = 1..6 and UNWIND_X86_REG_EBX..EBP = 1..6, as DWARF
    numbers (x86-64 psABI: rbx 3, r12-r15 12-15, rbp 6; i386: ebx 3, ecx 1, edx 2,
    edi 7, esi 6, ebp 5); arm64 FRAME pair bits as the compact unwind notes list them
    (x19/x20 0x1 ... x27/x28 0x10, d8/d9 0x100 ... d14/d15 0x800; d8 is DWARF v8, 72)."""
    x64, x86 = by_compact("x86_64"), by_compact("i386")
    assert [x64.reg_name(r) for r in x64.compact_regs] == ["rbx", "r12", "r13", "r14", "r15",
                                                           "rbp"]
    assert [x86.reg_name(r) for r in x86.compact_regs] == ["ebx", "ecx", "edx", "edi", "esi",
                                                           "ebp"]
    arm = by_compact("arm64")
    assert [(bit, arm.reg_name(a), arm.reg_name(b)) for bit, a, b in arm.compact_pairs] == [
        (0x1, "x19", "x20"), (0x2, "x21", "x22"), (0x4, "x23", "x24"), (0x8, "x25", "x26"),
        (0x10, "x27", "x28"), (0x100, "v8", "v9"), (0x200, "v10", "v11"),
        (0x400, "v12", "v13"), (0x800, "v14", "v15")]


def test_elf_machines() -> None:
    assert by_elf_machine("EM_AARCH64", True) is get_arch("aarch64_be")
    assert by_elf_machine("EM_AARCH64", False) is get_arch("aarch64")
    assert by_elf_machine("EM_S390", True) is get_arch("s390x")
    assert by_elf_machine("EM_MIPS", False) is None
    with pytest.raises(Cfi2SframeError, match="unsupported machine EM_MIPS"):
        arch_for_machine("EM_MIPS", "x.o")


@pytest.mark.parametrize("name", sorted(ARCHES))
def test_repr_is_one_short_line(name: str) -> None:
    """A target's repr names it (it had printed its 40 fields, registers and all)."""
    assert repr(ARCHES[name]) == f"<Arch {name}>"
    assert repr([ARCHES[name]]) == f"[<Arch {name}>]"


def test_compact_calls_take_any_name_of_a_target() -> None:
    """The library's compact unwind calls take an Arch or any of its names, as every
    other call does: arm64's DWARF mode (0x03000000, compact_unwind_encoding.h) read
    with ``aarch64`` is DWARF mode, not x86's frameless encoding of the same word."""
    from cfi2sframe import decode_compact, describe_compact

    for arch in ("arm64", "aarch64", get_arch("aarch64")):
        assert describe_compact(0x03000000, arch) == describe_compact(0x03000000, "arm64")
        assert decode_compact(0x03000000, arch) == decode_compact(0x03000000, "arm64")
    assert str(decode_compact(0x03000000, "aarch64").reason) == "dwarf-mode"  # type: ignore[union-attr]
