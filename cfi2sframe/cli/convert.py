"""The main command: ``cfi2sframe INPUT [-o OUTPUT]`` converts the CFI of assembly or of
an ELF file into an SFrame section (or compact unwind rows), in the output form asked
for."""

from __future__ import annotations

import argparse
import os
import sys

from .. import __version__
from ..arch import ARCHES
from ..core import name as core_name
from ..errors import Cfi2SframeError
from ..files import read_for_rewrite, read_input, refuse_output_naming_input, start_copy
from ..inputs import Input, input_of
from ..typed import TYPE_CHECKING
from .batch import add_batch_options, many_files, print_summary, run_batch, usage_error
from .common import add_limit_options, address, arch_name, limits_of, write
from .diagnostics import WARNING_HELP, WarningPolicy, warning_policy
from .parsers import Parser, RawDescriptionHelpFormatter

if TYPE_CHECKING:
    from typing import Any

    from ..arch.base import Arch
    from ..convert import AsmConversion
    from ..frontend.launch import Launch
    from ..sframe.lower import Skip

EMIT_KINDS = ("raw", "asm", "obj", "elf")
LINKER_CHOICES = ("auto", "v1", "v2-noflag", "v2", "v3", "any")  # as linker.CHOICES
USAGE = ("cfi2sframe [options] INPUT [-o OUTPUT]  |  cfi2sframe --in-place [-r] INPUT...  |  "
         "cfi2sframe COMMAND ...")

DESCRIPTION = """\
Lower call-frame information into a stack-trace section: the .cfi_* directives of
an assembly file (addresses from a real assembler run, never estimated), or the
.eh_frame / .debug_frame of an ELF object, program or shared library.

Output: an SFrame section, version 2 (errata 1; the default) or 3
(--sframe-version 3), for x86-64, AArch64 (either byte order) and s390x (an
object gets the version the linker on PATH merges: V1 for GNU ld 2.40, see
--linker-reads); or Apple
compact unwind rows (--format compact-unwind; x86-64, i386, arm64).  A function
the format cannot describe exactly is left out with a warning that names the
reason (--list-reasons); the others are still emitted."""


def _epilog() -> str:
    from .subcommands import SUBCOMMANDS

    commands = "\n".join(f"  {name:<9}{line}" for name, (_, line) in SUBCOMMANDS.items())
    return f"""\
output forms (--emit; default from the output name: .o -> obj, .s/.asm -> asm,
anything else -> raw):
  raw  the section bytes.  Relocatable input: every input section placed at
       address 0, so a decoded FDE start is the function's offset in its own
       section (as readelf prints .o files).  Linked input: at --sframe-address.
  asm  (assembly input) an assembly fragment holding .sframe, function starts as
       PC-relative expressions on the input's symbols:  as foo.s foo.sframe.s
  obj  a relocatable object with .sframe and one PC-relative relocation per FDE
       (assembly input: assembled by the real assembler; or a copy of an object)
  elf  (executables, shared libraries) a copy with a loadable .sframe and
       PT_GNU_SFRAME; --in-place replaces the input after it verifies

commands (cfi2sframe COMMAND --help for each):
{commands}

exit status: 0 success, 1 bad input or failed conversion, 2 usage error,
70 internal error.

examples:
  cfi2sframe foo.s -o foo.sframe
  cfi2sframe foo.s -o foo.o
  cfi2sframe libfoo.so --emit elf -o libfoo.sframe.so
  cfi2sframe --in-place -r debian/pkg/usr --jsonl sframe.jsonl   # a package tree,
                                                    # after stripping (dh_strip)
  gcc -S -o - foo.c | cfi2sframe - --emit asm -o - > foo.sframe.s
  cfi2sframe --assembler 'clang -c -x assembler' foo.s -o foo.o
  cfi2sframe verify libfoo.sframe.so"""


def parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="cfi2sframe", usage=USAGE, description=DESCRIPTION, epilog=_epilog(),
        formatter_class=RawDescriptionHelpFormatter)
    parser.add_argument("inputs", nargs="*", metavar="INPUT",
                        help="assembly file (.s), ELF file (object, shared library, program; "
                             "its .eh_frame or .debug_frame is read), or - for standard "
                             "input; several ELF files, or folders with -r, with --in-place")
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="output file, - for standard output (default: the input name "
                             "with .sframe, .sframe.s or .o; standard output for - input); "
                             "never the input itself (use --in-place)")
    parser.add_argument("--emit", choices=EMIT_KINDS,
                        help="output form (default: from the output name, else raw)")
    parser.add_argument("--arch", default="x86_64", type=arch_name, choices=sorted(ARCHES),
                        help="target architecture of assembly input (default: x86_64; ELF "
                             "input says its own)")
    parser.add_argument("--assembler", metavar="CMD",
                        help="assembler command; '-I DIR -o OUT IN' is appended "
                             "(default: as for x86_64, aarch64-linux-gnu-as for aarch64, "
                             "s390x-linux-gnu-as for s390x)")
    parser.add_argument("--format", choices=["sframe", "compact-unwind"], default="sframe",
                        help="output format: an SFrame section (default) or Apple compact "
                             "unwind rows (__LD,__compact_unwind; see 'cfi2sframe compact')")
    parser.add_argument("--sframe-version", type=int, default=None, choices=[1, 2, 3],
                        help="SFrame format version to write (default: 2, and for objects "
                             "and archive members what the linker merges, --linker-reads; "
                             "3 adds FLEX FDEs, RA-undefined rows and signal frames; 1 is "
                             "for objects only, GNU ld 2.40's input)")
    parser.add_argument("--linker-reads", choices=LINKER_CHOICES, default="auto",
                        help="objects and archive members: the SFrame the linker that will "
                             "take them in merges, written by default (a version it cannot "
                             "merge is refused). auto (default): ask 'ld --version' on PATH "
                             "(the target's, e.g. aarch64-linux-gnu-ld): GNU ld 2.40 v1, "
                             "2.41-2.44 v2-noflag (V2 without the PC-relative flag), 2.45 v2 "
                             "(errata 1), 2.46 and later v3, mold v3; lld, gold, GNU ld "
                             "before 2.40 or no ld: any (they merge none: --sframe-version, "
                             "else 2). Never asked for linked files or raw sections")
    parser.add_argument("--no-flex", dest="flex", action="store_false",
                        help="with --sframe-version 3: write default FDEs only, for readers "
                             "that read no FLEX FDE (the kernel series up to v13, glibc's "
                             "proposed V3 reader, wild); a function that needs one is left "
                             "out as flex-needed")
    parser.add_argument("--sframe-address", type=address, metavar="ADDR",
                        help="for a linked ELF input with --emit raw: the address the "
                             "section will have (default: after the last PT_LOAD segment, "
                             "page aligned)")
    parser.add_argument("--source", choices=["auto", "dwarf", "sframe"], default="auto",
                        help="ELF input: what to read. dwarf: .eh_frame or .debug_frame; "
                             "sframe: the file's own .sframe (V1, V2 or V3; also a raw "
                             "section file), converted to --sframe-version, replacing it in "
                             "obj/elf output; auto (default): dwarf, or sframe for a file "
                             "with .sframe and no DWARF CFI")
    parser.add_argument("--replace", action="store_true",
                        help="ELF input that already has .sframe (from GNU as, clang, ld, "
                             "mold): regenerate it from the DWARF CFI and replace it (objects: "
                             "the section and its relocations; linked files: in place when it "
                             "fits, else a new loadable section that PT_GNU_SFRAME points at)")
    parser.add_argument("--old-kernels", choices=["keep", "pad", "no"], default="keep",
                        help="linked programs whose program header table cannot grow where "
                             "it is (no movable .interp, notes or hash tables after it), so "
                             "it is moved: Linux before 5.18 and qemu-user look for it at "
                             "the first segment's address plus its offset; where keeping "
                             "that takes more than a page of zeros (a file much shorter "
                             "than its memory image): keep (default) refuses the file, pad "
                             "writes the zeros, no places the table for Linux >= 5.18 only. "
                             "Shared libraries never pay zeros for it")
    parser.add_argument("--in-place", action="store_true",
                        help="ELF input: replace the input file, only after the new file "
                             "is complete and verified; it keeps its form (an object --emit "
                             "obj, a linked file --emit elf), whatever its name")
    parser.add_argument("-p", "--preserve-dates", action="store_true",
                        help="--in-place: keep the file's access and modification times "
                             "(as strip -p); owner, group, mode and extended attributes are "
                             "always kept")
    parser.add_argument("--objects", action="store_true",
                        help="--in-place over many files or trees: rewrite relocatable "
                             "objects too (by default they are kept: a toolchain's crt1.o "
                             "or an archive's members end up in every later link)")
    parser.add_argument("-w", "--no-warnings", action="store_true",
                        help="do not print warnings or notes for functions left out")
    parser.add_argument("-W", dest="warning_options", action="append", default=[],
                        metavar="no-REASON|error=REASON|error", help=WARNING_HELP)
    parser.add_argument("--strict-assembler", action="store_true",
                        help="assembly input: an assembler whose own CFI (in the object it "
                             "wrote) differs from the directives is an error, not a warning")
    parser.add_argument("--fatal-warnings", action="store_true",
                        help="treat warnings as errors (exit 1, no output); as -Werror")
    parser.add_argument("--list-reasons", action="store_true",
                        help="print the reason codes for left-out functions (SFrame, then "
                             "compact unwind) and exit")
    parser.add_argument("--version", action="version",
                        version=f"cfi2sframe {__version__} ({core_name()})")
    parser.add_argument("--json", action="store_true",
                        help="many files: print every record and the totals as one JSON "
                             "object")
    add_limit_options(parser)
    add_batch_options(parser)
    return parser


def _emit_kind(requested: str | None, output: str) -> str:
    if requested:
        return requested
    lowered = output.lower()
    if lowered.endswith(".o"):
        return "obj"
    if lowered.endswith((".s", ".asm")):
        return "asm"
    return "raw"


def _default_output(input_path: str, emit: str | None, fmt: str = "sframe") -> str:
    if input_path == "-":
        return "-"
    stem = os.path.splitext(os.path.basename(input_path))[0]
    if fmt == "compact-unwind":
        return stem + (".compact_unwind.s" if emit == "asm" else ".compact_unwind")
    return stem + {"asm": ".sframe.s", "obj": ".o"}.get(emit or "raw", ".sframe")


def _print_reasons() -> None:
    from ..reasons import COMPACT_REASONS, SFRAME_REASONS

    width = max(len(code) for code in [*SFRAME_REASONS, *COMPACT_REASONS])
    for code, (meaning, gas) in SFRAME_REASONS.items():
        print(f"{code:<{width}}  {meaning}  (GNU as: {gas})")
    print("\ncompact unwind (--format compact-unwind, compact): the function gets DWARF "
          "mode")
    for compact_code, compact_meaning in COMPACT_REASONS.items():
        print(f"{compact_code:<{width}}  {compact_meaning}")


def _report_skips(display: str, skips: tuple[Skip, ...], args: argparse.Namespace) -> None:
    """Each function left out, as its reason's policy says; an error when one is."""
    from ..reasons import SframeReason

    policy = warning_policy(args, (code.value for code in SframeReason))
    errors = 0
    for skip in skips:
        severity = policy.severity(skip.reason, skip.outermost)
        if severity is not None:
            print(f"{skip.location}: {severity}: {skip.message()}", file=sys.stderr)
        errors += severity == "error"
    if errors:
        raise Cfi2SframeError(display, f"{errors} function(s) left out and "
                                       f"{_which_errors(policy)} is set")


def _which_errors(policy: WarningPolicy) -> str:
    return "--fatal-warnings" if policy.all_errors else ", ".join(
        f"-Werror={code}" for code in sorted(policy.errors))


def _report_disagreements(conversion: AsmConversion, strict: bool) -> None:
    """The assembler's own CFI against the directives: warnings, or the first as an
    error with ``--strict-assembler``."""
    for found in conversion.assembler_disagreements():
        where = str(found.timeline.location)
        if strict:
            raise Cfi2SframeError(where, found.message(conversion.arch) +
                                  " (--strict-assembler)")
        print(f"{where}: warning: {found.message(conversion.arch)}", file=sys.stderr)


def run(args: argparse.Namespace, launched: Launch | None = None,
        keep: list[object] | None = None) -> int:
    """Convert one input; write the output only when everything succeeded.
    ``launched``: the assembler's run ``cli.early`` started, for the conversion to take
    over; ``keep``: where ``cli.entry``, which exits without tearing down the heap, holds
    the conversion, so that returning does not free it first (a large library's
    functions, FREs and FDE tails: some 0.04 s of libLLVM-14's)."""
    if args.list_reasons:
        _print_reasons()
        return 0
    if not args.flex and args.sframe_version != 3:
        usage_error("", "--no-flex applies to --sframe-version 3 (V2 has no FLEX FDE)")
    if many_files(args, args.inputs):
        return _convert_many(args)
    if not args.inputs:
        usage_error("", "no input file (try --help)")
    args.input = args.inputs[0]
    if args.in_place:
        if args.output or args.input in (None, "-"):
            usage_error("", "--in-place takes an input file and no -o")
        args.output = args.input
    output = args.output or _default_output(args.input, args.emit, args.format)
    # In place, the file keeps its own form (checked below), whatever its name says.
    emit = _emit_kind(args.emit, "" if args.in_place else output)
    if not args.in_place:
        refuse_output_naming_input(output, [args.input])
    read_stat = None
    if args.in_place:
        data, read_stat = read_for_rewrite(args.input)
    else:
        data = read_input(args.input)
    display = "<stdin>" if args.input == "-" else args.input
    source = input_of(display, data)
    if args.format == "compact-unwind":
        return _convert_compact(args, source, output, emit)
    if source.is_archive:
        return _convert_archive(args, source, read_stat)
    from ..convert import AsmConversion, ElfConversion, convert_file

    if emit == "asm" and source.is_elf:  # before any work
        from ..convert import asm_needs_assembly

        raise asm_needs_assembly(display)
    version, pcrel = _sframe_form(args, source, emit)
    include_dir = "." if args.input == "-" else os.path.dirname(os.path.abspath(args.input))
    # A large ELF file's copy begun now: the disk writes it while the conversion runs.
    started = start_copy(output, data) if read_stat is None and source.is_elf \
        and emit in ("elf", "obj") else None
    try:
        conversion = convert_file(display, data, args.arch, args.assembler, include_dir,
                                  version, args.sframe_address, args.replace,
                                  args.source, limits_of(args), args.flex, launched, pcrel,
                                  source.kind)
        if keep is not None:
            keep.append(conversion)
        if conversion.assembler_messages:
            sys.stderr.write(conversion.assembler_messages)
        _report_skips(display, conversion.skips, args)
        if isinstance(conversion, AsmConversion):
            _report_disagreements(conversion, args.strict_assembler)
        if conversion.empty and not args.no_warnings:
            left = f" ({len(conversion.skips)} left out)" if conversion.skips else ""
            what = "the section holds no FDE" if emit == "raw" and read_stat is None else \
                "no .sframe section written"
            print(f"{display}: warning: no function has SFrame{left}; {what}", file=sys.stderr)
        if isinstance(conversion, ElfConversion):
            conversion = conversion.laid_out(old_kernels=args.old_kernels)
        if read_stat is not None:
            if not isinstance(conversion, ElfConversion):
                raise Cfi2SframeError(display, "--in-place rewrites ELF files only")
            if args.emit not in (None, conversion.rewrite_form):
                kind = "a linked file" if conversion.linked else "an object"
                raise Cfi2SframeError(display, f"--in-place rewrites {kind} as --emit "
                                               f"{conversion.rewrite_form}, not --emit {args.emit}")
            from ..convert import rewrite_in_place

            rewrite_in_place(display, conversion, data, read_stat, limits_of(args),
                             args.preserve_dates)
            return 0
        payload = conversion.output(emit)
        # A rewritten ELF file keeps the input's permission bits (a program stays runnable).
        keeps_mode = emit in ("elf", "obj") and isinstance(conversion, ElfConversion) \
            and args.input != "-"
        write(output, payload, args.input if keeps_mode else None, started)
        return 0
    except BaseException:
        # A failed conversion drops the copy begun now, and its thread's pipe, at once,
        # not whenever a traceback holding this frame is collected.
        if started is not None:
            started.close()
        raise


def _sframe_form(args: argparse.Namespace, source: Input, emit: str) -> tuple[int, bool]:
    """The SFrame to write, (version, PC-relative flag): an object's (and an assembly
    fragment's, assembled into one) is what its linker merges (``linker``, loaded only
    then: it runs ``ld --version``); a linked file's or a raw section's is
    ``--sframe-version`` (2 by default), with the flag."""
    if emit in ("obj", "asm") or args.in_place:
        arch = _object_arch(source, args.arch)
        if arch is not None:
            from ..linker import object_form

            return object_form(args.linker_reads, args.sframe_version, arch, source.path)
    if args.sframe_version == 1:
        usage_error("", "--sframe-version 1 is written into objects only (GNU ld 2.40 merges "
                        "it; no reader of linked files reads V1 from cfi2sframe)")
    return args.sframe_version or 2, True


def _object_arch(source: Input, asm_arch: str) -> Arch | None:
    """The target of an object the command writes: ``--arch`` for assembly, else
    ``convert.object_arch`` (None for a linked file)."""
    from ..arch import get_arch
    from ..convert import object_arch

    if not source.is_elf and not source.is_archive:
        return get_arch(asm_arch)
    return object_arch(source.path, source.data)


def converted_line(record: dict[str, Any]) -> str:
    """One file of an in-place run over many: what happened to it."""
    from ..batch.record import described

    path, status = record["path"], record["status"]
    if status == "has-sframe":
        return f"{path}: kept: it has .sframe (--replace regenerates it)"
    if status == "no-cfi":
        return f"{path}: kept: no CFI (no .eh_frame or .debug_frame)"
    if status == "object-kept" and record.get("elf_type") == "archive":
        return f"{path}: kept: a static library (--objects converts its members)"
    if status == "object-kept":
        return f"{path}: kept: a relocatable object (--objects converts objects too)"
    if status == "nothing-to-describe":
        return f"{path}: kept: no function has SFrame; no .sframe section written"
    version = record["sframe_version"]
    skipped = ", ".join(f"{k}={v}" for k, v in record["skipped"].items()) or "none"
    return (f"{path}: rewritten: {described(record)} of {record['fdes']} FDEs in .sframe "
            f"V{version} ({record[f'sframe_v{version}_bytes']} bytes); left out: {skipped}")


def _convert_many(args: argparse.Namespace) -> int:
    """Several ELF files (or trees): each rewritten in place, on every core."""
    from ..batch.record import Task

    if not args.in_place:
        usage_error("", "several inputs, -r, --files-from, --jsonl and --dask convert "
                        "--in-place only (each file is replaced by its converted copy)")
    if args.output or args.emit or args.format != "sframe" or "-" in args.inputs:
        usage_error("", "--in-place over many files takes no -o, --emit, --format or -")
    # Linked files get --sframe-version (V1 is for objects only), objects what their
    # linker merges (each worker asks it once).
    linked_version = args.sframe_version if args.sframe_version in (2, 3) else 2
    task = Task("convert", linked_version, args.replace, args.old_kernels,
                limits_of(args), args.preserve_dates, args.objects, args.flex,
                linker_reads=args.linker_reads, object_version=args.sframe_version)
    records, status = run_batch(args, args.inputs, task, converted_line)
    print_summary(records, args.json)
    return status


def _convert_archive(args: argparse.Namespace, source: Input,
                     read_stat: os.stat_result | None) -> int:
    """A static library: each object member given SFrame, the archive written back
    (in place, or to -o) with its names, order, dates, modes and symbol index."""
    from ..convert import convert_archive
    from ..files import rewrite

    display, data = source.path, source.data
    if args.emit not in (None, "obj") or (read_stat is None and not (
            args.output or "").endswith(".a")):
        raise Cfi2SframeError(display, "a static library (ar archive) converts to a static "
                                       "library: --in-place, or -o FILE.a")
    version, pcrel = _sframe_form(args, source, "obj")
    archive = convert_archive(display, data, version, args.replace,
                              limits_of(args), args.flex, pcrel)
    _report_skips(display, archive.skips, args)
    if read_stat is not None:
        rewrite(args.input, data, read_stat, archive.payload, args.preserve_dates)
    else:
        write(args.output, archive.payload, args.input if args.input != "-" else None)
    return 0


def _convert_compact(args: argparse.Namespace, source: Input, output: str,
                     emit: str) -> int:
    """``--format compact-unwind``: __LD,__compact_unwind rows as assembly or bytes."""
    from ..compact.inputs import compact_arch, compact_file
    from ..compact.writer import rows_asm, rows_binary

    display = source.path
    if emit not in ("asm", "raw") or args.in_place:
        raise Cfi2SframeError(display, "compact unwind is written as --emit asm (rows for the "
                                       "assembler) or --emit raw (32-byte rows)")
    arch, functions = compact_file(display, source.data, args.arch, args.assembler,
                                   kind=source.kind)
    flavour = compact_arch(arch.name, display)
    from ..reasons import CompactReason

    policy = warning_policy(args, (code.value for code in CompactReason))
    errors = 0
    for func in functions:
        severity = policy.severity(func.reason) if func.reason is not None else None
        if severity is not None:
            print(f"{display}: {severity}: '{func.name}' gets DWARF mode: {func.detail} "
                  f"[{func.reason}]", file=sys.stderr)
        errors += severity == "error"
    if errors:
        raise Cfi2SframeError(display, f"function(s) need DWARF mode and "
                                       f"{_which_errors(policy)} is set")
    payload = rows_asm(functions, flavour) if emit == "asm" else rows_binary(functions,
                                                                               flavour)
    write(output, payload)
    return 0
