"""File input and output: one-line errors on read, atomic writes (complete or absent)."""

from __future__ import annotations

import errno
import os
import secrets
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


def write_output(path: str, data: bytes | str, mode_of: str | None = None) -> None:
    """Write ``data`` to ``path`` (``-`` is stdout): complete, or not at all.

    The file keeps the permission bits of the file it replaces; a new file gets those
    of ``mode_of`` (the input an ELF output is a copy of, as objcopy does) or 0666,
    less the umask.

    The bytes go to an unnamed file (``O_TMPFILE``) in the target's folder,
    which gets a name only once complete and synced, and then replaces
    ``path``; a process killed while writing leaves nothing behind.  Where
    ``O_TMPFILE`` is missing, a named temporary is used (and removed on errors).
    """
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
    tmp = _write_unnamed(directory, payload)
    try:
        if tmp is None:
            fd, tmp = tempfile.mkstemp(prefix=".cfi2sframe-", dir=directory)
            with os.fdopen(fd, "wb") as handle:
                _write_all(handle.fileno(), payload)
        if os.path.exists(path):
            os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        else:
            umask = os.umask(0)
            os.umask(umask)
            base = os.stat(mode_of).st_mode & 0o777 if mode_of else 0o666
            os.chmod(tmp, base & ~umask)
        os.replace(tmp, path)
    except BaseException:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _write_all(fd: int, payload: bytes) -> None:
    view = memoryview(payload)
    while view:
        view = view[os.write(fd, view):]
    os.fsync(fd)


def _write_unnamed(directory: str, payload: bytes) -> str | None:
    """``payload`` in a new file of ``directory`` that is named only when complete;
    None when the file system has no unnamed files."""
    flag = getattr(os, "O_TMPFILE", 0)
    if not flag or not os.path.isdir("/proc/self/fd"):
        return None
    try:
        fd = os.open(directory, flag | os.O_WRONLY, 0o600)
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
            return None
        raise
    try:
        _write_all(fd, payload)
        name = os.path.join(directory, f".cfi2sframe-{os.getpid()}-{secrets.token_hex(6)}")
        root = os.open("/", os.O_RDONLY)
        try:
            # A dir fd makes Python call linkat(..., AT_SYMLINK_FOLLOW), which
            # links the open file itself; plain link() would refuse the
            # /proc magic link (EXDEV).
            os.link(f"/proc/self/fd/{fd}", name, src_dir_fd=root, follow_symlinks=True)
        except OSError as exc:  # file systems without unnamed files in the end
            if exc.errno in (errno.EXDEV, errno.EPERM, errno.ENOENT, errno.EOPNOTSUPP):
                return None
            raise
        finally:
            os.close(root)
    finally:
        os.close(fd)
    return name


def _is_special(path: str) -> bool:
    """True when ``path`` exists and is not a regular file (a device, FIFO, socket)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)
