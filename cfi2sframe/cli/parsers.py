"""The command's argument parsers: argparse's, whose help formatter asks the terminal's
width only when it formats text.

argparse makes a formatter for every argument it adds (to check its metavar), and
each asks ``shutil.get_terminal_size``: importing ``shutil`` (with ``bz2`` and
``lzma``) was a tenth of what ``dump`` of a small file runs, for help no run prints.
Here the width is asked as argparse asks it, when help, usage or an error is
formatted, and by ``terminal_columns`` (``shutil``'s rule for the width, without
importing ``shutil``: ~7M instructions of ``--help``'s 140M); the text is the same.
"""

from __future__ import annotations

import argparse
import os
import sys

from ..typed import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any


def terminal_columns() -> int:
    """The width ``shutil.get_terminal_size().columns`` gives (what argparse asks):
    ``COLUMNS`` where it is a positive integer, else the width of the terminal on the
    interpreter's standard output, 80 where there is none or it says 0."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns > 0:
        return columns
    if sys.__stdout__ is None:
        return 80
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80
    except (AttributeError, ValueError, OSError):  # (closed, detached, not a terminal)
        return 80


class _WidthWhenFormatting(argparse.HelpFormatter):
    """``HelpFormatter`` with its width (and the help column it bounds) set in
    ``format_help``, where argparse's own ``__init__`` sets them (the same two
    attributes, by the same rule)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         width=80 if width is None else width)
        self._asked = (max_help_position, width)

    def format_help(self) -> str:
        max_help_position, width = self._asked
        if width is None:
            width = terminal_columns() - 2
        self._max_help_position = min(max_help_position,
                                      max(width - 20, self._indent_increment * 2))
        self._width = width
        return super().format_help()


class HelpFormatter(_WidthWhenFormatting):
    """argparse's default formatter."""


class RawDescriptionHelpFormatter(_WidthWhenFormatting, argparse.RawDescriptionHelpFormatter):
    """argparse's ``RawDescriptionHelpFormatter``."""


class Parser(argparse.ArgumentParser):
    """``ArgumentParser`` whose formatter is ``HelpFormatter`` unless told; its
    subcommands' parsers are of this class too (``add_subparsers`` makes them so)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
