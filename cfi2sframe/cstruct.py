"""A C structure declared once: each field's name and ``struct`` format, in order; the
offsets and the size are computed, never written as numbers (issue 42).

A container's or table's layout module (``macho/layout.py``, ``compact/layout.py``)
declares its structures with ``CStruct``; readers and writers name the fields.  The
whole record is one precompiled ``struct.Struct`` (hot loops unpack rows with it, as
fast as a format string written by hand); a single field is read or written through
its own.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any


class CStruct:
    """A fixed-size C structure in one byte order (``<`` or ``>``; no padding: each
    structure declared here is packed as its header declares it)."""

    __slots__ = ("name", "order", "fields", "struct", "size", "_at")

    def __init__(self, name: str, fields: tuple[tuple[str, str], ...],
                 order: str = "<") -> None:
        self.name = name
        self.order = order
        self.fields = fields
        self.struct = struct.Struct(order + "".join(fmt for _, fmt in fields))
        self.size = self.struct.size
        self._at: dict[str, tuple[int, struct.Struct]] = {}
        at = 0
        for field, fmt in fields:
            one = struct.Struct(order + fmt)
            self._at[field] = (at, one)
            at += one.size
        assert at == self.size, f"{name}: fields of {at} bytes in {self.size}"

    def __repr__(self) -> str:
        return f"CStruct({self.name!r}, {self.size} bytes)"

    def in_order(self, order: str) -> CStruct:
        """The same structure in the other byte order."""
        return CStruct(self.name, self.fields, order)

    def offset(self, field: str) -> int:
        """The field's offset from the structure's start."""
        return self._at[field][0]

    def field_size(self, field: str) -> int:
        return self._at[field][1].size

    def unpack_from(self, data: bytes | bytearray | memoryview,
                    at: int = 0) -> tuple[Any, ...]:
        """Every field's value, in declaration order."""
        return self.struct.unpack_from(data, at)

    def iter_unpack(self, data: bytes | bytearray | memoryview) -> Iterator[tuple[Any, ...]]:
        """Each of a packed array of these structures, in order."""
        return self.struct.iter_unpack(data)

    def read(self, data: bytes | bytearray | memoryview, at: int = 0) -> dict[str, Any]:
        """Every field by name (for headers a writer edits; rows use ``unpack_from``)."""
        return dict(zip((name for name, _ in self.fields), self.struct.unpack_from(data, at),
                        strict=True))

    def pack(self, *values: Any) -> bytes:
        return self.struct.pack(*values)

    def pack_fields(self, fields: dict[str, Any]) -> bytes:
        """The structure with ``fields`` (every field named)."""
        return self.struct.pack(*(fields[name] for name, _ in self.fields))

    def get(self, data: bytes | bytearray | memoryview, at: int, field: str) -> Any:
        """One field of the structure at ``at``."""
        offset, one = self._at[field]
        return one.unpack_from(data, at + offset)[0]

    def put(self, buffer: bytearray, at: int, field: str, value: Any) -> None:
        """One field of the structure at ``at`` set to ``value``."""
        offset, one = self._at[field]
        one.pack_into(buffer, at + offset, value)


class Array:
    """An array of one scalar type (``uint32_t[]``): the counts are the data's."""

    __slots__ = ("name", "order", "code", "size")

    def __init__(self, name: str, code: str, order: str = "<") -> None:
        self.name = name
        self.order = order
        self.code = code
        self.size = struct.calcsize(order + code)

    def unpack_from(self, data: bytes | bytearray | memoryview, at: int,
                    count: int) -> tuple[int, ...]:
        return struct.unpack_from(f"{self.order}{count}{self.code}", data, at)

    def pack(self, values: list[int] | tuple[int, ...]) -> bytes:
        return struct.pack(f"{self.order}{len(values)}{self.code}", *values)
