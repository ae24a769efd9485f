"""Compact unwind for arm64: the exact encoder and libunwind's decoder."""

from __future__ import annotations

from ..arch.aarch64 import AARCH64
from ..reasons import CompactReason, Unrepresentable
from .rules import CompactRules
from .words import ARM64_DWARF, ARM64_FRAME, ARM64_FRAMELESS, MODE_MASK

# The target facts (registers, pairs, the ``sub`` opcode) live in ``arch/``.
ARM64_PAIRS = AARCH64.compact_pairs
ARM64_SP, ARM64_FP, ARM64_LR = AARCH64.sp, AARCH64.fp, AARCH64.ra


def decode_arm64(encoding: int) -> CompactRules | Unrepresentable[CompactReason]:
    """libunwind's rules for an arm64 encoding, or why it has none."""
    mode = encoding & MODE_MASK
    if mode == ARM64_FRAME:
        saved = [(ARM64_FP, -16)]
        at = -24
        for bit, first, second in ARM64_PAIRS:
            if encoding & bit:
                saved += [(first, at), (second, at - 8)]
                at -= 16
        return CompactRules(ARM64_FP, 16, -8, tuple(sorted(saved)))
    if mode == ARM64_FRAMELESS:
        if encoding & 0xFFF:
            return Unrepresentable(
                CompactReason.frameless_with_pairs,
                "frameless with saved pairs: libunwind reads them one slot off")
        return CompactRules(ARM64_SP, 16 * ((encoding >> 12) & 0xFFF), None, ())
    if mode == ARM64_DWARF:
        return Unrepresentable(CompactReason.dwarf_mode, "DWARF mode")
    return Unrepresentable(CompactReason.unknown_mode, "unknown mode")


def encode_arm64(rules: CompactRules) -> int | Unrepresentable[CompactReason]:
    by_reg = dict(rules.saved)
    if rules.cfa_reg == ARM64_SP:
        if rules.ra_offset is not None or by_reg:
            return Unrepresentable(
                CompactReason.frameless_saves,
                ("registers saved without a frame record: the "
                 "frameless form cannot restore them"))
        if rules.cfa_offset % 16 or not 0 <= rules.cfa_offset <= 0xFFF * 16:
            return Unrepresentable(
                CompactReason.stack_size,
                f"CFA = sp{rules.cfa_offset:+d} is not 16 x 0..4095")
        return ARM64_FRAMELESS | (rules.cfa_offset // 16) << 12
    if rules.cfa_reg != ARM64_FP:
        return Unrepresentable(CompactReason.cfa_not_sp_fp,
                               f"CFA is based on DWARF register {rules.cfa_reg}")
    if rules.cfa_offset != 16 or rules.ra_offset != -8 or by_reg.pop(ARM64_FP, None) != -16:
        return Unrepresentable(
            CompactReason.frame_record,
            "not a frame record (CFA = x29+16, LR at CFA-8, FP at CFA-16)")
    encoding = ARM64_FRAME
    at = -24
    for bit, first, second in ARM64_PAIRS:
        if first in by_reg or second in by_reg:
            if by_reg.pop(first, None) != at or by_reg.pop(second, None) != at - 8:
                return Unrepresentable(
                    CompactReason.saves_not_encodable,
                    (f"registers {first} and {second} are not a "
                     "contiguous pair in the frame's order"))
            encoding |= bit
            at -= 16
    if by_reg:
        return Unrepresentable(CompactReason.register_not_encodable,
                               f"DWARF register {min(by_reg)} is saved")
    return encoding
