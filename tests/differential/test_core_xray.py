"""The compiled XRay loops (``csrc/xray.c``) against the Python loops they were
written from, which stay the reference and the fallback: ``xray_dump`` against
``xray/text.py``'s ``_whole_buffers`` (the same text and the same place to hand back
to the general reader, from any chunk size) and ``xray_stacks`` against
``xray/fast.py``'s ``python_stacks`` (the same stacks and notes, in the same order,
or both None).

On the real traces clang-14's runtime writes here (``tests/differential/test_xray.py``'s
programs, with and without names), on hand-made traces that reach every point where
the Python loops decline or hand back (each metadata kind, each function kind, a
record cut by its extent, a buffer past the file's end, TSCs past 64 bits), and on
damaged ones: a small trace cut at every offset and traces with bytes changed at
random.  ``dump_lines`` and ``fdr_stacks`` are also run whole with each core picked
(``CFI2SFRAME_CORE``): the same lines and errors."""

from __future__ import annotations

import random
import struct
from types import ModuleType

import pytest

from cfi2sframe.xray.fast import fdr_stacks, python_stacks
from cfi2sframe.xray.instr_map import id_names, open_instr_map
from cfi2sframe.xray.records import HEADER_SIZE, read_header
from cfi2sframe.xray.text import dump_lines
from tests.conftest import compiled_core, require
from tests.support.xray_compare import c_dump, check, python_dump, readable, whole_dump
from tests.support.xray_programs import make_traces
from tests.support.xray_traces import block, custom, func, header, meta


@pytest.fixture(scope="module")
def core() -> ModuleType:
    return compiled_core()


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[bytes, dict[int, str]]]:
    """name -> (trace, the names its program's map gives)."""
    require("clang-14", "llvm-xray-14")
    traces = make_traces(tmp_path_factory.mktemp("core-xray"))
    return {name: (trace.read_bytes(), id_names(open_instr_map(str(trace.parent / name))))
            for name, trace in traces.items()}


def both_cores(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    """``dump_lines`` and ``fdr_stacks`` whole, with the compiled core and without."""
    seen = []
    for pick in ("", "python"):
        monkeypatch.setenv("CFI2SFRAME_CORE", pick)
        stacks: object = None
        if readable(data):
            stacks = fdr_stacks(data, read_header(data), True)
        seen.append((whole_dump(data), stacks))
    monkeypatch.delenv("CFI2SFRAME_CORE")
    assert seen[0] == seen[1]


def test_real_traces(core: ModuleType, real: dict[str, tuple[bytes, dict[int, str]]],
                     monkeypatch: pytest.MonkeyPatch) -> None:
    for data, names in real.values():
        assert names
        check(core, data, None, (4096, 7, 1))
        check(core, data, names, (4096, 3))
        both_cores(monkeypatch, data)
    # a real trace the C loops read to its end (the events trace hands back earlier)
    data, _ = real["fdr"]
    text, (at, stop) = c_dump(core, data, {})
    assert (at, stop) == (len(data), None) and text.count("\n") > 10
    assert core.xray_stacks(data=data, per_thread=False) is not None


def test_names(core: ModuleType) -> None:
    """Labels beside IDs: non-ASCII names, IDs no record can have, keys and names
    the compiled loop does not take (then it declines, and the Python loop runs)."""
    data = header() + block(7, func(0, 1, 0) + func(0, 2, 1) + func(1, 2, 3) + func(3, 5, 1)
                            + func(2, (1 << 28) - 1, 4) + func(1, 1, 9))
    names = {1: "main", 2: "ns::f(int) — ünïcode", 5: "", -3: "x", 1 << 40: "y",
             (1 << 28) - 1: "last"}
    check(core, data, names, (4096, 1, 2))
    assert core.xray_labels(labels={"1": "#1 a"}) is None
    assert core.xray_labels(labels={1: b"#1 a"}) is None
    assert core.xray_labels(labels={1: "#1 \udcff"}) is None
    odd = {1: "\udcff"}  # dump_lines hands such names to the Python loop
    assert "".join(dump_lines(data, read_header(data), odd)) == python_dump(data, odd)[0]


def _records() -> bytes:
    """Every record the loops read: each function kind, each metadata kind without a
    payload, calls that close out of order, exits without an entry, a TSC going back."""
    return (meta(6, struct.pack("<Q", 0)) + func(0, 1, 0) + func(3, 2, 4)
            + meta(6, struct.pack("<Q", 2**64 - 1)) + func(1, 2, 3)
            + meta(3, struct.pack("<Q", 5000)) + func(2, 1, 2) + func(0, 3, 1)
            + func(0, 4, 1) + func(0, 5, 2) + func(1, 3, 1)  # closes 5 and 4 too
            + meta(2, struct.pack("<HQ", 65535, 900)) + func(1, 9, 1)  # unmatched
            + func(0, 6, 7) + meta(3, struct.pack("<Q", 10)) + func(1, 6, 1)  # backwards
            + meta(4, struct.pack("<qi", -7, -5)) + meta(4, struct.pack("<qi", 2**63 - 1, 123))
            + meta(9, struct.pack("<i", -1)) + func(0, 7, 2**32 - 1) + func(0, 8, 0))


def hand_made() -> list[bytes]:
    """Traces whose every buffer the loops read, and one for each place they stop."""
    plain = _records()
    out = [header(),  # no buffer at all
           header() + block(7, plain) + block(-8, plain) + block(7, func(1, 7, 3)),
           header() + meta(7, struct.pack("<Q", 0)) + block(2**31 - 1, plain),  # empty buffer
           header(version=2) + block(-2**31, plain, pid=False),
           header(version=3) + block(0, plain)]
    # TSCs past 64 bits: sums and spans only exact in 128 bits
    wrap = (meta(3, struct.pack("<Q", 2**64 - 2)) + func(0, 1, 0) + func(0, 2, 2**32 - 1)
            + func(1, 2, 2**32 - 1) + func(1, 1, 2**32 - 1) + func(0, 1, 1)
            + meta(3, struct.pack("<Q", 0)) + func(1, 1, 1))
    out.append(header() + block(3, wrap * 3))
    good = header() + block(7, plain)
    for kind in range(128):  # each metadata kind, the payload ones and unknown ones
        record = bytes([kind << 1 | 1]) + bytes(range(1, 16))
        out.append(good + block(8, func(0, 1, 1) + record + func(1, 1, 1)))
        out.append(good + block(8, func(0, 1, 1) + record))  # the buffer's last 16 bytes
        out.append(good + block(8, func(0, 1, 1))[:-8] + record[:8])  # cut by its extent
    for kind in range(8):  # each function kind
        out.append(good + block(8, func(0, 2, 1) + func(kind, 2, 1)))
    out += [good + custom(5, b"abc"),  # outside any buffer
            good + block(8, func(0, 1, 1) + custom(5, b"ab'\\\x00\x7f", delta=2)),
            good + block(8, meta(8, struct.pack("<iiH", 2, 1, 3)) + b"xy"),
            good + block(8, func(0, 1, 1), extra=8),  # the extent past the file's end
            good + block(8, func(0, 1, 1), extra=4),  # not a multiple of 8
            good + block(8, func(0, 1, 1), extra=-4),
            good + b"\x0f" * 15,  # an extents record's first 15 bytes
            good + meta(7, struct.pack("<Q", 2**64 - 8)),
            good + meta(7, struct.pack("<Q", 2**63)) + b"\0" * 8,
            good + func(0, 1, 1)]  # a function record between buffers
    for version in (1, 2, 4, 5):  # the loops are not given version 1 or big-endian
        out.append(header(version) + block(7, plain, version=version, buffer_size=4096))
    big = bytearray(good)
    big[0:2], big[2:4] = big[1::-1], big[3:1:-1]
    out.append(bytes(big))
    return out


def test_hand_made(core: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    names = {1: "one", 2: "two", 7: "seven"}
    ends = {"read": 0, "declined": 0, "to the end": 0, "in a buffer": 0, "between": 0}
    for data in hand_made():
        check(core, data, None, (4096, 1, 2, 3))
        check(core, data, names)
        both_cores(monkeypatch, data)
        if readable(data):
            read = core.xray_stacks(data=data, per_thread=True) is not None
            ends["read" if read else "declined"] += 1
            at, stop = python_dump(data, {})[1]
            ends["to the end" if at == len(data) else
                 "between" if stop is None else "in a buffer"] += 1
    assert min(ends.values()) >= 5, ends  # every way out taken


def test_cut_at_every_offset(core: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    data = header() + block(7, _records()) + block(8, func(0, 1, 0) + func(1, 1, 9))
    for cut in range(HEADER_SIZE, len(data) + 1):
        check(core, data[:cut], None, (4096, 2))
        both_cores(monkeypatch, data[:cut])


def test_damaged(core: ModuleType) -> None:
    rng = random.Random(41)
    names = {1: "one", 3: "three"}
    bases = [header() + block(7, _records()) + block(8, func(0, 1, 0) + func(1, 1, 9)),
             header() + block(7, _records() + func(0, 3, 1) + custom(5, b"abc", delta=2)
                              + func(1, 3, 1))]
    for base in bases:
        for _ in range(600):
            damaged = bytearray(base)
            for _ in range(rng.randint(1, 4)):
                at = rng.randrange(HEADER_SIZE, len(damaged))
                if rng.random() < 0.5:
                    damaged[at] ^= 1 << rng.randrange(8)
                else:
                    damaged[at] = rng.randrange(256)
            cut = rng.choice([len(damaged), rng.randrange(HEADER_SIZE, len(damaged))])
            check(core, bytes(damaged[:cut]), names if rng.random() < 0.3 else None,
                  (4096, rng.randint(1, 5)))


def test_bad_calls(core: ModuleType) -> None:
    """Positions that are no record's are refused, not read."""
    data = header() + block(7, func(0, 1, 0))
    for at, stop in ((-1, None), (len(data) + 1, None), (40, 44), (40, len(data) + 8),
                     (48, 40)):
        with pytest.raises(ValueError):
            core.xray_dump(data=data, at=at, stop=stop, labels=None, lines=10)
    with pytest.raises(ValueError):
        core.xray_dump(data=data, at=32, stop=None, labels=None, lines=0)
    with pytest.raises(ValueError):
        core.xray_dump(data=data, at=32, stop=None, labels=object(), lines=5)
    assert core.xray_stacks(data=b"", per_thread=False) is None


def test_fallback_used_without_core(monkeypatch: pytest.MonkeyPatch) -> None:
    """CFI2SFRAME_CORE=python: the Python loops answer."""
    monkeypatch.setenv("CFI2SFRAME_CORE", "python")
    data = header() + block(7, _records())
    assert fdr_stacks(data, read_header(data)) == python_stacks(data)
    assert "".join(dump_lines(data, read_header(data))) == python_dump(data, {})[0]
