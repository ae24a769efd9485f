"""The Lark grammar (``grammar/cfi.lark``) and its parser: a statement's text to a
``Directive``.  Loaded only for a statement ``directives`` cannot read at a glance
(Lark and the grammar's tables take tens of milliseconds to load)."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from lark import Lark, Token, Transformer, Tree
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedInput

from .syntax import Binary, Directive, Dot, EscapeItem, Expr, Num, Reg, Sym, SyntaxProblem, Unary


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
    # cache=True keeps the analysed LALR tables in the temporary folder: loading them
    # is an order of magnitude cheaper than building them.
    return Lark(_grammar_text(), parser="lalr", lexer="contextual", transformer=_ToTree(),
                maybe_placeholders=True, cache=True)


def parse_with_grammar(text: str) -> Directive:
    """Parse one CFI statement with the grammar; raise ``SyntaxProblem`` when it is
    malformed."""
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
