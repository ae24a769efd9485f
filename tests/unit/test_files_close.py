"""The replaced file of ``--in-place`` freed after its rename, not in it (``files._held``,
``files._close_later``): freeing an inode waits on the disk (a journal-less file system,
``discard``), as long as an ``fsync``; the compiled core's thread closes the last
reference while the worker goes on (``_core.close_later``), the Python reference closes
it at once.  Either way every descriptor is closed, in a forked child too."""

from __future__ import annotations

import os
import select
import time
from pathlib import Path

import pytest

from cfi2sframe import files
from tests.conftest import compiled_core

WAIT = 10.0  # seconds a closing thread may take (it takes microseconds)


def _closed(read_end: int) -> bool:
    """Whether the pipe's only write end gets closed within ``WAIT`` (its reader sees
    the end)."""
    ready, _, _ = select.select([read_end], [], [], WAIT)
    return bool(ready) and os.read(read_end, 1) == b""


@pytest.mark.parametrize("core", ["compiled", "python"])
def test_a_descriptor_is_closed_by_either_core(core: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    if core == "python":
        monkeypatch.setenv("CFI2SFRAME_CORE", "python")
    else:
        compiled_core()
        monkeypatch.delenv("CFI2SFRAME_CORE", raising=False)
    read_end, write_end = os.pipe()
    try:
        files._close_later(write_end)
        assert _closed(read_end)
    finally:
        os.close(read_end)


def test_the_thread_takes_each_once_the_last_is_closed() -> None:
    """At most 64 wait to be closed (else the caller closes its own): one at a time,
    each closed before the next, the thread takes every one of 200."""
    core = compiled_core()
    for _ in range(200):
        read_end, write_end = os.pipe()
        try:
            assert core.close_later(write_end)
            assert _closed(read_end)
        finally:
            os.close(read_end)


def test_a_forked_child_closes_through_its_own_thread() -> None:
    core = compiled_core()
    first_read, first_write = os.pipe()
    assert core.close_later(first_write)  # this process's thread, started
    assert _closed(first_read)
    os.close(first_read)
    pid = os.fork()
    if pid == 0:  # the child has no thread: the parent's pipe would never be read
        status = 1
        try:
            read_end, write_end = os.pipe()
            queued = core.close_later(write_end)
            status = 0 if queued and _closed(read_end) else 1
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def _deleted_held(path: Path) -> list[str]:
    """The descriptors of this process that name ``path``'s replaced inode."""
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target == f"{path} (deleted)":
            held.append(fd)
    return held


@pytest.mark.parametrize("core", ["compiled", "python"])
def test_the_replaced_inode_outlives_the_rename(tmp_path: Path, core: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    if core == "python":
        monkeypatch.setenv("CFI2SFRAME_CORE", "python")
    else:
        compiled_core()
    path = tmp_path / "lib.so"
    path.write_bytes(b"old")
    old_inode = os.stat(path).st_ino
    during: list[list[str]] = []
    real = os.replace

    def replace(source: str, target: str) -> None:
        real(source, target)
        during.append(_deleted_held(path))  # the old inode unlinked, still referenced

    monkeypatch.setattr(os, "replace", replace)
    old = path.read_bytes()
    files.rewrite(str(path), old, os.stat(path), old + b"new")
    assert path.read_bytes() == b"oldnew" and os.stat(path).st_ino != old_inode
    assert len(during) == 1 and len(during[0]) == 1
    deadline = time.monotonic() + WAIT
    while _deleted_held(path) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _deleted_held(path) == []  # and then closed: freed
    assert [p.name for p in tmp_path.iterdir()] == ["lib.so"]


@pytest.mark.parametrize("core", ["compiled", "python"])
def test_a_replaced_mapped_input_is_freed_once_dropped(tmp_path: Path, core: str,
                                                       monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    """A large ELF input is read through a map that keeps its descriptor
    (``files.MappedFile``): after the rewrite the two hold the old inode until the
    input is dropped, then both go (the descriptor by ``_close_later``)."""
    if core == "python":
        monkeypatch.setenv("CFI2SFRAME_CORE", "python")
    else:
        compiled_core()
    path = tmp_path / "big.so"
    path.write_bytes(b"\x7fELF" + bytes(files.MAP_AT_LEAST))
    old, status = files.read_for_rewrite(str(path))
    assert isinstance(old, files.MappedFile)
    files.rewrite(str(path), old, status, bytes(old) + b"new")
    assert _deleted_held(path) != []  # the map's descriptor: the input is still read
    del old
    deadline = time.monotonic() + WAIT
    while _deleted_held(path) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _deleted_held(path) == []
