"""``cfi2sframe unwind``: walk a register and stack snapshot (SFrame or compact unwind)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

from ..analysis.snapshot import walk_snapshot
from ..analysis.unwind import OUTERMOST_REACHED, PC
from ..arch import by_sframe_abi
from ..errors import Cfi2SframeError
from ..typed import TYPE_CHECKING
from .batch import usage_error
from .common import Subparsers, add_module_options, count, modules_of
from .subcommands import SUBCOMMANDS

if TYPE_CHECKING:
    from ..analysis.process import Module
    from ..arch.base import Arch


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser("unwind", help=SUBCOMMANDS["unwind"][1],
                       description="Walk the frames of a register and stack-memory snapshot "
                       "(JSON: {\"regs\": {\"rip\": ..., \"rsp\": ..., \"rbp\": ...}, "
                       "\"memory\": [{\"address\": ..., \"hex\": ...}]}) with the SFrame "
                       "section of FILE, or of each file of a process (--maps, --module), "
                       "as the SFrame spec's appendix does: PC, SP, FP and function+offset "
                       "(file) of each frame, and why the walk stopped. Exit 1 when it "
                       "stops before the outermost frame.")
    p.add_argument("file", nargs="?",
                   help="ELF file with .sframe, loaded at its own addresses (a -no-pie "
                        "program); else --module or --maps")
    p.add_argument("--snapshot", metavar="JSON",
                   help="registers and stack memory (see docs/unwind.md: what to capture)")
    p.add_argument("--gdb-script", action="store_true",
                   help="print the path of the gdb script that defines 'snapshot JSON MAPS' "
                        "(for a live process or a core file) and exit")
    add_module_options(p)
    p.add_argument("--max-frames", type=count, default=64, metavar="N",
                   help="stop after N frames (default: 64)")
    p.add_argument("--compact", action="store_true",
                   help="walk with compact unwind rows made from FILE's CFI (--ranges "
                   "rows, libunwind's step) instead of SFrame")
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    """Exit 1 when the walk stops before the outermost frame (the reason is printed)."""
    if args.gdb_script:
        from ..analysis import gdb_snapshot_path

        print(gdb_snapshot_path())
        return 0
    if args.snapshot is None:
        usage_error("unwind", "unwind needs --snapshot JSON (see --help)")
    if args.module or args.maps:
        return _run_modules(args)
    if args.file is None:
        usage_error("unwind", "unwind needs FILE, --module or --maps (see --help)")
    arch, frames, why = walk_snapshot(args.file, args.snapshot, args.compact, args.max_frames)
    _print(arch, frames, why, args.json, None)
    return 0 if why.startswith(OUTERMOST_REACHED) else 1


def _run_modules(args: argparse.Namespace) -> int:
    from ..analysis.process import load_module, module_for
    from ..analysis.snapshot import load_snapshot, memory_reader, registers
    from ..analysis.unwind import modules_walk

    if args.compact:
        usage_error("unwind", "--compact walks one FILE; --module/--maps use SFrame")
    modules = modules_of(args)
    if args.file:
        from ..convert import sframe_from_dwarf

        modules.append(load_module(args.file, 0, sframe_from_dwarf))
    if not modules:  # (--maps alone: --module and FILE each add one)
        raise Cfi2SframeError(args.maps, "no ELF file of the process to walk with: none is "
                                         "mapped from its start (offset 0) and readable")
    names, memory = load_snapshot(args.snapshot)
    arch = by_sframe_abi(modules[0].section.abi)
    regs = registers(names, arch, args.snapshot)
    frames, why = modules_walk(modules, regs, memory_reader(memory, arch), args.max_frames)

    def name(pc: int, depth: int) -> Module | None:
        return module_for(modules, pc if depth == 0 else pc - 1)

    _print(arch, frames, why, args.json, name)
    return 0 if why.startswith(OUTERMOST_REACHED) else 1


def _print(arch: Arch, frames: list[dict[int, int]], why: str, as_json: bool,
           module_of: Callable[[int, int], Module | None] | None) -> None:
    """Frames (PC, SP, FP, and, walking a process's modules, where ``module_of(pc,
    depth)`` places the PC: function+offset (module)), then why the walk stopped.  In
    JSON, ``function`` is that text and ``symbol``, ``offset`` and ``module`` its parts."""
    def fp(frame: dict[int, int]) -> str:
        return f"{frame[arch.fp]:#018x}" if arch.fp in frame else "unknown".ljust(18)

    def where(pc: int, depth: int) -> dict[str, object]:
        if module_of is None:
            return {"text": None}
        module = module_of(pc, depth)
        if module is None:
            return {"text": "?", "symbol": None, "offset": None, "module": None}
        symbol, offset, name = module.place(pc)
        return {"text": module.symbolize(pc), "symbol": symbol, "offset": offset,
                "module": name}

    if as_json:
        print(json.dumps({"frames": [{"pc": f[PC], "sp": f[arch.sp], "fp": f.get(arch.fp),
                                      **where(f[PC], i)} for i, f in enumerate(frames)],
                          "stopped": why}, indent=1))
        return
    for depth, frame in enumerate(frames):
        label = str(where(frame[PC], depth)["text"] or "")
        print(f"#{depth:<3} pc {frame[PC]:#018x}  sp {frame[arch.sp]:#018x}  fp {fp(frame)}"
              + (f"  {label}" if label else ""))
    print(f"stopped: {why}")
