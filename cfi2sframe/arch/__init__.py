"""The target registry: every architecture fact lives in one module per target here,
and is looked up by name, by ELF machine and byte order, by SFrame ABI id, or by
compact unwind flavour.  A new target is one new module and one line below."""

from __future__ import annotations

from ..errors import Cfi2SframeError
from .aarch64 import AARCH64, AARCH64_BE
from .base import Arch
from .i386 import I386
from .s390x import S390X
from .x86_64 import X86_64

ARCHES: dict[str, Arch] = {arch.name: arch for arch in (X86_64, AARCH64, AARCH64_BE, S390X,
                                                         I386)}
ALIASES = {"x86-64": "x86_64", "amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64",
           "aarch64be": "aarch64_be", "arm64_be": "aarch64_be", "s390": "s390x",
           "systemz": "s390x", "x86": "i386", "i686": "i386"}
_BY_SFRAME_ABI = {arch.sframe_abi: arch for arch in ARCHES.values() if arch.sframe_abi}
_BY_COMPACT = {arch.compact: arch for arch in ARCHES.values() if arch.compact}


def get_arch(name: str) -> Arch:
    """Return the architecture called ``name`` (or one of its aliases)."""
    key = ALIASES.get(name.lower(), name.lower())
    try:
        return ARCHES[key]
    except KeyError:
        known = ", ".join(sorted(ARCHES))
        raise ValueError(f"unknown architecture '{name}' (known: {known})") from None


def as_arch(arch: str | Arch) -> Arch:
    """``arch`` itself, or the architecture it names: the library takes either."""
    return get_arch(arch) if isinstance(arch, str) else arch


def compact_flavour(arch: str | Arch) -> str:
    """The compact unwind flavour (``x86_64``, ``i386``, ``arm64``) of an architecture
    or its name; a flavour name is itself."""
    if isinstance(arch, str):
        if arch in _BY_COMPACT:
            return arch
        arch = get_arch(arch)
    if arch.compact is None:
        raise ValueError(f"compact unwind is defined for x86-64, i386 and arm64, not "
                         f"{arch.name}")
    return arch.compact


def by_elf_machine(machine: str, big_endian: bool) -> Arch | None:
    """The target of an ELF ``e_machine`` name (``EM_X86_64``) and byte order; None when
    unsupported.  The byte order picks between targets that share a machine."""
    found = [arch for arch in ARCHES.values() if arch.elf_machine == machine]
    return next((arch for arch in found if arch.big_endian == big_endian),
                found[0] if found else None)


def arch_for_machine(machine: str, path: str, big_endian: bool = False) -> Arch:
    """``by_elf_machine``, or a located error naming the supported machines."""
    arch = by_elf_machine(machine, big_endian)
    if arch is None:
        raise Cfi2SframeError(path, f"unsupported machine {machine} (supported: x86-64, "
                                    "AArch64, s390x; i386 for compact unwind)")
    return arch


def is_sframe_abi(abi: int) -> bool:
    """Whether ``abi`` is an SFrame ABI/arch id of a known target."""
    return abi in _BY_SFRAME_ABI


def by_sframe_abi(abi: int) -> Arch:
    """The target of an SFrame ABI/arch id (the decoder accepts only known ids)."""
    return _BY_SFRAME_ABI[abi]


def by_compact(flavour: str) -> Arch:
    """The target of a compact unwind flavour (``x86_64``, ``i386``, ``arm64``)."""
    return _BY_COMPACT[flavour]
