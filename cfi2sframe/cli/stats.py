"""``cfi2sframe stats``: SFrame coverage and sizes for ELF files, trees of them too."""

from __future__ import annotations

import argparse

from ..batch.record import Task, described
from ..typed import TYPE_CHECKING
from .batch import add_batch_options, print_summary, run_batch, usage_error
from .common import Subparsers, add_limit_options, limits_of
from .subcommands import SUBCOMMANDS

if TYPE_CHECKING:
    from typing import Any


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser("stats", help=SUBCOMMANDS["stats"][1],
                       description="Per file and in total: FDEs in .eh_frame, FDEs SFrame "
                       "gets, bytes of .eh_frame + .eh_frame_hdr against .sframe in V2 and "
                       "V3, the reasons functions are left out, and whether an .sframe the "
                       "file has is correct (as 'verify'). Exit 1 if a file cannot be read "
                       "or its .sframe is wrong.")
    p.add_argument("files", nargs="*", metavar="FILE",
                   help="ELF files, or folders with -r")
    p.add_argument("--sframe-version", type=int, default=2, choices=[2, 3],
                   help="count coverage (FDEs emitted, reasons) for this SFrame version "
                        "(default: 2); sizes are given for both")
    p.add_argument("--json", action="store_true",
                   help="print every record and the totals as one JSON object")
    p.add_argument("--plot", metavar="FILE.png",
                   help="also draw .sframe against .eh_frame + .eh_frame_hdr bytes per file, "
                        "coloured by coverage, and the reasons (pip install "
                        "'cfi2sframe[plot]')")
    add_limit_options(p)
    add_batch_options(p)


def stats_line(record: dict[str, Any]) -> str:
    """One file: FDEs, emitted share, DWARF and SFrame bytes, reasons."""
    if record.get("macho") is not None:
        return macho_line(record)
    if record["status"] == "no-cfi":
        return f"{record['path']}: no CFI (no .eh_frame, .debug_frame or .sframe)"
    fdes, emitted, covered = record["fdes"] or 0, record["emitted"] or 0, described(record)
    eh = record["eh_frame_bytes"] + record["eh_frame_hdr_bytes"]
    version = record["sframe_version"]
    size = record[f"sframe_v{version}_bytes"] or 0
    share = f"{100 * covered / fdes:.1f}%" if fdes else "-"
    if emitted > covered:  # a PLT: one DWARF FDE, two SFrame FDEs
        share += f"; as {emitted} SFrame FDEs"
    ratio = f"{100 * size / eh:.0f}%" if eh else "-"
    skipped = ", ".join(f"{k}={v}" for k, v in record["skipped"].items()) or "none"
    line = (f"{record['path']}: {fdes} FDEs, {covered} in SFrame ({share}); .eh_frame+"
            f".eh_frame_hdr {eh} bytes, .sframe {size} bytes ({ratio}); left out: {skipped}")
    if record["verify"] is not None:
        line += "; its .sframe " + ("verifies" if record["verify"]["ok"] else
                                    "does NOT verify (see 'cfi2sframe verify')")
    return line


def macho_line(record: dict[str, Any]) -> str:
    """A Mach-O file: its functions by compact unwind mode, why the DWARF-mode ones are,
    the unwind sections' sizes, and its check."""
    m = record["macho"]
    if record["status"] == "no-cfi":
        return f"{record['path']}: Mach-O {m['filetype']}: no compact unwind"
    functions = m["functions"]
    share = f"{100 * m['compact'] / functions:.1f}%" if functions else "-"
    reasons = ", ".join(f"{k}={v}" for k, v in m["dwarf_reasons"].items()) or "none"
    table = (f"__unwind_info {m['unwind_info_bytes']} bytes" if m["unwind_info_bytes"]
             else f"__compact_unwind {m['compact_unwind_bytes']} bytes")
    line = (f"{record['path']}: Mach-O {record['arch']} {m['filetype']}: {functions} "
            f"functions, {m['compact']} compact ({share}), {m['dwarf']} DWARF mode, "
            f"{m['none']} without unwind information; {table}, __eh_frame "
            f"{m['eh_frame_bytes']} bytes ({m['fdes']} FDEs); DWARF mode because: {reasons}")
    if record["verify"] is not None:
        line += "; it " + ("verifies" if record["verify"]["ok"] else
                           "does NOT verify (see 'cfi2sframe verify')")
    return line


def run(args: argparse.Namespace) -> int:
    if not args.files and not args.files_from:
        usage_error("stats", "no input files (FILE..., -r FOLDER or --files-from)")
    records, status = run_batch(args, args.files, Task("stats", args.sframe_version,
                                                            limits=limits_of(args)),
                                stats_line)
    print_summary(records, args.json)
    if args.plot:
        from ..batch.plot import plot_records

        plot_records(records, args.plot)
    return status
