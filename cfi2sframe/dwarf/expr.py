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

from ..errors import DecodeError
from ..typed import TYPE_CHECKING, NamedTuple
from .leb128 import read_sleb, read_uleb
from .opcodes import OP

if TYPE_CHECKING:
    from ..arch.base import ByteOrder

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
    # The shift count is unsigned: a negative one is a huge count (was a ValueError).
    OP.shl: lambda a, b: a << (b & MASK64) if b & MASK64 < 64 else 0,
    OP.shr: lambda a, b: (a & MASK64) >> (b & MASK64) if b & MASK64 < 64 else 0,
    OP.shra: lambda a, b: _signed(a) >> min(b & MASK64, 63),
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


# How a value depends on the PC, for ``pc_period``: a period m >= 1 (a function of
# PC mod m; 1: not of the PC at all), AFFINE (PC plus a constant) or ANY.
AFFINE, ANY = 0, -1
MAX_PERIOD = 1 << 16


def _combine(a: int, b: int) -> int:
    """The dependence of a pure function of two values of dependences ``a`` and ``b``
    (AFFINE counts as ANY: only a mask reduces it)."""
    if a <= 0 or b <= 0:
        return ANY
    period = a * b // _gcd(a, b)
    return period if period <= MAX_PERIOD else ANY


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a


def pc_period(expr: bytes, pc_reg: int | None, little: bool = True) -> int | None:
    """A period P with ``evaluate(expr, pc) == evaluate(expr, pc + P)`` for every pc,
    shown by following how each value depends on the PC; None where that is not shown.

    The PC may be read, a constant added to it, and the result masked by ``and`` with
    a constant (PLT expressions: ``(pc & 15) >= 11``): the masked value depends on the
    PC modulo the power of two above the mask, and any function of such values on
    their least common multiple.  A branch, a register or memory read mixed with the
    PC, or the PC reaching the result unmasked, shows nothing (None).  1: the value
    does not depend on the PC.  So a caller evaluates P PCs, not every byte.
    """
    # Each entry: (dependence, the constant's value when it is a known constant).
    stack: list[tuple[int, int | None]] = []
    pos = 0
    order: ByteOrder = "little" if little else "big"
    try:
        while pos < len(expr):
            op = expr[pos]
            pos += 1
            if OP.lit0 <= op <= OP.lit31:
                stack.append((1, op - OP.lit0))
            elif OP.breg0 <= op <= OP.breg31 or op == OP.bregx:
                reg = op - OP.breg0
                if op == OP.bregx:
                    reg, pos = read_uleb(expr, pos)
                _, pos = read_sleb(expr, pos)
                stack.append((AFFINE, None) if reg == pc_reg else (1, None))
            elif op in _CONSTS:
                size, signed = _CONSTS[op]
                if pos + size > len(expr):
                    return None
                stack.append((1, int.from_bytes(expr[pos:pos + size], order, signed=signed)))
                pos += size
            elif op in (OP.constu, OP.consts):
                number, pos = (read_uleb if op == OP.constu else read_sleb)(expr, pos)
                stack.append((1, number))
            elif op == OP.plus_uconst:
                number, pos = read_uleb(expr, pos)
                dep, value = stack.pop()
                stack.append((dep, value + number if value is not None else None))
            elif op in (OP.plus, OP.minus):
                (b, bv), (a, av) = stack.pop(), stack.pop()
                if (a == AFFINE and b == 1) or (b == AFFINE and a == 1 and op == OP.plus):
                    stack.append((AFFINE, None))
                else:
                    both = av is not None and bv is not None
                    stack.append((_combine(a, b), (av + bv if op == OP.plus else av - bv)
                                  if both and av is not None and bv is not None else None))
            elif op == OP.and_ and len(stack) >= 2 and AFFINE in (stack[-1][0], stack[-2][0]):
                (b, bv), (a, av) = stack.pop(), stack.pop()
                mask = bv if a == AFFINE else av
                if (b if a == AFFINE else a) != 1 or mask is None or mask < 0:
                    return None
                period = 1 << mask.bit_length()
                stack.append((period if period <= MAX_PERIOD else ANY, None))
            elif op in _BINARY:
                (b, bv), (a, av) = stack.pop(), stack.pop()
                value = _signed(_BINARY[op](av, bv)) if av is not None and bv is not None \
                    else None
                stack.append((_combine(a, b), value))
            elif op in (OP.neg, OP.not_):
                dep, value = stack.pop()
                stack.append((_combine(dep, 1), None if value is None else
                              (-value if op == OP.neg else _signed(~value))))
            elif op == OP.dup:
                stack.append(stack[-1])
            elif op == OP.drop:
                stack.pop()
            elif op == OP.over:
                stack.append(stack[-2])
            elif op == OP.pick:
                if pos >= len(expr) or expr[pos] >= len(stack):
                    return None
                stack.append(stack[-1 - expr[pos]])
                pos += 1
            elif op == OP.swap:
                stack[-1], stack[-2] = stack[-2], stack[-1]
            elif op == OP.nop:
                pass
            else:  # branches, memory, anything else: not shown
                return None
    except (IndexError, DecodeError):
        return None
    if not stack or stack[-1][0] < 1:
        return None
    return stack[-1][0]
