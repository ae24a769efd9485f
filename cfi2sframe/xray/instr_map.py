"""An instrumented ELF file's XRay instrumentation map: ``xray_instr_map`` (and
``xray_fn_idx``) read into sleds and functions, numbered and named as the runtime and
``llvm-xray`` number and name them (issue 41).

Facts (xray-notes.md, "The instrumentation map"): a 64-bit entry is 32 bytes (u64
address, u64 function, u8 kind, u8 always-instrument, u8 version, padding), a 32-bit
one 16; from entry version 2 both addresses are relative to their own field, before
that absolute (a PIE's by ``R_*_RELATIVE`` relocations).  Function IDs are 1-based:
with ``xray_fn_idx``, the index of the function's entry there (the runtime's
numbering); without, they go up each time the function field changes, walking the
map in order (the runtime's and ``llvm-xray``'s).  Every count is the section's own
bytes: nothing is allocated for what a field only claims.

``read_instr_map`` reads with ``elf/read.py`` and names the functions with
``elf.cfi.function_names`` (``.symtab``, else ``.dynsym``); ``id_names`` is the ID ->
name map every trace command takes (demangled by libstdc++'s ``__cxa_demangle`` through
ctypes: ``c++filt``'s demangler, no process); ``open_instr_map`` is the CLI's
located-error entry.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator
from functools import cache

from ..arch import by_elf_machine
from ..basics import Name
from ..elf.read import SHT_NOBITS, SHT_RELA, ElfView, Section, open_elf
from ..elf.structs import RELA, r_type
from ..elf.symbols import function_names
from ..errors import Cfi2SframeError, DecodeError, decoding
from ..files import read_input
from ..kinds import is_elf
from ..typed import NamedTuple

MAP_SECTION, INDEX_SECTION = "xray_instr_map", "xray_fn_idx"
KNOWN_VERSIONS = range(3)  # entry versions 0 and 1 absolute, 2 PC-relative


class SledKind(Name):
    """A sled's kind (the entry's byte 16; 8 on 32-bit targets), as ``llvm-xray
    extract`` names it (it knows 0 to 4; 5 is compiler-rt's typed event)."""

    entry = "function-enter"
    exit = "function-exit"
    tail = "tail-exit"
    log_args_entry = "log-args-enter"
    custom_event = "custom-event"
    typed_event = "typed-event"


SLED_KINDS = tuple(SledKind)  # indexed by the kind number
CALL_SLEDS = frozenset(SLED_KINDS[:4])  # where a function is entered or left


class Sled(NamedTuple):
    """One entry of the map, its addresses resolved (absolute)."""

    offset: int  # the entry's byte offset in the file (for messages)
    address: int
    function: int
    kind: SledKind
    always_instrument: bool
    version: int
    func_id: int  # 0: in no xray_fn_idx entry (the runtime never patches it)


class XrayFunction(NamedTuple):
    """One instrumented function: its ID, address, symbol and sleds."""

    func_id: int
    address: int
    symbol: str | None  # as the symbol table spells it (mangled); None: no symbol
    sleds: tuple[Sled, ...]


class InstrMap(NamedTuple):
    """What the map says: every sled in map order, every function by ID (the n-th
    holds ID n + 1), and which ``xray_fn_idx`` layout numbered them."""

    sleds: tuple[Sled, ...]
    functions: tuple[XrayFunction, ...]
    section_address: int
    fn_idx: str  # "none", "absolute" (begin, end) or "pc-relative" (start, count)

    def function(self, func_id: int) -> XrayFunction | None:
        """The function with this ID, None where the map holds none."""
        return self.functions[func_id - 1] if 0 < func_id <= len(self.functions) else None


def read_instr_map(data: bytes, where: str = "ELF file") -> InstrMap:
    """The map of a linked ELF file's bytes; a ``DecodeError`` at the byte where it is
    malformed, or where the file has none."""
    view = open_elf(data, where)
    if view.elf_type == "ET_REL":
        raise DecodeError(0, f"{where} is a relocatable object: its {MAP_SECTION} "
                             "addresses are relocations; give the linked program or library")
    section = view.section(MAP_SECTION)
    if section is None:
        raise DecodeError(0, f"{where} has no {MAP_SECTION} section (not built with "
                             "-fxray-instrument, or stripped of it)")
    word = 8 if view.is64 else 4
    index = view.section(INDEX_SECTION)
    relocated = _relative_addends(view, [s for s in (section, index) if s is not None])
    sleds = list(_sleds(view, section, _contents(view, section, 4 * word), relocated))
    if index is None or not sleds:
        layout, groups = "none", _walk_groups(sleds)
    else:
        layout, groups = _index_groups(view, section, index, relocated, len(sleds))
    ids = [0] * len(sleds)
    for number, (begin, end) in reversed(list(enumerate(groups, 1))):
        ids[begin:end] = [number] * (end - begin)  # the first group holding a sled wins
    numbered = tuple(sled._replace(func_id=i) for sled, i in zip(sleds, ids, strict=True))
    spans = [numbered[begin:end] for begin, end in groups]
    starts = {group[0].function for group in spans if group}
    names = function_names(view, starts)
    functions = tuple(XrayFunction(number, group[0].function if group else 0,
                                   names.get(("", group[0].function)) if group else None,
                                   group) for number, group in enumerate(spans, 1))
    return InstrMap(numbered, functions, section.addr, layout)


def _contents(view: ElfView, section: Section, entry: int) -> bytes:
    """A section's bytes, which must be in the file and whole ``entry``-byte entries."""
    if section.kind == SHT_NOBITS:
        raise DecodeError(section.header_at, f"{section.name} has no bytes in the file "
                                             "(SHT_NOBITS)")
    if section.offset + section.size > len(view.data):
        raise DecodeError(section.header_at, f"{section.name} ({section.size} bytes at "
                                             f"{section.offset:#x}) runs past the end of the "
                                             f"file ({len(view.data)} bytes)")
    if section.size % entry:
        raise DecodeError(section.offset + section.size - section.size % entry,
                          f"{section.name} is {section.size} bytes: not whole {entry}-byte "
                          "entries")
    return view.data[section.offset:section.offset + section.size]


def _relative_addends(view: ElfView, within: list[Section]) -> dict[int, int]:
    """Place -> addend of every ``R_*_RELATIVE`` relocation of the file's RELA sections
    that places a field of ``within`` (a PIE's absolute map fields are 0 or stale in
    the file until the loader adds the base: llvm-xray reads the addend).  REL targets
    keep the addend in place."""
    arch = by_elf_machine(view.machine, not view.little_endian)
    relative = arch.elf_relative_relocation if arch is not None else 0
    if not relative:
        return {}
    rela = RELA[view.is64]
    rows, size = rela.of(view.little_endian), rela.size
    found: dict[int, int] = {}
    for section in view.sections:
        if section.kind != SHT_RELA:
            continue
        raw = view.data[section.offset:section.offset + section.size]
        for place, info, addend in rows.iter_unpack(raw[:len(raw) // size * size]):
            if r_type(info, view.is64) == relative and any(
                    s.addr <= place < s.addr + s.size for s in within):
                found[place] = addend
    return found


def _sleds(view: ElfView, section: Section, raw: bytes, relocated: dict[int, int]
           ) -> Iterator[Sled]:
    """The entries in map order, addresses resolved (``func_id`` still 0)."""
    word = 8 if view.is64 else 4
    size, mask = 4 * word, (1 << 8 * word) - 1
    layout = ("<" if view.little_endian else ">") + ("QQBBB13x" if view.is64 else "IIBBB5x")
    for index, (address, function, kind, always, version) in enumerate(
            struct.iter_unpack(layout, raw)):
        at, field = section.offset + index * size, section.addr + index * size
        if kind >= len(SLED_KINDS):
            raise DecodeError(at + 2 * word, f"{MAP_SECTION} entry {index}: sled kind {kind} "
                                             f"(known: 0 to {len(SLED_KINDS) - 1})")
        if version not in KNOWN_VERSIONS:
            raise DecodeError(at + 2 * word + 2, f"{MAP_SECTION} entry {index}: version "
                                                 f"{version} (known: 0 to 2)")
        if version >= 2:  # each relative to its own field
            address, function = (field + address) & mask, (field + word + function) & mask
        else:
            address = relocated.get(field, address) & mask
            function = relocated.get(field + word, function) & mask
        yield Sled(at, address, function, SLED_KINDS[kind], bool(always), version, 0)


def _walk_groups(sleds: list[Sled]) -> list[tuple[int, int]]:
    """[begin, end) sled ranges of one function each: a new one wherever the function
    field changes (the numbering without ``xray_fn_idx``)."""
    starts = [i for i, sled in enumerate(sleds)
              if i == 0 or sled.function != sleds[i - 1].function]
    return list(zip(starts, [*starts[1:], len(sleds)][:len(starts)], strict=True))


def _index_groups(view: ElfView, section: Section, index: Section, relocated: dict[int, int],
                  count: int) -> tuple[str, list[tuple[int, int]]]:
    """The sled ranges ``xray_fn_idx`` gives, one per entry, in its layout: the old
    (absolute begin and end of the function's entries in the map) where every entry
    reads as one, else the new (PC-relative start, sled count)."""
    word = 8 if view.is64 else 4
    size, mask = 4 * word, (1 << 8 * word) - 1
    raw = _contents(view, index, 2 * word)
    layout = ("<" if view.little_endian else ">") + ("QQ" if view.is64 else "II")
    rows = list(struct.iter_unpack(layout, raw))
    low = section.addr

    def sled_at(address: int) -> int | None:
        step, left = divmod(address - low, size)
        return step if not left and 0 <= step <= count else None

    def absolute(i: int, first: int, second: int) -> tuple[int, int] | None:
        field = index.addr + i * 2 * word
        begin = sled_at(relocated.get(field, first) & mask)
        end = sled_at(relocated.get(field + word, second) & mask)
        return (begin, end) if begin is not None and end is not None and begin <= end \
            else None

    def relative(i: int, start: int, sleds: int) -> tuple[int, int] | None:
        begin = sled_at((index.addr + i * 2 * word + start) & mask)
        return (begin, begin + sleds) if begin is not None and begin + sleds <= count \
            else None

    for name, read in (("absolute", absolute), ("pc-relative", relative)):
        groups = [read(i, *row) for i, row in enumerate(rows)]
        if None not in groups:
            return name, [group for group in groups if group is not None]
    bad = next((i for i, row in enumerate(rows)
                if absolute(i, *row) is None and relative(i, *row) is None), 0)
    raise DecodeError(index.offset + bad * 2 * word,
                      f"{INDEX_SECTION} entry {bad} names no run of the {count} "
                      f"{MAP_SECTION} entries (in neither layout)")


def open_instr_map(path: str, data: bytes | None = None) -> InstrMap:
    """``read_instr_map`` of a named file: every problem a located input error."""
    if data is None:
        data = read_input(path)
    if not is_elf(data):
        raise Cfi2SframeError(path, "not an ELF file (an XRay-instrumented program or "
                                    "library is needed for its instrumentation map)")
    with decoding(path):
        return read_instr_map(data)


def id_names(instr_map: InstrMap, demangle: bool = True) -> dict[int, str]:
    """Function ID -> name, as ``llvm-xray`` symbolizes it: the symbol, demangled
    (``demangle``) as ``c++filt`` prints it; a function no symbol names is
    ``@(ADDRESS)``, an ID the map does not hold is absent (print it ``#ID``)."""
    symbols = {f.symbol for f in instr_map.functions if f.symbol}
    plain = demangled(symbols) if demangle else {}
    return {f.func_id: plain.get(f.symbol, f.symbol) if f.symbol else f"@({f.address:x})"
            for f in instr_map.functions}


def demangled(names: Iterable[str]) -> dict[str, str]:
    """Each C++ (``_Z``) name demangled by the C++ runtime's own ``__cxa_demangle``
    (libstdc++'s is libiberty's demangler, the one ``c++filt`` runs: no process, no
    new dependency); a name it refuses, or every name where no libstdc++ loads, is
    kept as it is."""
    demangle = _cxa_demangle()
    return {name: (demangle(name) if demangle is not None and name.startswith("_Z")
                   else None) or name for name in names}


@cache
def _cxa_demangle() -> Callable[[str], str | None] | None:
    """``__cxa_demangle`` through ctypes, None where libstdc++ cannot be loaded.
    (``ctypes`` is imported here, for names to demangle: its import was some 8M
    instructions of every trace command's start-up.)"""
    import ctypes

    try:
        runtime, libc = ctypes.CDLL("libstdc++.so.6"), ctypes.CDLL(None)
    except OSError:
        return None
    function = getattr(runtime, "__cxa_demangle")
    function.restype = ctypes.c_void_p
    function.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                         ctypes.POINTER(ctypes.c_int)]
    free = libc.free
    free.argtypes, free.restype = [ctypes.c_void_p], None

    def demangle(name: str) -> str | None:
        status = ctypes.c_int(0)
        out = function(name.encode("utf-8", "surrogateescape"), None, None,
                       ctypes.byref(status))
        if not out:
            return None
        try:
            return ctypes.string_at(out).decode("utf-8", "replace") if status.value == 0 \
                else None
        finally:
            free(out)

    return demangle
