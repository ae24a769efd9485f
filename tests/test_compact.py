"""Compact unwind: hand-derived encodings (compact_unwind_encoding.h, libunwind's
stepping rules) and property tests (random prologues and epilogues -> rows ->
encodings -> decoder -> the CFI's rules at every PC a row covers)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cfi2sframe import CfaReg, Location, Row, Rule, Timeline
from cfi2sframe.compact.encoding import (
    NOT_FUNCTION_START,
    Code,
    CompactRules,
    decode,
    is_dwarf,
    permutation,
    unpermute,
)
from cfi2sframe.compact.lower import lower_compact, row_rules

RA = (16, Rule("offset", -8))


def timeline(rows, size):
    return Timeline("f", ".text", 0, size, tuple(rows), 16, Location("t.s", 1))


def test_hand_derived_x86_64_encodings():
    # RBP frame, offset 3, slots rbx (1), r14 (4), r15 (5): rbx at rbp-24.
    assert decode(0x01030161, "x86_64") == CompactRules(
        6, 16, -8, ((3, -40), (6, -16), (14, -32), (15, -24)))
    # IMMD: stack 6 slots, 3 registers, permutation 10 -> rbx, r14, r15 (lowest first).
    assert decode(0x02060C0A, "x86_64") == CompactRules(
        7, 48, -8, ((3, -32), (14, -24), (15, -16)))
    # IND: imm32 at +4 (5000) + 2 slots; rbx at CFA-16.
    code = Code(b"\x53\x48\x81\xec" + (5000).to_bytes(4, "little"))
    assert decode(0x03044400, "x86_64", code) == CompactRules(7, 5016, -8, ((3, -16),))
    assert isinstance(decode(0x01000006, "x86_64"), str)  # RBP in a frame slot: abort


def test_hand_derived_arm64_encodings():
    # Frame with x19/x20 and d8/d9: x19 at CFA-24, x20 at CFA-32, d8 at -40, d9 at -48.
    assert decode(0x04000101, "arm64") == CompactRules(
        29, 16, -8, ((19, -24), (20, -32), (29, -16), (72, -40), (73, -48)))
    assert decode(0x02003000, "arm64") == CompactRules(31, 48, None, ())
    assert isinstance(decode(0x02001001, "arm64"), str)  # frameless with pairs


def test_permutation_round_trip_for_every_ordered_subset():
    from itertools import permutations

    seen = 0
    for count in range(7):
        for regs in permutations(range(1, 7), count):
            assert unpermute(count, permutation(list(regs))) == list(regs)
            seen += 1
    assert seen == 1957  # the 1,956 non-empty ordered subsets and the empty one


@st.composite
def x86_functions(draw):
    """A prologue (pushes, maybe a frame pointer, maybe a stack allocation), a body,
    and maybe an epilogue, as DWARF rows with the code bytes that go with them."""
    regs = draw(st.lists(st.sampled_from([3, 12, 13, 14, 15]), unique=True, max_size=5))
    use_fp = draw(st.booleans())
    alloc = draw(st.sampled_from([0, 8, 16, 40, 4096, 70000]))
    rows, code, cfa, saved = [], bytearray(), 8, {16: Rule("offset", -8)}

    def row(cfa_reg, offset):
        rows.append(Row(len(code), CfaReg(cfa_reg, offset), tuple(sorted(saved.items()))))

    row(7, 8)
    if use_fp:
        code += b"\x55"
        cfa += 8
        saved[6] = Rule("offset", -cfa)
        row(7, cfa)
        code += b"\x48\x89\xe5"
        row(6, 16)
    for reg in regs:
        code += b"\x41\x50" if reg >= 8 else b"\x53"
        cfa += 8
        saved[reg] = Rule("offset", -cfa)
        if not use_fp:
            row(7, cfa)
    if alloc:
        code += b"\x48\x81\xec" + alloc.to_bytes(4, "little")
        cfa += alloc
        if not use_fp:
            row(7, cfa)
    if use_fp and regs:
        row(6, 16)
    code += b"\x90" * draw(st.integers(1, 8))
    if draw(st.booleans()):  # an epilogue with CFI, as GCC writes it
        for reg in reversed(regs):
            saved.pop(reg)
            code += b"\x5b"
            if not use_fp:
                cfa -= 8
                row(7, cfa - alloc)
        code += b"\xc3"
    merged = [r for i, r in enumerate(rows) if i + 1 == len(rows) or rows[i + 1].start != r.start]
    return timeline(merged, len(code)), Code(bytes(code))


@settings(max_examples=300, deadline=None)
@given(x86_functions())
def test_every_compact_row_unwinds_as_the_cfi_at_every_pc_it_covers(case):
    func_timeline, code = case
    for ranges in (False, True):
        func = lower_compact(func_timeline, "x86_64", code, ranges)
        if not ranges:
            continue  # one row: exact at the body state only (checked when encoding)
        covered = 0
        for crow in func.rows:
            encoding = crow.encoding & ~NOT_FUNCTION_START
            if is_dwarf(encoding, "x86_64"):
                continue
            rules = decode(encoding, "x86_64", Code(code.data[crow.start:]))
            for i, drow in enumerate(func_timeline.rows):
                end = (func_timeline.rows[i + 1].start if i + 1 < len(func_timeline.rows)
                       else func_timeline.size)
                if max(drow.start, crow.start) < min(end, crow.start + crow.length):
                    assert rules == row_rules(drow, "x86_64"), (crow, drow)
            covered += crow.length
        assert func.exact_bytes == covered
        assert sum(r.length for r in func.rows) == func_timeline.size
