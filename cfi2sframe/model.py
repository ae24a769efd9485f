"""The format-neutral model: a function's call-frame rules over its code range.

Rules and rows are named tuples: immutable, compared by value, and cheap to
create by the million when a large library is read.

A ``Timeline`` is what DWARF CFI says about one function, independent of any
output format.  Every frontend produces it and every backend consumes it, so
equality here means "unwinds the same".

Holds ``FunctionSpan`` (name, section, start, size: the four fields every per-function
record opens with; ``span_of`` carries them on), ``in_force`` (the "row at PC" look-up),
``Timeline``, ``Row`` (with ``ra_signed``, ``ra_signed_pc``), ``CfaReg``/``CfaExpr``,
``Rule`` with ``RuleKind``, ``Location``, and ``Name`` (str-valued enums that print as
their names; ``Name`` and ``in_force`` live in ``basics``, for the readers that need
nothing else of this module).
"""

from __future__ import annotations

from .basics import Name as Name
from .basics import in_force as in_force
from .typed import TYPE_CHECKING, NamedTuple


class FunctionSpan(NamedTuple):
    """Where a function is: its name, its section (relocatable input: ``start`` is an
    offset in it; linked input: "") and its bytes ``[start, start + size)``.

    Every per-function record opens with these four fields in this order (``Fde``,
    ``Timeline``, ``SFrameFunction``, ``CompactFunction``, ``Skip``); they stay plain
    fields, read in the hot loops, and ``span_of`` and ``Record(*span, ...)`` carry
    them from one record to the next."""

    name: str
    section: str
    start: int
    size: int

if TYPE_CHECKING:
    from typing import Protocol
    class Spanned(Protocol):
        """Any record that says where its function is."""

        @property
        def name(self) -> str: ...
        @property
        def section(self) -> str: ...
        @property
        def start(self) -> int: ...
        @property
        def size(self) -> int: ...


def span_of(record: Spanned) -> FunctionSpan:
    """The function span of any per-function record."""
    return FunctionSpan(record.name, record.section, record.start, record.size)


class CfaReg(NamedTuple):
    """CFA = value of ``reg`` + ``offset``."""

    reg: int
    offset: int


class CfaExpr(NamedTuple):
    """CFA = result of a DWARF expression (``DW_CFA_def_cfa_expression``)."""

    expr: bytes


CfaRule = CfaReg | CfaExpr


class RuleKind(Name):
    """How a caller's register is recovered (DWARF 5 section 6.4.1)."""

    undefined = "undefined"
    same_value = "same_value"
    offset = "offset"  # saved at CFA + value
    val_offset = "val_offset"  # the value is CFA + value
    register = "register"  # in register ``value``
    expression = "expression"  # saved at the address ``expr`` computes
    val_expression = "val_expression"  # the value ``expr`` computes


class Rule(NamedTuple):
    """How to recover one register of the caller: ``kind`` with its operand, a
    number (``value``) or a DWARF expression (``expr``)."""

    kind: RuleKind
    value: int = 0
    expr: bytes = b""


UNDEFINED = Rule(RuleKind.undefined)
SAME_VALUE = Rule(RuleKind.same_value)


class Row(NamedTuple):
    """The rules in force from ``start`` (bytes from the function start) on.

    ``cfa`` is None only before the first CFA definition of a
    ``.cfi_startproc simple`` function.  ``regs`` holds a rule for every
    register the CFI mentions, sorted by register number.
    """

    start: int
    cfa: CfaRule | None
    regs: tuple[tuple[int, Rule], ...] = ()
    ra_signed: bool = False
    ra_signed_pc: bool = False  # AArch64 PAuth_LR: the PC is a signing diversifier too

    def rule(self, reg: int) -> Rule | None:
        """The rule for ``reg``, or None when the CFI never mentions it."""
        for num, rule in self.regs:
            if num == reg:
                return rule
        return None

    def same_rules(self, other: Row) -> bool:
        """True when both rows recover every register the same way."""
        return (self.cfa, self.regs, self.ra_signed, self.ra_signed_pc) == (
            other.cfa, other.regs, other.ra_signed, other.ra_signed_pc)


class Location(NamedTuple):
    """Where something came from, for diagnostics: a file and line, or a byte offset."""

    file: str
    line: int = 0
    offset: int | None = None

    def __str__(self) -> str:
        if self.line:
            return f"{self.file}:{self.line}"
        if self.offset is not None:
            return f"{self.file}:{self.offset:#x}"
        return self.file


class Timeline(NamedTuple):
    """One function's call-frame rules: ``rows`` ordered by ``start``, first at or after 0.

    ``section`` and ``start`` place the function (for relocatable input the
    start is the offset in its section); ``size`` is its length in bytes.
    ``invalid`` holds why the CFI has no DWARF meaning (then ``rows`` is
    empty).  ``anchor`` is a source symbol and the distance from it to the
    start: ``--emit asm`` writes the start as a relocatable expression with it.
    """

    name: str
    section: str
    start: int
    size: int
    rows: tuple[Row, ...]
    ra_column: int
    location: Location
    signal_frame: bool = False
    pauth_b_key: bool = False
    personality: str | None = None
    lsda: str | None = None
    invalid: str | None = None
    anchor: tuple[str, int] | None = None
    # (offset, source line) of each CFI directive in program order (assembly input):
    # where a problem in the row at an offset was written.
    directive_lines: tuple[tuple[int, int], ...] = ()

    def location_at(self, offset: int) -> Location:
        """Where the rules in force at ``offset`` were last set: the line of the last
        directive at or before it (assembly input), else the function's location."""
        line = 0
        for at, directive_line in self.directive_lines:
            if at > offset:
                break
            line = directive_line
        return self.location._replace(line=line) if line else self.location

    def row_at(self, pc: int) -> Row | None:
        """The row in force at ``pc`` bytes from the start, or None if none covers it."""
        return in_force(self.rows, pc)
