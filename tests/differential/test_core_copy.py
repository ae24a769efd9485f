"""``_core.copy_later`` (the early copy of ``--emit elf``'s input, on a thread of the
core's) against its reference, ``copying.kernel_copy``: the same bytes in the target,
the same count, and the same error where the kernel stops it.  The expected bytes are
the source's own, read back; the expected errors are the kernel's for each case."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cfi2sframe.copying import NOT_COPYABLE, STEP, kernel_copy
from cfi2sframe.files import _read_all
from tests.conftest import compiled_core, require

SOURCE = bytes(range(1, 256)) * 300 + b"tail"  # 76,504 bytes, no zero: a gap shows


def compiled(source: int, target: int, length: int, step: int) -> tuple[int, int]:
    """(bytes copied, errno or 0) as the core's thread tells them."""
    told = compiled_core().copy_later(source, target, length, step, length)
    assert told is not None, "no thread could be started"
    try:
        outcome = _read_all(told)
    finally:
        os.close(told)
    assert len(outcome) == 16
    return (int.from_bytes(outcome[:8], "little", signed=True),
            int.from_bytes(outcome[8:], "little", signed=True))


def reference(source: int, target: int, length: int) -> tuple[int, int]:
    """(bytes copied, errno or 0) of ``kernel_copy``: its refusals return the count,
    any other error is raised (then the count is not told: -1)."""
    try:
        done = kernel_copy(source, target, length)
    except OSError as exc:
        return -1, exc.errno or 0
    return done, 0


@pytest.fixture
def source(tmp_path: Path) -> Iterator[int]:
    path = tmp_path / "source"
    path.write_bytes(SOURCE)
    fd = os.open(path, os.O_RDONLY)
    yield fd
    os.close(fd)


def _target(tmp_path: Path, name: str, flags: int = os.O_RDWR) -> int:
    return os.open(tmp_path / name, flags | os.O_CREAT | os.O_TRUNC, 0o600)


@pytest.mark.parametrize("length", [0, 1, 4096, len(SOURCE), len(SOURCE) + 5000])
@pytest.mark.parametrize("step", [STEP, 4096, 1000])
def test_the_copy_is_the_references(source: int, tmp_path: Path, length: int,
                                    step: int) -> None:
    """Whole, in steps (each call from where the last stopped), and past the source's
    end (the copy stops there: fewer bytes than asked)."""
    ours, theirs = _target(tmp_path, "ours"), _target(tmp_path, "theirs")
    try:
        got = compiled(source, ours, length, step)
        want = reference(source, theirs, length)
    finally:
        os.close(ours)
        os.close(theirs)
    held = min(length, len(SOURCE))
    assert got == want == (held, 0)
    assert (tmp_path / "ours").read_bytes() == (tmp_path / "theirs").read_bytes() \
        == SOURCE[:held]


def test_a_target_the_kernel_refuses(source: int) -> None:
    """A pipe: the kernel will not copy into it, a refusal (``NOT_COPYABLE``) that
    ``kernel_copy`` returns as nothing copied (the caller writes the bytes itself)."""
    read_end, write_end = os.pipe()
    try:
        got = compiled(source, write_end, len(SOURCE), STEP)
        want = reference(source, write_end, len(SOURCE))
    finally:
        os.close(read_end)
        os.close(write_end)
    assert got[1] in NOT_COPYABLE and got[0] == 0
    assert want == (0, 0)


def test_a_target_that_cannot_be_written(source: int, tmp_path: Path) -> None:
    """A target open for appending: an error, not a refusal (EBADF), which drops the
    begun file; the reference raises it."""
    ours = _target(tmp_path, "ours", os.O_WRONLY | os.O_APPEND)
    try:
        got = compiled(source, ours, len(SOURCE), STEP)
        want = reference(source, ours, len(SOURCE))
    finally:
        os.close(ours)
    assert got == (0, errno.EBADF) and want == (-1, errno.EBADF)


def test_the_callers_descriptors_stay_open_and_the_threads_close(source: int,
                                                                 tmp_path: Path) -> None:
    """The thread copies through descriptors of its own: the caller's are left open
    (its own to close), and none of the thread's outlives its outcome.  (One copy
    first: what a sanitizer's runtime opens at the process's first thread stays.)"""
    ours = _target(tmp_path, "first")
    compiled(source, ours, 1, STEP)
    os.close(ours)
    before = sorted(os.listdir("/proc/self/fd"))
    ours = _target(tmp_path, "ours")
    try:
        assert compiled(source, ours, len(SOURCE), STEP) == (len(SOURCE), 0)
        os.fstat(source)
        os.fstat(ours)
    finally:
        os.close(ours)
    after = sorted(os.listdir("/proc/self/fd"))
    assert after == before, [(fd, _link(fd)) for fd in set(after) ^ set(before)]


def _link(fd: str) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return "?"


DROP = """
import os, sys
from cfi2sframe.copying import STEP
from cfi2sframe.files import _read_all
from cfi2sframe import _core
source, old = sys.argv[1], sys.argv[2]
fd = os.open(source, os.O_RDONLY)
target = os.open(os.path.dirname(source), os.O_RDWR | os.O_TMPFILE, 0o600)
replaced = os.open(old, os.O_RDONLY)
told = _core.copy_later(fd, target, os.fstat(fd).st_size, STEP, 0, replaced)
os.close(replaced)
print(len(_read_all(told)))
"""


def _resident(path: Path) -> int:
    done = subprocess.run(["fincore", "--raw", "--noheadings", "--output", "PAGES",
                           str(path)], check=True, capture_output=True, text=True)
    return int(done.stdout)


@pytest.mark.parametrize("synced", [True, False])
def test_a_replaced_file_gives_back_its_page_cache_only_when_clean(tmp_path: Path,
                                                                   synced: bool) -> None:
    """``copy_later``'s ``replaced``: the file an output replaces has its page cache
    dropped (``posix_fadvise`` ``DONTNEED``, as strace sees the thread ask it) where
    every page is clean (synced: none resident after), and nothing asked where a page
    is dirty (a drop would start the writeback of a file about to be freed)."""
    require("strace", "fincore")
    compiled_core()
    if tuple(int(part) for part in os.uname().release.split(".")[:2]) < (6, 5):
        pytest.skip("no cachestat(2) before Linux 6.5: nothing is dropped")
    (tmp_path / "source").write_bytes(SOURCE)
    old = tmp_path / "old"
    with open(old, "wb") as handle:
        handle.write(os.urandom(1 << 20))
        if synced:
            handle.flush()
            os.fsync(handle.fileno())
    old.read_bytes()
    assert _resident(old) == 256
    log = tmp_path / "strace.log"
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(["strace", "-f", "-qq", "-o", str(log), "-e", "trace=fadvise64",
                           sys.executable, "-c", DROP, str(tmp_path / "source"), str(old)],
                          check=True, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(root)})
    assert done.stdout == "16\n"
    asked = [line for line in log.read_text().splitlines() if "fadvise64(" in line]
    if synced:
        assert len(asked) == 1 and "POSIX_FADV_DONTNEED" in asked[0], asked
        assert _resident(old) == 0
    else:
        assert asked == [], asked
        assert _resident(old) == 256
