"""``--in-place``'s sync and check of the new file (``files._synced``): the disk writes
while the check reads, yet a failed sync is reported as when it came first, before any
check, and a file is named only once both are over.  strace's real failures:
``tests/system/test_hostile.py::test_a_failed_sync_is_each_files_error``."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from cfi2sframe import files
from cfi2sframe.errors import Cfi2SframeError


def _failed_sync(fd: int) -> None:
    raise OSError(errno.EIO, os.strerror(errno.EIO))


def _refused(data: bytes) -> None:
    raise Cfi2SframeError("f", "the check refuses it")


def _rewrite(path: Path, check: Callable[[bytes], None]) -> None:
    old = path.read_bytes()
    files.rewrite(str(path), old, os.stat(path), old + b"new", check=check)


@pytest.mark.parametrize("sync_fails", [False, True])
@pytest.mark.parametrize("check_fails", [False, True])
def test_the_syncs_error_comes_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     sync_fails: bool, check_fails: bool) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"old")
    synced: list[int] = []
    checked: list[bytes] = []
    real = os.fsync

    def sync(fd: int) -> None:
        synced.append(fd)
        (_failed_sync if sync_fails else real)(fd)

    def check(data: bytes) -> None:
        checked.append(bytes(data))
        if check_fails:
            _refused(data)

    monkeypatch.setattr(os, "fsync", sync)
    if not (sync_fails or check_fails):
        _rewrite(path, check)
        assert path.read_bytes() == b"oldnew"
    else:
        with pytest.raises(Cfi2SframeError) as raised:
            _rewrite(path, check)
        assert raised.value.summary == (
            f"{path}: error: cannot write output: Input/output error" if sync_fails
            else "f: error: the check refuses it")
        assert path.read_bytes() == b"old"
    assert synced and checked == [b"oldnew"]
    assert [p.name for p in tmp_path.iterdir()] == ["f"]


def test_the_attributes_are_set_before_the_sync_and_the_input_checked_last(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The new file's owner and mode are set before its ``fsync``, which then makes them
    durable with its bytes; the input's "changed since read" check comes after that
    sync, just before the file is named and renamed over the input."""
    path = tmp_path / "f"
    path.write_bytes(b"old")
    os.chmod(path, 0o751)
    calls: list[str] = []

    def recorded(name: str, real: Callable[..., object]) -> Callable[..., object]:
        def call(*args: object, **kwargs: object) -> object:
            calls.append(name)
            return real(*args, **kwargs)
        return call

    for name in ("fchown", "fchmod", "fsync", "link", "replace"):
        monkeypatch.setattr(os, name, recorded(name, getattr(os, name)))
    monkeypatch.setattr(files, "_check_unchanged",
                        recorded("unchanged", files._check_unchanged))
    _rewrite(path, lambda data: None)
    assert path.read_bytes() == b"oldnew" and path.stat().st_mode & 0o777 == 0o751
    # (_check_unchanged is asked once before any write, too: rewrite's first step)
    assert calls == ["unchanged", "fchown", "fchmod", "fsync", "unchanged", "link",
                     "replace"], calls
