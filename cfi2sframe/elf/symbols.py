"""The function names of an ELF file, from its symbol tables: what ``lookup`` and
``diff`` print beside an FDE, and what the CFI reader (``elf.cfi``) names each FDE
by.  Apart from that reader so that naming a few functions loads no DWARF module."""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator, Sequence
from itertools import chain

from ..core import compiled as compiled_core
from ..typed import TYPE_CHECKING
from .read import SHN_LORESERVE, ElfView, Symbol, is_mapping_symbol, string_at

if TYPE_CHECKING:
    from types import ModuleType

    from ..dwarf.cfi import Names


_COMPILED = compiled_core()


def function_names(view: ElfView, values: Container[int] | None = None,
                   symbols: Sequence[Symbol] | None = None,
                   compiled: ModuleType | None = _COMPILED) -> Names:
    """(section or "", address) -> name of every function symbol (``values``: of
    those at these addresses only, as the whole table names them).  ``symbols``: the
    ``.symtab`` entries where the caller has read them (the assembler probe has).

    The symbol table is unpacked with ``elf.read`` in one pass, and only the entries
    that can name a function (typed a function or untyped, in a section) have their
    names read: libraries have tens of thousands of symbols (libLLVM's 45k cost
    0.16 s as objects, 0.05 s so).  A whole table's names are the compiled core's
    (``_core.function_names``; ``compiled`` None: the loop below, its reference).
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
        elif compiled is not None and not names:  # (the loop below in one call)
            found = view.symbol_table(table)
            if found is not None:
                names = compiled.function_names(
                    *found, view.is64, not view.little_endian, limit,
                    tuple(section.name for section in sections) if is_rel else None)
            rows = ()
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
