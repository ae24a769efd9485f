"""The compiled core's half of a Mach-O image's ``verify`` against the Python code it
was written from, which stays the reference and the fallback: the table read into
columns (``csrc/compact_table.c`` ``unwind_info_entries``, reference
``compact/table.read_unwind_info``), ``__eh_frame``'s FDEs placed in or out of the
code (``csrc/compact_check.c`` ``fde_extents``, reference ``compact/check.fde_extents``
over the Python walker's FDEs) and the loop over the entries (``image_entries``,
reference ``compact/check.entry_events``).

On the images two linkers wrote (zig's: relocated ``__eh_frame``, FDEs in code,
DWARF-mode rows, personalities and LSDAs; ld64.lld-14's: regular and compressed pages,
an ``__eh_frame`` left unrelocated) and on the same images with bytes of their table,
``__eh_frame`` and code changed at random: the same answer from each entry point, and
the same ``verify`` (every problem and note, or the same error) with either core.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cfi2sframe.compact import check
from cfi2sframe.compact.check import check_macho, entry_events, fde_extents
from cfi2sframe.compact.table import read_columns
from cfi2sframe.dwarf.cfi import cie_reader
from cfi2sframe.errors import Cfi2SframeError, DecodeError
from cfi2sframe.macho.read import MachoView, open_macho
from cfi2sframe.macho.unwind import eh_frame, relocated
from tests.conftest import compiled_core

from .test_core_unwind_info import (
    lld_images,  # noqa: F401  (a fixture)
    python_columns,
)
from .test_macho_checks import zig_images  # noqa: F401  (a fixture)


def _verify(view: MachoView, monkeypatch: pytest.MonkeyPatch, core: str) -> object:
    """``verify``'s answer with the core ``core`` picks: the check, or its error."""
    monkeypatch.setenv("CFI2SFRAME_CORE", core)
    try:
        return check_macho("image", view)
    except (Cfi2SframeError, DecodeError) as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        monkeypatch.delenv("CFI2SFRAME_CORE")


def _entry_params(view: MachoView) -> dict[str, object] | None:
    """``image_entries``'s arguments for an image, as ``_check_image`` builds them
    (None where its table or ``__eh_frame`` does not read)."""
    try:
        cfi = eh_frame(view, "image", named=False)
        table = read_columns(view.section_data(view.section("__TEXT", "__unwind_info")))
    except DecodeError:
        return None
    extents = fde_extents(cfi.fdes if cfi else (), check._code_sections(view))
    in_code = {fde.start: fde for fde in (cfi.fdes if cfi else ())
               if fde.offset in set(extents.in_code)}

    def code_problem(address: int, length: int, encoding: int) -> str | bool | None:
        return check._code_problem(view, address, length, encoding, view.arch, {})

    return check._entry_params(view, table, in_code, extents.starts,
                               extents.stray < extents.fdes or not extents.fdes,
                               code_problem)


def _same_pieces(view: MachoView) -> int:
    """Each compiled entry point's answer is its reference's; how many answered."""
    core = compiled_core()
    answered = 0
    data, reference = python_columns(view)
    found = core.unwind_info_entries(data)
    if found is not None:
        answered += 1
        assert reference is not None and read_columns(data) == reference
    eh = view.section("__TEXT", "__eh_frame")
    if eh is not None:
        eh_data = relocated(view, eh)
        code = tuple(check._code_sections(view))
        try:
            extents = core.fde_extents(eh=eh_data, address=eh.addr, address_size=8,
                                       cie_of=cie_reader(eh_data, eh.addr, 8, True), code=code)
        except DecodeError:
            extents = None  # (the Python walker raises there too: _verify compares)
        if extents is not None:
            answered += 1
            cfi = eh_frame(view, "image", named=False)
            assert cfi is not None
            assert tuple(fde_extents(cfi.fdes, list(code))) == extents
    params = _entry_params(view)
    if params is not None:
        ours = core.image_entries(**params)
        if ours is not None:
            answered += 1
            assert ours == entry_events(**params)  # type: ignore[arg-type]
        # every FDE moved by a byte (DWARF mode names another function's FDE), and the
        # section taken as relocated or not: the same events
        moved = {at: start + 1 for at, start in params["fde_starts"].items()}  # type: ignore[attr-defined]
        for in_place in (False, True):
            changed = {**params, "fde_starts": moved, "relocated": in_place}
            assert core.image_entries(**changed) == entry_events(**changed)  # type: ignore[arg-type]
    return answered


def test_the_same_pieces_and_verify_on_images_two_linkers_wrote(
        zig_images: dict[str, Path], lld_images: list[Path],  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    events = 0
    for image in [*zig_images.values(), *lld_images]:
        view = open_macho(image.read_bytes())
        if view.section("__TEXT", "__unwind_info") is None:
            continue
        assert _same_pieces(view) == 2 + (view.section("__TEXT", "__eh_frame") is not None)
        ours = _verify(view, monkeypatch, "")
        assert ours == _verify(view, monkeypatch, "python"), image.name
        assert not isinstance(ours, str), ours
        events += ours.checked + len(ours.problems)
    assert events > 100  # (entries checked against their CFI, and lld's two problems)


@pytest.fixture(scope="module")
def small_images(zig_images: dict[str, Path], lld_images: list[Path]  # noqa: F811
                 ) -> list[bytes]:
    """zig's x86-64 image (FDEs in code, DWARF mode, an LSDA) and ld64.lld-14's 1200
    functions (regular pages, prologues checked from the code)."""
    return [zig_images["x86_64"].read_bytes(), lld_images[2].read_bytes()]


@settings(max_examples=50, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_same_verify_of_damaged_images(small_images: list[bytes],
                                           monkeypatch: pytest.MonkeyPatch,
                                           data: st.DataObject) -> None:
    """Bytes written into an image's table, ``__eh_frame`` or code: each piece the same,
    and ``verify`` the same (its problems, notes, or error) with either core."""
    image = data.draw(st.sampled_from(small_images))
    view = open_macho(image)
    names = [s.name for s in view.sections if s.name in ("__unwind_info", "__eh_frame",
                                                          "__text")]
    section = view.section("__TEXT", data.draw(st.sampled_from(names)))
    assert section is not None and section.size
    byte = st.one_of(st.integers(0, 255), st.sampled_from([0x00, 0x02, 0x03, 0x04, 0xFF]))
    writes = data.draw(st.lists(st.tuples(st.integers(0, section.size - 1), byte),
                                min_size=1, max_size=6))
    out = bytearray(image)
    for at, value in writes:
        out[section.offset + at] = value
    damaged = open_macho(bytes(out))
    _same_pieces(damaged)
    assert _verify(damaged, monkeypatch, "") == _verify(damaged, monkeypatch, "python")
