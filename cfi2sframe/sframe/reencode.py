"""An SFrame section as the source: its FDEs back to timelines, for any version.

``--source sframe`` converts a section without DWARF (files built with
``--gsframe`` and ``-fno-asynchronous-unwind-tables``, or stripped of
``.eh_frame``).  Each FRE's rules (``rules.fre_rules``, the interpreter of
data words, for V1, V2 and V3) become a DWARF-like row, so the target version
is written by the same lowering as every other input: minimal sizes, and
what the target cannot say is left out with the usual reason codes (V3's
FLEX rules and outermost frames in V2).  A PC-mask FDE is lowered as one
block and keeps its mask and repetition size.
"""

from __future__ import annotations

from collections.abc import Callable

from ..arch import by_sframe_abi
from ..arch.base import Arch
from ..dwarf.cfi import function_name
from ..dwarf.leb128 import sleb, uleb
from ..dwarf.opcodes import OP
from ..model import CfaExpr, CfaReg, CfaRule, Location, Row, Rule, RuleKind, Timeline
from .decode import DecodedFde, DecodedSection
from .format import SFrameFunction
from .lower import LowerMemo, Skip, lower
from .rules import RA_UNDEFINED, FrameRules, Loc, Recovery, fre_rules, outermost


def _rule(value: Recovery | None) -> Rule | None:
    """A recovery rule as the DWARF rule that says the same; None: unchanged."""
    if value is None:
        return None
    if value == RA_UNDEFINED:
        return Rule(RuleKind.undefined)
    if not isinstance(value, Loc):
        return Rule(RuleKind.expression if not value.val else RuleKind.val_expression,
                    expr=value.expr)
    if value.reg is None:
        return Rule(RuleKind.offset if value.deref else RuleKind.val_offset, value.offset)
    if not value.deref and value.offset == 0:
        return Rule(RuleKind.register, value.reg)
    return Rule(RuleKind.expression if value.deref else RuleKind.val_expression,
                expr=_breg(value.reg, value.offset))


def _breg(reg: int, offset: int) -> bytes:
    """``DW_OP_breg<reg> offset``, or ``DW_OP_bregx`` for registers above 31."""
    if reg < 32:
        return bytes([OP.breg0 + reg]) + sleb(offset)
    return bytes([OP.bregx]) + uleb(reg) + sleb(offset)


def _cfa(loc: Loc) -> CfaRule | None:
    """The CFA rule; None (no rule: left out as ``cfa-undefined``) for a FLEX CFA word
    that names no register, which would be the CFA defined by itself."""
    if loc.reg is None:
        return None
    if not loc.deref:
        return CfaReg(loc.reg, loc.offset)
    return CfaExpr(_breg(loc.reg, loc.offset) + bytes([OP.deref]))


def row_for(start: int, rules: FrameRules, arch: Arch, mangled: bool) -> Row:
    """The DWARF row that recovers what ``rules`` recover."""
    if rules.cfa is None or not isinstance(rules.cfa, Loc):
        # An outermost frame: only "RA undefined" matters; the CFA is the SP as is.
        return Row(start, CfaReg(arch.sp, 0), ((arch.ra, Rule(RuleKind.undefined)),))
    regs = {reg: rule for reg, value in ((arch.fp, rules.fp), (arch.ra, rules.ra))
            if (rule := _rule(value)) is not None}
    return Row(start, _cfa(rules.cfa), tuple(sorted(regs.items())), mangled)


def timeline_of(section: DecodedSection, fde: DecodedFde, name: str, where: str,
                function_section: str = "") -> Timeline:
    """One FDE as a timeline (for a PC-mask FDE: one repetition block)."""
    arch = by_sframe_abi(section.abi)
    size = fde.rep_size if fde.pc_mask and fde.rep_size else fde.size
    if outermost(section, fde):
        rows = [row_for(0, FrameRules(None, None, RA_UNDEFINED), arch, False)]
    else:
        rows = [row_for(fre.start, fre_rules(section, fde, fre), arch, fre.mangled_ra)
                for fre in fde.fres if fre.start < size]
    merged: list[Row] = []
    for row in rows:
        if merged and merged[-1].start == row.start:
            merged[-1] = row
        elif not merged or not merged[-1].same_rules(row):
            merged.append(row)
    return Timeline(name, function_section, fde.start_address, size, tuple(merged), arch.ra,
                    Location(where, offset=fde.field_offset), signal_frame=fde.signal,
                    pauth_b_key=fde.pauth_b_key)


def lower_section(section: DecodedSection, arch: Arch, version: int, where: str,
                  name_of: Callable[[DecodedFde], str],
                  section_of: Callable[[DecodedFde], str] = lambda fde: "",
                  flex: bool = True) -> tuple[list[SFrameFunction], list[Skip]]:
    """Every FDE of ``section`` lowered for ``version`` (``flex``: see ``lower``):
    functions and what is left out."""
    functions: list[SFrameFunction] = []
    skips: list[Skip] = []
    memo: LowerMemo = {}
    for fde in section.fdes:
        timeline = timeline_of(section, fde, name_of(fde), where, section_of(fde))
        result = lower(timeline, arch, memo, version, flex)
        if isinstance(result, Skip):
            skips.append(result)
        elif fde.pc_mask and fde.rep_size:
            functions.append(result._replace(size=fde.size, pc_mask=True,
                                             rep_size=fde.rep_size))
        else:
            functions.append(result)
    return functions, skips


def fde_names(names: dict[tuple[str, int], str],
              section_of: Callable[[DecodedFde], str] = lambda fde: "",
              ) -> Callable[[DecodedFde], str]:
    """A namer for FDEs: the function symbol at the start, else ``pc+ADDR``."""
    def name_of(fde: DecodedFde) -> str:
        return function_name(names, section_of(fde), fde.start_address)

    return name_of
