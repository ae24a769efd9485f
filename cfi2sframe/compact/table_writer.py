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
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple

from ..arch import compact_flavour
from ..arch.base import Arch
from ..errors import Cfi2SframeError
from .table import COMPRESSED, HEADER, REGULAR, VERSION, Lookup
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
MAX_COMPRESSED = (PAGE_SIZE - 12) // 4  # 1021
MAX_REGULAR = (PAGE_SIZE - 8) // 8  # 511
OFFSET_REACH = 1 << 24  # a compressed entry's 24-bit function offset from the page's base
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
    arch = compact_flavour(arch)  # (the DWARF-mode word and the folding depend on it)
    if not functions:
        raise Cfi2SframeError(where, "no functions: an __unwind_info needs at least one")
    ordered = sorted(functions, key=lambda f: f.offset)
    for before, after in zip(ordered, ordered[1:], strict=False):
        if before.offset + before.length > after.offset:
            raise Cfi2SframeError(where, f"functions at {before.offset:#x} and "
                                         f"{after.offset:#x} overlap")
    end = max(f.offset + f.length for f in ordered)
    if end > 0xFFFFFFFF:
        raise Cfi2SframeError(where, f"a function ends at {end:#x}: past the 32-bit offsets "
                                     "of __unwind_info")
    final, personalities, notes = _final_encodings(ordered, arch, where)
    rows = _fold(ordered, final, arch)
    counts = Counter(encoding for _, encoding, _ in rows)
    common = [enc for enc, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
              if n > 1][:MAX_COMMON]
    pages = _pages(rows, common)
    data = _layout(rows, common, personalities, pages, end)
    _check(data, ordered, final, personalities, where)
    return BuiltTable(data, tuple(notes))


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
                raise Cfi2SframeError(where, f"function at {func.offset:#x} uses a fourth "
                                             "personality routine and has no FDE to be "
                                             "described by in DWARF mode")
            else:
                encoding = dwarf | _fde_offset(func, where)
                notes.append(f"function at {func.offset:#x}: DWARF mode (FDE at "
                             f"{func.fde_offset:#x}): its personality routine at "
                             f"{func.personality:#x} is the fourth or later, and the "
                             "encoding holds three")
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
        raise Cfi2SframeError(where, f"function at {func.offset:#x}: its FDE at "
                                     f"{func.fde_offset:#x} is past the 24 bits DWARF mode "
                                     "holds")
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


def _pages(rows: list[tuple[int, int, int | None]], common: list[int]) -> list[_Page]:
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
                        12 + 4 * (n + 1) + 4 * (len(local) + 1) > PAGE_SIZE:
                    break
                local.append(encoding)
            elif 12 + 4 * (n + 1) + 4 * len(local) > PAGE_SIZE:
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


def _layout(rows: list[tuple[int, int, int | None]], common: list[int],
            personalities: list[int], pages: list[_Page], end: int) -> bytes:
    lsdas = [(offset, lsda) for offset, _, lsda in rows if lsda is not None]
    common_at = HEADER.size
    person_at = common_at + 4 * len(common)
    index_at = person_at + 4 * len(personalities)
    lsda_at = index_at + 12 * (len(pages) + 1)
    page_at = lsda_at + 8 * len(lsdas)
    out = bytearray(HEADER.pack(VERSION, common_at, len(common), person_at,
                                len(personalities), index_at, len(pages) + 1))
    out += struct.pack(f"<{len(common)}I", *common)
    out += struct.pack(f"<{len(personalities)}I", *personalities)
    page_bytes = [_page_bytes(rows, page, common) for page in pages]
    lsda_index = 0
    at = page_at
    for page, blob in zip(pages, page_bytes, strict=True):
        out += struct.pack("<III", rows[page.first][0], at, lsda_at + 8 * lsda_index)
        lsda_index += sum(1 for offset, _, lsda in rows[page.first:page.first + page.size]
                          if lsda is not None)
        at += len(blob)
    out += struct.pack("<III", end, 0, lsda_at + 8 * len(lsdas))
    for offset, lsda in lsdas:
        out += struct.pack("<II", offset, lsda)
    for blob in page_bytes:
        out += blob
    return bytes(out)


def _page_bytes(rows: list[tuple[int, int, int | None]], page: _Page,
                common: list[int]) -> bytes:
    chosen = rows[page.first:page.first + page.size]
    if page.kind == REGULAR:
        return struct.pack("<IHH", REGULAR, 8, len(chosen)) + b"".join(
            struct.pack("<II", offset, encoding) for offset, encoding, _ in chosen)
    index = {enc: i for i, enc in enumerate(common)}
    index.update({enc: len(common) + i for i, enc in enumerate(page.local)})
    base = chosen[0][0]
    entries = b"".join(struct.pack("<I", (index[encoding] << 24) | (offset - base))
                       for offset, encoding, _ in chosen)
    header = struct.pack("<IHHHH", COMPRESSED, 12, len(chosen), 12 + len(entries),
                         len(page.local))
    return header + entries + struct.pack(f"<{len(page.local)}I", *page.local)


def _check(data: bytes, functions: list[TableFunction], final: list[int],
           personalities: list[int], where: str) -> None:
    """Every function found, with its encoding, personality and LSDA, at its first and
    its last byte, by libunwind's look-up: a table that fails is a bug of ours."""
    table = Lookup(data)
    for func, encoding in zip(functions, final, strict=True):
        slot = (encoding & PERSONALITY_MASK) >> PERSONALITY_SHIFT
        want = None if encoding == 0 else (  # 0: no unwind information, as libunwind reads it
            encoding, personalities[slot - 1] if slot else None,
            func.lsda if encoding & HAS_LSDA else None)
        for pc in {func.offset, func.offset + max(func.length - 1, 0)}:
            found = table.find(pc)
            got = None if found is None else (found.encoding, found.personality, found.lsda)
            if got != want:
                raise AssertionError(f"{where}: the table gives {got} at {pc:#x}, not "
                                     f"{want}")
