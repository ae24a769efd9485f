"""Coverage-guided fuzzing (atheris, libFuzzer) of every reader of untrusted bytes.

    python tests/support/fuzz.py TARGET [libFuzzer options, e.g. -runs=100000 -max_total_time=600]

Targets:
  sframe   SFrame decoder (V1-V3, both byte orders), the dump of what it decodes (the
           compiled dump held equal to it) and the FDE index look-ups use
  elf      the ELF/DWARF CFI reader and SFrame conversion (convert_elf, raw output;
           V2, V3 or V1 by the input's length)
  compact  compact unwind decoder, x86-64/i386/arm64, and the exact encoders
  asm      the statement scanner and the Lark directive parser (no assembler run), and
           the probe labels' insertion (compiled and Python, held equal)
  cfi      an assembler's object with probe labels, or a library: its probes found in
           the symbol table, each FDE's fast path (compiled and Python, held equal
           where the compiled loop answers) and its rows (the full replay's, else the
           interpreter's: the same rows or error)
  rewrite  the ELF rewriting path of --in-place: conversion to the obj or elf form,
           the self-check, and the write through one name or two (hard links);
           afterwards the file holds the old bytes or exactly the new ones; a linked
           file's one compiled pass to its functions equal to its FDEs read and lowered;
           verify's compiled walk, counting for stats too, counts as stats_scan does
  compressed  SHF_COMPRESSED CFI sections (zlib): the claimed size against the
           limits, the bounded inflater, and the reader after it (seeded with a
           decompression bomb)
  macho    the Mach-O reader (thin and universal), an object's __compact_unwind rows,
           __eh_frame, and what dump, verify and stats do with an image or object
  unwind_info  a raw __unwind_info: the strict reader, libunwind's look-up at every
           function, the compiled listing, and the writer building the table again
           from what was read

Seeds are real inputs: our own SFrame sections, installed ELF objects and
libraries' first bytes, csmith assembly. The only allowed exceptions are the
library's own located ``Cfi2SframeError``/``DecodeError``; anything else (a bug
of ours is never reported as bad input), an error without a location, or one input
slower than SLOW_SECONDS, is a finding (libFuzzer writes the input to crash-*).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from types import ModuleType

import atheris

with atheris.instrument_imports():
    import xray_compare  # tests/support/xray_compare.py (this script's folder)

    from cfi2sframe.analysis.compare import verify_counted, verify_elf
    from cfi2sframe.analysis.stats import count_request, scan_coverage
    from cfi2sframe.arch import arch_for_machine
    from cfi2sframe.cli.compact import _Rows
    from cfi2sframe.compact import table_writer
    from cfi2sframe.compact.check import check_macho, macho_coverage
    from cfi2sframe.compact.encoding import decode, encode
    from cfi2sframe.compact.inputs import compact_cfi
    from cfi2sframe.compact.listing import object_rows_lines, unwind_info_lines, unwind_info_text
    from cfi2sframe.compact.lower import placed_spans, state_ids
    from cfi2sframe.compact.rules import Code, CompactRules
    from cfi2sframe.compact.table import Lookup, columns_of, read_columns, read_unwind_info
    from cfi2sframe.compact.table_writer import BuiltTable, TableFunction, build_unwind_info
    from cfi2sframe.convert import convert_elf, default_sframe_address, rewrite_in_place
    from cfi2sframe.core import compiled
    from cfi2sframe.dwarf.cfi import Fde
    from cfi2sframe.dwarf.cfi import _rows as rows_of
    from cfi2sframe.elf.cfi import cfi_of, cfi_section, read_elf_cfi
    from cfi2sframe.elf.compressed import DEFAULT_LIMITS, Limits, section_contents
    from cfi2sframe.elf.read import ElfView, open_elf
    from cfi2sframe.elf.symbols import function_names
    from cfi2sframe.errors import Cfi2SframeError, DecodeError, decoding
    from cfi2sframe.files import _read_all, bytes_of, read_for_rewrite
    from cfi2sframe.frontend.directives import parse_statement
    from cfi2sframe.frontend.probe import PROBE, read_probes, with_probes
    from cfi2sframe.frontend.scan import scan
    from cfi2sframe.frontend.syntax import SyntaxProblem
    from cfi2sframe.macho.read import MH_OBJECT, open_macho
    from cfi2sframe.macho.unwind import compact_unwind_rows
    from cfi2sframe.sections import table_view
    from cfi2sframe.sframe.build import eh_table, encode_sframe, lower_eh_frame, lower_fdes
    from cfi2sframe.sframe.decode import FdeTable
    from cfi2sframe.sframe.decode import decode as decode_sframe
    from cfi2sframe.sframe.dump import compiled_chunks, dump_text
    from cfi2sframe.sframe.fastpath import direct_fres
    from cfi2sframe.sframe.selfcheck import compiled_sound, section_problem
    from cfi2sframe.xray.check import check_trace
    from cfi2sframe.xray.records import read_header
    from cfi2sframe.xray.text import dump_lines

SLOW_SECONDS = float(os.environ.get("CFI2SFRAME_FUZZ_SLOW", "2"))
# Where to write the name of each compiled-core entry point the target calls (once
# each, as first called): tests/fuzz/test_fuzz_budget.py asserts every one is reached.
ENTRY_POINTS = os.environ.get("CFI2SFRAME_FUZZ_ENTRY_POINTS", "")


def _count_entry_points(path: str) -> None:
    """Wrap every function of the compiled core (the callers look each up on the module
    when they call it) so that its first call writes its name to ``path``."""
    import importlib

    core = importlib.import_module("cfi2sframe._core")
    seen: set[str] = set()

    def counted(name: str, function: Callable[..., object]) -> Callable[..., object]:
        def call(*args: object, **keywords: object) -> object:
            if name not in seen:
                seen.add(name)
                with open(path, "a") as out:
                    out.write(name + "\n")
            return function(*args, **keywords)
        return call

    for name in dir(core):
        function = getattr(core, name)
        if callable(function) and not name.startswith("_"):
            setattr(core, name, counted(name, function))
EXPECTED = (Cfi2SframeError, DecodeError, SyntaxProblem)


CORE = compiled()  # the compiled core, where built: its entry points are fuzzed too


def _sframe(data: bytes) -> None:
    if CORE is not None and compiled_sound(data, 0, CORE):  # (else the reference decides)
        assert section_problem(data, 0, None) is None, "the self-check's passes disagree"
    section = decode_sframe(data)
    text = dump_text(section, ".sframe")
    chunks = compiled_chunks(data, compiled=CORE)
    if chunks is not None:  # the compiled dump (None: the core or the FRE total says no)
        assert "".join(chunks) == text, "the compiled dump differs from the Python one"
    table = FdeTable(data, 0, False)  # what a look-up reads first: the FDE index
    index, python = table.index(CORE), table.index(None)
    assert (list(index.starts), list(index.ends), index.disjoint) == \
        (list(python.starts), list(python.ends), python.disjoint), "the FDE index differs"
    if section.fdes:
        index.find(section.fdes[len(section.fdes) // 2].start_address)


def _elf(data: bytes) -> None:
    convert_elf("fuzz.o", data, version=(2, 3, 1)[len(data) % 3]).raw()


def _names_or_error(view: ElfView, core: ModuleType | None) -> object:
    """``function_names`` of a whole file, in order, or its error's type and words."""
    try:
        return list(function_names(view, compiled=core).items())
    except EXPECTED as exc:
        return type(exc), str(exc)


def _cfi(data: bytes) -> None:
    view = open_elf(data, "fuzz.o")
    table = view.symbol_table()
    if CORE is not None and table is not None:
        # The probes, where the compiled loop answers (None: a probe name that is not
        # ours, which only our own assembler run writes), as the Python loop finds them.
        if CORE.probe_symbols(table[0], table[1], view.is64, not view.little_endian,
                              PROBE.encode(), 64) is not None:
            assert read_probes(view, 64, CORE) == read_probes(view, 64, None), \
                "the compiled probes differ"
    if CORE is not None:  # the names of a whole table, both cores (or the same error)
        assert _names_or_error(view, CORE) == _names_or_error(view, None), \
            "the compiled names differ"
    cfi = read_elf_cfi("fuzz.o", data)
    arch = arch_for_machine(cfi.machine, "fuzz.o", cfi.big_endian)
    for fde in cfi.fdes[:100]:
        cie = fde.cie
        args = (cie.initial, fde.body, cie.code_align, cie.data_align, arch, cfi.big_endian)
        ours = direct_fres(*args, compiled=CORE)
        # The compiled loop may give up where Python goes on (rows past 2**63, deep
        # remember_state), never give other FREs.
        if ours is not None:
            assert ours == direct_fres(*args, compiled=None), "the compiled FREs differ"
        # The full replay's rows (compact unwind's): the interpreter's rows or error.
        rows = _rows_or_error(fde, cfi.big_endian, CORE)
        assert rows == _rows_or_error(fde, cfi.big_endian, None), "the compiled rows differ"
        if CORE is not None and isinstance(rows[0], tuple):  # compact's key and spans
            assert CORE.row_state_ids(rows[0]) == state_ids(rows[0]), "the compiled key differs"
            alternate = tuple(range(0, len(rows[0]), 2))  # every other row exact
            assert CORE.placed_spans(rows[0], alternate, fde.size) in \
                (None, placed_spans(rows[0], alternate, fde.size)), "the compiled spans differ"
    if CORE is not None and cfi.machine == "EM_X86_64":  # compact's listing, both cores
        try:
            functions = compact_cfi(cfi, b"", "x86_64")
        except Cfi2SframeError:
            return
        for check in (False, True):
            text = CORE.compact_rows_text(functions, _Rows("x86_64", {}, check).tail, check)
            assert text in (None, _Rows("x86_64", {}, check).text(functions)), \
                "the compiled listing differs"


def _rows_or_error(fde: Fde, big: bool, core: ModuleType | None) -> object:
    """An FDE body's rows by the full replay where ``core`` answers, else interpreted."""
    try:
        return rows_of(fde.cie, fde.body, fde.start, big, compiled=core)
    except DecodeError as exc:
        return exc.offset, exc.message


SCRATCH = tempfile.mkdtemp(prefix="cfi2sframe-fuzz-")
REWRITTEN = os.path.join(SCRATCH, "fuzz.elf")


def _rewrite(data: bytes) -> None:
    for name in (REWRITTEN, REWRITTEN + ".link"):
        if os.path.exists(name):
            os.unlink(name)
    with open(REWRITTEN, "wb") as handle:
        handle.write(data)
    if len(data) % 2:  # every other input has a second name: the same-inode rewrite
        os.link(REWRITTEN, REWRITTEN + ".link")
    _early_copy_is_the_file(data)
    old, status = read_for_rewrite(REWRITTEN)
    _one_pass_is_the_readers(old)
    _walks_count_alike(old)
    counted = _stats_counts(old)
    new = None
    try:
        conversion = convert_elf(REWRITTEN, old)
        if counted is not None:  # stats' scan counts what the conversion makes
            assert counted == (conversion.fde_count, len(conversion.functions),
                               [str(skip.reason) for skip in conversion.skips],
                               len(conversion.raw())), "stats' scan differs"
        new = bytes_of(rewrite_in_place(REWRITTEN, conversion, old, status))
    finally:
        with open(REWRITTEN, "rb") as handle:
            now = handle.read()
        assert now == old or now == new, "the file is neither the old nor the new one"
        if new is None:
            assert now == old, "a failed rewrite changed the file"
    _walks_count_alike(new)


def _early_copy_is_the_file(data: bytes) -> None:
    """The compiled core's early copy of ``--emit elf``'s input (``copy_later``, on a
    thread of its own) gives the file's bytes, whole or from a step of a few bytes."""
    core = compiled()
    if core is None:
        return
    source = os.open(REWRITTEN, os.O_RDONLY)
    target = os.open(SCRATCH, os.O_RDWR | os.O_TMPFILE, 0o600)
    try:
        told = core.copy_later(source, target, len(data), 1 + len(data) % 7,
                                len(data) // 2)
        assert told is not None, "no copying thread"
        try:
            outcome = _read_all(told)
        finally:
            os.close(told)
        assert outcome == len(data).to_bytes(8, sys.byteorder) + bytes(8), outcome
        assert os.pread(target, len(data) + 1, 0) == data, "the early copy differs"
    finally:
        os.close(source)
        os.close(target)


def _one_pass_is_the_readers(data: bytes) -> None:
    """The one compiled pass from a linked file's ``.eh_frame`` to its functions
    (``lower_eh_frame``, ``_core.eh_functions``) gives what ``lower_fdes`` makes of the
    FDEs the reader reads (V2), or declines (None).  Every fourth input (by length):
    on each, the conversion below runs the pass; this check doubled the target's time."""
    if len(data) % 4:
        return
    try:
        found = cfi_section("fuzz.elf", data)
        arch = arch_for_machine(found.view.machine, "fuzz.elf", not found.view.little_endian)
    except EXPECTED:
        return
    if CORE is None or not found.linked_eh_frame or not arch.sframe_abi:
        return
    outcomes: list[object] = []
    for one_pass in (True, False):
        try:
            with decoding("fuzz.elf", found.name):
                if one_pass:
                    outcomes.append(lower_eh_frame(found.contents, found.address,
                                                   8 if found.view.is64 else 4, found.names,
                                                   cfi_of(found, ()), arch, compiled=CORE))
                else:
                    cfi = cfi_of(found)
                    outcomes.append((*lower_fdes(cfi, arch, compiled=CORE), len(cfi.fdes)))
        except EXPECTED as exc:
            outcomes.append(str(exc))
        if outcomes[0] is None:
            return
    assert outcomes[0] == outcomes[1], "the one pass differs from the reader's FDEs lowered"
    if len(data) % 8 == 4:  # every other input of these: both checks on one input took
        _table_is_the_encoders(found, arch, outcomes[0])  # 1.7-2.0 s of a 2 s bound


def _table_is_the_encoders(found: object, arch: object, lowered: object) -> None:
    """The one pass to the V2 table (``eh_table``: ``_core.eh_table_v2``, placed by
    ``_core.place_fdes``) gives the encoder's section of the pass's functions placed at
    the section's address, with their skips and FDE count, or the same error (the
    conversion above runs the table pass on every input of a linked file; this compares
    it with the reference on every eighth, by length)."""
    try:
        with decoding("fuzz.elf", found.name):
            table = eh_table(found.contents, found.address, 8 if found.view.is64 else 4,
                             partial(function_names, found.view), cfi_of(found, ()), arch,
                             compiled=CORE)
            made = None if table is None else (table[0].to_bytes(found.address), *table[1:])
    except EXPECTED as exc:
        made = str(exc)
    if isinstance(lowered, str):
        assert made == lowered, "the table pass's error differs from the one pass's"
        return
    functions, skips, count = lowered
    try:
        with decoding("fuzz.elf", found.name):
            expected: object = (encode_sframe(functions, arch).to_bytes(found.address), skips,
                                count)
    except EXPECTED as exc:
        expected = str(exc)
    assert made == expected, "the table pass differs from the encoder's section"


def _walks_count_alike(data: bytes | None) -> None:
    """A linked file with .sframe: verify's compiled walk asked for stats' count too
    (``verify_counted``: ``verify_scan`` with ``counts``) checks what it checks without
    it and counts what ``stats_scan``'s own walk counts."""
    if CORE is None or data is None:
        return
    try:
        view = open_elf(data, "fuzz.elf")
        request = count_request("fuzz.elf", view, CORE)
        if request is None or not view.holds_sframe:
            return
        result, counted = verify_counted("fuzz.elf", data, DEFAULT_LIMITS, request, view=view)
        plain = verify_elf("fuzz.elf", data, DEFAULT_LIMITS, view=view)[0]
        eh = view.section(".eh_frame")
        assert eh is not None
        own = CORE.stats_scan(section_contents(view, eh, DEFAULT_LIMITS), eh.addr, {}, {},
                              request[2])
    except EXPECTED:
        return
    assert result == plain, "verify's result differs where it counts for stats"
    assert counted is None or counted == own, "verify's walk counts otherwise than stats_scan"


def _stats_counts(data: bytes) -> tuple[object, ...] | None:
    """What ``stats`` counts of V2 from the compiled scan (``stats_scan``): None where it
    declines, or the input is bad (a located error, which the conversion gives too)."""
    if CORE is None:
        return None
    try:
        coverage = scan_coverage("fuzz.elf", data, open_elf(data, "fuzz.elf"), DEFAULT_LIMITS,
                                 lambda: default_sframe_address(data, "fuzz.elf"),
                                 compiled=CORE)
    except EXPECTED:
        return None
    if coverage is None:
        return None
    made = coverage[2]
    return made.fdes, made.emitted, [str(skip.reason) for skip in made.skips], made.size


def _compressed(data: bytes) -> None:
    convert_elf("fuzz.o", data, limits=Limits(max_bytes=1 << 22, max_ratio=64)).raw()


def _compact(data: bytes) -> None:
    if len(data) < 5:
        return
    arch = ("x86_64", "i386", "arm64")[data[0] % 3]
    encoding = int.from_bytes(data[1:5], "little")
    code = Code(data[5:])
    rules = decode(encoding, arch, code)
    if not isinstance(rules, CompactRules):  # libunwind has no rules for this word
        return
    again = encode(rules, arch, code)
    if isinstance(again, int):  # an encoding we write must mean the same rules
        assert decode(again, arch, code) == rules, (hex(encoding), hex(again))


def _macho(data: bytes) -> None:
    from cfi2sframe.compact.inputs import unwind_table

    with decoding("fuzz.o", "Mach-O file"):
        view = open_macho(data, "x86_64" if data[:4] in (b"\xca\xfe\xba\xbe",
                                                         b"\xca\xfe\xba\xbf") else None)
        if view.filetype == MH_OBJECT:
            rows = compact_unwind_rows(view)
            list(object_rows_lines(rows, view))
        else:
            table = unwind_table("fuzz.o", view)
            if table is not None:
                list(unwind_info_lines(table, view))
        macho_coverage("fuzz.o", view)
        try:
            check_macho("fuzz.o", view)
        except Cfi2SframeError as exc:  # nothing to verify: said in one located line
            _require_located("macho", exc)


def _unwind_info(data: bytes) -> None:
    table = read_unwind_info(data)
    assert read_columns(data) == columns_of(table)  # the compiled read, where built
    unwind_info_text(table_view(data, None), CORE)
    look = Lookup(data)
    for entry in table.entries[:200]:
        look.find(entry.offset)
    functions = []
    for i, entry in enumerate(table.entries[:500]):
        end = table.entries[i + 1].offset if i + 1 < len(table.entries) else \
            max(table.sentinel, entry.offset + 1)
        if end > entry.offset:
            functions.append(TableFunction(entry.offset, end - entry.offset,
                                           entry.encoding, entry.personality, entry.lsda,
                                           entry.encoding & 0xFFFFFF))
    if functions:
        built = _built(lambda: build_unwind_info(functions, "x86_64", "fuzz.o"))  # checks itself
        if CORE is not None:  # the compiled writer's table, notes or error: the Python one's
            ordered = sorted(functions, key=lambda f: f.offset)
            assert built == _built(lambda: table_writer._build(ordered, "x86_64", "fuzz.o"))
        if not isinstance(built, str):
            read_unwind_info(built.data)


def _built(build: Callable[[], BuiltTable]) -> BuiltTable | str:
    """A build's table, or its input error's text."""
    try:
        return build()
    except Cfi2SframeError as exc:
        return str(exc)


def _asm(data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    result = scan(text, "fuzz.s", "#")
    probed = with_probes(text, result.items, CORE)
    assert probed == with_probes(text, result.items, None), "the compiled labels differ"
    for statement in result.items[:50]:
        try:
            parse_statement(statement.text)
        except EXPECTED:
            pass


def _xray(data: bytes) -> None:
    """dump's lines, stacks and verify's findings of a trace; the compiled loops
    (``csrc/xray.c``) against the Python ones where the core is built."""
    header = read_header(data)
    names = {1: "one", 2: "two"}
    "".join(dump_lines(data, header, names))
    if CORE is not None:
        xray_compare.check(CORE, data, names)
    for _ in check_trace(data):
        pass


def _require_located(target: str, exc: Exception) -> None:
    """Accept an error only as a located input error: the ELF reader names the file,
    the decoders give a byte offset. Anything else is a finding."""
    where = REWRITTEN if target == "rewrite" else "fuzz.o"
    readers = ("elf", "rewrite", "compressed", "macho")
    if isinstance(exc, Cfi2SframeError) and target in readers and exc.where != where:
        raise AssertionError(f"unlocated input error: {exc}") from exc
    if "\n" in str(exc):
        raise AssertionError(f"input error of more than one line: {exc!r}") from exc


TARGETS = {"sframe": _sframe, "elf": _elf, "cfi": _cfi, "compact": _compact, "asm": _asm,
           "rewrite": _rewrite, "compressed": _compressed, "macho": _macho,
           "unwind_info": _unwind_info, "xray": _xray}


def main() -> None:
    name = sys.argv[1] if len(sys.argv) > 1 else ""
    if name not in TARGETS:
        sys.exit(f"usage: fuzz.py {{{'|'.join(TARGETS)}}} [libFuzzer options]")
    target = TARGETS[name]
    if ENTRY_POINTS:
        _count_entry_points(ENTRY_POINTS)

    def one(data: bytes) -> None:
        start = time.perf_counter()
        try:
            target(data)
        except EXPECTED as exc:
            _require_located(name, exc)
        elapsed = time.perf_counter() - start
        if elapsed > SLOW_SECONDS:
            raise RuntimeError(f"input took {elapsed:.2f} s (bound {SLOW_SECONDS} s)")

    atheris.Setup([sys.argv[0], *sys.argv[2:]], one)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
