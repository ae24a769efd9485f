"""The compiled ``__unwind_info`` writer (``csrc/table_writer.c``'s ``unwind_info_build``)
and the builder's compiled check (``csrc/compact_table.c``'s ``unwind_info_misses``)
against the Python builder they were written from (``compact/table_writer._build`` and
``_misses``), which stays the reference and the fallback.

Both must give the same bytes, notes and errors on the images two linkers wrote
(zig's with personalities, LSDAs and DWARF-mode rows; ld64.lld-14's with regular and
compressed pages), on the benchmark's image of 10k functions, and on function lists
built to fool a writer: pages that end at exactly the entries a page holds, 127 and
128 common encodings, a compressed page given up for a regular one by its 256
encodings or its offsets' 24-bit reach, personalities past the third, LSDAs, x86
STACK_IND, input no table can hold.  And ``compact --emit unwind-info`` of a damaged
image says what is wrong in one line (exit 1), never an internal error."""

from __future__ import annotations

import contextlib
import io
import random
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from cfi2sframe.cli import main
from cfi2sframe.compact import table_writer
from cfi2sframe.compact.inputs import image_columns, unwind_columns
from cfi2sframe.compact.table import Lookup
from cfi2sframe.compact.table_writer import (
    MAX_COMMON,
    MAX_COMPRESSED,
    MAX_REGULAR,
    OFFSET_REACH,
    BuiltTable,
    FunctionColumns,
    TableFunction,
)
from cfi2sframe.compact.words import ARM64_DWARF, X86_DWARF, X86_RBP_FRAME, X86_STACK_IND
from cfi2sframe.errors import Cfi2SframeError
from cfi2sframe.macho.read import open_macho
from tests.conftest import compiled_core

from .test_core_unwind_info import lld_images  # noqa: F401  (a fixture)
from .test_macho_checks import zig_images  # noqa: F401  (a fixture)

ROOT = Path(__file__).resolve().parents[2]


def _both(functions: list[TableFunction], arch: str) -> tuple[object, object]:
    """The compiled build and the Python one of ``functions``: a ``BuiltTable``, or the
    error's text."""
    core = compiled_core()
    columns = FunctionColumns(*([*column] for column in zip(*functions, strict=True)))
    answers: list[object] = []
    for build in (lambda: table_writer._compiled_build(core, columns, arch, "t"),
                  lambda: table_writer._build(sorted(functions, key=lambda f: f.offset),
                                              arch, "t")):
        try:
            answers.append(build())
        except Cfi2SframeError as exc:
            answers.append(str(exc))
    return answers[0], answers[1]


def _same(functions: list[TableFunction], arch: str = "x86_64") -> object:
    compiled, python = _both(functions, arch)
    assert compiled is not None, "the compiled writer left it to Python"
    assert compiled == python
    if isinstance(compiled, BuiltTable):  # the compiled check finds what Python's does
        table = Lookup(compiled.data)
        final = _final(functions, arch)
        columns = FunctionColumns(*([*column] for column in zip(
            *sorted(functions, key=lambda f: f.offset), strict=True)))
        assert compiled_core().unwind_info_misses(
            compiled.data, columns.offsets, columns.lengths, final) == \
            table_writer._misses(table, columns, final)
    return compiled


def _final(functions: list[TableFunction], arch: str) -> list[int]:
    ordered = sorted(functions, key=lambda f: f.offset)
    return table_writer._final_encodings(ordered, arch, "t")[0]


def test_the_same_table_of_every_image_two_linkers_wrote(
        zig_images: dict[str, Path], lld_images: list[Path],  # noqa: F811
        tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import run  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    bench = tmp_path / "macho10000"
    assert run.macho_image(bench, 10_000)
    tables = 0
    for image in [*zig_images.values(), *lld_images, bench]:
        view = open_macho(image.read_bytes())
        table = unwind_columns(str(image), view)
        assert table is not None
        columns = image_columns(view, table)
        functions = [TableFunction(*f) for f in zip(*columns, strict=True)]
        built = _same(functions, view.arch)
        assert isinstance(built, BuiltTable)
        tables += 1
    assert tables == 7


def _run(count: int, encoding_of: Callable[[int], int], step: int = 16) -> list[TableFunction]:
    return [TableFunction(0x1000 + step * i, step, encoding_of(i)) for i in range(count)]


@pytest.mark.parametrize("count", [MAX_COMPRESSED - 1, MAX_COMPRESSED, MAX_COMPRESSED + 1,
                                   2 * MAX_COMPRESSED, MAX_REGULAR, MAX_REGULAR + 1])
def test_pages_that_end_at_exactly_what_they_hold(count: int) -> None:
    # one encoding per row (STACK_IND rows are never folded), and no local ones
    _same(_run(count, lambda i: X86_STACK_IND | 0x10000))
    # every row its own encoding: the compressed page holds half (rows and words)
    _same(_run(count, lambda i: X86_RBP_FRAME | i))


@pytest.mark.parametrize("distinct", [MAX_COMMON - 1, MAX_COMMON, MAX_COMMON + 1, 300])
def test_common_encodings_at_the_limit_and_past(distinct: int) -> None:
    functions = _run(4 * distinct, lambda i: X86_RBP_FRAME | (i % distinct))
    built = _same(functions)
    assert isinstance(built, BuiltTable)


def test_a_compressed_page_given_up_for_a_regular_one() -> None:
    # 257 encodings within a page: past the 8-bit index, so regular pages
    _same(_run(1500, lambda i: X86_RBP_FRAME | (i % 257)))
    # offsets past a compressed entry's 24-bit reach from the page's first
    far = _run(600, lambda i: X86_RBP_FRAME | (i % 3), step=OFFSET_REACH // 512)
    _same(far)
    _same(_run(3, lambda i: X86_RBP_FRAME | i, step=OFFSET_REACH))


def test_personalities_lsdas_and_dwarf_mode() -> None:
    rng = random.Random(43)
    for _ in range(40):
        functions = []
        at = 0x1000
        for i in range(rng.randrange(1, 400)):
            mode = rng.choice([X86_RBP_FRAME, X86_STACK_IND, X86_DWARF])
            personality = rng.choice([None, None, 0x8000, 0x8008, 0x8010, 0x8018, 0x8020])
            lsda = rng.choice([None, None, 0x9000 + 16 * i])
            fde = rng.choice([None, 0x40 * i, 0x40 * i])
            functions.append(TableFunction(at, rng.choice([0, 1, 16, 64]),
                                           mode | rng.choice([0, 1, 0x10000]) |
                                           rng.choice([0, 0x40000000, 0x30000000]),
                                           personality, lsda, fde))
            at += rng.choice([0, 16, 64, 4096, OFFSET_REACH // 3])
        rng.shuffle(functions)
        for arch in ("x86_64", "i386", "arm64"):
            _same(functions, arch)


def test_input_no_table_holds_gets_the_same_error() -> None:
    overlap = [TableFunction(0, 32, X86_RBP_FRAME), TableFunction(16, 32, X86_RBP_FRAME)]
    assert "overlap" in str(_same(overlap))
    assert "past the 32-bit" in str(_same([TableFunction(0xFFFFFFF0, 32, X86_RBP_FRAME)]))
    far_fde = [TableFunction(0, 32, X86_DWARF, fde_offset=1 << 24)]
    assert "24 bits" in str(_same(far_fde))
    fourth = [TableFunction(64 * i, 32, X86_RBP_FRAME, personality=0x4000 + 8 * i)
              for i in range(4)]
    assert "fourth" in str(_same(fourth))
    noted = [*fourth[:3], fourth[3]._replace(fde_offset=0x80)]
    built = _same(noted)
    assert isinstance(built, BuiltTable) and len(built.notes) == 1
    assert isinstance(_same([TableFunction(0, 32, ARM64_DWARF, fde_offset=0x20)], "arm64"),
                      BuiltTable)
    empty = [TableFunction(0, 16, X86_RBP_FRAME), TableFunction(16, 0, X86_RBP_FRAME | 1),
             TableFunction(16, 16, X86_RBP_FRAME | 2)]
    assert "empty (length 0)" in str(_same(empty))
    backwards = [TableFunction(0, 16, X86_RBP_FRAME), TableFunction(0x40, -16, X86_RBP_FRAME | 1)]
    compiled, python = _both(backwards, "x86_64")  # (a negative length is Python's)
    assert compiled is None and "ends before it starts" in str(python)
    compiled, python = _both([*overlap, TableFunction(0x100, -1, X86_RBP_FRAME)], "x86_64")
    assert compiled is None and "overlap" in str(python)
    # unsorted input: the overlap named by the sorted order's offsets
    assert str(_same([overlap[1], TableFunction(0x100, 16, 0), overlap[0]])) == \
        "t: error: functions at 0x0 and 0x10 overlap"


def test_numbers_past_32_bits_are_left_to_python() -> None:
    core = compiled_core()
    columns = FunctionColumns([0], [16], [1 << 40], [None], [None], [None])
    assert table_writer._compiled_build(core, columns, "x86_64", "t") is None


def _emit(path: Path, out: Path) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        status = main(["compact", str(path), "--emit", "unwind-info", "-o", str(out)])
    return status, err.getvalue()


def test_a_damaged_table_is_said_in_one_line(lld_images: list[Path],  # noqa: F811
                                             tmp_path: Path) -> None:
    """Mutants of the images' ``__unwind_info`` (random bytes, and the two damages the
    builder's self-check once met as an internal error: two entries at one offset, an
    entry past the code): exit 0 or 1, a located one-line error."""
    rng = random.Random(4)
    failed = 0
    for image in (lld_images[0], lld_images[2], lld_images[3]):
        data = image.read_bytes()
        section = open_macho(data).section("__TEXT", "__unwind_info")
        assert section is not None
        mutants = []
        for _ in range(60):
            mutant = bytearray(data)
            for _ in range(rng.choice([1, 2, 4])):
                mutant[section.offset + rng.randrange(section.size)] = rng.randrange(256)
            mutants.append(mutant)
        mutants += _known_damage(data, section.offset)
        path, out = tmp_path / f"{image.name}.bin", tmp_path / "out.bin"
        for mutant in mutants:
            path.write_bytes(mutant)
            status, said = _emit(path, out)
            assert status in (0, 1), said
            if status == 1:
                failed += 1
                assert said.startswith(f"{path}: error: ") and said.count("\n") == 1, said
    assert failed >= 3


def _known_damage(data: bytes, at: int) -> list[bytearray]:
    """The table with an entry moved onto the one before it, and the last entry moved
    far past the code (compressed pages: the entry word's offset from the page's
    first; regular pages: the entry's own offset)."""
    index_at = int.from_bytes(data[at + 20:at + 24], "little")
    page_at = int.from_bytes(data[at + index_at + 4:at + index_at + 8], "little")
    kind = int.from_bytes(data[at + page_at:at + page_at + 4], "little")
    entries = at + page_at + int.from_bytes(data[at + page_at + 4:at + page_at + 6], "little")
    count = int.from_bytes(data[at + page_at + 6:at + page_at + 8], "little")
    size = 8 if kind == 2 else 4
    out = []
    for target, value in ((2, None), (count - 1, 0xFFFF00)):
        mutant = bytearray(data)
        word = entries + size * target
        if value is None:  # the entry before's offset
            before = int.from_bytes(data[word - size:word - size + 4], "little")
            value = before if kind == 2 else before & 0xFFFFFF
        if kind == 2:
            mutant[word:word + 4] = value.to_bytes(4, "little")
        else:
            old = int.from_bytes(data[word:word + 4], "little")
            mutant[word:word + 4] = (old & 0xFF000000 | value & 0xFFFFFF).to_bytes(4, "little")
        out.append(mutant)
    return out
