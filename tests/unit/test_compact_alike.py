"""Functions alike lowered once (``compact.lower.lower_alike``) and Mach-O encodings
checked once per distinct prologue (``compact.check._code_problem_alike``): a shared
answer must never hide what tells two functions apart.  Expected encodings derived by
hand from compact_unwind_encoding.h."""

from __future__ import annotations

import random

import pytest

from cfi2sframe import CfaReg, Location, Row, Rule, Timeline
from cfi2sframe.arch import get_arch
from cfi2sframe.cli.compact import _print_functions, in_address_order
from cfi2sframe.compact.inputs import compact_cfi
from cfi2sframe.compact.lower import (
    CompactFunction,
    CompactRow,
    LowerMemo,
    lower_alike,
    lower_compact,
    lowered_alike,
    placed_spans,
    state_ids,
)
from cfi2sframe.compact.prologue import PROLOGUE_REACH, built_rules
from cfi2sframe.compact.rules import Code, CompactRules
from cfi2sframe.compact.x86 import _sub_immediates
from cfi2sframe.core import compiled
from cfi2sframe.dwarf.cfi import Cfi, Cie, Fde
from cfi2sframe.reasons import CompactReason

RA = (16, Rule("offset", -8))
# CFA = rsp+8, then after a 7-byte `sub $0x1000, %rsp` CFA = rsp+0x1008: 513 slots,
# past STACK_IMMD's 255, so the encoding is STACK_IND and reads the immediate.
DEEP = (Row(0, CfaReg(7, 8), (RA,)), Row(7, CfaReg(7, 0x1008), (RA,)))
SUB_AT_0 = b"\x48\x81\xec\x00\x10\x00\x00\xc3"  # imm32 at +3
SUB_AT_1 = b"\x90\x48\x81\xec\x00\x10\x00\x00\xc3"  # a nop first: imm32 at +4


def _timeline(name: str, start: int, rows: tuple[Row, ...], size: int,
              lsda: str | None = None) -> Timeline:
    return Timeline(name, ".text", start, size, rows, 16, Location("t.s", 1), lsda=lsda)


def test_stack_ind_reads_each_functions_own_code():
    """The same rows object (as ``dwarf.cfi`` shares it between equal bodies), two
    codes: STACK_IND (0x03000000) | offset of the imm32 << 16 | 1 slot adjust << 13,
    no saved register: 0x03032000 with the `sub` at 0, 0x03042000 after a nop."""
    memo = LowerMemo()
    first = lower_alike(_timeline("a", 0, DEEP, 9), "x86_64", Code(SUB_AT_0 + b"\x90"),
                        False, memo)
    second = lower_alike(_timeline("b", 16, DEEP, 9), "x86_64", Code(SUB_AT_1), False, memo)
    assert first.rows[0].encoding == 0x03032000
    assert second.rows[0].encoding == 0x03042000
    assert (second.name, second.start) == ("b", 16)
    # decoded with each one's imm32 (0x1000 + 1 slot: CFA = rsp+0x1008), the row is the
    # body's from byte 7 on: exact there, not over the 7 bytes before the `sub`
    assert first.inexact == second.inexact == ((0, 7),)
    assert first.exact_bytes == second.exact_bytes == 2


def test_shared_rows_keep_each_functions_name_start_and_lsda():
    """A frameless function with rbx saved: STACK_IMMD (0x02000000) | 2 slots << 16 |
    1 register << 10 | permutation 0 (rbx is register 1: 0): 0x02020400, with
    HAS_LSDA (0x40000000) only where the function has an LSDA."""
    rows = (Row(0, CfaReg(7, 8), (RA,)),
            Row(1, CfaReg(7, 16), ((3, Rule("offset", -16)), RA)))
    memo = LowerMemo()
    plain = lower_alike(_timeline("p", 0x100, rows, 4), "x86_64", None, False, memo)
    with_lsda = lower_alike(_timeline("q", 0x200, rows, 4, lsda="L1"), "x86_64", None,
                            False, memo)
    again = lower_alike(_timeline("r", 0x300, rows, 4), "x86_64", None, False, memo)
    assert plain.rows[0].encoding == again.rows[0].encoding == 0x02020400
    assert with_lsda.rows[0].encoding == 0x42020400 and with_lsda.lsda == "L1"
    assert (again.name, again.start, again.lsda) == ("r", 0x300, None)
    assert again == lower_compact(_timeline("r", 0x300, rows, 4), "x86_64")
    # exact after the push (byte 0 is the entry state, CFA = rsp+8): 3 of 4 bytes;
    # another size is another function: 8 of 9, its body to byte 9
    assert plain.exact_bytes == 3 and plain.body == (1, 4)
    longer = lower_alike(_timeline("s", 0x400, rows, 9), "x86_64", None, False, memo)
    assert (longer.size, longer.exact_bytes, longer.body) == (9, 8, (1, 9))


def test_the_prologue_reader_reads_no_further_than_its_reach():
    """x86: a prologue of pushes runs to MAX_PROLOGUE; bytes past PROLOGUE_REACH never
    change what it builds, so a check may key on the first PROLOGUE_REACH bytes."""
    x86 = get_arch("x86_64")
    pushes = b"\x53" * 80  # push %rbx, 80 times: read up to byte 64 only
    built = built_rules(pushes, x86)
    assert isinstance(built, CompactRules) and built.cfa_offset == 8 + 8 * 64
    assert built_rules(pushes[:PROLOGUE_REACH] + b"\xc3" * 40, x86) == built
    # a 7-byte `sub $imm32, %rsp` starting at byte 63 ends at 70, inside the reach
    code = b"\x53" * 63 + b"\x48\x81\xec\x00\x01\x00\x00"
    assert PROLOGUE_REACH >= len(code)
    deep = built_rules(code + b"\xcc" * 20, x86)
    assert deep == built_rules(code, x86)
    assert isinstance(deep, CompactRules) and deep.cfa_offset == 8 + 8 * 63 + 0x100


# Two states as the compiled replay gives them: each distinct state's objects made once
# and shared by every row in it (the state sequence memo keys on them).
ENTRY = (CfaReg(7, 8), (RA,))  # CFA = rsp+8, RA at CFA-8
PUSHED = (CfaReg(7, 16), ((3, Rule("offset", -16)), RA))  # after `push %rbx`


def _rows(*placed: tuple[int, tuple[object, ...]]) -> tuple[Row, ...]:
    return tuple(Row(start, *state) for start, state in placed)  # type: ignore[arg-type]


def test_one_state_sequence_placed_by_each_functions_own_starts_and_size():
    """The sequence ENTRY, PUSHED(, ENTRY) at other starts and sizes: one encoding,
    0x02020400 (as above), exact over PUSHED's bytes only, each function's own spans
    and body (the body ends where the epilogue's ENTRY row starts).  By hand:
    starts 0,1 size 4: inexact [0,1), 3 bytes exact, body [1,4); starts 0,3 size 4:
    [0,3), 1, [3,4); starts 0,1,3 size 4: [0,1) and [3,4), 2, [1,3); starts 0,2,3
    size 5: [0,2) and [3,5), 1, [2,3); starts 0,1 size 9: [0,1), 8, [1,9)."""
    memo = LowerMemo()
    pushed_at_1 = _rows((0, ENTRY), (1, PUSHED))  # one rows object, two sizes
    cases = [(pushed_at_1, 4, ((0, 1),), 3, (1, 4)),
             (_rows((0, ENTRY), (3, PUSHED)), 4, ((0, 3),), 1, (3, 4)),
             (_rows((0, ENTRY), (1, PUSHED), (3, ENTRY)), 4, ((0, 1), (3, 4)), 2, (1, 3)),
             (_rows((0, ENTRY), (2, PUSHED), (3, ENTRY)), 5, ((0, 2), (3, 5)), 1, (2, 3)),
             (pushed_at_1, 9, ((0, 1),), 8, (1, 9))]
    for i, (rows, size, inexact, exact, body) in enumerate(cases):
        for lowered in (lowered_alike(f"g{i}", ".text", 0x10 * i, size, rows, None, "x86_64",
                                      memo),
                        lower_alike(_timeline(f"f{i}", 0x10 * i, rows, size), "x86_64", None,
                                    False, memo)):
            assert lowered is not None
            assert lowered.rows == (CompactRow(0, size, 0x02020400),), i
            assert (lowered.inexact, lowered.exact_bytes, lowered.body) == \
                (inexact, exact, body), i
    assert len(memo.sequences) == 2  # (ENTRY, PUSHED) and (ENTRY, PUSHED, ENTRY)


def test_one_state_sequence_is_lowered_again_for_another_target():
    """The same state objects as i386 after x86-64: i386's RA is DWARF register 8, so
    register 16 at CFA-8 is no return address slot: DWARF mode (0x04000000), reason
    ra-not-at-cfa-8, exact nowhere."""
    memo = LowerMemo()
    rows = _rows((0, ENTRY), (1, PUSHED))
    x86_64 = lower_alike(_timeline("f", 0, rows, 4), "x86_64", None, False, memo)
    i386 = lower_alike(_timeline("f", 0, rows, 4), "i386", None, False, memo)
    assert x86_64.rows[0].encoding == 0x02020400 and x86_64.reason is None
    assert i386.rows == (CompactRow(0, 4, 0x04000000),)
    assert i386.reason == CompactReason.ra_not_at_cfa_8
    assert (i386.inexact, i386.exact_bytes) == (((0, 4),), 0)


def test_a_sequence_that_reads_no_code_gives_one_answer_with_or_without_it():
    """STACK_IMMD reads no code: the `sub` bytes of SUB_AT_0 or none give 0x02020400;
    the deep sequence (STACK_IND) still reads each function's own (above)."""
    memo = LowerMemo()
    rows = _rows((0, ENTRY), (1, PUSHED))
    with_code = lower_alike(_timeline("f", 0, rows, 4), "x86_64", Code(SUB_AT_0), False, memo)
    without = lowered_alike("g", ".text", 0, 4, rows, None, "x86_64", memo)
    assert with_code.rows == without.rows == (CompactRow(0, 4, 0x02020400),)
    assert lowered_alike("h", ".text", 0, 9, DEEP, None, "x86_64", memo) is None


def test_the_sequence_key_tells_apart_every_state_field_and_their_order():
    """One memo, sequences that differ from (ENTRY, PUSHED) in one thing each; every one
    is lowered for itself (a key without the field would give it PUSHED's answer).  By
    hand from compact_unwind_encoding.h, starts 0, 1, size 4: PUSHED (rbx at CFA-16,
    CFA = rsp+16) 0x02020400, exact from byte 1; the CFA at rsp+24 (another CfaReg, the
    same regs): 3 slots, 0x02030400; rbp at CFA-16 instead (another regs, the same
    CfaReg): rbp is compact register 6, permutation 6 - 1 = 5: 0x02020405; the return
    address signed (the same objects otherwise): DWARF mode 0x04000000, reason
    ra-signed, exact nowhere; the states swapped: PUSHED is the body (ENTRY after it is
    an epilogue), exact over [0, 1) only, the body [0, 1)."""
    memo = LowerMemo()
    cfa, regs = PUSHED
    cases = [((ENTRY, PUSHED), 0x02020400, None, ((0, 1),), (1, 4)),
             ((ENTRY, (CfaReg(7, 24), regs)), 0x02030400, None, ((0, 1),), (1, 4)),
             ((ENTRY, (cfa, ((6, Rule("offset", -16)), RA))), 0x02020405, None, ((0, 1),),
              (1, 4)),
             ((ENTRY, (cfa, regs, True, False)), 0x04000000, CompactReason.ra_signed,
              ((0, 4),), (1, 4)),
             ((PUSHED, ENTRY), 0x02020400, None, ((1, 4),), (0, 1))]
    for i, ((first, second), encoding, reason, inexact, body) in enumerate(cases):
        rows = _rows((0, first), (1, second))
        lowered = lowered_alike(f"f{i}", ".text", 0, 4, rows, None, "x86_64", memo)
        assert lowered is not None
        assert (lowered.rows, lowered.reason) == ((CompactRow(0, 4, encoding),), reason), i
        assert (lowered.inexact, lowered.body) == (inexact, body), i
    assert len(memo.sequences) == len(cases)


def test_the_sequence_key_is_the_state_objects_in_order():
    """``state_ids``: equal for rows of the same state objects at other starts, another
    key for each field's other object (ra_signed_pc too, which no encoding reads yet)
    and for another order; the compiled key (``_core.row_state_ids``) is the same
    bytes, and refuses what is not a tuple of rows."""
    cfa, regs = PUSHED
    base = _rows((0, ENTRY), (1, PUSHED))
    assert state_ids(base) == state_ids(_rows((0, ENTRY), (5, PUSHED)))
    others = [_rows((0, ENTRY), (1, (CfaReg(7, 16), regs))),
              _rows((0, ENTRY), (1, (cfa, tuple(list(regs))))),  # equal, not the same
              _rows((0, ENTRY), (1, (cfa, regs, True, False))),
              _rows((0, ENTRY), (1, (cfa, regs, False, True))),
              _rows((0, PUSHED), (1, ENTRY)),
              _rows((0, ENTRY))]
    assert len({state_ids(rows) for rows in [base, *others]}) == 1 + len(others)
    core = compiled()
    if core is None:
        return
    for rows in [base, *others, ()]:
        assert core.row_state_ids(rows) == state_ids(rows)
    for bad in ([*base], (base[0], (1, 2))):
        with pytest.raises(TypeError):
            core.row_state_ids(bad)


def test_one_check_line_format_per_shape_keeps_each_functions_addresses(capsys):
    """``compact --check``'s lines, each format made once per (inexact spans, body): two
    functions of one shape at 0x100 and 0x200 get their own addresses; the same spans
    with another body (the whole function: a span inside it) is NOT exact inside it; a
    DWARF-mode function gets no check line.  The words as the listing has always
    written them."""
    row = (CompactRow(0, 8, 0x02020400),)
    shape = {"body": (1, 5), "inexact": ((0, 1), (5, 8))}
    functions = [CompactFunction("a", ".text", 0x100, 8, row, None, "", 5, **shape),
                 CompactFunction("b", ".text", 0x200, 8, row, None, "", 5, **shape),
                 CompactFunction("c", ".text", 0x300, 8, row, None, "", 5, body=(0, 8),
                                 inexact=((0, 1), (5, 8))),
                 CompactFunction("d", ".text", 0x400, 8, (CompactRow(0, 8, 0x04000000),),
                                 CompactReason.no_cfa, "x", 0, **shape)]
    _print_functions(functions, "x86_64", get_arch("x86_64").register_names, True)
    lines = [line.strip() for line in capsys.readouterr().out.splitlines()
             if line.strip().startswith("check:")]
    assert lines == [
        "check: exact over the body state [0x101, 0x105); not before it (prologue, stack "
        "changes) at [0x100, 0x101) nor from the first epilogue on at [0x105, 0x108): use "
        "--ranges",
        "check: exact over the body state [0x201, 0x205); not before it (prologue, stack "
        "changes) at [0x200, 0x201) nor from the first epilogue on at [0x205, 0x208): use "
        "--ranges",
        "check: NOT exact inside the body state at [0x300, 0x301), [0x305, 0x308): use "
        "--ranges",
        "check: 3 compact functions are not exact at every byte and need --ranges for "
        "asynchronous unwinding; 1 of them also inside the body"]


def _dwarf(name: str, start: int, rows: tuple[CompactRow, ...], reason: CompactReason,
           detail: str) -> CompactFunction:
    return CompactFunction(name, ".text", start, 0x20, rows, reason, detail, 0)


@pytest.mark.parametrize("core", ["compiled", "python"])
def test_the_listing_lines_by_hand(core, capsys, monkeypatch):
    """``compact``'s lines as f-strings give them, from either core: the name padded to
    24 characters (characters, not bytes: "é" is one of two bytes), the address and
    length as ``%#8x`` and ``%#6x``, a later row's label blank; a DWARF-mode row's
    words name its own function's reason and detail (two functions of one encoding;
    words kept by encoding alone would repeat the first's); an address past 2**64
    printed whole (the compiled core leaves that part to Python)."""
    if core == "python":
        monkeypatch.setenv("CFI2SFRAME_CORE", "python")
    elif compiled() is None:
        pytest.skip("no compiled core")
    dwarf = 0x04000000  # x86-64 DWARF mode, no FDE offset
    functions = [
        _dwarf("\u00e9", 0x10, (CompactRow(0, 4, dwarf), CompactRow(4, 0x1C, dwarf)),
               CompactReason.no_cfa, "d1"),
        _dwarf("x" * 30, 0x1000, (CompactRow(0, 0x20, dwarf),), CompactReason.cfa_not_sp_fp,
               "d2"),
        _dwarf("big", 2**64 - 4, (CompactRow(0, 8, dwarf), CompactRow(8, 0x18, dwarf)),
               CompactReason.no_cfa, "d3")]
    _print_functions(functions, "x86_64", get_arch("x86_64").register_names, True)
    assert capsys.readouterr().out.splitlines()[:6] == [
        "\u00e9" + " " * 23 + "     0x10    0x4  0x04000000  DWARF: no-cfa (d1)",
        " " * 24 + "     0x14   0x1c  0x04000000  DWARF: no-cfa (d1)",
        "x" * 30 + "   0x1000   0x20  0x04000000  DWARF: cfa-not-sp-fp (d2)",
        "big" + " " * 21 + " 0xfffffffffffffffc    0x8  0x04000000  DWARF: no-cfa (d3)",
        " " * 24 + " 0x10000000000000004   0x18  0x04000000  DWARF: no-cfa (d3)",
        "3 functions: 0 compact, 3 DWARF; the rows unwind exactly as the CFI at 0 of 96 "
        "bytes (0.0%)"]


def test_the_compiled_listing_leaves_to_python_what_it_cannot_hold():
    """``_core.compact_rows_text`` gives None (the Python formatter's part) for a
    function without rows, a name with a lone surrogate, a negative start, a row
    address or check span past 2**64; else the text and counts (compact; with inexact
    spans; of those, inexact in the body)."""
    core = compiled()
    if core is None:
        pytest.skip("no compiled core")
    row = (CompactRow(0, 8, 0x02020400),)
    ok = CompactFunction("a", ".text", 0x100, 8, row, None, "", 5, body=(1, 5),
                         inexact=((0, 1), (5, 8)))

    def tail(func, row):
        return "T", True

    assert core.compact_rows_text([ok], tail, False) == (
        "a                           0x100    0x8  T\n", 1, 1, 0)
    for bad in (ok._replace(rows=()), ok._replace(name="s\udcff"), ok._replace(start=-1),
                ok._replace(start=2**64 - 4), ok._replace(rows=(CompactRow(2**64, 8, 1),))):
        assert core.compact_rows_text([ok, bad], tail, True) is None


def _cie(initial: bytes, data_align: int = -8) -> Cie:
    return Cie(1, data_align, 16, 0x1B, 0xFF, False, False, True, initial, 8)


def test_an_fde_takes_a_known_answer_only_from_the_same_cie_body_and_size():
    """``compact_cfi``'s answers by (CIE offset, body, size), made by hand: the CIE
    says CFA = rsp+8 (DW_CFA_def_cfa 7, 8: 0c 07 08), RA at CFA-8 (DW_CFA_offset r16, 1
    x -8: 90 01); the body pushes rbx at byte 1 (advance 1: 41; def_cfa_offset 16:
    0e 10; offset r3, 2 x -8: 83 02): 0x02020400 (as above), exact from byte 1.  The
    same body and CIE over 9 bytes: 8 exact.  A CIE elsewhere whose data alignment is -4
    (the RA at CFA-4, which x86-64 compact unwind has no slot for): DWARF mode.  A body
    that places its row by address (DW_CFA_set_loc 0x1002: 01, 8 bytes) depends on its
    function's start: from 0x1000 exact from byte 2, from 0x1001 from byte 1.  The push
    at byte 2 (advance 2: 42): exact from byte 2."""
    initial = bytes([0x0C, 7, 8, 0x90, 1])
    push = bytes([0x41, 0x0E, 16, 0x83, 2])
    at = bytes([0x01]) + (0x1002).to_bytes(8, "little") + bytes([0x0E, 16, 0x83, 2])
    ours, odd = _cie(initial), _cie(initial, -4)

    def fde(name: str, start: int, size: int, cie: Cie, cie_at: int, body: bytes) -> Fde:
        return Fde(name, ".text", start, size, cie, cie_at, body, 0, 0)

    fdes = (fde("a", 0x100, 4, ours, 0, push), fde("b", 0x200, 9, ours, 0, push),
            fde("c", 0x300, 4, odd, 0x40, push), fde("d", 0x400, 4, ours, 0, push),
            fde("e", 0x1000, 4, ours, 0, at), fde("f", 0x1001, 4, ours, 0, at),
            fde("g", 0x500, 4, ours, 0, bytes([0x42]) + push[1:]))
    cfi = Cfi("t.o", "EM_X86_64", "ET_DYN", fdes, ".eh_frame")
    got = {f.name: (f.start, f.size, f.rows[0].encoding, f.exact_bytes, f.inexact)
           for f in compact_cfi(cfi, b"", "x86_64")}
    assert got == {"a": (0x100, 4, 0x02020400, 3, ((0, 1),)),
                   "b": (0x200, 9, 0x02020400, 8, ((0, 1),)),
                   "c": (0x300, 4, 0x04000000, 0, ((0, 4),)),
                   "d": (0x400, 4, 0x02020400, 3, ((0, 1),)),
                   "e": (0x1000, 4, 0x02020400, 2, ((0, 2),)),
                   "f": (0x1001, 4, 0x02020400, 3, ((0, 1),)),
                   "g": (0x500, 4, 0x02020400, 2, ((0, 2),))}


def test_placed_spans_by_hand_and_compiled():
    """``placed_spans`` (the inexact spans of a function of 8 bytes whose rows at the
    indices given are exact) by hand: each exact row runs to the next row's start or
    the end, cut to [0, 8); the compiled spans (``_core.placed_spans``) are the same,
    or None past 64 bits, and on random rows."""
    def rows(*starts: int) -> tuple[Row, ...]:
        return tuple(Row(start, None, ()) for start in starts)

    cases = [((0, 2, 5), (1,), ((0, 2), (5, 8)), 3),
             ((0, 2, 5), (0, 2), ((2, 5),), 5),
             ((0, 8), (1,), ((0, 8),), 0),  # a row at the end covers nothing
             ((0, 0, 3), (0,), ((0, 8),), 0),  # nor one cut short by a row at its start
             ((0, 0, 3), (1,), ((3, 8),), 3),
             ((5, 7, 1, 3), (0, 2), ((0, 1), (3, 5), (7, 8)), 4),  # (rows out of order)
             ((-2, 3), (0,), ((3, 8),), 3),  # cut at the function's start
             ((0, 12), (0,), (), 8),  # and at its end
             ((), (), ((0, 8),), 0)]
    core = compiled()
    for starts, exact, spans, exact_bytes in cases:
        assert placed_spans(rows(*starts), exact, 8) == (spans, exact_bytes), starts
        if core is not None:
            assert core.placed_spans(rows(*starts), exact, 8) == (spans, exact_bytes), starts
    if core is None:
        return
    assert core.placed_spans(rows(0, 1 << 70), (0,), 8) is None  # (Python: ((), 8))
    assert core.placed_spans(rows(0, 2), (2,), 8) is None  # no such row
    generator = random.Random(43)
    for _ in range(500):
        starts = tuple(generator.randrange(-3, 12) for _ in range(generator.randrange(6)))
        exact = tuple(sorted(generator.sample(range(len(starts)),
                                              generator.randrange(len(starts) + 1))))
        size = generator.randrange(-1, 12)
        assert core.placed_spans(rows(*starts), exact, size) == \
            placed_spans(rows(*starts), exact, size), (starts, exact, size)


def test_the_sub_immediates_are_those_a_byte_by_byte_scan_finds():
    """STACK_IND's ``sub $imm32`` search (``compact.x86._sub_immediates``) against the
    scan it replaced, written here from its rule: every offset ``at`` in [start +
    width, min(start + 256, len - 3)) whose ``width`` bytes before are the opcode,
    with the 4 little-endian bytes from ``at``; on random code with the opcode planted
    (at both ends of the reach, cut short at the end), from every start."""
    def scan(data: bytes, start: int, opcode: bytes) -> list[tuple[int, int]]:
        width = len(opcode)
        return [(at, int.from_bytes(data[at:at + 4], "little"))
                for at in range(start + width, min(start + 256, len(data) - 3))
                if at - width >= 0 and data[at - width:at] == opcode]

    rng = random.Random(43)
    checked = 0
    for opcode in (b"\x48\x81\xec", b"\x81\xec"):
        for size in (0, 3, 5, 8, 40, 300, 600):
            data = bytearray(rng.choice(b"\x48\x81\xec\x00") for _ in range(size))
            for at in (6, size - len(opcode) - 4, size - len(opcode) - 3, 252, 253, 254, 0):
                if 0 <= at <= size - len(opcode):
                    data[at:at + len(opcode)] = opcode
            for start in range(-2, size + 2, 1 if size < 50 else 7):
                assert _sub_immediates(Code(bytes(data)), start, opcode) == \
                    scan(bytes(data), start, opcode), (opcode, size, start)
                checked += 1
    assert checked > 100


def test_address_order_by_hand():
    """``in_address_order``: by section (in the order each first appears) then start
    where ``by_section``; by start alone where there is one section or not
    ``by_section``; equal starts keep their order (a sort by start alone in the one
    section case must give what the (section, start) key gave)."""
    def f(name: str, section: str, start: int) -> CompactFunction:
        return CompactFunction(name, section, start, 1, (), None, "", 0)

    two = [f("a", ".b", 9), f("b", ".a", 1), f("c", ".b", 2), f("d", ".a", 0)]
    assert [x.name for x in in_address_order(two, True)] == ["c", "a", "d", "b"]
    assert [x.name for x in in_address_order(two, False)] == ["d", "b", "c", "a"]
    one = [f("a", ".t", 5), f("b", ".t", 1), f("c", ".t", 5), f("d", ".t", 0)]
    assert [x.name for x in in_address_order(one, True)] == ["d", "b", "a", "c"]
    assert in_address_order([], True) == []


def test_covering_by_hand_with_overlaps_and_empty_functions():
    """``compact.inputs.covering`` (which object rows ``from_prologues`` leaves to their
    FDE's function): an address is covered where any function holds it.  By hand:
    0x10-0x110 holds 0x20-0x30 (so 0x30, past the inner one's end, is still covered:
    a look-up of the last function to start alone would miss it), an empty function
    at 0x200 covers its one start, 0x300-0x308 and 0x308-0x310 meet; then against
    asking every function at every address of a random set."""
    from cfi2sframe.compact.inputs import covering

    def f(start: int, size: int) -> CompactFunction:
        return CompactFunction("f", "__text", start, size, (), None, "", 0)

    functions = [f(0x300, 8), f(0x20, 0x10), f(0x200, 0), f(0x10, 0x100), f(0x308, 8)]
    covered = covering(functions)
    want = {0x0f: False, 0x10: True, 0x20: True, 0x30: True, 0x10f: True, 0x110: False,
            0x1ff: False, 0x200: True, 0x201: False, 0x2ff: False, 0x300: True,
            0x308: True, 0x30f: True, 0x310: False}
    assert {at: covered(at) for at in want} == want
    assert not covering([])(0)
    rng = random.Random(7)
    for _ in range(200):
        some = [f(rng.randrange(64), rng.choice([0, 1, 2, 5, 20])) for _ in range(rng.randrange(6))]
        covered = covering(some)
        for at in range(90):
            assert covered(at) == any(g.start <= at < g.start + max(g.size, 1) for g in some)
