"""Stack walking with compact unwind rows (libunwind's step, ``compact.step.step``),
by ``unwind --compact``: apart from the SFrame walk (``analysis.unwind``) so that
``unwind`` of an ELF file loads no compact unwind module."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..arch import compact_flavour
from ..compact.encoding import decode
from ..compact.rules import Code
from ..compact.step import step as compact_step
from ..compact.words import HAS_LSDA, NOT_FUNCTION_START, is_dwarf
from ..reasons import Unrepresentable
from ..typed import TYPE_CHECKING
from .unwind import PC, Read, Step, walk

if TYPE_CHECKING:
    from ..arch.base import Arch
    from ..compact.lower import CompactFunction


def compact_walk(functions: Sequence[CompactFunction], code_of: Callable[[int, int], bytes],
                 arch: str | Arch,
                 regs: dict[int, int], read: Read, sp: int, fp: int, ra: int,
                 max_frames: int = 64) -> tuple[list[dict[int, int]], str]:
    """Frames from ``regs`` outwards with compact unwind rows (libunwind's step).

    ``functions`` are ``compact.lower.CompactFunction``s with absolute starts,
    ``code_of(address, size)`` gives code bytes (for STACK_IND).
    """
    arch = compact_flavour(arch)

    def step(frame: dict[int, int], depth: int) -> Step:
        pc = frame[PC] if depth == 0 else frame[PC] - 1
        row = next(((f, r) for f in functions for r in f.rows
                    if f.start + r.start <= pc < f.start + r.start + r.length), None)
        if row is None:
            return Step(None, f"no compact unwind row covers {frame[PC]:#x}")
        func, crow = row
        encoding = crow.encoding & ~NOT_FUNCTION_START & ~HAS_LSDA
        if is_dwarf(encoding, arch):
            return Step(None, f"DWARF mode at {frame[PC]:#x} "
                              f"({func.reason or 'see the FDE'})")
        rules = decode(encoding, arch, Code(code_of(func.start + crow.start, 260)))
        if isinstance(rules, Unrepresentable):
            return Step(None, rules.detail)
        if rules.ra_offset is None and depth:
            return Step(None, "RA still in its register below the topmost frame")
        try:
            caller = compact_step(rules, {**frame, ra: frame.get(ra, frame[PC])}, read, sp,
                                  ra)
        except LookupError as exc:
            return Step(None, f"memory not in the snapshot: {exc}")
        caller[PC] = caller[ra]
        return Step(caller)

    return walk(step, regs, max_frames)
