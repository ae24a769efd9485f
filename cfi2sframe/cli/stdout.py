"""Standard output whose failures are told apart from every other ``OSError``: a full
disk or a closed pipe there is the reader's condition, not bad input and not a bug."""

from __future__ import annotations

import errno
import os

# Not ``typing`` itself: this module is on the way to the assembler's early start
# (``cli.early``).  Type checkers take any name TYPE_CHECKING as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal as signals
    from typing import Any, TextIO
else:  # the C module ``signal`` wraps: the same numbers and calls, without the enums
    import _signal as signals  # ``signal`` builds at import (~3M instructions, 1 ms)

# What a shell reports for a command killed by SIGPIPE (``cat`` under ``| head -1``);
# ``main`` returns it, ``entry`` then dies of the signal itself.
PIPE_CLOSED = 128 + signals.SIGPIPE


def die_of_sigpipe() -> None:
    """End the process by SIGPIPE, its default action restored: as ``cat`` ends when
    its reader has gone (the shell then says nothing)."""
    signals.signal(signals.SIGPIPE, signals.SIG_DFL)
    os.kill(os.getpid(), signals.SIGPIPE)


class StdoutFailed(Exception):
    """Writing standard output failed (``error``: the ``OSError``)."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error.strerror or str(error))
        self.error = error

    @property
    def pipe_closed(self) -> bool:
        """The reader went away (``| head -1``): the output is no longer wanted."""
        return self.error.errno == errno.EPIPE


class Stdout:
    """``sys.stdout`` as the command writes it: its ``OSError``s as ``StdoutFailed``."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except OSError as exc:
            raise StdoutFailed(exc) from None

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError as exc:
            raise StdoutFailed(exc) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)
