"""``verify`` for Mach-O: a file's compact unwind against its own DWARF CFI and code.

An image's ``__TEXT,__unwind_info`` is checked as libunwind reads it (``table``):
its structure (the sentinel past the last function, pages inside their index
ranges), every DWARF-mode entry's offset at the FDE of its own function, every
compact entry against that function's CFI where ``__eh_frame`` has an FDE for it
(the rules the encoding decodes to are those of the CFI's body state, as
``lower`` defines it; the personality slot and LSDA are the FDE's), a STACK_IND
immediate present in the code, and every function with CFI found by the
look-up at its first and last byte.  An ``__eh_frame`` whose FDEs lie outside
every code section was copied without being relocated (ld64.lld 14 does so).

An object's ``__LD,__compact_unwind`` rows are checked against its
``__eh_frame`` the same way; there the FDEs are the object's own.  A compact entry
or row without an FDE is checked against what its code builds (``prologue``).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Sequence

from ..arch import by_compact
from ..core import compiled
from ..dwarf.cfi import Cfi, Fde, RowsCache, cie_reader
from ..errors import Cfi2SframeError
from ..macho.read import FILE_TYPES, MH_OBJECT, MachoView
from ..macho.unwind import (
    compact_unwind_rows,
    eh_frame,
    eh_frame_at,
    native_numbers,
    relocated,
)
from ..model import Timeline
from ..reasons import CompactReason, Unrepresentable
from ..typed import TYPE_CHECKING, NamedTuple
from .encoding import decode, describe
from .inputs import function_ends, unwind_columns
from .lower import CompactRow, body_row, inexact_spans, lower_compact, row_rules
from .prologue import PROLOGUE_REACH, built_rules
from .rules import Code, CompactRules
from .table import Columns, Lookup
from .words import (
    ARM64_DWARF,
    HAS_LSDA,
    MODE_MASK,
    NOT_FUNCTION_START,
    PERSONALITY_MASK,
    X86_DWARF,
    X86_STACK_IND,
    is_dwarf,
)

if TYPE_CHECKING:
    from typing import Any

S_ATTR_PURE_INSTRUCTIONS, S_ATTR_SOME_INSTRUCTIONS = 0x80000000, 0x400
FLAGS = HAS_LSDA | PERSONALITY_MASK | NOT_FUNCTION_START


class MachoCheck(NamedTuple):
    """What ``verify`` found: rows read, rows checked against CFI, and each problem
    (a failure) or note (not checked, and why) in words."""

    rows: int
    checked: int
    problems: tuple[str, ...]
    notes: tuple[str, ...]
    from_code: int = 0  # entries with no FDE checked against their prologue instead

    @property
    def ok(self) -> bool:
        return not self.problems


def check_macho(path: str, view: MachoView, cfi: Cfi | None = None) -> MachoCheck:
    """An image's ``__unwind_info`` or an object's ``__compact_unwind`` rows (``cfi``:
    the file's ``macho.unwind.eh_frame``, when the caller has read it)."""
    if view.filetype == MH_OBJECT:
        return _check_object(path, view, cfi if cfi is not None else eh_frame(view, path))
    if cfi is None:  # the compiled core walks __eh_frame, the FDEs in code read here
        found = _compiled_extents(path, view)
        if found is not None:
            return _check_image(path, view, *found)
        cfi = eh_frame(view, path, named=False)  # (names no FDE)
    if cfi is None:
        return _check_image(path, view, None, FdeExtents(0, 0, None, [], {}))
    extents = fde_extents(cfi.fdes, _code_sections(view))
    in_code = set(extents.in_code)
    return _check_image(path, view, Cfi(cfi.path, cfi.machine, cfi.elf_type, tuple(
        fde for fde in cfi.fdes if fde.offset in in_code), cfi.section_name), extents)


class FdeExtents(NamedTuple):
    """What ``verify`` needs of every FDE of an image's ``__eh_frame`` (all but those
    in code are only counted and found by offset): their count, how many lie outside
    every code section and the first of those (offset, start, size), the offsets of
    those in code, each FDE's start by offset."""

    fdes: int
    stray: int
    first_stray: tuple[int, int, int] | None
    in_code: list[int]
    starts: dict[int, int]


def fde_extents(fdes: Sequence[Fde], code: list[tuple[int, int]]) -> FdeExtents:
    """``FdeExtents`` of ``fdes`` (the compiled ``fde_extents``'s reference)."""
    stray = [fde for fde in fdes if not _in_code(fde, code)]
    first = (stray[0].offset, stray[0].start, stray[0].size) if stray else None
    return FdeExtents(len(fdes), len(stray), first,
                      [fde.offset for fde in fdes if _in_code(fde, code)],
                      {fde.offset: fde.start for fde in fdes})


def _compiled_extents(path: str, view: MachoView) -> tuple[Cfi | None, FdeExtents] | None:
    """The image's ``__eh_frame`` walked by the compiled core (``fde_extents``), the FDEs
    in code read by Python; None without the core or where the Python walker must
    decide."""
    core = compiled()
    section = view.section("__TEXT", "__eh_frame")
    if core is None:
        return None
    if section is None:
        return None, FdeExtents(0, 0, None, [], {})
    data = relocated(view, section)
    found = core.fde_extents(eh=data, address=section.addr, address_size=view.pointer_size,
                             cie_of=cie_reader(data, section.addr, view.pointer_size, True),
                             code=tuple(_code_sections(view)))
    if found is None:
        return None
    extents = FdeExtents(*found)
    return eh_frame_at(view, path, extents.in_code), extents


def _code_sections(view: MachoView) -> list[tuple[int, int]]:
    return [(s.addr, s.addr + s.size) for s in view.sections
            if s.flags & (S_ATTR_PURE_INSTRUCTIONS | S_ATTR_SOME_INSTRUCTIONS)]


def _in_code(fde: Fde, code: list[tuple[int, int]]) -> bool:
    return any(lo <= fde.start and fde.start + fde.size <= hi for lo, hi in code)


def rules_problem(encoding: int, timeline: Timeline, flavour: str,
                  code: bytes | None, names: dict[int, str]) -> str | None:
    """Why ``encoding`` does not unwind ``timeline``'s body state as its CFI says;
    None when it does (or when the CFI has no body state to compare with)."""
    want_row = body_row(timeline.rows, flavour)
    if timeline.invalid is not None or want_row is None:
        return None
    bare = encoding & ~FLAGS
    at = Code(code) if code is not None else None
    got = decode(bare, flavour, at)
    if isinstance(got, Unrepresentable):
        return f"its encoding {encoding:#010x} does not decode: {got.detail}"
    want = row_rules(want_row, flavour)
    if isinstance(want, Unrepresentable):
        return (f"its encoding {encoding:#010x} ({describe(bare, flavour, None, names)}) "
                f"cannot describe the CFI, which needs DWARF mode: {want.detail}")
    if got == want:
        return None
    right = lower_compact(timeline, flavour, at).rows[0].encoding  # only to name it
    return (f"its encoding {encoding:#010x} ({describe(bare, flavour, None, names)}) "
            f"unwinds differently from the CFI, which says {right:#010x} "
            f"({describe(right & ~FLAGS, flavour, None, names)})")


def _check_image(path: str, view: MachoView, cfi: Cfi | None,
                 extents: FdeExtents) -> MachoCheck:
    """The table against ``cfi`` (the FDEs in code) and what ``extents`` says of the
    rest."""
    table = unwind_columns(path, view)
    if table is None:
        raise Cfi2SframeError(path, "no __TEXT,__unwind_info section: nothing to verify")
    section = view.section("__TEXT", "__unwind_info")
    assert section is not None
    flavour = view.arch  # the compact flavour of its CPU
    names = by_compact(flavour).register_names
    base = view.image_base
    problems = list(table.problems)
    notes: list[str] = []
    by_start: dict[int, Fde] = {}
    timelines: dict[int, Timeline] = {}
    in_place = True  # __eh_frame relocated
    if cfi is not None:
        cache: RowsCache = {}
        for fde in cfi.fdes:  # interpreted only where they describe code
            by_start[fde.start] = fde
            timelines[fde.start] = native_numbers(cfi.timeline(fde, cache), view.arch)
    if extents.first_stray is not None:
        offset, start, size = extents.first_stray
        problems.append(
            f"__eh_frame: {extents.stray} of {extents.fdes} FDEs lie outside every code "
            f"section (the first, at __eh_frame+{offset:#x}, covers "
            f"[{start:#x}, {start + size:#x})): the section was "
            "copied without being relocated (ld64.lld 14 does so), and libunwind's "
            "DWARF look-ups find no function there")
        in_place = extents.stray < extents.fdes
    if not extents.fdes:
        notes.append("no FDE in __eh_frame: compact encodings checked against the code")
    lookup = Lookup(view.section_data(section))

    def code_problem(address: int, length: int, encoding: int) -> str | bool | None:
        return _code_problem(view, address, length, encoding, flavour, names)

    params = _entry_params(view, table, by_start, extents.starts, in_place, code_problem)
    core = compiled()
    found = core.image_entries(**params) if core is not None else None
    checked, from_code, events = found if found is not None else entry_events(**params)
    for event in events:
        kind, address = event[0], base + table.offsets[event[1]]
        if kind == "cfi":  # an FDE in code: its CFI against the entry, in Python
            checked += 1
            problems.extend(_cfi_problems(view, event[1], table, by_start[address],
                                          timelines[address], names))
        elif kind == "no-info":
            problems.append(f"{_where(view, address)}: its entry says no unwind "
                            "information, but __eh_frame has an FDE for it")
        elif kind == "no-fde":
            problems.append(f"{_where(view, address)}: DWARF mode at __eh_frame+"
                            f"{event[2]:#x}, where no FDE starts")
        elif kind == "other-fde":
            target = eh_frame_at(view, path, [event[2]]).fdes[0]
            problems.append(f"{_where(view, address)}: DWARF mode at __eh_frame+"
                            f"{target.offset:#x}, the "
                            f"FDE of [{target.start:#x}, {target.start + target.size:#x})")
        else:  # "code": what its prologue builds is not its encoding
            problems.append(f"{_where(view, address)}: {event[2]}")
    for start, fde in sorted(by_start.items()):
        for pc in (start, start + max(fde.size, 1) - 1):
            hit = lookup.find(pc - base)
            if hit is None or hit.start != start - base:
                symbols = view.function_names
                name = symbols.get(start, f"pc+{start:#x}")
                row = "no row" if hit is None else \
                    f"the row of {symbols.get(base + hit.start, f'pc+{base + hit.start:#x}')}"
                problems.append(f"'{name}' at {start:#x} has an FDE, but libunwind's "
                                f"look-up at {pc:#x} finds {row}")
                break
    return MachoCheck(len(table.offsets), checked, tuple(problems), tuple(notes), from_code)


def _entry_params(view: MachoView, table: Columns, by_start: dict[int, Fde],
                  fde_starts: dict[int, int], relocated: bool,
                  code_problem: Callable[[int, int, int], str | bool | None]
                  ) -> dict[str, Any]:
    """The arguments of ``entry_events`` (and of the compiled ``image_entries``), by
    name: the table's columns, the FDEs by start (those in code) and by offset (their
    starts), the image's sections with file contents, the flavour's mode words."""
    x86 = view.arch != "arm64"
    return {
        "offsets": table.offsets, "ends": function_ends(view, table),
        "encodings": table.encodings, "in_code": by_start,
        "fde_starts": fde_starts,
        "relocated": relocated, "code_problem": code_problem, "image": view.data,
        "sections": tuple((s.addr, s.size, s.offset) for s in view.sections),
        "base": view.image_base, "mode_mask": MODE_MASK,
        "dwarf": X86_DWARF if x86 else ARM64_DWARF,
        "stack_ind": X86_STACK_IND if x86 else -1, "reach": PROLOGUE_REACH if x86 else -1}


def entry_events(*, offsets: list[int], ends: list[int], encodings: list[int],
                 in_code: dict[int, Any], fde_starts: dict[int, int], relocated: bool,
                 code_problem: Callable[[int, int, int], str | bool | None], image: bytes,
                 sections: tuple[tuple[int, int, int], ...], base: int, mode_mask: int,
                 dwarf: int, stack_ind: int, reach: int
                 ) -> tuple[int, int, list[tuple[Any, ...]]]:
    """Each entry of an image's table checked where no CFI is interpreted (the compiled
    ``image_entries``'s reference): (DWARF-mode entries at their own FDE, entries found
    right from their code, what to say, in entry order); an entry whose function has an
    FDE in code is an event ("cfi", i) for the caller.  ``code_problem`` is asked once
    per distinct (encoding, code it reads): the prologue's first ``reach`` bytes (-1:
    the whole function), the whole function for STACK_IND."""
    checked = from_code = 0
    events: list[tuple[Any, ...]] = []
    memo: dict[tuple[int, bytes | None], str | bool | None] = {}
    for i, (offset, end, encoding) in enumerate(zip(offsets, ends, encodings, strict=True)):
        address = base + offset
        if encoding == 0:
            if address in in_code:
                events.append(("no-info", i))
            continue
        if encoding & mode_mask == dwarf:
            target = fde_starts.get(encoding & 0xFFFFFF)
            if target is None:
                events.append(("no-fde", i, encoding & 0xFFFFFF))
            elif relocated and target != address:
                events.append(("other-fde", i, encoding & 0xFFFFFF))
            else:
                checked += 1
            continue
        if address in in_code:
            events.append(("cfi", i))
            continue
        code = _bytes_at(image, sections, address, end - offset)
        if code is not None and reach >= 0 and encoding & mode_mask != stack_ind:
            code = code[:reach]
        key = (encoding, code)
        if key not in memo:
            memo[key] = code_problem(address, end - offset, encoding)
        problem = memo[key]
        if problem is True:
            from_code += 1
        elif problem:
            events.append(("code", i, problem))
    return checked, from_code, events


def _bytes_at(image: bytes, sections: tuple[tuple[int, int, int], ...], address: int,
              size: int) -> bytes | None:
    """``MachoView.bytes_at`` over ``sections``' (address, size, file offset)."""
    for addr, length, offset in sections:
        if addr <= address and address + size <= addr + length and offset:
            at = offset + address - addr
            return image[at:at + size]
    return None


def _cfi_problems(view: MachoView, i: int, table: Columns, own: Fde, lines: Timeline,
                  names: dict[int, str]) -> list[str]:
    """Entry ``i`` against its function's FDE: the encoding against the CFI's body
    state, the personality slot and the LSDA."""
    base, flavour = view.image_base, view.arch
    address = base + table.offsets[i]
    where = _where(view, address)
    problems = []
    found = rules_problem(table.encodings[i], lines, flavour,
                         view.bytes_at(address, lines.size), names)
    if found is not None:
        problems.append(f"{where}: {found}")
    personality = own.cie.personality - base if own.cie.personality else None
    if personality != table.personalities[i]:
        problems.append(f"{where}: personality slot "
                        f"{_offset(table.personalities[i], base)}, its FDE's "
                        f"{_offset(personality, base)}")
    lsda = own.lsda - base if own.lsda else None
    if lsda != table.lsdas[i]:
        problems.append(f"{where}: LSDA {_offset(table.lsdas[i], base)}, its FDE's "
                        f"{_offset(lsda, base)}")
    return problems


def _where(view: MachoView, address: int) -> str:
    """A function named in a problem (the names are read only when one is found)."""
    return f"'{view.function_names.get(address, f'pc+{address:#x}')}' at {address:#x}"


def _code_problem(view: MachoView, address: int, length: int, encoding: int, flavour: str,
                  names: dict[int, str]) -> str | bool | None:
    """An encoding against the code alone: why it does not decode, or why it is not
    what the function's code builds (``prologue.built_rules``); True when it is, None when
    nothing could be read to compare with."""
    code = view.bytes_at(address, length)
    got = decode(encoding & ~FLAGS, flavour, Code(code) if code is not None else None)
    if isinstance(got, Unrepresentable):
        return f"its encoding {encoding:#010x} does not decode: {got.detail}"
    if code is None:
        return None
    built = built_rules(code, by_compact(flavour))
    if built is None:
        return None
    if built == got:
        return True
    return (f"its encoding {encoding:#010x} ({describe(encoding & ~FLAGS, flavour, None, names)}"
            f") is not what its prologue builds ({_rules_words(built, names)})")


def _rules_words(rules: CompactRules, names: dict[int, str]) -> str:
    saves = ", ".join(f"{names.get(reg, f'r{reg}')} at CFA{off:+d}" for reg, off in
                      sorted(rules.saved, key=lambda s: -s[1]))
    return (f"CFA = {names.get(rules.cfa_reg, f'r{rules.cfa_reg}')}+{rules.cfa_offset}"
            + (f"; saved {saves}" if saves else ""))


def _offset(value: int | None, base: int) -> str:
    return "none" if value is None else f"{base + value:#x}"


def _check_object(path: str, view: MachoView, cfi: Cfi | None) -> MachoCheck:
    rows = compact_unwind_rows(view)
    if not rows:
        raise Cfi2SframeError(path, "no __LD,__compact_unwind rows: nothing to verify")
    flavour = view.arch  # the compact flavour of its CPU
    names = by_compact(flavour).register_names
    problems: list[str] = []
    notes: list[str] = []
    fdes: dict[int, tuple[Fde, Timeline]] = {}
    if cfi is None:
        notes.append("no __eh_frame (clang writes none for arm64): the rows are checked "
                     "against the code only")
    else:
        fdes = {fde.start: (fde, native_numbers(timeline, view.arch))
                for fde, timeline in zip(cfi.fdes, cfi.timelines, strict=True)}
    checked = from_code = 0
    starts = sorted(fdes)
    per_function = Counter(_holder(starts, fdes, row.start) for row in rows)
    for row in rows:
        where = f"'{row.name}' at {row.start:#x}"
        holder = _holder(starts, fdes, row.start)
        found = fdes.get(holder) if holder is not None else None
        if is_dwarf(row.encoding, flavour):
            if cfi is not None and found is None:
                problems.append(f"{where}: DWARF mode, but __eh_frame has no FDE for it")
            else:
                checked += found is not None
            continue
        if found is None:  # no CFI for it: the encoding against what its code builds
            problem = _code_problem(view, row.start, row.length, row.encoding, flavour, names)
            if problem is True:
                from_code += 1
            elif problem:
                problems.append(f"{where}: {problem}")
            continue
        fde, timeline = found
        code = view.bytes_at(fde.start, timeline.size)
        if per_function[holder] > 1:  # one row per state (--ranges): each exact
            problem = _range_problem(row.start - fde.start, row.length, row.encoding,
                                     timeline, flavour, code, names)
        else:  # the one row: the body state
            problem = rules_problem(row.encoding, timeline, flavour, code, names)
        if problem is not None:
            problems.append(f"{where}: {problem}")
        if (row.lsda or None) != fde.lsda and fde.lsda is not None:
            problems.append(f"{where}: LSDA {_offset(row.lsda, 0)}, its FDE's "
                            f"{fde.lsda:#x}")
        checked += 1
    row_starts = {row.start for row in rows}
    missing = [fde for fde, _ in fdes.values() if fde.start not in row_starts]
    if missing:
        notes.append(f"{len(missing)} FDEs have no __compact_unwind row (the linker takes "
                     f"their DWARF CFI): {', '.join(f.name for f in missing[:5])}"
                     + (", ..." if len(missing) > 5 else ""))
    return MachoCheck(len(rows), checked, tuple(problems), tuple(notes), from_code)


def _holder(starts: list[int], fdes: dict[int, tuple[Fde, Timeline]],
            address: int) -> int | None:
    """The start of the FDE whose function holds ``address``, if one does."""
    i = bisect_right(starts, address) - 1
    if i < 0:
        return None
    fde = fdes[starts[i]][0]
    return fde.start if address < fde.start + max(fde.size, 1) else None


def _range_problem(offset: int, length: int, encoding: int, timeline: Timeline,
                   flavour: str, code: bytes | None, names: dict[int, str]) -> str | None:
    """Why one of a function's rows per state does not unwind as the CFI at every byte
    of [offset, offset + length) of the function; None when it does, or when the CFI
    has no rows to compare with (invalid CFI: as ``rules_problem``)."""
    if timeline.invalid is not None or not timeline.rows:
        return None
    row = CompactRow(offset, length, encoding)
    spans = inexact_spans(timeline, [row], flavour, Code(code) if code is not None else None)
    wrong = [(lo, hi) for lo, hi in spans if lo < offset + length and hi > offset]
    if not wrong:
        return None
    lo, hi = wrong[0]
    bare = encoding & ~FLAGS
    return (f"its encoding {encoding:#010x} ({describe(bare, flavour, None, names)}) "
            f"unwinds differently from the CFI at [{timeline.start + max(lo, offset):#x}, "
            f"{timeline.start + min(hi, offset + length):#x})")


def macho_coverage(path: str, view: MachoView, cfi: Cfi | None = None) -> dict[str, Any]:
    """What ``stats`` reports of a Mach-O file: its functions (an image's
    ``__unwind_info`` entries, an object's ``__compact_unwind`` rows) in compact
    mode, in DWARF mode and without unwind information; for each DWARF-mode one
    with an FDE, why compact unwind cannot describe it (our encoder's reason, or
    ``compact-possible`` where it can and the file's toolchain chose DWARF); and the
    sizes of the unwind sections."""
    flavour = view.arch  # the compact flavour of its CPU
    cfi = cfi if cfi is not None else eh_frame(view, path)
    fdes: dict[int, Fde] = {}
    if cfi is not None:
        code = _code_sections(view)
        fdes = {fde.start: fde for fde in cfi.fdes
                if view.filetype == MH_OBJECT or _in_code(fde, code)}
    cache: RowsCache = {}
    if view.filetype == MH_OBJECT:
        functions = [(row.start, row.encoding) for row in compact_unwind_rows(view)]
    else:
        table = unwind_columns(path, view)
        functions = [] if table is None else [(view.image_base + offset, encoding)
                                              for offset, encoding in zip(
                                                  table.offsets, table.encodings,
                                                  strict=True)]
    counts = {"compact": 0, "dwarf": 0, "none": 0}
    reasons: Counter[str] = Counter()
    for start, encoding in functions:
        if encoding & ~FLAGS == 0:
            counts["none"] += 1
        elif is_dwarf(encoding, flavour):
            counts["dwarf"] += 1
            fde = fdes.get(start)
            if fde is not None and cfi is not None:
                ours = lower_compact(native_numbers(cfi.timeline(fde, cache), view.arch),
                                     flavour,
                                     _code(view, start, fde.size))
                reasons[(ours.reason or CompactReason.compact_possible).value] += 1
        else:
            counts["compact"] += 1
    sizes = {}
    for segment, name in (("__TEXT", "__unwind_info"), ("__LD", "__compact_unwind"),
                          ("__TEXT", "__eh_frame")):
        section = view.section(segment, name)
        sizes[f"{name.strip('_')}_bytes"] = section.size if section is not None else 0
    return {"filetype": FILE_TYPES.get(view.filetype, str(view.filetype)),
            "functions": len(functions), **counts,
            "dwarf_reasons": dict(reasons.most_common()),
            "fdes": len(cfi.fdes) if cfi is not None else 0, **sizes}


def _code(view: MachoView, address: int, size: int) -> Code | None:
    found = view.bytes_at(address, size)
    return Code(found) if found is not None else None
