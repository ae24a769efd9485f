"""Every path a user runs, timed against the nearest C tool in the same run, on dense
input of three sizes: whether each is within reach of the C tool and grows linearly.

Usage: python benchmarks/bench_paths.py [SIZES] [RUNS] [LIBRARY]
  SIZES: functions per dense file, comma-separated (default 10000,30000,100000)
  RUNS: runs per command, the median is printed (default 3)
  LIBRARY: a large shared library (default libLLVM-14.so.1 from Debian's llvm-14)

Dense input is ``make_dense_asm.py``: gcc -O0 style functions with push/mov/pop CFI.
Per size: ``.s`` -> object (against ``as --gsframe``), ``dump`` of our object (against
``readelf --sframe`` of gas's), ``lookup`` of one PC, ``verify`` of our object.  On
the library: ELF -> SFrame, ``--emit elf``, ``verify`` and ``--in-place`` of the
converted copy (against ``readelf --debug-dump=frames-interp``).  "per fn" is
microseconds per function; linear cost keeps it flat across sizes.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
LIBRARY = "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1"


def timed(cmd: list[str], runs: int) -> tuple[float, float]:
    """Median wall seconds over ``runs``, and the largest peak RSS (MiB) of those runs
    (``os.wait4`` gives each child's own figure)."""
    walls, peak = [], 0.0
    for _ in range(runs):
        start = time.perf_counter()
        # Exit statuses are not checked: readelf exits 1 on warnings after printing.
        child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, _, usage = os.wait4(child.pid, 0)
        walls.append(time.perf_counter() - start)
        child.returncode = 0  # reaped above
        peak = max(peak, usage.ru_maxrss / 1024)
    return statistics.median(walls), peak


def row(path: str, size: int, ours: tuple[float, float],
        theirs: tuple[float, float] | None, tool: str) -> str:
    ratio = f"{ours[0] / theirs[0]:6.1f}x" if theirs else "       "
    against = f"{tool} {theirs[0]:.3f} s" if theirs else ""
    per = f"{ours[0] / size * 1e6:7.1f}" if size else "       "
    return (f"{path:<22}{size:>8}  {ours[0]:8.3f} s {ours[1]:7.0f} MiB  {per}  {ratio}  "
            f"{against}")


def main() -> None:
    sizes = [int(x) for x in (sys.argv[1] if len(sys.argv) > 1 else
                              "10000,30000,100000").split(",")]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    library = sys.argv[3] if len(sys.argv) > 3 else LIBRARY
    ours = shutil.which("cfi2sframe") or sys.exit("cfi2sframe is not installed")
    print(f"{'path':<22}{'functions':>8}  {'ours':>10} {'peak':>11}  {'per fn':>7}  "
          f"{'ratio':>7}  C tool")
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            src, gas_o, our_o = (str(Path(tmp) / f"{n}{ext}") for ext in
                                 (".s", ".gas.o", ".o"))
            subprocess.run([sys.executable, str(HERE / "make_dense_asm.py"), src, str(n)],
                           check=True)
            gas = timed(["as", "--gsframe", src, "-o", gas_o], runs)
            print(row(".s -> object", n, timed([ours, src, "--emit", "obj", "-o", our_o],
                                              runs), gas, "as --gsframe"), flush=True)
            readelf = timed(["readelf", "--sframe", gas_o], runs)
            print(row("dump", n, timed([ours, "dump", our_o], runs), readelf,
                      "readelf --sframe"), flush=True)
            print(row("lookup one PC", n, timed([ours, "lookup", our_o, "0x100"], runs),
                      readelf, "readelf --sframe"), flush=True)
            print(row("verify (object)", n, timed([ours, "verify", our_o], runs), None, ""),
                  flush=True)
        if not os.path.exists(library):
            sys.exit(f"{library} not found (apt-get install llvm-14)")
        converted = str(Path(tmp) / "lib.so")
        frames = timed(["readelf", "--debug-dump=frames-interp", library], runs)
        tool = "readelf -wF"
        print(row("ELF -> SFrame", 0, timed([ours, "-w", library, "-o", os.devnull], runs),
                  frames, tool), flush=True)
        print(row("--emit elf", 0, timed([ours, "-w", library, "--emit", "elf", "-o",
                                          converted], runs), frames, tool), flush=True)
        print(row("verify (library)", 0, timed([ours, "verify", converted], runs), frames,
                  tool), flush=True)
        print(row("lookup (library)", 0, timed([ours, "lookup", converted, "0x1000000"],
                                               runs), frames, tool), flush=True)
        copy = str(Path(tmp) / "inplace.so")
        shutil.copy(library, copy)
        print(row("--in-place", 0, timed([ours, "-w", "--in-place", copy], 1), frames, tool),
              flush=True)


if __name__ == "__main__":
    main()
