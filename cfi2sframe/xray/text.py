"""An XRay trace's records as lines: what ``llvm-xray fdr-dump`` says of each, after
the record's byte offset (payloads with their unprintable bytes escaped)."""

from __future__ import annotations

from collections.abc import Iterator

from .records import (
    FDR,
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
    TscWrap,
    TypedEvent,
    WallClock,
    basic_records,
    fdr_records,
)

_FUNCTION = {FuncKind.enter: "Function Enter", FuncKind.exit: "Function Exit",
             FuncKind.tail_exit: "Function Tail Exit",
             FuncKind.enter_args: "Function Enter With Arg"}


def escaped(payload: bytes) -> str:
    """A payload as text on one line: printable ASCII as it is, the rest ``\\xNN``."""
    return "".join(chr(b) if 32 <= b < 127 and b not in (39, 92) else f"\\x{b:02x}"
                   for b in payload)


def header_line(header: Header) -> str:
    mode = "FDR" if header.type == FDR else "basic mode"
    bits = "".join((", constant TSC" * header.constant_tsc, ", nonstop TSC" * header.nonstop_tsc))
    size = f", buffer size {header.buffer_size}" if header.type == FDR else ""
    return (f"XRay {mode} trace, version {header.version}, {header.order}-endian, cycle "
            f"frequency {header.cycle_frequency} Hz{bits}{size}")


def record_text(record: Record) -> str:
    """One FDR record as fdr-dump words it (between its angle brackets)."""
    if isinstance(record, Function):
        return f"{_FUNCTION[record.kind]}: #{record.func_id} delta = +{record.delta}"
    if isinstance(record, CallArgument):
        return f"Call Argument: data = {record.value} (hex = {record.value:#x})"
    if isinstance(record, NewCpu):
        return f"CPU: id = {record.cpu}, tsc = {record.tsc}"
    if isinstance(record, TscWrap):
        return f"TSC Wrap: base = {record.tsc}"
    if isinstance(record, NewBuffer):
        return f"Thread ID: {record.tid}"
    if isinstance(record, WallClock):
        return f"Wall Time: seconds = {record.seconds}.{record.micros:06}"
    if isinstance(record, PidEntry):
        return f"PID: {record.pid}"
    if isinstance(record, BufferExtents):
        return f"Buffer: size = {record.size} bytes"
    if isinstance(record, EndOfBuffer):
        return "End of Buffer"
    if isinstance(record, TypedEvent):
        return (f"Typed Event: delta = {record.delta:+}, type = {record.event_type}, size = "
                f"{record.size}, data = '{escaped(record.payload)}'")
    if isinstance(record, CustomEvent):
        if record.delta is not None:
            when = f"delta = {record.delta:+}"
        else:
            when = f"tsc = {record.tsc}" + ("" if record.cpu is None else f", cpu = {record.cpu}")
        return f"Custom Event: {when}, size = {record.size}, data = '{escaped(record.payload)}'"
    return f"Skipped to byte {record.end:#x}: {record.reason}"


def basic_text(record: BasicRecord) -> str:
    """One basic-mode record: its call, or the argument it carries."""
    where = f"thread = {record.tid}, process = {record.pid}"
    if record.kind == BasicKind.argument:
        return (f"Call Argument: data = {record.argument} (hex = {record.argument:#x}), "
                f"#{record.func_id}, {where}")
    assert record.func_kind is not None
    return (f"{_FUNCTION[record.func_kind]}: #{record.func_id} tsc = {record.tsc}, cpu = "
            f"{record.cpu}, {where}")


def dump_lines(data: bytes, header: Header) -> Iterator[str]:
    """Every record's line, streamed (a DecodeError where reading cannot go on)."""
    if header.type == FDR:
        for record in fdr_records(data, header):
            yield f"{record.offset:#08x}  {record_text(record)}\n"
    else:
        for basic in basic_records(data, header):
            yield f"{basic.offset:#08x}  {basic_text(basic)}\n"
