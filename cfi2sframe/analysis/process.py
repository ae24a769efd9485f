"""The files of a process and where they are loaded: SFrame and names per address.

A module is an ELF file at a load bias (its runtime address minus its own
address: 0 for a program linked at fixed addresses).  Modules come from
``--module FILE@BIAS`` or from a ``/proc/PID/maps`` listing, where the first
mapping of a file (file offset 0) puts its first ``PT_LOAD`` at the mapping's
start.  A module without ``.sframe`` (most installed libraries today) gets its
section made from its own DWARF CFI, in memory, the way ``--emit raw`` would.
"""

from __future__ import annotations

import bisect
import os
import re
from collections.abc import Callable

from ..elf.read import PT_LOAD, STT_FUNC, ElfView, Symbol, open_elf
from ..elf.structs import NHDR
from ..errors import Cfi2SframeError, DecodeError, decoding
from ..files import read_bytes
from ..kinds import is_elf
from ..sframe.decode import DecodedSection, decode
from ..sframe.load import load_sframe
from ..typed import NamedTuple

# What makes a file's SFrame section from its DWARF CFI, in memory: (path, bytes) to the
# section and the address it is placed at.  The application hands it over
# (``convert.sframe_from_dwarf``), so this layer does not import the converter.
SectionMaker = Callable[[str, bytes], tuple[bytes, int]]


class Module(NamedTuple):
    """One loaded file: its SFrame section (file addresses), load bias, extent at
    runtime and function symbols (file address, size, name), sorted."""

    path: str
    bias: int
    low: int
    high: int
    section: DecodedSection
    made_from_dwarf: bool
    functions: tuple[tuple[int, int, int, str], ...]
    entry: int = 0  # the entry point's function (runtime address), 0 for a library

    def __repr__(self) -> str:  # (not its thousands of functions)
        return f"Module({self.path!r}, bias={self.bias:#x}, {self.low:#x}-{self.high:#x})"

    def in_entry_function(self, pc: int) -> bool:
        """``pc`` is in the function holding the entry point (``_start``): the outermost
        frame, which a V2 section leaves out (its RA is undefined)."""
        if not self.entry:
            return False
        here, entry = self.names_at(pc), self.names_at(self.entry)
        return bool(here) and here[:1] == entry[:1]

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    def place(self, pc: int) -> tuple[str | None, int, str]:
        """(function symbol, offset in it, module) of a runtime address; with no symbol
        holding it, (None, the file address, module)."""
        names = self.names_at(pc)
        if not names:
            return None, pc - self.bias, self.name
        start, name = names[0]
        return name, pc - self.bias - start, self.name

    def symbolize(self, pc: int) -> str:
        """``function+0xOFF (module)`` for a runtime address, ``0xADDR (module)`` when
        no function symbol holds it."""
        name, offset, module = self.place(pc)
        if name is None:
            return f"{offset:#x} ({module})"
        return f"{name}+{offset:#x} ({module})" if offset else f"{name} ({module})"

    def names_at(self, pc: int) -> list[tuple[int, str]]:
        """(start, name) of every function symbol holding a runtime address (aliases
        of one function), the preferred name first."""
        address = pc - self.bias
        index = bisect.bisect_right(self.functions, (address, 1 << 30, 0, "")) - 1
        start = None
        while index >= 0:
            value, _rank, size, _ = self.functions[index]
            if address < value + max(size, 1):
                start = value
                break
            if size:
                return []
            index -= 1
        if start is None:
            return []
        return [(value, name) for value, _rank, size, name in self.functions
                if value == start and address < value + max(size, 1)]


def _rank(name: str, bind: int) -> int:
    """Lower is a better name for a function: global or weak, without a dot or a
    leading _."""
    return (0 if bind in (1, 2) else 2) + ("." in name) * 4 + name.startswith("_")


def debug_file_functions(data: bytes, view: ElfView) -> dict[int, str]:
    """Address -> name of the function symbols only the file's separate debug file has
    (found by build ID), the preferred name of each address: the names ``unwind`` prints
    for a stripped library's local functions, for ``lookup`` to take."""
    best: dict[int, tuple[int, str]] = {}
    for s in _debug_file_symbols(data, view):
        if s.kind == STT_FUNC and s.shndx and s.name:
            rank = (_rank(s.name, s.bind), s.name)
            if s.value not in best or rank < best[s.value]:
                best[s.value] = rank
    return {value: name for value, (_, name) in best.items()}


def _debug_file_symbols(data: bytes, view: ElfView) -> list[Symbol]:
    """The full symbol table of the file's separate debug file, found by build-id under
    /usr/lib/debug (a stripped library's local functions: __libc_start_call_main)."""
    note = view.section(".note.gnu.build-id")
    build_id = build_id_of(data, view.is64, view.little_endian, note.offset, note.size) \
        if note is not None else b""
    if not build_id:
        return []
    hexed = build_id.hex()
    path = f"/usr/lib/debug/.build-id/{hexed[:2]}/{hexed[2:]}.debug"
    if not os.path.isfile(path):
        return []
    try:
        return open_elf(read_bytes(path), path).symbols(".symtab")
    except DecodeError:
        return []


def build_id_of(data: bytes, is64: bool, little: bool, offset: int, size: int) -> bytes:
    """The descriptor of the note at ``offset`` (a build-id note's: the ID), b"" where the
    note does not hold it whole: after the header its name, padded to 4 bytes."""
    nhdr = NHDR[is64]
    if size < nhdr.size or offset + size > len(data):
        return b""
    namesz, descsz, _ = nhdr.of(little).unpack_from(data, offset)
    start = offset + nhdr.size + (namesz + 3) // 4 * 4
    if start + descsz > offset + size:
        return b""
    return data[start:start + descsz]


def parse_module(text: str) -> tuple[str, int]:
    """``FILE@BIAS`` (BIAS in any base; ``FILE`` alone: bias 0)."""
    path, sep, bias = text.rpartition("@")
    if not sep:
        return text, 0
    try:
        return path, int(bias, 0)
    except ValueError:
        raise Cfi2SframeError(text, f"'{bias}' is not a load address (FILE@0x7f...)") from None


def load_module(path: str, bias: int, make_section: SectionMaker,
                data: bytes | None = None) -> Module:
    """``path`` (its bytes: ``data``, if read already) loaded at ``bias``: its SFrame
    section, else one ``make_section`` makes from its DWARF."""
    if data is None:
        data = read_bytes(path)
    with decoding(path):
        view = open_elf(data, path)
        loads = [seg for seg in view.segments() if seg.kind == PT_LOAD]
        table = ".symtab" if view.section(".symtab") else ".dynsym"
        symbols = view.symbols(table)
    if not loads:
        raise Cfi2SframeError(path, "not a loadable ELF file (no PT_LOAD)")
    symbols += _debug_file_symbols(data, view)
    # Among aliases at one address the global, plain name sorts first ("puts" before
    # "_IO_puts" and "depth.localalias"): (address, rank, size, name).
    functions = tuple(sorted({(s.value, _rank(s.name, s.bind), s.size, s.name)
                              for s in symbols if s.kind == STT_FUNC and s.shndx and s.name}))
    is_program = view.elf_type == "ET_EXEC" or view.section(".interp") is not None
    entry = view.entry + bias if is_program else 0
    low = min(seg.vaddr for seg in loads) + bias
    high = max(seg.vaddr + seg.memsz for seg in loads) + bias
    if view.holds_sframe:  # else (none, or an empty one) made from its DWARF CFI

        return Module(path, bias, low, high, load_sframe(path, data).section, False,
                      functions, entry)
    raw, address = make_section(path, data)
    section = decode(raw, address)
    return Module(path, bias, low, high, section, True, functions, entry)


# A line of /proc/PID/maps (proc(5)): the fields before the optional path.
_MAPS_LINE = re.compile(r"\s*(?P<start>[0-9a-fA-F]+)-[0-9a-fA-F]+\s+[-rwxsp]{4}\s+"
                        r"(?P<offset>[0-9a-fA-F]+)\s+[0-9a-fA-F]+:[0-9a-fA-F]+\s+\d+(\s|$)")


def modules_from_maps(path: str, make_section: SectionMaker) -> list[Module]:
    """The ELF files of a ``/proc/PID/maps`` listing, each at its load bias."""
    first: dict[str, tuple[int, int]] = {}
    for number, line in enumerate(read_bytes(path).decode(errors="replace").splitlines(), 1):
        fields = _MAPS_LINE.match(line)
        if fields is None and line.strip():
            raise Cfi2SframeError(f"{path}:{number}", "not a /proc/PID/maps line "
                                  "(START-END PERMS OFFSET DEV INODE [PATH])")
        parts = line.split(maxsplit=5)
        if fields is None or len(parts) < 6 or not parts[5].startswith("/"):
            continue
        start, offset = int(fields["start"], 16), int(fields["offset"], 16)
        name = parts[5].strip()
        if name not in first or offset < first[name][1]:
            first[name] = (start, offset)
    modules = []
    for name, (start, offset) in first.items():
        if offset != 0 or not os.path.isfile(name):
            continue
        data = read_bytes(name)
        if not is_elf(data):
            continue
        try:
            loads = [seg for seg in open_elf(data, name).segments() if seg.kind == PT_LOAD]
        except DecodeError:
            continue
        if loads:
            page = max(seg.align for seg in loads) or 0x1000
            modules.append(load_module(name, start - (loads[0].vaddr & -page), make_section,
                                       data))
    return modules


def module_for(modules: list[Module], pc: int) -> Module | None:
    """The module whose loaded extent holds ``pc``."""
    return next((m for m in modules if m.low <= pc < m.high), None)
