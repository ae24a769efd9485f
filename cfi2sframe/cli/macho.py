"""``dump``, ``lookup`` and ``verify`` of a Mach-O file: its compact unwind (an image's
``__unwind_info``, an object's ``__compact_unwind`` rows) instead of SFrame."""

from __future__ import annotations

import argparse
import sys

from ..errors import Cfi2SframeError, decoding
from ..inputs import open_input
from ..kinds import Kind, input_kind
from ..typed import TYPE_CHECKING

if TYPE_CHECKING:  # the Mach-O modules load when a command reads a Mach-O file
    from ..macho.read import MachoView


def add_slice_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--arch", metavar="NAME",
                   help="the slice of a universal Mach-O file to read (x86_64, arm64, i386); "
                        "the target of a bare __unwind_info without --binary (default "
                        "x86_64)")


def add_binary_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--binary", metavar="IMAGE",
                   help="FILE is a bare __unwind_info (compact --emit unwind-info, "
                        "extract): read it as IMAGE's table (its names, code, __eh_frame); "
                        "FILE is an XRay trace: IMAGE is the instrumented ELF program or "
                        "library that wrote it (its xray_instr_map names the function IDs; "
                        "verify also flags IDs it lacks and says whether IMAGE's SFrame or "
                        ".eh_frame covers each function's entry and exit sleds)")


def add_demangle_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-demangle", dest="demangle", action="store_false",
                   help="an XRay trace with --binary: keep C++ names as the symbol table "
                        "spells them (default: demangled as c++filt prints them)")


def open_view(path: str, data: bytes, arch: str | None,
              binary: str | None = None) -> MachoView:
    """The file (or its ``--arch`` slice), malformed ones refused in one located line; a
    bare ``__unwind_info`` as the table of ``binary`` (an image), else of no image."""
    from ..macho.read import open_macho

    slice_arch = {"aarch64": "arm64"}.get(arch, arch) if arch else None
    if input_kind(data) == Kind.unwind_info:
        from ..sections import table_view

        image = open_view(binary, open_input(binary).data, arch) if binary else None
        return table_view(data, image, slice_arch or "x86_64")
    if binary:
        raise Cfi2SframeError(path, "--binary names the image of a bare __unwind_info; "
                                    "this file is a Mach-O file of its own")
    with decoding(path, "Mach-O file"):
        return open_macho(data, slice_arch)


def dump(args: argparse.Namespace, data: bytes) -> int:
    from ..compact.listing import unwind_info_text
    from ..core import compiled
    from ..macho.read import MH_OBJECT

    view = open_view(args.file, data, args.arch, args.binary)
    text = None if args.json or view.filetype == MH_OBJECT else \
        unwind_info_text(view, compiled())
    if text is not None:  # the compiled core's listing of a well-formed table: the
        # modules below, a third of this run's start-up, are not needed
        sys.stdout.write(text)
        return 0
    from ..compact.inputs import unwind_table
    from ..compact.listing import (
        object_rows_json,
        object_rows_lines,
        unwind_info_json,
        unwind_info_lines,
    )
    from ..macho.unwind import compact_unwind_rows

    if view.filetype == MH_OBJECT:
        with decoding(args.file, "__compact_unwind"):
            rows = compact_unwind_rows(view)
        if not rows:
            raise Cfi2SframeError(args.file, "no __LD,__compact_unwind rows to dump")
        if args.json:
            import json  # (JSON output only: its import is a start-up cost)

            print(json.dumps(object_rows_json(rows, view), indent=1))
        else:
            print("\n".join(object_rows_lines(rows, view)))
        return 0
    table = unwind_table(args.file, view)
    if table is None:
        raise Cfi2SframeError(args.file, "no __TEXT,__unwind_info section to dump")
    if args.json:
        import json

        print(json.dumps(unwind_info_json(table, view), indent=1))
    else:
        sys.stdout.write("".join(line + "\n" for line in unwind_info_lines(table, view)))
    return 0


def lookup(args: argparse.Namespace, data: bytes) -> int:
    """Each PC (an address, or SYMBOL[+OFFSET]) in the image's ``__unwind_info`` as
    libunwind looks it up, or in the object's ``__compact_unwind`` rows."""
    from ..compact.inputs import unwind_table
    from ..compact.listing import meaning
    from ..compact.table import Lookup
    from ..macho.read import MH_OBJECT
    from ..macho.unwind import compact_unwind_rows
    from .common import address_of

    view = open_view(args.file, data, args.arch, args.binary)
    names = view.function_names
    starts = {name: address for address, name in sorted(names.items(), reverse=True)}
    pcs = [address_of(text, starts, args.file) for text in args.pcs]
    base = view.image_base
    results: list[dict[str, object]] = []
    status = 0
    if view.filetype == MH_OBJECT:
        with decoding(args.file, "__compact_unwind"):
            rows = compact_unwind_rows(view)
        found = [next(((r.start, r.encoding, r.personality, r.lsda) for r in rows
                       if r.start <= pc < r.start + r.length), None) for pc in pcs]
    else:
        section = view.section("__TEXT", "__unwind_info")
        if section is None:
            raise Cfi2SframeError(args.file, "no __TEXT,__unwind_info section to look up in")
        unwind_table(args.file, view)  # malformed tables: one located line, first
        table = Lookup(view.section_data(section))
        found = []
        for pc in pcs:
            row = table.find(pc - base)
            found.append(None if row is None else (
                base + row.start, row.encoding,
                None if row.personality is None else f"{base + row.personality:#x}",
                None if row.lsda is None else base + row.lsda))
    for pc, hit in zip(pcs, found, strict=True):
        if hit is None:
            status = 1
            why = "no row covers this PC (or its row says no unwind information)"
            results.append({"pc": pc, "error": why})
            if not args.json:
                print(f"{pc:#x}: error: {why}", file=sys.stderr)
            continue
        start, encoding, personality, lsda = hit
        name = names.get(start, f"pc+{start:#x}")
        words = meaning(encoding, view, start)
        results.append({"pc": pc, "function_start": start, "symbol": names.get(start),
                        "offset": pc - start, "encoding": encoding, "meaning": words,
                        "personality": personality, "lsda": lsda})
        if not args.json:
            extra = "".join((f"; personality {personality}" if personality else "",
                             f"; LSDA {lsda:#x}" if lsda else ""))
            print(f"{pc:#x}: {name}+{pc - start:#x}: row at {start:#x}, encoding "
                  f"{encoding:#010x}: {words}{extra}")
    if args.json:
        import json

        print(json.dumps(results, indent=1))
    return status


def verify(path: str, data: bytes, arch: str | None, quiet: bool,
           binary: str | None = None) -> int:
    """An image's ``__unwind_info`` or an object's ``__compact_unwind`` against its
    ``__eh_frame`` and code (``compact.check``); exit 1 on a problem.  A bare table:
    against ``binary``'s (the image it is for)."""
    from ..compact.check import check_macho
    from ..macho.read import MH_OBJECT

    view = open_view(path, data, arch, binary)
    with decoding(path, "Mach-O file"):
        result = check_macho(path, view)
    for problem in result.problems:
        print(f"{path}: problem: {problem}")
    if not quiet:
        for note in result.notes:
            print(f"{path}: note: {note}")
    what = "__compact_unwind rows" if view.filetype == MH_OBJECT else "__unwind_info entries"
    code = f", {result.from_code} against their prologue's code" if result.from_code else ""
    print(f"{path}: {result.rows} {what}, {result.checked} checked against their DWARF CFI"
          f"{code}, {len(result.problems)} problems")
    return 0 if result.ok else 1
