"""DWARF CFI of ELF files: the container's half of reading it.

Finds ``.eh_frame`` (else ``.debug_frame``), inflates a compressed one within the
limits, relocates an object's with every section at 0, names the functions from the
symbol tables, and hands the bytes to the container-free parser (``dwarf.cfi``).
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator, Sequence
from itertools import chain

from ..arch import arch_for_machine
from ..dwarf.cfi import Cfi, Fde, Names, function_name, parse_cfi
from ..errors import Cfi2SframeError, decoding
from ..files import read_input
from .compressed import DEFAULT_LIMITS, Limits, section_contents
from .read import (
    SHN_LORESERVE,
    SHT_NOBITS,
    ElfView,
    Symbol,
    is_mapping_symbol,
    open_elf_file,
    string_at,
)
from .reloc import relocate_view


def read_elf_cfi(path: str, data: bytes | None = None, limits: Limits = DEFAULT_LIMITS,
                 symbols: Sequence[Symbol] | None = None) -> Cfi:
    """Timelines for every FDE of ``.eh_frame`` (else ``.debug_frame``) of an ELF file;
    a compressed one is decompressed within ``limits``.  ``symbols``: its symbol
    table, where the caller has read it (``function_names``)."""
    if data is None:
        data = read_input(path)
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
    """A linked file's FDEs (``dwarf.cfi.fdes_at``) named from its symbols, reading only
    the names of their functions."""
    names = function_names(view, {fde.start for fde in fdes})
    return [fde._replace(name=function_name(names, "", fde.start)) for fde in fdes]


def function_names(view: ElfView, values: Container[int] | None = None,
                   symbols: Sequence[Symbol] | None = None) -> Names:
    """(section or "", address) -> name of every function symbol (``values``: of
    those at these addresses only, as the whole table names them).  ``symbols``: the
    ``.symtab`` entries where the caller has read them (the assembler probe has).

    The symbol table is unpacked with ``elf.read`` in one pass, and only the entries
    that can name a function (typed a function or untyped, in a section) have their
    names read: libraries have tens of thousands of symbols (libLLVM's 45k cost
    0.16 s as objects, 0.05 s so).
    """
    is_rel = view.elf_type == "ET_REL"
    sections = view.sections
    limit = min(SHN_LORESERVE, len(sections))
    names: dict[tuple[str, int], str] = {}
    for table in (".symtab", ".dynsym"):
        if symbols is not None and table == ".symtab" or values is not None:
            entries = symbols if symbols is not None and table == ".symtab" else \
                view.symbols(table, values)
            rows: Iterable[tuple[int, int, str, int]] = (
                (sym.kind, sym.shndx, sym.name, sym.value) for sym in entries
                if 0 < sym.shndx < limit)
        else:
            rows = _function_rows(view, table, limit)
        # Function symbols first; then untyped ones (hand-written assembly without
        # .type), which name a function only where no function symbol does.
        typed: list[tuple[int, str, int]] = []
        untyped: list[tuple[int, str, int]] = []
        for kind, shndx, name, value in rows:
            if kind == 2:
                typed.append((shndx, name, value))
            elif kind == 0:
                untyped.append((shndx, name, value))
        for shndx, name, value in chain(typed, untyped):
            if not name or name.startswith(".L") or is_mapping_symbol(name):
                continue
            names.setdefault((sections[shndx].name if is_rel else "", value), name)
        if view.symbol_count(table):
            break  # the first table with any entry names the functions
    return names


def _function_rows(view: ElfView, table: str, limit: int
                   ) -> Iterator[tuple[int, int, str, int]]:
    """(type, section index, name, value) of the entries of ``table`` typed a function
    (2) or untyped (0) in a section below ``limit``; no other entry's name is read."""
    found = view.symbol_rows(table)
    if found is None:
        return
    strings, rows = found
    for name_off, info, shndx, value, _ in rows:
        if 0 < shndx < limit and info & 0xF in (0, 2):
            yield info & 0xF, shndx, string_at(strings, name_off), value
