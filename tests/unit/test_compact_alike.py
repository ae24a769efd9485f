"""Functions alike lowered once (``compact.lower.lower_alike``) and Mach-O encodings
checked once per distinct prologue (``compact.check._code_problem_alike``): a shared
answer must never hide what tells two functions apart.  Expected encodings derived by
hand from compact_unwind_encoding.h."""

from __future__ import annotations

from cfi2sframe import CfaReg, Location, Row, Rule, Timeline
from cfi2sframe.arch import get_arch
from cfi2sframe.compact.lower import LowerMemo, lower_alike, lower_compact
from cfi2sframe.compact.prologue import PROLOGUE_REACH, built_rules
from cfi2sframe.compact.rules import Code, CompactRules

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
    memo: LowerMemo = {}
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
    memo: LowerMemo = {}
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
