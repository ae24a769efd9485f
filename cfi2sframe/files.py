"""File input and output: one-line errors on read, atomic writes (complete or absent)."""

from __future__ import annotations

import os
import stat
import sys
import tempfile

from .errors import Cfi2SframeError


def read_bytes(path: str) -> bytes:
    """The contents of ``path`` (``-`` is standard input), or a one-line error."""
    try:
        if path == "-":
            return sys.stdin.buffer.read()
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise Cfi2SframeError(path, f"cannot read input: {exc.strerror}") from None


def write_output(path: str, data: bytes | str) -> None:
    """Write ``data`` to ``path`` (``-`` is stdout) through a temporary and a rename."""
    payload = data.encode() if isinstance(data, str) else data
    if path == "-":
        sys.stdout.buffer.write(payload)
        sys.stdout.buffer.flush()
        return
    if _is_special(path):
        # A device or FIFO (``-o /dev/null``) is written in place: renaming a
        # temporary over it would replace the device with a regular file.
        with open(path, "wb") as handle:
            handle.write(payload)
        return
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".cfi2sframe-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        if os.path.exists(path):
            os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _is_special(path: str) -> bool:
    """True when ``path`` exists and is not a regular file (a device, FIFO, socket)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)
