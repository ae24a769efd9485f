"""Stacks and calls as text: folded stacks (what flamegraph.pl, inferno and speedscope
read), a per-function account and Chrome's trace-event JSON.  Times are converted
from TSC cycles with the header's cycle frequency in integer arithmetic, rounded once
per printed value to the nearest unit (halves up).

Names come from a ``Mapping[int, str]`` (``#ID`` for the rest)."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping

from ..typed import NamedTuple
from .expand import Event, EventKind
from .stacks import Call, Note, OpenCall, Stacks
from .text import escaped


def scaled(cycles: int, frequency: int, unit: int) -> int:
    """``cycles`` in units of ``1 / unit`` seconds (10**9: nanoseconds), nearest, halves
    up: exact for any count, where a float loses cycles past 2**53."""
    return (cycles * unit * 2 + frequency) // (2 * frequency)


def name_of(func_id: int, names: Mapping[int, str]) -> str:
    """A function's name, ``#ID`` where the mapping has none."""
    return names.get(func_id) or f"#{func_id}"


def folded(stacks: Stacks, names: Mapping[int, str], frequency: int,
           count: bool = False) -> list[str]:
    """``root;caller;callee VALUE`` lines, sorted: VALUE the stack's self time in
    nanoseconds (summed in cycles, converted once), or with ``count`` the calls of its
    last function.  Stacks that print alike (two functions of one name) are one line."""
    merged: dict[str, int] = defaultdict(int)
    for total in stacks.stacks:
        frames = [name_of(f, names) for f in total.path]
        if total.thread is not None:
            frames.insert(0, f"thread_{total.thread}")
        merged[";".join(frames)] += total.calls if count else total.self_cycles
    if count:
        return [f"{stack} {value}" for stack, value in sorted(merged.items())]
    return [f"{stack} {scaled(value, frequency, 10**9)}"
            for stack, value in sorted(merged.items())]


class Account(NamedTuple):
    """One function's calls' inclusive durations in cycles; the percentiles are the
    sorted durations' element at index ``n * p // 100`` (0-based), the median's at
    ``n // 2``: always a duration that occurred, as ``llvm-xray account`` takes them."""

    func_id: int
    calls: int
    min: int
    median: int
    p90: int
    p99: int
    max: int
    sum: int


def account(calls: Iterable[Call | Event]) -> list[Account]:
    """Every function's call durations, by function ID."""
    spans: dict[int, list[int]] = defaultdict(list)
    for call in calls:
        if isinstance(call, Call):
            spans[call.func_id].append(max(call.end - call.start, 0))
    rows = []
    for func_id, durations in sorted(spans.items()):
        durations.sort()
        n = len(durations)
        rows.append(Account(func_id, n, durations[0], durations[n // 2],
                            durations[n * 90 // 100], durations[n * 99 // 100],
                            durations[-1], sum(durations)))
    return rows


ACCOUNT_HEADING = "funcid calls min median p90 p99 max sum function"


def account_line(row: Account, names: Mapping[int, str], frequency: int) -> str:
    """One row, times in nanoseconds."""
    times = " ".join(str(scaled(v, frequency, 10**9)) for v in row[2:])
    return f"{row.func_id} {row.calls} {times} {name_of(row.func_id, names)}"


def _micros(cycles: int, frequency: int) -> str:
    """Microseconds to the picosecond (finer than a cycle below 1 THz), as a JSON
    number without trailing zeros."""
    ps = scaled(cycles, frequency, 10**12)
    whole, part = divmod(ps, 10**6)
    return f"{whole}.{part:06}".rstrip("0").rstrip(".")


def chrome_events(items: Iterable[Call | Event], still_open: Iterable[OpenCall],
                  names: Mapping[int, str], frequency: int, start: int) -> Iterator[str]:
    """Trace-event objects, one JSON text each: a completed call an ``X`` event
    (``ts`` and ``dur`` in microseconds from ``start``), a call with no exit a ``B``
    event alone, a custom or typed event an instant (``i``) event with its payload."""
    for item in items:
        if isinstance(item, Call):
            args = f', "args": {{"args": {list(item.args)}}}' if item.args else ""
            yield (f'{{"name": {json.dumps(name_of(item.func_id, names))}, "ph": "X", '
                   f'"ts": {_micros(item.start - start, frequency)}, '
                   f'"dur": {_micros(max(item.end - item.start, 0), frequency)}, '
                   f'"pid": {item.pid}, "tid": {item.tid}{args}}}')
        else:
            yield _instant(item, frequency, start)
    for call in still_open:
        args = f', "args": {{"args": {list(call.args)}}}' if call.args else ""
        yield (f'{{"name": {json.dumps(name_of(call.func_id, names))}, "ph": "B", '
               f'"ts": {_micros(call.start - start, frequency)}, "pid": {call.pid}, '
               f'"tid": {call.tid}{args}}}')


def _instant(event: Event, frequency: int, start: int) -> str:
    fields: dict[str, object] = {"data": escaped(event.data)}
    if event.kind == EventKind.typed_event:
        fields = {"type": event.event_type, **fields}
    return (f'{{"name": "{event.kind}", "ph": "i", "s": "t", '
            f'"ts": {_micros(event.tsc - start, frequency)}, "pid": {event.pid}, '
            f'"tid": {event.tid}, "args": {json.dumps(fields)}}}')


def notes_lines(notes: Mapping[tuple[Note, int], int], names: Mapping[int, str],
                shown: int = 5) -> list[str]:
    """One line per kind of note: the count and the functions, most frequent first
    (``shown`` of them, then how many more)."""
    lines = []
    for note in Note:
        per = sorted(((n, f) for (kind, f), n in notes.items() if kind == note),
                     key=lambda nf: (-nf[0], nf[1]))
        if not per:
            continue
        total = sum(n for n, _ in per)
        listed = ", ".join(f"{name_of(f, names)} {n}" for n, f in per[:shown])
        more = f", and {len(per) - shown} more functions" if len(per) > shown else ""
        lines.append(f"{note}: {total} ({listed}{more})")
    return lines
