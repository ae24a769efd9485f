"""Tree runs against ``readelf -wF`` over the same files: ``stats -r``, ``verify -r`` and
``--in-place -r`` with ``-j 1`` and ``-j 2``, each run alternated with readelf's
(``-j 1``: one readelf process at a time, ``xargs -0 -n1 readelf -wF``; ``-j 2``: two,
``xargs -0 -P2 -n1``), medians; then the speed-up of ``-j 2`` over ``-j 1`` beside what
two processes side by side get here (``ceiling.py``), and optionally a Dask
``LocalCluster`` of 2 workers.  ``--in-place`` runs on a fresh copy of the folders
(``cp -a`` into the temporary folder, never the folders themselves, then ``sync``: the
copy's writeback is not the run's) for every run, and readelf reads the same copy
before it is converted.

Usage: python benchmarks/bench_tree.py [--runs N] [--rows stats,verify,in-place]
                                       [--jobs 1,2] [--checkout DIR] [--dask] [FOLDER...]
(default folders: /usr/lib/x86_64-linux-gnu /usr/bin; --checkout: run
``python -m cfi2sframe`` from that checkout instead of this one; --dask needs
'cfi2sframe[dask]')
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ceiling import pair_ceiling

HERE = Path(__file__).resolve().parent
COMMANDS = {"stats": ["stats"], "verify": ["verify"], "in-place": ["--in-place"]}


def wall(cmd: list[str], cwd: str | None = None, stdin: bytes | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, input=stdin, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def files_of(folders: list[str], checkout: str) -> list[str]:
    """The files a tree run takes (the command's own walk, asked in a subprocess)."""
    code = ("import json, sys\nfrom cfi2sframe.batch.inputs import gather\n"
            "print(json.dumps(gather(sys.argv[1:], True)))")
    out = subprocess.run([sys.executable, "-c", code, *folders], cwd=checkout,
                         capture_output=True, text=True, check=True).stdout
    names: list[str] = json.loads(out)
    return names


def readelf(files: list[str], jobs: int) -> float:
    listing = b"\0".join(os.fsencode(name) for name in files) + b"\0"
    return wall(["xargs", "-0", "-n1", *(["-P2"] if jobs == 2 else []), "readelf", "-wF"],
                stdin=listing)


def ours(command: str, folders: list[str], jobs: int, checkout: str,
         tool: list[str] | None = None) -> float:
    """One tree run: ``tool`` (default ``python -m cfi2sframe`` in ``checkout``)."""
    return wall([*(tool or [sys.executable, "-m", "cfi2sframe"]), *COMMANDS[command], "-q",
                 "-r", *folders, "-j", str(jobs)], cwd=checkout)


def copied(folders: list[str], into: str) -> list[str]:
    """Fresh copies of ``folders`` under ``into`` (what a previous run made goes first),
    synced: else the copy's ~1.2 GB stay dirty in the page cache and the kernel writes
    them back during the timed runs (once 30 s old, ``vm.dirty_expire_centisecs``),
    where the run's own ``fsync``s queue behind them; the files a user converts are on
    the disk already, and the measured tool should not pay for the benchmark's writes."""
    shutil.rmtree(into, ignore_errors=True)
    os.makedirs(into)
    copies = []
    for number, folder in enumerate(folders):
        target = os.path.join(into, str(number))
        subprocess.run(["cp", "-a", folder, target], check=True)
        copies.append(target)
    subprocess.run(["sync"], check=True)
    return copies


def measure(command: str, folders: list[str], jobs: int, runs: int, checkout: str,
            tmp: str, tool: list[str] | None = None) -> tuple[float, float, int]:
    """Our median and readelf's, alternated run by run, and the number of files
    (``benchmarks/run.py``'s tree rows too, with its ``tool``)."""
    mine, theirs, files = [], [], []
    for _ in range(runs):
        if command == "in-place":
            trees = copied(folders, os.path.join(tmp, "copy"))
            files = files_of(trees, checkout)
        else:
            trees, files = folders, files_of(folders, checkout)
        theirs.append(readelf(files, jobs))
        mine.append(ours(command, trees, jobs, checkout, tool))
    return statistics.median(mine), statistics.median(theirs), len(files)


def row(command: str, folders: list[str], jobs: int, runs: int, checkout: str,
        tmp: str) -> float:
    """One row printed: our median and readelf's; returns ours."""
    a, b, count = measure(command, folders, jobs, runs, checkout, tmp)
    print(f"| {COMMANDS[command][0]} -r -j {jobs} | {count} files | {a:.2f} s | "
          f"{b:.2f} s | {a / b:.2f}x |", flush=True)
    return a


def dask_row(folders: list[str], checkout: str) -> None:
    try:
        from distributed import LocalCluster
    except ImportError:
        print("Dask: not installed (pip install 'cfi2sframe[dask]')")
        return
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      host="127.0.0.1", dashboard_address=None) as cluster:
        seconds = wall([sys.executable, "-m", "cfi2sframe", "stats", "-q", "-r", *folders,
                        "--dask", cluster.scheduler_address], cwd=checkout)
    print(f"Dask LocalCluster (2 workers), stats -r: {seconds:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="*",
                        default=["/usr/lib/x86_64-linux-gnu", "/usr/bin"])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rows", default="stats,verify,in-place")
    parser.add_argument("--jobs", default="1,2")
    parser.add_argument("--checkout", default=str(HERE.parent))
    parser.add_argument("--dask", action="store_true")
    args = parser.parse_args()
    folders = [os.path.abspath(folder) for folder in args.folders]
    print(f"tree runs over {' '.join(folders)}, medians of {args.runs} alternated runs")
    print("| command | input | cfi2sframe | readelf -wF | ratio |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for command in args.rows.split(","):
            times = {jobs: row(command, folders, jobs, args.runs, args.checkout, tmp)
                     for jobs in map(int, args.jobs.split(","))}
            if 1 in times and 2 in times:
                print(f"|   -j 2 speed-up | | {times[1] / times[2]:.2f}x | | |", flush=True)
    print(f"two processes side by side get {pair_ceiling():.2f}x one's throughput here now "
          "(benchmarks/ceiling.py)")
    if args.dask:
        dask_row(folders, args.checkout)


if __name__ == "__main__":
    main()
