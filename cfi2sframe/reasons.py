"""Why a backend cannot describe a function exactly: one result type and one registry
of reason codes (kebab-case, stable, listed by ``--list-reasons`` and docs/reasons.md).

The codes are enums: a misspelt code is a type error, and each member prints as its
kebab-case code in messages and JSON.

``SframeReason`` and ``CompactReason`` with their meanings (``SFRAME_REASONS``,
``COMPACT_REASONS``); ``Unrepresentable(reason, detail)`` is the result both back ends
give when they cannot be exact, and compact ``decode`` gives for a word without rules."""

from __future__ import annotations

from .basics import Name
from .typed import Generic, NamedTuple, TypeVar


class _Code(Name):
    """A reason code: its repr is the code's (``'ra-undefined'``), so a table of
    counts prints as it did when codes were strings."""

    def __repr__(self) -> str:
        return repr(self.value)


class SframeReason(_Code):
    """Why a function has no SFrame FDE (docs/reasons.md)."""

    invalid_cfi = "invalid-cfi"
    empty_function = "empty-function"
    cfa_undefined = "cfa-undefined"
    cfa_not_sp_fp = "cfa-not-sp-fp"
    cfa_expression = "cfa-expression"
    ra_column = "ra-column"
    ra_undefined = "ra-undefined"
    ra_not_at_fixed_offset = "ra-not-at-fixed-offset"
    ra_signed = "ra-signed"
    ra_signed_with_pc = "ra-signed-with-pc"
    fp_in_register = "fp-in-register"
    fp_expression = "fp-expression"
    fp_val_offset = "fp-val-offset"
    fp_undefined = "fp-undefined"
    sp_not_cfa = "sp-not-cfa"
    offset_range = "offset-range"
    function_size = "function-size"
    too_many_fres = "too-many-fres"
    s390x_unaligned = "s390x-unaligned"
    fp_without_ra = "fp-without-ra"
    flex_needed = "flex-needed"


class CompactReason(_Code):
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


Reason = TypeVar("Reason", SframeReason, CompactReason)


class Unrepresentable(NamedTuple, Generic[Reason]):
    """No exact encoding: a reason code from the tables below (``SframeReason`` from the
    SFrame back end, ``CompactReason`` from compact unwind), and details in words."""

    reason: Reason
    detail: str
    at: int | None = None  # the offset in the function of the row it is about, if one


# SFrame: reason -> (what it means, GNU as 2.46 wording for the same case).
SFRAME_REASONS: dict[SframeReason, tuple[str, str]] = {
    SframeReason.invalid_cfi: ("the CFI has no DWARF meaning (e.g. .cfi_restore_state without "
                               ".cfi_remember_state)", "(assembler error)"),
    SframeReason.empty_function: ("the function has no bytes", "(gas emits one FRE)"),
    SframeReason.cfa_undefined: ("no CFA rule at some PC after the first one",
                                 ".cfi_def_cfa_offset without CFA base register in effect"),
    SframeReason.cfa_not_sp_fp: ("the CFA is based on a register other than SP or FP",
                                 "non-SP/FP register %u in .cfi_def_cfa"),
    SframeReason.cfa_expression: ("the CFA is computed by a DWARF expression",
                                  ".cfi_escape with op (0xf)"),
    SframeReason.ra_column: ("the return address column is not the ABI's",
                             "non-default RA register %u"),
    SframeReason.ra_undefined: ("the return address is undefined (outermost frame); SFrame V2 "
                                "errata 1 has no such row", "(gas 2.45 skips silently)"),
    SframeReason.ra_not_at_fixed_offset: ("the return address is not at CFA-8",
                                          "(gas 2.45 ignores this and emits wrong data)"),
    SframeReason.ra_signed: ("the return address is signed (.cfi_window_save) on an ABI "
                             "without pointer authentication", ".cfi_window_save"),
    SframeReason.ra_signed_with_pc: ("the return address is signed with the PC "
                                     "(.cfi_negate_ra_state_with_pc)",
                                     ".cfi_negate_ra_state_with_pc"),
    SframeReason.fp_in_register: ("the caller's FP is saved in another register",
                                  "FP register 6 in .cfi_register"),
    SframeReason.fp_expression: ("the caller's FP is recovered by a DWARF expression",
                                 ".cfi_escape DW_CFA_expression with FP reg 6"),
    SframeReason.fp_val_offset: ("the caller's FP is a value computed from the CFA",
                                 ".cfi_val_offset with FP reg 6"),
    SframeReason.fp_undefined: ("the caller's FP is undefined", "FP reg 6 in .cfi_undefined"),
    SframeReason.sp_not_cfa: ("the caller's SP is not the CFA",
                              "SP reg 7 in .cfi_register / .cfi_val_offset with SP reg 7"),
    SframeReason.offset_range: ("an offset does not fit in 32 bits",
                                ".cfi_def_cfa with unsupported offset value"),
    SframeReason.function_size: ("the function is 4 GiB or larger (SFrame sizes are 32-bit)",
                                 "(no check)"),
    SframeReason.too_many_fres: ("V3 only: more than 65535 FREs in one function",
                                 "Number of FREs exceeds UINT16_MAX"),
    SframeReason.s390x_unaligned: ("s390x: a CFA offset that is not 160 + a multiple of 8, or (V2) "
                                   "an odd FP/RA slot offset: SFrame cannot store it exactly",
                                   "(truncates silently)"),
    SframeReason.flex_needed: ("V3 with --no-flex: the function needs a FLEX FDE (a rule "
                               "in a register or through one) and the chosen readers read "
                               "none", "(gas 2.46 writes FLEX)"),
    SframeReason.fp_without_ra: ("AArch64: FP saved while RA is still in its register (SFrame "
                                 "orders the words CFA, RA, FP)", "FP without RA on stack"),
}


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
