"""Where a tree run's ``--in-place`` workers wait off the CPU, by cause: why ``-j 2`` is
not twice ``-j 1`` over the large trees when the CPU work is the same.

Each run converts fresh copies of the folders (``cp -a`` into the temporary folder,
synced before) under ``perf sched record -g`` (root; the kernel's scheduler events with
their stacks), then pairs each time a thread of the run's process tree left the CPU
with the time it stayed away: blocked in the kernel (state D) by the stack's cause
(the ``fsync``'s inode write and the device's cache flush, the old inode freed by the
rename, ...), asleep (S: the parent's ``select``, a pipe), or runnable and preempted
(R: the machine's other load, which wall times also carry).  Per thread: CPU, blocked
and preempted seconds.  The checkouts and jobs alternate; load does not move the CPU
much, but the disk's waits carry the other writers' I/O.

Usage: python benchmarks/tree_waits.py [--checkout DIR]... [--jobs 1,2] [--runs N]
                                       [FOLDER...]
       (default folders: /usr/lib/x86_64-linux-gnu /usr/bin; checkout: this one)
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# A blocked stack's cause: the first of these found in it names the wait.
CAUSES = (("blkdev_issue_discard", "rename", "the replaced inode freed in the rename (discard)"),
          ("blkdev_issue_discard", "", "a replaced inode freed elsewhere (discard)"),
          ("blkdev_issue_flush", "", "fsync: the device's cache flush"),
          ("__sync_dirty_buffer", "fsync", "fsync: the inode's block written"),
          ("folio_wait_writeback", "fsync", "fsync: the data's writeback"),
          ("linkat", "", "linkat"), ("copy_file_range", "", "copy_file_range"),
          ("filemap_fault", "", "a page fault read"), ("filemap_read", "", "a read"))
LINE = re.compile(r"\s*[\d.]+\s+\[\d+\]\s+.*?\[(\d+)(?:/(\d+))?\]\s+([\d.]+)\s+[\d.]+\s+"
                  r"([\d.]+)\s+(\S)\s*(.*)")


def cause(stack: str) -> str:
    for needle, also, name in CAUSES:
        if needle in stack and also in stack:
            return name
    return " <- ".join(part.strip() for part in stack.split("<-")[:3])


def tree_of(data: str) -> set[int]:
    """The ids of the recorded command's processes and threads (from perf's fork events)."""
    events = subprocess.run(["perf", "script", "-i", data, "--show-task-events"],
                            capture_output=True, text=True, check=True).stdout
    root, children = None, collections.defaultdict(list)
    for line in events.splitlines():
        exec_ = re.search(r"PERF_RECORD_COMM(?: exec)?: perf-exec:(\d+)/", line)
        if exec_ and root is None:
            root = int(exec_.group(1))
        fork = re.search(r"PERF_RECORD_FORK\((\d+):\d+\):\((\d+):\d+\)", line)
        if fork:
            children[int(fork.group(2))].append(int(fork.group(1)))
    ours, todo = set(), [root]
    while todo:
        task = todo.pop()
        if task is not None and task not in ours:
            ours.add(task)
            todo += children[task]
    return ours


def waits(data: str) -> tuple[dict[int, collections.Counter[str]], collections.Counter[str]]:
    """Per thread: seconds run, blocked (D), asleep (S) and preempted (R); and the
    blocked seconds by cause, over all of the run's threads."""
    ours = tree_of(data)
    text = subprocess.run(["perf", "sched", "timehist", "-i", data, "-g", "--state",
                           "--max-stack", "30"], capture_output=True, text=True,
                          check=True).stdout
    left: dict[int, tuple[str, str]] = {}
    threads: dict[int, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    causes: collections.Counter[str] = collections.Counter()
    for line in text.splitlines():
        match = LINE.match(line)
        if not match or int(match.group(2) or match.group(1)) not in ours:
            continue  # (a thread is [tid/pid]: its process's id is in the tree)
        tid, wait, ran = int(match.group(1)), float(match.group(3)) / 1e3, \
            float(match.group(4)) / 1e3
        state, stack = match.group(5), match.group(6)
        if tid in left:  # the time away that ends here began where it left
            how, why = left[tid]
            threads[tid][how] += wait
            if how == "D":
                causes[why] += wait
        threads[tid]["run"] += ran
        left[tid] = ("D", cause(stack)) if state == "D" else \
            ("S", "") if state in "SI" else ("R", "")
    return threads, causes


def run(checkout: str, folders: list[str], jobs: str, tmp: str) -> None:
    copy = os.path.join(tmp, "copy")
    shutil.rmtree(copy, ignore_errors=True)
    os.makedirs(copy)
    trees = []
    for number, folder in enumerate(folders):
        trees.append(os.path.join(copy, str(number)))
        subprocess.run(["cp", "-a", folder, trees[-1]], check=True)
    subprocess.run(["sync"], check=True)
    env = dict(os.environ, PYTHONPATH=os.path.abspath(checkout))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    data = os.path.join(tmp, "sched.data")
    start = time.perf_counter()
    subprocess.run(["perf", "sched", "record", "-g", "-o", data, "--", sys.executable, "-m",
                    "cfi2sframe", "--in-place", "-q", "-r", *trees, "-j", jobs],
                   cwd=checkout, env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    threads, causes = waits(data)
    busy = {tid: row for tid, row in threads.items() if row["run"] >= 0.1}
    print(f"{checkout} -j {jobs}: wall {wall:.2f} s (perf's included), load "
          f"{os.getloadavg()[0]:.1f}; CPU of all its threads "
          f"{sum(row['run'] for row in threads.values()):.2f} s")
    for tid, row in sorted(busy.items()):
        print(f"  thread {tid}: CPU {row['run']:.2f}, blocked {row['D']:.2f}, asleep "
              f"{row['S']:.2f}, preempted {row['R']:.2f} s")
    print("  blocked by cause: " + ", ".join(f"{name} {seconds:.2f} s"
                                              for name, seconds in causes.most_common(6)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="*",
                        default=["/usr/lib/x86_64-linux-gnu", "/usr/bin"])
    parser.add_argument("--checkout", action="append")
    parser.add_argument("--jobs", default="1,2")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    checkouts = args.checkout or [str(HERE.parent)]
    with tempfile.TemporaryDirectory() as tmp:
        for number in range(args.runs):
            for jobs in args.jobs.split(","):
                for checkout in checkouts if number % 2 == 0 else checkouts[::-1]:
                    run(checkout, [os.path.abspath(f) for f in args.folders], jobs, tmp)


if __name__ == "__main__":
    main()
