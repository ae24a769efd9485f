"""The target registry: every architecture fact lives in one module per target here,
and is looked up by name, by ELF machine and byte order, by SFrame ABI id, or by
compact unwind flavour.  A new target is one new module and one line below."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping

from ..errors import Cfi2SframeError

TYPE_CHECKING = False  # (typing itself is not imported for it)
if TYPE_CHECKING:
    from .base import Arch

# Each target: its module and constant there, and the keys it is found by, so that a
# command loads only the target it works on (a module each: start-up time).
# tests/unit/test_registry.py holds these keys equal to the modules' own facts.
# name: (module, constant, ELF machine, its number, big-endian, SFrame ABI id (0: none),
# compact unwind flavour)
_TARGETS: dict[str, tuple[str, str, str, int, bool, int, str | None]] = {
    "x86_64": ("x86_64", "X86_64", "EM_X86_64", 62, False, 3, "x86_64"),
    "aarch64": ("aarch64", "AARCH64", "EM_AARCH64", 183, False, 2, "arm64"),
    "aarch64_be": ("aarch64", "AARCH64_BE", "EM_AARCH64", 183, True, 1, None),
    "s390x": ("s390x", "S390X", "EM_S390", 22, True, 4, None),
    "i386": ("i386", "I386", "EM_386", 3, False, 0, "i386"),
}
ELF_MACHINES = {number: machine for _, _, machine, number, *_ in _TARGETS.values()}
_BY_SFRAME_ABI = {abi: name for name, (*_, abi, _) in _TARGETS.items() if abi}
_BY_COMPACT = {flavour: name for name, (*_, flavour) in _TARGETS.items() if flavour}


_LOADED: dict[str, Arch] = {}  # name -> target: a look-up in a loop is a dict's


def _load(name: str) -> Arch:
    """The target called ``name`` (a key of ``_TARGETS``), its module imported on the
    first look-up (``import_module`` on every one was a tenth of ``compact``'s time)."""
    target = _LOADED.get(name)
    if target is None:
        module, constant = _TARGETS[name][:2]
        target = _LOADED[name] = getattr(importlib.import_module(f"{__name__}.{module}"),
                                         constant)
    return target


class _Registry(Mapping[str, "Arch"]):
    """Every target by name, each loaded when it is first looked up."""

    def __getitem__(self, name: str) -> Arch:
        return _load(name)

    def __iter__(self) -> Iterator[str]:
        return iter(_TARGETS)

    def __len__(self) -> int:
        return len(_TARGETS)


ARCHES: Mapping[str, Arch] = _Registry()
ALIASES = {"x86-64": "x86_64", "amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64",
           "aarch64be": "aarch64_be", "arm64_be": "aarch64_be", "s390": "s390x",
           "systemz": "s390x", "x86": "i386", "i686": "i386"}


def get_arch(name: str) -> Arch:
    """Return the architecture called ``name`` (or one of its aliases)."""
    key = ALIASES.get(name.lower(), name.lower())
    if key not in _TARGETS:
        known = ", ".join(sorted(_TARGETS))
        raise ValueError(f"unknown architecture '{name}' (known: {known})")
    return _load(key)


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
    found = [(name, big) for name, (_, _, em, _, big, *_) in _TARGETS.items() if em == machine]
    if not found:
        return None
    return _load(next((name for name, big in found if big == big_endian), found[0][0]))


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
    return _load(_BY_SFRAME_ABI[abi])


def by_compact(flavour: str) -> Arch:
    """The target of a compact unwind flavour (``x86_64``, ``i386``, ``arm64``)."""
    return _load(_BY_COMPACT[flavour])
