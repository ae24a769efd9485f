"""What an FRE means: CFA, FP and RA recovery rules, for every version, ABI and FDE type.

This is the one place that interprets data words (default FDEs per ABI, the
s390x CFA encoding and V2 register encoding, V3 FLEX control words), so
``dump``, ``lookup``, ``diff`` and ``verify`` agree by construction.
"""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple

from ..arch import by_sframe_abi
from ..arch.base import Arch
from ..dwarf.ops import read_sleb
from ..errors import DecodeError
from ..model import CfaExpr, CfaReg, Row, Rule, RuleKind
from .decode import DecodedFde, DecodedFre, DecodedSection
from .format import VERSION_2, Fre, cfa_offset
from .words import FLEX_PADDING, flex_control_fields, s390x_word_reg


class Loc(NamedTuple):
    """A value: ``reg`` (None means the CFA) plus ``offset``, loaded from memory if ``deref``."""

    reg: int | None
    offset: int
    deref: bool


class Undefined(Enum):
    """A register with no value in the caller (DWARF ``undefined``); for the RA, an
    outermost frame."""

    UNDEFINED = "undefined"

    def __str__(self) -> str:
        return self.value


RA_UNDEFINED = Undefined.UNDEFINED


class DwarfExpr(NamedTuple):
    """A rule given by a DWARF expression that is not a plain ``breg`` location.

    ``val``: the expression gives the value (``DW_CFA_val_expression``), not the
    address the value is saved at (``DW_CFA_expression``); a CFA expression is a value.
    """

    val: bool
    expr: bytes

    def __str__(self) -> str:
        return "DWARF val expression" if self.val else "DWARF expression"


# How a caller's register is recovered: a location, a DWARF expression, or undefined.
Recovery = Loc | DwarfExpr | Undefined


class FrameRules(NamedTuple):
    """How to find the caller's CFA, FP and RA at one PC.

    ``cfa`` None means no CFA (an outermost frame, RA undefined); ``fp`` None
    means the FP is unchanged; ``ra`` None means unchanged (in its register).
    """

    cfa: Loc | DwarfExpr | None
    fp: Recovery | None
    ra: Recovery | None


class RuleFre(NamedTuple):
    """A FLEX FRE before encoding: its start and the rules it must express.

    Same interface as ``format.Fre`` for readers: ``start``, ``mangled_ra`` and
    ``frame_rules(arch)``.
    """

    start: int
    rules: FrameRules
    mangled_ra: bool = False

    def frame_rules(self, arch: Arch | str) -> FrameRules:
        """The recovery rules of this row (``arch`` is taken for ``Fre``'s sake)."""
        return self.rules


OUTERMOST = FrameRules(None, None, RA_UNDEFINED)


def row_rules(fre: Fre, arch: Arch) -> FrameRules:
    """The recovery rules a not yet encoded default-FDE row stands for (as ``fre_rules``
    gives for the encoded one)."""
    if fre.ra_undefined:
        return FrameRules(None, None, RA_UNDEFINED)
    cfa = Loc(arch.fp if fre.cfa_base_fp else arch.sp, fre.cfa_offset, False)
    fp = Loc(fre.fp_reg, 0, False) if fre.fp_reg is not None else (
        Loc(None, fre.fp_offset, True) if fre.fp_offset is not None else None)
    ra: Recovery | None
    if not arch.tracks_ra:
        ra = Loc(None, arch.sframe_fixed_ra_offset, True)
    elif fre.ra_reg is not None:
        ra = Loc(fre.ra_reg, 0, False)
    else:
        ra = Loc(None, fre.ra_offset, True) if fre.ra_offset is not None else None
    return FrameRules(cfa, fp, ra)


def as_loc(value: Recovery | None) -> Loc:
    """``value`` where the caller has already ruled out all but a location."""
    if not isinstance(value, Loc):
        raise TypeError(f"expected a location, not {value!r}")  # a bug of ours
    return value


def opt_loc(value: Recovery | None) -> Loc | None:
    """``value`` where the caller has already ruled out all but a location or None."""
    return None if value is None else as_loc(value)


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
    arch = by_sframe_abi(section.abi)
    words = fre.offsets
    if not words:
        return FrameRules(None, None, RA_UNDEFINED)
    s390x = arch.s390x
    if fde.flex:
        return _flex(section, fre, arch)
    cfa = Loc(arch.fp if fre.base_fp else arch.sp, cfa_offset(words[0], arch), False)
    if not arch.tracks_ra:  # AMD64: FP in the second word, RA at the fixed offset
        fp = Loc(None, words[1], True) if len(words) > 1 else None
        return FrameRules(cfa, fp, Loc(None, section.fixed_ra_offset, True))
    ra: Recovery | None = None
    fp = None
    if len(words) > 1:
        ra = _slot(words[1], s390x and section.version == VERSION_2)
        if s390x and words[1] == 0:
            ra = None  # SFRAME_FRE_RA_OFFSET_INVALID: RA not saved (padding)
    if len(words) > 2:
        fp = _slot(words[2], s390x and section.version == VERSION_2)
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


def describe(rules: FrameRules, abi: int) -> str:
    """Rules in words: ``CFA = rsp+16, RA = [CFA-8], FP = [CFA-16]``."""
    arch = by_sframe_abi(abi)
    if rules.cfa is None:
        return "RA undefined (outermost frame)"
    parts = [f"CFA = {_loc(rules.cfa, arch)}"]
    if rules.ra == RA_UNDEFINED:
        parts.append("RA undefined")
    elif rules.ra is None:
        parts.append(f"RA = {arch.reg_name(arch.ra)} (unchanged)")
    else:
        parts.append(f"RA = {_loc(rules.ra, arch)}")
    fp_name = arch.reg_name(arch.fp)
    parts.append(f"FP = {_loc(rules.fp, arch)}" if rules.fp else f"FP = {fp_name} (unchanged)")
    return ", ".join(parts)


def _loc(loc: Recovery, arch: Arch) -> str:
    if not isinstance(loc, Loc):
        return str(loc)
    base = "CFA" if loc.reg is None else arch.reg_name(loc.reg)
    text = f"{base}{loc.offset:+d}" if loc.offset or loc.deref else base
    return f"[{text}]" if loc.deref else text


# -- DWARF rows in the same terms ----------------------------------------------------


def expr_loc(expr: bytes, is_address: bool) -> Loc | None:
    """``DW_OP_breg<N> off [; DW_OP_deref]`` as a location; None for other expressions.

    ``is_address``: the expression gives the address the value is saved at
    (``DW_CFA_expression``), rather than the value itself.
    """
    if not expr or not 0x70 <= expr[0] <= 0x8F:
        return None
    try:
        offset, pos = read_sleb(expr, 1)
    except DecodeError:
        return None
    rest = expr[pos:]
    if rest not in (b"", b"\x06"):
        return None
    deref = rest == b"\x06"
    if is_address:
        return None if deref else Loc(expr[0] - 0x70, offset, True)
    return Loc(expr[0] - 0x70, offset, deref)


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
