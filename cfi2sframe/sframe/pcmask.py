"""Functions whose CFA depends on the PC: linker PLTs, lowered as the spec intends.

The PLT's DWARF CFI says "CFA = SP + 8, or SP + 16 from byte 11 of each
16-byte entry on" as one expression.  We evaluate it once per residue of its
period (``dwarf.expr.pc_period``; at every PC where none is shown), which gives
ordinary rows, made per change rather than per byte, then look for the repeating
pattern: a PC-increment FDE for the head (PLT0) and one PC-mask FDE whose
FREs repeat every ``rep_size`` bytes (the entries), as GNU ld writes.  The
pattern is checked at every byte, so the result is exact; without one, the
rows stay one PC-increment FDE.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence

from ..arch.base import Arch
from ..dwarf.expr import NotReducible, Value, evaluate, pc_period
from ..memo import Memo
from ..model import CfaExpr, CfaReg, Row, Timeline
from ..typed import NamedTuple
from .format import Fre, SFrameFunction
from .lower import Skip, lower
from .rules import RuleFre, expr_loc

# Largest code range whose CFA expression is described (a PLT of 65,536 entries), and
# the largest evaluated byte by byte where the expression is not shown periodic in the
# PC (``pc_period``: a PLT's is, and is evaluated once per residue); a longer one is
# left out as ``cfa-expression``.  The largest PLT installed here is 29 KB.
MAX_EVALUATED = 1 << 20
MAX_EACH_BYTE = 1 << 16
# Repetition sizes tried for PC-mask FDEs (``sfde_func_rep_size`` is 8 bits); the
# PLT entries of x86-64 are 16 bytes, of s390x 32.
REP_SIZES = (8, 16, 32, 64, 128)
# PLT0 is at most this many repetition blocks long.
MAX_HEAD_BLOCKS = 4


def resolve_pc_expressions(timeline: Timeline, arch: Arch) -> Timeline | str:
    """``timeline`` with every CFA expression replaced by register + offset rows, one
    per run of PCs with the same result; or why that cannot be done.

    Only linked code has known PCs: in an object the expression may read the
    PC only through ``+``, which cancels out nowhere, so it is not evaluated.
    """
    if not any(_evaluated(row) for row in timeline.rows):
        return timeline
    key = (timeline.rows, timeline.start, timeline.size, timeline.section, arch.pc,
           arch.big_endian)
    rows = _RESOLVED.get(key)
    if rows is None:
        rows = _RESOLVED.keep(key, _resolved_rows(timeline, arch))
    return rows if isinstance(rows, str) else timeline._replace(rows=rows)


def _resolved_rows(timeline: Timeline, arch: Arch) -> tuple[Row, ...] | str:
    """``resolve_pc_expressions``' rows, or why there are none."""
    pc_reg = arch.pc if not timeline.section else None
    rows: list[Row] = []
    evaluated = 0
    for index, row in enumerate(timeline.rows):
        end = timeline.rows[index + 1].start if index + 1 < len(timeline.rows) \
            else timeline.size
        cfa = row.cfa
        if not isinstance(cfa, CfaExpr) or not _evaluated(row):
            _append(rows, row)
            continue
        little = not arch.big_endian
        period = _period(cfa.expr, pc_reg, little) if pc_reg is not None else None
        evaluated += max(0, end - row.start)
        limit = MAX_EVALUATED if period is not None else MAX_EACH_BYTE
        if evaluated > limit:
            return f"the CFA expression covers more than {limit} bytes"
        if period is not None and pc_reg is not None:
            why = _periodic_rows(rows, row, end, timeline.start, cfa.expr, pc_reg, little,
                                 period)
            if why is not None:
                return _why_not(cfa.expr, pc_reg, arch, why) \
                    if isinstance(why, NotReducible) else why
            continue
        last = None
        for offset in range(row.start, end):
            try:
                value = evaluate(cfa.expr, timeline.start + offset, pc_reg, little)
            except NotReducible as exc:
                return _why_not(cfa.expr, pc_reg, arch, exc)
            if value.reg is None:
                return "the CFA expression gives a constant address"
            if value != last:
                _append(rows, row._replace(start=offset, cfa=CfaReg(value.reg, value.offset)))
                last = value
    return tuple(rows)


def _periodic_rows(rows: list[Row], row: Row, end: int, base: int, expr: bytes,
                   pc_reg: int, little: bool, period: int) -> NotReducible | str | None:
    """Append ``row``'s rows over ``[row.start, end)`` for an expression of ``period``:
    each residue is evaluated once, in the order the PCs meet them (so the first
    failure is the one a byte-by-byte walk meets), then rows are made only where the
    value changes, a block at a time: work per residue and per row, not per byte.
    Returns the failure (an exception, or the words of a constant address), else None."""
    values: list[Value] = []
    for offset in range(row.start, min(end, row.start + period)):
        try:
            value = _value_at(expr, base + offset, pc_reg, little, period)
        except NotReducible as exc:
            return exc
        if value.reg is None:
            return "the CFA expression gives a constant address"
        values.append(value)
    if not values:
        return None
    # Offsets in a block (from row.start) where the value differs from the byte before;
    # 0 as well from the second block on when the block ends unlike it starts.
    inner = [i for i in range(1, len(values)) if values[i] != values[i - 1]]
    wraps = values[0] != values[-1]
    with_zero = [0, *inner]
    for block in range(row.start, end, period):
        changes = with_zero if block == row.start or wraps else inner
        for i in changes:
            if block + i >= end:
                break
            value = values[i]
            assert value.reg is not None  # a constant address returned above
            _append(rows, row._replace(start=block + i, cfa=CfaReg(value.reg, value.offset)))
    return None


# What the expressions of a process's files give (a tree run's worker sees the same
# PLT expression in every file): ``pc_period``'s answer by (bytes, PC register, byte
# order), and each value (or why there is none) by those and the PC modulo that
# period, which is all a periodic expression's value depends on.  An expression
# without a period is evaluated at every PC, not kept.  Bounded: emptied when full.
MEMO_ENTRIES = 1 << 12
_PERIODS: Memo[tuple[bytes, int, bool], int | None] = Memo(MEMO_ENTRIES)
_VALUES: Memo[tuple[bytes, int, bool, int, int], Value | str] = Memo(MEMO_ENTRIES)
# A function's evaluated rows (or why there are none) by all they depend on: its rows,
# place and size, and the target's PC register and byte order.  ``--in-place`` lowers
# a file's PLT, then checks the written file's PLT: the same bytes give the same rows,
# evaluated once.  A changed byte of the FDE or its place is another key.  Few kept:
# a PLT's rows are two per entry.
RESOLVED_ENTRIES = 16
_RESOLVED: Memo[tuple[tuple[Row, ...], int, int, str, int | None, bool],
                tuple[Row, ...] | str] = Memo(RESOLVED_ENTRIES)


def _period(expr: bytes, pc_reg: int, little: bool) -> int | None:
    """``pc_period``, remembered."""
    key = (expr, pc_reg, little)
    try:
        return _PERIODS[key]
    except KeyError:  # a miss: once per distinct expression
        return _PERIODS.keep(key, pc_period(expr, pc_reg, little))


def _value_at(expr: bytes, pc: int, pc_reg: int, little: bool, period: int) -> Value:
    """``evaluate(expr, pc, pc_reg, little)`` remembered by residue of ``period``
    (``pc_period``'s: the value is that at any PC of the same residue), a failure's
    words too (raised again)."""
    key = (expr, pc_reg, little, period, pc % period)
    known = _VALUES.get(key, None)
    if known is None:
        known = _VALUES.keep(key, _value_or_words(expr, pc, pc_reg, little))
    if isinstance(known, str):
        raise NotReducible(known)
    return known


def _value_or_words(expr: bytes, pc: int, pc_reg: int, little: bool) -> Value | str:
    """``evaluate``'s value, or the words of its failure, which are kept as a value is."""
    try:
        return evaluate(expr, pc, pc_reg, little)
    except NotReducible as exc:
        return str(exc)


def _evaluated(row: Row) -> bool:
    """Whether the row's CFA is an expression to evaluate: not a plain ``breg``
    location (with or without ``deref``), which SFrame V3 states as it is."""
    return isinstance(row.cfa, CfaExpr) and expr_loc(row.cfa.expr, False) is None


def _why_not(expr: bytes, pc_reg: int | None, arch: Arch, exc: NotReducible) -> str:
    """Why an expression was not evaluated: it reads the PC of unlinked code, or ``exc``."""
    if pc_reg is None and arch.pc is not None:
        try:
            evaluate(expr, 0, arch.pc, not arch.big_endian)
            return "the CFA expression reads the PC, which is not known before linking"
        except NotReducible:
            pass
    return f"the CFA expression cannot be evaluated: {exc}"


def _append(rows: list[Row], row: Row) -> None:
    if not rows or not rows[-1].same_rules(row):
        rows.append(row)


FreLike = Fre | RuleFre


def split_repeating(func: SFrameFunction,
                    reps: Sequence[int] = REP_SIZES) -> list[SFrameFunction]:
    """``func`` as a PC-increment head and a PC-mask body, when that takes fewer FREs.

    The body starts at a multiple of its repetition size, so readers that take
    ``PC % rep_size`` (libsframe) and readers that take the offset from the
    FDE start agree; it covers at least two repetitions.  ``reps``: the repetition
    sizes to try (V1 has one per ABI, and none on most).
    """
    fres = func.fres
    steps = _steps(fres)
    best: tuple[int, int, int, list[FreLike], list[FreLike]] | None = None
    for rep in reps:
        for blocks in range(MAX_HEAD_BLOCKS + 1):
            head = (-func.start) % rep + blocks * rep
            if func.size - head < 2 * rep:
                break
            body = _repeating_body(fres, steps, head, rep, func.size)
            if body is None:
                continue
            head_fres = list(fres[:bisect_left(steps.starts, head)])
            cost = len(head_fres) + len(body)
            if best is None or cost < best[0]:
                best = (cost, head, rep, head_fres, body)
            break  # a longer head costs more FREs for the same body
    if best is None or best[0] >= len(fres):
        return [func]
    _, head, rep, head_fres, body = best
    out = []
    if head:
        out.append(func._replace(size=head, fres=tuple(head_fres)))
    out.append(func._replace(name=f"{func.name}+{head:#x}", start=func.start + head,
                             size=func.size - head, fres=tuple(body), pc_mask=True,
                             rep_size=rep, anchor=None))
    return out


class _Steps(NamedTuple):
    """A function's FREs as columns, made once for every repetition size and head
    tried: each FRE's start, and the step function they describe with no entry
    that repeats the rules before it (``changes``, and ``rules`` as small numbers:
    equal numbers for equal rules).  The FREs are in the order of their starts,
    as an SFrame FDE's are."""

    starts: list[int]
    changes: list[int]
    rules: list[int]


def _steps(fres: Sequence[FreLike]) -> _Steps:
    numbers: dict[object, int] = {}
    each = [numbers.setdefault(fre[1:], len(numbers)) for fre in fres]
    starts = [fre.start for fre in fres]
    kept = [i for i in range(len(each)) if i == 0 or each[i] != each[i - 1]]
    return _Steps(starts, [starts[i] for i in kept], [each[i] for i in kept])


def _repeating_body(fres: Sequence[FreLike], steps: _Steps, head: int, rep: int,
                    size: int) -> list[FreLike] | None:
    """The FREs of one block if every block of ``rep`` bytes from ``head`` on has the
    same rules at the same offsets (the last block may be cut short); else None."""
    first = bisect_right(steps.starts, head)  # the first FRE after the head
    if first == 0:
        return None  # no FRE is in force at the head
    if not _repeats(steps, head, rep, size):
        return None
    in_block = range(first, bisect_left(steps.starts, head + rep, first))
    return [fres[first - 1]._replace(start=0),
            *(fres[i]._replace(start=fres[i].start - head) for i in in_block)]


def _repeats(steps: _Steps, head: int, rep: int, size: int) -> bool:
    """Whether the step function from ``head`` to ``size`` is its first ``rep`` bytes
    repeated.  Its changes from there on are compared with themselves one period
    later (whole lists, so a wrong size stops at its first difference and a right
    one costs one pass over the changes, not a walk of every block)."""
    after = bisect_right(steps.changes, head)  # the first change after the head
    block_end = bisect_left(steps.changes, head + rep, after)
    if steps.rules[block_end - 1] != steps.rules[after - 1]:
        # The block ends unlike it starts: each block starts with a change, the
        # one at the head too.
        starts = [head, *steps.changes[after:]]
        rules = steps.rules[after - 1:]
        period = block_end - after + 1
    else:
        starts = steps.changes[after:]
        rules = steps.rules[after:]
        period = block_end - after
        if period == 0:
            return not starts  # one rule from the head on
    count = len(starts)
    return (starts[-1] < size
            and rules[period:] == rules[:count - period]
            and starts[period:] == [start + rep for start in starts[:count - period]]
            and starts[count - period] + rep >= size)  # no block is left out at the end


def lower_pc_dependent(timeline: Timeline, arch: Arch, skip: Skip,
                       version: int = 2, flex: bool = True) -> list[SFrameFunction] | Skip:
    """The functions for a timeline ``lower`` left out as ``cfa-expression``: its
    expressions evaluated per PC, then split into head and repeating body."""
    resolved = resolve_pc_expressions(timeline, arch)
    if resolved is timeline:
        return skip  # nothing to evaluate: the expression is a location
    if isinstance(resolved, str):
        return skip._replace(detail=resolved)
    result = lower(resolved, arch, None, version, flex)
    if isinstance(result, Skip):
        return result
    if version == 1:  # V1 has no repetition size field: its ABI's one, if any
        rep = arch.sframe_v1_pcmask_rep
        return split_repeating(result, (rep,) if rep else ())
    return split_repeating(result)
