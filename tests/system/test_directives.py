"""One test per CFI directive: source snippet -> rows, expected values derived by hand.

Instruction sizes used below (x86-64 encodings): push %rbp/%rbx/%rax = 1,
pop = 1, nop = 1, ret = 1, mov %rsp,%rbp = 3, sub $N,%rsp with N < 128 = 4,
leave = 1.  The CIE gives CFA = rsp+8 and RA (rip, 16) at CFA-8.
"""

from __future__ import annotations

import pytest

from cfi2sframe import CfaExpr, CfaReg, Cfi2SframeError, Rule

RA = (16, Rule("offset", -8))


def only(timelines):
    assert len(timelines) == 1
    return timelines[0]


def func(body: str, simple: bool = False) -> str:
    head = ".cfi_startproc simple" if simple else ".cfi_startproc"
    return f"\t.text\nf:\n\t{head}\n{body}\n\t.cfi_endproc\n"


def rows(timeline):
    return [(r.start, r.cfa, r.regs) for r in timeline.rows]


def test_startproc_gives_cie_rules(asm_timelines):
    t = only(asm_timelines(func("\tnop\n\tret")))
    assert (t.name, t.section, t.start, t.size) == ("f", ".text", 0, 2)
    assert rows(t) == [(0, CfaReg(7, 8), (RA,))]


def test_startproc_simple_has_no_initial_rules(asm_timelines):
    t = only(asm_timelines(func("\tnop\n\t.cfi_def_cfa rsp, 8\n\tret", simple=True)))
    assert rows(t) == [(0, None, ()), (1, CfaReg(7, 8), ())]


def test_def_cfa_offset_and_register(asm_timelines):
    body = """\tpush %rbp
\t.cfi_def_cfa_offset 16
\t.cfi_offset %rbp, -16
\tmov %rsp, %rbp
\t.cfi_def_cfa_register %rbp
\tnop
\tpop %rbp
\t.cfi_def_cfa rsp, 8
\tret"""
    t = only(asm_timelines(func(body)))
    fp = (6, Rule("offset", -16))
    assert rows(t) == [
        (0, CfaReg(7, 8), (RA,)),
        (1, CfaReg(7, 16), (fp, RA)),
        (4, CfaReg(6, 16), (fp, RA)),
        (6, CfaReg(7, 8), (fp, RA)),
    ]


def test_adjust_cfa_offset_accumulates_from_cie(asm_timelines):
    body = """\tsub $24, %rsp
\t.cfi_adjust_cfa_offset 24
\tnop
\t.cfi_adjust_cfa_offset -24
\tret"""
    t = only(asm_timelines(func(body)))
    assert [(r.start, r.cfa) for r in t.rows] == [
        (0, CfaReg(7, 8)), (4, CfaReg(7, 32)), (5, CfaReg(7, 8))]


def test_rel_offset_is_relative_to_current_cfa_offset(asm_timelines):
    # CFA = rsp+16 after the push; rel_offset 0 means [rsp+0] = CFA-16.
    body = "\tpush %rbx\n\t.cfi_adjust_cfa_offset 8\n\t.cfi_rel_offset rbx, 0\n\tret"
    t = only(asm_timelines(func(body)))
    assert t.rows[-1].rule(3) == Rule("offset", -16)


def test_register_undefined_same_value_val_offset(asm_timelines):
    body = """\tnop
\t.cfi_register rbx, r12
\t.cfi_undefined r13
\t.cfi_same_value r14
\t.cfi_val_offset r15, -24
\tret"""
    t = only(asm_timelines(func(body)))
    last = t.rows[-1]
    assert last.start == 1
    assert last.rule(3) == Rule("register", 12)
    assert last.rule(13) == Rule("undefined")
    assert last.rule(14) == Rule("same_value")
    assert last.rule(15) == Rule("val_offset", -24)


def test_restore_returns_to_cie_rule_or_none(asm_timelines):
    body = """\tnop
\t.cfi_offset rip, -16
\t.cfi_offset rbx, -24
\tnop
\t.cfi_restore rip, rbx
\tret"""
    t = only(asm_timelines(func(body)))
    assert t.rows[1].rule(16) == Rule("offset", -16)
    assert t.rows[2].rule(16) == Rule("offset", -8)
    assert t.rows[2].rule(3) is None


def test_remember_restore_state_nests(asm_timelines):
    body = """\t.cfi_remember_state
\tpush %rax
\t.cfi_adjust_cfa_offset 8
\t.cfi_remember_state
\tpush %rax
\t.cfi_adjust_cfa_offset 8
\tnop
\t.cfi_restore_state
\tpop %rax
\t.cfi_restore_state
\tpop %rax
\tret"""
    t = only(asm_timelines(func(body)))
    # offsets: push@0 push@1 nop@2 pop@3 pop@4 ret@5
    assert [(r.start, r.cfa.offset) for r in t.rows] == [(0, 8), (1, 16), (2, 24), (3, 16),
                                                          (4, 8)]


def test_restore_state_restores_cfa_offset_for_adjust(asm_timelines):
    # After restore_state the running offset is 16 again, so +8 gives 24.
    body = """\tpush %rax
\t.cfi_adjust_cfa_offset 8
\t.cfi_remember_state
\tpush %rax
\t.cfi_adjust_cfa_offset 8
\tnop
\t.cfi_restore_state
\t.cfi_adjust_cfa_offset 8
\tret"""
    t = only(asm_timelines(func(body)))
    assert t.rows[-1].cfa == CfaReg(7, 24)


def test_escape_decodes_dwarf_operations(asm_timelines):
    body = """\tnop
\t.cfi_escape 0x0f, 0x03, 0x76, 0x78, 0x06
\t.cfi_escape 0x10, 0x06, 0x02, 0x76, 0x00
\t.cfi_escape 0x2e, 0x10
\tret"""
    t = only(asm_timelines(func(body)))
    last = t.rows[-1]
    assert last.cfa == CfaExpr(bytes([0x76, 0x78, 0x06]))
    assert last.rule(6) == Rule("expression", expr=bytes([0x76, 0x00]))


def test_escape_offset_uses_data_alignment(asm_timelines):
    # DW_CFA_offset_extended_sf r3, -3 -> -3 * -8 = +24; DW_CFA_offset r6 (0x86), 2 -> -16
    body = "\tnop\n\t.cfi_escape 0x11, 0x03, 0x7d, 0x86, 0x02\n\tret"
    t = only(asm_timelines(func(body)))
    assert t.rows[-1].rule(3) == Rule("offset", 24)
    assert t.rows[-1].rule(6) == Rule("offset", -16)


def test_signal_frame_return_column_personality_lsda(asm_timelines):
    body = """\t.cfi_signal_frame
\t.cfi_personality 0x9b, __gxx_personality_v0
\t.cfi_lsda 0x1b, .LLSDA0
\tnop
\tret
.LLSDA0:"""
    t = only(asm_timelines(func(body)))
    assert t.signal_frame
    assert t.personality == "__gxx_personality_v0"
    assert t.lsda == ".LLSDA0"
    t2 = only(asm_timelines(func("\t.cfi_return_column 3\n\tret")))
    assert t2.ra_column == 3


def test_directives_without_rule_effect(asm_timelines):
    body = """\t.cfi_sections .eh_frame
\t.cfi_label .Lhere
\tnop
\tret"""
    t = only(asm_timelines(func(body)))
    assert rows(t) == [(0, CfaReg(7, 8), (RA,))]


def test_expressions_and_symbols(asm_timelines):
    body = """\t.set FRAME, 2*8
\tFOUR = 0x4
\tnop
\t.cfi_def_cfa_offset FRAME + FOUR - (1 << 2) + 010 % 5 - 0b11
\t.cfi_offset 6, -(FRAME | 0) ; .cfi_offset 3, ~7 # comment
\tret /* c */"""
    t = only(asm_timelines(func(body)))
    # 16 + 4 - 4 + (8 % 5 = 3) - 3 = 16 ; ~7 = -8
    assert t.rows[-1].cfa == CfaReg(7, 16)
    assert t.rows[-1].rule(6) == Rule("offset", -16)
    assert t.rows[-1].rule(3) == Rule("offset", -8)


def test_addresses_follow_relaxation_and_alignment(asm_timelines):
    # A forward jmp over 200 bytes relaxes to 5 bytes; .p2align 4 then pads to 16.
    body = """\tjmp 1f
\t.skip 200, 0x90
1:\tnop
\t.cfi_def_cfa_offset 16
\t.p2align 4
\t.cfi_def_cfa_offset 24
\tret"""
    t = only(asm_timelines(func(body)))
    # jmp rel32 = 5 bytes, 200 skipped, nop -> 206; align 206 -> 208
    assert [(r.start, r.cfa.offset) for r in t.rows] == [(0, 8), (206, 16), (208, 24)]


def test_several_sections_and_names(asm_timelines):
    text = func("\tret") + """\t.section .text.other,"ax",@progbits
\tnop
g:
\t.cfi_startproc
\tret
\t.cfi_endproc
"""
    ts = asm_timelines(text)
    assert [(t.name, t.section, t.start, t.size) for t in ts] == [
        ("f", ".text", 0, 1), ("g", ".text.other", 1, 1)]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("\t.cfi_bogus 1", "unknown CFI directive '.cfi_bogus'"),
        ("\t.cfi_def_cfa_offset", "missing operand"),
        ("\t.cfi_offset %bogus, 8", "unknown register '%bogus'"),
        ("\t.cfi_def_cfa_offset UNDEFINED_SYM", "symbol 'UNDEFINED_SYM' is undefined"),
        ("\t.cfi_startproc", "nested .cfi_startproc"),
    ],
)
def test_bad_directives_are_errors_with_a_line(asm_timelines, body, message):
    with pytest.raises(Cfi2SframeError) as info:
        asm_timelines(func(body))
    assert info.value.where.startswith("t.s:")
    assert message in info.value.message


def test_unbalanced_startproc_and_endproc(asm_timelines):
    with pytest.raises(Cfi2SframeError, match="without .cfi_endproc"):
        asm_timelines("\t.text\n\t.cfi_startproc\n\tret\n")
    with pytest.raises(Cfi2SframeError, match="outside"):
        asm_timelines("\t.text\n\t.cfi_endproc\n")
