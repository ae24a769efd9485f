"""An XRay trace's records as lines: what ``llvm-xray fdr-dump`` says of each, after
the record's byte offset (payloads with their unprintable bytes escaped).

Each function's name is printed beside its ID where a map gives names; ``dump --json``'s
records come from here too. ``_whole_buffers`` is one loop over whole buffers of
function and metadata records (the general reader taking over at the first record it
does not read); where the compiled core is built ``_fast_buffers`` runs it in C
(``xray_dump``), this loop its reference and fallback."""

from __future__ import annotations

import struct
from collections.abc import Callable, Generator, Iterator, Mapping

from .. import core
from ..errors import DecodeError
from .records import (
    FDR,
    FUNC_KINDS,
    HEADER_SIZE,
    META_KINDS,
    METADATA_SIZE,
    BasicKind,
    BasicRecord,
    BufferExtents,
    CallArgument,
    CustomEvent,
    EndOfBuffer,
    FuncKind,
    Function,
    Header,
    MetaKind,
    NewBuffer,
    NewCpu,
    PidEntry,
    Record,
    TscWrap,
    TypedEvent,
    WallClock,
    basic_records,
    fdr_records,
    record_at,
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


def dump_lines(data: bytes, header: Header, names: Mapping[int, str] | None = None,
               read_to: Callable[[int], None] | None = None) -> Iterator[str]:
    """Every record's line (many lines at a time, where ``_whole_buffers`` or its
    compiled twin reads them), streamed (a DecodeError where reading cannot go on);
    ``names``: each function's name beside its ID; ``read_to(offset)``, called now and
    then: nothing before ``offset`` is read again (the caller may give those pages
    back)."""
    if header.type == FDR:
        start, buffer_end = yield from _fast_buffers(data, header, names or {}, read_to)
        records: Iterator[Record | BasicRecord] = fdr_records(data, header, start, buffer_end)
    else:
        records = basic_records(data, header)
    for count, record in enumerate(records, 1):
        text = basic_text(record, names) if isinstance(record, BasicRecord) \
            else record_text(record, names)
        yield f"{record.offset:#08x}  {text}\n"
        if read_to is not None and count % _LINES_AT_ONCE == 0:
            read_to(record.offset)


def _fast_buffers(data: bytes, header: Header, names: Mapping[int, str],
                  read_to: Callable[[int], None] | None = None
                  ) -> Generator[str, None, tuple[int, int | None]]:
    """``_whole_buffers`` through the compiled core's ``xray_dump`` (``csrc/xray.c``)
    where it is built, a chunk of lines a call: the same lines and the same place to
    hand back; else (or where the labels are not all text) the Python loop itself."""
    compiled = core.compiled()
    if compiled is None or header.version < 2 or header.order != "little":
        return (yield from _whole_buffers(data, header, names, read_to))
    labels = compiled.xray_labels(
        labels={func_id: function_id(func_id, names) for func_id in names}) if names else None
    if names and labels is None:
        return (yield from _whole_buffers(data, header, names, read_to))
    at, stop, more = HEADER_SIZE, None, True
    while more:
        text, at, stop, more = compiled.xray_dump(data=data, at=at, stop=stop, labels=labels,
                                                  lines=_LINES_AT_ONCE)
        if text:
            yield text
        if read_to is not None:
            read_to(at)
    return at, stop


_PAIRS = struct.Struct("<II")
_FUNCTION_WORDS = tuple(_FUNCTION[kind] for kind in FUNC_KINDS)


def _whole_buffers(data: bytes, header: Header, names: Mapping[int, str],
                   read_to: Callable[[int], None] | None = None
                   ) -> Generator[str, None, tuple[int, int | None]]:
    """The lines of buffers, many at a time, as ``fdr_records`` and ``record_text``
    give them but without an object per function record: little-endian traces from
    version 2, buffers whose extents hold whole function records and 16-byte metadata
    records.  At anything else (an event's payload, a second BufferExtents, a record
    that cannot be read, a buffer past the file's end) it returns where the general
    reader takes over: that record's offset and its buffer's end (None between
    buffers)."""
    at, end = HEADER_SIZE, len(data)
    if header.version < 2 or header.order != "little":
        return at, None
    words, view = _FUNCTION_WORDS, memoryview(data)
    labels = {func_id: function_id(func_id, names) for func_id in names}
    while at + METADATA_SIZE <= end and data[at] == _EXTENTS_BYTE:
        size = int.from_bytes(data[at + 1:at + 9], "little")
        first, stop = at + METADATA_SIZE, at + METADATA_SIZE + size
        if size % 8 or stop > end:
            return at, None
        lines = [f"{at:#08x}  {record_text(BufferExtents(at, size), names)}\n"]
        units = _PAIRS.iter_unpack(view[first:stop])
        pos = first
        for word, delta in units:
            if len(lines) >= _LINES_AT_ONCE:
                yield "".join(lines)
                lines.clear()
                if read_to is not None:
                    read_to(pos)
            if not word & 1:
                kind = (word >> 1) & 7
                if kind > 3:
                    break
                func_id = word >> 4
                label = labels.get(func_id) or f"#{func_id}"
                lines.append(f"{pos:#08x}  {words[kind]}: {label} delta = +{delta}\n")
                pos += 8
                continue
            if (word & 0xFF) >> 1 in _PAYLOAD_KINDS or next(units, None) is None:
                break
            try:
                record = record_at(data, pos, stop, header.version, header.order)
            except DecodeError:
                break
            lines.append(f"{pos:#08x}  {record_text(record, names)}\n")
            pos += METADATA_SIZE
        yield "".join(lines)
        if pos < stop:
            return pos, stop
        at = stop
    return at, None


_LINES_AT_ONCE = 4096
_EXTENTS_BYTE = META_KINDS.index(MetaKind.buffer_extents) << 1 | 1
_PAYLOAD_KINDS = frozenset(META_KINDS.index(k) for k in (
    MetaKind.custom_event, MetaKind.typed_event, MetaKind.buffer_extents))


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
