"""Compact unwind: hand-derived encodings (compact_unwind_encoding.h, libunwind's
stepping rules) and property tests (random prologues and epilogues -> rows ->
encodings -> decoder -> the CFI's rules at every PC a row covers)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cfi2sframe import CfaReg, Location, Row, Rule, Timeline
from cfi2sframe.compact.encoding import decode
from cfi2sframe.compact.lower import lower_compact, row_rules
from cfi2sframe.compact.rules import Code, CompactRules
from cfi2sframe.compact.words import NOT_FUNCTION_START, is_dwarf, permutation, unpermute
from cfi2sframe.reasons import CompactReason


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
    # RBP (6) named in a frame slot: libunwind aborts.
    assert decode(0x01000006, "x86_64").reason == CompactReason.frame_register_in_slot
    # Frameless IMMD, 2 registers (bits 10-12), permutation 0x3ff: two registers number
    # their orders 0..29 (6 * 5 choices), so 1023 names none.
    assert decode(0x02000BFF, "x86_64").reason == CompactReason.invalid_permutation
    assert decode(0x04000000, "x86_64").reason == CompactReason.dwarf_mode
    assert decode(0x00000000, "x86_64").reason == CompactReason.no_unwind_info
    assert decode(0x05000000, "x86_64").reason == CompactReason.unknown_mode
    # STACK_IND with its immediate 8 bytes past a 4-byte body.
    assert (decode(0x03080400, "x86_64", Code(bytes(4))).reason
            == CompactReason.stack_ind_outside_code)


def test_two_registers_in_one_frame_slot_are_not_encodable():
    """An RBP/EBP frame slot holds one register's 3-bit number: rbx and r12 both at
    CFA-56 (found by fuzzing: the two numbers were or-ed into one slot, an encoding
    naming neither, and the encoder's own round-trip check raised)."""
    from cfi2sframe.compact.encoding import encode

    x86 = CompactRules(6, 16, -8, ((3, -56), (6, -16), (12, -56), (13, -40), (14, -32),
                                   (15, -24)))
    i386 = CompactRules(5, 8, -4, ((3, -16), (5, -8), (6, -16)))
    for rules, arch in ((x86, "x86_64"), (i386, "i386")):
        found = encode(rules, arch, None)
        assert not isinstance(found, int) and \
            found.reason == CompactReason.saves_not_encodable, arch


def test_hand_derived_i386_encodings():
    # EBP frame, offset 3, slots EBX (1), ESI (5), EDI (4): ebx at ebp-12 = CFA-20.
    assert decode(0x01030129, "i386") == CompactRules(
        5, 8, -4, ((3, -20), (5, -8), (6, -16), (7, -12)))
    # IND: imm32 at +3 (5000, after 'push %esi' and 81 ec) + 2 slots; esi at CFA-8.
    code = Code(b"\x56\x81\xec" + (5000).to_bytes(4, "little"))
    assert decode(0x03034404, "i386", code) == CompactRules(4, 5008, -4, ((6, -8),))


def test_hand_derived_arm64_encodings():
    # Frame with x19/x20 and d8/d9: x19 at CFA-24, x20 at CFA-32, d8 at -40, d9 at -48.
    assert decode(0x04000101, "arm64") == CompactRules(
        29, 16, -8, ((19, -24), (20, -32), (29, -16), (72, -40), (73, -48)))
    assert decode(0x02003000, "arm64") == CompactRules(31, 48, None, ())
    assert decode(0x02001001, "arm64").reason == CompactReason.frameless_with_pairs
    assert decode(0x03000000, "arm64").reason == CompactReason.dwarf_mode
    assert decode(0x01000000, "arm64").reason == CompactReason.unknown_mode


def test_permutation_round_trip_for_every_ordered_subset():
    from itertools import permutations

    seen = 0
    for count in range(7):
        for regs in permutations(range(1, 7), count):
            assert unpermute(count, permutation(list(regs))) == list(regs)
            seen += 1
    assert seen == 1957  # the 1,956 non-empty ordered subsets and the empty one


# flavour -> (callee-saved registers, sp, fp, ra, slot, sub $imm32 opcode)
X86 = {"x86_64": ([3, 12, 13, 14, 15], 7, 6, 16, 8, b"\x48\x81\xec"),
       "i386": ([3, 7, 6], 4, 5, 8, 4, b"\x81\xec")}


@st.composite
def x86_functions(draw, flavour):
    """A prologue (pushes, maybe a frame pointer, maybe a stack allocation, maybe
    a register saved by a mov), a body, and maybe an epilogue, as DWARF rows with
    the code bytes that go with them."""
    callee, sp, fp, ra, slot, sub = X86[flavour]
    regs = draw(st.lists(st.sampled_from(callee), unique=True, max_size=len(callee)))
    use_fp = draw(st.booleans())
    alloc = draw(st.sampled_from([0, slot, 2 * slot, 5 * slot, 4096, 70000]))
    rows, code, cfa, saved = [], bytearray(), slot, {ra: Rule("offset", -slot)}
    spill = False

    def row(cfa_reg, offset):
        rows.append(Row(len(code), CfaReg(cfa_reg, offset), tuple(sorted(saved.items()))))

    row(sp, slot)
    if use_fp:
        code += b"\x55"
        cfa += slot
        saved[fp] = Rule("offset", -cfa)
        row(sp, cfa)
        code += b"\x48\x89\xe5"[-2 if slot == 4 else -3:]
        row(fp, 2 * slot)
    for reg in regs:
        code += b"\x41\x50" if reg >= 8 else b"\x53"
        cfa += slot
        saved[reg] = Rule("offset", -cfa)
        if not use_fp:
            row(sp, cfa)
    if alloc:
        code += sub + alloc.to_bytes(4, "little")
        cfa += alloc
        if not use_fp:
            row(sp, cfa)
        if draw(st.booleans()) and flavour == "x86_64":  # movq %r15, (%rsp): a spill
            spill = True
            code += b"\x4c\x89\x3c\x24"
            saved[15] = Rule("offset", -cfa)
            row(fp if use_fp else sp, 2 * slot if use_fp else cfa)
    if use_fp and regs:
        row(fp, 2 * slot)
    code += b"\x90" * draw(st.integers(1, 8))
    if draw(st.booleans()):  # an epilogue with CFI, as GCC writes it
        for reg in reversed(regs):
            saved.pop(reg)
            code += b"\x5b"
            if not use_fp:
                cfa -= slot
                row(sp, cfa - alloc)
        code += b"\xc3"
    merged = [r for i, r in enumerate(rows) if i + 1 == len(rows) or rows[i + 1].start != r.start]
    tl = Timeline("f", ".text", 0, len(code), tuple(merged), ra, Location("t.s", 1))
    return tl, Code(bytes(code)), not spill  # a spill below the pushes may have no encoding


@st.composite
def arm64_functions(draw):
    """sub sp / stp x29, x30 / add x29 / stp pairs, or a leaf; maybe an epilogue."""
    rows, at = [], 0
    pairs = draw(st.lists(st.sampled_from([(19, 20), (21, 22), (23, 24), (72, 73)]),
                          unique=True, max_size=3))
    frame = draw(st.booleans())
    size = 16 * draw(st.integers(0, 300))
    saved: dict[int, Rule] = {}

    def row(reg, offset):
        rows.append(Row(at, CfaReg(reg, offset), tuple(sorted(saved.items()))))

    row(31, 0)
    if frame:
        at += 4
        saved[29], saved[30] = Rule("offset", -16), Rule("offset", -8)
        row(31, 16)
        at += 4
        row(29, 16)
        slot = -24
        for first, second in sorted(pairs):
            at += 4
            saved[first], saved[second] = Rule("offset", slot), Rule("offset", slot - 8)
            slot -= 16
            row(29, 16)
    else:
        at += 4
        row(31, size)
    at += 4 * draw(st.integers(1, 4))
    if draw(st.booleans()):
        saved.clear()
        row(31, 0)
        at += 4
    return Timeline("f", ".text", 0, at + 4, tuple(
        r for i, r in enumerate(rows) if i + 1 == len(rows) or rows[i + 1].start != r.start),
        30, Location("t.s", 1)), None, frame or not pairs


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["x86_64", "i386", "arm64"]).flatmap(
    lambda flavour: st.tuples(st.just(flavour), arm64_functions() if flavour == "arm64"
                              else x86_functions(flavour))))
def test_every_compact_row_unwinds_as_the_cfi_at_every_pc_it_covers(case):
    flavour, (func_timeline, code, encodable) = case
    for ranges in (False, True):
        func = lower_compact(func_timeline, flavour, code, ranges)
        if not ranges:
            # One row: exact at the body state (checked when encoding), and a
            # prologue of the usual shapes always has a compact encoding.
            assert func.reason is None or not encodable, (func.reason, func.detail)
            continue
        covered = 0
        for crow in func.rows:
            encoding = crow.encoding & ~NOT_FUNCTION_START
            if is_dwarf(encoding, flavour):
                continue
            rules = decode(encoding, flavour,
                           Code(code.data[crow.start:]) if code is not None else None)
            for i, drow in enumerate(func_timeline.rows):
                end = (func_timeline.rows[i + 1].start if i + 1 < len(func_timeline.rows)
                       else func_timeline.size)
                if max(drow.start, crow.start) < min(end, crow.start + crow.length):
                    assert rules == row_rules(drow, flavour), (crow, drow)
            covered += crow.length
        assert func.exact_bytes == covered
        assert sum(r.length for r in func.rows) == func_timeline.size


def test_step_walks_a_real_frame_layout():
    """libunwind's step on memory laid out by 'push rbp; mov rsp,rbp; push rbx; push
    r14' called from 0x401234, with the caller's rsp 0x7000 after the return."""
    from cfi2sframe.compact.step import step

    memory = {0x6FF8: 0x401234, 0x6FF0: 0xCAFE, 0x6FE8: 0xB0B, 0x6FE0: 0xE14}
    regs = {7: 0x6FE0, 6: 0x6FF0, 3: 1, 14: 2, 16: 0x400100}
    # RBP frame, offset 2: slot 0 (r14 = 4) at rbp-16 = 0x6FE0, slot 1 (rbx = 1) at
    # rbp-8 = 0x6FE8: 0x01000000 | 2 << 16 | 4 | 1 << 3.
    rules = decode(0x0102000C, "x86_64")
    assert rules == CompactRules(6, 16, -8, ((3, -24), (6, -16), (14, -32)))
    caller = step(rules, regs, memory.__getitem__, sp=7, ra_reg=16)
    assert caller[7] == 0x7000 and caller[16] == 0x401234 and caller[6] == 0xCAFE
    assert caller[3] == 0xB0B and caller[14] == 0xE14
    # arm64 frameless: the return address is still in LR.
    leaf = step(decode(0x02002000, "arm64"), {31: 0x8000, 30: 0x1234}, memory.__getitem__,
                sp=31, ra_reg=30)
    assert leaf[31] == 0x8020 and leaf[30] == 0x1234


def test_register_named_twice_in_a_frame_means_the_later_slot():
    """Fuzzing finding: r12 in slots 0 and 2. libunwind restores it twice; the later
    slot wins, and the rules must say so (and encode back to the same meaning)."""
    from cfi2sframe.compact.encoding import encode

    rules = decode(0x017D0082, "x86_64")
    assert rules == CompactRules(6, 16, -8, ((6, -16), (12, -16 - 8 * 125 + 8 * 2)))
    assert decode(encode(rules, "x86_64"), "x86_64") == rules


def test_prologue_rules_read_by_hand() -> None:
    """x86 prologues read from bytes (Intel SDM encodings), the rules worked out by
    hand in compact terms: CFA, RA at CFA-8, each callee-saved push's slot."""
    from cfi2sframe.arch import get_arch
    from cfi2sframe.compact.prologue import prologue_rules
    from cfi2sframe.compact.rules import CompactRules

    x64, x86 = get_arch("x86_64"), get_arch("i386")
    # push %rbp; mov %rsp,%rbp; push %r15; push %r14; push %rbx; sub $0x18,%rsp; call
    frame = bytes.fromhex("55 4889e5 4157 4156 53 4883ec18 e8")
    assert prologue_rules(frame, x64) == CompactRules(
        6, 16, -8, ((3, -40), (6, -16), (14, -32), (15, -24)))
    # push %rbx; push %rax (stack only); sub $0x100,%rsp; mov
    frameless = bytes.fromhex("53 50 4881ec00010000 4889fb")
    assert prologue_rules(frameless, x64) == CompactRules(7, 8 + 16 + 0x100, -8,
                                                          ((3, -16),))
    # endbr64; ret: nothing built, the state at entry
    assert prologue_rules(bytes.fromhex("f30f1efa c3"), x64) is None
    assert prologue_rules(bytes.fromhex("c3"), x64) is None
    # i386: push %ebp; mov %esp,%ebp; push %esi; sub $8,%esp
    assert prologue_rules(bytes.fromhex("55 89e5 56 83ec08"), x86) == CompactRules(
        5, 8, -4, ((5, -8), (6, -12)))


def test_arm64_prologue_rules_read_by_hand() -> None:
    """arm64 prologues from A64 words (the first as llvm-objdump disassembles zig's
    __Znwm), the rules worked out by hand: a frame record on x29 with x19/x20 below it;
    a frameless stack."""
    from cfi2sframe.arch import get_arch
    from cfi2sframe.compact.encoding import decode
    from cfi2sframe.compact.prologue import prologue_rules
    from cfi2sframe.compact.rules import CompactRules

    arm = get_arch("aarch64")

    def words(*values: int) -> bytes:
        return b"".join(v.to_bytes(4, "little") for v in values)

    # stp x20, x19, [sp, #-32]!; stp x29, x30, [sp, #16]; add x29, sp, #16; cmp x0, #1
    frame = words(0xA9BE4FF4, 0xA9017BFD, 0x910043FD, 0xF100041F)
    built = prologue_rules(frame, arm)
    assert built == CompactRules(29, 16, -8, ((19, -24), (20, -32), (29, -16)))
    assert built == decode(0x04000001, "arm64")  # FRAME with the x19/x20 pair
    # sub sp, sp, #32; ret
    assert prologue_rules(words(0xD10083FF, 0xD65F03C0), arm) == CompactRules(31, 32, None, ())
    assert prologue_rules(words(0xD65F03C0), arm) is None  # ret: nothing read
