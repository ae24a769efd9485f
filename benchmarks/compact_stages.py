"""Where ``compact --check`` of a library spends its CPU: the lowering (``compact_file``:
reading, the FDEs' rows, the encodings) and the listing (``_print_functions`` to
/dev/null), each timed in one process with ``time.process_time``, for each checkout
given, the checkouts run in turn ``--rounds`` times so that all see the machine of
the same minutes; medians over the rounds.

Usage: python benchmarks/compact_stages.py [--library LIB] [--rounds 3] CHECKOUT...
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

LIBRARY = "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1"

# Run in a fresh interpreter per checkout (its package first on sys.path).
STAGES = """
import gc, json, sys, time
gc.disable()  # as the command runs (cli.main): on, its collections cost 1.1 s of CPU
from cfi2sframe.arch import get_arch
from cfi2sframe.cli import compact as cli
from cfi2sframe.compact.inputs import compact_file
from cfi2sframe.inputs import open_input
path = sys.argv[1]
source = open_input(path, mapped=False)
t0 = time.process_time()
arch, functions = compact_file(path, source.data, "x86_64", None, False, source.kind)
t1 = time.process_time()
functions = cli.in_address_order(functions, True)
flavour = cli.compact_arch(arch.name, path)
sys.stdout = open("/dev/null", "w")
t2 = time.process_time()
cli._print_functions(functions, flavour, get_arch(arch.name).register_names, True)
t3 = time.process_time()
print(json.dumps({"lowering": t1 - t0, "listing": t3 - t2}), file=sys.stderr)
"""


def stages(checkout: str, library: str) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=checkout)
    proc = subprocess.run([sys.executable, "-c", STAGES, library], env=env, cwd=checkout,
                          capture_output=True, text=True, check=True)
    found: dict[str, float] = json.loads(proc.stderr.strip().splitlines()[-1])
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--library", default=LIBRARY)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("checkouts", nargs="+")
    args = parser.parse_args()
    seen: dict[str, list[dict[str, float]]] = {c: [] for c in args.checkouts}
    for _ in range(args.rounds):
        for checkout in args.checkouts:
            seen[checkout].append(stages(checkout, args.library))
    for checkout, runs in seen.items():
        print(f"{checkout}: " + ", ".join(
            f"{stage} {statistics.median(run[stage] for run in runs):.3f} s CPU"
            for stage in ("lowering", "listing")))


if __name__ == "__main__":
    main()
