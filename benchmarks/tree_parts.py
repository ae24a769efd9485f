"""A tree run's serial part and its shared part, in CPU seconds, which a loaded machine
moves less than wall times: why ``-j 2`` stays under 2x on a folder of small files.

S: the parent alone, from its start to its first worker's fork and from the last
record to its end (the parent's ``time.process_time``; in brackets the part of it
before the command's first line runs: Python's start-up with this machine's site
hooks); P: the parent beside the workers (the records read); W: the workers' CPU
(``RUSAGE_CHILDREN``).  Each checkout's ``-j 1`` and ``-j 2`` runs alternate, medians;
modelled walls: ``S + W`` at ``-j 1`` and ``S + (W + P) / 2`` at ``-j 2``; the bound: the
modelled speed-up if S were Python's start-up alone and P nothing.

Usage: python benchmarks/tree_parts.py [--runs N] [--command stats] [--checkout DIR]...
                                       [FOLDER]   (default: the gconv folder)
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

# Run in the checkout: the command in this process, the pool's fork and records timed.
PROBE = """
import resource, sys, time
started = time.process_time()  # Python's own start-up, site hooks included
from cfi2sframe.cli import main
import cfi2sframe.batch.pool as pool
marks = {}
spawn, run = pool._spawn, pool._run
def timed_spawn(*args):
    marks.setdefault("fork", time.process_time())
    return spawn(*args)
def timed_run(*args, **kwargs):
    for item in run(*args, **kwargs):
        marks["last"] = time.process_time()
        yield item
pool._spawn, pool._run = timed_spawn, timed_run
try:
    main(sys.argv[1:])
finally:
    end = time.process_time()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"S={marks['fork'] + end - marks['last']} P={marks['last'] - marks['fork']} "
          f"W={children.ru_utime + children.ru_stime} Y={started}", file=sys.stderr)
"""


def parts(checkout: str, command: str, folder: str, jobs: int) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=checkout)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    err = subprocess.run([sys.executable, "-c", PROBE, command, "-q", "-r", folder, "-j",
                          str(jobs)], cwd=checkout, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, check=True).stderr
    return {key: float(value) for key, value in re.findall(r"([SPWY])=([\d.]+)", err)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", default="/usr/lib/x86_64-linux-gnu/gconv")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--command", default="stats")
    parser.add_argument("--checkout", action="append")
    args = parser.parse_args()
    checkouts = args.checkout or [str(HERE.parent)]
    found: dict[tuple[str, int], list[dict[str, float]]] = {}
    for _ in range(args.runs):
        for checkout in checkouts:
            for jobs in (1, 2):
                found.setdefault((checkout, jobs), []).append(
                    parts(checkout, args.command, args.folder, jobs))
    print(f"{args.command} -q -r {args.folder}: CPU ms, medians of {args.runs}")
    print("| checkout | -j | S (Python's start) | P | W | modelled wall |")
    print("|---|---|---|---|---|---|")
    for checkout in checkouts:
        walls, starts, works = [], [], []
        for jobs in (1, 2):
            s, p, w, y = (1000 * statistics.median(run[key] for run in found[checkout, jobs])
                          for key in "SPWY")
            walls.append(s + w if jobs == 1 else s + (w + p) / 2)
            starts.append(y)
            works.append(w)
            print(f"| {checkout} | {jobs} | {s:.0f} ({y:.0f}) | {p:.0f} | {w:.0f} | "
                  f"{walls[-1]:.0f} |")
        print(f"| {checkout} | speed-up | | | | {walls[0] / walls[1]:.2f}x |")
        bound = (starts[0] + works[0]) / (starts[1] + works[1] / 2)
        print(f"| {checkout} | bound | | | | {bound:.2f}x |")


if __name__ == "__main__":
    main()
