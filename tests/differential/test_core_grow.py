"""The compiled check of a grown table's relocations (``csrc/elf_grow.c``) against
``elf/grow._rela_refers``'s columns, which it was written from and which stay the
reference.

On the allocated RELA sections of real libraries of three targets (x86-64 and AArch64
little-endian, s390x big-endian; RELATIVE, IRELATIVE and symbol relocations), for
spans that hold one relocation's place, one symbol-less addend, one symbol's value
plus its addend, the bytes just beside each, the spans ``find_room`` checks, and
random ones, both give the same answer; and again with those sections' and their
symbol tables' bytes damaged at random (symbol indices past the table, undefined
symbols, addends and places anywhere)."""

from __future__ import annotations

import mmap
import random
from array import array
from itertools import islice

import pytest

from cfi2sframe.elf import grow
from cfi2sframe.elf.read import ElfView, Section, open_elf
from cfi2sframe.typed import cast
from tests.conftest import at_least, compiled_core, require_path

LIBRARIES = ("/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/aarch64-linux-gnu/lib/libc.so.6",
             "/usr/s390x-linux-gnu/lib/libc.so.6")


def _library(path: str) -> ElfView:
    require_path(path)
    with open(path, "rb") as handle:
        return open_elf(handle.read(), path)


def _relas(view: ElfView) -> list[Section]:
    return [s for s in view.sections if s.kind == grow.SHT_RELA and s.flags & grow.SHF_ALLOC
            and s.size]


def _spans(view: ElfView, section: Section, rng: random.Random) -> list[range]:
    """Spans that hold exactly one address the section makes, those beside it, and
    random ones."""
    words = array("q", grow._whole(view.data, section.offset, section.size, 24))
    if not view.little_endian:
        words.byteswap()
    places, infos, addends = words[0::3], words[1::3], words[2::3]
    values = grow._symbol_values(view, section.link)
    picks = [places[0], places[-1], *rng.sample(list(places), min(5, len(places)))]
    picks += list(islice((a for i, a in zip(infos, addends, strict=True)
                          if not (i & 0xFFFFFFFF00000000)), 5))
    picks += list(islice((values[(i >> 32) & 0xFFFFFFFF] + a for i, a in
                          zip(infos, addends, strict=True)
                          if (i >> 32) & 0xFFFFFFFF in values), 5))
    spans = [range(v, v + 1) for v in picks if v >= 0]
    spans += [range(v + 1, v + 2) for v in picks if v >= 0] + [range(max(v, 1) - 1, max(v, 1) - 1)
                                                               for v in picks]
    top = max(places)
    spans += [range(a, a + rng.randrange(1, 1 << 16)) for a in
              (rng.randrange(top + 1) for _ in range(10))]
    return spans


def _same(view: ElfView, spans: list[range]) -> int:
    core = compiled_core()
    compared = 0
    for section in _relas(view):
        for span in spans:
            ours = grow._rela_refers(view, section, span, core)
            assert ours == grow._rela_refers(view, section, span, None), (section.name, span)
            compared += 1
    return compared


@pytest.mark.parametrize("path", LIBRARIES)
def test_the_same_answer_on_real_libraries(path: str) -> None:
    view = _library(path)
    rng = random.Random(path)
    assert _relas(view), "no RELA section to compare"
    spans = [span for section in _relas(view) for span in _spans(view, section, rng)]
    answers = {grow._rela_refers(view, s, span, None) for s in _relas(view) for span in spans}
    assert answers == {True, False}, "the spans must hit and miss"
    at_least(f"spans of {path}", _same(view, spans), 100)


@pytest.mark.parametrize("path", LIBRARIES[::2])  # both byte orders
def test_the_same_answer_on_damaged_tables(path: str) -> None:
    view = _library(path)
    rng = random.Random(path)
    spans = rng.sample([span for section in _relas(view)
                        for span in _spans(view, section, rng)], 16)
    tables = [(s.offset, s.size) for s in _relas(view)]
    tables += [(view.sections[s.link].offset, view.sections[s.link].size)
               for s in _relas(view) if 0 < s.link < len(view.sections)]
    compared = 0
    for _ in range(5):
        damaged = bytearray(view.data)
        for offset, size in tables:
            for _ in range(max(1, size // 64)):
                at = offset + rng.randrange(size)
                damaged[at] = rng.choice((0, 0xFF, rng.randrange(256)))
        compared += _same(open_elf(bytes(damaged), path), spans)
    at_least(f"damaged spans of {path}", compared, 80)


@pytest.mark.parametrize("path", LIBRARIES[::2])  # both byte orders
def test_a_mapped_file_read_in_place_and_let_go(path: str) -> None:
    """The compiled check reads a mapped file's tables where they are (no copy), and
    keeps no view of them: the map closes after it (an export left would refuse)."""
    require_path(path)
    view = _library(path)
    spans = _spans(view, _relas(view)[0], random.Random(path))
    expected = [grow._rela_refers(view, s, span, None) for s in _relas(view) for span in spans]
    with open(path, "rb") as handle:
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    on_map = view._replace(data=cast("bytes", mapped))
    try:
        got = [grow._rela_refers(on_map, s, span, compiled_core()) for s in _relas(view)
               for span in spans]
    finally:
        mapped.close()  # BufferError where a view of the map were kept
    assert got == expected
    assert True in got and False in got
