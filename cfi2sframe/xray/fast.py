"""``build_stacks(events(data))`` for the common FDR trace in one loop, without an
object per record: what a trace of ten million calls needs (the general path builds
three named tuples per record and runs ~30x longer).

Only little-endian traces of version 2 or later whose buffers hold nothing but
function records and the 16-byte metadata records without payload; anything else
(custom or typed events, version 1, a buffer that is not whole, a record of an
unknown kind) returns None and the general path reads the trace, located errors and
all.  ``tests/differential/test_xray_stacks.py`` holds both equal.  Where the
compiled core is built its ``xray_stacks`` (``csrc/xray.c``) runs this loop, the
Python one below its reference and fallback (``tests/differential/test_core_xray.py``).
"""

from __future__ import annotations

import struct
from collections import Counter

from .. import core
from .records import FDR, HEADER_SIZE, Header
from .stacks import Note, Stacks, StackTotals, StackTrie

_PAIRS = struct.Struct("<II")
_EXTENTS, _NEW_BUFFER, _NEW_CPU, _TSC_WRAP = 7 << 1 | 1, 0, 2, 3
_WALL_CLOCK, _CALL_ARGUMENT, _PID = 4, 6, 9
_U64 = (1 << 64) - 1


def fdr_stacks(data: bytes, header: Header, per_thread: bool = False) -> Stacks | None:
    """The stacks ``build_stacks`` gives for this trace, or None where this loop does
    not read it."""
    if header.type != FDR or header.version < 2 or header.order != "little":
        return None
    compiled = core.compiled()
    if compiled is None:
        return python_stacks(data, per_thread)
    found = compiled.xray_stacks(data=data, per_thread=per_thread)
    if found is None:
        return None
    totals, notes = found
    return Stacks([StackTotals(*row) for row in totals],
                  Counter({(_NOTES[note], func_id): count for note, func_id, count in notes}))


_NOTES = tuple(Note)  # xray_stacks numbers them in this order


def python_stacks(data: bytes, per_thread: bool = False) -> Stacks | None:
    """``fdr_stacks`` in Python, past the header's check: the reference of the
    compiled loop and its fallback."""
    walk = _Walk(per_thread)
    view, at, end = memoryview(data), HEADER_SIZE, len(data)
    while at < end:
        if at + 16 > end or data[at] != _EXTENTS:
            return None
        size = int.from_bytes(data[at + 1:at + 9], "little")
        at += 16
        if size % 8 or at + size > end or not walk.buffer(view[at:at + size]):
            return None
        at += size
    return walk.result()


class _Walk:
    """``StackWalk`` and ``build_stacks`` fused, over raw records."""

    def __init__(self, per_thread: bool) -> None:
        self.trie = StackTrie()
        self.notes: Counter[tuple[Note, int]] = Counter()
        self.calls, self.own, self.inclusive = [0], [0], [0]
        self.stacks: dict[int, list[list[int]]] = {}
        self.per_thread = per_thread
        self.tid = self.base = 0

    def buffer(self, body: memoryview) -> bool:
        """One buffer's records; False at one this loop does not read."""
        units = _PAIRS.iter_unpack(body)
        stack = self.stacks.setdefault(self.tid, [])
        trie, children = self.trie, self.trie.children
        calls, own, inclusive = self.calls, self.own, self.inclusive
        base = self.base
        for word, delta in units:
            if not word & 1:  # a function record
                kind, func_id = (word >> 1) & 7, word >> 4
                base += delta
                if kind == 0 or kind == 3:
                    parent = stack[-1][1] if stack else \
                        (trie.thread(self.tid) if self.per_thread else 0)
                    node = children.get((parent, func_id))
                    if node is None:
                        node = trie.child(parent, func_id)
                        grow = len(trie.func) - len(calls)
                        calls += [0] * grow
                        own += [0] * grow
                        inclusive += [0] * grow
                    stack.append([func_id, node, base, 0])
                elif kind == 1 or kind == 2:
                    if kind == 2:
                        self.notes[(Note.tail_exit, func_id)] += 1
                    if stack and stack[-1][0] == func_id:
                        frame = stack.pop()
                        span = base - frame[2]
                        if span < 0:
                            self.notes[(Note.backwards, func_id)] += 1
                            span = 0
                        if stack:
                            stack[-1][3] += span
                        node, alone = frame[1], span - frame[3]
                        calls[node] += 1
                        if alone > 0:
                            own[node] += alone
                        inclusive[node] += span
                    else:
                        self._exit(stack, func_id, base)
                else:
                    return False
                continue
            second = next(units, None)
            if second is None:
                return False
            whole = word | delta << 32 | second[0] << 64 | second[1] << 96
            kind = (word & 0xFF) >> 1
            if kind == _NEW_BUFFER:
                tid = (whole >> 8) & 0xFFFFFFFF
                self.tid = tid - (1 << 32) if tid >> 31 else tid
                stack = self.stacks.setdefault(self.tid, [])
            elif kind == _NEW_CPU:
                base = (whole >> 24) & _U64
            elif kind == _TSC_WRAP:
                base = (whole >> 8) & _U64
            elif kind not in (_WALL_CLOCK, _CALL_ARGUMENT, _PID):
                return False
        self.base = base
        return True

    def _exit(self, stack: list[list[int]], func_id: int, end: int) -> None:
        """An exit that is not the innermost call's: as ``StackWalk._exit``."""
        depth = len(stack) - 1
        while depth >= 0 and stack[depth][0] != func_id:
            depth -= 1
        if depth < 0:
            self.notes[(Note.unmatched_exit, func_id)] += 1
            return
        while len(stack) > depth:
            frame = stack.pop()
            if len(stack) > depth:
                self.notes[(Note.missing_exit, frame[0])] += 1
            span = end - frame[2]
            if span < 0:
                self.notes[(Note.backwards, frame[0])] += 1
                span = 0
            if stack:
                stack[-1][3] += span
            node = frame[1]
            self.calls[node] += 1
            self.own[node] += max(span - frame[3], 0)
            self.inclusive[node] += span

    def result(self) -> Stacks:
        for stack in self.stacks.values():
            for frame in stack:
                self.notes[(Note.open_at_end, frame[0])] += 1
        totals = []
        for node in range(1, len(self.calls)):
            if self.calls[node]:
                thread, path = self.trie.path(node)
                totals.append(StackTotals(thread, path, self.calls[node], self.own[node],
                                          self.inclusive[node]))
        return Stacks(totals, self.notes)
