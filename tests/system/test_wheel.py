"""The installed wheel works from outside the source tree (grammar shipped inside)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import require

ROOT = Path(__file__).resolve().parents[2]


def test_wheel_installs_and_runs_outside_the_tree(tmp_path):
    """Inside a virtual environment or not: the wheel goes into a folder of its own that
    comes first on the path; its dependencies are the running environment's."""
    require("as")
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                    "-q", "-w", str(wheels), str(ROOT)], check=True, capture_output=True)
    (wheel,) = wheels.glob("cfi2sframe-*.whl")
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(target), str(wheel)], check=True, capture_output=True)
    env = dict(os.environ, PYTHONPATH=str(target))
    work = tmp_path / "elsewhere"
    work.mkdir()
    (work / "f.s").write_text((ROOT / "examples" / "frameless.s").read_text())
    code = ("import cfi2sframe, sys; print(cfi2sframe.__file__); "
            "sys.exit(__import__('cfi2sframe.cli').cli.main(['f.s', '-o', 'f.sframe']))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=work, capture_output=True,
                          text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert str(target) in proc.stdout, "the wheel, not the source tree, must be imported"
    assert (work / "f.sframe").read_bytes()[:4] == b"\xe2\xde\x02\x05"
    script = target / "bin" / "cfi2sframe"
    assert subprocess.run([str(script), "--version"], capture_output=True,
                          env=env).returncode == 0
    # Every package of the source tree is in the wheel (cfi2sframe.compact once was not).
    import zipfile

    shipped = {name.rsplit("/", 1)[0] for name in zipfile.ZipFile(wheel).namelist()
               if name.endswith("__init__.py")}
    source = {str(p.parent.relative_to(ROOT)) for p in (ROOT / "cfi2sframe").rglob("__init__.py")}
    assert source <= shipped, source - shipped
    compact = subprocess.run([str(script), "compact", "--json", "f.s"], cwd=work,
                             capture_output=True, text=True, env=env)
    assert compact.returncode == 0, compact.stderr
