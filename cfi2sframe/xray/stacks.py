"""Each thread's call stacks rebuilt from a trace's expanded events.

A call is open from its enter to the first exit or tail exit of the same function on
that thread; what the records leave unsaid is counted per function (``Note``), never
dropped silently: an exit no open call matches is left out, calls above the one an
exit closes lost their own exit and end with it, calls still open at the end have no
duration.  Calls the runtime erased for being shorter than its duration threshold
leave no record at all: their time is their caller's self time.  Times are TSC
cycles, exact integers; ``report`` converts them.

``StackWalk`` keeps every completed ``Call`` with its node in a ``StackTrie`` of
distinct stacks, with self and inclusive cycles; ``build_stacks`` sums them per distinct
stack, so memory grows with distinct stacks, not calls.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator

from ..basics import Name
from ..typed import NamedTuple
from .expand import Event, EventKind


class Note(Name):
    """What the stack walk had to decide, counted per function ID (the values are
    plural: they head a count)."""

    tail_exit = "tail exits"  # (no problem: the call it makes is its caller's callee)
    unmatched_exit = "exits without an entry (left out)"
    missing_exit = "calls without their own exit (closed by an outer call's exit)"
    open_at_end = "calls still open at the end (no duration)"
    backwards = "calls ending before their start (the TSC went back; counted as 0)"


class Call(NamedTuple):
    """One completed call: its stack node (``StackTrie.path``), thread, TSC span, self
    cycles (its span less its callees' spans) and arguments."""

    node: int
    tid: int
    pid: int
    func_id: int
    start: int
    end: int
    self_cycles: int
    args: tuple[int, ...]


class OpenCall(NamedTuple):
    """A call with no exit by the end of the trace."""

    tid: int
    pid: int
    func_id: int
    start: int
    args: tuple[int, ...]


class StackTrie:
    """The distinct stacks, each a node numbered from 1: memory grows with distinct
    stacks, not with calls.  Node 0 is the root; with threads apart, each thread's
    first node holds the thread."""

    def __init__(self) -> None:
        self.parent: list[int] = [0]
        self.func: list[int] = [0]
        self.children: dict[tuple[int, int], int] = {}
        self.threads: dict[int, int] = {}  # a thread's node -> its ID

    def child(self, parent: int, func_id: int) -> int:
        """The node of ``func_id`` called from ``parent`` (made on first use)."""
        key = (parent, func_id)
        node = self.children.get(key)
        if node is None:
            node = self.children[key] = len(self.func)
            self.parent.append(parent)
            self.func.append(func_id)
        return node

    def thread(self, tid: int) -> int:
        """A thread's own root node (``-1 - tid`` as its key: no function ID is negative)."""
        node = self.child(0, -1 - tid)
        self.threads[node] = tid
        return node

    def path(self, node: int) -> tuple[int | None, tuple[int, ...]]:
        """The thread (None where threads are merged) and function IDs, root first."""
        ids = []
        while node and node not in self.threads:
            ids.append(self.func[node])
            node = self.parent[node]
        return self.threads.get(node), tuple(reversed(ids))


class _Frame:
    __slots__ = ("func_id", "node", "start", "callees", "args", "pid")

    def __init__(self, func_id: int, node: int, start: int, args: tuple[int, ...],
                 pid: int) -> None:
        self.func_id, self.node, self.start, self.callees = func_id, node, start, 0
        self.args, self.pid = args, pid


_ENTERS = (EventKind.enter, EventKind.enter_args)
_EXITS = (EventKind.exit, EventKind.tail_exit)


class StackWalk:
    """The walk over one trace's events: ``calls`` yields each completed call (and
    the custom and typed events, as they come); ``notes`` and ``still_open`` are
    complete once it ends."""

    def __init__(self, per_thread: bool = False) -> None:
        self.trie = StackTrie()
        self.notes: Counter[tuple[Note, int]] = Counter()
        self.still_open: list[OpenCall] = []
        self._per_thread = per_thread

    def calls(self, events: Iterable[Event]) -> Iterator[Call | Event]:
        stacks: dict[int, list[_Frame]] = {}
        trie, notes = self.trie, self.notes
        for event in events:
            kind = event.kind
            stack = stacks.get(event.tid)
            if stack is None:
                stack = stacks[event.tid] = []
            if kind in _ENTERS:
                parent = stack[-1].node if stack else \
                    (trie.thread(event.tid) if self._per_thread else 0)
                stack.append(_Frame(event.func_id, trie.child(parent, event.func_id),
                                    event.tsc, event.args, event.pid))
            elif kind in _EXITS:
                if kind == EventKind.tail_exit:
                    notes[(Note.tail_exit, event.func_id)] += 1
                yield from self._exit(stack, event)
            else:
                yield event
        for tid, stack in sorted(stacks.items()):
            for frame in stack:
                notes[(Note.open_at_end, frame.func_id)] += 1
                self.still_open.append(OpenCall(tid, frame.pid, frame.func_id, frame.start,
                                                frame.args))

    def _exit(self, stack: list[_Frame], event: Event) -> Iterator[Call]:
        """The calls an exit closes: the innermost open call of its function, and any
        above it (whose own exit is missing), all ending at its TSC."""
        func_id, end = event.func_id, event.tsc
        depth = len(stack) - 1
        while depth >= 0 and stack[depth].func_id != func_id:
            depth -= 1
        if depth < 0:
            self.notes[(Note.unmatched_exit, func_id)] += 1
            return
        while len(stack) > depth:
            frame = stack.pop()
            if len(stack) > depth:
                self.notes[(Note.missing_exit, frame.func_id)] += 1
            span = end - frame.start
            if span < 0:
                self.notes[(Note.backwards, frame.func_id)] += 1
                span = 0
            if stack:
                stack[-1].callees += span
            yield Call(frame.node, event.tid, frame.pid, frame.func_id, frame.start, end,
                       max(span - frame.callees, 0), frame.args)


class StackTotals(NamedTuple):
    """One distinct stack's calls, summed over them (and over threads, unless kept
    apart): ``inclusive`` is what ``llvm-xray stack``'s time aggregation gives it,
    ``self_cycles`` that less its callees' inclusive cycles."""

    thread: int | None
    path: tuple[int, ...]
    calls: int
    self_cycles: int
    inclusive: int


class Stacks(NamedTuple):
    """Every distinct stack of a trace with its totals, and what the walk decided."""

    stacks: list[StackTotals]
    notes: Counter[tuple[Note, int]]


def build_stacks(events: Iterable[Event], per_thread: bool = False) -> Stacks:
    """The stacks of a trace's events (``xray_events``), threads merged unless
    ``per_thread``; in the order each stack was first seen."""
    walk = StackWalk(per_thread)
    calls: list[int] = [0]
    own: list[int] = [0]
    inclusive: list[int] = [0]
    for call in walk.calls(events):
        if isinstance(call, Call):
            node = call.node
            if node >= len(calls):
                grow = node + 1 - len(calls)
                calls += [0] * grow
                own += [0] * grow
                inclusive += [0] * grow
            calls[node] += 1
            own[node] += call.self_cycles
            inclusive[node] += call.end - call.start if call.end > call.start else 0
    totals = []
    for node in range(1, len(calls)):
        if calls[node]:
            thread, path = walk.trie.path(node)
            totals.append(StackTotals(thread, path, calls[node], own[node], inclusive[node]))
    return Stacks(totals, walk.notes)
