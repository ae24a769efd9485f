"""binutils readelf's own reading of a file's ``.eh_frame``, as rules in plain terms.

``readelf --debug-dump=frames-interp`` gives the rows (PC, CFA, one rule per
register column); ``--debug-dump=frames`` gives the instructions, which settle
what the rows leave open: which CFA or register expression an ``exp`` stands for,
and whether a ``u`` is a real ``DW_CFA_undefined`` or only "no rule yet" (readelf
prints both as ``u``: binutils dwarf.c marks every column an FDE mentions as
undefined until it is set, and ``DW_CFA_restore`` of a column the CIE never set
does the same).  Nothing here uses cfi2sframe: this is the oracle.

(``test_compact_body._fdes`` reads the same text for x86-64 only; it splits a row
on spaces, which breaks on register rules, printed ``r17 (f2)``, and runs only
the host's ``readelf``.)

Rules are tuples, shared with the SFrame side of the tests:

- CFA: ``("reg", regno, offset, deref)`` (value ``regno + offset``, loaded from
  memory if ``deref``), ``("plt", regno, offset, threshold)`` (the linkers' PLT
  expression, see ``_expression``), or ``UNKNOWN``;
- a register: ``UNCHANGED``, ``UNDEFINED``, ``EITHER`` (a ``u`` readelf cannot
  tell), ``("at", base, offset)`` (saved in memory at ``base + offset``) or
  ``("is", base, offset)`` (its value is ``base + offset``), ``base`` None for the
  CFA; or ``UNKNOWN``.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

UNCHANGED, UNDEFINED, EITHER, UNKNOWN = "unchanged", "undefined", "either", "unknown"

# DWARF register names as readelf prints them (binutils dwarf.c, dwarf_regnames_*).
# x86-64: the psABI's DWARF numbering (rax 0, rdx 1, rcx 2, rbx 3, rsi 4, rdi 5,
# rbp 6, rsp 7, r8-r15 8-15, rip 16).  s390x ELF ABI: r0-r15 are 0-15.  AArch64
# DWARF for the Arm architecture: x0-x30 are 0-30, sp 31.  s390x's FPRs 16-31 are
# f0 f2 f4 f6 f1 f3 f5 f7 f8 f10 f12 f14 f9 f11 f13 f15 (the ABI's order; readelf
# prints a register rule as "r17 (f2)", "r20 (f1)").
REGISTERS = {
    "x86_64": ["rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp",
               *[f"r{n}" for n in range(8, 16)], "rip"],
    "s390x": [*[f"r{n}" for n in range(16)],
              *[f"f{n}" for n in (0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15)]],
    "aarch64": [*[f"x{n}" for n in range(31)], "sp"],
}

_ENTRY = re.compile(r"^([0-9a-f]+) [0-9a-f]+ ([0-9a-f]+) (CIE|FDE)\b(.*)$")
_FDE_PC = re.compile(r"cie=([0-9a-f]+) pc=([0-9a-f]+)\.\.([0-9a-f]+)")
_ROW = re.compile(r"^([0-9a-f]+) (\S+)(.*)$")
_RULE_TOKEN = re.compile(r"r\d+ \([^)]*\)|\S+")
_CFA = re.compile(r"^([a-z0-9]+)([+-]\d+)$")
_REG_RULE = re.compile(r"^r(\d+)(?: \(.*\))?$")
_BREG = re.compile(r"^DW_OP_breg(\d+)(?: \([^)]*\))?: (-?\d+)$")
_UNDEFINED_OP = re.compile(r"DW_CFA_undefined: r(\d+)\b")
_NEW_PC = re.compile(r"^DW_CFA_(?:advance_loc\d?: \d+ to|set_loc:) ([0-9a-f]+)$")
_REG_OP = re.compile(r"^DW_CFA_(\w+): r(\d+)\b")
_CFA_EXPR_OP = re.compile(r"DW_CFA_def_cfa_expression \((.*)\)$")
_REG_EXPR_OP = re.compile(r"DW_CFA_(val_)?expression: r(\d+)(?: \([^)]*\))? \((.*)\)$")
# The PLT expression of GNU ld and lld for x86-64 lazy PLT entries (16 bytes each):
#   DW_OP_breg7 (rsp): A; DW_OP_breg16 (rip): 0; DW_OP_lit15; DW_OP_and;
#   DW_OP_litK; DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus
# evaluates, by the DWARF stack machine, to rsp + A + (((pc & 15) >= K) << 3):
# the CFA grows by 8 once the entry's push has run (at byte K of the entry).
_PLT = re.compile(r"^DW_OP_breg(\d+) \([^)]*\): (-?\d+); DW_OP_breg16 \(rip\): 0; "
                  r"DW_OP_lit15; DW_OP_and; DW_OP_lit(\d+); DW_OP_ge; DW_OP_lit3; "
                  r"DW_OP_shl; DW_OP_plus$")


@dataclass
class Row:
    """One row of readelf's table: from ``pc`` on, the CFA text and each column's rule."""

    pc: int
    cfa: str
    columns: dict[str, str]


@dataclass
class Fde:
    """An FDE: its offset in the section, PC range, rows, instructions (with its CIE's)."""

    offset: int
    cie: int
    lo: int
    hi: int
    rows: list[Row] = field(default_factory=list)
    ops: list[str] = field(default_factory=list)
    cie_ops: list[str] = field(default_factory=list)
    ra_column: int = -1


def _run(tool: str, option: str, path: Path) -> str:
    return subprocess.run([tool, f"--debug-dump={option}", str(path)], capture_output=True,
                          text=True, check=True).stdout


def _eh_frame_lines(text: str):
    """The lines of the ``.eh_frame`` part of readelf's output (not ``.debug_frame``)."""
    inside = False
    for line in text.splitlines():
        if line.startswith("Contents of the "):
            inside = line.startswith("Contents of the .eh_frame section")
            continue
        if inside:
            yield line


def read_fdes(path: Path, tool: str = "readelf") -> list[Fde]:
    """Every FDE of ``path``'s ``.eh_frame`` as readelf interprets it."""
    fdes: dict[int, Fde] = {}
    cie_rows: dict[int, list[Row]] = {}
    cie_ops: dict[int, list[str]] = {}
    cie_ra: dict[int, int] = {}
    rows: list[Row] | None = None
    columns: list[str] = []
    for line in _eh_frame_lines(_run(tool, "frames-interp", path)):
        if line.endswith("ZERO terminator"):
            rows = None
            continue
        entry = _ENTRY.match(line)
        if entry:
            offset = int(entry.group(1), 16)
            if entry.group(3) == "CIE":
                rows = cie_rows.setdefault(offset, [])
                cie_ra[offset] = int(re.search(r"ra=(\d+)", line).group(1))
            else:
                cie, lo, hi = (int(x, 16) for x in _FDE_PC.search(line).groups())
                fdes[offset] = Fde(offset, cie, lo, hi, ra_column=cie_ra[cie])
                rows = fdes[offset].rows
            columns = []
            continue
        if line.strip().startswith("LOC"):
            columns = line.split()[2:]
            continue
        row = _ROW.match(line)
        if rows is not None and row:
            tokens = _RULE_TOKEN.findall(row.group(3))
            assert len(tokens) == len(columns), (path, line, columns)
            rows.append(Row(int(row.group(1), 16), row.group(2), dict(zip(columns, tokens,
                                                                        strict=True))))
    ops: list[str] | None = None
    for line in _eh_frame_lines(_run(tool, "frames", path)):
        entry = _ENTRY.match(line)
        if entry:
            offset = int(entry.group(1), 16)
            ops = fdes[offset].ops if entry.group(3) == "FDE" else cie_ops.setdefault(offset, [])
        elif ops is not None and line.startswith("  DW_CFA_"):
            ops.append(line.strip())
    for fde in fdes.values():
        fde.cie_ops = cie_ops.get(fde.cie, [])
        if not fde.rows:  # no row of its own: the CIE's initial row, from the start
            base = cie_rows.get(fde.cie) or [Row(0, "", {})]
            fde.rows = [Row(fde.lo, base[0].cfa, dict(base[0].columns))]
    return sorted(fdes.values(), key=lambda fde: (fde.lo, fde.offset))


def _expression(text: str, deref_address: bool) -> tuple:
    """A DWARF expression in readelf's words: a register plus offset, maybe loaded."""
    if (plt := _PLT.match(text)) and not deref_address:
        return ("plt", int(plt.group(1)), int(plt.group(2)), int(plt.group(3)))
    parts = [part.strip() for part in text.split(";")]
    breg = _BREG.match(parts[0])
    if breg is None or parts[1:] not in ([], ["DW_OP_deref"]):
        return UNKNOWN
    return (int(breg.group(1)), int(breg.group(2)), bool(parts[1:]))


@dataclass
class Reading:
    """What an FDE's rows mean, per arch: ``rules(row)`` gives (CFA, RA, FP)."""

    fde: Fde
    arch: str
    fp: int

    def __post_init__(self) -> None:
        ops = self.fde.cie_ops + self.fde.ops
        self.cfa_exprs = {m.group(1) for op in ops if (m := _CFA_EXPR_OP.search(op))}
        self.reg_exprs: dict[int, set[tuple[bool, str]]] = {}
        for op in ops:
            if m := _REG_EXPR_OP.search(op):
                self.reg_exprs.setdefault(int(m.group(2)), set()).add((bool(m.group(1)),
                                                                       m.group(3)))
        self.undefined_in_cie = {int(m.group(1)) for op in self.fde.cie_ops
                                 if (m := _UNDEFINED_OP.search(op))}
        # Which of the FDE's own ops last set each register, from what PC on: settles a
        # "u" where the FDE itself says DW_CFA_undefined (a "u" before it, or after a
        # DW_CFA_restore, is "no rule").  A saved state can bring either back: EITHER.
        self.events: dict[int, list[tuple[int, bool]]] = {}
        self.states = any("_state" in op for op in self.fde.ops)
        pc = self.fde.lo
        for op in self.fde.ops:
            if m := _NEW_PC.search(op):
                pc = int(m.group(1), 16)
            elif (m := _REG_OP.match(op)) and not m.group(1).startswith("def_cfa"):
                self.events.setdefault(int(m.group(2)), []).append((pc, m.group(1) ==
                                                                    "undefined"))
        names = {name for row in self.fde.rows for name in row.columns}
        self.column = {self.number(name): name for name in names}
        self.cache: dict[int, tuple] = {}

    def number(self, name: str) -> int:
        """A column or CFA register name as a DWARF register number."""
        if name == "ra":
            return self.fde.ra_column
        names = REGISTERS[self.arch]
        if name in names:
            return names.index(name)
        match = re.fullmatch(r"r(\d+)", name)
        assert match, (self.arch, name)
        return int(match.group(1))

    def cfa(self, text: str) -> tuple:
        if text == "exp":
            if len(self.cfa_exprs) != 1:
                return UNKNOWN
            value = _expression(next(iter(self.cfa_exprs)), False)
            if value == UNKNOWN or value[0] == "plt":
                return value
            return ("reg", *value)
        match = _CFA.match(text)
        return ("reg", self.number(match.group(1)), int(match.group(2)), False) if match \
            else UNKNOWN

    def _u(self, row: Row, regno: int) -> str:
        if regno in self.undefined_in_cie:
            return UNDEFINED
        events = [undefined for pc, undefined in self.events.get(regno, []) if pc <= row.pc]
        if not any(undefined for _, undefined in self.events.get(regno, [])):
            return UNCHANGED
        if self.states:
            return EITHER
        return UNDEFINED if events and events[-1] else UNCHANGED

    def register(self, row: Row, regno: int) -> tuple | str:
        name = self.column.get(regno)
        text = row.columns.get(name) if name is not None else None
        if text is None or text == "s":
            return UNCHANGED
        if text == "u":
            return self._u(row, regno)
        if match := re.fullmatch(r"([cv])(-?\d+)", text):
            return ("at" if match.group(1) == "c" else "is", None, int(match.group(2)))
        if match := _REG_RULE.match(text):
            return ("is", int(match.group(1)), 0)
        if text in ("exp", "vexp"):
            exprs = self.reg_exprs.get(regno, set())
            if len(exprs) != 1:
                return UNKNOWN
            val, expr = next(iter(exprs))
            value = _expression(expr, True)
            if value == UNKNOWN or value[0] == "plt" or val != (text == "vexp"):
                return UNKNOWN
            reg, offset, deref = value
            if val:  # the value is the expression's
                return ("at", reg, offset) if deref else ("is", reg, offset)
            return UNKNOWN if deref else ("at", reg, offset)  # saved at that address
        return UNKNOWN

    def rules(self, row: Row) -> tuple:
        """(CFA, RA, FP) of one row."""
        key = id(row)
        if key not in self.cache:
            self.cache[key] = (self.cfa(row.cfa), self.register(row, self.fde.ra_column),
                               self.register(row, self.fp))
        return self.cache[key]


def nm_functions(path: Path, tool: str = "nm") -> dict[int, set[int]]:
    """Start -> sizes of the sized function symbols ``nm -S`` lists (the dynamic table
    for a stripped file)."""
    out: dict[int, set[int]] = {}
    for option in ([], ["-D"]):
        text = subprocess.run([tool, "-S", "--defined-only", *option, str(path)],
                              capture_output=True, text=True, check=False).stdout
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 4 and parts[2] in "TtWwi":
                out.setdefault(int(parts[0], 16), set()).add(int(parts[1], 16))
        if out:
            break
    return out
