"""Property: random CFI programs -> timeline -> SFrame bytes -> decoded -> same rules at every PC.

The oracle below replays the DWARF operations up to each PC from scratch,
with no merging, sizing or byte layout: the straight reading of the DWARF
and SFrame specs.  The pipeline under test must agree with it at every PC,
or leave the function out, with a reason the oracle finds at the first PC
SFrame cannot describe.

The generator is aimed at what SFrame can say (most programs reach the per-PC
comparison): prologue/epilogue-like CFA changes, FP saves at CFA offsets, nested
remember/restore blocks that change the rules inside, and offsets at the edges
of SFrame's 1-, 2- and 4-byte words.  ``test_generated_programs_reach_the_comparison``
holds a floor on how many examples get there, so a generator drifting towards
unrepresentable programs (that only exercise ``Skip``) fails instead of passing
vacuously.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from cfi2sframe import Skip, decode_sframe, encode_sframe, lower
from cfi2sframe.arch import get_arch
from cfi2sframe.dwarf import ops
from cfi2sframe.dwarf.interpret import interpret
from cfi2sframe.model import Location, Timeline
from cfi2sframe.sframe.rules import RA_UNDEFINED, FrameRules, Loc, rules_at
from tests.conftest import meaning

X86 = get_arch("x86_64")
SP, FP, RA = 7, 6, 16  # DWARF numbers of rsp, rbp and the return address column
CIE = (ops.DefCfa(SP, 8), ops.Offset(RA, -8))
OTHER = (3, 12)  # rbx, r12: callee-saved, not described by SFrame
ANY_REG = st.sampled_from([SP, FP, RA, 10, *OTHER])
EXAMPLES = 400

# SFrame stores CFA and FP offsets in signed words of 1, 2 or 4 bytes (one size per
# FRE, the smallest that holds every word): the last value of each size and the first
# that needs the next one, on both sides.
EDGES = (127, 128, -128, -129, 32767, 32768, -32768, -32769, (1 << 31) - 1, -(1 << 31))
# No SFrame word holds these: the function must be left out ("offset-range"), never
# written with the value wrapped to 32 bits.
BEYOND = (1 << 31, -(1 << 31) - 1, 1 << 32, (1 << 32) + 16, -(1 << 40))


def fits32(value: int) -> bool:
    return -(1 << 31) <= value < (1 << 31)


def weighted(*pairs):
    """One of the strategies, chosen with the given integer weights."""
    return st.sampled_from([s for weight, s in pairs for _ in range(weight)]).flatmap(
        lambda s: s)


def offsets(typical, beyond: bool):
    """Mostly ``typical`` offsets, some at the edges, some anywhere in +-70000, and (in
    programs drawn with ``beyond``) some that no SFrame word holds."""
    choices = [(12, typical), (4, st.sampled_from(EDGES)), (2, st.integers(-70000, 70000))]
    return weighted(*choices, *([(2, st.sampled_from(BEYOND))] if beyond else []))


def clean_ops(beyond: bool):
    """Operations a default SFrame FRE can describe (given 32-bit offsets): CFA on rsp or
    rbp, rbp unchanged or saved at CFA+N, RA at CFA-8, rsp the CFA (val_offset 0), and
    any rule for registers SFrame does not track."""
    cfa_offsets = offsets(st.integers(1, 32).map(lambda n: n * 8), beyond)
    fp_offsets = offsets(st.integers(-32, -1).map(lambda n: n * 8), beyond)
    return weighted(
        (5, st.builds(lambda o: ops.DefCfaOffset(o), cfa_offsets)),
        (2, st.builds(lambda r, o: ops.DefCfa(r, o), st.sampled_from([SP, FP]),
                      cfa_offsets)),
        (2, st.builds(lambda r: ops.DefCfaRegister(r), st.sampled_from([SP, FP]))),
        (4, st.builds(lambda o: ops.Offset(FP, o), fp_offsets)),
        (2, st.just(ops.Restore(FP))),
        (1, st.just(ops.SameValue(FP))),
        (1, st.just(ops.Offset(RA, -8))),
        (1, st.just(ops.Restore(RA))),
        (1, st.just(ops.ValOffset(SP, 0))),
        (1, st.just(ops.Restore(SP))),
        (1, st.builds(lambda r, o: ops.Offset(r, o), st.sampled_from(OTHER), fp_offsets)),
        (1, st.builds(lambda r, o: ops.ValOffset(r, o), st.sampled_from(OTHER),
                      st.sampled_from([0, -16]))),
        (1, st.builds(lambda r, r2: ops.Register(r, r2), st.sampled_from(OTHER), ANY_REG)),
        (1, st.builds(lambda r: ops.Undefined(r), st.sampled_from(OTHER))),
        (1, st.builds(lambda r: ops.SameValue(r), st.sampled_from(OTHER))),
        (1, st.builds(lambda r: ops.Restore(r), st.sampled_from(OTHER))),
        (1, st.just(ops.Nop())),
    )


# Operations SFrame V2 cannot describe (V3 can some: RA undefined or in a register,
# FP in a register, a CFA on another register).
NOISE = st.one_of(
    st.builds(lambda o: ops.DefCfa(10, o), st.integers(1, 32).map(lambda n: n * 8)),
    st.builds(lambda o: ops.Offset(RA, o), st.sampled_from([-16, 8, -136])),
    st.just(ops.Undefined(RA)),
    st.just(ops.SameValue(RA)),
    st.builds(lambda r: ops.Register(RA, r), st.sampled_from([3, 10])),
    st.just(ops.ValOffset(RA, -8)),
    st.builds(lambda r: ops.Register(FP, r), st.sampled_from([3, 10])),
    st.builds(lambda o: ops.ValOffset(FP, o), st.sampled_from([0, -16])),
    st.just(ops.Undefined(FP)),
    st.builds(lambda o: ops.Offset(SP, o), st.sampled_from([-16, 0])),
    st.builds(lambda o: ops.ValOffset(SP, o), st.sampled_from([8, -8])),
)
CLEAN, CLEAN_BEYOND = clean_ops(False), clean_ops(True)
# Bytes between operations: 0 (several operations at one PC), small steps, and jumps
# that take a function past 255 and 65535 bytes (FRE start words of 2 and 4 bytes).
ADVANCES = weighted((2, st.just(0)), (6, st.integers(1, 8)), (2, st.integers(9, 300)),
                    (1, st.sampled_from([255, 256, 65535, 65536])))


@st.composite
def block(draw, choices, depth: int = 0) -> list[ops.Op]:
    """A run of operations, some of them nested remember_state ... restore_state blocks
    whose insides change the rules (and, now and then, a block left open)."""
    out: list[ops.Op] = []
    for _ in range(draw(st.integers(0, 6 if depth else 8))):
        if depth < 2 and draw(st.integers(0, 3)) == 0:
            out.append(ops.RememberState())
            out += draw(block(choices, depth + 1))
            if draw(st.integers(0, 7)):  # most blocks are closed
                out.append(ops.RestoreState())
        else:
            out.append(draw(choices))
    return out


@st.composite
def programs(draw):
    """(placed operations, function size).  Of ten programs, seven use only operations
    SFrame can describe, one of them also offsets past 32 bits, and two mix in
    operations it cannot describe."""
    mode = draw(st.integers(0, 9))
    choices = (CLEAN if mode < 7 else CLEAN_BEYOND if mode == 7
               else weighted((4, CLEAN_BEYOND), (1, NOISE)))
    placed, pc = [], 0
    for op in draw(block(choices)):
        pc += draw(ADVANCES)
        placed.append((pc, op))
    size = draw(weighted((6, st.integers(pc, pc + 50)),
                         (1, st.sampled_from([e for e in (256, 257, 65536, 65537) if e > pc]
                                             or [pc + 1]))))
    return placed, size


def state_after(program) -> tuple[tuple[int, int], dict]:
    """(CFA register and offset, register rules) after ``program``, from the x86-64 CIE
    rules: the straight reading of DWARF 5 section 6.4.2, every operation replayed."""
    initial = {RA: ("offset", -8)}
    cfa, regs, stack = (SP, 8), dict(initial), []
    for op in program:
        match op:
            case ops.DefCfa(register, offset):
                cfa = (register, offset)
            case ops.DefCfaOffset(offset):
                cfa = (cfa[0], offset)
            case ops.DefCfaRegister(register):
                cfa = (register, cfa[1])
            case ops.Offset(register, offset):
                regs[register] = ("offset", offset)
            case ops.ValOffset(register, offset):
                regs[register] = ("val_offset", offset)
            case ops.Register(register, source):
                regs[register] = ("register", source)
            case ops.SameValue(register):
                regs[register] = ("same_value", 0)
            case ops.Undefined(register):
                regs[register] = ("undefined", 0)
            case ops.Restore(register):
                if register in initial:
                    regs[register] = initial[register]
                else:
                    regs.pop(register, None)
            case ops.RememberState():
                stack.append((cfa, dict(regs)))
            case ops.RestoreState():
                cfa, regs = stack.pop()
    return cfa, regs


def replay(placed, pc):
    """(CFA register and offset, register rules) at ``pc``: every operation up to it."""
    return state_after(op for at, op in placed if at <= pc)


def oracle(placed, pc):
    """(base, cfa offset, fp offset, RA) at ``pc``, or the set of reasons SFrame V2
    cannot say it (x86-64: RA always at CFA-8, FP unchanged or at CFA+N)."""
    cfa, regs = replay(placed, pc)
    problems = set()
    if cfa[0] not in (SP, FP):
        problems.add("cfa-not-sp-fp")
    ra = regs.get(RA)
    if ra == ("undefined", 0):
        problems.add("ra-undefined")
    elif ra != ("offset", -8):
        problems.add("ra-not-at-fixed-offset")
    if regs.get(SP) not in (None, ("val_offset", 0)):
        problems.add("sp-not-cfa")
    fp = regs.get(FP)
    fp_off = None
    if fp is not None and fp[0] == "offset":
        fp_off = fp[1]
    elif fp is not None and fp[0] != "same_value":
        problems.add({"register": "fp-in-register", "val_offset": "fp-val-offset",
                      "undefined": "fp-undefined"}[fp[0]])
    if not (fits32(cfa[1]) and fits32(fp_off or 0)):
        problems.add("offset-range")
    if problems:
        return frozenset(problems)
    return ("fp" if cfa[0] == FP else "sp", cfa[1], fp_off, ("cfa", -8))


def oracle_v3(placed, pc):
    """The SFrame V3 rules at ``pc`` (FLEX allowed), or the set of reasons V3 cannot say.

    Straight from the V3 spec: CFA = reg + offset (any register); FP and RA
    saved at CFA+N, held in a register, or (RA) undefined; RA at CFA-8 is the
    fixed default.  A CFA-based value ("FP/RA = CFA+N") has control word 0, the
    padding word, so it has no encoding.  Same DWARF replay as ``oracle``.
    """
    cfa, regs = replay(placed, pc)
    ra = regs.get(RA)
    if ra == ("undefined", 0):
        return FrameRules(None, None, RA_UNDEFINED)
    problems = set()
    if regs.get(SP) not in (None, ("val_offset", 0)):
        problems.add("sp-not-cfa")
    fp_rule = regs.get(FP)
    fp = ra_loc = None
    if fp_rule is None or fp_rule[0] == "same_value":
        pass
    elif fp_rule[0] == "offset":
        fp = Loc(None, fp_rule[1], True)
    elif fp_rule[0] == "register":
        fp = Loc(fp_rule[1], 0, False)
    else:
        problems.add({"undefined": "fp-undefined", "val_offset": "fp-val-offset"}[fp_rule[0]])
    if ra is not None and ra[0] == "offset":
        ra_loc = Loc(None, ra[1], True)
    elif ra is not None and ra[0] == "register":
        ra_loc = Loc(ra[1], 0, False)
    else:  # unchanged (x86-64 has no RA register) or the value CFA+N
        problems.add("ra-not-at-fixed-offset")
    values = [cfa[1]] + [x.offset for x in (fp, ra_loc) if x is not None]
    if not all(fits32(v) for v in values):
        problems.add("offset-range")
    if problems:
        return frozenset(problems)
    return FrameRules(Loc(cfa[0], cfa[1], False), fp, ra_loc)


def checked_pcs(placed, size) -> list[int]:
    """Rules only change where an operation is placed: there, just before, both ends."""
    return sorted({p for at, _ in placed for p in (at - 1, at) if 0 <= p < size}
                  | ({0, size - 1} if size else set()))


def timeline(placed, size) -> Timeline:
    rows = interpret(CIE, placed, size)
    return Timeline("f", ".text", 0x1000, size, rows, RA, Location("p.s", 1))


def check_skip(result: Skip, size: int, expected: dict) -> None:
    """A function is left out only when the oracle finds a PC SFrame cannot describe, and
    for a reason found at the first such PC (rows are lowered in order)."""
    if size == 0:
        assert result.reason == "empty-function", result
        return
    problems = [want for want in expected.values() if isinstance(want, frozenset)]
    assert problems, (result, expected)
    assert result.reason in problems[0], (result, problems[0])


# Always run as well: the 32-bit edge on each side for the CFA and FP offsets (kept, or
# left out with "offset-range"), and the frame-pointer epilogue inside remember/restore
# (rbp's save rule must come back after restore_state).
PUSH_RBP = [(1, ops.DefCfaOffset(16)), (1, ops.Offset(FP, -16)),
            (4, ops.DefCfaRegister(FP))]
EXAMPLE_PROGRAMS = [
    ([(1, ops.DefCfaOffset((1 << 31) - 1))], 4),
    ([(1, ops.DefCfaOffset(1 << 31))], 4),
    ([(1, ops.Offset(FP, -(1 << 31)))], 4),
    ([(1, ops.Offset(FP, -(1 << 31) - 1))], 4),
    (PUSH_RBP + [(8, ops.RememberState()), (8, ops.DefCfa(SP, 8)), (8, ops.Restore(FP)),
                 (9, ops.RestoreState()), (9, ops.Offset(3, -24)), (12, ops.Nop())], 16),
]


def with_examples(test):
    for program in EXAMPLE_PROGRAMS:
        test = example(program)(test)
    return test


# Examples seen by each property, and how many reached each stage; checked by
# ``test_generated_programs_reach_the_comparison``.
STATS: dict[str, Counter] = {"v2": Counter(), "v3": Counter()}


def effective_restores(placed, size) -> tuple[int, int]:
    """(restore_state operations inside the function, those among them that bring back
    different register rules than the ones in force just before)."""
    program = [op for _, op in placed]
    total = changed = 0
    for i, (at, op) in enumerate(placed):
        if isinstance(op, ops.RestoreState) and at < size:
            total += 1
            changed += state_after(program[:i])[1] != state_after(program[:i + 1])[1]
    return total, changed


def record(kind: str, placed, size: int, compared: bool, expected: dict) -> None:
    stats = STATS[kind]
    restores, changed = effective_restores(placed, size)
    stats["examples"] += 1
    stats["restore_state"] += restores > 0
    if compared:
        stats["compared"] += 1
        stats["compared_restore_changing_regs"] += changed > 0
        offsets = set()
        for want in expected.values():
            if isinstance(want, FrameRules):  # a named tuple too: test it first
                offsets |= {x.offset for x in (want.cfa, want.fp) if x is not None}
            elif isinstance(want, tuple):
                offsets |= {want[1], want[2]}
        stats["compared_edge_offset"] += bool(offsets & set(EDGES))
        event("compared at every PC")
    else:
        event("left out")
    if not compared and any(isinstance(w, frozenset) and w == {"offset-range"}
                            for w in expected.values()):
        stats["left_out_offset_range"] += 1
    if restores:
        event("has restore_state")


def encoded_and_read(result, size: int, version: int):
    """``result`` (one function at 0x1000) encoded in a section at 0x2000 and read back
    with the strict reader: the section and its one FDE, at the function's range."""
    image = encode_sframe([result], X86, version=version)
    data = image.to_bytes(0x2000, lambda f: f.start)
    assert image.size == len(data)
    section = decode_sframe(data, 0x2000)
    (fde,) = section.fdes
    assert (fde.start_address, fde.size) == (0x1000, size)
    return section, fde


@settings(max_examples=EXAMPLES, deadline=None)
@given(programs())
@with_examples
def test_sframe_unwinds_as_the_cfi_says_at_every_pc(program):
    placed, size = program
    result = lower(timeline(placed, size), X86)
    pcs = checked_pcs(placed, size)
    expected = {pc: oracle(placed, pc) for pc in pcs}
    record("v2", placed, size, not isinstance(result, Skip) and bool(pcs), expected)
    if isinstance(result, Skip):
        check_skip(result, size, expected)
        return
    section, fde = encoded_and_read(result, size, 2)
    for pc in pcs:
        covering = [fre for fre in fde.fres if fre.start <= pc]
        got = meaning(section, covering[-1]) if covering else None
        assert got == expected[pc], (pc, got, expected[pc])


@settings(max_examples=EXAMPLES, deadline=None)
@given(programs())
@with_examples
def test_sframe_v3_unwinds_as_the_cfi_says_at_every_pc(program):
    placed, size = program
    result = lower(timeline(placed, size), X86, version=3)
    pcs = checked_pcs(placed, size)
    expected = {pc: oracle_v3(placed, pc) for pc in pcs}
    record("v3", placed, size, not isinstance(result, Skip) and bool(pcs), expected)
    if isinstance(result, Skip):
        check_skip(result, size, expected)
        return
    section, fde = encoded_and_read(result, size, 3)
    for pc in pcs:
        got = rules_at(section, fde, 0x1000 + pc)
        assert got == expected[pc], (pc, got, expected[pc])


@settings(max_examples=EXAMPLES, deadline=None)
@given(programs())
@with_examples
def test_interpreter_rows_are_the_replay_at_every_pc(program):
    """The interpreter's rows hold every register's rule as the replay gives it (not only
    the three SFrame shows): stale rules after restore_state, a lost remembered state or a
    wrong restore fail here even where SFrame would not see them."""
    placed, size = program
    t = timeline(placed, size)
    for pc in checked_pcs(placed, size):
        row = t.row_at(pc)
        assert row is not None
        got = (tuple(row.cfa), {reg: (rule.kind, rule.value) for reg, rule in row.regs})
        assert got == replay(placed, pc), (pc, got)


def test_generated_programs_reach_the_comparison(report):
    """The properties above compare at every PC only for functions SFrame can describe:
    at least 60% of the examples must get there, at least 20% hold a restore_state, and
    some must compare rows after a restore_state that brought back other register rules,
    and offsets at the word-size edges.  Run alone, it runs the properties first."""
    if not STATS["v2"]["examples"]:
        test_sframe_unwinds_as_the_cfi_says_at_every_pc()
    if not STATS["v3"]["examples"]:
        test_sframe_v3_unwinds_as_the_cfi_says_at_every_pc()
    for kind, stats in STATS.items():
        n = stats["examples"]
        fraction = {key: stats[key] / n for key in stats}
        report(f"property {kind}: {n} examples, "
               + ", ".join(f"{key} {value:.0%}" for key, value in sorted(fraction.items())
                           if key != "examples"))
        assert n >= EXAMPLES, stats
        assert fraction["compared"] >= 0.6, stats
        assert fraction["restore_state"] >= 0.2, stats
        assert fraction["compared_restore_changing_regs"] >= 0.1, stats
        assert fraction["compared_edge_offset"] >= 0.1, stats
        assert stats["left_out_offset_range"] >= 2, stats


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.integers(0, 80), st.integers(0, 64),
       st.lists(st.tuples(st.integers(0, 90), st.binary(min_size=1, max_size=20)),
                max_size=5),
       st.integers(1, 9))
def test_patched_copy_is_the_file_its_fields_describe(source, size, kept, patches, length):
    """A patched copy, chunk by chunk of any length, is the file made the plain way: the
    source's first ``kept`` bytes, zeros to ``size``, each patch written over in order
    (what ends past ``size`` is cut)."""
    from cfi2sframe.files import PatchedCopy, bytes_of

    kept = min(kept, len(source), size)
    expected = bytearray(size)
    expected[:kept] = source[:kept]
    for at, data in patches:
        expected[at:at + len(data)] = data
        del expected[size:]
        expected += bytes(size - len(expected))
    copy = PatchedCopy(size, source, kept, tuple(patches))
    chunks = list(copy.chunks(length))
    assert all(len(chunk) == length for chunk in chunks[:-1])
    assert b"".join(chunks) == expected
    assert bytes_of(copy) == expected
