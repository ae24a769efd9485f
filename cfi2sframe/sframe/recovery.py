"""Recovery rules: how a caller's CFA, FP and RA are found at one PC.

The terms every SFrame reader and writer shares (a location, a DWARF expression,
undefined), apart from any byte layout: ``format``, ``decode``, ``rules`` and the
encoder all build on them, so they import nothing else of the package.
"""

from __future__ import annotations

from enum import Enum

from ..typed import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from ..arch.base import Arch


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


def as_loc(value: Recovery | None) -> Loc:
    """``value`` where the caller has already ruled out all but a location."""
    if not isinstance(value, Loc):
        raise TypeError(f"expected a location, not {value!r}")  # a bug of ours
    return value


def opt_loc(value: Recovery | None) -> Loc | None:
    """``value`` where the caller has already ruled out all but a location or None."""
    return None if value is None else as_loc(value)
