"""Run ``file_record`` for many files, each in a forked child of its own.

A child per file, not a long-lived worker: a file that hangs is stopped by
killing its child (``--timeout``), one that crashes the interpreter costs only
its own record, and memory never accumulates (every child starts from the
parent's small heap and is gone when its file is).  Forking a process that
has imported the package costs about a millisecond, against tens of
milliseconds for the smallest file.  The parent is a single thread that
waits on the children's pipes, so the fork never happens beside other threads.
"""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from .record import Task, failed_record, file_record, warm_up


@dataclass
class _Child:
    index: int
    path: str
    pid: int
    fd: int
    deadline: float | None
    chunks: list[bytes]


def _start(index: int, path: str, task: Task, timeout: float | None,
           read_as: str | None = None) -> _Child:
    """Fork a child that writes ``file_record(path)`` as JSON to a pipe and exits."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the caller's code
        status = 0
        try:
            os.close(read_end)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            gc.disable()  # as the command does: millions of records, no cycles
            payload = json.dumps(file_record(path, task, read_as)).encode()
            view = memoryview(payload)
            while view:
                view = view[os.write(write_end, view):]
        except BaseException:  # noqa: B036 - nothing may escape a forked child
            status = 70
        finally:
            os._exit(status)
    os.close(write_end)
    deadline = time.monotonic() + timeout if timeout else None
    return _Child(index, path, pid, read_end, deadline, [])


def _finish(child: _Child, task: Task, timed_out: bool = False) -> dict[str, Any]:
    """Reap ``child``; its record, or one that says why there is none."""
    if timed_out:
        os.kill(child.pid, signal.SIGKILL)
    os.close(child.fd)
    _, status, usage = os.wait4(child.pid, 0)
    if timed_out:
        return failed_record(child.path, task, "timeout", f"{child.path}: error: no result "
                             f"within the time limit (--timeout)")
    try:
        record: dict[str, Any] = json.loads(b"".join(child.chunks))
    except ValueError:
        if os.WIFSIGNALED(status):
            why = f"killed by signal {os.WTERMSIG(status)}"
        else:
            why = f"exit status {os.waitstatus_to_exitcode(status)}"
        return failed_record(child.path, task, "crash", f"{child.path}: error: the worker "
                             f"ended without a result ({why})")
    record["max_rss_kib"] = usage.ru_maxrss
    return record


def run_local(items: Iterable[tuple[int, str]], task: Task, jobs: int,
              timeout: float | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(index, record)`` for every ``(index, path)``, as each is done, at most ``jobs``
    files at a time."""
    return _run(((index, path, None) for index, path in items), task, jobs, timeout)


def run_isolated(path: str, task: Task, timeout: float | None,
                 read_as: str | None = None) -> dict[str, Any]:
    """One file in a child of its own (what a Dask worker runs for each file)."""
    return next(_run([(0, path, read_as)], task, 1, timeout))[1]


def _run(items: Iterable[tuple[int, str, str | None]], task: Task, jobs: int,
         timeout: float | None) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(index, record)`` for every ``(index, path, read_as)``: children started while
    fewer than ``jobs`` run, each read until its pipe closes or killed at its
    deadline; an interruption kills those still running."""
    warm_up()
    pending = deque(items)
    running: dict[int, _Child] = {}
    try:
        while pending or running:
            while pending and len(running) < max(1, jobs):
                index, path, read_as = pending.popleft()
                child = _start(index, path, task, timeout, read_as)
                running[child.fd] = child
            deadlines = [c.deadline for c in running.values() if c.deadline is not None]
            wait = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
            ready, _, _ = select.select(list(running), [], [], wait)
            for fd in ready:
                chunk = os.read(fd, 1 << 16)
                if chunk:
                    running[fd].chunks.append(chunk)
                    continue
                child = running.pop(fd)
                yield child.index, _finish(child, task)
            now = time.monotonic()
            for fd, child in list(running.items()):
                if child.deadline is not None and child.deadline <= now:
                    del running[fd]
                    yield child.index, _finish(child, task, timed_out=True)
    finally:
        for child in running.values():  # interrupted: leave no child behind
            os.kill(child.pid, signal.SIGKILL)
            os.close(child.fd)
            os.waitpid(child.pid, 0)
