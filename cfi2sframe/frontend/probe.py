"""Exact code addresses from a real assembler run.

The source is assembled as it is first (``start_run``): where every function's
operations are the ones the assembler wrote in its ``.eh_frame``, that section's
advances place them (``frontend.timelines``).  Else it is assembled again with a
label placed right before every CFI directive (``with_probes``): the labels'
values in the object's symbol table are the exact offsets (after relaxation,
alignment and data) where the assembler itself records each directive.  This
module is kept light (no Lark) so the assembler can start before the heavier
modules are even imported.

Holds the background run (``start_run``, scanning meanwhile; ``start_probe``,
``with_probe_run`` with probe labels), ``Assembler.is_gnu_as``, the probe addresses
(``read_probes``: places and the source's own symbols in one pass, the probes' names
never decoded) and the FDE-count check; ``.sframe`` is dropped from ``.cfi_sections``
(the section is ours to write).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from types import ModuleType

from ..core import compiled as compiled_core
from ..dwarf.frames import count_fdes
from ..elf.read import ElfView, Symbol
from ..errors import AssemblerFailed, Cfi2SframeError
from ..spawn import on_path
from ..typed import NamedTuple, cast
from .launch import Launch, is_gnu_as
from .patterns import deferred
from .scan import ScanResult, Statement, scan

PROBE = "__cfi2sframe_probe_"
_COMPILED = compiled_core()
_DUPLICATE_PROBE = deferred(
    r"^(.*?):(\d+): Error: symbol `" + PROBE + r"\d+' is already defined", re.M)


# What ``shlex.split`` (POSIX mode, no comments) reads as other than a word's letters,
# besides its whitespace: quotes and the escape.
_SHELL_MARKS = ("'", '"', "\\")


def _plain_words(text: str) -> list[str]:
    """``text``'s words split at shlex's whitespace (space, tab, CR, LF) and no other:
    ``str.split()`` would split at Unicode's spaces too."""
    spaced = text.replace("\t", " ").replace("\r", " ").replace("\n", " ")
    return [word for word in spaced.split(" ") if word]


class Assembler(NamedTuple):
    """How to run an assembler: a command to which ``-o OUT IN`` is appended."""

    command: tuple[str, ...]

    @staticmethod
    def from_string(text: str | None) -> Assembler:
        """``--assembler``'s words as ``shlex.split`` gives them: a command with no
        quote or backslash split at shlex's whitespace here, so the default target's
        ``as`` loads no ``shlex`` (~1.2M instructions on every ``.s`` command)."""
        if not text:
            return Assembler(("as",))
        if any(mark in text for mark in _SHELL_MARKS):
            import shlex

            return Assembler(tuple(shlex.split(text)))
        return Assembler(tuple(_plain_words(text)))

    def run(self, source: str, display_name: str, include_dir: str) -> tuple[bytes, str]:
        """Assemble ``source``; return (object bytes, assembler messages)."""
        with self.start(source, display_name, include_dir) as job:
            return job.finish()

    def is_gnu_as(self) -> bool:
        """Whether this is GNU as (it says so in ``--version``).  GNU as keeps CFI
        state per section: a directive in another section than its function's
        ``.cfi_startproc`` is an error there, where LLVM's assembler encodes it into
        the function's FDE with advances that count one section only."""
        return is_gnu_as(self.command)

    def start(self, source: str | bytes, display_name: str, include_dir: str,
              launched: Launch | None = None) -> AssemblerJob:
        """Start assembling ``source`` (text, or the bytes it was decoded from) in the
        background (see ``AssemblerJob``; ``launched``: a run started already)."""
        exe = self.command[0]
        if not on_path(exe):
            if launched is not None:
                launched.stop()
            raise Cfi2SframeError(
                "",
                f"no assembler found: '{exe}' is not on PATH; install GNU binutils "
                "(apt-get install binutils) or name one with --assembler CMD",
            )
        return AssemblerJob(self.command, source, display_name, include_dir, launched)


class AssemblerJob:
    """A running assembler; use as a context manager so it never outlives its caller.

    Messages mention ``display_name`` instead of the temporary file, so line
    numbers point into the user's file.  ``launched``: a run started already
    (``cli.early``), taken over where it is this one, else stopped.
    """

    def __init__(self, command: tuple[str, ...], source: str | bytes, display_name: str,
                 include_dir: str, launched: Launch | None = None) -> None:
        if launched is not None and launched.take_over(command, source, display_name,
                                                       include_dir):
            self.launch = launched
        else:
            if launched is not None:
                launched.stop()
            self.launch = Launch(command, source, display_name, include_dir)

    def __enter__(self) -> AssemblerJob:
        return self

    def __exit__(self, *exc: object) -> None:
        self.launch.stop()

    def cancel(self) -> None:
        """Stop the assembler (its object is not needed) and remove its files."""
        self.__exit__()

    def finish(self) -> tuple[bytes, str]:
        """Wait for the assembler; return (object bytes, messages) or raise."""
        run = self.launch
        _, err = run.proc.communicate()
        status = run.proc.wait()
        messages = err.decode("utf-8", "replace").replace(run.src, run.display_name)
        if status != 0 or not os.path.exists(run.obj):
            duplicate = _DUPLICATE_PROBE().search(messages)
            if duplicate:
                raise Cfi2SframeError(
                    f"{duplicate.group(1)}:{duplicate.group(2)}",
                    "a CFI directive the assembler expands more than once, in a repeating "
                    "block cfi2sframe does not recognise (.macro, .rept, .irp and .irpc "
                    "are read): expand it first")
            raise AssemblerFailed(run.display_name, run.command[0], status, messages)
        with open(run.obj, "rb") as handle:
            return handle.read(), messages


def with_probes(text: str, statements: Sequence[Statement],
                compiled: ModuleType | None = _COMPILED) -> str:
    """``text`` with a probe label right before each statement (``compiled``: the
    compiled core's ``with_labels``, for ASCII text; this loop is its reference)."""
    if compiled is not None:
        probed = compiled.with_labels(text, tuple(stmt.offset for stmt in statements),
                                      PROBE)
        if probed is not None:
            return cast("str", probed)
    pieces = []
    last = 0
    for index, stmt in enumerate(statements):
        pieces.append(text[last : stmt.offset])
        pieces.append(f"{PROBE}{index}: ")
        last = stmt.offset
    pieces.append(text[last:])
    return "".join(pieces)


def probe_places(symbols: Sequence[Symbol], count: int) -> list[tuple[int, int] | None]:
    places: list[tuple[int, int] | None] = [None] * count
    prefix_len = len(PROBE)
    for sym in symbols:
        if sym.name.startswith(PROBE):
            index = int(sym.name[prefix_len:])
            if index < count:
                places[index] = (sym.shndx, sym.value)
    return places


def read_probes(view: ElfView, count: int, compiled: ModuleType | None = _COMPILED
                ) -> tuple[list[tuple[int, int] | None], tuple[Symbol, ...]]:
    """``probe_places`` and ``source_symbols`` of an ELF object in one pass over its
    symbol table, the probes' names never decoded (a dense file has six for each of
    its functions).  ``compiled``: the compiled core's ``probe_symbols`` finds the
    probes; this loop is its reference."""
    places: list[tuple[int, int] | None] = [None] * count
    table = view.symbol_table()
    if table is None:
        return places, ()
    if compiled is not None:
        raw, strings = table
        found = compiled.probe_symbols(raw, strings, view.is64, not view.little_endian,
                                       PROBE.encode(), count)
        if found is not None:
            return found[0], view.symbols_at(found[1])
    rows = view.symbol_rows()
    assert rows is not None  # (the table is there)
    strings, entries = rows
    prefix = PROBE.encode()
    skip = len(prefix)
    others = []
    for entry, (name_off, _, shndx, value, _) in enumerate(entries):
        if strings.startswith(prefix, name_off):
            index = int(strings[name_off + skip : strings.index(b"\0", name_off)])
            if index < count:
                places[index] = (shndx, value)
        else:
            others.append(entry)
    return places, view.symbols_at(others)


def source_symbols(symbols: Sequence[Symbol]) -> tuple[Symbol, ...]:
    """The object's symbols without our probe labels: the source's own, which name its
    functions."""
    return tuple(sym for sym in symbols if not sym.name.startswith(PROBE))


def fde_counts(view: ElfView) -> list[tuple[str, int]]:
    """(section, FDEs in it) for each CFI section an assembler writes, 0 where absent."""
    return [(name, count_fdes(view.section_data(name), is_eh, view.little_endian))
            for name, is_eh in ((".eh_frame", True), (".debug_frame", False))]


def check_fde_count(view: ElfView, count: int, filename: str) -> None:
    """The assembler's own FDE count must match ours: CFI we cannot see is an error.
    Each CFI section it wrote holds every function (``.cfi_sections .eh_frame,
    .debug_frame`` writes each FDE twice, once in each)."""
    for name, fdes in fde_counts(view):
        if fdes and fdes != count:
            raise Cfi2SframeError(
                filename,
                f"the assembler made {fdes} FDEs in {name} but {count} .cfi_startproc "
                "regions were found (CFI from .include files or macros is not supported)",
            )


class ProbeRun:
    """A scanned source and the assembler run that places its directives: of the
    source as it is (``probed`` False), or with probe labels."""

    __slots__ = ("text", "filename", "scanned", "statements", "job", "probed", "assembler",
                 "include_dir")

    def __init__(self, text: str, filename: str, scanned: ScanResult,
                 statements: tuple[Statement, ...], job: AssemblerJob, probed: bool = True,
                 assembler: Assembler | None = None, include_dir: str = ".") -> None:
        self.text = text
        self.filename = filename
        self.scanned = scanned
        self.statements = statements
        self.job = job
        self.probed = probed
        self.assembler = assembler  # (to assemble again, with probes)
        self.include_dir = include_dir


def start_run(text: str, filename: str, comment_chars: str, assembler: Assembler,
              include_dir: str = ".", probes: bool = False, data: bytes | None = None,
              launched: Launch | None = None) -> ProbeRun:
    """Start assembling ``text`` as it is (in the background) and scan it meanwhile;
    with probe labels where ``probes`` asks for them or the text asks for an SFrame
    section of the assembler's own (``without_sframe_request``).  ``data``: the bytes
    ``text`` was decoded from (UTF-8, surrogates escaped), written as they are.
    ``launched``: the run the command line started (``cli.early``), taken over where it
    is this one, else stopped."""
    if probes or ".sframe" in text:
        if launched is not None:
            launched.stop()
        return start_probe(text, filename, comment_chars, assembler, include_dir)
    job = assembler.start(text if data is None else data, filename, include_dir, launched)
    try:
        scanned = scan(text, filename, comment_chars)
    except BaseException:
        job.cancel()
        raise
    return ProbeRun(text, filename, scanned, scanned.items, job, False, assembler,
                    include_dir)


def with_probe_run(run: ProbeRun) -> ProbeRun:
    """``run`` assembled again with probe labels (its own run stopped)."""
    if run.probed:
        return run
    run.job.cancel()
    _refuse_probe_prefix(run.text, run.filename)
    assert run.assembler is not None  # (set by start_run)
    job = run.assembler.start(with_probes(run.text, run.statements), run.filename,
                              run.include_dir)
    return ProbeRun(run.text, run.filename, run.scanned, run.statements, job)


def _refuse_probe_prefix(text: str, filename: str) -> None:
    """Probe labels could not be told from the source's own symbols of that name."""
    if PROBE in text:
        raise Cfi2SframeError(filename, f"input uses the reserved symbol prefix '{PROBE}'")


def start_probe(text: str, filename: str, comment_chars: str, assembler: Assembler,
                include_dir: str = ".") -> ProbeRun:
    """Scan ``text`` and start assembling it with probe labels (in the background)."""
    _refuse_probe_prefix(text, filename)
    scanned = scan(text, filename, comment_chars)
    statements = scanned.items
    rewritten = without_sframe_request(text, statements)
    if rewritten != text:  # rare: scan the text the assembler will see
        text = rewritten
        scanned = scan(text, filename, comment_chars)
        statements = scanned.items
    job = assembler.start(with_probes(text, statements), filename, include_dir)
    return ProbeRun(text, filename, scanned, statements, job, True, assembler, include_dir)


def without_sframe_request(text: str, statements: Sequence[Statement]) -> str:
    """``text`` with ``.sframe`` dropped from its ``.cfi_sections`` statements.

    The SFrame section is ours to write: an assembler that writes one too would have
    it concatenated with ours in one ``.sframe``.  A statement left with no section
    asks for ``.eh_frame``, the assembler's default.  Lines keep their numbers.
    """
    if ".sframe" not in text:
        return text
    pieces = []
    last = 0
    for stmt in statements:
        words = stmt.text.split(None, 1)
        if not words or words[0] != ".cfi_sections" or ".sframe" not in stmt.text \
                or text[stmt.offset:stmt.offset + len(stmt.text)] != stmt.text:
            continue  # (a statement not verbatim in the text is caught after assembly)
        names = [name.strip() for name in (words[1] if len(words) > 1 else "").split(",")]
        kept = [name for name in names if name and name != ".sframe"] or [".eh_frame"]
        pieces += [text[last:stmt.offset], ".cfi_sections " + ", ".join(kept)]
        last = stmt.offset + len(stmt.text)
    return "".join(pieces) + text[last:] if pieces else text
