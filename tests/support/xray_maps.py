"""Small ELF files holding an XRay instrumentation map, built byte by byte from the
ELF gABI and the notes (xray-notes.md, "The instrumentation map"), for the tests:
every field is written here, none read back through our reader."""

from __future__ import annotations

import struct
from typing import NamedTuple

SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_RELA = 1, 2, 3, 4
ET_EXEC, ET_DYN = 2, 3
MAP_AT = 0x4001  # where the maps go: an odd address, as seen in real binaries


class Part(NamedTuple):
    """A section to write: name, type, address, bytes, link, entry size."""

    name: str
    kind: int
    addr: int
    data: bytes
    link: int = 0
    entsize: int = 0


def entry(address: int, function: int, kind: int, version: int, always: int = 1,
          is64: bool = True, order: str = "<") -> bytes:
    """One map entry as stored: two words, kind, always-instrument, version, padding
    (32 bytes on 64-bit targets, 16 on 32-bit).  Negative words wrap."""
    mask = (1 << 64) - 1 if is64 else (1 << 32) - 1
    layout = order + ("QQBBB13x" if is64 else "IIBBB5x")
    return struct.pack(layout, address & mask, function & mask, kind, always, version)


def symtab(symbols: list[tuple[str, int]], text_index: int, is64: bool = True,
           order: str = "<") -> tuple[bytes, bytes]:
    """A symbol table (null entry first) of global functions in section ``text_index``,
    and its string table."""
    strings = b"\0"
    rows = [b"\0" * (24 if is64 else 16)]
    for name, value in symbols:
        at = len(strings)
        strings += name.encode() + b"\0"
        info = 1 << 4 | 2  # STB_GLOBAL, STT_FUNC
        rows.append(struct.pack(order + "IBBHQQ", at, info, 0, text_index, value, 16) if is64
                    else struct.pack(order + "IIIBBH", at, value, 16, info, 0, text_index))
    return b"".join(rows), strings


def rela(relocations: list[tuple[int, int, int]], order: str = "<") -> bytes:
    """ELF64 RELA entries: (place, type, addend), symbol 0."""
    return b"".join(struct.pack(order + "QQq", place, kind, addend)
                    for place, kind, addend in relocations)


def elf(parts: list[Part], elf_type: int = ET_EXEC, machine: int = 62, is64: bool = True,
        order: str = "<", pad: int = 1) -> bytes:
    """An ELF file: the header, each part's bytes (``pad`` bytes before each: odd
    offsets), then the section headers (null first, the name table last)."""
    names = b"\0"
    offsets = []
    for part in parts:
        offsets.append(len(names))
        names += part.name.encode() + b"\0"
    shstr_name = len(names)
    names += b".shstrtab\0"
    header_size = 64 if is64 else 52
    body = b""
    placed = []
    for part in [*parts, Part(".shstrtab", SHT_STRTAB, 0, names)]:
        body += b"\0" * pad
        placed.append(header_size + len(body))
        body += part.data
    shoff = header_size + len(body)
    count = len(parts) + 2
    ident = b"\x7fELF" + bytes([2 if is64 else 1, 1 if order == "<" else 2, 1]) + b"\0" * 9
    if is64:
        head = ident + struct.pack(order + "HHIQQQIHHHHHH", elf_type, machine, 1, 0, 0, shoff,
                                   0, 64, 56, 0, 64, count, count - 1)
    else:
        head = ident + struct.pack(order + "HHIIIIIHHHHHH", elf_type, machine, 1, 0, 0, shoff,
                                   0, 52, 32, 0, 40, count, count - 1)
    headers = b"\0" * (64 if is64 else 40)
    for part, name_at, at in zip([*parts, Part(".shstrtab", SHT_STRTAB, 0, names)],
                                 [*offsets, shstr_name], placed, strict=True):
        info = 1 if part.kind == SHT_SYMTAB else 0  # the first global symbol's index
        if is64:
            headers += struct.pack(order + "IIQQQQIIQQ", name_at, part.kind, 2, part.addr, at,
                                   len(part.data), part.link, info, 1, part.entsize)
        else:
            headers += struct.pack(order + "IIIIIIIIII", name_at, part.kind, 2, part.addr, at,
                                   len(part.data), part.link, info, 1, part.entsize)
    return head + body + headers


def with_symbols(parts: list[Part], symbols: list[tuple[str, int]], is64: bool = True,
                 order: str = "<") -> list[Part]:
    """``parts`` after a ``.text`` section (index 1) and before a symbol table naming
    ``symbols`` in it and its string table."""
    text = Part(".text", SHT_PROGBITS, 0x1000, b"\xc3" * 16)
    first = [text, *parts]
    table, strings = symtab(symbols, 1, is64, order)
    index = len(first) + 1  # the symbol table's own section index
    return [*first, Part(".symtab", SHT_SYMTAB, 0, table, index + 1, 24 if is64 else 16),
            Part(".strtab", SHT_STRTAB, 0, strings)]


def pcrel_map(sleds: list[tuple[int, int, int]], at: int = MAP_AT, is64: bool = True,
              order: str = "<") -> bytes:
    """Version 2: each word is its target less its own field's address."""
    size, word = (32, 8) if is64 else (16, 4)
    return b"".join(entry(address - (at + i * size), function - (at + i * size + word), kind,
                          2, is64=is64, order=order)
                    for i, (address, function, kind) in enumerate(sleds))


def absolute_map(sleds: list[tuple[int, int, int]], version: int, is64: bool = True,
                 order: str = "<") -> bytes:
    """Versions 0 and 1: each word is its target's address."""
    return b"".join(entry(address, function, kind, version, is64=is64, order=order)
                    for address, function, kind in sleds)
