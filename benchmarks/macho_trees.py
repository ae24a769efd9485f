"""Mach-O ``verify`` and the ``__unwind_info`` builder of two source trees (before and
after a change) against ``llvm-objdump-14 --unwind-info``, the three alternated in each
round (this VM's speed drifts minute to minute), on ``run.py``'s ld64.lld-14 images.

Usage: python benchmarks/macho_trees.py BEFORE_TREE AFTER_TREE [--sizes 10000,100000]
                                        [--runs 7]

Each tree runs as ``python3 -m cfi2sframe`` with the tree on ``PYTHONPATH`` and its
bytecode cached in a folder of its own (``PYTHONDONTWRITEBYTECODE`` unset: compiling
every module at each start would be timed otherwise).  Prints medians of wall time
and each tree's ratio to llvm-objdump.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from run import alternated, macho_image


def _ours(tree: str, cache: str, *args: str) -> list[str]:
    return ["env", "-u", "PYTHONDONTWRITEBYTECODE", f"PYTHONPATH={tree}",
            f"PYTHONPYCACHEPREFIX={cache}", sys.executable, "-m", "cfi2sframe", *args]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        caches = [os.path.join(tmp, "before"), os.path.join(tmp, "after")]
        for n in (int(size) for size in args.sizes.split(",")):
            image = Path(tmp) / f"macho{n}"
            if not macho_image(image, n):
                sys.exit("llvm-mc or ld64.lld-14 not found")
            objdump = ["llvm-objdump-14", "--unwind-info", str(image)]
            for name, command in (("verify", ["verify", str(image)]),
                                  ("__unwind_info built", ["compact", str(image), "--emit",
                                                           "unwind-info", "-o",
                                                           str(image.with_suffix(".bin"))])):
                trees = [_ours(tree, cache, *command)
                         for tree, cache in zip((args.before, args.after), caches,
                                                strict=True)]
                alternated([*trees, objdump], 1)  # the bytecode written, the files cached
                before, after, theirs = alternated([*trees, objdump], args.runs)
                print(f"| {name} | {n} functions | {before[0]:.3f} s | {after[0]:.3f} s | "
                      f"{theirs[0]:.3f} s | {before[0] / theirs[0]:.1f}x | "
                      f"{after[0] / theirs[0]:.1f}x |", flush=True)


if __name__ == "__main__":
    main()
