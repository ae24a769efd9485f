"""DWARF CFI of ELF files: the container's half of reading it.

Finds ``.eh_frame`` (else ``.debug_frame``), inflates a compressed one within the
limits, relocates an object's with every section at 0, names the functions from the
symbol tables, and hands the bytes to the container-free parser (``dwarf.cfi``).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..arch import arch_for_machine
from ..dwarf.cfi import Cfi, Fde, Names, Placements, function_name, parse_cfi
from ..errors import Cfi2SframeError, decoding
from ..files import read_input
from ..typed import NamedTuple
from .compressed import DEFAULT_LIMITS, Limits, section_contents
from .read import SHT_NOBITS, ElfView, Symbol, open_elf_file
from .reloc import relocate_view
from .symbols import function_names


class CfiSection(NamedTuple):
    """A file's CFI section as ``dwarf.cfi.parse_cfi`` takes it: its contents (an
    object's relocated, every section at 0), where it is loaded (0 in an object) and
    the relocated fields' places, with the file's names of its functions."""

    path: str
    view: ElfView
    name: str
    contents: bytes | bytearray
    is_eh: bool
    address: int
    placements: Placements
    names: Names

    @property
    def linked_eh_frame(self) -> bool:
        """An ``.eh_frame`` of a linked file: what the compiled core reads whole."""
        return self.is_eh and self.view.elf_type != "ET_REL"


def cfi_section(path: str, data: bytes | None = None, limits: Limits = DEFAULT_LIMITS,
                symbols: Sequence[Symbol] | None = None,
                view: ElfView | None = None, named: bool = True) -> CfiSection:
    """``.eh_frame`` (else ``.debug_frame``) of an ELF file and its functions' names:
    ``read_elf_cfi``'s first half, for a caller that reads the FDEs its own way.
    ``named`` False: no names (an empty table), the symbol tables checked as reading
    them checks (the caller reads the names it needs with ``function_names``:
    libLLVM-14's 35k cost ~0.07 s, a few ~0.004 s)."""
    if data is None:
        data = read_input(path)
    if view is None:
        view = open_elf_file(path, data)
    with decoding(path, "ELF file") as where:
        arch_for_machine(view.machine, path, not view.little_endian)  # unsupported: fail
        names = function_names(view, None if named else (), symbols)
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
        return CfiSection(path, view, name, contents, is_eh, 0 if is_rel else chosen.addr,
                          placements, names)


def read_elf_cfi(path: str, data: bytes | None = None, limits: Limits = DEFAULT_LIMITS,
                 symbols: Sequence[Symbol] | None = None, view: ElfView | None = None) -> Cfi:
    """Timelines for every FDE of ``.eh_frame`` (else ``.debug_frame``) of an ELF file;
    a compressed one is decompressed within ``limits``.  ``symbols``: its symbol
    table, where the caller has read it (``function_names``); ``view``: ``data``'s
    section headers, where the caller has read them (``open_elf_file``)."""
    return cfi_of(cfi_section(path, data, limits, symbols, view))


def cfi_of(found: CfiSection, fdes: Sequence[Fde] | None = None) -> Cfi:
    """The ``Cfi`` of a section ``cfi_section`` found: with every FDE it holds, or with
    ``fdes`` (those a caller read itself)."""
    view = found.view
    if fdes is None:
        with decoding(found.path, found.name):
            fdes = parse_cfi(bytes(found.contents), found.is_eh, found.address,
                             found.placements, 8 if view.is64 else 4, view.little_endian,
                             found.names)
    return Cfi(found.path, view.machine, view.elf_type, tuple(fdes), found.name,
               not view.little_endian)


def named_fdes(view: ElfView, fdes: list[Fde]) -> list[Fde]:
    """FDEs (``dwarf.cfi.fdes_at``) named from the file's symbols, reading only the
    names of their functions (an object's by section and offset)."""
    names = function_names(view, {fde.start for fde in fdes})
    return [fde._replace(name=function_name(names, fde.section, fde.start)) for fde in fdes]

