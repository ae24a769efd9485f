"""DWARF CFI of ELF files: the container's half of reading it.

Finds ``.eh_frame`` (else ``.debug_frame``), inflates a compressed one within the
limits, relocates an object's with every section at 0, names the functions from the
symbol tables, and hands the bytes to the container-free parser (``dwarf.cfi``).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..arch import arch_for_machine
from ..dwarf.cfi import Cfi, Fde, function_name, parse_cfi
from ..errors import Cfi2SframeError, decoding
from ..files import read_input
from .compressed import DEFAULT_LIMITS, Limits, section_contents
from .read import SHT_NOBITS, ElfView, Symbol, open_elf_file
from .reloc import relocate_view
from .symbols import function_names


def read_elf_cfi(path: str, data: bytes | None = None, limits: Limits = DEFAULT_LIMITS,
                 symbols: Sequence[Symbol] | None = None, view: ElfView | None = None) -> Cfi:
    """Timelines for every FDE of ``.eh_frame`` (else ``.debug_frame``) of an ELF file;
    a compressed one is decompressed within ``limits``.  ``symbols``: its symbol
    table, where the caller has read it (``function_names``); ``view``: ``data``'s
    section headers, where the caller has read them (``open_elf_file``)."""
    if data is None:
        data = read_input(path)
    if view is None:
        view = open_elf_file(path, data)
    with decoding(path, "ELF file") as where:
        arch_for_machine(view.machine, path, not view.little_endian)  # unsupported: fail
        names = function_names(view, symbols=symbols)
        chosen = None
        for candidate, eh in ((".eh_frame", True), (".debug_frame", False)):
            found = view.section(candidate)
            if found is not None and found.kind != SHT_NOBITS:
                chosen, is_eh = found, eh
                break
        if chosen is None:
            raise Cfi2SframeError(path, "no .eh_frame or .debug_frame section")
        # Read with ``elf.read`` alone (fast, and errors carry byte offsets).
        name = where.section = chosen.name
        contents = section_contents(view, chosen, limits)
        is_rel = view.elf_type == "ET_REL"
        placements = {}
        if is_rel:
            contents = contents if isinstance(contents, bytearray) else bytearray(contents)
            placements = relocate_view(view, view.sections.index(chosen), contents, path)
        fdes = parse_cfi(bytes(contents), is_eh, 0 if is_rel else chosen.addr, placements,
                         8 if view.is64 else 4, view.little_endian, names)
        return Cfi(path, view.machine, view.elf_type, tuple(fdes), name,
                   not view.little_endian)


def named_fdes(view: ElfView, fdes: list[Fde]) -> list[Fde]:
    """FDEs (``dwarf.cfi.fdes_at``) named from the file's symbols, reading only the
    names of their functions (an object's by section and offset)."""
    names = function_names(view, {fde.start for fde in fdes})
    return [fde._replace(name=function_name(names, fde.section, fde.start)) for fde in fdes]

