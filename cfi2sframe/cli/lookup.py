"""``cfi2sframe lookup``: the FDE, FRE and recovery rules at given PCs."""

from __future__ import annotations

import argparse
import sys

from ..errors import Cfi2SframeError
from ..inputs import Input, open_input
from ..sframe.decode import DecodedSection
from ..sframe.rules import fre_rules, outermost
from ..sframe.text import describe
from ..typed import TYPE_CHECKING
from . import macho
from .common import (
    Subparsers,
    add_module_options,
    address,
    address_of,
    function_names_of,
    modules_of,
    number_or_none,
    sframe_or_made,
)
from .macho import add_binary_option, add_slice_option
from .show import json_rules
from .subcommands import SUBCOMMANDS

if TYPE_CHECKING:
    from ..analysis.process import Module


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
    pcs: list[int | Cfi2SframeError]  # a name no symbol has: its error, in its place
    if args.module or args.maps:
        from ..analysis.process import module_for

        if args.file is not None:  # argparse took the first PC for FILE
            args.pcs.insert(0, args.file)
        modules = modules_of(args)
        pcs = [_module_pc(text, modules) for text in args.pcs]
    elif args.file is None:
        from .batch import usage_error  # (a usage error only: the runner's options module)

        usage_error("lookup", "lookup needs FILE, --module or --maps (see --help)")
    else:
        modules = []
        source = open_input(args.file)
        if source.is_compact_unwind:
            return macho.lookup(args, source.data)
        numbers = [number_or_none(text) for text in args.pcs]
        by_symbol = None in numbers  # a symbol given: every function's name is needed
        names = function_names_of(source) if by_symbol else {}
        if by_symbol:
            names.update(_debug_names(source, names))
            starts = {name: start for (_, start), name in sorted(names.items(),
                                                                 reverse=True)}
            pcs = [_pc_or_error(text, starts, args.file) for text in args.pcs]
        else:
            pcs = [number for number in numbers if number is not None]
        # Only the FDEs that cover the PCs asked for are decoded (the spec's look-up).
        loaded = sframe_or_made(source, pcs=[pc for pc in pcs if isinstance(pc, int)],
                                raw_address=args.address)
        default = loaded.section
        if not by_symbol:  # only the names of the functions found are read
            found = (default.find_fde(pc) for pc in pcs if isinstance(pc, int))
            starts_found = {fde.start_address for fde in found if fde}
            names = function_names_of(source, starts_found)
            names.update(_debug_names(source, names, starts_found))
    status = 0
    results: list[dict[str, object]] = []
    for pc, text in zip(pcs, args.pcs, strict=True):
        if isinstance(pc, Cfi2SframeError):  # an unknown name: its own line, as addr2line
            status = 1
            results.append({"pc": None, "input": text, "error": pc.message})
            if not args.json:
                print(pc.summary, file=sys.stderr)
            continue
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
        import json  # (JSON output only: its import is a start-up cost)

        print(json.dumps(results, indent=1))
    return status


def _pc_or_error(text: str, starts: dict[str, int], path: str) -> int | Cfi2SframeError:
    """A PC given as an address or a name, or the error that names it: one unknown name
    is its own error line while the others are answered."""
    try:
        return address_of(text, starts, path)
    except Cfi2SframeError as exc:
        return exc


def _module_pc(text: str, modules: list[Module]) -> int | Cfi2SframeError:
    """A runtime PC given as an address or as ``unwind`` prints one, ``function+0xOFF
    (module)`` (the module part optional: the first module with the function), or the
    error that names it."""
    name, _, module_name = text.strip().partition(" (")
    module_name = module_name.removesuffix(")")
    starts: dict[str, int] = {}
    for module in modules:
        if not module_name or module.name == module_name:
            for value, _rank, _size, symbol in module.functions:
                starts.setdefault(symbol, value + module.bias)
    where = "" if not module_name else module_name
    try:
        return address_of(name, starts, where)
    except Cfi2SframeError as exc:
        return exc


def _debug_names(source: Input, names: dict[tuple[str, int], str],
                 values: set[int] | None = None) -> dict[tuple[str, int], str]:
    """The function names a linked file's separate debug file adds (found by build ID:
    the names ``unwind`` prints for a stripped library's local functions), where the
    file's own tables name no function at that address; ``values``: those only."""
    if not source.is_elf:
        return {}
    path, data = source.path, source.data
    from ..elf.read import open_elf_file

    view = open_elf_file(path, data)
    if view.elf_type == "ET_REL":
        return {}
    from ..analysis.process import debug_file_functions  # (linked files: their DWARF too)

    return {("", value): name for value, name in debug_file_functions(data, view).items()
            if ("", value) not in names and (values is None or value in values)}


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
