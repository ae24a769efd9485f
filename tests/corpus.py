"""Real compiler output for differential tests: csmith programs through gcc -S.

Files are generated once into a cache folder (``CFI2SFRAME_CORPUS`` or
``.corpus`` in the repository) and reused; generation is deterministic
(fixed csmith seeds), so every run tests the same inputs.  A csmith run or a
compile that fails (twice) drops its file locally; in CI (``CI`` set) it fails the
test with the command and its standard error, so a corpus never shrinks silently.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.conftest import in_ci

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


class Failed(NamedTuple):
    """A command that failed: what ran and what it said."""

    command: list[str]
    stderr: str


def csmith_run(command: list[str], check: bool = True) -> subprocess.CompletedProcess[bytes]:
    """csmith in a folder of its own: it writes and reads ``platform.info`` in its
    working folder, and parallel runs in one folder race on it (a CI run lost a
    program that way, with no message)."""
    with tempfile.TemporaryDirectory(prefix="csmith-") as folder:
        return subprocess.run(command, capture_output=True, check=check, cwd=folder)


def csmith_source(seed: int | str, *extra: str) -> bytes:
    """The program csmith writes for ``seed`` (``extra``: more options)."""
    return csmith_run(["csmith", "--seed", str(seed), *extra]).stdout


def _csmith(seed: int, out: Path) -> Path | Failed:
    c_file = out / f"p{seed}.c"
    if not c_file.exists():
        command = ["csmith", "--seed", str(seed), "--max-funcs", "8"]
        proc = csmith_run(command, check=False)
        if proc.returncode != 0:
            return Failed(command, proc.stderr.decode(errors="replace"))
        tmp = c_file.with_suffix(f".c.{os.getpid()}.tmp")  # runs in parallel
        tmp.write_bytes(proc.stdout)
        tmp.replace(c_file)
    return c_file


def _compile(c_file: Path, flags_name: str, compiler: str, extra: list[str]) -> Path | Failed:
    s_file = c_file.with_name(f"{c_file.stem}-{flags_name}.s")
    if s_file.exists():
        return s_file
    tmp = s_file.with_suffix(f".s.{os.getpid()}.tmp")
    command = [compiler, "-S", "-w", f"-I{CSMITH_INCLUDE}", *FLAG_SETS[flags_name], *extra,
               str(c_file), "-o", str(tmp)]
    proc = subprocess.run(command, capture_output=True, check=False)
    if proc.returncode != 0:  # once more: a loaded machine's cc1 can be killed (OOM)
        proc = subprocess.run(command, capture_output=True, check=False)
    if proc.returncode != 0:
        return Failed(command, proc.stderr.decode(errors="replace"))
    tmp.replace(s_file)
    return s_file


def csmith_asm(seeds: range, flag_sets: list[str] | None = None, compiler: str = "gcc",
               extra: list[str] | None = None, tag: str = "x86_64") -> list[Path]:
    """Assembly files for every seed and flag set (generated on first use)."""
    out = corpus_dir() / tag
    out.mkdir(parents=True, exist_ok=True)
    names = flag_sets or list(FLAG_SETS)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        sources = list(pool.map(lambda s: _csmith(s, out), seeds))
        c_files = [f for f in sources if isinstance(f, Path)]
        jobs = [(c, n) for c in c_files for n in names]
        results = list(pool.map(lambda job: _compile(job[0], job[1], compiler, extra or []),
                                jobs))
    fail_in_ci([r for r in [*sources, *results] if isinstance(r, Failed)])
    return [r for r in results if isinstance(r, Path)]


def fail_in_ci(failures: list[Failed]) -> None:
    """In CI, a failed corpus command fails the test, naming it and its stderr."""
    if failures and in_ci():
        first = failures[0]
        pytest.fail(f"{len(failures)} corpus command(s) failed; the first: "
                    f"{' '.join(first.command)}\n{first.stderr[-2000:]}")
