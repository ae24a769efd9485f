"""libunwind's step with a compact unwind encoding's rules: the caller's registers."""

from __future__ import annotations

from collections.abc import Callable

from .rules import CompactRules


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
