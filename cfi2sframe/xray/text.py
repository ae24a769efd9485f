"""An XRay trace's records as lines: what ``llvm-xray fdr-dump`` says of each, after
the record's byte offset (payloads with their unprintable bytes escaped)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

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


def function_id(func_id: int, names: Mapping[int, str] | None = None) -> str:
    """``#ID``, and the function's name after it where ``names`` (a binary's
    instrumentation map) has one."""
    name = names.get(func_id) if names else None
    return f"#{func_id}" if name is None else f"#{func_id} {name}"


def record_text(record: Record, names: Mapping[int, str] | None = None) -> str:
    """One FDR record as fdr-dump words it (between its angle brackets); ``names``:
    each function's name beside its ID."""
    if isinstance(record, Function):
        return (f"{_FUNCTION[record.kind]}: {function_id(record.func_id, names)} "
                f"delta = +{record.delta}")
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


def basic_text(record: BasicRecord, names: Mapping[int, str] | None = None) -> str:
    """One basic-mode record: its call, or the argument it carries."""
    where = f"thread = {record.tid}, process = {record.pid}"
    if record.kind == BasicKind.argument:
        return (f"Call Argument: data = {record.argument} (hex = {record.argument:#x}), "
                f"{function_id(record.func_id, names)}, {where}")
    assert record.func_kind is not None
    return (f"{_FUNCTION[record.func_kind]}: {function_id(record.func_id, names)} tsc = "
            f"{record.tsc}, cpu = {record.cpu}, {where}")


def dump_lines(data: bytes, header: Header, names: Mapping[int, str] | None = None
               ) -> Iterator[str]:
    """Every record's line, streamed (a DecodeError where reading cannot go on);
    ``names``: each function's name beside its ID."""
    if header.type == FDR:
        for record in fdr_records(data, header):
            yield f"{record.offset:#08x}  {record_text(record, names)}\n"
    else:
        for basic in basic_records(data, header):
            yield f"{basic.offset:#08x}  {basic_text(basic, names)}\n"


def json_record(record: Record | BasicRecord, names: Mapping[int, str] | None = None
                ) -> dict[str, object]:
    """One record as a JSON object: its type, its fields (payloads as ``escaped``
    text), and its function's name where ``names`` has one."""
    out: dict[str, object] = {"record": type(record).__name__}
    for field, value in record._asdict().items():
        out[field] = escaped(value) if isinstance(value, bytes) else value
    func_id = out.get("func_id")
    if names and isinstance(func_id, int) and func_id in names:
        out["name"] = names[func_id]
    return out


def json_records(data: bytes, header: Header, names: Mapping[int, str] | None = None
                 ) -> Iterator[dict[str, object]]:
    """``json_record`` of every record, streamed as ``dump_lines``."""
    if header.type == FDR:
        yield from (json_record(record, names) for record in fdr_records(data, header))
    else:
        yield from (json_record(basic, names) for basic in basic_records(data, header))
