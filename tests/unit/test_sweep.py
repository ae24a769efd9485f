"""The temporaries killed runs left (``files._sweep``): removed by a process's first
write into their folder, which is listed once per process (a tree run's worker writes
hundreds of files into one folder; listing /usr/lib/x86_64-linux-gnu took longer than
converting a small library there)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from cfi2sframe import files


def test_a_folder_is_swept_by_the_first_write_only(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()  # (its process has ended and is reaped)
    stale = tmp_path / f".cfi2sframe-{dead.pid}-0a0a"
    mine = tmp_path / f".cfi2sframe-{os.getpid()}-0b0b"  # a live process's: kept
    for path in (stale, mine):
        path.write_bytes(b"partial")
    listed: list[str] = []
    real = os.listdir

    def counted(folder: str) -> list[str]:
        listed.append(folder)
        return real(folder)

    monkeypatch.setattr(files, "_SWEPT", set())
    monkeypatch.setattr(os, "listdir", counted)
    files.write_output(str(tmp_path / "a"), b"one")
    assert not stale.exists() and mine.exists()
    stale.write_bytes(b"partial")  # a run killed since: the next process's to remove
    files.write_output(str(tmp_path / "b"), b"two")
    assert listed == [str(tmp_path)] and stale.exists()
    assert (tmp_path / "a").read_bytes() == b"one" and (tmp_path / "b").read_bytes() == b"two"
