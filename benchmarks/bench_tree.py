"""Wall time of ``cfi2sframe stats -r`` over whole folders with -j 1, -j 2 and a Dask
LocalCluster of 2 workers, in one run: the speed-up of -j 2, the cost of Dask
against -j 2, and the peak memory of the workers (from the records' max_rss_kib).

Usage: python benchmarks/bench_tree.py [FOLDER...]
(default: /usr/lib/x86_64-linux-gnu /usr/bin; needs 'cfi2sframe[dask]' for the Dask row)
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from ceiling import pair_ceiling


def timed_run(folders: list[str], extra: list[str], jsonl: str) -> tuple[float, list[dict]]:
    cmd = [sys.executable, "-m", "cfi2sframe", "stats", "-q", "-r", *folders,
           "--jsonl", jsonl, *extra]
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, check=False)
    elapsed = time.perf_counter() - start
    with open(jsonl) as handle:
        return elapsed, [json.loads(line) for line in handle]


def describe(name: str, seconds: float, records: list[dict]) -> str:
    rss = [r["max_rss_kib"] / 1024 for r in records if r.get("max_rss_kib")]
    memory = (f"worker peak RSS median {statistics.median(rss):.0f} MiB, max {max(rss):.0f} "
              f"MiB" if rss else "worker memory not reported")
    return f"{name:<22} {seconds:7.1f} s  {len(records)} files; {memory}"


def main() -> None:
    folders = sys.argv[1:] or ["/usr/lib/x86_64-linux-gnu", "/usr/bin"]
    with tempfile.TemporaryDirectory() as tmp:
        one = timed_run(folders, ["-j", "1"], os.path.join(tmp, "j1.jsonl"))
        two = timed_run(folders, ["-j", "2"], os.path.join(tmp, "j2.jsonl"))
        print(f"stats -r {' '.join(folders)}")
        print(describe("-j 1", *one))
        print(describe("-j 2", *two))
        print(f"speed-up -j 2 against -j 1: {one[0] / two[0]:.2f}x (two processes side by "
              f"side get {pair_ceiling():.2f}x one's throughput here now: "
              "benchmarks/ceiling.py)")
        try:
            from distributed import LocalCluster
        except ImportError:
            print("Dask: not installed (pip install 'cfi2sframe[dask]')")
            return
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                          host="127.0.0.1", dashboard_address=None) as cluster:
            dask = timed_run(folders, ["--dask", cluster.scheduler_address],
                             os.path.join(tmp, "dask.jsonl"))
        print(describe("Dask LocalCluster (2)", *dask))
        print(f"Dask overhead against -j 2: {dask[0] / two[0]:.2f}x")


if __name__ == "__main__":
    main()
