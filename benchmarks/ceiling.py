"""What ``-j 2`` can at most reach on this machine: the throughput of two processes
side by side over one's, for a pure-Python loop that shares nothing (2.0 where the two
cores are whole; a shared VM gives less, and it moves from minute to minute).  The
tree benchmarks print it beside their ``-j 2`` speed-up, measured in the same run.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

LOOP = "s = 0\nfor i in range(4_000_000):\n    s += i * i\n"


def _wall(copies: int) -> float:
    start = time.perf_counter()
    children = [subprocess.Popen([sys.executable, "-c", LOOP]) for _ in range(copies)]
    for child in children:
        child.wait()
    return time.perf_counter() - start


def pair_ceiling(runs: int = 5) -> float:
    """Two copies' throughput over one's: one copy and two side by side, alternated
    ``runs`` times, medians."""
    alone, paired = [], []
    for _ in range(runs):
        alone.append(_wall(1))
        paired.append(_wall(2))
    return 2 * statistics.median(alone) / statistics.median(paired)


if __name__ == "__main__":
    print(f"two processes side by side: {pair_ceiling():.2f}x one's throughput")
