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
from .opcodes import OP

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
    OP.and_: lambda a, b: a & b,
    OP.mul: lambda a, b: a * b,
    OP.or_: lambda a, b: a | b,
    OP.shl: lambda a, b: a << b if b < 64 else 0,
    OP.shr: lambda a, b: (a & MASK64) >> b if b < 64 else 0,
    OP.shra: lambda a, b: _signed(a) >> min(b, 63),
    OP.xor: lambda a, b: a ^ b,
    OP.eq: lambda a, b: int(_signed(a) == _signed(b)),
    OP.ge: lambda a, b: int(_signed(a) >= _signed(b)),
    OP.gt: lambda a, b: int(_signed(a) > _signed(b)),
    OP.le: lambda a, b: int(_signed(a) <= _signed(b)),
    OP.lt: lambda a, b: int(_signed(a) < _signed(b)),
    OP.ne: lambda a, b: int(_signed(a) != _signed(b)),
}

# DW_OP_const1u .. const8s: (size, signed)
_CONSTS: dict[int, tuple[int, bool]] = {
    OP.const1u: (1, False), OP.const1s: (1, True), OP.const2u: (2, False),
    OP.const2s: (2, True), OP.const4u: (4, False), OP.const4s: (4, True),
    OP.const8u: (8, False), OP.const8s: (8, True)}


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
            if OP.lit0 <= op <= OP.lit31:
                stack.append(Value(None, op - OP.lit0))
            elif OP.breg0 <= op <= OP.breg31 or op == OP.bregx:
                if op == OP.bregx:
                    reg, pos = read_uleb(expr, pos)
                else:
                    reg = op - OP.breg0
                offset, pos = read_sleb(expr, pos)
                stack.append(Value(None, pc + offset) if reg == pc_reg else Value(reg, offset))
            elif op in _CONSTS:
                size, signed = _CONSTS[op]
                if pos + size > len(expr):
                    raise NotReducible("truncated constant")
                number = int.from_bytes(expr[pos : pos + size], order, signed=signed)
                stack.append(Value(None, number))
                pos += size
            elif op in (OP.constu, OP.consts):
                number, pos = (read_uleb if op == OP.constu else read_sleb)(expr, pos)
                stack.append(Value(None, number))
            elif op == OP.plus_uconst:
                number, pos = read_uleb(expr, pos)
                top = _pop(stack)
                stack.append(Value(top.reg, top.offset + number))
            elif op == OP.plus:
                b, a = _pop(stack), _pop(stack)
                if a.reg is not None and b.reg is not None:
                    raise NotReducible("sum of two registers")
                stack.append(Value(a.reg if a.reg is not None else b.reg, a.offset + b.offset))
            elif op == OP.minus:
                b = Value(None, _const(stack))
                a = _pop(stack)
                stack.append(Value(a.reg, a.offset - b.offset))
            elif op in _BINARY:
                b_num, a_num = _const(stack), _const(stack)
                stack.append(Value(None, _signed(_BINARY[op](a_num, b_num))))
            elif op == OP.neg:
                stack.append(Value(None, -_const(stack)))
            elif op == OP.not_:
                stack.append(Value(None, _signed(~_const(stack))))
            elif op == OP.dup:
                stack.append(_top(stack, 0))
            elif op == OP.drop:
                _pop(stack)
            elif op == OP.over:
                stack.append(_top(stack, 1))
            elif op == OP.pick:
                if pos >= len(expr):
                    raise NotReducible("truncated pick")
                stack.append(_top(stack, expr[pos]))
                pos += 1
            elif op == OP.swap:
                b, a = _pop(stack), _pop(stack)
                stack.extend((b, a))
            elif op in (OP.skip, OP.bra):
                if pos + 2 > len(expr):
                    raise NotReducible("truncated branch")
                jump = int.from_bytes(expr[pos : pos + 2], order, signed=True)
                pos += 2
                if op == OP.skip or _const(stack) != 0:
                    pos += jump
                    if not 0 <= pos <= len(expr):
                        raise NotReducible("branch outside the expression")
            elif op == OP.nop:
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
