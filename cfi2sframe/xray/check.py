"""Every problem of an XRay trace, each at its byte offset and block (thread).

The block grammar LLVM's verifier enforces, and what it does not check: buffer
extents against the records they hold, enter/exit balance per thread, call
arguments only after an enter with arguments, a PID record where the version
writes one, the TSC going back without a TSCWrap, and the header.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..errors import DecodeError
from ..typed import NamedTuple
from .records import (
    BASIC_SIZE,
    FDR,
    HEADER_SIZE,
    VERSIONS,
    BasicKind,
    BasicRecord,
    BufferExtents,
    CallArgument,
    CustomEvent,
    EndOfBuffer,
    FuncKind,
    Function,
    Header,
    NewBuffer,
    NewCpu,
    PidEntry,
    Record,
    Skipped,
    TscWrap,
    TypedEvent,
    WallClock,
    _basic,
    fdr_records,
    read_header,
    record_size,
)


class Finding(NamedTuple):
    """One problem: where, in which block (1-based; 0: the header), on which thread."""

    offset: int
    block: int
    tid: int | None
    message: str


_NAMES: dict[type, str] = {
    NewBuffer: "NewBuffer", EndOfBuffer: "EndOfBuffer", NewCpu: "NewCPUId",
    TscWrap: "TSCWrap", WallClock: "WallClockTime", CustomEvent: "CustomEvent",
    CallArgument: "CallArgument", BufferExtents: "BufferExtents", TypedEvent: "TypedEvent",
    PidEntry: "PIDEntry", Function: "a function record"}
_BODY = frozenset({NewCpu, TscWrap, CustomEvent, Function, EndOfBuffer, TypedEvent})
# LLVM's block grammar: after a record of this type (None: a block's start), these.
_NEXT: dict[type | None, frozenset[type]] = {
    None: frozenset({BufferExtents, NewBuffer}),
    BufferExtents: frozenset({NewBuffer}),
    NewBuffer: frozenset({WallClock}),
    WallClock: frozenset({PidEntry, NewCpu}),
    PidEntry: frozenset({NewCpu}),
    NewCpu: _BODY, TscWrap: _BODY, CustomEvent: _BODY, TypedEvent: _BODY,
    Function: _BODY | {CallArgument},
    CallArgument: (_BODY - {CallArgument}) | {CallArgument},
}


def header_findings(header: Header) -> Iterator[Finding]:
    """What a header says that no producer writes."""
    mode = "FDR" if header.type == FDR else "basic-mode"
    allowed = VERSIONS[header.type]
    if header.version not in allowed:
        yield Finding(0, 0, None, f"{mode} traces have versions {allowed.start} to "
                                  f"{allowed.stop - 1}, this header says {header.version}")
    if header.cycle_frequency == 0:
        yield Finding(8, 0, None, "the cycle frequency is 0: no TSC can be turned into time")


class _Block:
    """One buffer's running state as the checker walks it."""

    __slots__ = ("number", "tid", "last", "end", "typed", "tsc", "pid", "start")

    def __init__(self, number: int, start: int, end: int | None) -> None:
        self.number, self.start, self.end = number, start, end
        self.tid: int | None = None
        self.last: type | None = None
        self.typed = 0
        self.tsc: int | None = None
        self.pid = False


class _FdrChecker:
    """The FDR walk: each record checked against its block and its thread."""

    def __init__(self, data: bytes, header: Header) -> None:
        self.data, self.header = data, header
        self.block = _Block(0, HEADER_SIZE, None)
        self.stacks: dict[int | None, list[int]] = {}

    def finding(self, offset: int, message: str) -> Finding:
        return Finding(offset, self.block.number, self.block.tid, message)

    def run(self) -> Iterator[Finding]:
        at = HEADER_SIZE
        try:
            for record in fdr_records(self.data, self.header):
                yield from self.record(record)
                at = record.offset + record_size(record)
        except DecodeError as exc:
            yield self.finding(exc.offset, f"{exc.message}: checked up to the last complete "
                                           "record (a trace cut short by a killed process?)")
            return
        yield from self.end_of_block(at)

    def starts_block(self, record: Record) -> bool:
        if self.header.version >= 2:
            return isinstance(record, BufferExtents) or (
                isinstance(record, NewBuffer) and self.block.last is not BufferExtents)
        return isinstance(record, NewBuffer)

    def record(self, record: Record) -> Iterator[Finding]:
        if isinstance(record, Skipped):
            yield from self.skipped(record)
            return
        if self.starts_block(record):
            yield from self.end_of_block(record.offset)
            end = record.offset + 16 + record.size if isinstance(record, BufferExtents) else None
            self.block = _Block(self.block.number + 1, record.offset, end)
            if self.header.version >= 2 and isinstance(record, NewBuffer):
                yield self.finding(record.offset, "a block without BufferExtents (version "
                                   f"{self.header.version} starts every buffer with one)")
        elif self.block.end is not None and record.offset >= self.block.end:
            yield self.finding(record.offset, f"{_NAMES[type(record)]} past the buffer's "
                               f"extent (byte {self.block.end:#x}) and before the next "
                               "BufferExtents")
            self.block.end = None
        yield from self.grammar(record)
        yield from self.version(record)
        yield from self.meaning(record)
        self.block.last = type(record)

    def grammar(self, record: Record) -> Iterator[Finding]:
        last = self.block.last
        if type(record) not in _NEXT.get(last, frozenset()):  # nothing after EndOfBuffer
            after = "at the start of a block" if last is None else f"after {_NAMES[last]}"
            yield self.finding(record.offset, f"{_NAMES[type(record)]} {after} (the block "
                               "grammar does not allow it)")

    def version(self, record: Record) -> Iterator[Finding]:
        version = self.header.version
        if isinstance(record, EndOfBuffer) and version >= 2:
            yield self.finding(record.offset, f"EndOfBuffer in a version {version} trace "
                               "(only version 1 ends buffers so; later ones use extents)")
        elif isinstance(record, BufferExtents) and version < 2:
            yield self.finding(record.offset, "BufferExtents in a version 1 trace")
        elif isinstance(record, PidEntry):
            self.block.pid = True
            if version < 3:
                yield self.finding(record.offset, f"PIDEntry in a version {version} trace "
                                   "(from version 3)")
        elif isinstance(record, NewCpu) and self.block.last is WallClock and version >= 3:
            yield self.finding(record.offset, f"no PIDEntry after WallClockTime (version "
                               f"{version} writes the process ID in every buffer)")

    def meaning(self, record: Record) -> Iterator[Finding]:
        block = self.block
        if isinstance(record, NewBuffer):
            block.tid = record.tid
        elif isinstance(record, TscWrap):
            block.tsc = record.tsc
        elif isinstance(record, NewCpu):
            yield from self.tsc_to(record.offset, record.tsc, "NewCPUId")
        elif isinstance(record, CallArgument):
            if block.last not in (CallArgument, Function) or not self.after_args:
                yield self.finding(record.offset, "CallArgument not after an enter with "
                                   "arguments (or its other arguments)")
        elif isinstance(record, Function):
            yield from self.call(record)
        elif isinstance(record, TypedEvent):
            block.typed += 1
            yield from self.delta(record.offset, record.delta, "TypedEvent")
        elif isinstance(record, CustomEvent):
            if record.delta is not None:
                yield from self.delta(record.offset, record.delta, "CustomEvent")
            elif record.tsc is not None:
                yield from self.tsc_to(record.offset, record.tsc, "CustomEvent")
        if isinstance(record, Function):
            self.after_args = record.kind == FuncKind.enter_args
        elif not isinstance(record, CallArgument):
            self.after_args = False

    after_args = False

    def tsc_to(self, offset: int, tsc: int, what: str) -> Iterator[Finding]:
        """An absolute TSC: never below the block's running one without a TSCWrap."""
        if self.block.tsc is not None and tsc < self.block.tsc:
            yield self.finding(offset, f"{what} takes the TSC back from {self.block.tsc} to "
                                       f"{tsc} without a TSCWrap")
        if what == "NewCPUId" or self.block.tsc is None:
            self.block.tsc = tsc

    def delta(self, offset: int, delta: int, what: str) -> Iterator[Finding]:
        if delta < 0:
            yield self.finding(offset, f"{what} takes the TSC back by {-delta} without a "
                                       "TSCWrap")
        if self.block.tsc is not None:
            self.block.tsc += delta

    def call(self, record: Function) -> Iterator[Finding]:
        """Enter/exit balance on the block's thread."""
        if self.block.tsc is not None:
            self.block.tsc += record.delta
        stack = self.stacks.setdefault(self.block.tid, [])
        if record.kind in (FuncKind.enter, FuncKind.enter_args):
            stack.append(record.func_id)
            return
        what = "tail exit" if record.kind == FuncKind.tail_exit else "exit"
        if not stack:
            yield self.finding(record.offset, f"{what} of function #{record.func_id} with no "
                                              "call open on this thread")
        elif stack[-1] != record.func_id:
            yield self.finding(record.offset, f"{what} of function #{record.func_id} while "
                                              f"#{stack[-1]} is the innermost open call")
            if record.func_id in stack:
                del stack[len(stack) - 1 - stack[::-1].index(record.func_id):]
        else:
            stack.pop()

    def skipped(self, record: Skipped) -> Iterator[Finding]:
        typed = self.block.typed + (self.data[record.offset] == (8 << 1 | 1))
        if typed:
            yield self.finding(record.offset, f"{record.reason}: the buffer holds {typed} "
                               f"typed event{'s' * (typed != 1)}, and LLVM 14's runtime adds "
                               "only the payload to the extents, not the 16-byte record: the "
                               f"last {16 * typed} bytes of this buffer were never written")
        else:
            yield self.finding(record.offset, f"{record.reason}; skipped to the extent's end "
                               f"(byte {record.end:#x})")
        self.block.last = None  # what follows starts afresh

    def end_of_block(self, at: int) -> Iterator[Finding]:
        end = self.block.end
        if end is not None and end > len(self.data):
            yield self.finding(at, f"the file ends at byte {len(self.data):#x}, inside this "
                               f"buffer, whose extent runs to byte {end:#x}: checked up to "
                               "the last complete record (a trace cut short by a killed "
                               "process?)")


def _basic_findings(data: bytes, header: Header) -> Iterator[Finding]:
    """Basic mode: each 32-byte record on its own (a bad one does not stop the walk)."""
    stacks: dict[int, list[int]] = {}
    last_tsc: dict[int, int] = {}
    before: BasicRecord | None = None
    for at in range(HEADER_SIZE, len(data), BASIC_SIZE):
        if at + BASIC_SIZE > len(data):
            yield Finding(at, 0, None, f"the file ends inside a 32-byte record "
                          f"({len(data) - at} bytes of it): checked up to the last complete "
                          "record (a trace cut short by a killed process?)")
            return
        try:
            record = _basic(bytes(data[at:at + BASIC_SIZE]), at, header.order)
        except DecodeError as exc:
            yield Finding(exc.offset, 0, None, exc.message)
            before = None
            continue
        yield from _basic_record(record, before, stacks, last_tsc)
        before = record


def _basic_record(record: BasicRecord, before: BasicRecord | None,
                  stacks: dict[int, list[int]], last_tsc: dict[int, int]) -> Iterator[Finding]:
    tid = record.tid
    if record.kind == BasicKind.argument:
        if before is None or before.func_kind != FuncKind.enter_args or \
                (before.func_id, before.tid, before.pid) != (record.func_id, tid, record.pid):
            yield Finding(record.offset, 0, tid, "an argument record not after an enter "
                          "with arguments of the same function, thread and process")
        return
    if record.tsc < last_tsc.get(tid, 0):
        yield Finding(record.offset, 0, tid, f"the TSC goes back from {last_tsc[tid]} to "
                                             f"{record.tsc} on this thread")
    last_tsc[tid] = record.tsc
    stack = stacks.setdefault(tid, [])
    if record.func_kind in (FuncKind.enter, FuncKind.enter_args):
        stack.append(record.func_id)
    elif not stack:
        yield Finding(record.offset, 0, tid, f"exit of function #{record.func_id} with no "
                                             "call open on this thread")
    elif stack[-1] != record.func_id:
        yield Finding(record.offset, 0, tid, f"exit of function #{record.func_id} while "
                                             f"#{stack[-1]} is the innermost open call")
    else:
        stack.pop()


def check_trace(data: bytes) -> Iterator[Finding]:
    """Every problem of a trace in file order (a DecodeError for no XRay header)."""
    header = read_header(data)
    yield from header_findings(header)
    if header.type == FDR:
        yield from _FdrChecker(data, header).run()
    else:
        yield from _basic_findings(data, header)
