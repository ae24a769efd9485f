"""Where ``--emit elf`` of a library spends its CPU: each stage of the conversion timed in
one process (the cyclic GC off, as the command runs), the least of ``--runs``, and the
whole command run in the same process (``cli.main``: the output written and synced).

Usage: python benchmarks/emit_stages.py [LIB] [--runs 5] [--rounds 3] [--against CHECKOUT]

``--against``: the same stages of another checkout (its package on ``PYTHONPATH``),
the two run in turn ``--rounds`` times so that both see the machine of the same
minutes; each figure is the least over the rounds.  The package's start-up and imports
are ``benchmarks/startup.py``'s.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

LIBRARY = "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1"


def least(work: Callable[[], object], runs: int) -> float:
    """The least CPU seconds of ``runs`` calls of ``work`` after one to warm up."""
    work()
    best = float("inf")
    for _ in range(runs):
        start = time.process_time()
        work()
        best = min(best, time.process_time() - start)
    return best


def stages(path: str, runs: int) -> dict[str, float]:
    """CPU seconds of each stage of ``--emit elf`` of ``path`` in this process."""
    from cfi2sframe.arch import arch_for_machine
    from cfi2sframe.cli import main
    from cfi2sframe.convert import convert_elf
    from cfi2sframe.elf import cfi as elf_cfi
    from cfi2sframe.elf.grow import find_room
    from cfi2sframe.elf.read import open_elf
    from cfi2sframe.elf.symbols import function_names
    from cfi2sframe.sframe import build

    gc.disable()
    with open(path, "rb") as file:
        data = file.read()
    view = open_elf(data, path)
    cfi = elf_cfi.read_elf_cfi(path, data)
    arch = arch_for_machine(cfi.machine, path, cfi.big_endian)
    functions, _ = build.lower_fdes(cfi, arch, 2)
    image = build.encode_sframe(functions, arch, 2)
    address = convert_elf(path, data).sframe_address
    # What the conversion reads and lowers: the CFI's FDEs then lower_fdes, or (from
    # 2026-11-27's fifth round) the section with its names then the one compiled pass.
    if hasattr(build, "lower_eh_frame"):
        found = elf_cfi.cfi_section(path, data)
        empty = elf_cfi.cfi_of(found, ())

        def one_pass() -> object:
            return build.lower_eh_frame(found.contents, found.address, 8, found.names,
                                        empty, arch, 2)
        reading = {"CFI section read (names included)":
                   least(lambda: elf_cfi.cfi_section(path, data), runs),
                   "FDEs lowered (lower_eh_frame, one pass)": least(one_pass, runs)}
    else:
        reading = {"CFI read (names included)": least(lambda: elf_cfi.read_elf_cfi(path, data),
                                                      runs),
                   "lower_fdes": least(lambda: build.lower_fdes(cfi, arch, 2), runs)}
    # From 2026-11-27's sixth round: the section read with no names, then one compiled
    # pass to the V2 table (names read for the general path's few functions), placed.
    if hasattr(build, "eh_table"):
        from functools import partial

        unnamed = elf_cfi.cfi_section(path, data, named=False)

        def table() -> object:
            return build.eh_table(unnamed.contents, unnamed.address, 8,
                                  partial(function_names, view), empty, arch)
        made = build.eh_table(unnamed.contents, unnamed.address, 8,
                              partial(function_names, view), empty, arch)
        assert made is not None
        reading.update({
            "CFI section read, not named": least(
                lambda: elf_cfi.cfi_section(path, data, named=False), runs),
            "FDEs to the V2 table in one pass (eh_table)": least(table, runs),
            "table placed (place_fdes)": least(lambda: made[0].to_bytes(address), runs)})
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.so")
        return {
            "function names": least(lambda: function_names(view), runs),
            **reading,
            "encode_sframe": least(lambda: build.encode_sframe(functions, arch, 2), runs),
            "grown table checked (find_room)":
                least(lambda: find_room(view, view.segments(), 2), runs),
            "section placed (to_bytes)": least(lambda: image.to_bytes(address), runs),
            "whole command in process": least(
                lambda: main(["-w", path, "--emit", "elf", "-o", out]), runs),
        }


def child(checkout: str, path: str, runs: int) -> dict[str, float]:
    """``stages`` of ``checkout``'s package, in a process of its own."""
    env = {**os.environ, "PYTHONPATH": checkout}
    done = subprocess.run([sys.executable, __file__, path, "--runs", str(runs), "--json"],
                          env=env, check=True, capture_output=True, text=True)
    measured: dict[str, float] = json.loads(done.stdout)
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("library", nargs="?", default=LIBRARY)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--against")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.json:
        print(json.dumps(stages(args.library, args.runs)))
        return
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sides = {"this checkout": here}
    if args.against:
        sides = {"against": os.path.abspath(args.against), **sides}
    rounds = [{name: child(where, args.library, args.runs) for name, where in sides.items()}
              for _ in range(args.rounds)]
    print(f"{args.library}: CPU seconds, least of {args.runs} runs x {args.rounds} rounds")
    print("| stage | " + " | ".join(sides) + " |")
    print("|---|" + "---:|" * len(sides))
    names = dict.fromkeys(stage for name in sides for stage in rounds[0][name])
    for stage in names:
        cells = [f"{min(r[name][stage] for r in rounds):.3f}" if stage in rounds[0][name]
                 else "-" for name in sides]
        print(f"| {stage} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
