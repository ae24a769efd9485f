"""``stacks`` (issue 41): call stacks rebuilt from real traces made here by clang-14's
runtime (FDR single- and multi-threaded, -O2 with a tail call, -O0 with recursion,
arguments and a custom event; basic mode), against ``llvm-xray-14 stack`` (its flame
values are each stack's *inclusive* cycles: our self time must be that less the
children's, our inclusive equal to it) and ``llvm-xray-14 account`` where it is right.
Where llvm-xray is wrong or does not answer (account on a multi-threaded trace whose
first thread in its hash-map order is not the oldest; an exit without an entry), the
answer is derived by hand from the records.  Function names come from
``llvm-xray-14 extract --symbolize BIN``."""

from __future__ import annotations

import json
import struct
import subprocess
from collections import Counter, defaultdict
from fractions import Fraction
from pathlib import Path

import pytest
import yaml

from cfi2sframe import DecodeError, xray_events, xray_stacks
from cfi2sframe.xray.expand import events
from cfi2sframe.xray.fast import fdr_stacks
from cfi2sframe.xray.records import basic_records, fdr_records, read_header
from cfi2sframe.xray.stacks import build_stacks
from cfi2sframe.xray.text import basic_text, record_text
from tests.conftest import cfi2sframe, require
from tests.support.xray_compare import whole_dump
from tests.support.xray_programs import TRACES, make_traces
from tests.support.xray_traces import block, func, header

NAMED = ["fdr", "fdr-threads", "basic"]


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """name -> (trace, the program that wrote it)."""
    require("clang-14", "llvm-xray-14")
    assert set(NAMED) <= set(TRACES)
    made = make_traces(tmp_path_factory.mktemp("xray-stacks"), NAMED)
    return {name: (trace, trace.parent / name) for name, trace in made.items()}


def names_of(binary: Path) -> dict[int, str]:
    """Function ID -> demangled name, from ``llvm-xray-14 extract --symbolize``."""
    out = subprocess.run(["llvm-xray-14", "extract", "--symbolize", str(binary)],
                         capture_output=True, text=True, check=True).stdout
    return {entry["id"]: entry["function-name"] for entry in yaml.safe_load(out)}


def llvm_stack(trace: Path, binary: Path, *options: str) -> Counter[str]:
    """``llvm-xray-14 stack -all-stacks -stack-format=flame`` lines, the trailing ``;``
    of each stack taken off: stack -> value (summed where a line repeats)."""
    out = subprocess.run(["llvm-xray-14", "stack", "-m", str(binary), "-all-stacks",
                          "-stack-format=flame", *options, str(trace)],
                         capture_output=True, text=True, check=True).stdout
    values: Counter[str] = Counter()
    for line in out.splitlines():
        stack, value = line.rsplit(" ", 1)
        values[stack.removesuffix(";")] += int(value)
    return values


def ns(cycles: int, frequency: int) -> int:
    """Nanoseconds, nearest, halves up (as docs/xray.md says), by Fraction."""
    exact = Fraction(cycles * 10**9, frequency)
    return int(exact + Fraction(1, 2)) if exact >= 0 else -int(-exact + Fraction(1, 2))


def frequency_of(trace: Path) -> int:
    return int.from_bytes(trace.read_bytes()[8:16], "little")


def _self_from_inclusive(inclusive: Counter[str]) -> Counter[str]:
    """Each stack's self cycles: its inclusive less its children's (one frame more)."""
    own = Counter(inclusive)
    for stack, value in inclusive.items():
        parent = stack.rsplit(";", 1)[0]
        if ";" in stack and parent in own:
            own[parent] -= value
    return own


@pytest.mark.parametrize("name", NAMED)
def test_inclusive_and_self_match_llvm_stack(traces: dict[str, tuple[Path, Path]],
                                             name: str) -> None:
    """Per thread: our inclusive cycles are llvm-xray's flame values, stack by stack,
    and our self cycles are those less the children's."""
    trace, binary = traces[name]
    names = names_of(binary)
    theirs = llvm_stack(trace, binary, "-aggregation-type=time")
    stacks = xray_stacks(xray_events(trace.read_bytes()), per_thread=True)
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    for total in stacks.stacks:
        key = ";".join([f"thread_{total.thread}", *(names[f] for f in total.path)])
        inclusive[key] += total.inclusive
        own[key] += total.self_cycles
    assert inclusive == theirs
    assert own == _self_from_inclusive(theirs)
    assert len(theirs) >= 4
    # What flamegraph.pl draws is the sum of a stack's lines and its descendants':
    # ours gives each root its inclusive time, llvm-xray's counts callees again.
    for root in (key for key in theirs if key.count(";") == 1):
        below = [key for key in theirs if key == root or key.startswith(root + ";")]
        assert sum(own[key] for key in below) == theirs[root]
        if len(below) > 1:
            assert sum(theirs[key] for key in below) > theirs[root]
    # -O0: worker;rec;rec;rec (recursion); basic: worker;argf; -O2 alone: flat
    depth = max(key.count(";") for key in theirs)
    assert depth >= {"fdr": 1, "basic": 2, "fdr-threads": 4}[name], "no nesting"


@pytest.mark.parametrize("name", NAMED)
def test_folded_command_is_self_nanoseconds_merged(traces: dict[str, tuple[Path, Path]],
                                                   name: str) -> None:
    """The command's folded lines: llvm-xray's per-thread inclusive values turned into
    self cycles, summed over threads and converted once; sorted; with ``--binary``
    named as llvm-xray names them, without it ``#ID``; and ``--count`` as llvm-xray's
    count aggregation."""
    trace, binary = traces[name]
    ids = {v: f"#{k}" for k, v in names_of(binary).items()}
    frequency = frequency_of(trace)

    def as_ids(stack: str) -> str:
        return ";".join(ids[frame] for frame in stack.split(";"))

    merged: Counter[str] = Counter()
    for stack, value in _self_from_inclusive(
            llvm_stack(trace, binary, "-aggregation-type=time")).items():
        merged[stack.split(";", 1)[1]] += value
    named = [f"{stack} {ns(value, frequency)}" for stack, value in sorted(merged.items())]
    proc = cfi2sframe("stacks", str(trace), "--binary", str(binary), cwd=trace.parent)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == named
    by_id: Counter[str] = Counter()
    for stack, value in merged.items():
        by_id[as_ids(stack)] += value
    proc = cfi2sframe("stacks", str(trace), cwd=trace.parent)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"{stack} {ns(value, frequency)}"
                                        for stack, value in sorted(by_id.items())]

    counts = llvm_stack(trace, binary, "-aggregation-type=count", "-aggregate-threads")
    proc = cfi2sframe("stacks", str(trace), "--count", cwd=trace.parent)
    assert proc.stdout.splitlines() == sorted(f"{as_ids(s)} {n}" for s, n in counts.items())
    if name == "fdr":  # -O2: tailer's call to leaf is a tail call, leaf its sibling
        tailer, leaf = ids["tailer(int)"], ids["leaf(int)"]
        assert f"{leaf} 1" in proc.stdout.splitlines()
        assert f"tail exits: 1 ({tailer} 1)" in proc.stderr
        assert f"{tailer};{leaf}" not in proc.stdout


def test_per_thread_lines(traces: dict[str, tuple[Path, Path]]) -> None:
    """--per-thread: llvm-xray's own per-thread stacks, counted."""
    trace, binary = traces["fdr-threads"]
    ids = {v: f"#{k}" for k, v in names_of(binary).items()}
    counts = llvm_stack(trace, binary, "-aggregation-type=count")
    want = sorted(";".join([s.split(";")[0]] + [ids[f] for f in s.split(";")[1:]]) + f" {n}"
                  for s, n in counts.items())
    proc = cfi2sframe("stacks", str(trace), "--count", "--per-thread", cwd=trace.parent)
    assert proc.stdout.splitlines() == want
    assert len({line.split(";")[0] for line in want}) == 3


def _yaml(trace: Path) -> list[dict[str, object]]:
    out = subprocess.run(["llvm-xray-14", "convert", "-f", "yaml", str(trace)],
                         capture_output=True, text=True, check=True).stdout
    records: list[dict[str, object]] = yaml.safe_load(out)["records"]
    return records


def _durations_by_hand(trace: Path) -> dict[int, list[int]]:
    """Each function's call durations from ``convert -f yaml``'s records, paired per
    thread with a plain stack (the trace is balanced: each exit closes the top)."""
    open_calls: dict[int, list[tuple[int, int]]] = defaultdict(list)
    spans: dict[int, list[int]] = defaultdict(list)
    for r in _yaml(trace):
        stack = open_calls[int(r["thread"])]  # type: ignore[call-overload]
        if str(r["kind"]).startswith("function-enter"):
            stack.append((int(r["func-id"]), int(r["tsc"])))  # type: ignore[call-overload]
        elif str(r["kind"]).endswith("exit"):
            func_id, start = stack.pop()
            assert func_id == r["func-id"]
            spans[func_id].append(int(r["tsc"]) - start)  # type: ignore[call-overload]
    return spans


def _account_lines(spans: dict[int, list[int]], frequency: int) -> list[str]:
    """The rows docs/xray.md defines: sorted durations, the element at n*p//100."""
    lines = ["funcid calls min median p90 p99 max sum function"]
    for func_id, durations in sorted(spans.items()):
        d, n = sorted(durations), len(durations)
        values = (d[0], d[n // 2], d[n * 90 // 100], d[n * 99 // 100], d[-1], sum(d))
        lines.append(f"{func_id} {n} {' '.join(str(ns(v, frequency)) for v in values)} "
                     f"#{func_id}")
    return lines


def _llvm_account(trace: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["llvm-xray-14", "account", "-format=csv", *options, str(trace)],
                          capture_output=True, text=True)


def test_account_matches_llvm_single_threaded(traces: dict[str, tuple[Path, Path]]) -> None:
    """One thread, tail call and arguments: llvm-xray account is right there; its
    seconds (%e, 7 digits) are our nanoseconds printed the same way."""
    trace, _ = traces["fdr"]
    llvm = _llvm_account(trace)
    assert llvm.returncode == 0, llvm.stderr
    theirs = [row.split(",")[:8] for row in llvm.stdout.splitlines()[1:]]
    proc = cfi2sframe("stacks", str(trace), "--format", "account", cwd=trace.parent)
    ours = [row.split()[:8] for row in proc.stdout.splitlines()[1:]]
    frequency = frequency_of(trace)
    assert frequency == 10**9 or pytest.skip("a TSC machine: nanoseconds are not cycles")
    assert [r[:2] + [f"{int(v) / 1e9:e}" for v in r[2:]] for r in ours] == \
        sorted(theirs, key=lambda r: int(r[0]))
    assert len(ours) >= 4


def test_account_multi_threaded_where_llvm_fails(traces: dict[str, tuple[Path, Path]]
                                                 ) -> None:
    """A real multi-threaded trace: the durations paired by hand from convert's
    records.  llvm-xray account rejects any record older than the first one it
    processes (threads in hash-map order), so it fails here or not by that order: the
    hand-made test below shows both cases."""
    trace, _ = traces["fdr-threads"]
    want = _account_lines(_durations_by_hand(trace), frequency_of(trace))
    proc = cfi2sframe("stacks", str(trace), "--format", "account", cwd=trace.parent)
    assert proc.stdout.splitlines() == want
    assert sum(int(line.split()[1]) for line in want[1:]) >= 15


def test_account_in_any_buffer_order(tmp_path: Path) -> None:
    """Two threads, thread 8 later than thread 7 (hand-made, 1 GHz: cycles are ns).
    llvm-xray takes thread 8 first and rejects thread 7's older records: it fails, and
    with -k counts thread 8 alone.  By hand: #1 lasts 45 (7) and 60 (8), #2 30 and 20;
    median n//2 of the sorted durations.  llvm-xray gets it right where thread 8 is the
    older one (its first record then the oldest), the same durations."""
    require("llvm-xray-14")
    t7 = func(0, 1, 0) + func(0, 2, 10) + func(1, 2, 30) + func(1, 1, 5)
    t8 = func(0, 1, 0) + func(0, 2, 20) + func(1, 2, 20) + func(1, 1, 20)
    want = ["funcid calls min median p90 p99 max sum function",
            "1 2 45 60 60 60 60 105 #1", "2 2 20 30 30 30 30 50 #2"]
    for order, (tsc7, tsc8) in {"8-later": (1000, 2000), "8-older": (2000, 1000)}.items():
        for first in (7, 8):
            blocks = [block(7, t7, tsc=tsc7), block(8, t8, tsc=tsc8)]
            path = tmp_path / f"{order}-{first}.fdr"
            path.write_bytes(header() + b"".join(blocks[::1 if first == 7 else -1]))
            proc = cfi2sframe("stacks", str(path), "--format", "account", cwd=tmp_path)
            assert proc.stdout.splitlines() == want, path.name
            llvm, kept = _llvm_account(path), _llvm_account(path, "-k")
            if order == "8-later":
                assert llvm.returncode != 0 and "Failed accounting" in llvm.stderr
                assert kept.stdout.splitlines()[1].startswith("1,1,")
            else:
                assert llvm.returncode == 0
                assert llvm.stdout.splitlines()[1:] == [
                    '1,2,4.500000e-08,6.000000e-08,6.000000e-08,6.000000e-08,6.000000e-08,'
                    '1.050000e-07,"(unknown)","#1"',
                    '2,2,2.000000e-08,3.000000e-08,3.000000e-08,3.000000e-08,3.000000e-08,'
                    '5.000000e-08,"(unknown)","#2"']


def test_what_the_walk_decides_is_counted(tmp_path: Path) -> None:
    """A hand-made trace at 2 GHz (a cycle is half a nanosecond: halves round up).
    Thread 7 from TSC 1000: enter #1; enter #2 (1010); exit #3 (1015: no #3 is open,
    left out); enter #3 (1019); exit #2 (1026: closes #3, whose exit is missing, 7
    cycles, and #2, 16 less 7 = 9 self); enter #4 (1029), tail exit #4 (1034: 5);
    enter #5 (1035), exit #5 (1037: 2); exit #1 (1040: 40 less 16, 5, 2 = 17 self);
    enter #6 (1041, never exits).  Thread 8 from 500: #1 for 9 cycles.  llvm-xray
    stack pops the whole stack at the stray exit (#1 would last 15 cycles)."""
    body = (func(0, 1, 0) + func(0, 2, 10) + func(1, 3, 5) + func(0, 3, 4) + func(1, 2, 7)
            + func(0, 4, 3) + func(2, 4, 5) + func(0, 5, 1) + func(1, 5, 2) + func(1, 1, 3)
            + func(0, 6, 1))
    path = tmp_path / "notes.fdr"
    path.write_bytes(header(freq=2 * 10**9) + block(7, body, tsc=1000)
                     + block(8, func(0, 1, 0) + func(1, 1, 9), tsc=500))
    proc = cfi2sframe("stacks", str(path), cwd=tmp_path)
    assert proc.returncode == 0
    # self cycles 17 + 9, 9, 7, 5, 2 -> 13, 4.5, 3.5, 2.5, 1 ns
    assert proc.stdout.splitlines() == ["#1 13", "#1;#2 5", "#1;#2;#3 4", "#1;#4 3", "#1;#5 1"]
    assert proc.stderr.splitlines() == [
        f"{path}: note: tail exits: 1 (#4 1)",
        f"{path}: note: exits without an entry (left out): 1 (#3 1)",
        f"{path}: note: calls without their own exit (closed by an outer call's exit): "
        "1 (#3 1)",
        f"{path}: note: calls still open at the end (no duration): 1 (#6 1)"]
    stacks = xray_stacks(xray_events(path.read_bytes()))
    assert {(s.path, s.calls, s.inclusive) for s in stacks.stacks} == {
        ((1,), 2, 49), ((1, 2), 1, 16), ((1, 2, 3), 1, 7), ((1, 4), 1, 5), ((1, 5), 1, 2)}
    chrome = json.loads(cfi2sframe("stacks", str(path), "--format", "chrome",
                                   cwd=tmp_path).stdout)["traceEvents"]
    opened = [e for e in chrome if e["ph"] == "B"]
    assert [(e["name"], e["ts"], e["tid"]) for e in opened] == [("#6", 270.5 / 1000, 7)]


def test_chrome_typed_and_custom_events(tmp_path: Path) -> None:
    """Hand-made, version 5 at 3 GHz: a custom event (delta 2 after the enter at 1000)
    and a typed event of type 9 (delta 4 more) inside #1, which exits at 1009.  ts
    from the earliest TSC (1000): 2 cycles = 2/3000 µs, to the picosecond 0.000667;
    the typed event at 6 cycles, 0.002 µs; #1's span 9 cycles, 0.003 µs."""
    from tests.support.xray_traces import custom, meta

    body = (func(0, 1, 0) + custom(5, b"ab\x01", delta=2)
            + meta(8, struct.pack("<iiH", 2, 4, 9)) + b"xy" + func(1, 1, 3))
    path = tmp_path / "events.fdr"
    path.write_bytes(header(freq=3 * 10**9) + block(7, body, tsc=1000))
    proc = cfi2sframe("stacks", str(path), "--format", "chrome", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["traceEvents"] == [
        {"name": "custom-event", "ph": "i", "s": "t", "ts": 0.000667, "pid": 42, "tid": 7,
         "args": {"data": "ab\\x01"}},
        {"name": "typed-event", "ph": "i", "s": "t", "ts": 0.002, "pid": 42, "tid": 7,
         "args": {"type": 9, "data": "xy"}},
        {"name": "#1", "ph": "X", "ts": 0, "dur": 0.003, "pid": 42, "tid": 7}]


def test_chrome_trace_events(traces: dict[str, tuple[Path, Path]]) -> None:
    """Chrome JSON: numeric ts in µs from the earliest TSC, an X event per call (per
    function and thread, the count and summed durations llvm-xray's stacks give), the
    custom event as an instant event with its payload."""
    trace, binary = traces["fdr-threads"]
    records = _yaml(trace)
    start = min(int(r["tsc"]) for r in records)  # type: ignore[call-overload]
    frequency = frequency_of(trace)
    proc = cfi2sframe("stacks", str(trace), "--format", "chrome", cwd=trace.parent)
    assert proc.returncode == 0, proc.stderr
    events = json.loads(proc.stdout)["traceEvents"]
    calls = [e for e in events if e["ph"] == "X"]
    assert min(e["ts"] for e in calls) == 0
    ids = {v: f"#{k}" for k, v in names_of(binary).items()}
    counts, spans = Counter[tuple[str, int]](), Counter[tuple[str, int]]()
    for stack, n in llvm_stack(trace, binary, "-aggregation-type=count").items():
        thread, *frames = stack.split(";")
        counts[(ids[frames[-1]], int(thread.removeprefix("thread_")))] += n
    for stack, n in llvm_stack(trace, binary, "-aggregation-type=time").items():
        thread, *frames = stack.split(";")
        spans[(ids[frames[-1]], int(thread.removeprefix("thread_")))] += n
    assert Counter((e["name"], e["tid"]) for e in calls) == counts
    ours: Counter[tuple[str, int]] = Counter()
    for e in calls:
        ours[(e["name"], e["tid"])] += round(Fraction(str(e["dur"])) * frequency / 10**6)
    assert ours == spans
    (custom,) = [e for e in events if e["ph"] == "i"]
    (record,) = [r for r in records if r["kind"] == "custom-event"]
    assert custom["args"] == {"data": "hello"} and custom["tid"] == record["thread"]
    assert Fraction(str(custom["ts"])) == Fraction(int(record["tsc"]) - start,  # type: ignore[call-overload]
                                                   frequency) * 10**6
    assert any("args" in e for e in calls)


def test_bad_input_and_usage(tmp_path: Path) -> None:
    """Not a trace: one located line, exit 1; a zero cycle frequency: times refused,
    --count works; an option that does not apply: exit 2."""
    other = tmp_path / "not-a-trace"
    other.write_bytes(b"hello world, no trace here" * 4)
    proc = cfi2sframe("stacks", str(other), cwd=tmp_path)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1
    assert proc.stderr.startswith(f"{other}: error: ")
    zero = tmp_path / "zero.fdr"
    zero.write_bytes(header(freq=0) + block(7, func(0, 1, 0) + func(1, 1, 3)))
    proc = cfi2sframe("stacks", str(zero), cwd=tmp_path)
    assert proc.returncode == 1 and "cycle frequency is 0" in proc.stderr
    assert cfi2sframe("stacks", str(zero), "--count", cwd=tmp_path).stdout == "#1 1\n"
    proc = cfi2sframe("stacks", str(zero), "--count", "--format", "chrome", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    cut = tmp_path / "cut.fdr"
    cut.write_bytes((header() + block(7, func(0, 1, 0) + func(1, 1, 3)))[:-3])
    proc = cfi2sframe("stacks", str(cut), cwd=tmp_path)
    assert proc.returncode == 1 and proc.stderr.startswith(f"{cut}: error: at byte")


def _general_dump(data: bytes) -> tuple[str, str | None]:
    """Every line as the record reader and ``record_text`` give them, one object a
    record, and the error that stops it."""
    lines: list[str] = []
    try:
        header = read_header(data)
        if header.type == 0:  # basic mode: no fast loop
            lines = [f"{r.offset:#08x}  {basic_text(r)}\n" for r in basic_records(data, header)]
        for record in fdr_records(data, header) if header.type else ():
            lines.append(f"{record.offset:#08x}  {record_text(record)}\n")
    except DecodeError as exc:
        return "".join(lines), str(exc)
    return "".join(lines), None


def _damaged(seed: int) -> list[bytes]:
    """Hand-made traces (every kind of record the fast loops skip or read), each with
    a few bytes changed at random."""
    import random

    from tests.support.xray_traces import custom, meta

    rng = random.Random(seed)
    plain = (func(0, 1, 0) + func(3, 2, 4) + meta(6, struct.pack("<Q", 9)) + func(1, 2, 3)
             + meta(3, struct.pack("<Q", 5000)) + func(2, 1, 2) + func(0, 3, 1)
             + func(1, 4, 1) + func(0, 5, 2) + meta(2, struct.pack("<HQ", 2, 900))
             + func(1, 3, 1) + func(1, 1, 7))
    events_ = (func(0, 3, 1) + custom(5, b"abc", delta=2) + func(1, 3, 1)
               + meta(8, struct.pack("<iiH", 2, 1, 3)) + b"xy")
    out = []
    for base in (header() + block(7, plain, tsc=1000) + block(8, func(0, 1, 0) + func(1, 1, 9)),
                 header() + block(7, plain + events_, tsc=1000)):
        out.append(base)
        for _ in range(150):
            damaged = bytearray(base)
            for _ in range(rng.randint(1, 3)):
                damaged[rng.randrange(32, len(damaged))] = rng.randrange(256)
            cut = rng.choice([len(damaged), rng.randrange(33, len(damaged))])
            out.append(bytes(damaged[:cut]))
    return out


def test_fast_loops_equal_the_general_path(traces: dict[str, tuple[Path, Path]],
                                           tmp_path: Path) -> None:
    """The loops that read a large trace without an object per record (dump's lines,
    stacks' totals and notes) give what the general path gives: on the real traces,
    the hand-made ones above and damaged ones; where the stacks loop declines (None),
    the general path runs."""
    samples = [trace.read_bytes() for trace, _ in traces.values()] + _damaged(41)
    read = 0
    for data in samples:
        assert whole_dump(data) == _general_dump(data)
        try:
            header_ = read_header(data)
            fast = fdr_stacks(data, header_, per_thread=True)
            general = build_stacks(events(data), per_thread=True)
        except DecodeError:
            continue
        if fast is not None:
            read += 1
            assert fast == general
    assert read >= 40
