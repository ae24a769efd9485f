"""Mach-O, the second container: headers, sections, symbols and relocations of 64-bit
x86-64 and arm64 and 32-bit i386 objects and images, and the slices of a universal (fat)
file.

Written from Apple's <mach-o/loader.h>, <mach-o/nlist.h>, <mach-o/reloc.h> and
<mach-o/fat.h> layouts (all fields little-endian on these targets; the fat header
big-endian).  Errors are ``DecodeError`` at the offset of the field that is wrong.
"""

from __future__ import annotations

from functools import cached_property

from ..cstruct import CStruct
from ..errors import DecodeError
from ..typed import TYPE_CHECKING, NamedTuple
from .layout import (
    FAT_ARCH,
    FAT_ARCH_64,
    FAT_HEADER,
    LOAD_COMMAND,
    MACH_HEADER,
    NARROW,
    RELOCATION_INFO,
    SYMTAB_COMMAND,
    WIDE,
    Widths,
    relocation_fields,
    widths,
)

if TYPE_CHECKING:
    from typing import Final

MH_MAGIC, MH_MAGIC_64 = 0xFEEDFACE, 0xFEEDFACF
FAT_MAGIC, FAT_MAGIC_64 = 0xCAFEBABE, 0xCAFEBABF
LC_SYMTAB = 0x2
CPU_TYPE_I386, CPU_TYPE_X86_64, CPU_TYPE_ARM64 = 7, 0x01000007, 0x0100000C
MH_OBJECT, MH_EXECUTE, MH_DYLIB, MH_BUNDLE = 1, 2, 6, 8
N_TYPE, N_SECT, N_STAB, N_EXT = 0x0E, 0x0E, 0xE0, 0x01  # a symbol's n_type bits
# The compact unwind flavour (compact/) of each CPU type.
CPU_ARCH = {CPU_TYPE_X86_64: "x86_64", CPU_TYPE_ARM64: "arm64", CPU_TYPE_I386: "i386"}
FILE_TYPES = {MH_OBJECT: "object", MH_EXECUTE: "executable", MH_DYLIB: "dynamic library",
              MH_BUNDLE: "bundle"}


class Section(NamedTuple):
    """A section of a segment: ``number`` is 1-based, as symbols' ``n_sect`` count."""

    number: int
    segment: str
    name: str
    addr: int
    size: int
    offset: int
    reloff: int
    nreloc: int
    flags: int


class Segment(NamedTuple):
    """An ``LC_SEGMENT_64``: name, address and size in memory, offset and size in file."""

    name: str
    vmaddr: int
    vmsize: int
    fileoff: int
    filesize: int


class Symbol(NamedTuple):
    """An ``nlist_64`` entry: name, type byte, section (1-based, 0 for none), value."""

    name: str
    kind: int
    sect: int
    desc: int
    value: int

    @property
    def defined_in_section(self) -> bool:
        return not self.kind & N_STAB and self.kind & N_TYPE == N_SECT


class Reloc(NamedTuple):
    """A ``relocation_info``: where (section offset), the symbol or section number it
    names (``extern``: a symbol index, else a 1-based section), and its kind."""

    address: int
    number: int
    pcrel: bool
    length: int
    extern: bool
    kind: int


class MachoView:
    """One thin Mach-O file, 64-bit or (i386) 32-bit (a slice of a universal one:
    ``data`` is the slice).  A plain class (it keeps ``symbols`` and
    ``function_names``); its fields are not written after ``__init__``."""

    def __init__(self, data: bytes, cputype: int, filetype: int,
                 sections: tuple[Section, ...],
                 symtab: tuple[int, int, int, int] = (0, 0, 0, 0),
                 segments: tuple[Segment, ...] = (), pointer_size: int = 8) -> None:
        self.data: Final = data
        self.cputype: Final = cputype
        self.filetype: Final = filetype
        self.sections: Final = sections
        # LC_SYMTAB's (symoff, nsyms, stroff, strsize), checked to lie in the file; the
        # symbols are decoded when first asked for (a dump of 100k functions needs only
        # their names, which the compiled core reads from here).
        self.symtab: Final = symtab
        self.segments: Final = segments
        self.pointer_size: Final = pointer_size

    @property
    def arch(self) -> str:
        return CPU_ARCH[self.cputype]

    @property
    def image_base(self) -> int:
        """The address ``__unwind_info``'s offsets count from: the ``__TEXT`` segment's
        (0 for an object, which has one unnamed segment)."""
        return next((seg.vmaddr for seg in self.segments if seg.name == "__TEXT"), 0)

    @property
    def compact_unwind_entry(self) -> CStruct:
        """An ``__LD,__compact_unwind`` row's layout: pointers of the file's size around
        two 32-bit words (start, length, encoding, personality, LSDA)."""
        return widths(self.pointer_size).compact_unwind_entry

    def section(self, segment: str, name: str) -> Section | None:
        return next((s for s in self.sections if s.segment == segment and s.name == name),
                    None)

    def section_data(self, section: Section) -> bytes:
        return self.data[section.offset:section.offset + section.size]

    def bytes_at(self, address: int, size: int) -> bytes | None:
        """The file bytes of ``size`` bytes at ``address`` (None where no section with
        file contents holds them all): the code a function's prologue is read from."""
        for section in self.sections:
            if section.addr <= address and address + size <= section.addr + section.size \
                    and section.offset:
                at = section.offset + address - section.addr
                return self.data[at:at + size]
        return None

    def relocations(self, section: Section) -> list[Reloc]:
        """The section's relocations in file order (objects only have them)."""
        out = []
        size = RELOCATION_INFO.size
        for i in range(section.nreloc):
            at = section.reloff + size * i
            _need(self.data, at, size, f"relocation {i} of {section.segment},{section.name}")
            # (a scattered one holds the target's address, as a section relocation's
            # field does: symbol number 0, not extern)
            out.append(Reloc(*relocation_fields(*RELOCATION_INFO.unpack_from(self.data, at))))
        return out

    @cached_property
    def symbols(self) -> tuple[Symbol, ...]:
        """The ``nlist`` entries in file order."""
        symoff, nsyms, stroff, strsize = self.symtab
        nlist = widths(self.pointer_size).nlist
        data = self.data
        strings = data[stroff:stroff + strsize]
        out = []
        # Each name is read up to its NUL (slicing the rest of the table for every
        # symbol made reading 100k symbols quadratic: 9 s).
        for strx, kind, sect, desc, value in nlist.iter_unpack(
                data[symoff:symoff + nlist.size * nsyms]):
            if strx < strsize:
                end = strings.find(b"\0", strx)
                name = strings[strx:end if end >= 0 else strsize].decode("utf-8", "replace")
            else:
                name = ""
            out.append(Symbol(name, kind, sect, desc, value))
        return tuple(out)

    @cached_property
    def function_names(self) -> dict[int, str]:
        """Address -> the name of a symbol defined there (a global one first)."""
        names: dict[int, str] = {}
        for symbol in sorted(self.symbols, key=lambda s: not s.kind & N_EXT):  # global first
            if symbol.defined_in_section and symbol.name:
                names.setdefault(symbol.value, symbol.name)
        return names


def _need(data: bytes, at: int, size: int, what: str) -> None:
    if at < 0 or at + size > len(data):
        raise DecodeError(at, f"{what} runs past the end of the file ({len(data)} bytes)")


def _cstr(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def fat_slices(data: bytes) -> list[tuple[int, int, int]]:
    """(cputype, offset, size) of each slice of a universal file."""
    magic, count = FAT_HEADER.unpack_from(data, 0)
    entry = FAT_ARCH_64 if magic == FAT_MAGIC_64 else FAT_ARCH
    out = []
    for i in range(count):
        at = FAT_HEADER.size + entry.size * i
        _need(data, at, entry.size, f"fat_arch {i}")
        cputype, _, offset, size, *_ = entry.unpack_from(data, at)
        _need(data, offset, size, f"slice {i}")
        out.append((cputype & 0xFFFFFFFF, offset, size))
    return out


def _slice(data: bytes, arch: str | None) -> bytes:
    """The slice of a universal file for ``arch`` (any, where it has one we read)."""
    slices = [(CPU_ARCH[cpu], offset, size) for cpu, offset, size in fat_slices(data)
              if cpu in CPU_ARCH]
    chosen = [s for s in slices if arch is None or s[0] == arch]
    if not chosen:
        have = ", ".join(s[0] for s in slices) or "none we read"
        raise DecodeError(0, f"the universal file has no {arch or 'x86_64 or arm64'} "
                             f"slice (it has {have})")
    if len(chosen) > 1:
        raise DecodeError(0, "the universal file has slices for "
                             f"{', '.join(s[0] for s in chosen)}: pick one with --arch")
    _, offset, size = chosen[0]
    return data[offset:offset + size]


def open_macho(data: bytes, arch: str | None = None) -> MachoView:
    """The thin file, or the slice of a universal file for ``arch`` (``x86_64`` or
    ``arm64``; required when it has more than one slice we read)."""
    if len(data) >= FAT_HEADER.size and FAT_HEADER.get(data, 0, "magic") in (FAT_MAGIC,
                                                                            FAT_MAGIC_64):
        return open_macho(_slice(data, arch))
    _need(data, 0, MACH_HEADER.size, "the Mach-O header")
    magic, cputype, _, filetype, ncmds, sizeofcmds, _ = MACH_HEADER.unpack_from(data, 0)
    if magic not in (MH_MAGIC, MH_MAGIC_64):
        raise DecodeError(0, f"not a little-endian Mach-O file (magic {magic:#x})")
    form = WIDE if magic == MH_MAGIC_64 else NARROW
    cputype &= 0xFFFFFFFF
    if cputype not in CPU_ARCH:
        raise DecodeError(MACH_HEADER.offset("cputype"),
                          f"CPU type {cputype:#x} is not x86-64 or arm64")
    if arch is not None and CPU_ARCH[cputype] != arch:
        raise DecodeError(MACH_HEADER.offset("cputype"),
                          f"a {CPU_ARCH[cputype]} file, not {arch}")
    header = form.header.size
    _need(data, header, sizeofcmds, f"the {ncmds} load commands")
    sections: list[Section] = []
    symtab = (0, 0, 0, 0)
    segments: list[Segment] = []
    at = header
    for i in range(ncmds):
        _need(data, at, LOAD_COMMAND.size, f"load command {i}")
        cmd, size = LOAD_COMMAND.unpack_from(data, at)
        if size < LOAD_COMMAND.size or at + size > header + sizeofcmds:
            raise DecodeError(at + LOAD_COMMAND.offset("cmdsize"),
                              f"load command {i} has a size of {size}")
        if cmd == form.segment_cmd:
            segments.append(_segment(data, at, size, i, form, sections))
        elif cmd == LC_SYMTAB:
            symtab = _symtab(data, at, form)
        at += size
    return MachoView(data, cputype, filetype, tuple(sections), symtab, tuple(segments),
                     form.pointer)


def _segment(data: bytes, at: int, size: int, i: int, form: Widths,
             sections: list[Section]) -> Segment:
    """Segment command ``i`` (``size`` bytes at ``at``); its sections appended to
    ``sections``, numbered on from those before."""
    layout, section = form.segment, form.section
    _need(data, at, layout.size, f"segment command {i}")
    (_, _, segname, vmaddr, vmsize, fileoff, filesize, _, _, nsects,
     _) = layout.unpack_from(data, at)
    if layout.size + section.size * nsects > size:
        raise DecodeError(at + layout.offset("nsects"), f"segment command {i}: {nsects} "
                                                        f"sections do not fit in {size} bytes")
    for j in range(nsects):
        (sectname, sect_segname, addr, sect_size, offset, _, reloff, nreloc, flags,
         *_) = section.unpack_from(data, at + layout.size + section.size * j)
        sections.append(Section(len(sections) + 1, _cstr(sect_segname), _cstr(sectname),
                                addr, sect_size, offset, reloff, nreloc, flags))
    return Segment(_cstr(segname), vmaddr, vmsize, fileoff, filesize)


def _symtab(data: bytes, at: int, form: Widths) -> tuple[int, int, int, int]:
    """LC_SYMTAB's (symoff, nsyms, stroff, strsize), checked to lie in the file."""
    _, _, symoff, nsyms, stroff, strsize = SYMTAB_COMMAND.unpack_from(data, at)
    _need(data, symoff, form.nlist.size * nsyms, "the symbol table")
    _need(data, stroff, strsize, "the string table")
    return symoff, nsyms, stroff, strsize
