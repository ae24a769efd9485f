"""``cfi2sframe dump``: print an SFrame section as binutils' readelf --sframe does."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator

from ..errors import decoding
from ..inputs import Input, input_of, open_input
from ..typed import TYPE_CHECKING
from . import macho
from .common import Subparsers, address, sframe_or_made
from .macho import add_binary_option, add_demangle_option, add_slice_option
from .subcommands import SUBCOMMANDS

if TYPE_CHECKING:  # the SFrame modules are imported for ELF and SFrame input only
    from ..sframe.load import LoadedSFrame


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser("dump", help=SUBCOMMANDS["dump"][1],
                       description="Print the SFrame section of FILE (raw section or ELF) "
                       "exactly as readelf --sframe of binutils 2.46 prints V2/V3 sections "
                       "(binutils 2.40 for V1). For a Mach-O image, its __unwind_info, and "
                       "for a Mach-O object, its __compact_unwind rows, as llvm-objdump "
                       "--unwind-info prints them, each row with its function and meaning.")
    p.add_argument("file")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    add_slice_option(p)
    add_binary_option(p)
    add_demangle_option(p)
    p.add_argument("--address", type=address, default=0, metavar="ADDR",
                   help="a raw section file: the address it is loaded at (the "
                        "--sframe-address it was made for; an ELF file says its own). "
                        "Default 0")


def run(args: argparse.Namespace) -> int:
    source = open_input(args.file)
    data = source.data
    if source.is_compact_unwind:
        return macho.dump(args, data)
    if source.is_xray:
        from . import xray

        return xray.dump(args.file, data, args.binary, args.demangle, args.json)
    if source.is_archive:
        return _dump_archive(args, data)
    if _empty(source, args.json):
        return 0
    chunks = None if args.json else _compiled(source, args.address)
    if chunks is not None:
        write = sys.stdout.write
        for chunk in chunks:
            write(chunk)
        return 0
    _dump(sframe_or_made(source, as_readelf=not args.json,
                         raw_address=args.address), args.json)
    return 0


def _compiled(source: Input, raw_address: int) -> Iterator[str] | None:
    """The text of the file's own section made by the compiled core, without an object
    per FDE or FRE; None where the Python path runs (no compiled core, an ELF file
    without .sframe, a malformed section: it says where)."""
    from ..core import compiled
    from ..elf.read import open_elf_file
    from ..sframe.dump import compiled_chunks
    from ..sframe.load import sframe_bytes

    path, data = source.path, source.data
    core = compiled()
    if core is None or (source.is_elf and not open_elf_file(path, data).holds_sframe):
        return None
    raw = sframe_bytes(path, data, True, raw_address)
    return compiled_chunks(raw.data, raw.address, raw.v1_pcrel, raw.section_name, core)


def _empty(source: Input, as_json: bool) -> bool:
    """An ELF file whose SFrame section is empty (0 bytes, binutils 2.45's Scrt1.o): it
    holds no FDE, and that is all there is to print; readelf's line for it (JSON: a
    section of no FDEs with no header).  False for anything else."""
    from ..elf.read import open_elf_file

    empty = open_elf_file(source.path, source.data).empty_sframe() if source.is_elf else None
    if empty is None:
        return False
    if as_json:
        import json  # (JSON output only: its import is a start-up cost)

        print(json.dumps({"version": None, "flags": None, "abi": None, "fixed_fp_offset": None,
                          "fixed_ra_offset": None, "num_fdes": 0, "num_fres": 0, "fdes": []},
                         indent=1))
    else:
        print(f"Section '{empty.name}' has no data to dump.")
    return True


def _dump(loaded: LoadedSFrame, as_json: bool) -> None:
    from ..sframe.dump import dump_chunks
    from .show import section_json

    if as_json:
        import json

        print(json.dumps(section_json(loaded.section), indent=1))
    else:
        write = sys.stdout.write
        for chunk in dump_chunks(loaded.section, loaded.section_name):
            write(chunk)


def _dump_archive(args: argparse.Namespace, data: bytes) -> int:
    """A static library: each object member's section after a ``File: LIB(MEMBER)``
    line, as readelf prints archives; members with no unwind information are named
    with a note."""
    from ..elf.archive import read_archive
    from ..elf.read import open_elf_file

    with decoding(args.file, "ar archive"):
        members = [m for m in read_archive(data) if not m.special]
    for member in members:
        where = f"{args.file}({member.name})"
        source = input_of(where, member.data)
        names = set(open_elf_file(where, member.data).section_names) \
            if source.is_elf else set()
        if _empty(source, args.json):
            continue
        if not names & {".sframe", ".eh_frame", ".debug_frame"}:
            print(f"{where}: note: no .sframe and no DWARF CFI", file=sys.stderr)
            continue
        if not args.json:
            print(f"File: {where}")
        _dump(sframe_or_made(source, as_readelf=not args.json), args.json)
    return 0
