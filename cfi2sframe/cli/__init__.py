"""The ``cfi2sframe`` command: one module per subcommand, each parsing arguments and
printing results only; the work is in the library.  This module dispatches and turns
exceptions into one-line diagnostics and exit statuses (0 success, 1 bad input or
failed conversion, 2 usage error, 70 internal error).

The subcommands that take a file of any kind open it with ``inputs.open_input`` (or
``inputs.input_of``) and dispatch on its kind: no module of ``cli/`` tests a magic
number. A mistyped command is named; a closed
standard output pipe ends the command by SIGPIPE, as ``cat``."""

from __future__ import annotations

import gc
import importlib
import os
import sys
from collections.abc import Sequence

from ..errors import EX_SOFTWARE, AssemblerFailed, Cfi2SframeError, DecodeError, InternalError
from .stdout import PIPE_CLOSED, Stdout, StdoutFailed, die_of_sigpipe
from .subcommands import SUBCOMMANDS


def entry() -> None:
    """The ``cfi2sframe`` command: ``main``, then exit without tearing down the heap.

    A large library leaves millions of small objects; freeing them one by one
    at interpreter exit takes most of a second and serves nobody.  Output
    files are already complete (``write_output`` closes them), and the
    standard streams are flushed here.  What the command made is held in ``kept``
    until ``os._exit``, so that returning from it does not free it either.
    """
    kept: list[object] = []
    status = main(keep=kept)
    try:
        sys.stdout.flush()
    except (OSError, ValueError):  # (``main`` has said why, or the pipe is closed)
        status = status or 1
    sys.stderr.flush()
    if status == PIPE_CLOSED:  # as cat ends under ``| head -1``: by the signal, quietly
        die_of_sigpipe()
    os._exit(status)


def main(argv: Sequence[str] | None = None, keep: list[object] | None = None) -> int:
    """Entry point of the ``cfi2sframe`` command; returns the exit status.
    ``keep``: where a conversion is held for a caller about to exit (``entry``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # A short-lived process that builds millions of small immutable records
    # (large libraries) and no reference cycles: the cyclic GC only costs time.
    gc_was_on = gc.isenabled()
    gc.disable()
    stdout = sys.stdout
    try:
        sys.stdout = Stdout(stdout)
        status = _dispatch(argv, keep)
        sys.stdout.flush()  # a full disk is said here, not lost at exit
        return status
    except StdoutFailed as exc:
        if exc.pipe_closed:
            return PIPE_CLOSED
        print(f"<stdout>: error: cannot write output: {exc}", file=sys.stderr)
        return 1
    except AssemblerFailed as exc:
        sys.stderr.write(exc.messages)
        print(exc.summary, file=sys.stderr)
        return 1
    except Cfi2SframeError as exc:
        print(f"cfi2sframe: {exc.summary}" if not exc.where else exc.summary,
              file=sys.stderr)
        return 1
    except DecodeError as exc:
        print(f"cfi2sframe: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except InternalError as exc:  # a check of our own output: the bug is ours, said so
        if os.environ.get("CFI2SFRAME_DEBUG"):
            raise
        print(exc.summary, file=sys.stderr)
        return EX_SOFTWARE
    except Exception as exc:  # a bug: still one line for the user, details on request
        if os.environ.get("CFI2SFRAME_DEBUG"):
            raise
        print(f"cfi2sframe: internal error: {type(exc).__name__}: {exc} (please report it; "
              "set CFI2SFRAME_DEBUG=1 for a traceback)", file=sys.stderr)
        return EX_SOFTWARE
    finally:
        sys.stdout = stdout
        if gc_was_on:
            gc.enable()


def _dispatch(argv: list[str], keep: list[object] | None) -> int:
    if argv and argv[0] in SUBCOMMANDS:
        from .parsers import Parser

        module = importlib.import_module(f".{SUBCOMMANDS[argv[0]][0]}", __name__)
        parser = Parser(prog="cfi2sframe")
        # (prog: what argparse would format from the usage line, without asking the
        # terminal's width)
        sub = parser.add_subparsers(dest="command", required=True, prog="cfi2sframe")
        module.add_parser(sub)
        args = parser.parse_args(argv)
        args.keep = keep  # (what the subcommand may hold until the process ends: entry)
        status: int = module.run(args)
        return status
    if argv == ["--version"]:  # as the conversion's parser prints it, without building it
        from .. import __version__
        from ..core import name as core_name

        print(f"cfi2sframe {__version__} ({core_name()})")
        return 0
    mistyped = _mistyped_command(argv[0]) if argv else None
    if mistyped is not None:
        print(f"cfi2sframe: error: unknown command '{argv[0]}' (did you mean '{mistyped}'?)",
              file=sys.stderr)
        return 2
    from .early import launch

    launched = launch(argv)  # the assembler's run, before the conversion's imports
    try:
        from . import convert

        return convert.run(convert.parser().parse_args(argv), launched, keep)
    finally:
        if launched is not None:
            launched.stop()  # (nothing where the conversion took it over and ended it)


def _mistyped_command(word: str) -> str | None:
    """The command ``word`` misspells, where it is taken as one: a plain lower-case word
    (no option, path or suffix) that names no file, and close to one command.  Anything
    else is the conversion's input, so a file named like a command still converts."""
    if not word.isalpha() or not word.islower() or os.path.lexists(word):
        return None
    import difflib

    close = difflib.get_close_matches(word, SUBCOMMANDS, n=1, cutoff=0.75)
    return close[0] if close else None
