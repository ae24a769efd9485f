"""Parse one ``.cfi_*`` statement with the Lark grammar into a small syntax tree.

Parsing is cached by statement text: compiler output repeats the same few
directives thousands of times, so each distinct text is parsed once and only
its expressions are evaluated per use (symbols may change between uses).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple

from lark import Lark, Token, Transformer, Tree
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedInput

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


@dataclass(frozen=True)
class Directive:
    """A parsed CFI statement: its name (``def_cfa``...) and operands."""

    name: str
    args: tuple[Arg, ...]


class SyntaxProblem(Exception):
    """A statement the grammar rejects; ``message`` says what was expected."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _grammar_text() -> str:
    try:
        return resources.files("cfi2sframe.grammar").joinpath("cfi.lark").read_text()
    except (ModuleNotFoundError, FileNotFoundError):
        here = Path(__file__).resolve().parents[2] / "grammar" / "cfi.lark"
        return here.read_text()


_BINARY = ("logor logand add sub eq ne lt gt le ge bor band bxor bornot "
           "mul div mod shl shr").split()
_UNARY = ("neg", "inv", "lognot")


class _ToTree(Transformer[Token, Any]):
    """Lark tree -> plain tuples (cheap to cache and to evaluate)."""

    def number(self, items: list[Token]) -> Expr:
        text = str(items[0])
        if text[:2] in ("0x", "0X"):
            return Num(int(text, 16))
        if text[:2] in ("0b", "0B"):
            return Num(int(text[2:], 2))
        if len(text) > 1 and text[0] == "0":
            try:
                return Num(int(text, 8))
            except ValueError:
                raise SyntaxProblem(f"bad octal number '{text}'") from None
        return Num(int(text))

    def symbol(self, items: list[Token]) -> Expr:
        name = str(items[0])
        return Dot() if name == "." else Sym(name)

    def reg_percent(self, items: list[Token]) -> Expr:
        return Reg(str(items[0]))

    def reg_expr(self, items: list[Any]) -> Any:
        return items[0]

    def start(self, items: list[Directive]) -> Directive:
        return items[0]

    def directive(self, items: list[Directive]) -> Directive:
        return items[0]

    def __default__(self, data: Any, children: list[Any], meta: Any) -> Any:
        name = str(data)
        if name.startswith("_"):
            return Tree(data, children, meta)  # Lark's own helper rules (repetitions)
        if name in _BINARY:
            return Binary(name, children[0], children[1])
        if name in _UNARY:
            return Unary(name, children[0])
        if name.startswith("escape_"):  # escape_byte, escape_sleb128, ..., escape_data8
            return EscapeItem(name[len("escape_"):], children[0])
        args = tuple(str(c) if isinstance(c, Token) else c for c in children)
        return Directive(name, args)


@lru_cache(maxsize=1)
def _parser() -> Lark:
    # cache=True keeps the analysed LALR tables in the temporary folder: building
    # them costs ~0.15 s, loading them ~0.01 s.
    return Lark(_grammar_text(), parser="lalr", lexer="contextual", transformer=_ToTree(),
                maybe_placeholders=True, cache=True)


@cache
def parse_statement(text: str) -> Directive:
    """Parse one CFI statement; raise ``SyntaxProblem`` when it is malformed."""
    try:
        result = _parser().parse(text)
    except UnexpectedCharacters as exc:
        where = exc.pos_in_stream
        char = text[where] if where is not None and where < len(text) else "?"
        raise SyntaxProblem(f"unexpected character '{char}' in '{text}'") from None
    except UnexpectedInput as exc:
        token = getattr(exc, "token", None)
        if token is None or token.type == "$END":
            raise SyntaxProblem(f"missing operand in '{text}'") from None
        raise SyntaxProblem(f"unexpected '{token}' in '{text}'") from None
    except SyntaxProblem:
        raise
    except LarkError as exc:
        raise SyntaxProblem(f"cannot parse '{text}': {exc}") from None
    assert isinstance(result, Directive)
    return result


def _div(a: int, b: int) -> int:
    if b == 0:
        raise SyntaxProblem("division by zero")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _mod(a: int, b: int) -> int:
    return a - _div(a, b) * b


_OPS: dict[str, Callable[[int, int], int]] = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": _div, "mod": _mod,
    "shl": lambda a, b: a << b if b >= 0 else a >> -b,
    "shr": lambda a, b: a >> b if b >= 0 else a << -b,
    "bor": operator.or_, "band": operator.and_, "bxor": operator.xor,
    "bornot": lambda a, b: a | ~b,
    # GNU as comparisons yield -1 for true, 0 for false.
    "eq": lambda a, b: -int(a == b), "ne": lambda a, b: -int(a != b),
    "lt": lambda a, b: -int(a < b), "gt": lambda a, b: -int(a > b),
    "le": lambda a, b: -int(a <= b), "ge": lambda a, b: -int(a >= b),
    "logor": lambda a, b: int(bool(a) or bool(b)),
    "logand": lambda a, b: int(bool(a) and bool(b)),
}

SymbolLookup = Callable[[str], int | None]


def evaluate(tree: Expr, lookup: SymbolLookup) -> int:
    """Evaluate an absolute expression; symbols resolve through ``lookup``."""
    if isinstance(tree, Num):
        return tree.value
    if isinstance(tree, Sym):
        value = lookup(tree.name)
        if value is None:
            raise SyntaxProblem(f"symbol '{tree.name}' is undefined or not an absolute "
                                "constant")
        return value
    if isinstance(tree, Reg):
        raise SyntaxProblem(f"register '%{tree.name}' where a number is expected")
    if isinstance(tree, Dot):
        raise SyntaxProblem("'.' is not an absolute constant in a CFI operand")
    if isinstance(tree, Unary):
        value = evaluate(tree.operand, lookup)
        return -value if tree.op == "neg" else ~value if tree.op == "inv" else int(not value)
    return _OPS[tree.op](evaluate(tree.left, lookup), evaluate(tree.right, lookup))


def render(tree: Arg) -> str:
    """An operand back to text (for personality/LSDA symbols)."""
    if tree is None:
        return ""
    if isinstance(tree, str):
        return tree
    if isinstance(tree, Num):
        return str(tree.value)
    if isinstance(tree, (Sym, Reg)):
        return tree.name
    if isinstance(tree, Dot):
        return "."
    if isinstance(tree, Unary):
        return f"{tree.op}({render(tree.operand)})"
    if isinstance(tree, EscapeItem):
        return f"{tree.kind}({render(tree.value)})"
    return f"({render(tree.left)} {tree.op} {render(tree.right)})"
