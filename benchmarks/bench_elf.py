"""Wall time and peak memory of ``cfi2sframe LIB -o /dev/null`` against
``readelf --debug-dump=frames-interp LIB``, in one run, and their ratio.

Usage: python benchmarks/bench_elf.py [ELF_FILE] [RUNS]
(default: /usr/lib/x86_64-linux-gnu/libLLVM-14.so.1 from Debian's llvm-14)
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time

from installed import cfi2sframe_command


def timed(cmd: list[str]) -> tuple[float, int]:
    """Wall seconds and the child's peak RSS in KiB (getrusage of this one child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    # readelf exits 1 on warnings (e.g. a missing debug link) after printing everything.
    subprocess.run(cmd, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    elapsed = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return elapsed, max(peak, before)


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1"
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    ours = cfi2sframe_command()
    if not os.path.exists(path):
        sys.exit(f"{path} not found (apt-get install llvm-14)")
    readelf_cmd = ["readelf", "--debug-dump=frames-interp", path]
    our_cmd = [ours, "-w", path, "-o", os.devnull]
    theirs = [timed(readelf_cmd) for _ in range(runs)]
    us = [timed(our_cmd) for _ in range(runs)]
    r = statistics.median(t for t, _ in theirs)
    o = statistics.median(t for t, _ in us)
    print(f"input: {path} ({os.path.getsize(path)} bytes); median of {runs} runs")
    r_mem = max(m for _, m in theirs) / 1024
    o_mem = max(m for _, m in us) / 1024
    print(f"readelf --debug-dump=frames-interp: {r:.2f} s, peak RSS {r_mem:.0f} MiB")
    print(f"cfi2sframe -o /dev/null:            {o:.2f} s, peak RSS {o_mem:.0f} MiB")
    print(f"ratio cfi2sframe / readelf: {o / r:.2f}x")


if __name__ == "__main__":
    main()
