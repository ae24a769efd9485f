"""The reading subcommands: ``dump``, ``lookup``, ``diff`` and ``verify``.

Argument parsing and printing only; the work is in ``sframe`` and ``inspect``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from typing import Any

from .arch.base import Arch, ByteOrder
from .cli import arch_name
from .errors import Cfi2SframeError
from .files import read_bytes
from .sframe.decode import DecodedFde, DecodedSection
from .sframe.load import LoadedSFrame, load_sframe
from .sframe.rules import FrameRules, Loc, Recovery, describe, fre_rules, outermost


def _json_rules(rules: object) -> object:
    if rules is None or isinstance(rules, str):
        return rules
    assert isinstance(rules, FrameRules)

    def loc(value: Recovery | None) -> object:
        if value is None:
            return None
        if not isinstance(value, Loc):
            return str(value)  # "undefined", "DWARF expression", "DWARF val expression"
        return {"reg": value.reg, "offset": value.offset, "deref": value.deref}

    return {"cfa": loc(rules.cfa), "fp": loc(rules.fp), "ra": loc(rules.ra)}


def _words(rules: object, abi: int) -> str:
    if rules is None:
        return "no rule (not covered)"
    if isinstance(rules, FrameRules):
        return describe(rules, abi)
    return str(rules)


def section_json(section: DecodedSection) -> dict[str, Any]:
    """The whole section as JSON-ready data."""
    return {
        "version": section.version, "flags": section.flags, "abi": section.abi,
        "fixed_fp_offset": section.fixed_fp_offset, "fixed_ra_offset": section.fixed_ra_offset,
        "num_fdes": len(section.fdes), "num_fres": section.num_fres,
        "fdes": [
            {"index": fde.index, "pc": fde.start_address, "size": fde.size,
             "fre_type": fde.fre_type, "pc_mask": fde.pc_mask, "rep_size": fde.rep_size,
             "pauth_b_key": fde.pauth_b_key, "signal": fde.signal, "flex": fde.flex,
             "fres": [{"start": fre.start, "words": list(fre.offsets),
                       "mangled_ra": fre.mangled_ra,
                       "rules": _json_rules(fre_rules(section, fde, fre))}
                      for fre in fde.fres]}
            for fde in section.fdes
        ],
    }


def cmd_dump(args: argparse.Namespace) -> int:
    from .sframe.dump import dump_text

    loaded = load_sframe(args.file, as_readelf=not args.json)
    if args.json:
        print(json.dumps(section_json(loaded.section), indent=1))
    else:
        sys.stdout.write(dump_text(loaded.section, loaded.section_name))
    return 0


def _parse_pc(text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise Cfi2SframeError("", f"'{text}' is not an address (use 0x... or decimal)") from None


def cmd_lookup(args: argparse.Namespace) -> int:
    loaded = load_sframe(args.file)
    section = loaded.section
    status = 0
    results = []
    for text in args.pcs:
        pc = _parse_pc(text)
        fde = section.find_fde(pc)
        fre = fde.fre_at(pc) if fde else None
        if fde is not None and outermost(section, fde):
            results.append({"pc": pc, "fde": fde.index, "function": fde.start_address,
                            "size": fde.size, "rules": "outermost"})
            if not args.json:
                print(f"{pc:#x}: func idx [{fde.index}] pc = {fde.start_address:#x}, size = "
                      f"{fde.size}; no FREs: outermost frame (RA undefined)")
            continue
        if fde is None or fre is None:
            status = 1
            why = "no SFrame FDE covers this PC" if fde is None else \
                "the FDE has no FRE at this PC"
            results.append({"pc": pc, "error": why})
            if not args.json:
                print(f"{pc:#x}: error: {why}", file=sys.stderr)
            continue
        rules = fre_rules(section, fde, fre)
        fre_pc = fde.start_address + fre.start if not fde.pc_mask else fre.start
        results.append({"pc": pc, "fde": fde.index, "function": fde.start_address,
                        "size": fde.size, "fre_start": fre_pc, "rules": _json_rules(rules)})
        if not args.json:
            mask = f" (PC mask, block {fde.rep_size})" if fde.pc_mask else ""
            print(f"{pc:#x}: func idx [{fde.index}] pc = {fde.start_address:#x}, size = "
                  f"{fde.size}{mask}; FRE at {fre_pc:#x}: {describe(rules, section.abi)}")
    if args.json:
        print(json.dumps(results, indent=1))
    return status


def _describe_fde(fde: DecodedFde) -> str:
    return f"function at {fde.start_address:#x} (size {fde.size})"


def cmd_diff(args: argparse.Namespace) -> int:
    from .analysis.compare import diff_sections

    a, b = load_sframe(args.a), load_sframe(args.b)
    if a.fde_sections and b.fde_sections:  # two relocatable objects: match by section too
        result = diff_sections(a.section, b.section,
                               lambda fde: (a.section_of(fde.field_offset), fde.start_address),
                               lambda fde: (b.section_of(fde.field_offset), fde.start_address))
    else:
        result = diff_sections(a.section, b.section)
    abi = a.section.abi
    if args.json:
        print(json.dumps({
            "equivalent": result.equivalent, "same": result.same,
            "differing": [{"pc": d.address, "size_a": d.size_a, "size_b": d.size_b,
                           "ranges": [{"start": d.address + s, "end": d.address + e,
                                       "a": _json_rules(ra), "b": _json_rules(rb)}
                                      for s, e, ra, rb in d.ranges]}
                          for d in result.differing],
            "only_a": [f.start_address for f in result.only_a],
            "only_b": [f.start_address for f in result.only_b]}, indent=1))
        return 0 if result.equivalent else 1
    for d in result.differing:
        sizes = f"size {d.size_a}" if d.size_a == d.size_b else f"size {d.size_a} vs {d.size_b}"
        print(f"function at {d.address:#x} ({sizes}) differs:")
        for start, end, ra, rb in d.ranges:
            print(f"  [{d.address + start:#x}, {d.address + end:#x}): "
                  f"{args.a}: {_words(ra, abi)} | {args.b}: {_words(rb, abi)}")
    for fde in result.only_a:
        print(f"only in {args.a}: {_describe_fde(fde)}")
    for fde in result.only_b:
        print(f"only in {args.b}: {_describe_fde(fde)}")
    print(f"{result.same} functions the same, {len(result.differing)} differ, "
          f"{len(result.only_a)} only in {args.a}, {len(result.only_b)} only in {args.b}")
    return 0 if result.equivalent else 1


def cmd_verify(args: argparse.Namespace) -> int:
    from .analysis.compare import verify
    from .arch import arch_for_machine
    from .dwarf.ehframe import read_elf_cfi

    loaded: LoadedSFrame = load_sframe(args.file)
    if not loaded.is_elf:
        raise Cfi2SframeError(args.file, "verify needs an ELF file with .sframe and .eh_frame")
    cfi = read_elf_cfi(args.file)
    arch = arch_for_machine(cfi.machine, args.file, cfi.big_endian)
    result = verify(loaded.section, cfi.timelines, arch,
                    lambda fde: loaded.section_of(fde.field_offset))
    abi = loaded.section.abi
    for timeline, ranges in result.mismatches:
        print(f"{args.file}: mismatch in '{timeline.name}':")
        for start, end, have, want in ranges:
            print(f"  [{timeline.start + start:#x}, {timeline.start + end:#x}): SFrame: "
                  f"{_words(have, abi)} | DWARF: {_words(want, abi)}")
    if not args.quiet:
        for timeline, why in result.missing:
            print(f"{args.file}: no SFrame FDE for '{timeline.name}' [{why}]")
        for fde in result.extra:
            print(f"{args.file}: SFrame {_describe_fde(fde)} has no DWARF FDE")
    print(f"{args.file}: {result.checked} functions checked at every PC, "
          f"{len(result.mismatches)} mismatches, {len(result.missing)} without SFrame, "
          f"{len(result.extra)} only in SFrame")
    return 0 if result.ok else 1


def file_stats(path: str, version: int = 2) -> dict[str, Any]:
    """FDE counts, section sizes and skip reasons for one ELF file."""
    import io

    from elftools.elf.elffile import ELFFile

    from .convert import convert_elf

    data = read_bytes(path)
    conversion = convert_elf(path, data, version)
    elf = ELFFile(io.BytesIO(data))
    sizes = {name: (elf.get_section_by_name(name) or {"sh_size": 0})["sh_size"]
             for name in (".eh_frame", ".eh_frame_hdr")}
    sframe = len(conversion.raw())
    return {"file": path, "fdes": conversion.fde_count, "emitted": len(conversion.functions),
            "eh_frame_bytes": sizes[".eh_frame"], "eh_frame_hdr_bytes": sizes[".eh_frame_hdr"],
            "sframe_bytes": sframe,
            "skipped": dict(Counter(skip.reason for skip in conversion.skips).most_common())}


def _stats_line(entry: dict[str, Any]) -> str:
    fdes, emitted = entry["fdes"], entry["emitted"]
    eh = entry["eh_frame_bytes"] + entry["eh_frame_hdr_bytes"]
    share = f"{100 * emitted / fdes:.1f}%" if fdes else "-"
    ratio = f"{100 * entry['sframe_bytes'] / eh:.0f}%" if eh else "-"
    skipped = ", ".join(f"{k}={v}" for k, v in entry["skipped"].items()) or "none"
    return (f"{entry['file']}: {fdes} FDEs, {emitted} emitted ({share}); .eh_frame+"
            f".eh_frame_hdr {eh} bytes, .sframe {entry['sframe_bytes']} bytes ({ratio}); "
            f"left out: {skipped}")


def cmd_stats(args: argparse.Namespace) -> int:

    entries, failed = [], 0
    total: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    for path in args.files:
        try:
            entry = file_stats(path, args.sframe_version)
        except Cfi2SframeError as exc:
            failed += 1
            print(str(exc), file=sys.stderr)
            continue
        entries.append(entry)
        for key in ("fdes", "emitted", "eh_frame_bytes", "eh_frame_hdr_bytes", "sframe_bytes"):
            total[key] += entry[key]
        reasons.update(entry["skipped"])
        if not args.json:
            print(_stats_line(entry))
    summary = {"file": f"total ({len(entries)} files)", **total,
               "skipped": dict(reasons.most_common())}
    if args.json:
        print(json.dumps({"files": entries, "total": summary, "failed": failed}, indent=1))
    else:
        print(_stats_line(summary))
    return 1 if failed else 0


def elf_arch(path: str, data: bytes) -> Arch:
    """The architecture an ELF header names (read once more: the header only)."""
    from .arch import arch_for_machine
    from .elf.read import open_elf
    from .errors import DecodeError

    try:
        view = open_elf(data, "ELF file")
    except DecodeError as exc:
        raise Cfi2SframeError(path, f"at byte {exc.offset:#x}: {exc.message}") from None
    return arch_for_machine(view.machine, path, not view.little_endian)


def cmd_compact(args: argparse.Namespace) -> int:
    from .compact.convert import compact_arch, compact_asm, compact_elf
    from .compact.encoding import NOT_FUNCTION_START, describe, is_dwarf
    from .compact.lower import CompactFunction

    data = read_bytes(args.file)
    if data[:4] == b"\x7fELF":
        functions = compact_elf(args.file, data, args.ranges)
        arch = elf_arch(args.file, data)  # for register names
    else:
        from .arch import get_arch

        functions = compact_asm(data.decode("utf-8", "surrogateescape"), args.file, args.arch,
                                args.assembler, args.ranges)
        arch = get_arch(args.arch)
    flavour = compact_arch(arch.name, args.file)
    names = {num: name for name, num in reversed(list(arch.registers.items()))}

    def meaning(func: CompactFunction, encoding: int) -> str:
        if is_dwarf(encoding, flavour):
            return f"DWARF: {func.reason} ({func.detail})" if func.reason else "DWARF"
        return describe(encoding & ~NOT_FUNCTION_START, flavour, None, names)

    if args.emit == "asm":
        from .compact.rows import rows_asm

        sys.stdout.write(rows_asm(functions, flavour))
        return 0
    if args.emit == "bin":
        from .compact.rows import rows_binary

        sys.stdout.buffer.write(rows_binary(functions, flavour))
        return 0
    if args.json:
        print(json.dumps([{
            "name": f.name, "section": f.section, "start": f.start, "length": f.size,
            "reason": f.reason, "detail": f.detail or None, "exact_bytes": f.exact_bytes,
            "personality": f.personality, "lsda": f.lsda,
            "rows": [{"start": f.start + r.start, "length": r.length,
                      "encoding": f"{r.encoding:#010x}", "meaning": meaning(f, r.encoding)}
                     for r in f.rows]} for f in functions], indent=1))
        return 0
    compact = exact = total = 0
    for func in functions:
        total += func.size
        exact += func.exact_bytes
        compact += func.reason is None
        for i, row in enumerate(func.rows):
            label = func.name if i == 0 else ""
            print(f"{label:<24} {func.start + row.start:#8x} {row.length:#6x}  "
                  f"{row.encoding:#010x}  {meaning(func, row.encoding)}")
        if args.check and func.exact_bytes < func.size:
            print(f"{'':<24} check: exact at {func.exact_bytes} of {func.size} bytes "
                  "(other bytes: prologue/epilogue, use --ranges)")
    share = f"{100 * exact / total:.1f}%" if total else "-"
    print(f"{len(functions)} functions: {compact} compact, {len(functions) - compact} "
          f"DWARF; the rows unwind exactly as the CFI at {exact} of {total} bytes ({share})")
    return 0


def load_snapshot(path: str) -> tuple[dict[str, int], dict[int, bytes]]:
    """A snapshot: ``{"regs": {"rip": "0x...", ...}, "memory": [{"address": "0x...",
    "hex": "..."}]}`` (numbers as ints or strings in any base)."""
    raw = read_bytes(path)
    try:
        doc = json.loads(raw)
        regs = {name.lower(): int(str(value), 0) for name, value in doc["regs"].items()}
        memory = {int(str(block["address"]), 0): bytes.fromhex(block["hex"])
                  for block in doc.get("memory", [])}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise Cfi2SframeError(path, f"not a register/memory snapshot: {exc}") from None
    return regs, memory


def cmd_unwind(args: argparse.Namespace) -> int:
    from .analysis.unwind import PC, sframe_walk
    from .arch import by_sframe_abi

    names, memory = load_snapshot(args.snapshot)
    loaded = load_sframe(args.file)
    section = loaded.section
    arch = by_sframe_abi(section.abi)
    regs = {}
    for name, value in names.items():
        name = name.lstrip("%")
        if name in ("pc", "ip", "rip", "eip", "pswa"):
            regs[PC] = value
            continue
        number = arch.registers.get(name)
        if number is None:
            raise Cfi2SframeError(args.snapshot, f"unknown {arch.name} register '{name}'")
        regs[number] = value
    missing = [arch.reg_name(r) for r in (arch.sp, arch.fp) if r not in regs]
    missing += [] if PC in regs else ["the PC"]
    if missing:
        raise Cfi2SframeError(args.snapshot, f"the snapshot lacks {', '.join(missing)}")
    size = arch.address_size
    order: ByteOrder = "big" if arch.big_endian else "little"

    def read(address: int) -> int:
        for base, block in memory.items():
            if base <= address and address + size <= base + len(block):
                return int.from_bytes(block[address - base:address - base + size], order)
        raise KeyError(f"{address:#x}")

    if args.compact:
        from .analysis.unwind import compact_walk
        from .compact.convert import compact_arch, compact_elf

        data = read_bytes(args.file)
        functions = compact_elf(args.file, data, ranges=True)
        from .elf.read import open_elf

        segments = open_elf(data, "ELF file").segments()

        def code_of(address: int, size: int) -> bytes:
            for seg in segments:
                if seg.kind == 1 and seg.vaddr <= address < seg.vaddr + seg.filesz:
                    at = seg.offset + address - seg.vaddr
                    return data[at:at + size]
            return b""

        frames, why = compact_walk(functions, code_of, compact_arch(arch.name, args.file),
                                   regs, read, arch.sp, arch.fp, arch.ra, args.max_frames)
    else:
        frames, why = sframe_walk(section, regs, read, args.max_frames)
    if args.json:
        print(json.dumps({"frames": [{"pc": f[PC], "sp": f[arch.sp], "fp": f[arch.fp]}
                                     for f in frames], "stopped": why}, indent=1))
        return 0
    for depth, frame in enumerate(frames):
        print(f"#{depth:<3} pc {frame[PC]:#018x}  sp {frame[arch.sp]:#018x}  "
              f"fp {frame[arch.fp]:#018x}")
    print(f"stopped: {why}")
    return 0


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the reading subcommands."""
    p = sub.add_parser("dump", help="print an SFrame section as readelf --sframe does",
                       description="Print the SFrame section of FILE (raw section or ELF) "
                       "exactly as readelf --sframe of binutils 2.46 prints V2/V3 sections "
                       "(binutils 2.40 for V1).")
    p.add_argument("file")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(run=cmd_dump)
    p = sub.add_parser("lookup", help="the recovery rules at given PCs",
                       description="For each PC, the FDE and FRE that cover it and the "
                       "CFA/RA/FP recovery rules in words. Exit 1 if a PC is not covered.")
    p.add_argument("file")
    p.add_argument("pcs", nargs="+", metavar="PC", help="address (0x... or decimal)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_lookup)
    p = sub.add_parser("diff", help="compare two SFrame sections by meaning",
                       description="Compare two SFrame sections (any versions, raw or ELF) "
                       "function by function (matched by address): the PC ranges where the "
                       "CFA/FP/RA rules differ, and functions only one side has. Exit 0 when "
                       "equivalent, 1 otherwise.")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_diff)
    p = sub.add_parser("verify", help="check SFrame against the DWARF CFI of the same file",
                       description="For an ELF file with .sframe and .eh_frame (or "
                       ".debug_frame): check at every PC of every function that SFrame "
                       "recovers CFA, FP and RA exactly as the DWARF CFI does; list functions "
                       "SFrame lacks with the reason our encoder gives. Exit 1 on a mismatch.")
    p.add_argument("file")
    p.add_argument("-q", "--quiet", action="store_true", help="print mismatches and totals only")
    p.set_defaults(run=cmd_verify)
    p = sub.add_parser("stats", help="SFrame coverage and size for ELF files",
                       description="Per file and in total: FDEs in .eh_frame, FDEs SFrame "
                       "gets, bytes of .eh_frame + .eh_frame_hdr against .sframe, and the "
                       "reasons functions are left out. Exit 1 if a file cannot be read.")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--sframe-version", type=int, default=2, choices=[2, 3],
                   help="count coverage for this SFrame version (default: 2)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_stats)
    p = sub.add_parser("compact", help="Apple compact unwind encodings from the same CFI",
                       description="Per function: the 32-bit compact unwind encoding (x86-64 "
                       "or arm64), its meaning in words, start and length; DWARF mode with a "
                       "reason where compact unwind cannot describe the body state exactly. "
                       "Every encoding is checked against the CFI; the summary gives the "
                       "bytes at which the rows unwind exactly as the CFI says.")
    p.add_argument("file", help="assembly (.s) or ELF object/binary")
    p.add_argument("--arch", default="x86_64", type=arch_name,
                   help="architecture of assembly input (x86_64, i386, aarch64; default "
                        "x86_64; ELF input says its own)")
    p.add_argument("--assembler", metavar="CMD", help="assembler command (see cfi2sframe -h)")
    p.add_argument("--ranges", action="store_true",
                   help="one row per CFI state compact unwind can express (later rows "
                   "marked UNWIND_IS_NOT_FUNCTION_START), exact in prologues and epilogues")
    p.add_argument("--check", action="store_true",
                   help="also list functions whose rows are not exact at every byte")
    p.add_argument("--emit", choices=["text", "asm", "bin"], default="text",
                   help="text (default), __LD,__compact_unwind rows as assembly, or as "
                   "binary rows (32 bytes; 20 on i386) on standard output")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_compact)
    p = sub.add_parser("unwind", help="walk a stack snapshot with SFrame",
                       description="Walk the frames of a register and stack-memory snapshot "
                       "(JSON: {\"regs\": {\"rip\": ..., \"rsp\": ..., \"rbp\": ...}, "
                       "\"memory\": [{\"address\": ..., \"hex\": ...}]}) with the SFrame "
                       "section of FILE, as the SFrame spec's appendix does: PC, SP and FP "
                       "of each frame, and why the walk stopped.")
    p.add_argument("file", help="ELF file with .sframe (addresses as in the snapshot)")
    p.add_argument("--snapshot", required=True, metavar="JSON")
    p.add_argument("--max-frames", type=int, default=64)
    p.add_argument("--compact", action="store_true",
                   help="walk with compact unwind rows made from FILE's CFI (--ranges "
                   "rows, libunwind's step) instead of SFrame")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_unwind)


SUBCOMMANDS = ("dump", "lookup", "diff", "verify", "stats", "compact", "unwind")


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="cfi2sframe")
    sub = parser.add_subparsers(dest="command", required=True)
    add_parsers(sub)
    args = parser.parse_args(argv)
    status: int = args.run(args)
    return status
