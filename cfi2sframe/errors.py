"""Typed errors that carry a location; only the CLI turns them into diagnostics."""

from __future__ import annotations

# The exit status of a bug of ours (sysexits.h EX_SOFTWARE): never "bad input".
EX_SOFTWARE = 70


def one_line(text: str) -> str:
    """``text`` with control characters escaped (``\\n`` as ``\\x0a``): names and
    strings read from a file must not split a diagnostic into several lines."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" if ord(c) < 256
                   else f"\\u{ord(c):04x}" for c in text)


class Cfi2SframeError(Exception):
    """Bad input or a failed conversion, reported as ``where: error: message`` (one
    line, whatever the file's names hold)."""

    def __init__(self, where: str, message: str) -> None:
        where, message = one_line(where), one_line(message)
        super().__init__(f"{where}: error: {message}" if where else f"error: {message}")
        self.where = where
        self.message = message
        self.summary: str = self.args[0]  # the one line (``str()`` may say more)


class InternalError(Exception):
    """A check of our own output failed: the bug is ours, whatever the input (exit
    status ``EX_SOFTWARE``, no output written, the input untouched), said in one line as
    ``where: internal error: message``."""

    def __init__(self, where: str, message: str) -> None:
        where, message = one_line(where), one_line(message)
        super().__init__(f"{where}: {message}" if where else message)
        self.where = where
        self.message = message
        self.summary: str = f"{where}: internal error: {message} (please report it)" \
            if where else f"cfi2sframe: internal error: {message} (please report it)"


class AssemblerFailed(Cfi2SframeError):
    """The assembler rejected the input.

    ``str()`` is the one-line error followed by the assembler's own messages (what a
    caller of the library logs); ``summary`` is that line alone, ``messages`` the
    assembler's text alone (the command prints it, then the line), ``status`` its
    exit status.
    """

    def __init__(self, where: str, exe: str, status: int, messages: str) -> None:
        super().__init__(where, f"assembler '{exe}' failed (exit status {status})")
        self.messages = messages
        self.status = status

    def __str__(self) -> str:
        text = self.messages.rstrip("\n")
        return f"{self.summary}\n{text}" if text.strip() else self.summary


class CfiError(Exception):
    """CFI that DWARF does not define (the function is left out, not the file)."""

    def __init__(self, message: str, line: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


class DecodeError(Exception):
    """Malformed binary data at a byte offset."""

    def __init__(self, offset: int, message: str) -> None:
        message = one_line(message)
        super().__init__(f"at byte {offset:#x}: {message}")
        self.offset = offset
        self.message = message


def located(where: str, exc: DecodeError, section: str = "", base: int = 0) -> Cfi2SframeError:
    """A decoder's byte-offset error as an input error of ``where``: ``[section: ]at byte
    N: message``, N counted from ``base`` (where the decoded bytes start)."""
    prefix = f"{section}: " if section else ""
    return Cfi2SframeError(where, f"{prefix}at byte {base + exc.offset:#x}: {exc.message}")


class decoding:  # noqa: N801 - used as ``with decoding(path):``, like a function
    """The adapter from a decoder's ``DecodeError`` to a located input error (one caller
    words its own: ``elf/obj._renumbered_addrsig``, for the assembler's object):
    ``with decoding(path, section): ...`` raises ``located(path, exc, section, base)``
    for one raised inside.  ``section`` may be set while the block runs (once the
    block knows which section it reads)."""

    __slots__ = ("where", "section", "base")

    def __init__(self, where: str, section: str = "", base: int = 0) -> None:
        self.where, self.section, self.base = where, section, base

    def __enter__(self) -> decoding:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: object) -> None:
        if isinstance(exc, DecodeError):
            raise located(self.where, exc, self.section, self.base) from None
