"""The code base stays ruff clean and the package passes ``mypy --strict``
(configuration in pyproject.toml)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import require, require_module

ROOT = Path(__file__).resolve().parents[2]


def test_ruff_clean():
    require("ruff")
    proc = subprocess.run([shutil.which("ruff"), "check", str(ROOT)], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stdout


def test_mypy_strict():
    require_module("mypy")
    proc = subprocess.run([sys.executable, "-m", "mypy", "--strict", "cfi2sframe"], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
