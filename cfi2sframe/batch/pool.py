"""Run ``file_record`` for many files in forked worker processes, one file at a time
each.

A worker is forked from the parent (which has imported what the work needs) and
does up to ``FILES_PER_WORKER`` files, one after another, then exits; the next
worker starts from the parent's small heap again, so memory never accumulates.
A file that hangs is stopped by killing its worker (``--timeout``), one that
crashes the interpreter costs only its own record; either way a new worker takes
the next file.  Forking per file cost more than the work on a small file: the
child's first writes to the pages it shares with the parent (reference counts)
fault page by page, and forked siblings fault in each other's way on two cores.
A worker pays that once for many files.

The parent is a single thread that waits on the workers' pipes, so the fork never
happens beside other threads.  Requests and records travel as a 4-byte length and
JSON.

``run_local`` runs at most ``-j`` workers at once; ``run_files`` is a Dask task's run
(``batch/cluster.py``).
"""

from __future__ import annotations

import gc
import json
import os
import resource
import select
import signal
import struct
import time
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

from .record import Task, failed_record, file_record, warm_up

# Files a worker does before it exits (and a fresh one is forked).
FILES_PER_WORKER = 64
_LENGTH = struct.Struct(">I")


class _Worker:
    """A forked worker as the parent sees it."""

    __slots__ = ("pid", "requests", "results", "job", "deadline", "given", "received")

    def __init__(self, pid: int, requests: int, results: int) -> None:
        self.pid = pid
        # The write end of the worker's request pipe (-1: closed, retiring).
        self.requests = requests
        self.results = results  # the read end of its record pipe
        self.job: tuple[int, str] | None = None  # (index, path) of the file it does
        self.deadline: float | None = None
        self.given = 0  # files sent to it
        self.received = bytearray()


def _spawn(task: Task, others: Iterable[int]) -> _Worker:
    """Fork a worker; ``others``: the parent's ends of the other workers' pipes, which
    the worker closes (else a worker would hold another's request pipe open)."""
    request_read, request_write = os.pipe()
    result_read, result_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the worker: never returns into the caller's code
        status = 0
        try:
            for fd in (*others, request_write, result_read):
                os.close(fd)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            gc.disable()  # as the command does: millions of records, no cycles
            _serve(request_read, result_write, task)
        except BaseException:  # noqa: B036 - nothing may escape a forked child
            status = 70
        finally:
            os._exit(status)
    os.close(request_read)
    os.close(result_write)
    return _Worker(pid, request_write, result_read)


def _serve(requests: int, results: int, task: Task) -> None:
    """The worker's loop: a record for each request, until the parent closes the pipe."""
    while True:
        request = _read_frame(requests)
        if request is None:
            return
        path, read_as = json.loads(request)
        _reset_peak_memory()
        record = file_record(path, task, read_as)
        record["max_rss_kib"] = _peak_memory_kib()
        payload = json.dumps(record).encode()
        view = memoryview(_LENGTH.pack(len(payload)) + payload)
        while view:
            view = view[os.write(results, view):]


def _read_frame(fd: int) -> bytes | None:
    """One length-prefixed message from ``fd``; None at its end."""
    head = _read_exactly(fd, _LENGTH.size)
    if head is None:
        return None
    body = _read_exactly(fd, _LENGTH.unpack(head)[0])
    if body is None:
        raise EOFError("request cut short")
    return body


def _read_exactly(fd: int, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _reset_peak_memory() -> None:
    """Start the peak-memory count afresh for the next file (Linux: clear_refs 5)."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
    except OSError:
        pass  # (elsewhere the peak is the worker's so far)


def _peak_memory_kib() -> int:
    """The worker's peak resident memory since the last reset (``VmHWM``)."""
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _send(worker: _Worker, index: int, path: str, read_as: str | None,
          timeout: float | None) -> None:
    payload = json.dumps([path, read_as]).encode()
    view = memoryview(_LENGTH.pack(len(payload)) + payload)
    while view:
        view = view[os.write(worker.requests, view):]
    worker.job = (index, path)
    worker.deadline = time.monotonic() + timeout if timeout else None
    worker.given += 1
    if worker.given >= FILES_PER_WORKER:  # its last file: it exits when done
        os.close(worker.requests)
        worker.requests = -1


def _record(worker: _Worker) -> dict[str, Any] | None:
    """The record the worker has sent whole, if it has (taken out of its buffer)."""
    if len(worker.received) < _LENGTH.size:
        return None
    size = _LENGTH.unpack_from(worker.received)[0]
    end = _LENGTH.size + size
    if len(worker.received) < end:
        return None
    record: dict[str, Any] = json.loads(bytes(worker.received[_LENGTH.size:end]))
    del worker.received[:end]
    return record


def _gone(worker: _Worker, task: Task, kill: bool = False) -> dict[str, Any] | None:
    """Reap ``worker`` (killed first where ``kill``); the record of the file it was
    doing, which says why it has none (timeout, crash), or None if it was idle."""
    if kill:
        os.kill(worker.pid, signal.SIGKILL)
    for fd in (worker.requests, worker.results):
        if fd >= 0:
            os.close(fd)
    _, status, _ = os.wait4(worker.pid, 0)
    if worker.job is None:
        return None
    path = worker.job[1]
    if kill:
        return failed_record(path, task, "timeout", f"{path}: error: no result within the "
                             "time limit (--timeout)")
    if os.WIFSIGNALED(status):
        why = f"killed by signal {os.WTERMSIG(status)}"
    else:
        why = f"exit status {os.waitstatus_to_exitcode(status)}"
    return failed_record(path, task, "crash", f"{path}: error: the worker ended without a "
                         f"result ({why})")


def run_local(items: Iterable[tuple[int, str]], task: Task, jobs: int,
              timeout: float | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(index, record)`` for every ``(index, path)``, as each is done, at most ``jobs``
    files at a time."""
    return _run(((index, path, None) for index, path in items), task, jobs, timeout)


def run_files(files: list[tuple[str, str | None]], task: Task,
              timeout: float | None) -> list[dict[str, Any]]:
    """The record of each ``(path, read_as)``, in that order: the files done one after
    another in forked workers, as ``run_local`` does them with ``-j 1`` (what a Dask
    task runs for its share of the files)."""
    done = dict(_run([(index, path, read_as) for index, (path, read_as) in enumerate(files)],
                     task, 1, timeout))
    return [done[index] for index in range(len(files))]


def _run(items: Iterable[tuple[int, str, str | None]], task: Task, jobs: int,
         timeout: float | None) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(index, record)`` for every ``(index, path, read_as)``: each file sent to an
    idle worker (forked while fewer than ``jobs`` run), its record read from the
    worker's pipe, or the worker killed at the file's deadline; an interruption
    kills those still running."""
    warm_up()
    pending = deque(items)
    workers: dict[int, _Worker] = {}  # by the read end of their record pipe
    try:
        while pending or workers:
            for worker in workers.values():
                if pending and worker.job is None and worker.requests >= 0:
                    _send(worker, *pending.popleft(), timeout)
            while pending and len(workers) < max(1, jobs):
                others = [fd for w in workers.values() for fd in (w.requests, w.results)
                          if fd >= 0]
                worker = _spawn(task, others)
                workers[worker.results] = worker
                _send(worker, *pending.popleft(), timeout)
            if not pending:  # idle workers are done: let them go
                for worker in workers.values():
                    if worker.job is None and worker.requests >= 0:
                        os.close(worker.requests)
                        worker.requests = -1
            deadlines = [w.deadline for w in workers.values() if w.deadline is not None]
            wait = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
            ready, _, _ = select.select(list(workers), [], [], wait)
            for fd in ready:
                worker = workers[fd]
                chunk = os.read(fd, 1 << 16)
                if chunk:
                    worker.received += chunk
                    record = _record(worker)
                    if record is not None and worker.job is not None:
                        index = worker.job[0]
                        worker.job, worker.deadline = None, None
                        yield index, record
                    continue
                del workers[fd]  # its pipe's end: it exited, or crashed on its file
                lost = _gone(worker, task)
                if lost is not None and worker.job is not None:
                    yield worker.job[0], lost
            now = time.monotonic()
            for fd, worker in list(workers.items()):
                if worker.deadline is not None and worker.deadline <= now and \
                        worker.job is not None:
                    del workers[fd]
                    index = worker.job[0]
                    timed_out = _gone(worker, task, kill=True)
                    assert timed_out is not None  # (it had a file)
                    yield index, timed_out
    finally:
        for worker in workers.values():  # interrupted: leave no worker behind
            os.kill(worker.pid, signal.SIGKILL)
            for fd in (worker.requests, worker.results):
                if fd >= 0:
                    os.close(fd)
            os.waitpid(worker.pid, 0)
