"""Room for more program headers where a program's table already is.

Linux before 5.18 and qemu-user take a program's ``AT_PHDR`` from its first segment's
address plus ``e_phoff``, and ld.so finds its own table the same way: a table moved to
the end of the file is found there only if the file is padded to its memory image (a
large ``.bss`` made that megabytes of zeros).  So a program keeps its table where it is
and the table grows by the two entries SFrame needs (``PT_LOAD`` and
``PT_GNU_SFRAME``) into the bytes of the sections that follow it: ``.interp``, the
notes, the symbol hash tables and the dynamic linking tables (``.dynsym``,
``.dynstr``, the version tables), which nothing addresses but the program headers
(``PT_INTERP``, ``PT_NOTE``, ``PT_GNU_PROPERTY``), the dynamic section (``DT_HASH``,
``DT_GNU_HASH``, ``DT_SYMTAB``, ``DT_STRTAB``, ``DT_VERSYM``, ``DT_VERDEF``,
``DT_VERNEED``: ld.so's only way to them; the hash and version tables index
``.dynsym`` by symbol number, and names are offsets in ``.dynstr``) and symbols
defined in them (``__abi_tag``).  As few of them as make the room move, with those
references, into a new read-only segment at the end of the file, ``.sframe`` after
them:

- file order: the old file, its section names and headers written again (dropped
  where they were its last bytes), then segment D: the moved sections, ``.sframe``;
- D's address follows the memory image, congruent to its offset modulo the target's
  largest page (never the file's own larger alignment: no zeros for it);
- ``e_phoff``, the table's address, the code, data and debug information keep their
  offsets and addresses; the moved sections keep their section indices.

Where a file gives no such room (or a reference into those sections could not be
followed: a relocation, another dynamic tag), ``elf.linked`` moves the table instead.

``starts_as_program`` tells the files the kernel may start; ``find_room`` picks the
sections (each dynamic table only at the address its tag names; the relocation tables
never move); ``grow`` writes them and ``.sframe`` in the new segment (their dynamic tags
and the symbols defined in them follow, a moved ``.dynsym``'s own entries written in its
copy); ``previous_growth`` finds an earlier such conversion, placed again.
"""

from __future__ import annotations

import operator
import sys
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from itertools import compress, repeat
from types import ModuleType

from ..core import compiled as compiled_core
from ..errors import Cfi2SframeError
from ..files import PatchedCopy
from ..typed import NamedTuple
from .read import (
    PF_R,
    PT_DYNAMIC,
    PT_GNU_PROPERTY,
    PT_GNU_SFRAME,
    PT_INTERP,
    PT_LOAD,
    PT_NOTE,
    PT_PHDR,
    SHF_ALLOC,
    SHT_GNU_SFRAME,
    SHT_NOBITS,
    SHT_PROGBITS,
    SHT_RELA,
    ElfView,
    Section,
    Segment,
)
from .structs import ADDR, DYN, EHDR, PHDR, RELA, RELR, SHDR, SYM

# This layout is ELF64's (``find_room`` and ``add_loadable_sframe`` take no other).
EHDR64, SHDR64, PHDR64, SYM64, DYN64 = EHDR[True], SHDR[True], PHDR[True], SYM[True], DYN[True]
RELA64, RELR64, ADDR64 = RELA[True], RELR[True], ADDR[True]
PHDR_SIZE, SHDR_SIZE = PHDR64.size, SHDR64.size
_SHNDX, _VALUE = SYM64.index("st_shndx"), SYM64.index("st_value")
_COMPILED = compiled_core()
SHT_HASH, SHT_DYNSYM, SHT_NOTE, SHT_SYMTAB, SHT_RELR, SHT_STRTAB = 5, 11, 7, 2, 19, 3
SHT_GNU_HASH = 0x6FFFFFF6
SHT_GNU_VERDEF, SHT_GNU_VERNEED, SHT_GNU_VERSYM = 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
SHN_LORESERVE = 0xFF00
DT_NULL, DT_HASH, DT_STRTAB, DT_SYMTAB, DT_GNU_HASH = 0, 4, 5, 6, 0x6FFFFEF5
DT_VERSYM, DT_VERDEF, DT_VERNEED = 0x6FFFFFF0, 0x6FFFFFFC, 0x6FFFFFFE
# The dynamic tags whose value is an address (gABI d_ptr, and GNU's DT_ADDRRNG range,
# DT_VERSYM, DT_VERDEF, DT_VERNEED): none but the hash tables' may name a moved byte.
ADDRESS_TAGS = frozenset({3, 4, 5, 6, 7, 12, 13, 17, 21, 23, 25, 26, 32, 34, 36,
                          0x6FFFFFF0, 0x6FFFFFFC, 0x6FFFFFFE})
ADDRESS_RANGE = range(0x6FFFFE00, 0x6FFFFF00)
# The tags a moved section may answer, and the kind of table each names at its start:
# the hash tables, and the dynamic linking tables ld.so finds only through these tags
# (the version tables parallel .dynsym, and the hash tables index it, by symbol index;
# the version tables and symbols name strings by offset in .dynstr).
TABLES = {DT_HASH: SHT_HASH, DT_GNU_HASH: SHT_GNU_HASH, DT_SYMTAB: SHT_DYNSYM,
          DT_STRTAB: SHT_STRTAB, DT_VERSYM: SHT_GNU_VERSYM, DT_VERDEF: SHT_GNU_VERDEF,
          DT_VERNEED: SHT_GNU_VERNEED}
# Those of them that move only where their tag names them (an allocated string table
# that DT_STRTAB does not name could be anyone's).
DYNAMIC_TABLES = frozenset({SHT_DYNSYM, SHT_STRTAB, SHT_GNU_VERSYM, SHT_GNU_VERDEF,
                            SHT_GNU_VERNEED})
# The program headers that may describe a moved section: moved with it.
FOLLOWERS = frozenset({PT_INTERP, PT_NOTE, PT_GNU_PROPERTY})
ADDRESS_END = 1 << 64


def starts_as_program(view: ElfView, segments: list[Segment]) -> bool:
    """Whether the kernel may start this file: an executable, a position-independent
    one (``PT_INTERP``), or any file with an entry point (ld.so, static-pie, a libc
    that prints its version).  Only these need their table where the first segment's
    address plus ``e_phoff`` says; a shared library's table is found by ld.so
    through ``PT_PHDR`` or the segment holding it."""
    return (view.elf_type == "ET_EXEC" or view.entry != 0
            or any(seg.kind == PT_INTERP for seg in segments))


def _movable(view: ElfView, index: int, named: dict[int, int]) -> bool:
    """Whether section ``index`` is one that only known pointers address: ``.interp``,
    a note, a hash table, or a dynamic linking table at the address its tag names
    (``named``: address -> kind of table, ``_named``)."""
    section = view.sections[index]
    if section.kind in DYNAMIC_TABLES:
        return named.get(section.addr) == section.kind
    return (section.name == ".interp" or section.kind in (SHT_NOTE, SHT_HASH, SHT_GNU_HASH))


def _named(view: ElfView, segments: list[Segment]) -> dict[int, int]:
    """The addresses the dynamic section gives its tables (``TABLES``), with the kind of
    table each tag names."""
    return {value: TABLES[tag] for tag, value, _ in _dynamic(view, segments)
            if tag in TABLES}


class Room(NamedTuple):
    """The sections that move (indices, in file order) and the bytes they leave:
    [start, end) in the file, at ``address`` in memory."""

    moved: tuple[int, ...]
    start: int
    end: int
    address: int
    align: int  # the largest alignment among them (at least 8)


def find_room(view: ElfView, segments: list[Segment], added: int) -> Room | None:
    """The fewest sections after the table whose moving makes room for ``added`` more
    entries, or None when moving those that may move does not (or when something
    other than what is followed here refers to them)."""
    phoff, entsize, count = view.program_table()
    if not view.is64 or entsize != PHDR_SIZE:
        return None
    table_end = phoff + count * PHDR_SIZE
    need = table_end + added * PHDR_SIZE
    first = next((seg for seg in segments if seg.kind == PT_LOAD), None)
    if first is None or not (first.offset <= phoff and table_end <= first.offset + first.filesz):
        return None
    contents = sorted((s.offset, i) for i, s in enumerate(view.sections)
                      if i and s.kind != SHT_NOBITS and s.size)
    if any(view.sections[i].offset < table_end and view.sections[i].offset
           + view.sections[i].size > phoff for _, i in contents):
        return None
    after = [i for offset, i in contents if offset >= table_end]
    load_end = first.offset + first.filesz
    moved: list[int] = []
    named = _named(view, segments)
    for i in after + [-1]:
        bound = view.sections[i].offset if i >= 0 else load_end
        if need <= min(bound, load_end) and not _splits(segments, first, moved, view, bound):
            return _checked(view, segments, tuple(moved), first, phoff, table_end)
        section = view.sections[i] if i >= 0 else None
        if (section is None or not _movable(view, i, named) or not section.flags & SHF_ALLOC
                or section.offset + section.size > load_end):
            return None
        moved.append(i)
    return None


def _splits(segments: list[Segment], first: Segment, moved: list[int], view: ElfView,
            bound: int) -> bool:
    """Whether a program header other than the first segment's and ``PT_PHDR`` holds
    both moved bytes and bytes from ``bound`` on (a ``PT_NOTE`` over the notes and a
    ``.note.package`` after them): the next section moves too, to keep it whole."""
    if not moved:
        return False
    start = view.sections[moved[0]].offset
    return any(seg is not first and seg.kind != PT_PHDR and seg.filesz
               and seg.offset < bound and start < seg.offset + seg.filesz
               and seg.offset + seg.filesz > bound for seg in segments)


def _checked(view: ElfView, segments: list[Segment], moved: tuple[int, ...], first: Segment,
             phoff: int, table_end: int) -> Room | None:
    """``moved`` as a Room, if every reference to its bytes is one that moves with it."""
    if not moved:
        return Room((), table_end, table_end, table_end - first.offset + first.vaddr, 8)
    sections = [view.sections[i] for i in moved]
    start, end = sections[0].offset, sections[-1].offset + sections[-1].size
    address = start - first.offset + first.vaddr
    for seg in segments:
        if seg is first or seg.kind == PT_PHDR or not seg.filesz:
            continue
        inside = start <= seg.offset and seg.offset + seg.filesz <= end
        overlaps = seg.offset < end and start < seg.offset + seg.filesz
        if overlaps and not (inside and seg.kind in FOLLOWERS
                             and seg.vaddr - address == seg.offset - start):
            return None
    spans = range(address, address + (end - start))
    for section in view.sections:
        if section.kind == SHT_RELA and section.flags & SHF_ALLOC:
            if _rela_refers(view, section, spans):
                return None
        elif section.kind == SHT_RELR and section.flags & SHF_ALLOC:
            for where in _relr(view, section.offset, section.size):
                if where in spans or _word_at(view, segments, where) in spans:
                    return None
    kinds = {view.sections[i].addr: view.sections[i].kind for i in moved}
    for tag, value, _ in _dynamic(view, segments):
        if (tag in ADDRESS_TAGS or tag in ADDRESS_RANGE) and value in spans \
                and kinds.get(value) != TABLES.get(tag):
            return None
    align = max([8] + [_addralign(view, s.header_at) for s in sections])
    if align & (align - 1) or align > max(first.align, 8):
        return None  # (gABI: 0, 1 or a power of two; past the page, moving would not keep it)
    return Room(moved, start, end, address, align)


def _rela_refers(view: ElfView, section: Section, spans: range,
                 compiled: ModuleType | None = _COMPILED) -> bool:
    """Whether a relocation of ``section`` writes in ``spans`` or an address there: with
    no symbol (RELATIVE, IRELATIVE) its addend; with one the file defines, the symbol's
    value plus the addend (a symbol resolved in another file gives no address of this
    one: ``XtStrings + 0x2c7``).  ``compiled``: the compiled core's one pass
    (``_core.rela_within``, the default where it is built); None: the columns below,
    its reference, searched sorted in C loops (libLLVM-14 has 355k relocations, which
    took 0.3 s one by one and 0.13 s so)."""
    if compiled is not None:
        # Read where they are (a view of the file's bytes, released after the call), not
        # copied: libLLVM-14's 8.5 MB of relocations and 1 MB of symbols were some 2,500
        # pages of memory to fault in and fill.
        with memoryview(view.data) as whole:
            found: bool = compiled.rela_within(
                whole[_whole_span(len(whole), section.offset, section.size, RELA64.size)],
                whole[_symbol_span(view, section.link)], not view.little_endian,
                spans.start, spans.stop)
        return found
    rows = _whole(view.data, section.offset, section.size, RELA64.size)
    words, signed = array("Q", rows), array("q", rows)
    if view.little_endian != (sys.byteorder == "little"):
        words.byteswap()
        signed.byteswap()
    addends = signed[2::3]
    symbols = list(map(operator.rshift, words[1::3], repeat(32)))
    if _any_within(words[0::3], spans) or _any_within(
            compress(addends, map(operator.not_, symbols)), spans):
        return True
    named = list(compress(zip(symbols, addends, strict=True), symbols))
    values = _symbol_values(view, section.link) if named else {}
    return _any_within((values[symbol] + addend for symbol, addend in named
                        if symbol in values), spans)


def _any_within(numbers: Iterable[int], spans: range) -> bool:
    """Whether one of ``numbers`` is in ``spans`` (sorted and searched: C loops)."""
    ordered = sorted(numbers)
    at = bisect_left(ordered, spans.start)
    return at < len(ordered) and ordered[at] < spans.stop


def _whole(data: bytes, offset: int, size: int, entry: int) -> bytes:
    """The whole ``entry``-byte entries of a table that the file holds: a section header
    may claim more than the file has, or a size that is not whole entries."""
    return data[_whole_span(len(data), offset, size, entry)]


def _whole_span(held: int, offset: int, size: int, entry: int) -> slice:
    """``_whole``'s bytes as a slice of a file of ``held`` bytes."""
    end = max(offset, min(offset + size, held))
    return slice(offset, end - (end - offset) % entry)


def _symbols(view: ElfView, table: Section) -> Iterator[tuple[int, int, int]]:
    """(index, section index, value) of each whole entry of a symbol table."""
    rows = _whole(view.data, table.offset, table.size, SYM64.size)
    for n, row in enumerate(SYM64.of(view.little_endian).iter_unpack(rows)):
        yield n, row[_SHNDX], row[_VALUE]


def _symbol_rows(view: ElfView, index: int) -> bytes:
    """The whole entries of a relocation section's symbol table (section ``index``);
    none where that is not a symbol table."""
    return view.data[_symbol_span(view, index)]


def _symbol_span(view: ElfView, index: int) -> slice:
    """``_symbol_rows``' bytes as a slice of the file (an empty one for none)."""
    if not 0 < index < len(view.sections):
        return slice(0, 0)
    table = view.sections[index]
    if table.kind not in (SHT_SYMTAB, SHT_DYNSYM):
        return slice(0, 0)
    return _whole_span(len(view.data), table.offset, table.size, SYM64.size)


def _symbol_values(view: ElfView, index: int) -> dict[int, int]:
    """The values of the symbols a relocation section's symbol table (section
    ``index``) defines, by symbol index (undefined ones are resolved elsewhere)."""
    words = array("Q", _symbol_rows(view, index))
    if view.little_endian != (sys.byteorder == "little"):
        words.byteswap()
    # A symbol's first word holds st_name, st_info, st_other, st_shndx; read as one
    # number, st_shndx is its top 16 bits in a little-endian file, its low 16 bits in
    # a big-endian one.  Its second word is st_value.
    shndx = (map(operator.rshift, words[0::3], repeat(48)) if view.little_endian
             else map(operator.and_, words[0::3], repeat(0xFFFF)))
    return dict(compress(enumerate(words[1::3]), shndx))


def _relr(view: ElfView, offset: int, size: int) -> list[int]:
    """The places a packed relative relocation section relocates (gABI ``SHT_RELR``:
    an even word is a place, an odd one a bitmap of the 63 words after the last)."""
    width = RELR64.size  # and the size of each place it relocates
    places: list[int] = []
    base = 0
    for word, in RELR64.of(view.little_endian).iter_unpack(
            _whole(view.data, offset, size, width)):
        if not word & 1:
            places.append(word)
            base = word + width
            continue
        bits, n = word >> 1, 0
        while bits:
            if bits & 1:
                places.append(base + width * n)
            bits >>= 1
            n += 1
        base += (8 * width - 1) * width
    return places


def _word_at(view: ElfView, segments: list[Segment], address: int) -> int:
    """The 8-byte word the file holds for ``address`` (a relocated place's implicit
    addend); -1 where no segment has it in the file."""
    for seg in segments:
        if seg.kind == PT_LOAD and seg.vaddr <= address <= seg.vaddr + seg.filesz - ADDR64.size:
            return ADDR64.read(view.data, address - seg.vaddr + seg.offset, "a_addr",
                               view.little_endian)
    return -1


def _dynamic(view: ElfView, segments: list[Segment]) -> list[tuple[int, int, int]]:
    """(tag, value, file offset of the entry) of the dynamic section, to DT_NULL."""
    seg = next((s for s in segments if s.kind == PT_DYNAMIC), None)
    if seg is None:
        return []
    entry = DYN64.of(view.little_endian)
    out = []
    for at in range(seg.offset, min(seg.offset + seg.filesz, len(view.data)) - entry.size + 1,
                    entry.size):
        tag, value = entry.unpack_from(view.data, at)
        if tag == DT_NULL:
            break
        out.append((tag, value, at))
    return out


def _addralign(view: ElfView, header_at: int) -> int:
    return SHDR64.read(view.data, header_at, "sh_addralign", view.little_endian)


def up(value: int, align: int) -> int:
    """``value`` rounded up to a multiple of ``align``."""
    return -(-value // align) * align


def congruent(at_least: int, to: int, modulo: int) -> int:
    """The smallest value >= ``at_least`` equal to ``to`` modulo ``modulo``."""
    return at_least + (to - at_least) % modulo


class Grown(NamedTuple):
    """An earlier conversion of this kind, found again: ``.sframe`` (section index), the
    program header entries of its segment D and of ``PT_GNU_SFRAME``."""

    sframe: int
    load: int
    sframe_segment: int


def previous_growth(view: ElfView, segments: list[Segment]) -> Grown | None:
    """D and ``.sframe`` of an earlier conversion that grew the table, or None: the last
    ``PT_LOAD``, read-only, ends with ``.sframe`` and holds nothing but sections that
    may move; ``PT_GNU_SFRAME`` describes that ``.sframe``."""
    index = next((i for i, s in enumerate(view.sections)
                  if s.name == ".sframe" and s.flags & SHF_ALLOC), None)
    loads = [i for i, seg in enumerate(segments) if seg.kind == PT_LOAD]
    if index is None or not loads or view.section(".phdrs") is not None:
        return None
    sframe = view.sections[index]
    last = max(loads, key=lambda i: segments[i].vaddr)
    d = segments[last]
    if (d.filesz != d.memsz or d.vaddr + d.filesz != sframe.addr + sframe.size
            or not d.vaddr <= sframe.addr or d.offset + (sframe.addr - d.vaddr) != sframe.offset
            or _flags(view, d) != PF_R):
        return None
    named = _named(view, segments)
    if any(i != index and s.flags & SHF_ALLOC and d.vaddr <= s.addr < d.vaddr + d.memsz
           and not _movable(view, i, named) for i, s in enumerate(view.sections)):
        return None
    described = next((i for i, seg in enumerate(segments) if seg.kind == PT_GNU_SFRAME
                      and seg.vaddr == sframe.addr), None)
    if described is None:
        return None
    return Grown(index, last, described)


def _flags(view: ElfView, seg: Segment) -> int:
    return PHDR64.read(view.data, seg.header_at, "p_flags", view.little_endian)


class Block(NamedTuple):
    """What segment D carries before ``.sframe``: old bytes [start, end) of the file that
    were at ``address`` and go to the address D gives them (or stay where they are,
    ``keep_address``), and the sections and program headers that hold them."""

    start: int
    end: int
    address: int
    align: int
    sections: tuple[int, ...]
    keep_address: bool


def read_only_segment(little: bool, kind: int, at: int, address: int, size: int,
                      align: int) -> bytes:
    """A read-only program header entry whose bytes in the file and in memory are
    ``size`` (the segments and ``PT_GNU_SFRAME`` a conversion adds)."""
    return PHDR64.pack(little, p_type=kind, p_flags=PF_R, p_offset=at, p_vaddr=address,
                       p_paddr=address, p_filesz=size, p_memsz=size, p_align=align)


def allocated_section(little: bool, name: int, kind: int, address: int, at: int,
                      size: int) -> bytearray:
    """The section header of an allocated section a conversion adds (8-byte aligned)."""
    return bytearray(SHDR64.pack(little, sh_name=name, sh_type=kind, sh_flags=SHF_ALLOC,
                                 sh_addr=address, sh_offset=at, sh_size=size,
                                 sh_addralign=8))


class Growth(NamedTuple):
    """Where ``grow`` puts the file's parts, planned before anything is built: the
    section names at ``cut``, ``shnum`` section headers at ``shdrs_at``, a table of
    ``phnum`` entries, segment D at ``at`` (``address`` in memory) with the moved
    bytes, then ``.sframe`` to the file's ``end``."""

    cut: int
    shdrs_at: int
    shnum: int
    phnum: int
    at: int
    address: int
    sframe_at: int
    sframe_address: int
    end: int


def plan_growth(view: ElfView, segments: list[Segment], block: Block, size: int,
                names_size: int, page: int, cut: int, previous: Grown | None) -> Growth:
    """The sizes and offsets of ``grow``'s file for a ``size``-byte ``.sframe`` and a
    ``names_size``-byte section name table; nothing read but the headers."""
    count = view.program_table()[2]
    added = 0 if previous is not None else (
        1 + (0 if any(seg.kind == PT_GNU_SFRAME for seg in segments) else 1))
    shnum = len(view.sections) + (0 if previous is not None else 1)
    shdrs_at = up(cut + names_size, 8)
    shdrs_end = shdrs_at + shnum * SHDR_SIZE
    if block.keep_address:
        at = congruent(shdrs_end, block.address, page)
        address = block.address
    else:
        at = congruent(shdrs_end, block.start, block.align)
        loads = [seg for seg in segments if seg.kind == PT_LOAD]
        memory_end = up(max(seg.vaddr + seg.memsz for seg in loads), page)
        address = congruent(memory_end, at, page)
    sframe_at = at + up(block.end - block.start, 8)
    return Growth(cut, shdrs_at, shnum, count + added, at, address, sframe_at,
                  address + (sframe_at - at), sframe_at + size)


def grow(view: ElfView, segments: list[Segment], block: Block, size: int,
         build: Callable[[int], bytes], names: bytes, name_new: int, page: int,
         cut: int, where: str, previous: Grown | None = None,
         old_sframe: int | None = None, name_old: int = 0,
         limit: int | None = None) -> tuple[PatchedCopy, int] | None:
    """The file with segment D (the block, then a ``size``-byte ``.sframe``) added or,
    with ``previous``, placed again; returns (file, section address).

    ``names``: the section name table to write (``name_new``: where ``.sframe``'s name
    is in it); ``cut``: the old file is kept up to here; ``old_sframe``: a section
    renamed ``.sframe.old`` (``name_old``) and kept as plain bytes.  None where the
    file would grow by more than ``limit`` bytes besides ``.sframe`` (before any is built).
    """
    data = view.data
    little = view.little_endian
    place = plan_growth(view, segments, block, size, len(names), page, cut, previous)
    if limit is not None and place.end - size - len(data) > limit:
        return None
    if place.sframe_address + size > ADDRESS_END:
        raise Cfi2SframeError(where, "no addresses are left after the file's memory image "
                                     "for a new segment")
    sframe = build(place.sframe_address)
    if len(sframe) != size:
        raise AssertionError(f"the SFrame section is {len(sframe)} bytes, not {size}")
    shift_offset, shift_address = place.at - block.start, place.address - block.address

    shdr = SHDR64[little]
    headers = [bytearray(data[s.header_at:s.header_at + SHDR_SIZE]) for s in view.sections]
    shdr.put(headers[view.shstrndx], 0, "sh_offset", cut)
    shdr.put(headers[view.shstrndx], 0, "sh_size", len(names))
    for i in block.sections:
        s = view.sections[i]
        shdr.put(headers[i], 0, "sh_addr", s.addr + shift_address)
        shdr.put(headers[i], 0, "sh_offset", s.offset + shift_offset)
    if old_sframe is not None:
        shdr.put(headers[old_sframe], 0, "sh_name", name_old)
        shdr.put(headers[old_sframe], 0, "sh_type", SHT_PROGBITS)
    new_sframe = allocated_section(little, name_new, SHT_GNU_SFRAME, place.sframe_address,
                                   place.sframe_at, size)
    if previous is not None:
        headers[previous.sframe] = new_sframe
    else:
        headers.append(new_sframe)
    assert len(headers) == place.shnum

    d_row = read_only_segment(little, PT_LOAD, place.at, place.address,
                              place.end - place.at, page)
    sframe_row = read_only_segment(little, PT_GNU_SFRAME, place.sframe_at,
                                   place.sframe_address, size, 8)
    rows = _rows(view, segments, block, previous, d_row, sframe_row,
                 place.phnum * PHDR_SIZE, shift_offset, shift_address)
    ehdr = EHDR64[little]
    elf_header = bytearray(data[:ehdr.size])
    ehdr.put(elf_header, 0, "e_shoff", place.shdrs_at)
    ehdr.put(elf_header, 0, "e_phnum", place.phnum)
    ehdr.put(elf_header, 0, "e_shnum", place.shnum)
    patches: list[tuple[int, bytes]] = [(0, bytes(elf_header))]
    if not block.keep_address and block.end > block.start:
        patches.append((block.start, bytes(block.end - block.start)))
    patches.append((view.program_table()[0], rows))
    patches += [(cut, names), (place.shdrs_at, b"".join(headers)),
                (place.at, data[block.start:block.end]), (place.sframe_at, sframe)]
    if shift_address:  # after the moved bytes: a moved .dynsym's symbols change there
        patches += _references(view, segments, block, shift_offset, shift_address, where)
    return PatchedCopy(place.end, data, cut, tuple(patches)), place.sframe_address


_P_OFFSET, _P_VADDR, _P_PADDR, _P_FILESZ, _P_MEMSZ = (
    PHDR64.index(field) for field in ("p_offset", "p_vaddr", "p_paddr", "p_filesz",
                                      "p_memsz"))


def _rows(view: ElfView, segments: list[Segment], block: Block, previous: Grown | None,
          d_row: bytes, sframe_row: bytes, table: int, shift_offset: int,
          shift_address: int) -> bytes:
    """The program header table: ``PT_PHDR`` its new size, the moved sections' headers
    moved with them, D after the last ``PT_LOAD`` (placed again where it was), and
    ``PT_GNU_SFRAME`` reused or last."""
    entry = PHDR64.of(view.little_endian)
    last_load = max(i for i, seg in enumerate(segments) if seg.kind == PT_LOAD)
    rows: list[bytes] = []
    has_sframe_row = False
    for i, seg in enumerate(segments):
        row = list(entry.unpack_from(view.data, seg.header_at))
        if previous is not None and i == previous.load:
            rows.append(d_row)
            continue
        if seg.kind == PT_GNU_SFRAME and (previous is None or i == previous.sframe_segment):
            rows.append(sframe_row)
            has_sframe_row = True
        else:
            if seg.kind == PT_PHDR:
                row[_P_FILESZ] = row[_P_MEMSZ] = table
            elif seg.filesz and block.start <= seg.offset < block.end:
                row[_P_OFFSET] += shift_offset
                row[_P_VADDR] += shift_address
                row[_P_PADDR] += shift_address
            rows.append(entry.pack(*row))
        if previous is None and i == last_load:
            rows.append(d_row)
    if not has_sframe_row:
        rows.append(sframe_row)
    return b"".join(rows)


def _references(view: ElfView, segments: list[Segment], block: Block, shift_offset: int,
                shift: int, where: str) -> list[tuple[int, bytes]]:
    """The dynamic entries of the moved tables and the symbols defined in moved
    sections, at their new addresses (written into a symbol table's moved copy where
    the table moved too); a symbol whose new address leaves 64 bits is the input's
    error (its value is nowhere near its section's: found by fuzzing)."""
    dyn, sym = DYN64[view.little_endian], SYM64[view.little_endian]
    d_un, st_value = dyn.offset("d_un"), sym.offset("st_value")
    spans = range(block.address, block.address + (block.end - block.start))
    patches = [(at + d_un, dyn.pack_field("d_un", value + shift))
               for tag, value, at in _dynamic(view, segments)
               if tag in TABLES and value in spans]
    moved = set(block.sections)
    for index, table in enumerate(view.sections):
        if table.kind not in (SHT_SYMTAB, SHT_DYNSYM):
            continue
        base = table.offset + (shift_offset if index in moved else 0)
        for n, shndx, value in _symbols(view, table):
            if shndx in moved and shndx < SHN_LORESERVE:
                if not 0 <= value + shift < 1 << 64:
                    raise Cfi2SframeError(where, f"symbol {n} of section {index} has value "
                                                 f"{value:#x}: moved with its section "
                                                 f"{shndx}, it leaves 64 bits")
                patches.append((base + n * sym.size + st_value,
                                sym.pack_field("st_value", value + shift)))
    return patches
