"""Is a linked ELF file's container sound: do its sections sit in its segments?

The loader maps segments and ignores sections; strip, objcopy, eu-strip and
debuggers work from sections and rebuild the segments from them.  A file whose
two views disagree runs but breaks after the next tool (binutils 2.40 strip
crashed such programs; see docs/post-link.md).  ``verify`` reports
each problem found here, so a file strip would break does not pass.

The rules, from the gABI and what the Linux loader and glibc's ld.so require:

- every ``PT_LOAD``: alignment a power of two and at least a page, offset and
  address congruent modulo it, file part inside the file, not larger in the file
  than in memory; ``PT_LOAD`` entries in ascending address order, their pages
  not overlapping in memory;
- every allocated section inside a ``PT_LOAD`` (memory), and for a section with
  file contents at the offset that segment maps to its address;
- ``PT_PHDR`` (the table itself) and the segments the loader or unwinders read
  (``PT_INTERP``, ``PT_DYNAMIC``, ``PT_NOTE``, ``PT_TLS``, ``PT_GNU_EH_FRAME``,
  ``PT_GNU_SFRAME``, ...) mapped by a ``PT_LOAD`` at matching offset and address;
  ``PT_PHDR`` before every ``PT_LOAD`` and describing the table ``e_phoff`` names;
- no two sections, nor a section and the section header table, share file bytes;
- a program header table that lies between sections is covered by them, but for a
  leading PT_NULL entry's first 8 bytes: libelf (eu-strip) zero-fills the file
  bytes between sections that no section holds.
"""

from __future__ import annotations

from itertools import pairwise

from ..typed import NamedTuple
from .read import (
    PT_DYNAMIC,
    PT_GNU_EH_FRAME,
    PT_GNU_PROPERTY,
    PT_GNU_RELRO,
    PT_GNU_SFRAME,
    PT_INTERP,
    PT_LOAD,
    PT_NOTE,
    PT_PHDR,
    PT_TLS,
    SHF_ALLOC,
    SHT_NOBITS,
    ElfView,
    Section,
    Segment,
)
from .structs import SHDR

SHF_TLS = 0x400

# The segments whose bytes someone reads from memory, so a PT_LOAD must map them.
MAPPED = {PT_INTERP: "PT_INTERP", PT_DYNAMIC: "PT_DYNAMIC", PT_NOTE: "PT_NOTE",
          PT_PHDR: "PT_PHDR", PT_TLS: "PT_TLS", PT_GNU_EH_FRAME: "PT_GNU_EH_FRAME",
          PT_GNU_RELRO: "PT_GNU_RELRO", PT_GNU_PROPERTY: "PT_GNU_PROPERTY",
          PT_GNU_SFRAME: "PT_GNU_SFRAME"}


# A PT_LOAD as (offset, vaddr, filesz, memsz).
Mapping = tuple[int, int, int, int]


class Problem(NamedTuple):
    """One broken rule: where (the file offset of the header at fault) and what."""

    at: int
    text: str


def _load_mapping(loads: list[Mapping], offset: int, address: int,
                  size: int) -> bool:
    """Some PT_LOAD (offset, vaddr, filesz, memsz) maps file bytes [offset, +size)
    to memory at ``address``."""
    return any(seg_off <= offset and offset + size <= seg_off + filesz
               and address - vaddr == offset - seg_off
               for seg_off, vaddr, filesz, _ in loads)


def layout_problems(view: ElfView, page: int) -> list[Problem]:
    """The container rules ``view`` breaks (none for a relocatable object).

    ``page``: the smallest page size of the target; a ``PT_LOAD`` aligned to
    less cannot be mapped where its address says on every kernel.
    """
    if view.elf_type not in ("ET_EXEC", "ET_DYN"):
        return []
    segments = view.segments()
    loads = [seg for seg in segments if seg.kind == PT_LOAD]
    if not loads:
        return [Problem(view.header_offsets[0], "the program header table has no "
                        "PT_LOAD: nothing of the file would be loaded")] if segments else []
    problems: list[Problem] = []
    size = len(view.data)
    for seg in loads:
        where = f"PT_LOAD [{seg.vaddr:#x}, {seg.vaddr + seg.memsz:#x})"
        if seg.align < page or seg.align & (seg.align - 1):
            problems.append(Problem(seg.header_at, f"{where} is aligned to {seg.align:#x}, "
                                    f"not to a page ({page:#x} or a larger power of two)"))
        elif seg.offset % seg.align != seg.vaddr % seg.align:
            problems.append(Problem(seg.header_at, f"{where}: offset {seg.offset:#x} and "
                                    f"address differ modulo its alignment {seg.align:#x}"))
        if seg.filesz > seg.memsz:
            problems.append(Problem(seg.header_at, f"{where} has more bytes in the file "
                                    f"({seg.filesz:#x}) than in memory"))
        if seg.offset + seg.filesz > size:
            problems.append(Problem(seg.header_at, f"{where} runs past the end of the file"))
    for before, after in pairwise(loads):
        if after.vaddr < before.vaddr:
            problems.append(Problem(after.header_at, f"PT_LOAD at {after.vaddr:#x} follows "
                                    f"one at {before.vaddr:#x}: not in ascending order"))
        elif (before.vaddr + before.memsz + page - 1) // page > after.vaddr // page:
            problems.append(Problem(after.header_at, f"PT_LOAD at {after.vaddr:#x} shares a "
                                    f"page with the PT_LOAD at {before.vaddr:#x}"))
    mapping = [(seg.offset, seg.vaddr, seg.filesz, seg.memsz) for seg in loads]
    problems += _segments_mapped(view, segments, mapping)
    problems += _sections_mapped(view, mapping)
    problems += _sections_apart(view)
    return problems


def _segments_mapped(view: ElfView, segments: list[Segment], mapping: list[Mapping]
                     ) -> list[Problem]:
    """PT_PHDR and the segments read from memory are mapped; the table is safe."""
    phoff, entsize, _ = view.program_table()
    problems = []
    first_load = next(i for i, seg in enumerate(segments) if seg.kind == PT_LOAD)
    for index, seg in enumerate(segments):
        name = MAPPED.get(seg.kind)
        if name is None or not seg.filesz:
            continue
        if not _load_mapping(mapping, seg.offset, seg.vaddr, seg.filesz):
            problems.append(Problem(seg.header_at, f"{name} [{seg.vaddr:#x}, "
                                    f"{seg.vaddr + seg.filesz:#x}) at offset {seg.offset:#x} "
                                    "is not where a PT_LOAD maps it"))
        if seg.kind == PT_PHDR:
            if seg.offset != phoff or seg.filesz != len(segments) * entsize:
                problems.append(Problem(seg.header_at, f"PT_PHDR (offset {seg.offset:#x}, "
                                        f"{seg.filesz} bytes) is not the program header "
                                        f"table ({phoff:#x}, {len(segments) * entsize})"))
            if index > first_load:
                problems.append(Problem(seg.header_at, "PT_PHDR follows a PT_LOAD"))
    end = phoff + len(segments) * entsize
    contents = [s for s in view.sections if s.kind != SHT_NOBITS and s.size]
    if any(s.offset < phoff for s in contents) and any(s.offset >= end for s in contents):
        # Between sections: libelf zero-fills what no section covers.  The first 8
        # bytes may stay bare if they are a PT_NULL entry's type and flags (zero).
        bare = _uncovered(phoff, end, [(s.offset, s.offset + s.size) for s in contents])
        allowed = [(phoff, phoff + 8)] if segments[0].kind == 0 else []
        if bare and bare != allowed:
            problems.append(Problem(view.header_offsets[0], f"the program header table "
                                    f"at offset {phoff:#x} lies between sections and no "
                                    "section covers it: libelf (eu-strip) zero-fills it when "
                                    "it rewrites the file"))
    return problems


def _uncovered(start: int, end: int, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of [start, end) that no span covers."""
    bare = []
    at = start
    for lo, hi in sorted(spans):
        if hi <= at or lo >= end:
            continue
        if lo > at:
            bare.append((at, lo))
        at = max(at, hi)
    if at < end:
        bare.append((at, end))
    return bare


def _sections_mapped(view: ElfView, mapping: list[Mapping]) -> list[Problem]:
    """Every allocated section lies in a PT_LOAD, its contents where it maps them."""
    problems = []
    for section in view.sections:
        if not section.flags & SHF_ALLOC:
            continue
        nobits = section.kind == SHT_NOBITS
        if nobits and section.flags & SHF_TLS:
            continue  # .tbss takes no address space of its own
        # size of a NOBITS section is 0 in Section; its extent is the header's
        extent = _header_size(view, section.header_at) if nobits else section.size
        if not extent:
            continue
        addr, offset = section.addr, section.offset
        end, file_end = addr + extent, offset + extent
        inside = mapped = False
        for seg_off, vaddr, filesz, memsz in mapping:  # (_load_mapping's test, inline)
            inside = inside or (vaddr <= addr and end <= vaddr + memsz)
            mapped = mapped or (seg_off <= offset and file_end <= seg_off + filesz
                                and addr - vaddr == offset - seg_off)
        if not inside:
            problems.append(Problem(section.header_at, f"{_where(section, extent)} is "
                                    "outside every PT_LOAD"))
        elif not nobits and not mapped:
            problems.append(Problem(section.header_at, f"{_where(section, extent)} is at "
                                    f"offset {section.offset:#x}, not where its PT_LOAD "
                                    "maps that address"))
    return problems


def _where(section: Section, extent: int) -> str:
    """A section as a problem names it (made only for a problem: most files have none)."""
    return f"section '{section.name}' [{section.addr:#x}, {section.addr + extent:#x})"


def _header_size(view: ElfView, header_at: int) -> int:
    """sh_size as the header says (``Section.size`` is 0 for NOBITS)."""
    return SHDR[view.is64].read(view.data, header_at, "sh_size", view.little_endian)


def _sections_apart(view: ElfView) -> list[Problem]:
    """Sections with file contents (and the section header table) share no bytes and lie
    inside the file."""
    spans = [(s.offset, s.offset + s.size, f"section '{s.name}'", s.header_at)
             for s in view.sections if s.kind != SHT_NOBITS and s.size]
    spans.append((view.shoff, view.shoff + len(view.sections) * view.shentsize,
                  "the section header table", view.header_offsets[1]))
    spans.sort()
    size = len(view.data)
    problems = [Problem(at, f"{what} at offset {start:#x} runs past the end of the file "
                            f"({size:#x} bytes)")
                for start, end, what, at in spans if end > size]
    reach = spans[0] if spans else None
    for span in spans[1:]:
        assert reach is not None
        if span[0] < reach[1]:
            problems.append(Problem(span[3], f"{span[2]} at offset {span[0]:#x} overlaps "
                                    f"{reach[2]}, which ends at {reach[1]:#x}"))
        if span[1] > reach[1]:
            reach = span
    return problems
