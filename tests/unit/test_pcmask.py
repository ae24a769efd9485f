"""PC-dependent CFA expressions and PC-mask FDEs (sframe.pcmask, dwarf.expr).

Expected values come from the DWARF 5 operator definitions and the SFrame
spec's PC-mask look-up rule, worked out by hand; the property test checks
exactness at every PC against the rows it started from.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cfi2sframe.arch import get_arch
from cfi2sframe.dwarf.expr import NotReducible, Value, evaluate
from cfi2sframe.memo import Memo
from cfi2sframe.model import CfaExpr, CfaReg, Location, Row, Rule, RuleKind, Timeline
from cfi2sframe.sframe.build import encode_sframe, lower_all
from cfi2sframe.sframe.decode import decode
from cfi2sframe.sframe.pcmask import resolve_pc_expressions
from cfi2sframe.sframe.rules import Loc, rules_at

X86 = get_arch("x86_64")
RA = ((16, Rule(RuleKind.offset, -8)),)
# GNU ld's x86-64 lazy PLT entry: CFA = rsp + 8, + 8 more from byte 11 of each entry.
LD_PLT = bytes([0x77, 8, 0x80, 0, 0x3F, 0x1A, 0x3B, 0x2A, 0x33, 0x24, 0x22])


def test_ld_plt_expression_by_hand() -> None:
    for pc, offset in ((0x1030, 8), (0x103A, 8), (0x103B, 16), (0x103F, 16), (0x1040, 8)):
        assert evaluate(LD_PLT, pc, X86.pc) == Value(7, offset), hex(pc)


def test_expressions_we_do_not_reduce() -> None:
    cases = {
        "memory read": bytes([0x77, 0xA0, 0x01, 0x06]),  # breg7 160; deref (signal frame)
        "two registers": bytes([0x77, 0, 0x76, 0, 0x22]),  # rsp + rbp
        "PC unknown": LD_PLT,  # in an object the PC is not known
        "endless loop": bytes([0x2F, 0xFD, 0xFF]),  # skip -3: itself
        "underflow": bytes([0x22]),
    }
    for what, expr in cases.items():
        pc_reg = None if what == "PC unknown" else X86.pc
        try:
            evaluate(expr, 0x1000, pc_reg)
        except NotReducible:
            continue
        raise AssertionError(what)


def _plt_timeline(start: int, entries: int) -> Timeline:
    rows = (Row(0, CfaReg(7, 16), RA), Row(6, CfaReg(7, 24), RA),
            Row(16, CfaExpr(LD_PLT), RA))
    return Timeline("plt", "", start, 16 + 16 * entries, rows, 16, Location("t"))


def test_plt_is_a_pc0_fde_and_one_pc_mask_fde_as_ld_writes() -> None:
    functions, skips = lower_all([_plt_timeline(0x1020, 5)], X86)
    assert not skips
    head, body = functions
    assert (head.start, head.size, head.pc_mask) == (0x1020, 16, False)
    assert [(f.start, f.cfa_offset) for f in head.fres] == [(0, 16), (6, 24)]
    assert (body.start, body.size, body.pc_mask, body.rep_size) == (0x1030, 80, True, 16)
    assert [(f.start, f.cfa_offset) for f in body.fres] == [(0, 8), (11, 16)]


def test_a_misaligned_plt_keeps_pc_increment_rows() -> None:
    """The expression reads the absolute PC; a PLT at 0x1028 has entries that straddle
    16-byte blocks, so a mask FDE from an aligned start would still be exact, and
    the rules stay right at every PC either way."""
    timeline = _plt_timeline(0x1028, 4)
    functions, _ = lower_all([timeline], X86)
    section = decode(encode_sframe(functions, X86).to_bytes(0, lambda f: f.start, "t"))
    for offset in range(timeline.size):
        pc = 0x1028 + offset
        want = 8 + 8 * ((pc & 15) >= 11) if offset >= 16 else (16 if offset < 6 else 24)
        fde = next(f for f in section.fdes if f.start_address <= pc < f.start_address + f.size)
        rules = rules_at(section, fde, pc)
        assert rules is not None and rules.cfa == Loc(7, want, False), hex(pc)


@settings(max_examples=200, deadline=None)
@given(head=st.lists(st.tuples(st.integers(1, 15), st.integers(1, 20)), max_size=3),
       block=st.lists(st.tuples(st.integers(1, 31), st.integers(1, 20)), max_size=3),
       rep=st.sampled_from([8, 16, 32]), blocks=st.integers(1, 6),
       start=st.integers(0, 64).map(lambda n: 0x1000 + 8 * n))
def test_split_is_exact_at_every_pc(head, block, rep, blocks, start) -> None:
    """Rows with a periodic tail, lowered and split: at every PC the decoded section
    gives the CFA of the row in force."""
    head_size = 2 * rep
    rows = [Row(0, CfaReg(7, 8), RA)]
    for at, words in sorted({a % head_size: w for a, w in head}.items()):
        rows.append(Row(at, CfaReg(7, 8 * words), RA))
    pattern = sorted({a % rep: w for a, w in block}.items())
    for b in range(blocks):
        for at, words in [(0, 1), *pattern]:
            rows.append(Row(head_size + b * rep + at, CfaReg(7, 8 * words), RA))
    merged: list[Row] = []
    for row in rows:
        if merged and merged[-1].start == row.start:
            merged[-1] = row
        elif not merged or merged[-1].cfa != row.cfa:
            merged.append(row)
    size = head_size + blocks * rep
    timeline = Timeline("f", "", start, size, tuple(merged), 16, Location("t"))
    functions, skips = lower_all([timeline], X86)
    assert not skips
    from cfi2sframe.sframe.pcmask import split_repeating

    split = [g for f in functions for g in split_repeating(f)]
    assert sum(f.size for f in split) == size
    section = decode(encode_sframe(split, X86).to_bytes(0, lambda f: f.start, "t"))
    for offset in range(size):
        pc = start + offset
        fde = next(f for f in section.fdes if f.start_address <= pc < f.start_address + f.size)
        rules = rules_at(section, fde, pc)
        want = timeline.row_at(offset)
        assert rules is not None and want is not None
        assert rules.cfa == Loc(7, want.cfa.offset, False), (hex(pc), split)
        if fde.pc_mask:
            assert fde.start_address % fde.rep_size == 0  # libsframe's PC % size agrees


def test_pc_period_of_the_plt_expression_and_of_others() -> None:
    """By hand: GNU ld's PLT expression reads the PC through ``& 15``, so it repeats
    every 16 bytes; an expression without the PC repeats every byte; the PC unmasked,
    or through a branch, shows no period."""
    from cfi2sframe.dwarf.expr import pc_period

    assert pc_period(LD_PLT, X86.pc) == 16
    assert pc_period(bytes([0x77, 8]), X86.pc) == 1  # rsp + 8
    assert pc_period(bytes([0x80, 0]), X86.pc) is None  # the PC itself
    assert pc_period(bytes([0x80, 0, 0x3F, 0x1A, 0x28, 0, 0]), X86.pc) is None  # bra
    # (pc & 63) >= 40, plus (pc & 15): every 64 bytes
    assert pc_period(bytes([0x77, 8, 0x80, 0, 0x08, 63, 0x1A, 0x08, 40, 0x2A, 0x22,
                            0x80, 0, 0x3F, 0x1A, 0x22]), X86.pc) == 64


# Operators pc_period follows, with what they take from the stack (hypothesis builds
# expressions from them; evaluate is the reference).
_OPS = [bytes([0x80, 0]), bytes([0x80, 5]), bytes([0x77, 8]), bytes([0x3F]),
        bytes([0x08, 7]), bytes([0x08, 40]), bytes([0x1A]), bytes([0x22]), bytes([0x1C]),
        bytes([0x2A]), bytes([0x24]), bytes([0x27]), bytes([0x12]), bytes([0x16]),
        bytes([0x23, 3]), bytes([0x1F]), bytes([0x20])]


@settings(max_examples=400, deadline=None)
@given(ops=st.lists(st.sampled_from(_OPS), min_size=1, max_size=10),
       pc=st.integers(0x1000, 0x100000))
def test_a_period_shown_is_a_period(ops, pc) -> None:
    """Wherever pc_period shows a period P, the expression gives the same value at pc
    and at pc + P, pc + 2P (or is not reducible at either)."""
    from cfi2sframe.dwarf.expr import pc_period

    expr = b"".join(ops)
    period = pc_period(expr, X86.pc)
    if period is None:
        return

    def value(at: int) -> Value | None:
        try:
            return evaluate(expr, at, X86.pc)
        except NotReducible:
            return None

    assert value(pc) == value(pc + period) == value(pc + 2 * period), (expr.hex(), period)


def _evaluations(monkeypatch) -> list[tuple[object, ...]]:
    """The calls ``sframe.pcmask`` makes of ``evaluate`` from now on (counted, not
    timed: a timed test fails on a busy machine), its values kept by residue emptied
    first (an earlier test's are kept)."""
    import cfi2sframe.sframe.pcmask as pcmask

    calls: list[tuple[object, ...]] = []

    def counted(*args: object, **kwargs: object) -> Value:
        calls.append(args)
        return evaluate(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pcmask, "evaluate", counted)
    monkeypatch.setattr(pcmask, "_VALUES", Memo(pcmask.MEMO_ENTRIES))
    monkeypatch.setattr(pcmask, "_RESOLVED", Memo(pcmask.RESOLVED_ENTRIES))
    return calls


def test_a_long_plt_expression_is_evaluated_once_per_residue(monkeypatch) -> None:
    """A fuzzer's finding: a 256 KiB range under the PLT expression took 4 s byte by
    byte.  It is evaluated once per residue of its 16-byte period (counted, not timed:
    a timed test fails on a busy machine), and lowers the same: the rules at sampled
    PCs are the expression's."""
    calls = _evaluations(monkeypatch)
    timeline = _plt_timeline(0x1020, 16384)
    functions, skips = lower_all([timeline], X86)
    assert not skips and 0 < len(calls) <= 2 * 16, len(calls)
    section = decode(encode_sframe(functions, X86).to_bytes(0, lambda f: f.start, "t"))
    for pc in range(0x1030, 0x1020 + timeline.size, 4093):
        fde = next(f for f in section.fdes if f.start_address <= pc < f.start_address + f.size)
        rules = rules_at(section, fde, pc)
        assert rules is not None and rules.cfa == Loc(7, evaluate(LD_PLT, pc, X86.pc).offset,
                                                      False), hex(pc)


def test_a_second_plt_with_the_same_expression_evaluates_nothing(monkeypatch) -> None:
    """A tree run's files share their PLT's expression: its values are kept by residue
    of its period, so the second PLT (another file's, elsewhere, longer) evaluates none
    and gets the rows evaluating gives (by hand: +8 up to byte 11 of each 16-byte
    entry, +16 after)."""
    calls = _evaluations(monkeypatch)
    first = resolve_pc_expressions(_plt_timeline(0x1020, 2), X86)
    assert isinstance(first, Timeline) and len(calls) == 16
    second = resolve_pc_expressions(_plt_timeline(0x7030, 3), X86)
    assert isinstance(second, Timeline) and len(calls) == 16
    assert [(row.start, row.cfa) for row in second.rows] == [
        (0, CfaReg(7, 16)), (6, CfaReg(7, 24)), (16, CfaReg(7, 8)), (27, CfaReg(7, 16)),
        (32, CfaReg(7, 8)), (43, CfaReg(7, 16)), (48, CfaReg(7, 8)), (59, CfaReg(7, 16))]


def test_the_kept_values_are_not_fooled_by_the_same_bytes_elsewhere(monkeypatch) -> None:
    """The same expression bytes mean other things in another context, each worked out
    by hand and asked after the other context has filled the memo: a PLT at another
    residue of the period (0x1028: its entries start at byte 8 of a 16-byte block), an
    object (the PC is not known: not evaluated), a target whose register 16 is not the
    PC (AArch64: x16, and masking a register is not reducible), and the other byte
    order (``const2u 08 00``: 8 little-endian, 2048 big-endian)."""
    import cfi2sframe.sframe.pcmask as pcmask

    monkeypatch.setattr(pcmask, "_VALUES", Memo(pcmask.MEMO_ENTRIES))
    monkeypatch.setattr(pcmask, "_PERIODS", Memo(pcmask.MEMO_ENTRIES))
    monkeypatch.setattr(pcmask, "_RESOLVED", Memo(pcmask.RESOLVED_ENTRIES))
    aligned = resolve_pc_expressions(_plt_timeline(0x1020, 3), X86)
    assert isinstance(aligned, Timeline)
    assert [(row.start, row.cfa.offset) for row in aligned.rows[2:]] == [  # type: ignore
        (16, 8), (27, 16), (32, 8), (43, 16), (48, 8), (59, 16)]
    shifted = resolve_pc_expressions(_plt_timeline(0x1028, 3), X86)
    assert isinstance(shifted, Timeline)
    # pc 0x1038 (offset 16) is byte 8 of its block: +8 until 0x103b, +16 until 0x1040...
    assert [(row.start, row.cfa.offset) for row in shifted.rows[2:]] == [  # type: ignore
        (16, 8), (19, 16), (24, 8), (35, 16), (40, 8), (51, 16), (56, 8)]
    in_object = _plt_timeline(0x1020, 3)._replace(section=".text")
    assert resolve_pc_expressions(in_object, X86) == \
        "the CFA expression reads the PC, which is not known before linking"
    arm = get_arch("aarch64")
    assert resolve_pc_expressions(_plt_timeline(0x1020, 3), arm) == \
        "the CFA expression cannot be evaluated: arithmetic on a register value"
    # CFA = sp + ((pc & 15) >= 11) * const2u(08 00), the PC read as bregx 32.
    expr = bytes([0x92, 32, 0, 0x3F, 0x1A, 0x3B, 0x2A, 0x0A, 0x08, 0x00, 0x1E, 0x8F, 0, 0x22])
    timeline = Timeline("plt", "", 0x2000, 32, (Row(0, CfaExpr(expr), ()),), 30,
                        Location("t"))
    for name, high in (("aarch64", 8), ("aarch64_be", 2048), ("aarch64", 8)):
        resolved = resolve_pc_expressions(timeline, get_arch(name))
        assert isinstance(resolved, Timeline)
        assert [(row.start, row.cfa) for row in resolved.rows] == [
            (0, CfaReg(31, 0)), (11, CfaReg(31, high)), (16, CfaReg(31, 0)),
            (27, CfaReg(31, high))], name
    # The period is the byte order's too: sp + (pc & const2u(0f 00)) repeats every 16
    # bytes little-endian, every 4096 big-endian (pc & 0xf00: +256 from 0x2100 on).
    masked = bytes([0x8F, 0, 0x92, 32, 0, 0x0A, 0x0F, 0x00, 0x1A, 0x22])
    across = Timeline("f", "", 0x20F0, 32, (Row(0, CfaExpr(masked), ()),), 30, Location("t"))
    little = resolve_pc_expressions(across, get_arch("aarch64"))
    assert isinstance(little, Timeline) and len(little.rows) == 32
    assert resolve_pc_expressions(across, get_arch("aarch64_be")) == across._replace(
        rows=(Row(0, CfaReg(31, 0), ()), Row(16, CfaReg(31, 256), ())))
    # And the PC register's: reg 32 + (reg 16 & 15) is x86-64's (reg 16 the PC) reg 32 +
    # (pc & 15), every byte a row; on AArch64 the PC (32) reaches it unmasked, so no
    # period, and a range past MAX_EACH_BYTE is not evaluated byte by byte.
    expr = bytes([0x92, 32, 0, 0x80, 0, 0x3F, 0x1A, 0x22])
    x86 = resolve_pc_expressions(Timeline("f", "", 0x1000, 16, (Row(0, CfaExpr(expr), ()),),
                                          16, Location("t")), X86)
    assert isinstance(x86, Timeline)
    assert [(row.start, row.cfa) for row in x86.rows] == [(k, CfaReg(32, k)) for k in range(16)]
    long = Timeline("f", "", 0x1000, 70000, (Row(0, CfaExpr(expr), ()),), 30, Location("t"))
    assert resolve_pc_expressions(long, arm) == "the CFA expression covers more than 65536 bytes"


def test_the_kept_rows_are_not_fooled_by_a_changed_byte_or_place(monkeypatch) -> None:
    """``--in-place`` lowers a file's PLT, then checks the written file's PLT, whose
    evaluated rows are kept between the two (``_RESOLVED``).  A written PLT that is not
    the one lowered gets its own rows: asked after the lowered one filled the memo,
    each is worked out by hand (+8 up to byte ``threshold`` of each 16-byte block, +16
    from it): ``lit11`` made ``lit10`` (a flipped byte), the PLT 4 bytes later, one
    entry longer, in an object (not evaluated)."""
    import cfi2sframe.sframe.pcmask as pcmask

    monkeypatch.setattr(pcmask, "_RESOLVED", Memo(pcmask.RESOLVED_ENTRIES))

    def body(timeline: Timeline) -> list[tuple[int, int]]:
        resolved = resolve_pc_expressions(timeline, X86)
        assert isinstance(resolved, Timeline)
        return [(row.start, row.cfa.offset) for row in resolved.rows[2:]]  # type: ignore

    def by_hand(start: int, size: int, threshold: int) -> list[tuple[int, int]]:
        rows: list[tuple[int, int]] = []
        for offset in range(16, size):
            offset_cfa = (offset, 16 if (start + offset) % 16 >= threshold else 8)
            if not rows or rows[-1][1] != offset_cfa[1]:
                rows.append(offset_cfa)
        return rows

    lowered = _plt_timeline(0x1020, 2)
    assert body(lowered) == by_hand(0x1020, 48, 11) == [(16, 8), (27, 16), (32, 8), (43, 16)]
    lit10 = LD_PLT.replace(bytes([0x3B]), bytes([0x3A]))
    flipped = lowered._replace(rows=lowered.rows[:2] + (Row(16, CfaExpr(lit10), RA),))
    assert body(flipped) == by_hand(0x1020, 48, 10)
    assert body(lowered._replace(start=0x1024)) == by_hand(0x1024, 48, 11)
    assert body(lowered._replace(size=64)) == by_hand(0x1020, 64, 11)
    assert resolve_pc_expressions(lowered._replace(section=".plt"), X86) == \
        "the CFA expression reads the PC, which is not known before linking"
    assert body(lowered) == by_hand(0x1020, 48, 11)  # and the lowered one's are kept


def _expr_rows(start: int, size: int, expr: bytes, at: int = 16,
               after: tuple[int, int] | None = None) -> list[tuple[int, int]]:
    """(start, CFA offset) of the rows ``resolve_pc_expressions`` makes of a PLT-like
    timeline at ``start``: CFA rsp + 16 up to ``at``, then ``expr``, then (``after``)
    rsp + an offset from that start on."""
    rows = [Row(0, CfaReg(7, 16), RA), Row(at, CfaExpr(expr), RA)]
    if after is not None:
        rows.append(Row(after[0], CfaReg(7, after[1]), RA))
    resolved = resolve_pc_expressions(Timeline("plt", "", start, size, tuple(rows), 16,
                                               Location("t")), X86)
    assert isinstance(resolved, Timeline), resolved
    return [(row.start, row.cfa.offset) for row in resolved.rows]  # type: ignore[union-attr]


def test_rows_are_made_per_change_and_fooled_by_no_shape(monkeypatch) -> None:
    """The rows of a periodic expression are made per residue and per change, not per
    byte; each shape that could fool that, by hand from the DWARF operators (CFA = rsp
    + 8, + 8 more where the masked PC passes the test)."""
    calls = _evaluations(monkeypatch)
    head = [(0, 16)]
    # Shorter than one period: 5 bytes, all +8, and only their 5 residues evaluated.
    assert _expr_rows(0x1020, 16 + 5, LD_PLT) == [*head, (16, 8)]
    assert len(calls) == 5
    # GNU ld's entry cut short at byte 11 (its +16 row would start there) and at 12.
    assert _expr_rows(0x1020, 16 + 32 + 11, LD_PLT) == [
        *head, (16, 8), (27, 16), (32, 8), (43, 16), (48, 8)]
    assert _expr_rows(0x1020, 16 + 32 + 12, LD_PLT) == [
        *head, (16, 8), (27, 16), (32, 8), (43, 16), (48, 8), (59, 16)]
    # Another period: (pc & 7) >= 5, every 8 bytes.
    every8 = bytes([0x77, 8, 0x80, 0, 0x37, 0x1A, 0x35, 0x2A, 0x33, 0x24, 0x22])
    assert _expr_rows(0x1020, 16 + 24, every8) == [
        *head, (16, 8), (21, 16), (24, 8), (29, 16), (32, 8), (37, 16)]
    # A block that ends as it starts (no change at its first byte): (pc & 15) == 5,
    # from a block's start and from its byte 8 (0x1038).
    at5 = bytes([0x77, 8, 0x80, 0, 0x3F, 0x1A, 0x35, 0x29, 0x33, 0x24, 0x22])
    assert _expr_rows(0x1020, 16 + 48, at5) == [
        *head, (16, 8), (21, 16), (22, 8), (37, 16), (38, 8), (53, 16), (54, 8)]
    assert _expr_rows(0x1028, 16 + 48, at5) == [
        *head, (16, 8), (29, 16), (30, 8), (45, 16), (46, 8), (61, 16), (62, 8)]
    # The expression's rows end where the next row starts (40: rsp + 32).
    assert _expr_rows(0x1020, 48, LD_PLT, after=(40, 32)) == [
        *head, (16, 8), (27, 16), (32, 8), (40, 32)]
    # Not shown periodic (a shift): evaluated at every byte, (pc >> 4) & 1.
    shifted = bytes([0x77, 8, 0x80, 0, 0x34, 0x25, 0x31, 0x1A, 0x33, 0x24, 0x22])
    from cfi2sframe.dwarf.expr import pc_period

    assert pc_period(shifted, X86.pc) is None
    # (0x1030: rsp + 16, the head's rules: one row on.)
    assert _expr_rows(0x1020, 16 + 64, shifted) == [*head, (32, 8), (48, 16), (64, 8)]


class _Counted:
    """A CFA offset that counts how often it is compared (the work ``split_repeating``
    does per FRE, counted rather than timed)."""

    def __init__(self, value: int, calls: list[int]) -> None:
        self.value, self.calls = value, calls

    def __eq__(self, other: object) -> bool:
        self.calls.append(1)
        return isinstance(other, _Counted) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)


def test_a_long_plt_is_split_comparing_each_fre_a_bounded_number_of_times() -> None:
    """A fuzzer's finding: a PLT of 4,097 entries at 0x1020 (65,568 bytes, 8,196 FREs)
    took 2.4 s under the fuzzer, because every repetition size and head tried (11)
    walked its 8k FREs, each wrong size to the end of the range.  The split is by
    hand as ld writes it (PLT0 of 16 bytes at 0x1020 with CFA rsp+16 then rsp+24 from
    byte 6; a PC-mask FDE of repetition 16 with rsp+8 then rsp+16 from byte 11), and
    each FRE's rules are compared about once, however many sizes are tried."""
    from cfi2sframe.sframe.format import Fre, SFrameFunction
    from cfi2sframe.sframe.pcmask import split_repeating

    calls: list[int] = []
    entries = 4097
    fres = [Fre(0, False, _Counted(16, calls)), Fre(6, False, _Counted(24, calls))]  # type: ignore[arg-type]
    for entry in range(entries):
        fres += [Fre(16 + 16 * entry, False, _Counted(8, calls)),  # type: ignore[arg-type]
                 Fre(16 + 16 * entry + 11, False, _Counted(16, calls))]  # type: ignore[arg-type]
    func = SFrameFunction("plt", "", 0x1020, 16 + 16 * entries, tuple(fres))
    head, body = split_repeating(func)
    assert (head.start, head.size, head.pc_mask) == (0x1020, 16, False)
    assert [(f.start, f.cfa_offset.value) for f in head.fres] == [(0, 16), (6, 24)]
    assert (body.start, body.size, body.pc_mask, body.rep_size) == (0x1030, 65552, True, 16)
    assert [(f.start, f.cfa_offset.value) for f in body.fres] == [(0, 8), (11, 16)]
    assert len(calls) <= 2 * len(fres), len(calls)  # walking each size: over 4 per FRE


def _by_definition(starts: list[int], rules: list[int], head: int, rep: int,
                   size: int) -> bool:
    """Whether the rules from ``head`` to ``size`` are those of its first ``rep`` bytes
    repeated, asked at every byte (the FREs' step function: the last FRE at or
    before a byte is in force), and an FRE past the end changes nothing."""
    at: list[int | None] = []  # the rule in force at each byte
    for x in range(max(size, starts[-1] + 1)):
        known = [rule for start, rule in zip(starts, rules, strict=True) if start <= x]
        at.append(known[-1] if known else None)
    return (at[head] is not None
            and all(at[x] == at[head + (x - head) % rep] for x in range(head, size))
            and all(rule == at[size - 1] for rule in at[size:]))


@settings(max_examples=200, deadline=None)
@given(data=st.data(), rep=st.sampled_from([2, 4, 8, 16]), size=st.integers(1, 96))
def test_a_repeating_body_is_found_exactly_where_the_rules_repeat(data, rep, size) -> None:
    """``_repeating_body`` against the definition at every byte, on step functions with
    a head, a repeating or nearly repeating tail, blocks cut short at the end, FREs
    that repeat the rules before them and FREs past the end; its FREs are those of
    the first block."""
    from cfi2sframe.sframe.format import Fre
    from cfi2sframe.sframe.pcmask import _repeating_body, _steps

    past = data.draw(st.sampled_from([0, 0, 0, rep]))  # sometimes an FRE past the end
    starts = sorted(data.draw(st.sets(st.integers(0, size - 1 + past), min_size=1,
                                      max_size=size)))
    period = data.draw(st.sampled_from([rep, rep * 2, rep + 1]))
    pattern = data.draw(st.lists(st.integers(1, 3), min_size=period, max_size=period))
    tail_from = data.draw(st.integers(0, size))
    rules = [data.draw(st.integers(1, 3)) if at < tail_from else pattern[(at - tail_from) % period]
             for at in starts]
    head = data.draw(st.integers(0, size - 1))
    fres = tuple(Fre(at, False, 8 * rule) for at, rule in zip(starts, rules, strict=True))
    body = _repeating_body(fres, _steps(fres), head, rep, size)
    assert (body is not None) == _by_definition(starts, rules, head, rep, size)
    if body is not None:
        in_force = max(i for i, at in enumerate(starts) if at <= head)
        want = [(0, rules[in_force])] + [(at - head, rule)
                                         for at, rule in zip(starts, rules, strict=True)
                                         if head < at < head + rep]
        assert [(f.start, f.cfa_offset // 8) for f in body] == want


def test_an_fre_past_the_end_that_goes_on_repeating_is_no_repetition() -> None:
    """By hand: CFA rsp+8 at even bytes, rsp+16 at odd ones, over 6 bytes, repeats
    every 2 bytes from 0; one more FRE at byte 6 (past the end) that changes the rule
    as the pattern would is a change the function's blocks do not have, so nothing
    repeats (an FRE past the end with the rule already in force changes nothing)."""
    from cfi2sframe.sframe.format import Fre
    from cfi2sframe.sframe.pcmask import _repeating_body, _steps

    fres = tuple(Fre(at, False, 8 if at % 2 == 0 else 16) for at in range(6))
    assert [(f.start, f.cfa_offset) for f in _repeating_body(fres, _steps(fres), 0, 2, 6)
            or ()] == [(0, 8), (1, 16)]
    changed = (*fres, Fre(6, False, 8))
    assert _repeating_body(changed, _steps(changed), 0, 2, 6) is None
    same = (*fres, Fre(6, False, 16))
    assert _repeating_body(same, _steps(same), 0, 2, 6) is not None


def test_v3_makes_each_distinct_rows_rules_once(monkeypatch) -> None:
    """A PLT of 100 entries resolves to ~200 rows holding three distinct rules (by hand:
    CFA rsp+16 and rsp+24 in PLT0, then rsp+8 and rsp+16 in each entry, RA at CFA-8
    throughout): V3 makes each one's rules and default FRE once, not once per row,
    and lowers the same as V2 (the bytes of both are CFA offsets alone: default FREs)."""
    from cfi2sframe.sframe import lower as lowering

    made: list[Row] = []
    real = lowering._v3_rules

    def counted(row: Row, arch: object) -> object:
        made.append(row)
        return real(row, arch)  # type: ignore[arg-type]

    monkeypatch.setattr(lowering, "_v3_rules", counted)
    defaults: list[int] = []
    real_default = lowering._default_fre

    def counted_default(start: int, *rest: object) -> object:
        defaults.append(start)
        return real_default(start, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(lowering, "_default_fre", counted_default)
    timeline = _plt_timeline(0x1020, 100)
    v3, skips = lower_all([timeline], X86, 3)
    assert not skips
    # The first try stops at the expression (PLT0's two rules, then the expression);
    # the second, over the resolved rows, meets PLT0's two and the entries' rsp+8.
    assert [row.cfa for row in made] == [CfaReg(7, 16), CfaReg(7, 24), CfaExpr(LD_PLT),
                                         CfaReg(7, 16), CfaReg(7, 24), CfaReg(7, 8)], made
    assert len(defaults) == 3, defaults  # one default FRE per distinct rules, placed
    v2, _ = lower_all([timeline], X86, 2)
    assert [(f.start, f.size, f.fres) for f in v3] == [(f.start, f.size, f.fres) for f in v2]


def test_v3_names_the_first_row_a_repeated_rule_fails_at() -> None:
    """Rows made once per distinct rule still fail at the first row that has it: a
    signed return address (no V3 encoding on x86-64) at offsets 4 and 12, between
    rows that lower, is left out at 0x4 (by hand), and a rule differing only in the
    signing is not taken for the one before it."""
    from cfi2sframe.reasons import SframeReason
    from cfi2sframe.sframe.lower import lower

    ok, signed = Row(0, CfaReg(7, 8), RA), Row(0, CfaReg(7, 8), RA, ra_signed=True)
    rows = (ok, signed._replace(start=4), ok._replace(start=8), signed._replace(start=12))
    result = lower(Timeline("f", "", 0x1000, 16, rows, 16, Location("t")), X86, None, 3)
    assert getattr(result, "reason", None) == SframeReason.ra_signed, result
    assert result.detail.endswith("at offset 0x4"), result.detail  # type: ignore[union-attr]
