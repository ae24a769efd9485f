"""What an FRE means: CFA, FP and RA recovery rules, for every version, ABI and FDE type.

This is the one place that interprets data words as recovery rules (default FDEs per
ABI, the s390x CFA encoding and V2 register encoding, V3 FLEX control words), so
``lookup``, ``diff`` and ``verify`` agree by construction.  ``dump`` prints the words
as readelf does, reading their places itself (``sframe/dump._default_cells``,
``_flex_cells``), held to readelf by the differential tests.
"""

from __future__ import annotations

from ..arch import by_sframe_abi
from ..arch.base import Arch
from ..dwarf.leb128 import read_sleb
from ..dwarf.opcodes import OP
from ..errors import DecodeError
from ..model import CfaExpr, CfaReg, Row, Rule, RuleKind
from ..typed import TYPE_CHECKING
from .format import VERSION_2, cfa_offset
from .recovery import (
    OUTERMOST,
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
from .words import FLEX_PADDING, flex_control_fields, s390x_word_reg

if TYPE_CHECKING:  # (the decoder's records, as annotations: a conversion loads no decoder)
    from .decode import DecodedFde, DecodedFre, DecodedSection

# The recovery terms are defined in ``recovery`` (below the byte layouts); they are
# named here too, where readers of SFrame look for them.
__all__ = ["OUTERMOST", "RA_UNDEFINED", "DwarfExpr", "FrameRules", "Loc", "Recovery",
           "RuleFre", "Undefined", "as_loc", "opt_loc", "outermost", "rules_at",
           "fre_rules", "default_fre_rules", "expr_loc", "dwarf_rules"]


def outermost(section: DecodedSection, fde: DecodedFde) -> bool:
    """A V3 default FDE without FREs: the RA is undefined throughout (outermost frame)."""
    return not fde.fres and section.version >= 3 and not fde.flex


def rules_at(section: DecodedSection, fde: DecodedFde, pc: int) -> FrameRules | None:
    """The rules in force at address ``pc`` of ``fde``; None where no FRE covers it."""
    if outermost(section, fde):
        return OUTERMOST if fde.start_address <= pc < fde.start_address + fde.size else None
    fre = fde.fre_at(pc)
    return fre_rules(section, fde, fre) if fre is not None else None


def fre_rules(section: DecodedSection, fde: DecodedFde, fre: DecodedFre) -> FrameRules:
    """The recovery rules one FRE encodes."""
    if fde.flex and fre.offsets:
        return _flex(section, fre, by_sframe_abi(section.abi))
    return default_fre_rules(section, fre)


def default_fre_rules(section: DecodedSection, fre: DecodedFre) -> FrameRules:
    """``fre_rules`` of an FRE of a default (not FLEX) FDE."""
    arch = by_sframe_abi(section.abi)
    words = fre.offsets
    if not words:
        return FrameRules(None, None, RA_UNDEFINED)
    cfa = Loc(arch.fp if fre.base_fp else arch.sp, cfa_offset(words[0], arch), False)
    if not arch.tracks_ra:  # AMD64: FP in the second word, RA at the fixed offset
        fp = Loc(None, words[1], True) if len(words) > 1 else None
        return FrameRules(cfa, fp, Loc(None, section.fixed_ra_offset, True))
    ra: Recovery | None = None
    fp = None
    reg_words = arch.sframe_register_words and section.version == VERSION_2
    if len(words) > 1:
        ra = _slot(words[1], reg_words)
        if arch.sframe_ra_padding and words[1] == 0:
            ra = None  # SFRAME_FRE_RA_OFFSET_INVALID: RA not saved (padding)
    if len(words) > 2:
        fp = _slot(words[2], reg_words)
    return FrameRules(cfa, fp, ra)


def _slot(word: int, reg_encoded: bool) -> Loc:
    """A stack slot at CFA+word, or (s390x V2, odd word) the register word >> 1."""
    reg = s390x_word_reg(word) if reg_encoded else None
    return Loc(reg, 0, False) if reg is not None else Loc(None, word, True)


def _flex(section: DecodedSection, fre: DecodedFre, arch: Arch) -> FrameRules:
    words = fre.offsets
    count = len(words)

    def pair(i: int) -> Loc:
        reg, deref = flex_control_fields(fre.unsigned(i))
        return Loc(reg, words[i + 1] if i + 1 < count else 0, deref)

    cfa = pair(0)
    cfa = cfa._replace(offset=cfa_offset(cfa.offset, arch))
    i = 2
    ra: Recovery | None = None
    if i < count:
        if fre.unsigned(i) == FLEX_PADDING:
            i += 1  # no RA rule
        else:
            ra = pair(i)
            i += 2
    fp = pair(i) if i < count and fre.unsigned(i) != FLEX_PADDING else None
    if ra is None and section.fixed_ra_offset:
        ra = Loc(None, section.fixed_ra_offset, True)
    return FrameRules(cfa, fp, ra)


# -- DWARF rows in the same terms ----------------------------------------------------


def expr_loc(expr: bytes, is_address: bool) -> Loc | None:
    """``DW_OP_breg<N> off [; DW_OP_deref]`` as a location; None for other expressions.

    ``is_address``: the expression gives the address the value is saved at
    (``DW_CFA_expression``), rather than the value itself.
    """
    if not expr or not OP.breg0 <= expr[0] <= OP.breg31:
        return None
    try:
        offset, pos = read_sleb(expr, 1)
    except DecodeError:
        return None
    rest = expr[pos:]
    if rest not in (b"", bytes([OP.deref])):
        return None
    deref = rest == bytes([OP.deref])
    if is_address:
        return None if deref else Loc(expr[0] - OP.breg0, offset, True)
    return Loc(expr[0] - OP.breg0, offset, deref)


def _reg_loc(rule: Rule | None) -> Recovery | None:
    if rule is None or rule.kind == RuleKind.same_value:
        return None
    if rule.kind == RuleKind.undefined:
        return RA_UNDEFINED
    if rule.kind == RuleKind.offset:
        return Loc(None, rule.value, True)
    if rule.kind == RuleKind.val_offset:
        return Loc(None, rule.value, False)
    if rule.kind == RuleKind.register:
        return Loc(rule.value, 0, False)
    loc = expr_loc(rule.expr, rule.kind == RuleKind.expression)
    return loc if loc is not None else DwarfExpr(rule.kind == RuleKind.val_expression, rule.expr)


def dwarf_rules(row: Row, arch: Arch, ra_column: int) -> FrameRules | None:
    """A DWARF row in the terms of SFrame rules (CFA, FP, RA); None before any CFA rule."""
    ra = _reg_loc(row.rule(ra_column))
    if ra == RA_UNDEFINED:
        return FrameRules(None, None, RA_UNDEFINED)
    if isinstance(row.cfa, CfaReg):
        cfa: Loc | DwarfExpr = Loc(row.cfa.reg, row.cfa.offset, False)
    elif isinstance(row.cfa, CfaExpr):
        cfa = expr_loc(row.cfa.expr, False) or DwarfExpr(False, row.cfa.expr)
    else:
        return None
    return FrameRules(cfa, _reg_loc(row.rule(arch.fp)), ra)
