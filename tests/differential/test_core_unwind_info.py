"""The compiled core's ``__unwind_info`` listing (``csrc/compact_listing.c``), column read
and look-ups (``csrc/compact_table.c``) against the Python reader, listing and look-up
they were written from (``compact/table.read_unwind_info``,
``compact/listing.unwind_info_lines``, ``compact/table.Lookup.python_rows_at``), which
stay the reference and the fallback.

Both must give the same text, character for character, on the images two linkers
wrote (zig's with personalities, LSDAs and DWARF-mode rows; ld64.lld-14's with regular
and compressed pages and its stale sentinel, a problem both name), and on tables and
symbol tables damaged at random: where the Python reader raises, the compiled one
gives None (and the command then runs the Python reader, which says where), and
nowhere else.  ``test_macho_checks`` holds the listing equal to llvm-objdump's with
whichever core the run picks (CI runs both)."""

from __future__ import annotations

import os
import struct
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cfi2sframe.compact.listing import unwind_info_lines, unwind_info_text
from cfi2sframe.compact.table import PROBLEMS, Columns, Lookup, columns_of, read_unwind_info
from cfi2sframe.errors import DecodeError
from cfi2sframe.macho.read import MachoView, Section, open_macho
from tests.conftest import compiled_core, require

from .test_macho import _dylib, _many_functions, _objects
from .test_macho_checks import zig_images  # noqa: F401  (a fixture)


def _python_text(view: MachoView) -> str | None:
    """The reference: None where the Python reader raises."""
    section = view.section("__TEXT", "__unwind_info")
    assert section is not None
    try:
        table = read_unwind_info(view.section_data(section))
    except DecodeError:
        return None
    return "".join(line + "\n" for line in unwind_info_lines(table, view))


def python_columns(view: MachoView) -> tuple[bytes, Columns | None]:
    """The image's ``__unwind_info`` and the Python reader's columns of it (None where
    that reader raises): what each compiled read is held against."""
    section = view.section("__TEXT", "__unwind_info")
    assert section is not None
    data = view.section_data(section)
    try:
        return data, columns_of(read_unwind_info(data))
    except DecodeError:
        return data, None


def _same_reads(view: MachoView, step: int = 1) -> bool:
    """The compiled column read (``unwind_info_entries``) gives the Python reader's
    columns, or None where it raises; the compiled look-up (``unwind_info_rows``) the
    Python one's rows at every entry, a byte before and after, and past the ends, or
    None where it raises (at every ``step``-th entry).  Whether the look-up answered."""
    core = compiled_core()
    data, reference = python_columns(view)
    found = core.unwind_info_entries(data)
    assert (found is None) == (reference is None)
    if found is not None and reference is not None:
        assert found[:5] == tuple(reference[:5])
        assert [PROBLEMS[name](*numbers) for name, *numbers in found[5]] == \
            list(reference.problems)
    offsets = sorted({o + d for o in (reference.offsets[::step] if reference else [0, 1 << 20])
                      for d in (-1, 0, 1) if o + d >= 0} | {0, 0xFFFFFFFF})
    rows = core.unwind_info_rows(data, offsets)
    try:
        python_rows = Lookup(data).python_rows_at(offsets)
    except (DecodeError, struct.error):
        assert rows is None
        return False
    assert rows == python_rows
    return True


@pytest.fixture(scope="module")
def lld_images(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """ld64.lld-14's C++ dylibs, an executable of 1200 functions with 500 distinct
    encodings (regular pages) and one of 3000 with four (compressed pages, and lld's
    sentinel taken before _main)."""
    require("ld64.lld-14", "llvm-mc")
    folder = tmp_path_factory.mktemp("lld")
    objects = _objects(folder)
    return [_dylib(objects, "x86_64"), _dylib(objects, "arm64"),
            _many_functions(folder, 1200, True), _many_functions(folder, 3000, False)]


def test_the_same_listing_on_images_two_linkers_wrote(
        zig_images: dict[str, Path], lld_images: list[Path]) -> None:  # noqa: F811
    core = compiled_core()
    problems = 0
    for image in [*zig_images.values(), *lld_images]:
        view = open_macho(image.read_bytes())
        ours = unwind_info_text(view, core)
        assert ours is not None and ours == _python_text(view), image.name
        assert _same_reads(view), image.name
        problems += ours.count("\n  problem: ")
    assert problems >= 1  # lld's stale sentinel, named by both


def test_the_command_prints_the_same_with_either_core(lld_images: list[Path],
                                                      tmp_path: Path) -> None:
    compiled_core()
    image = str(lld_images[-1])
    outputs = []
    for which in ("", "python"):
        env = {**os.environ, "CFI2SFRAME_CORE": which}
        proc = subprocess.run(["cfi2sframe", "dump", image], capture_output=True, text=True,
                              env=env, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        outputs.append(proc.stdout)
    assert outputs[0] == outputs[1] and "problem: " in outputs[0]


@pytest.fixture(scope="module", params=["compressed", "regular"])
def small_image(lld_images: list[Path], request: pytest.FixtureRequest) -> bytes:
    """The x86-64 dylib (compressed pages, a personality, an LSDA) and the executable
    of 1200 functions (regular pages)."""
    return lld_images[0 if request.param == "compressed" else 2].read_bytes()


def _damaged(data: bytes, start: int, writes: list[tuple[int, int]]) -> MachoView:
    out = bytearray(data)
    for at, value in writes:
        out[start + at] = value
    return open_macho(bytes(out))


@settings(max_examples=400, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_none_exactly_where_the_python_reader_raises(small_image: bytes,
                                                     data: st.DataObject) -> None:
    """Random bytes written into the table: the same text, or None and an error."""
    section = open_macho(small_image).section("__TEXT", "__unwind_info")
    assert section is not None
    writes = data.draw(st.lists(st.tuples(st.integers(0, section.size - 1),
                                          st.integers(0, 255)), min_size=1, max_size=6))
    damaged = _damaged(small_image, section.offset, writes)
    assert unwind_info_text(damaged, compiled_core()) == _python_text(damaged)
    _same_reads(damaged, 50)


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_same_names_from_a_damaged_symbol_table(small_image: bytes,
                                                    data: st.DataObject) -> None:
    """Bytes written into the symbol and string tables (types, global bits, values,
    names cut short or not UTF-8): each function named as the Python reader names it."""
    symoff, nsyms, stroff, strsize = open_macho(small_image).symtab
    start = min(symoff, stroff)
    size = max(symoff + 16 * nsyms, stroff + strsize) - start
    byte = st.sampled_from([0, 1, 0x0E, 0x0F, 0x1F, 0x80, 0xC3, 0xFF])
    writes = data.draw(st.lists(st.tuples(st.integers(0, size - 1), byte), min_size=1,
                                max_size=12))
    damaged = _damaged(small_image, start, writes)
    assert unwind_info_text(damaged, compiled_core()) == _python_text(damaged)


def _fields(table: bytes) -> list[tuple[int, int]]:
    """(offset, size) of every header, index and page-header field of a table."""
    header = struct.unpack_from("<7I", table, 0)
    index_at, index_count = header[5], header[6]
    out = [(4 * i, 4) for i in range(7)]
    out += [(index_at + 4 * i, 4) for i in range(3 * index_count)]
    for e in range(index_count - 1):
        page_at = struct.unpack_from("<I", table, index_at + 12 * e + 4)[0]
        out += [(page_at, 4), (page_at + 4, 2), (page_at + 6, 2), (page_at + 8, 2),
                (page_at + 10, 2)]
    return out


class _Padded(MachoView):
    """A view whose section bytes are followed by zeros in memory (not in the
    section): a read past a section's end then gives zeros, not what the heap holds,
    and a missing bounds check shows as text where the Python reader raises."""

    def section_data(self, section: Section) -> bytes:
        return memoryview(super().section_data(section) + bytes(1 << 16))[:section.size]


def _padded(view: MachoView) -> _Padded:
    return _Padded(view.data, view.cputype, view.filetype, view.sections, view.symtab,
                   view.segments, view.pointer_size)


def test_every_field_of_the_tables_structure_damaged(small_image: bytes) -> None:
    """Each header, index and page-header field set to values that cross its bounds
    (random writes seldom hit them): the same text, or None and an error."""
    core = compiled_core()
    section = open_macho(small_image).section("__TEXT", "__unwind_info")
    assert section is not None
    table = small_image[section.offset:section.offset + section.size]
    nones = 0
    for at, size in _fields(table):
        old = int.from_bytes(table[at:at + size], "little")
        top = (1 << 8 * size) - 1
        # values near the table's end, and counts that just reach or pass it
        ends = {len(table) - k for k in (1, 4, 8, 10, 12)}
        ends |= {(len(table) - at) // k + d for k in (1, 2, 4, 8, 12) for d in (-1, 0, 1)}
        for value in {0, 1, 2, 3, (old + 1) & top, (old - 1) & top, old + 8 & top,
                      old * 2 & top, top, top >> 1} | {v & top for v in ends}:
            writes = list(enumerate(value.to_bytes(size, "little"), at))
            view = _damaged(small_image, section.offset, writes)
            damaged = _padded(view)
            ours = unwind_info_text(damaged, core)
            assert ours == _python_text(view), (at, size, value)
            _same_reads(damaged, 50)
            nones += ours is None
    assert nones > 50
    # a compressed page whose header (12 bytes) the table's end cuts after 8
    index_at = struct.unpack_from("<I", table, 20)[0]
    for cut in (8, 10, 11, 12):
        page_at = len(table) - cut
        writes = [*enumerate(page_at.to_bytes(4, "little"), index_at + 4),
                  *enumerate(struct.pack("<IHH", 3, 0, 0), page_at)]
        view = _damaged(small_image, section.offset, writes)
        damaged = _padded(view)
        ours = unwind_info_text(damaged, core)
        assert ours == _python_text(view) and (ours is None) == (cut < 12), cut


def test_addresses_past_2_64(lld_images: list[Path]) -> None:
    """An image base near 2**64: offsets added to it run past 64 bits (Python's numbers
    do not wrap; the compiled listing must not either)."""
    core = compiled_core()
    data = bytearray(lld_images[2].read_bytes())
    text_segment = data.find(b"__TEXT\0")
    wrapped = 0
    for base in (0xFFFFFFFF00000000, 0xFFFFFFFFFFFFF000, 0xFFFFFFFFFFFFFFFF):
        struct.pack_into("<Q", data, text_segment + 16, base)  # segname, then vmaddr
        view = open_macho(bytes(data))
        assert view.image_base == base
        ours = unwind_info_text(view, core)
        assert ours is not None and ours == _python_text(view), hex(base)
        wrapped += ours.count("pc+0x1")
    assert wrapped > 1000


def test_a_global_name_before_a_local_one_at_the_same_address(
        lld_images: list[Path]) -> None:
    """Two symbols at one function: the global one names it wherever it comes in the
    file (the Python reader's rule), not the first."""
    core = compiled_core()
    data = bytearray(lld_images[2].read_bytes())
    view = open_macho(bytes(data))
    symoff, _, _, _ = view.symtab
    functions = [i for i, s in enumerate(view.symbols)
                 if s.defined_in_section and s.name.startswith("_f")]
    first, second = functions[10], functions[20]
    data[symoff + 16 * first + 4] = 0x0E  # N_SECT, local
    data[symoff + 16 * second + 4] = 0x0F  # N_SECT | N_EXT
    data[symoff + 16 * first + 8:symoff + 16 * first + 16] = \
        data[symoff + 16 * second + 8:symoff + 16 * second + 16]  # the same value
    damaged = open_macho(bytes(data))
    ours = unwind_info_text(damaged, core)
    assert ours is not None and ours == _python_text(damaged)
    assert f"  {damaged.symbols[second].name}: " in ours
    assert f"  {damaged.symbols[first].name}: " not in ours


def test_the_compiled_numbers_are_the_readers() -> None:
    """The Mach-O symbol numbers csrc/compact_listing.c reads the names with are those of
    macho/read.py (its ``__unwind_info`` numbers are unwind_info.h's, bound in
    test_core_constants.py)."""
    from cfi2sframe.macho import read

    assert compiled_core().UNWIND_INFO == {
        "N_STAB": read.N_STAB, "N_TYPE": read.N_TYPE, "N_SECT": read.N_SECT,
        "N_EXT": read.N_EXT}
