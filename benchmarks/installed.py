"""The cfi2sframe command the benchmarks time."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def cfi2sframe_command() -> str:
    """The console script beside this Python, not a version manager's shim on PATH
    (pyenv's is a shell script that execs pyenv: some 50 ms a run, not ours to count);
    else the one on PATH."""
    beside = Path(sys.executable).with_name("cfi2sframe")
    if beside.exists():
        return str(beside)
    return shutil.which("cfi2sframe") or sys.exit("cfi2sframe is not installed")
