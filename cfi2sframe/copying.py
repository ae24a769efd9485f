"""Writing a converted copy of a large file: the bytes it keeps are copied by the
kernel from the input file (``copy_file_range``, which shares the blocks on file
systems that can), only the changed ranges are written from memory, so the copy is
never whole in this process.  ``files.PatchedCopy`` says what the copy holds."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterable

# Where copy_file_range cannot copy between these two files: another file system on
# kernels before 5.3 (and between file system types since 5.19), a file system or
# output it does not support (a pipe, a device), or no such system call.
NOT_COPYABLE = frozenset({errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP,
                          errno.ENOTSUP})

STEP = 1 << 30  # bytes asked of one copy_file_range call (it may copy fewer)
WRITE_CHUNK = 1 << 22  # bytes written from memory per write where the kernel cannot copy


def kernel_copy(origin: int, fd: int, length: int, done: int = 0) -> int:
    """Copy the first ``length`` bytes of the file open at ``origin`` to the same
    places of the file open at ``fd``, from ``done`` on (the bytes before it are there
    already); returns how far the copy got: short of ``length`` where the kernel
    cannot copy between these files (the caller writes the rest) or the input ends
    early.  Any other error (a full disk) is raised."""
    while done < length:
        try:
            copied = os.copy_file_range(origin, fd, min(length - done, STEP), done, done)
        except OSError as exc:
            if exc.errno in NOT_COPYABLE:
                return done
            raise
        if copied <= 0:
            return done
        done += copied
    return done


def write_patched(fd: int, origin: int | None, source: bytes, kept: int, size: int,
                  patches: Iterable[tuple[int, bytes]],
                  release: Callable[[bytes, int, int], None], copied: int = 0) -> None:
    """Write into the new regular file at ``fd``: ``source``'s first ``kept``
    bytes, zeros up to ``size``, and ``patches`` (offset, bytes) over them in order,
    all cut at ``size``.  The file is empty, or holds ``source``'s first ``copied``
    bytes and nothing else (``files.start_copy``: copied before the conversion knew
    ``kept``); those past ``kept`` are cut off.

    The kept bytes are copied by the kernel from ``origin`` (the file ``source``
    maps, or None), the rest of them written from ``source`` (``release`` gives its
    pages back once written); the zeros are the file's extent (a hole)."""
    kept = min(kept, size)
    if copied > kept:
        os.ftruncate(fd, kept)  # the zeros and patches past it go over nothing old
        copied = kept
    at = kernel_copy(origin, fd, kept, copied) if origin is not None else copied
    view = memoryview(source)
    while at < kept:
        stop = min(at + WRITE_CHUNK, kept)
        pwrite_all(fd, view[at:stop], at)
        release(source, at, stop - at)
        at = stop
    os.ftruncate(fd, size)
    for offset, data in patches:
        if offset < size:
            pwrite_all(fd, memoryview(data)[:size - offset], offset)


def pwrite_all(fd: int, data: bytes | memoryview, at: int) -> None:
    """Write all of ``data`` at ``at`` (``os.pwrite`` may write fewer)."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, at)
        view, at = view[written:], at + written
