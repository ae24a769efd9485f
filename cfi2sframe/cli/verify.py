"""``cfi2sframe verify``: check a file's SFrame against its own DWARF CFI at every PC."""

from __future__ import annotations

import argparse

from ..analysis.compare import verify_elf
from . import SUBCOMMANDS
from .common import Subparsers
from .show import describe_fde, words


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser("verify", help=SUBCOMMANDS["verify"][1],
                       description="For an ELF file with .sframe and .eh_frame (or "
                       ".debug_frame): check at every PC of every function that SFrame "
                       "recovers CFA, FP and RA exactly as the DWARF CFI does; list functions "
                       "SFrame lacks with the reason our encoder gives. Exit 1 on a mismatch.")
    p.add_argument("file")
    p.add_argument("-q", "--quiet", action="store_true", help="print mismatches and totals only")


def run(args: argparse.Namespace) -> int:
    result, abi = verify_elf(args.file)
    for timeline, ranges in result.mismatches:
        print(f"{args.file}: mismatch in '{timeline.name}':")
        for start, end, have, want in ranges:
            print(f"  [{timeline.start + start:#x}, {timeline.start + end:#x}): SFrame: "
                  f"{words(have, abi)} | DWARF: {words(want, abi)}")
    for timeline, why, steps in result.unevaluated:
        print(f"{args.file}: '{timeline.name}' not checked: {why}; SFrame says:")
        for index, (start, rules) in enumerate(steps):
            end = min(steps[index + 1][0] if index + 1 < len(steps) else timeline.size,
                      timeline.size)
            if start < end:
                print(f"  [{timeline.start + start:#x}, {timeline.start + end:#x}): "
                      f"{words(rules, abi)}")
    if not args.quiet:
        for timeline, why in result.missing:
            print(f"{args.file}: no SFrame FDE for '{timeline.name}' [{why}]")
        for fde in result.extra:
            print(f"{args.file}: SFrame {describe_fde(fde)} has no DWARF FDE")
    print(f"{args.file}: {result.checked} functions checked at every PC, "
          f"{len(result.mismatches)} mismatches, {len(result.missing)} without SFrame, "
          f"{len(result.extra)} only in SFrame"
          + (f", {len(result.unevaluated)} with a DWARF CFA expression not evaluated"
             if result.unevaluated else ""))
    return 0 if result.ok else 1
