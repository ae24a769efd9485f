"""AArch64 lowering, expectations derived by hand from the SFrame spec (AArch64 section)."""

from __future__ import annotations

from cfi2sframe import CfaReg, Location, Row, Rule, Skip, Timeline, lower
from cfi2sframe.arch import get_arch
from cfi2sframe.convert import convert_asm
from cfi2sframe.sframe.build import encode_sframe
from cfi2sframe.sframe.decode import decode
from cfi2sframe.sframe.rules import FrameRules, Loc, fre_rules
from tests.conftest import require

A64 = get_arch("aarch64")
FP = (29, Rule("offset", -16))
RA = (30, Rule("offset", -8))


def timeline(rows, size=16, b_key=False):
    return Timeline("f", ".text", 0, size, tuple(rows), 30, Location("t.s", 1),
                    pauth_b_key=b_key)


def test_frame_record_with_signed_ra_and_b_key():
    # paciasp; stp x29, x30, [sp, -16]!: CFA = sp+16, RA = [CFA-8], FP = [CFA-16].
    rows = [Row(0, CfaReg(31, 0), ()), Row(4, CfaReg(31, 0), (), ra_signed=True),
            Row(8, CfaReg(31, 16), (FP, RA), ra_signed=True)]
    func = lower(timeline(rows, b_key=True), A64)
    data = encode_sframe([func], A64).to_bytes(0, lambda f: f.start)
    # V2 FDE info byte: ADDR1, PCINC, pauth key B (bit 5).
    assert data[28 + 16] == 0x20
    section = decode(data)
    (fde,) = section.fdes
    assert [(f.offsets, f.mangled_ra) for f in fde.fres] == [
        ((0,), False), ((0,), True), ((16, -8, -16), True)]  # words: CFA, RA, FP
    assert fre_rules(section, fde, fde.fres[2]) == FrameRules(
        Loc(31, 16, False), Loc(None, -16, True), Loc(None, -8, True))
    assert fde.fres[2].info == 0x80 | (3 << 1) | 1  # mangled, 3 words, SP base


def test_ra_alone_and_fp_without_ra():
    rows = [Row(0, CfaReg(31, 16), (RA,))]
    section = decode(encode_sframe([lower(timeline(rows), A64)], A64).to_bytes(
        0, lambda f: f.start))
    assert section.fdes[0].fres[0].offsets == (16, -8)
    bad = lower(timeline([Row(0, CfaReg(31, 16), (FP,))]), A64)
    assert isinstance(bad, Skip) and bad.reason == "fp-without-ra"


def test_ra_undefined_is_a_v3_row():
    rows = [Row(0, CfaReg(31, 16), (RA,)), Row(8, CfaReg(31, 0), ((30, Rule("undefined")),))]
    assert lower(timeline(rows), A64).reason == "ra-undefined"
    func = lower(timeline(rows), A64, version=3)
    section = decode(encode_sframe([func], A64, 3).to_bytes(0, lambda f: f.start))
    assert [f.offsets for f in section.fdes[0].fres] == [(16, -8), ()]


def test_directives_through_the_cross_assembler():
    require("aarch64-linux-gnu-as")
    text = """\t.text
f:
\t.cfi_startproc
\t.cfi_b_key_frame
\thint 27
\t.cfi_negate_ra_state
\tstp x29, x30, [sp, -32]!
\t.cfi_def_cfa_offset 32
\t.cfi_offset 29, -32
\t.cfi_offset 30, -24
\tmov x29, sp
\tldp x29, x30, [sp], 32
\t.cfi_restore 30
\t.cfi_restore 29
\t.cfi_def_cfa_offset 0
\thint 31
\t.cfi_negate_ra_state
\tret
\t.cfi_endproc
"""
    conversion = convert_asm(text, "t.s", "aarch64")
    assert not conversion.skips
    section = decode(conversion.raw())
    (fde,) = section.fdes
    assert fde.pauth_b_key
    # hint 27 (4 bytes) at 0, stp at 4, mov at 8, ldp at 12, hint 31 at 16, ret at 20.
    assert [(f.start, f.offsets, f.mangled_ra) for f in fde.fres] == [
        (0, (0,), False), (4, (0,), True), (8, (32, -24, -32), True), (16, (0,), True),
        (20, (0,), False)]


def test_ra_signed_with_pc_is_left_out_with_its_reason():
    """PAuth_LR (DW_CFA_AARCH64_negate_ra_state_with_pc, written with .cfi_escape 0x2c:
    binutils 2.40 lacks the directive): SFrame has no way to say the PC signs the RA."""
    require("aarch64-linux-gnu-as")
    text = """\t.text
f:
\t.cfi_startproc
\thint 39
\t.cfi_escape 0x2c
\tstp x29, x30, [sp, -16]!
\t.cfi_def_cfa_offset 16
\t.cfi_offset 29, -16
\t.cfi_offset 30, -8
\tldp x29, x30, [sp], 16
\tret
\t.cfi_endproc
"""
    for version in (2, 3):
        conversion = convert_asm(text, "t.s", "aarch64", version=version)
        assert [(s.name, s.reason) for s in conversion.skips] == [("f", "ra-signed-with-pc")]
        assert conversion.skips[0].detail == ("the return address is signed with the PC as "
                                              "a diversifier at offset 0x4")
