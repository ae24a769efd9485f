"""Run ``file_record`` for many files in forked worker processes, one file at a time
each.

A worker is forked from the parent (which has imported what the work needs) and
does files one after another for the whole run, its memos warm from file to file; it
retires when its resident memory after a file is above ``RETIRE_KIB`` (it says so with
that file's record, and is sent nothing more), and the next worker starts from the
parent's small heap again, so memory never accumulates.  (Retiring every 64 files
cost a fork, its page faults, an exit and cold memos each time.)  A file that hangs is
stopped by killing its worker (``--timeout``), one that crashes the interpreter costs
only its own record; either way a new worker takes the next file.  Forking per file
cost more than the work on a small file: the child's first writes to the pages it
shares with the parent (reference counts) fault page by page, and forked siblings
fault in each other's way on two cores.  A worker pays that once for many files.

Files go out in chunks (up to ``CHUNK_FILES`` small ones, whose work is shorter than
a round trip through the parent), and a worker whose file is small gets its next
chunk before it ends the last one, so it never waits on the parent; each record comes
back as its file is done (the journal, the progress and ``--timeout`` stay per file:
a file's time starts when the record before it arrives, and the files of a killed
worker's chunk go to the next one).

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
from collections.abc import Iterable, Iterator, Mapping

from ..typed import TYPE_CHECKING
from .record import Task, failed_record, file_record, warm_up

if TYPE_CHECKING:
    from typing import Any

# A worker whose resident memory after a file is above this retires (a fresh one is
# forked): what the work keeps (memos, the allocator's free lists) stays bounded.
RETIRE_KIB = 256 << 10
# A chunk of files sent to a worker at once: at most this many, and more than one only
# while they add up to at most CHUNK_BYTES (a small file's work is less than a
# request's round trip through the parent).
CHUNK_FILES = 16
CHUNK_BYTES = 1 << 20
# ... and while their names take at most this in a request (6 bytes a character, as
# JSON escapes the worst): two chunks in a worker's request pipe stay below its 64 KiB,
# so the parent's write never blocks on a worker that is itself blocked writing a
# large record (a path is up to 4 KiB).
CHUNK_NAMES = 24 << 10
_LENGTH = struct.Struct(">I")
# The top bit of a record's length: the worker retires after the files it was sent.
_RETIRING = 1 << 31


class _Worker:
    """A forked worker as the parent sees it."""

    __slots__ = ("pid", "requests", "results", "jobs", "deadline", "received")

    def __init__(self, pid: int, requests: int, results: int) -> None:
        self.pid = pid
        # The write end of the worker's request pipe (-1: closed, retiring).
        self.requests = requests
        self.results = results  # the read end of its record pipe
        # (index, path, read_as) of the files sent and not yet recorded, in the order
        # the worker does them: the first is the one it works on.
        self.jobs: deque[tuple[int, str, str | None]] = deque()
        self.deadline: float | None = None  # the first job's
        self.received = bytearray()

    def retire(self) -> None:
        """Send it nothing more: it exits when it has done the files it has."""
        if self.requests >= 0:
            os.close(self.requests)
            self.requests = -1


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
    """The worker's loop: a record for each file of each request (a chunk of files),
    each sent as soon as it is done (flagged once its memory is past ``RETIRE_KIB``),
    until the parent closes the pipe."""
    memory = _Memory()
    while True:
        request = _read_frame(requests)
        if request is None:
            return
        for path, read_as in json.loads(request):
            memory.reset()
            record = file_record(path, task, read_as)
            record["max_rss_kib"], resident = memory.usage()
            _write_frame(results, json.dumps(record).encode(), resident > RETIRE_KIB)


def _write_frame(fd: int, payload: bytes, retiring: bool = False) -> None:
    if len(payload) >= _RETIRING:  # (the flag's bit: a worker ends, its file a crash)
        raise ValueError(f"a message of {len(payload)} bytes")
    view = memoryview(_LENGTH.pack(len(payload) | (_RETIRING if retiring else 0)) + payload)
    while view:
        view = view[os.write(fd, view):]


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


class _Memory:
    """A worker's peak resident memory file by file (Linux: ``clear_refs`` 5 resets
    ``VmHWM``); both files are opened once per worker, not per file (opening and
    parsing them was a fifth of the work on a file with nothing to convert)."""

    def __init__(self) -> None:
        try:
            self._clear: int | None = os.open("/proc/self/clear_refs", os.O_WRONLY)
        except OSError:
            self._clear = None  # (elsewhere the peak is the worker's so far)
        try:
            self._status: int | None = os.open("/proc/self/status", os.O_RDONLY)
        except OSError:
            self._status = None

    def reset(self) -> None:
        """Start the peak-memory count afresh for the next file."""
        if self._clear is not None:
            try:
                os.write(self._clear, b"5")
            except OSError:
                pass

    def usage(self) -> tuple[int, int]:
        """The worker's peak resident memory since the last reset (``VmHWM``) and its
        resident memory now (``VmRSS``), KiB; elsewhere its peak so far, twice (so it
        retires once that passes ``RETIRE_KIB``)."""
        if self._status is not None:
            try:
                text = os.pread(self._status, 1 << 16, 0)
                return _kib(text, b"\nVmHWM:"), _kib(text, b"\nVmRSS:")
            except (OSError, ValueError, IndexError):
                pass
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak, peak


def _kib(status: bytes, field: bytes) -> int:
    """A ``/proc/self/status`` field's KiB (``field``: its newline, name and colon)."""
    start = status.index(field) + len(field)
    return int(status[start:status.index(b"\n", start)].split()[0])


def _chunk(pending: deque[tuple[int, str, str | None]], sizes: Mapping[int, int],
           workers: int, together: Mapping[int, list[int]] | None = None,
           ) -> list[tuple[int, str, str | None]]:
    """The next files for a worker: up to ``CHUNK_FILES``, ``CHUNK_BYTES`` and
    ``CHUNK_NAMES`` (at least one), and no more than a share of what is left so that
    the last chunks still spread over the ``workers``; the other names of a file taken
    (``together``) come along, whatever the bounds."""
    most = min(CHUNK_FILES, max(1, len(pending) // (2 * workers)))
    chunk = [pending.popleft()]
    total, names = sizes.get(chunk[0][0], 0), 6 * len(chunk[0][1])
    while pending and len(chunk) < most:
        size, name = sizes.get(pending[0][0], 0), 6 * len(pending[0][1])
        if total + size > CHUNK_BYTES or names + name > CHUNK_NAMES:
            break
        total, names = total + size, names + name
        chunk.append(pending.popleft())
    if together and any(item[0] in together for item in chunk):
        taken = {item[0] for item in chunk}
        wanted = {index for item in chunk for index in together.get(item[0], ())} - taken
        if wanted:
            chunk += [item for item in pending if item[0] in wanted]
            kept = [item for item in pending if item[0] not in wanted]
            pending.clear()
            pending.extend(kept)
        order = {index: rank for rank, (index, _, _) in enumerate(chunk)}
        for group in {tuple(together[i]) for i in order if i in together}:
            places = sorted(order[i] for i in group if i in order)
            members = sorted((item for item in chunk if item[0] in group),
                             key=lambda item: item[0])
            for place, item in zip(places, members, strict=True):
                chunk[place] = item
    return chunk


def _send(worker: _Worker, chunk: list[tuple[int, str, str | None]],
          timeout: float | None, pending: deque[tuple[int, str, str | None]]) -> None:
    """``chunk`` to ``worker``; a worker found dead meanwhile (it crashed on its file
    and the parent has not read its end yet: the pipe is broken) gets it and anything
    later not, the chunk going back to the front of ``pending``.  Its end is then
    read as any crashed worker's, its file's record a crash."""
    try:
        _write_frame(worker.requests, json.dumps([[path, read_as] for _, path, read_as
                                                  in chunk]).encode())
    except BrokenPipeError:
        worker.retire()
        pending.extendleft(reversed(chunk))
        return
    if not worker.jobs:
        worker.deadline = time.monotonic() + timeout if timeout else None
    worker.jobs.extend(chunk)


def _record(worker: _Worker) -> dict[str, Any] | None:
    """The record the worker has sent whole, if it has (taken out of its buffer); a
    worker that says it retires gets no more files."""
    if len(worker.received) < _LENGTH.size:
        return None
    size = _LENGTH.unpack_from(worker.received)[0]
    end = _LENGTH.size + (size & ~_RETIRING)
    if len(worker.received) < end:
        return None
    record: dict[str, Any] = json.loads(bytes(worker.received[_LENGTH.size:end]))
    del worker.received[:end]
    if size & _RETIRING:
        worker.retire()
    return record


def _gone(worker: _Worker, task: Task, kill: bool = False) -> dict[str, Any] | None:
    """Reap ``worker`` (killed first where ``kill``); the record of the file it was
    doing, which says why it has none (timeout, crash), or None if it was idle.  The
    files sent after that one stay in ``worker.jobs``, for another worker."""
    if kill:
        os.kill(worker.pid, signal.SIGKILL)
    for fd in (worker.requests, worker.results):
        if fd >= 0:
            os.close(fd)
    _, status, _ = os.wait4(worker.pid, 0)
    if not worker.jobs:
        return None
    path = worker.jobs.popleft()[1]
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
              timeout: float | None = None, sizes: Mapping[int, int] | None = None,
              together: Mapping[int, list[int]] | None = None,
              ) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(index, record)`` for every ``(index, path)``, as each is done, at most ``jobs``
    files at a time (``sizes``: the files' sizes by index, which bound a chunk;
    ``together``: indices that go in one chunk, in that order, with each of them)."""
    return _run(((index, path, None) for index, path in items), task, jobs, timeout,
                sizes or {}, together or {})


def run_files(files: list[tuple[str, str | None]], task: Task,
              timeout: float | None) -> list[dict[str, Any]]:
    """The record of each ``(path, read_as)``, in that order: the files done one after
    another in forked workers, as ``run_local`` does them with ``-j 1`` (what a Dask
    task runs for its share of the files)."""
    done = dict(_run([(index, path, read_as) for index, (path, read_as) in enumerate(files)],
                     task, 1, timeout, {}, {}))
    return [done[index] for index in range(len(files))]


def _run(items: Iterable[tuple[int, str, str | None]], task: Task, jobs: int,
         timeout: float | None, sizes: Mapping[int, int],
         together: Mapping[int, list[int]]) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(index, record)`` for every ``(index, path, read_as)``: files sent in chunks to
    workers (forked while fewer than ``jobs`` run; a worker whose current file is
    small gets its next chunk before it ends it, so it never waits for the parent),
    each record read from the worker's pipe as its file is done, or the worker killed
    at the file's deadline (its other files go to another); an interruption kills
    those still running."""
    warm_up(task)
    pending = deque(items)
    workers: dict[int, _Worker] = {}  # by the read end of their record pipe
    try:
        while pending or workers:
            for worker in workers.values():
                if pending and worker.requests >= 0 and _hungry(worker, sizes):
                    _send(worker, _chunk(pending, sizes, jobs, together), timeout, pending)
            while pending and len(workers) < max(1, jobs):
                others = [fd for w in workers.values() for fd in (w.requests, w.results)
                          if fd >= 0]
                worker = _spawn(task, others)
                workers[worker.results] = worker
                _send(worker, _chunk(pending, sizes, jobs, together), timeout, pending)
            if not pending:  # idle workers are done: let them go
                for worker in workers.values():
                    if not worker.jobs:
                        worker.retire()
            deadlines = [w.deadline for w in workers.values() if w.deadline is not None]
            wait = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
            ready, _, _ = select.select(list(workers), [], [], wait)
            for fd in ready:
                worker = workers[fd]
                chunk = os.read(fd, 1 << 16)
                if chunk:
                    worker.received += chunk
                    while worker.jobs and (record := _record(worker)) is not None:
                        index = worker.jobs.popleft()[0]
                        worker.deadline = time.monotonic() + timeout \
                            if timeout and worker.jobs else None
                        yield index, record
                    continue
                del workers[fd]  # its pipe's end: it exited, or crashed on its file
                index = worker.jobs[0][0] if worker.jobs else -1
                lost = _gone(worker, task)
                _requeue(worker, pending)
                if lost is not None:
                    yield index, lost
            now = time.monotonic()
            for fd, worker in list(workers.items()):
                if worker.deadline is not None and worker.deadline <= now and worker.jobs:
                    del workers[fd]
                    index = worker.jobs[0][0]
                    timed_out = _gone(worker, task, kill=True)
                    assert timed_out is not None  # (it had a file)
                    _requeue(worker, pending)
                    yield index, timed_out
    finally:
        for worker in workers.values():  # interrupted: leave no worker behind
            os.kill(worker.pid, signal.SIGKILL)
            for fd in (worker.requests, worker.results):
                if fd >= 0:
                    os.close(fd)
            os.waitpid(worker.pid, 0)


def _hungry(worker: _Worker, sizes: Mapping[int, int]) -> bool:
    """True when ``worker`` should get more files now: it has none, or only the one it
    works on and that one is small (a large one ends late: the files after it would
    wait there while another worker might take them)."""
    return not worker.jobs or (len(worker.jobs) == 1 and
                               sizes.get(worker.jobs[0][0], 0) < CHUNK_BYTES)


def _requeue(worker: _Worker, pending: deque[tuple[int, str, str | None]]) -> None:
    """Put the files a lost worker had not done back at the front of ``pending``."""
    pending.extendleft(reversed(worker.jobs))
    worker.jobs.clear()
