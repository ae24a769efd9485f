"""Reading side: round trips, dumps of hand-built sections, lookup, diff, verify, fuzzing."""

from __future__ import annotations

import struct
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cfi2sframe import DecodeError, decode_sframe
from cfi2sframe.analysis.compare import diff_sections
from cfi2sframe.arch import get_arch
from cfi2sframe.sframe.decode import decode
from cfi2sframe.sframe.dump import dump_text
from cfi2sframe.sframe.encode import build_v2, functions_from_decoded
from cfi2sframe.sframe.format import Fre, SFrameFunction
from cfi2sframe.sframe.rules import RA_UNDEFINED, FrameRules, Loc, fre_rules
from cfi2sframe.sframe.text import describe

X86 = get_arch("x86_64")


def encode(functions, sort=True, address=0):
    return build_v2(functions, X86, sort).to_bytes(address, lambda f: f.start)


def v3_x86_worked_example() -> bytes:
    """An x86-64 V3 section built field by field from the V3 spec's layouts."""
    header = struct.pack("<HBBBbbBIIIII", 0xDEE2, 3, 0x04, 3, 0, -8, 0, 1, 4, 0x14, 0, 0x10)
    index = struct.pack("<qII", 0, 7, 0)
    attr = struct.pack("<HBBB", 4, 0, 0, 0)
    fres = bytes([0x00, 0x03, 0x08, 0x01, 0x05, 0x10, 0xF0, 0x04, 0x04, 0x10, 0xF0,
                  0x06, 0x05, 0x08, 0xF0])
    return header + index + attr + fres


def test_v3_worked_example_decodes_and_dumps_as_readelf_246():
    data = v3_x86_worked_example()
    section = decode(data)
    (fde,) = section.fdes
    # Start field at 0x1c holds 0 (unrelocated): the function starts at the field.
    assert (fde.start_address, fde.size, len(fde.fres)) == (0x1C, 7, 4)
    expected = (
        "Contents of the SFrame section .sframe:\n"
        "  Header :\n\n"
        "    Version: SFRAME_VERSION_3\n"
        "    Flags: SFRAME_F_FDE_FUNC_START_PCREL\n"
        "    CFA fixed RA offset: -8\n"
        "    Num FDEs: 1\n"
        "    Num FREs: 4\n"
        "\n  Function Index :\n"
        "\n    func idx [0]: pc = 0x1c, size = 7 bytes"
        "\n    STARTPC         CFA       FP        RA           "
        "\n    000000000000001c  sp+8      u         f            "
        "\n    000000000000001d  sp+16     c-16      f            "
        "\n    0000000000000020  fp+16     c-16      f            "
        "\n    0000000000000022  sp+8      c-16      f            "
        "\n"
    )
    assert dump_text(section) == expected


def test_v3_flex_drap_row_and_ra_undefined():
    """A FLEX FDE (V3 spec: CFA = *(RBP-8)) and an RA-undefined FRE, built by hand."""
    # Function 0 is FLEX: FRE0 CFA = rsp+8 via control (7<<3)|1 = 0x39, offset 8;
    # FRE1 CFA = *(rbp-8): control (6<<3)|2|1 = 0x33, offset -8; RA padding 0;
    # FP = *(rbp+0): control 0x33, offset 0.  FRE2 at 9: RA undefined.
    fres = bytes([0x00, 0x04, 0x39, 0x08,
                  0x05, 0x0A, 0x33, 0xF8, 0x00, 0x33, 0x00,
                  0x09, 0x00])
    attr = struct.pack("<HBBB", 3, 0, 1, 0)
    body = attr + fres
    header = struct.pack("<HBBBbbBIIIII", 0xDEE2, 3, 0x05, 3, 0, -8, 0, 1, 3, len(body), 0,
                         0x10)
    data = header + struct.pack("<qII", 0x100 - 0x1C, 16, 0) + body
    section = decode(data)
    (fde,) = section.fdes
    assert fde.flex and fde.start_address == 0x100
    rules = [fre_rules(section, fde, fre) for fre in fde.fres]
    assert rules[0] == FrameRules(Loc(7, 8, False), None, Loc(None, -8, True))
    assert rules[1] == FrameRules(Loc(6, -8, True), Loc(6, 0, True), Loc(None, -8, True))
    assert rules[2].ra == RA_UNDEFINED
    assert describe(rules[1], 3) == "CFA = [rbp-8], RA = [CFA-8], FP = [rbp+0]"
    text = dump_text(section)
    assert '\n    func idx [0]: pc = 0x100, size = 16 bytes, attr = "F"' in text
    assert "\n    0000000000000100  sp+8      u         f            " in text
    assert "\n    0000000000000105  (fp-8)    (fp+0)    U            " in text
    assert "\n    0000000000000109  RA undefined" in text


fre_strategy = st.builds(
    lambda start, fp_base, cfa, fp: (start, fp_base, cfa, fp),
    st.integers(0, 70000), st.booleans(), st.integers(-(1 << 31), (1 << 31) - 1),
    st.one_of(st.none(), st.integers(-(1 << 31), (1 << 31) - 1)))


@st.composite
def sections(draw):
    functions = []
    address = 0x1000
    for i in range(draw(st.integers(0, 5))):
        raw = sorted(draw(st.lists(fre_strategy, min_size=1, max_size=6)), key=lambda r: r[0])
        starts = sorted({r[0] for r in raw})
        fres = tuple(Fre(s, r[1], r[2], r[3]) for s, r in zip(starts, raw, strict=False))
        size = starts[-1] + draw(st.integers(1, 100))
        functions.append(SFrameFunction(f"f{i}", ".text", address, size, fres))
        address += size + draw(st.integers(0, 64))
    return functions


@settings(max_examples=150, deadline=None)
@given(sections(), st.integers(0, 1 << 40))
def test_encode_decode_encode_is_byte_identical(functions, address):
    data = encode(functions, address=address % (1 << 20))
    section = decode(data, address % (1 << 20))
    again = build_v2(functions_from_decoded(section), X86, True).to_bytes(
        address % (1 << 20), lambda f: f.start)
    assert again == data


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_random_bytes_give_a_clean_error_or_a_decode(data):
    _decode_bounded(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sections(), st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)),
                            min_size=1, max_size=8))
def test_mutated_sections_give_a_clean_error_or_a_decode(functions, flips):
    data = bytearray(encode(functions))
    if not data:
        return
    for pos, value in flips:
        data[pos % len(data)] = value
    _decode_bounded(bytes(data))


def _decode_bounded(data: bytes) -> None:
    start = time.perf_counter()
    try:
        section = decode_sframe(data)
        dump_text(section)
        for fde in section.fdes:
            for fre in fde.fres:
                fre_rules(section, fde, fre)
    except DecodeError as exc:
        assert exc.offset >= 0
    assert time.perf_counter() - start < 0.5


def test_diff_finds_a_changed_row_and_missing_functions():
    f = SFrameFunction("f", ".text", 0x10, 8, (Fre(0, False, 8), Fre(1, False, 16)))
    g = SFrameFunction("g", ".text", 0x40, 4, (Fre(0, False, 8),))
    changed = SFrameFunction("f", ".text", 0x10, 8, (Fre(0, False, 8), Fre(3, False, 16)))
    same = diff_sections(decode(encode([f, g])), decode(encode([f, g])))
    assert same.equivalent and same.same == 2
    result = diff_sections(decode(encode([f, g])), decode(encode([changed])))
    assert not result.equivalent
    (d,) = result.differing
    assert d.address == 0x10 and [(s, e) for s, e, _, _ in d.ranges] == [(1, 3)]
    assert [x.start_address for x in result.only_a] == [0x40]


def test_diff_ignores_how_rows_are_split():
    one = SFrameFunction("f", ".text", 0, 8, (Fre(0, False, 8), Fre(2, False, 16)))
    split = SFrameFunction("f", ".text", 0, 8, (Fre(0, False, 8), Fre(1, False, 8),
                                                Fre(2, False, 16), Fre(5, False, 16)))
    assert diff_sections(decode(encode([one])), decode(encode([split]))).equivalent


def test_pc_mask_lookup_uses_the_repeat_size():
    plt = SFrameFunction("plt", ".plt", 0x1000, 64, (Fre(0, False, 8), Fre(11, False, 16)),
                         pc_mask=True, rep_size=16)
    section = decode(encode([plt]))
    (fde,) = section.fdes
    assert fde.fre_at(0x1000 + 16 + 5).start == 0
    assert fde.fre_at(0x1000 + 32 + 12).start == 11
    assert fde.fre_at(0x1000 + 64) is None


def _v2_section(abi: int, big: bool, fres: bytes, num_fres: int, info: int = 0,
                size: int = 0x20) -> bytes:
    order = ">" if big else "<"
    header = struct.pack(order + "HBBBbbBIIIII", 0xDEE2, 2, 0x04, abi, 0, 0, 0, 1, num_fres,
                         len(fres), 0, 20)
    fde = struct.pack(order + "iIIIBBH", 0x1000 - 28, size, 0, num_fres, info, 0, 0)
    return header + fde + fres


def test_aarch64_fre_with_signed_ra_and_b_key():
    # FRE 08 87 20 e8 e0 by the spec's FRE info word (bit 7 mangled RA, bits 5-6 size
    # 0 = 1 byte, bits 1-4 count 3, bit 0 base 1 = SP): CFA = sp+32, RA = [CFA-24], FP = [CFA-32].
    data = _v2_section(2, False, bytes([0x00, 0x03, 0x00, 0x08, 0x87, 0x20, 0xE8, 0xE0]), 2,
                       info=0x20)
    section = decode(data)
    (fde,) = section.fdes
    assert fde.pauth_b_key and fde.fres[1].mangled_ra
    assert fre_rules(section, fde, fde.fres[1]) == FrameRules(
        Loc(31, 32, False), Loc(None, -32, True), Loc(None, -24, True))
    assert fre_rules(section, fde, fde.fres[0]).ra is None  # RA still in x30
    text = dump_text(section)
    assert "size = 32 bytes, pauth = B key" in text
    assert "\n    0000000000001008  sp+32     c-32      c-24[s]      " in text
    assert "\n    0000000000001000  sp+0      u         u            " in text


def test_s390x_big_endian_cfa_encoding_and_v2_register_encoding():
    # FRE 06 07 00 d0 b8: CFA = sp + (0*8+160), RA = [CFA-48], FP = [CFA-72];
    # FRE 0c 07 14 0f 21: CFA = sp + 20*8+160 = 320, RA in r7 ((7<<1)|1), FP in r16.
    fres = bytes([0x06, 0x07, 0x00, 0xD0, 0xB8, 0x0C, 0x07, 0x14, 0x0F, 0x21])
    section = decode(_v2_section(4, True, fres, 2))
    assert section.big_endian
    (fde,) = section.fdes
    assert fde.start_address == 0x1000
    first, second = (fre_rules(section, fde, fre) for fre in fde.fres)
    assert first == FrameRules(Loc(15, 160, False), Loc(None, -72, True), Loc(None, -48, True))
    assert second == FrameRules(Loc(15, 320, False), Loc(16, 0, False), Loc(7, 0, False))
    text = dump_text(section)
    assert "\n    0000000000001006  sp+160    c-72      c-48         " in text
    assert "\n    000000000000100c  sp+320    r16       r7           " in text


def test_s390x_ra_padding_means_not_saved():
    fres = bytes([0x00, 0x07, 0x02, 0x00, 0xB8])
    section = decode(_v2_section(4, True, fres, 1))
    fde = section.fdes[0]
    rules = fre_rules(section, fde, fde.fres[0])
    assert rules.ra is None and rules.fp == Loc(None, -72, True)
    assert "sp+176    c-72      U            " in dump_text(section)


def test_wrong_byte_order_for_the_abi_is_an_error():
    data = _v2_section(4, False, bytes([0x00, 0x03, 0x00]), 1)
    try:
        decode(data)
    except DecodeError as exc:
        assert "byte order" in exc.message
    else:
        raise AssertionError("decoded a little-endian s390x section")


@st.composite
def fde_tables(draw):
    """FDE (start, size) tables: back to back or with gaps (a linked file), or
    overlapping and out of order (an object's sections all at 0)."""
    spans = draw(st.lists(st.tuples(st.integers(0, 400), st.integers(0, 40)), max_size=30))
    if draw(st.booleans()):  # laid out one after another
        at, laid = 0, []
        for gap, size in spans:
            at += gap % 8
            laid.append((at, size))
            at += size
        spans = laid
    return spans


@settings(max_examples=300, deadline=None)
@given(fde_tables(), st.lists(st.integers(-1, 500), max_size=20))
def test_find_fde_is_the_first_fde_in_table_order_that_holds_the_pc(spans, pcs):
    """The binary search (FDEs one after another) and the scan (anything else) both
    answer what a scan of the table in order does."""
    from cfi2sframe.sframe.decode import DecodedFde, DecodedSection

    fdes = tuple(DecodedFde(i, start, start, size, 0, 0, 0, 0, (), 0)
                 for i, (start, size) in enumerate(spans))
    section = DecodedSection(2, 1, 3, 0, -8, 0, 0, 0, 0, 0, False, fdes)
    for pc in pcs:
        first = next((f for f in fdes if f.start_address <= pc < f.start_address + f.size),
                     None)
        assert section.find_fde(pc) is first


@settings(max_examples=150, deadline=None)
@given(sections(), st.integers(0, 1 << 30), st.lists(st.integers(-16, 1 << 17), max_size=12),
       st.booleans())
def test_decode_covering_finds_what_the_whole_decode_finds(functions, address, pcs, sort):
    """lookup's partial read (the index's fields, then only the FDEs asked for) gives,
    for every PC, the FDE and FREs the whole decode gives; V2 and the V3 worked
    example, sorted and unsorted tables, with and without a section address."""
    from cfi2sframe.sframe.decode import decode_covering

    for data, base in ((encode(functions, sort, address), address),
                       (v3_x86_worked_example(), 0)):
        whole = decode(data, base)
        wanted = [base + pc for pc in pcs] + [fde.start_address for fde in whole.fdes[:3]]
        partial = decode_covering(data, wanted, base)
        assert len(partial.fdes) <= len(wanted)
        for pc in wanted:
            assert partial.find_fde(pc) == whole.find_fde(pc), hex(pc)
