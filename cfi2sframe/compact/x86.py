"""Compact unwind for x86-64 and i386: the exact encoder and libunwind's decoder
(``compact_unwind_encoding.h``, ``CompactUnwinder.hpp``; notes in the reference)."""

from __future__ import annotations

from ..arch.base import Arch
from ..arch.i386 import I386
from ..arch.x86_64 import X86_64
from ..reasons import CompactReason, Unrepresentable
from ..typed import NamedTuple
from .rules import Code, CompactRules
from .words import (
    HAS_LSDA,
    MODE_MASK,
    NOT_FUNCTION_START,
    PERSONALITY_MASK,
    X86_DWARF,
    X86_RBP_FRAME,
    X86_STACK_IMMD,
    X86_STACK_IND,
    permutation,
    unpermute,
)


class X86(NamedTuple):
    """One x86 flavour: compact register numbers 1..6 as DWARF numbers, SP/FP/RA,
    the slot size, and the bytes before the imm32 of ``sub $imm32, %sp``."""

    regs: tuple[int, ...]
    sp: int
    fp: int
    ra: int
    slot: int
    sub_opcode: bytes
    names: tuple[str, str]  # (frame pointer, stack pointer) for messages


def _x86(arch: Arch) -> X86:
    """The compact unwind view of an x86 target (its facts are in ``arch/``)."""
    return X86(arch.compact_regs, arch.sp, arch.fp, arch.ra, arch.address_size,
               arch.compact_sub_opcode, (arch.reg_name(arch.fp), arch.reg_name(arch.sp)))


X86_FLAVOURS = {arch.compact: _x86(arch) for arch in (X86_64, I386) if arch.compact}


def decode_x86(encoding: int, code: Code | None = None,
               arch: str = "x86_64") -> CompactRules | Unrepresentable[CompactReason]:
    """libunwind's rules for an x86-64 or i386 encoding, or why it has none."""
    f = X86_FLAVOURS[arch]
    mode = encoding & MODE_MASK
    if mode == X86_RBP_FRAME:
        offset = (encoding >> 16) & 0xFF
        slots = {f.fp: -2 * f.slot}
        for i in range(5):
            reg = (encoding >> (3 * i)) & 7
            if reg == 0:
                continue
            if reg > 5:
                return Unrepresentable(
                    CompactReason.frame_register_in_slot,
                    "libunwind aborts: the frame pointer or an invalid register in a slot")
            # A register named twice: libunwind restores it twice, the later slot wins.
            slots[f.regs[reg - 1]] = -2 * f.slot - f.slot * offset + f.slot * i
        return CompactRules(f.fp, 2 * f.slot, -f.slot, tuple(sorted(slots.items())))
    if mode in (X86_STACK_IMMD, X86_STACK_IND):
        count = (encoding >> 10) & 7
        regs = unpermute(count, encoding & 0x3FF) if count <= 6 else None
        if regs is None:
            return Unrepresentable(CompactReason.invalid_permutation,
                                   "invalid register permutation")
        if mode == X86_STACK_IMMD:
            cfa = f.slot * ((encoding >> 16) & 0xFF)
        else:
            imm = code.imm32_at((encoding >> 16) & 0xFF) if code else None
            if imm is None:
                return Unrepresentable(CompactReason.stack_ind_outside_code,
                                       "STACK_IND immediate outside the function's code")
            cfa = imm + f.slot * ((encoding >> 13) & 7)
        saved = tuple(sorted((f.regs[r - 1], -f.slot - f.slot * count + f.slot * i)
                             for i, r in enumerate(regs)))
        return CompactRules(f.sp, cfa, -f.slot, saved)
    if mode == X86_DWARF:
        return Unrepresentable(CompactReason.dwarf_mode, "DWARF mode")
    if encoding & ~(HAS_LSDA | PERSONALITY_MASK | NOT_FUNCTION_START) == 0:
        return Unrepresentable(CompactReason.no_unwind_info, "no unwind information")
    return Unrepresentable(CompactReason.unknown_mode, "unknown mode")


def encode_x86(rules: CompactRules, code: Code | None, code_offset: int = 0,
               arch: str = "x86_64") -> int | Unrepresentable[CompactReason]:
    """The encoding that decodes to exactly ``rules``, or (reason code, detail).

    ``code_offset`` is where the encoded range starts in ``code`` (STACK_IND
    offsets count from the range start).
    """
    f = X86_FLAVOURS[arch]
    if rules.ra_offset != -f.slot:
        where = "in its register" if rules.ra_offset is None else f"at CFA{rules.ra_offset:+d}"
        return Unrepresentable(CompactReason.ra_not_at_cfa_8, f"return address {where}")
    by_reg = dict(rules.saved)
    unknown = [reg for reg in by_reg if reg not in f.regs]
    if unknown:
        return Unrepresentable(CompactReason.register_not_encodable,
                               f"DWARF register {unknown[0]} is saved")
    if rules.cfa_reg == f.fp:
        return _x86_frame(rules, by_reg, f)
    if rules.cfa_reg != f.sp:
        return Unrepresentable(CompactReason.cfa_not_sp_fp,
                               f"CFA is based on DWARF register {rules.cfa_reg}")
    return _x86_frameless(rules, by_reg, code, code_offset, f)


def _x86_frame(rules: CompactRules, by_reg: dict[int, int],
               f: X86) -> int | Unrepresentable[CompactReason]:
    fp, slot = f.names[0], f.slot
    if rules.cfa_offset != 2 * slot:
        return Unrepresentable(
            CompactReason.frame_cfa_not_fp_16,
            (f"CFA = {fp}{rules.cfa_offset:+d}, not "
             f"{fp}+{2 * slot}"))
    if by_reg.get(f.fp) != -2 * slot:
        return Unrepresentable(CompactReason.frame_fp_not_at_cfa_16,
                               f"{fp} is not saved at CFA-{2 * slot}")
    others = {reg: off for reg, off in by_reg.items() if reg != f.fp}
    if not others:
        return X86_RBP_FRAME
    if len(set(others.values())) < len(others):  # a slot holds one register's number
        return Unrepresentable(CompactReason.saves_not_encodable,
                               "two registers are saved in one slot")
    offset = (-2 * slot - min(others.values())) // slot
    encoding = X86_RBP_FRAME | offset << 16
    for reg, off in others.items():
        index, rem = divmod(off + 2 * slot + slot * offset, slot)
        if rem or not 0 <= index <= 4 or off >= -2 * slot or offset > 255:
            return Unrepresentable(
                CompactReason.saves_not_encodable,
                (f"saved registers span more than 5 slots below "
                 f"CFA-{2 * slot}, or are not in whole slots"))
        encoding |= (f.regs.index(reg) + 1) << (3 * index)
    return encoding


def _x86_frameless(rules: CompactRules, by_reg: dict[int, int], code: Code | None,
                   code_offset: int, f: X86) -> int | Unrepresentable[CompactReason]:
    count, slot, sp = len(by_reg), f.slot, f.names[1]
    if count > 6:
        return Unrepresentable(
            CompactReason.too_many_registers,
            f"{count} registers saved; compact unwind holds 6")
    order = sorted(by_reg, key=lambda reg: by_reg[reg])  # lowest address first
    if [by_reg[reg] for reg in order] != [-slot - slot * count + slot * i
                                          for i in range(count)]:
        return Unrepresentable(
            CompactReason.saves_not_contiguous,
            ("saved registers are not in consecutive slots "
             "right below the return address"))
    tail = count << 10 | permutation([f.regs.index(reg) + 1 for reg in order])
    if rules.cfa_offset < 0:
        return Unrepresentable(
            CompactReason.cfa_offset_negative,
            (f"CFA = {sp}{rules.cfa_offset:+d} lies below the "
             "stack pointer"))
    if rules.cfa_offset % slot:
        return Unrepresentable(
            CompactReason.cfa_offset_unaligned,
            (f"CFA = {sp}{rules.cfa_offset:+d} is not a multiple "
             f"of {slot}"))
    if rules.cfa_offset // slot <= 255:
        return X86_STACK_IMMD | (rules.cfa_offset // slot) << 16 | tail
    if code is None:
        return Unrepresentable(
            CompactReason.stack_too_large,
            f"CFA = {sp}{rules.cfa_offset:+d} and no code to read")
    subs = _sub_immediates(code, code_offset, f.sub_opcode)
    for adjust in range(8):
        wanted = rules.cfa_offset - slot * adjust
        for at, immediate in subs:
            if immediate == wanted:
                return X86_STACK_IND | (at - code_offset) << 16 | adjust << 13 | tail
    return Unrepresentable(
        CompactReason.no_sub_imm32,
        (f"CFA = {sp}{rules.cfa_offset:+d} needs STACK_IND, and no "
         f"'sub $imm32, %{sp}' with that immediate is in the first 255 "
         "bytes"))


def _sub_immediates(code: Code, code_offset: int, opcode: bytes) -> list[tuple[int, int]]:
    """Each ``sub $imm32`` whose immediate starts in the first 255 bytes from
    ``code_offset`` (and ends in the code): its immediate's offset and value
    (``Code.imm32_at``), in order.  Found by ``bytes.find``: a byte-by-byte scan, once
    per stack adjust tried, cost a library's 781 such functions 0.1-0.3 s."""
    data, width = code.data, len(opcode)
    stop = min(code_offset + 256, len(data) - 3)  # an immediate's first byte, past the last
    end = stop - 1  # the opcode ends before it
    start = max(code_offset, 0)  # (a slice before the data holds no opcode)
    found = []
    at = data.find(opcode, start, end) if width and end > start else -1
    while at >= 0:
        immediate = code.imm32_at(at + width)
        if immediate is not None:  # (always: it starts before len(data) - 3)
            found.append((at + width, immediate))
        at = data.find(opcode, at + 1, end)
    return found
