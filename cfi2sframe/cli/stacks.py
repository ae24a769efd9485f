"""``cfi2sframe stacks``: an XRay trace's call stacks as folded lines, Chrome trace
events or a per-function account; what the walk decided is summed up on stderr."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping

from ..errors import Cfi2SframeError, decoding
from ..files import read_input
from ..typed import TYPE_CHECKING
from ..xray.expand import events
from ..xray.fast import fdr_stacks
from ..xray.instr_map import id_names, open_instr_map
from ..xray.records import read_header
from ..xray.report import (
    ACCOUNT_HEADING,
    account,
    account_line,
    chrome_events,
    folded,
    notes_lines,
)
from ..xray.stacks import Note, StackWalk, build_stacks
from .common import Subparsers
from .subcommands import SUBCOMMANDS

if TYPE_CHECKING:
    from typing import NoReturn


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser("stacks", help=SUBCOMMANDS["stacks"][1],
                       description="Rebuild each thread's call stacks from an XRay trace "
                       "(FDR or basic mode) and print them as folded lines 'root;caller;"
                       "callee VALUE' (flamegraph.pl, inferno, speedscope), VALUE the "
                       "stack's self time in nanoseconds; tail exits, exits without an "
                       "entry and calls without an exit are counted on stderr.")
    p.add_argument("file", help="XRay trace")
    p.add_argument("--binary", metavar="BIN",
                   help="the instrumented program: function names from its "
                        "xray_instr_map (else #ID)")
    p.add_argument("--no-demangle", action="store_true",
                   help="with --binary: names as the symbol table has them")
    p.add_argument("--format", choices=("folded", "chrome", "account"), default="folded",
                   help="folded lines (default), Chrome trace-event JSON, or each "
                        "function's count, min, median, p90, p99, max and sum (ns)")
    p.add_argument("--count", action="store_true",
                   help="folded: VALUE is the calls of the stack's last function")
    p.add_argument("--per-thread", action="store_true",
                   help="folded: each stack starts with thread_TID")


def function_names(binary: str | None, demangle: bool) -> Mapping[int, str]:
    """Function ID -> name for ``--binary`` (BIN's ``xray_instr_map``, demangled unless
    ``--no-demangle``); without it none, and every function prints as ``#ID``."""
    return id_names(open_instr_map(binary), demangle) if binary else {}


def _usage(message: str) -> NoReturn:
    print(f"cfi2sframe stacks: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def run(args: argparse.Namespace) -> int:
    if args.format != "folded" and (args.count or args.per_thread):
        _usage(f"--count and --per-thread apply to folded output, not --format {args.format}")
    data = read_input(args.file)
    names = function_names(args.binary, not args.no_demangle)
    notes: Mapping[tuple[Note, int], int]
    with decoding(args.file):
        header = read_header(data)
        frequency = header.cycle_frequency
        if frequency <= 0 and not args.count:
            raise Cfi2SframeError(args.file, "the header's cycle frequency is 0: cycles "
                                             "cannot be converted to time (--count can)")
        if args.format == "folded":
            stacks = fdr_stacks(data, header, args.per_thread)  # (None: it declines)
            if stacks is None:
                stacks = build_stacks(events(data), args.per_thread)
            sys.stdout.write("".join(line + "\n" for line in
                                     folded(stacks, names, frequency, args.count)))
            notes = stacks.notes
        elif args.format == "account":
            walk = StackWalk()
            rows = account(walk.calls(events(data)))
            sys.stdout.write("".join([ACCOUNT_HEADING + "\n"] + [
                account_line(row, names, frequency) + "\n" for row in rows]))
            notes = walk.notes
        else:
            notes = _chrome(data, names, frequency)
    for line in notes_lines(notes, names):
        print(f"{args.file}: note: {line}", file=sys.stderr)
    return 0


def _chrome(data: bytes, names: Mapping[int, str],
            frequency: int) -> Mapping[tuple[Note, int], int]:
    """The JSON object, one event a line; times from the trace's earliest TSC (a first
    pass finds it)."""
    start = min((event.tsc for event in events(data)), default=0)
    walk = StackWalk()
    write = sys.stdout.write
    write('{"displayTimeUnit": "ns", "traceEvents": [\n')
    first = True
    items = walk.calls(events(data))
    for text in chrome_events(items, walk.still_open, names, frequency, start):
        write(text if first else ",\n" + text)
        first = False
    write("\n]}\n")
    return walk.notes
