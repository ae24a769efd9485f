"""Real compiler output for differential tests: csmith programs through gcc -S.

Files are generated once into a cache folder (``CFI2SFRAME_CORPUS`` or
``.corpus`` in the repository) and reused; generation is deterministic
(fixed csmith seeds), so every run tests the same inputs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CSMITH_INCLUDE = "/usr/include/csmith"

# name -> gcc flags: the optimisation shapes the issue asks for.
FLAG_SETS = {
    "O0": ["-O0"],
    "O2": ["-O2"],
    "Os": ["-Os"],
    "O2fp": ["-O2", "-fno-omit-frame-pointer"],
    "O2realign": ["-O2", "-mstackrealign"],
}


def corpus_dir() -> Path:
    return Path(os.environ.get("CFI2SFRAME_CORPUS", ROOT / ".corpus"))


def have_tools(*tools: str) -> list[str]:
    """The tools of ``tools`` that are missing from PATH."""
    return [tool for tool in tools if shutil.which(tool) is None]


def _csmith(seed: int, out: Path) -> Path | None:
    c_file = out / f"p{seed}.c"
    if not c_file.exists():
        proc = subprocess.run(["csmith", "--seed", str(seed), "--max-funcs", "8"],
                              capture_output=True, check=False)
        if proc.returncode != 0:
            return None
        tmp = c_file.with_suffix(".c.tmp")
        tmp.write_bytes(proc.stdout)
        tmp.replace(c_file)
    return c_file


def _compile(c_file: Path, flags_name: str, compiler: str, extra: list[str]) -> Path | None:
    s_file = c_file.with_name(f"{c_file.stem}-{flags_name}.s")
    if s_file.exists():
        return s_file
    tmp = s_file.with_suffix(".s.tmp")
    command = [compiler, "-S", "-w", f"-I{CSMITH_INCLUDE}", *FLAG_SETS[flags_name], *extra,
               str(c_file), "-o", str(tmp)]
    proc = subprocess.run(command, capture_output=True, check=False)
    if proc.returncode != 0:  # once more: a loaded machine's cc1 can be killed (OOM)
        proc = subprocess.run(command, capture_output=True, check=False)
    if proc.returncode != 0:
        return None
    tmp.replace(s_file)
    return s_file


def csmith_asm(seeds: range, flag_sets: list[str] | None = None, compiler: str = "gcc",
               extra: list[str] | None = None, tag: str = "x86_64") -> list[Path]:
    """Assembly files for every seed and flag set (generated on first use)."""
    out = corpus_dir() / tag
    out.mkdir(parents=True, exist_ok=True)
    names = flag_sets or list(FLAG_SETS)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        c_files = [f for f in pool.map(lambda s: _csmith(s, out), seeds) if f]
        jobs = [(c, n) for c in c_files for n in names]
        results = pool.map(lambda job: _compile(job[0], job[1], compiler, extra or []), jobs)
        return [r for r in results if r]
