"""An XRay trace's header and records as they are written, streamed.

Facts: LLVM's FDR format document (version 1, 2017) and what LLVM 14's runtime
writes and ``llvm-xray`` reads (file versions 1 to 5 for FDR, 1 to 3 for basic
mode).  Multi-byte fields follow the producer's byte order, told by the header.

Records are named tuples, streamed (``fdr_records``): a record crossing its buffer's
extent is a ``Skipped`` up to the extent's end, as LLVM reads on.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..basics import Name
from ..errors import DecodeError
from ..kinds import XRAY_HEADER_SIZE, XRAY_TYPES, xray_byte_order
from ..typed import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from ..arch.base import ByteOrder

HEADER_SIZE = XRAY_HEADER_SIZE
BASIC, FDR = 0, 1
VERSIONS = XRAY_TYPES  # the file versions each trace type has had
METADATA_SIZE, FUNCTION_SIZE, BASIC_SIZE = 16, 8, 32


class Header(NamedTuple):
    """The 32-byte file header."""

    version: int
    type: int  # BASIC or FDR
    constant_tsc: bool
    nonstop_tsc: bool
    cycle_frequency: int
    buffer_size: int  # FDR: the per-thread buffer size the runtime was given
    order: ByteOrder


def read_header(data: bytes) -> Header:
    """The header; a DecodeError at byte 0 for bytes that do not start with one."""
    order = xray_byte_order(data)
    if order is None:
        raise DecodeError(0, "not an XRay trace (no 32-byte header with type 0 or 1 and "
                             "version 1 to 5)")
    bits = int.from_bytes(data[4:8], order)
    return Header(int.from_bytes(data[0:2], order), int.from_bytes(data[2:4], order),
                  bool(bits & 1), bool(bits & 2), int.from_bytes(data[8:16], order),
                  int.from_bytes(data[16:24], order), order)


class MetaKind(Name):
    """A metadata record's kind (byte 0 is ``kind << 1 | 1``)."""

    new_buffer = "NewBuffer"
    end_of_buffer = "EndOfBuffer"
    new_cpu = "NewCPUId"
    tsc_wrap = "TSCWrap"
    wall_clock = "WallClockTime"
    custom_event = "CustomEvent"
    call_argument = "CallArgument"
    buffer_extents = "BufferExtents"
    typed_event = "TypedEvent"
    pid = "PIDEntry"


META_KINDS = tuple(MetaKind)  # indexed by the kind number


class FuncKind(Name):
    """A function record's kind, ``(word >> 1) & 7``."""

    enter = "function-enter"
    exit = "function-exit"
    tail_exit = "function-tail-exit"
    enter_args = "function-enter-arg"


FUNC_KINDS = tuple(FuncKind)


class NewBuffer(NamedTuple):
    offset: int
    tid: int


class EndOfBuffer(NamedTuple):
    offset: int


class NewCpu(NamedTuple):
    offset: int
    cpu: int
    tsc: int


class TscWrap(NamedTuple):
    offset: int
    tsc: int


class WallClock(NamedTuple):
    offset: int
    seconds: int
    micros: int


class CustomEvent(NamedTuple):
    """Versions 1 to 4 carry the absolute TSC (4: and the CPU), 5 a delta instead."""

    offset: int
    size: int
    tsc: int | None
    cpu: int | None
    delta: int | None
    payload: bytes


class CallArgument(NamedTuple):
    offset: int
    value: int


class BufferExtents(NamedTuple):
    offset: int
    size: int  # the bytes of records that follow in this buffer


class TypedEvent(NamedTuple):
    offset: int
    size: int
    delta: int
    event_type: int
    payload: bytes


class PidEntry(NamedTuple):
    offset: int
    pid: int


class Function(NamedTuple):
    offset: int
    kind: FuncKind
    func_id: int
    delta: int


class Skipped(NamedTuple):
    """Bytes of a buffer the reader could not read, up to its extent's end, where it
    goes on (as LLVM's reader does on a "buffer over-read")."""

    offset: int
    end: int
    reason: str


Record = (NewBuffer | EndOfBuffer | NewCpu | TscWrap | WallClock | CustomEvent
          | CallArgument | BufferExtents | TypedEvent | PidEntry | Function | Skipped)


def _int(body: bytes, at: int, size: int, order: ByteOrder, signed: bool = False) -> int:
    return int.from_bytes(body[at:at + size], order, signed=signed)


def _payload(data: bytes, at: int, size: int, limit: int, what: str) -> bytes:
    """An event's payload after its record, which must end by ``limit``."""
    if size < 0 or at + size > limit:
        raise DecodeError(at - METADATA_SIZE, f"{what} of {size} bytes runs past "
                          f"{'the end of the file' if limit == len(data) else 'its buffer'}"
                          f" (byte {limit:#x})")
    return bytes(data[at:at + size])


def _metadata(data: bytes, at: int, limit: int, version: int, order: ByteOrder) -> Record:
    """The metadata record at ``at`` (whole within ``limit``) with any payload."""
    number = data[at] >> 1
    if number >= len(META_KINDS):
        raise DecodeError(at, f"unknown metadata record kind {number}")
    kind, body = META_KINDS[number], bytes(data[at + 1:at + METADATA_SIZE])
    if kind == MetaKind.new_buffer:
        return NewBuffer(at, _int(body, 0, 4, order, True))
    if kind == MetaKind.end_of_buffer:
        return EndOfBuffer(at)
    if kind == MetaKind.new_cpu:
        return NewCpu(at, _int(body, 0, 2, order), _int(body, 2, 8, order))
    if kind == MetaKind.tsc_wrap:
        return TscWrap(at, _int(body, 0, 8, order))
    if kind == MetaKind.wall_clock:
        return WallClock(at, _int(body, 0, 8, order, True), _int(body, 8, 4, order, True))
    if kind == MetaKind.call_argument:
        return CallArgument(at, _int(body, 0, 8, order))
    if kind == MetaKind.buffer_extents:
        return BufferExtents(at, _int(body, 0, 8, order))
    if kind == MetaKind.pid:
        return PidEntry(at, _int(body, 0, 4, order, True))
    size = _int(body, 0, 4, order, True)
    start = at + METADATA_SIZE
    if kind == MetaKind.typed_event:
        return TypedEvent(at, size, _int(body, 4, 4, order, True), _int(body, 8, 2, order),
                          _payload(data, start, size, limit, "a typed event"))
    payload = _payload(data, start, size, limit, "a custom event")
    if version >= 5:
        return CustomEvent(at, size, None, None, _int(body, 4, 4, order, True), payload)
    cpu = _int(body, 12, 2, order) if version == 4 else None
    return CustomEvent(at, size, _int(body, 4, 8, order), cpu, None, payload)


def _function(data: bytes, at: int, order: ByteOrder) -> Function:
    word = int.from_bytes(data[at:at + 4], order)
    number = (word >> 1) & 7
    if number >= len(FUNC_KINDS):
        raise DecodeError(at, f"unknown function record kind {number}")
    return Function(at, FUNC_KINDS[number], word >> 4, int.from_bytes(data[at + 4:at + 8], order))


def record_at(data: bytes, at: int, limit: int, version: int, order: ByteOrder) -> Record:
    """The record at ``at``, which with its payload must end by ``limit`` (the buffer's
    extent or the file's end)."""
    size = METADATA_SIZE if data[at] & 1 else FUNCTION_SIZE
    if at + size > limit:
        what = "metadata" if size == METADATA_SIZE else "function"
        where = "the file ends" if limit == len(data) else "its buffer's extent ends"
        raise DecodeError(at, f"{where} inside a {size}-byte {what} record "
                              f"({limit - at} bytes of it)")
    if size == METADATA_SIZE:
        return _metadata(data, at, limit, version, order)
    return _function(data, at, order)


def record_size(record: Record) -> int:
    """The bytes a record and its payload take."""
    if isinstance(record, Function):
        return FUNCTION_SIZE
    if isinstance(record, (CustomEvent, TypedEvent)):
        return METADATA_SIZE + len(record.payload)
    if isinstance(record, Skipped):
        return record.end - record.offset
    return METADATA_SIZE


def fdr_records(data: bytes, header: Header, start: int = HEADER_SIZE,
                buffer_end: int | None = None) -> Iterator[Record]:
    """Every record of an FDR trace in file order, one at a time (from ``start``: the
    header's end, or a record inside the buffer whose extent ends at ``buffer_end``).

    From version 2 each buffer is a BufferExtents record and that many bytes: a record
    that crosses the extent or cannot be read is a ``Skipped`` up to the extent's end,
    where reading goes on.  Version 1 buffers end with EndOfBuffer and padding to the
    header's buffer size.  A DecodeError where the file ends inside a record or holds
    one that cannot be read outside any extent."""
    at, end = start, len(data)  # buffer_end: the current buffer's extent's end (v2 on)
    while at < end:
        if buffer_end is not None and at >= buffer_end:
            buffer_end = None
        limit = end if buffer_end is None else min(buffer_end, end)
        try:
            record = record_at(data, at, limit, header.version, header.order)
        except DecodeError as exc:
            if buffer_end is None or buffer_end > end:
                raise
            yield Skipped(at, buffer_end, exc.message)
            at = buffer_end
            continue
        yield record
        at += record_size(record)
        if isinstance(record, BufferExtents) and header.version >= 2:
            buffer_end = at + record.size
        elif isinstance(record, EndOfBuffer) and header.version == 1:
            at = _v1_buffer_end(at, header.buffer_size, end)


def _v1_buffer_end(at: int, buffer_size: int, end: int) -> int:
    """Where the next version-1 buffer starts: buffers are ``buffer_size`` bytes each
    after the header (the rest of this one padding); the record's end where the size
    is 0 (no padding), the file's end where the buffer runs past it."""
    if buffer_size <= 0:
        return at
    used = at - HEADER_SIZE
    return min(HEADER_SIZE + -(-used // buffer_size) * buffer_size, end)


class BasicKind(Name):
    """What a basic-mode record is: a function record or the argument after one."""

    function = "function"
    argument = "argument"


class BasicRecord(NamedTuple):
    """A basic-mode record (32 bytes): a function record, or (``argument``) the value
    of the previous one's first argument, with its function, thread and process."""

    offset: int
    kind: BasicKind
    func_kind: FuncKind | None
    func_id: int
    cpu: int
    tsc: int
    tid: int
    pid: int
    argument: int


def basic_records(data: bytes, header: Header) -> Iterator[BasicRecord]:
    """Every record of a basic-mode trace, one at a time; a DecodeError at a record of
    an unknown type or kind, or where the file ends inside one."""
    order = header.order
    for at in range(HEADER_SIZE, len(data), BASIC_SIZE):
        if at + BASIC_SIZE > len(data):
            raise DecodeError(at, f"the file ends inside a 32-byte record ({len(data) - at} "
                                  "bytes of it)")
        record = bytes(data[at:at + BASIC_SIZE])
        yield _basic(record, at, order)


def _basic(record: bytes, at: int, order: ByteOrder) -> BasicRecord:
    kind = _int(record, 0, 2, order)
    func_id = _int(record, 4, 4, order, True)
    if kind == 1:
        return BasicRecord(at, BasicKind.argument, None, func_id, 0, 0, _int(record, 8, 4, order),
                           _int(record, 12, 4, order), _int(record, 16, 8, order))
    if kind != 0:
        raise DecodeError(at, f"unknown basic-mode record type {kind}")
    if record[3] >= len(FUNC_KINDS):
        raise DecodeError(at + 3, f"unknown function record kind {record[3]}")
    return BasicRecord(at, BasicKind.function, FUNC_KINDS[record[3]], func_id, record[2],
                       _int(record, 8, 8, order), _int(record, 16, 4, order),
                       _int(record, 20, 4, order), 0)
