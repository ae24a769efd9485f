"""``cfi2sframe extract``: one section's bytes, as ``llvm-objcopy --dump-section``
writes them, without LLVM."""

from __future__ import annotations

import argparse

from ..files import read_input, refuse_output_naming_input
from ..sections import extract_section
from .common import Subparsers, write
from .subcommands import SUBCOMMANDS


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser("extract", help=SUBCOMMANDS["extract"][1],
                       description="Write the bytes of one section of an ELF or Mach-O "
                       "file as the file stores them (what llvm-objcopy --dump-section "
                       "writes): a Mach-O image's __unwind_info, an object's "
                       "__compact_unwind, an ELF file's .sframe. A bare __unwind_info is "
                       "read by dump, compact and verify --binary IMAGE.")
    p.add_argument("file", help="ELF or Mach-O file")
    p.add_argument("--section", required=True, metavar="NAME",
                   help="ELF: the section's name (.sframe); Mach-O: SEGMENT,SECTION "
                        "(__TEXT,__unwind_info) or the section's name where one segment "
                        "has it (__unwind_info)")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="where to write")
    p.add_argument("--arch", metavar="NAME",
                   help="the slice of a universal Mach-O file (x86_64, arm64, i386)")


def run(args: argparse.Namespace) -> int:
    refuse_output_naming_input(args.output, [args.file])
    write(args.output, extract_section(read_input(args.file), args.section, args.file,
                                       args.arch))
    return 0
