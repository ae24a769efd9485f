"""Hostile XRay traces (issue 41): traces built here byte by byte from LLVM's FDR
format document and the notes (xray-notes.md), then cut at every byte and flipped
at every bit.  Only findings and located errors may come out; never a traceback,
and nothing allocated for what a header or record only claims.  The findings
expected of hand-made problems are derived from the format, not from our output.
"""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest

from cfi2sframe.errors import DecodeError
from cfi2sframe.xray.check import check_trace
from cfi2sframe.xray.expand import events
from cfi2sframe.xray.fast import fdr_stacks
from cfi2sframe.xray.records import read_header
from cfi2sframe.xray.report import account
from cfi2sframe.xray.stacks import StackWalk, build_stacks
from cfi2sframe.xray.text import dump_lines
from tests.conftest import cfi2sframe
from tests.support.xray_traces import block, func, header, meta

BODY = (func(3, 1, 0) + meta(6, struct.pack("<Q", 41)) + func(0, 2, 10)
        + meta(5, struct.pack("<ii", 3, 4)) + b"abc" + func(1, 2, 5) + func(1, 1, 6))
TRACE = header() + block(7, BODY) + block(8, func(0, 3, 1) + func(2, 3, 2))
BLOCK_END = 32 + len(block(7, BODY))  # a trace whose second buffer was never written


def findings(data: bytes) -> list[tuple[int, str]]:
    return [(f.offset, f.message) for f in check_trace(data)]


def test_the_hand_made_trace_reads_as_the_format_says() -> None:
    assert findings(TRACE) == []
    got = [(str(e.kind), e.func_id, e.tsc, e.tid, e.pid, e.args, e.data)
           for e in events(TRACE)]
    assert got == [("function-enter-arg", 1, 1000, 7, 42, (41,), b""),
                   ("function-enter", 2, 1010, 7, 42, (), b""),
                   ("custom-event", 0, 1014, 7, 42, (), b"abc"),
                   ("function-exit", 2, 1019, 7, 42, (), b""),
                   ("function-exit", 1, 1025, 7, 42, (), b""),
                   ("function-enter", 3, 1001, 8, 42, (), b""),
                   ("function-tail-exit", 3, 1003, 8, 42, (), b"")]


EXTENTS = 32 + 16  # where the first block's records start
PROBLEMS = {
    "typed-event shortfall": (
        # The runtime flushes only the extent's bytes: the last 16 are never written.
        (header() + block(7, func(0, 1, 0) + meta(8, struct.pack("<iiH", 2, 1, 9)) + b"xy"
                          + func(1, 1, 1) + meta(5, struct.pack("<ii", 5, 0)) + b"hello",
                          extra=-16))[:-16]
        + block(8, func(0, 3, 1)),
        "LLVM 14's runtime adds only the payload"),
    "exit of another function": (header() + block(7, func(0, 1, 0) + func(1, 2, 1)),
                                 "exit of function #2 while #1 is the innermost open call"),
    "argument after a plain enter": (
        header() + block(7, func(0, 1, 0) + meta(6, struct.pack("<Q", 1))),
        "CallArgument not after an enter with arguments"),
    "no PID in version 5": (header() + block(7, func(0, 1, 0), pid=False),
                            "no PIDEntry after WallClockTime"),
    "TSC backwards": (header() + block(7, func(0, 1, 9) + meta(2, struct.pack("<HQ", 2, 5))),
                      "NewCPUId takes the TSC back from 1009 to 5 without a TSCWrap"),
    "zero cycle frequency": (header(freq=0) + block(7, b""), "the cycle frequency is 0"),
    "basic mode version 5": (header(kind=0), "basic-mode traces have versions 1 to 3"),
    "EndOfBuffer in version 5": (header() + block(7, meta(1, b"")),
                                 "EndOfBuffer in a version 5 trace"),
    "grammar": (header() + meta(7, struct.pack("<Q", 16)) + meta(4, b""),
                "WallClockTime after BufferExtents"),
}


@pytest.mark.parametrize("name", PROBLEMS)
def test_each_problem_is_found(name: str) -> None:
    data, words = PROBLEMS[name]
    found = findings(data)
    assert any(words in message for _, message in found), found


def test_verify_prints_every_problem_with_byte_and_block(tmp_path: Path) -> None:
    data = header(freq=0) + block(7, func(0, 1, 0) + func(1, 2, 1), pid=False)
    (tmp_path / "t.fdr").write_bytes(data)
    proc = cfi2sframe("verify", "t.fdr", cwd=tmp_path)
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    # header, the missing PID (at NewCPUId, byte 32+16*3), the exit (byte 32+16*4+8)
    assert lines[0] == "t.fdr: at byte 0x8: header: the cycle frequency is 0: no TSC can " \
                       "be turned into time"
    assert lines[1].startswith(f"t.fdr: at byte {32 + 48:#x}: block 1 (thread 7): no PIDEntry")
    assert lines[2].startswith(f"t.fdr: at byte {32 + 72:#x}: block 1 (thread 7): exit of "
                               "function #2 while #1")
    assert lines[3] == "t.fdr: FAILED: FDR trace, 3 problems"


def _everything(data: bytes) -> None:
    """What the commands run on a trace: only DecodeErrors may leave them."""
    try:
        read_header(data)
    except DecodeError:
        return
    list(check_trace(data))
    runs = (lambda: list(events(data)), lambda: list(dump_lines(data, read_header(data))),
            lambda: build_stacks(events(data), True),
            lambda: fdr_stacks(data, read_header(data), True),
            lambda: account(StackWalk().calls(events(data))))
    for run in runs:
        try:
            run()
        except DecodeError:
            pass


def test_every_cut_is_a_finding_or_a_located_error(tmp_path: Path) -> None:
    for end in range(len(TRACE) + 1):
        _everything(TRACE[:end])
        if end > 32 and end not in (len(TRACE), BLOCK_END):
            assert findings(TRACE[:end]), end  # the cut is said
    cut = TRACE[:EXTENTS + 16 * 4 + 4]  # inside the first function record
    (tmp_path / "cut.fdr").write_bytes(cut)
    dump = cfi2sframe("dump", "cut.fdr", cwd=tmp_path)
    assert dump.returncode == 1
    assert dump.stderr.strip() == (f"cut.fdr: error: at byte {EXTENTS + 64:#x}: the file ends "
                                   "inside a 8-byte function record (4 bytes of it)")
    assert dump.stdout.count("\n") == 6  # the header line and the five whole records
    verify = cfi2sframe("verify", "cut.fdr", cwd=tmp_path)
    assert verify.returncode == 1
    assert f"at byte {EXTENTS + 64:#x}: block 1 (thread 7): the file ends inside" in verify.stdout


def test_every_bit_flip_is_bounded() -> None:
    started = time.perf_counter()
    for at in range(len(TRACE)):
        for bit in range(8):
            flipped = bytearray(TRACE)
            flipped[at] ^= 1 << bit
            _everything(bytes(flipped))
    assert time.perf_counter() - started < 30


def test_claims_allocate_nothing() -> None:
    """A header's buffer size, an extent or an event size near 2**63 is read as a
    number: the walk stops at the file's end with a located error or finding."""
    huge = header(version=1, size=2**64 - 1) + meta(0, b"\1") + meta(4, b"") + meta(2, b"") \
        + meta(1, b"")
    assert findings(huge) == []
    claims = header() + meta(7, struct.pack("<Q", 2**63)) \
        + meta(5, struct.pack("<ii", 2**31 - 1, 0))
    found = findings(claims)
    assert any("runs past the end of the file" in m for _, m in found), found
    with pytest.raises(DecodeError):
        list(events(claims))


def test_dump_json_closes_its_object_where_a_trace_is_cut(tmp_path: Path) -> None:
    """``dump --json`` of a trace cut inside a record: still one JSON object, holding
    the records before the cut and the error, then the located error (exit 1)."""
    import json

    whole = cfi2sframe("dump", "--json", str(_written(tmp_path, "whole", TRACE)),
                       cwd=tmp_path)
    assert whole.returncode == 0
    records = json.loads(whole.stdout)["records"]
    # two buffers: extents and 4 preamble records each, 6 body records, then 2
    assert len(records) == 18 and records[0]["record"] == "BufferExtents"
    cut = _written(tmp_path, "cut", TRACE[:BLOCK_END + 16 + 3])  # inside NewBuffer
    proc = cfi2sframe("dump", "--json", str(cut), cwd=tmp_path)
    assert proc.returncode == 1
    out = json.loads(proc.stdout)
    assert out["records"] == records[:len(out["records"])] and len(out["records"]) == 12
    assert out["error"]["offset"] == BLOCK_END + 16
    assert proc.stderr.startswith(f"{cut}: error: at byte {BLOCK_END + 16:#x}")


def _written(folder: Path, name: str, data: bytes) -> Path:
    path = folder / name
    path.write_bytes(data)
    return path
