"""Tests written for the survivors of tests/support/mutate.py (issue 24, item 6).

Each test names the mutants it kills.  Expected values come from a real tool (GNU as and
readelf) or from the ABI documents, never from our own output.
"""

from __future__ import annotations

import pytest

from cfi2sframe.arch import get_arch


def test_register_numbers_gas_does_not_accept_follow_the_abi() -> None:
    """The table entries GNU as 2.40 refuses, checked against the ABI documents.

    AArch64 DWARF ABI (aadwarf64): V0-V31 are 64-95, RA_SIGN_STATE is 34.
    s390x ELF ABI supplement, DWARF register table: control registers 32-47, access
    registers 48-63, PSW mask 64, PSW address 65.  x86-64: the 32-bit names are the
    columns of their 64-bit registers (psABI figure 3.36: rax 0, rdx 1, rcx 2, rbx 3,
    rsi 4, rdi 5, rbp 6, rsp 7, RA 16).
    """
    aarch64 = get_arch("aarch64").registers
    assert [aarch64[f"v{n}"] for n in range(32)] == list(range(64, 96))
    assert aarch64["ra_sign_state"] == 34
    s390x = get_arch("s390x").registers
    assert [s390x[f"c{n}"] for n in range(16)] == list(range(32, 48))
    assert [s390x[f"a{n}"] for n in range(16)] == list(range(48, 64))
    assert (s390x["pswm"], s390x["pswa"]) == (64, 65)
    x86 = get_arch("x86_64").registers
    assert [x86[n] for n in ("eax", "edx", "ecx", "ebx", "esi", "edi", "ebp", "esp",
                             "eip")] == [0, 1, 2, 3, 4, 5, 6, 7, 16]


def test_x86_64_register_table_is_exactly_the_psabi_one() -> None:
    """The x86-64 names are exactly the psABI's DWARF register mapping (figure 3.36), plus
    GNU as's spellings st(N) and the 32-bit aliases: no name outside it (a range one too
    long, e.g. k8, is a name neither the ABI nor GNU as knows)."""
    expected = dict(zip(["rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp"],
                        range(8), strict=True))
    expected |= {f"r{n}": n for n in range(8, 16)}                   # r8-r15: 8-15
    expected["rip"] = 16                                            # return address
    expected |= {f"xmm{n}": 17 + n for n in range(16)}              # 17-32
    expected |= {f"st{n}": 33 + n for n in range(8)}                # 33-40
    expected |= {f"st({n})": 33 + n for n in range(8)}
    expected |= {f"mm{n}": 41 + n for n in range(8)}                # 41-48
    expected |= {"rflags": 49, "es": 50, "cs": 51, "ss": 52, "ds": 53, "fs": 54, "gs": 55,
                 "fs.base": 58, "gs.base": 59, "tr": 62, "ldtr": 63, "mxcsr": 64,
                 "fcw": 65, "fsw": 66}
    expected |= {f"xmm{n}": 67 + n - 16 for n in range(16, 32)}     # 67-82
    expected |= {f"k{n}": 118 + n for n in range(8)}                # 118-125
    expected |= {"eax": 0, "edx": 1, "ecx": 2, "ebx": 3, "esi": 4, "edi": 5, "ebp": 6,
                 "esp": 7, "eip": 16}
    assert get_arch("x86_64").registers == expected


def test_arm64_frameless_stack_size_reaches_4095_times_16() -> None:
    """compact_unwind_encoding.h: UNWIND_ARM64_MODE_FRAMELESS 0x02000000 with the stack
    size / 16 in UNWIND_ARM64_FRAMELESS_STACK_SIZE_MASK 0x00FFF000 (12 bits): CFA = sp +
    65520 (4095 x 16) is the largest that fits, 0x02000000 | 0xFFF << 12 = 0x02FFF000;
    sp + 65536 does not.  Kills `<= 0xFFF * 16` -> `<` in encode_arm64."""
    from cfi2sframe.compact.arm64 import encode_arm64
    from cfi2sframe.compact.rules import CompactRules
    from cfi2sframe.reasons import Unrepresentable

    assert encode_arm64(CompactRules(31, 65520, None, ())) == 0x02FFF000
    assert encode_arm64(CompactRules(31, 16, None, ())) == 0x02001000
    refused = encode_arm64(CompactRules(31, 65536, None, ()))
    assert isinstance(refused, Unrepresentable) and refused.reason == "stack-size"


def test_ranges_merge_neighbours_with_the_same_encoding() -> None:
    """`--ranges` rows: a row whose encoding equals the previous one (apart from
    UNWIND_IS_NOT_FUNCTION_START, 0x80000000) extends it instead of starting a new row.

    x86-64, compact_unwind_encoding.h: UNWIND_X86_64_MODE_STACK_IMMD 0x02000000 with the
    stack size / 8 in bits 16-23 and no saved registers: CFA = rsp+8 at 0 is 0x02010000;
    rsp+16 from 1 is 0x02020000 | 0x80000000.  The row at 3 repeats the one at 1, so the
    second range covers 1..8.  Kills `& ~NOT_FUNCTION_START` -> `& NOT_FUNCTION_START`.
    """
    from cfi2sframe import CfaReg, Location, Row, Rule, Timeline
    from cfi2sframe.compact.lower import lower_compact

    ra = (16, Rule("offset", -8))
    rows = (Row(0, CfaReg(7, 8), (ra,)), Row(1, CfaReg(7, 16), (ra,)),
            Row(3, CfaReg(7, 16), (ra,)))
    timeline = Timeline("f", ".text", 0, 8, rows, 16, Location("t.s", 1))
    got = lower_compact(timeline, "x86_64", ranges=True).rows
    assert [(r.start, r.length, r.encoding) for r in got] == \
        [(0, 1, 0x02010000), (1, 7, 0x82020000)]


# DWARF 5 section 2.5.1.4 and table 7.9: DW_OP_lit12 0x3c, DW_OP_lit10 0x3a, DW_OP_lit2
# 0x32, DW_OP_const1s 0x09; the binary operations pop b (top) then a and push a OP b.
BINARY_OPS = [
    (0x1A, "and", 12 & 10),        # 0b1100 & 0b1010 = 8
    (0x1E, "mul", 120),
    (0x21, "or", 14),              # 0b1100 | 0b1010
    (0x24, "shl", 12 << 10),
    (0x25, "shr", 0),              # 12 >> 10
    (0x27, "xor", 6),              # 0b0110
    (0x29, "eq", 0),
    (0x2A, "ge", 1),
    (0x2B, "gt", 1),
    (0x2C, "le", 0),
    (0x2D, "lt", 0),
    (0x2E, "ne", 1),
]


@pytest.mark.parametrize(("opcode", "name", "expected"), BINARY_OPS,
                         ids=[name for _, name, _ in BINARY_OPS])
def test_dwarf_expression_binary_operations(opcode: int, name: str, expected: int) -> None:
    """lit12 lit10 OP computes 12 OP 10 (values worked out above); kills swapped operators
    in dwarf/expr._BINARY (e.g. DW_OP_or's `a | b` -> `a & b`)."""
    from cfi2sframe.dwarf.expr import Value, evaluate

    assert evaluate(bytes([0x3C, 0x3A, opcode]), 0, None) == Value(None, expected)


def test_dwarf_expression_shifts_of_a_negative_value() -> None:
    """const1s -16 lit2 shra is -4 (arithmetic); shr is logical on 64 bits:
    (2**64 - 16) >> 2 = 0x3FFFFFFFFFFFFFFC."""
    from cfi2sframe.dwarf.expr import evaluate

    assert evaluate(bytes([0x09, 0xF0, 0x32, 0x26]), 0, None).offset == -4
    value = evaluate(bytes([0x09, 0xF0, 0x32, 0x25]), 0, None).offset
    assert value & ((1 << 64) - 1) == 0x3FFFFFFFFFFFFFFC


@pytest.mark.parametrize(("opcode", "expected"), [(0x29, 1), (0x2A, 1), (0x2B, 0), (0x2C, 1),
                                                  (0x2D, 0), (0x2E, 0)],
                         ids=["eq", "ge", "gt", "le", "lt", "ne"])
def test_dwarf_expression_comparisons_of_equal_values(opcode: int, expected: int) -> None:
    """lit10 lit10 OP: eq, ge, le are 1 and gt, lt, ne are 0 (DWARF 5 2.5.1.4); kills
    `>=` <-> `>` and `<=` <-> `<` in dwarf/expr._BINARY."""
    from cfi2sframe.dwarf.expr import evaluate

    assert evaluate(bytes([0x3A, 0x3A, opcode]), 0, None).offset == expected


def test_dwarf_expression_comparisons_are_signed() -> None:
    """DWARF 5 2.5.1.4: the relational operators compare as signed: const1s -1 lit1 lt
    is 1 (as unsigned 2**64 - 1 < 1 would be 0)."""
    from cfi2sframe.dwarf.expr import evaluate

    assert evaluate(bytes([0x09, 0xFF, 0x31, 0x2D]), 0, None).offset == 1


@pytest.mark.parametrize("opcode", [0x24, 0x25], ids=["shl", "shr"])
def test_dwarf_expression_shift_by_64_is_zero(opcode: int) -> None:
    """Values are 64-bit (the address size): lit1 const1u 64 shl/shr leaves 0."""
    from cfi2sframe.dwarf.expr import evaluate

    value = evaluate(bytes([0x31, 0x08, 0x40, opcode]), 0, None).offset
    assert value & ((1 << 64) - 1) == 0


@pytest.mark.parametrize(("opcode", "size", "expected"), [
    (0x08, 1, 0xFF), (0x09, 1, -1), (0x0A, 2, 0xFFFF), (0x0B, 2, -1),
    (0x0C, 4, 0xFFFFFFFF), (0x0D, 4, -1), (0x0E, 8, (1 << 64) - 1), (0x0F, 8, -1)],
    ids=["const1u", "const1s", "const2u", "const2s", "const4u", "const4s", "const8u",
         "const8s"])
def test_dwarf_expression_fixed_size_constants(opcode: int, size: int, expected: int) -> None:
    """DWARF 5 table 7.9: DW_OP_const1u 0x08 ... const8s 0x0f, each followed by its
    operand of 1, 2, 4 or 8 bytes (unsigned, signed alternately).  All-ones operands
    then DW_OP_lit0 DW_OP_plus (0x30 0x22): the constant, read with the right size and
    sign, and the expression ends exactly after it.  Kills changed keys and sizes in
    dwarf/expr._CONSTS."""
    from cfi2sframe.dwarf.expr import evaluate

    value = evaluate(bytes([opcode]) + b"\xff" * size + b"\x30\x22", 0, None).offset
    assert value & ((1 << 64) - 1) == expected & ((1 << 64) - 1)
    if expected < 0 or size < 8:
        assert value == expected


def test_dwarf_expression_shifts_by_63_and_the_sign_bit() -> None:
    """64-bit two's complement values (DWARF 5 2.5.1: the generic type is the address
    size):
    lit1 const1u 63 shl = 2**63, which as a signed 64-bit value is -2**63;
    const1s -1 const1u 63 shr = 1 (logical); const8s -2**63 const1u 63 shra = -1;
    const8u 2**62 lit0 or = 2**62 (bit 62 is not the sign bit)."""
    from cfi2sframe.dwarf.expr import evaluate

    assert evaluate(bytes([0x31, 0x08, 63, 0x24]), 0, None).offset == -(1 << 63)
    assert evaluate(bytes([0x09, 0xFF, 0x08, 63, 0x25]), 0, None).offset == 1
    min64 = bytes([0x0F]) + (1 << 63).to_bytes(8, "little")
    assert evaluate(min64 + bytes([0x08, 63, 0x26]), 0, None).offset == -1
    bit62 = bytes([0x0E]) + (1 << 62).to_bytes(8, "little")
    assert evaluate(bit62 + bytes([0x30, 0x21]), 0, None).offset == 1 << 62


# DWARF 5 section 2.5.1 (opcodes from table 7.9): lit0 0x30 .. lit31 0x4f, breg0 0x70 ..
# breg31 0x8f (SLEB offset), bregx 0x92 (ULEB register, SLEB offset), dup 0x12, drop 0x13,
# over 0x14 (copies the second entry), pick 0x15 (1-byte index), swap 0x16, minus 0x1c,
# not 0x20 (bitwise), plus 0x22, bra 0x28 and skip 0x2f (2-byte signed offset from the
# byte after the operand), nop 0x96.  A Value is (register or None, constant).
STACK_CASES = [
    ("lit31", [0x4F], (None, 31)),
    ("breg0", [0x70, 0x05], (0, 5)),
    ("breg31", [0x8F, 0x7D], (31, -3)),                    # SLEB 0x7d = -3
    ("bregx", [0x92, 0x21, 0x04], (33, 4)),
    ("breg_of_the_pc", [0x77, 0x08], (None, 0x108)),       # pc_reg 7 at pc 0x100
    ("not", [0x35, 0x20], (None, ~5)),                    # -6
    ("dup", [0x35, 0x12, 0x22], (None, 10)),
    ("drop", [0x35, 0x37, 0x13], (None, 5)),
    ("over", [0x35, 0x37, 0x14], (None, 5)),
    ("pick", [0x31, 0x32, 0x33, 0x15, 0x02], (None, 1)),
    ("swap", [0x35, 0x37, 0x16, 0x1C], (None, 2)),          # 7 - 5
    ("skip", [0x35, 0x2F, 0x01, 0x00, 0x32], (None, 5)),    # jumps over lit2
    ("skip_to_the_end", [0x35, 0x2F, 0x01, 0x00, 0x96], (None, 5)),
    ("bra_taken", [0x37, 0x31, 0x28, 0x01, 0x00, 0x32], (None, 7)),
    ("bra_not_taken", [0x37, 0x30, 0x28, 0x01, 0x00, 0x32], (None, 2)),
    # 0: skip +4 -> 7; 7: skip -7 (from 10) -> 3; 3: lit5; 4: skip +3 (from 7) -> 10, end
    ("skip_back", [0x2F, 0x04, 0x00, 0x35, 0x2F, 0x03, 0x00, 0x2F, 0xF9, 0xFF], (None, 5)),
    ("nop", [0x35, 0x96], (None, 5)),
]


@pytest.mark.parametrize(("ops", "expected"), [c[1:] for c in STACK_CASES],
                         ids=[c[0] for c in STACK_CASES])
def test_dwarf_expression_stack_operations(ops: list[int], expected: tuple) -> None:
    """Each operation's result worked out by hand from DWARF 5 (table above); kills
    changed opcode ranges, comparisons and branch arithmetic in dwarf/expr.evaluate."""
    from cfi2sframe.dwarf.expr import Value, evaluate

    assert evaluate(bytes(ops), 0x100, 7) == Value(*expected)


def test_dwarf_expression_bounds() -> None:
    """A branch past the end, an unknown operation (DW_OP_reg31 0x6f, a location, not a
    value) and an endless loop (skip -3 to itself) are NotReducible; an expression of
    exactly MAX_STEPS operations is evaluated."""
    from cfi2sframe.dwarf.expr import MAX_STEPS, NotReducible, Value, evaluate

    for ops in ([0x35, 0x2F, 0x02, 0x00, 0x96], [0x6F, 0x00], [0x2F, 0xFD, 0xFF]):
        with pytest.raises(NotReducible):
            evaluate(bytes(ops), 0, None)
    assert evaluate(bytes([0x96] * (MAX_STEPS - 1) + [0x35]), 0, None) == Value(None, 5)
    with pytest.raises(NotReducible):
        evaluate(bytes([0x96] * MAX_STEPS + [0x35]), 0, None)


@pytest.mark.parametrize(("value", "encoded"), [
    (0, b"\x00"), (63, b"\x3f"), (64, b"\xc0\x00"), (-1, b"\x7f"), (-64, b"\x40"),
    (-65, b"\xbf\x7f"), (-128, b"\x80\x7f"), (127, b"\xff\x00")])
def test_sleb128_encoding_is_the_shortest(value: int, encoded: bytes) -> None:
    """DWARF 5 section 7.6 / appendix C: SLEB128 stops when the rest is all sign bits and
    bit 6 of the last byte is that sign: -64 is the single byte 0x40, 64 needs 0xc0 0x00,
    -65 is 0xbf 0x7f.  Kills `byte & 0x40` -> `byte & 0x3f` in leb128.sleb."""
    from cfi2sframe.dwarf.leb128 import read_sleb, sleb

    assert sleb(value) == encoded
    assert read_sleb(encoded, 0) == (value, len(encoded))


def test_dw_cfa_offset_extended_is_opcode_5() -> None:
    """DWARF 5 table 7.29: DW_CFA_offset_extended is 0x05 (ULEB register, ULEB factored
    offset) and DW_CFA_restore_extended 0x06.  Bytes 05 43 02 with data alignment -8 say
    register 67 is saved at CFA - 16.  Kills `offset_extended = 0x05` -> 0x6."""
    from cfi2sframe.dwarf.opcodes import CFA

    assert (CFA.offset_extended, CFA.restore_extended) == (0x05, 0x06)
    from cfi2sframe.dwarf.ops import Offset, decode_ops

    assert decode_ops(bytes([0x05, 0x43, 0x02]), 1, -8, 8, False) == [Offset(67, -16)]


def test_direct_path_refuses_a_truncated_advance() -> None:
    """An FDE body ending inside DW_CFA_advance_loc2 (0x03 then one byte of its two) is
    malformed: the fast path must hand it to the general path (None), which reports it,
    instead of reading a short delta.  Kills `pos + size > end` -> `pos - size > end`."""
    from cfi2sframe.sframe.fastpath import direct_fres

    x86 = get_arch("x86_64")
    initial = bytes([0x0C, 0x07, 0x08, 0x90, 0x01])  # def_cfa rsp+8; offset r16 at cfa-8
    assert direct_fres(initial, bytes([0x0E, 0x10]), 1, -8, x86, False) is not None
    assert direct_fres(initial, bytes([0x0E, 0x10, 0x03, 0x01]), 1, -8, x86, False) is None


def test_aarch64_round_trip_keeps_the_ra_offset() -> None:
    """AArch64 tracks the RA in SFrame (fixed RA offset absent, ABI 2): a frame record
    saved at CFA-16 (x29) and CFA-8 (x30) after `stp x29, x30, [sp, -16]!`, encoded,
    decoded and rebuilt by functions_from_decoded, still says RA at CFA-8 and FP at
    CFA-16.  Kills `ra.reg is not None` -> `is None` in functions_from_decoded."""
    from cfi2sframe import (
        CfaReg,
        Location,
        Row,
        Rule,
        Timeline,
        decode_sframe,
        encode_sframe,
        lower,
    )
    from cfi2sframe.sframe.encode import functions_from_decoded

    arm = get_arch("aarch64")
    saved = ((29, Rule("offset", -16)), (30, Rule("offset", -8)))
    rows = (Row(0, CfaReg(31, 0), ()), Row(4, CfaReg(31, 16), saved))
    function = lower(Timeline("f", ".text", 0, 12, rows, 30, Location("t.s", 1)), arm)
    raw = encode_sframe([function], arm).to_bytes(0, lambda f: f.start)
    back = functions_from_decoded(decode_sframe(raw))
    assert [(f.cfa_offset, f.fp_offset, f.ra_offset) for f in back[0].fres] == \
        [(0, None, None), (16, -16, -8)]


@pytest.mark.parametrize("version", [2, 3])
def test_pauth_b_key_is_bit_5_of_the_fde_info_byte(version: int) -> None:
    """SFrame V2 and V3 specs, "The SFrame FDE Info Bytes": bit 5 of the FDE info byte
    (V3: sfda_func_info) is pauth_key, 1 for SFRAME_AARCH64_PAUTH_KEY_B; bit 4 is the PC
    type.  The same aarch64 function encoded with key A and with key B differs in
    exactly one byte, by 0x20.  Kills `pauth_b_key << 5` -> `<< 4` in build_v3."""
    from cfi2sframe import CfaReg, Location, Row, Rule, Timeline, encode_sframe, lower

    arm = get_arch("aarch64")
    saved = ((29, Rule("offset", -16)), (30, Rule("offset", -8)))
    rows = (Row(0, CfaReg(31, 0), ()), Row(4, CfaReg(31, 16), saved))
    function = lower(Timeline("f", ".text", 0, 12, rows, 30, Location("t.s", 1)), arm,
                     version=version)
    key_a, key_b = (encode_sframe([function._replace(pauth_b_key=b_key)], arm, version)
                    .to_bytes(0, lambda f: f.start) for b_key in (False, True))
    assert len(key_a) == len(key_b)
    changed = [(a, b) for a, b in zip(key_a, key_b, strict=True) if a != b]
    assert len(changed) == 1 and changed[0][1] == changed[0][0] | 0x20 != changed[0][0]


def test_a_pc_mask_body_covers_at_least_two_repetitions() -> None:
    """pcmask.py: ``split_repeating`` makes a PC-mask FDE only over two repetitions or
    more.  A PLT-like function at 0x1008 of 36 bytes, whose rules repeat every 16 bytes
    from 0x1010 (CFA rsp+8 at +0, rsp+16 at +11), has 8 bytes of head and then only 28
    bytes (1.75 repetitions): it stays one PC-increment FDE with its own 5 FREs."""
    from cfi2sframe.sframe.format import Fre, SFrameFunction
    from cfi2sframe.sframe.pcmask import split_repeating

    fres = (Fre(0, False, 16), Fre(8, False, 8), Fre(19, False, 16), Fre(24, False, 8),
            Fre(35, False, 16))
    func = SFrameFunction("plt", "", 0x1008, 36, fres)
    assert split_repeating(func) == [func]
    # Two whole repetitions after the head (8 + 32 = 40 bytes) are split: head 8 bytes
    # with its one FRE, then a PC-mask FDE at 0x1010 of repetition 16 with two FREs.
    longer = func._replace(size=40)
    head, body = split_repeating(longer)
    assert (head.start, head.size, head.fres) == (0x1008, 8, fres[:1])
    assert (body.start, body.size, body.pc_mask, body.rep_size) == (0x1010, 32, True, 16)
    assert body.fres == (Fre(0, False, 8), Fre(11, False, 16))


def test_encoded_pointers_are_64_bit_addresses() -> None:
    """dwarf/cfi.py: an FDE start given as DW_EH_PE_sdata8 -16 is the address
    2^64 - 16 (addresses are unsigned 64-bit; readelf prints pc=fffffffffffffff0)."""
    from cfi2sframe.dwarf.cfi import parse_cfi

    # CIE: version 1, "zR", code align 1, data align -8 (0x78), RA 16, augmentation
    # data 1 byte: FDE pointers sdata8 (0x0c); def_cfa rsp+8, rip at cfa-8; padded.
    cie_body = b"\x00\x00\x00\x00\x01zR\x00\x01\x78\x10\x01\x0c\x0c\x07\x08\x90\x01\x00\x00"
    cie = len(cie_body).to_bytes(4, "little") + cie_body
    fde_at = len(cie)
    # FDE: CIE pointer (back to offset 0), start -16, range 16, no augmentation data.
    fde_body = ((fde_at + 4).to_bytes(4, "little") + (-16).to_bytes(8, "little", signed=True)
                + (16).to_bytes(8, "little") + b"\x00\x00\x00\x00")
    data = cie + len(fde_body).to_bytes(4, "little") + fde_body + bytes(4)
    (fde,) = parse_cfi(data, True, 0x400000, {}, 8, True, {})
    assert (fde.start, fde.size) == (2**64 - 16, 16)
