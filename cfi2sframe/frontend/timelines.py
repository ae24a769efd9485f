"""Assembly frontend: ``.cfi_*`` directives -> DWARF operations -> ``Timeline``.

Addresses are never estimated: they come from a real assembler run (see
``probe``).  Directives are lowered to DWARF operations exactly as an
assembler encodes them, then replayed by the one CFI interpreter.

Directives become ``Op``s as GNU as's dw2gencfi encodes them while the assembler runs
(``_Builder.collect``: parsing, each distinct statement text once, structure and
operands; then the modules the rest of the conversion uses are loaded). They are placed
by the FDEs the assembler wrote for the source as it is, the n-th function by the n-th
FDE where that FDE has exactly its operations (``_Builder.place_by_cfi``; such a unit
agrees with the assembler by construction, ``AsmUnit.agrees``), else at the probes'
addresses of a second run (``_Builder.place``). One ``Timeline`` per function (functions
whose operations and size are the same share one rows tuple, interpreted once), with
each directive's line (``Timeline.location_at``); names from the symbol table (among the
symbols at the start, those labelled after the previous function, read only where
several share it). A file with CFI in macro bodies is read from the assembler's own
``.eh_frame`` instead (``_from_assembler``).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence

from ..arch.base import Arch
from ..dwarf import ops
from ..dwarf.cfi import Cfi, Fde, initial_ops
from ..dwarf.interpret import interpret
from ..dwarf.ops import CIE_OPS, LOCATIONS, AdvanceLoc, Nop, Op, decode_ops, sleb, uleb
from ..elf.cfi import read_elf_cfi
from ..elf.read import (
    SHN_LORESERVE,
    SHN_UNDEF,
    STT_FILE,
    STT_FUNC,
    STT_SECTION,
    ElfView,
    Symbol,
    is_mapping_symbol,
    open_elf,
)
from ..errors import Cfi2SframeError, CfiError, DecodeError, decoding
from ..kinds import is_elf
from ..model import Location, Row, Timeline
from ..typed import TYPE_CHECKING, NamedTuple, cast
from .directives import evaluate, parse_statement, render
from .macho_probe import elf_like_symbols, section_names
from .probe import (
    Assembler,
    ProbeRun,
    check_fde_count,
    fde_counts,
    probe_places,
    read_probes,
    source_symbols,
    start_run,
    with_probe_run,
)
from .scan import Statement, find_assignments, labels_between
from .syntax import EXPRESSIONS, Arg, Directive, EscapeItem, Num, Reg, Sym, SyntaxProblem

if TYPE_CHECKING:  # (the Mach-O reader loads for an Apple target's assembler output only)
    from ..arch.base import ByteOrder
    from ..macho.read import MachoView

KNOWN_DIRECTIVES = frozenset(
    "startproc endproc sections def_cfa def_cfa_register def_cfa_offset adjust_cfa_offset "
    "offset val_offset rel_offset register restore undefined same_value remember_state "
    "restore_state return_column signal_frame window_save negate_ra_state "
    "negate_ra_state_with_pc b_key_frame mte_tagged_frame escape personality personality_id "
    "lsda inline_lsda fde_data val_encoded_addr label".split()
)


class _Function:
    """A function collected between ``.cfi_startproc`` (statement ``probe``) and
    ``.cfi_endproc`` (statement ``end``), before any address is known: each operation
    comes with the index of the statement that made it (``_Builder.place`` turns it
    into an offset)."""

    __slots__ = ("start", "probe", "simple", "ops", "end", "ra_column", "signal_frame",
                 "pauth_b_key", "personality", "lsda", "cfa_offset", "cfa_stack", "error",
                 "region", "op_at", "op_shape", "op_lines")

    def __init__(self, start: Statement, probe: int, simple: bool, region: int = 0) -> None:
        self.start = start
        self.probe = probe
        self.simple = simple
        self.ops: list[tuple[int, Op]] = []
        self.end = -1
        self.ra_column: int | None = None
        self.signal_frame = False
        self.pauth_b_key = False
        self.personality: str | None = None
        self.lsda: str | None = None
        self.cfa_offset = 0
        self.cfa_stack: list[int] = []
        self.error: str | None = None
        # Where the text after the previous function starts: the labels defined from
        # there to this one's start may name it (read only where symbols share its
        # start).
        self.region = region
        # Set at .cfi_endproc, from ``ops``: the statement of each operation, a number
        # for their types and operands (what the rows depend on, with the offsets) and
        # each one's line (every operation here comes from a statement, which has one).
        self.op_at: tuple[int, ...] = ()
        self.op_shape = 0
        self.op_lines: tuple[int, ...] = ()


class AsmUnit(NamedTuple):
    """The timelines of an assembly file and the assembler's object, which ``--emit obj``
    writes (its probe labels taken out, where it has them)."""

    filename: str
    text: str
    timelines: tuple[Timeline, ...]
    obj: bytes = b""  # the assembler's object (probe labels add no bytes): the code
    # Its symbols as the probe read them, less probes (placed by its FDEs: those of the
    # sections that hold functions).
    symbols: tuple[Symbol, ...] = ()
    probed: bool = True  # False: ``obj`` is the source's alone (no probe labels)
    assembled: Cfi | None = None  # the CFI of ``obj``, where it placed the functions
    # The assembler's rows are the timelines' by construction (``place_by_cfi``).
    agrees: bool = False


def parse_asm(
    text: str,
    filename: str,
    arch: Arch,
    assembler: Assembler,
    include_dir: str = ".",
    probes: bool = False,
) -> tuple[AsmUnit, str]:
    """Timelines for every ``.cfi_startproc`` region of ``text``.

    Returns the unit and the assembler's messages (warnings) for the caller
    to show.  Raises ``Cfi2SframeError`` for malformed input.  ``probes``: place
    the directives by probe labels at once (the reference for placing them by the
    assembler's own CFI; ``probe.start_run``).
    """
    return finish_asm(start_run(text, filename, arch.comment_chars, assembler, include_dir,
                                probes), arch)


def finish_asm(run: ProbeRun, arch: Arch, meanwhile: Callable[[], object] | None = None
               ) -> tuple[AsmUnit, str]:
    """Parse and collect the directives while the assembler runs (and then call
    ``meanwhile``, if given), then place them and build the timelines: by the
    assembler's own CFI where ``run`` assembled the source as it is and that CFI
    has every function's operations, else by probe labels (assembling again)."""
    filename, statements = run.filename, run.statements
    items = run.scanned.items
    if run.scanned.in_bodies:
        return _from_assembler(with_probe_run(run))
    with run.job as job:
        # While the assembler runs: everything that needs no address (a problem found
        # here, with its line, is clearer than the assembler's, if it has one).
        builder = _Builder(run.text, filename, arch, items, _parse_all(statements, filename))
        functions = builder.collect()
        if meanwhile is not None:
            meanwhile()
        plain = not run.probed and _placeable_by_cfi(run, functions)
        if run.probed or plain:
            obj, messages = job.finish()
    if plain:
        unit = _placed_by_assembler_cfi(builder, functions, obj, filename, run.text)
        if unit is not None:
            return unit, messages
    if not run.probed:
        run = with_probe_run(run)
        with run.job as job:
            obj, messages = job.finish()
    macho = _macho_of(obj, filename)
    if macho is not None:  # for an Apple target
        every = elf_like_symbols(macho)
        names: Sequence[str] = section_names(macho)
        view = None
        places = probe_places(every, len(statements))
        symbols = source_symbols(every)
    else:
        view = open_elf(obj, "assembler output")
        places, symbols = read_probes(view, len(statements))
        names = view.section_names
    timelines = builder.place(functions, places, names, symbols)
    if view is not None:  # (LLVM writes Mach-O FDEs only for functions in DWARF mode)
        check_fde_count(view, len(timelines), filename)
    return AsmUnit(filename, run.text, tuple(timelines), obj,
                   symbols if view is not None else ()), messages


def _macho_of(obj: bytes, filename: str) -> MachoView | None:
    """The assembler's output read as Mach-O (an Apple target's), or None where it is not
    Mach-O; the Mach-O reader is imported only for a file that is not ELF."""
    if is_elf(obj):
        return None
    from ..macho.read import MH_MAGIC, MH_MAGIC_64, open_macho

    if int.from_bytes(obj[:4], "little") not in (MH_MAGIC, MH_MAGIC_64):
        return None
    with decoding(filename, "assembler output"):
        return open_macho(obj)


def _placeable_by_cfi(run: ProbeRun, functions: Sequence[_Function]) -> bool:
    """Whether the FDE the assembler wrote for a function, where it has the function's
    operations, can only have them where the directives are.

    GNU as can only: its CFI state is per section, so a directive in another section
    than its function's start is an error there.  For another assembler (LLVM's
    encodes such a directive with advances that count one section only), no text
    that may switch sections lies between a function's ``.cfi_startproc`` and
    ``.cfi_endproc``, nor can a macro or an included file hide one.  Either answers;
    a small text is read first (cheaper than the assembler's ``--version``).
    """
    small = len(run.text) <= _READ_FIRST
    if small and _one_section_each(run, functions):
        return True
    if run.assembler is not None and run.assembler.is_gnu_as():
        return True
    return not small and _one_section_each(run, functions)


# Up to this many characters, reading the text for a section switch (some 25 passes
# of ``str.find``, ~1 ms at this size) costs less than running ``as --version`` (~2 ms).
_READ_FIRST = 1 << 16


def _one_section_each(run: ProbeRun, functions: Sequence[_Function]) -> bool:
    """No text that may switch sections between a function's start and end, and no
    macro or included file that could hide one."""
    if any(word in run.text for word in _HIDING):
        return False
    starts = [func.start.offset for func in functions]
    ends = [run.statements[func.end].offset for func in functions]
    for word in _SECTION_WORDS:
        at = run.text.find(word)
        while at >= 0:
            index = bisect.bisect_right(starts, at) - 1
            if index >= 0 and at < ends[index]:
                return False
            at = run.text.find(word, at + 1)
    return True


# A word of each directive that changes the section being assembled, and of those
# that bring in text from elsewhere (upper case too, as assemblers take it).
_SECTION_WORDS = (".sect", ".text", ".data", ".bss", "pushsection", "popsection",
                  ".previous", "subsection", ".struct", ".offset", ".rodata", ".SECT",
                  ".TEXT", ".DATA", ".BSS", "PUSHSECTION", "POPSECTION", ".PREVIOUS",
                  "SUBSECTION", ".STRUCT", ".OFFSET")
_HIDING = (".macro", ".MACRO", ".include", ".INCLUDE")


def _placed_by_assembler_cfi(builder: _Builder, functions: Sequence[_Function], obj: bytes,
                             filename: str, text: str) -> AsmUnit | None:
    """The unit of a source assembled as it is, each function placed by the FDE the
    assembler wrote for it; None where that cannot be told (not ELF, an FDE whose
    operations are not the function's, a section name used twice)."""
    if not is_elf(obj):
        return None
    view = open_elf(obj, "assembler output")
    if not functions:
        if any(fdes for _, fdes in fde_counts(view)):
            return None  # (the probe run says what the assembler saw)
        return AsmUnit(filename, text, (), obj, tuple(view.symbols()), probed=False)
    try:  # (its FDEs are not named: ``_name`` names the functions)
        cfi = read_elf_cfi(filename, obj, symbols=())
    except Cfi2SframeError:
        return None
    symbols = _symbols_in(view, {fde.section for fde in cfi.fdes})
    placed = builder.place_by_cfi(functions, cfi, view.section_names, symbols)
    if placed is None:
        return None
    timelines, agrees = placed
    return AsmUnit(filename, text, tuple(timelines), obj, symbols, probed=False,
                   assembled=cfi, agrees=agrees)


def _symbols_in(view: ElfView, sections: set[str]) -> tuple[Symbol, ...]:
    """The symbols of ``view`` in the sections named ``sections`` (those that can name
    a function there), only their names read: most of a C file's are its data's."""
    indices = {index for index, name in enumerate(view.section_names) if name in sections}
    rows = view.symbol_rows()
    if rows is None:
        return ()
    return view.symbols_at([number for number, (_, _, shndx, _, _) in enumerate(rows[1])
                            if shndx in indices])


def _from_assembler(run: ProbeRun) -> tuple[AsmUnit, str]:
    """The timelines of a file with CFI directives inside ``.macro``, ``.rept`` or
    ``.irp`` bodies: read from the assembler's own ``.eh_frame``, which holds them as
    the assembler expanded them (a body's directives run where the body is used, once
    per repetition), and said so in a note.  Functions are named by the object's
    symbols and located by their FDE's offset there."""
    with run.job as job:
        obj, messages = job.finish()
    first = run.scanned.in_bodies[0]
    note = (f"{run.filename}:{first.line}: note: CFI directives inside .macro, .rept or "
            ".irp bodies: every function's CFI is read from the assembler's .eh_frame\n")
    view = open_elf(obj, "assembler output")
    places, symbols = read_probes(view, len(run.statements))
    # Named by the source's own symbols: a probe label, untyped, could name a function
    # whose symbol has no .type.
    cfi = read_elf_cfi(run.filename, obj, symbols=symbols)
    sections = {name: index for index, name in enumerate(view.section_names)}
    timelines = []
    for timeline in cfi.timelines:
        shndx, start, end = sections.get(timeline.section, -1), timeline.start, \
            timeline.start + timeline.size
        # The directives outside bodies have probes: (offset, line) of those in this
        # function locate its problems (a body's, at the last one before them).
        lines = sorted((place[1] - start, stmt.line)
                       for stmt, place in zip(run.statements, places, strict=True)
                       if place is not None and place[0] == shndx
                       and start <= place[1] < max(end, start + 1))
        start_line = next((line for at, line in lines if at == 0), 0)
        # A function named by a symbol at its start is anchored to it (--emit asm).
        anchor = None if timeline.name.startswith(f"{timeline.section}+") else \
            (timeline.name, 0)
        timelines.append(timeline._replace(location=Location(run.filename, start_line),
                                 anchor=anchor, directive_lines=tuple(lines)))
    return AsmUnit(run.filename, run.text, tuple(timelines), obj), messages + note


def _parse_all(statements: Sequence[Statement], filename: str) -> list[Directive]:
    """Each statement parsed; a text seen before (a directive repeated in every
    function) is parsed once."""
    known: dict[str, Directive] = {}
    out = []
    for stmt in statements:
        directive = known.get(stmt.text)
        if directive is None:
            directive = known[stmt.text] = _parse(stmt, filename)
        out.append(directive)
    return out


def _parse(stmt: Statement, filename: str) -> Directive:
    name = stmt.text.split(None, 1)[0].lower()
    if name[5:] not in KNOWN_DIRECTIVES:
        raise Cfi2SframeError(f"{filename}:{stmt.line}", f"unknown CFI directive '{name}'")
    try:
        return parse_statement(stmt.text)
    except SyntaxProblem as exc:
        raise Cfi2SframeError(f"{filename}:{stmt.line}", exc.message) from None


class _Builder:
    """Walks the statements in order and lowers each function to a ``Timeline``: first
    what needs no address (``collect``, while the assembler runs), then with the
    probes' places (``place``)."""

    def __init__(self, text: str, filename: str, arch: Arch, items: Sequence[Statement],
                 parsed: Sequence[Directive]) -> None:
        self.text = text
        self.filename = filename
        self.arch = arch
        self.items = items
        self.parsed = parsed
        self.sections: Sequence[str] = ()
        self.offset = 0  # of the statement being lowered, for symbol look-ups
        self._assignments: dict[str, list[tuple[int, str]]] | None = None
        self.by_place: dict[int, list[tuple[int, int, str]]] = {}
        self.cie_ops = tuple(CIE_OPS[name](reg, value) for name, reg, value in arch.cie_ops)
        # Rows by what decides them (CIE or none, size, each operation's offset and,
        # numbered in ``_shapes``, the operations less their lines): functions built
        # alike share one rows tuple, which ``sframe.lower``'s memo then lowers once.
        self._rows: dict[tuple[object, ...], tuple[Row, ...]] = {}
        self._shapes: dict[tuple[tuple[object, ...], ...], int] = {}

    def where(self, line: int) -> str:
        return f"{self.filename}:{line}"

    def collect(self) -> list[_Function]:
        """The functions, each directive lowered to operations; structure and operand
        errors raised with their line."""
        functions: list[_Function] = []
        current: _Function | None = None
        region = 0
        for index, item in enumerate(self.items):
            self.offset = item.offset
            directive = self.parsed[index]
            if directive.name == "startproc":
                if current is not None:
                    raise Cfi2SframeError(self.where(item.line),
                                          "nested .cfi_startproc (previous one not closed)")
                current = _Function(item, index, directive.args[0] == "simple",
                                    region=region)
                if not current.simple:
                    # dw2gencfi's running CFA offset starts from the CIE's def_cfa.
                    current.cfa_offset = next(
                        (b for name, _, b in self.arch.cie_ops if name == "def_cfa"), 0)
            elif current is None:
                if directive.name == "sections":
                    continue
                raise Cfi2SframeError(
                    self.where(item.line),
                    f"CFI directive '.cfi_{directive.name}' outside .cfi_startproc/.cfi_endproc",
                )
            elif directive.name == "endproc":
                current.end = index
                current.op_at = tuple(at for at, _ in current.ops)
                current.op_shape = self._shapes.setdefault(
                    tuple((type(op), op[:-1]) for _, op in current.ops), len(self._shapes))
                current.op_lines = tuple(op.line for _, op in current.ops)
                functions.append(current)
                current = None
                region = item.offset
            else:
                self._lower(current, directive, index, item.line)
        if current is not None:
            raise Cfi2SframeError(self.where(current.start.line),
                                  ".cfi_startproc without .cfi_endproc")
        return functions

    def place(self, functions: Sequence[_Function], places: Sequence[tuple[int, int] | None],
              sections: Sequence[str], symbols: Sequence[Symbol]) -> list[Timeline]:
        """The timelines of ``functions`` with each statement at its probe's place
        (section index, offset); ``symbols``: the source's own, which name them."""
        missing = next((index for index, place in enumerate(places) if place is None), None)
        if missing is not None:
            raise Cfi2SframeError(self.where(self.items[missing].line),
                                  "the assembler did not assemble this directive "
                                  "(inside .if or an unused .macro?); not supported")
        self.sections = sections
        self.by_place = _symbols_by_place(symbols)
        placed = cast("Sequence[tuple[int, int]]", places)
        shndx = [place[0] for place in placed]
        return [self._probed(func, placed, shndx) for func in functions]

    def place_by_cfi(self, functions: Sequence[_Function], cfi: Cfi, sections: Sequence[str],
                     symbols: Sequence[Symbol]) -> tuple[list[Timeline], bool] | None:
        """The timelines of ``functions`` placed by the assembler's FDEs (``cfi``: of
        the source as it is), the n-th function by the n-th FDE: each operation at the
        offset where the FDE has the same one.  None unless every FDE has exactly its
        function's operations, in order, and a section named once.

        With them, whether every FDE's CIE has the initial operations the function's
        rows start from: then the assembler's rows are the timelines' (the same
        operations at the same offsets, interpreted alike).
        """
        if len(cfi.fdes) != len(functions):
            return None
        initial = {False: tuple((type(op), op[:-1]) for op in self.cie_ops), True: ()}
        cies: dict[int, tuple[tuple[object, ...], ...]] = {}
        agrees = True
        index: dict[str, int] = {}
        for number, name in enumerate(sections):
            index[name] = -1 if name in index else number
        self.sections = sections
        self.by_place = _symbols_by_place(symbols)
        bodies: dict[tuple[int, bytes], tuple[int, tuple[int, ...]] | None] = {}
        out = []
        for func, fde in zip(functions, cfi.fdes, strict=True):
            shndx = index.get(fde.section, -1)
            key = (fde.cie_at, fde.body)
            body = bodies[key] if key in bodies else \
                bodies.setdefault(key, self._body_shape(fde, cfi.big_endian))
            if shndx <= 0 or body is None or body[0] != func.op_shape:
                return None
            out.append(self._finish(func, (shndx, fde.start), fde.size, body[1]))
            cie = cies.get(fde.cie_at)
            if cie is None:  # (its DW_CFA_nop, padding, change nothing)
                cie = cies[fde.cie_at] = tuple(
                    (type(op), op[:-1]) for op in initial_ops(fde.cie, cfi.big_endian)
                    if type(op) is not Nop)
            agrees = agrees and cie == initial[func.simple]
        return out, agrees

    def _body_shape(self, fde: Fde, big_endian: bool) -> tuple[int, tuple[int, ...]] | None:
        """The number of the shape of an FDE's operations (as ``collect`` numbers a
        function's), with each one's offset; None for a shape no function has."""
        cie = fde.cie
        try:
            decoded = decode_ops(fde.body, cie.code_align, cie.data_align, cie.address_size,
                                 big_endian)
        except DecodeError:
            return None
        while decoded and type(decoded[-1]) is Nop:  # the FDE's padding
            decoded.pop()
        at, pcs, shape = 0, [], []
        for op in decoded:
            if type(op) is AdvanceLoc:
                at += op.delta
            elif isinstance(op, LOCATIONS):
                return None  # (an absolute address: not from directives)
            else:
                pcs.append(at)
                shape.append((type(op), op[:-1]))
        number = self._shapes.get(tuple(shape))
        return None if number is None else (number, tuple(pcs))

    def _section(self, shndx: int) -> str:
        if 0 < shndx < len(self.sections):
            return self.sections[shndx]
        return f"#{shndx}"

    def _probed(self, func: _Function, places: Sequence[tuple[int, int]],
                shndx: list[int]) -> Timeline:
        """One function's timeline placed by its probes; ``shndx``: each statement's
        section index."""
        start = places[func.probe]
        if shndx[func.probe : func.end + 1].count(start[0]) != func.end + 1 - func.probe:
            self._other_section(func, places)
        end, line = places[func.end], self.items[func.end].line
        size = end[1] - start[1]
        if size < 0:
            raise Cfi2SframeError(self.where(line), ".cfi_endproc before its .cfi_startproc")
        base = start[1]
        return self._finish(func, start, size,
                            tuple([places[index][1] - base for index in func.op_at]))

    def _finish(self, func: _Function, start: tuple[int, int], size: int,
                pcs: tuple[int, ...]) -> Timeline:
        """One function's timeline: it starts at ``start`` (section index, offset), and
        its operations are at ``pcs``."""
        rows: tuple[Row, ...] = ()
        invalid = func.error
        if invalid is None:
            shape = (func.simple, size, pcs, func.op_shape)
            known = self._rows.get(shape)
            if known is not None:
                rows = known
            else:
                cie = () if func.simple else self.cie_ops
                placed = list(zip(pcs, (op for _, op in func.ops), strict=True))
                try:
                    rows = self._rows[shape] = interpret(cie, placed, size)
                except CfiError as exc:
                    invalid = f"line {exc.line}: {exc.message}" if exc.line else exc.message
        name, anchor = self._name(start, func)
        return Timeline(
            name=name,
            section=self._section(start[0]),
            start=start[1],
            size=size,
            rows=rows,
            ra_column=self.arch.ra if func.ra_column is None else func.ra_column,
            location=Location(self.filename, func.start.line),
            signal_frame=func.signal_frame,
            pauth_b_key=func.pauth_b_key,
            personality=func.personality,
            lsda=func.lsda,
            invalid=invalid,
            anchor=anchor,
            directive_lines=tuple(zip(pcs, func.op_lines, strict=True)),
        )

    def _other_section(self, func: _Function, places: Sequence[tuple[int, int]]) -> None:
        """Raise the error for the first statement of ``func`` placed in another section
        than its ``.cfi_startproc``."""
        start = places[func.probe]
        for index in range(func.probe + 1, func.end):
            if places[index][0] != start[0]:
                raise Cfi2SframeError(
                    self.where(self.items[index].line),
                    f"CFI directive in section '{self._section(places[index][0])}' but the "
                    f"function started in '{self._section(start[0])}'",
                )
        raise Cfi2SframeError(self.where(self.items[func.end].line),
                              ".cfi_endproc in another section than its .cfi_startproc")

    def _name(self, place: tuple[int, int],
              func: _Function) -> tuple[str, tuple[str, int] | None]:
        """Name at the function start, and the symbol (with distance) to anchor it to.

        Among the symbols at the start, those whose label comes after the previous
        function (``func.region``) name it, a function symbol first, else the label
        nearest the ``.cfi_startproc``: an empty function's label and the next
        function's share an address.  Otherwise (and for the anchor: the closest
        symbol at or before the start in the same section) functions and globals
        are preferred among symbols at one address.
        """
        entries = self.by_place.get(place[0], [])
        cut = bisect.bisect_right(entries, (place[1], 99, "\uffff"))
        if cut == 0:
            return f"{self._section(place[0])}+{place[1]:#x}", None
        value = entries[cut - 1][0]
        first = bisect.bisect_left(entries, (value, -1, ""))
        _, _, name = entries[first]
        anchor = (name, place[1] - value)
        if value != place[1]:
            return f"{self._section(place[0])}+{place[1]:#x}", anchor
        if cut - first == 1:  # one symbol here: it names the function
            return name, anchor
        here = {entry_name: rank for _, rank, entry_name in entries[first:cut]}
        labels = labels_between(self.text, func.region, func.start.offset)
        near = [(here[label], -index, label) for index, label in enumerate(labels)
                if label in here]
        if near:
            name = min(near)[2]
        return name, anchor

    def _assignment_before(self, name: str, offset: int) -> str | None:
        """The expression last assigned to ``name`` before ``offset`` in the file."""
        if self._assignments is None:
            table: dict[str, list[tuple[int, str]]] = {}
            for item in find_assignments(self.text, self.arch.comment_chars):
                table.setdefault(item.name, []).append((item.offset, item.expr))
            self._assignments = table
        entries = self._assignments.get(name, [])
        cut = bisect.bisect_left(entries, (offset, ""))
        return entries[cut - 1][1] if cut else None

    def _value(self, tree: Arg, line: int) -> int:
        if type(tree) is Num:  # the common case, kept cheap
            return tree.value
        if not isinstance(tree, EXPRESSIONS):
            raise Cfi2SframeError(self.where(line), f"an expression is expected, not "
                                                    f"'{render(tree)}'")
        offset = self.offset

        def lookup(name: str, depth: int = 0) -> int | None:
            expr = self._assignment_before(name, offset)
            if expr is None or depth > 50:
                return None
            try:
                inner = parse_statement(".cfi_def_cfa_offset " + expr).args[0]
                if not isinstance(inner, EXPRESSIONS):
                    return None
                return evaluate(inner, lambda n: lookup(n, depth + 1))
            except SyntaxProblem:
                return None

        try:
            return evaluate(tree, lookup)
        except SyntaxProblem as exc:
            raise Cfi2SframeError(self.where(line), exc.message) from None

    def _reg(self, tree: Arg, line: int) -> int:
        if isinstance(tree, (Reg, Sym)):
            number = self.arch.registers.get(tree.name.lower())
            if number is not None:
                return number
            if isinstance(tree, Reg):
                raise Cfi2SframeError(self.where(line), f"unknown register '%{tree.name}'")
        value = self._value(tree, line)
        if value < 0:
            raise Cfi2SframeError(self.where(line), f"invalid register number {value}")
        return value

    def _lower(self, func: _Function, d: Directive, at: int, line: int) -> None:
        """Turn one directive (statement ``at``) into DWARF operations, as the assembler
        encodes it."""
        name, args = d.name, d.args

        def add(op: Op) -> None:
            func.ops.append((at, op))

        if name == "def_cfa":
            func.cfa_offset = self._value(args[1], line)
            add(ops.DefCfa(self._reg(args[0], line), func.cfa_offset, line))
        elif name == "def_cfa_register":
            add(ops.DefCfaRegister(self._reg(args[0], line), line))
        elif name in ("def_cfa_offset", "adjust_cfa_offset"):
            value = self._value(args[0], line)
            func.cfa_offset = value if name == "def_cfa_offset" else func.cfa_offset + value
            add(ops.DefCfaOffset(func.cfa_offset, line))
        elif name == "offset":
            add(ops.Offset(self._reg(args[0], line), self._value(args[1], line), line))
        elif name == "val_offset":
            add(ops.ValOffset(self._reg(args[0], line), self._value(args[1], line), line))
        elif name == "rel_offset":
            add(ops.Offset(self._reg(args[0], line),
                           self._value(args[1], line) - func.cfa_offset, line))
        elif name == "register":
            add(ops.Register(self._reg(args[0], line), self._reg(args[1], line), line))
        elif name in _REGISTER_LISTS:
            for reg in args:
                add(_REGISTER_LISTS[name](self._reg(reg, line), line))
        elif name == "remember_state":
            func.cfa_stack.append(func.cfa_offset)
            add(ops.RememberState(line))
        elif name == "restore_state":
            if func.cfa_stack:
                func.cfa_offset = func.cfa_stack.pop()
            add(ops.RestoreState(line))
        elif name == "return_column":
            func.ra_column = self._reg(args[0], line)
        elif name == "signal_frame":
            func.signal_frame = True
        elif name in ("window_save", "negate_ra_state"):
            add(ops.NegateRaState(line))
        elif name == "negate_ra_state_with_pc":
            add(ops.NegateRaStateWithPc(line))
        elif name == "b_key_frame":
            func.pauth_b_key = True
        elif name == "escape":
            self._escape(func, args, at, line)
        elif name == "personality":
            func.personality = render(args[1]) if args[1] is not None else None
        elif name == "lsda":
            func.lsda = render(args[1]) if args[1] is not None else None
        elif name == "val_encoded_addr":
            add(ops.ValExpression(self._reg(args[0], line), render(args[2]).encode(), line))
        # sections, mte_tagged_frame, personality_id, inline_lsda, fde_data and
        # label describe data beside the rules; they change no recovery rule.

    def _escape(self, func: _Function, items: Sequence[Arg], at: int, line: int) -> None:
        order: ByteOrder = "big" if self.arch.big_endian else "little"
        data = bytearray()
        for item in items:
            if not isinstance(item, EscapeItem):  # the grammar gives escape items only
                raise TypeError(f".cfi_escape operand {item!r}")
            kind, tree = item
            value = self._value(tree, line)
            if kind == "byte":
                data.append(value & 0xFF)
            elif kind == "sleb128":
                data += sleb(value)
            elif kind == "uleb128":
                data += uleb(value & ((1 << 64) - 1) if value < 0 else value)
            else:
                size = int(kind[4:])
                data += (value & ((1 << (8 * size)) - 1)).to_bytes(size, order)
        try:
            escaped = decode_ops(bytes(data), self.arch.code_alignment, self.arch.data_alignment,
                             self.arch.address_size, self.arch.big_endian, line)
        except DecodeError as exc:
            # Assemblers copy the bytes blindly; only this function's CFI is meaningless.
            if func.error is None:
                func.error = f"line {line}: .cfi_escape: {exc.message}"
            return
        for op in escaped:
            if isinstance(op, LOCATIONS):
                raise Cfi2SframeError(self.where(line),
                                      ".cfi_escape with a location advance is not supported")
            func.ops.append((at, op))


# Directives that take a list of registers, one operation each.
_REGISTER_LISTS: dict[str, type[ops.Restore | ops.Undefined | ops.SameValue]] = {
    "restore": ops.Restore, "undefined": ops.Undefined, "same_value": ops.SameValue}


def _symbols_by_place(symbols: Sequence[Symbol]) -> dict[int, list[tuple[int, int, str]]]:
    """Section index -> [(value, rank, name)] sorted; a lower rank is a better name
    (``symbols``: the source's own, without probe labels)."""
    table: dict[int, list[tuple[int, int, str]]] = {}
    for sym in symbols:
        if (not sym.name or sym.kind in (STT_SECTION, STT_FILE)
                or sym.shndx == SHN_UNDEF or sym.shndx >= SHN_LORESERVE
                or is_mapping_symbol(sym.name)):
            continue
        rank = 0 if sym.kind == STT_FUNC else (1 if sym.bind else 2)
        table.setdefault(sym.shndx, []).append((sym.value, rank, sym.name))
    for entries in table.values():
        entries.sort()
    return table
