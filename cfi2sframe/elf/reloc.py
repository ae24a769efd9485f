"""Relocations of one section of a relocatable ELF object, applied with every section at 0.

Both readers need it: ``.sframe`` start fields (to print functions at their
offset in their own section, as binutils does) and ``.eh_frame``/``.debug_frame``
address fields (to know each FDE's section and offset).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from ..arch import ARCHES
from ..arch.base import ByteOrder
from ..errors import Cfi2SframeError
from .read import SHN_LORESERVE

if TYPE_CHECKING:
    from .read import ElfView, Symbol

# (e_machine, relocation type) -> size in bytes, for the address relocations CFI and
# SFrame sections use, and those that are PC-relative: from the target registry.
RELOC_SIZES = {(arch.elf_machine, kind): size for arch in ARCHES.values()
               for kind, (size, _) in arch.elf_relocations.items()}
PC_RELATIVE = {(arch.elf_machine, kind) for arch in ARCHES.values()
               for kind, (_, pcrel) in arch.elf_relocations.items() if pcrel}

SPECIAL_SECTIONS = {0: "SHN_UNDEF", 0xFFF1: "SHN_ABS", 0xFFF2: "SHN_COMMON"}


def relocate_view(view: ElfView, index: int, contents: bytearray,
                  where: str) -> dict[int, tuple[str, int]]:
    """Relocate ``contents`` (the data of section ``index``) in place, every section at
    address 0.  Returns field offset -> (name of the section the relocation points
    into, or a special index such as ``SHN_ABS``; target value S + A).  Errors name
    the file offset of the bad entry."""

    def bad(at: int, message: str) -> Cfi2SframeError:
        return Cfi2SframeError(where, f"at byte {at:#x}: {message}")

    order = "<" if view.little_endian else ">"
    endian: ByteOrder = "little" if view.little_endian else "big"
    placed: dict[int, tuple[str, int]] = {}
    tables: dict[int, list[Symbol]] = {}  # many relocation sections may share one table
    for rel in view.sections:
        if rel.kind not in (4, 9) or rel.info != index:  # SHT_RELA, SHT_REL
            continue
        rela = rel.kind == 4
        if view.is64:
            fmt, entry = (order + "QQq", 24) if rela else (order + "QQ", 16)
        else:
            fmt, entry = (order + "IIi", 12) if rela else (order + "II", 8)
        if rel.offset + rel.size > len(view.data):
            raise bad(rel.header_at, f"relocation section {rel.name} runs past the end of "
                                     "the file")
        if rel.link not in tables:
            tables[rel.link] = view.symbols(rel.link)
        symbols = tables[rel.link]
        for at in range(rel.offset, rel.offset + rel.size - entry + 1, entry):
            fields = struct.unpack_from(fmt, view.data, at)
            offset, info = fields[0], fields[1]
            sym, kind = (info >> 32, info & 0xFFFFFFFF) if view.is64 else (info >> 8,
                                                                             info & 0xFF)
            key = (view.machine, kind)
            size = RELOC_SIZES.get(key)
            if size is None:
                continue
            if offset + size > len(contents):
                raise bad(at, f"relocation at {offset:#x} is outside its section")
            if sym >= len(symbols):
                raise bad(at, f"relocation names symbol {sym} of {len(symbols)}")
            symbol = symbols[sym]
            if symbol.shndx in SPECIAL_SECTIONS or symbol.shndx >= SHN_LORESERVE:
                target = SPECIAL_SECTIONS.get(symbol.shndx, f"SHN_{symbol.shndx:#x}")
            elif symbol.shndx < len(view.sections):
                target = view.sections[symbol.shndx].name
            else:
                raise bad(at, f"relocation symbol in missing section {symbol.shndx}")
            value = 0 if symbol.kind == 3 else symbol.value  # STT_SECTION
            addend = fields[2] if rela else int.from_bytes(contents[offset:offset + size],
                                                           endian, signed=True)
            placed[offset] = (target, value + addend)
            stored = value + addend - offset if key in PC_RELATIVE else value + addend
            contents[offset:offset + size] = (stored & ((1 << (8 * size)) - 1)).to_bytes(
                size, endian)
    return placed
