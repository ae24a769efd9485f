"""The CFI interpreter: the general home of DWARF call-frame semantics.

The ELF fast path replays the common subset on its own (``sframe/fastpath._run``, and
``csrc/dwarf_replay.c`` in the compiled core), held equal to this interpreter by
``tests/differential/test_fastpath.py`` and ``tests/differential/test_core.py``.

It replays DWARF operations placed at code offsets and returns the rows of a
``Timeline``.  Remember/restore is a real stack, ``restore`` goes back to the
CIE's initial rule, and rows that recover everything the same way are merged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache

from ..errors import CfiError
from ..model import SAME_VALUE, UNDEFINED, CfaExpr, CfaReg, CfaRule, Row, Rule, RuleKind
from ..typed import TYPE_CHECKING
from . import ops
from .ops import Op

if TYPE_CHECKING:
    from typing import Any


class _State:
    """The rules being built.  ``cfa_reg``/``cfa_offset`` are the register and offset
    fields of the CFA rule, kept apart from it as GCC's unwinder (unwind-dw2.c), gdb
    and readelf keep them: a CFA expression leaves them as they were, a
    ``def_cfa_offset`` after one sets the offset and keeps the expression, a
    ``def_cfa_register`` after one makes the rule register + that offset again."""

    __slots__ = ("cfa", "regs", "ra_signed", "cfa_reg", "ra_signed_pc", "cfa_offset")

    def __init__(self, cfa: CfaRule | None = None, regs: dict[int, Rule] | None = None,
                 ra_signed: bool = False, cfa_reg: int | None = None,
                 ra_signed_pc: bool = False, cfa_offset: int | None = None) -> None:
        self.cfa = cfa
        self.regs: dict[int, Rule] = {} if regs is None else regs
        self.ra_signed = ra_signed
        self.cfa_reg = cfa_reg
        self.ra_signed_pc = ra_signed_pc
        self.cfa_offset = cfa_offset

    def copy(self) -> _State:
        return _State(self.cfa, dict(self.regs), self.ra_signed, self.cfa_reg,
                      self.ra_signed_pc, self.cfa_offset)


class _Machine:
    """The rules now, those at the CIE's end (``restore``), and the remembered ones."""

    __slots__ = ("state", "initial", "stack")

    def __init__(self, state: _State, initial: _State) -> None:
        self.state = state
        self.initial = initial
        self.stack: list[_State] = []


def _set_cfa(m: _Machine, reg: int, offset: int) -> None:
    m.state.cfa = CfaReg(reg, offset)
    m.state.cfa_reg, m.state.cfa_offset = reg, offset


def _def_cfa(m: _Machine, op: ops.DefCfa) -> None:
    _set_cfa(m, op.register, op.offset)


def _def_cfa_register(m: _Machine, op: ops.DefCfaRegister) -> None:
    if m.state.cfa_offset is None:
        raise CfiError("DW_CFA_def_cfa_register without a register-based CFA rule", op.line)
    _set_cfa(m, op.register, m.state.cfa_offset)


def _def_cfa_offset(m: _Machine, op: ops.DefCfaOffset) -> None:
    if isinstance(m.state.cfa, CfaExpr):
        m.state.cfa_offset = op.offset  # the expression stays the rule (see ``_State``)
        return
    if m.state.cfa_reg is None:
        raise CfiError("DW_CFA_def_cfa_offset without a register-based CFA rule", op.line)
    _set_cfa(m, m.state.cfa_reg, op.offset)


def _def_cfa_expression(m: _Machine, op: ops.DefCfaExpression) -> None:
    m.state.cfa = CfaExpr(op.expression)


def _offset(m: _Machine, op: ops.Offset) -> None:
    m.state.regs[op.register] = Rule(RuleKind.offset, op.offset)


def _val_offset(m: _Machine, op: ops.ValOffset) -> None:
    m.state.regs[op.register] = Rule(RuleKind.val_offset, op.offset)


def _register(m: _Machine, op: ops.Register) -> None:
    m.state.regs[op.register] = Rule(RuleKind.register, op.source)


def _expression(m: _Machine, op: ops.Expression) -> None:
    m.state.regs[op.register] = Rule(RuleKind.expression, expr=op.expression)


def _val_expression(m: _Machine, op: ops.ValExpression) -> None:
    m.state.regs[op.register] = Rule(RuleKind.val_expression, expr=op.expression)


def _undefined(m: _Machine, op: ops.Undefined) -> None:
    m.state.regs[op.register] = UNDEFINED


def _same_value(m: _Machine, op: ops.SameValue) -> None:
    m.state.regs[op.register] = SAME_VALUE


def _restore(m: _Machine, op: ops.Restore) -> None:
    rule = m.initial.regs.get(op.register)
    if rule is None:
        m.state.regs.pop(op.register, None)
    else:
        m.state.regs[op.register] = rule


def _remember(m: _Machine, op: ops.RememberState) -> None:
    m.stack.append(m.state.copy())


def _restore_state(m: _Machine, op: ops.RestoreState) -> None:
    if not m.stack:
        raise CfiError(".cfi_restore_state without a matching .cfi_remember_state", op.line)
    m.state = m.stack.pop()


def _toggle_ra_signed(m: _Machine, op: ops.NegateRaState) -> None:
    m.state.ra_signed = not m.state.ra_signed
    m.state.ra_signed_pc = m.state.ra_signed_pc and m.state.ra_signed


def _toggle_ra_signed_with_pc(m: _Machine, op: ops.NegateRaStateWithPc) -> None:
    """DW_CFA_AARCH64_negate_ra_state_with_pc: as negate_ra_state, and while the RA
    stays signed the PC is part of its signature (PAuth_LR)."""
    m.state.ra_signed = not m.state.ra_signed
    m.state.ra_signed_pc = m.state.ra_signed


def _ignore(m: _Machine, op: ops.Nop | ops.ArgsSize) -> None:
    """Operations with no effect on recovery rules (nop, args_size)."""


# Operation type -> its semantics.  Each handler is typed for its operation; the table
# is keyed by the exact type, so the values can only be called with matching ops.
HANDLERS: dict[type[Op], Callable[[_Machine, Any], None]] = {
    ops.DefCfa: _def_cfa,
    ops.DefCfaRegister: _def_cfa_register,
    ops.DefCfaOffset: _def_cfa_offset,
    ops.DefCfaExpression: _def_cfa_expression,
    ops.Offset: _offset,
    ops.ValOffset: _val_offset,
    ops.Register: _register,
    ops.Expression: _expression,
    ops.ValExpression: _val_expression,
    ops.Undefined: _undefined,
    ops.SameValue: _same_value,
    ops.Restore: _restore,
    ops.RememberState: _remember,
    ops.RestoreState: _restore_state,
    ops.NegateRaState: _toggle_ra_signed,
    ops.NegateRaStateWithPc: _toggle_ra_signed_with_pc,
    ops.Nop: _ignore,
    ops.ArgsSize: _ignore,
}


@lru_cache(maxsize=64)
def _initial_state(cie_ops: tuple[Op, ...]) -> _State:
    machine = _Machine(_State(), _State())
    for op in cie_ops:
        _apply(machine, op)
    return machine.state


def initial_state(cie_ops: Iterable[Op]) -> _State:
    """Run the CIE's initial instructions on an empty state (a fresh copy each call)."""
    return _initial_state(tuple(cie_ops)).copy()


def _apply(machine: _Machine, op: Op) -> None:
    handler = HANDLERS.get(type(op))
    if handler is None:
        raise CfiError(f"CFI operation '{_name(op)}' has no defined unwinding rule", op.line)
    handler(machine, op)


def _name(op: Op) -> str:
    """An operation's type as DWARF calls it: ``DefCfaOffset`` -> ``def_cfa_offset``."""
    return "".join("_" + c.lower() if c.isupper() else c for c in type(op).__name__)[1:]


def interpret(
    cie_ops: Sequence[Op], placed: Iterable[tuple[int, Op]], size: int
) -> tuple[Row, ...]:
    """Rows for a function of ``size`` bytes.

    ``placed`` holds (offset from function start, operation) in program order;
    offsets must not decrease.  Rows that start at or past ``size`` cover no
    code and are dropped; consecutive rows with the same rules are merged.
    """
    init = initial_state(cie_ops)
    machine = _Machine(init.copy(), init)
    rows: list[Row] = []
    at = 0
    regs: tuple[tuple[int, Rule], ...] = ()
    stale = True  # the sorted register rules must be rebuilt for the next row
    handlers = HANDLERS
    for pc, op in placed:
        if pc < at:
            raise CfiError("CFI operations are not in address order", op.line)
        if pc > at:
            state = machine.state
            if stale:
                regs, stale = tuple(sorted(state.regs.items())), False
            _push(rows, Row(at, state.cfa, regs, state.ra_signed, state.ra_signed_pc))
            at = pc
        kind = type(op)
        handler = handlers.get(kind)
        if handler is None:
            raise CfiError(f"CFI operation '{_name(op)}' has no defined unwinding rule", op.line)
        handler(machine, op)
        stale = stale or kind not in _CFA_ONLY
    state = machine.state
    _push(rows, Row(at, state.cfa, tuple(sorted(state.regs.items())), state.ra_signed,
                    state.ra_signed_pc))
    return tuple(_merge(row for row in rows if row.start < size))


# Operations that change no register rule (the sorted rules can be reused).
_CFA_ONLY: frozenset[type[Op]] = frozenset({
    ops.DefCfa, ops.DefCfaRegister, ops.DefCfaOffset, ops.DefCfaExpression,
    ops.NegateRaState, ops.NegateRaStateWithPc, ops.Nop, ops.ArgsSize, ops.RememberState})


def _push(rows: list[Row], row: Row) -> None:
    if rows and rows[-1].start == row.start:
        rows[-1] = row
    else:
        rows.append(row)


def _merge(rows: Iterable[Row]) -> list[Row]:
    merged: list[Row] = []
    for row in rows:
        if merged and merged[-1].same_rules(row):
            continue
        merged.append(row)
    return merged
