"""Spec cases that need the real tools (issue 24, item 4): GNU as, ld, nm and readelf
give the expected values; our output is read back by hand where the layout is the point.
"""

from __future__ import annotations

import re
import struct
import subprocess
import sys
from pathlib import Path

from cfi2sframe import timelines_from_asm
from cfi2sframe.compact.inputs import compact_asm
from cfi2sframe.convert import convert_asm
from cfi2sframe.sframe.decode import decode
from cfi2sframe.sframe.rules import Loc, fre_rules
from tests.conftest import require

REGS = {"rbx": 3, "rbp": 6, "rsp": 7}
ROW = re.compile(r"^([0-9a-f]{16}) (\S+)\s*(.*)$")


def _tool(*args: str) -> str:
    return subprocess.run(list(args), capture_output=True, text=True, check=True).stdout


def _readelf_rows(obj: Path) -> list[tuple[int, list[tuple[int, str, dict[str, str]]]]]:
    """Per FDE of readelf --debug-dump=frames-interp: (pc begin, rows); a row is
    (offset in the function, CFA text, column -> rule text)."""
    out: list[tuple[int, list[tuple[int, str, dict[str, str]]]]] = []
    columns: list[str] = []
    rows: list[tuple[int, str, dict[str, str]]] | None = None
    for line in _tool("readelf", "--debug-dump=frames-interp", str(obj)).splitlines():
        if " FDE " in line:
            begin = int(re.search(r"pc=([0-9a-f]+)\.\.", line).group(1), 16)
            rows = []
            out.append((begin, rows))
        elif " CIE " in line:
            rows = None
        elif line.strip().startswith("LOC"):
            columns = line.split()[2:]
        elif rows is not None and (match := ROW.match(line.strip())):
            rules = dict(zip(columns, match.group(3).split(), strict=False))
            rows.append((int(match.group(1), 16) - out[-1][0], match.group(2), rules))
    return out


def _cfa_text(cfa) -> str:
    name = {v: k for k, v in REGS.items()}[cfa.reg]
    return f"{name}{cfa.offset:+d}"


def _rule_text(rule) -> str:
    """A register rule as readelf -wF writes it: c-16 (saved at CFA-16), u (none)."""
    if rule is None:
        return "u"
    assert rule.kind == "offset", rule
    return f"c{rule.value:+d}"


def _assemble(tmp_path: Path, text: str) -> Path:
    src = tmp_path / "t.s"
    src.write_text(text)
    obj = tmp_path / "t.o"
    subprocess.run(["as", str(src), "-o", str(obj)], check=True)
    return obj


SF_SOURCE = """\
\t.text
\t.globl f
\t.type f, @function
f:
\t.cfi_startproc
\tpush %rbp
\t.cfi_escape 0x13,0x7e
\t.cfi_offset rbp, -16
\tmov %rsp, %rbp
\t.cfi_escape 0x12,0x06,0x7e
\tpop %rbp
\t.cfi_escape 0x13,0x02
\tnop
\t.cfi_escape 0x12,0x07,0x7f
\tret
\t.cfi_endproc
"""


def test_sf_escapes_mean_what_readelf_says(tmp_path: Path) -> None:
    """.cfi_escape with DW_CFA_def_cfa_offset_sf / def_cfa_sf: readelf -wF gives rsp+16,
    rbp+16, rbp-16, rsp+8 (operands -2, -2, +2, -1 times -8); our rows and the SFrame FREs
    say the same."""
    require("as", "readelf")
    ((begin, expected),) = _readelf_rows(_assemble(tmp_path, SF_SOURCE))
    assert [cfa for _, cfa, _ in expected] == ["rsp+8", "rsp+16", "rbp+16", "rbp-16", "rsp+8"]
    (tl,) = timelines_from_asm(SF_SOURCE, "t.s")
    assert [(r.start, _cfa_text(r.cfa)) for r in tl.rows] == \
        [(at, cfa) for at, cfa, _ in expected]
    conversion = convert_asm(SF_SOURCE, "t.s")
    assert not conversion.skips
    section = decode(conversion.raw())
    (fde,) = section.fdes
    got = []
    for fre in fde.fres:
        rules = fre_rules(section, fde, fre)
        assert isinstance(rules.cfa, Loc)
        got.append((fre.start, _cfa_text(rules.cfa)))
    assert got == [(at, cfa) for at, cfa, _ in expected]


RESTORE_SOURCE = """\
\t.text
\t.globl g
\t.type g, @function
g:
\t.cfi_startproc
\tpush %rbp
\t.cfi_def_cfa_offset 16
\t.cfi_offset rbp, -16
\ttest %edi, %edi
\tje 1f
\t.cfi_remember_state
\tpush %rbx
\t.cfi_def_cfa_offset 24
\t.cfi_offset rbx, -24
\tpop %rbx
\t.cfi_restore rbx
\t.cfi_def_cfa_offset 16
\tpop %rbp
\t.cfi_restore rbp
\t.cfi_def_cfa_offset 8
\tret
1:
\t.cfi_restore_state
\tmov %edi, %eax
\tpop %rbp
\t.cfi_def_cfa_offset 8
\tret
\t.cfi_endproc
"""


def test_rows_after_restore_state_match_readelf(tmp_path: Path) -> None:
    """After .cfi_restore_state the CFA and every register rule are those of
    .cfi_remember_state (rsp+16, rbp at c-16, rbx unsaved): readelf -wF's table, row by
    row and column by column, is our timeline's."""
    require("as", "readelf")
    ((_, expected),) = _readelf_rows(_assemble(tmp_path, RESTORE_SOURCE))
    (tl,) = timelines_from_asm(RESTORE_SOURCE, "t.s")
    got = []
    for row in tl.rows:
        rules = {"rbx": _rule_text(row.rule(3)), "rbp": _rule_text(row.rule(6)),
                 "ra": _rule_text(row.rule(16))}
        got.append((row.start, _cfa_text(row.cfa), rules))
    want: list[tuple[int, str, dict[str, str]]] = []
    for at, cfa, cols in expected:  # readelf repeats a row where gas advanced for nothing
        rules = {col: cols.get(col, "u") for col in ("rbx", "rbp", "ra")}
        if not want or want[-1][1:] != (cfa, rules):
            want.append((at, cfa, rules))
    assert got == want
    # The row at the restore_state label: the remembered one, not the epilogue's.
    restored = [r for r in want if r[1] == "rsp+16" and r[0] > 4]
    assert restored and restored[-1][2] == {"rbx": "u", "rbp": "c-16", "ra": "c-8"}


LSDA_SOURCE = """\
\t.text
\t.globl h
\t.type h, @function
h:
\t.cfi_startproc
\t.cfi_personality 0x3, __gxx_personality_v0
\t.cfi_lsda 0x3, .LLSDA0
\tret
\t.cfi_endproc
\t.section .gcc_except_table,"a",@progbits
.LLSDA0:
\t.byte 0xff, 0xff, 0x1, 0x0
"""


def test_cfi_lsda_sets_has_lsda_in_the_compact_encoding() -> None:
    """A leaf with .cfi_lsda: UNWIND_X86_64_MODE_STACK_IMMD (0x02000000), stack size
    8 / 8 = 1 (0x00010000), UNWIND_HAS_LSDA (0x40000000); the personality bits
    (0x30000000) are the linker's index, 0 here."""
    require("as")
    (func,) = compact_asm(LSDA_SOURCE, "t.s")
    assert func.lsda == ".LLSDA0"
    (row,) = func.rows
    assert row.encoding == 0x42010000


ANCHOR_SOURCE = """\
\t.text
\t.globl entry
\t.type entry, @function
entry:
\tnop
\tnop
\tnop
\tnop
\t.cfi_startproc
\tpush %rbp
\t.cfi_def_cfa_offset 16
\t.cfi_offset rbp, -16
\tpop %rbp
\t.cfi_def_cfa_offset 8
\tret
\t.cfi_endproc
\tnop
\t.cfi_startproc
\tsub $24, %rsp
\t.cfi_def_cfa_offset 32
\tadd $24, %rsp
\t.cfi_def_cfa_offset 8
\tret
\t.cfi_endproc
"""


def test_emit_asm_anchors_starts_past_their_symbol(tmp_path: Path) -> None:
    """Both functions start after the one symbol 'entry' (4 and 8 bytes in): the --emit
    asm fragment names them from it.  Assembled with the input and linked, each FDE start
    (the 32-bit field at 28 + 20 * i, relative to itself: V2 errata 1's
    SFRAME_F_FDE_FUNC_START_PCREL) is nm's entry + 4 and the second .eh_frame FDE's pc
    (readelf), and each size is readelf's pc range."""
    require("as", "ld", "nm", "readelf")
    src = tmp_path / "a.s"
    src.write_text(ANCHOR_SOURCE)
    frag = tmp_path / "a.sframe.s"
    # --linker-reads any: the V2 fragment (the default would be V1, what ld 2.40 merges)
    proc = subprocess.run([sys.executable, "-m", "cfi2sframe", str(src), "--emit", "asm",
                           "--linker-reads", "any", "-o", str(frag)], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    obj, exe = tmp_path / "a.o", tmp_path / "a"
    subprocess.run(["as", str(src), str(frag), "-o", str(obj)], check=True)
    # ld 2.40 reads only SFrame V1: it says so and copies our V2 section as it is.
    subprocess.run(["ld", "-e", "entry", str(obj), "-o", str(exe)], check=True,
                   capture_output=True)
    (entry,) = [int(line.split()[0], 16) for line in _tool("nm", str(exe)).splitlines()
                if line.endswith(" entry")]
    ranges = re.findall(r"pc=([0-9a-f]+)\.\.([0-9a-f]+)",
                        _tool("readelf", "--debug-dump=frames", str(exe)))
    fdes = sorted((int(lo, 16), int(hi, 16) - int(lo, 16)) for lo, hi in ranges)
    assert len(fdes) == 2 and fdes[0][0] == entry + 4  # the source's own layout
    match = re.search(r"\.sframe\s+\S+\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)",
                      _tool("readelf", "-SW", str(exe)))
    address, offset, size = (int(g, 16) for g in match.groups())
    data = exe.read_bytes()[offset:offset + size]
    got = []
    for index in range(2):
        field = 28 + 20 * index
        start, length = struct.unpack_from("<iI", data, field)
        got.append((address + field + start, length))
    assert got == fdes
