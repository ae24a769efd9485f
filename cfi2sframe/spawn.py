"""A tool run with its output and messages read in full, without ``subprocess``.

Importing ``subprocess`` costs ~15M instructions (its ``signal``, ``threading`` and
``selectors``: some 7 ms of a small file's conversion, the assembler's run and the
tools' ``--version`` being all a conversion runs).  ``Child`` is the part of
``subprocess.Popen`` those runs use, the same way: ``os.posix_spawnp`` (the program
found on ``PATH``, SIGPIPE and SIGXFSZ back to their defaults, as ``restore_signals``
does), standard output and error in pipes read until both close, ``communicate`` as
``Popen``'s (an OSError naming the program where it cannot start; a timeout kills it).
Not the same: glibc's ``posix_spawn`` starts the child with the C library's two
internal signals (32, 33) ignored, which its own start-up takes over.
"""

from __future__ import annotations

import os
import select
import time

TYPE_CHECKING = False  # (as type checkers read it, without importing ``typing``)
if TYPE_CHECKING:
    import signal as signals
else:  # the C module ``signal`` wraps: the same numbers, without its enums (~3M)
    import _signal as signals

_READ = 65536


class TimedOut(Exception):
    """``communicate``'s time ran out; the child was killed and waited for."""


class Child:
    """``argv`` started with its standard output and error in pipes (standard input
    from ``/dev/null`` where ``no_input``, else the caller's)."""

    def __init__(self, argv: list[str], no_input: bool = False) -> None:
        self.returncode: int | None = None
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        actions: list[tuple[int, int, int] | tuple[int, int, str, int, int]] = [
            (os.POSIX_SPAWN_DUP2, out_w, 1), (os.POSIX_SPAWN_DUP2, err_w, 2)]
        if no_input:
            actions.append((os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0))
        try:
            self.pid = os.posix_spawnp(argv[0], argv, os.environ, file_actions=actions,
                                       setsigdef=(signals.SIGPIPE, signals.SIGXFSZ))
        except BaseException:
            for fd in (out_r, out_w, err_r, err_w):
                os.close(fd)
            raise
        os.close(out_w)
        os.close(err_w)
        self._read: tuple[bytearray, bytearray] | None = None
        self._pipes = (out_r, err_r)

    def poll(self) -> int | None:
        """The exit status (``-signal`` where killed) once it has ended, else None."""
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def kill(self) -> None:
        """SIGKILL, where it has not been waited for."""
        if self.returncode is None:
            os.kill(self.pid, signals.SIGKILL)

    def wait(self) -> int:
        """Its exit status, once it has ended."""
        if self.returncode is None:
            self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[bytes, bytes]:
        """(standard output, standard error), read until both close, once it has ended;
        ``TimedOut`` after ``timeout`` seconds (the child killed and waited for)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if self._read is None:
            self._read = (bytearray(), bytearray())
            try:
                self._drain(self._read, deadline)
            finally:
                for fd in self._pipes:
                    os.close(fd)
        while deadline is not None and self.poll() is None:
            if time.monotonic() >= deadline:
                self._timed_out()
            time.sleep(0.0002)
        self.wait()
        return bytes(self._read[0]), bytes(self._read[1])

    def _drain(self, into: tuple[bytearray, bytearray], deadline: float | None) -> None:
        poller = select.poll()
        left = dict(zip(self._pipes, into, strict=True))
        for fd in left:
            poller.register(fd, select.POLLIN)
        while left:
            wait_ms = None if deadline is None else \
                max(0.0, (deadline - time.monotonic()) * 1000)
            ready = poller.poll(wait_ms)
            if not ready and deadline is not None and time.monotonic() >= deadline:
                self._timed_out()
            for fd, _ in ready:
                chunk = os.read(fd, _READ)
                if chunk:
                    left[fd] += chunk
                else:
                    poller.unregister(fd)
                    del left[fd]

    def _timed_out(self) -> None:
        self.kill()
        self.wait()
        raise TimedOut


def run(argv: list[str], timeout: float, no_input: bool = False) -> tuple[int, bytes]:
    """``argv`` run to its end: (exit status, standard output); OSError where it cannot
    start, ``TimedOut`` after ``timeout`` seconds."""
    child = Child(argv, no_input)
    out, _ = child.communicate(timeout)
    return child.wait(), out


def on_path(program: str) -> bool:
    """Whether ``program`` names a file this process may run, not a folder: the path
    itself where it has a folder part, else the first such file in a ``PATH`` folder
    (the C library's default ``CS_PATH`` where ``PATH`` is unset), where
    ``posix_spawnp`` looks.  The answer ``shutil.which(program) is not None`` gives,
    without importing ``shutil`` (~7M instructions, with ``bz2``, ``lzma`` and
    ``fnmatch``) before a run is started."""
    if os.path.dirname(program):
        return _runnable(program)
    folders = os.environ.get("PATH")
    if folders is None:
        try:
            folders = os.confstr("CS_PATH")
        except (AttributeError, ValueError):
            folders = os.defpath
    if not folders:
        return False
    return any(_runnable(os.path.join(folder, program))
               for folder in folders.split(os.pathsep))


def _runnable(path: str) -> bool:
    return os.path.exists(path) and os.access(path, os.F_OK | os.X_OK) \
        and not os.path.isdir(path)
