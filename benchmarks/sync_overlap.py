"""Where ``--in-place``'s wait for the disk goes: one process converts fresh copies of a
folder in place (``batch.record.file_record``, as a ``-j 1`` worker does), file by file
in turns with the two orders of ``files._synced``: ``fsync`` then the check (main's
order before the writeback hint) and this checkout's (writeback started, the check, then
``fsync``).  The files alternate between the two, run by run shifted, so both see the
same minutes; per order the sums of the files' wall, of the ``fsync`` wait and of the
check's wall and CPU, medians over the runs.

Run it with ``chrt -f 10`` (as root) to see the machine as if it were idle: under CPU
load the other processes' share, not the disk, sets the wall.

Usage: python benchmarks/sync_overlap.py [--runs N] [FOLDER]
       (default /usr/lib/x86_64-linux-gnu/gconv)
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cfi2sframe import files  # noqa: E402
from cfi2sframe.batch.inputs import gather  # noqa: E402
from cfi2sframe.batch.record import Task, file_record  # noqa: E402

Check = Callable[[int], None]
PARTS = ("wall", "fsync", "check", "check CPU")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", default="/usr/lib/x86_64-linux-gnu/gconv")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    real_fsync, new_order = os.fsync, files._synced
    spent: dict[str, float] = {}

    def add(part: str, since: float) -> None:
        spent[part] = spent.get(part, 0.0) + time.perf_counter() - since

    def fsync(fd: int) -> None:
        start = time.perf_counter()
        real_fsync(fd)
        add("fsync", start)

    def timed(check: Check) -> Check:
        def run(fd: int) -> None:
            start, cpu = time.perf_counter(), time.thread_time()
            check(fd)
            add("check", start)
            spent["check CPU"] = spent.get("check CPU", 0.0) + time.thread_time() - cpu
        return run

    def old_order(fd: int, check: Check | None) -> None:
        fsync(fd)
        if check is not None:
            timed(check)(fd)

    def this_order(fd: int, check: Check | None) -> None:
        new_order(fd, None if check is None else timed(check))

    orders = {"fsync, check": old_order, "this checkout": this_order}
    sums: dict[str, list[dict[str, float]]] = {name: [] for name in orders}
    os.fsync = fsync  # (this_order's fsync is timed too)
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(args.runs):
            copy = os.path.join(tmp, "copy")
            shutil.rmtree(copy, ignore_errors=True)
            subprocess.run(["cp", "-a", args.folder, copy], check=True)
            os.sync()
            per_order = {name: {part: 0.0 for part in PARTS} for name in orders}
            for number, path in enumerate(gather([copy], True)):
                name = list(orders)[(number + run) % 2]
                files._synced = orders[name]
                spent.clear()
                start = time.perf_counter()
                file_record(path, Task("convert"))
                add("wall", start)
                for part in PARTS:
                    per_order[name][part] += spent.get(part, 0.0)
            for name in orders:
                sums[name].append(per_order[name])
    print(f"{args.folder}, medians of {args.runs} runs, each order half the files, s")
    print("| order | " + " | ".join(PARTS) + " |")
    print("|---|" + "---|" * len(PARTS))
    for name, rows in sums.items():
        cells = " | ".join(f"{statistics.median(row[part] for row in rows):.3f}"
                           for part in PARTS)
        print(f"| {name} | {cells} |")


if __name__ == "__main__":
    main()
