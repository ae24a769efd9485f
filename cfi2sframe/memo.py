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

from .typed import TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Memo(dict[K, V]):
    """A dict of at most ``entries`` answers: read as a dict (``get``, ``in``: a hit
    costs a dict's look-up), written only through ``keep``, which empties it first
    when it is full."""

    __slots__ = ("entries",)

    def __init__(self, entries: int) -> None:
        if entries < 1:
            raise ValueError(f"a memo of {entries} entries keeps nothing")
        super().__init__()
        self.entries = entries

    def keep(self, key: K, value: V) -> V:
        """``value``, kept for ``key``."""
        if len(self) >= self.entries:
            self.clear()
        self[key] = value
        return value
