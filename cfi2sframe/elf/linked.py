"""Add a loadable ``.sframe`` and ``PT_GNU_SFRAME`` to a linked ELF file, moving nothing.

Linked files have no room for more program headers (the table is followed at once by
``.interp`` or the notes).  A program's table grows where it is, into the bytes of the
few sections ``elf.grow`` moves beside ``.sframe``; a library takes that layout where
it is the smaller.  Otherwise every existing byte keeps its file offset and address:
the new parts go after the file's contents, and the table is copied to the
end of the file with its new entries (a ``PT_NULL``, three ``PT_LOAD``s and,
if it had none, ``PT_GNU_SFRAME``); ``PT_PHDR`` and ``e_phoff`` point at the copy.
The layout is chosen for the tools that run afterwards (docs/post-link.md):

- file order: the rewritten section name table and headers, ``.sframe``, the table
  (the file's last bytes).  Three new read-only ``PT_LOAD``s, on pages of their
  own: A maps the table; B maps the table again from its ninth byte, and an
  allocated section ``.phdrs`` there covers those bytes; C maps ``.sframe``;
- the table's first entry is ``PT_NULL``.  libelf (eu-strip, debugedit, dwz) zero-fills
  file bytes between sections that no section holds, so ``.phdrs``,
  an allocated section kept in place, protects the table except its first 8 bytes,
  which are zero anyway; and libelf packs what it keeps after the last allocated
  section, here the end of the file;
- BFD's strip and objcopy treat the first ``PT_LOAD`` holding the table's offset as
  the one that includes it, and put the table at its start: that is A, which holds
  no section, so nothing gets moved ("lma adjusted") and BFD can run again; the
  kernel (5.18 on) takes the last ``PT_LOAD`` holding it, also A, since B starts 8
  bytes later;
- BFD writes A right where the ``PT_LOAD`` before it ends in the file, unpadded, and
  keeps A's address, so A's address is congruent (modulo the page size) to that end.
  The memory order is C, A, B: the table follows ``.sframe`` (zero-padded to 8
  bytes) in the file, so that congruence costs no padding (``_sframe_first``);
- a program's A has an address minus offset equal to the first segment's, so Linux
  before 5.18 and qemu-user, which take AT_PHDR from the first segment, find it.
  Where the file does not reach a page past its memory image (C's place), the order
  is A, B, C: A follows the last existing segment, and the table is padded to an
  offset congruent to the end of that segment's file contents (less than a page),
  plus the zeros that take it past the memory image (``OldKernels``).  A library
  keeps this rule only with ``--old-kernels pad``: ld.so finds a library's table
  through ``PT_PHDR``.

``add_loadable_sframe`` grows the table where it is (``elf/grow.py``) unless that costs
more than moving it and more than a page (a program: the new segments' page; a library:
the smallest, 4 KiB); else ``plan``/``Placement`` copy it to the end as above.
``name_table`` gives the section names with the new ones, for both layouts;
``segment_page`` aligns new segments to the target's largest page
(``Arch.max_page_size``), never to a larger ``p_align``; ``replace_in_place`` puts a new
section where the old one was; ``previous_conversion`` finds what an earlier moved-table
conversion added (also after BFD's strip moved it), which is then placed again, not
added to.
"""

from __future__ import annotations

from collections.abc import Callable

from ..arch import arch_for_machine
from ..errors import Cfi2SframeError
from ..files import PAGE, PatchedCopy
from ..typed import TYPE_CHECKING, NamedTuple
from .grow import (
    EHDR64,
    PHDR64,
    PHDR_SIZE,
    SHDR64,
    SHDR_SIZE,
    Block,
    Grown,
    allocated_section,
    congruent,
    find_room,
    grow,
    previous_growth,
    read_only_segment,
    starts_as_program,
    up,
)
from .read import (
    PT_GNU_SFRAME,
    PT_LOAD,
    PT_NULL,
    PT_PHDR,
    SHF_ALLOC,
    SHT_GNU_SFRAME,
    SHT_NOBITS,
    SHT_PROGBITS,
    ElfView,
    Section,
    Segment,
    open_elf,
)

PN_XNUM, SHN_LORESERVE = 0xFFFF, 0xFF00
# What to do where the table can only be where Linux before 5.18 and qemu-user look
# (its address minus its offset equal to the first segment's) with more than a page
# of zeros: refuse ("keep"), write the zeros ("pad"), or place it for Linux >= 5.18
# only ("no").
if TYPE_CHECKING:
    from typing import Literal
    OldKernels = Literal["keep", "pad", "no"]
# The most zeros --old-kernels pad writes (a memory image that much longer than the
# file: a huge .bss, or a size field that lies).
MAX_PADDING = 1 << 30
ADDRESS_END = 1 << 64

# The table's first 8 bytes (a PT_NULL entry's type and flags) lie outside every
# section: libelf may zero them, which leaves them what they are.
NULL_PREFIX = 8


class Placement(NamedTuple):
    """Where the new parts go: file offsets and addresses of ``.sframe`` (segment C),
    of the moved program header table (A) and of its copy from the ninth byte (B),
    and where the old file is cut."""

    cut: int  # the old file is kept up to here, and the section name table written
    #           from here (its old name table and section headers, if they were its
    #           last bytes, are dropped)
    shdrs_at: int
    sframe_at: int
    sframe_address: int
    phdrs_at: int
    phdrs_address: int
    cover_address: int  # segment B: the table from its ninth byte, at this address
    end: int
    page: int  # the largest PT_LOAD alignment, that of the new segments
    sframe_size: int  # the section's size as written: zero-padded to 8 where the table
    #                   follows it in memory (BFD puts the table where the section ends)

    @property
    def cover_at(self) -> int:
        return self.phdrs_at + NULL_PREFIX


class Previous(NamedTuple):
    """What an earlier conversion of ours added, found again (also after BFD's strip or
    objcopy moved it): the sections ``.sframe`` and ``.phdrs`` (indices) and the
    program header entries of the leading ``PT_NULL`` and the three ``PT_LOAD``s A, B
    and C.  A new conversion places these again instead of adding more: the file
    keeps its number of sections and program headers, and the bytes they held are
    written over where they are the file's tail."""

    sframe: int
    phdrs: int
    entries: frozenset[int]


def previous_conversion(view: ElfView, segments: list[Segment]) -> Previous | None:
    """Our earlier additions in ``view`` (a 64-bit linked file), or None."""
    index = {section.name: i for i, section in enumerate(view.sections)}
    if ".sframe" not in index or ".phdrs" not in index or not segments:
        return None
    sframe, phdrs = view.sections[index[".sframe"]], view.sections[index[".phdrs"]]
    if phdrs.kind != SHT_PROGBITS or not phdrs.flags & SHF_ALLOC or segments[0].kind != PT_NULL:
        return None
    phoff, _, count = view.program_table()
    loads = {i: seg for i, seg in enumerate(segments) if seg.kind == PT_LOAD}
    table = next((i for i, seg in loads.items()
                  if seg.offset == phoff and seg.filesz == count * PHDR_SIZE), None)
    cover = next((i for i, seg in loads.items()
                  if seg.vaddr == phdrs.addr and seg.filesz == phdrs.size), None)
    data = next((i for i, seg in loads.items()
                 if seg.vaddr == sframe.addr and seg.filesz == sframe.size), None)
    if table is None or cover is None or data is None or len({table, cover, data}) < 3:
        return None
    return Previous(index[".sframe"], index[".phdrs"], frozenset({0, table, cover, data}))


def plan(view: ElfView, segments: list[Segment], size: int, names_size: int, phnum: int,
         where: str, old_kernels: OldKernels = "keep", append_only: bool = False,
         previous: Previous | None = None, program: bool = True,
         page: int = 0x1000) -> Placement:
    """The placement of a ``size``-byte ``.sframe`` and a ``phnum``-entry table.

    ``program``: a file the kernel may start keeps the table where Linux before 5.18
    looks (``old_kernels``): without padding where its file reaches a page past its
    memory image (``_sframe_first``), else after padding for BFD and any zeros; a
    shared library takes ``_sframe_first`` unless ``old_kernels`` is "pad", as does a
    program with "no" where the first way fails.  ``page``: the new segments'
    alignment (``segment_page``).

    ``append_only``: every old byte stays (the section names and headers are not
    written over), so the new file differs from the old one in its ELF header and
    its new end only: what a same-inode rewrite needs (``files.rewrite_inode``).
    ``previous``: our earlier additions, placed again (``segments`` are the file's
    own, without them).
    """
    loads = [seg for seg in segments if seg.kind == PT_LOAD]
    first = loads[0]
    delta = first.vaddr - first.offset
    contents_end = max(seg.offset + seg.filesz for seg in loads)
    memory_end = up(max(seg.vaddr + seg.memsz for seg in loads), page)
    table = phnum * PHDR_SIZE
    cut = len(view.data) if append_only else _tail_start(view, segments, previous)
    shdrs_at = up(cut + names_size, 8)
    shnum = len(view.sections) + (0 if previous is not None else 2)
    sframe_at = shdrs_at + shnum * SHDR_SIZE
    # No padding: a program's table kept where Linux before 5.18 looks where its file
    # reaches past C; else where that rule is not asked for.
    unpadded = None
    if program:
        unpadded = _sframe_first(cut, shdrs_at, sframe_at, size, table, memory_end, page,
                                 where, delta)
    if unpadded is None and (old_kernels == "no" if program else old_kernels != "pad"):
        unpadded = _sframe_first(cut, shdrs_at, sframe_at, size, table, memory_end, page,
                                 where)
    if unpadded is not None:
        return unpadded
    phdrs_at = congruent(sframe_at + size, contents_end, page)
    phdrs_address = phdrs_at + delta
    if phdrs_address < memory_end and not program and old_kernels != "pad":
        old_kernels = "no"  # ld.so finds a library's table through PT_PHDR
    if phdrs_address < memory_end:
        padding = up(memory_end - phdrs_address, page)
        if old_kernels == "pad" and padding > MAX_PADDING:
            raise Cfi2SframeError(where, "the file is shorter than its memory image by more "
                                  f"than {MAX_PADDING:#x} bytes (1 GiB): --old-kernels pad "
                                  "would write that many zeros; --old-kernels no makes a "
                                  "file for Linux >= 5.18 only")
        if old_kernels != "no" and (padding <= page or old_kernels == "pad"):
            phdrs_at += padding
            phdrs_address = phdrs_at + delta
        elif old_kernels == "no":  # only the segment rule holds (Linux >= 5.18)
            phdrs_address = congruent(memory_end, contents_end, page)
        else:
            raise Cfi2SframeError(where, "the file is shorter than its memory image: keeping "
                                  "the program headers where Linux before 5.18 and qemu-user "
                                  f"find them takes {padding} bytes of zeros; --old-kernels "
                                  "pad writes them, --old-kernels no makes a file for Linux "
                                  ">= 5.18 only")
    # B and C start on pages of their own: no page holds two of A, B and C.
    cover_address = congruent(up(phdrs_address + table, page), phdrs_at + NULL_PREFIX,
                               page)
    sframe_address = congruent(up(cover_address + table - NULL_PREFIX, page), sframe_at,
                                page)
    if sframe_address + size > ADDRESS_END:
        raise Cfi2SframeError(where, f"the file's memory image ends at {memory_end:#x}: no "
                                     "addresses are left for the new segments")
    return Placement(cut, shdrs_at, sframe_at, sframe_address, phdrs_at, phdrs_address,
                     cover_address, phdrs_at + table, page, size)


def _sframe_first(cut: int, shdrs_at: int, sframe_at: int, size: int, table: int,
                  memory_end: int, page: int, where: str,
                  delta: int | None = None) -> Placement | None:
    """The placement without padding: C (``.sframe``, zero-padded to 8 bytes) first in
    memory after the image, then A, the table right after C in the file at an address
    congruent to its offset, then B.  BFD writes A unpadded where C's last section
    ends, which is then congruent too.

    ``delta``: A's address minus its offset must be this (a program's first segment's,
    for old kernels); None where that address is below C's last page."""
    sframe_address = congruent(memory_end, sframe_at, page)
    padded = up(size, 8)
    phdrs_at = sframe_at + padded
    lowest = up(sframe_address + padded, page)
    if delta is None:
        phdrs_address = congruent(lowest, phdrs_at, page)
    elif phdrs_at + delta >= lowest:
        phdrs_address = phdrs_at + delta
    else:
        return None
    cover_address = congruent(up(phdrs_address + table, page), phdrs_at + NULL_PREFIX,
                              page)
    if cover_address + table > ADDRESS_END:
        raise Cfi2SframeError(where, f"the file's memory image ends at {memory_end:#x}: no "
                                     "addresses are left for the new segments")
    return Placement(cut, shdrs_at, sframe_at, sframe_address, phdrs_at, phdrs_address,
                     cover_address, phdrs_at + table, page, padded)


def _tail_start(view: ElfView, segments: list[Segment],
                previous: Previous | None = None) -> int:
    """Where the old file can be cut: before its section name table and section
    headers when those two are its last bytes (both are written again), else its end.

    With ``previous`` (our earlier additions; ``segments`` without them), what those
    hold does not count: the old tail of ours is written again, so a file converted
    again grows by the difference of the two sections, not by the new one."""
    data = view.data
    shoff, shstrndx = view.shoff, view.shstrndx
    names = view.sections[shstrndx]
    table_end = shoff + len(view.sections) * SHDR_SIZE
    ours = {previous.sframe, previous.phdrs} if previous is not None else set()
    others = [s.offset + (0 if s.kind == SHT_NOBITS else s.size)
              for i, s in enumerate(view.sections) if i != shstrndx and i not in ours]
    if previous is None:
        others += [seg.offset + seg.filesz for seg in segments]
        others.append(view.program_table()[0] + len(segments) * PHDR_SIZE)
    else:  # PT_PHDR and PT_GNU_SFRAME describe our old table and section: rewritten
        others += [seg.offset + seg.filesz for seg in segments
                   if seg.kind not in (PT_PHDR, PT_GNU_SFRAME)]
    tail = min(names.offset, shoff)
    if ((table_end == len(data) or previous is not None)
            and names.offset + names.size <= shoff
            and shoff - (names.offset + names.size) < 8 and max(others) <= tail):
        return tail
    return len(data)


def add_loadable_sframe(data: bytes, size: int, build: Callable[[int], bytes], where: str,
                        replace: bool = False, old_kernels: OldKernels = "keep",
                        append_only: bool = False, view: ElfView | None = None
                        ) -> tuple[PatchedCopy, int]:
    """The linked ELF64 ``data`` with a ``size``-byte ``.sframe`` added; returns
    (file, section address): the file as ``data``'s start with new bytes over it,
    written a chunk at a time.  ``build(address)`` gives the section placed there.

    ``replace``: a ``.sframe`` already there is renamed ``.sframe.old`` (its bytes
    stay where they are, typed PROGBITS so nothing reads them as SFrame) and its
    ``PT_GNU_SFRAME`` is pointed at the new section.  ``old_kernels``: see
    ``OldKernels``; ``append_only``: see ``plan``; ``view``: ``data``'s section
    headers, where the caller has read them.
    """
    if view is None:
        view = open_elf(data, "ELF file")
    if not view.is64:
        raise Cfi2SframeError(where, "--emit elf writes 64-bit ELF files only; use --emit "
                                     "raw and link the section in")
    if not view.sections:
        raise Cfi2SframeError(where, "the file has no section headers")
    old = view.section(".sframe")
    if old is not None and not replace:
        raise Cfi2SframeError(where, "the file already has an .sframe section; --replace "
                                     "regenerates it from the DWARF CFI")
    little = view.little_endian
    segments = view.segments()
    page = segment_page(view, segments, where)
    previous = previous_conversion(view, segments)
    grown = previous_growth(view, segments) if previous is None else None
    program = starts_as_program(view, segments)
    if grown is not None:
        done = _grow_table(view, segments, size, build, where, old, grown, page, append_only)
        if done is not None:
            return done
    if previous is not None:  # placed again: the same entries, not new ones
        phnum = len(segments)
        segments = [seg for i, seg in enumerate(segments) if i not in previous.entries]
    else:
        has_sframe_segment = any(seg.kind == PT_GNU_SFRAME for seg in segments)
        phnum = len(segments) + 4 + (0 if has_sframe_segment else 1)
    if phnum >= PN_XNUM or len(view.sections) + 2 >= SHN_LORESERVE:
        raise Cfi2SframeError(where, "the file has too many program or section headers "
                                     "to add one")
    shstrndx = view.shstrndx
    if previous is not None:
        names, _ = name_table(view)
        name_new, name_phdrs = (SHDR64.read(data, view.sections[i].header_at, "sh_name", little)
                                for i in (previous.sframe, previous.phdrs))
        old, name_old = None, 0  # ours: written again, not kept as .sframe.old
    else:
        names, (name_new, name_phdrs, name_old) = name_table(
            view, ".sframe", ".phdrs", ".sframe.old" if old is not None else "")
    try:
        place: Placement | None = plan(view, segments, size, len(names), phnum, where,
                                       old_kernels, append_only, previous, program, page)
    except Cfi2SframeError as refusal:
        if previous is not None:
            raise
        place, refused = None, refusal
    if previous is None:
        # The table grows where it is (which BFD's strip afterwards keeps sound) unless
        # that costs more than moving it and more than a page: the new segments' page
        # for a program (node's 480 KB .gnu.hash moves the table), the smallest page
        # for a library (AArch64's libstdc++ moves it rather than its 36 KB .gnu.hash).
        limit = None if place is None else place.end - size - len(data)
        if limit is not None:
            limit = max(limit, page if program else _smallest_page(view, where))
        done = _grow_table(view, segments, size, build, where, old, None, page, append_only,
                           limit)
        if done is not None:
            return done
        if place is None:
            raise refused
    assert place is not None
    sframe = build(place.sframe_address)
    if len(sframe) != size:
        raise AssertionError(f"the SFrame section is {len(sframe)} bytes, not {size}")
    # SFrame readers allow trailing zeros: written as a patch of their own, not
    # appended (``+=`` copied libLLVM-14's 5.4 MB section for 6 bytes: 1.3k faults).
    padding = place.sframe_at + size, bytes(place.sframe_size - size)
    size = place.sframe_size

    shdr = SHDR64[little]
    headers = [bytearray(data[s.header_at : s.header_at + SHDR_SIZE]) for s in view.sections]
    shdr.put(headers[shstrndx], 0, "sh_offset", place.cut)
    shdr.put(headers[shstrndx], 0, "sh_size", len(names))
    if old is not None:
        index = view.sections.index(old)
        shdr.put(headers[index], 0, "sh_name", name_old)
        shdr.put(headers[index], 0, "sh_type", SHT_PROGBITS)
    new_sframe = allocated_section(little, name_new, SHT_GNU_SFRAME, place.sframe_address,
                                   place.sframe_at, size)
    new_phdrs = allocated_section(little, name_phdrs, SHT_PROGBITS, place.cover_address,
                                  place.cover_at, place.end - place.cover_at)
    if previous is not None:
        headers[previous.sframe], headers[previous.phdrs] = new_sframe, new_phdrs
    else:
        headers += [new_sframe, new_phdrs]
    ehdr = EHDR64[little]
    elf_header = bytearray(data[:ehdr.size])
    ehdr.put(elf_header, 0, "e_phoff", place.phdrs_at)
    ehdr.put(elf_header, 0, "e_shoff", place.shdrs_at)
    ehdr.put(elf_header, 0, "e_phnum", phnum)
    ehdr.put(elf_header, 0, "e_shnum", len(headers))
    patches = ((0, bytes(elf_header)), (place.cut, names),
               (place.shdrs_at, b"".join(headers)), (place.sframe_at, sframe), padding,
               (place.phdrs_at, _program_headers(view, segments, place, size, phnum)))
    return PatchedCopy(place.end, data, place.cut, patches), place.sframe_address


def name_table(view: ElfView, *added: str) -> tuple[bytes, tuple[int, ...]]:
    """The section name table with ``added`` appended, and where each starts (the new
    sections' ``sh_name``), for both layouts.  An empty name adds nothing: its place
    is 0, the empty name every table starts with."""
    header = view.sections[view.shstrndx]
    names = bytearray(view.data[header.offset:header.offset + header.size])
    places = []
    for name in added:
        places.append(len(names) if name else 0)
        if name:
            names += name.encode() + b"\0"
    return bytes(names), tuple(places)


def _smallest_page(view: ElfView, where: str) -> int:
    """The target's smallest page (``Arch.min_page_size``)."""
    return arch_for_machine(view.machine, where, not view.little_endian).min_page_size


def segment_page(view: ElfView, segments: list[Segment], where: str) -> int:
    """The alignment of the segments a conversion adds: the file's own largest
    ``PT_LOAD`` alignment, but no more than the target's largest page, so that a
    library aligned to 2 MiB (older GNU ld's x86-64 default) does not grow by 2 MiB of
    zeros for each new segment; the kernel maps a segment by pages, not by its
    ``p_align``."""
    loads = [seg for seg in segments if seg.kind == PT_LOAD]
    if not loads:
        raise Cfi2SframeError(where, "the file has no loadable segments")
    largest = max(seg.align for seg in loads)
    if largest <= 0 or largest & (largest - 1):
        raise Cfi2SframeError(where, f"the segment alignment {largest:#x} is not a power "
                                     "of two")
    big_endian = not view.little_endian
    return min(largest, arch_for_machine(view.machine, where, big_endian).max_page_size)


def _grow_table(view: ElfView, segments: list[Segment], size: int,
                build: Callable[[int], bytes], where: str, old: Section | None,
                grown: Grown | None, page: int, append_only: bool,
                limit: int | None = None) -> tuple[PatchedCopy, int] | None:
    """The table grown where it is (``elf.grow``), or placed again in the segment an
    earlier such conversion added; None where the file gives no room for it, where it
    would grow by more than ``limit`` besides ``.sframe``, or (``append_only``) where
    it would change more than the first page."""
    data = view.data
    if grown is not None:
        names, _ = name_table(view)
        name_old = 0
        sframe, load = view.sections[grown.sframe], segments[grown.load]
        name_new = SHDR64.read(data, sframe.header_at, "sh_name", view.little_endian)
        inside = tuple(i for i, s in enumerate(view.sections) if i != grown.sframe
                       and s.flags & SHF_ALLOC and load.vaddr <= s.addr < sframe.addr)
        block = Block(load.offset, sframe.offset, load.vaddr, page, inside, True)
        old = None
    else:
        added = 1 + (0 if any(seg.kind == PT_GNU_SFRAME for seg in segments) else 1)
        if len(segments) + added >= PN_XNUM or len(view.sections) + 1 >= SHN_LORESERVE:
            return None
        room = find_room(view, segments, added)
        if room is None:
            return None
        block = Block(room.start, room.end, room.address, room.align, room.moved, False)
        names, (name_new, name_old) = name_table(
            view, ".sframe", ".sframe.old" if old is not None else "")
    cut = len(data) if append_only else _grown_tail(view, segments, grown, page)
    old_index = view.sections.index(old) if old is not None else None
    done = grow(view, segments, block, size, build, names, name_new, page, cut, where,
                grown, old_index, name_old, limit)
    if done is not None and append_only and any(at < len(data) and at + len(patch) > PAGE
                           for at, patch in done[0].patches):
        return None  # a same-inode rewrite changes the first page only
    return done


def _grown_tail(view: ElfView, segments: list[Segment], grown: Grown | None,
                page: int) -> int:
    """Where the old file can be cut for a grown table: before its section names and
    headers (and the segment an earlier conversion added) when those are its last
    bytes, apart by less than a page; else its end."""
    data = view.data
    names = view.sections[view.shstrndx]
    spans = [(names.offset, names.offset + names.size),
             (view.shoff, view.shoff + len(view.sections) * SHDR_SIZE)]
    ours: set[int] = {view.shstrndx}
    skip: set[int] = set()
    if grown is not None:
        load = segments[grown.load]
        spans.append((load.offset, load.offset + load.filesz))
        ours |= {i for i, s in enumerate(view.sections)
                 if s.flags & SHF_ALLOC and load.vaddr <= s.addr < load.vaddr + load.memsz}
        skip = {i for i, seg in enumerate(segments)
                if load.offset <= seg.offset < load.offset + load.filesz}
    tail = min(lo for lo, _ in spans)
    phoff, _, count = view.program_table()
    others = [s.offset + (0 if s.kind == SHT_NOBITS else s.size)
              for i, s in enumerate(view.sections) if i not in ours]
    others += [seg.offset + seg.filesz for i, seg in enumerate(segments) if i not in skip]
    others.append(phoff + count * PHDR_SIZE)
    if max(others) > tail:
        return len(data)
    at = tail
    for lo, hi in sorted(spans):
        if lo - at >= page:
            return len(data)
        at = max(at, hi)
    return tail if at == len(data) else len(data)


def _program_headers(view: ElfView, segments: list[Segment], place: Placement, size: int,
                     phnum: int) -> bytes:
    """The table, moved: a ``PT_NULL`` entry first, ``PT_PHDR`` describing the copy,
    the three new ``PT_LOAD``s after the last one (ascending addresses: A, B, C),
    ``PT_GNU_SFRAME`` reused or added."""
    little = view.little_endian
    page = place.page
    table = phnum * PHDR_SIZE
    cover = place.end - place.cover_at
    sframe = read_only_segment(little, PT_GNU_SFRAME, place.sframe_at, place.sframe_address,
                               size, 8)
    rows: list[bytes] = [PHDR64.pack(little, p_type=PT_NULL)]
    last_load = max(i for i, seg in enumerate(segments) if seg.kind == PT_LOAD)
    loads = sorted([(place.phdrs_address, place.phdrs_at, table),
                    (place.cover_address, place.cover_at, cover),
                    (place.sframe_address, place.sframe_at, size)])
    for i, seg in enumerate(segments):
        raw = view.data[seg.header_at : seg.header_at + PHDR_SIZE]
        if seg.kind == PT_PHDR:
            flags = PHDR64.read(raw, 0, "p_flags", little)
            raw = PHDR64.pack(little, p_type=PT_PHDR, p_flags=flags, p_offset=place.phdrs_at,
                              p_vaddr=place.phdrs_address, p_paddr=place.phdrs_address,
                              p_filesz=table, p_memsz=table, p_align=8)
        elif seg.kind == PT_GNU_SFRAME:
            raw = sframe
        rows.append(raw)
        if i == last_load:
            rows += [read_only_segment(little, PT_LOAD, at, address, length, page)
                     for address, at, length in loads]
    if len(rows) < phnum:
        rows.append(sframe)
    return b"".join(rows)


def replace_in_place(data: bytes, build: Callable[[int], bytes],
                     where: str) -> PatchedCopy | None:
    """``data`` with its ``.sframe`` contents replaced where they are, or None when the
    new section is larger than the old one, no ``PT_GNU_SFRAME`` describes it, or an
    earlier conversion of ours added it (``add_loadable_sframe`` places that again).

    ``build(address)`` gives the new section placed at ``address``.  Nothing
    moves: the bytes past the new end are zeroed, and the section header and
    ``PT_GNU_SFRAME`` get the new size (64-bit files, either byte order).
    """
    view = open_elf(data, "ELF file")
    old = view.section(".sframe")
    segments = view.segments()
    if (old is None or not view.is64 or previous_conversion(view, segments)
            or previous_growth(view, segments)):
        return None  # ours is placed again whole: a strip since may have moved it
    segment_at = next((seg.header_at for seg in view.segments()
                       if seg.kind == PT_GNU_SFRAME and seg.vaddr == old.addr), None)
    if segment_at is None:
        return None
    sframe = build(old.addr)
    if len(sframe) > old.size:
        return None
    little = view.little_endian
    section_header = bytearray(data[old.header_at:old.header_at + SHDR_SIZE])
    SHDR64.write(section_header, 0, "sh_size", len(sframe), little)
    segment = bytearray(data[segment_at:segment_at + PHDR_SIZE])
    PHDR64.write(segment, 0, "p_filesz", len(sframe), little)
    PHDR64.write(segment, 0, "p_memsz", len(sframe), little)
    patches = ((old.offset, sframe + bytes(old.size - len(sframe))),
               (old.header_at, bytes(section_header)), (segment_at, bytes(segment)))
    return PatchedCopy(len(data), data, len(data), patches)
