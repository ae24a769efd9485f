"""``cfi2sframe stats``: SFrame coverage and sizes for ELF files."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from typing import Any

from ..analysis.stats import file_stats
from ..errors import Cfi2SframeError
from . import SUBCOMMANDS
from .common import Subparsers


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser("stats", help=SUBCOMMANDS["stats"][1],
                       description="Per file and in total: FDEs in .eh_frame, FDEs SFrame "
                       "gets, bytes of .eh_frame + .eh_frame_hdr against .sframe, and the "
                       "reasons functions are left out. Exit 1 if a file cannot be read.")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--sframe-version", type=int, default=2, choices=[2, 3],
                   help="count coverage for this SFrame version (default: 2)")
    p.add_argument("--json", action="store_true")


def _stats_line(entry: dict[str, Any]) -> str:
    fdes, emitted = entry["fdes"], entry["emitted"]
    eh = entry["eh_frame_bytes"] + entry["eh_frame_hdr_bytes"]
    share = f"{100 * emitted / fdes:.1f}%" if fdes else "-"
    ratio = f"{100 * entry['sframe_bytes'] / eh:.0f}%" if eh else "-"
    skipped = ", ".join(f"{k}={v}" for k, v in entry["skipped"].items()) or "none"
    return (f"{entry['file']}: {fdes} FDEs, {emitted} emitted ({share}); .eh_frame+"
            f".eh_frame_hdr {eh} bytes, .sframe {entry['sframe_bytes']} bytes ({ratio}); "
            f"left out: {skipped}")


def run(args: argparse.Namespace) -> int:

    entries, failed = [], 0
    total: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    for path in args.files:
        try:
            entry = file_stats(path, args.sframe_version)
        except Cfi2SframeError as exc:
            failed += 1
            print(str(exc), file=sys.stderr)
            continue
        entries.append(entry)
        for key in ("fdes", "emitted", "eh_frame_bytes", "eh_frame_hdr_bytes", "sframe_bytes"):
            total[key] += entry[key]
        reasons.update(entry["skipped"])
        if not args.json:
            print(_stats_line(entry))
    summary = {"file": f"total ({len(entries)} files)", **total,
               "skipped": dict(reasons.most_common())}
    if args.json:
        print(json.dumps({"files": entries, "total": summary, "failed": failed}, indent=1))
    else:
        print(_stats_line(summary))
    return 1 if failed else 0
