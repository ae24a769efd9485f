"""Compact unwind for an assembly file or an ELF object: timelines plus code bytes.

The code bytes come from the assembled object (for ``.s`` input, the probe
object the assembler wrote; for ELF input, the file), so STACK_IND's
``sub $imm32, %rsp`` is found where it really is.

``compact_file`` takes any input; Mach-O files take ``compact_macho`` (from
``__eh_frame``) and ``from_prologues`` (an object's rows without an FDE, from the code;
a Darwin object's rows named by the function at their start).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from itertools import accumulate
from operator import sub

from ..arch import arch_for_machine, as_arch, get_arch
from ..arch.base import Arch
from ..dwarf.cfi import Cfi, RowsCache
from ..elf.read import address_reader, elf_arch, open_elf
from ..errors import Cfi2SframeError, decoding
from ..kinds import Kind, refuse_unreadable
from ..macho.read import MH_MAGIC, MH_MAGIC_64, MH_OBJECT, MachoView, open_macho
from ..macho.unwind import (
    ObjectRow,
    cie_personalities,
    compact_unwind_rows,
    eh_frame,
    native_numbers,
    with_encodings,
)
from ..model import Timeline
from ..reasons import CompactReason, Unrepresentable
from ..spawn import on_path
from ..typed import TYPE_CHECKING
from .lower import (
    CompactFunction,
    FunctionTail,
    LowerMemo,
    lower_alike,
    lower_compact,
    shape_tail,
)
from .rules import Code
from .words import ARM64_DWARF, HAS_LSDA, MODE_MASK, PERSONALITY_MASK, X86_DWARF, is_dwarf

_new_tuple = tuple.__new__
if TYPE_CHECKING:  # (the __unwind_info table modules load for an image's table only)
    from .table import Columns, UnwindInfo
    from .table_writer import FunctionColumns, TableFunction


def compact_arch(arch_name: str, where: str) -> str:
    """``x86_64``, ``i386`` or ``arm64``: the compact unwind flavour of an architecture."""
    name = get_arch(arch_name).compact
    if name is None:
        raise Cfi2SframeError(where, f"compact unwind is defined for x86-64, i386 and arm64, not "
                                     f"{arch_name}")
    return name


def compact_functions(timelines: tuple[Timeline, ...], obj: bytes, arch: str,
                      ranges: bool = False, linked: bool = False) -> list[CompactFunction]:
    """Lower every timeline; ``obj`` is the ELF file holding their code."""
    code_of = _code_reader(obj, linked)
    memo = LowerMemo()
    return [lower_alike(timeline, arch, code_of(timeline), ranges, memo)
            for timeline in timelines]


def compact_cfi(cfi: Cfi, obj: bytes, arch: str, ranges: bool = False,
                linked: bool = False, keep: list[object] | None = None
                ) -> list[CompactFunction]:
    """``compact_functions`` of every FDE of ``cfi``: a function whose shape's answer
    is known, or reads no code, takes it without a ``Timeline`` or its code read
    (``lower.shape_tail``, ``lowered_alike``'s).  ``keep``: a list the caller holds
    until its process ends (``cli.entry``), given the loop's rows and answers rather
    than freeing them one by one at return (libLLVM-14: 476k rows, 6% of ``compact
    --check``'s instructions)."""
    code_of = _code_reader(obj, linked)
    memo = LowerMemo()
    cache: RowsCache = {}
    # (CIE offset, body, size) -> the answer after its start, where its rows depend on
    # no more (``cache`` kept them) and no encoding reads the code: most of a library's
    # FDEs repeat one, which then costs no rows look-up or key of them.
    tails: dict[tuple[int, bytes, int], FunctionTail] = {}
    out = []
    for fde in cfi.fdes:
        # (unpacked once: a named field is a descriptor's look-up each, 6 per FDE)
        name, section, start, size, _, cie_at, body, _, _, _ = fde
        shape = (cie_at, body, size)
        tail = tails.get(shape)
        if tail is None:
            rows, invalid = cfi.rows(fde, cache)
            tail = None if ranges else shape_tail(  # (an ELF timeline names no LSDA)
                size, rows, invalid, arch, memo)
            if tail is None:
                timeline = cfi.placed(fde, rows, invalid)
                out.append(lower_alike(timeline, arch, code_of(timeline), ranges, memo))
                continue
            if (cie_at, body) in cache:
                tails[shape] = tail
        # (the record from its fields: its class's ``__new__`` is a Python function;
        # the tuple joined, not unpacked into a list made a tuple)
        out.append(_new_tuple(CompactFunction, (name, section, start) + tail))
    if keep is not None:
        keep.append((cache, memo, tails))
    return out


def _code_reader(obj: bytes, linked: bool) -> Callable[[Timeline], Code | None]:
    """A function's code in the ELF file ``obj`` (None without a file): by address
    where ``linked``, else by offset in its section."""
    view = open_elf(obj, "object") if obj else None
    at_address = address_reader(view) if view is not None and linked else None
    section_bytes: dict[str, bytes] = {}

    def code_of(timeline: Timeline) -> Code | None:
        if view is None:
            return None
        if at_address is not None:
            found = at_address(timeline.start, timeline.size)
            return Code(found) if found is not None else None
        data = section_bytes.get(timeline.section)
        if data is None:
            data = section_bytes[timeline.section] = view.section_data(timeline.section)
        return Code(data[timeline.start:timeline.start + timeline.size])

    return code_of


def compact_asm(text: str, filename: str = "<input>", arch: str | Arch = "x86_64",
                assembler: str | None = None, ranges: bool = False) -> list[CompactFunction]:
    """Compact rows for every function of an assembly file (``arch``: an ``Arch`` or its
    name): per function ``rows[0].encoding``, or DWARF mode with ``reason``/``detail``.
    Assembly for an Apple target is assembled as Mach-O (``darwin_assembler``)."""
    return compact_asm_rows(text, filename, arch, assembler, ranges)[0]


def compact_asm_rows(text: str, filename: str = "<input>", arch: str | Arch = "x86_64",
                     assembler: str | None = None, ranges: bool = False
                     ) -> tuple[list[CompactFunction], list[ObjectRow] | None]:
    """``compact_asm``, and for assembly the assembler wrote as Mach-O, the rows of its
    own ``__LD,__compact_unwind`` (LLVM's encoder: what the rows here are compared
    with); None for ELF."""
    from ..frontend.macho_probe import darwin_text
    from ..frontend.probe import Assembler
    from ..frontend.timelines import parse_asm

    arch = as_arch(arch)
    flavour = compact_arch(arch.name, filename)
    command = assembler or arch.default_assembler
    darwin = assembler is None and darwin_text(text)
    if darwin:
        if arch.darwin_assembler is None:
            raise Cfi2SframeError(filename, f"assembly for an Apple target: no Mach-O "
                                            f"assembler is known for {arch.name}")
        command = arch.darwin_assembler
        if not on_path(command.split()[0]):
            raise Cfi2SframeError(filename, "assembly for an Apple target needs an assembler "
                                            "that writes Mach-O: install LLVM (apt-get "
                                            "install llvm) for llvm-mc, or name one with "
                                            "--assembler (e.g. 'clang -c -x assembler "
                                            "-target x86_64-apple-macosx10.15')")
    # (Mach-O has no FDE for most functions: probes place them)
    unit, _ = parse_asm(text, filename, arch, Assembler.from_string(command), probes=darwin)
    if int.from_bytes(unit.obj[:4], "little") not in (MH_MAGIC, MH_MAGIC_64):
        return compact_functions(unit.timelines, unit.obj, flavour, ranges), None

    with decoding(filename, "assembler output"):
        view = open_macho(unit.obj)
        rows = compact_unwind_rows(view)
    addresses = {f"{s.segment},{s.name}": s.addr for s in view.sections}
    functions = []
    for timeline in unit.timelines:
        found = view.bytes_at(addresses.get(timeline.section, 0) + timeline.start,
                        timeline.size)
        functions.append(lower_compact(timeline, flavour,
                                       Code(found) if found is not None else None, ranges))
    # The rows give object addresses, the functions here offsets in their sections.
    def placed(address: int) -> tuple[str, int]:
        holder = next((sec for sec in view.sections
                       if sec.addr <= address < sec.addr + max(sec.size, 1)), None)
        if holder is None:
            return "", address
        return f"{holder.segment},{holder.name}", address - holder.addr

    # A row's start is relocated against whichever symbol llvm-mc finds there (a
    # section's ltmp0, a probe label): named here by the function that starts there.
    names = {(func.section, func.start): func.name for func in functions}
    return functions, [row._replace(start=placed(row.start)[1],
                                    name=names.get(placed(row.start), row.name))
                       for row in rows]


def compact_elf(path: str, data: bytes, ranges: bool = False,
                keep: list[object] | None = None) -> list[CompactFunction]:
    """Compact rows for every FDE of an ELF file (object, library or program); ``keep``
    as ``compact_cfi``'s."""
    from ..elf.cfi import read_elf_cfi

    cfi = read_elf_cfi(path, data)
    arch = arch_for_machine(cfi.machine, path, cfi.big_endian)
    flavour = compact_arch(arch.name, path)
    return compact_cfi(cfi, data, flavour, ranges, linked=cfi.elf_type != "ET_REL",
                       keep=keep)


def compact_macho(path: str, data: bytes, arch_name: str | None = None,
                  ranges: bool = False) -> tuple[Arch, list[CompactFunction],
                                                 list[ObjectRow], MachoView]:
    """Compact rows computed from a Mach-O file's ``__eh_frame`` (x86-64 objects have an
    FDE per function; arm64 objects from clang have none), and the rows the file's own
    ``__LD,__compact_unwind`` holds, as its compiler wrote them.  ``arch_name`` picks
    the slice of a universal file (``x86_64`` or ``aarch64``/``arm64``)."""
    slice_arch = None if arch_name is None else ("arm64" if arch_name in ("aarch64", "arm64")
                                                 else arch_name)  # i386, x86_64
    with decoding(path, "Mach-O file"):
        view = open_macho(data, slice_arch)
        rows = compact_unwind_rows(view)
        # An image's __eh_frame is not read: ld64.lld 14 copies it unrelocated, so its FDE
        # starts are wrong there; an image's table is __unwind_info (``unwind_table``).
        cfi = eh_frame(view, path) if view.filetype == MH_OBJECT else None
    arch = _target(view)
    flavour = compact_arch(arch.name, path)
    functions = []
    memo = LowerMemo()
    for darwin in (cfi.timelines if cfi is not None else ()):
        timeline = native_numbers(darwin, view.arch)  # i386: esp and ebp swapped back
        found = view.bytes_at(timeline.start, timeline.size)
        functions.append(lower_alike(timeline, flavour,
                                     Code(found) if found is not None else None, ranges, memo))
    return arch, functions, rows, view


def from_prologues(view: MachoView, rows: list[ObjectRow], functions: list[CompactFunction]
                   ) -> dict[int, int | Unrepresentable[CompactReason]]:
    """An object's rows that no function computed from CFI covers (``functions``: an
    object's, at object addresses), each start with the encoding of what its code
    builds (``prologue.prologue_encoding``) or why none; rows where nothing was read
    are left out."""
    from .prologue import prologue_encoding

    arch = _target(view)
    covered = covering(functions)
    out: dict[int, int | Unrepresentable[CompactReason]] = {}
    for row in rows:
        code = view.bytes_at(row.start, row.length)
        if code is None or covered(row.start):
            continue
        found = prologue_encoding(code, arch)
        if found is not None:
            out[row.start] = found
    return out


def covering(functions: list[CompactFunction]) -> Callable[[int], bool]:
    """Whether an address is inside one of ``functions`` (an empty one covers its
    start).  Asked per row of an object's table: some function that starts at or
    before the address ends after it, the largest end among those that start by then
    found by bisection (functions may overlap), not every function asked per row."""
    spans = sorted((func.start, func.start + max(func.size, 1)) for func in functions)
    starts = [lo for lo, _ in spans]
    ends = list(accumulate((hi for _, hi in spans), max))

    def covered(address: int) -> bool:
        before = bisect_right(starts, address)
        return before > 0 and ends[before - 1] > address

    return covered


def _target(view: MachoView) -> Arch:
    """The target of a Mach-O file's CPU (its compact flavour's ``Arch``)."""
    return get_arch({"x86_64": "x86_64", "arm64": "aarch64", "i386": "i386"}[view.arch])


def unwind_table(path: str, view: MachoView) -> UnwindInfo | None:
    """An image's ``__TEXT,__unwind_info``, decoded (None without one)."""
    section = view.section("__TEXT", "__unwind_info")
    if section is None:
        return None
    from .table import read_unwind_info

    with decoding(path, "__unwind_info"):
        return read_unwind_info(view.section_data(section))


def unwind_columns(path: str, view: MachoView) -> Columns | None:
    """``unwind_table``'s entries as columns (None without the section)."""
    section = view.section("__TEXT", "__unwind_info")
    if section is None:
        return None
    from .table import read_columns

    with decoding(path, "__unwind_info"):
        return read_columns(view.section_data(section))


def function_ends(view: MachoView, table: Columns) -> list[int]:
    """Where each of a table's functions ends: at the next entry, the last at the end of
    the code section holding it (a linker's sentinel may stop short of it)."""
    offsets = table.offsets
    ends = offsets[1:]
    if offsets:
        base, last = view.image_base, offsets[-1]
        holder = next((s for s in view.sections if s.addr <= base + last < s.addr + s.size),
                      None)
        ends.append(max(table.sentinel, holder.addr + holder.size - base if holder else 0,
                        last))
    return ends


def image_functions(view: MachoView, table: Columns) -> list[TableFunction]:
    """An image's functions as its ``__unwind_info`` gives them, each running to
    ``function_ends``, with the FDE offset a DWARF-mode encoding holds."""
    from .table_writer import TableFunction

    return [TableFunction(*f) for f in zip(*image_columns(view, table), strict=True)]


def image_columns(view: MachoView, table: Columns) -> FunctionColumns:
    """``image_functions`` as columns (no object per function: what the builder takes
    from an image)."""
    from .table_writer import FunctionColumns

    dwarf = ARM64_DWARF if view.arch == "arm64" else X86_DWARF
    offsets, encodings = table.offsets, table.encodings
    return FunctionColumns(
        offsets, list(map(sub, function_ends(view, table), offsets)), encodings,
        table.personalities, table.lsdas,
        [encoding & 0xFFFFFF if encoding & MODE_MASK == dwarf else None
         for encoding in encodings])


def macho_object_with_ours(path: str, data: bytes, arch_name: str | None = None,
                           ranges: bool = False) -> tuple[bytes, list[str]]:
    """A Mach-O object (``--in-place``) with the encodings computed here from its own
    ``__eh_frame`` in its ``__LD,__compact_unwind`` rows; what changed, in words.  An
    object without rows gets the section (``macho.write``); with ``ranges``, one row
    per CFI state replaces each function's row."""
    arch, functions, rows, view = compact_macho(path, data, arch_name, ranges)
    if view.filetype != MH_OBJECT:
        raise Cfi2SframeError(path, "--in-place rewrites a Mach-O object's __compact_unwind "
                                    "rows; an image's table is its linker's")
    if not functions:
        raise Cfi2SframeError(path, "the object has no __eh_frame: no DWARF CFI to compute "
                                    "its encodings from (clang writes none for arm64)")
    with decoding(path, "Mach-O file"):
        if rows and not ranges:
            # Each function here was read from an FDE of the object, at its address.
            return _with_ours(view, rows, functions, arch, path, {f.start for f in functions})
        return _with_new_rows(view, rows, functions, arch, path)


def _with_new_rows(view: MachoView, rows: list[ObjectRow], functions: list[CompactFunction],
                   arch: Arch, where: str) -> tuple[bytes, list[str]]:
    """``view`` laid out again with a ``__compact_unwind`` of our rows (every row of each
    function: one, or one per state with ``--ranges``), each function's personality and
    LSDA from the object's own row for it, else the LSDA from its FDE.  A function in
    DWARF mode as a whole gets no row, as LLVM writes none: the linker takes its FDE; a
    function with a personality routine and no row of the object's own gets its
    routine from the relocation of its CIE's personality field."""
    from ..macho.write import NewRow, with_compact_unwind

    flavour = compact_arch(arch.name, where)
    cfi = eh_frame(view, where)
    fde_lsda = {fde.start: fde.lsda for fde in cfi.fdes} if cfi is not None else {}
    fdes = {fde.start: fde for fde in cfi.fdes} if cfi is not None else {}
    routines = cie_personalities(view, {fde.cie_at for fde in fdes.values()})
    own = {row.start: row for row in rows}
    symbol_index: dict[str, int] = {}
    for i, symbol in enumerate(view.symbols):
        symbol_index.setdefault(symbol.name, i)
    new: list[NewRow] = []
    notes: list[str] = []
    for func in functions:
        mine = own.get(func.start)
        if not func.rows or (len(func.rows) == 1 and is_dwarf(func.rows[0].encoding, flavour)):
            notes.append(f"'{func.name}': no row (DWARF mode: the linker takes its FDE)")
            continue
        personality = None
        lsda = fde_lsda.get(func.start)
        if mine is not None:
            lsda = mine.lsda
            if mine.personality is not None:
                personality = symbol_index.get(mine.personality)
                if personality is None:
                    raise Cfi2SframeError(where, f"'{func.name}': its personality "
                                                 f"'{mine.personality}' is no symbol of "
                                                 "the object")
        elif func.start in fdes and fdes[func.start].cie.personality:
            personality = routines.get(fdes[func.start].cie_at)
            if personality is None:
                notes.append(f"'{func.name}': no row (no relocation names its personality "
                             "routine: the linker takes its FDE)")
                continue
        for row in func.rows:
            encoding = row.encoding | (HAS_LSDA if lsda else 0)
            new.append(NewRow(func.start + row.start, row.length, encoding, personality,
                              lsda))
    notes.insert(0, f"__compact_unwind written with {len(new)} rows for "
                    f"{len(functions)} functions (the object had {len(rows)})")
    return with_compact_unwind(view, sorted(new)), notes  # in address order, as LLVM


def _with_ours(view: MachoView, rows: list[ObjectRow], functions: list[CompactFunction],
               arch: Arch, where: str, fdes: set[int] | None = None) -> tuple[bytes, list[str]]:
    """``view`` with the encodings of ``functions`` (by object address) in its rows, the
    rows' own personality and LSDA bits kept; a function in DWARF mode here needs an
    FDE in the object (``fdes``: their starts, when the caller has read them)."""
    if fdes is None:
        cfi = eh_frame(view, where)
        fdes = {fde.start for fde in cfi.fdes} if cfi is not None else set()
    addresses = {f"{s.segment},{s.name}": s.addr for s in view.sections}
    ours = {addresses.get(f.section, 0) + f.start: f for f in functions}
    flavour = compact_arch(arch.name, where)
    changed: dict[int, int] = {}
    notes = []
    for row in rows:
        func = ours.get(row.start)
        if func is None or len(func.rows) != 1:
            continue
        mine = func.rows[0].encoding
        if is_dwarf(mine, flavour) and not is_dwarf(row.encoding, flavour) \
                and row.start not in fdes:
            raise Cfi2SframeError(where, f"'{row.name}' needs DWARF mode ({func.reason}), "
                                         "but the object has no FDE for it")
        new = (mine & ~(HAS_LSDA | PERSONALITY_MASK)) | (row.encoding & (HAS_LSDA |
                                                                        PERSONALITY_MASK))
        if new != row.encoding:
            changed[row.start] = new
            notes.append(f"'{row.name}': {new:#010x} for the object's {row.encoding:#010x}")
    return with_encodings(view, changed), notes


def darwin_object(text: str, filename: str, arch: Arch, assembler: str | None,
                  functions: list[CompactFunction],
                  ranges: bool = False) -> tuple[bytes, list[str]]:
    """The Mach-O object of assembly for an Apple target with the encodings computed here
    in its ``__LD,__compact_unwind`` rows (the assembler's own personality and LSDA bits
    kept), and what was changed, in words.  A function computed here in DWARF mode needs
    an FDE in the object's ``__eh_frame``, which LLVM writes only for its own DWARF-mode
    functions: without one it is a one-line error."""
    from ..frontend.probe import Assembler

    assert arch.darwin_assembler is not None
    obj, _ = Assembler.from_string(assembler or arch.darwin_assembler).run(text, filename,
                                                                           ".")
    with decoding(filename, "assembler output"):
        view = open_macho(obj)
        rows = compact_unwind_rows(view)
        if rows and not ranges:
            return _with_ours(view, rows, functions, arch, filename)
        # The functions here are offsets in their sections; the rows' are addresses.
        addresses = {f"{s.segment},{s.name}": s.addr for s in view.sections}
        placed = [f._replace(start=addresses.get(f.section, 0) + f.start) for f in functions]
        return _with_new_rows(view, rows, placed, arch, filename)


def compact_file(source: str, data: bytes, arch: str | Arch = "x86_64",
                 assembler: str | None = None, ranges: bool = False,
                 kind: Kind | None = None, keep: list[object] | None = None
                 ) -> tuple[Arch, list[CompactFunction]]:
    """Any input -> compact rows and its target: an ELF file (its target is its own) or
    assembly for ``arch`` (an ``Arch`` or its name), as ``kind`` says (told from the
    bytes when not given); other kinds are refused in one line.  ``keep``: as
    ``compact_cfi``'s, for an ELF file."""
    kind = refuse_unreadable(source, data, kind)
    if kind == Kind.sframe:
        raise Cfi2SframeError(source, "a raw SFrame section: compact unwind is computed "
                                      "from DWARF CFI (assembly or an ELF file)")
    if kind == Kind.elf:
        functions = compact_elf(source, data, ranges, keep)
        return elf_arch(source, data), functions
    target = as_arch(arch)
    functions = compact_asm(data.decode("utf-8", "surrogateescape"), source, target,
                            assembler, ranges)
    return target, functions


def placed_functions(objects: list[tuple[str, bytes, int]], image_base: int,
                     personalities: dict[str, int],
                     sections: dict[tuple[str, str], int] | None = None,
                     ) -> tuple[list[TableFunction], list[str]]:
    """The functions of Mach-O objects as a linker or JIT places them, for
    ``build_unwind_info``: each object's whole address space at its address (a
    function at object address A of an object placed at P is at P + A; its LSDA
    likewise), except the sections placed one by one (``sections``: (object path,
    ``SEGMENT,SECTION``) -> the address of the section's start, as a linker puts
    ``__gcc_except_tab`` apart from ``__text``); its ``__compact_unwind`` rows as
    they are (``compact --in-place`` gives them our encodings first); each
    personality routine by name at the address of the pointer to it in
    ``personalities``.  Functions with no row are
    named in a note (a linker takes their FDEs); a DWARF-mode row is an error: its
    FDE's offset in the image's ``__eh_frame`` is the linker's to know."""
    from .table_writer import TableFunction

    out: list[TableFunction] = []
    notes: list[str] = []
    arch = None
    for path, data, address in objects:
        with decoding(path, "Mach-O file"):
            view = open_macho(data)
            rows = compact_unwind_rows(view)
            cfi = eh_frame(view, path)
        if view.filetype != MH_OBJECT:
            raise Cfi2SframeError(path, "not an object: an image's table is built from "
                                        "the image (compact IMAGE --emit unwind-info)")
        if arch is not None and view.arch != arch:
            raise Cfi2SframeError(path, f"a {view.arch} object among {arch} ones")
        arch = view.arch
        moved = {(s.addr, s.addr + max(s.size, 1)): at - s.addr
                 for (where, name), at in (sections or {}).items() if where == path
                 for s in view.sections if f"{s.segment},{s.name}" == name}
        named = {name for where, name in (sections or {}) if where == path}
        missing = named - {f"{s.segment},{s.name}" for s in view.sections}
        if missing:
            raise Cfi2SframeError(path, f"no section {sorted(missing)[0]} to place")

        def placed(object_address: int, base: int = address,
                   moved: dict[tuple[int, int], int] = moved) -> int:
            """Where an address of this object lands."""
            for (lo, hi), shift in moved.items():
                if lo <= object_address < hi:
                    return object_address + shift
            return base + object_address

        starts = {row.start for row in rows}
        lacking = [fde.name for fde in (cfi.fdes if cfi is not None else ())
                   if fde.start not in starts]
        if lacking:
            notes.append(f"{path}: {len(lacking)} functions have no __compact_unwind row "
                         f"(a linker takes their FDEs): {', '.join(lacking[:5])}")
        for row in rows:
            where = f"'{row.name}' of {path}"
            if is_dwarf(row.encoding, view.arch):
                raise Cfi2SframeError(path, f"{where} is in DWARF mode: its FDE's offset "
                                            "in the image's __eh_frame is the linker's to "
                                            "know")
            slot = None
            if row.personality is not None:
                if row.personality not in personalities:
                    raise Cfi2SframeError(path, f"{where} uses the personality routine "
                                                f"'{row.personality}': say where the "
                                                "pointer to it is (--personality "
                                                f"{row.personality}=ADDR)")
                slot = personalities[row.personality] - image_base
            start = placed(row.start) - image_base
            if start < 0:
                raise Cfi2SframeError(path, f"{where} lies below the image base "
                                            f"{image_base:#x}")
            out.append(TableFunction(start, row.length, row.encoding, slot,
                                     None if row.lsda is None else
                                     placed(row.lsda) - image_base))
    return out, notes
