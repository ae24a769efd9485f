"""The CFI interpreter: the single place where DWARF call-frame semantics live.

It replays DWARF operations placed at code offsets and returns the rows of a
``Timeline``.  Remember/restore is a real stack, ``restore`` goes back to the
CIE's initial rule, and rows that recover everything the same way are merged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from .dwarf import Op
from .errors import CfiError
from .model import SAME_VALUE, UNDEFINED, CfaExpr, CfaReg, CfaRule, Row, Rule


@dataclass
class _State:
    cfa: CfaRule | None = None
    regs: dict[int, Rule] = field(default_factory=dict)
    ra_signed: bool = False

    def copy(self) -> _State:
        return _State(self.cfa, dict(self.regs), self.ra_signed)

    def row(self, start: int) -> Row:
        return Row(start, self.cfa, tuple(sorted(self.regs.items())), self.ra_signed)


@dataclass
class _Machine:
    state: _State
    initial: _State
    stack: list[_State] = field(default_factory=list)


def _def_cfa(m: _Machine, op: Op) -> None:
    m.state.cfa = CfaReg(op.reg, op.offset)


def _def_cfa_register(m: _Machine, op: Op) -> None:
    cfa = m.state.cfa
    if not isinstance(cfa, CfaReg):
        raise CfiError("DW_CFA_def_cfa_register without a register-based CFA rule", op.line)
    m.state.cfa = CfaReg(op.reg, cfa.offset)


def _def_cfa_offset(m: _Machine, op: Op) -> None:
    cfa = m.state.cfa
    if not isinstance(cfa, CfaReg):
        raise CfiError("DW_CFA_def_cfa_offset without a register-based CFA rule", op.line)
    m.state.cfa = CfaReg(cfa.reg, op.offset)


def _def_cfa_expression(m: _Machine, op: Op) -> None:
    m.state.cfa = CfaExpr(op.expr)


def _set_rule(rule_of: Callable[[Op], Rule]) -> Callable[[_Machine, Op], None]:
    def handler(m: _Machine, op: Op) -> None:
        m.state.regs[op.reg] = rule_of(op)

    return handler


def _restore(m: _Machine, op: Op) -> None:
    rule = m.initial.regs.get(op.reg)
    if rule is None:
        m.state.regs.pop(op.reg, None)
    else:
        m.state.regs[op.reg] = rule


def _remember(m: _Machine, op: Op) -> None:
    m.stack.append(m.state.copy())


def _restore_state(m: _Machine, op: Op) -> None:
    if not m.stack:
        raise CfiError(".cfi_restore_state without a matching .cfi_remember_state", op.line)
    saved = m.stack.pop()
    # DWARF restores register rules and the CFA; the AArch64 RA-signing state
    # is not part of the remembered rules in GCC's unwinder either.
    m.state = _State(saved.cfa, saved.regs, saved.ra_signed)


def _toggle_ra_signed(m: _Machine, op: Op) -> None:
    m.state.ra_signed = not m.state.ra_signed


def _ignore(m: _Machine, op: Op) -> None:
    """Operations with no effect on recovery rules (nop, args_size)."""


HANDLERS: dict[str, Callable[[_Machine, Op], None]] = {
    "def_cfa": _def_cfa,
    "def_cfa_register": _def_cfa_register,
    "def_cfa_offset": _def_cfa_offset,
    "def_cfa_expression": _def_cfa_expression,
    "offset": _set_rule(lambda op: Rule("offset", op.offset)),
    "val_offset": _set_rule(lambda op: Rule("val_offset", op.offset)),
    "register": _set_rule(lambda op: Rule("register", op.offset)),
    "expression": _set_rule(lambda op: Rule("expression", expr=op.expr)),
    "val_expression": _set_rule(lambda op: Rule("val_expression", expr=op.expr)),
    "undefined": _set_rule(lambda op: UNDEFINED),
    "same_value": _set_rule(lambda op: SAME_VALUE),
    "restore": _restore,
    "remember_state": _remember,
    "restore_state": _restore_state,
    "window_save": _toggle_ra_signed,
    "nop": _ignore,
    "args_size": _ignore,
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
    handler = HANDLERS.get(op.name)
    if handler is None:
        raise CfiError(f"CFI operation '{op.name}' has no defined unwinding rule", op.line)
    handler(machine, op)


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
    for pc, op in placed:
        if pc < at:
            raise CfiError("CFI operations are not in address order", op.line)
        if pc > at:
            _push(rows, machine.state.row(at))
            at = pc
        _apply(machine, op)
    _push(rows, machine.state.row(at))
    return tuple(_merge(row for row in rows if row.start < size))


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
