"""Relocations of one section of a relocatable ELF object, applied with every section at 0.

Both readers need it: ``.sframe`` start fields (to print functions at their
offset in their own section, as binutils does) and ``.eh_frame``/``.debug_frame``
address fields (to know each FDE's section and offset).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from types import ModuleType

from ..arch import by_elf_machine
from ..core import compiled as compiled_core
from ..errors import Cfi2SframeError
from ..typed import TYPE_CHECKING
from .read import SHN_LORESERVE, SHT_REL, SHT_RELA, STT_SECTION
from .structs import REL, RELA, r_sym, r_type

if TYPE_CHECKING:
    from ..arch.base import ByteOrder
    from .read import ElfView


@cache
def kinds_of(machine: str) -> dict[int, tuple[int, bool]]:
    """Relocation type -> (size in bytes, PC-relative) of the address relocations CFI
    and SFrame sections use on the ELF ``machine``, from its target (loaded now: only
    the file's own target is); empty for a machine we do not know."""
    arch = by_elf_machine(machine, False)
    return {} if arch is None else dict(arch.elf_relocations)


_COMPILED = compiled_core()
# Where r_offset, r_info and r_addend are in an unpacked entry (the same in both classes).
_R_OFFSET, _R_INFO, _R_ADDEND = (RELA[True].index(field)
                                 for field in ("r_offset", "r_info", "r_addend"))

SPECIAL_SECTIONS = {0: "SHN_UNDEF", 0xFFF1: "SHN_ABS", 0xFFF2: "SHN_COMMON"}


def _symbol_targets(view: ElfView, link: int) -> Callable[[int], tuple[str, int] | str]:
    """Symbol index -> (the section it is in, or its special index; its value as a
    relocation uses it: 0 for a section symbol), or why the entry is unusable.

    Only the entries relocations name are read, and each once: an object's symbol
    table can hold a hundred thousand names that relocating never needs."""
    found: dict[int, tuple[str, int] | str] = {}

    def target(sym: int) -> tuple[str, int] | str:
        known = found.get(sym)
        if known is not None:
            return known
        entry = view.symbol_entry(link, sym)
        if entry is None:
            answer: tuple[str, int] | str = (f"relocation names symbol {sym} of "
                                             f"{view.symbol_table_size(link)}")
        else:
            value, kind, shndx = entry
            if shndx in SPECIAL_SECTIONS or shndx >= SHN_LORESERVE:
                answer = (SPECIAL_SECTIONS.get(shndx, f"SHN_{shndx:#x}"),
                          0 if kind == STT_SECTION else value)
            elif shndx < len(view.sections):
                answer = (view.sections[shndx].name, 0 if kind == STT_SECTION else value)
            else:
                answer = f"relocation symbol in missing section {shndx}"
        found[sym] = answer
        return answer

    return target


def relocate_view(view: ElfView, index: int, contents: bytearray, where: str,
                  compiled: ModuleType | None = _COMPILED) -> dict[int, tuple[str, int]]:
    """Relocate ``contents`` (the data of section ``index``) in place, every section at
    address 0.  Returns field offset -> (name of the section the relocation points
    into, or a special index such as ``SHN_ABS``; target value S + A).  Errors name
    the file offset of the bad entry.  ``compiled``: the compiled core's loop
    (``_core.relocate``, the default where it is built), or None for this module's,
    its reference, which also runs wherever the compiled one gives up."""

    def bad(at: int, message: str) -> Cfi2SframeError:
        return Cfi2SframeError(where, f"at byte {at:#x}: {message}")

    endian: ByteOrder = "little" if view.little_endian else "big"
    placed: dict[int, tuple[str, int]] = {}
    for rel in view.sections:
        if rel.kind not in (SHT_RELA, SHT_REL) or rel.info != index:
            continue
        rela = rel.kind == SHT_RELA
        layout = (RELA if rela else REL)[view.is64]
        entry = layout.size
        if rel.offset + rel.size > len(view.data):
            raise bad(rel.header_at, f"relocation section {rel.name} runs past the end of "
                                     "the file")
        target_of = _symbol_targets(view, rel.link)
        kinds = kinds_of(view.machine)
        count = rel.size // entry
        if compiled is not None:
            before = bytes(contents)
            done = compiled.relocate(contents, view.data[rel.offset:rel.offset + count * entry],
                                     view.is64, view.little_endian, rela,
                                     kinds, target_of)
            if done is not None:
                placed.update(done)
                continue
            contents[:] = before  # it gave up: this loop says why, from the start
        rows = layout.of(view.little_endian).iter_unpack(
            view.data[rel.offset:rel.offset + count * entry])
        for number, fields in enumerate(rows):
            offset, info = fields[_R_OFFSET], fields[_R_INFO]
            sym, kind = r_sym(info, view.is64), r_type(info, view.is64)
            if kind not in kinds:
                continue
            size, pc_relative = kinds[kind]
            at = rel.offset + number * entry
            if offset + size > len(contents):
                raise bad(at, f"relocation at {offset:#x} is outside its section")
            found = target_of(sym)
            if isinstance(found, str):
                raise bad(at, found)
            target, value = found
            addend = fields[_R_ADDEND] if rela else int.from_bytes(contents[offset:offset + size],
                                                           endian, signed=True)
            stored = value + addend - offset if pc_relative else value + addend
            bits = 8 * size  # signed where PC-relative, else either (a linker's check)
            if not -(1 << (bits - 1)) <= stored < 1 << (bits - 1 if pc_relative else bits):
                raise bad(at, f"relocation at {offset:#x}: its value {stored:#x} does not fit "
                              f"its {size}-byte field")
            placed[offset] = (target, value + addend)
            contents[offset:offset + size] = (stored & ((1 << (8 * size)) - 1)).to_bytes(
                size, endian)
    return placed
