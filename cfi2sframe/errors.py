"""Typed errors that carry a location; only the CLI turns them into diagnostics."""

from __future__ import annotations


class Cfi2SframeError(Exception):
    """Bad input or a failed conversion, reported as ``where: error: message``."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: error: {message}" if where else f"error: {message}")
        self.where = where
        self.message = message


class CfiError(Exception):
    """CFI that DWARF does not define (the function is left out, not the file)."""

    def __init__(self, message: str, line: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


class DecodeError(Exception):
    """Malformed binary data at a byte offset."""

    def __init__(self, offset: int, message: str) -> None:
        super().__init__(f"at byte {offset:#x}: {message}")
        self.offset = offset
        self.message = message
