"""Answers shared between functions alike against the per-function answers they stand
for, on real files: ``compact.lower.lower_alike`` (what ``compact`` runs for an ELF
file or a Mach-O object) against ``lower_compact`` on every FDE of the installed libc
and libstdc++, and ``compact.check._code_problem_alike`` (what ``verify`` runs for an
image's entries without an FDE) against ``_code_problem`` on zig's and ld64.lld-14's
images of three targets; and ``compact``'s listing of those functions by the compiled
core (``_core.compact_rows_text``) against its Python formatter.  ``test_compact.py``
and ``test_macho_checks.py`` hold the answers themselves to LLVM's."""

from __future__ import annotations

from pathlib import Path

import pytest

from cfi2sframe.arch import by_compact
from cfi2sframe.cli.compact import _Rows
from cfi2sframe.compact import check
from cfi2sframe.compact.inputs import compact_cfi, image_functions, unwind_columns
from cfi2sframe.compact.lower import LowerMemo, lower_alike, lower_compact, state_ids
from cfi2sframe.compact.rules import Code
from cfi2sframe.core import compiled
from cfi2sframe.elf.cfi import read_elf_cfi
from cfi2sframe.elf.read import address_reader, open_elf
from cfi2sframe.macho.read import MachoView, open_macho
from tests.conftest import at_least, require, require_path

from .test_macho import _many_functions
from .test_macho_checks import zig_images  # noqa: F401  (a fixture)

LIBRARIES = ["/usr/lib/x86_64-linux-gnu/libc.so.6",
             "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"]


@pytest.mark.parametrize("ranges", [False, True])
def test_lowered_once_per_shape_as_each_alone(ranges: bool) -> None:
    require_path(*LIBRARIES)
    compared = shared = listed = 0
    core = compiled()
    names = by_compact("x86_64").register_names
    for path in LIBRARIES:
        data = Path(path).read_bytes()
        cfi = read_elf_cfi(path, data)
        at = address_reader(open_elf(data, "object"))
        memo = LowerMemo()
        alone = []
        for timeline in cfi.timelines:
            found = at(timeline.start, timeline.size)
            code = Code(found) if found is not None else None
            before = len(memo.shapes)
            alike = lower_alike(timeline, "x86_64", code, ranges, memo)
            shared += len(memo.shapes) == before
            alone.append(lower_compact(timeline, "x86_64", code, ranges))
            assert alike == alone[-1], timeline.name
            if core is not None:  # the state sequence's key, compiled and its reference
                assert core.row_state_ids(timeline.rows) == state_ids(timeline.rows)
            compared += 1
        if not ranges:  # what compact runs for an ELF file: no Timeline for known shapes
            assert compact_cfi(cfi, data, "x86_64", False, linked=True) == alone
        if core is not None:  # the listing's text, compiled and its reference
            for check in (False, True):
                made = _Rows("x86_64", names, check)
                assert core.compact_rows_text(alone, made.tail, check) == \
                    _Rows("x86_64", names, check).text(alone)
            listed += 1
    at_least("FDEs", compared, 8000)
    at_least("FDEs lowered by a shared answer", shared, 1000)
    at_least("libraries listed by both cores", listed, len(LIBRARIES) if core else 0)


def test_prologues_checked_once_as_each_alone(zig_images: dict[str, Path],  # noqa: F811
                                              tmp_path: Path) -> None:
    require("ld64.lld-14", "llvm-mc")
    images = [*zig_images.values(), _many_functions(tmp_path, 1200, True),
              _many_functions(tmp_path, 3000, False)]
    compared = 0
    for image in images:
        view = open_macho(image.read_bytes())
        table = unwind_columns(str(image), view)
        assert table is not None
        flavour = view.arch
        names = by_compact(flavour).register_names

        def alone(address: int, length: int, encoding: int,
                  view: MachoView = view, flavour: str = flavour,
                  names: dict[int, str] = names) -> str | bool | None:
            return check._code_problem(view, address, length, encoding, flavour, names)

        # verify's loop asks once per distinct (encoding, code read); each entry alone:
        _, from_code, events = check.entry_events(
            **check._entry_params(view, table, {}, {}, True, alone))
        said = {event[1]: event[2] for event in events if event[0] == "code"}
        right = 0
        for i, func in enumerate(image_functions(view, table)):
            if func.encoding == 0 or check.is_dwarf(func.encoding, flavour):
                continue
            problem = alone(view.image_base + func.offset, func.length, func.encoding)
            if problem is True:
                right += 1
            assert said.get(i) == (problem if problem and problem is not True else None), \
                (image.name, func.offset)
            compared += 1
        assert from_code == right, image.name
    at_least("image entries", compared, 4000)
