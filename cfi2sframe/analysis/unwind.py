"""Stack walking: from one frame's registers and the stack memory to its callers.

SFrame: the spec's appendix ("Generating Stack Traces using SFrame"): find the
FRE for the PC, CFA = base register + offset, RA and FP from their stack slots
(or, for V3 FLEX and s390x V2 register words, from registers), the caller's SP
is the CFA (CFA - 160 on s390x).  Compact unwind: ``analysis.compact_unwind``.

Registers are DWARF numbers in a dict, and the program counter is kept under
``PC`` (the RA column is a register of its own on AArch64 and s390x: LR, r14);
memory is a ``read(address)`` callable that returns a pointer-sized value or
raises ``LookupError`` (``KeyError``, ``IndexError``) when the address is not in
the snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..arch import by_sframe_abi
from ..sframe.decode import DecodedSection
from ..sframe.rules import RA_UNDEFINED, Loc, as_loc, rules_at
from ..typed import TYPE_CHECKING, NamedTuple
from .process import module_for

if TYPE_CHECKING:
    from .process import Module

Read = Callable[[int], int]
PC = -1  # the key of the program counter in a register dict


class Step(NamedTuple):
    """The caller's registers after one step, or why there is no caller."""

    regs: dict[int, int] | None
    error: str = ""


OUTERMOST_REACHED = "outermost frame"


def sframe_step(section: DecodedSection, regs: dict[int, int], read: Read,
                topmost: bool = False, bias: int = 0) -> Step:
    """One step of the spec's ``get_next_frame`` for the frame in ``regs``.

    ``regs`` must hold SP and ``PC``, and FP unless unknown (a caller's FP whose
    slot was not in the snapshot: the walk goes on until a rule needs it);
    ``topmost``: the frame was interrupted, not in a call, so an RA still in its
    register (AArch64 leaf: LR, s390x: r14) is taken from ``regs``; ``bias``: the
    section's module is loaded that far from its own addresses.
    """
    arch = by_sframe_abi(section.abi)
    sp_reg, fp_reg, ra_reg = arch.sp, arch.fp, arch.ra
    pc = regs[PC]
    # A caller's PC is a return address, one past its call: look up pc - 1.
    lookup = (pc if topmost else pc - 1) - bias
    fde = section.find_fde(lookup)
    if fde is None:
        return Step(None, f"no SFrame FDE covers {pc:#x}")
    rules = rules_at(section, fde, lookup)
    if rules is None:
        return Step(None, f"no FRE covers {pc:#x}")
    if rules.ra == RA_UNDEFINED or not isinstance(rules.cfa, Loc):
        return Step(None, OUTERMOST_REACHED)
    try:
        cfa = _value(rules.cfa, None, regs, read)
        caller = dict(regs)
        if rules.ra is None:
            if not topmost:
                return Step(None, "RA still in its register below the topmost frame")
            caller[PC] = regs[ra_reg]
        else:
            caller[PC] = _value(as_loc(rules.ra), cfa, regs, read)
    except LookupError as exc:
        return Step(None, f"memory or register not in the snapshot: {exc}")
    if rules.fp is not None:
        try:
            caller[fp_reg] = _value(as_loc(rules.fp), cfa, regs, read)
        except LookupError:
            caller.pop(fp_reg, None)  # FP unknown: its slot was not captured
    caller[sp_reg] = cfa + arch.sp_val_offset  # the caller's SP (s390x: CFA - 160)
    return Step(caller)


def _value(loc: Loc, cfa: int | None, regs: dict[int, int], read: Read) -> int:
    if loc.reg is not None and loc.reg not in regs:
        raise LookupError(f"register {loc.reg} (unknown in this frame)")
    base = cfa if loc.reg is None else regs[loc.reg]
    if base is None:
        raise LookupError("CFA-based rule for the CFA")
    address = (base + loc.offset) & 0xFFFFFFFFFFFFFFFF
    return read(address) if loc.deref else address


def walk(step: Callable[[dict[int, int], int], Step], regs: dict[int, int],
         max_frames: int = 64) -> tuple[list[dict[int, int]], str]:
    """Frames from ``regs`` (the topmost) outwards, ``step(frame, depth)`` giving each
    caller, and why the walk stopped."""
    frames = [dict(regs)]
    for depth in range(max_frames - 1):
        found = step(frames[-1], depth)
        if found.regs is None:
            return frames, found.error
        frames.append(found.regs)
    return frames, f"stopped after {max_frames} frames"


def sframe_walk(section: DecodedSection, regs: dict[int, int], read: Read,
                max_frames: int = 64) -> tuple[list[dict[int, int]], str]:
    """Frames from ``regs`` (the topmost) outwards, and why the walk stopped."""
    return walk(lambda frame, depth: sframe_step(section, frame, read, depth == 0), regs,
                max_frames)


def modules_walk(modules: Sequence[Module], regs: dict[int, int], read: Read,
                 max_frames: int = 64) -> tuple[list[dict[int, int]], str]:
    """``sframe_walk`` across the modules of a process, each frame with the SFrame
    section of the module holding its PC."""
    def step(frame: dict[int, int], depth: int) -> Step:
        pc = frame[PC] if depth == 0 else frame[PC] - 1
        module = module_for(list(modules), pc)
        if module is None:
            return Step(None, f"no module holds {frame[PC]:#x}")
        found = sframe_step(module.section, frame, read, depth == 0, module.bias)
        if found.error.startswith("no SFrame FDE") and module.in_entry_function(pc):
            return Step(None, f"{OUTERMOST_REACHED} (the entry point's function)")
        return found

    return walk(step, regs, max_frames)
