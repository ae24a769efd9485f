"""``cfi2sframe unwind``: walk a register and stack snapshot (SFrame or compact unwind)."""

from __future__ import annotations

import argparse
import json

from ..analysis.snapshot import walk_snapshot
from ..analysis.unwind import PC
from . import SUBCOMMANDS
from .common import Subparsers


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser("unwind", help=SUBCOMMANDS["unwind"][1],
                       description="Walk the frames of a register and stack-memory snapshot "
                       "(JSON: {\"regs\": {\"rip\": ..., \"rsp\": ..., \"rbp\": ...}, "
                       "\"memory\": [{\"address\": ..., \"hex\": ...}]}) with the SFrame "
                       "section of FILE, as the SFrame spec's appendix does: PC, SP and FP "
                       "of each frame, and why the walk stopped.")
    p.add_argument("file", help="ELF file with .sframe (addresses as in the snapshot)")
    p.add_argument("--snapshot", required=True, metavar="JSON")
    p.add_argument("--max-frames", type=int, default=64)
    p.add_argument("--compact", action="store_true",
                   help="walk with compact unwind rows made from FILE's CFI (--ranges "
                   "rows, libunwind's step) instead of SFrame")
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    arch, frames, why = walk_snapshot(args.file, args.snapshot, args.compact, args.max_frames)
    if args.json:
        print(json.dumps({"frames": [{"pc": f[PC], "sp": f[arch.sp], "fp": f[arch.fp]}
                                     for f in frames], "stopped": why}, indent=1))
        return 0
    for depth, frame in enumerate(frames):
        print(f"#{depth:<3} pc {frame[PC]:#018x}  sp {frame[arch.sp]:#018x}  "
              f"fp {frame[arch.fp]:#018x}")
    print(f"stopped: {why}")
    return 0
