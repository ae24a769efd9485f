"""DWARF expressions (DWARF 5 section 2.5) evaluated at one PC, symbolic in the registers.

Linkers describe PLT stubs with a CFA expression that depends on the PC
(GNU ld, x86-64: ``breg7 8; breg16 0; lit15; and; lit11; ge; lit3; shl; plus``,
i.e. CFA = rsp + 8, or rsp + 16 from byte 11 of each 16-byte entry on).  With
the PC known, such an expression reduces to ``register + constant``: the rule
SFrame can state.  Values are kept as (register, constant); arithmetic other
than adding or subtracting a constant needs both sides known.  Memory reads
(``deref``) and anything else we cannot reduce give None: the caller reports
the expression as one it cannot evaluate, never guesses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from ..arch.base import ByteOrder
from ..errors import DecodeError
from .leb128 import read_sleb, read_uleb

MASK64 = (1 << 64) - 1
MAX_STEPS = 10_000


class Value(NamedTuple):
    """``reg`` + ``offset``; ``reg`` None means the constant ``offset``."""

    reg: int | None
    offset: int


class NotReducible(Exception):
    """The expression reads memory, uses an operation we do not evaluate, or is malformed."""


def _signed(value: int) -> int:
    value &= MASK64
    return value - (1 << 64) if value >> 63 else value


_BINARY: dict[int, Callable[[int, int], int]] = {
    0x1A: lambda a, b: a & b,
    0x1E: lambda a, b: a * b,
    0x21: lambda a, b: a | b,
    0x24: lambda a, b: a << b if b < 64 else 0,
    0x25: lambda a, b: (a & MASK64) >> b if b < 64 else 0,
    0x26: lambda a, b: _signed(a) >> min(b, 63),
    0x27: lambda a, b: a ^ b,
    0x29: lambda a, b: int(_signed(a) == _signed(b)),
    0x2A: lambda a, b: int(_signed(a) >= _signed(b)),
    0x2B: lambda a, b: int(_signed(a) > _signed(b)),
    0x2C: lambda a, b: int(_signed(a) <= _signed(b)),
    0x2D: lambda a, b: int(_signed(a) < _signed(b)),
    0x2E: lambda a, b: int(_signed(a) != _signed(b)),
}

# DW_OP_const1u .. const8s: (size, signed)
_CONSTS = {0x08: (1, False), 0x09: (1, True), 0x0A: (2, False), 0x0B: (2, True),
           0x0C: (4, False), 0x0D: (4, True), 0x0E: (8, False), 0x0F: (8, True)}


def _const(stack: list[Value]) -> int:
    if not stack:
        raise NotReducible("stack underflow")
    value = stack.pop()
    if value.reg is not None:
        raise NotReducible("arithmetic on a register value")
    return value.offset


def evaluate(expr: bytes, pc: int, pc_reg: int | None, little: bool = True) -> Value:
    """The value ``expr`` computes when the program counter is ``pc``.

    ``pc_reg`` is the DWARF number of the PC register (it reads as ``pc``);
    other registers stay symbolic.  Raises NotReducible.
    """
    stack: list[Value] = []
    pos = 0
    order: ByteOrder = "little" if little else "big"
    steps = 0
    try:
        while pos < len(expr):
            steps += 1
            if steps > MAX_STEPS:  # a backward branch that never ends
                raise NotReducible("the expression does not terminate")
            op = expr[pos]
            pos += 1
            if 0x30 <= op <= 0x4F:  # lit0..lit31
                stack.append(Value(None, op - 0x30))
            elif 0x70 <= op <= 0x8F or op == 0x92:  # breg0..31, bregx
                if op == 0x92:
                    reg, pos = read_uleb(expr, pos)
                else:
                    reg = op - 0x70
                offset, pos = read_sleb(expr, pos)
                stack.append(Value(None, pc + offset) if reg == pc_reg else Value(reg, offset))
            elif op in _CONSTS:
                size, signed = _CONSTS[op]
                if pos + size > len(expr):
                    raise NotReducible("truncated constant")
                number = int.from_bytes(expr[pos : pos + size], order, signed=signed)
                stack.append(Value(None, number))
                pos += size
            elif op in (0x10, 0x11):  # constu, consts
                number, pos = (read_uleb if op == 0x10 else read_sleb)(expr, pos)
                stack.append(Value(None, number))
            elif op == 0x23:  # plus_uconst
                number, pos = read_uleb(expr, pos)
                top = _pop(stack)
                stack.append(Value(top.reg, top.offset + number))
            elif op == 0x22:  # plus
                b, a = _pop(stack), _pop(stack)
                if a.reg is not None and b.reg is not None:
                    raise NotReducible("sum of two registers")
                stack.append(Value(a.reg if a.reg is not None else b.reg, a.offset + b.offset))
            elif op == 0x1C:  # minus
                b = Value(None, _const(stack))
                a = _pop(stack)
                stack.append(Value(a.reg, a.offset - b.offset))
            elif op in _BINARY:
                b_num, a_num = _const(stack), _const(stack)
                stack.append(Value(None, _signed(_BINARY[op](a_num, b_num))))
            elif op == 0x1F:  # neg
                stack.append(Value(None, -_const(stack)))
            elif op == 0x20:  # not
                stack.append(Value(None, _signed(~_const(stack))))
            elif op == 0x12:  # dup
                stack.append(_top(stack, 0))
            elif op == 0x13:  # drop
                _pop(stack)
            elif op == 0x14:  # over
                stack.append(_top(stack, 1))
            elif op == 0x15:  # pick
                if pos >= len(expr):
                    raise NotReducible("truncated pick")
                stack.append(_top(stack, expr[pos]))
                pos += 1
            elif op == 0x16:  # swap
                b, a = _pop(stack), _pop(stack)
                stack.extend((b, a))
            elif op == 0x2F or op == 0x28:  # skip, bra
                if pos + 2 > len(expr):
                    raise NotReducible("truncated branch")
                jump = int.from_bytes(expr[pos : pos + 2], order, signed=True)
                pos += 2
                if op == 0x2F or _const(stack) != 0:
                    pos += jump
                    if not 0 <= pos <= len(expr):
                        raise NotReducible("branch outside the expression")
            elif op == 0x96:  # nop
                pass
            else:
                raise NotReducible(f"DW_OP {op:#x} is not evaluated")
    except DecodeError as exc:
        raise NotReducible(str(exc)) from None
    if not stack:
        raise NotReducible("empty expression")
    return stack[-1]


def _pop(stack: list[Value]) -> Value:
    if not stack:
        raise NotReducible("stack underflow")
    return stack.pop()


def _top(stack: list[Value], depth: int) -> Value:
    if depth >= len(stack):
        raise NotReducible("stack underflow")
    return stack[-1 - depth]
