"""``cfi2sframe diff``: compare two SFrame sections by meaning, PC by PC."""

from __future__ import annotations

import argparse
import json

from ..sframe.load import load_sframe
from .common import Subparsers, address
from .show import describe_fde, json_rules, words
from .subcommands import SUBCOMMANDS


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser("diff", help=SUBCOMMANDS["diff"][1],
                       description="Compare two SFrame sections (any versions, raw or ELF) "
                       "function by function (matched by address): the PC ranges where the "
                       "CFA/FP/RA rules differ, and functions only one side has. Exit 0 when "
                       "equivalent, 1 otherwise.")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--json", action="store_true")
    p.add_argument("--address", type=address, default=0, metavar="ADDR",
                   help="where raw section files are loaded (the --sframe-address they were "
                        "made for; default 0); ELF files say their own")


def run(args: argparse.Namespace) -> int:
    from ..analysis.compare import diff_sections

    a = load_sframe(args.a, raw_address=args.address)
    b = load_sframe(args.b, raw_address=args.address)
    if a.fde_sections and b.fde_sections:  # two relocatable objects: match by section too
        result = diff_sections(a.section, b.section,
                               lambda fde: (a.section_of(fde.field_offset), fde.start_address),
                               lambda fde: (b.section_of(fde.field_offset), fde.start_address))
    else:
        result = diff_sections(a.section, b.section)
    abi = a.section.abi
    if args.json:
        print(json.dumps({
            "equivalent": result.equivalent, "same": result.same,
            "differing": [{"pc": d.address, "size_a": d.size_a, "size_b": d.size_b,
                           "ranges": [{"start": d.address + s, "end": d.address + e,
                                       "a": json_rules(ra), "b": json_rules(rb)}
                                      for s, e, ra, rb in d.ranges]}
                          for d in result.differing],
            "only_a": [f.start_address for f in result.only_a],
            "only_b": [f.start_address for f in result.only_b]}, indent=1))
        return 0 if result.equivalent else 1
    for d in result.differing:
        sizes = f"size {d.size_a}" if d.size_a == d.size_b else f"size {d.size_a} vs {d.size_b}"
        print(f"function at {d.address:#x} ({sizes}) differs:")
        for start, end, ra, rb in d.ranges:
            print(f"  [{d.address + start:#x}, {d.address + end:#x}): "
                  f"{args.a}: {words(ra, abi)} | {args.b}: {words(rb, abi)}")
    for fde in result.only_a:
        print(f"only in {args.a}: {describe_fde(fde)}")
    for fde in result.only_b:
        print(f"only in {args.b}: {describe_fde(fde)}")
    print(f"{result.same} functions the same, {len(result.differing)} differ, "
          f"{len(result.only_a)} only in {args.a}, {len(result.only_b)} only in {args.b}")
    return 0 if result.equivalent else 1
