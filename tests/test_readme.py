"""The README's library example runs as written (on examples/frame_pointer.s as foo.s)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import require

ROOT = Path(__file__).resolve().parent.parent


def test_library_example_runs(tmp_path: Path) -> None:
    require("as")
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert blocks, "the README has a Python example"
    shutil.copy(ROOT / "examples" / "frame_pointer.s", tmp_path / "foo.s")
    for block in blocks:
        proc = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True,
                              text=True)
        assert proc.returncode == 0, proc.stderr
        assert "CFA = rbp+16, RA = [CFA-8], FP = [CFA-16]" in proc.stdout
