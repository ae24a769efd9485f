"""Mach-O, the second container: headers, sections, symbols and relocations of 64-bit
x86-64 and arm64 and 32-bit i386 objects and images, and the slices of a universal (fat)
file.

Written from Apple's <mach-o/loader.h>, <mach-o/nlist.h>, <mach-o/reloc.h> and
<mach-o/fat.h> layouts (all fields little-endian on these targets; the fat header
big-endian).  Errors are ``DecodeError`` at the offset of the field that is wrong.
"""

from __future__ import annotations

import struct
from functools import cached_property
from typing import Final, NamedTuple

from ..errors import DecodeError

MH_MAGIC, MH_MAGIC_64 = 0xFEEDFACE, 0xFEEDFACF
FAT_MAGIC, FAT_MAGIC_64 = 0xCAFEBABE, 0xCAFEBABF
LC_SEGMENT, LC_SEGMENT_64, LC_SYMTAB = 0x1, 0x19, 0x2
CPU_TYPE_I386, CPU_TYPE_X86_64, CPU_TYPE_ARM64 = 7, 0x01000007, 0x0100000C
R_SCATTERED = 0x80000000  # a scattered relocation_info (32-bit files): the target's address
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
    def compact_unwind_layout(self) -> tuple[int, str]:
        """An ``__LD,__compact_unwind`` row's size and ``struct`` layout: pointers of
        the file's size around two 32-bit words (start, length, encoding, personality,
        LSDA)."""
        return (32, "<QIIQQ") if self.pointer_size == 8 else (20, "<IIIII")

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
        for i in range(section.nreloc):
            at = section.reloff + 8 * i
            _need(self.data, at, 8, f"relocation {i} of {section.segment},{section.name}")
            address, info = struct.unpack_from("<II", self.data, at)
            if address & R_SCATTERED:  # the field holds the target's address, as a
                # section relocation's does
                out.append(Reloc(address & 0xFFFFFF, 0, bool(address >> 30 & 1),
                                 address >> 28 & 3, False, address >> 24 & 0xF))
                continue
            out.append(Reloc(address, info & 0xFFFFFF, bool(info >> 24 & 1), info >> 25 & 3,
                             bool(info >> 27 & 1), info >> 28))
        return out

    @cached_property
    def symbols(self) -> tuple[Symbol, ...]:
        """The ``nlist`` entries in file order."""
        symoff, nsyms, stroff, strsize = self.symtab
        entry, nlist = (16, "<IBBhQ") if self.pointer_size == 8 else (12, "<IBBhI")
        data = self.data
        strings = data[stroff:stroff + strsize]
        out = []
        # Each name is read up to its NUL (slicing the rest of the table for every
        # symbol made reading 100k symbols quadratic: 9 s).
        for strx, kind, sect, desc, value in struct.iter_unpack(
                nlist, data[symoff:symoff + entry * nsyms]):
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
    magic, count = struct.unpack_from(">II", data, 0)
    wide = magic == FAT_MAGIC_64
    entry = 32 if wide else 20
    out = []
    for i in range(count):
        at = 8 + entry * i
        _need(data, at, entry, f"fat_arch {i}")
        if wide:
            cputype, _, offset, size = struct.unpack_from(">iiQQ", data, at)
        else:
            cputype, _, offset, size = struct.unpack_from(">iiII", data, at)
        _need(data, offset, size, f"slice {i}")
        out.append((cputype & 0xFFFFFFFF, offset, size))
    return out


def open_macho(data: bytes, arch: str | None = None) -> MachoView:
    """The thin file, or the slice of a universal file for ``arch`` (``x86_64`` or
    ``arm64``; required when it has more than one slice we read)."""
    if len(data) >= 8 and struct.unpack_from(">I", data, 0)[0] in (FAT_MAGIC, FAT_MAGIC_64):
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
        return open_macho(data[offset:offset + size])
    _need(data, 0, 28, "the Mach-O header")
    magic, cputype, _, filetype, ncmds, sizeofcmds = struct.unpack_from("<IiiIII", data, 0)
    if magic not in (MH_MAGIC, MH_MAGIC_64):
        raise DecodeError(0, f"not a little-endian Mach-O file (magic {magic:#x})")
    wide = magic == MH_MAGIC_64
    header = 32 if wide else 28
    cputype &= 0xFFFFFFFF
    if cputype not in CPU_ARCH:
        raise DecodeError(4, f"CPU type {cputype:#x} is not x86-64 or arm64")
    if arch is not None and CPU_ARCH[cputype] != arch:
        raise DecodeError(4, f"a {CPU_ARCH[cputype]} file, not {arch}")
    _need(data, header, sizeofcmds, f"the {ncmds} load commands")
    sections: list[Section] = []
    symtab = (0, 0, 0, 0)
    segments: list[Segment] = []
    # 64-bit: LC_SEGMENT_64 (72 bytes) and 80-byte sections; 32-bit: 56 and 68 bytes.
    segment_cmd, seg_fmt, sect_fmt = ((LC_SEGMENT_64, "<16sQQQQ", "<16s16sQQIIIII") if wide
                                      else (LC_SEGMENT, "<16sIIII", "<16s16sIIIIIII"))
    seg_size, sect_size_of = (72, 80) if wide else (56, 68)
    at = header
    for i in range(ncmds):
        _need(data, at, 8, f"load command {i}")
        cmd, size = struct.unpack_from("<II", data, at)
        if size < 8 or at + size > header + sizeofcmds:
            raise DecodeError(at + 4, f"load command {i} has a size of {size}")
        if cmd == segment_cmd:
            _need(data, at, seg_size, f"segment command {i}")
            segname, vmaddr, vmsize, fileoff, filesize = struct.unpack_from(seg_fmt, data,
                                                                            at + 8)
            segments.append(Segment(_cstr(segname), vmaddr, vmsize, fileoff, filesize))
            nsects = struct.unpack_from("<I", data, at + seg_size - 8)[0]
            if seg_size + sect_size_of * nsects > size:
                raise DecodeError(at + seg_size - 8, f"segment command {i}: {nsects} sections "
                                                     f"do not fit in {size} bytes")
            for j in range(nsects):
                s = at + seg_size + sect_size_of * j
                (sectname, segname, addr, sect_size, offset, _, reloff, nreloc,
                 flags) = struct.unpack_from(sect_fmt, data, s)
                sections.append(Section(len(sections) + 1, _cstr(segname), _cstr(sectname),
                                        addr, sect_size, offset, reloff, nreloc, flags))
        elif cmd == LC_SYMTAB:
            symoff, nsyms, stroff, strsize = struct.unpack_from("<IIII", data, at + 8)
            _need(data, symoff, (16 if wide else 12) * nsyms, "the symbol table")
            _need(data, stroff, strsize, "the string table")
            symtab = (symoff, nsyms, stroff, strsize)
        at += size
    return MachoView(data, cputype, filetype, tuple(sections), symtab, tuple(segments),
                     8 if wide else 4)
