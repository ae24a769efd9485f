"""Why a backend cannot describe a function exactly: one result type and one registry
of reason codes (kebab-case, stable, listed by ``--list-reasons`` and docs/reasons.md)."""

from __future__ import annotations

from typing import NamedTuple


class Unrepresentable(NamedTuple):
    """No exact encoding: a reason code from the tables below, and details in words."""

    reason: str
    detail: str


# SFrame: reason code -> (what it means, GNU as 2.46 wording for the same case).
SFRAME_REASONS: dict[str, tuple[str, str]] = {
    "invalid-cfi": ("the CFI has no DWARF meaning (e.g. .cfi_restore_state without "
                    ".cfi_remember_state)", "(assembler error)"),
    "empty-function": ("the function has no bytes", "(gas emits one FRE)"),
    "cfa-undefined": ("no CFA rule at some PC after the first one",
                      ".cfi_def_cfa_offset without CFA base register in effect"),
    "cfa-not-sp-fp": ("the CFA is based on a register other than SP or FP",
                      "non-SP/FP register %u in .cfi_def_cfa"),
    "cfa-expression": ("the CFA is computed by a DWARF expression",
                       ".cfi_escape with op (0xf)"),
    "ra-column": ("the return address column is not the ABI's",
                  "non-default RA register %u"),
    "ra-undefined": ("the return address is undefined (outermost frame); SFrame V2 "
                     "errata 1 has no such row", "(gas 2.45 skips silently)"),
    "ra-not-at-fixed-offset": ("the return address is not at CFA-8",
                               "(gas 2.45 ignores this and emits wrong data)"),
    "ra-signed": ("the return address is signed (.cfi_window_save) on an ABI "
                  "without pointer authentication", ".cfi_window_save"),
    "ra-signed-with-pc": ("the return address is signed with the PC "
                          "(.cfi_negate_ra_state_with_pc)", ".cfi_negate_ra_state_with_pc"),
    "fp-in-register": ("the caller's FP is saved in another register",
                       "FP register 6 in .cfi_register"),
    "fp-expression": ("the caller's FP is recovered by a DWARF expression",
                      ".cfi_escape DW_CFA_expression with FP reg 6"),
    "fp-val-offset": ("the caller's FP is a value computed from the CFA",
                      ".cfi_val_offset with FP reg 6"),
    "fp-undefined": ("the caller's FP is undefined", "FP reg 6 in .cfi_undefined"),
    "sp-not-cfa": ("the caller's SP is not the CFA",
                   "SP reg 7 in .cfi_register / .cfi_val_offset with SP reg 7"),
    "offset-range": ("an offset does not fit in 32 bits",
                     ".cfi_def_cfa with unsupported offset value"),
    "function-size": ("the function is 4 GiB or larger (SFrame sizes are 32-bit)",
                      "(no check)"),
    "too-many-fres": ("V3 only: more than 65535 FREs in one function",
                      "Number of FREs exceeds UINT16_MAX"),
    "s390x-unaligned": ("s390x: a CFA offset that is not 160 + a multiple of 8, or (V2) "
                        "an odd FP/RA slot offset: SFrame cannot store it exactly",
                        "(truncates silently)"),
    "fp-without-ra": ("AArch64: FP saved while RA is still in its register (SFrame "
                      "orders the words CFA, RA, FP)", "FP without RA on stack"),
}


# Compact unwind: reason code -> what it means (the function gets DWARF mode).
COMPACT_REASONS: dict[str, str] = {
    "no-cfa": "no register-based CFA rule in the body state",
    "cfa-not-sp-fp": "the CFA is based on a register other than SP or FP",
    "ra-not-at-cfa-8": "the return address is not saved at CFA-8",
    "register-not-encodable": "a register compact unwind cannot restore is saved",
    "rule-not-encodable": "a register is recovered by a rule other than a stack slot",
    "frame-cfa-not-fp-16": "RBP frame: the CFA is not rbp+16",
    "frame-fp-not-at-cfa-16": "RBP frame: rbp is not saved at CFA-16",
    "saves-not-encodable": "the saved registers do not fit the frame's slots",
    "saves-not-contiguous": "frameless: saves are not in consecutive slots below the RA",
    "too-many-registers": "frameless: more than 6 saved registers",
    "cfa-offset-unaligned": "frameless: the CFA offset is not a multiple of 8",
    "cfa-offset-negative": "frameless: the CFA lies below the stack pointer (negative offset)",
    "stack-too-large": "frameless: the stack needs STACK_IND but no code bytes are known",
    "no-sub-imm32": "frameless: no 'sub $imm32, %rsp' with the needed immediate in the "
                    "first 255 bytes",
    "frameless-saves": "arm64: registers saved without a frame record",
    "stack-size": "arm64 frameless: the stack size is not 16 x 0..4095",
    "frame-record": "arm64: not a frame record (CFA = x29+16, LR at CFA-8, FP at CFA-16)",
    "ra-signed": "arm64: the return address is signed (arm64e's FRAME_PAUTH_LR is not "
                 "written)",
    "invalid-cfi": "the CFI has no DWARF meaning",
    "empty-function": "the function has no bytes",
}
