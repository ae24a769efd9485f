"""The assembler's folder (``frontend/launch.PrivateFolder``): made where
``tempfile`` would make it, only its owner's, removed with all it holds by
``cleanup`` or at the interpreter's exit where nothing called it; ``tempfile`` is
the oracle of the place."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import cfi2sframe
from cfi2sframe.frontend.launch import PrivateFolder


@pytest.mark.parametrize("tmpdir", ["usable", "missing", "unset"])
def test_made_where_tempfile_makes_its_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              tmpdir: str) -> None:
    for name in ("TMPDIR", "TEMP", "TMP"):
        monkeypatch.delenv(name, raising=False)
    if tmpdir != "unset":
        monkeypatch.setenv("TMPDIR", str(tmp_path / ("t" if tmpdir == "usable" else "none")))
    (tmp_path / "t").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", None)  # (tempfile asks the environment again)
    folder = PrivateFolder("cfi2sframe-")
    try:
        path = Path(folder.name)
        assert str(path.parent) == tempfile.gettempdir()
        assert path.name.startswith("cfi2sframe-") and len(path.name) == len("cfi2sframe-") + 8
        assert path.is_dir() and stat.S_IMODE(path.stat().st_mode) == 0o700
    finally:
        folder.cleanup()
    assert not path.exists()


def test_cleanup_removes_what_it_holds_and_follows_no_link(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "kept").write_text("kept")
    folder = PrivateFolder("p-")
    path = Path(folder.name)
    (path / "input.s").write_text("x")
    (path / "sub").mkdir()
    (path / "sub" / "input.o").write_bytes(b"o")
    (path / "link").symlink_to(outside)
    folder.cleanup()
    folder.cleanup()  # (again: nothing)
    assert not path.exists() and (outside / "kept").read_text() == "kept"


def test_a_folder_left_is_removed_at_exit(tmp_path: Path) -> None:
    code = ("from cfi2sframe.frontend.launch import PrivateFolder\n"
            "folder = PrivateFolder('p-')\nopen(folder.name + '/input.s', 'w').close()\n"
            "print(folder.name)")
    env = {**os.environ, "TMPDIR": str(tmp_path),
           "PYTHONPATH": str(Path(cfi2sframe.__file__).parents[1])}
    done = subprocess.run([sys.executable, "-S", "-c", code], env=env, capture_output=True,
                          text=True, check=True)
    made = Path(done.stdout.strip())
    assert made.parent == tmp_path and not made.exists()
