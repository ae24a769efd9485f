"""Command line: argument parsing and diagnostics only; the work is in ``convert``."""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from . import __version__
from .arch import ARCHES, get_arch
from .errors import EX_SOFTWARE, Cfi2SframeError, DecodeError
from .files import read_bytes, write_output
from .frontend.probe import Assembler, AssemblerFailed, start_probe

if TYPE_CHECKING:
    from .sframe.lower import Skip

EMIT_KINDS = ("raw", "asm", "obj", "elf")
SUBCOMMANDS = ("dump", "lookup", "diff", "verify", "stats", "compact", "unwind")

DESCRIPTION = """\
usage: cfi2sframe [options] INPUT [-o OUTPUT]
       cfi2sframe dump|lookup|diff|verify|stats ...   (see cfi2sframe COMMAND --help)

Lower the call-frame information (.cfi_* directives) of an assembly file into
an SFrame stack-trace section (SFrame version 2, errata 1).

Every .cfi_startproc ... .cfi_endproc region becomes one SFrame FDE.  Code
addresses come from a real assembler run (GNU as by default), never from
estimated instruction sizes.  A function SFrame cannot describe exactly is
left out with a warning that names the reason (see --list-reasons); the
others are still emitted."""

EPILOG = """\
output forms (--emit; default from the output name: .o -> obj,
.s/.S/.asm -> asm, anything else -> raw):
  raw  the section bytes.  Convention for relocatable input: every input
       section is placed at address 0, so a decoded FDE start equals the
       function's offset in its own section (as readelf prints .o files).
  asm  an assembly fragment holding the .sframe section (SHT_GNU_SFRAME),
       function starts as PC-relative expressions on the input's symbols;
       assemble it together with the input:  as foo.s foo.sframe.s -o foo.o
  obj  the complete object: the input assembled by the real assembler plus
       .sframe and one PC-relative relocation per FDE.

exit status: 0 success, 1 bad input or failed conversion, 2 usage error.

examples:
  cfi2sframe foo.s -o foo.sframe
  cfi2sframe foo.s -o foo.o
  gcc -S -o - foo.c | cfi2sframe - --emit asm -o - > foo.sframe.s
  cfi2sframe --assembler 'clang -c -x assembler' foo.s -o foo.o"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cfi2sframe", description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input", nargs="?",
                        help="assembly file (.s), ELF file (object, shared library, program; "
                             "its .eh_frame or .debug_frame is read), or - for standard input")
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="output file, - for standard output (default: the input name "
                             "with .sframe, .sframe.s or .o; standard output for - input)")
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
    parser.add_argument("--sframe-version", type=int, default=2, choices=[2, 3],
                        help="SFrame format version to write (default: 2; 3 adds FLEX FDEs, "
                             "RA-undefined rows and signal frames; binutils 2.46's ld reads "
                             "only 3)")
    parser.add_argument("--sframe-address", type=_address, metavar="ADDR",
                        help="for a linked ELF input with --emit raw: the address the "
                             "section will have (default: after the last PT_LOAD segment, "
                             "page aligned)")
    parser.add_argument("--in-place", action="store_true",
                        help="ELF input: replace the input file (--emit obj or elf), only "
                             "after the new file is complete and verified")
    parser.add_argument("-w", "--no-warnings", action="store_true",
                        help="do not print warnings for functions left out")
    parser.add_argument("--fatal-warnings", action="store_true",
                        help="treat warnings as errors (exit 1, no output)")
    parser.add_argument("--list-reasons", action="store_true",
                        help="print the reason codes for left-out functions and exit")
    parser.add_argument("--version", action="version", version=f"cfi2sframe {__version__}")
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


def _read_input(path: str) -> bytes:
    return read_bytes(path)


def _print_reasons() -> None:
    from .sframe.lower import REASONS

    width = max(len(code) for code in REASONS)
    for code, (meaning, gas) in REASONS.items():
        print(f"{code:<{width}}  {meaning}  (GNU as: {gas})")


def _convert(args: argparse.Namespace) -> int:
    if args.input is None:
        raise Cfi2SframeError("", "no input file (try --help)")
    if args.in_place:
        if args.output or args.input in (None, "-"):
            raise Cfi2SframeError("", "--in-place takes an input file and no -o")
        args.output = args.input
    output = args.output or _default_output(args.input, args.emit, args.format)
    emit = _emit_kind(args.emit, output)
    data = _read_input(args.input)
    display = "<stdin>" if args.input == "-" else args.input
    if args.format == "compact-unwind":
        return _convert_compact(args, display, data, output, emit)
    if data[:4] == b"\x7fELF":
        return _convert_elf(args, display, data, output, emit)
    text = data.decode("utf-8", "surrogateescape")
    include_dir = "." if args.input == "-" else os.path.dirname(os.path.abspath(args.input))
    arch = get_arch(args.arch)
    runner = Assembler.from_string(args.assembler or arch.default_assembler)
    # Start the assembler first: it runs while the heavier modules load.
    run = start_probe(text, display, arch.comment_chars, runner, include_dir)
    from .convert import convert_probe

    conversion = convert_probe(run, arch, runner, args.sframe_version)
    if conversion.assembler_messages:
        sys.stderr.write(conversion.assembler_messages)
    _report_skips(conversion.skips, args)
    if args.fatal_warnings and conversion.skips:
        raise Cfi2SframeError(display, f"{len(conversion.skips)} function(s) left out and "
                                       "--fatal-warnings is set")
    payload: bytes | str = conversion.asm() if emit == "asm" else \
        conversion.obj() if emit == "obj" else conversion.raw()
    try:
        write_output(output, payload)
    except OSError as exc:
        raise Cfi2SframeError(output, f"cannot write output: {exc.strerror or exc}") from None
    return 0


def _convert_compact(args: argparse.Namespace, display: str, data: bytes, output: str,
                     emit: str) -> int:
    """``--format compact-unwind``: __LD,__compact_unwind rows as assembly or bytes."""
    from .compact.convert import compact_arch, compact_asm, compact_elf
    from .compact.rows import rows_asm, rows_binary

    if emit not in ("asm", "raw") or args.in_place:
        raise Cfi2SframeError(display, "compact unwind is written as --emit asm (rows for the "
                                       "assembler) or --emit raw (32-byte rows)")
    if data[:4] == b"\x7fELF":
        from .commands import elf_arch

        flavour = compact_arch(elf_arch(display, data).name, display)
        functions = compact_elf(display, data)
    else:
        flavour = compact_arch(args.arch, display)
        functions = compact_asm(data.decode("utf-8", "surrogateescape"), display, args.arch,
                                args.assembler)
    if not args.no_warnings or args.fatal_warnings:
        kind = "error" if args.fatal_warnings else "warning"
        for func in functions:
            if func.reason is not None:
                print(f"{display}: {kind}: '{func.name}' gets DWARF mode: {func.detail} "
                      f"[{func.reason}]", file=sys.stderr)
    if args.fatal_warnings and any(f.reason for f in functions):
        raise Cfi2SframeError(display, "function(s) need DWARF mode and --fatal-warnings is set")
    payload = rows_asm(functions, flavour) if emit == "asm" else rows_binary(functions,
                                                                               flavour)
    try:
        write_output(output, payload)
    except OSError as exc:
        raise Cfi2SframeError(output, f"cannot write output: {exc.strerror or exc}") from None
    return 0


def _convert_elf(args: argparse.Namespace, display: str, data: bytes, output: str,
                 emit: str) -> int:
    from .convert import convert_elf

    if emit == "asm":
        raise Cfi2SframeError(display, "--emit asm needs assembly input; use --emit raw, obj "
                                       "(objects) or elf (executables, libraries)")
    conversion = convert_elf(display, data, args.sframe_version, args.sframe_address)
    _report_skips(conversion.skips, args)
    if args.fatal_warnings and conversion.skips:
        raise Cfi2SframeError(display, f"{len(conversion.skips)} function(s) left out and "
                                       "--fatal-warnings is set")
    if args.in_place and emit == "raw":
        emit = "elf" if conversion.linked else "obj"
    payload = {"raw": conversion.raw, "obj": conversion.obj, "elf": conversion.elf}[emit]()
    if args.in_place:
        _check_elf_output(display, payload)
    try:
        write_output(output, payload)
    except OSError as exc:
        raise Cfi2SframeError(output, f"cannot write output: {exc.strerror or exc}") from None
    return 0


def _check_elf_output(display: str, payload: bytes) -> None:
    """Verify a rewritten ELF file against its own CFI before it replaces the input."""
    from .analysis.compare import verify
    from .arch import arch_for_machine
    from .dwarf.ehframe import read_elf_cfi
    from .sframe.load import load_sframe

    loaded = load_sframe(display, payload)
    cfi = read_elf_cfi(display, payload)
    arch = arch_for_machine(cfi.machine, display, cfi.big_endian)
    result = verify(loaded.section, cfi.timelines, arch,
                    lambda fde: loaded.section_of(fde.field_offset))
    if not result.ok or result.extra:
        raise Cfi2SframeError(display, "the rewritten file does not verify; input left "
                                       "untouched")


def arch_name(text: str) -> str:
    """argparse type of ``--arch``: a known architecture or alias, as its canonical name."""
    try:
        return get_arch(text).name
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _address(text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an address") from None


def _report_skips(skips: Sequence[Skip], args: argparse.Namespace) -> None:
    if args.no_warnings and not args.fatal_warnings:
        return
    kind = "error" if args.fatal_warnings else "warning"
    for skip in skips:
        print(f"{skip.location}: {kind}: {skip.message()}", file=sys.stderr)


def entry() -> None:
    """The ``cfi2sframe`` command: ``main``, then exit without tearing down the heap.

    A large library leaves millions of small objects; freeing them one by one
    at interpreter exit takes most of a second and serves nobody.  Output
    files are already complete (``write_output`` closes them), and the
    standard streams are flushed here.
    """
    status = main()
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        status = status or 1
    sys.stderr.flush()
    os._exit(status)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``cfi2sframe`` command; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # A short-lived process that builds millions of small immutable records
    # (large libraries) and no reference cycles: the cyclic GC only costs time.
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        if argv and argv[0] in SUBCOMMANDS:
            from .commands import main as run_subcommand

            return run_subcommand(argv)
        args = _parser().parse_args(argv)
        if args.list_reasons:
            _print_reasons()
            return 0
        return _convert(args)
    except AssemblerFailed as exc:
        sys.stderr.write(exc.messages)
        print(f"{exc}", file=sys.stderr)
        return 1
    except Cfi2SframeError as exc:
        print(f"cfi2sframe: {exc}" if not exc.where else str(exc), file=sys.stderr)
        return 1
    except DecodeError as exc:
        print(f"cfi2sframe: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:  # a bug: still one line for the user, details on request
        if os.environ.get("CFI2SFRAME_DEBUG"):
            raise
        print(f"cfi2sframe: internal error: {type(exc).__name__}: {exc} (please report it; "
              "set CFI2SFRAME_DEBUG=1 for a traceback)", file=sys.stderr)
        return EX_SOFTWARE
    finally:
        if gc_was_on:
            gc.enable()
