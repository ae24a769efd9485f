"""The library as a compiler's or JIT's test harness uses it, importing only from
``cfi2sframe``: a timeline built by hand, its SFrame section in bytes, read back; the
assembler's own messages in the error it raises."""

from __future__ import annotations

import pytest

from cfi2sframe import (
    AssemblerFailed,
    CfaReg,
    Cfi2SframeError,
    Loc,
    Location,
    Row,
    Rule,
    RuleKind,
    Timeline,
    decode_sframe,
    encode_sframe,
    fre_rules,
    lower_all,
)
from tests.conftest import require

RSP, RBP, RA = 7, 6, 16  # the x86-64 DWARF register numbers (psABI table 3.36)


def _push_rbp_function(start: int) -> Timeline:
    """A 12-byte function: push %rbp at 0, mov %rsp,%rbp at 1, body from 4."""
    ra = (RA, Rule(RuleKind.offset, -8))
    rows = (Row(0, CfaReg(RSP, 8), (ra,)),
            Row(1, CfaReg(RSP, 16), ((RBP, Rule(RuleKind.offset, -16)), ra)),
            Row(4, CfaReg(RBP, 16), ((RBP, Rule(RuleKind.offset, -16)), ra)))
    return Timeline("jitted", "", start, 12, rows, RA, Location("<jit>"))


def test_a_timeline_built_by_hand_becomes_a_section() -> None:
    functions, skips = lower_all([_push_rbp_function(0x1000)], "x86_64")
    assert not skips
    image = encode_sframe(functions, "x86_64")
    section = decode_sframe(image.to_bytes(0x2000), 0x2000)
    (fde,) = section.fdes
    assert (fde.start_address, fde.size) == (0x1000, 12)
    # By hand from the rows above: CFA on SP then FP, FP saved at CFA-16 from 1 on,
    # RA at the AMD64 fixed offset CFA-8 throughout.
    want = [(0, Loc(RSP, 8, False), None), (1, Loc(RSP, 16, False), Loc(None, -16, True)),
            (4, Loc(RBP, 16, False), Loc(None, -16, True))]
    got = [(fre.start, fre_rules(section, fde, fre).cfa, fre_rules(section, fde, fre).fp)
           for fre in fde.fres]
    assert got == want
    assert all(fre_rules(section, fde, fre).ra == Loc(None, -8, True) for fre in fde.fres)


def test_bytes_of_an_image_places_it_at_zero() -> None:
    """``bytes(image)`` is ``to_bytes()``: section at 0, functions at their ``start``."""
    image = encode_sframe(lower_all([_push_rbp_function(0x40)], "x86_64")[0], "x86_64")
    assert bytes(image) == image.to_bytes(0) == image.to_bytes(0, lambda func: func.start)
    (fde,) = decode_sframe(bytes(image)).fdes
    assert fde.start_address == 0x40


def test_a_start_out_of_range_is_an_error_naming_the_function() -> None:
    image = encode_sframe(lower_all([_push_rbp_function(1 << 40)], "x86_64")[0], "x86_64")
    with pytest.raises(Cfi2SframeError, match="function 'jitted' .* out of range"):
        image.to_bytes(0, where="<jit>")


def test_the_assembler_messages_are_in_the_error_text() -> None:
    require("as")
    from cfi2sframe import convert_asm

    with pytest.raises(AssemblerFailed) as info:
        convert_asm("\t.cfi_startproc\n\tfrobnicate %rax\n\t.cfi_endproc\n", "bad.s")
    error = info.value
    assert "no such instruction: `frobnicate %rax'" in str(error)  # GNU as's own words
    assert error.summary == "bad.s: error: assembler 'as' failed (exit status 1)"
    assert "\n" not in error.summary and error.status == 1
    assert "frobnicate" in error.messages and "frobnicate" not in error.summary
