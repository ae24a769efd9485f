"""Reading-side commands as pure functions: lookup, diff and verify.

All three compare recovery rules (``sframe.rules.FrameRules``) PC by PC,
where a PC range is the stretch between two consecutive row starts of
either side; rules are constant inside such a stretch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..arch.base import Arch
from ..errors import Cfi2SframeError
from ..model import Timeline
from ..sframe.decode import DecodedFde, DecodedSection
from ..sframe.lower import Skip, lower
from ..sframe.rules import OUTERMOST, FrameRules, dwarf_rules, fre_rules, outermost

# -- SFrame side -------------------------------------------------------------------------


def sframe_steps(section: DecodedSection, fde: DecodedFde) -> list[tuple[int, FrameRules]]:
    """(offset from function start, rules) for each FRE of a PC-increment FDE.

    A V3 default FDE without FREs is an outermost frame: RA undefined throughout.
    """
    if outermost(section, fde):
        return [(0, OUTERMOST)]
    return [(fre.start, fre_rules(section, fde, fre)) for fre in fde.fres]


def rules_at(steps: Sequence[tuple[int, object]], offset: int) -> object:
    """The rules in force at ``offset`` in a step list, None before the first step."""
    found = None
    for start, rules in steps:
        if start > offset:
            break
        found = rules
    return found


def differing_ranges(a: Sequence[tuple[int, object]], b: Sequence[tuple[int, object]],
                     size: int) -> list[tuple[int, int, object, object]]:
    """[(start, end, rules of a, rules of b)] where the two step lists disagree."""
    bounds = sorted(x for x in {0, *(s for s, _ in a), *(s for s, _ in b)} if 0 <= x < size)
    out: list[tuple[int, int, object, object]] = []
    for i, start in enumerate(bounds):
        end = bounds[i + 1] if i + 1 < len(bounds) else size
        ra, rb = rules_at(a, start), rules_at(b, start)
        if ra != rb:
            if out and out[-1][1] == start and out[-1][2:] == (ra, rb):
                out[-1] = (out[-1][0], end, ra, rb)
            else:
                out.append((start, end, ra, rb))
    return out


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
    """Outcome of ``verify``: checked functions, mismatches, and what SFrame lacks."""

    checked: int
    mismatches: tuple[tuple[Timeline, tuple[tuple[int, int, object, object], ...]], ...]
    missing: tuple[tuple[Timeline, str], ...]
    extra: tuple[DecodedFde, ...]

    @property
    def ok(self) -> bool:
        return not self.mismatches


def verify(section: DecodedSection, timelines: Sequence[Timeline], arch: Arch,
           section_of: Callable[[DecodedFde], str] = lambda fde: "") -> VerifyResult:
    """Check at every PC of every function that SFrame recovers CFA, FP and RA as DWARF does.

    Functions are matched by (section, start): ``section_of`` names the
    section of an FDE's function in a relocatable object ("" when linked).
    """
    by_address = {(section_of(fde), fde.start_address): fde for fde in section.fdes}
    used: set[tuple[str, int]] = set()
    checked = 0
    mismatches = []
    missing = []
    for timeline in timelines:
        address = (timeline.section, timeline.start)
        fde = by_address.get(address)
        if fde is None or timeline.invalid is not None:
            result = lower(timeline, arch)
            why = result.reason if isinstance(result, Skip) else "encodable"
            missing.append((timeline, why))
            continue
        used.add(address)
        checked += 1
        want = [(row.start, dwarf_rules(row, arch, timeline.ra_column)) for row in timeline.rows]
        have = sframe_steps(section, fde) if not fde.pc_mask else []
        ranges = differing_ranges(have, want, timeline.size)
        if ranges:
            mismatches.append((timeline, tuple(ranges)))
    extra = tuple(fde for fde in section.fdes
                  if (section_of(fde), fde.start_address) not in used)
    return VerifyResult(checked, tuple(mismatches), tuple(missing), extra)


def verify_elf(path: str, data: bytes | None = None) -> tuple[VerifyResult, int]:
    """``verify`` for an ELF file's own ``.sframe`` against its ``.eh_frame`` (or
    ``.debug_frame``); also the section's ABI id, for describing rules."""
    from ..arch import arch_for_machine
    from ..dwarf.ehframe import read_elf_cfi
    from ..files import read_bytes
    from ..sframe.load import load_sframe

    if data is None:
        data = read_bytes(path)
    loaded = load_sframe(path, data)
    if not loaded.is_elf:
        raise Cfi2SframeError(path, "verify needs an ELF file with .sframe and .eh_frame")
    cfi = read_elf_cfi(path, data)
    arch = arch_for_machine(cfi.machine, path, cfi.big_endian)
    result = verify(loaded.section, cfi.timelines, arch,
                    lambda fde: loaded.section_of(fde.field_offset))
    return result, loaded.section.abi
