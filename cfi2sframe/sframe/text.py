"""Rules as text: where DWARF rows and rules and SFrame recovery rules are put into
words (for reasons and warnings) or into readelf's cells (for disagreements); ``dump``
writes its own cells from the words (``sframe/dump.py``)."""

from __future__ import annotations

from ..arch import by_sframe_abi
from ..arch.base import Arch
from ..model import CfaReg, Row, Rule, RuleKind
from .recovery import RA_UNDEFINED, FrameRules, Loc, Recovery


def rule_words(rule: Rule | None, arch: Arch) -> str:
    """A DWARF register rule in a sentence: ``saved at CFA-16``, ``in register rbx``."""
    if rule is None:
        return "unspecified"
    if rule.kind == RuleKind.offset:
        return f"saved at CFA{rule.value:+d}"
    if rule.kind == RuleKind.val_offset:
        return f"the value CFA{rule.value:+d}"
    if rule.kind == RuleKind.register:
        return f"in register {arch.reg_name(rule.value)}"
    if rule.kind in (RuleKind.expression, RuleKind.val_expression):
        return f"a DWARF {rule.kind.replace('_', ' ')}"
    return rule.kind.replace("_", " ")


def row_words(row: Row | None, arch: Arch) -> str:
    """A DWARF row in readelf's terms: ``CFA=rsp+40 rbx=c-24 rip=c-8``."""
    if row is None:
        return "(no row)"
    if isinstance(row.cfa, CfaReg):
        cfa = f"{arch.reg_name(row.cfa.reg)}{row.cfa.offset:+d}"
    else:
        cfa = "expression" if row.cfa is not None else "undefined"
    regs = " ".join(f"{arch.reg_name(reg)}={rule_cell(rule, arch)}" for reg, rule in row.regs)
    return f"CFA={cfa}" + (f" {regs}" if regs else "")


def rule_cell(rule: Rule, arch: Arch) -> str:
    """A DWARF register rule as readelf -wF writes it: ``c-16``, ``v+8``, ``rbx``."""
    if rule.kind == RuleKind.offset:
        return f"c{rule.value:+d}"
    if rule.kind == RuleKind.val_offset:
        return f"v{rule.value:+d}"
    if rule.kind == RuleKind.register:
        return arch.reg_name(rule.value)
    return rule.kind.replace("_", " ")


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
