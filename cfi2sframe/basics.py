"""What readers of bytes take from the model without its records: ``Name`` (the base of
the package's str-valued enums) and ``in_force`` (the "row at PC" look-up).

``kinds`` (an input's kind), the SFrame decoder and the XRay reader need these two and
nothing else of ``model``, whose enum and records cost a small ``dump`` some 5M
instructions at start-up; ``model`` exports both as its own.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from enum import Enum
from operator import attrgetter

from .typed import TypeVar

T = TypeVar("T")


_START: Callable[[object], int] = attrgetter("start")


def in_force(entries: Sequence[T], offset: int) -> T | None:
    """The entry in force at ``offset``: the last of ``entries`` (sorted by their
    ``start``) that starts at or before it; None before the first.  The one "row at PC"
    look-up of DWARF rows and SFrame FREs alike (a binary search)."""
    index = bisect_right(entries, offset, key=_START)
    return entries[index - 1] if index else None


class Name(str, Enum):
    """An enum whose members compare, hash and print as their names (``"offset"``):
    a closed vocabulary for the type checker that stays readable in messages."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)
