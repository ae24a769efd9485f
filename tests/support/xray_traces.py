"""XRay traces built byte by byte from LLVM's FDR format document and the notes
(xray-notes.md), for the tests: every version's layout, written little-endian."""

from __future__ import annotations

import struct


def header(version: int = 5, kind: int = 1, freq: int = 10**9, size: int = 4096) -> bytes:
    """The 32-byte header: version, type, both TSC bits, frequency, buffer size."""
    return struct.pack("<HHIQQ8x", version, kind, 3, freq, size)


def meta(kind: int, body: bytes) -> bytes:
    """A metadata record: ``kind << 1 | 1`` and a 15-byte body."""
    return bytes([kind << 1 | 1]) + body.ljust(15, b"\0")


def func(kind: int, func_id: int, delta: int) -> bytes:
    """A function record: kind in bits 1-3, ID from bit 4, then the TSC delta."""
    return struct.pack("<II", func_id << 4 | kind << 1, delta)


def custom(version: int, payload: bytes, tsc: int = 0, delta: int = 0, cpu: int = 0) -> bytes:
    """A custom event in the version's layout: v1-3 size and TSC, v4 and the CPU, v5 size
    and TSC delta; the payload after the record."""
    if version >= 5:
        body = struct.pack("<ii", len(payload), delta)
    else:
        body = struct.pack("<iQ", len(payload), tsc)
        body += struct.pack("<H", cpu) if version == 4 else b""
    return meta(5, body) + payload


def preamble(version: int, tid: int, pid: int, tsc: int, cpu: int = 1) -> bytes:
    """NewBuffer, WallClockTime, PIDEntry (from version 3) and NewCPUId."""
    out = meta(0, struct.pack("<i", tid)) + meta(4, struct.pack("<qi", 7, 5))
    out += meta(9, struct.pack("<i", pid)) if version >= 3 else b""
    return out + meta(2, struct.pack("<HQ", cpu, tsc))


def block(tid: int, body: bytes, pid: bool = True, extra: int = 0, tsc: int = 1000,
          version: int = 5, buffer_size: int = 0) -> bytes:
    """One buffer: from version 2 extents then the records; version 1 the records,
    EndOfBuffer and padding to ``buffer_size``."""
    records = preamble(version if pid else 2, tid, 42, tsc) + body
    if version == 1:
        records += meta(1, b"")
        return records.ljust(buffer_size, b"\0")
    return meta(7, struct.pack("<Q", len(records) + extra)) + records
