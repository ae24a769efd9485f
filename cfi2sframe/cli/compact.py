"""``cfi2sframe compact``: Apple compact unwind encodings from the same CFI."""

from __future__ import annotations

import argparse
import sys
from operator import attrgetter

from ..arch import by_compact, get_arch
from ..compact.encoding import describe
from ..compact.inputs import (
    compact_arch,
    compact_asm_rows,
    compact_file,
    compact_macho,
    darwin_object,
    from_prologues,
    image_columns,
    macho_object_with_ours,
    placed_functions,
    unwind_columns,
    unwind_table,
)
from ..compact.words import HAS_LSDA, NOT_FUNCTION_START, PERSONALITY_MASK, is_dwarf
from ..compact.writer import rows_asm, rows_binary
from ..core import compiled
from ..errors import Cfi2SframeError
from ..files import read_bytes, read_for_rewrite, refuse_output_naming_input, rewrite
from ..frontend.macho_probe import darwin_arch, darwin_text
from ..inputs import Input, input_of, open_input
from ..kinds import Kind
from ..macho.read import MH_OBJECT, open_macho
from ..macho.unwind import compact_unwind_rows
from ..reasons import Unrepresentable
from ..typed import TYPE_CHECKING
from .batch import usage_error
from .common import Subparsers, address, arch_name, parse_pc, write
from .macho import add_binary_option, open_view
from .subcommands import SUBCOMMANDS

if TYPE_CHECKING:
    from ..arch.base import Arch
    from ..compact.lower import CompactFunction, CompactRow
    from ..compact.table import Columns, UnwindInfo
    from ..macho.read import MachoView
    from ..macho.unwind import ObjectRow
    from ..reasons import CompactReason


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser("compact", help=SUBCOMMANDS["compact"][1],
                       description="Per function: the 32-bit compact unwind encoding (x86-64 "
                       "or arm64), its meaning in words, start and length; DWARF mode with a "
                       "reason where compact unwind cannot describe the body state exactly. "
                       "Every encoding is checked against the CFI; the summary gives the "
                       "bytes at which the rows unwind exactly as the CFI says.")
    p.add_argument("file", nargs="?",
                   help="assembly (.s), an ELF object or binary, or a Mach-O file (omit "
                        "with --place)")
    p.add_argument("--arch", type=arch_name,
                   help="architecture of assembly input (x86_64, i386, aarch64; default "
                        "x86_64; ELF and Mach-O input say their own), or the slice of a "
                        "universal Mach-O file")
    p.add_argument("--assembler", metavar="CMD", help="assembler command (see cfi2sframe -h)")
    p.add_argument("--ranges", action="store_true",
                   help="one row per CFI state compact unwind can express (later rows "
                   "marked UNWIND_IS_NOT_FUNCTION_START), exact in prologues and epilogues")
    p.add_argument("--check", action="store_true",
                   help="also list the compact functions whose rows are not exact at every "
                        "byte: where (prologue/epilogue, or inside the body), so which need "
                        "--ranges")
    p.add_argument("--emit", choices=["text", "asm", "bin", "obj", "unwind-info"],
                   default="text",
                   help="text (default), __LD,__compact_unwind rows as assembly, or as "
                   "binary rows (32 bytes; 20 on i386) on standard output; obj (assembly "
                   "for an Apple target): its Mach-O object with these encodings in "
                   "__LD,__compact_unwind, to -o; unwind-info "
                   "(a Mach-O image): its __TEXT,__unwind_info built again by our writer, "
                   "looked up at every function before it is written")
    p.add_argument("--in-place", action="store_true",
                   help="a Mach-O object: rewrite its __LD,__compact_unwind rows with the "
                        "encodings computed here from its __eh_frame (relocations, "
                        "personality and LSDA kept; each changed row is named); an object "
                        "without the section gets it, and with --ranges one row per "
                        "state replaces each function's")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="where --emit bin, obj or unwind-info writes (default: standard "
                        "output)")
    p.add_argument("--json", action="store_true")
    add_binary_option(p)
    p.add_argument("--place", action="append", metavar="OBJ@ADDR", default=[],
                   help="with --emit unwind-info: build __unwind_info for Mach-O objects "
                        "placed at these addresses (each object's address space at ADDR, "
                        "as a JIT maps it), from their __compact_unwind rows; "
                        "OBJ:SEGMENT,SECTION@ADDR places one section of an object apart "
                        "(as a linker puts __TEXT,__gcc_except_tab)")
    p.add_argument("--image-base", type=address, default=0x100000000, metavar="ADDR",
                   help="with --place: the address the table's offsets count from (the "
                        "__TEXT segment's; default 0x100000000)")
    p.add_argument("--personality", action="append", metavar="NAME=ADDR", default=[],
                   help="with --place: where the pointer to a personality routine is "
                        "(its GOT slot), for the rows that name it")


def run(args: argparse.Namespace) -> int:
    args.arch_given = args.arch is not None
    args.arch = args.arch or "x86_64"
    if args.output:  # before any work: writing it would destroy an input
        placed = [text.rpartition("@")[0] for text in args.place]
        refuse_output_naming_input(args.output, [args.file or "-", *placed])
    if args.place:
        return _write_placed(args)
    if args.file is None:
        usage_error("compact", "compact needs FILE (or --place OBJ@ADDR with --emit "
                                  "unwind-info); see --help")
    if args.in_place:
        return _rewrite_macho_object(args)
    source = open_input(args.file)
    if source.kind == Kind.unwind_info:
        return _bare_table(args, source.data)
    if source.kind in (Kind.macho, Kind.fat_macho):
        return _macho_file(args, source)
    if args.emit == "unwind-info":
        raise Cfi2SframeError(args.file, "--emit unwind-info builds a Mach-O image's "
                                         "__unwind_info again; this is not a Mach-O image")
    if source.kind == Kind.text:  # assembly: Mach-O when written for Apple
        return _assembly(args, source)
    keep = getattr(args, "keep", None)  # (cli.entry's list: held until the process ends)
    arch, functions = compact_file(args.file, source.data, args.arch, args.assembler,
                                   args.ranges, source.kind, keep)
    functions = in_address_order(functions, True)
    if keep is not None:  # (95k functions not freed one by one at return)
        keep.append(functions)
    return _listing(args, arch, functions, None, None)


def _macho_file(args: argparse.Namespace, source: Input) -> int:
    """A Mach-O file: an image's ``__unwind_info`` as libunwind reads it; an object's
    functions from its ``__eh_frame``, beside its own ``__compact_unwind`` rows."""
    arch, functions, object_rows, view = compact_macho(
        args.file, source.data, args.arch if args.arch_given else None, args.ranges)
    if view.filetype == MH_OBJECT and args.emit == "unwind-info":
        raise Cfi2SframeError(args.file, "--emit unwind-info builds a Mach-O image's "
                                         "__unwind_info again; this is an object "
                                         "(a linker builds the image's table)")
    if view.filetype == MH_OBJECT:
        return _listing(args, arch, in_address_order(functions, False), object_rows, view)
    flavour = compact_arch(arch.name, args.file)
    if args.emit == "unwind-info":  # the entries alone, as columns
        columns = unwind_columns(args.file, view)
        if columns is None:
            print(f"{args.file}: no __unwind_info section")
            return 0
        return _write_unwind_info(args, view, columns)
    table = unwind_table(args.file, view)
    if table is None:
        print(f"{args.file}: no __unwind_info section")
        return 0
    _print_unwind_info(table, view.image_base, view.function_names, flavour,
                       arch.register_names)
    return 0


def _assembly(args: argparse.Namespace, source: Input) -> int:
    """Assembly: for ``--arch`` (an Apple target's own when it is written for one,
    assembled as Mach-O, its assembler's rows beside ours), or ``--emit obj``'s object."""
    text = source.data.decode("utf-8", "surrogateescape")
    arch = get_arch(args.arch if args.arch_given or not darwin_text(text)
                    else darwin_arch(text) or args.arch)
    functions, object_rows = compact_asm_rows(text, args.file, arch, args.assembler,
                                              args.ranges)
    if args.emit == "obj":
        return _write_darwin_object(args, text, arch, functions, object_rows)
    return _listing(args, arch, in_address_order(functions, True), object_rows, None)


def _listing(args: argparse.Namespace, arch: Arch, functions: list[CompactFunction],
             object_rows: list[ObjectRow] | None, view: MachoView | None) -> int:
    """The functions' rows as ``--emit`` asks (assembly, binary rows, JSON or the
    listing), then the object's own rows against them (``view``: a Mach-O object's,
    whose rows without CFI are computed from the prologue)."""
    flavour = compact_arch(arch.name, args.file)
    names = arch.register_names
    if args.emit == "asm":
        sys.stdout.write(rows_asm(functions, flavour))
        return 0
    if args.emit == "bin":
        write(args.output or "-", rows_binary(functions, flavour))
        return 0
    if args.json:
        import json  # (JSON output only: its import is a start-up cost)

        said: dict[int, str] = {}
        print(json.dumps([_function_json(f, flavour, names, said) for f in functions],
                         indent=1))
        return 0
    _print_functions(functions, flavour, names, args.check)
    if object_rows is not None:
        from_code: dict[int, int | Unrepresentable[CompactReason]] = {}
        if view is not None:  # an object: rows without CFI
            from_code = from_prologues(view, object_rows, functions)
        _print_object_rows(object_rows, functions, flavour, names, from_code)
    return 0


def _meaning(func: CompactFunction, encoding: int, flavour: str,
             names: dict[int, str], said: dict[int, str]) -> str:
    """A row's encoding in words; DWARF mode with why.  ``said``: the words of each
    encoding already described (a library repeats a few hundred in 95k rows)."""
    if is_dwarf(encoding, flavour):
        return f"DWARF: {func.reason} ({func.detail})" if func.reason else "DWARF"
    encoding &= ~NOT_FUNCTION_START
    words = said.get(encoding)
    if words is None:
        words = said[encoding] = describe(encoding, flavour, None, names)
    return words


def _function_json(f: CompactFunction, flavour: str, names: dict[int, str],
                   said: dict[int, str]) -> dict[str, object]:
    """One function of ``--json`` (``said``: as ``_meaning``'s)."""
    return {"name": f.name, "section": f.section, "start": f.start, "length": f.size,
            "reason": f.reason, "detail": f.detail or None, "exact_bytes": f.exact_bytes,
            "personality": f.personality, "lsda": f.lsda,
            "rows": [{"start": f.start + r.start, "length": r.length,
                      "encoding": f"{r.encoding:#010x}",
                      "meaning": _meaning(f, r.encoding, flavour, names, said)}
                     for r in f.rows]}


def _print_functions(functions: list[CompactFunction], flavour: str, names: dict[int, str],
                     check: bool) -> None:
    """Each function's rows, the summary, and with ``--check`` where rows are inexact;
    written 4096 functions at a time (a library's 166k lines, a ``print`` each, were
    a fifth of ``compact --check``), each part's text made by the compiled core where
    it can (``_core.compact_rows_text``), else by ``_Rows.text``, its reference."""
    rows = _Rows(flavour, names, check)
    core = compiled()
    compact = needs_ranges = body_inexact = 0
    for lo in range(0, len(functions), _PART):
        part = functions[lo:lo + _PART]
        made = None if core is None else core.compact_rows_text(part, rows.tail, check)
        text, *counts = made if made is not None else rows.text(part)
        compact += counts[0]
        needs_ranges += counts[1]
        body_inexact += counts[2]
        sys.stdout.write(text)
    total = sum(map(_SIZE, functions))
    exact = sum(map(_EXACT, functions))
    share = f"{100 * exact / total:.1f}%" if total else "-"
    lines = [f"{len(functions)} functions: {compact} compact, {len(functions) - compact} "
             f"DWARF; the rows unwind exactly as the CFI at {exact} of {total} bytes "
             f"({share})"]
    if check:
        lines.append(f"check: {needs_ranges} compact functions are not exact at every byte "
                     f"and need --ranges for asynchronous unwinding; {body_inexact} of them "
                     "also inside the body")
    sys.stdout.write("\n".join(lines) + "\n")


_PART = 4096
_SIZE = attrgetter("size")
_SECTION = attrgetter("section")
_START = attrgetter("start")
_EXACT = attrgetter("exact_bytes")


class _Rows:
    """The listing's lines of functions, with the words made once per encoding, row
    and check shape."""

    def __init__(self, flavour: str, names: dict[int, str], check: bool) -> None:
        self.flavour, self.names, self.check = flavour, names, check
        self.said: dict[int, str] = {}
        self.tails: dict[int, str] = {}  # an encoding and its words, as a row ends
        # A row's length and ``tails``' words, by the row object (functions of one
        # shape share it; all are alive while listed).
        self.ends: dict[int, str] = {}
        # A compact function's inexact spans and body -> whether it is exact in the
        # body, and its check line as a format of its start plus offsets
        # (``_check_format``): a library's 71k such functions have some thousand.
        self.checks: dict[tuple[tuple[tuple[int, int], ...], tuple[int, int]],
                          tuple[bool, str, tuple[int, ...]]] = {}

    def tail(self, func: CompactFunction, row: CompactRow) -> tuple[str, bool]:
        """A row's encoding and its words, and whether they are the same for every row
        of its encoding (not in DWARF mode, whose words say the function's reason)."""
        found = self.tails.get(row.encoding)
        if found is not None:
            return found, True
        words = (f"{row.encoding:#010x}  "
                 f"{_meaning(func, row.encoding, self.flavour, self.names, self.said)}")
        keep = not is_dwarf(row.encoding, self.flavour)
        if keep:
            self.tails[row.encoding] = words
        return words, keep

    def text(self, functions: list[CompactFunction]) -> tuple[str, int, int, int]:
        """The lines of ``functions`` (each ended), and how many are compact, have
        inexact spans, and of those are inexact in the body."""
        compact = needs_ranges = body_inexact = 0
        lines: list[str] = []
        for func in functions:
            shape = None
            if func.reason is None:
                compact += 1
                if func.inexact:
                    key = (func.inexact, func.body)
                    shape = self.checks.get(key)
                    if shape is None:
                        in_body = func.exact_in_body
                        shape = self.checks[key] = (in_body, *_check_format(func, in_body))
                    needs_ranges += 1
                    body_inexact += not shape[0]
            if not func.rows:
                lines.append(f"{func.name:<24} {func.start:#8x} {func.size:#6x}  no row: "
                             f"{func.reason} ({func.detail})")
            for i, row in enumerate(func.rows):
                label = func.name if i == 0 else ""
                end = self.ends.get(id(row))
                if end is None:
                    words, keep = self.tail(func, row)
                    end = f"{row.length:#6x}  {words}"
                    if keep:
                        self.ends[id(row)] = end
                lines.append(f"{label:<24} {func.start + row.start:#8x} {end}")
            if self.check and shape is not None:
                start = func.start
                lines.append(shape[1] % tuple([start + at for at in shape[2]]))
        lines.append("")
        return "\n".join(lines), compact, needs_ranges, body_inexact


def _rewrite_macho_object(args: argparse.Namespace) -> int:
    """``--in-place`` on a Mach-O object: its rows with our encodings, written only when
    complete (``files.rewrite``), and the rows read back before."""
    data, read_stat = read_for_rewrite(args.file)
    if input_of(args.file, data).kind != Kind.macho:
        raise Cfi2SframeError(args.file, "compact --in-place rewrites a thin Mach-O object "
                                         "(a universal file's slices: take one with lipo)")
    new, notes = macho_object_with_ours(args.file, data, ranges=args.ranges)
    compact_unwind_rows(open_macho(new))  # still reads, row for row
    for note in notes:
        print(f"{args.file}: note: {note}", file=sys.stderr)
    if new != data:
        rewrite(args.file, data, read_stat, new, False)
    return 0


def _bare_table(args: argparse.Namespace, data: bytes) -> int:
    """A bare ``__unwind_info`` (``--emit unwind-info``'s, an extracted one): listed, or
    built again, as the table of ``--binary IMAGE`` (else of an image of ``--arch`` at
    0, its functions unnamed)."""
    view = open_view(args.file, data, args.arch if args.arch_given else None, args.binary)
    if args.emit == "unwind-info":
        columns = unwind_columns(args.file, view)
        if columns is None:  # the view holds the table it was given
            raise AssertionError("a bare table's view lost its __unwind_info")
        return _write_unwind_info(args, view, columns)
    table = unwind_table(args.file, view)
    if table is None:  # the view holds the table it was given
        raise AssertionError("a bare table's view lost its __unwind_info")
    _print_unwind_info(table, view.image_base, view.function_names, view.arch,
                       by_compact(view.arch).register_names)
    return 0


def _write_darwin_object(args: argparse.Namespace, text: str, arch: Arch,
                         functions: list[CompactFunction],
                         object_rows: list[ObjectRow] | None) -> int:
    if object_rows is None:
        raise Cfi2SframeError(args.file, "--emit obj writes a Mach-O object: this is not "
                                         "assembly for an Apple target (the main command "
                                         "writes ELF objects)")
    obj, notes = darwin_object(text, args.file, arch, args.assembler, functions, args.ranges)
    for note in notes:
        print(f"{args.file}: note: {note}", file=sys.stderr)
    write(args.output or "-", obj)
    return 0


def _write_placed(args: argparse.Namespace) -> int:
    """``--place``: the table for objects at the addresses given."""
    from ..compact.table_writer import build_unwind_info

    if args.emit != "unwind-info" or args.file is not None:
        usage_error("compact", "--place builds __unwind_info: use it with --emit "
                                  "unwind-info and no FILE")
    objects = []
    sections: dict[tuple[str, str], int] = {}
    for text in args.place:
        path, at, where = text.rpartition("@")
        if not at or not path:
            usage_error("compact", f"--place '{text}': expected OBJ@ADDR or "
                                      "OBJ:SEGMENT,SECTION@ADDR")
        owner, colon, section = path.rpartition(":")
        if colon and "," in section:  # one section of an object placed apart
            sections[(owner, section)] = parse_pc(where)
        else:
            objects.append((path, read_bytes(path), parse_pc(where)))
    for owner, section in sections:
        if owner not in {path for path, _, _ in objects}:
            raise Cfi2SframeError("", f"--place '{owner}:{section}': place '{owner}' "
                                      "itself too (OBJ@ADDR)")
    personalities = {}
    for text in args.personality:
        name, eq, where = text.partition("=")
        if not eq:
            usage_error("compact", f"--personality '{text}': expected NAME=ADDR")
        personalities[name] = parse_pc(where)
    functions, notes = placed_functions(objects, args.image_base, personalities, sections)
    if not functions:
        raise Cfi2SframeError(objects[0][0], "no __compact_unwind rows in these objects")

    arch = open_view(objects[0][0], objects[0][1], None).arch
    built = build_unwind_info(functions, arch, objects[0][0])
    for note in [*notes, *built.notes]:
        print(f"note: {note}", file=sys.stderr)
    write(args.output or "-", built.data)
    return 0


def _write_unwind_info(args: argparse.Namespace, view: MachoView, table: Columns) -> int:
    """The image's table built again by our writer (every function looked up before it
    is written), to -o or standard output; what changed is said on standard error."""
    from ..compact.table_writer import build_from_columns

    built = build_from_columns(image_columns(view, table), view.arch, args.file)
    for note in built.notes:
        print(f"{args.file}: note: {note}", file=sys.stderr)
    write(args.output or "-", built.data)
    return 0


def _print_unwind_info(table: UnwindInfo, base: int, symbols: dict[int, str], flavour: str,
                       names: dict[int, str]) -> None:
    """An image's ``__unwind_info``: each function's row as libunwind finds it."""
    pages = ", ".join(f"{kind} ({count} entries)" for kind, count in table.pages)
    print(f"the file's __unwind_info: {len(table.entries)} entries; {len(table.common)} "
          f"common encodings, {len(table.personalities)} personality routine(s); "
          f"{len(table.pages)} page(s): {pages}; the index ends at "
          f"{base + table.sentinel:#x}")
    for entry in table.entries:
        address = base + entry.offset
        name = symbols.get(address, f"pc+{address:#x}")
        extra = "".join((f" personality at {base + entry.personality:#x}"
                         if entry.personality is not None else "",
                         f" LSDA {base + entry.lsda:#x}" if entry.lsda is not None else ""))
        meaning = describe(entry.encoding & ~(HAS_LSDA | PERSONALITY_MASK), flavour, None,
                           names) if entry.encoding else "no unwind information"
        print(f"{name:<24} {address:#10x}  {entry.encoding:#010x}  {meaning}{extra}")
    for problem in table.problems:
        print(f"problem: {problem}")


def _print_object_rows(rows: list[ObjectRow], functions: list[CompactFunction],
                       flavour: str, names: dict[int, str],
                       from_code: dict[int, int | Unrepresentable[CompactReason]]) -> None:
    """A Mach-O object's own ``__compact_unwind`` rows, each against the one computed here
    from its DWARF CFI, or where it has none from what its code builds (``from_code``,
    by row start; labelled so) (the personality and LSDA bits set aside: they come
    from the object's relocations, not from the CFI)."""
    by_name = _names_differ(functions)
    encodings = {func.name if by_name else func.start: func.rows[0].encoding
                 for func in functions if func.rows}
    print(f"the object's own __compact_unwind (its compiler's or assembler's): {len(rows)} rows")
    agree = differ = by_code = 0
    for row in sorted(rows, key=lambda row: row.start):
        extra = "".join((f" personality {row.personality}" if row.personality else "",
                         f" LSDA {row.lsda:#x}" if row.lsda else ""))
        mine: int | Unrepresentable[CompactReason] | None = \
            encodings.get(row.name if by_name else row.start)
        source = ""
        if mine is None and row.start in from_code:
            mine, source = from_code[row.start], " (from the prologue)"
            by_code += 1
        if mine is None:
            verdict = "no DWARF CFI here to compute it from"
        elif isinstance(mine, Unrepresentable):
            verdict, differ = f"DIFFERS: ours DWARF mode{source}: {mine.detail}", differ + 1
        elif (mine ^ row.encoding) & ~(HAS_LSDA | PERSONALITY_MASK) == 0:
            verdict, agree = f"= ours{source}", agree + 1
        else:
            verdict, differ = f"DIFFERS: ours {mine:#010x}{source}", differ + 1
        print(f"{row.name:<24} {row.start:#8x} {row.length:#6x}  {row.encoding:#010x}  "
              f"{describe(row.encoding & ~(HAS_LSDA | PERSONALITY_MASK), flavour, None, names)}"
              f"{extra}; {verdict}")
    print(f"{agree} rows as computed here, {differ} differ, {len(rows) - agree - differ} "
          "not computed (no CFI here for them)"
          + (f"; {by_code} of them computed from the prologue, the object having no FDE "
             "for them" if by_code else ""))


def in_address_order(functions: list[CompactFunction],
                     by_section: bool) -> list[CompactFunction]:
    """Functions as listings show them, by address: a Mach-O file's share one address
    space; elsewhere (assembly, an ELF object) each section's starts count from its own
    start (``by_section``), so they go by address within each section, the sections in
    the order they first appear."""
    sections = dict.fromkeys(map(_SECTION, functions)) if by_section else {}
    if len(sections) <= 1:  # (a library's one .text: by start alone, 95k functions)
        return sorted(functions, key=_START)
    first = {section: i for i, section in enumerate(sections)}
    return sorted(functions, key=lambda func: (first[func.section], func.start))


def _names_differ(functions: list[CompactFunction]) -> bool:
    """Whether a row of the object's own table is matched to a function computed here
    by its name (every function's is different: an assembly file's starts count from
    each section's start, the object's rows from the object's), else by its address.
    Asked once per listing, not per row (a 100k-function object: 10^10 steps)."""
    names = [func.name for func in functions]
    return len(set(names)) == len(names)


def _check_format(func: CompactFunction, in_body: bool) -> tuple[str, tuple[int, ...]]:
    """A compact function's check line, where its rows are not exact, in the body or
    around it (``in_body``: its ``exact_in_body``), as a %-format of the addresses at
    the offsets given (the function's start plus each): the same line for every
    function of its spans and body."""
    lo, hi = func.body
    head = f"{'':<24} check: "
    if not in_body:
        return (head + "NOT exact inside the body state at "
                + _spans(len(func.inexact)) + ": use --ranges",
                tuple([at for span in func.inexact for at in span]))
    before = [span for span in func.inexact if span[1] <= lo]
    after = [span for span in func.inexact if span[0] >= hi]
    parts = ([f"before it (prologue, stack changes) at {_spans(len(before))}"] if before
             else []) + ([f"from the first epilogue on at {_spans(len(after))}"] if after
                         else [])
    return (head + f"exact over the body state [%#x, %#x); not {' nor '.join(parts)}: "
            "use --ranges", (lo, hi, *[at for span in before + after for at in span]))


def _spans(count: int) -> str:
    """``count`` spans' place-holders in ``_check_format``'s line."""
    return ", ".join(["[%#x, %#x)"] * count)
