"""``cfi2sframe lookup``: the FDE, FRE and recovery rules at given PCs."""

from __future__ import annotations

import argparse
import json
import sys

from ..sframe.load import load_sframe
from ..sframe.rules import describe, fre_rules, outermost
from . import SUBCOMMANDS
from .common import Subparsers, parse_pc
from .show import json_rules


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser("lookup", help=SUBCOMMANDS["lookup"][1],
                       description="For each PC, the FDE and FRE that cover it and the "
                       "CFA/RA/FP recovery rules in words. Exit 1 if a PC is not covered.")
    p.add_argument("file")
    p.add_argument("pcs", nargs="+", metavar="PC", help="address (0x... or decimal)")
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    loaded = load_sframe(args.file)
    section = loaded.section
    status = 0
    results = []
    for text in args.pcs:
        pc = parse_pc(text)
        fde = section.find_fde(pc)
        fre = fde.fre_at(pc) if fde else None
        if fde is not None and outermost(section, fde):
            results.append({"pc": pc, "fde": fde.index, "function": fde.start_address,
                            "size": fde.size, "rules": "outermost"})
            if not args.json:
                print(f"{pc:#x}: func idx [{fde.index}] pc = {fde.start_address:#x}, size = "
                      f"{fde.size}; no FREs: outermost frame (RA undefined)")
            continue
        if fde is None or fre is None:
            status = 1
            why = "no SFrame FDE covers this PC" if fde is None else \
                "the FDE has no FRE at this PC"
            results.append({"pc": pc, "error": why})
            if not args.json:
                print(f"{pc:#x}: error: {why}", file=sys.stderr)
            continue
        rules = fre_rules(section, fde, fre)
        fre_pc = fde.start_address + fre.start if not fde.pc_mask else fre.start
        results.append({"pc": pc, "fde": fde.index, "function": fde.start_address,
                        "size": fde.size, "fre_start": fre_pc, "rules": json_rules(rules)})
        if not args.json:
            mask = f" (PC mask, block {fde.rep_size})" if fde.pc_mask else ""
            print(f"{pc:#x}: func idx [{fde.index}] pc = {fde.start_address:#x}, size = "
                  f"{fde.size}{mask}; FRE at {fre_pc:#x}: {describe(rules, section.abi)}")
    if args.json:
        print(json.dumps(results, indent=1))
    return status
