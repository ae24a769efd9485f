"""A trace's calls and events, each with its absolute TSC, CPU, thread, process and
arguments: the records ``llvm-xray convert`` writes, in file order (it orders each
thread's buffers by wall-clock time and the threads as a hash map does)."""

from __future__ import annotations

from collections.abc import Iterator

from ..basics import Name
from ..errors import DecodeError
from ..typed import NamedTuple
from .records import (
    FDR,
    BasicKind,
    BufferExtents,
    CallArgument,
    CustomEvent,
    EndOfBuffer,
    Function,
    Header,
    NewBuffer,
    NewCpu,
    PidEntry,
    Record,
    TscWrap,
    TypedEvent,
    basic_records,
    fdr_records,
    read_header,
)


class EventKind(Name):
    """What an expanded record is (``llvm-xray convert``'s ``kind`` names)."""

    enter = "function-enter"
    exit = "function-exit"
    tail_exit = "function-tail-exit"
    enter_args = "function-enter-arg"
    custom_event = "custom-event"
    typed_event = "typed-event"


class Event(NamedTuple):
    """One call boundary or event.  ``func_id`` is 0 for events (llvm-xray repeats the
    previous function's); ``data`` an event's payload; ``event_type`` a typed event's."""

    offset: int  # the record's byte offset in the file
    kind: EventKind
    func_id: int
    tsc: int
    cpu: int
    tid: int
    pid: int
    args: tuple[int, ...] = ()
    data: bytes = b""
    event_type: int = 0


class _State:
    """The running context of an FDR stream: thread, process, CPU and base TSC."""

    __slots__ = ("version", "tid", "pid", "cpu", "base")

    def __init__(self, version: int) -> None:
        self.version, self.tid, self.pid, self.cpu, self.base = version, 0, 0, 0, 0

    def event(self, offset: int, kind: EventKind, func_id: int = 0, **rest: object) -> Event:
        return Event(offset, kind, func_id, self.base, self.cpu, self.tid, self.pid,
                     **rest)  # type: ignore[arg-type]


def _context(state: _State, record: Record) -> None:
    """What a record that is no call or event changes."""
    if isinstance(record, NewBuffer):
        state.tid = record.tid
        state.pid = record.tid if state.version == 2 else 0  # v2: the PID is the TID
    elif isinstance(record, NewCpu):
        state.cpu, state.base = record.cpu, record.tsc
    elif isinstance(record, TscWrap):
        state.base = record.tsc
    elif isinstance(record, PidEntry):
        state.pid = record.pid


def _event(state: _State, record: Record) -> Event | None:
    """The call or event a record starts (None for the others)."""
    if isinstance(record, Function):
        state.base += record.delta
        return state.event(record.offset, EventKind(record.kind.value), record.func_id)
    if isinstance(record, TypedEvent):
        state.base += record.delta
        return state.event(record.offset, EventKind.typed_event, data=record.payload,
                           event_type=record.event_type)
    if isinstance(record, CustomEvent):
        if record.delta is not None:  # version 5
            state.base += record.delta
            return state.event(record.offset, EventKind.custom_event, data=record.payload)
        cpu = state.cpu if record.cpu is None else record.cpu
        return Event(record.offset, EventKind.custom_event, 0, record.tsc or 0, cpu,
                     state.tid, state.pid, data=record.payload)
    return None


def fdr_events(data: bytes, header: Header) -> Iterator[Event]:
    """An FDR trace's calls and events; call arguments attach to the record before."""
    state = _State(header.version)
    pending: Event | None = None
    args: list[int] = []
    for record in fdr_records(data, header):
        if isinstance(record, CallArgument):
            args.append(record.value)
            continue
        event = _event(state, record)
        if event is None and not isinstance(record, (NewBuffer, BufferExtents, EndOfBuffer)):
            _context(state, record)
            continue
        if pending is not None:
            yield pending._replace(args=tuple(args)) if args else pending
        args.clear()
        pending = event
        _context(state, record)
    if pending is not None:
        yield pending._replace(args=tuple(args)) if args else pending


def basic_events(data: bytes, header: Header) -> Iterator[Event]:
    """A basic-mode trace's calls; an argument record attaches to the call before it
    when function, thread and process agree (a stray one is dropped: check says so)."""
    pending: Event | None = None
    for record in basic_records(data, header):
        if record.kind == BasicKind.argument:
            if pending is not None and (pending.func_id, pending.tid, pending.pid) == \
                    (record.func_id, record.tid, record.pid):
                pending = pending._replace(args=pending.args + (record.argument,))
            continue
        if pending is not None:
            yield pending
        assert record.func_kind is not None
        pending = Event(record.offset, EventKind(record.func_kind.value), record.func_id,
                        record.tsc, record.cpu, record.tid, record.pid)
    if pending is not None:
        yield pending


def events(data: bytes) -> Iterator[Event]:
    """Every call and event of a trace of either mode, streamed (a DecodeError where
    the trace cannot be read on)."""
    header = read_header(data)
    if header.type == FDR:
        return fdr_events(data, header)
    if header.version not in range(1, 4):
        raise DecodeError(0, f"basic-mode traces have versions 1 to 3, not {header.version}")
    return basic_events(data, header)
