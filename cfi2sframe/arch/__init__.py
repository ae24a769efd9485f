"""Architecture facts as data: one module per target, looked up by name."""

from __future__ import annotations

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


def get_arch(name: str) -> Arch:
    """Return the architecture called ``name`` (or one of its aliases)."""
    key = ALIASES.get(name.lower(), name.lower())
    try:
        return ARCHES[key]
    except KeyError:
        known = ", ".join(sorted(ARCHES))
        raise ValueError(f"unknown architecture '{name}' (known: {known})") from None
