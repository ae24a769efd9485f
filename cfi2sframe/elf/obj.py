"""Add ``.sframe`` and ``.rela.sframe`` to a relocatable ELF object.

The original bytes stay where they are; the new sections, a grown ``.shstrtab``
(and ``.symtab``, when a target section has no section symbol yet) and a new
section header table are appended.  Each FDE start field gets one PC-relative
RELA relocation against its function's section symbol, addend = the
function's offset, exactly as an assembler writes it for ``.eh_frame``.
64-bit x86-64, AArch64 and s390x objects are supported, in either byte order.

The sections are given as bytes and ``StartField`` placements. With replace, the
existing headers are pointed at new contents, written over the old ones when they are
the file's tail; ``remove_sframe`` where nothing is left to describe;
``without_local_symbols`` takes the probe labels out of the assembler's object
(relocations, groups, ``SYMTAB_SHNDX`` and LLVM's ``.llvm_addrsig`` renumbered, a string
table shared with the section names (LLVM's) kept whole).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType

from ..arch import ELF_MACHINES, by_elf_machine
from ..core import compiled as compiled_core
from ..dwarf.leb128 import read_uleb, uleb
from ..errors import Cfi2SframeError, DecodeError
from ..kinds import is_elf
from ..typed import NamedTuple
from .read import (
    ET_REL,
    SHF_ALLOC,
    SHF_INFO_LINK,
    SHN_LORESERVE,
    SHT_GNU_SFRAME,
    SHT_GROUP,
    SHT_LLVM_ADDRSIG,
    SHT_NOBITS,
    SHT_REL,
    SHT_RELA,
    SHT_SYMTAB,
    SHT_SYMTAB_SHNDX,
    STT_SECTION,
)
from .structs import (
    EHDR,
    EI_CLASS,
    EI_DATA,
    ELFCLASS64,
    ELFDATA2LSB,
    ELFDATA2MSB,
    REL,
    RELA,
    SHDR,
    SYM,
    r_info,
    r_sym,
    r_type,
    st_type,
)

# e_machine -> (32-bit, 64-bit) PC-relative relocation types for the FDE start fields.
_COMPILED = compiled_core()

# This module writes ELF64 objects only.
_EHDR, _SHDR, _SYM, _RELA, _REL = EHDR[True], SHDR[True], SYM[True], RELA[True], REL[True]


def pcrel_types(e_machine: int) -> tuple[int, int] | None:
    """The 32- and 64-bit PC-relative relocation types of ELF machine ``e_machine``,
    from its target (loaded now); None where we write no relocations for it."""
    arch = by_elf_machine(ELF_MACHINES.get(e_machine, ""), False)
    return None if arch is None or arch.pcrel_relocations == (0, 0) else arch.pcrel_relocations


class _Header:
    """A section header being rewritten (its offset and size change): ``Elf64_Shdr``'s
    fields, in its order."""

    __slots__ = ("name", "kind", "flags", "addr", "offset", "size", "link", "info", "align",
                 "entsize")

    def __init__(self, name: int, kind: int, flags: int, addr: int, offset: int, size: int,
                 link: int, info: int, align: int, entsize: int) -> None:
        self.name = name
        self.kind = kind
        self.flags = flags
        self.addr = addr
        self.offset = offset
        self.size = size
        self.link = link
        self.info = info
        self.align = align
        self.entsize = entsize


class StartField(NamedTuple):
    """An FDE's function-start field, to be relocated: its offset in the section, the
    section that holds the function, the function's offset there (the addend) and its
    name (for messages)."""

    offset: int
    section: str
    addend: int
    name: str


def _section_table(data: bytes, order: str) -> tuple[int, int, list[_Header]]:
    """(offset of the section header table, index of the section names, the headers)
    of the ELF64 file ``data``."""
    little = order == "<"
    shoff, shnum, shstrndx = (_EHDR.read(data, 0, field, little)
                              for field in ("e_shoff", "e_shnum", "e_shstrndx"))
    layout = _SHDR.of(little)
    return shoff, shstrndx, [_Header(*layout.unpack_from(data, shoff + _SHDR.size * i))
                             for i in range(shnum)]


def _header_bytes(h: _Header, little: bool) -> bytes:
    return _SHDR.of(little).pack(h.name, h.kind, h.flags, h.addr, h.offset, h.size, h.link,
                                 h.info, h.align, h.entsize)


def _order(data: bytes) -> str:
    """The ``struct`` byte order of the ELF file ``data``."""
    return "<" if data[EI_DATA] == ELFDATA2LSB else ">"


def _align(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


def add_sframe(data: bytes, sframe: bytes, starts: Sequence[StartField], start_size: int,
               where: str, replace: bool = False) -> bytes:
    """A copy of the ELF64 relocatable object ``data`` with the SFrame section ``sframe``
    added, each of its ``starts`` (``start_size`` bytes, zero in ``sframe``) relocated
    PC-relative to its function.

    ``replace``: an ``.sframe`` already there (and its relocation section) keep
    their section headers, which then describe the new contents; no section
    index changes, so nothing that refers to one needs renumbering.
    """
    if not is_elf(data) or data[EI_CLASS] != ELFCLASS64 or \
            data[EI_DATA] not in (ELFDATA2LSB, ELFDATA2MSB):
        raise Cfi2SframeError(where, "--emit obj for ELF input needs a 64-bit object")
    order = _order(data)
    little = order == "<"
    e_type, e_machine = (_EHDR.read(data, 0, field, little) for field in ("e_type", "e_machine"))
    pcrel = pcrel_types(e_machine)
    if pcrel is None:
        raise Cfi2SframeError(where, f"--emit obj does not know the relocations of ELF "
                                     f"machine {e_machine}")
    if e_type != ET_REL:
        raise Cfi2SframeError(where, "--emit obj needs a relocatable object (use --emit raw)")
    shentsize, shnum = (_EHDR.read(data, 0, field, little)
                        for field in ("e_shentsize", "e_shnum"))
    if shnum == 0 or shnum >= SHN_LORESERVE or shentsize != _SHDR.size:
        raise Cfi2SframeError(where, "unsupported section header table")
    shoff, shstrndx, headers = _section_table(data, order)
    names = data[headers[shstrndx].offset : headers[shstrndx].offset + headers[shstrndx].size]

    def name_of(h: _Header) -> str:
        end = names.find(b"\0", h.name)
        return names[h.name : end].decode("utf-8", "replace")

    section_names = [name_of(h) for h in headers]
    reuse = _existing_sframe(headers, section_names, where) if replace else None
    if ".sframe" in section_names and reuse is None:
        raise Cfi2SframeError(where, "the object already has an .sframe section; --replace "
                                     "regenerates it from the DWARF CFI")
    symtab_index = next((i for i, h in enumerate(headers) if h.kind == SHT_SYMTAB), None)
    if symtab_index is None:
        raise Cfi2SframeError(where, "the object has no symbol table")
    out = bytearray(data)
    symtab = headers[symtab_index]
    if symtab.size % _SYM.size or symtab.offset + symtab.size > len(data) \
            or symtab.info > symtab.size // _SYM.size:
        raise Cfi2SframeError(where, f"malformed symbol table ({symtab.size} bytes at "
                                     f"{symtab.offset:#x}, first global {symtab.info})")
    symbols = bytearray(data[symtab.offset : symtab.offset + symtab.size])
    section_symbol = _section_symbols(symbols, order)
    placed = [start for start in starts if not start.section]
    if placed:
        raise Cfi2SframeError(where, f"the FDE of '{placed[0].name}' has no relocation, so "
                                     "the section of its function is unknown")
    targets = sorted({start.section for start in starts})
    unknown = [t for t in targets if t not in section_names]
    if unknown:
        raise Cfi2SframeError(where, f"function section '{unknown[0]}' is not in the object")
    missing = [section_names.index(t) for t in targets
               if section_names.index(t) not in section_symbol]
    if missing:
        symbols, shift = _insert_section_symbols(symbols, symtab.info, missing, order)
        for index in missing:
            section_symbol[index] = symtab.info + missing.index(index)
        _shift_relocations(out, headers, symtab_index, symtab.info, shift, order,
                           symtab.size // _SYM.size, where)
        symtab.info += shift
    relocs = bytearray()  # RELA: the start fields hold 0, the addends decide
    kind = pcrel[0 if start_size == 4 else 1]
    for start in starts:
        info = r_info(section_symbol[section_names.index(start.section)], kind, True)
        if not -(1 << 63) <= start.addend < 1 << 63:
            raise Cfi2SframeError(where, f"function '{start.name}' starts at "
                                         f"{start.addend:#x} in its section: no relocation "
                                         "addend holds that")
        # S + A - P with the object's sections at 0, as a reader relocates it
        # (``elf.reloc``): past the field's signed range no reader gets the start back
        reach = 1 << (8 * start_size - 1)
        if not -reach <= start.addend - start.offset < reach:
            raise Cfi2SframeError(where, f"function '{start.name}' starts at "
                                         f"{start.addend:#x} in its section: the .sframe's "
                                         f"{start_size}-byte PC-relative start field does "
                                         "not reach that")
        relocs += _RELA.pack(little, r_offset=start.offset, r_info=info,
                             r_addend=start.addend)
    if reuse is not None:
        del out[_reusable_tail(headers, reuse, shoff, shnum, len(out)):]
    return _append(out, headers, symtab_index, bytes(symbols), sframe, bytes(relocs),
                   shstrndx, order, reuse)


def remove_sframe(data: bytes) -> bytes | None:
    """The ELF64 relocatable object ``data`` without its ``.sframe`` and ``.rela.sframe``
    (what a conversion finds nothing to describe in, with ``--replace``: a section with
    no FDE makes GNU ld refuse every later link's ``.sframe``), or None when those are
    not the last section headers or a symbol refers to them (removing them would
    renumber the others)."""
    order = _order(data)
    little = order == "<"
    shoff, shstrndx, headers = _section_table(data, order)
    shnum = len(headers)
    names = data[headers[shstrndx].offset : headers[shstrndx].offset + headers[shstrndx].size]

    def name_of(h: _Header) -> bytes:
        return names[h.name : names.find(b"\0", h.name)]

    ours = [i for i, h in enumerate(headers) if name_of(h) in (b".sframe", b".rela.sframe")]
    if not ours or sorted(ours) != list(range(shnum - len(ours), shnum)) or shstrndx in ours:
        return None
    for h in headers:
        if h.kind == SHT_SYMTAB:
            for at in range(h.offset, h.offset + h.size - _SYM.size + 1, _SYM.size):
                if _SYM.read(data, at, "st_shndx", little) in ours:
                    return None
    out = bytearray(data)
    _EHDR.write(out, 0, "e_shnum", shnum - len(ours), little)
    reuse = (ours[0], ours[1] if len(ours) > 1 else None)
    cut = _reusable_tail(headers, reuse, shoff, shnum, len(data))
    if cut < len(data):  # ours were the tail: write the header table again where they were
        del out[cut:]
        new_shoff = _align(len(out), 8)
        out.extend(bytes(new_shoff - len(out)))
        out += data[shoff : shoff + _SHDR.size * (shnum - len(ours))]
        _EHDR.write(out, 0, "e_shoff", new_shoff, little)
    return bytes(out)


def without_local_symbols(data: bytes, prefix: bytes, where: str,
                          compiled: ModuleType | None = _COMPILED) -> bytes | None:
    """The ELF64 relocatable object ``data`` without its local symbols named ``prefix``
    and anything (labels placed by our probe run, which nothing refers to), every
    symbol reference renumbered, ``.strtab`` rebuilt, and the sections laid out again
    in their file order: the object the assembler writes without those labels.

    None where a section this does not know refers to the symbol table (its
    references could not be renumbered).  A one-line error where a relocation, a
    group or LLVM's address-significance table refers to one of those labels.
    ``compiled``: the compiled core's ``probe_symbols`` finds the labels (this
    module's loop is its reference).
    """
    order = _order(data)
    little = order == "<"
    _, shstrndx, headers = _section_table(data, order)
    symtab_index = next((i for i, h in enumerate(headers) if h.kind == SHT_SYMTAB), None)
    if symtab_index is None:
        return data
    symtab = headers[symtab_index]
    strtab = headers[symtab.link]
    strings = data[strtab.offset : strtab.offset + strtab.size]
    symbols = data[symtab.offset : symtab.offset + symtab.size // _SYM.size * _SYM.size]
    count = len(symbols) // _SYM.size
    staying = _staying_symbols(symbols, strings, symtab.info, prefix, order, compiled)
    renumbered = [-1] * count  # old index -> new index; -1: dropped
    kept = bytearray()
    names = bytearray(b"\0")
    new_name: dict[int, int] = {0: 0}
    first_global = 0
    layout = _SYM.of(little)
    for index in staying:
        entry = list(layout.unpack_from(symbols, _SYM.size * index))
        name = entry[_ST_NAME]
        if name not in new_name:
            new_name[name] = len(names)
            names += strings[name : strings.index(b"\0", name) + 1]
        renumbered[index] = len(kept) // _SYM.size
        entry[_ST_NAME] = new_name[name]
        kept += layout.pack(*entry)
        if index < symtab.info:
            first_global = len(kept) // _SYM.size
    if len(kept) == len(symbols):
        return data
    if symtab.link == shstrndx:  # one table for both (LLVM's): section names kept too
        for h in headers:
            if h.name not in new_name:
                new_name[h.name] = len(names)
                names += strings[h.name : strings.index(b"\0", h.name) + 1]
            h.name = new_name[h.name]
    contents: dict[int, bytes] = {symtab_index: bytes(kept), symtab.link: bytes(names)}
    for index, h in enumerate(headers):
        if h.link != symtab_index or index == symtab_index:
            continue
        if h.kind in (SHT_RELA, SHT_REL):
            contents[index] = _renumbered_relocations(data, h, order, renumbered, where)
        elif h.kind == SHT_GROUP:
            h.info = _kept_symbol(renumbered, h.info, where, "a section group")
        elif h.kind == SHT_SYMTAB_SHNDX:
            words = data[h.offset : h.offset + h.size]
            contents[index] = b"".join(words[4 * i : 4 * i + 4]
                                       for i, new in enumerate(renumbered) if new >= 0)
        elif h.kind == SHT_LLVM_ADDRSIG:
            contents[index] = _renumbered_addrsig(data[h.offset : h.offset + h.size],
                                                  renumbered, where)
        else:
            return None
    symtab.info = first_global
    return _laid_out(data, headers, contents, order)


def _staying_symbols(symbols: bytes, strings: bytes, first_global: int, prefix: bytes,
                     order: str, compiled: ModuleType | None) -> list[int]:
    """The indices, in order, of the ELF64 ``symbols`` that are not locals named
    ``prefix`` and anything."""
    found = None if compiled is None else \
        compiled.probe_symbols(symbols, strings, True, order == ">", prefix, 0)
    if found is None:  # (also where a name goes on with more than digits)
        return [index for index, (name,) in enumerate(
            _SYM.alone("st_name", order == "<").iter_unpack(symbols))
                if not (0 < index < first_global and strings.startswith(prefix, name))]
    others: list[int] = found[1]
    named_globals = set(range(first_global, len(symbols) // _SYM.size)).difference(others)
    return sorted([*others, *named_globals]) if named_globals else others


_ST_NAME = _SYM.index("st_name")
_INFO_AND_SHNDX = _SYM.pick("st_info", "st_shndx")


def _kept_symbol(renumbered: Sequence[int], old: int, where: str, what: str) -> int:
    new = renumbered[old] if old < len(renumbered) else old
    if new < 0:
        raise Cfi2SframeError(where, f"{what} refers to the assembler's symbol {old}, "
                                     "which is ours and goes")
    return new


def _renumbered_addrsig(table: bytes, renumbered: Sequence[int], where: str) -> bytes:
    """LLVM's ``.llvm_addrsig`` (symbol indices, each an unsigned LEB128) renumbered."""
    out = bytearray()
    pos = 0
    while pos < len(table):
        try:
            old, pos = read_uleb(table, pos)
        except DecodeError:
            raise Cfi2SframeError(where, "the assembler's .llvm_addrsig ends inside a "
                                         "number") from None
        out += uleb(_kept_symbol(renumbered, old, where, "the address-significance table"))
    return bytes(out)


def _renumbered_relocations(data: bytes, h: _Header, order: str, renumbered: Sequence[int],
                            where: str) -> bytes:
    little = order == "<"
    layout = _RELA if h.kind == SHT_RELA else _REL
    out = bytearray(data[h.offset : h.offset + h.size])
    for at in range(0, len(out) - layout.size + 1, layout.size):
        info = layout.read(out, at, "r_info", little)
        new = _kept_symbol(renumbered, r_sym(info, True), where, "a relocation")
        layout.write(out, at, "r_info", r_info(new, r_type(info, True), True), little)
    return bytes(out)


def _laid_out(data: bytes, headers: list[_Header], contents: dict[int, bytes],
              order: str) -> bytes:
    """The object again: the ELF header, each section's contents (``contents`` where
    given, else as they were) in their old file order at their alignment (a
    ``NOBITS`` section's too, as GNU as aligns it), the section header table last."""
    little = order == "<"
    out = bytearray(data[:_EHDR.size])
    for _, index in sorted((h.offset, index) for index, h in enumerate(headers) if index):
        h = headers[index]
        out.extend(bytes(_align(len(out), max(h.align, 1)) - len(out)))
        if h.kind == SHT_NOBITS:  # aligned as the assembler does, though it has no bytes
            h.offset = len(out)
            continue
        blob = contents.get(index, data[h.offset : h.offset + h.size])
        h.offset, h.size = len(out), len(blob)
        out += blob
    shoff = _align(len(out), 8)
    out.extend(bytes(shoff - len(out)))
    for h in headers:
        out += _header_bytes(h, little)
    _EHDR.write(out, 0, "e_shoff", shoff, little)
    return bytes(out)


def _reusable_tail(headers: Sequence[_Header], reuse: tuple[int, int | None], shoff: int,
                   shnum: int, end: int) -> int:
    """Where the old ``.sframe``, its relocations and the section header table start
    when they are the object's last bytes (as an earlier conversion left them): those
    are written again, so converting again (V2 to V3 and back) does not grow the file
    by a whole section each time.  Else the end of the file."""
    ours = [i for i in reuse if i is not None]
    cut = min([headers[i].offset for i in ours] + [shoff])
    others = [h.offset + h.size for i, h in enumerate(headers)
              if i not in ours and h.kind != SHT_NOBITS]
    if max(others, default=0) > cut or shoff + shnum * _SHDR.size != end:
        return end
    return cut


def _existing_sframe(headers: Sequence[_Header], names: Sequence[str],
                     where: str) -> tuple[int, int | None] | None:
    """(index of .sframe, index of its relocation section or None), if there is one."""
    found = [i for i, name in enumerate(names) if name == ".sframe"]
    if not found:
        return None
    if len(found) > 1:
        raise Cfi2SframeError(where, f"the object has {len(found)} .sframe sections")
    relocs = [i for i, h in enumerate(headers) if h.kind in (SHT_RELA, SHT_REL)
              and h.info == found[0]]
    if len(relocs) > 1:
        raise Cfi2SframeError(where, f"the object has {len(relocs)} relocation sections "
                                     "for .sframe")
    return found[0], relocs[0] if relocs else None


def _section_symbols(symbols: bytes | bytearray, order: str) -> dict[int, int]:
    """Section index -> index of its STT_SECTION symbol."""
    out: dict[int, int] = {}
    for i, (info, shndx) in enumerate(map(_INFO_AND_SHNDX,
                                          _SYM.of(order == "<").iter_unpack(symbols))):
        if st_type(info) == STT_SECTION:
            out.setdefault(shndx, i)
    return out


def _insert_section_symbols(symbols: bytearray, first_global: int, sections: Sequence[int],
                            order: str) -> tuple[bytearray, int]:
    new = b"".join(_SYM.pack(order == "<", st_info=STT_SECTION, st_shndx=index)
                   for index in sections)
    at = first_global * _SYM.size
    return bytearray(symbols[:at] + new + symbols[at:]), len(sections)


def _shift_relocations(out: bytearray, headers: Sequence[_Header], symtab_index: int,
                       first_global: int, shift: int, order: str, count: int,
                       where: str) -> None:
    """Renumber symbol references >= first_global after inserting local symbols
    (``count``: the symbols there were)."""
    for h in headers:
        if h.link != symtab_index or h.kind not in (SHT_RELA, SHT_REL):
            continue
        layout = _RELA if h.kind == SHT_RELA else _REL
        entry = layout.size
        if h.offset + h.size > len(out):
            raise Cfi2SframeError(where, f"a relocation section ({h.size} bytes at "
                                         f"{h.offset:#x}) runs past the end of the file")
        for at in range(h.offset, h.offset + h.size - entry + 1, entry):
            info = layout.read(out, at, "r_info", order == "<")
            sym = r_sym(info, True)
            if sym >= count:
                raise Cfi2SframeError(where, f"at byte {at:#x}: relocation names symbol "
                                             f"{sym} of {count}")
            if sym >= first_global:
                layout.write(out, at, "r_info", r_info(sym + shift, r_type(info, True), True),
                             order == "<")
    # Group sections (SHT_GROUP) name their signature by symbol index.
    for h in headers:
        if h.kind == SHT_GROUP and h.link == symtab_index and h.info >= first_global:
            h.info += shift


def _append(out: bytearray, headers: list[_Header], symtab_index: int, symbols: bytes,
            sframe: bytes, relocs: bytes, shstrndx: int, order: str,
            reuse: tuple[int, int | None] | None) -> bytes:
    """Append the new contents and a new section header table; ``reuse`` names the
    headers of an old .sframe and its relocations to point at them instead."""
    def place(blob: bytes, alignment: int) -> int:
        out.extend(b"\0" * (_align(len(out), alignment) - len(out)))
        at = len(out)
        out.extend(blob)
        return at

    names_header = headers[shstrndx]
    shstr = bytes(out[names_header.offset : names_header.offset + names_header.size])
    symtab = headers[symtab_index]
    if len(symbols) != symtab.size:
        symtab.offset = place(symbols, 8)
        symtab.size = len(symbols)

    def name(text: str) -> int:
        nonlocal shstr
        shstr += text.encode() + b"\0"
        return len(shstr) - len(text) - 1

    if reuse is None:
        sframe_index = len(headers)
        headers.append(_Header(name(".sframe"), SHT_GNU_SFRAME, SHF_ALLOC, 0, 0, 0, 0, 0, 8,
                               0))
    else:
        sframe_index = reuse[0]
    rela_index = reuse[1] if reuse is not None else None
    if rela_index is None:
        rela_index = len(headers)
        headers.append(_Header(name(".rela.sframe"), SHT_RELA, SHF_INFO_LINK, 0, 0, 0, 0, 0,
                               8, _RELA.size))
    if len(shstr) != names_header.size:
        names_header.offset = place(shstr, 1)
        names_header.size = len(shstr)
    section = headers[sframe_index]
    section.kind, section.flags, section.align, section.entsize = SHT_GNU_SFRAME, \
        SHF_ALLOC, 8, 0
    section.offset, section.size = place(sframe, 8), len(sframe)
    rela = headers[rela_index]
    rela.kind, rela.flags, rela.link, rela.info = SHT_RELA, SHF_INFO_LINK, symtab_index, \
        sframe_index
    rela.align, rela.entsize = 8, _RELA.size
    rela.offset, rela.size = place(relocs, 8), len(relocs)
    shoff = _align(len(out), 8)
    out.extend(b"\0" * (shoff - len(out)))
    little = order == "<"
    for h in headers:
        out.extend(_header_bytes(h, little))
    _EHDR.write(out, 0, "e_shoff", shoff, little)
    _EHDR.write(out, 0, "e_shnum", len(headers), little)
    return bytes(out)
