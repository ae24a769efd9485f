"""What to say about a function left out, per reason, as a compiler's -W options do.

``-Wno-REASON`` silences a reason, ``-Werror=REASON`` makes it an error, ``-Werror``
(or ``--fatal-warnings``) makes every warning one, ``-w`` silences warnings and notes.
An outermost frame (``_start``: the return address undefined from the first
instruction on, or after a landing pad: ``sframe.lower._outermost_frame``) is a note:
SFrame V2 cannot hold it, and leaving it out is what a correct section does, so
neither ``-w``'s absence nor ``--fatal-warnings`` makes noise or failure of it in
every program; ``-Werror=ra-undefined`` still can.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable

from ..typed import TYPE_CHECKING, NamedTuple
from .batch import usage_error

if TYPE_CHECKING:
    from typing import Literal
    Severity = Literal["error", "warning", "note"]

WARNING_HELP = ("per reason code, as a compiler's -W: -Wno-REASON prints nothing for "
                "functions left out for REASON, -Werror=REASON makes them an error (exit 1, "
                "no output), -Werror makes every warning one (as --fatal-warnings); codes: "
                "--list-reasons. An outermost frame (_start) is a note, an error only with "
                "-Werror=ra-undefined")


class WarningPolicy(NamedTuple):
    """The -w, -W and --fatal-warnings options, read once."""

    quiet: bool = False
    all_errors: bool = False
    silenced: frozenset[str] = frozenset()
    errors: frozenset[str] = frozenset()

    def severity(self, reason: str, outermost: bool = False) -> Severity | None:
        """How to report a function left out for ``reason``; None: not at all."""
        if reason in self.errors:
            return "error"
        if reason in self.silenced:
            return None
        if outermost:
            return None if self.quiet else "note"
        if self.all_errors:
            return "error"
        return None if self.quiet else "warning"


def warning_policy(args: argparse.Namespace, codes: Iterable[str],
                   command: str = "") -> WarningPolicy:
    """The policy the options ask for; an unknown -W option or code is a usage error."""
    known = set(codes)
    silenced: set[str] = set()
    errors: set[str] = set()
    all_errors = bool(getattr(args, "fatal_warnings", False))
    for option in getattr(args, "warning_options", None) or ():
        if option == "error":
            all_errors = True
            continue
        if option.startswith("no-"):
            code, into = option[3:], silenced
        elif option.startswith("error="):
            code, into = option[6:], errors
        else:
            usage_error(command, f"unknown warning option '-W{option}' (-Wno-REASON, "
                                 "-Werror=REASON or -Werror)")
        if code not in known:
            usage_error(command, f"unknown reason code '{code}' in '-W{option}' (see "
                                 "--list-reasons)")
        into.add(code)
    return WarningPolicy(bool(getattr(args, "no_warnings", False)), all_errors,
                         frozenset(silenced), frozenset(errors))
