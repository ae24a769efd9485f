"""The batch pool's workers (``batch.pool``): each does files one after another for the
whole run and is replaced when it crashes on one, when its memory after a file is past
``RETIRE_KIB``, or when its file runs out of time; each record is of its own file,
with that file's peak memory.

The work is ``file_record``, replaced here by functions that crash, allocate or
name their process (the forked workers run what the test process holds); the
processes, pipes and signals are real.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import pytest

from cfi2sframe.batch import pool
from cfi2sframe.batch.record import Task

TASK = Task("stats", 2)


def _children() -> set[int]:
    """This process's children, running or exited and not yet reaped (Linux). The test
    process may have others than the pool's (a Dask cluster's helpers, from an earlier
    test in the same process): the pool must leave none of its own."""
    found: set[int] = set()
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children") as handle:
            found |= {int(pid) for pid in handle.read().split()}
    return found


def _records(monkeypatch: pytest.MonkeyPatch, work: Any, count: int, jobs: int,
             timeout: float | None = None) -> dict[int, dict[str, Any]]:
    monkeypatch.setattr(pool, "file_record", work)
    before = _children()
    found: dict[int, dict[str, Any]] = {}
    for index, record in pool.run_local(((i, f"f{i}") for i in range(count)), TASK, jobs,
                                        timeout):
        assert index not in found  # one record a file
        found[index] = record
    assert sorted(found) == list(range(count))
    assert _children() <= before  # every worker reaped
    return found


def _named(path: str, task: Task, read_as: str | None = None) -> dict[str, Any]:
    if path == "f3":
        os.kill(os.getpid(), signal.SIGSEGV)
    if path == "f5":
        os._exit(9)
    return {"path": path, "pid": os.getpid(), "status": "ok"}


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_worker_that_dies_costs_only_its_file(monkeypatch, jobs) -> None:
    records = _records(monkeypatch, _named, 12, jobs)
    assert records[3]["status"] == "crash" and "killed by signal 11" in records[3]["error"]
    assert records[5]["status"] == "crash" and "exit status 9" in records[5]["error"]
    ok = [records[i] for i in range(12) if i not in (3, 5)]
    assert all(r["status"] == "ok" and r["path"] == f"f{i}"
               for i, r in records.items() if i not in (3, 5))
    if jobs == 1:  # one file at a time: before, between and after the crashes, a new
        # worker each time (with two, which worker takes which file depends on timing)
        runs = [{records[i]["pid"] for i in part} for part in ((0, 1, 2), (4,), range(6, 12))]
        assert all(len(pids) == 1 for pids in runs) and len(set.union(*runs)) == 3
    else:
        assert len({r["pid"] for r in ok}) >= 2


def test_a_file_sent_to_a_worker_that_just_died_goes_to_another(monkeypatch, tmp_path,
                                                                 ) -> None:
    # The race a loaded machine hits: the worker crashes on f3 while the parent, which
    # has not yet read its end, sends it f4 (two files a chunk: a worker left with one
    # small file, f3, is sent the next chunk).  The write finds the pipe broken; f4
    # must go to the next worker, not end the run with BrokenPipeError.  Made certain
    # here: f4's first send waits until f3's worker is a zombie.
    died = tmp_path / "died"

    def work(path: str, task: Task, read_as: str | None = None) -> dict[str, Any]:
        if path == "f3":
            (tmp_path / "pid").write_text(str(os.getpid()))
            os.rename(tmp_path / "pid", died)
            os._exit(9)
        return {"path": path, "pid": os.getpid(), "status": "ok"}

    real_send, raced = pool._send, []

    def send(worker: Any, chunk: list[tuple[int, str, str | None]], *rest: Any) -> None:
        if chunk[0][1] == "f4" and not raced:  # (the first time: to the dying worker)
            while not died.exists():
                time.sleep(0.001)
            pid = int(died.read_text())
            while _state(pid) != "Z":
                time.sleep(0.001)
            raced.append(worker.pid == pid)
        real_send(worker, chunk, *rest)

    monkeypatch.setattr(pool, "CHUNK_FILES", 2)
    monkeypatch.setattr(pool, "_send", send)
    records = _records(monkeypatch, work, 12, 1)
    assert raced == [True]  # (the race was run, not missed)
    assert records[3]["status"] == "crash" and "exit status 9" in records[3]["error"]
    assert all(records[i]["status"] == "ok" and records[i]["path"] == f"f{i}"
               for i in range(12) if i != 3)
    assert records[4]["pid"] != int(died.read_text())


def _state(pid: int) -> str:
    """A child's state letter from ``/proc`` ('Z': exited, not yet reaped)."""
    with open(f"/proc/{pid}/stat") as handle:
        return handle.read().rsplit(")", 1)[1].split()[0]


def test_a_worker_does_every_file_of_the_run(monkeypatch) -> None:
    # (It was replaced every 64 files: a fork, its page faults and cold memos each time.)
    records = _records(monkeypatch, _named_safe, 150, 1)
    assert len({record["pid"] for record in records.values()}) == 1


_KEPT: list[bytearray] = []


def _keeping(path: str, task: Task, read_as: str | None = None) -> dict[str, Any]:
    if path in ("f2", "f9"):  # keeps 64 MiB, touched, past the file
        block = bytearray(64 << 20)
        block[::4096] = b"\1" * len(block[::4096])
        _KEPT.append(block)
    return {"path": path, "pid": os.getpid(), "status": "ok"}


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="Linux only")
@pytest.mark.parametrize("jobs", [1, 2])
def test_a_worker_past_its_memory_bound_retires_after_the_file(monkeypatch, jobs) -> None:
    # The bound: this process's resident memory (what a worker starts with) + 32 MiB.
    with open("/proc/self/status", "rb") as handle:
        resident = pool._kib(handle.read(), b"\nVmRSS:")
    monkeypatch.setattr(pool, "RETIRE_KIB", resident + (32 << 10))
    records = _records(monkeypatch, _keeping, 14, jobs)
    assert all(record["status"] == "ok" for record in records.values())
    # A worker holding 64 MiB after a file does the files it was sent with it, and is
    # sent none after: f9 goes to another worker than f2, and so do the last files.
    assert records[2]["pid"] != records[9]["pid"] != records[13]["pid"]
    if jobs == 1:  # one file at a time, in order: three workers, one after another
        pids = [records[i]["pid"] for i in range(14)]
        changes = [i for i in range(1, 14) if pids[i] != pids[i - 1]]
        assert len(changes) == 2 and changes[0] > 2 and changes[1] > 9


def _named_safe(path: str, task: Task, read_as: str | None = None) -> dict[str, Any]:
    return {"path": path, "pid": os.getpid(), "status": "ok"}


def _allocating(path: str, task: Task, read_as: str | None = None) -> dict[str, Any]:
    if path == "f0":
        block = bytearray(200 << 20)  # 200 MiB, touched
        block[::4096] = b"\1" * len(block[::4096])
        del block
    return {"path": path, "pid": os.getpid(), "status": "ok"}


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="Linux only")
def test_each_record_has_its_own_files_peak_memory(monkeypatch) -> None:
    records = _records(monkeypatch, _allocating, 3, 1)
    assert records[0]["pid"] == records[1]["pid"]  # one worker for both
    assert records[0]["max_rss_kib"] > (200 << 10)
    # The second file's peak is the worker's size, not the first file's 200 MiB. (A
    # forked worker starts with the test process's resident pages: not an absolute bound.)
    assert records[1]["max_rss_kib"] < records[0]["max_rss_kib"] - (150 << 10)


def _slow(path: str, task: Task, read_as: str | None = None) -> dict[str, Any]:
    if path == "f1":
        import time

        time.sleep(60)
    return {"path": path, "pid": os.getpid(), "status": "ok"}


def test_a_file_past_its_time_is_stopped_and_the_rest_go_on(monkeypatch) -> None:
    records = _records(monkeypatch, _slow, 5, 2, timeout=1.0)
    assert records[1]["status"] == "timeout"
    assert all(records[i]["status"] == "ok" for i in (0, 2, 3, 4))


def test_an_interrupted_run_leaves_no_worker(monkeypatch) -> None:
    monkeypatch.setattr(pool, "file_record", _slow)
    before = _children()
    run = pool.run_local(((i, f"f{i}") for i in range(5)), TASK, 2)
    assert next(run)[0] == 0
    assert _children() - before  # (its workers run)
    run.close()  # (as an interruption unwinds it)
    assert _children() <= before


def _slow_second(path: str, task: Task, read_as: str | None = None) -> dict[str, Any]:
    if path == "f1":
        import time

        time.sleep(60)
    return {"path": path, "pid": os.getpid(), "status": "ok"}


def test_a_timeout_inside_a_chunk_sends_the_rest_to_a_new_worker(monkeypatch) -> None:
    # One worker, 12 files: f0-f5 go out as one chunk; f1 hangs, and f2-f5, sent
    # with it, must be done by the next worker, not lost nor recorded as timeouts.
    records = _records(monkeypatch, _slow_second, 12, 1, timeout=1.0)
    assert records[1]["status"] == "timeout"
    assert all(records[i]["status"] == "ok" for i in range(12) if i != 1)
    assert records[0]["pid"] != records[2]["pid"] == records[5]["pid"]


def _steady(path: str, task: Task, read_as: str | None = None) -> dict[str, Any]:
    import time

    time.sleep(0.3)
    return {"path": path, "pid": os.getpid(), "status": "ok"}


def test_the_time_limit_is_per_file_not_per_chunk(monkeypatch) -> None:
    # 8 files of 0.3 s in chunks of 4 take 1.2 s a chunk: past a 0.9 s limit were it
    # counted from the chunk's start.
    records = _records(monkeypatch, _steady, 8, 1, timeout=0.9)
    assert all(record["status"] == "ok" for record in records.values())
    assert len({record["pid"] for record in records.values()}) == 1


def test_chunks_hold_small_files_up_to_their_bounds() -> None:
    from collections import deque

    def chunks(sizes: list[int], workers: int) -> list[int]:
        pending = deque((i, f"f{i}", None) for i in range(len(sizes)))
        lengths = []
        while pending:
            lengths.append(len(pool._chunk(pending, dict(enumerate(sizes)), workers)))
        return lengths

    small = pool.CHUNK_BYTES // 64
    # Many small files: full chunks, then shares that spread the rest over the workers.
    assert chunks([small] * 100, 1) == [16, 16, 16, 16, 16, 10, 5, 2, 1, 1, 1]
    assert chunks([small] * 40, 2) == [10, 7, 5, 4, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1]
    # A large file goes alone; small ones join while they fit in CHUNK_BYTES.
    big = pool.CHUNK_BYTES
    assert chunks([big, big, small, small], 1)[:2] == [1, 1]
    assert chunks([big // 2, big // 2, big // 2] + [small] * 60, 1)[:2] == [2, 16]


def test_the_names_of_one_file_go_to_one_worker_in_their_order() -> None:
    # Files 1 and 30 are one inode (a hard link): whichever comes first in the queue,
    # both go out in its chunk, the first name first, so no two workers convert one
    # file at once and the first name is the one rewritten, as with -j 1.
    from collections import deque

    big = pool.CHUNK_BYTES  # each file alone in its chunk, but for the names it pulls
    together = {1: [1, 30], 30: [1, 30]}
    for order in ([30, 1], [1, 30]):
        pending = deque((i, f"f{i}", None) for i in [*order, *range(2, 30)])
        chunk = pool._chunk(pending, dict.fromkeys(range(31), big), 2, together)
        assert [index for index, _, _ in chunk] == [1, 30]
        assert [index for index, _, _ in pending] == list(range(2, 30))


def test_a_chunks_names_stay_well_below_a_pipes_buffer() -> None:
    # Long paths (4 KiB each) would make a chunk of 16 larger than the 64 KiB a pipe
    # holds; the parent could then block writing it while the worker blocks writing a
    # large record back.  A chunk's names stay within CHUNK_NAMES.
    from collections import deque

    long = "/" + "d" * 4094
    pending = deque((i, f"{long}/{i}", None) for i in range(40))
    chunk = pool._chunk(pending, {}, 1)
    assert len(chunk) == 1  # 4 KiB of name: up to 24 KiB in JSON
    pending = deque((i, f"/{i:04}" + "\udcff" * 8, None) for i in range(40))  # 6 bytes each
    chunk = pool._chunk(pending, {}, 1)
    request = pool.json.dumps([[path, None] for _, path, _ in chunk]).encode()
    assert len(chunk) == 16 and 2 * len(request) < 64 << 10
    pending = deque((i, "/" + "\udcff" * 1000, None) for i in range(40))
    chunk = pool._chunk(pending, {}, 1)
    request = pool.json.dumps([[path, None] for _, path, _ in chunk]).encode()
    assert len(chunk) == 4 and 2 * len(request) < 64 << 10
