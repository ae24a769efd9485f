"""Two checkouts' ``--in-place -r`` over fresh copies of a folder, alternated run by
run (which goes first swaps each pair): wall and CPU seconds (user + system of the
process tree) and the wall spent in ``fsync`` and in the rename that names each file
(summed over the processes), medians; from each worker's ``/proc/<pid>/schedstat`` at
its exit (its main thread), the seconds the workers were blocked off the CPU (their
lives less CPU and run-queue wait, summed) and the modelled wall an idle machine would
give (the longest worker's life less its run-queue wait).

On a loaded machine the wall time of ``--in-place`` is mostly ``fsync`` waiting on
other writers' data; the CPU seconds are the work itself, which the load moves less.
Run it with ``chrt -f 10`` (as root) to see the machine as if it were idle.

Usage: python benchmarks/tree_cpu.py --old /work/main --new . [--pairs 5] [--jobs 1]
       [FOLDER]   (default /usr/lib/x86_64-linux-gnu/gconv)
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# Run in the measured process: os.fsync and os.replace timed, each process's sums
# appended to the file named by argv[1] when it ends (a forked worker ends by os._exit).
TIMED = """
import os, runpy, sys, time
out, spent = sys.argv.pop(1), {"fsync": 0.0, "replace": 0.0}
def timed(name, real):
    def call(*args, **kwargs):
        start = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            spent[name] += time.perf_counter() - start
    return call
parent = os.getpid()
def dump():
    with open("/proc/self/schedstat") as handle:
        cpu, queued = (int(field) / 1e9 for field in handle.read().split()[:2])
    with open("/proc/self/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    with open("/proc/uptime") as handle:
        life = float(handle.read().split()[0]) - int(fields[19]) / os.sysconf("SC_CLK_TCK")
    worker = int(os.getpid() != parent)
    with open(out, "a") as handle:
        handle.write(f"{spent['fsync']} {spent['replace']} {worker} {life} {cpu} {queued}\\n")
os.fsync, os.replace = timed("fsync", os.fsync), timed("replace", os.replace)
real_exit = os._exit
def leave(status):
    dump()
    real_exit(status)
os._exit = leave
sys.argv[0] = "cfi2sframe"
try:
    runpy.run_module("cfi2sframe", run_name="__main__")
finally:
    dump()
"""
PARTS = ("wall", "CPU", "fsync", "rename", "blocked", "modelled")


def run(checkout: str, folder: str, jobs: str, tmp: str) -> tuple[float, ...]:
    """(wall, CPU, fsync, rename, workers blocked, modelled wall) seconds of one
    ``--in-place -q -r`` over a fresh copy of ``folder``."""
    copy = os.path.join(tmp, "copy")
    shutil.rmtree(copy, ignore_errors=True)
    subprocess.run(["cp", "-a", folder, copy], check=True)
    env = dict(os.environ, PYTHONPATH=os.path.abspath(checkout))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the image sets it: compile the package once
    waits = os.path.join(tmp, "waits")
    with open(waits, "w"):
        pass
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", TIMED, waits, "--in-place", "-q", "-r", copy,
                    "-j", jobs], cwd=checkout, env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(waits) as handle:
        sums = [[float(field) for field in line.split()] for line in handle]
    workers = [row for row in sums if row[2]]
    return (wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            sum(row[0] for row in sums), sum(row[1] for row in sums),
            sum(life - cpu - queued for _, _, _, life, cpu, queued in workers),
            max((life - queued for _, _, _, life, _, queued in workers), default=0.0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", default="/usr/lib/x86_64-linux-gnu/gconv")
    parser.add_argument("--old", required=True)
    parser.add_argument("--new", required=True)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--jobs", default="1")
    args = parser.parse_args()
    times: dict[str, list[tuple[float, ...]]] = {"old": [], "new": []}
    with tempfile.TemporaryDirectory() as tmp:
        for pair in range(args.pairs):
            for name in ("old", "new") if pair % 2 == 0 else ("new", "old"):
                times[name].append(run(getattr(args, name), args.folder, args.jobs, tmp))
    for name, rows in times.items():
        medians = ", ".join(f"{part} {statistics.median(row[i] for row in rows):.3f} s"
                            for i, part in enumerate(PARTS))
        print(f"{name}: {medians} (-j {args.jobs}, medians of {len(rows)}, load average "
              f"{os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
