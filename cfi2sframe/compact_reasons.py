"""The compact unwind back end's reason codes (``CompactReason``) and their meanings
(``COMPACT_REASONS``), part of ``reasons``' registry and reached through it.

Apart from ``reasons`` because an enum's members are made one by one at import
(~0.1M instructions each in Python 3.11): these 28 were ~2.5M of every command
that converts, verifies or counts an ELF file, which never gives one.  ``reasons``
imports this module when one of its two names is first asked for."""

from __future__ import annotations

from .codes import Code


class CompactReason(Code):
    """Why a function gets DWARF mode (docs/compact.md; compact-possible: why a Mach-O
    file's does though it need not), and (the last seven) why
    ``decode`` gives no rules for an encoding word."""

    no_cfa = "no-cfa"
    cfa_not_sp_fp = "cfa-not-sp-fp"
    ra_not_at_cfa_8 = "ra-not-at-cfa-8"
    register_not_encodable = "register-not-encodable"
    rule_not_encodable = "rule-not-encodable"
    frame_cfa_not_fp_16 = "frame-cfa-not-fp-16"
    frame_fp_not_at_cfa_16 = "frame-fp-not-at-cfa-16"
    saves_not_encodable = "saves-not-encodable"
    saves_not_contiguous = "saves-not-contiguous"
    too_many_registers = "too-many-registers"
    cfa_offset_unaligned = "cfa-offset-unaligned"
    cfa_offset_negative = "cfa-offset-negative"
    stack_too_large = "stack-too-large"
    no_sub_imm32 = "no-sub-imm32"
    frameless_saves = "frameless-saves"
    stack_size = "stack-size"
    frame_record = "frame-record"
    ra_signed = "ra-signed"
    invalid_cfi = "invalid-cfi"
    empty_function = "empty-function"
    compact_possible = "compact-possible"
    no_unwind_info = "no-unwind-info"
    dwarf_mode = "dwarf-mode"
    unknown_mode = "unknown-mode"
    frame_register_in_slot = "frame-register-in-slot"
    invalid_permutation = "invalid-permutation"
    stack_ind_outside_code = "stack-ind-outside-code"
    frameless_with_pairs = "frameless-with-pairs"


# Compact unwind: reason -> what it means (the function gets DWARF mode; those marked
# decode are what ``decode`` says of a word that gives no rules).
COMPACT_REASONS: dict[CompactReason, str] = {
    CompactReason.no_cfa: "no register-based CFA rule in the body state",
    CompactReason.cfa_not_sp_fp: "the CFA is based on a register other than SP or FP",
    CompactReason.ra_not_at_cfa_8: "the return address is not saved at CFA-8",
    CompactReason.register_not_encodable: "a register compact unwind cannot restore is saved",
    CompactReason.rule_not_encodable: "a register is recovered by a rule other than a stack slot",
    CompactReason.frame_cfa_not_fp_16: "RBP frame: the CFA is not rbp+16",
    CompactReason.frame_fp_not_at_cfa_16: "RBP frame: rbp is not saved at CFA-16",
    CompactReason.saves_not_encodable: "the saved registers do not fit the frame's slots",
    CompactReason.saves_not_contiguous:
        "frameless: saves are not in consecutive slots below the RA",
    CompactReason.too_many_registers: "frameless: more than 6 saved registers",
    CompactReason.cfa_offset_unaligned: "frameless: the CFA offset is not a multiple of 8",
    CompactReason.cfa_offset_negative:
        "frameless: the CFA lies below the stack pointer (negative offset)",
    CompactReason.stack_too_large:
        "frameless: the stack needs STACK_IND but no code bytes are known",
    CompactReason.no_sub_imm32:
        "frameless: no 'sub $imm32, %rsp' with the needed immediate in the first 255 bytes",
    CompactReason.frameless_saves: "arm64: registers saved without a frame record",
    CompactReason.stack_size: "arm64 frameless: the stack size is not 16 x 0..4095",
    CompactReason.frame_record:
        "arm64: not a frame record (CFA = x29+16, LR at CFA-8, FP at CFA-16)",
    CompactReason.ra_signed:
        "arm64: the return address is signed (arm64e's FRAME_PAUTH_LR is not written)",
    CompactReason.invalid_cfi: "the CFI has no DWARF meaning",
    CompactReason.empty_function: "the function has no bytes",
    CompactReason.compact_possible: "stats of a Mach-O file: its toolchain chose DWARF mode, "
                                    "though compact unwind describes the body state exactly",
    CompactReason.no_unwind_info: "decode: the word says the function has no unwind information",
    CompactReason.dwarf_mode: "decode: the word sends the unwinder to the function's DWARF FDE",
    CompactReason.unknown_mode: "decode: the mode bits name no mode of this target",
    CompactReason.frame_register_in_slot:
        "decode: an RBP-frame slot names the frame pointer or no register (libunwind aborts)",
    CompactReason.invalid_permutation:
        "decode: the frameless register permutation names no register order",
    CompactReason.stack_ind_outside_code:
        "decode: STACK_IND's immediate lies outside the function's code",
    CompactReason.frameless_with_pairs:
        "decode: arm64 frameless with saved pairs (libunwind reads them one slot off)",
}
