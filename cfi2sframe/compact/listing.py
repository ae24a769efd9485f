"""Mach-O compact unwind as ``dump`` prints it: an image's ``__unwind_info`` and an
object's ``__compact_unwind`` rows in ``llvm-objdump --unwind-info``'s layout (every
field it prints, so the two can be compared line by line), each row followed by
the function's name and the encoding's meaning; and the same as JSON."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import ModuleType

from ..arch import by_compact
from ..macho.read import MachoView
from ..typed import TYPE_CHECKING
from .encoding import describe
from .rules import Code
from .table import PROBLEMS, UnwindInfo
from .words import HAS_LSDA, MODE_MASK, NOT_FUNCTION_START, PERSONALITY_MASK, X86_STACK_IND

if TYPE_CHECKING:
    from typing import Any

    from ..macho.unwind import ObjectRow

FLAGS = HAS_LSDA | PERSONALITY_MASK | NOT_FUNCTION_START


def meanings(view: MachoView) -> Callable[[int, int], str]:
    """``meaning`` for one file, each encoding described once (a STACK_IND's words
    depend on its function's code, so those are not kept)."""
    cache: dict[int, str] = {}
    ind = X86_STACK_IND if view.arch != "arm64" else -1

    def of(encoding: int, address: int) -> str:
        if encoding & MODE_MASK == ind:
            return meaning(encoding, view, address)
        found = cache.get(encoding)
        if found is None:
            found = cache[encoding] = meaning(encoding, view, address)
        return found

    return of


def meaning(encoding: int, view: MachoView, address: int) -> str:
    """An encoding in words, a STACK_IND's stack size read from the code at
    ``address``; DWARF mode with its FDE offset."""
    flavour = view.arch
    mode = encoding & MODE_MASK
    if encoding == 0:
        return "no unwind information"
    if mode == (0x03000000 if flavour == "arm64" else 0x04000000):
        return f"DWARF: the FDE at __eh_frame+{encoding & 0xFFFFFF:#x}"
    code = None
    if flavour != "arm64" and mode == X86_STACK_IND:
        found = view.bytes_at(address, ((encoding >> 16) & 0xFF) + 4)
        code = Code(found) if found is not None else None
    words = describe(encoding & ~FLAGS, flavour, code, by_compact(flavour).register_names)
    flags = [word for bit, word in ((HAS_LSDA, "has an LSDA"),
                                    (NOT_FUNCTION_START, "not a function start"))
             if encoding & bit]
    slot = (encoding & PERSONALITY_MASK) >> 28
    if slot:
        flags.insert(0, f"personality slot {slot}")
    return words + "".join(f"; {flag}" for flag in flags)


def unwind_info_text(view: MachoView, compiled: ModuleType | None) -> str | None:
    """The text of ``unwind_info_lines`` (each line ended), made by the compiled core;
    None without the core, without a table, or where the table is malformed
    (``read_unwind_info`` then says where)."""
    section = view.section("__TEXT", "__unwind_info")
    if compiled is None or section is None:
        return None
    ind = X86_STACK_IND if view.arch != "arm64" else -1
    found: tuple[str, list[tuple[Any, ...]]] | None = compiled.unwind_info_text(
        view.section_data(section), view.image_base, view.data, view.symtab,
        view.pointer_size == 8, meanings(view), ind)
    if found is None:
        return None
    text, problems = found
    return text + "".join(f"  problem: {PROBLEMS[name](*numbers)}\n"
                          for name, *numbers in problems)


def unwind_info_lines(table: UnwindInfo, view: MachoView) -> Iterator[str]:
    """``__unwind_info`` as llvm-objdump prints it, with names and meanings."""
    base = view.image_base
    names = view.function_names
    words = meanings(view)
    (version, common_at, common_count, person_at, person_count, index_at,
     index_count) = table.header
    yield "Contents of __unwind_info section:"
    for label, value in (("Version", version),
                         ("Common encodings array section offset", common_at),
                         ("Number of common encodings in array", common_count),
                         ("Personality function array section offset", person_at),
                         ("Number of personality functions in array", person_count),
                         ("Index array section offset", index_at),
                         ("Number of indices in array", index_count)):
        yield f"  {label + ':':<43}{value:#x}"
    yield f"  Common encodings: (count = {len(table.common)})"
    for i, encoding in enumerate(table.common):
        yield f"    encoding[{i}]: {encoding:#010x}"
    yield f"  Personality functions: (count = {len(table.personalities)})"
    for i, slot in enumerate(table.personalities, 1):
        yield f"    personality[{i}]: {slot:#010x}"
    yield f"  Top level indices: (count = {len(table.first_level)})"
    for i, (function, page_at, lsda) in enumerate(table.first_level):
        yield (f"    [{i}]: function offset={function:#010x}, 2nd level page offset="
               f"{page_at:#010x}, LSDA offset={lsda:#010x}")
    yield "  LSDA descriptors:"
    for i, (function, lsda) in enumerate(table.lsda_index):
        yield f"    [{i}]: function offset={function:#010x}, LSDA offset={lsda:#010x}"
    yield "  Second level indices:"
    for number, page in enumerate(table.page_details):
        yield (f"    Second level index[{number}]: offset in section={page.at:#010x}, "
               f"base function offset={page.base:#010x}")
        if page.encodings:  # llvm-objdump leaves out an empty list
            yield f"      Page encodings: (count = {len(page.encodings)})"
            for i, encoding in enumerate(page.encodings, len(table.common)):
                yield f"        encoding[{i}]: {encoding:#010x}"
        # One line per entry (100k in a large image): the name's fallback and the
        # meaning made only when needed.
        for i, (offset, index, encoding) in enumerate(page.entries):
            which = "" if index is None else f"[{index}]"
            address = base + offset
            name = names.get(address) or f"pc+{address:#x}"
            yield (f"      [{i}]: function offset={offset:#010x}, encoding{which}="
                   f"{encoding:#010x}  {name}: {words(encoding, address)}")
    for problem in table.problems:
        yield f"  problem: {problem}"


def unwind_info_json(table: UnwindInfo, view: MachoView) -> dict[str, Any]:
    """The table as JSON: the stored parts, and each function as libunwind finds it
    (addresses, not image offsets)."""
    base = view.image_base
    names = view.function_names
    words = meanings(view)
    header = dict(zip(("version", "common_encodings_offset", "common_encodings_count",
                       "personalities_offset", "personalities_count", "index_offset",
                       "index_count"), table.header, strict=True))
    return {
        "section": "__TEXT,__unwind_info", "image_base": base, "header": header,
        "common_encodings": list(table.common),
        "personalities": [base + slot for slot in table.personalities],
        "index": [{"function": base + f, "page_offset": p, "lsda_offset": lsda}
                  for f, p, lsda in table.first_level],
        "sentinel": base + table.sentinel,
        "pages": [{"kind": page.kind, "offset": page.at, "encodings": list(page.encodings),
                   "entries": len(page.entries)} for page in table.page_details],
        "functions": [{"address": base + e.offset,
                       "name": names.get(base + e.offset),
                       "encoding": e.encoding,
                       "meaning": words(e.encoding, base + e.offset),
                       "personality": None if e.personality is None else base + e.personality,
                       "lsda": None if e.lsda is None else base + e.lsda}
                      for e in table.entries],
        "problems": list(table.problems)}


def object_rows_lines(rows: list[ObjectRow], view: MachoView) -> Iterator[str]:
    """``__compact_unwind`` as llvm-objdump prints it, with each encoding's meaning."""
    size = view.compact_unwind_entry.size
    names = {address: name for address, name in view.function_names.items()}
    symbols = {s.value: s.name for s in view.symbols if s.defined_in_section}
    yield "Contents of __compact_unwind section:"
    for i, row in enumerate(rows):
        yield f"  Entry at offset {i * size:#x}:"
        yield f"    start:                {row.start:#x} {names.get(row.start, row.name)}"
        yield f"    length:               {row.length:#x}"
        yield (f"    compact encoding:     {row.encoding:#010x}  "
               f"{meaning(row.encoding, view, row.start)}")
        if row.personality:
            yield f"    personality function: {row.personality}"
        if row.lsda:
            name = symbols.get(row.lsda)
            yield f"    LSDA:                 {row.lsda:#x}" + (f" {name}" if name else "")


def object_rows_json(rows: list[ObjectRow], view: MachoView) -> dict[str, Any]:
    return {"section": "__LD,__compact_unwind",
            "rows": [{"start": row.start, "name": row.name, "length": row.length,
                      "encoding": row.encoding,
                      "meaning": meaning(row.encoding, view, row.start),
                      "personality": row.personality, "lsda": row.lsda} for row in rows]}
