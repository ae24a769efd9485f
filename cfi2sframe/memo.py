"""``Memo``: answers kept by key up to a bound, all dropped at once when full.

A tree run's worker keeps a few meanings from file to file (a PLT expression's
values, what verify's DWARF states and FREs mean): a few dozen distinct keys, so the
bound is only a guard against hostile input.  Emptying when full costs a hit
nothing, where an LRU's order is kept on every hit; and unlike
``functools.lru_cache`` the caller makes the key (a few header fields of an object,
a residue but not the PC it was first worked out at) and the answer.  The memo is
the caller's object: this module holds no state.
"""

from __future__ import annotations

from .typed import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable

K = TypeVar("K")
V = TypeVar("V")


class Memo(Generic[K, V]):
    """At most ``entries`` answers by key; ``answer`` makes a missing one, emptying
    the memo first when it is full."""

    __slots__ = ("entries", "_kept")

    def __init__(self, entries: int) -> None:
        if entries < 1:
            raise ValueError(f"a memo of {entries} entries keeps nothing")
        self.entries = entries
        self._kept: dict[K, V] = {}

    def answer(self, key: K, make: Callable[[], V]) -> V:
        """The answer kept for ``key``, else ``make()``'s, kept."""
        kept = self._kept
        try:
            return kept[key]
        except KeyError:
            pass
        value = make()
        if len(kept) >= self.entries:
            kept.clear()
        kept[key] = value
        return value

    def __len__(self) -> int:
        return len(self._kept)

    def __contains__(self, key: object) -> bool:
        return key in self._kept
