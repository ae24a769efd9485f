"""A minimal reader for the assembler's probe object: section names and symbols.

The probe object is produced by the assembler we just ran, and only its
section names and symbol table are needed.  Reading those with ``struct``
takes milliseconds; importing pyelftools alone takes ~50 ms and its symbol
objects cost microseconds each, on a path that runs for every ``.s`` input.
ELF inputs from users go through pyelftools (see the ELF frontend).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from .errors import DecodeError

SHT_SYMTAB = 2


class Symbol(NamedTuple):
    """One symbol-table entry (``shndx`` is the raw section index)."""

    name: str
    value: int
    size: int
    kind: int  # STT_*
    bind: int  # STB_*
    shndx: int


@dataclass(frozen=True)
class Section:
    """A section header: name, type, file offset, size and link."""

    name: str
    kind: int
    offset: int
    size: int
    link: int


@dataclass(frozen=True)
class ElfView:
    """Sections and symbols of an ELF file held in memory."""

    data: bytes
    little_endian: bool
    is64: bool
    sections: tuple[Section, ...]

    @property
    def section_names(self) -> tuple[str, ...]:
        return tuple(section.name for section in self.sections)

    def section_data(self, name: str) -> bytes:
        for section in self.sections:
            if section.name == name:
                return self.data[section.offset : section.offset + section.size]
        return b""

    def symbols(self, name: str = "") -> list[Symbol]:
        """Every entry of a symbol table (index 0 included), in table order.

        ``name`` picks the table (``.symtab``, ``.dynsym``); by default the
        first SHT_SYMTAB section.
        """
        if name:
            symtab = next((s for s in self.sections if s.name == name), None)
        else:
            symtab = next((s for s in self.sections if s.kind == SHT_SYMTAB), None)
        if symtab is None:
            return []
        if symtab.link >= len(self.sections):
            raise DecodeError(0, f"symbol table {symtab.name} links to a missing section")
        strtab = self.sections[symtab.link]
        names = _string_table(self.data[strtab.offset : strtab.offset + strtab.size])
        raw = self.data[symtab.offset : symtab.offset + symtab.size]
        order = "<" if self.little_endian else ">"
        out = []
        if self.is64:
            rows = struct.iter_unpack(order + "IBBHQQ", raw[: len(raw) // 24 * 24])
            for name_off, info, _other, shndx, value, size in rows:
                out.append(Symbol(names(name_off), value, size, info & 0xF, info >> 4, shndx))
        else:
            rows = struct.iter_unpack(order + "IIIBBH", raw[: len(raw) // 16 * 16])
            for name_off, value, size, info, _other, shndx in rows:
                out.append(Symbol(names(name_off), value, size, info & 0xF, info >> 4, shndx))
        return out


def _string_table(table: bytes) -> Callable[[int], str]:
    """Name look-up by offset; the whole table is decoded in one pass."""
    by_offset: dict[int, str] = {}
    pos = 0
    for chunk in table.decode("utf-8", "replace").split("\0"):
        by_offset[pos] = chunk
        pos += len(chunk.encode("utf-8")) + 1 if not chunk.isascii() else len(chunk) + 1

    def name(offset: int) -> str:
        found = by_offset.get(offset)
        return found if found is not None else _cstr(table, offset)

    return name


def _cstr(table: bytes, offset: int) -> str:
    end = table.find(b"\0", offset)
    return table[offset : end if end >= 0 else len(table)].decode("utf-8", "replace")


def open_elf(data: bytes, where: str) -> ElfView:
    """Read the section headers; raise ``DecodeError`` when ``data`` is not sound ELF."""
    if data[:4] != b"\x7fELF" or len(data) < 52:
        raise DecodeError(0, f"{where} is not an ELF file")
    is64 = data[4] == 2
    little = data[5] == 1
    order = "<" if little else ">"
    try:
        if is64:
            shoff, = struct.unpack_from(order + "Q", data, 0x28)
            shentsize, shnum, shstrndx = struct.unpack_from(order + "HHH", data, 0x3A)
            fmt = order + "IIQQQQIIQQ"
        else:
            shoff, = struct.unpack_from(order + "I", data, 0x20)
            shentsize, shnum, shstrndx = struct.unpack_from(order + "HHH", data, 0x2E)
            fmt = order + "IIIIIIIIII"
        headers = [struct.unpack_from(fmt, data, shoff + i * shentsize) for i in range(shnum)]
    except struct.error:
        raise DecodeError(0, f"{where}: section headers run past the end") from None
    if not 0 <= shstrndx < len(headers):
        raise DecodeError(0, f"{where}: bad section name table index {shstrndx}")
    names_hdr = headers[shstrndx]
    names = data[names_hdr[4] : names_hdr[4] + names_hdr[5]]
    sections = tuple(
        Section(_cstr(names, h[0]), h[1], h[4], 0 if h[1] == 8 else h[5], h[6]) for h in headers
    )
    return ElfView(data, little, is64, sections)
