"""The target registry answers every question for every target, and the ELF and SFrame
tables that used to be written beside the code are read from it.

Expected values are the ABI documents' own numbers: e_machine from the ELF gABI,
relocation types from each psABI (x86-64 psABI 4.4, AArch64 ELF ABI 5.7, s390x ELF ABI
supplement), SFrame ABI ids and names from the SFrame spec and readelf.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import cfi2sframe.arch as registry
from cfi2sframe.arch import ARCHES, by_elf_machine, by_sframe_abi, get_arch, is_sframe_abi
from cfi2sframe.elf import obj, read, reloc

# name: (e_machine, {relocation type: (bytes, PC-relative)}, (PC32, PC64) for FDE starts)
ELF = {
    "x86_64": (62, {2: (4, True), 24: (8, True), 1: (8, False), 10: (4, False),
                    11: (4, False)}, (2, 24)),  # R_X86_64_PC32 PC64 64 32 32S
    "aarch64": (183, {261: (4, True), 260: (8, True), 257: (8, False), 258: (4, False)},
                (261, 260)),  # R_AARCH64_PREL32 PREL64 ABS64 ABS32
    "s390x": (22, {5: (4, True), 23: (8, True), 22: (8, False), 4: (4, False)}, (5, 23)),
    "i386": (3, {}, (0, 0)),  # compact unwind only: no ELF objects are written or read
}
ELF["aarch64_be"] = ELF["aarch64"]
# R_X86_64_RELATIVE 8, R_AARCH64_RELATIVE 1027, R_390_RELATIVE 12, R_386_RELATIVE 8
# (the psABIs' relocation tables)
RELATIVE = {"x86_64": 8, "aarch64": 1027, "aarch64_be": 1027, "s390x": 12, "i386": 8}

# SFrame spec: SFRAME_ABI_AARCH64_ENDIAN_BIG 1, _LITTLE 2, AMD64_ENDIAN_LITTLE 3,
# S390X_ENDIAN_BIG 4; the names are readelf's.
SFRAME = {"aarch64_be": (1, "AARCH64 big-endian"), "aarch64": (2, "AARCH64 little-endian"),
          "x86_64": (3, "AMD64 little-endian"), "s390x": (4, "s390x big-endian"),
          "i386": (0, "")}


def test_every_target_answers_every_table() -> None:
    assert set(ARCHES) == set(ELF) == set(SFRAME)
    for name, arch in ARCHES.items():
        machine, relocations, pcrel = ELF[name]
        assert arch.elf_machine_number == machine, name
        assert arch.elf_relocations == relocations, name
        assert arch.pcrel_relocations == pcrel, name
        assert arch.elf_relative_relocation == RELATIVE[name], name
        assert read.MACHINES[machine] == arch.elf_machine, name
        assert by_elf_machine(arch.elf_machine, arch.big_endian) is arch
        abi, abi_name = SFRAME[name]
        assert (arch.sframe_abi, arch.sframe_abi_name) == (abi, abi_name), name
        assert is_sframe_abi(abi) == bool(abi)
        if abi:
            assert by_sframe_abi(abi) is arch
        assert reloc.kinds_of(arch.elf_machine) == relocations, name
        assert obj.pcrel_types(machine) == (pcrel if pcrel != (0, 0) else None), name
    assert not is_sframe_abi(5) and not is_sframe_abi(0)


def test_each_target_is_found_by_its_own_facts_and_loaded_alone() -> None:
    """The registry finds a target by keys it holds before the target's module is
    loaded (``arch._TARGETS``); a lookup loads that module and no other target's."""
    for name, (_, _, machine, number, big, abi, flavour) in registry._TARGETS.items():
        arch = ARCHES[name]
        assert (arch.name, arch.elf_machine, arch.elf_machine_number, arch.big_endian,
                arch.sframe_abi, arch.compact) == (name, machine, number, big, abi, flavour)
    root = str(Path(registry.__file__).parents[2])
    probe = ("import sys\nfrom cfi2sframe.arch import by_elf_machine\n"
             "by_elf_machine('EM_S390', True)\n"
             "print(*sorted(m for m in sys.modules if m.startswith('cfi2sframe.arch.')))")
    done = subprocess.run([sys.executable, "-S", "-c", probe], cwd=root, check=True,
                          capture_output=True, text=True)
    assert done.stdout.split() == ["cfi2sframe.arch.base", "cfi2sframe.arch.s390x"]


def test_sframe_layout_facts_say_what_they_mean() -> None:
    """s390x (SFrame spec, s390x sections): CFA offsets stored as (offset - 160) / 8, an
    RA padding word when only the FP is saved, V2 register words ``reg << 1 | 1``, the
    section padded to 8 bytes, a saved copy of r15 standing for CFA - 160.  No other
    target has any of these; x86-64's V1 PC-mask FDEs repeat every 16 bytes (the lazy
    PLT entry), no other target's do."""
    for name, arch in ARCHES.items():
        s390x = name == "s390x"
        assert arch.sframe_cfa_encoded == s390x, name
        assert (arch.cfa_adjustment, arch.cfa_alignment) == ((160, 8) if s390x else (0, 1))
        assert arch.sframe_ra_padding == s390x, name
        assert arch.sframe_register_words == s390x, name
        assert arch.sframe_section_align == (8 if s390x else 1), name
        assert arch.sp_copy_is_cfa == s390x, name
        assert arch.sframe_v1_pcmask_rep == (16 if name == "x86_64" else 0), name
        # V2 errata 1 added ABI 4, s390x (sframe-spec-v2-errata1.texi); V1 has ids 1-3.
        assert arch.sframe_abi_errata1 == s390x, name
    assert get_arch("amd64") is ARCHES["x86_64"]


def test_landing_pads_are_one_instruction() -> None:
    """What may open an outermost function before its RA is undefined: AArch64's
    ``bti c`` or ``nop`` (every A64 instruction is 4 bytes; Arm ARM C6.2, HINT) and
    x86-64's ``endbr64`` (F3 0F 1E FA: Intel SDM, ENDBR64); s390x and i386 have none."""
    pads = {"x86_64": 4, "aarch64": 4, "aarch64_be": 4}
    for name, arch in ARCHES.items():
        assert arch.landing_pad == pads.get(name, 0), name
