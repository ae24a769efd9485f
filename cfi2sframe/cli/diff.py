"""``cfi2sframe diff``: compare two SFrame sections by meaning, PC by PC."""

from __future__ import annotations

import argparse

from ..inputs import open_input
from ..sframe.load import load_sframe
from .common import Subparsers, address, function_names_of
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

    input_a, input_b = open_input(args.a, mapped=False), open_input(args.b, mapped=False)
    a = load_sframe(args.a, input_a.data, raw_address=args.address)
    b = load_sframe(args.b, input_b.data, raw_address=args.address)
    # Names of linked files' functions (an object's are per section, which a
    # difference does not carry), A's first.
    names = {address: name for (section, address), name in
             [*function_names_of(input_b).items(), *function_names_of(input_a).items()]
             if not section}
    if a.fde_sections and b.fde_sections:  # two relocatable objects: match by section too
        result = diff_sections(a.section, b.section,
                               lambda fde: (a.section_of(fde.field_offset), fde.start_address),
                               lambda fde: (b.section_of(fde.field_offset), fde.start_address))
    else:
        result = diff_sections(a.section, b.section)
    abi = a.section.abi
    if args.json:
        import json  # (JSON output only: its import is a start-up cost)

        print(json.dumps({
            "equivalent": result.equivalent, "same": result.same,
            "differing": [{"pc": d.address, "name": names.get(d.address),
                           "size_a": d.size_a, "size_b": d.size_b,
                           "ranges": [{"start": d.address + s, "end": d.address + e,
                                       "a": json_rules(ra), "b": json_rules(rb)}
                                      for s, e, ra, rb in d.ranges]}
                          for d in result.differing],
            "only_a": [f.start_address for f in result.only_a],
            "only_b": [f.start_address for f in result.only_b]}, indent=1))
        return 0 if result.equivalent else 1
    for d in result.differing:
        sizes = f"size {d.size_a}" if d.size_a == d.size_b else f"size {d.size_a} vs {d.size_b}"
        name = f"'{names[d.address]}'" if d.address in names else "function"
        print(f"{name} at {d.address:#x} ({sizes}) differs:")
        for start, end, ra, rb in d.ranges:
            print(f"  [{d.address + start:#x}, {d.address + end:#x}): "
                  f"{args.a}: {words(ra, abi)} | {args.b}: {words(rb, abi)}")
    for path, only in ((args.a, result.only_a), (args.b, result.only_b)):
        for fde in only:
            name = f"'{names[fde.start_address]}' " if fde.start_address in names else ""
            print(f"only in {path}: {name}{describe_fde(fde)}")
    print(f"{result.same} functions the same, {len(result.differing)} differ, "
          f"{len(result.only_a)} only in {args.a}, {len(result.only_b)} only in {args.b}")
    return 0 if result.equivalent else 1
