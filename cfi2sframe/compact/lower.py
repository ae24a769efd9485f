"""Timeline -> compact unwind rows, each checked against the CFI at every PC it covers.

Which row (the default): the function's *body state*.  Walking the rows from
the start, the prologue only adds saves and grows the frame (the CFA offset
grows, or the CFA moves from SP to FP with every save kept); the body state is
the last row of that walk.  For LLVM's Darwin output, which has no epilogue
CFI, that is the final state MC encodes; for GCC's output it is the state
after the prologue, before any epilogue row.

``ranges=True`` (asynchronous-precise): one row per CFI row that compact
unwind can express exactly (adjacent equal encodings merged), DWARF mode for
the others; rows after the first carry ``NOT_FUNCTION_START``.

Every row is checked by decoding it again (``encoding.decode``) and comparing
with the DWARF row at each PC it covers, so an encoding is never wrong: where
none is exact for the body state, the function gets DWARF mode and a reason.
"""

from __future__ import annotations

from typing import NamedTuple

from ..arch import by_compact
from ..model import CfaReg, Row, RuleKind, Timeline
from ..reasons import COMPACT_REASONS, Unrepresentable
from .encoding import (
    ARM64_DWARF,
    HAS_LSDA,
    NOT_FUNCTION_START,
    X86_DWARF,
    Code,
    CompactRules,
    decode,
    encode,
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
    reason: str | None
    detail: str
    exact_bytes: int
    personality: str | None = None
    lsda: str | None = None


def row_rules(row: Row, arch: str) -> CompactRules | Unrepresentable:
    """A DWARF row in compact terms, or (reason, detail) when it has none."""
    if not isinstance(row.cfa, CfaReg):
        return Unrepresentable("no-cfa", "the CFA is not a register plus offset")
    if row.ra_signed:
        return Unrepresentable("ra-signed", "the return address is signed")
    target = by_compact(arch)
    sp, ra = target.sp, target.ra
    ra_offset = None
    saved = []
    for reg, rule in row.regs:
        if rule.kind == RuleKind.same_value:
            continue
        if reg == sp and rule.kind == RuleKind.val_offset and rule.value == 0:
            continue
        if rule.kind != RuleKind.offset:
            return Unrepresentable(
                "rule-not-encodable",
                f"DWARF register {reg} is {rule.kind.replace('_', ' ')}")
        if reg == ra:
            ra_offset = rule.value
        else:
            saved.append((reg, rule.value))
    if ra_offset is None and arch != "arm64":
        return Unrepresentable("ra-not-at-cfa-8", "the return address has no stack slot")
    return CompactRules(row.cfa.reg, row.cfa.offset, ra_offset, tuple(sorted(saved)))


def encode_row(row: Row, arch: str, code: Code | None,
               code_offset: int = 0) -> int | Unrepresentable:
    """The exact encoding of one DWARF row, or (reason, detail)."""
    rules = row_rules(row, arch)
    if not isinstance(rules, CompactRules):
        return rules
    encoding = encode(rules, arch, code, code_offset)
    if isinstance(encoding, int):
        at = Code(code.data[code_offset:]) if code is not None else None
        if decode(encoding, arch, at) != rules:  # the encoders are exact by construction
            raise AssertionError(f"encoding {encoding:#010x} does not decode to {rules}")
    return encoding


def body_row(rows: tuple[Row, ...]) -> Row | None:
    """The last row of the prologue (see the module docstring)."""
    body: Row | None = None
    body_cfa = CfaReg(0, 0)
    for row in rows:
        cfa = row.cfa
        if not isinstance(cfa, CfaReg):
            if body is None:
                continue
            break
        if body is not None and not _grows(body, body_cfa, row, cfa):
            break
        body, body_cfa = row, cfa
    return body


def _grows(before: Row, before_cfa: CfaReg, after: Row, after_cfa: CfaReg) -> bool:
    saved = dict(before.regs)
    now = dict(after.regs)
    if any(now.get(reg) != rule for reg, rule in saved.items() if rule.kind == RuleKind.offset):
        return False
    if after_cfa.reg == before_cfa.reg:
        return after_cfa.offset >= before_cfa.offset
    return True  # moved to another base register (SP -> FP), saves kept


def lower_compact(timeline: Timeline, arch: str, code: Code | None = None,
                  ranges: bool = False) -> CompactFunction:
    """The compact rows of one function (``code``: its bytes, for STACK_IND)."""
    dwarf = ARM64_DWARF if arch == "arm64" else X86_DWARF

    def result(rows: list[CompactRow], reason: str | None, detail: str) -> CompactFunction:
        if timeline.lsda is not None:
            rows = [r._replace(encoding=r.encoding | HAS_LSDA)
                    if r.encoding & 0x0F000000 != dwarf else r for r in rows]
        return CompactFunction(timeline.name, timeline.section, timeline.start,
                               timeline.size, tuple(rows), reason, detail,
                               exact_bytes(timeline, rows, arch, code),
                               timeline.personality, timeline.lsda)

    if timeline.invalid is not None:
        return result([CompactRow(0, timeline.size, dwarf)], "invalid-cfi", timeline.invalid)
    if timeline.size == 0:
        return result([], "empty-function", "the function has no bytes")
    if ranges:
        return result(_range_rows(timeline, arch, code, dwarf), None, "")
    body = body_row(timeline.rows)
    if body is None:
        return result([CompactRow(0, timeline.size, dwarf)], "no-cfa", "no CFA rule")
    encoding = encode_row(body, arch, code)
    if isinstance(encoding, Unrepresentable):
        return result([CompactRow(0, timeline.size, dwarf)], *encoding)
    return result([CompactRow(0, timeline.size, encoding)], None, "")


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


def exact_bytes(timeline: Timeline, rows: list[CompactRow], arch: str,
                code: Code | None) -> int:
    """Bytes of the function at which a row's decoded rules equal the CFI's row."""
    total = 0
    for crow in rows:
        sub = Code(code.data[crow.start:]) if code is not None else None
        rules = decode(crow.encoding & ~NOT_FUNCTION_START & ~HAS_LSDA, arch, sub)
        if isinstance(rules, str):
            continue
        end = crow.start + crow.length
        for i, row in enumerate(timeline.rows):
            row_end = timeline.rows[i + 1].start if i + 1 < len(timeline.rows) else \
                timeline.size
            lo, hi = max(row.start, crow.start), min(row_end, end)
            if lo < hi and row_rules(row, arch) == rules:
                total += hi - lo
    return total
