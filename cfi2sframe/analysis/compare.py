"""The reading side's comparisons: ``diff`` and ``verify`` (``verify_elf`` reads the
file itself where it is not given the bytes).

All three compare recovery rules (``sframe.rules.FrameRules``) PC by PC,
where a PC range is the stretch between two consecutive row starts of
either side; rules are constant inside such a stretch.

``verify`` goes by PC over every overlapping FDE, PC-mask FDEs expanded (``_Verifier``
holds one section's FDE spans, decoding an FDE only when a function needs it);
``verify_cfi`` is ``verify`` over a file's FDEs (the compiled core's ``agree`` first, a
timeline only where it cannot confirm); ``verify_elf`` checks a linked file through
``_scan`` (the compiled core's ``verify_scan``), else ``verify_cfi``, and the container
(``elf/layout.py``), but not for a section the file does not hold (``made``: the one a
conversion would add, checked at its address, never placed). A function no FDE covers is
a gap (``VerifyResult.uncovered``, failing ``ok``) where
``sframe/build.lower_function``, the conversion's decision, would give it one in the
section's version. The rules of each distinct FRE and DWARF row are worked out once per
section (``_RulesMemo``, ``_FastCheck``).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from operator import itemgetter
from types import ModuleType

from ..arch import arch_for_machine
from ..arch.base import Arch
from ..core import compiled as compiled_core
from ..dwarf.cfi import Cfi, Fde, RowsCache, fdes_at
from ..elf.cfi import named_fdes, read_elf_cfi
from ..elf.compressed import DEFAULT_LIMITS, Limits, section_contents
from ..elf.layout import Problem, layout_problems
from ..elf.read import SHT_NOBITS, ElfView, Section, open_elf, open_elf_file
from ..elf.reloc import relocate_view
from ..errors import Cfi2SframeError, DecodeError, InternalError, decoding
from ..files import read_input
from ..kinds import is_elf
from ..memo import Memo
from ..model import CfaReg, Row, Rule, RuleKind, Timeline
from ..sframe.build import lower_function
from ..sframe.decode import (
    FRE_TABLE,
    V3_ATTR_SIZE,
    DecodedFde,
    DecodedFre,
    DecodedSection,
    FdeTable,
    decode,
)
from ..sframe.fastpath import initial_state
from ..sframe.format import FRE_ADDR_SIZE
from ..sframe.load import SFrameBytes, placed_section, sframe_bytes
from ..sframe.lower import Skip, beyond_sframe
from ..sframe.pcmask import resolve_pc_expressions
from ..sframe.rules import (
    OUTERMOST,
    FrameRules,
    default_fre_rules,
    dwarf_rules,
    fre_rules,
    outermost,
)
from ..sframe.text import describe
from ..sframe.words import (
    FDE_INFO_FRE_TYPE,
    FDE_INFO_PC_MASK,
    FDE_INFO_UNUSED,
    FDE_TYPE_FLEX,
    FDE_TYPE_MASK,
)
from ..typed import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from ..arch.base import ByteOrder

    # ``_core.stats_scan``'s memos and parameters (``verify_scan``'s ``counts``), and its
    # answer: FDEs, functions, V2 and V3 FRE bytes, the FDEs left, lowest, highest start.
    Counts = tuple[dict[object, object], dict[object, object], dict[str, object]]
    Counted = tuple[int, int, int, int, list[int], int, int]

_COMPILED = compiled_core()

# The format's parameters as ``_core.verify_scan`` takes them (their homes:
# sframe/words.py, format.py, decode.py): the FDE info fields' masks, the FRE start
# size by FRE type (0: none), V3's attribute size and the FRE info table.
_FORMAT = {"fre_type_mask": FDE_INFO_FRE_TYPE, "pc_mask_bit": FDE_INFO_PC_MASK,
           "fde_type_mask": FDE_TYPE_MASK, "flex_type": FDE_TYPE_FLEX,
           "fre_addr_sizes": tuple(FRE_ADDR_SIZE.get(kind, 0) for kind in range(16)),
           "attr_size": V3_ATTR_SIZE, "fre_table": FRE_TABLE}
# Each section name's share of the address space an object's functions are scanned in:
# a start below 2**32 and a size below 2**32 (``_core.verify_scan`` checks both).
_SPAN = 1 << 33

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


class FunctionDiff(NamedTuple):
    """How one function differs between two sections."""

    address: int
    size_a: int
    size_b: int
    ranges: tuple[tuple[int, int, object, object], ...]


class SectionDiff(NamedTuple):
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


# ``VerifyResult.missing``'s reason for a function the conversion would give an FDE.
ENCODABLE = "encodable"


class VerifyResult(NamedTuple):
    """Outcome of ``verify``.

    ``mismatches``: functions where SFrame and DWARF differ (ranges with both
    rules; None on the SFrame side means no FDE covers those PCs).
    ``unevaluated``: functions whose DWARF CFA is an expression we cannot
    reduce to register + offset, with what SFrame says there.  ``missing``:
    functions no SFrame FDE covers at all, with our encoder's reason, or
    ``ENCODABLE`` where the conversion would give one an FDE (``uncovered``: a
    gap in the section, which fails ``ok``).  ``extra``: SFrame FDEs that cover
    no DWARF function.  ``layout``: where a linked file's sections and segments
    disagree (``elf.layout``).
    """

    checked: int
    mismatches: tuple[tuple[Timeline, tuple[tuple[int, int, object, object], ...]], ...]
    missing: tuple[tuple[Timeline, str], ...]
    extra: tuple[DecodedFde, ...]
    unevaluated: tuple[tuple[Timeline, str, tuple[tuple[int, object], ...]], ...] = ()
    layout: tuple[Problem, ...] = ()

    @property
    def uncovered(self) -> tuple[Timeline, ...]:
        """The functions the section lacks though the conversion would describe them, by
        address (the first is the one a report names)."""
        return tuple(sorted((timeline for timeline, why in self.missing if why == ENCODABLE),
                            key=lambda timeline: (timeline.section, timeline.start)))

    @property
    def agrees(self) -> bool:
        """No PC where SFrame and DWARF differ, and a sound container: what a rewritten
        file must meet (its coverage is the conversion's own choice: ``--no-flex``)."""
        return not self.mismatches and not self.layout

    @property
    def ok(self) -> bool:
        return self.agrees and not self.uncovered


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


class _Verifier:
    """``verify``'s state over one section: its FDEs by section and start (decoded only
    when a function needs them: ``fde_of``), which ones a function used, and the
    results so far.  ``spans``: (section, start address, size) of each FDE by index;
    ``flex`` False: coverage judged for readers without FLEX FDEs (``--no-flex``)."""

    def __init__(self, section: DecodedSection, arch: Arch, count: int,
                 spans: Callable[[], Iterable[tuple[str, int, int]]],
                 fde_of: Callable[[int], DecodedFde], flex: bool = True) -> None:
        self.section, self.arch, self.fde_of, self.flex = section, arch, fde_of, flex
        self.count = count
        self.spans = spans
        self._by_section: dict[str, list[tuple[int, int, int]]] | None = None
        self.starts: dict[str, list[int]] = {}
        self.used = bytearray(count)  # 1: a function used the FDE of that index
        self.first_at: dict[tuple[str, int], int] | None = None  # made by ``alone``
        self.memo = _RulesMemo(arch)
        self.checked = 0
        self.mismatches: list[tuple[Timeline, tuple[tuple[int, int, object, object], ...]]] = []
        self.missing: list[tuple[Timeline, str]] = []
        self.unevaluated: list[tuple[Timeline, str, tuple[tuple[int, object], ...]]] = []

    @property
    def by_section(self) -> dict[str, list[tuple[int, int, int]]]:
        """The FDEs by section, sorted by start: made when a function first needs them
        (a scan that confirmed every function never does)."""
        if self._by_section is None:
            self._by_section = {}
            for index, (name, start, size) in enumerate(self.spans()):
                self._by_section.setdefault(name, []).append((start, size, index))
            for name, fdes in self._by_section.items():
                # By (start, size), ties in index order: the index, last and unique,
                # keeps a plain sort stable without a key (libLLVM-14's 95k: 2x faster).
                fdes.sort()
                self.starts[name] = [fde[0] for fde in fdes]
        return self._by_section

    @staticmethod
    def of_section(section: DecodedSection, arch: Arch,
                   section_of: Callable[[DecodedFde], str], flex: bool = True) -> _Verifier:
        """Over a section decoded whole."""
        spans = [(section_of(fde), fde.start_address, fde.size) for fde in section.fdes]
        return _Verifier(section, arch, len(spans), lambda: spans,
                         section.fdes.__getitem__, flex)

    def covering(self, section: str, start: int, size: int) -> list[DecodedFde]:
        """The SFrame FDEs that overlap a function, in address order."""
        fdes = self.by_section.get(section, [])  # before ``starts``: it fills them
        end = start + size
        first = bisect_right(self.starts.get(section, []), start)
        while first > 0 and fdes[first - 1][0] + fdes[first - 1][1] > start:
            first -= 1
        covering = []
        for index in range(first, len(fdes)):  # not fdes[first:]: a copy per function
            fde_start, fde_size, number = fdes[index]
            if fde_start >= end and size:
                break
            if fde_start + fde_size > start or fde_start == start:
                covering.append(self.fde_of(number))
        return covering

    def alone(self, section: str, start: int, size: int) -> DecodedFde | None:
        """The SFrame FDE starting at ``start``, where ``covering`` gives it alone (no
        other FDE there or overlapping the function); else None."""
        if self.first_at is None:
            self.first_at = {}
            for name, fdes in self.by_section.items():
                for number, fde in enumerate(fdes):
                    self.first_at.setdefault((name, fde[0]), number)
        index = self.first_at.get((section, start))
        if index is None:
            return None
        fdes = self.by_section[section]
        if index and fdes[index - 1][0] + fdes[index - 1][1] > start:
            return None
        if index + 1 < len(fdes) and fdes[index + 1][0] < start + size:
            return None
        return self.fde_of(fdes[index][2])

    def check(self, timeline: Timeline, covering: list[DecodedFde]) -> None:
        """Compare one function's DWARF rows with the SFrame FDEs that cover it."""
        arch = self.arch
        if not covering or timeline.invalid is not None:
            self.missing.append((timeline, self.decision(timeline)))
            return
        for fde in covering:
            self.used[fde.index] = 1
        have = covering_steps(self.section, covering, timeline.start, self.memo.fre)
        resolved = resolve_pc_expressions(timeline, arch)
        if isinstance(resolved, str):
            self.unevaluated.append((timeline, resolved, tuple(have)))
            return
        self.checked += 1
        ra_column = resolved.ra_column
        want = [(row.start, self.memo.row(row, ra_column)) for row in resolved.rows]
        ranges = differing_ranges(have, want, timeline.size)
        if ranges:
            self.mismatches.append((timeline, tuple(ranges)))

    def decision(self, timeline: Timeline) -> str:
        """Why the conversion gives a function no FDE, for this section's version (V1 as
        V2; V3 with FLEX, which the format holds, unless ``flex`` is False), else
        ``ENCODABLE``."""
        version = 3 if self.section.version == 3 else 2
        made = lower_function(timeline, self.arch, version, self.flex)
        return str(made.reason) if isinstance(made, Skip) else ENCODABLE

    def result(self) -> VerifyResult:
        extra = []
        unused = self.used.find(0)
        while unused >= 0:  # one step per FDE no function used: few, or none
            extra.append(self.fde_of(unused))
            unused = self.used.find(0, unused + 1)
        return VerifyResult(self.checked, tuple(self.mismatches), tuple(self.missing),
                            tuple(extra), tuple(self.unevaluated))


def verify(section: DecodedSection, timelines: Iterable[Timeline], arch: Arch,
           section_of: Callable[[DecodedFde], str] = lambda fde: "",
           flex: bool = True) -> VerifyResult:
    """Check at every PC of every function that SFrame recovers CFA, FP and RA as DWARF does.

    Every SFrame FDE that overlaps a function counts, as a reader looking up a
    PC would find it: a linker's PLT is one DWARF FDE but a PC-increment FDE
    for PLT0 and a PC-mask FDE for the entries.  ``section_of`` names the
    section of an FDE's function in a relocatable object ("" when linked); ``flex``
    False: a function that needs a FLEX FDE is no gap (``--no-flex``).
    """
    checker = _Verifier.of_section(section, arch, section_of, flex)
    for timeline in timelines:
        checker.check(timeline, checker.covering(timeline.section, timeline.start,
                                                 timeline.size))
    return checker.result()


def verify_cfi(section: DecodedSection, cfi: Cfi, arch: Arch,
               section_of: Callable[[DecodedFde], str] = lambda fde: "",
               compiled: ModuleType | None = _COMPILED, flex: bool = True) -> VerifyResult:
    """``verify`` of a file's FDEs, the same result: where one SFrame FDE covers a
    function alone, the compiled core (``compiled``; None: never) first compares the two
    without interpreting the CFI into a timeline (``_FastCheck``); only a function it
    cannot confirm gets the full check, which names what differs."""
    checker = _Verifier.of_section(section, arch, section_of, flex)
    fast = _fast_check(section, arch, cfi.big_endian, compiled) if compiled else None
    cache: RowsCache = {}
    for fde in cfi.fdes:
        if fast is not None:
            alone = checker.alone(fde.section, fde.start, fde.size)
            if alone is not None and fast.agrees(fde, alone):
                checker.checked += 1
                checker.used[alone.index] = 1
                continue
        checker.check(cfi.timeline(fde, cache),
                      checker.covering(fde.section, fde.start, fde.size))
    return checker.result()


# What a DWARF state (``_FastCheck.state_id``) and an FRE's info and words (``_fre_id``)
# mean to the check depends on the target and on the section header's ABI, fixed RA
# offset and version alone, not on the file: a tree run's worker keeps them from file
# to file (its files share a few dozen), each file's ids still its own.  Bounded.
_State = tuple[int, int, int | None, int | None, bool]
_MEMO_ENTRIES = 1 << 14
_STATE_SIDES: Memo[tuple[Arch, _State], object] = Memo(_MEMO_ENTRIES)
_FRE_RULES: Memo[tuple[int, int, int, int, tuple[int, ...]], FrameRules | None] = \
    Memo(_MEMO_ENTRIES)
_UNKNOWN = object()
_FAST_CHECKS: Memo[tuple[object, ...], _FastCheck] = Memo(16)


def _state_side(arch: Arch, state: _State) -> object:
    """``_dwarf_side`` of the row a replayed DWARF state stands for."""
    cfa_reg, cfa_offset, fp_slot, ra_slot, signed = state
    regs = sorted((reg, Rule(RuleKind.offset, slot))
                  for reg, slot in ((arch.fp, fp_slot), (arch.ra, ra_slot))
                  if slot is not None)
    cfa = CfaReg(cfa_reg, cfa_offset) if cfa_reg >= 0 else None
    return _dwarf_side(Row(0, cfa, tuple(regs), signed), arch, arch.ra)


def _fre_meaning(section: DecodedSection, info: int,
                 words: tuple[int, ...]) -> FrameRules | None:
    """``default_fre_rules`` of an FRE's info byte and words; None where they are
    damaged (the full check reports it)."""
    base_fp, _, _, mangled, size_code = FRE_TABLE[info]
    try:
        return default_fre_rules(section, DecodedFre(0, base_fp, words, mangled,
                                                     size_code, info))
    except (DecodeError, IndexError, KeyError):
        return None


def _fast_check(section: DecodedSection, arch: Arch, big_endian: bool,
               compiled: ModuleType) -> _FastCheck:
    """The ``_FastCheck`` for this target and section header, kept from file to file:
    its ids, and the states' and FREs' ids the compiled core looked up, mean the same
    in every file with the same target, byte order and header fields ``_fre_meaning``
    reads (``_FRE_RULES``' key), so a tree run's scan asks Python only for a state or
    FRE no earlier file had (over gconv's 253 files: 86 calls, 9,406 before).  Made anew once
    its tables hold ``_MEMO_ENTRIES`` answers (between files, never during a scan)."""
    key = (arch, big_endian, section.abi, section.fixed_ra_offset, section.version,
           compiled)
    fast = _FAST_CHECKS.get(key)
    if fast is None or fast.held() > _MEMO_ENTRIES:
        fast = _FAST_CHECKS.keep(key, _FastCheck(section, arch, big_endian, compiled))
    return fast


class _FastCheck:
    """One function checked in the compiled core (``_core.agree``): the DWARF FDE replayed
    as the fast path does (CFA, FP, RA and the signed-RA bit only; anything else, and
    the core answers "not known") and the SFrame FDE's FREs, compared as step functions
    of values.  A value is what the full check compares, made here once per distinct
    state (a ``Row`` of those rules through ``_dwarf_side``) and per distinct FRE
    (``fre_rules``): the core compares only their ids."""

    def __init__(self, section: DecodedSection, arch: Arch, big_endian: bool,
                 compiled: ModuleType) -> None:
        self.section, self.arch, self.big_endian = section, arch, big_endian
        self.compiled = compiled
        self.ids: dict[object, int] = {None: 0}
        self.states: dict[object, int | None] = {}
        self.fre_ids: dict[object, int | None] = {}
        self.fre_bytes_ids: dict[object, int | None] = {}
        # _core.agree's checker, built once: the target's and the memos' parameters.
        self.checker = (arch.sp, arch.fp, arch.ra, arch.tracks_ra, big_endian, self.states,
                        self.state_id, self.fre_ids, self._fre_id, 0)

    def _id(self, value: object) -> int:
        return self.ids.setdefault(value, len(self.ids))

    def held(self) -> int:
        """How many answers its tables hold (``_fast_check`` bounds them)."""
        return len(self.ids) + len(self.states) + len(self.fre_ids) + len(self.fre_bytes_ids)

    def state_id(self, state: _State) -> int | None:
        arch = self.arch
        key = (arch, state)
        side = _STATE_SIDES.get(key, _UNKNOWN)
        if side is _UNKNOWN:
            side = _STATE_SIDES.keep(key, _state_side(arch, state))
        return self._id(side)

    def _fre_id(self, key: tuple[int, tuple[int, ...]]) -> int | None:
        info, words = key
        section = self.section
        known = (section.abi, section.fixed_ra_offset, section.version, info, words)
        rules = _FRE_RULES.get(known, _UNKNOWN)
        if rules is _UNKNOWN:
            rules = _FRE_RULES.keep(known, _fre_meaning(section, info, words))
        return None if rules is None else self._id(rules)

    def fre_bytes_id(self, stored: bytes) -> int | None:
        """``_fre_id`` of an FRE as stored after its start: info byte, data words."""
        info = stored[0]
        width = FRE_TABLE[info][2]
        order: ByteOrder = "big" if self.big_endian else "little"
        words = tuple(int.from_bytes(stored[at:at + width], order, signed=True)
                      for at in range(1, len(stored), width))
        return self._fre_id((info, words))

    def agrees(self, fde: Fde, sframe: DecodedFde) -> bool:
        """True only where the full check would find no difference (False: run it)."""
        cie, arch = fde.cie, self.arch
        if (sframe.start_address != fde.start or sframe.size < fde.size or not fde.size
                or sframe.pc_mask or sframe.flex or not sframe.fres or cie.ra != arch.ra):
            return False
        start = initial_state(cie.initial, cie.code_align, cie.data_align, arch,
                              self.big_endian)
        if start is None:
            return False
        try:
            same: bool = self.compiled.agree(fde.body, start, cie.code_align,
                                             cie.data_align, fde.size, sframe.fres,
                                             self.checker)
        except OverflowError:
            return False  # a value past 64 bits: the full check
        return same


def verify_elf(path: str, data: bytes | None = None, limits: Limits = DEFAULT_LIMITS,
               cfi: Cfi | None = None,
               compiled: ModuleType | None = _COMPILED,
               made: SFrameBytes | None = None, flex: bool = True,
               view: ElfView | None = None,
               own: SFrameBytes | None = None) -> tuple[VerifyResult, int]:
    """``verify`` for an ELF file's own ``.sframe`` against its ``.eh_frame`` (or
    ``.debug_frame``; ``cfi`` when the caller has read it); also the section's ABI
    id, for describing rules.  A file with ``.eh_frame`` (linked or an object) is first
    scanned by the compiled core (``compiled``; None: never), which reads neither
    section into objects and leaves only the functions it cannot confirm to the full
    check (``_scan``).  ``made``: a
    section the file does not hold (the one a conversion would add to a linked file,
    at its address) checked instead, and not the container: where a section would go
    is the rewrite's question, not its contents'.  ``flex``: as ``verify``'s; ``view``:
    ``data``'s section headers, where the caller has read them; ``own``: the file's own
    section, where the caller has read it (``sframe_bytes``)."""
    result, abi, _ = _verified(path, data, limits, cfi, compiled, made, flex, view, own,
                               None)
    return result, abi


def verify_counted(path: str, data: bytes, limits: Limits, counts: Counts,
                   flex: bool = True, view: ElfView | None = None
                   ) -> tuple[VerifyResult, Counted | None]:
    """``verify_elf(path, data, limits, flex=flex, view=view)``'s result, and ``stats``'
    count of the file (``_core.stats_scan``'s answer for ``counts``, its memos and
    parameters) made in the same compiled walk of ``.eh_frame``, one replay of each
    FDE for both, so ``stats`` of a converted file walks and replays it once; None
    where that walk did not run (the caller counts in a walk of its own)."""
    result, _, counted = _verified(path, data, limits, None, _COMPILED, None, flex, view,
                                   None, counts)
    return result, counted


def _verified(path: str, data: bytes | None, limits: Limits, cfi: Cfi | None,
              compiled: ModuleType | None, made: SFrameBytes | None, flex: bool,
              view: ElfView | None, own: SFrameBytes | None, counts: Counts | None
              ) -> tuple[VerifyResult, int, Counted | None]:
    """``verify_elf``, with ``_scan``'s count for ``counts`` (None: none asked)."""
    if data is None:
        data = read_input(path)
    if view is None and made is None and is_elf(data):  # (sframe_bytes's first step)
        view = open_elf_file(path, data)
    raw = made if made is not None else own if own is not None else \
        sframe_bytes(path, data, limits=limits, view=view)
    if not raw.is_elf:
        raise Cfi2SframeError(path, "verify needs an ELF file with .sframe and .eh_frame")
    if view is None:
        with decoding(path):
            view = open_elf(data, path)
    with decoding(path, raw.section_name):
        table = FdeTable(raw.data, raw.address, raw.v1_pcrel)
    arch = arch_for_machine(view.machine, path, not view.little_endian)
    header = table.section([])
    result = counted = None
    if cfi is None and compiled is not None:
        scanned = _scan_counted(path, view, raw, table, header, arch, limits, compiled,
                                flex, counts)
        if scanned is not None:
            result, counted = scanned
    if result is None:
        with decoding(path, raw.section_name):
            section = decode(raw.data, raw.address, raw.v1_pcrel)

        def section_of(fde: DecodedFde) -> str:
            return placed_section(raw.placements, fde.field_offset)

        if cfi is None:
            cfi = read_elf_cfi(path, data, limits, view=view)
        result = verify_cfi(section, cfi, arch, section_of, compiled, flex)
    if made is not None:
        return result, header.abi, counted
    with decoding(path):
        problems = layout_problems(view, arch.min_page_size)
    return result._replace(layout=tuple(problems)), header.abi, counted


def _scan(path: str, view: ElfView, raw: SFrameBytes, table: FdeTable,
          header: DecodedSection, arch: Arch, limits: Limits,
          compiled: ModuleType, flex: bool = True) -> VerifyResult | None:
    """``_scan_counted`` without a count."""
    scanned = _scan_counted(path, view, raw, table, header, arch, limits, compiled, flex,
                            None)
    return None if scanned is None else scanned[0]


def _scan_counted(path: str, view: ElfView, raw: SFrameBytes, table: FdeTable,
                  header: DecodedSection, arch: Arch, limits: Limits,
                  compiled: ModuleType, flex: bool, counts: Counts | None
                  ) -> tuple[VerifyResult, Counted | None] | None:
    """``verify_cfi``'s result for a file whose CFI is in ``.eh_frame`` (``header``: its
    section's header as ``table`` read it), from ``_core.verify_scan``, which walks both
    sections itself; the FDEs it leaves are read and checked in full here.  An object's
    functions are placed as if linked, each section name at its own base
    (``_object_eh``), so two sections' functions never meet.  None where the scan does
    not apply (``.debug_frame``) or finds anything out of the ordinary: the caller then
    reads both sections whole, and reports what is wrong.  ``counts``: stats_scan's
    memos and parameters for a linked file, whose count the walk then makes too (an
    object's is not asked: None)."""
    chosen = view.section(".eh_frame")
    if chosen is None or chosen.kind == SHT_NOBITS:
        return None
    is_rel = view.elf_type == "ET_REL"
    address_size = 8 if view.is64 else 4
    eh: bytes | bytearray
    eh_placements: dict[int, tuple[str, int]] = {}
    placed = None
    if is_rel:
        counts = None
        object_eh = _object_eh(view, chosen, path, limits, raw.placements or {})
        if object_eh is None:
            return None
        eh, eh_placements, placed = object_eh
    else:
        with decoding(path, chosen.name):
            eh = section_contents(view, chosen, limits)
    fast = _fast_check(header, arch, not view.little_endian, compiled)
    reader = table.reader
    scanned = compiled.verify_scan(
        eh, raw.data, eh_address=0 if is_rel else chosen.addr, address_size=address_size,
        big_endian=not view.little_endian, fde_start=table.fde_start, entry=table.entry,
        count=table.count, version=header.version, pcrel=table.pcrel, address=table.address,
        fre_start=reader.fre_start, fre_end=reader.fre_end, num_fres=table.num_fres,
        unused_bits=FDE_INFO_UNUSED.get(header.version, 0), sp=arch.sp, fp=arch.fp,
        ra=arch.ra, tracks_ra=arch.tracks_ra, states=fast.states, state_of=fast.state_id,
        fre_ids=fast.fre_bytes_ids, fre_id_of=fast.fre_bytes_id, placed=placed,
        counts=counts, **_FORMAT)
    if scanned is None:
        return None
    checked, used, todo = scanned[:3]
    counted = scanned[3] if counts is not None else None
    decoded: dict[int, DecodedFde] = {}

    def fde_of(number: int) -> DecodedFde:
        if number not in decoded:
            with decoding(path, raw.section_name):
                decoded[number] = table.fde(number)
        return decoded[number]

    def spans() -> Iterable[tuple[str, int, int]]:
        if not is_rel:
            return (("", start, size) for start, size in table.ranges())
        return ((placed_section(raw.placements, table.fde_start + index * table.entry),
                 start, size) for index, (start, size) in enumerate(table.ranges()))

    checker = _Verifier(header, arch, table.count, spans, fde_of, flex)
    checker.checked = checked
    checker.used = used
    if not is_rel:
        with decoding(path, chosen.name):
            fdes = named_fdes(view, fdes_at(bytes(eh), todo, chosen.addr, address_size,
                                            view.little_endian))
    else:
        try:  # the names always: the full path reads the symbol table of every object
            with decoding(path, chosen.name):
                fdes = named_fdes(view, fdes_at(bytes(eh), todo, 0, address_size,
                                                view.little_endian, eh_placements))
        except Cfi2SframeError:
            return None  # the full path reports it, after what it reads first
    cfi = Cfi(path, view.machine, view.elf_type, tuple(fdes), chosen.name,
              not view.little_endian)
    cache: RowsCache = {}
    for fde in fdes:
        checker.check(cfi.timeline(fde, cache),
                      checker.covering(fde.section, fde.start, fde.size))
    return checker.result(), counted


def _object_eh(view: ElfView, chosen: Section, path: str, limits: Limits,
               sframe_placements: dict[int, tuple[str, int]]
               ) -> tuple[bytes, dict[int, tuple[str, int]], tuple[object, ...]] | None:
    """An object's ``.eh_frame`` relocated with every section at 0, as ``elf.cfi`` reads
    it, its relocated fields, and ``_core.verify_scan``'s ``placed``: every section name
    either side's relocations point into at a base of its own, ``_SPAN`` apart (the
    SFrame side's special indices, such as ``SHN_ABS``, at no section's: ""'s, as
    ``sframe.load.placed_section`` reads them).  None where relocating fails: the full
    path reports it, in its order."""
    try:
        with decoding(path, chosen.name):
            contents = bytearray(section_contents(view, chosen, limits))
        placements = relocate_view(view, view.sections.index(chosen), contents, path)
    except Cfi2SframeError:
        return None
    names = {"", *map(itemgetter(0), placements.values()),
             *map(itemgetter(0), sframe_placements.values())}
    if len(names) >= 1 << 28:
        return None  # bases past 2**61: never in an object a file can hold
    bases = {name: number * _SPAN for number, name in enumerate(sorted(names))}
    sframe_bases = {name: bases["" if name.startswith("SHN_") else name] for name in names}
    return bytes(contents), placements, (placements, bases, sframe_placements,
                                         sframe_bases, "", _SPAN)


def check_rewritten(display: str, payload: bytes | str, limits: Limits = DEFAULT_LIMITS,
                    original: bytes | None = None) -> None:
    """Verify a rewritten ELF file against its own CFI before it replaces the input
    (``--in-place``; ``original``: the input's bytes): an error, and the input stays as
    it was, unless it verifies.

    The file is our output, so what it breaks is our bug (``InternalError``): an ELF
    file or ``.sframe`` section we cannot read back, an error located in that section,
    a PC where SFrame and DWARF differ, an SFrame FDE with no DWARF FDE, a layout
    problem the input did not have.  What the input brings stays its error
    (``Cfi2SframeError``): a text output, its own CFI that verify cannot read (or past
    ``limits``: they bound compressed sections, never ours), a layout problem it had."""
    if isinstance(payload, str):
        raise Cfi2SframeError(display, "--in-place rewrites ELF files only")
    try:
        view = open_elf_file(display, payload)
        own = sframe_bytes(display, payload, limits=limits, view=view)
    except Cfi2SframeError as exc:
        raise _not_verified(display, exc.message) from None
    try:
        result, _ = verify_elf(display, payload, limits, view=view, own=own)
    except Cfi2SframeError as exc:
        if exc.message.startswith(f"{own.section_name}: "):  # (``errors.located``'s prefix)
            raise _not_verified(display, exc.message) from None
        raise
    if result.agrees and not result.extra:
        return
    failure = _first_failure(result)
    if not result.mismatches and not result.extra and original is not None and \
            _had_layout_problems(display, original):
        raise Cfi2SframeError(display, f"the rewritten file does not verify ({failure}), as "
                                       "the input's layout did not; input left untouched")
    overlap = _overlapping_fde(display, payload, limits)
    if overlap is not None:
        raise Cfi2SframeError(display, f"the rewritten file does not verify ({failure}): the "
                                       f"input's FDEs overlap at {overlap:#x}, so its CFI "
                                       "gives two rules there; input left untouched")
    raise _not_verified(display, failure)


def _overlapping_fde(display: str, payload: bytes, limits: Limits) -> int | None:
    """Where the file's DWARF FDEs first overlap, or None: there its CFI is ambiguous
    (found by fuzzing: a huge FDE, left out of the section, over a small one the
    section holds), so a disagreement there is the input's, not ours."""
    spans = sorted((fde.start, fde.start + fde.size)
                   for fde in read_elf_cfi(display, payload, limits).fdes if fde.size > 0)
    reach = None
    for start, end in spans:
        if reach is not None and start < reach:
            return start
        reach = end if reach is None else max(reach, end)
    return None


def _not_verified(display: str, failure: str) -> InternalError:
    return InternalError(display, f"the rewritten file does not verify ({failure}); input "
                                  "left untouched")


def _had_layout_problems(display: str, original: bytes) -> bool:
    """The input already broke a container rule (``elf.layout``): the rewritten file's
    layout problems are then the input's, not ours."""
    with decoding(display):
        view = open_elf(original, "ELF file")
        arch = arch_for_machine(view.machine, display, not view.little_endian)
        return bool(layout_problems(view, arch.min_page_size))


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
