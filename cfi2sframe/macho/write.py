"""A Mach-O object laid out again with a new ``__LD,__compact_unwind`` section.

An object whose toolchain wrote no compact unwind (LLVM for macOS before 10.6, other
assemblers), or whose rows are replaced by a different number of rows (``--ranges``:
one per CFI state), gets the section, its rows and their relocations as LLVM lays
them out (``macho/unwind.py``): the function start a section relocation (the field
holds the function's address), the personality routine a symbol relocation (the
field holds 0), the LSDA a section relocation.

The file is written again from its parts, in their order: header and load commands
(one more section header when the section is new), each section's bytes at its
alignment, each section's relocations, then the symbol, indirect-symbol and string
tables and the other link-edit data, every offset that names them rewritten.  Load
commands of which we do not know whether they hold file offsets are refused, so that
nothing is left pointing at the wrong bytes.  Symbols' section numbers stay valid:
a new section comes last.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from ..errors import DecodeError
from .read import LC_SEGMENT, LC_SEGMENT_64, LC_SYMTAB, MH_OBJECT, MachoView

LC_DYSYMTAB = 0xB
# linkedit_data_command: (cmd, cmdsize, dataoff, datasize)
LINKEDIT_DATA = {0x26: "LC_FUNCTION_STARTS", 0x29: "LC_DATA_IN_CODE",
                 0x2E: "LC_LINKER_OPTIMIZATION_HINT", 0x1E: "LC_SEGMENT_SPLIT_INFO"}
# Load commands with no file offset in them, as objects carry them.
NO_OFFSETS = {0x24: "LC_VERSION_MIN_MACOSX", 0x25: "LC_VERSION_MIN_IPHONEOS",
              0x2F: "LC_VERSION_MIN_TVOS", 0x30: "LC_VERSION_MIN_WATCHOS",
              0x32: "LC_BUILD_VERSION", 0x2D: "LC_LINKER_OPTION", 0x1B: "LC_UUID",
              0x2A: "LC_SOURCE_VERSION"}
S_ATTR_DEBUG = 0x02000000  # how LLVM flags __compact_unwind
ZEROFILL = (0x1, 0xC, 0x12)  # S_ZEROFILL, S_GB_ZEROFILL, S_THREAD_LOCAL_ZEROFILL


class NewRow(NamedTuple):
    """One row to write: the function's address and length, the encoding, the
    personality routine's symbol index (None without one) and the LSDA's address."""

    start: int
    length: int
    encoding: int
    personality_symbol: int | None
    lsda: int | None


def _align(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


def _section_of(view: MachoView, address: int) -> int:
    """The 1-based number of the section holding ``address``."""
    for section in view.sections:
        if section.addr <= address < section.addr + max(section.size, 1):
            return section.number
    raise DecodeError(0, f"no section holds address {address:#x}")


def _reloc(address: int, symbolnum: int, length: int, extern: bool) -> bytes:
    """An unsigned (type 0), absolute relocation_info."""
    return struct.pack("<II", address, symbolnum | length << 25 | int(extern) << 27)


def _rows(view: MachoView, rows: list[NewRow]) -> tuple[bytes, bytes]:
    """The section's bytes and its relocations."""
    pointer = view.pointer_size
    fmt = "<QIIQQ" if pointer == 8 else "<IIIII"
    length = 3 if pointer == 8 else 2
    data, relocs = bytearray(), bytearray()
    for i, row in enumerate(rows):
        at = i * struct.calcsize(fmt)
        data += struct.pack(fmt, row.start, row.length, row.encoding, 0, row.lsda or 0)
        relocs += _reloc(at, _section_of(view, row.start), length, False)
        if row.personality_symbol is not None:
            relocs += _reloc(at + pointer + 8, row.personality_symbol, length, True)
        if row.lsda:
            relocs += _reloc(at + 2 * pointer + 8, _section_of(view, row.lsda), length, False)
    return bytes(data), bytes(relocs)


def with_compact_unwind(view: MachoView, rows: list[NewRow]) -> bytes:
    """The object with ``rows`` as its ``__LD,__compact_unwind`` (replacing the one it
    has, or added after its last section)."""
    if view.filetype != MH_OBJECT:
        raise DecodeError(12, "only an object's __compact_unwind is written")
    data = view.data
    wide = view.pointer_size == 8
    header_size = 32 if wide else 28
    seg_cmd, seg_size, sect_size = ((LC_SEGMENT_64, 72, 80) if wide else (LC_SEGMENT, 56, 68))
    _, _, _, _, ncmds, sizeofcmds = struct.unpack_from("<IiiIII", data, 0)
    commands = []
    at = header_size
    for _ in range(ncmds):
        cmd, size = struct.unpack_from("<II", data, at)
        commands.append((at, cmd, bytearray(data[at:at + size])))
        at += size
    segments = [c for c in commands if c[1] == seg_cmd]
    if len(segments) != 1:
        raise DecodeError(header_size, f"an object has one segment command; this one has "
                                       f"{len(segments)}")
    for where, cmd, _ in commands:
        if cmd not in (seg_cmd, LC_SYMTAB, LC_DYSYMTAB, *LINKEDIT_DATA, *NO_OFFSETS):
            raise DecodeError(where, f"load command {cmd:#x}: not known to hold no file "
                                     "offsets, so the object is not laid out again")
    old = view.section("__LD", "__compact_unwind")
    new_data, new_relocs = _rows(view, rows)
    segment = segments[0][2]
    nsects = struct.unpack_from("<I", segment, seg_size - 8)[0]
    headers = [bytearray(segment[seg_size + sect_size * i:seg_size + sect_size * (i + 1)])
               for i in range(nsects)]
    contents = [view.section_data(s) if s.offset else b"" for s in view.sections]
    relocations = [data[s.reloff:s.reloff + 8 * s.nreloc] for s in view.sections]
    if old is None:  # a new section header: addresses after the last section
        end = max((s.addr + s.size for s in view.sections), default=0)
        name = b"__compact_unwind".ljust(16, b"\0") + b"__LD".ljust(16, b"\0")
        addr = _align(end, 8)
        fields = (name + struct.pack("<QQIIIIIIII" if wide else "<IIIIIIIII",
                                     addr, len(new_data), 0, 3, 0, 0, S_ATTR_DEBUG, 0, 0,
                                     *((0,) if wide else ())))
        headers.append(bytearray(fields))
        contents.append(new_data)
        relocations.append(new_relocs)
        index = len(headers) - 1
    else:
        index = old.number - 1
        contents[index] = new_data
        relocations[index] = new_relocs
        if len(new_data) > old.size:  # it grew: after the last section, overlapping none
            end = max(s.addr + s.size for s in view.sections)
            struct.pack_into("<Q" if wide else "<I", headers[index], 32, _align(end, 8))
    # sizes: the section's size, the segment's command and extent
    size_at, reloc_at = (40, 56) if wide else (36, 48)
    struct.pack_into("<Q" if wide else "<I", headers[index], size_at, len(new_data))
    new_sizeofcmds = sizeofcmds + sect_size * (len(headers) - nsects)
    out = bytearray(header_size + new_sizeofcmds)
    # section data, in the order of the old file offsets, each at its alignment
    order = sorted(range(len(headers)), key=lambda i: (
        view.sections[i].offset if i < len(view.sections) and view.sections[i].offset
        else 1 << 62, i))
    first = None
    offsets: dict[int, int] = {}
    for i in order:
        flags = struct.unpack_from("<I", headers[i], reloc_at + 8)[0]
        if flags & 0xFF in ZEROFILL:
            offsets[i] = 0
            continue
        align = 1 << struct.unpack_from("<I", headers[i], reloc_at - 4)[0]
        pos = _align(len(out), min(align, 4096))
        out += bytes(pos - len(out))
        offsets[i] = pos
        first = pos if first is None else first
        out += contents[i]
    data_end = len(out)
    addrs = [struct.unpack_from("<Q" if wide else "<I", h, 32)[0] for h in headers]
    sizes = [struct.unpack_from("<Q" if wide else "<I", h, size_at)[0] for h in headers]
    vm_start = min(addrs, default=0)
    vm_end = max((a + s for a, s in zip(addrs, sizes, strict=True)), default=0)
    for i, header in enumerate(headers):
        struct.pack_into("<I", header, reloc_at - 8, offsets[i])
    # relocations, section by section
    out += bytes(_align(len(out), 8) - len(out))
    for i, block in enumerate(relocations):
        struct.pack_into("<II", headers[i], reloc_at, len(out) if block else 0,
                         len(block) // 8)
        out += block
    # the segment command, now with every section's offsets
    segment_bytes = bytearray(segment[:seg_size]) + b"".join(headers)
    struct.pack_into("<I", segment_bytes, 4, len(segment_bytes))
    struct.pack_into("<I", segment_bytes, seg_size - 8, len(headers))
    fileoff = first if first is not None else header_size + new_sizeofcmds
    filesize = data_end - fileoff
    struct.pack_into("<QQQQ" if wide else "<IIII", segment_bytes, 24, vm_start,
                     max(vm_end - vm_start, filesize), fileoff, filesize)
    # link-edit data, in the old order
    pieces = []
    for _, cmd, body in commands:
        if cmd == LC_SYMTAB:
            symoff, nsyms, stroff, strsize = struct.unpack_from("<IIII", body, 8)
            pieces += [(symoff, nsyms * (16 if wide else 12), body, 8),
                       (stroff, strsize, body, 16)]
        elif cmd == LC_DYSYMTAB:
            # toc, modtab, extrefsym, indirectsym, extrel, locrel: (offset, count) each
            for field, entry in ((32, 8), (40, 56 if wide else 52), (48, 4), (56, 4),
                                 (64, 8), (72, 8)):
                off, count = struct.unpack_from("<II", body, field)
                if off:
                    pieces.append((off, count * entry, body, field))
        elif cmd in LINKEDIT_DATA:
            off, size = struct.unpack_from("<II", body, 8)
            if off:
                pieces.append((off, size, body, 8))
    for off, size, body, field in sorted(pieces, key=lambda p: p[0]):
        pos = _align(len(out), 8) if field != 16 else len(out)
        out += bytes(pos - len(out))
        struct.pack_into("<I", body, field, pos)
        out += data[off:off + size]
    # header and load commands
    out[:header_size] = data[:header_size]
    struct.pack_into("<I", out, 16, ncmds)
    struct.pack_into("<I", out, 20, new_sizeofcmds)
    at = header_size
    for _, cmd, body in commands:
        piece = segment_bytes if cmd == seg_cmd else body
        out[at:at + len(piece)] = piece
        at += len(piece)
    return bytes(out)
