"""A minimal ELF reader: header, section headers, program headers, symbols.

The package's only ELF reader (the assembler's probe object, CFI, ``.sframe``,
relocations, rewriting).  Reading these with ``struct`` costs little next to
importing pyelftools and building its section objects for a large library (hash
tables, dynamic segment).  pyelftools is a test oracle.

Symbols: all, or those at given values with only their names read, or those at given
indices (``symbols_at``); the raw table (``symbol_table``, ``symbol_rows``);
``symbol_entry`` one entry without its name, for relocating. Also ``is_mapping_symbol``,
``elf_arch``, ``address_reader`` (file bytes at a linked address),
``ElfView.sframe_section`` and ``holds_sframe`` (an empty ``.sframe`` counts as none:
every command asks this, not for the name).
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Callable, Container, Iterable, Iterator, Sized
from functools import partial
from itertools import chain, compress

from ..arch import ELF_MACHINES, arch_for_machine
from ..cstruct import Layout
from ..errors import Cfi2SframeError, DecodeError, decoding
from ..kinds import is_elf
from ..typed import TYPE_CHECKING, NamedTuple, cast
from .structs import (
    EHDR,
    EI_CLASS,
    EI_DATA,
    ELFCLASS32,
    ELFCLASS64,
    ELFDATA2LSB,
    ELFDATA2MSB,
    PHDR,
    SHDR,
    ST_BIND_SHIFT,
    ST_TYPE_MASK,
    SYM,
    st_type,
)

if TYPE_CHECKING:
    from ..arch.base import Arch

# A symbol-table entry as stored: (name offset, info, section index, value, size).
SymbolRow = tuple[int, int, int, int, int]

# The ELF constants the package uses (gABI; SHT_GNU_SFRAME and PT_GNU_SFRAME: GNU).
SHT_NULL, SHT_SYMTAB, SHT_RELA, SHT_NOBITS, SHT_REL = 0, 2, 4, 8, 9
SHT_GROUP, SHT_SYMTAB_SHNDX = 17, 18
SHT_LLVM_ADDRSIG = 0x6FFF4C03  # LLVM: address-significant symbols, by index
SHT_GNU_SFRAME = 0x6FFFFFF4
SHF_ALLOC, SHF_INFO_LINK, SHF_COMPRESSED = 0x2, 0x40, 0x800
STT_FUNC, STT_SECTION, STT_FILE = 2, 3, 4
SHN_UNDEF, SHN_LORESERVE = 0, 0xFF00
SHT_PROGBITS = 1
ET_REL = 1
PT_NULL, PT_LOAD, PT_NOTE, PT_PHDR, PT_GNU_SFRAME = 0, 1, 4, 6, 0x6474E554
PT_DYNAMIC, PT_INTERP, PT_TLS = 2, 3, 7
PT_GNU_EH_FRAME, PT_GNU_RELRO, PT_GNU_PROPERTY = 0x6474E550, 0x6474E552, 0x6474E553
PF_R = 4
PHDR64_SIZE, SHDR64_SIZE = PHDR[True].size, SHDR[True].size  # ELF64's entries

# e_machine and e_type names as pyelftools spells them: the targets' own (registry) and
# others we name in messages.
MACHINES = {40: "EM_ARM", 243: "EM_RISCV", 8: "EM_MIPS", 20: "EM_PPC", 21: "EM_PPC64"} | \
    ELF_MACHINES
ELF_TYPES = {0: "ET_NONE", 1: "ET_REL", 2: "ET_EXEC", 3: "ET_DYN", 4: "ET_CORE"}


class Symbol(NamedTuple):
    """One symbol-table entry (``shndx`` is the raw section index)."""

    name: str
    value: int
    size: int
    kind: int  # STT_*
    bind: int  # STB_*
    shndx: int


class Section(NamedTuple):
    """A section header: name, type, file offset, size (0 for NOBITS), link, address."""

    name: str
    kind: int
    offset: int
    size: int
    link: int
    addr: int = 0
    info: int = 0
    flags: int = 0
    header_at: int = 0  # where this section header is in the file (for messages)


class Segment(NamedTuple):
    """A program header: type, file offset, address, sizes in file and memory."""

    kind: int
    offset: int
    vaddr: int
    filesz: int
    memsz: int
    header_at: int = 0  # where this program header is in the file (for rewriting)
    align: int = 0


class ElfView(NamedTuple):
    """Sections and symbols of an ELF file held in memory."""

    data: bytes
    little_endian: bool
    is64: bool
    sections: tuple[Section, ...]
    machine: str = ""
    elf_type: str = ""
    shoff: int = 0  # e_shoff, e_shentsize, e_shstrndx, e_entry, as open_elf read them
    shentsize: int = 0
    shstrndx: int = 0
    entry: int = 0

    @property
    def header_offsets(self) -> tuple[int, int]:
        """Where e_phoff and e_shoff are in the ELF header (for messages)."""
        ehdr = EHDR[self.is64]
        return ehdr.offset("e_phoff"), ehdr.offset("e_shoff")

    def program_table(self) -> tuple[int, int, int]:
        """(e_phoff, e_phentsize, e_phnum)."""
        ehdr, data, little = EHDR[self.is64], self.data, self.little_endian
        try:
            return (ehdr.read(data, 0, "e_phoff", little),
                    ehdr.read(data, 0, "e_phentsize", little),
                    ehdr.read(data, 0, "e_phnum", little))
        except struct.error:
            raise DecodeError(0, "the ELF header is truncated") from None

    def section(self, name: str) -> Section | None:
        """The first section called ``name``."""
        return next((s for s in self.sections if s.name == name), None)

    def segments(self) -> list[Segment]:
        """The program headers (none for a relocatable object)."""
        data = self.data
        layout = PHDR[self.is64].of(self.little_endian)
        pick = _SEGMENT_FIELDS[self.is64]
        phoff, entsize, count = self.program_table()
        if count and (entsize < layout.size or phoff + count * entsize > len(data)):
            raise DecodeError(self.header_offsets[0], "program headers run past the end")
        out: list[Segment] = []
        for pos in range(phoff, phoff + count * entsize, entsize or 1):
            kind, offset, vaddr, filesz, memsz, align = pick(layout.unpack_from(data, pos))
            out.append(Segment(kind, offset, vaddr, filesz, memsz, pos, align))
        return out

    def sframe_section(self) -> Section | None:
        """The section called .sframe, else the first of type SHT_GNU_SFRAME."""
        return self.section(".sframe") or next(
            (section for section in self.sections if section.kind == SHT_GNU_SFRAME), None)

    @property
    def holds_sframe(self) -> bool:
        """The file has an SFrame section with bytes in it.  An empty one (binutils 2.45
        puts one in Scrt1.o, and gold and lld keep it in what they link) has no header
        and no FDE: it reads as no section at all."""
        section = self.sframe_section()
        return section is not None and section.size > 0

    def empty_sframe(self) -> Section | None:
        """The file's SFrame section where it is empty (0 bytes), else None."""
        section = self.sframe_section()
        return section if section is not None and section.size == 0 else None

    @property
    def section_names(self) -> tuple[str, ...]:
        return tuple(section.name for section in self.sections)

    def section_data(self, name: str) -> bytes:
        for section in self.sections:
            if section.name == name:
                return self.data[section.offset : section.offset + section.size]
        return b""

    def symbol_entry(self, index: int, number: int) -> tuple[int, int, int] | None:
        """(value, STT type, section index) of entry ``number`` of the symbol table at
        section ``index``, without its name (what relocating needs); None past the
        table's end.  Read one at a time: relocations name few of an object's
        symbols."""
        if number < 0 or number >= self.symbol_table_size(index):
            return None
        layout, size, pick = self._symbol_layout()
        _, info, shndx, value, _ = pick(layout.unpack_from(
            self.data, self.sections[index].offset + size * number))
        return value, st_type(info), shndx

    def _symbol_layout(self) -> tuple[struct.Struct, int, Callable[[tuple[int, ...]], SymbolRow]]:
        """How this file stores a symbol-table entry: its ``struct``, its size, and what
        picks (name offset, info, section index, value, size) out of it."""
        return _SYMBOL_LAYOUTS[self.is64, self.little_endian]

    def symbol_table_size(self, index: int) -> int:
        """How many entries the symbol table at section ``index`` holds (those whose
        bytes the file has)."""
        if not 0 < index < len(self.sections):
            return 0
        table = self.sections[index]
        held = max(0, min(table.size, len(self.data) - table.offset))
        return held // self._symbol_layout()[1]

    def symbol_count(self, name: str) -> int:
        """How many entries the symbol table ``name`` holds (0 without one)."""
        index = next((i for i, s in enumerate(self.sections) if s.name == name), 0)
        return self.symbol_table_size(index)

    def symbols(self, name: str | int = "", values: Container[int] | None = None
                ) -> list[Symbol]:
        """Every entry of a symbol table (index 0 included), in table order.

        ``name`` picks the table (``.symtab``, ``.dynsym``, or a section
        index); by default the first SHT_SYMTAB section.  ``values``: only the
        entries whose value is one of them, in table order, only their names read
        (naming one function of an object of 100k costs no 100k names).
        """
        if values is not None:
            return self._symbols_valued(name, values)
        table = self.symbol_rows(name)
        if table is None:
            return []
        strings, rows = table
        names = _string_table(strings)
        return [Symbol(names(name_off), value, size, info & ST_TYPE_MASK,
                       info >> ST_BIND_SHIFT, shndx)
                for name_off, info, shndx, value, size in rows]

    def _symbols_valued(self, name: str | int, values: Container[int]) -> list[Symbol]:
        """``symbols`` with ``values``: the values are read alone and tested in C-level
        iterators; only the entries kept are unpacked and named."""
        found = self._symbol_sections(name)  # (checked even where no entry is asked for)
        if found is None or isinstance(values, Sized) and not values:
            return []
        symtab, strtab = found
        layout, size, pick = self._symbol_layout()
        data = self.data
        start = symtab.offset
        count = max(0, min(symtab.size, len(data) - start)) // size
        kept: Iterable[int] | None = _entries_valued(data, start, count, size,
                                                     self._value_at(), values)
        if kept is None:  # many values, or one met too often: every value read
            raw = data[start : start + count * size]
            kept = compress(range(count), map(values.__contains__, self._symbol_values(raw)))
        # the names read where they are (libLLVM-14's .dynstr: 3 MB, read for one name)
        held = max(0, min(strtab.size, len(data) - strtab.offset))
        name_of = partial(string_in, data, strtab.offset, held) if hasattr(data, "find") \
            else partial(string_at, data[strtab.offset : strtab.offset + held])
        rows = (pick(layout.unpack_from(data, start + size * index)) for index in kept)
        return [Symbol(name_of(name_off), value, entry_size, info & ST_TYPE_MASK,
                       info >> ST_BIND_SHIFT, shndx)
                for name_off, info, shndx, value, entry_size in rows]

    def _value_at(self) -> tuple[int, int, bool]:
        """Where ``st_value`` is in an entry of this file's symbol tables: (its offset,
        its width, whether little-endian)."""
        return SYM[self.is64].offset("st_value"), 8 if self.is64 else 4, self.little_endian

    def _symbol_values(self, raw: bytes) -> Iterable[int]:
        """The value of every entry of a symbol table's bytes, in table order: a strided
        view of them where the file's byte order is this machine's (no object per
        entry), else unpacked."""
        if self.little_endian == (sys.byteorder == "little"):
            first, step = _SYMBOL_VALUE_STRIDE[self.is64]
            return memoryview(raw).cast("Q" if self.is64 else "I")[first::step]
        return chain.from_iterable(SYM[self.is64].alone("st_value", self.little_endian)
                                   .iter_unpack(raw))

    def symbols_at(self, indices: Iterable[int]) -> tuple[Symbol, ...]:
        """The entries of the first ``SHT_SYMTAB`` at ``indices`` (each in range), in
        that order: a caller that found which ones it wants reads only those."""
        table = self.symbol_table()
        if table is None:
            return ()
        raw, strings = table
        layout, size, pick = self._symbol_layout()
        rows = (pick(layout.unpack_from(raw, size * index)) for index in indices)
        return tuple(Symbol(string_at(strings, name_off), value, size, info & ST_TYPE_MASK,
                            info >> ST_BIND_SHIFT, shndx)
                     for name_off, info, shndx, value, size in rows)

    def symbol_rows(self, name: str | int = "") -> tuple[bytes, Iterator[SymbolRow]] | None:
        """A symbol table's string table and its entries as they are stored, each
        (name offset, info, section index, value, size), for readers that name only
        some of them; None without the table (``name`` as for ``symbols``)."""
        table = self.symbol_table(name)
        if table is None:
            return None
        raw, strings = table
        layout, _, pick = self._symbol_layout()
        return strings, map(pick, layout.iter_unpack(raw))

    def symbol_table(self, name: str | int = "") -> tuple[bytes, bytes] | None:
        """A symbol table's whole entries (``Elf_Sym``: 24 bytes each in ELF64, 16 in ELF32) and its
        string table; None without the table (``name`` as for ``symbols``)."""
        found = self._symbol_sections(name)
        if found is None:
            return None
        symtab, strtab = found
        strings = self.data[strtab.offset : strtab.offset + strtab.size]
        entry = self._symbol_layout()[1]
        raw = self.data[symtab.offset : symtab.offset + symtab.size]
        return raw[: len(raw) // entry * entry], strings

    def _symbol_sections(self, name: str | int) -> tuple[Section, Section] | None:
        """A symbol table's section and its string table's, checked (its link in
        range), their bytes not read: a caller that asks for no entry copies none
        (libLLVM-14's .dynsym and .dynstr: 4 MB, some 1,000 page faults)."""
        if isinstance(name, int):
            symtab = self.sections[name] if 0 < name < len(self.sections) else None
        elif name:
            symtab = next((s for s in self.sections if s.name == name), None)
        else:
            symtab = next((s for s in self.sections if s.kind == SHT_SYMTAB), None)
        if symtab is None:
            return None
        if symtab.link >= len(self.sections):
            raise DecodeError(0, f"symbol table {symtab.name} links to a missing section")
        return symtab, self.sections[symtab.link]


# What each reader takes out of an entry, by class (ELF32, ELF64): the file header's
# fields ``open_elf`` keeps, a section header's
# fields as ``Section`` orders them, a program header's as ``Segment`` does, and a
# symbol's as ``SymbolRow`` (with its layout and size, per class and byte order).
_SECTION_FIELDS = tuple(SHDR[is64].pick("sh_name", "sh_type", "sh_flags", "sh_addr",
                                        "sh_offset", "sh_size", "sh_link", "sh_info")
                        for is64 in (False, True))
_HEADER_FIELDS = tuple(EHDR[is64].pick("e_shoff", "e_shentsize", "e_shnum", "e_shstrndx",
                                       "e_type", "e_machine", "e_entry")
                       for is64 in (False, True))
_SEGMENT_FIELDS = tuple(PHDR[is64].pick("p_type", "p_offset", "p_vaddr", "p_filesz",
                                        "p_memsz", "p_align") for is64 in (False, True))
_SYMBOL_LAYOUTS = {
    (is64, little): (SYM[is64].of(little), SYM[is64].size,
                     SYM[is64].pick("st_name", "st_info", "st_shndx", "st_value", "st_size"))
    for is64 in (False, True) for little in (False, True)}


def _value_stride(layout: Layout, width: int) -> tuple[int, int]:
    """How ``st_value`` (``width`` bytes) strides through a table of native-order
    entries cast to such words: (the first word's index, words per entry)."""
    return layout.offset("st_value") // width, layout.size // width


_SYMBOL_VALUE_STRIDE = (_value_stride(SYM[False], 4), _value_stride(SYM[True], 8))


def _string_table(table: bytes) -> Callable[[int], str]:
    """Name look-up by offset; the whole table is decoded in one pass."""
    by_offset: dict[int, str] = {}
    pos = 0
    # Offsets count bytes: a table that is not all ASCII is split before decoding (a
    # byte that is not UTF-8 becomes U+FFFD, three bytes, and had shifted every later
    # offset).
    if table.isascii():
        for chunk in table.decode("ascii").split("\0"):
            by_offset[pos] = chunk
            pos += len(chunk) + 1
    else:
        for raw in table.split(b"\0"):
            by_offset[pos] = raw.decode("utf-8", "replace")
            pos += len(raw) + 1

    def name(offset: int) -> str:
        found = by_offset.get(offset)
        return found if found is not None else string_at(table, offset)

    return name


def _entries_valued(data: bytes, start: int, count: int, size: int,
                    value_at: tuple[int, int, bool], values: Container[int]) -> list[int] | None:
    """The indices, in order, of the ``count`` entries of ``size`` bytes at ``start``
    whose value (``value_at``: its offset, width and byte order) is one of ``values``,
    each value's bytes searched for in place (``bytes.find``: naming the PLT of
    libLLVM-14 read 45k values as numbers); None where that does not pay or cannot be
    done (more than a few values, not all ``int``, one met in many places)."""
    if type(values) not in (set, frozenset):  # (a subclass may test otherwise)
        return None
    few = cast("frozenset[int]", values)
    if len(few) > _FEW_VALUES or any(type(value) is not int for value in few):
        return None
    find = getattr(data, "find", None)
    if find is None:
        return None
    if count <= 0:  # (a table past the file's end: a map's find takes no such start)
        return []
    field, width, little = value_at
    end, met, kept = start + count * size, 0, set()
    for value in few:
        if not 0 <= value < 1 << 8 * width:
            continue  # no entry holds it
        wanted = value.to_bytes(width, "little" if little else "big")
        at = find(wanted, start, end)
        while at >= 0:
            met += 1
            if met > _FEW_MEETINGS:
                return None
            if (at - start) % size == field:
                kept.add((at - start) // size)
            at = find(wanted, at + 1, end)
    return sorted(kept)


_FEW_VALUES = 8
_FEW_MEETINGS = 256


def string_in(data: bytes, start: int, held: int, offset: int) -> str:
    """``string_at`` of the string table of ``held`` bytes at ``start`` of ``data``,
    read in place (no copy of the table)."""
    if not 0 <= offset < held:  # (as ``string_at`` past its table; a map's find would
        return ""               # not take a start past the file)
    end = data.find(b"\0", start + offset, start + held)
    return data[start + offset : end if end >= 0 else start + held].decode("utf-8", "replace")


def string_at(table: bytes, offset: int) -> str:
    """The NUL-terminated name at ``offset`` of a string table (UTF-8, errors replaced)."""
    end = table.find(b"\0", offset)
    return table[offset : end if end >= 0 else len(table)].decode("utf-8", "replace")


def is_mapping_symbol(name: str) -> bool:
    """An ARM/AArch64 mapping symbol (``$x``, ``$d``, ``$a``, ``$t``, maybe ``.N``): it
    marks code or data in a section and never names a function (ELF for Arm ABI)."""
    return len(name) >= 2 and name[0] == "$" and name[1] in "xdat" and (
        len(name) == 2 or name[2] == ".")


def open_elf(data: bytes, where: str) -> ElfView:
    """Read the section headers; raise ``DecodeError`` when ``data`` is not sound ELF."""
    if not is_elf(data) or len(data) < EHDR[False].size:
        raise DecodeError(0, f"{where} is not an ELF file")
    if data[EI_CLASS] not in (ELFCLASS32, ELFCLASS64) or \
            data[EI_DATA] not in (ELFDATA2LSB, ELFDATA2MSB):
        raise DecodeError(EI_CLASS, f"{where}: unknown ELF class {data[EI_CLASS]} or data "
                                    f"encoding {data[EI_DATA]}")
    is64 = data[EI_CLASS] == ELFCLASS64
    little = data[EI_DATA] == ELFDATA2LSB
    ehdr, shdr = EHDR[is64], SHDR[is64].of(little)
    if len(data) < ehdr.size:
        raise DecodeError(len(data), f"{where}: the ELF header is truncated")
    shoff, shentsize, shnum, shstrndx, elf_type, machine, entry = _HEADER_FIELDS[is64](
        ehdr.of(little).unpack_from(data))
    if shnum and shentsize < shdr.size:
        raise DecodeError(ehdr.offset("e_shentsize"),
                          f"{where}: section header size {shentsize} is too small")
    if shoff + shnum * shentsize > len(data):
        raise DecodeError(shoff, f"{where}: the {shnum} section headers run past the end of "
                                 f"the file ({len(data)} bytes)")
    pick = _SECTION_FIELDS[is64]
    headers = [pick(shdr.unpack_from(data, shoff + i * shentsize)) for i in range(shnum)]
    if headers and headers[0][1] != SHT_NULL:  # (gABI: index 0 is reserved, SHT_NULL)
        raise DecodeError(shoff, f"{where}: section 0 has type {headers[0][1]}, not "
                                 "SHT_NULL")
    if headers and headers[0][0]:  # (gABI: and nameless; a name appended later is its)
        raise DecodeError(shoff, f"{where}: section 0 has a name (at {headers[0][0]:#x}), "
                                 "not 0")
    if not 0 <= shstrndx < len(headers):
        raise DecodeError(ehdr.offset("e_shstrndx"),
                          f"{where}: bad section name table index {shstrndx}")
    _, names_kind, _, _, names_at, names_size, _, _ = headers[shstrndx]
    if names_kind == SHT_NOBITS and shstrndx:  # (gABI: it occupies no file space)
        raise DecodeError(shoff + shstrndx * shentsize,
                          f"{where}: the section name table (section {shstrndx}) is "
                          "SHT_NOBITS: it holds no names in the file")
    names = data[names_at : names_at + names_size]
    sections = tuple(
        Section(string_at(names, name), kind, offset, 0 if kind == SHT_NOBITS else size, link,
                addr, info, flags, shoff + i * shentsize)
        for i, (name, kind, flags, addr, offset, size, link, info) in enumerate(headers)
    )
    return ElfView(data, little, is64, sections, MACHINES.get(machine, f"e_machine {machine}"),
                   ELF_TYPES.get(elf_type, f"e_type {elf_type}"), shoff, shentsize, shstrndx,
                   entry)


def open_elf_file(path: str, data: bytes) -> ElfView:
    """``open_elf`` for a named input: not ELF, or malformed, is a located input error."""
    if not is_elf(data):
        raise Cfi2SframeError(path, "not an ELF file")
    with decoding(path):
        return open_elf(data, "ELF file")


def elf_arch(path: str, data: bytes) -> Arch:
    """The target an ELF header names (the header only; no CFI is decoded)."""
    with decoding(path):
        view = open_elf(data, "ELF file")
    return arch_for_machine(view.machine, path, not view.little_endian)


def address_reader(view: ElfView) -> Callable[[int, int], bytes | None]:
    """``read(address, size)``: the file bytes at a linked file's address (its PT_LOAD
    segments, parsed once), None outside them."""
    loads = [seg for seg in view.segments() if seg.kind == PT_LOAD]

    def read(address: int, size: int) -> bytes | None:
        for seg in loads:
            if seg.vaddr <= address < seg.vaddr + seg.filesz:
                at = seg.offset + address - seg.vaddr
                return view.data[at:at + size]
        return None

    return read
