"""The library API for test harnesses (issue 14): arch names or objects everywhere, one
call for compact encodings with reasons, and V2 and V3 rows with one interface whose
rules are what the encoded section says (decoded independently)."""

from __future__ import annotations

from pathlib import Path

import pytest

import cfi2sframe
from cfi2sframe import (
    compact_asm,
    decode_sframe,
    encode_sframe,
    fre_rules,
    get_arch,
    lower,
    lower_compact,
    timelines_from_asm,
)
from tests.conftest import at_least, require
from tests.corpus import csmith_asm, have_tools

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_arch_names_and_objects_give_the_same_answers() -> None:
    require("as")
    text = (EXAMPLES / "frame_pointer.s").read_text()
    for timeline in timelines_from_asm(text, "foo.s", "x86_64"):
        assert lower(timeline, "x86_64") == lower(timeline, get_arch("x86_64"))
        assert lower(timeline, "amd64", version=3) == lower(timeline, get_arch("x86_64"),
                                                            version=3)
        assert lower_compact(timeline, "x86_64") == lower_compact(timeline,
                                                                  get_arch("x86_64"))
    with pytest.raises(ValueError, match="unknown architecture 'vax'"):
        lower(timeline, "vax")


def test_one_call_gives_compact_encodings_with_reasons() -> None:
    """Values derived by hand from compact_unwind_encoding.h (see test_compact_body)."""
    require("as")
    (frame,) = compact_asm((EXAMPLES / "frame_pointer.s").read_text(), "fp.s")
    assert (frame.name, frame.rows[0].encoding, frame.reason) == ("with_frame", 0x01010001,
                                                                  None)
    (realigned,) = compact_asm((EXAMPLES / "realigned.s").read_text(), "r.s", "x86_64")
    assert realigned.rows[0].encoding == 0x04000000 and realigned.reason == "no-cfa"
    assert "not a register plus offset" in realigned.detail


CASES = [("x86_64", 2), ("x86_64", 3)]


@pytest.mark.parametrize(("arch", "version"), CASES)
def test_rows_of_both_versions_mean_what_the_encoded_section_says(arch: str,
                                                                  version: int) -> None:
    """Every row's ``frame_rules`` (V2 ``Fre`` and V3 ``RuleFre`` alike) equals the rules
    the strict reader decodes from the encoded section, on real gcc output."""
    missing = have_tools("as", "gcc", "csmith")
    if missing:
        require(*missing)
    files = [*csmith_asm(range(1, 6), ["O0", "O2", "O2realign"]),
             EXAMPLES / "realigned.s", EXAMPLES / "frame_pointer.s"]
    kinds: set[str] = set()
    rows = 0
    for path in files:
        timelines = timelines_from_asm(path.read_text(), str(path), arch)
        functions = [f for f in (lower(t, arch, version=version) for t in timelines)
                     if not isinstance(f, cfi2sframe.Skip)]
        bases = {name: index << 24 for index, name in
                 enumerate(dict.fromkeys(f.section for f in functions))}
        section = decode_sframe(encode_sframe(functions, arch, version).to_bytes(
            0, lambda func, bases=bases: bases[func.section] + func.start, str(path)))
        by_start = {fde.start_address: fde for fde in section.fdes}
        for func in functions:
            fde = by_start[bases[func.section] + func.start]
            assert len(fde.fres) == len(func.fres), func.name
            for row, decoded in zip(func.fres, fde.fres, strict=True):
                kinds.add(type(row).__name__)
                assert row.start == decoded.start
                assert row.mangled_ra == decoded.mangled_ra
                assert row.frame_rules(arch) == fre_rules(section, fde, decoded), func.name
                rows += 1
    assert rows > 1000
    # Measured here: 17 files (5 seeds x 3 flag sets, 2 examples), 2214 (V2) and 2220 (V3) rows;
    # floors 10% lower.
    at_least("files", len(files), 15)
    at_least("rows", rows, 1990)
    assert kinds == ({"Fre"} if version == 2 else {"Fre", "RuleFre"})
