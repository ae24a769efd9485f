"""Sequences a section image holds as columns, made into objects only when read: the
compiled table pass (``sframe/build.eh_table``) writes a linked file's FDEs and FREs
with no ``SFrameFunction`` or FDE tail made, and most commands never read them (the
elf output places the columns; a message, ``--json`` or a library caller may read).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from ..typed import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from typing import Any

T = TypeVar("T")


class Later(Sequence[T]):
    """``count`` items, made by ``make`` on the first read of one (its length is known
    without them).  Equal to any sequence of equal items, as a tuple is."""

    def __init__(self, count: int, make: Callable[[], Sequence[T]]) -> None:
        self._count = count
        self._make: Callable[[], Sequence[T]] | None = make
        self._items: tuple[T, ...] = ()

    def made(self) -> tuple[T, ...]:
        """The items, made now if not yet."""
        if self._make is not None:
            items = tuple(self._make())
            if len(items) != self._count:  # a bug of ours: the columns and objects differ
                raise AssertionError(f"{len(items)} items made for {self._count}")
            self._items, self._make = items, None
        return self._items

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index: int | slice) -> Any:  # an item, or a tuple of a slice
        return self.made()[index]

    def __iter__(self) -> Iterator[T]:
        return iter(self.made())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(self.made())

    def __repr__(self) -> str:
        return repr(self.made())


class Packed(Sequence[bytes]):
    """Records of ``width`` bytes end to end in ``blob``, each a bytes object when read."""

    def __init__(self, blob: bytes, width: int) -> None:
        self.blob = blob
        self.width = width

    def __len__(self) -> int:
        return len(self.blob) // self.width

    def __getitem__(self, index: int | slice) -> Any:  # bytes, or a tuple of a slice
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        at = range(len(self))[index] * self.width  # IndexError as a tuple's
        return self.blob[at:at + self.width]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(tuple(self))
