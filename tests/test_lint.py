"""The code base stays ruff clean (configuration in pyproject.toml)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.conftest import require

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_clean():
    require("ruff")
    proc = subprocess.run([shutil.which("ruff"), "check", str(ROOT)], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stdout
