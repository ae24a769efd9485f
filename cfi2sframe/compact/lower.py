"""Timeline -> compact unwind rows, each checked against the CFI at every PC it covers.

Which row (the default): the function's *body state*.  Walking the rows from
the start, the prologue only adds saves and builds the frame (the SP offset
grows; the CFA moves from SP to FP, or to another register or an expression as
a realigning prologue does); the body state is the last row of that walk, and
the first row that does anything else (an offset shrinking, the CFA back on SP,
a restore) starts the first epilogue.  For LLVM's Darwin output, which has no
epilogue CFI, that is the final state MC encodes; for GCC's output it is the
state after the prologue, before the epilogue (``leave`` moves the CFA back to
SP: that row is the epilogue's, never the body's).  A body whose CFA is not SP
or FP plus an offset (realigned stacks, expressions) is DWARF mode, with the
reason.

``ranges=True`` (asynchronous-precise): one row per CFI row that compact
unwind can express exactly (adjacent equal encodings merged), DWARF mode for
the others; rows after the first carry ``NOT_FUNCTION_START``.

Every row is checked by decoding it again (``encoding.decode``) and comparing
with the DWARF row at each PC it covers, so an encoding is never wrong: where
none is exact for the body state, the function gets DWARF mode and a reason.
"""

from __future__ import annotations

import sys
from array import array
from functools import lru_cache

from ..arch import by_compact, compact_flavour
from ..arch.base import Arch
from ..core import compiled
from ..model import CfaReg, CfaRule, Row, Rule, RuleKind, Timeline, span_of
from ..reasons import COMPACT_REASONS, CompactReason, Unrepresentable
from ..typed import NamedTuple
from .encoding import decode, encode
from .rules import Code, CompactRules
from .words import (
    ARM64_DWARF,
    HAS_LSDA,
    MODE_MASK,
    NOT_FUNCTION_START,
    X86_DWARF,
    X86_STACK_IND,
)

# reason code -> meaning
REASONS = COMPACT_REASONS  # the table lives in reasons.py


class CompactRow(NamedTuple):
    """One (start, length, encoding) row; ``start`` is the offset in the function."""

    start: int
    length: int
    encoding: int


class CompactFunction(NamedTuple):
    """A function's rows, or DWARF mode with a reason; ``exact_bytes``: bytes at
    which the rows' rules equal the CFI's."""

    name: str
    section: str
    start: int
    size: int
    rows: tuple[CompactRow, ...]
    reason: CompactReason | None
    detail: str
    exact_bytes: int
    personality: str | None = None
    lsda: str | None = None
    # The body (after the prologue, before the first epilogue) as offsets, and the
    # offset ranges where the rows do not unwind as the CFI says.
    body: tuple[int, int] = (0, 0)
    inexact: tuple[tuple[int, int], ...] = ()

    @property
    def exact_in_body(self) -> bool:
        """The rows unwind as the CFI at every byte of the body (only a prologue or
        epilogue left, which asynchronous unwinding needs ``--ranges`` for)."""
        lo, hi = self.body
        return not any(a < hi and b > lo for a, b in self.inexact)


def row_rules(row: Row, arch: str) -> CompactRules | Unrepresentable[CompactReason]:
    """A DWARF row in compact terms, or (reason, detail) when it has none."""
    return _rules(row.cfa, row.regs, row.ra_signed, arch)


# libLLVM-14's compact --check: 50,061 calls, 931 distinct rule sets (the row's start
# is no part of its rules): each is put in compact terms once.
@lru_cache(maxsize=65536, typed=True)  # typed: a CfaReg is no plain tuple here
def _rules(cfa: CfaRule | None, regs: tuple[tuple[int, Rule], ...], ra_signed: bool,
           arch: str) -> CompactRules | Unrepresentable[CompactReason]:
    """``row_rules`` of a row with these rules."""
    if not isinstance(cfa, CfaReg):
        return Unrepresentable(CompactReason.no_cfa, "the CFA is not a register plus offset")
    if ra_signed:
        return Unrepresentable(CompactReason.ra_signed, "the return address is signed")
    target = by_compact(arch)
    sp, ra = target.sp, target.ra
    ra_offset = None
    saved = []
    for reg, rule in regs:
        if rule.kind == RuleKind.same_value:
            continue
        if reg == sp and rule.kind == RuleKind.val_offset and rule.value == 0:
            continue
        if rule.kind != RuleKind.offset:
            return Unrepresentable(
                CompactReason.rule_not_encodable,
                f"DWARF register {reg} is {rule.kind.replace('_', ' ')}")
        if reg == ra:
            ra_offset = rule.value
        else:
            saved.append((reg, rule.value))
    if ra_offset is None and arch != "arm64":
        return Unrepresentable(CompactReason.ra_not_at_cfa_8,
                               "the return address has no stack slot")
    return CompactRules(cfa.reg, cfa.offset, ra_offset, tuple(sorted(saved)))


def encode_row(row: Row, arch: str, code: Code | None,
               code_offset: int = 0) -> int | Unrepresentable[CompactReason]:
    """The exact encoding of one DWARF row, or (reason, detail)."""
    rules = row_rules(row, arch)
    if not isinstance(rules, CompactRules):
        return rules
    if arch == "arm64" or rules.cfa_offset < 256 * by_compact(arch).address_size:
        return _encoded(rules, arch)  # no x86 STACK_IND: the code is not read
    return _encode_checked(rules, arch, code, code_offset)


@lru_cache(maxsize=16384)
def _encoded(rules: CompactRules, arch: str) -> int | Unrepresentable[CompactReason]:
    """``encode_row`` of rules whose encoding reads no code, once per distinct rules."""
    return _encode_checked(rules, arch, None, 0)


def _encode_checked(rules: CompactRules, arch: str, code: Code | None,
                    code_offset: int) -> int | Unrepresentable[CompactReason]:
    """The encoding of ``rules``, decoded again and compared."""
    encoding = encode(rules, arch, code, code_offset)
    if isinstance(encoding, int):
        at = Code(code.data[code_offset:]) if code is not None else None
        if decode(encoding, arch, at) != rules:  # the encoders are exact by construction
            raise AssertionError(f"encoding {encoding:#010x} does not decode to {rules}")
    return encoding


def body_row(rows: tuple[Row, ...], arch: str) -> Row | None:
    """The last row of the prologue (see the module docstring); None without rows."""
    index = _body_index(rows, arch)
    return None if index is None else rows[index]


def _body_index(rows: tuple[Row, ...], arch: str) -> int | None:
    """The index of the last row of the prologue; None without rows."""
    if not rows:
        return None
    sp = by_compact(arch).sp
    index = 0
    while index + 1 < len(rows) and _grows(rows[index], rows[index + 1], sp):
        index += 1
    return index


def _body_range(rows: tuple[Row, ...], index: int | None, size: int) -> tuple[int, int]:
    """From the body row's start (row ``index``) to the first epilogue row's, or the
    end; (0, 0) without rows."""
    if index is None:
        return (0, 0)
    end = rows[index + 1].start if index + 1 < len(rows) else size
    return (min(rows[index].start, size), min(end, size))


def _grows(before: Row, after: Row, sp: int) -> bool:
    """``after`` still builds the frame ``before`` had: every save kept, and the CFA
    further from SP (a larger SP offset; moved from SP to FP, or to another register
    or an expression, as a realigning prologue does).  Anything else (an offset
    shrinking, the CFA back on SP or off an expression, a restore) starts an
    epilogue."""
    if after.regs != before.regs:  # (equal rules keep every save)
        saved = dict(after.regs)
        if any(saved.get(reg) != rule for reg, rule in before.regs
               if rule.kind == RuleKind.offset):
            return False
    was, now = before.cfa, after.cfa
    if not isinstance(now, CfaReg):
        return True  # into an expression: only a prologue goes there
    if not isinstance(was, CfaReg):
        return False  # out of one, onto a register: the epilogue of a realigned frame
    if now.reg == was.reg:
        return now.offset >= was.offset
    return was.reg == sp  # SP to FP (or a realigning prologue's register), not back


def lower_compact(timeline: Timeline, arch: str | Arch, code: Code | None = None,
                  ranges: bool = False) -> CompactFunction:
    """The compact rows of one function (``code``: its bytes, for STACK_IND).

    ``arch``: an ``Arch``, its name, or a compact flavour (``x86_64``, ``i386``,
    ``arm64``).  The single row (or DWARF mode) is ``rows[0].encoding``; ``reason``
    and ``detail`` say why a function is DWARF mode.
    """
    arch = compact_flavour(arch)
    dwarf = ARM64_DWARF if arch == "arm64" else X86_DWARF
    body_index = _body_index(timeline.rows, arch)

    def result(rows: list[CompactRow], reason: CompactReason | None,
               detail: str) -> CompactFunction:
        if timeline.lsda is not None:
            rows = [r._replace(encoding=r.encoding | HAS_LSDA)
                    if r.encoding & 0x0F000000 != dwarf else r for r in rows]
        spans = inexact_spans(timeline, rows, arch, code)
        return CompactFunction(*span_of(timeline), tuple(rows), reason, detail,
                               timeline.size - sum(hi - lo for lo, hi in spans),
                               timeline.personality, timeline.lsda,
                               _body_range(timeline.rows, body_index, timeline.size), spans)

    if timeline.invalid is not None:
        return result([CompactRow(0, timeline.size, dwarf)], CompactReason.invalid_cfi,
                      timeline.invalid)
    if timeline.size == 0:
        return result([], CompactReason.empty_function, "the function has no bytes")
    if ranges:
        return result(_range_rows(timeline, arch, code, dwarf), None, "")
    if body_index is None:
        return result([CompactRow(0, timeline.size, dwarf)], CompactReason.no_cfa, "no CFA rule")
    encoding = encode_row(timeline.rows[body_index], arch, code)
    if isinstance(encoding, Unrepresentable):
        return result([CompactRow(0, timeline.size, dwarf)], encoding.reason, encoding.detail)
    return result([CompactRow(0, timeline.size, encoding)], None, "")


class LowerMemo:
    """``lower_alike``'s answers, the caller's for one file.  ``shapes``: by the rows
    object (kept alive in the value, so its id stays its own), size, why invalid, LSDA
    or not, flavour and --ranges: the rows, whether an encoding can read the code
    (``_reads_code``), and the results by the code where one can (else under None).
    ``sequences``: by state sequence (``_sequence``), whether an encoding can read the
    code and, where none can, the single row's encoding, reason and exact rows.
    ``placed``: ``lowered_alike``'s, by the rows object (kept), size, why invalid and
    flavour."""

    __slots__ = ("shapes", "sequences", "placed")

    def __init__(self) -> None:
        self.shapes: dict[tuple[object, ...],
                          tuple[tuple[Row, ...], bool, dict[bytes | None, CompactFunction]]] = {}
        self.sequences: dict[tuple[bytes, str, bool],
                             tuple[tuple[Row, ...], bool, _Sequence | None]] = {}
        self.placed: dict[tuple[object, ...], tuple[tuple[Row, ...], FunctionTail | None]] = {}


def lower_alike(timeline: Timeline, arch: str, code: Code | None, ranges: bool,
                memo: LowerMemo) -> CompactFunction:
    """``lower_compact`` once per distinct function shape (``arch``: a compact flavour):
    a library's FDEs share their rows (``dwarf.cfi`` interprets each distinct body once),
    and what a function's rows lower to depends only on them, its size, whether it has
    an LSDA, and its code only where an x86 stack is too deep for STACK_IMMD
    (STACK_IND reads the ``sub`` immediate): 95k lowerings were most of ``compact``'s
    time on libLLVM-14.  A new shape's single row comes from its state sequence
    (``_sequence``): libLLVM-14's 39,944 shapes have 1,895."""
    rows = timeline.rows
    lsda = timeline.lsda is not None
    key = (id(rows), timeline.size, timeline.invalid, lsda, arch, ranges)
    shape = memo.shapes.get(key)
    sequence = None
    if shape is not None:
        _, reads, done = shape
    elif ranges or timeline.invalid is not None or not timeline.size or not rows:
        reads, done = _reads_code(rows, arch), {}
        shape = memo.shapes[key] = (rows, reads, done)
    else:
        reads, sequence = _sequence(rows, arch, lsda, memo)
        done = {}
        shape = memo.shapes[key] = (rows, reads, done)
    by_code = code.data if code is not None and reads else None
    hit = done.get(by_code)
    if hit is None:
        made = done[by_code] = lower_compact(timeline, arch, code, ranges) \
            if sequence is None else _placed(*span_of(timeline), rows, timeline.personality,
                                             timeline.lsda, sequence)
        return made
    return hit._replace(name=timeline.name, section=timeline.section, start=timeline.start,
                        personality=timeline.personality, lsda=timeline.lsda)


def lowered_alike(name: str, section: str, start: int, size: int, rows: tuple[Row, ...],
                  invalid: str | None, arch: str, memo: LowerMemo) -> CompactFunction | None:
    """``lower_alike`` of a function of these rows without an LSDA, personality or
    ``--ranges``, where no encoding reads its code: without a ``Timeline`` or the code,
    so that a library's 95k functions need neither; None elsewhere (the caller asks
    ``lower_alike``)."""
    tail = placed_tail(size, rows, invalid, arch, memo)
    return None if tail is None else _new_tuple(CompactFunction, (name, section, start, *tail))


def placed_tail(size: int, rows: tuple[Row, ...], invalid: str | None, arch: str,
                memo: LowerMemo) -> FunctionTail | None:
    """``lowered_alike``'s answer after its start (its fields from ``size`` on), for a
    caller that adds the start itself (``compact.inputs.compact_cfi``, each FDE's)."""
    key = (id(rows), size, invalid, arch)
    found = memo.placed.get(key)
    if found is None:
        found = memo.placed[key] = (rows, shape_tail(size, rows, invalid, arch, memo))
    return found[1]


# A CompactFunction's fields from ``size`` on.
FunctionTail = tuple[int, tuple[CompactRow, ...], CompactReason | None, str, int, str | None,
              str | None, tuple[int, int], tuple[tuple[int, int], ...]]


def shape_tail(size: int, rows: tuple[Row, ...], invalid: str | None, arch: str,
               memo: LowerMemo) -> FunctionTail | None:
    """``lowered_alike``'s answer after its start, or None where ``lower_alike`` must
    answer; not kept (``placed_tail`` keeps it by the rows object; a caller that keeps
    it per shape itself, ``compact.inputs.compact_cfi``, asks here: a key and entry
    per shape, 40k on libLLVM-14, that it never finds again)."""
    if invalid is not None or not size or not rows:
        return None
    sequence = _sequence(rows, arch, False, memo)[1]
    if sequence is None:
        return None
    return _tail(size, rows, None, None, sequence)


class _Sequence(NamedTuple):
    """What a function's single row depends on of its rows (their states in order, not
    where they start): the body row's index, the row's encoding (DWARF mode with a
    reason where none is exact), and the rows whose rules are the encoding's."""

    body_index: int
    encoding: int
    reason: CompactReason | None
    detail: str
    exact: tuple[int, ...]


def _sequence(rows: tuple[Row, ...], arch: str, lsda: bool,
              memo: LowerMemo) -> tuple[bool, _Sequence | None]:
    """Whether an encoding of ``rows`` (not empty) can read the code, and where none can,
    ``lower_compact``'s single row of them; once per distinct state sequence.  The
    states are keyed by their objects' ids (``dwarf.cfi`` makes each distinct state's
    objects once), valid while the first rows with them are kept in the value; equal
    states of other objects are only another key."""
    # (a Python tuple per row cost more than the lowering it keys: 476k on libLLVM-14)
    key = (state_ids(rows) if _CORE is None else _CORE.row_state_ids(rows), arch, lsda)
    found = memo.sequences.get(key)
    if found is not None:
        return found[1], found[2]
    reads = _reads_code(rows, arch)
    made = None if reads else _single_row(rows, arch, lsda)
    memo.sequences[key] = (rows, reads, made)
    return reads, made


def state_ids(rows: tuple[Row, ...]) -> bytes:
    """Each row's state as the addresses of its objects (cfa, regs, ra_signed,
    ra_signed_pc), in order, native words: ``_sequence``'s key, equal only for rows of
    the same state objects in the same order (``_core.row_state_ids``' reference)."""
    return array(_WORD, [id(field) for row in rows for field in row[1:]]).tobytes()


_WORD = "Q" if sys.maxsize > 1 << 32 else "I"  # an address's unsigned word (uintptr_t)


_CORE = compiled()
# A record made from its fields' tuple without its class's ``__new__`` (a Python
# function: ~2.7k instructions a record, 188k records on libLLVM-14's compact --check).
_new_tuple = tuple.__new__


def _single_row(rows: tuple[Row, ...], arch: str, lsda: bool) -> _Sequence:
    """``lower_compact``'s row of ``rows`` (not empty, reading no code) and its exact rows."""
    dwarf = ARM64_DWARF if arch == "arm64" else X86_DWARF
    index = _body_index(rows, arch)
    assert index is not None  # (rows is not empty)
    encoding = encode_row(rows[index], arch, None)
    reason, detail = None, ""
    if isinstance(encoding, Unrepresentable):
        reason, detail, encoding = encoding.reason, encoding.detail, dwarf
    elif lsda and encoding & 0x0F000000 != dwarf:  # (as lower_compact's result)
        encoding |= HAS_LSDA
    rules = _decoded(encoding & ~HAS_LSDA, arch)
    exact = tuple(i for i, row in enumerate(rows) if isinstance(rules, CompactRules)
                  and _rules(row.cfa, row.regs, row.ra_signed, arch) == rules)
    return _Sequence(index, encoding, reason, detail, exact)


def _placed(name: str, section: str, start: int, size: int, rows: tuple[Row, ...],
            personality: str | None, lsda: str | None, sequence: _Sequence) -> CompactFunction:
    """``lower_compact`` of a function from its state sequence's answer: the row over the
    whole function, the body range and the inexact spans from where its rows start."""
    return _new_tuple(CompactFunction, (name, section, start,
                                        *_tail(size, rows, personality, lsda, sequence)))


def _tail(size: int, rows: tuple[Row, ...], personality: str | None, lsda: str | None,
          sequence: _Sequence) -> FunctionTail:
    """``_placed``'s fields from ``size`` on."""
    index, encoding, reason, detail, exact_rows = sequence  # (not 5 named look-ups)
    found = None if _CORE is None else _CORE.placed_spans(rows, exact_rows, size)
    spans, exact = placed_spans(rows, exact_rows, size) if found is None else found
    return (size, (_new_tuple(CompactRow, (0, size, encoding)),), reason, detail, exact,
            personality, lsda, _body_range(rows, index, size), spans)


def placed_spans(rows: tuple[Row, ...], exact: tuple[int, ...],
                 size: int) -> tuple[tuple[tuple[int, int], ...], int]:
    """The inexact spans of a function of ``size`` bytes whose rows at the indices
    ``exact`` are exact (``inexact_spans``' of its one row), and its exact bytes
    (``_core.placed_spans``' reference)."""
    last = len(rows) - 1
    covered = []
    for i in exact:  # inexact_spans' intervals, with max and min unrolled
        lo = rows[i][0]
        hi = rows[i + 1][0] if i < last else size
        if lo < 0:
            lo = 0
        if hi > size:
            hi = size
        if lo < hi:
            covered.append((lo, hi))
    spans = _gaps(covered, size)
    return spans, size - sum([hi - lo for lo, hi in spans])


def _reads_code(rows: tuple[Row, ...], arch: str) -> bool:
    """Whether an encoding of these rows can read the function's code: only x86
    STACK_IND does, for a CFA on the stack pointer past STACK_IMMD's 255 slots."""
    if arch == "arm64":
        return False
    reach = 256 * by_compact(arch).address_size
    return any(isinstance(row.cfa, CfaReg) and row.cfa.offset >= reach for row in rows)


def _range_rows(timeline: Timeline, arch: str, code: Code | None,
                dwarf: int) -> list[CompactRow]:
    out: list[CompactRow] = []
    rows = timeline.rows
    for i, row in enumerate(rows):
        end = rows[i + 1].start if i + 1 < len(rows) else timeline.size
        if row.start >= timeline.size:
            break
        encoding = encode_row(row, arch, code, row.start)
        if isinstance(encoding, Unrepresentable):
            encoding = dwarf
        if row.start:
            encoding |= NOT_FUNCTION_START
        stack_ind = arch != "arm64" and encoding & 0x0F000000 == 0x03000000  # x86 IND
        if out and out[-1].encoding & ~NOT_FUNCTION_START == encoding & ~NOT_FUNCTION_START \
                and not stack_ind:  # STACK_IND reads its immediate from the row start
            last = out[-1]
            out[-1] = last._replace(length=end - last.start)
        else:
            out.append(CompactRow(row.start, min(end, timeline.size) - row.start, encoding))
    if out and out[0].start:
        out.insert(0, CompactRow(0, out[0].start, dwarf))
    return out


@lru_cache(maxsize=4096)
def _decoded(encoding: int, arch: str) -> CompactRules | Unrepresentable[CompactReason]:
    """``decode`` of an encoding that reads no code, once per distinct encoding."""
    return decode(encoding, arch)


def inexact_spans(timeline: Timeline, rows: list[CompactRow], arch: str,
                  code: Code | None) -> tuple[tuple[int, int], ...]:
    """Offset ranges of the function where no row's decoded rules equal the CFI's row."""
    exact: list[tuple[int, int]] = []
    ends = [row.start for row in timeline.rows[1:]] + [timeline.size]
    for crow in rows:
        encoding = crow.encoding & ~NOT_FUNCTION_START & ~HAS_LSDA
        if arch != "arm64" and encoding & MODE_MASK == X86_STACK_IND:
            rules = decode(encoding, arch, Code(code.data[crow.start:])
                           if code is not None else None)
        else:
            rules = _decoded(encoding, arch)  # reads no code
        if isinstance(rules, Unrepresentable):
            continue
        start, end = crow.start, crow.start + crow.length
        for row, row_end in zip(timeline.rows, ends, strict=True):
            lo, hi = max(row.start, start), min(row_end, end)
            if lo < hi and _rules(row.cfa, row.regs, row.ra_signed, arch) == rules:
                exact.append((lo, hi))
    return _gaps(exact, timeline.size)


def _gaps(exact: list[tuple[int, int]], size: int) -> tuple[tuple[int, int], ...]:
    """The ranges of [0, ``size``) that no range of ``exact`` covers (empty ones, and
    those that start past the end, drop out)."""
    spans: list[tuple[int, int]] = []
    at = 0
    exact = sorted(exact)
    exact.append((size, size))
    for lo, hi in exact:
        if lo > at:
            end = lo if lo < size else size
            if at < end:
                spans.append((at, end))
        if hi > at:
            at = hi
    return tuple(spans)
