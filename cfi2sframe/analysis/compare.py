"""Reading-side commands as pure functions: lookup, diff and verify.

All three compare recovery rules (``sframe.rules.FrameRules``) PC by PC,
where a PC range is the stretch between two consecutive row starts of
either side; rules are constant inside such a stretch.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..arch import arch_for_machine
from ..arch.base import Arch
from ..elf.cfi import read_elf_cfi
from ..elf.compressed import DEFAULT_LIMITS, Limits
from ..elf.layout import Problem, layout_problems
from ..elf.read import open_elf
from ..errors import Cfi2SframeError, decoding
from ..files import read_input
from ..model import Row, Timeline
from ..sframe.decode import DecodedFde, DecodedFre, DecodedSection
from ..sframe.load import load_sframe
from ..sframe.lower import Skip, beyond_sframe, lower
from ..sframe.pcmask import resolve_pc_expressions
from ..sframe.rules import OUTERMOST, FrameRules, dwarf_rules, fre_rules, outermost
from ..sframe.text import describe

if TYPE_CHECKING:
    from ..dwarf.cfi import Cfi

# -- SFrame side -------------------------------------------------------------------------


def sframe_steps(section: DecodedSection, fde: DecodedFde) -> list[tuple[int, FrameRules]]:
    """(offset from function start, rules) for each FRE of a PC-increment FDE.

    A V3 default FDE without FREs is an outermost frame: RA undefined throughout.
    """
    if outermost(section, fde):
        return [(0, OUTERMOST)]
    return [(fre.start, fre_rules(section, fde, fre)) for fre in fde.fres]


def differing_ranges(a: Sequence[tuple[int, object]], b: Sequence[tuple[int, object]],
                     size: int) -> list[tuple[int, int, object, object]]:
    """[(start, end, rules of a, rules of b)] where the two step lists disagree.

    Both lists are sorted by start; one sweep, so a PLT of thousands of
    repetitions costs linear time.
    """
    if _below(a, size) == _below(b, size):
        return []  # the same steps inside the range: nothing differs (the common case)
    bounds = sorted(x for x in {0, *(s for s, _ in a), *(s for s, _ in b)} if 0 <= x < size)
    out: list[tuple[int, int, object, object]] = []
    ia = ib = 0
    ra: object = None
    rb: object = None
    for i, start in enumerate(bounds):
        while ia < len(a) and a[ia][0] <= start:
            ra = a[ia][1]
            ia += 1
        while ib < len(b) and b[ib][0] <= start:
            rb = b[ib][1]
            ib += 1
        end = bounds[i + 1] if i + 1 < len(bounds) else size
        if ra != rb:
            if out and out[-1][1] == start and out[-1][2:] == (ra, rb):
                out[-1] = (out[-1][0], end, ra, rb)
            else:
                out.append((start, end, ra, rb))
    return out


def _below(steps: Sequence[tuple[int, object]], size: int) -> Sequence[tuple[int, object]]:
    """``steps`` without those at or past ``size`` (they are sorted by start)."""
    end = len(steps)
    while end and steps[end - 1][0] >= size:
        end -= 1
    return steps if end == len(steps) else steps[:end]


@dataclass(frozen=True)
class FunctionDiff:
    """How one function differs between two sections."""

    address: int
    size_a: int
    size_b: int
    ranges: tuple[tuple[int, int, object, object], ...]


@dataclass(frozen=True)
class SectionDiff:
    """The semantic difference between two SFrame sections."""

    differing: tuple[FunctionDiff, ...]
    only_a: tuple[DecodedFde, ...]
    only_b: tuple[DecodedFde, ...]
    same: int

    @property
    def equivalent(self) -> bool:
        return not (self.differing or self.only_a or self.only_b)


FdeKey = Callable[[DecodedFde], tuple[str, int]]


def _by_address(fde: DecodedFde) -> tuple[str, int]:
    return ("", fde.start_address)


def diff_sections(a: DecodedSection, b: DecodedSection, key_a: FdeKey = _by_address,
                  key_b: FdeKey = _by_address) -> SectionDiff:
    """Compare by meaning: per function, the rules at every PC.

    Functions are matched by ``key`` (section and start address; in a linked
    file the section is "" and the address alone decides).
    """
    by_a = {key_a(fde): fde for fde in a.fdes}
    by_b = {key_b(fde): fde for fde in b.fdes}
    differing = []
    same = 0
    for key in sorted(set(by_a) & set(by_b)):
        fa, fb = by_a[key], by_b[key]
        address = fa.start_address
        if fa.pc_mask or fb.pc_mask:
            steps_a = [(f.start, fre_rules(a, fa, f)) for f in fa.fres] + [("mask", fa.rep_size)]
            steps_b = [(f.start, fre_rules(b, fb, f)) for f in fb.fres] + [("mask", fb.rep_size)]
            if steps_a != steps_b or fa.size != fb.size or fa.pc_mask != fb.pc_mask:
                differing.append(FunctionDiff(address, fa.size, fb.size,
                                              ((0, max(fa.size, fb.size), "mask", "mask"),)))
            else:
                same += 1
            continue
        ranges = differing_ranges(sframe_steps(a, fa), sframe_steps(b, fb),
                                  max(fa.size, fb.size))
        if fa.size != fb.size or ranges:
            differing.append(FunctionDiff(address, fa.size, fb.size, tuple(ranges)))
        else:
            same += 1
    only_a = tuple(by_a[x] for x in sorted(set(by_a) - set(by_b)))
    only_b = tuple(by_b[x] for x in sorted(set(by_b) - set(by_a)))
    return SectionDiff(tuple(differing), only_a, only_b, same)


# -- DWARF side --------------------------------------------------------------------------


@dataclass(frozen=True)
class VerifyResult:
    """Outcome of ``verify``.

    ``mismatches``: functions where SFrame and DWARF differ (ranges with both
    rules; None on the SFrame side means no FDE covers those PCs).
    ``unevaluated``: functions whose DWARF CFA is an expression we cannot
    reduce to register + offset, with what SFrame says there.  ``missing``:
    functions no SFrame FDE covers at all, with our encoder's reason.
    ``extra``: SFrame FDEs that cover no DWARF function.  ``layout``: where a
    linked file's sections and segments disagree (``elf.layout``).
    """

    checked: int
    mismatches: tuple[tuple[Timeline, tuple[tuple[int, int, object, object], ...]], ...]
    missing: tuple[tuple[Timeline, str], ...]
    extra: tuple[DecodedFde, ...]
    unevaluated: tuple[tuple[Timeline, str, tuple[tuple[int, object], ...]], ...] = ()
    layout: tuple[Problem, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.mismatches and not self.layout


FreRules = Callable[[DecodedSection, DecodedFde, DecodedFre], FrameRules]


class _RulesMemo:
    """``fre_rules`` and ``_dwarf_side`` remembered for one section: libraries repeat a
    few shapes (libLLVM-14: 861k FREs and rows, a few thousand distinct), and each
    answer depends only on the key below, never on where the FRE or row starts."""

    def __init__(self, arch: Arch) -> None:
        self.arch = arch
        self.fres: dict[tuple[bool, bool, int, tuple[int, ...]], FrameRules] = {}
        self.rows: dict[tuple[object, ...], object] = {}

    def fre(self, section: DecodedSection, fde: DecodedFde, fre: DecodedFre) -> FrameRules:
        # What fre_rules reads besides the section's header: FLEX, base register,
        # word size (for FLEX control words), the words.
        key = (fde.flex, fre.base_fp, fre.offset_size, fre.offsets)
        rules = self.fres.get(key)
        if rules is None:
            rules = self.fres[key] = fre_rules(section, fde, fre)
        return rules

    def row(self, row: Row, ra_column: int) -> object:
        key = (ra_column, row.cfa, row.regs, row.ra_signed, row.ra_signed_pc)
        side = self.rows.get(key, self)
        if side is self:
            side = self.rows[key] = _dwarf_side(row, self.arch, ra_column)
        return side


def covering_steps(section: DecodedSection, fdes: Sequence[DecodedFde], start: int,
                   rules_of: FreRules = fre_rules) -> list[tuple[int, object]]:
    """The SFrame rules over consecutive FDEs as steps from ``start`` on: PC-mask FDEs
    expanded into every repetition, None where no FDE covers a PC."""
    steps: list[tuple[int, object]] = []
    for fde in fdes:
        base = fde.start_address - start
        if steps and steps[-1][0] > base:
            steps = [step for step in steps if step[0] < base]
        if fde.pc_mask and fde.rep_size:
            block = [(fre.start, rules_of(section, fde, fre)) for fre in fde.fres
                     if fre.start < fde.rep_size]
            steps.extend((base + at + offset, rules)
                         for at in range(0, fde.size, fde.rep_size)
                         for offset, rules in block if at + offset < fde.size)
        elif outermost(section, fde):
            steps.append((base, OUTERMOST))
        else:
            steps.extend((base + fre.start, rules_of(section, fde, fre)) for fre in fde.fres
                         if fre.start < fde.size)
        steps.append((base + fde.size, None))
    return steps


def _dwarf_side(row: Row, arch: Arch, ra_column: int) -> object:
    """A DWARF row as rules to compare, or (in words) what it says beyond SFrame."""
    rules = dwarf_rules(row, arch, ra_column)
    beyond = beyond_sframe(row, arch) if rules is not None else None
    if rules is None or beyond is None:
        return rules
    return f"{describe(rules, arch.sframe_abi)}; but {beyond}"


def verify(section: DecodedSection, timelines: Iterable[Timeline], arch: Arch,
           section_of: Callable[[DecodedFde], str] = lambda fde: "") -> VerifyResult:
    """Check at every PC of every function that SFrame recovers CFA, FP and RA as DWARF does.

    Every SFrame FDE that overlaps a function counts, as a reader looking up a
    PC would find it: a linker's PLT is one DWARF FDE but a PC-increment FDE
    for PLT0 and a PC-mask FDE for the entries.  ``section_of`` names the
    section of an FDE's function in a relocatable object ("" when linked).
    """

    by_section: dict[str, list[DecodedFde]] = {}
    for fde in section.fdes:
        by_section.setdefault(section_of(fde), []).append(fde)
    starts: dict[str, list[int]] = {}
    for name, fdes in by_section.items():
        fdes.sort(key=lambda fde: (fde.start_address, fde.size))
        starts[name] = [fde.start_address for fde in fdes]
    used: set[int] = set()
    memo = _RulesMemo(arch)
    checked = 0
    mismatches = []
    missing = []
    unevaluated = []
    for timeline in timelines:
        fdes = by_section.get(timeline.section, [])
        end = timeline.start + timeline.size
        first = bisect_right(starts.get(timeline.section, []), timeline.start)
        while first > 0 and fdes[first - 1].start_address + fdes[first - 1].size \
                > timeline.start:
            first -= 1
        covering = []
        for index in range(first, len(fdes)):  # not fdes[first:]: a copy per function
            fde = fdes[index]
            if fde.start_address >= end and timeline.size:
                break
            if fde.start_address + fde.size > timeline.start or (
                    fde.start_address == timeline.start):
                covering.append(fde)
        if not covering or timeline.invalid is not None:
            result = lower(timeline, arch)
            why = result.reason if isinstance(result, Skip) else "encodable"
            missing.append((timeline, why))
            continue
        used.update(fde.index for fde in covering)
        have = covering_steps(section, covering, timeline.start, memo.fre)
        resolved = resolve_pc_expressions(timeline, arch)
        if isinstance(resolved, str):
            unevaluated.append((timeline, resolved, tuple(have)))
            continue
        checked += 1
        ra_column = resolved.ra_column
        want = [(row.start, memo.row(row, ra_column)) for row in resolved.rows]
        ranges = differing_ranges(have, want, timeline.size)
        if ranges:
            mismatches.append((timeline, tuple(ranges)))
    extra = tuple(fde for fde in section.fdes if fde.index not in used)
    return VerifyResult(checked, tuple(mismatches), tuple(missing), extra, tuple(unevaluated))


def verify_elf(path: str, data: bytes | None = None, limits: Limits = DEFAULT_LIMITS,
               cfi: Cfi | None = None) -> tuple[VerifyResult, int]:
    """``verify`` for an ELF file's own ``.sframe`` against its ``.eh_frame`` (or
    ``.debug_frame``; ``cfi`` when the caller has read it); also the section's ABI
    id, for describing rules."""
    if data is None:
        data = read_input(path)
    loaded = load_sframe(path, data, limits=limits)
    if not loaded.is_elf:
        raise Cfi2SframeError(path, "verify needs an ELF file with .sframe and .eh_frame")
    if cfi is None:
        cfi = read_elf_cfi(path, data, limits)
    arch = arch_for_machine(cfi.machine, path, cfi.big_endian)
    result = verify(loaded.section, cfi.each_timeline(), arch,
                    lambda fde: loaded.section_of(fde.field_offset))
    with decoding(path):
        problems = layout_problems(open_elf(data, path), arch.min_page_size)
    return replace(result, layout=tuple(problems)), loaded.section.abi


def check_rewritten(display: str, payload: bytes | str,
                    limits: Limits = DEFAULT_LIMITS) -> None:
    """Verify a rewritten ELF file against its own CFI before it replaces the input
    (``--in-place``): an error, and the input stays as it was, unless it verifies."""
    if not isinstance(payload, bytes):
        raise Cfi2SframeError(display, "--in-place rewrites ELF files only")
    result, _ = verify_elf(display, payload, limits)
    if not result.ok or result.extra:
        raise Cfi2SframeError(display, "the rewritten file does not verify "
                                       f"({_first_failure(result)}); input left untouched")


def _first_failure(result: VerifyResult) -> str:
    """The first rule a rewritten file breaks, in words (for the one-line error)."""
    more = len(result.layout) + len(result.mismatches) + len(result.extra) - 1
    also = f"; {more} more problem{'s' if more > 1 else ''}" if more > 0 else ""
    if result.layout:
        problem = result.layout[0]
        return f"bad layout: {problem.text} (header at {problem.at:#x}){also}"
    if result.mismatches:
        timeline, ranges = result.mismatches[0]
        start, end = ranges[0][:2]
        return (f"SFrame and DWARF differ in '{timeline.name}' over "
                f"[{timeline.start + start:#x}, {timeline.start + end:#x}){also}")
    fde = result.extra[0]
    return f"an SFrame FDE at {fde.start_address:#x} has no DWARF FDE{also}"
