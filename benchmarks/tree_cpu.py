"""Two checkouts' ``--in-place -r`` over fresh copies of a folder, alternated run by
run: wall and CPU seconds (user + system of the process tree), medians.

On a loaded machine the wall time of ``--in-place`` is mostly ``fsync`` waiting on
other writers' data; the CPU seconds are the work itself, which the load moves less.

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


def run(checkout: str, folder: str, jobs: str, tmp: str) -> tuple[float, float]:
    """(wall, CPU) seconds of one ``--in-place -q -r`` over a fresh copy of ``folder``."""
    copy = os.path.join(tmp, "copy")
    shutil.rmtree(copy, ignore_errors=True)
    subprocess.run(["cp", "-a", folder, copy], check=True)
    env = dict(os.environ, PYTHONPATH=os.path.abspath(checkout))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the image sets it: compile the package once
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "cfi2sframe", "--in-place", "-q", "-r", copy,
                    "-j", jobs], cwd=checkout, env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", default="/usr/lib/x86_64-linux-gnu/gconv")
    parser.add_argument("--old", required=True)
    parser.add_argument("--new", required=True)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--jobs", default="1")
    args = parser.parse_args()
    times: dict[str, list[tuple[float, float]]] = {"old": [], "new": []}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.pairs):
            for name in ("old", "new"):
                times[name].append(run(getattr(args, name), args.folder, args.jobs, tmp))
    for name, rows in times.items():
        print(f"{name}: wall {statistics.median(w for w, _ in rows):.2f} s, CPU "
              f"{statistics.median(c for _, c in rows):.2f} s (-j {args.jobs}, medians of "
              f"{len(rows)}, load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
