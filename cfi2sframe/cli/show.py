"""Recovery rules and sections in words and as JSON, for the reading subcommands."""

from __future__ import annotations

from ..sframe.decode import DecodedFde, DecodedSection
from ..sframe.rules import FrameRules, Loc, Recovery, fre_rules
from ..sframe.text import describe
from ..typed import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any


def json_rules(rules: object) -> object:
    """Rules as JSON-ready data (None, a string, or CFA/FP/RA locations)."""
    if rules is None or isinstance(rules, str):
        return rules
    assert isinstance(rules, FrameRules)

    def loc(value: Recovery | None) -> object:
        if value is None:
            return None
        if not isinstance(value, Loc):
            return str(value)  # "undefined", "DWARF expression", "DWARF val expression"
        return {"reg": value.reg, "offset": value.offset, "deref": value.deref}

    return {"cfa": loc(rules.cfa), "fp": loc(rules.fp), "ra": loc(rules.ra)}


def words(rules: object, abi: int) -> str:
    """Rules in words, or why there are none."""
    if rules is None:
        return "no rule (not covered)"
    if isinstance(rules, FrameRules):
        return describe(rules, abi)
    return str(rules)


def describe_fde(fde: DecodedFde) -> str:
    return f"function at {fde.start_address:#x} (size {fde.size})"


def section_json(section: DecodedSection) -> dict[str, Any]:
    """The whole section as JSON-ready data."""
    return {
        "version": section.version, "flags": section.flags, "abi": section.abi,
        "fixed_fp_offset": section.fixed_fp_offset, "fixed_ra_offset": section.fixed_ra_offset,
        "num_fdes": len(section.fdes), "num_fres": section.num_fres,
        "fdes": [
            {"index": fde.index, "pc": fde.start_address, "size": fde.size,
             "fre_type": fde.fre_type, "pc_mask": fde.pc_mask, "rep_size": fde.rep_size,
             "pauth_b_key": fde.pauth_b_key, "signal": fde.signal, "flex": fde.flex,
             "fres": [{"start": fre.start, "words": list(fre.offsets),
                       "mangled_ra": fre.mangled_ra,
                       "rules": json_rules(fre_rules(section, fde, fre))}
                      for fre in fde.fres]}
            for fde in section.fdes
        ],
    }
