"""Binary layouts declared once: each field's name and ``struct`` code, in order; the
offsets and the size are computed, never written as numbers (issue 42).

Every layout module declares through this one: ``macho/layout.py`` and
``compact/layout.py`` (``CStruct``s of one byte order: Mach-O thin files are
little-endian, the fat header big), ``sframe/format.py`` and ``elf/archive.py``
(``Layout``: one declaration in both byte orders) and ``elf/structs.py``
(``ElfRecord``: a ``Layout`` per class).  Readers and writers name the fields.
A record is one ``struct.Struct`` built at import (hot loops unpack rows with it, as
fast as a format written by hand); a single field is read or written through its own.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from operator import itemgetter

from .typed import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

Buffer = bytes | bytearray | memoryview


class CStruct:
    """A fixed-size C structure in one byte order (``<`` or ``>``; no padding: each
    structure declared here is packed as its header declares it)."""

    __slots__ = ("name", "order", "fields", "names", "codes", "struct", "size", "_at")

    def __init__(self, name: str, fields: Sequence[tuple[str, str]],
                 order: str = "<") -> None:
        self.name = name
        self.order = order
        self.fields = tuple(fields)
        self.names = tuple(field for field, _ in self.fields)
        self.codes = "".join(code for _, code in self.fields)  # without the byte order
        self.struct = struct.Struct(order + self.codes)
        self.size = self.struct.size
        self._at: dict[str, tuple[int, struct.Struct]] = {}
        at = 0
        for field, code in self.fields:
            one = struct.Struct(order + code)
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

    def span(self, field: str) -> slice:
        """Where ``field`` is in a structure's bytes (a text field of the ar header)."""
        at, one = self._at[field]
        return slice(at, at + one.size)

    def index(self, field: str) -> int:
        """Where ``field`` is in an unpacked structure."""
        return self.names.index(field)

    def pick(self, *fields: str) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
        """What takes ``fields``, in that order, out of an unpacked structure."""
        return itemgetter(*map(self.index, fields))

    def after(self, field: str) -> struct.Struct:
        """The fields after ``field``, for a structure whose leading fields are written
        later (an FDE whose start is placed when the section is)."""
        return struct.Struct(self.order + "".join(code for _, code
                                                  in self.fields[self.index(field) + 1:]))

    def alone(self, field: str) -> struct.Struct:
        """The whole structure with only ``field`` kept (its other bytes skipped), to
        read one field of every entry of a table with ``iter_unpack``."""
        at, one = self._at[field]
        code = self.fields[self.index(field)][1]
        return struct.Struct(f"{self.order}{at}x{code}{self.size - at - one.size}x")

    def unpack_from(self, data: Buffer, at: int = 0) -> tuple[Any, ...]:
        """Every field's value, in declaration order."""
        return self.struct.unpack_from(data, at)

    def iter_unpack(self, data: Buffer) -> Iterator[tuple[Any, ...]]:
        """Each of a packed array of these structures, in order."""
        return self.struct.iter_unpack(data)

    def read(self, data: Buffer, at: int = 0) -> dict[str, Any]:
        """Every field by name (for headers a writer edits; rows use ``unpack_from``)."""
        return dict(zip(self.names, self.struct.unpack_from(data, at), strict=True))

    def pack(self, *values: Any) -> bytes:
        return self.struct.pack(*values)

    def pack_fields(self, fields: Mapping[str, Any]) -> bytes:
        """The structure with ``fields`` (every field named)."""
        return self.struct.pack(*(fields[name] for name in self.names))

    def pack_named(self, **fields: Any) -> bytes:
        """The structure with ``fields`` set by name, every other field 0."""
        return self.struct.pack(*(fields.get(name, 0) for name in self.names))

    def pack_field(self, field: str, value: Any) -> bytes:
        """One field's bytes alone (a patch over that field of a record in a file)."""
        return self._at[field][1].pack(value)

    def get(self, data: Buffer, at: int, field: str) -> Any:
        """One field of the structure at ``at``."""
        offset, one = self._at[field]
        return one.unpack_from(data, at + offset)[0]

    def put(self, buffer: bytearray, at: int, field: str, value: Any) -> None:
        """One field of the structure at ``at`` set to ``value``."""
        offset, one = self._at[field]
        one.pack_into(buffer, at + offset, value)


class Layout:
    """A structure declared once in both byte orders (ELF's and SFrame's records follow
    the file's): ``layout[little]`` is its ``CStruct``; offsets, size and field order
    are the same in both."""

    __slots__ = ("name", "names", "format", "size", "orders", "_fields")

    def __init__(self, name: str, fields: Sequence[tuple[str, str]]) -> None:
        self.name = name
        self.orders = (CStruct(name, fields, ">"), CStruct(name, fields, "<"))
        self.names = self.orders[True].names
        self.format = self.orders[True].codes  # without the byte order
        self.size = self.orders[True].size
        # (field, little) -> (offset, struct): one lookup for a field read in a loop.
        self._fields = {(field, little): self.orders[little]._at[field]
                        for field in self.names for little in (False, True)}

    def __repr__(self) -> str:
        return f"Layout({self.name!r}, {self.size} bytes)"

    def __getitem__(self, little: bool) -> CStruct:
        return self.orders[little]

    def of(self, little: bool) -> struct.Struct:
        """The whole record in one byte order."""
        return self.orders[little].struct

    def after(self, field: str, little: bool) -> struct.Struct:
        return self.orders[little].after(field)

    def alone(self, field: str, little: bool) -> struct.Struct:
        return self.orders[little].alone(field)

    def offset(self, field: str) -> int:
        return self.orders[True].offset(field)

    def span(self, field: str) -> slice:
        return self.orders[True].span(field)

    def index(self, field: str) -> int:
        return self.orders[True].index(field)

    def pick(self, *fields: str) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
        return self.orders[True].pick(*fields)

    def pack(self, little: bool, **fields: Any) -> bytes:
        """The record with ``fields`` set by name, every other field 0."""
        return self.orders[little].struct.pack(*(fields.get(name, 0) for name in self.names))

    def read(self, data: Buffer, at: int, field: str, little: bool) -> int:
        """One field of the record at ``at``."""
        offset, one = self._fields[field, little]
        value: int = one.unpack_from(data, at + offset)[0]
        return value

    def write(self, out: bytearray, at: int, field: str, value: int, little: bool) -> None:
        """Set one field of the record at ``at``."""
        offset, one = self._fields[field, little]
        one.pack_into(out, at + offset, value)


class Array:
    """An array of one scalar type (``uint32_t[]``): the counts are the data's."""

    __slots__ = ("name", "order", "code", "size")

    def __init__(self, name: str, code: str, order: str = "<") -> None:
        self.name = name
        self.order = order
        self.code = code
        self.size = struct.calcsize(order + code)

    def unpack_from(self, data: Buffer, at: int, count: int) -> tuple[int, ...]:
        return struct.unpack_from(f"{self.order}{count}{self.code}", data, at)

    def pack(self, values: list[int] | tuple[int, ...]) -> bytes:
        return struct.pack(f"{self.order}{len(values)}{self.code}", *values)
