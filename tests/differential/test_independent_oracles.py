"""SFrame of linked files against readelf's reading of their DWARF, not ours (issue 24).

``cfi2sframe verify`` compares our SFrame with our own reading of the DWARF: a
bug in the shared reader or interpreter, or in a step both sides take, passes it.
Here the DWARF side is binutils readelf (``--debug-dump=frames-interp`` rows,
``--debug-dump=frames`` instructions, see ``readelf_frames.py``) and ``nm -S``,
and the SFrame side is the linked file ``python -m cfi2sframe --emit elf`` wrote,
its ``.sframe`` located by ``readelf -S`` and read by our decoder (readelf 2.40
reads SFrame V1 only) whose data words are interpreted here from the specs
(sframe-spec-v2-errata1.texi, sframe-spec-v3.texi), not by ``sframe/rules.py``.

For every FDE of ``.eh_frame``: either our section has FDEs that cover exactly
readelf's PC range, with readelf's CFA (base register and offset), RA and FP
rules at every PC, or the command warned that it left that FDE out, with a
reason, and readelf's rows show something outside SFrame's default rules.  Every
SFrame FDE lies inside some FDE's range, and a function ``nm -S`` sizes like its
FDE has an SFrame FDE with the symbol's start and size.
"""

from __future__ import annotations

import re
import subprocess
import sys
from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cfi2sframe.sframe.decode import decode
from tests.conftest import require, require_path
from tests.corpus import CSMITH_INCLUDE, csmith_source

from .readelf_frames import (
    EITHER,
    UNCHANGED,
    UNDEFINED,
    UNKNOWN,
    Reading,
    nm_functions,
    read_fdes,
)

LIBRARIES = ["/usr/lib/x86_64-linux-gnu/libz.so.1", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"]

# Shapes gcc gives CFI for: leaf, a large frame, varargs, a VLA (CFA on rbp at -O2),
# an over-aligned local (realignment; with alloca, x86-64 gcc's DRAP: CFA in r10,
# then *(rbp - 8), rbp and rbx saved by DW_CFA_expression), a cold partition, many
# saved registers.
SHAPES_C = r"""
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
long leaf(long a, long b) { return a * b + 3; }
int recurse(int n) {
    char buf[600];
    snprintf(buf, sizeof buf, "%d", n);
    return n > 0 ? recurse(n - 1) + buf[0] : buf[1];
}
long sum(int count, ...) {
    va_list ap;
    long total = 0;
    va_start(ap, count);
    for (int i = 0; i < count; i++)
        total += va_arg(ap, long);
    va_end(ap);
    return total;
}
int vla(int n) {
    int data[n];
    for (int i = 0; i < n; i++)
        data[i] = i * leaf(i, n);
    return data[n / 2];
}
int aligned(int n) {
    double block[8] __attribute__((aligned(64)));
    for (int i = 0; i < 8; i++)
        block[i] = n * i;
    return (int)block[n & 7] + recurse(n & 3);
}
__attribute__((noinline, cold)) void complain(const char *what) {
    fprintf(stderr, "bad %s\n", what);
    exit(3);
}
int checked(int n) {
    if (n < 0)
        complain("n");
    char *copy = malloc(n + 1);
    memset(copy, 'x', n);
    copy[n] = 0;
    int len = strlen(copy);
    free(copy);
    return len;
}
__attribute__((noinline)) void use(void *p) { ((volatile char *)p)[0] = 1; }
int realigned(int n) {
    char buf[64] __attribute__((aligned(64)));
    char *v = __builtin_alloca(n);
    use(buf);
    use(v);
    return buf[0] + v[0];
}
int main(int argc, char **argv) {
    (void)argv;
    printf("%ld %d %ld %d %d %d %d\n", leaf(argc, 2), recurse(argc), sum(3, 1L, 2L, 3L),
           vla(argc + 4), aligned(argc), checked(argc), realigned(argc + 8));
    return 0;
}
"""

# SFrame ABI id -> (readelf's register names, SP, FP, RA as DWARF numbers): AMD64
# psABI (rsp 7, rbp 6, RA column 16), s390x ELF ABI (r15, r11, r14), AAPCS64 (sp 31,
# x29, x30); the ids are the spec's SFRAME_ABI_* values.
ABIS = {3: ("x86_64", 7, 6, 16), 4: ("s390x", 15, 11, 14), 2: ("aarch64", 31, 29, 30)}
TOOLS = {"x86_64": ("gcc", "readelf", "nm"),
         "s390x": ("s390x-linux-gnu-gcc", "s390x-linux-gnu-readelf", "s390x-linux-gnu-nm"),
         "aarch64": ("aarch64-linux-gnu-gcc", "aarch64-linux-gnu-readelf",
                     "aarch64-linux-gnu-nm")}
OUTERMOST = ("outermost",)
AMD64_RA = ("at", None, -8)  # AMD64 psABI: the call pushed the RA just below the CFA
# A left-out function: a warning, or a note for an outermost frame (RA undefined from
# the first instruction on, as _start's), which only ra-undefined can be.
WARNING = re.compile(r"^.*:0x([0-9a-f]+): (?:warning: no SFrame FDE for '.*'|note: no SFrame "
                     r"FDE for '.*' \(an outermost frame\)): .+ \[([a-z0-9-]+)\]$")
_SECTION = re.compile(r"\]\s+\.sframe\s+\S+\s+([0-9a-f]+) ([0-9a-f]+) ([0-9a-f]+) ")


def _build(folder: Path, arch: str, name: str, flags: list[str], seeds: list[int]) -> Path:
    """shapes.c and csmith programs (their mains renamed), linked by ``arch``'s gcc."""
    compiler = TOOLS[arch][0]
    require(compiler, "csmith")
    shapes = folder / "shapes.c"
    if not shapes.exists():
        shapes.write_text(SHAPES_C)
    objects = []
    for source, extra in [(shapes, []), *[(folder / f"cs{seed}.c", [f"-Dmain=cs{seed}_main"])
                                           for seed in seeds]]:
        if not source.exists():
            source.write_bytes(csmith_source(source.stem[2:], "--max-funcs", "8"))
        obj = folder / f"{arch}-{name}-{source.stem}.o"
        subprocess.run([compiler, *flags, "-w", f"-I{CSMITH_INCLUDE}", *extra, "-c",
                        str(source), "-o", str(obj)], check=True, capture_output=True)
        objects.append(str(obj))
    program = folder / f"{arch}-{name}"
    subprocess.run([compiler, *objects, "-o", str(program)], check=True, capture_output=True)
    return program


@dataclass
class Counts:
    """What one input and version compared."""

    fdes: int = 0  # readelf FDEs with SFrame FDEs compared at every PC
    rows: int = 0  # readelf rows inside them
    points: int = 0  # PCs compared (every PC where either side's rule may change)
    exact: int = 0  # single SFrame FDEs with readelf's start and size
    split: int = 0  # FDEs our section splits (a PLT: PLT0 and a PC-mask FDE)
    nm: int = 0  # of those, also nm -S's start and size (checked equal)
    flex: int = 0
    registers: int = 0  # PCs where our RA or FP is in a register (s390x)
    either: int = 0  # rows with a "u" readelf cannot tell (unchanged or undefined)
    skipped: Counter = field(default_factory=Counter)

    def line(self, name: str, version: int) -> str:
        return (f"readelf oracle {name} V{version}: {self.fdes} FDEs, {self.rows} rows, "
                f"{self.points} PCs agree; ranges {self.exact} exact (nm -S {self.nm}), "
                f"{self.split} split; FLEX {self.flex}; RA/FP in a register at "
                f"{self.registers} PCs; u unclear in {self.either} rows; left out "
                f"{dict(self.skipped)}")


def _convert(program: Path, version: int, out: Path) -> tuple[dict[int, str], Path]:
    """Our linked output, and the FDEs the command warned it left out (by .eh_frame
    offset, which readelf prints first on an FDE's line) with their reasons."""
    proc = subprocess.run([sys.executable, "-m", "cfi2sframe", "--sframe-version",
                           str(version), str(program), "-o", str(out), "--emit", "elf"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    skips = {}
    for line in proc.stderr.splitlines():
        match = WARNING.match(line)
        assert match, line  # nothing but left-out functions, each with a reason
        assert ": note: " not in line or match.group(2) == "ra-undefined", line
        skips[int(match.group(1), 16)] = match.group(2)
    return skips, out


def _section(path: Path, readelf: str):
    """Our .sframe as readelf -S places it, decoded."""
    headers = subprocess.run([readelf, "-S", "-W", str(path)], capture_output=True, text=True,
                             check=True).stdout
    found = [m for line in headers.splitlines() if (m := _SECTION.search(line))]
    assert len(found) == 1, headers
    address, offset, size = (int(x, 16) for x in found[0].groups())
    return decode(path.read_bytes()[offset:offset + size], section_address=address)


def _word_rules(section, fde, fre, abi: tuple) -> tuple:
    """(CFA, RA, FP) of one FRE, read from its data words as the specs say."""
    arch, sp, fp, _ = abi
    words = fre.offsets
    if not words:  # V2 errata 2 / V3: no data words, the RA is undefined (outermost)
        return OUTERMOST
    s390x = arch == "s390x"

    def cfa_offset(word: int) -> int:
        # s390x: SFRAME_V2_S390X_CFA_OFFSET_DECODE, word * 8 + 160 (the encoder's
        # (offset - 160) / 8 undone; gas-sframe-notes.md: FLEX stores it the same way)
        return word * 8 + 160 if s390x else word

    default_ra = AMD64_RA if arch == "x86_64" else UNCHANGED
    if fde.flex:  # sframe-spec-v3.texi, "Flexible FDE Type Interpretation"
        def control(i: int) -> int:
            return words[i] & ((1 << (8 * _word_size(fre))) - 1)

        def rule(i: int) -> tuple:
            ctrl, offset = control(i), words[i + 1]
            base = ctrl >> 3 if ctrl & 1 else None
            return ("at" if ctrl & 2 else "is", base, offset)

        ctrl = control(0)
        assert ctrl & 1, "a FLEX CFA names its base register"
        cfa = ("reg", ctrl >> 3, cfa_offset(words[1]), bool(ctrl & 2))
        i, ra = 2, default_ra
        if i < len(words):
            if control(i) == 0:  # padding: the RA's default rule
                i += 1
            else:
                ra, i = rule(i), i + 2
        fp_rule = rule(i) if i < len(words) and control(i) != 0 else UNCHANGED
        return (cfa, ra, fp_rule)
    cfa = ("reg", fp if fre.base_fp else sp, cfa_offset(words[0]), False)
    rest = list(words[1:])
    if arch == "x86_64":  # AMD64: RA at the fixed offset; word 2 is the FP's slot
        assert section.fixed_ra_offset == -8
        return (cfa, AMD64_RA, ("at", None, rest[0]) if rest else UNCHANGED)

    def slot(word: int) -> tuple:
        if s390x and section.version == 2 and word & 1:  # V2 errata 1: (regnum << 1) | 1
            return ("is", word >> 1, 0)
        return ("at", None, word)

    ra = UNCHANGED
    if rest and not (s390x and rest[0] == 0):  # s390x: 0 is SFRAME_FRE_RA_OFFSET_INVALID
        ra = slot(rest[0])
    return (cfa, ra, slot(rest[1]) if len(rest) > 1 else UNCHANGED)


def _word_size(fre) -> int:
    """The FRE's data word size in bytes (info bits 5-6: 0, 1, 2 for 1, 2, 4 bytes)."""
    return 1 << ((fre.info >> 5) & 3)


def _fre_at(fde, pc: int):
    """The FRE in force at ``pc``: the last whose start is at or below the PC's offset
    (PC-mask FDEs: the offset modulo the repetition size, as SFRAME_FDE_TYPE_PCMASK)."""
    offset = pc - fde.start_address
    if fde.pc_mask:
        offset %= fde.rep_size
    found = None
    for fre in fde.fres:
        if fre.start <= offset:
            found = fre
    return found


def _sframe_at(section, fdes, pc: int, abi: tuple):
    fde = next(f for f in fdes if f.start_address <= pc < f.start_address + f.size)
    if not fde.fres and section.version >= 3 and not fde.flex:
        return OUTERMOST  # V3: a default FDE without FREs is an outermost frame
    fre = _fre_at(fde, pc)
    assert fre is not None, f"no FRE at {pc:#x}"
    return _word_rules(section, fde, fre, abi)


def _expected(reading: Reading, row, pc: int) -> tuple:
    cfa, ra, fp = reading.rules(row)
    if ra == UNDEFINED:
        return OUTERMOST
    if cfa != UNKNOWN and cfa[0] == "plt":  # evaluated at this PC (see readelf_frames)
        _, reg, offset, threshold = cfa
        cfa = ("reg", reg, offset + (8 if pc & 15 >= threshold else 0), False)
    return (cfa, ra, fp)


def _agrees(want: tuple, got: tuple) -> bool:
    if got == OUTERMOST and want != OUTERMOST:
        return want[1] == EITHER  # readelf cannot tell whether the RA is undefined
    if want == OUTERMOST:
        return want == got
    return want[0] == got[0] and all(w == g or (w == EITHER and g in (UNCHANGED, UNDEFINED))
                                     for w, g in zip(want[1:], got[1:], strict=True))


def _plain(reading: Reading, row, abi: tuple, version: int) -> bool:
    """A row SFrame's default rules hold: CFA on SP or FP plus an offset, RA and FP
    unchanged or saved at CFA + k (AMD64: RA at CFA - 8), or (V3 only: V2 errata 1
    has no way to say it) RA undefined."""
    arch, sp, fp, _ = abi
    cfa, ra, fp_rule = reading.rules(row)
    if ra == UNDEFINED:
        return version >= 3
    saved = (UNCHANGED,) if arch == "x86_64" else (UNCHANGED, EITHER)
    return (cfa != UNKNOWN and cfa[0] == "reg" and cfa[1] in (sp, fp) and not cfa[3]
            and (ra == AMD64_RA if arch == "x86_64"
                 else ra in saved or (ra[0] == "at" and ra[1] is None))
            and (fp_rule in (UNCHANGED, EITHER) or (fp_rule[0] == "at" and fp_rule[1] is None)))


def _left_out(fde, reading: Reading, skips: dict[int, str], abi: tuple, version: int,
              counts: Counts) -> None:
    """An FDE without SFrame FDEs: warned about, with a reason, and not plain."""
    assert fde.offset in skips, f"FDE at {fde.offset:#x} ({fde.lo:#x}) left out without a " \
        "warning"
    plain = all(_plain(reading, row, abi, version) for row in fde.rows if row.pc < fde.hi)
    assert fde.lo == fde.hi or not plain, \
        f"{skips[fde.offset]}: FDE at {fde.offset:#x} has only default rules"
    counts.skipped[skips[fde.offset]] += 1


def _same_range(fde, mine: list) -> None:
    """Our FDEs tile readelf's PC range exactly: what shifted starts break."""
    edges = [(f.start_address, f.start_address + f.size) for f in mine]
    assert edges[0][0] == fde.lo and edges[-1][1] == fde.hi and all(
        a[1] == b[0] for a, b in zip(edges, edges[1:], strict=False)), \
        (f"FDE at {fde.offset:#x}: readelf pc={fde.lo:#x}..{fde.hi:#x}, ours "
         f"{[(hex(a), hex(b)) for a, b in edges]}")


def _same_rules(fde, reading: Reading, section, mine: list, abi: tuple,
                counts: Counts) -> None:
    """readelf's CFA, RA and FP rules at every PC of the FDE are ours.

    Both sides are constant between the PCs where a row or an FRE starts (a PC-mask
    FDE's FREs repeat every rep_size bytes), so those PCs stand for all; a PLT CFA
    (which depends on the PC) is checked at every byte.
    """
    rows = [row for row in fde.rows if row.pc < fde.hi]
    points = {fde.lo, *(row.pc for row in rows)}
    for f in mine:
        step = f.rep_size if f.pc_mask else f.size
        for base in range(f.start_address, f.start_address + f.size, step):
            points.update(base + fre.start for fre in f.fres)
    for row, end in zip(rows, [r.pc for r in rows[1:]] + [fde.hi], strict=True):
        cfa = reading.cfa(row.cfa)
        if cfa != UNKNOWN and cfa[0] == "plt":
            points.update(range(row.pc, end))
        counts.either += EITHER in reading.rules(row)
    index = 0
    for pc in sorted(p for p in points if fde.lo <= p < fde.hi):
        while index + 1 < len(rows) and rows[index + 1].pc <= pc:
            index += 1
        want = _expected(reading, rows[index], pc)
        got = _sframe_at(section, mine, pc, abi)
        assert _agrees(want, got), \
            f"FDE at {fde.offset:#x}, pc {pc:#x}: readelf {want}, our SFrame {got}"
        counts.points += 1
        counts.registers += any(isinstance(rule, tuple) and rule[0] == "is"
                                and rule[1] is not None for rule in got[1:])
    counts.fdes += 1
    counts.rows += len(rows)


def check(program: Path, version: int, workdir: Path, arch: str = "x86_64") -> Counts:
    """Convert ``program`` to SFrame ``version`` and hold it to readelf's reading."""
    _, readelf, nm = TOOLS[arch]
    require(readelf, nm)
    skips, out = _convert(program, version, workdir / f"{program.name}.v{version}")
    section = _section(out, readelf)
    assert section.version == version
    abi = ABIS[section.abi]
    assert abi[0] == arch
    fdes = read_fdes(program, readelf)
    symbols = nm_functions(program, nm)
    counts = Counts()
    ours = sorted(section.fdes, key=lambda f: f.start_address)
    starts = [f.start_address for f in ours]
    claimed = 0
    for fde in fdes:
        reading = Reading(fde, arch, abi[2])
        mine = ours[bisect_left(starts, fde.lo):bisect_left(starts, fde.hi)]
        if not mine:
            _left_out(fde, reading, skips, abi, version, counts)
            continue
        assert fde.offset not in skips, f"FDE at {fde.offset:#x} both warned and emitted"
        _same_range(fde, mine)
        claimed += len(mine)
        if len(mine) > 1:
            counts.split += 1
        else:
            counts.exact += 1
            # nm -S, a second oracle for ranges: a function sized like its FDE
            if fde.hi - fde.lo in symbols.get(fde.lo, ()):
                assert (mine[0].start_address, mine[0].size) == (fde.lo, fde.hi - fde.lo)
                counts.nm += 1
        counts.flex += sum(f.flex for f in mine)
        _same_rules(fde, reading, section, mine, abi, counts)
    assert claimed == len(ours), "SFrame FDEs outside every FDE's range"
    return counts


# (arch, shape) -> gcc flags and csmith seeds of the programs built here.
BUILDS = {("x86_64", "O2"): (["-O2"], [7, 11]),
          ("x86_64", "O0fp"): (["-O0", "-fno-omit-frame-pointer"], [7]),
          ("s390x", "O2"): (["-O2"], [7]),
          ("s390x", "O0fp"): (["-O0", "-fno-omit-frame-pointer"], [7]),
          ("aarch64", "O2"): (["-O2"], [7])}


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory):
    """Builds a program of BUILDS once for the module (V2 and V3 share it)."""
    folder = tmp_path_factory.mktemp("oracles")
    built: dict[tuple[str, str], Path] = {}

    def get(arch: str, shape: str) -> Path:
        if (arch, shape) not in built:
            built[arch, shape] = _build(folder, arch, shape, *BUILDS[arch, shape])
        return built[arch, shape]

    return get


# input -> floors (FDEs compared, rows compared, FDEs whose nm -S symbol has the FDE's
# start and size); V3 compares at least as many.
FLOORS = {"gcc-O2": (15, 75, 14), "gcc-O0fp": (110, 450, 110), "libz.so.1": (120, 1000, 85),
          "libstdc++.so.6": (4800, 30000, 3800)}


@pytest.mark.parametrize("version", [2, 3])
@pytest.mark.parametrize("name", list(FLOORS))
def test_sframe_rules_and_ranges_match_readelf(name: str, version: int, program,
                                               tmp_path: Path, report) -> None:
    """Every emitted FDE has readelf's PC range (and nm -S's start and size) and its
    CFA, RA and FP rules at every PC; every FDE left out was warned about with a
    reason, and needed one."""
    require("readelf", "nm")
    if name.startswith("gcc-"):
        path = program("x86_64", name[4:])
    else:
        path = Path(next(lib for lib in LIBRARIES if lib.endswith(name)))
        require_path(path)
    counts = check(path, version, tmp_path)
    report(counts.line(name, version))
    fdes, rows, nm = FLOORS[name]
    assert counts.fdes >= fdes and counts.rows >= rows and counts.nm >= nm, counts
    assert counts.split <= 1 and counts.exact == counts.fdes - counts.split  # only the PLT
    if name.startswith("gcc-"):  # shapes.c's DRAP function: CFA in r10, then *(rbp - 8)
        assert counts.flex >= 1 if version == 3 else counts.skipped["cfa-not-sp-fp"] == 1


# shape -> floors (FDEs, rows); V2 leaves out _start (RA undefined).
CROSS_FLOORS = {("s390x", "O2"): (11, 80), ("s390x", "O0fp"): (110, 700),
                ("aarch64", "O2"): (10, 40)}


@pytest.mark.parametrize("version", [2, 3])
@pytest.mark.parametrize("arch,shape", list(CROSS_FLOORS))
def test_cross_rules_match_readelf(arch: str, shape: str, version: int, program,
                                   tmp_path: Path, report) -> None:
    """s390x (CFA = r15 + 160 at entry, the CFA word (offset - 160) / 8, RA and FP
    tracked, FP/RA in registers as V2 odd words or V3 FLEX) and AArch64 (RA and FP as
    CFA offsets): the target's readelf's rules at every PC, its FDE ranges exactly."""
    counts = check(program(arch, shape), version, tmp_path, arch)
    report(counts.line(f"{arch} gcc-{shape}", version))
    fdes, rows = CROSS_FLOORS[arch, shape]
    assert counts.fdes >= fdes and counts.rows >= rows and counts.nm >= fdes - 1, counts
    assert counts.exact == counts.fdes
    if arch == "s390x":  # gcc keeps the RA or FP in a floating-point register in leaves
        assert counts.registers > 0 and (version == 2 or counts.flex > 0), counts
