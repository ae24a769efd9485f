"""``__TEXT,__unwind_info``, the table a linker (or a JIT) builds from compact unwind
rows, read strictly (layouts from ``compact_unwind_encoding.h``; no container: a Mach-O
image's section bytes, or a JIT's in memory): header, common encodings,
personality routines, first-level index with its sentinel, LSDA index, regular and
compressed second-level pages.

Every offset and count is checked against the section before it is followed, and
each entry becomes one ``UnwindEntry`` with the function's image offset, the encoding
(a compressed page's index resolved), the personality routine's GOT slot and the LSDA,
as libunwind's look-up would find them.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable

from ..core import compiled
from ..errors import DecodeError
from ..typed import NamedTuple
from .layout import (
    COMPRESSED,
    COMPRESSED_ENTRY,
    COMPRESSED_PAGE,
    ENCODINGS,
    HEADER,
    INDEX_ENTRY,
    LSDA_ENTRY,
    PAGE_KIND,
    PERSONALITIES,
    REGULAR,
    REGULAR_ENTRY,
    VERSION,
    entry_encoding_index,
    entry_offset,
)
from .words import HAS_LSDA, PERSONALITY_MASK, PERSONALITY_SHIFT


class UnwindEntry(NamedTuple):
    """One function's row: its image offset, encoding, personality GOT slot (an image
    offset; None without one) and LSDA (an image offset; None without one)."""

    offset: int
    encoding: int
    personality: int | None
    lsda: int | None


class PageEntry(NamedTuple):
    """One second-level entry: the function's image offset, the index of its encoding
    (common encodings first, then the page's own; None on a regular page, which holds
    the encoding itself) and the encoding."""

    offset: int
    encoding_index: int | None
    encoding: int


class Page(NamedTuple):
    """A second-level page as stored: its kind, offset in the section, the first-level
    entry's function offset (a compressed page's base), its own encodings, its
    entries."""

    kind: str
    at: int
    base: int
    encodings: tuple[int, ...]
    entries: tuple[PageEntry, ...]


class UnwindInfo(NamedTuple):
    """A decoded table: its rows in address order, the first-level index's sentinel (the
    end of the last function it covers), the common encodings and personalities."""

    entries: tuple[UnwindEntry, ...]
    sentinel: int
    common: tuple[int, ...]
    personalities: tuple[int, ...]
    pages: tuple[tuple[str, int], ...]  # (regular/compressed, entries) per page
    # Where libunwind's look-up would not find what the table holds (a page entry
    # outside its index range, a sentinel before the last function, entries out of
    # order), in words: readable, but wrong.
    problems: tuple[str, ...] = ()
    # The table as stored, for dumps: the seven header words, the first-level index
    # (function offset, page offset, LSDA-index offset), the LSDA index (function
    # offset, LSDA offset) and the pages.
    header: tuple[int, ...] = ()
    first_level: tuple[tuple[int, int, int], ...] = ()
    lsda_index: tuple[tuple[int, int], ...] = ()
    page_details: tuple[Page, ...] = ()


def _need(data: bytes, at: int, size: int, what: str) -> None:
    if at < 0 or size < 0 or at + size > len(data):
        raise DecodeError(at, f"{what} runs past the end of __unwind_info ({len(data)} bytes)")


def index_order_problem(i: int, next_function: int, function: int) -> str:
    return (f"first-level index entry {i + 1} ({next_function:#x}) comes before entry {i} "
            f"({function:#x})")


def outside_problem(i: int, offset: int, function: int, next_function: int,
                    last: bool) -> str:
    return (f"page {i}: the function at offset {offset:#x} lies outside the page's index "
            f"range [{function:#x}, {next_function:#x}): libunwind's look-up does not find "
            "its row" + (" (the index's end, its sentinel, is not past the last function)"
                         if last else ""))


def entry_order_problem(i: int, offset: int, previous: int) -> str:
    return f"page {i}: the entry at {offset:#x} comes before the one at {previous:#x}"


# The problems by name, as the compiled core's listing reports them (name, numbers).
PROBLEMS: dict[str, Callable[..., str]] = {
    "index-order": index_order_problem, "outside": outside_problem,
    "entry-order": entry_order_problem}


def read_unwind_info(data: bytes) -> UnwindInfo:
    """Decode an ``__unwind_info`` section; ``DecodeError`` at the offset that is wrong."""
    _need(data, 0, HEADER.size, "the header")
    (version, common_at, common_count, person_at, person_count, index_at,
     index_count) = HEADER.unpack_from(data, 0)
    if version != VERSION:
        raise DecodeError(0, f"unknown __unwind_info version {version}")
    _need(data, common_at, ENCODINGS.size * common_count, f"{common_count} common encodings")
    _need(data, person_at, PERSONALITIES.size * person_count,
          f"{person_count} personality routines")
    _need(data, index_at, INDEX_ENTRY.size * index_count,
          f"{index_count} first-level index entries")
    if index_count == 0:
        raise DecodeError(index_at, "the first-level index is empty (it needs its sentinel)")
    common = ENCODINGS.unpack_from(data, common_at, common_count)
    personalities = PERSONALITIES.unpack_from(data, person_at, person_count)
    index = _index(data, index_at, index_count)
    first_lsda = index[0].lsda
    lsda_index = _lsda_index(data, index_at, first_lsda, index[-1].lsda)
    lsdas = dict(lsda_index)
    entries: list[UnwindEntry] = []
    pages: list[tuple[str, int]] = []
    details: list[Page] = []
    problems: list[str] = []
    slot_routine = (None, *personalities)  # a personality slot's routine (0: none)
    previous = -1  # the last entry's offset: none yet
    add, entry = entries.append, UnwindEntry
    for i, (function, page_at, _) in enumerate(index[:-1]):
        next_function = index[i + 1].function
        if next_function < function:
            problems.append(index_order_problem(i, next_function, function))
        page = _page(data, page_at, function, common, i)
        details.append(page)
        for offset, _, encoding in page.entries:
            if not function <= offset < next_function:
                problems.append(outside_problem(i, offset, function, next_function,
                                                i == len(index) - 2))
            if offset < previous:
                problems.append(entry_order_problem(i, offset, previous))
            previous = offset
            slot = (encoding & PERSONALITY_MASK) >> PERSONALITY_SHIFT
            lsda = lsdas.get(offset) if encoding & HAS_LSDA else None
            if slot >= len(slot_routine) or (encoding & HAS_LSDA and lsda is None):
                raise _entry_error(offset, slot, len(personalities), (i, page_at, first_lsda))
            add(entry(offset, encoding, slot_routine[slot], lsda))
        pages.append((page.kind, len(page.entries)))
    return UnwindInfo(tuple(entries), index[-1].function, tuple(common), tuple(personalities),
                      tuple(pages), tuple(problems), (version, common_at, common_count,
                                                      person_at, person_count, index_at,
                                                      index_count),
                      tuple((a, b, c) for a, b, c in index), tuple(lsda_index),
                      tuple(details))


class Columns(NamedTuple):
    """A table's entries as columns, each entry's offset, encoding, personality slot
    and LSDA as ``UnwindEntry`` holds them, with the sentinel and the problems: what
    ``verify`` and the builder read of a table, without a named tuple per entry (the
    tuples were a third of a 100k-function image's ``verify``)."""

    offsets: list[int]
    encodings: list[int]
    personalities: list[int | None]
    lsdas: list[int | None]
    sentinel: int
    problems: tuple[str, ...]


def read_columns(data: bytes) -> Columns:
    """``read_unwind_info``'s entries as ``Columns``, read by the compiled core
    (``unwind_info_entries``) where it is built; ``DecodeError`` where the table is
    malformed, from the Python reader, which says where."""
    core = compiled()
    found = core.unwind_info_entries(data) if core is not None else None
    if found is None:
        return columns_of(read_unwind_info(data))
    offsets, encodings, personalities, lsdas, sentinel, problems = found
    return Columns(offsets, encodings, personalities, lsdas, sentinel,
                   tuple(PROBLEMS[name](*numbers) for name, *numbers in problems))


def columns_of(table: UnwindInfo) -> Columns:
    """A decoded table's entries as columns (``unwind_info_entries``'s reference)."""
    offsets, encodings, personalities, lsdas = (
        [list(column) for column in zip(*table.entries, strict=True)] or [[], [], [], []])
    return Columns(offsets, encodings, personalities, lsdas, table.sentinel, table.problems)


def _entry_error(offset: int, slot: int, personalities: int,
                 where: tuple[int, int, int]) -> DecodeError:
    """What is wrong with a page entry: a personality past the table's, else HAS_LSDA
    with no LSDA index entry (``where``: the page's number and offset and the LSDA
    index's)."""
    number, page_at, first_lsda = where
    if slot > personalities:
        return DecodeError(page_at, f"page {number}: function {offset:#x} names personality "
                                    f"{slot} of {personalities}")
    return DecodeError(first_lsda, f"function {offset:#x} has HAS_LSDA but no LSDA index "
                                   "entry")


class IndexEntry(NamedTuple):
    """A first-level index entry: the offsets of its first function, its page and its
    part of the LSDA index."""

    function: int
    page: int
    lsda: int


def _index(data: bytes, at: int, count: int) -> list[IndexEntry]:
    """The first-level index, the sentinel last."""
    return [IndexEntry._make(INDEX_ENTRY.unpack_from(data, at + INDEX_ENTRY.size * i))
            for i in range(count)]


def _lsda_index(data: bytes, index_at: int, first: int, end: int) -> list[tuple[int, int]]:
    """The LSDA index's (function, LSDA) entries, from the first index entry's start
    to the sentinel's."""
    if end < first or (end - first) % LSDA_ENTRY.size:
        raise DecodeError(index_at + INDEX_ENTRY.offset("lsdaIndexArraySectionOffset"),
                          f"LSDA index [{first:#x}, {end:#x}) is not a whole number of "
                          f"{LSDA_ENTRY.size}-byte entries")
    _need(data, first, end - first, "the LSDA index")
    return list(LSDA_ENTRY.iter_unpack(data[first:end]))


def _page(data: bytes, at: int, base: int, common: tuple[int, ...],
          number: int) -> Page:
    """A second-level page, each entry's encoding resolved."""
    _need(data, at, PAGE_KIND.size, f"page {number}'s header")
    kind, entry_at, count = PAGE_KIND.unpack_from(data, at)
    if kind == REGULAR:
        _need(data, at + entry_at, REGULAR_ENTRY.size * count,
              f"page {number}'s {count} entries")
        first = at + entry_at
        pairs = REGULAR_ENTRY.iter_unpack(data[first:first + REGULAR_ENTRY.size * count])
        return Page("regular", at, base, (),
                    tuple(PageEntry(offset, None, encoding) for offset, encoding in pairs))
    if kind != COMPRESSED:
        raise DecodeError(at, f"page {number} is of unknown kind {kind}")
    return _compressed_page(data, at, base, common, number)


def _compressed_page(data: bytes, at: int, base: int, common: tuple[int, ...],
                     number: int) -> Page:
    """A compressed page, each entry's encoding index resolved against the common
    encodings, then the page's own."""
    _need(data, at, COMPRESSED_PAGE.size, f"page {number}'s header")
    _, entry_at, count, encodings_at, encodings_count = COMPRESSED_PAGE.unpack_from(data, at)
    _need(data, at + entry_at, COMPRESSED_ENTRY.size * count,
          f"page {number}'s {count} entries")
    _need(data, at + encodings_at, ENCODINGS.size * encodings_count,
          f"page {number}'s encodings")
    local = ENCODINGS.unpack_from(data, at + encodings_at, encodings_count)
    out = []
    for i, word in enumerate(COMPRESSED_ENTRY.unpack_from(data, at + entry_at, count)):
        which = entry_encoding_index(word)
        if which < len(common):
            encoding = common[which]
        elif which - len(common) < len(local):
            encoding = local[which - len(common)]
        else:
            raise DecodeError(at + entry_at + COMPRESSED_ENTRY.size * i,
                              f"page {number}: encoding index {which} past {len(common)} "
                              f"common and {len(local)} page encodings")
        out.append(PageEntry(base + entry_offset(word), which, encoding))
    return Page("compressed", at, base, tuple(local), tuple(out))


class Found(NamedTuple):
    """What a look-up finds for a PC: the row's function start (an image offset), its
    encoding, personality slot (an image offset) and LSDA."""

    start: int
    encoding: int
    personality: int | None
    lsda: int | None


def lookup(data: bytes, offset: int) -> Found | None:
    """The row libunwind's look-up finds for the image offset ``offset``: the
    first-level entry whose range [its start, the next entry's start) holds it (none at
    or past the sentinel), then the last page entry at or before it; None where there
    is none or its encoding is 0 (no unwind information).  Malformed tables raise
    ``DecodeError`` (``read_unwind_info`` says where).  For many look-ups in one table,
    ``Lookup(data).find`` reads each part once."""
    return Lookup(data).find(offset)


class Lookup:
    """Look-ups in one table: the header and index read once, each second-level page
    when first needed (its entries' function offsets and encodings)."""

    def __init__(self, data: bytes) -> None:
        (_, common_at, common_count, self.person_at, self.person_count, index_at,
         index_count) = HEADER.unpack_from(data, 0)
        self.data = data
        self.common = ENCODINGS.unpack_from(data, common_at, common_count)
        self.index = _index(data, index_at, index_count)
        self.starts = [entry.function for entry in self.index]
        self.pages: dict[int, tuple[list[int], list[int]]] = {}

    def _page(self, e: int) -> tuple[list[int], list[int]]:
        """Page ``e``'s (function offsets, encodings), in its order."""
        found = self.pages.get(e)
        if found is not None:
            return found
        data, page_at = self.data, self.index[e].page
        kind, entry_at, count = PAGE_KIND.unpack_from(data, page_at)
        if kind == REGULAR:
            pairs = [REGULAR_ENTRY.unpack_from(data, page_at + entry_at + REGULAR_ENTRY.size * i)
                     for i in range(count)]
            found = [p[0] for p in pairs], [p[1] for p in pairs]
        elif kind == COMPRESSED:
            found = self._compressed(e, page_at, entry_at, count)
        else:
            raise DecodeError(page_at, f"page {e} is of unknown kind {kind}")
        self.pages[e] = found
        return found

    def _compressed(self, e: int, page_at: int, entry_at: int,
                    count: int) -> tuple[list[int], list[int]]:
        """A compressed page's (function offsets, encodings)."""
        data = self.data
        encodings_at = COMPRESSED_PAGE.get(data, page_at, "encodingsPageOffset")
        local_count = COMPRESSED_PAGE.get(data, page_at, "encodingsCount")
        table = (*self.common, *ENCODINGS.unpack_from(data, page_at + encodings_at,
                                                      local_count))
        words = COMPRESSED_ENTRY.unpack_from(data, page_at + entry_at, count)
        base = self.starts[e]
        if words and entry_encoding_index(max(words)) >= len(table):
            raise DecodeError(page_at, f"page {e}: an encoding index past the "
                                       f"{len(table)} encodings")
        return ([base + entry_offset(w) for w in words],
                [table[entry_encoding_index(w)] for w in words])

    def find(self, offset: int) -> Found | None:
        """``lookup`` of ``offset`` in this table."""
        e = bisect_right(self.starts, offset) - 1
        if e < 0 or e >= len(self.index) - 1:
            return None  # before the first function, or at/after the sentinel
        offsets, encodings = self._page(e)
        i = bisect_right(offsets, offset) - 1
        if i < 0:
            return None
        return self._found(e, offsets[i], encodings[i])

    def rows_at(self, offsets: list[int]) -> list[tuple[int, int] | None]:
        """The (start, encoding) of the row ``find`` finds at each of ``offsets``, in
        one pass (no ``Found`` each: a table's own check asks at 200k offsets); None
        where ``find`` finds none.  The compiled core's ``unwind_info_rows`` where it is
        built, else (and where a page it needs is malformed) ``python_rows_at``."""
        core = compiled()
        found = core.unwind_info_rows(self.data, offsets) if core is not None else None
        return found if found is not None else self.python_rows_at(offsets)

    def python_rows_at(self, offsets: list[int]) -> list[tuple[int, int] | None]:
        """``rows_at`` in Python (``unwind_info_rows``'s reference)."""
        starts, last, page_of = self.starts, len(self.index) - 1, self._page
        out: list[tuple[int, int] | None] = []
        e_was, offsets_e, encodings_e = -1, [0], [0]
        for offset in offsets:
            e = bisect_right(starts, offset) - 1
            if e < 0 or e >= last:
                out.append(None)
                continue
            if e != e_was:
                (offsets_e, encodings_e), e_was = page_of(e), e
            i = bisect_right(offsets_e, offset) - 1
            out.append(None if i < 0 or encodings_e[i] == 0 else
                       (offsets_e[i], encodings_e[i]))
        return out

    def _found(self, e: int, start: int, encoding: int) -> Found | None:
        """The row at ``start`` of page ``e``, its personality and LSDA read; None for
        encoding 0."""
        if encoding == 0:
            return None
        data = self.data
        slot = (encoding & PERSONALITY_MASK) >> PERSONALITY_SHIFT
        personality = PERSONALITIES.unpack_from(
            data, self.person_at + PERSONALITIES.size * (slot - 1), 1)[0] \
            if 0 < slot <= self.person_count else None
        lsda = None
        if encoding & HAS_LSDA:
            for at in range(self.index[e].lsda, self.index[e + 1].lsda, LSDA_ENTRY.size):
                function, value = LSDA_ENTRY.unpack_from(data, at)
                if function == start:
                    lsda = value
                    break
        return Found(start, encoding, personality, lsda)
