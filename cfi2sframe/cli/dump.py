"""``cfi2sframe dump``: print an SFrame section as binutils' readelf --sframe does."""

from __future__ import annotations

import argparse
import json
import sys

from ..files import read_input
from .common import Subparsers, address, sframe_or_made
from .show import section_json
from .subcommands import SUBCOMMANDS


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser("dump", help=SUBCOMMANDS["dump"][1],
                       description="Print the SFrame section of FILE (raw section or ELF) "
                       "exactly as readelf --sframe of binutils 2.46 prints V2/V3 sections "
                       "(binutils 2.40 for V1).")
    p.add_argument("file")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--address", type=address, default=0, metavar="ADDR",
                   help="a raw section file: the address it is loaded at (the "
                        "--sframe-address it was made for; an ELF file says its own). "
                        "Default 0")


def run(args: argparse.Namespace) -> int:
    from ..sframe.dump import dump_chunks

    loaded = sframe_or_made(args.file, read_input(args.file), as_readelf=not args.json,
                            raw_address=args.address)
    if args.json:
        print(json.dumps(section_json(loaded.section), indent=1))
    else:
        write = sys.stdout.write
        for chunk in dump_chunks(loaded.section, loaded.section_name):
            write(chunk)
    return 0
