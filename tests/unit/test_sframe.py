"""SFrame V2 encoding and lowering, expectations derived by hand from the spec."""

from __future__ import annotations

import struct

import pytest

from cfi2sframe import (
    CfaExpr,
    CfaReg,
    DecodeError,
    Location,
    Row,
    Rule,
    Skip,
    Timeline,
    decode_sframe,
    encode_sframe,
    lower,
)
from cfi2sframe.arch import get_arch
from cfi2sframe.errors import Cfi2SframeError
from tests.conftest import meaning

X86 = get_arch("x86_64")
RA = (16, Rule("offset", -8))
FP16 = (6, Rule("offset", -16))


def timeline(rows, size=7, name="f", start=0, section=".text", ra_column=16):
    return Timeline(name, section, start, size, tuple(rows), ra_column, Location("t.s", 1))


def raw(*timelines):
    functions = [lower(t, X86) for t in timelines]
    assert not any(isinstance(f, Skip) for f in functions), functions
    return encode_sframe(functions, X86).to_bytes(0, lambda f: f.start)


FRAME_POINTER_ROWS = [
    Row(0, CfaReg(7, 8), (RA,)),
    Row(1, CfaReg(7, 16), (FP16, RA)),
    Row(4, CfaReg(6, 16), (FP16, RA)),
    Row(6, CfaReg(7, 8), (FP16, RA)),
]


def test_frame_pointer_function_bytes():
    data = raw(timeline(FRAME_POINTER_ROWS))
    header = struct.pack("<HBBBbbBIIIII", 0xDEE2, 2, 0x4 | 0x1, 3, 0, -8, 0, 1, 4, 15, 0, 20)
    # start field: function at 0, field at 28 -> -28; size 7; FREs at 0; 4 FREs; ADDR1, PCINC
    fde = struct.pack("<iIIIBBH", -28, 7, 0, 4, 0, 0, 0)
    fres = bytes([
        0x00, 0x03, 0x08,          # SP base (bit 0), 1 offset (bits 1-4), 1 byte: CFA 8
        0x01, 0x05, 0x10, 0xF0,    # 2 offsets: CFA 16, FP at CFA-16
        0x04, 0x04, 0x10, 0xF0,    # FP base (bit 0 clear)
        0x06, 0x05, 0x08, 0xF0,
    ])
    assert data == header + fde + fres


def test_identical_rows_merge_and_untracked_registers_are_ignored():
    rows = [Row(0, CfaReg(7, 8), (RA,)), Row(2, CfaReg(7, 8), ((3, Rule("offset", -16)), RA)),
            Row(3, CfaReg(7, 16), ((3, Rule("offset", -16)), RA))]
    section = decode_sframe(raw(timeline(rows)))
    assert [f.start for f in section.fdes[0].fres] == [0, 3]


@pytest.mark.parametrize(
    ("cfa_offset", "size_code"),
    [(127, 0), (-128, 0), (128, 1), (-129, 1), (32767, 1), (32768, 2), (-32769, 2)],
)
def test_offset_size_is_the_smallest_that_fits(cfa_offset, size_code):
    data = raw(timeline([Row(0, CfaReg(7, cfa_offset), (RA,))]))
    info = data[28 + 20 + 1]
    assert (info >> 5) & 3 == size_code


@pytest.mark.parametrize(("last_start", "fre_type"), [(255, 0), (256, 1), (65535, 1),
                                                       (65536, 2)])
def test_fre_type_is_the_smallest_that_holds_the_last_start(last_start, fre_type):
    rows = [Row(0, CfaReg(7, 8), (RA,)), Row(last_start, CfaReg(7, 16), (RA,))]
    data = raw(timeline(rows, size=last_start + 1))
    assert data[28 + 16] & 0xF == fre_type
    section = decode_sframe(data)
    assert [f.start for f in section.fdes[0].fres] == [0, last_start]


def test_fdes_sorted_and_pcrel_starts():
    a = timeline([Row(0, CfaReg(7, 8), (RA,))], size=4, name="a", start=0x40)
    b = timeline([Row(0, CfaReg(7, 8), (RA,))], size=4, name="b", start=0x10)
    section = decode_sframe(raw(a, b))
    assert section.flags == 0x5
    assert [f.start_address for f in section.fdes] == [0x10, 0x40]
    # Relative to the field itself: field 0 at 28, field 1 at 48.
    assert [f.raw_start for f in section.fdes] == [0x10 - 28, 0x40 - 48]


def test_starts_placed_at_the_sections_address_and_the_first_out_of_reach_named():
    a = timeline([Row(0, CfaReg(7, 8), (RA,))], size=4, name="a", start=0x1000)
    b = timeline([Row(0, CfaReg(7, 8), (RA,))], size=4, name="b", start=0x2000)
    image = encode_sframe([lower(a, X86), lower(b, X86)], X86)
    data = image.to_bytes(0x5000)
    # The 28-byte header, then 20-byte FDEs: each start field is the function's
    # address less the field's own (0x5000 + 28, 0x5000 + 48), a signed 32-bit word.
    assert struct.unpack_from("<i", data, 28) == (0x1000 - 0x5000 - 28,)
    assert struct.unpack_from("<i", data, 48) == (0x2000 - 0x5000 - 48,)
    # 2**31 or more below its field: out of reach; the first such FDE is the one named.
    with pytest.raises(Cfi2SframeError, match=r"function 'a' is -0x80000001 bytes from its "
                       r"FDE: out of range for a 32-bit PC-relative start"):
        image.to_bytes(0x1000 + (1 << 31) - 27, where="t")
    with pytest.raises(Cfi2SframeError, match="function 'b' is 0x80000000 bytes"):
        image.to_bytes(0x2000 - (1 << 31) - 48, where="t")


def test_functions_in_several_sections_are_not_flagged_sorted():
    a = timeline([Row(0, CfaReg(7, 8), (RA,))], size=4, section=".text")
    b = timeline([Row(0, CfaReg(7, 8), (RA,))], size=4, section=".text.unlikely")
    assert decode_sframe(raw(a, b)).flags == 0x4


def test_rows_past_the_end_and_leading_undefined_cfa():
    rows = [Row(0, None, ()), Row(2, CfaReg(7, 8), (RA,))]
    section = decode_sframe(raw(timeline(rows, size=4)))
    assert [f.start for f in section.fdes[0].fres] == [2]


@pytest.mark.parametrize(
    ("rows", "reason"),
    [
        ([Row(0, CfaReg(10, 0), (RA,))], "cfa-not-sp-fp"),
        ([Row(0, CfaExpr(b"\x76\x78\x06"), (RA,))], "cfa-expression"),
        ([Row(0, CfaReg(7, 8), ((16, Rule("undefined")),))], "ra-undefined"),
        ([Row(0, CfaReg(7, 16), ((16, Rule("offset", -16)),))], "ra-not-at-fixed-offset"),
        ([Row(0, CfaReg(7, 8), ())], "ra-not-at-fixed-offset"),
        ([Row(0, CfaReg(7, 8), ((6, Rule("register", 3)), RA))], "fp-in-register"),
        ([Row(0, CfaReg(7, 8), ((6, Rule("expression", expr=b"\x76\x00")), RA))],
         "fp-expression"),
        ([Row(0, CfaReg(7, 8), ((6, Rule("val_offset", -16)), RA))], "fp-val-offset"),
        ([Row(0, CfaReg(7, 8), ((6, Rule("undefined")), RA))], "fp-undefined"),
        ([Row(0, CfaReg(7, 8), ((7, Rule("offset", -16)), RA))], "sp-not-cfa"),
        ([Row(0, CfaReg(7, 1 << 31), (RA,))], "offset-range"),
        ([Row(0, CfaReg(7, 8), (RA,)), Row(2, None, (RA,))], "cfa-undefined"),
        ([Row(0, CfaReg(7, 8), (RA,), ra_signed=True)], "ra-signed"),
    ],
)
def test_unrepresentable_functions_are_skipped_with_a_reason(rows, reason):
    result = lower(timeline(rows), X86)
    assert isinstance(result, Skip)
    assert result.reason == reason
    assert f"[{reason}]" in result.message()


def test_sp_as_val_offset_zero_is_the_cfa():
    rows = [Row(0, CfaReg(7, 8), ((7, Rule("val_offset", 0)), RA))]
    assert not isinstance(lower(timeline(rows), X86), Skip)


def test_other_reasons():
    assert lower(timeline([Row(0, CfaReg(7, 8), (RA,))], ra_column=3), X86).reason == "ra-column"
    assert lower(timeline([], size=0), X86).reason == "empty-function"
    broken = Timeline("f", ".text", 0, 4, (), 16, Location("t.s", 1), invalid="bad")
    assert lower(broken, X86).reason == "invalid-cfi"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d[:20], "runs past the end"),
        (lambda d: b"\x00\x00" + d[2:], "bad magic"),
        (lambda d: d[:2] + b"\x07" + d[3:], "unsupported SFrame version 7"),
        (lambda d: d[:3] + b"\x80" + d[4:], "unknown flags"),
        (lambda d: d[:4] + b"\x09" + d[5:], "unknown ABI"),
        (lambda d: d[:12] + b"\x09" + d[13:], "header says 9 FREs"),
        (lambda d: d[:16] + b"\x03" + d[17:], "FRE"),
    ],
)
def test_decoder_rejects_inconsistent_sections_with_an_offset(mutate, message):
    data = raw(timeline(FRAME_POINTER_ROWS))
    with pytest.raises(DecodeError) as info:
        decode_sframe(mutate(data))
    assert message in str(info.value)
    assert "at byte 0x" in str(info.value)


def test_decode_reads_back_what_was_encoded():
    data = raw(timeline(FRAME_POINTER_ROWS), timeline(FRAME_POINTER_ROWS, start=16))
    section = decode_sframe(data)
    assert len(section.fdes) == 2
    assert meaning(section, section.fdes[1].fres[2]) == ("fp", 16, -16, ("cfa", -8))
