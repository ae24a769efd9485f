"""Architecture facts as data: one module per target, looked up by name."""

from __future__ import annotations

from .aarch64 import AARCH64
from .base import Arch
from .x86_64 import X86_64

ARCHES: dict[str, Arch] = {X86_64.name: X86_64, AARCH64.name: AARCH64}
ALIASES = {"x86-64": "x86_64", "amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}


def get_arch(name: str) -> Arch:
    """Return the architecture called ``name`` (or one of its aliases)."""
    key = ALIASES.get(name.lower(), name.lower())
    try:
        return ARCHES[key]
    except KeyError:
        known = ", ".join(sorted(ARCHES))
        raise ValueError(f"unknown architecture '{name}' (known: {known})") from None
