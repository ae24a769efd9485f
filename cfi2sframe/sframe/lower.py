"""Timeline -> SFrame FREs, or a ``Skip`` that says exactly why not.

SFrame (default FDEs) describes a frame with three facts per row: CFA =
SP or FP + offset, FP either unchanged or saved at CFA + offset, and RA at
the ABI's fixed place.  A function whose CFI says anything else at any PC
cannot be represented exactly, and is skipped with a stable reason code.
"""

from __future__ import annotations

from functools import lru_cache
from itertools import islice

from ..arch import as_arch
from ..arch.base import Arch
from ..dwarf.interpret import interpret
from ..dwarf.ops import CIE_OPS
from ..model import (
    SAME_VALUE,
    CfaExpr,
    CfaReg,
    CfaRule,
    Location,
    Row,
    Rule,
    RuleKind,
    Timeline,
    span_of,
)
from ..reasons import SFRAME_REASONS, SframeReason, Unrepresentable
from ..typed import NamedTuple
from .format import MAX_FRES_V3, Fre, SFrameFunction, fits, fre_words, offset_size_for
from .recovery import (
    RA_UNDEFINED,
    DwarfExpr,
    FrameRules,
    Loc,
    Recovery,
    RuleFre,
    Undefined,
    as_loc,
    opt_loc,
)
from .rules import dwarf_rules
from .text import describe, rule_words
from .words import s390x_word_reg

REASONS = SFRAME_REASONS  # the registry is reasons.py


class Skip(NamedTuple):
    """A function left out of the section, with a reason code and details."""

    name: str
    section: str
    start: int
    size: int
    location: Location
    reason: SframeReason
    detail: str
    # The return address is undefined from the function's first instruction on (or
    # after a landing pad, as AArch64's _start): an outermost frame (_start, a
    # thread's entry), where a walk is meant to end.
    # SFrame V2 has no such row, so leaving it out is the expected result.
    outermost: bool = False

    def message(self) -> str:
        kind = " (an outermost frame)" if self.outermost else ""
        return f"no SFrame FDE for '{self.name}'{kind}: {self.detail} [{self.reason}]"


class _Unrepresentable(Exception):
    """Raised inside the lowering of one row; returned as a ``reasons.Unrepresentable``."""

    def __init__(self, reason: SframeReason, detail: str, row: Row | None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail
        self.row = row


# What lowering a function's rows gives: its FREs, or why it has none.
_Lowered = tuple[Fre, ...] | tuple[Fre | RuleFre, ...] | Unrepresentable[SframeReason]
# ``lower``'s memo: id of a rows tuple -> (that tuple, what lowering it gave).
LowerMemo = dict[int, tuple[tuple[Row, ...], _Lowered]]


def lower(timeline: Timeline, arch: str | Arch,
          memo: LowerMemo | None = None,
          version: int = 2, flex: bool = True) -> SFrameFunction | Skip:
    """The SFrame function for ``timeline``, or why it cannot be one.

    ``memo`` (a dict the caller owns) shares the work between timelines whose
    rows are the same tuple object, as the ELF frontend hands out for FDEs
    with identical CFI bytes.  ``version`` 3 allows FLEX FDEs and RA-undefined
    rows, so fewer functions are left out; ``flex`` False keeps V3 to default FDEs
    (for readers without FLEX: a function that needs one is left out as
    ``flex-needed``).  ``arch``: an ``Arch`` or its name.
    """
    arch = as_arch(arch)
    def skip(reason: SframeReason, detail: str, at: int | None = None) -> Skip:
        location = timeline.location if at is None else timeline.location_at(at)
        return Skip(*span_of(timeline), location, reason, detail)

    if timeline.invalid is not None:
        return skip(SframeReason.invalid_cfi, timeline.invalid)
    if timeline.size == 0:
        return skip(SframeReason.empty_function, "the function is empty")
    if not fits(timeline.size, 0, version):
        return skip(SframeReason.function_size, f"the function is {timeline.size:#x} bytes long")
    if timeline.ra_column != arch.ra:
        return skip(SframeReason.ra_column,
                    f"return address column {timeline.ra_column} is not "
                    f"{arch.reg_name(arch.ra)} ({arch.ra})")
    rows = timeline.rows
    if version < 3 or not arch.flex:  # FLEX for AMD64 and s390x, as GNU as 2.46 writes
        def lowering(rows: tuple[Row, ...], arch: Arch) -> _Lowered:
            return _lower_rows(rows, arch, version)
    else:
        lowering = _lower_rows_v3
    hit = memo.get(id(rows)) if memo is not None else None
    if hit is not None and hit[0] is rows:
        fres = hit[1]
    else:
        fres = lowering(rows, arch)
        if memo is not None:
            memo[id(rows)] = (rows, fres)  # the tuple is kept, so its id stays unique
    if isinstance(fres, Unrepresentable):
        left_out = skip(fres.reason, fres.detail, fres.at)
        if fres.reason == SframeReason.ra_undefined and _outermost_frame(rows, arch):
            return left_out._replace(outermost=True)
        return left_out
    is_flex = bool(fres) and isinstance(fres[0], RuleFre)
    if is_flex and not flex:
        return skip(SframeReason.flex_needed, *_flex_detail(fres, arch))
    if version == 3 and fres and all(_outermost(fre) for fre in fres):
        fres = ()  # V3: a default FDE without FREs is an outermost frame
        is_flex = False
    if not fits(timeline.size, len(fres), version):
        return skip(SframeReason.too_many_fres,
                    f"{len(fres)} FREs; SFrame V3 holds at most {MAX_FRES_V3}")
    return SFrameFunction(*span_of(timeline), fres, pauth_b_key=timeline.pauth_b_key,
                          anchor=timeline.anchor, flex=is_flex,
                          signal=timeline.signal_frame and version == 3)


def _flex_detail(fres: tuple[Fre | RuleFre, ...], arch: Arch) -> tuple[str, int | None]:
    """Where a FLEX function first has rules no default FRE holds: in words, and the
    offset."""
    fixed_ra = None if arch.tracks_ra else Loc(None, arch.sframe_fixed_ra_offset, True)
    for fre in fres:
        if isinstance(fre, RuleFre) and not _fits_default(fre.rules, arch, fixed_ra):
            return (f"at offset {fre.start:#x} {describe(fre.rules, arch.sframe_abi)}: "
                    "only a FLEX FDE holds that", fre.start)
    return "only a FLEX FDE holds its rules", None


def _outermost_frame(rows: tuple[Row, ...], arch: Arch) -> bool:
    """The return address is undefined in the first row that has a CFA, or in the row
    after a landing pad: glibc's AArch64 ``_start`` opens with a ``nop`` (``bti c``
    where BTI is on) before ``.cfi_undefined x30``, x86-64's with ``endbr64`` where
    CET is on.  The pad is the function's first row alone, at most
    ``arch.landing_pad`` bytes, and its rules are the entry state the target's CIE
    gives, and the next row changes the return address alone: the pad saved and moved
    nothing.  Anything else undefined later is a surprise."""
    framed = list(islice((row for row in rows if row.cfa is not None), 2))
    if not framed:
        return False
    if _ra_undefined(framed[0], arch):
        return True
    if len(framed) < 2:
        return False
    pad, after = framed
    return (_ra_undefined(after, arch) and pad.start == 0 and after.start <= arch.landing_pad
            and pad.same_rules(_entry_row(arch))
            and _without_ra(after, arch.ra) == _without_ra(pad, arch.ra))


def _without_ra(row: Row, ra: int) -> tuple[object, ...]:
    return (row.cfa, tuple(reg for reg in row.regs if reg[0] != ra), row.ra_signed,
            row.ra_signed_pc)


def _ra_undefined(row: Row, arch: Arch) -> bool:
    rule = row.rule(arch.ra)
    return rule is not None and rule.kind == RuleKind.undefined


@lru_cache(maxsize=8)
def _entry_row(arch: Arch) -> Row:
    """The rules at a function's first instruction: the target's CIE alone."""
    cie = tuple(CIE_OPS[name](reg, value) for name, reg, value in arch.cie_ops)
    return interpret(cie, (), 1)[0]


def _lower_rows(rows: tuple[Row, ...], arch: Arch,
                version: int = 2) -> tuple[Fre, ...] | Unrepresentable[SframeReason]:
    """The default FREs for a function's rows (V3 adds RA-undefined rows)."""
    first = 0
    while first < len(rows) and rows[first].cfa is None:
        first += 1  # before any CFA rule (.cfi_startproc simple): no unwind info there
    if first == len(rows):
        return Unrepresentable(SframeReason.cfa_undefined, "no CFA rule anywhere")
    fres: list[Fre] = []
    for row in rows[first:]:
        fre = _SIGNED_WITH_PC if row.ra_signed_pc else _lower_rules(row.cfa, row.regs,
                                                                      row.ra_signed, arch,
                                                                      version)
        if isinstance(fre, Unrepresentable):
            return _at(row, fre)
        if fres and fres[-1].same_rules(fre):
            continue
        if row.start:  # the memoised FRE is at offset 0; positional is cheaper than _replace
            fre = Fre(row.start, *fre[1:])
        fres.append(fre)
    return tuple(fres)


def _lower_rows_v3(rows: tuple[Row, ...], arch: Arch) -> _Lowered:
    """V3 FREs: default FREs when every row fits them, else FLEX FREs for all rows."""
    first = 0
    while first < len(rows) and rows[first].cfa is None:
        first += 1
    if first == len(rows):
        return Unrepresentable(SframeReason.cfa_undefined, "no CFA rule anywhere")
    wanted: list[tuple[int, FrameRules, bool]] = []
    # Each distinct row's rules made once (a PLT's ~1k rows hold two): ``_v3_rules``
    # reads every field but the start, which only a failure names (at its first row).
    seen: dict[tuple[object, ...], FrameRules] = {}
    for row in rows[first:]:
        key = row[1:]
        rules = seen.get(key)
        if rules is None:
            try:
                rules = seen[key] = _v3_rules(row, arch)
            except _Unrepresentable as exc:
                return _at(row, Unrepresentable(exc.reason, exc.detail))
        if wanted and wanted[-1][1:] == (rules, row.ra_signed):
            continue
        wanted.append((row.start, rules, row.ra_signed))
    fixed_ra = None if arch.tracks_ra else Loc(None, arch.sframe_fixed_ra_offset, True)
    # (``wanted`` holds every distinct rules ``seen`` holds, and only those.)
    if all(_fits_default(rules, arch, fixed_ra) for rules in set(seen.values())):
        return _default_fres(wanted, arch)
    return tuple(RuleFre(start, rules, signed) for start, rules, signed in wanted)


def _default_fres(wanted: list[tuple[int, FrameRules, bool]], arch: Arch) -> tuple[Fre, ...]:
    """``_default_fre`` of each (start, rules, signed), made once per distinct (rules,
    signed) at offset 0 and placed at each start (a PLT's ~1k FREs hold two)."""
    made: dict[tuple[FrameRules, bool], Fre] = {}
    fres: list[Fre] = []
    for start, rules, signed in wanted:
        fre = made.get((rules, signed))
        if fre is None:
            fre = made[rules, signed] = _default_fre(0, rules, signed, arch)
        fres.append(Fre(start, *fre[1:]) if start else fre)
    return tuple(fres)


def _outermost(fre: Fre | RuleFre) -> bool:
    if isinstance(fre, RuleFre):
        return fre.rules.ra == RA_UNDEFINED
    return fre.ra_undefined


def _default_fre(start: int, rules: FrameRules, signed: bool, arch: Arch) -> Fre:
    """The default FRE of rules ``_fits_default`` accepted."""
    if rules.ra == RA_UNDEFINED:
        return Fre(start, False, 0, ra_undefined=True)
    cfa, fp, ra = as_loc(rules.cfa), opt_loc(rules.fp), opt_loc(rules.ra)
    return Fre(start, cfa.reg == arch.fp, cfa.offset, None if fp is None else fp.offset,
               None if ra is None or not arch.tracks_ra else ra.offset, signed)


def _fits_default(rules: FrameRules, arch: Arch, fixed_ra: Loc | None) -> bool:
    """Whether a default FRE holds ``rules``: CFA on SP/FP, FP (and, where RA is
    tracked, RA) unchanged or in a stack slot, RA at the fixed place elsewhere."""
    if rules.ra == RA_UNDEFINED:
        return True
    cfa = rules.cfa

    def slot_or_none(loc: Recovery | None) -> bool:
        return loc is None or (isinstance(loc, Loc) and loc.reg is None and loc.deref)

    ra_ok = slot_or_none(rules.ra) if arch.tracks_ra else rules.ra == fixed_ra
    return (isinstance(cfa, Loc) and cfa.reg in (arch.sp, arch.fp) and not cfa.deref
            and ra_ok and slot_or_none(rules.fp))


_SIGNED_WITH_PC = Unrepresentable(SframeReason.ra_signed_with_pc,
                                  "the return address is signed with "
                                  "the PC as a diversifier")


def _at(row: Row, why: Unrepresentable[SframeReason]) -> Unrepresentable[SframeReason]:
    """``why`` with the offset of the row it is about."""
    return Unrepresentable(why.reason, f"{why.detail} at offset {row.start:#x}", row.start)


def _v3_rules(row: Row, arch: Arch) -> FrameRules:
    """A row as V3 rules, or ``_Unrepresentable`` with the reason."""
    if row.ra_signed_pc:
        raise _Unrepresentable(_SIGNED_WITH_PC.reason, _SIGNED_WITH_PC.detail, row)
    if row.ra_signed:
        raise _Unrepresentable(SframeReason.ra_signed, "return address signing on x86-64", row)
    rules = dwarf_rules(row, arch, arch.ra)
    if rules is None:
        raise _Unrepresentable(SframeReason.cfa_undefined, "no CFA rule", row)
    if rules.ra == RA_UNDEFINED:
        return FrameRules(None, None, RA_UNDEFINED)
    _check_sp(row.rule(arch.sp), arch, row)
    cfa, fp, ra = rules.cfa, rules.fp, rules.ra
    if not isinstance(cfa, Loc):  # a DWARF expression (None comes only with RA undefined)
        raise _Unrepresentable(SframeReason.cfa_expression,
                               "CFA is a DWARF expression SFrame V3 cannot "
                               "express", row)
    if isinstance(fp, (DwarfExpr, Undefined)):
        reason = SframeReason.fp_undefined if fp == RA_UNDEFINED else SframeReason.fp_expression
        raise _Unrepresentable(reason, f"caller's FP is {rule_words(row.rule(arch.fp), arch)}",
                               row)
    if isinstance(ra, (DwarfExpr, Undefined)) or (ra is None and not arch.tracks_ra):
        raise _Unrepresentable(SframeReason.ra_not_at_fixed_offset, f"return address is "
                               f"{rule_words(row.rule(arch.ra), arch)}", row)
    # A FLEX control word of 0 (CFA-based, no dereference) is the padding word,
    # so "FP/RA = the value CFA+N" has no encoding.
    if fp is not None and fp.reg is None and not fp.deref:
        raise _Unrepresentable(SframeReason.fp_val_offset, f"caller's FP is "
                               f"{rule_words(row.rule(arch.fp), arch)}", row)
    if ra is not None and ra.reg is None and not ra.deref:
        raise _Unrepresentable(SframeReason.ra_not_at_fixed_offset, f"return address is "
                               f"{rule_words(row.rule(arch.ra), arch)}", row)
    if arch.sframe_cfa_encoded:
        _check_s390x_cfa(cfa.offset, arch, row)
    for loc in (cfa, fp, ra):
        if loc is not None and not -(1 << 31) <= loc.offset < (1 << 31):
            raise _Unrepresentable(SframeReason.offset_range,
                                   f"offset {loc.offset} needs more than "
                                   "32 bits", row)
    return rules


@lru_cache(maxsize=65536)
def _lower_rules(cfa: CfaRule | None, regs: tuple[tuple[int, Rule], ...], ra_signed: bool,
                 arch: Arch,
                 version: int = 2) -> Fre | Unrepresentable[SframeReason]:
    """``lower_row`` for a row at offset 0, memoised: rows repeat across functions."""
    row = Row(0, cfa, regs, ra_signed)
    if version == 3 and (row.rule(arch.ra) or SAME_VALUE).kind == RuleKind.undefined:
        return Fre(0, False, 0, ra_undefined=True)
    try:
        return lower_row(row, arch)
    except _Unrepresentable as exc:
        return Unrepresentable(exc.reason, exc.detail)


def lower_row(row: Row, arch: Arch) -> Fre:
    """One DWARF row as a default FRE.

    AMD64: RA at the header's fixed offset, FP optional.  AArch64: RA tracked
    per row (saved at CFA+N, or still in x30), FP only with RA on the stack.
    s390x: RA and FP each on the stack, in a register (V2's ``reg<<1|1``) or
    unchanged; an FP without RA gets the RA padding word.
    """
    cfa = row.cfa
    if cfa is None:
        raise _Unrepresentable(SframeReason.cfa_undefined, "no CFA rule", row)
    if isinstance(cfa, CfaExpr):
        raise _Unrepresentable(SframeReason.cfa_expression, "CFA is a DWARF expression", row)
    assert isinstance(cfa, CfaReg)
    problem = cfa_problem(cfa.reg, row.ra_signed, arch)
    if problem is not None:
        raise _Unrepresentable(problem.reason, problem.detail, row)
    ra_offset, ra_reg = _ra_slot(row.rule(arch.ra), arch, row)
    _check_sp(row.rule(arch.sp), arch, row)
    fp_offset, fp_reg = _fp_slot(row.rule(arch.fp), arch, row)
    fre = Fre(row.start, cfa.reg == arch.fp, cfa.offset, fp_offset, ra_offset,
              row.ra_signed, False, fp_reg, ra_reg)
    if arch.sframe_cfa_encoded:
        _check_s390x_cfa(cfa.offset, arch, row)
    if arch.sframe_register_words:
        for what, slot in (("RA", ra_offset), ("FP", fp_offset)):
            if slot is not None and s390x_word_reg(slot) is not None:  # a register in V2
                raise _Unrepresentable(SframeReason.s390x_unaligned,
                                       f"{what} slot offset {slot} is odd",
                                       row)
    problem = words_problem(fre, arch)
    if problem is not None:
        raise _Unrepresentable(problem.reason, problem.detail, row)
    return fre


# What a default FRE can hold, decided here for both routes to it: ``lower_row`` (from
# DWARF rules, with a reason for each rule kind) and ``sframe.fastpath`` (from save slots).


def cfa_problem(cfa_reg: int, ra_signed: bool, arch: Arch) -> Unrepresentable[SframeReason] | None:
    """Why no default FRE has this CFA base and RA signing, or None."""
    if cfa_reg not in (arch.sp, arch.fp):
        return Unrepresentable(SframeReason.cfa_not_sp_fp,
                               f"CFA is based on {arch.reg_name(cfa_reg)}")
    if ra_signed and not arch.tracks_ra:
        return Unrepresentable(SframeReason.ra_signed, "return address signing on x86-64")
    return None


def words_problem(fre: Fre, arch: Arch) -> Unrepresentable[SframeReason] | None:
    """Why ``fre`` has no default encoding (an FP slot without an RA slot where the RA
    is tracked, outside s390x; a word past 32 bits), or None."""
    if fre.fp_offset is not None and arch.tracks_ra and fre.ra_offset is None \
            and fre.ra_reg is None and not arch.sframe_ra_padding:
        return Unrepresentable(SframeReason.fp_without_ra, "FP is saved but RA is not on the stack")
    words = fre_words(fre, arch)
    if offset_size_for(words) is None:
        return Unrepresentable(SframeReason.offset_range,
                               f"offset {max(words, key=abs)} needs more than 32 bits")
    return None


def _check_s390x_cfa(offset: int, arch: Arch, row: Row) -> None:
    if (offset - arch.cfa_adjustment) % arch.cfa_alignment:
        raise _Unrepresentable(SframeReason.s390x_unaligned, f"CFA offset {offset} is not "
                               f"{arch.cfa_adjustment} + a multiple of {arch.cfa_alignment}",
                               row)


def _ra_slot(rule: Rule | None, arch: Arch, row: Row) -> tuple[int | None, int | None]:
    """(CFA offset, register) of the RA to store; (None, None): fixed in the header
    (AMD64), or still in its register."""
    if not arch.tracks_ra:
        _check_ra(rule, arch, row)
        return None, None
    if rule is None:
        return None, None  # still in its register
    slot = _default_slot(rule, arch)
    if slot is not None:
        return slot
    if rule.kind == RuleKind.undefined:
        raise _Unrepresentable(SframeReason.ra_undefined, "return address is undefined", row)
    raise _Unrepresentable(SframeReason.ra_not_at_fixed_offset,
                           f"return address is {rule_words(rule, arch)}", row)


def _default_slot(rule: Rule, arch: Arch) -> tuple[int | None, int | None] | None:
    """Where a default FRE can say FP or RA is: (CFA offset, register), (None, None)
    when unchanged; None when it cannot (the caller gives the reason)."""
    if rule.kind == RuleKind.same_value:
        return None, None
    if rule.kind == RuleKind.offset:
        return rule.value, None
    if rule.kind == RuleKind.register and arch.sframe_register_words:
        return None, rule.value
    return None


def _check_ra(rule: Rule | None, arch: Arch, row: Row) -> None:
    if rule is not None and rule.kind == RuleKind.offset \
            and rule.value == arch.sframe_fixed_ra_offset:
        return
    if rule is not None and rule.kind == RuleKind.undefined:
        raise _Unrepresentable(SframeReason.ra_undefined, "return address is undefined", row)
    raise _Unrepresentable(SframeReason.ra_not_at_fixed_offset,
                           f"return address is {rule_words(rule, arch)}, not at CFA"
                           f"{arch.sframe_fixed_ra_offset:+d}", row)


def beyond_sframe(row: Row, arch: Arch) -> str | None:
    """What a DWARF row says that no FRE can (SFrame takes the caller's SP as the CFA,
    and has no signed RA on x86-64), in words; None when nothing.  ``verify`` uses it:
    CFA, FP and RA alone would match where the unwound SP would not."""
    if row.ra_signed and not arch.tracks_ra:
        return "the return address is signed (DW_CFA_GNU_window_save on this target)"
    try:
        _check_sp(row.rule(arch.sp), arch, row)
    except _Unrepresentable as exc:
        return exc.detail
    return None


def _check_sp(rule: Rule | None, arch: Arch, row: Row) -> None:
    if rule is None or (rule.kind == RuleKind.val_offset and rule.value == arch.sp_val_offset):
        return
    if rule.kind in (RuleKind.offset, RuleKind.register) and arch.sp_copy_is_cfa:
        # A saved copy of the caller's r15 (stmg into the register save area,
        # ldgr into an FPR in leaf functions): the ABI defines the CFA as that
        # SP + 160, so the copy holds CFA-160, which is what SFrame assumes.
        return
    raise _Unrepresentable(SframeReason.sp_not_cfa, f"caller's SP is {rule_words(rule, arch)}", row)


def _fp_slot(rule: Rule | None, arch: Arch, row: Row) -> tuple[int | None, int | None]:
    """(CFA offset, register) of the caller's FP; (None, None) when unchanged."""
    if rule is None:
        return None, None
    slot = _default_slot(rule, arch)
    if slot is not None:
        return slot
    reason = {RuleKind.register: SframeReason.fp_in_register,
              RuleKind.expression: SframeReason.fp_expression,
              RuleKind.val_expression: SframeReason.fp_expression,
              RuleKind.val_offset: SframeReason.fp_val_offset,
              RuleKind.undefined: SframeReason.fp_undefined}[rule.kind]
    raise _Unrepresentable(reason, f"caller's FP is {rule_words(rule, arch)}", row)
