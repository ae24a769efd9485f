"""Why a backend cannot describe a function exactly: one result type and one registry
of reason codes (kebab-case, stable, listed by ``--list-reasons`` and docs/reasons.md).

The codes are enums: a misspelt code is a type error, and each member prints as its
kebab-case code in messages and JSON.

``SframeReason`` and ``CompactReason`` with their meanings (``SFRAME_REASONS``,
``COMPACT_REASONS``); ``Unrepresentable(reason, detail)`` is the result both back ends
give when they cannot be exact, and compact ``decode`` gives for a word without rules.
The compact codes are ``compact_reasons``' (loaded when first asked for here)."""

from __future__ import annotations

from .codes import Code
from .typed import TYPE_CHECKING, Generic, NamedTuple, TypeVar


class SframeReason(Code):
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


if TYPE_CHECKING:
    from .compact_reasons import COMPACT_REASONS as COMPACT_REASONS
    from .compact_reasons import CompactReason as CompactReason
else:
    def __getattr__(name: str) -> object:
        """``CompactReason`` and ``COMPACT_REASONS``, from ``compact_reasons`` when first
        asked for: an ELF file's commands make no compact unwind and load neither."""
        if name not in ("CompactReason", "COMPACT_REASONS"):
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from . import compact_reasons

        return getattr(compact_reasons, name)


Reason = TypeVar("Reason", SframeReason, "CompactReason")


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
