"""``cfi2sframe lookup``: the FDE, FRE and recovery rules at given PCs."""

from __future__ import annotations

import argparse
import json
import sys

from ..files import read_input
from ..sframe.decode import DecodedSection
from ..sframe.rules import fre_rules, outermost
from ..sframe.text import describe
from . import macho
from .batch import usage_error
from .common import (
    Subparsers,
    add_module_options,
    address,
    address_of,
    function_names_of,
    modules_of,
    number_or_none,
    parse_pc,
    sframe_or_made,
)
from .macho import add_binary_option, add_slice_option, is_macho
from .show import json_rules
from .subcommands import SUBCOMMANDS


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser("lookup", help=SUBCOMMANDS["lookup"][1],
                       description="For each PC, the FDE and FRE that cover it and the "
                       "CFA/RA/FP recovery rules in words. Exit 1 if a PC is not covered.")
    p.add_argument("file", nargs="?", help="ELF file or raw section (omit with --module or "
                   "--maps: then every PC is a runtime address of the process); a Mach-O "
                   "image (its __unwind_info, as libunwind looks it up) or object (its "
                   "__compact_unwind rows)")
    p.add_argument("pcs", nargs="+", metavar="PC", help="address (0x... or decimal), or "
                   "with FILE a function symbol, SYMBOL or SYMBOL+OFFSET (main+0x10)")
    add_module_options(p)
    p.add_argument("--json", action="store_true")
    add_slice_option(p)
    add_binary_option(p)
    p.add_argument("--address", type=address, default=0, metavar="ADDR",
                   help="a raw section file: the address it is loaded at (the "
                        "--sframe-address it was made for; an ELF file says its own). "
                        "Default 0")


def run(args: argparse.Namespace) -> int:
    if args.module or args.maps:
        from ..analysis.process import module_for

        if args.file is not None:  # argparse took the first PC for FILE
            args.pcs.insert(0, args.file)
        modules = modules_of(args)
        pcs = [parse_pc(text) for text in args.pcs]
    elif args.file is None:
        usage_error("lookup", "lookup needs FILE, --module or --maps (see --help)")
    else:
        modules = []
        data = read_input(args.file)
        if is_macho(data):
            return macho.lookup(args, data)
        numbers = [number_or_none(text) for text in args.pcs]
        by_symbol = None in numbers  # a symbol given: every function's name is needed
        names = function_names_of(args.file, data) if by_symbol else {}
        if by_symbol:
            starts = {name: start for (_, start), name in sorted(names.items(),
                                                                 reverse=True)}
            pcs = [address_of(text, starts, args.file) for text in args.pcs]
        else:
            pcs = [number for number in numbers if number is not None]
        # Only the FDEs that cover the PCs asked for are decoded (the spec's look-up).
        loaded = sframe_or_made(args.file, data, pcs=pcs, raw_address=args.address)
        default = loaded.section
        if not by_symbol:  # only the names of the functions found are read
            found = (default.find_fde(pc) for pc in pcs)
            names = function_names_of(args.file, data,
                                      {fde.start_address for fde in found if fde})
    status = 0
    results: list[dict[str, object]] = []
    for pc in pcs:
        if not modules:
            fde = default.find_fde(pc)
            name = names.get((loaded.section_of(fde.field_offset), fde.start_address)) \
                if fde is not None else None
            where = f" {name}+{pc - fde.start_address:#x}:" if name and fde else ""
            status |= _one(default, pc, 0, where, args.json, results)
            if name and fde:
                results[-1].update(symbol=name, offset=pc - fde.start_address)
        else:
            module = module_for(modules, pc)
            if module is None:
                status = 1
                results.append({"pc": pc, "error": "no module holds this PC"})
                if not args.json:
                    print(f"{pc:#x}: error: no module holds this PC", file=sys.stderr)
                continue
            status |= _one(module.section, pc, module.bias, f" {module.symbolize(pc)}:",
                           args.json, results)
    if args.json:
        print(json.dumps(results, indent=1))
    return status


def _one(section: DecodedSection, runtime_pc: int, bias: int, where: str, as_json: bool,
         results: list[dict[str, object]]) -> int:
    """Print (or collect) the FDE, FRE and rules at one PC; 1 when none covers it."""
    pc = runtime_pc - bias
    fde = section.find_fde(pc)
    fre = fde.fre_at(pc) if fde else None
    if fde is not None and outermost(section, fde):
        results.append({"pc": runtime_pc, "fde": fde.index,
                        "function_start": fde.start_address, "size": fde.size,
                        "rules": "outermost"})
        if not as_json:
            print(f"{runtime_pc:#x}:{where} func idx [{fde.index}] pc = "
                  f"{fde.start_address:#x}, size = {fde.size}; no FREs: outermost frame "
                  "(RA undefined)")
        return 0
    if fde is None or fre is None:
        why = "no SFrame FDE covers this PC" if fde is None else \
            "the FDE has no FRE at this PC"
        results.append({"pc": runtime_pc, "error": why})
        if not as_json:
            print(f"{runtime_pc:#x}:{where} error: {why}", file=sys.stderr)
        return 1
    rules = fre_rules(section, fde, fre)
    fre_pc = fde.start_address + fre.start if not fde.pc_mask else fre.start
    results.append({"pc": runtime_pc, "fde": fde.index, "function_start": fde.start_address,
                    "size": fde.size, "fre_start": fre_pc, "rules": json_rules(rules)})
    if not as_json:
        mask = f" (PC mask, block {fde.rep_size})" if fde.pc_mask else ""
        print(f"{runtime_pc:#x}:{where} func idx [{fde.index}] pc = "
              f"{fde.start_address:#x}, size = {fde.size}{mask}; FRE at {fre_pc:#x}: "
              f"{describe(rules, section.abi)}")
    return 0
