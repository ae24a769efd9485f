"""Every DW_CFA opcode GNU as can emit through ``.cfi_escape``, against readelf's reading.

Functions with real instructions between the escapes (so gas advances the location
between them) are assembled by GNU as; ``readelf --debug-dump=frames-interp`` turns the
object's ``.eh_frame`` into a table of rows (CFA and every register column).  At every
row address of either side, our ``Timeline`` rows - from the assembly (the ``.cfi_escape``
bytes through our decoder) and from the object's ``.eh_frame`` (our ELF reader) - must
give the same CFA and the same rule for every register as readelf's table; and where
SFrame can describe the function (decided by hand below, per function), its FREs (V2 and
V3) must give readelf's CFA, FP and RA at every byte of the function.

Escaped advances (``DW_CFA_advance_loc*`` inside ``.cfi_escape``) shift every later row;
our assembly frontend refuses them (an error, tested here), so they are compared through
the object only.  Not covered: ``DW_CFA_set_loc`` (its address operand would need a
relocation an escape cannot carry) and ``DW_CFA_MIPS_advance_loc8`` (MIPS only); AArch64's
``negate_ra_state`` changes no column readelf prints.

The parser of readelf's table is written here, not imported from
``test_compact_body.py``: that one splits rows on whitespace, which misreads the
two-word ``r3 (rbx)`` of a ``DW_CFA_register`` rule.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from cfi2sframe import convert_asm, decode_sframe, timelines_from_asm
from cfi2sframe.convert import convert_elf
from cfi2sframe.elf.cfi import read_elf_cfi
from cfi2sframe.errors import Cfi2SframeError
from cfi2sframe.model import CfaExpr, RuleKind, Timeline
from cfi2sframe.sframe.rules import RA_UNDEFINED, FrameRules, Loc, rules_at
from tests.conftest import require
from tests.support.leb128 import sleb, uleb

X86_REGS = {"rax": 0, "rdx": 1, "rcx": 2, "rbx": 3, "rsi": 4, "rdi": 5, "rbp": 6, "rsp": 7,
            **{f"r{n}": n for n in range(8, 16)}}
A64_REGS = {**{f"x{n}": n for n in range(31)}, "sp": 31}


@dataclass(frozen=True)
class Esc:
    """One DW_CFA operation written as ``.cfi_escape`` bytes."""

    data: bytes

    @property
    def opcode(self) -> int:
        first = self.data[0]
        return first & 0xC0 if first >= 0x40 else first  # primary opcodes: the top 2 bits


def E(*parts: int | bytes) -> Esc:  # noqa: N802 - reads like the opcode tables
    return Esc(b"".join(bytes([p]) if isinstance(p, int) else p for p in parts))


@dataclass(frozen=True)
class Func:
    """A function: instructions (str) and escapes; ``skip`` holds the reasons SFrame V2
    and V3 leave it out for, derived by hand from their specs (None: SFrame describes it
    exactly; V3's FLEX FDEs take a CFA on any register, FP or RA in a register, RA at any
    CFA offset, and RA-undefined rows; V2 leaves out every CFA expression, V3 takes one
    that is a register plus a constant, loaded or not: ``cfa_exp``, ``fp_exp``)."""

    name: str
    body: tuple[str | Esc, ...]
    skip: tuple[str | None, str | None] = (None, None)
    cfa_exp: Loc | None = None  # what its CFA expression computes, in SFrame's terms
    fp_exp: Loc | None = None  # the same for its FP (val_)expression


# x86-64: GNU as's CIE has code alignment 1, data alignment -8, RA column 16, and the
# initial rules CFA = rsp+8, RA at CFA-8.  Each comment is the rule readelf must show.
X86_FUNCS = (
    Func("sf_prologue", (
        "push %rbp",
        E(0x13, sleb(-2)),              # def_cfa_offset_sf: -2 * -8 = 16        rsp+16
        E(0x11, uleb(6), sleb(2)),      # offset_extended_sf rbp: 2 * -8 = -16   rbp c-16
        "mov %rsp, %rbp",
        E(0x12, uleb(6), sleb(-2)),     # def_cfa_sf rbp: -2 * -8 = 16           rbp+16
        "sub $16, %rsp", "mov %rdi, -8(%rbp)",
        E(0x0A),                        # remember_state
        "leave",
        E(0x12, uleb(7), sleb(-1)),     # def_cfa_sf rsp: -1 * -8 = 8            rsp+8
        E(0x06, uleb(6)),               # restore_extended rbp: no CIE rule      u
        "ret",
        E(0x0B),                        # restore_state                          rbp+16, c-16
        "mov -8(%rbp), %rax", "leave",
        E(0x0C, uleb(7), uleb(8)),      # def_cfa rsp+8
        E(0xC0 | 6),                    # restore rbp (primary opcode)           u
        "ret")),
    Func("unsigned_forms", (
        "push %rbp",
        E(0x0E, uleb(16)),              # def_cfa_offset 16                      rsp+16
        E(0x05, uleb(6), uleb(2)),      # offset_extended rbp: 2 * -8 = -16      c-16
        "push %rbx",
        E(0x0E, uleb(24)),              # rsp+24
        E(0x80 | 3, uleb(3)),           # offset rbx (primary): 3 * -8 = -24     c-24
        "sub $200, %rsp",
        E(0x0E, uleb(224)),             # a 2-byte ULEB                          rsp+224
        "sub $70000, %rsp",
        E(0x0E, uleb(70224)),           # a 3-byte ULEB                          rsp+70224
        "lea 16(%rsp), %rbp",
        E(0x0D, uleb(6)),               # def_cfa_register rbp                   rbp+70224
        "nop",
        E(0x2F, uleb(6), uleb(3)),      # GNU_negative_offset_extended: -(3 * -8) c+24
        "nop",
        E(0x13, sleb(-100)),            # def_cfa_offset_sf, 2-byte SLEB: 800    rbp+800
        "nop",
        E(0x13, sleb(3)),               # def_cfa_offset_sf: 3 * -8 = -24        rbp-24
        "nop",
        E(0x12, uleb(7), sleb(-40000)),  # def_cfa_sf, 3-byte SLEB: 320000       rsp+320000
        "nop",
        E(0x0C, uleb(7), uleb(8)),      # def_cfa rsp+8
        E(0x06, uleb(6)), E(0xC0 | 3),  # restore_extended rbp, restore rbx      u, u
        "ret")),
    Func("values_and_others", (
        "push %rbp",
        E(0x0E, uleb(16)), E(0x80 | 6, uleb(2)),  # rsp+16, rbp c-16
        "push %r12",
        E(0x0E, uleb(24)),
        E(0x14, uleb(3), uleb(2)),      # val_offset rbx: 2 * -8 = -16           v-16
        E(0x15, uleb(12), sleb(-2)),    # val_offset_sf r12: -2 * -8 = 16        v+16
        "mov %rdi, %rbx",
        E(0x15, uleb(13), sleb(3)),     # val_offset_sf r13: 3 * -8 = -24        v-24
        E(0x15, uleb(14), sleb(-300)),  # 2-byte SLEB: -300 * -8 = 2400          v+2400
        "nop",
        E(0x07, uleb(3)),               # undefined rbx                          u
        E(0x08, uleb(12)),              # same_value r12                         s
        E(0x09, uleb(15), uleb(3)),     # register r15 in rbx                    r3
        E(0x2E, uleb(16)),              # GNU_args_size 16: no rule changes
        E(0x00),                        # nop
        "call *%rbx",
        E(0x2E, uleb(0)),
        "pop %r12",
        E(0x0E, uleb(16)), E(0xC0 | 12),
        "pop %rbp",
        E(0x0E, uleb(8)), E(0xC0 | 6),
        "ret")),
    Func("nested_state", (
        "push %rbp",
        E(0x0E, uleb(16)), E(0x86, uleb(2)),  # rsp+16, rbp c-16
        "mov %rsp, %rbp",
        E(0x0D, uleb(6)),               # rbp+16
        E(0x0A),                        # remember (rbp+16, rbp c-16)
        "nop",
        E(0x0C, uleb(7), uleb(8)), E(0xC6),  # rsp+8, rbp u
        E(0x0A),                        # remember (rsp+8, rbp u)
        "nop",
        E(0x0E, uleb(32)),              # rsp+32
        E(0x11, uleb(6), sleb(4)),      # rbp c-32
        "nop",
        E(0x0B),                        # back to rsp+8, rbp u
        "nop",
        E(0x0B),                        # back to rbp+16, rbp c-16
        "nop", "leave",
        E(0x0C, uleb(7), uleb(8)), E(0xC6),
        "ret")),
    Func("expressions", (
        "push %rbp",
        E(0x0E, uleb(16)), E(0x86, uleb(2)),
        # expression rbx: the block DW_OP_breg7 (0x77) 8: saved at rsp+8        exp
        E(0x10, uleb(3), uleb(2), 0x77, sleb(8)),
        # val_expression r12: DW_OP_breg7 16                                      vexp
        E(0x16, uleb(12), uleb(2), 0x77, sleb(16)),
        "nop",
        # def_cfa_expression: DW_OP_breg7 0 (0x77), DW_OP_breg6 0 (0x76), DW_OP_plus
        # (0x22): rsp + rbp, which no SFrame rule holds                           exp
        E(0x0F, uleb(5), 0x77, sleb(0), 0x76, sleb(0), 0x22),
        "nop",
        # def_cfa_register after an expression: the offset in force before it (16),
        # as readelf, libgcc's unwinder and gdb do                                rbp+16
        E(0x0D, uleb(6)),
        "nop",
        E(0x0E, uleb(24)),              # rbp+24
        "nop",
        E(0x0C, uleb(7), uleb(8)),
        "ret"), skip=("cfa-expression", "cfa-expression")),
    Func("simple_cfa_expression", (
        "push %rbp", E(0x0E, uleb(16)),
        "nop",
        E(0x0F, uleb(2), 0x77, sleb(16)),  # def_cfa_expression DW_OP_breg7 16    exp
        "nop",
        E(0x0D, uleb(7)),               # def_cfa_register rsp: rsp+16
        "pop %rbp", E(0x0E, uleb(8)),
        "ret"), skip=("cfa-expression", None), cfa_exp=Loc(7, 16, False)),
    Func("deref_cfa_expression", (
        "push %rbp", E(0x0E, uleb(16)),
        "mov %rsp, %rbp", E(0x0D, uleb(6)),
        "push %r10",
        # def_cfa_expression DW_OP_breg6 -8 (0x76), DW_OP_deref (0x06): the CFA is loaded
        # from rbp-8, as after a stack realignment (V3: a FLEX CFA with dereference) exp
        E(0x0F, uleb(3), 0x76, sleb(-8), 0x06),
        "and $-32, %rsp", "nop",
        E(0x0C, uleb(6), uleb(16)),     # def_cfa rbp+16
        "leave", E(0x0C, uleb(7), uleb(8)),
        "ret"), skip=("cfa-expression", None), cfa_exp=Loc(6, -8, True)),
    Func("fp_in_register", (
        "push %rbp", E(0x0E, uleb(16)),
        "mov %rbp, %rbx",
        E(0x09, uleb(6), uleb(3)),      # register rbp in rbx                    r3
        "nop", E(0x08, uleb(6)),        # same_value rbp                         s
        "pop %rbp", E(0x0E, uleb(8)),
        "ret"), skip=("fp-in-register", None)),
    Func("fp_val_offset_sf", (
        "push %rbp", E(0x0E, uleb(16)),
        E(0x15, uleb(6), sleb(2)),      # val_offset_sf rbp: 2 * -8 = -16        v-16
        "pop %rbp", E(0x0E, uleb(8)),
        "ret"), skip=("fp-val-offset", "fp-val-offset")),
    Func("fp_expression", (
        "push %rbp", E(0x0E, uleb(16)),
        # expression rbp: DW_OP_breg7 0, DW_OP_breg6 0, DW_OP_plus: saved at rsp + rbp
        E(0x10, uleb(6), uleb(5), 0x77, sleb(0), 0x76, sleb(0), 0x22),  #           exp
        "pop %rbp", E(0x0E, uleb(8)),
        "ret"), skip=("fp-expression", "fp-expression")),
    Func("fp_val_expression", (
        "push %rbp", E(0x0E, uleb(16)),
        # val_expression rbp: the same sum as the value                           vexp
        E(0x16, uleb(6), uleb(5), 0x77, sleb(0), 0x76, sleb(0), 0x22),
        "pop %rbp", E(0x0E, uleb(8)),
        "ret"), skip=("fp-expression", "fp-expression")),
    Func("fp_at_rsp_by_expression", (
        "push %rbp", E(0x0E, uleb(16)),
        # expression rbp: DW_OP_breg7 0: saved at [rsp] (V3: FLEX, rsp+0 loaded)   exp
        E(0x10, uleb(6), uleb(2), 0x77, sleb(0)),
        "pop %rbp", E(0x0E, uleb(8)), E(0xC6),
        "ret"), skip=("fp-expression", None), fp_exp=Loc(7, 0, True)),
    Func("fp_is_rsp_by_val_expression", (
        "push %rbp", E(0x0E, uleb(16)),
        # val_expression rbp: DW_OP_breg7 8: the value rsp+8 (V3: FLEX, not loaded) vexp
        E(0x16, uleb(6), uleb(2), 0x77, sleb(8)),
        "pop %rbp", E(0x0E, uleb(8)), E(0xC6),
        "ret"), skip=("fp-expression", None), fp_exp=Loc(7, 8, False)),
    Func("ra_undefined", (
        "nop",
        E(0x07, uleb(16)),              # undefined RA: an outermost frame       ra u
        "ud2"), skip=("ra-undefined", None)),
    Func("ra_elsewhere", (
        "push %rbp", E(0x0E, uleb(16)),
        E(0x11, uleb(16), sleb(2)),     # RA saved at CFA-16: not SFrame's fixed CFA-8
        "pop %rbp", E(0x0E, uleb(8)),
        "ret"), skip=("ra-not-at-fixed-offset", None)),
    Func("cfa_on_r10", (
        "lea 8(%rsp), %r10",
        E(0x0C, uleb(10), uleb(0)),     # def_cfa r10+0                          r10+0
        "and $-16, %rsp",
        E(0x12, uleb(7), sleb(-1)),     # def_cfa_sf rsp+8
        "ret"), skip=("cfa-not-sp-fp", None)),
    Func("sp_saved", (
        "push %rbp", E(0x0E, uleb(16)),
        E(0x05, uleb(7), uleb(3)),      # offset_extended rsp: SFrame takes SP = CFA
        "pop %rbp", E(0x0E, uleb(8)),
        "ret"), skip=("sp-not-cfa", "sp-not-cfa")),
)

# Escaped advances: GNU as copies the bytes, so every later row moves by the escaped
# delta (gas's own advances are deltas too).  They come last, with the code they cover
# after them: 300 bytes of nop.
X86_ADVANCES = (
    Func("advances", (
        "push %rbp",
        E(0x0E, uleb(16)),              # at 1: rsp+16
        E(0x02, 3),                     # advance_loc1 3: to 4
        E(0x0E, uleb(24)),              # at 4: rsp+24
        E(0x03, (272).to_bytes(2, "little")),  # advance_loc2 272: to 276
        E(0x0E, uleb(32)), E(0x86, uleb(2)),    # at 276: rsp+32, rbp c-16
        E(0x04, (5).to_bytes(4, "little")),    # advance_loc4 5: to 281
        E(0x0E, uleb(40)),              # at 281: rsp+40
        E(0x40 | 0x3F),                 # advance_loc 63 (the 6-bit maximum): to 344
        E(0x0E, uleb(48)), E(0xC6),     # at 344: rsp+48, rbp u
        ".skip 360, 0x90",
        "ret")),
)


def _source(funcs: tuple[Func, ...]) -> str:
    lines = ["\t.text"]
    for func in funcs:
        lines += [f"\t.globl {func.name}", f"\t.type {func.name}, @function", "\t.p2align 4",
                  f"{func.name}:", "\t.cfi_startproc"]
        for item in func.body:
            if isinstance(item, Esc):
                lines.append("\t.cfi_escape " + ", ".join(f"{b:#04x}" for b in item.data))
            else:
                lines.append("\t" + item)
        lines += ["\t.cfi_endproc", f"\t.size {func.name}, .-{func.name}"]
    return "\n".join(lines) + "\n"


_RULE = re.compile(r"r\d+ \([^)]*\)|\S+")
_FDE = re.compile(r"FDE cie=([0-9a-f]+) pc=([0-9a-f]+)\.\.([0-9a-f]+)")
_CIE = re.compile(r"CIE .* ra=(\d+)")


def _rule(text: str) -> tuple:
    """readelf's column text as (kind, operand): u, s, c+N, v+N, rN (name), exp, vexp."""
    if text in ("u", "s", "exp", "vexp"):
        return (text,)
    if text[0] in "cv":
        return (text[0], int(text[1:]))
    match = re.fullmatch(r"r(\d+) \(.*\)", text)
    assert match, text
    return ("r", int(match.group(1)))


def _cfa(text: str, names: dict[str, int]) -> tuple | str:
    if text == "exp":
        return "exp"
    match = re.fullmatch(r"(\w+)([+-]\d+)", text)
    assert match, text
    return (names[match.group(1)], int(match.group(2)))


def readelf_fdes(obj: Path, readelf: str, names: dict[str, int]) -> dict[int, tuple]:
    """{start: (end, [(address, CFA, {column: rule})])} from ``readelf -wF``; CFA is
    (register, offset) or "exp", a column its DWARF number (``ra``: the CIE's)."""
    text = subprocess.run([readelf, "--debug-dump=frames-interp", str(obj)],
                          capture_output=True, text=True, check=True).stdout
    fdes: dict[int, tuple] = {}
    rows: list | None = None
    columns: list[int] = []
    ra = None
    for line in text.splitlines():
        if (match := _CIE.search(line)) and " FDE " not in line:
            ra, rows = int(match.group(1)), None
        elif match := _FDE.search(line):
            rows = []
            fdes[int(match.group(2), 16)] = (int(match.group(3), 16), rows)
        elif line.strip().startswith("LOC"):
            columns = [ra if name == "ra" else names[name] for name in line.split()[2:]]
        elif rows is not None and re.match(r"^[0-9a-f]{16} ", line):
            address, cfa, *cells = _RULE.findall(line)
            assert len(cells) == len(columns), line
            rows.append((int(address, 16), _cfa(cfa, names),
                         {col: _rule(cell) for col, cell in zip(columns, cells, strict=True)}))
    return fdes


def _ours(timeline: Timeline, pc: int) -> tuple[tuple | str, dict[int, tuple]]:
    """Our row at ``pc`` (from the function start) in readelf's terms."""
    row = timeline.row_at(pc)
    assert row is not None, (timeline.name, pc)
    cfa: tuple | str = "exp" if isinstance(row.cfa, CfaExpr) else tuple(row.cfa or ())
    kinds = {RuleKind.undefined: "u", RuleKind.same_value: "s", RuleKind.offset: "c",
             RuleKind.val_offset: "v", RuleKind.register: "r", RuleKind.expression: "exp",
             RuleKind.val_expression: "vexp"}
    cols = {}
    for reg, rule in row.regs:
        kind = kinds[rule.kind]
        cols[reg] = (kind,) if kind in ("u", "s", "exp", "vexp") else (kind, rule.value)
    return cfa, cols


def _blocks(func: Func) -> set[bytes]:
    """The expression blocks its escapes write (operands here are one-byte LEB128s):
    def_cfa_expression is (length, block), (val_)expression (register, length, block)."""
    out = set()
    for item in func.body:
        if isinstance(item, Esc) and item.opcode in (0x0F, 0x10, 0x16):
            at = 1 if item.opcode == 0x0F else 2
            assert item.data[at] + at + 1 == len(item.data), item
            out.add(item.data[at + 1:])
    return out


def _readelf_at(rows: list, address: int) -> tuple:
    found = None
    for row in rows:  # later rows at one address win (readelf prints each advance)
        if row[0] <= address:
            found = row
    assert found is not None, address
    return found


def compare_timelines(timelines: tuple[Timeline, ...], fdes: dict[int, tuple],
                      funcs: tuple[Func, ...]) -> int:
    """Our rows against readelf's at every row address of either; the count compared."""
    assert [t.name for t in timelines] == [f.name for f in funcs]
    compared = 0
    for t, func in zip(timelines, funcs, strict=True):
        assert t.invalid is None, (t.name, t.invalid)
        # readelf prints "exp" alone: our expressions must be the bytes the escapes hold
        exprs = {row.cfa.expr for row in t.rows if isinstance(row.cfa, CfaExpr)} | {
            rule.expr for row in t.rows for _, rule in row.regs if rule.expr}
        assert exprs <= _blocks(func), (t.name, exprs)
        end, rows = fdes[t.start]
        assert end - t.start == t.size, t.name
        pcs = {r.start for r in t.rows} | {r[0] - t.start for r in rows}
        for pc in sorted(p for p in pcs if 0 <= p < t.size):
            _, cfa, cells = _readelf_at(rows, t.start + pc)
            got_cfa, got = _ours(t, pc)
            # A column readelf does not print, or prints "u", and one we hold no rule for:
            # both undefined (DWARF's default for a column the CIE does not set).
            columns = set(cells) | set(got)
            want = {c: cells.get(c, ("u",)) for c in columns}
            have = {c: got.get(c, ("u",)) for c in columns}
            assert (got_cfa, have) == (cfa, want), (t.name, hex(pc))
            compared += 1
    return compared


def expected_rules(cfa: tuple | str, cells: dict[int, tuple], fp: int, ra: int,
                   ra_always_set: bool, func: Func) -> FrameRules:
    """SFrame's rules (V2/V3 spec terms) for one readelf row: CFA = reg + offset (readelf's
    ``exp``: the function's ``cfa_exp``, worked out by hand); FP and RA saved at CFA+N
    (``c``), in a register (``r``), by an expression (``fp_exp``), or unchanged; RA ``u``
    where the CIE always sets it (x86-64) is an undefined RA, an outermost frame."""
    if cfa == "exp":
        assert func.cfa_exp is not None
        cfa_loc = func.cfa_exp
    else:
        assert isinstance(cfa, tuple), cfa
        cfa_loc = Loc(cfa[0], cfa[1], False)

    def loc(rule: tuple) -> Loc | None:
        if rule[0] == "c":
            return Loc(None, rule[1], True)
        if rule[0] == "r":
            return Loc(rule[1], 0, False)
        if rule[0] in ("exp", "vexp"):
            assert func.fp_exp is not None
            return func.fp_exp
        assert rule[0] in ("u", "s"), rule
        return None

    ra_rule = cells.get(ra, ("u",))
    if ra_always_set and ra_rule == ("u",):
        return FrameRules(None, None, RA_UNDEFINED)
    return FrameRules(cfa_loc, loc(cells.get(fp, ("u",))), loc(ra_rule))


def compare_sframe(conversion, fdes: dict[int, tuple], funcs: tuple[Func, ...], fp: int,
                   ra: int, ra_always_set: bool, version: int) -> int:
    """Each function SFrame can describe: readelf's CFA, FP and RA at every byte; the
    others left out with the reason derived by hand.  Returns the PCs compared."""
    section = decode_sframe(conversion.raw())
    placed = {(f.start, f.size): fde for f, fde in
              zip(conversion.functions, section.fdes, strict=True)}
    skips = {s.start: s.reason for s in conversion.skips}
    compared = 0
    for start, func in zip(sorted(fdes), funcs, strict=True):
        end, rows = fdes[start]
        reason = func.skip[version - 2]
        assert skips.get(start) == reason, (func.name, version, skips.get(start))
        if reason is not None:
            continue
        fde = placed[(start, end - start)]
        for address in range(start, end):
            _, cfa, cells = _readelf_at(rows, address)
            want = expected_rules(cfa, cells, fp, ra, ra_always_set, func)
            got = rules_at(section, fde, fde.start_address + address - start)
            assert got == want, (func.name, version, hex(address - start), got, want)
            compared += 1
    return compared


def _assemble(tmp_path: Path, name: str, text: str, assembler: str) -> Path:
    source = tmp_path / f"{name}.s"
    source.write_text(text)
    obj = tmp_path / f"{name}.o"
    subprocess.run([assembler, str(source), "-o", str(obj)], check=True)
    return obj


def _opcodes(funcs: tuple[Func, ...]) -> set[int]:
    return {item.opcode for func in funcs for item in func.body if isinstance(item, Esc)}


# The opcodes the x86-64 functions must hold between them (DWARF 5 table 7.29, GNU).
WANTED = {0x40, 0x80, 0xC0, 0x00, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A,
          0x0B, 0x0C, 0x0D, 0x0E, 0x0F, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x2E, 0x2F}


def test_every_opcode_gives_readelfs_rows_x86_64(tmp_path: Path, report) -> None:
    """Our rows from the .s and from the object equal readelf's at every row address, and
    SFrame V2 and V3 give readelf's CFA, FP and RA at every byte where SFrame can."""
    require("as", "readelf")
    assert _opcodes(X86_FUNCS + X86_ADVANCES) == WANTED
    text = _source(X86_FUNCS)
    fdes = readelf_fdes(_assemble(tmp_path, "ops", text, "as"), "readelf", X86_REGS)
    adv_text = _source(X86_ADVANCES)
    adv_obj = _assemble(tmp_path, "adv", adv_text, "as")
    adv_fdes = readelf_fdes(adv_obj, "readelf", X86_REGS)
    assert len(fdes) == len(X86_FUNCS) and len(adv_fdes) == len(X86_ADVANCES)

    rows = compare_timelines(timelines_from_asm(text, "ops.s"), fdes, X86_FUNCS)
    rows_elf = compare_timelines(read_elf_cfi(str(tmp_path / "ops.o")).timelines, fdes,
                                 X86_FUNCS)
    rows_elf += compare_timelines(read_elf_cfi(str(adv_obj)).timelines, adv_fdes,
                                  X86_ADVANCES)
    pcs = 0
    for version in (2, 3):
        pcs += compare_sframe(convert_asm(text, "ops.s", version=version), fdes, X86_FUNCS,
                              6, 16, True, version)
        pcs += compare_sframe(convert_elf(str(tmp_path / "ops.o"), version=version), fdes,
                              X86_FUNCS, 6, 16, True, version)
        pcs += compare_sframe(convert_elf(str(adv_obj), version=version), adv_fdes,
                              X86_ADVANCES, 6, 16, True, version)
    report(f"DW_CFA opcodes via .cfi_escape (x86-64): {len(WANTED)} opcodes in "
           f"{len(X86_FUNCS) + len(X86_ADVANCES)} functions; rows equal to readelf -wF: "
           f"{rows} from the .s, {rows_elf} from the object; SFrame V2+V3 equal at "
           f"{pcs} PCs")


# DW_CFA_def_cfa_offset while the CFA is an expression: DWARF 5 (6.4.2.2) allows it only
# with a register rule; readelf 2.40, libgcc's unwinder (unwind-dw2.c: "cfa_how
# deliberately not set") and gdb (dwarf2/frame.c, the same comment) store the offset and
# keep the expression until a def_cfa_register.
X86_OFFSET_AFTER_EXPRESSION = (
    Func("offset_after_expression", (
        "push %rbp",
        E(0x0E, uleb(16)),              # rsp+16
        "nop",
        E(0x0F, uleb(2), 0x77, sleb(16)),  # def_cfa_expression: rsp+16          exp
        E(0x0E, uleb(16)),              # def_cfa_offset 16: still the expression   exp
        "nop",
        E(0x0D, uleb(7)),               # def_cfa_register rsp: rsp+16
        "pop %rbp",
        E(0x0E, uleb(8)),
        "ret"), skip=("cfa-expression", "cfa-expression")),
)


def test_def_cfa_offset_keeps_a_cfa_expression(tmp_path: Path) -> None:
    """At offset 2 readelf shows CFA ``exp``: the expression is kept by def_cfa_offset."""
    require("as", "readelf")
    text = _source(X86_OFFSET_AFTER_EXPRESSION)
    obj = _assemble(tmp_path, "exp", text, "as")
    fdes = readelf_fdes(obj, "readelf", X86_REGS)
    assert [row[1] for row in fdes[0][1]][:3] == [(7, 8), (7, 16), "exp"]  # readelf's reading
    compare_timelines(read_elf_cfi(str(obj)).timelines, fdes, X86_OFFSET_AFTER_EXPRESSION)
    compare_sframe(convert_elf(str(obj)), fdes, X86_OFFSET_AFTER_EXPRESSION, 6, 16, True, 2)


def test_escaped_advance_is_refused_in_assembly() -> None:
    """Our assembly frontend places operations at their directive's address, so an
    escaped advance (which moves every later row, as the object shows) is an error."""
    require("as")
    with pytest.raises(Cfi2SframeError, match="location advance"):
        timelines_from_asm(_source(X86_ADVANCES), "adv.s")


# AArch64: GNU as's CIE has code alignment 4, data alignment -8, RA column 30 (x30), and
# CFA = sp+0.  SFrame tracks the RA per row (saved at CFA+N, or unchanged in x30).
A64_FUNCS = (
    Func("a64_frame", (
        "stp x29, x30, [sp, -32]!",
        E(0x13, sleb(-4)),              # def_cfa_offset_sf: -4 * -8 = 32        sp+32
        E(0x11, uleb(29), sleb(4)),     # offset_extended_sf x29: 4 * -8 = -32   c-32
        E(0x05, uleb(30), uleb(3)),     # offset_extended x30: 3 * -8 = -24      c-24
        "mov x29, sp",
        E(0x12, uleb(29), sleb(-4)),    # def_cfa_sf x29: 32                     x29+32
        E(0x0A),
        E(0x09, uleb(19), uleb(20)),    # register x19 in x20                    r20
        E(0x15, uleb(21), sleb(-2)),    # val_offset_sf x21: 16                  v+16
        "ldp x29, x30, [sp], 32",
        E(0x0C, uleb(31), uleb(0)),     # def_cfa sp+0
        E(0x06, uleb(29)), E(0xC0 | 30),  # restore x29 and x30                  u, u
        "ret",
        E(0x0B),                        # back to x29+32, c-32, c-24, r20, v+16
        "nop",
        E(0x14, uleb(22), uleb(1)),     # val_offset x22: -8                     v-8
        E(0x2F, uleb(23), uleb(2)),     # GNU_negative_offset_extended: +16      c+16
        "nop", "ret")),
    Func("a64_leaf", (
        "nop",
        E(0x2E, uleb(0)), E(0x08, uleb(19)), E(0x07, uleb(20)),  # args_size, s, u
        "ret")),
)


def test_opcodes_give_readelfs_rows_aarch64(tmp_path: Path, report) -> None:
    """The same on AArch64 (code alignment 4; RA in x30 or saved)."""
    assembler = "aarch64-linux-gnu-as"
    require(assembler, "aarch64-linux-gnu-readelf")
    text = _source(A64_FUNCS).replace("@function", "%function")
    fdes = readelf_fdes(_assemble(tmp_path, "a64", text, assembler),
                        "aarch64-linux-gnu-readelf", A64_REGS)
    rows = compare_timelines(timelines_from_asm(text, "a64.s", "aarch64"), fdes, A64_FUNCS)
    rows += compare_timelines(read_elf_cfi(str(tmp_path / "a64.o")).timelines, fdes,
                              A64_FUNCS)
    pcs = 0
    for version in (2, 3):
        pcs += compare_sframe(convert_asm(text, "a64.s", "aarch64", version=version), fdes,
                              A64_FUNCS, 29, 30, False, version)
        pcs += compare_sframe(convert_elf(str(tmp_path / "a64.o"), version=version), fdes,
                              A64_FUNCS, 29, 30, False, version)
    report(f"DW_CFA opcodes via .cfi_escape (aarch64): {len(_opcodes(A64_FUNCS))} opcodes; "
           f"{rows} rows equal to readelf -wF (.s and object); SFrame V2+V3 equal at "
           f"{pcs} PCs")
