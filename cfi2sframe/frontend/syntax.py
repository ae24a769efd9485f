"""A parsed ``.cfi_*`` statement: its name and operands, as small variant types
(cheap to cache and to evaluate), whichever parser made it (``directives``)."""

from __future__ import annotations

from ..typed import NamedTuple

# Operand expressions, as variant types (cheap to cache and to evaluate).


class Num(NamedTuple):
    """A number."""

    value: int


class Sym(NamedTuple):
    """A symbol (or a register named without ``%``)."""

    name: str


class Dot(NamedTuple):
    """The location counter, ``.``."""

    text: str = "."


class Reg(NamedTuple):
    """A register named with ``%``."""

    name: str


class Unary(NamedTuple):
    """``neg``, ``inv`` or ``lognot`` of an operand."""

    op: str
    operand: Expr


class Binary(NamedTuple):
    """A binary operator (``add``, ``shl``, ``eq`` ...: ``_OPS``) on two operands."""

    op: str
    left: Expr
    right: Expr


Expr = Num | Sym | Dot | Reg | Unary | Binary
EXPRESSIONS = (Num, Sym, Dot, Reg, Unary, Binary)


class EscapeItem(NamedTuple):
    """One ``.cfi_escape`` operand: ``byte``, ``sleb128``, ``uleb128`` or ``dataN``."""

    kind: str
    value: Expr


# A directive operand: an expression, an escape item, a keyword (``simple``, section
# names) or None where an optional operand is absent.
Arg = Expr | EscapeItem | str | None


class Directive(NamedTuple):
    """A parsed CFI statement: its name (``def_cfa``...) and operands."""

    name: str
    args: tuple[Arg, ...]


class SyntaxProblem(Exception):
    """A statement the grammar rejects; ``message`` says what was expected."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
