"""``__unwind_info`` built from the functions of an image, as a linker or a JIT needs it:
every format limit checked, at most three personality routines (the functions of a
fourth and later one in DWARF mode, each named), the first-level index ending past the
last function, and the whole table looked up (``table.lookup``, libunwind's rules) at
every function's first and last byte before it is returned.

The layout follows ``compact_unwind_encoding.h``: header, common encodings,
personality routines, first-level index (one entry per second-level page, then the
sentinel), LSDA index, second-level pages.  A page is compressed (4 bytes an entry,
encodings by index) while it can be; where a compressed page would stop early
(more than 256 encodings on it, or a function past its 24-bit reach) a regular page
(8 bytes an entry) takes up to 511 entries.

``build_unwind_info`` lays the table out in two steps (``_plan``: every part's offset
from the pages' sizes, then the bytes); a function with the encoding of the one before
it and no LSDA shares that one's row (``_fold``).  Where the compiled core is built,
``csrc/table_writer.c`` does all of it over columns (``FunctionColumns``: an image's
table read without an object per function, ``build_from_columns``), this Python its
reference and fallback; the check of the bytes stays the reader's either way.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from operator import gt
from types import ModuleType

from ..arch import compact_flavour
from ..arch.base import Arch
from ..core import compiled
from ..errors import Cfi2SframeError
from ..typed import NamedTuple
from .layout import (
    COMPRESSED,
    COMPRESSED_ENTRY,
    COMPRESSED_PAGE,
    ENCODINGS,
    ENTRY_FUNC_OFFSET_BITS,
    HEADER,
    INDEX_ENTRY,
    LSDA_ENTRY,
    PERSONALITIES,
    REGULAR,
    REGULAR_ENTRY,
    REGULAR_PAGE,
    VERSION,
    compressed_entry,
)
from .table import Lookup
from .words import (
    ARM64_DWARF,
    HAS_LSDA,
    MODE_MASK,
    PERSONALITY_MASK,
    PERSONALITY_SHIFT,
    X86_DWARF,
    X86_STACK_IND,
)

PAGE_SIZE = 4096
MAX_COMMON = 127  # the common encodings' indices leave room for page-local ones
MAX_INDEX = 256  # a compressed entry's 8-bit encoding index
MAX_COMPRESSED = (PAGE_SIZE - COMPRESSED_PAGE.size) // COMPRESSED_ENTRY.size  # 1021
MAX_REGULAR = (PAGE_SIZE - REGULAR_PAGE.size) // REGULAR_ENTRY.size  # 511
# A compressed page's entries and own encodings are words of the same size, so what
# fits is a count of words (the page filler counts them, row by row).
assert COMPRESSED_ENTRY.size == ENCODINGS.size
OFFSET_REACH = 1 << ENTRY_FUNC_OFFSET_BITS  # a compressed entry's reach from the page's base
MAX_PERSONALITIES = 3  # the encoding's 2-bit personality index
DWARF_OFFSET_MASK = 0x00FFFFFF


class TableFunction(NamedTuple):
    """A function of the image: start and length (image offsets), its compact encoding
    (personality and LSDA bits are the table's to set), the image offset of its
    personality routine's pointer and of its LSDA, and where its FDE is in
    ``__eh_frame`` (what DWARF mode points at)."""

    offset: int
    length: int
    encoding: int
    personality: int | None = None
    lsda: int | None = None
    fde_offset: int | None = None


class FunctionColumns(NamedTuple):
    """``TableFunction``'s fields as columns, item ``i`` of each one function's: what
    an image's table gives without an object per function
    (``compact/inputs.image_columns``) and the compiled builder takes."""

    offsets: list[int]
    lengths: list[int]
    encodings: list[int]
    personalities: list[int | None]
    lsdas: list[int | None]
    fde_offsets: list[int | None]


class BuiltTable(NamedTuple):
    """The section's bytes and, in words, each function the table describes otherwise
    than it was given (a personality past the third: DWARF mode)."""

    data: bytes
    notes: tuple[str, ...]


def build_unwind_info(functions: Sequence[TableFunction], arch: str | Arch,
                      where: str = "<unwind_info>") -> BuiltTable:
    """The ``__unwind_info`` for ``functions`` (``arch``: ``x86_64``, ``i386`` or
    ``arm64``, or an ``Arch`` of one; ``ValueError`` for any other, as ``get_arch``);
    a one-line error for input no table can hold."""
    return build_from_columns(_columns(functions), arch, where)


def build_from_columns(columns: FunctionColumns, arch: str | Arch,
                       where: str = "<unwind_info>") -> BuiltTable:
    """``build_unwind_info`` of functions given as columns."""
    arch = compact_flavour(arch)  # (the DWARF-mode word and the folding depend on it)
    if not columns.offsets:
        raise Cfi2SframeError(where, "no functions: an __unwind_info needs at least one")
    core = compiled()
    if core is not None:
        built = _compiled_build(core, columns, arch, where)
        if built is not None:
            return built
    functions = [TableFunction(*f) for f in zip(*columns, strict=True)]
    return _build(sorted(functions, key=lambda f: f.offset), arch, where)


def _compiled_build(core: ModuleType, columns: FunctionColumns, arch: str,
                    where: str) -> BuiltTable | None:
    """``_build`` by ``csrc/table_writer.c``: None where it leaves the input to Python
    (a number past 32 bits)."""
    offsets = columns.offsets
    if any(map(gt, offsets, offsets[1:])):  # sorted as _build sorts them (stable)
        order = sorted(range(len(offsets)), key=offsets.__getitem__)
        columns = FunctionColumns._make([column[i] for i in order] for column in columns)
    found = core.unwind_info_build(
        *columns, dwarf=ARM64_DWARF if arch == "arm64" else X86_DWARF,
        stack_ind=-1 if arch == "arm64" else X86_STACK_IND, max_common=MAX_COMMON,
        max_index=MAX_INDEX, max_compressed=MAX_COMPRESSED, max_regular=MAX_REGULAR,
        max_personalities=MAX_PERSONALITIES, reach=OFFSET_REACH, fde_mask=DWARF_OFFSET_MASK)
    if found is None:
        return None
    if len(found) == 2:  # input no table holds, said in _build's words
        what, number = found
        if what == "end":
            raise _past_end(where, number)
        if what == "overlap":
            raise _overlap(where, columns.offsets[number], columns.offsets[number + 1])
        raise (_fourth if what == "fourth" else _far_fde)(where, _function(columns, number))
    data, final, personalities, noted = found
    misses = core.unwind_info_misses(data, columns.offsets, columns.lengths, final)
    _check(data, columns, final, personalities, where, misses)
    return BuiltTable(data, tuple(_dwarf_note(_function(columns, i)) for i in noted))


def _columns(functions: Sequence[TableFunction]) -> FunctionColumns:
    """Functions as columns (``FunctionColumns``: one list per field)."""
    if not functions:
        return FunctionColumns([], [], [], [], [], [])
    return FunctionColumns._make([*column] for column in zip(*functions, strict=True))


def _function(columns: FunctionColumns, i: int) -> TableFunction:
    return TableFunction._make(column[i] for column in columns)


def _build(ordered: list[TableFunction], arch: str, where: str) -> BuiltTable:
    """The table of functions sorted by offset, in Python (``table_writer.c``'s
    reference)."""
    for before, after in zip(ordered, ordered[1:], strict=False):
        if before.offset + before.length > after.offset:
            raise _overlap(where, before.offset, after.offset)
    end = max(f.offset + f.length for f in ordered)
    if end > 0xFFFFFFFF:
        raise _past_end(where, end)
    final, personalities, notes = _final_encodings(ordered, arch, where)
    rows = _fold(ordered, final, arch)
    counts = Counter(encoding for _, encoding, _ in rows)
    common = [enc for enc, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
              if n > 1][:MAX_COMMON]
    pages = _pages(rows, common)
    data = _layout(rows, common, personalities, pages, end)
    _check(data, _columns(ordered), final, personalities, where, None)
    return BuiltTable(data, tuple(notes))


def _overlap(where: str, first: int, second: int) -> Cfi2SframeError:
    return Cfi2SframeError(where, f"functions at {first:#x} and {second:#x} overlap")


def _past_end(where: str, end: int) -> Cfi2SframeError:
    return Cfi2SframeError(where, f"a function ends at {end:#x}: past the 32-bit offsets "
                                  "of __unwind_info")


def _fourth(where: str, func: TableFunction) -> Cfi2SframeError:
    return Cfi2SframeError(where, f"function at {func.offset:#x} uses a fourth "
                                  "personality routine and has no FDE to be described "
                                  "by in DWARF mode")


def _far_fde(where: str, func: TableFunction) -> Cfi2SframeError:
    return Cfi2SframeError(where, f"function at {func.offset:#x}: its FDE at "
                                  f"{func.fde_offset:#x} is past the 24 bits DWARF mode "
                                  "holds")


def _dwarf_note(func: TableFunction) -> str:
    assert func.fde_offset is not None and func.personality is not None
    return (f"function at {func.offset:#x}: DWARF mode (FDE at {func.fde_offset:#x}): its "
            f"personality routine at {func.personality:#x} is the fourth or later, and the "
            "encoding holds three")


def _final_encodings(functions: list[TableFunction], arch: str,
                     where: str) -> tuple[list[int], list[int], list[str]]:
    """Each function's encoding with its personality index and LSDA bit; the table's
    personality routines; what was changed, in words."""
    dwarf = ARM64_DWARF if arch == "arm64" else X86_DWARF
    personalities: list[int] = []
    notes: list[str] = []
    out = []
    for func in functions:
        encoding = func.encoding & ~(PERSONALITY_MASK | HAS_LSDA)
        slot = 0
        if func.personality is not None:
            if func.personality not in personalities and len(personalities) < \
                    MAX_PERSONALITIES:
                personalities.append(func.personality)
            if func.personality in personalities:
                slot = personalities.index(func.personality) + 1
            elif func.fde_offset is None:
                raise _fourth(where, func)
            else:
                encoding = dwarf | _fde_offset(func, where)
                notes.append(_dwarf_note(func))
        if encoding & MODE_MASK == dwarf and func.fde_offset is not None:
            encoding = dwarf | _fde_offset(func, where)
        if slot:
            encoding |= slot << PERSONALITY_SHIFT
        # Also in DWARF mode, where libunwind takes the LSDA from the FDE: readers of
        # the table alone (profilers, llvm-objdump) see it, as zig's and Apple's
        # linkers write it.
        if func.lsda is not None:
            encoding |= HAS_LSDA
        out.append(encoding)
    return out, personalities, notes


def _fde_offset(func: TableFunction, where: str) -> int:
    assert func.fde_offset is not None
    if func.fde_offset > DWARF_OFFSET_MASK:
        raise _far_fde(where, func)
    return func.fde_offset


def _fold(functions: list[TableFunction], final: list[int],
          arch: str) -> list[tuple[int, int, int | None]]:
    """(offset, encoding, LSDA) rows: a function with the encoding of the one before it
    and no LSDA (neither has one) is covered by that one's row (an entry runs to the
    next), except x86 STACK_IND, which reads its function's own code."""
    rows: list[tuple[int, int, int | None]] = []
    for func, encoding in zip(functions, final, strict=True):
        stack_ind = arch != "arm64" and encoding & MODE_MASK == X86_STACK_IND
        if rows and rows[-1][1] == encoding and func.lsda is None and rows[-1][2] is None \
                and not stack_ind:
            continue
        rows.append((func.offset, encoding, func.lsda if encoding & HAS_LSDA else None))
    return rows


class _Page(NamedTuple):
    kind: int
    first: int  # index of its first row
    size: int  # how many rows
    local: tuple[int, ...]  # a compressed page's own encodings


def _page_size(page: _Page) -> int:
    """A page's bytes: header, entries, a compressed page's own encodings."""
    if page.kind == REGULAR:
        return REGULAR_PAGE.size + REGULAR_ENTRY.size * page.size
    return COMPRESSED_PAGE.size + COMPRESSED_ENTRY.size * page.size + \
        ENCODINGS.size * len(page.local)


def _pages(rows: list[tuple[int, int, int | None]], common: list[int]) -> list[_Page]:
    """The second-level pages: compressed while one can hold the rows, else regular."""
    index = {enc: i for i, enc in enumerate(common)}
    pages = []
    i = 0
    while i < len(rows):
        base = rows[i][0]
        local: list[int] = []
        n = 0
        while i + n < len(rows) and n < MAX_COMPRESSED:
            offset, encoding, _ = rows[i + n]
            if offset - base >= OFFSET_REACH:
                break
            if encoding not in index and encoding not in local:
                if len(common) + len(local) >= MAX_INDEX or \
                        n + 1 + len(local) + 1 > MAX_COMPRESSED:  # words on the page
                    break
                local.append(encoding)
            elif n + 1 + len(local) > MAX_COMPRESSED:
                break
            n += 1
        if i + n < len(rows) and n < MAX_REGULAR:
            take = min(MAX_REGULAR, len(rows) - i)
            pages.append(_Page(REGULAR, i, take, ()))
            i += take
        else:
            pages.append(_Page(COMPRESSED, i, n, tuple(local)))
            i += n
    return pages


class _Plan(NamedTuple):
    """Where each part of the table goes (section offsets), before it is written."""

    common_at: int
    person_at: int
    index_at: int
    lsda_at: int
    page_at: tuple[int, ...]  # each page's
    lsda_first: tuple[int, ...]  # each page's first LSDA index entry, then the end's
    size: int


def _plan(rows: list[tuple[int, int, int | None]], common: list[int],
          personalities: list[int], pages: list[_Page]) -> _Plan:
    """Header, common encodings, personalities, first-level index (a page's entry,
    then the sentinel), LSDA index and pages, in that order."""
    common_at = HEADER.size
    person_at = common_at + ENCODINGS.size * len(common)
    index_at = person_at + PERSONALITIES.size * len(personalities)
    lsda_at = index_at + INDEX_ENTRY.size * (len(pages) + 1)
    lsda_first = [0]
    for page in pages:
        lsda_first.append(lsda_first[-1] + sum(
            lsda is not None for _, _, lsda in rows[page.first:page.first + page.size]))
    page_at = []
    at = lsda_at + LSDA_ENTRY.size * lsda_first[-1]
    for page in pages:
        page_at.append(at)
        at += _page_size(page)
    return _Plan(common_at, person_at, index_at, lsda_at, tuple(page_at), tuple(lsda_first),
                 at)


def _layout(rows: list[tuple[int, int, int | None]], common: list[int],
            personalities: list[int], pages: list[_Page], end: int) -> bytes:
    """The table's bytes, as ``_plan`` places them."""
    plan = _plan(rows, common, personalities, pages)
    out = bytearray(HEADER.pack(VERSION, plan.common_at, len(common), plan.person_at,
                                len(personalities), plan.index_at, len(pages) + 1))
    out += ENCODINGS.pack(common)
    out += PERSONALITIES.pack(personalities)
    for page, page_at, lsda_first in zip(pages, plan.page_at, plan.lsda_first[:-1], strict=True):
        out += INDEX_ENTRY.pack(rows[page.first][0], page_at,
                                plan.lsda_at + LSDA_ENTRY.size * lsda_first)
    out += INDEX_ENTRY.pack(end, 0, plan.lsda_at + LSDA_ENTRY.size * plan.lsda_first[-1])
    for offset, _, lsda in rows:
        if lsda is not None:
            out += LSDA_ENTRY.pack(offset, lsda)
    for page in pages:
        out += _page_bytes(rows, page, common)
    assert len(out) == plan.size, (len(out), plan.size)
    return bytes(out)


def _page_bytes(rows: list[tuple[int, int, int | None]], page: _Page,
                common: list[int]) -> bytes:
    chosen = rows[page.first:page.first + page.size]
    if page.kind == REGULAR:
        return REGULAR_PAGE.pack(REGULAR, REGULAR_PAGE.size, len(chosen)) + b"".join(
            REGULAR_ENTRY.pack(offset, encoding) for offset, encoding, _ in chosen)
    index = {enc: i for i, enc in enumerate(common)}
    index.update({enc: len(common) + i for i, enc in enumerate(page.local)})
    base = chosen[0][0]
    entries_at = COMPRESSED_PAGE.size
    encodings_at = entries_at + COMPRESSED_ENTRY.size * len(chosen)
    header = COMPRESSED_PAGE.pack(COMPRESSED, entries_at, len(chosen), encodings_at,
                                  len(page.local))
    return header + COMPRESSED_ENTRY.pack(
        [compressed_entry(offset - base, index[encoding]) for offset, encoding, _ in chosen]
    ) + ENCODINGS.pack(page.local)


def _check(data: bytes, columns: FunctionColumns, final: list[int],
           personalities: list[int], where: str, misses: list[int] | None) -> None:
    """Every function found, with its encoding, personality and LSDA, at its first and
    its last byte, by libunwind's look-up: a table that fails is a bug of ours, save
    for a function of no byte (empty, or ending before it starts: a damaged image's
    table gives them), which no look-up can find: said as what is wrong with the
    input.  ``misses``: ``unwind_info_misses``'s answer, or None (``_misses`` then
    finds them); those are read as libunwind reads them."""
    table = Lookup(data)
    if misses is None:
        misses = _misses(table, columns, final)
    pcs = [pc for k in misses for pc in _ends(columns.offsets[k], columns.lengths[k])]
    rows = table.rows_at(pcs)
    flags = PERSONALITY_MASK | HAS_LSDA
    for n, k in enumerate(misses):
        offset, encoding, lsda = columns.offsets[k], final[k], columns.lsdas[k]
        slot = (encoding & PERSONALITY_MASK) >> PERSONALITY_SHIFT
        want = None if encoding == 0 else (  # 0: no unwind information, as libunwind reads it
            encoding, personalities[slot - 1] if slot else None,
            lsda if encoding & HAS_LSDA else None)
        for pc, row in zip(pcs[2 * n:2 * n + 2], rows[2 * n:2 * n + 2], strict=True):
            if row is None:
                found_row: tuple[int, int | None, int | None] | None = None
            elif row[1] & flags:  # read as libunwind does
                found = table.find(pc)
                found_row = None if found is None else (found.encoding, found.personality,
                                                        found.lsda)
            else:  # neither a personality nor an LSDA to read
                found_row = (row[1], None, None)
            if found_row != want and columns.lengths[k] <= 0:
                raise _unfindable(where, offset, columns.lengths[k])
            if found_row != want:
                raise AssertionError(f"{where}: the table gives {found_row} at {pc:#x}, not "
                                     f"{want}")


def _unfindable(where: str, offset: int, length: int) -> Cfi2SframeError:
    """A function with no byte the table could be asked for: the input's fault."""
    if length < 0:
        return Cfi2SframeError(where, f"the function at {offset:#x} ends before it starts "
                                      f"(length {length}): no look-up can find its row")
    return Cfi2SframeError(where, f"the function at {offset:#x} is empty (length 0) and "
                                  "starts where another function starts or where the "
                                  "table ends: no look-up can find its row")


def _ends(offset: int, length: int) -> tuple[int, int]:
    """A function's first and last byte (an empty one's start, twice)."""
    return offset, offset + length - 1 if length > 0 else offset


def _misses(table: Lookup, columns: FunctionColumns, final: list[int]) -> list[int]:
    """The functions whose first or last byte the look-up does not give their encoding,
    or whose encoding names a personality or an LSDA (``unwind_info_misses``'s
    reference)."""
    pcs = [pc for offset, length in zip(columns.offsets, columns.lengths, strict=True)
           for pc in _ends(offset, length)]
    got = [0 if row is None else row[1] for row in table.rows_at(pcs)]  # 0: no row
    flags = PERSONALITY_MASK | HAS_LSDA
    return [k for k, (encoding, first, last) in enumerate(zip(
            final, got[::2], got[1::2], strict=True))
            if encoding & flags or first != encoding or last != encoding]
