"""Apple compact unwind encodings: the 32-bit word, its meaning, and back, for every
target: ``decode`` gives the rules libunwind applies for an encoding, ``encode`` the
encoding whose decoding is exactly the rules asked for (or a reason why none exists),
``describe`` the word in words.  Per target: ``x86`` (x86-64, i386) and ``arm64``; the
bit layout is ``words``, the rules ``rules``, libunwind's step ``step``.
"""

from __future__ import annotations

from ..arch import by_compact, compact_flavour
from ..arch.base import Arch
from ..reasons import CompactReason, Unrepresentable
from .arm64 import decode_arm64, encode_arm64
from .rules import Code, CompactRules
from .words import ARM64_FRAME, MODE_MASK, X86_STACK_IND
from .x86 import decode_x86, encode_x86


def decode(encoding: int, arch: str | Arch,
           code: Code | None = None) -> CompactRules | Unrepresentable[CompactReason]:
    """The rules of ``encoding`` for ``arch`` (``x86_64``, ``i386`` or ``arm64``, or any
    name or ``Arch`` of those targets: ``aarch64``), or why libunwind has none (the same
    result type as ``encode``'s)."""
    arch = compact_flavour(arch)
    return decode_arm64(encoding) if arch == "arm64" else decode_x86(encoding, code, arch)


def encode(rules: CompactRules, arch: str | Arch, code: Code | None = None,
           code_offset: int = 0) -> int | Unrepresentable[CompactReason]:
    """The exact encoding of ``rules`` for ``arch``, or (reason, detail)."""
    arch = compact_flavour(arch)
    if arch == "arm64":
        return encode_arm64(rules)
    return encode_x86(rules, code, code_offset, arch)


def describe(encoding: int, arch: str | Arch, code: Code | None = None,
             names: dict[int, str] | None = None) -> str:
    """The encoding in words: ``RBP frame; saved rbx at [rbp-24], ...``."""
    arch = compact_flavour(arch)
    ind_offset = None
    if arch != "arm64" and encoding & MODE_MASK == X86_STACK_IND and code is None:
        ind_offset = (encoding >> 16) & 0xFF
        code = Code(bytes(ind_offset + 4))  # the immediate as 0: the rest still decodes
    rules = decode(encoding, arch, code)
    if isinstance(rules, Unrepresentable):
        return rules.detail
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
