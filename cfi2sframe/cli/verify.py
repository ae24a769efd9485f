"""``cfi2sframe verify``: check a file's SFrame against its own DWARF CFI at every PC."""

from __future__ import annotations

import argparse
import sys

from ..elf.read import open_elf_file
from ..inputs import file_head, open_input
from ..kinds import is_archive, xray_byte_order
from ..typed import TYPE_CHECKING
from . import macho
from .batch import add_batch_options, many_files, print_summary, run_batch, usage_error
from .common import Subparsers, add_limit_options, limits_of, no_sframe
from .macho import add_binary_option, add_demangle_option, add_slice_option
from .show import describe_fde, words
from .subcommands import SUBCOMMANDS

if TYPE_CHECKING:
    from typing import Any


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser("verify", help=SUBCOMMANDS["verify"][1],
                       description="For an ELF file with .sframe and .eh_frame (or "
                       ".debug_frame): check at every PC of every function that SFrame "
                       "recovers CFA, FP and RA exactly as the DWARF CFI does; list functions "
                       "SFrame lacks with the reason our encoder gives (one it could have "
                       "described is a gap). For a file without .sframe: the section "
                       "cfi2sframe --in-place would add, made in memory. For a linked file, "
                       "also check that every allocated section lies in a PT_LOAD at matching "
                       "offset and address, PT_LOADs are page-aligned, ascending and apart, "
                       "PT_PHDR and PT_GNU_SFRAME are mapped, and no sections overlap. For a "
                       "Mach-O image: its __unwind_info as libunwind reads it, against its "
                       "__eh_frame and code (for an object: its __compact_unwind rows). "
                       "Exit 1 on a mismatch, a gap or a layout problem.")
    p.add_argument("files", nargs="*", metavar="FILE",
                   help="an ELF file; several, or folders with -r, give one line per file "
                        "and a summary (the details: verify that file alone)")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="print mismatches and totals only (many files: the summary only)")
    p.add_argument("--json", action="store_true",
                   help="print every file's record and the totals as one JSON object (one "
                        "file too: its record)")
    p.add_argument("--consumer", choices=["glibc", "kernel"],
                   help="instead: check what a reader requires of the file (glibc 2.42's "
                        "backtrace(): V2, sorted, PT_GNU_SFRAME; the kernel's deferred "
                        "unwinder: V3, PC-relative starts, no auxiliary header, sorted, "
                        "non-zero counts, PT_GNU_SFRAME); each failed one is cited")
    p.add_argument("--no-flex", dest="flex", action="store_false",
                   help="judge coverage for readers without FLEX FDEs (a V3 section written "
                        "with --no-flex): a function that needs one is no gap")
    add_slice_option(p)
    add_binary_option(p)
    add_demangle_option(p)
    add_limit_options(p)
    add_batch_options(p, quiet=False)


def verify_line(record: dict[str, Any]) -> str:
    """One file of a run over many: its outcome in a line."""
    check = record["verify"]
    if record.get("macho") is not None and check is not None:
        return (f"{record['path']}: {'ok' if check['ok'] else 'FAILED'}: Mach-O, "
                f"{record['macho']['functions']} functions, {check['checked']} checked "
                f"against their DWARF CFI, {check['mismatches']} problems")
    if record["status"] == "no-cfi":
        return f"{record['path']}: no CFI to check against"
    if check is None:
        why = "no .sframe, and no function SFrame can describe" \
            if record["status"] == "no-sframe" else "no DWARF CFI to check its .sframe against"
        return f"{record['path']}: not checked: {why}"
    made = " (no .sframe: the section --in-place would add, made in memory)" \
        if check.get("made") else ""
    first = check.get("first_uncovered")
    gap = "" if not first else " (" + uncovered_words(
        check["uncovered"], first["name"], first["section"], first["address"]) + ")"
    return (f"{record['path']}: {'ok' if check['ok'] else 'FAILED'}{made}: {check['checked']} "
            f"functions checked at every PC, {check['mismatches']} mismatches, "
            f"{check['missing']} without SFrame{gap}, {check['extra']} only in SFrame, "
            f"{check['layout']} layout problems")


def uncovered_words(count: int, name: str, section: str, address: int) -> str:
    """The functions a section lacks though SFrame could describe them, in words."""
    where = f"{section}+{address:#x}" if section else f"{address:#x}"
    return (f"{count} function{'s have' if count != 1 else ' has'} no SFrame FDE though "
            f"SFrame can describe {'them' if count != 1 else 'it'}; the first: '{name}' at "
            f"{where}")


def _is_archive(path: str) -> bool:
    """A static library: checked member by member, as a run over many files does."""
    return is_archive(file_head(path, 8))  # (unreadable: the run below says why)


def _is_trace(path: str) -> bool:
    """An XRay trace (told by its header, as every command tells one)."""
    return xray_byte_order(file_head(path, 64)) is not None  # (unreadable: as above)


def run(args: argparse.Namespace) -> int:
    if not args.files and not args.files_from:
        usage_error("verify", "no input files (FILE..., -r FOLDER or --files-from)")
    if args.consumer and args.json:
        usage_error("verify", "--consumer prints its requirements as text; no --json")
    if args.json and len(args.files) == 1 and _is_trace(args.files[0]):
        usage_error("verify", "an XRay trace's problems are printed as text; no --json "
                              "(dump --json prints its records)")
    # --json: one file's record and totals as many files' are, one JSON object.
    if many_files(args, args.files) or not args.files or args.json or \
            _is_archive(args.files[0]):
        if args.consumer:
            usage_error("verify", "--consumer checks one file at a time")
        from ..batch.record import Task  # (not for a single file, nor an XRay trace)

        task = Task("verify", limits=limits_of(args), flex=args.flex)
        records, status = run_batch(args, args.files, task, verify_line)
        print_summary(records, args.json)
        return status
    args.file = args.files[0]
    if args.consumer:
        return _consumer(args.file, args.consumer)
    source = open_input(args.file)
    data = source.data
    if source.is_xray:
        from . import xray

        return xray.verify(args.file, data, args.binary, args.demangle, args.quiet)
    if source.is_compact_unwind:
        return macho.verify(args.file, data, args.arch, args.quiet, args.binary)
    view = open_elf_file(args.file, data) if source.is_elf else None
    if view is not None and not view.holds_sframe:
        # As dump and lookup read such a file (and a run over many files checks it):
        # the section cfi2sframe would add, made in memory (its contents, not its place).
        # An empty .sframe holds no FDE, so it is read the same way.
        from ..convert import verify_as_converted

        made = verify_as_converted(args.file, data, limits_of(args))
        if made is None:
            print(f"{args.file}: not checked: {no_sframe(view)}, and no function SFrame "
                  "can describe")
            return 0
        print(f"{args.file}: note: {no_sframe(view)}; checked the one cfi2sframe "
              "--in-place would add, made in memory (its place in the file is checked "
              "when it is written)", file=sys.stderr)
        result, abi = made
    else:
        from ..analysis.compare import verify_elf  # (ELF and SFrame input only)

        result, abi = verify_elf(args.file, data, limits=limits_of(args), flex=args.flex)
    for problem in result.layout:
        print(f"{args.file}: bad layout: {problem.text} (header at {problem.at:#x})")
    for timeline, ranges in result.mismatches:
        print(f"{args.file}: mismatch in '{timeline.name}':")
        for start, end, have, want in ranges:
            print(f"  [{timeline.start + start:#x}, {timeline.start + end:#x}): SFrame: "
                  f"{words(have, abi)} | DWARF: {words(want, abi)}")
    for timeline, why, steps in result.unevaluated:
        print(f"{args.file}: '{timeline.name}' not checked: {why}; SFrame says:")
        for index, (start, rules) in enumerate(steps):
            end = min(steps[index + 1][0] if index + 1 < len(steps) else timeline.size,
                      timeline.size)
            if start < end:
                print(f"  [{timeline.start + start:#x}, {timeline.start + end:#x}): "
                      f"{words(rules, abi)}")
    if not args.quiet:
        for timeline, why in result.missing:
            print(f"{args.file}: no SFrame FDE for '{timeline.name}' [{why}]")
        for fde in result.extra:
            print(f"{args.file}: SFrame {describe_fde(fde)} has no DWARF FDE")
    uncovered = result.uncovered
    if uncovered:
        first = uncovered[0]
        print(f"{args.file}: not covered: "
              + uncovered_words(len(uncovered), first.name, first.section, first.start))
    print(f"{args.file}: {result.checked} functions checked at every PC, "
          f"{len(result.mismatches)} mismatches, {len(result.missing)} without SFrame, "
          f"{len(result.extra)} only in SFrame"
          + (f", {len(result.unevaluated)} with a DWARF CFA expression not evaluated"
             if result.unevaluated else "")
          + (f", {len(result.layout)} layout problems" if result.layout else ""))
    return 0 if result.ok else 1


def _consumer(path: str, consumer: str) -> int:
    from ..analysis.consumers import CONSUMERS, check_consumer, facts_of

    reader = CONSUMERS[consumer][0]
    results = check_consumer(consumer, facts_of(path, open_input(path).data))
    failed = [(req, found) for req, found in results if found is not None]
    for req, found in results:
        mark = "ok  " if found is None else "FAIL"
        print(f"{path}: {mark} {req.text}" + (f": {found} [{req.source}]" if found else ""))
    print(f"{path}: {reader}: {len(results) - len(failed)} of {len(results)} requirements met")
    return 1 if failed else 0
