"""Small, fast views of an ELF file: sections and symbols (pyelftools parses headers).

pyelftools' symbol objects cost microseconds each; probe objects hold one
symbol per CFI directive, so the symbol table is unpacked here in one pass.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from .errors import DecodeError


@dataclass(frozen=True)
class Symbol:
    """One symbol-table entry (``shndx`` is the raw section index)."""

    name: str
    value: int
    size: int
    kind: int  # STT_*
    bind: int  # STB_*
    shndx: int


@dataclass(frozen=True)
class ElfView:
    """Section names, contents and symbols of an ELF file held in memory."""

    data: bytes
    elf: ELFFile
    section_names: tuple[str, ...]

    def section_data(self, name: str) -> bytes:
        section = self.elf.get_section_by_name(name)
        return b"" if section is None else section.data()

    def symbols(self) -> list[Symbol]:
        """Every entry of ``.symtab`` (index 0 included), in table order."""
        symtab = self.elf.get_section_by_name(".symtab")
        if symtab is None:
            return []
        strtab = self.elf.get_section(symtab["sh_link"]).data()
        raw = symtab.data()
        endian = "<" if self.elf.little_endian else ">"
        if self.elf.elfclass == 64:
            fmt, size = endian + "IBBHQQ", 24
            fields = ((n, i, o, sh, v, sz) for n, i, o, sh, v, sz
                      in struct.iter_unpack(fmt, raw[: len(raw) // size * size]))
        else:
            fmt, size = endian + "IIIBBH", 16
            fields = ((n, i, o, sh, v, sz) for n, v, sz, i, o, sh
                      in struct.iter_unpack(fmt, raw[: len(raw) // size * size]))
        out = []
        for name_off, info, _other, shndx, value, sym_size in fields:
            end = strtab.find(b"\0", name_off)
            name = strtab[name_off:end].decode("utf-8", "replace")
            out.append(Symbol(name, value, sym_size, info & 0xF, info >> 4, shndx))
        return out


def open_elf(data: bytes, where: str) -> ElfView:
    """Parse ELF headers; raise ``DecodeError`` for anything that is not ELF."""
    if data[:4] != b"\x7fELF":
        raise DecodeError(0, f"{where} is not an ELF file")
    try:
        elf = ELFFile(io.BytesIO(data))
        names = tuple(section.name for section in elf.iter_sections())
    except (ELFError, struct.error, ValueError) as exc:
        raise DecodeError(0, f"{where}: malformed ELF: {exc}") from None
    return ElfView(data, elf, names)
