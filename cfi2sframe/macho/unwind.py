"""The unwind sections of a Mach-O object: its ``__LD,__compact_unwind`` rows (as the
compiler's assembler wrote them) and its ``__TEXT,__eh_frame`` read by the
container-free DWARF reader (``dwarf/cfi.py``), and the code bytes at an address.

A row is 32 bytes on 64-bit targets: function start (8), length (4), encoding (4),
personality (8), LSDA (8); 20 bytes on i386, pointers of 4.  The start, personality
and LSDA fields are relocated (``X86_64_RELOC_UNSIGNED``/``ARM64_RELOC_UNSIGNED``, a
scattered relocation on i386): a section relocation leaves the
target's address in the field, a symbol relocation names the symbol (whose value,
for an undefined personality routine, is 0).

``relocated`` applies the symbol relocations and SUBTRACTOR pairs of ``__eh_frame`` in
the object's one address space; i386's esp/ebp numbers are swapped back
(``native_numbers``); the personality routine a CIE names is looked up here.
"""

from __future__ import annotations

from ..dwarf.cfi import Cfi, Fde, fdes_at, parse_cfi
from ..errors import DecodeError
from ..model import CfaReg, RuleKind, Timeline
from ..typed import NamedTuple
from .layout import RELOCATED_FIELD
from .read import MH_OBJECT, MachoView, Reloc, Section, Symbol


class ObjectRow(NamedTuple):
    """One ``__compact_unwind`` row: the function's address and name, its length, the
    encoding, and the personality routine's name and LSDA address when present."""

    start: int
    name: str
    length: int
    encoding: int
    personality: str | None
    lsda: int | None


def compact_unwind_rows(view: MachoView) -> list[ObjectRow]:
    """The object's ``__LD,__compact_unwind`` rows in file order (none without one)."""
    section = view.section("__LD", "__compact_unwind")
    if section is None:
        return []
    data = view.section_data(section)
    entry = view.compact_unwind_entry
    size = entry.size
    if len(data) % size:
        raise DecodeError(section.offset, f"__compact_unwind is {len(data)} bytes, not a "
                                          f"multiple of {size}")
    relocs = {reloc.address: reloc for reloc in view.relocations(section)}
    names = view.function_names
    personality_at, lsda_at = entry.offset("personality"), entry.offset("lsda")
    rows = []
    for at, (start, length, encoding, personality, lsda) in zip(
            range(0, len(data), size), entry.iter_unpack(data), strict=True):
        start_value, start_name = _field(view, relocs.get(at), start)
        person_value, person_name = _field(view, relocs.get(at + personality_at),
                                           personality)
        lsda_value, _ = _field(view, relocs.get(at + lsda_at), lsda)
        rows.append(ObjectRow(start_value, start_name or names.get(start_value, "") or
                              f"pc+{start_value:#x}", length, encoding,
                              person_name or (f"{person_value:#x}" if person_value else None),
                              lsda_value or None))
    return rows


def _field(view: MachoView, reloc: Reloc | None, stored: int) -> tuple[int, str | None]:
    """A relocated pointer field: its value, and the symbol it names (extern only)."""
    if reloc is None or not reloc.extern:
        return stored, None  # no relocation, or to a section: the address is stored
    symbol = _symbol(view, reloc)
    return symbol.value + stored, symbol.name


def _symbol(view: MachoView, reloc: Reloc) -> Symbol:
    """The symbol an extern relocation names (a located error for one past the table)."""
    if reloc.number >= len(view.symbols):
        raise DecodeError(0, f"a relocation names symbol {reloc.number} of "
                             f"{len(view.symbols)}")
    return view.symbols[reloc.number]


# <mach-o/reloc.h>: an absolute pointer (UNSIGNED, 0 on every target), and the
# relocation that subtracts a symbol from the UNSIGNED that must follow it at the same
# field (X86_64_RELOC_SUBTRACTOR 5, ARM64_RELOC_SUBTRACTOR 1; i386 writes such a
# difference as a scattered pair whose field already holds it).
_UNSIGNED = 0
_SUBTRACTOR = {"x86_64": 5, "arm64": 1}


def relocated(view: MachoView, section: Section) -> bytes:
    """The section's bytes with every absolute field resolved in the object's one
    address space: an extern UNSIGNED field holds its addend, so it becomes symbol +
    addend; a SUBTRACTOR pair (``A - B + addend``: LLVM's form on arm64 for every
    FDE's start and LSDA, each against the section's own ``ltmpN``) becomes
    A - B + addend.  A section (non-extern) relocation's field already holds the
    address, so it adds nothing; PC-relative ones (GOT, branches) are left as they are."""
    relocs = view.relocations(section)
    if not relocs:
        return view.section_data(section)
    out = bytearray(view.section_data(section))
    subtractor = _SUBTRACTOR.get(view.arch)
    minus: Reloc | None = None
    for reloc in relocs:
        if reloc.kind == subtractor and not reloc.pcrel:
            minus = reloc  # the UNSIGNED it pairs with comes next
            continue
        if minus is not None and (reloc.kind != _UNSIGNED or reloc.address != minus.address):
            raise DecodeError(section.reloff, f"{section.segment},{section.name}: a "
                                              f"SUBTRACTOR relocation at {minus.address:#x}"
                                              f" not followed by its UNSIGNED")
        if reloc.kind == _UNSIGNED and not reloc.pcrel and reloc.length >= 2:
            delta = (_symbol(view, reloc).value if reloc.extern else 0) - (
                _symbol(view, minus).value if minus is not None and minus.extern else 0)
            _add_to_field(out, reloc, delta, section)
        minus = None
    if minus is not None:
        raise DecodeError(section.reloff, f"{section.segment},{section.name}: a SUBTRACTOR "
                                          f"relocation at {minus.address:#x} ends the list")
    return bytes(out)


def _add_to_field(out: bytearray, reloc: Reloc, delta: int, section: Section) -> None:
    """``delta`` added to the 4- or 8-byte little-endian field a relocation names."""
    field = RELOCATED_FIELD[3 if reloc.length == 3 else 2]
    if reloc.address + field.size > len(out):
        raise DecodeError(section.reloff, f"{section.segment},{section.name}: a relocation "
                                          f"at {reloc.address:#x} past the section's end")
    (value,) = field.unpack_from(out, reloc.address, 1)
    out[reloc.address:reloc.address + field.size] = field.pack(
        ((value + delta) % (1 << 8 * field.size),))


def eh_frame(view: MachoView, path: str, named: bool = True) -> Cfi | None:
    """The ``__TEXT,__eh_frame`` FDEs (None without the section), placed at the section's
    address: in an object each FDE's PC-relative start and LSDA are resolved within
    the object's one address space (by the assembler on x86-64; from the SUBTRACTOR
    pairs LLVM writes on arm64, ``relocated``); functions named by the symbols there
    (``named=False``: by none, for a caller that names no FDE: reading 100k symbols'
    names was a fifth of an image's ``verify``)."""
    section = view.section("__TEXT", "__eh_frame")
    if section is None:
        return None
    names = {("", address): name for address, name in view.function_names.items()} \
        if named else {}
    fdes = parse_cfi(relocated(view, section), True, section.addr, {}, view.pointer_size,
                     True, names)
    return _cfi(view, path, fdes)


def _cfi(view: MachoView, path: str, fdes: list[Fde]) -> Cfi:
    machine = {"x86_64": "EM_X86_64", "arm64": "EM_AARCH64", "i386": "EM_386"}[view.arch]
    kind = "ET_REL" if view.filetype == MH_OBJECT else "ET_DYN"
    return Cfi(path, machine, kind, tuple(fdes), "__eh_frame")


def eh_frame_at(view: MachoView, path: str, offsets: list[int]) -> Cfi:
    """``eh_frame(view, path, named=False)`` holding only the FDEs at ``offsets`` of
    the section (a caller that walked it already: ``compact.check``)."""
    section = view.section("__TEXT", "__eh_frame")
    assert section is not None
    return _cfi(view, path, fdes_at(relocated(view, section), offsets, section.addr,
                                   view.pointer_size, True))


# i386 Darwin numbers esp 5 and ebp 4 in __eh_frame, the other way round from the
# System V numbers (esp 4, ebp 5) the i386 target description uses.
_DARWIN_I386 = {4: 5, 5: 4}


def native_numbers(timeline: Timeline, arch: str) -> Timeline:
    """``timeline`` in the target description's register numbers: i386's esp and ebp
    swapped back (in the CFA rule, the rules' registers and a rule naming a register;
    a DWARF expression is left as it is); other targets' as they are."""
    if arch != "i386":
        return timeline

    def num(reg: int) -> int:
        return _DARWIN_I386.get(reg, reg)

    rows = tuple(row._replace(
        cfa=CfaReg(num(row.cfa.reg), row.cfa.offset) if isinstance(row.cfa, CfaReg)
        else row.cfa,
        regs=tuple(sorted((num(reg), rule._replace(value=num(rule.value))
                           if rule.kind == RuleKind.register else rule)
                          for reg, rule in row.regs)))
        for row in timeline.rows)
    return timeline._replace(rows=rows)


def cie_personalities(view: MachoView, cie_offsets: set[int]) -> dict[int, int]:
    """CIE offset in ``__eh_frame`` -> the symbol index of its personality routine: in
    an object the CIE's personality field has the only symbol relocation inside the
    CIE (X86_64_RELOC_GOT, ARM64_RELOC_POINTER_TO_GOT), the field itself being a
    pointer to a GOT slot the linker makes."""
    section = view.section("__TEXT", "__eh_frame")
    if section is None:
        return {}
    data = view.section_data(section)
    ends = {}
    for at in cie_offsets:
        if at + 4 <= len(data):  # the CIE's 32-bit length, then that many bytes
            ends[at] = at + 4 + int.from_bytes(data[at:at + 4], "little")
    out: dict[int, int] = {}
    for reloc in view.relocations(section):
        if not reloc.extern:
            continue
        for at, end in ends.items():
            if at <= reloc.address < end:
                out.setdefault(at, reloc.number)
    return out


def with_encodings(view: MachoView, encodings: dict[int, int]) -> bytes:
    """The object with the encoding of each ``__compact_unwind`` row whose function
    starts at an address in ``encodings`` replaced (its start, length, personality and
    LSDA fields and their relocations stay as the assembler wrote them)."""
    section = view.section("__LD", "__compact_unwind")
    out = bytearray(view.data)
    if section is None:
        return bytes(out)
    entry = view.compact_unwind_entry
    for at, row in zip(range(0, section.size, entry.size), compact_unwind_rows(view),
                       strict=True):
        if row.start in encodings:
            entry.put(out, section.offset + at, "encoding", encodings[row.start])
    return bytes(out)
