"""s390x lowering and encoding, expected bytes derived by hand from the SFrame specs.

V2 errata 1 and V3, "s390x" sections: the CFA word is (offset - 160) / 8; the
words are CFA, RA, FP; RA word 0 is padding (RA not saved, FP follows); V2
writes a register as (regnum << 1) | 1, V3 uses a FLEX FDE instead; the
caller's SP is CFA - 160; the section is big-endian, ABI 4, fixed RA offset 0,
and (GNU as, notes section 5) zero-padded to a multiple of 8.
"""

from __future__ import annotations

import pytest

from cfi2sframe import CfaReg, Location, Row, Rule, Skip, Timeline, lower
from cfi2sframe.arch import get_arch
from cfi2sframe.sframe.build import encode_sframe
from cfi2sframe.sframe.decode import decode
from cfi2sframe.sframe.rules import FrameRules, Loc, fre_rules

S390X = get_arch("s390x")
RA = (14, Rule("offset", -48))
FP = (11, Rule("offset", -72))


def timeline(rows, size=0x20):
    return Timeline("f", ".text", 0, size, tuple(rows), 14, Location("t.s", 1))


def section_bytes(rows, version=2, size=0x20) -> bytes:
    func = lower(timeline(rows, size), S390X, version=version)
    assert not isinstance(func, Skip), func
    image = encode_sframe([func], S390X, version)
    data = image.to_bytes(0, lambda f: f.start)
    assert image.size == len(data)  # the section is padded to 8 bytes
    return data


def fre_bytes(data: bytes, version: int) -> bytes:
    """The FRE sub-section (after header and FDE index; V3 without the attribute)."""
    num_fdes = int.from_bytes(data[8:12], "big")
    fre_len = int.from_bytes(data[16:20], "big")
    start = 28 + num_fdes * (20 if version == 2 else 16) + (5 if version == 3 else 0)
    end = 28 + num_fdes * (20 if version == 2 else 16) + fre_len
    return data[start:end]


# stmg %r11,%r15,88(%r15) at 0; aghi %r15,-160 at 6; lgr %r11,%r15 at 12.
PROLOGUE = [
    Row(0, CfaReg(15, 160), ()),
    Row(6, CfaReg(15, 160), (FP, RA)),
    Row(12, CfaReg(15, 320), (FP, RA)),
    Row(18, CfaReg(11, 320), (FP, RA)),
]


@pytest.mark.parametrize("version", [2, 3])
def test_prologue_words_and_header(version):
    data = section_bytes(PROLOGUE, version)
    # Header: magic, version, flags (PCREL | SORTED: one section), ABI 4 = s390x
    # big-endian, fixed FP/RA offsets 0.
    assert data[:8] == bytes([0xDE, 0xE2, version, 0x05, 0x04, 0, 0, 0])
    assert fre_bytes(data, version) == bytes([
        0x00, 0x03, 0x00,              # start 0, SP base, 1 word: (160-160)/8 = 0
        0x06, 0x07, 0x00, 0xD0, 0xB8,  # start 6: CFA word 0, RA c-48, FP c-72
        0x0C, 0x07, 0x14, 0xD0, 0xB8,  # start 12: (320-160)/8 = 20
        0x12, 0x06, 0x14, 0xD0, 0xB8,  # start 18: FP (r11) base
    ])
    assert len(data) % 8 == 0  # zero padding after the FREs, not counted in fre_len
    assert data[28 + 20 + 18:] == bytes(len(data) - (28 + 20 + 18)) if version == 2 else True
    section = decode(data)
    fde = section.fdes[0]
    assert fre_rules(section, fde, fde.fres[3]) == FrameRules(
        Loc(11, 320, False), Loc(None, -72, True), Loc(None, -48, True))


def test_fp_saved_without_ra_gets_the_padding_word():
    data = section_bytes([Row(0, CfaReg(15, 160), (FP,))])
    assert fre_bytes(data, 2) == bytes([0x00, 0x07, 0x00, 0x00, 0xB8])
    section = decode(data)
    fde = section.fdes[0]
    assert fre_rules(section, fde, fde.fres[0]) == FrameRules(
        Loc(15, 160, False), Loc(None, -72, True), None)  # RA unchanged (in r14)


def test_registers_in_v2_words_and_v3_flex():
    # A leaf saving r14 in f0 (DWARF 16) and r11 in f2 (DWARF 17).
    rows = [Row(0, CfaReg(15, 160), ()),
            Row(4, CfaReg(15, 160), ((11, Rule("register", 17)), (14, Rule("register", 16))))]
    v2 = section_bytes(rows, 2)
    assert fre_bytes(v2, 2) == bytes([0x00, 0x03, 0x00,
                                      0x04, 0x07, 0x00, 0x21, 0x23])  # (16<<1)|1, (17<<1)|1
    section = decode(v2)
    fde = section.fdes[0]
    assert fre_rules(section, fde, fde.fres[1]) == FrameRules(
        Loc(15, 160, False), Loc(17, 0, False), Loc(16, 0, False))
    v3 = section_bytes(rows, 3)
    assert v3[28 + 16 + 3] == 1  # FDE type FLEX in func_info2
    # FLEX pairs (control, offset): CFA r15 (15<<3|1 = 0x79, word 0), RA f0
    # (16<<3|1 = 0x81, 0), FP f2 (17<<3|1 = 0x89, 0); CFA-only row: one pair.
    assert fre_bytes(v3, 3) == bytes([0x00, 0x04, 0x79, 0x00,
                                      0x04, 0x0C, 0x79, 0x00, 0x81, 0x00, 0x89, 0x00])
    section = decode(v3)
    fde = section.fdes[0]
    assert fre_rules(section, fde, fde.fres[1]) == FrameRules(
        Loc(15, 160, False), Loc(17, 0, False), Loc(16, 0, False))


def test_caller_sp_is_cfa_minus_160():
    ok = [Row(0, CfaReg(15, 160), ((15, Rule("val_offset", -160)),))]
    assert not isinstance(lower(timeline(ok), S390X), Skip)
    bad = [Row(0, CfaReg(15, 160), ((15, Rule("val_offset", 0)),))]
    assert lower(timeline(bad), S390X).reason == "sp-not-cfa"


@pytest.mark.parametrize("version", [2, 3])
def test_cfa_offsets_that_do_not_encode_are_left_out(version):
    rows = [Row(0, CfaReg(15, 164), ())]
    assert lower(timeline(rows), S390X, version=version).reason == "s390x-unaligned"


def test_odd_slot_offset_is_left_out_in_v2_only():
    rows = [Row(0, CfaReg(15, 160), ((14, Rule("offset", -47)),))]
    assert lower(timeline(rows), S390X).reason == "s390x-unaligned"
    v3 = section_bytes(rows, 3)
    assert fre_bytes(v3, 3) == bytes([0x00, 0x05, 0x00, 0xD1])
