"""Wall time of ``cfi2sframe big.s`` against ``as --gsframe big.s``, in one run.

Usage: python benchmarks/bench_asm.py [MIN_LINES] [RUNS]

Builds (once) a large real assembly file from concatenated csmith programs
compiled by gcc (-O0 and -O2), then times both tools RUNS times each,
alternating, and prints the medians and their ratio.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from installed import cfi2sframe_command

HERE = Path(__file__).resolve().parent


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    min_lines = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    ours = cfi2sframe_command()
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "big.s"
        subprocess.run([sys.executable, str(HERE / "make_big_asm.py"), str(big),
                        str(min_lines)], check=True, stdout=subprocess.DEVNULL)
        text = big.read_text()
        lines, cfi = text.count("\n"), text.count(".cfi_")
        gas_cmd = ["as", "--gsframe", str(big), "-o", str(Path(tmp) / "gas.o")]
        our_cmd = [ours, str(big), "-o", str(Path(tmp) / "ours.sframe")]
        timed(gas_cmd), timed(our_cmd)  # warm caches (file, Lark tables)
        gas, us = [], []
        for _ in range(runs):
            gas.append(timed(gas_cmd))
            us.append(timed(our_cmd))
        startup = statistics.median(timed([sys.executable, "-c", "pass"]) for _ in range(runs))
    g, o = statistics.median(gas), statistics.median(us)
    print(f"input: {lines} lines, {cfi} CFI directives; median of {runs} runs")
    print(f"as --gsframe: {g:.3f} s")
    print(f"cfi2sframe:   {o:.3f} s   (of which Python start-up alone: {startup:.3f} s)")
    print(f"ratio cfi2sframe / as --gsframe: {o / g:.2f}x")


if __name__ == "__main__":
    main()
