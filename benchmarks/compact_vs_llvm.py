"""How many of LLVM's own ``__compact_unwind`` rows ``cfi2sframe compact`` computes the
same: csmith programs compiled to LLVM IR by clang-14, then by llc-14 for macOS
x86-64 and arm64 to assembly (rows from the directives, against llvm-mc's) and to
objects (rows from ``__eh_frame`` or the prologue, against llc's), each file's summary
line ("N rows as computed here, M differ, K not computed") summed per target.

    python3 benchmarks/compact_vs_llvm.py --seeds 1-6 --levels O0 O2

The cfi2sframe run is ``python -m cfi2sframe`` of this Python (PYTHONPATH picks the tree).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

TRIPLES = {"x86_64": "x86_64-apple-macosx10.15", "arm64": "arm64-apple-macosx11"}
SUMMARY = re.compile(r"(\d+) rows as computed here, (\d+) differ, (\d+) not computed")


def seeds(text: str) -> list[int]:
    """``1-6`` or ``1,3,9``: the csmith seeds."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def _run(command: list[str], cwd: Path) -> str:
    proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)}: exit {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout


def ir_file(seed: int, level: str, folder: Path) -> Path:
    """The csmith program for ``seed`` as LLVM IR at ``level`` (clang-14, host target:
    the macOS targets have no headers here; llc retargets the IR)."""
    source = folder / f"s{seed}.c"
    if not source.exists():
        with tempfile.TemporaryDirectory() as own:  # csmith writes platform.info here
            source.write_text(_run(["csmith", "--seed", str(seed)], Path(own)))
    out = folder / f"s{seed}-{level}.ll"
    _run(["clang-14", f"-{level}", "-w", "-S", "-emit-llvm", "-I/usr/include/csmith",
          str(source), "-o", str(out)], folder)
    return out


def one_file(ir: Path, level: str, arch: str, kind: str) -> tuple[int, int, int]:
    """(equal, differ, not computed) of one llc output."""
    out = ir.with_name(f"{ir.stem}-{arch}.{'s' if kind == 'asm' else 'o'}")
    llc_level = level if level in ("O0", "O1", "O2", "O3") else "O2"  # llc has no -Os
    _run(["llc-14", f"-{llc_level}", f"-mtriple={TRIPLES[arch]}", f"-filetype={kind}",
          str(ir), "-o", str(out)], ir.parent)
    text = _run([sys.executable, "-m", "cfi2sframe", "compact", str(out)], ir.parent)
    found = SUMMARY.search(text)
    if found is None:
        raise SystemExit(f"{out}: no summary line in cfi2sframe's output")
    equal, differ, missing = (int(n) for n in found.groups())
    return equal, differ, missing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=seeds, default=seeds("1-6"),
                        help="csmith seeds, as 1-6 or 1,4,7 (default 1-6)")
    parser.add_argument("--levels", nargs="+", default=["O0", "O2"],
                        help="optimisation levels, for clang and llc (default O0 O2)")
    parser.add_argument("--arch", nargs="+", choices=sorted(TRIPLES), default=sorted(TRIPLES))
    parser.add_argument("--kinds", nargs="+", choices=("asm", "obj"), default=["asm", "obj"])
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("--keep", type=Path, help="keep the files in this folder")
    args = parser.parse_args()
    print("command:", " ".join(sys.argv))
    folder = args.keep or Path(tempfile.mkdtemp(prefix="compact-vs-llvm-"))
    folder.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(args.jobs) as pool:
        irs = {(seed, level): pool.submit(ir_file, seed, level, folder)
               for seed in args.seeds for level in args.levels}
        jobs = {(arch, level, kind, seed): pool.submit(one_file, irs[seed, level].result(),
                                                       level, arch, kind)
                for (seed, level) in irs for arch in args.arch for kind in args.kinds}
        results = {key: job.result() for key, job in jobs.items()}
    per: dict[tuple[str, ...], Counter[str]] = {}
    for (arch, level, kind, _), (equal, differ, missing) in results.items():
        for key in ((arch,), (arch, level, kind)):
            counts = per.setdefault(key, Counter())
            counts.update(equal=equal, differ=differ, missing=missing)
    for key, counts in sorted(per.items()):
        total = sum(counts.values())
        print(f"{' '.join(key):<16} {counts['equal']}/{total} rows equal LLVM's, "
              f"{counts['differ']} differ, {counts['missing']} not computed")


if __name__ == "__main__":
    main()
