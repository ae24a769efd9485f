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

Two steps: a plan of every offset (``_plan``: contents, relocations, link-edit tables,
the segment and commands naming them), then the bytes (``_write``).
"""

from __future__ import annotations

from ..cstruct import CStruct
from ..errors import DecodeError
from ..typed import TYPE_CHECKING, NamedTuple
from .layout import (
    DYLIB_TABLE_OF_CONTENTS_SIZE,
    DYSYMTAB_COMMAND,
    DYSYMTAB_TABLES,
    INDEX,
    LINKEDIT_DATA_COMMAND,
    LOAD_COMMAND,
    MACH_HEADER,
    RELOCATION_INFO,
    SYMTAB_COMMAND,
    Widths,
    relocation_info,
    widths,
)
from .read import LC_SYMTAB, MH_OBJECT, MachoView

if TYPE_CHECKING:
    from typing import Any

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
SECTION_TYPE = 0xFF  # the low byte of a section's flags
ZEROFILL = (0x1, 0xC, 0x12)  # S_ZEROFILL, S_GB_ZEROFILL, S_THREAD_LOCAL_ZEROFILL
ROW_ALIGN = 3  # __compact_unwind's alignment, a power of 2 (its rows' 8-byte pointers)
TABLE_ALIGN = 8  # relocations and link-edit tables start on 8 bytes (not the strings)
MAX_ALIGN = 4096  # a section's alignment, as far as an object's file offsets keep it


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
    return relocation_info(address, symbolnum, False, length, extern, 0)


def _rows(view: MachoView, rows: list[NewRow]) -> tuple[bytes, bytes]:
    """The section's bytes and its relocations."""
    form = widths(view.pointer_size)
    entry, length = form.compact_unwind_entry, form.reloc_length
    data, relocs = bytearray(), bytearray()
    for i, row in enumerate(rows):
        at = i * entry.size
        data += entry.pack(row.start, row.length, row.encoding, 0, row.lsda or 0)
        relocs += _reloc(at + entry.offset("start"), _section_of(view, row.start), length,
                         False)
        if row.personality_symbol is not None:
            relocs += _reloc(at + entry.offset("personality"), row.personality_symbol,
                             length, True)
        if row.lsda:
            relocs += _reloc(at + entry.offset("lsda"), _section_of(view, row.lsda), length,
                             False)
    return bytes(data), bytes(relocs)


class _Command(NamedTuple):
    """A load command as the file has it: where, its number, its bytes."""

    at: int
    cmd: int
    body: bytes


class _Section(NamedTuple):
    """A section to write: its header's fields, contents and relocations, and its old
    file offset (None for the new section or one without contents), which orders it."""

    header: dict[str, Any]
    contents: bytes
    relocations: bytes
    old_offset: int | None


class _Piece(NamedTuple):
    """A link-edit table: where it was, its size, and the command field naming it."""

    offset: int
    size: int
    command: int  # index in the load commands
    field: str


class _Plan(NamedTuple):
    """The new file's layout, every offset known before a byte is written."""

    placed: list[tuple[int, bytes]]  # (file offset, bytes): contents, relocations, tables
    commands: list[bytes]  # every load command's new bytes, in order
    sizeofcmds: int
    size: int


def with_compact_unwind(view: MachoView, rows: list[NewRow]) -> bytes:
    """The object with ``rows`` as its ``__LD,__compact_unwind`` (replacing the one it
    has, or added after its last section)."""
    if view.filetype != MH_OBJECT:
        raise DecodeError(MACH_HEADER.offset("filetype"),
                          "only an object's __compact_unwind is written")
    form = widths(view.pointer_size)
    commands = _load_commands(view, form)
    return _write(view, form, _plan(view, form, commands, _sections(view, form, commands,
                                                                    rows)))


def _load_commands(view: MachoView, form: Widths) -> list[_Command]:
    """The load commands, checked: one segment, and none that may hold a file offset
    we would not rewrite."""
    data = view.data
    ncmds = form.header.get(data, 0, "ncmds")
    commands = []
    at = form.header.size
    for _ in range(ncmds):
        cmd, size = LOAD_COMMAND.unpack_from(data, at)
        commands.append(_Command(at, cmd, data[at:at + size]))
        at += size
    segments = [c for c in commands if c.cmd == form.segment_cmd]
    if len(segments) != 1:
        raise DecodeError(form.header.size, f"an object has one segment command; this one "
                                            f"has {len(segments)}")
    for command in commands:
        if command.cmd not in (form.segment_cmd, LC_SYMTAB, LC_DYSYMTAB, *LINKEDIT_DATA,
                               *NO_OFFSETS):
            raise DecodeError(command.at, f"load command {command.cmd:#x}: not known to "
                                          "hold no file offsets, so the object is not laid "
                                          "out again")
    return commands


def _segment_of(commands: list[_Command], form: Widths) -> bytes:
    return next(c.body for c in commands if c.cmd == form.segment_cmd)


def _sections(view: MachoView, form: Widths, commands: list[_Command],
              rows: list[NewRow]) -> list[_Section]:
    """Every section as it will be written: ``__LD,__compact_unwind`` with ``rows``
    (its header's address moved past the others where it grew, or a new header)."""
    segment, section = _segment_of(commands, form), form.section
    nsects = form.segment.get(segment, 0, "nsects")
    out = []
    for i, kept in enumerate(view.sections[:nsects]):
        out.append(_Section(section.read(segment, form.segment.size + section.size * i),
                            view.section_data(kept) if kept.offset else b"",
                            view.data[kept.reloff:kept.reloff
                                      + RELOCATION_INFO.size * kept.nreloc],
                            kept.offset or None))
    new_data, new_relocs = _rows(view, rows)
    old = view.section("__LD", "__compact_unwind")
    end = max((s.addr + s.size for s in view.sections), default=0)
    if old is None:  # a new section header: addresses after the last section
        header: dict[str, Any] = dict.fromkeys((name for name, _ in section.fields), 0)
        header.update(sectname=b"__compact_unwind", segname=b"__LD",
                      addr=_align(end, 1 << ROW_ALIGN), align=ROW_ALIGN, flags=S_ATTR_DEBUG)
        out.append(_Section(header, new_data, new_relocs, None))
    else:
        header = out[old.number - 1].header
        if len(new_data) > old.size:  # it grew: after the last section, overlapping none
            header["addr"] = _align(end, 1 << ROW_ALIGN)
        out[old.number - 1] = out[old.number - 1]._replace(contents=new_data,
                                                           relocations=new_relocs)
    header["size"] = len(new_data)
    return out


def _plan(view: MachoView, form: Widths, commands: list[_Command],
          sections: list[_Section]) -> _Plan:
    """Where everything goes: header and load commands, section contents in their old
    order at their alignment, relocations, then the link-edit tables in their old
    order; the segment and the commands naming those tables rewritten."""
    added = len(sections) - form.segment.get(_segment_of(commands, form), 0, "nsects")
    sizeofcmds = form.header.get(view.data, 0, "sizeofcmds") + form.section.size * added
    placed: list[tuple[int, bytes]] = []
    first, data_end = _place_contents(sections, form.header.size + sizeofcmds, placed)
    end = _place_relocations(sections, data_end, placed)
    bodies = [bytearray(c.body) for c in commands]
    size = _place_tables(view, form, commands, bodies, end, placed)
    fileoff = first if first is not None else form.header.size + sizeofcmds
    segment = _segment_command(form, _segment_of(commands, form), sections, fileoff,
                               data_end - fileoff)
    new = [segment if c.cmd == form.segment_cmd else bytes(body)
           for c, body in zip(commands, bodies, strict=True)]
    return _Plan(placed, new, sizeofcmds, size)


def _place_contents(sections: list[_Section], at: int,
                    placed: list[tuple[int, bytes]]) -> tuple[int | None, int]:
    """Each section's contents from ``at`` on, in the order of the old file offsets
    (new sections last), each at its alignment (zero-fill ones have no offset); the
    first offset and the end."""
    first = None
    order = sorted(range(len(sections)), key=lambda i: (
        sections[i].old_offset or 1 << 62, i))
    for i in order:
        header = sections[i].header
        if header["flags"] & SECTION_TYPE in ZEROFILL:
            header["offset"] = 0
            continue
        at = _align(at, min(1 << header["align"], MAX_ALIGN))
        header["offset"] = at
        first = at if first is None else first
        placed.append((at, sections[i].contents))
        at += len(sections[i].contents)
    return first, at


def _place_relocations(sections: list[_Section], at: int,
                       placed: list[tuple[int, bytes]]) -> int:
    """Each section's relocations, section by section, from the next 8 bytes."""
    at = _align(at, TABLE_ALIGN)
    for section in sections:
        block = section.relocations
        section.header["reloff"] = at if block else 0
        section.header["nreloc"] = len(block) // RELOCATION_INFO.size
        placed.append((at, block))
        at += len(block)
    return at


def _segment_command(form: Widths, old: bytes, sections: list[_Section], fileoff: int,
                     filesize: int) -> bytes:
    """The segment command with every section's header and the extent they cover."""
    fields = form.segment.read(old)
    addrs = [s.header["addr"] for s in sections]
    vm_start = min(addrs, default=0)
    vm_end = max((s.header["addr"] + s.header["size"] for s in sections), default=0)
    fields.update(cmdsize=form.segment.size + form.section.size * len(sections),
                  nsects=len(sections), vmaddr=vm_start,
                  vmsize=max(vm_end - vm_start, filesize), fileoff=fileoff,
                  filesize=filesize)
    return form.segment.pack_fields(fields) + b"".join(
        form.section.pack_fields(s.header) for s in sections)


def _tables(form: Widths, commands: list[_Command]) -> list[_Piece]:
    """The link-edit tables the load commands name, in command order."""
    entry_sizes = (DYLIB_TABLE_OF_CONTENTS_SIZE, form.dylib_module_size, INDEX.size,
                   INDEX.size, RELOCATION_INFO.size, RELOCATION_INFO.size)
    pieces = []
    for i, (_, cmd, body) in enumerate(commands):
        if cmd == LC_SYMTAB:
            symtab = SYMTAB_COMMAND.read(body)
            pieces += [_Piece(symtab["symoff"], symtab["nsyms"] * form.nlist.size, i,
                              "symoff"),
                       _Piece(symtab["stroff"], symtab["strsize"], i, "stroff")]
        elif cmd == LC_DYSYMTAB:
            dysymtab = DYSYMTAB_COMMAND.read(body)
            for (off, count), entry in zip(DYSYMTAB_TABLES, entry_sizes, strict=True):
                if dysymtab[off]:
                    pieces.append(_Piece(dysymtab[off], dysymtab[count] * entry, i, off))
        elif cmd in LINKEDIT_DATA:
            data = LINKEDIT_DATA_COMMAND.read(body)
            if data["dataoff"]:
                pieces.append(_Piece(data["dataoff"], data["datasize"], i, "dataoff"))
    return pieces


def _command_layout(cmd: int) -> CStruct:
    return {LC_SYMTAB: SYMTAB_COMMAND, LC_DYSYMTAB: DYSYMTAB_COMMAND}.get(
        cmd, LINKEDIT_DATA_COMMAND)


def _place_tables(view: MachoView, form: Widths, commands: list[_Command],
                  bodies: list[bytearray], at: int, placed: list[tuple[int, bytes]]) -> int:
    """The link-edit tables in their old order (each but the strings on 8 bytes), their
    new offsets written into ``bodies``; the file's end."""
    for piece in sorted(_tables(form, commands), key=lambda p: p.offset):
        if piece.field != "stroff":
            at = _align(at, TABLE_ALIGN)
        _command_layout(commands[piece.command].cmd).put(bodies[piece.command], 0,
                                                         piece.field, at)
        placed.append((at, view.data[piece.offset:piece.offset + piece.size]))
        at += len(placed[-1][1])
    return at


def _write(view: MachoView, form: Widths, plan: _Plan) -> bytes:
    """The file the plan lays out: its header (the commands' new size), the load
    commands, then every placed piece."""
    out = bytearray(plan.size)
    out[:form.header.size] = view.data[:form.header.size]
    form.header.put(out, 0, "sizeofcmds", plan.sizeofcmds)
    at = form.header.size
    for body in plan.commands:
        out[at:at + len(body)] = body
        at += len(body)
    for offset, blob in plan.placed:
        out[offset:offset + len(blob)] = blob
    return bytes(out)
