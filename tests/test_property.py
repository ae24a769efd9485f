"""Property: random CFI programs -> timeline -> SFrame bytes -> decoded -> same rules at every PC.

The oracle below replays the DWARF operations up to each PC from scratch,
with no merging, sizing or byte layout: the straight reading of the DWARF
and SFrame specs.  The pipeline under test must agree with it at every PC,
or leave the function out only when the oracle finds a PC SFrame cannot
describe.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cfi2sframe import Skip, decode_sframe, encode_sframe, lower
from cfi2sframe.arch import get_arch
from cfi2sframe.dwarf.interpret import interpret
from cfi2sframe.dwarf.ops import Op
from cfi2sframe.model import Location, Timeline
from cfi2sframe.sframe.rules import RA_UNDEFINED, FrameRules, Loc, rules_at
from tests.conftest import meaning

X86 = get_arch("x86_64")
CIE = (Op("def_cfa", 7, 8), Op("offset", 16, -8))
REGS = st.sampled_from([7, 6, 3, 16, 10])
OFFSETS = st.one_of(st.integers(-64, 64).map(lambda n: n * 8), st.integers(-70000, 70000))

OPS = st.one_of(
    st.builds(lambda r, o: Op("def_cfa", r, o), st.sampled_from([7, 7, 6, 10]), OFFSETS),
    st.builds(lambda o: Op("def_cfa_offset", 0, o), OFFSETS),
    st.builds(lambda r: Op("def_cfa_register", r), st.sampled_from([7, 6])),
    st.builds(lambda r, o: Op("offset", r, o), REGS, OFFSETS),
    st.builds(lambda r: Op("offset", r, -8), st.just(16)),
    st.builds(lambda r: Op("restore", r), REGS),
    st.builds(lambda r: Op("same_value", r), REGS),
    st.builds(lambda r: Op("undefined", r), REGS),
    st.builds(lambda r, r2: Op("register", r, r2), REGS, REGS),
    st.builds(lambda r, o: Op("val_offset", r, o), REGS, st.sampled_from([0, -16])),
    st.just(Op("remember_state")),
    st.just(Op("restore_state")),
    st.just(Op("nop")),
)


@st.composite
def programs(draw):
    ops = draw(st.lists(st.tuples(st.integers(0, 40), OPS), max_size=25))
    placed, pc, depth = [], 0, 0
    for advance, op in ops:
        if op.name == "restore_state":
            if depth == 0:
                continue
            depth -= 1
        if op.name == "remember_state":
            depth += 1
        pc += advance if draw(st.booleans()) else advance * 300
        placed.append((pc, op))
    size = pc + draw(st.integers(0, 50))
    return placed, size


def replay(placed, pc):
    """(CFA register and offset, register rules) at ``pc``: every operation up to it
    replayed from scratch, from the x86-64 CIE rules."""
    initial = {16: ("offset", -8)}
    cfa, regs, stack = (7, 8), dict(initial), []
    for at, op in placed:
        if at > pc:
            break
        n = op.name
        if n == "def_cfa":
            cfa = (op.reg, op.offset)
        elif n == "def_cfa_offset":
            cfa = (cfa[0], op.offset)
        elif n == "def_cfa_register":
            cfa = (op.reg, cfa[1])
        elif n in ("offset", "val_offset", "register"):
            regs[op.reg] = (n, op.offset)
        elif n in ("same_value", "undefined"):
            regs[op.reg] = (n, 0)
        elif n == "restore":
            if op.reg in initial:
                regs[op.reg] = initial[op.reg]
            else:
                regs.pop(op.reg, None)
        elif n == "remember_state":
            stack.append((cfa, dict(regs)))
        elif n == "restore_state":
            cfa, regs = stack.pop()
    return cfa, regs


def oracle(placed, pc):
    """(base, cfa offset, fp offset, RA) at ``pc``, or None where SFrame cannot say."""
    cfa, regs = replay(placed, pc)
    if cfa[0] not in (6, 7) or regs.get(16) != ("offset", -8):
        return None
    if regs.get(7) not in (None, ("val_offset", 0)):
        return None
    fp = regs.get(6)
    if fp is None or fp[0] == "same_value":
        fp_off = None
    elif fp[0] == "offset":
        fp_off = fp[1]
    else:
        return None
    if not all(-(1 << 31) <= v < (1 << 31) for v in (cfa[1], fp_off or 0)):
        return None
    return ("fp" if cfa[0] == 6 else "sp", cfa[1], fp_off, ("cfa", -8))


@settings(max_examples=300, deadline=None)
@given(programs())
def test_sframe_unwinds_as_the_cfi_says_at_every_pc(program):
    placed, size = program
    rows = interpret(CIE, placed, size)
    t = Timeline("f", ".text", 0x1000, size, rows, 16, Location("p.s", 1))
    result = lower(t, X86)
    # Rules only change where an operation is placed: check there, just
    # before, and at both ends.
    pcs = sorted({p for at, _ in placed for p in (at - 1, at) if 0 <= p < size}
                 | ({0, size - 1} if size else set()))
    expected = {pc: oracle(placed, pc) for pc in pcs}
    if isinstance(result, Skip):
        assert size == 0 or None in expected.values(), (result, expected)
        return
    image = encode_sframe([result], X86)
    data = image.to_bytes(0x2000, lambda f: f.start)
    assert image.size == len(data)
    section = decode_sframe(data, 0x2000)
    (fde,) = section.fdes
    assert (fde.start_address, fde.size) == (0x1000, size)
    for pc in pcs:
        covering = [fre for fre in fde.fres if fre.start <= pc]
        got = meaning(section, covering[-1]) if covering else None
        assert got == expected[pc], (pc, got, expected[pc])


def oracle_v3(placed, pc):
    """The SFrame V3 rules at ``pc`` (FLEX allowed), or None where V3 cannot say.

    Straight from the V3 spec: CFA = reg + offset (any register); FP and RA
    saved at CFA+N, held in a register, or (RA) undefined; RA at CFA-8 is the
    fixed default.  Same DWARF replay as ``oracle``.
    """
    cfa, regs = replay(placed, pc)

    def loc(rule):
        kind, value = rule
        if kind == "offset":
            return Loc(None, value, True)
        if kind == "register":
            return Loc(value, 0, False)
        return "bad"  # a CFA-based value has control word 0: the padding word

    ra = regs.get(16)
    if ra == ("undefined", 0):
        return FrameRules(None, None, RA_UNDEFINED)
    if regs.get(7) not in (None, ("val_offset", 0)) or ra is None or ra[0] == "same_value":
        return None
    fp_rule = regs.get(6)
    fp = None if fp_rule is None or fp_rule[0] == "same_value" else loc(fp_rule)
    ra_loc = loc(ra)
    if "bad" in (fp, ra_loc):
        return None
    values = [cfa[1]] + [x.offset for x in (fp, ra_loc) if x is not None]
    if not all(-(1 << 31) <= v < (1 << 31) for v in values):
        return None
    return FrameRules(Loc(cfa[0], cfa[1], False), fp, ra_loc)


@settings(max_examples=300, deadline=None)
@given(programs())
def test_sframe_v3_unwinds_as_the_cfi_says_at_every_pc(program):
    placed, size = program
    rows = interpret(CIE, placed, size)
    t = Timeline("f", ".text", 0x1000, size, rows, 16, Location("p.s", 1))
    result = lower(t, X86, version=3)
    pcs = sorted({p for at, _ in placed for p in (at - 1, at) if 0 <= p < size}
                 | ({0, size - 1} if size else set()))
    expected = {pc: oracle_v3(placed, pc) for pc in pcs}
    if isinstance(result, Skip):
        assert size == 0 or None in expected.values(), (result, expected)
        return
    image = encode_sframe([result], X86, version=3)
    data = image.to_bytes(0x2000, lambda f: f.start)
    assert image.size == len(data)
    section = decode_sframe(data, 0x2000)
    (fde,) = section.fdes
    assert (fde.start_address, fde.size) == (0x1000, size)
    for pc in pcs:
        got = rules_at(section, fde, 0x1000 + pc)
        assert got == expected[pc], (pc, got, expected[pc])
