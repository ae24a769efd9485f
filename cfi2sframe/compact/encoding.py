"""Apple compact unwind encodings: the 32-bit word, its meaning, and back.

Written from ``compact_unwind_encoding.h`` and the notes on libunwind
(``CompactUnwinder.hpp``): ``decode`` gives the rules libunwind applies for
an encoding, ``encode_*`` the encoding whose decoding is exactly the rules
asked for (or a reason why none exists).  Rules are in CFA terms:

- CFA = ``cfa_reg`` + ``cfa_offset`` (for x86 STACK_IND the offset needs the
  ``sub $imm32, %rsp`` immediate, read from the code);
- RA saved at CFA + ``ra_offset`` (None: still in the link register, arm64);
- ``saved``: (DWARF register, CFA offset) of every callee-saved register.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from ..arch import by_compact
from ..arch.aarch64 import AARCH64
from ..arch.base import Arch
from ..arch.i386 import I386
from ..arch.x86_64 import X86_64
from ..reasons import Unrepresentable

NOT_FUNCTION_START = 0x80000000
HAS_LSDA = 0x40000000
PERSONALITY_MASK = 0x30000000
MODE_MASK = 0x0F000000

X86_RBP_FRAME, X86_STACK_IMMD, X86_STACK_IND, X86_DWARF = (0x01000000, 0x02000000,
                                                           0x03000000, 0x04000000)
ARM64_FRAMELESS, ARM64_DWARF, ARM64_FRAME = 0x02000000, 0x03000000, 0x04000000

# The target facts (registers, pairs, the ``sub`` opcode) live in ``arch/``.
ARM64_PAIRS = AARCH64.compact_pairs
ARM64_SP, ARM64_FP, ARM64_LR = AARCH64.sp, AARCH64.fp, AARCH64.ra

# Radices of the frameless register permutation, per register count.
_RADICES = {1: (1,), 2: (5, 1), 3: (20, 4, 1), 4: (60, 12, 3, 1), 5: (120, 24, 6, 2, 1),
            6: (120, 24, 6, 2, 1, 0)}


class CompactRules(NamedTuple):
    """What an encoding restores, in CFA terms (see the module docstring)."""

    cfa_reg: int
    cfa_offset: int
    ra_offset: int | None
    saved: tuple[tuple[int, int], ...]  # sorted (DWARF register, CFA offset)


class Code(NamedTuple):
    """The bytes of a function, for STACK_IND's ``sub $imm32, %rsp`` immediate."""

    data: bytes

    def imm32_at(self, offset: int) -> int | None:
        if offset < 0 or offset + 4 > len(self.data):
            return None
        return int.from_bytes(self.data[offset:offset + 4], "little")


def is_dwarf(encoding: int, arch: str) -> bool:
    return encoding & MODE_MASK == (ARM64_DWARF if arch == "arm64" else X86_DWARF)


# -- x86-64 --------------------------------------------------------------------------


def permutation(regs: list[int]) -> int:
    """The Lehmer code of compact register numbers (1..6), lowest address first."""
    if not regs:
        return 0
    digits = []
    for i, reg in enumerate(regs):
        digits.append(reg - 1 - sum(1 for r in regs[:i] if r < reg))
    return sum(d * r for d, r in zip(digits, _RADICES[len(regs)], strict=False))


def unpermute(count: int, perm: int) -> list[int] | None:
    """Compact register numbers for ``count`` registers, lowest address first."""
    if count == 0:
        return []
    digits = []
    for radix in _RADICES[count]:
        if radix:
            digits.append(perm // radix)
            perm -= digits[-1] * radix
        else:
            digits.append(0)
    unused = [1, 2, 3, 4, 5, 6]
    out = []
    for digit in digits:
        if digit >= len(unused):
            return None
        out.append(unused.pop(digit))
    return out


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


def decode_x86(encoding: int, code: Code | None = None, arch: str = "x86_64") -> \
        CompactRules | str:
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
                return "libunwind aborts: the frame pointer or an invalid register in a slot"
            # A register named twice: libunwind restores it twice, the later slot wins.
            slots[f.regs[reg - 1]] = -2 * f.slot - f.slot * offset + f.slot * i
        return CompactRules(f.fp, 2 * f.slot, -f.slot, tuple(sorted(slots.items())))
    if mode in (X86_STACK_IMMD, X86_STACK_IND):
        count = (encoding >> 10) & 7
        regs = unpermute(count, encoding & 0x3FF) if count <= 6 else None
        if regs is None:
            return "invalid register permutation"
        if mode == X86_STACK_IMMD:
            cfa = f.slot * ((encoding >> 16) & 0xFF)
        else:
            imm = code.imm32_at((encoding >> 16) & 0xFF) if code else None
            if imm is None:
                return "STACK_IND immediate outside the function's code"
            cfa = imm + f.slot * ((encoding >> 13) & 7)
        saved = tuple(sorted((f.regs[r - 1], -f.slot - f.slot * count + f.slot * i)
                             for i, r in enumerate(regs)))
        return CompactRules(f.sp, cfa, -f.slot, saved)
    if mode == X86_DWARF:
        return "DWARF mode"
    return "no unwind information" if encoding & ~(HAS_LSDA | PERSONALITY_MASK |
                                                   NOT_FUNCTION_START) == 0 else "unknown mode"


def encode_x86(rules: CompactRules, code: Code | None, code_offset: int = 0,
               arch: str = "x86_64") -> int | Unrepresentable:
    """The encoding that decodes to exactly ``rules``, or (reason code, detail).

    ``code_offset`` is where the encoded range starts in ``code`` (STACK_IND
    offsets count from the range start).
    """
    f = X86_FLAVOURS[arch]
    if rules.ra_offset != -f.slot:
        where = "in its register" if rules.ra_offset is None else f"at CFA{rules.ra_offset:+d}"
        return Unrepresentable("ra-not-at-cfa-8", f"return address {where}")
    by_reg = dict(rules.saved)
    unknown = [reg for reg in by_reg if reg not in f.regs]
    if unknown:
        return Unrepresentable("register-not-encodable", f"DWARF register {unknown[0]} is saved")
    if rules.cfa_reg == f.fp:
        return _x86_frame(rules, by_reg, f)
    if rules.cfa_reg != f.sp:
        return Unrepresentable("cfa-not-sp-fp", f"CFA is based on DWARF register {rules.cfa_reg}")
    return _x86_frameless(rules, by_reg, code, code_offset, f)


def _x86_frame(rules: CompactRules, by_reg: dict[int, int], f: X86) -> int | Unrepresentable:
    fp, slot = f.names[0], f.slot
    if rules.cfa_offset != 2 * slot:
        return Unrepresentable(
            "frame-cfa-not-fp-16",
            (f"CFA = {fp}{rules.cfa_offset:+d}, not "
             f"{fp}+{2 * slot}"))
    if by_reg.get(f.fp) != -2 * slot:
        return Unrepresentable("frame-fp-not-at-cfa-16", f"{fp} is not saved at CFA-{2 * slot}")
    others = {reg: off for reg, off in by_reg.items() if reg != f.fp}
    if not others:
        return X86_RBP_FRAME
    offset = (-2 * slot - min(others.values())) // slot
    encoding = X86_RBP_FRAME | offset << 16
    for reg, off in others.items():
        index, rem = divmod(off + 2 * slot + slot * offset, slot)
        if rem or not 0 <= index <= 4 or off >= -2 * slot or offset > 255:
            return Unrepresentable(
                "saves-not-encodable",
                (f"saved registers span more than 5 slots below "
                 f"CFA-{2 * slot}, or are not in whole slots"))
        encoding |= (f.regs.index(reg) + 1) << (3 * index)
    return encoding


def _x86_frameless(rules: CompactRules, by_reg: dict[int, int], code: Code | None,
                   code_offset: int, f: X86) -> int | Unrepresentable:
    count, slot, sp = len(by_reg), f.slot, f.names[1]
    if count > 6:
        return Unrepresentable(
            "too-many-registers",
            f"{count} registers saved; compact unwind holds 6")
    order = sorted(by_reg, key=lambda reg: by_reg[reg])  # lowest address first
    if [by_reg[reg] for reg in order] != [-slot - slot * count + slot * i
                                          for i in range(count)]:
        return Unrepresentable(
            "saves-not-contiguous",
            ("saved registers are not in consecutive slots "
             "right below the return address"))
    tail = count << 10 | permutation([f.regs.index(reg) + 1 for reg in order])
    if rules.cfa_offset < 0:
        return Unrepresentable(
            "cfa-offset-negative",
            (f"CFA = {sp}{rules.cfa_offset:+d} lies below the "
             "stack pointer"))
    if rules.cfa_offset % slot:
        return Unrepresentable(
            "cfa-offset-unaligned",
            (f"CFA = {sp}{rules.cfa_offset:+d} is not a multiple "
             f"of {slot}"))
    if rules.cfa_offset // slot <= 255:
        return X86_STACK_IMMD | (rules.cfa_offset // slot) << 16 | tail
    if code is None:
        return Unrepresentable(
            "stack-too-large",
            f"CFA = {sp}{rules.cfa_offset:+d} and no code to read")
    width = len(f.sub_opcode)
    for adjust in range(8):
        wanted = rules.cfa_offset - slot * adjust
        for at in range(code_offset + width, min(code_offset + 256, len(code.data) - 3)):
            if code.data[at - width:at] == f.sub_opcode and code.imm32_at(at) == wanted:
                return X86_STACK_IND | (at - code_offset) << 16 | adjust << 13 | tail
    return Unrepresentable(
        "no-sub-imm32",
        (f"CFA = {sp}{rules.cfa_offset:+d} needs STACK_IND, and no "
         f"'sub $imm32, %{sp}' with that immediate is in the first 255 "
         "bytes"))


# -- arm64 ---------------------------------------------------------------------------


def decode_arm64(encoding: int) -> CompactRules | str:
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
            return "frameless with saved pairs: libunwind reads them one slot off"
        return CompactRules(ARM64_SP, 16 * ((encoding >> 12) & 0xFFF), None, ())
    if mode == ARM64_DWARF:
        return "DWARF mode"
    return "unknown mode"


def encode_arm64(rules: CompactRules) -> int | Unrepresentable:
    by_reg = dict(rules.saved)
    if rules.cfa_reg == ARM64_SP:
        if rules.ra_offset is not None or by_reg:
            return Unrepresentable(
                "frameless-saves",
                ("registers saved without a frame record: the "
                 "frameless form cannot restore them"))
        if rules.cfa_offset % 16 or not 0 <= rules.cfa_offset <= 0xFFF * 16:
            return Unrepresentable(
                "stack-size",
                f"CFA = sp{rules.cfa_offset:+d} is not 16 x 0..4095")
        return ARM64_FRAMELESS | (rules.cfa_offset // 16) << 12
    if rules.cfa_reg != ARM64_FP:
        return Unrepresentable("cfa-not-sp-fp", f"CFA is based on DWARF register {rules.cfa_reg}")
    if rules.cfa_offset != 16 or rules.ra_offset != -8 or by_reg.pop(ARM64_FP, None) != -16:
        return Unrepresentable(
            "frame-record",
            "not a frame record (CFA = x29+16, LR at CFA-8, FP at CFA-16)")
    encoding = ARM64_FRAME
    at = -24
    for bit, first, second in ARM64_PAIRS:
        if first in by_reg or second in by_reg:
            if by_reg.pop(first, None) != at or by_reg.pop(second, None) != at - 8:
                return Unrepresentable(
                    "saves-not-encodable",
                    (f"registers {first} and {second} are not a "
                     "contiguous pair in the frame's order"))
            encoding |= bit
            at -= 16
    if by_reg:
        return Unrepresentable("register-not-encodable", f"DWARF register {min(by_reg)} is saved")
    return encoding


def decode(encoding: int, arch: str, code: Code | None = None) -> CompactRules | str:
    """The rules of ``encoding`` for ``arch`` (``x86_64``, ``i386`` or ``arm64``)."""
    return decode_arm64(encoding) if arch == "arm64" else decode_x86(encoding, code, arch)


def encode(rules: CompactRules, arch: str, code: Code | None = None,
           code_offset: int = 0) -> int | Unrepresentable:
    """The exact encoding of ``rules`` for ``arch``, or (reason, detail)."""
    if arch == "arm64":
        return encode_arm64(rules)
    return encode_x86(rules, code, code_offset, arch)


def describe(encoding: int, arch: str, code: Code | None = None,
             names: dict[int, str] | None = None) -> str:
    """The encoding in words: ``RBP frame; saved rbx at [rbp-24], ...``."""
    ind_offset = None
    if arch != "arm64" and encoding & MODE_MASK == X86_STACK_IND and code is None:
        ind_offset = (encoding >> 16) & 0xFF
        code = Code(bytes(ind_offset + 4))  # the immediate as 0: the rest still decodes
    rules = decode(encoding, arch, code)
    if isinstance(rules, str):
        return rules
    names = names or {}

    def name(reg: int) -> str:
        return names.get(reg, f"r{reg}")

    others = [(reg, off) for reg, off in rules.saved
              if not (reg == rules.cfa_reg and off == -rules.cfa_offset)]
    mode = encoding & MODE_MASK
    target = by_compact(arch)
    fp = target.fp
    if rules.cfa_reg == fp and (arch != "arm64" or mode == ARM64_FRAME):
        base = name(rules.cfa_reg)
        saves = ", ".join(f"{name(reg)} at [{base}{off + rules.cfa_offset:+d}]"
                          for reg, off in sorted(others, key=lambda x: -x[1])
                          if reg != rules.cfa_reg)
        kind = "frame" if arch == "arm64" else f"{target.reg_name(fp).upper()} frame"
        return f"{kind}; saved {saves}" if saves else kind
    stack = f"stack {rules.cfa_offset}"
    if ind_offset is not None:
        stack = f"stack = imm32 at +{ind_offset:#x} + {rules.cfa_offset}"
    regs = " ".join(name(reg) for reg, _ in sorted(rules.saved, key=lambda x: -x[1]))
    return f"frameless, {stack}" + (f", saved {regs}" if regs else "")


def step(rules: CompactRules, regs: dict[int, int], read: Callable[[int], int],
         sp: int, ra_reg: int) -> dict[int, int]:
    """The caller's registers, as libunwind's step computes them from ``rules``.

    ``regs`` maps DWARF numbers to this frame's values, ``read`` loads a pointer
    from memory.  The result holds the caller's SP (= CFA), its return address
    under ``ra_reg`` (loaded, or on arm64 frameless still in LR), and every
    restored register; other registers keep their values.
    """
    cfa = regs[rules.cfa_reg] + rules.cfa_offset
    out = dict(regs)
    for reg, offset in rules.saved:
        out[reg] = read(cfa + offset)
    out[ra_reg] = read(cfa + rules.ra_offset) if rules.ra_offset is not None else regs[ra_reg]
    out[sp] = cfa
    return out
