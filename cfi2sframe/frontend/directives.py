"""Parse one ``.cfi_*`` statement into a small syntax tree (``syntax``), and evaluate
its operands.

Compiler output writes nearly every statement in a few plain forms (a name, then
registers and decimal numbers): those are read here at a glance, and everything
else by the Lark grammar (``grammar_parser``), which is never loaded for such a file.
The grammar is the reference: a differential test holds the two equal on every
statement the glance reads.  Parsing is cached by statement text: compiler output
repeats the same few directives thousands of times, so each distinct text is parsed
once and only its expressions are evaluated per use (symbols may change between uses).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from functools import cache

from .patterns import deferred
from .syntax import (
    Arg,
    Directive,
    Dot,
    EscapeItem,
    Expr,
    Num,
    Reg,
    Sym,
    SyntaxProblem,
    Unary,
)

__all__ = ["evaluate", "parse_plain", "parse_statement", "render"]


@cache
def parse_statement(text: str) -> Directive:
    """Parse one CFI statement; raise ``SyntaxProblem`` when it is malformed."""
    plain = parse_plain(text)
    if plain is not None:
        return plain
    from .grammar_parser import parse_with_grammar

    return parse_with_grammar(text)


# The operands of the directives read at a glance: "r" a register, "e" an expression,
# "r+" one register or more.
_PLAIN_OPERANDS = {
    "endproc": "", "remember_state": "", "restore_state": "", "signal_frame": "",
    "window_save": "", "negate_ra_state": "", "negate_ra_state_with_pc": "",
    "b_key_frame": "", "mte_tagged_frame": "",
    "def_cfa": "re", "def_cfa_register": "r", "def_cfa_offset": "e",
    "adjust_cfa_offset": "e", "offset": "re", "val_offset": "re", "rel_offset": "re",
    "register": "rr", "return_column": "r", "restore": "r+", "undefined": "r+",
    "same_value": "r+",
}
_HEAD = re.compile(r"\.cfi_([a-z_]+)(?:[ \t]+(.*))?")
_NAME = deferred(r"[A-Za-z_.$][A-Za-z0-9_.$@]*")
_DECIMAL = re.compile(r"0|[1-9][0-9]*")
# Words the grammar has as keywords somewhere: left to it.
_KEYWORDS = frozenset({"simple", "sleb128", "uleb128", "data2", "data4", "data8"})


def parse_plain(text: str) -> Directive | None:
    """The statement read at a glance: a directive of ``_PLAIN_OPERANDS`` whose operands
    are each a name (``%`` before a register's allowed), a decimal number, or a minus
    and one; None for anything else (the grammar's to read, or to reject)."""
    head = _HEAD.fullmatch(text)
    if head is None:
        return None
    name, rest = head.group(1), (head.group(2) or "").strip(" \t")
    if name == "startproc":
        return Directive(name, (None,)) if not rest else \
            Directive(name, ("simple",)) if rest == "simple" else None
    kinds = _PLAIN_OPERANDS.get(name)
    if kinds is None:
        return None
    parts = [part.strip(" \t") for part in rest.split(",")] if rest else []
    if kinds == "r+":
        kinds = "r" * max(len(parts), 1)
    if len(parts) != len(kinds):
        return None
    args: list[Arg] = []
    for part, kind in zip(parts, kinds, strict=True):
        operand = _plain_operand(part, kind == "r")
        if operand is None:
            return None
        args.append(operand)
    return Directive(name, tuple(args))


def _plain_operand(text: str, register: bool) -> Expr | None:
    if _DECIMAL.fullmatch(text):
        return Num(int(text))
    if text[:1] == "-" and _DECIMAL.fullmatch(text[1:]):
        return Unary("neg", Num(int(text[1:])))
    if register and text[:1] == "%":
        return Reg(text[1:]) if _NAME().fullmatch(text[1:]) else None
    if _NAME().fullmatch(text) and text not in _KEYWORDS:
        return Dot() if text == "." else Sym(text)
    return None


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
