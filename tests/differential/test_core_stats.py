"""stats' count in the compiled core (``csrc/analysis_stats.c``: ``stats_scan``, used by
``analysis.stats.scan_coverage``) against what it stands for: the conversion to each
version (``convert.convert_elf``: its FDE count, SFrame FDEs, the functions left out
with their reasons in order, and the section's length), which stays the reference and
what the pure-Python core runs.  Inputs: the installed libraries of two targets (all
of gconv, libc, libstdc++, programs of /usr/bin, AArch64's libc and libstdc++), the
command's records with each core, and a file whose sizes are derived by hand from the
SFrame spec, its rows checked with ``readelf -wF``.
"""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest

import cfi2sframe
from cfi2sframe.analysis.stats import scan_coverage
from cfi2sframe.convert import convert_elf, default_sframe_address
from cfi2sframe.elf.compressed import DEFAULT_LIMITS
from cfi2sframe.elf.read import open_elf
from tests.conftest import at_least, compiled_core, require, require_path

GCONV = "/usr/lib/x86_64-linux-gnu/gconv"
FILES = ["/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
         "/usr/bin/as", "/usr/bin/gdb", "/usr/bin/python3.11", "/bin/ls",
         "/usr/aarch64-linux-gnu/lib/libc.so.6", "/usr/aarch64-linux-gnu/lib/libstdc++.so.6",
         "/usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1"]


def _command(*args: str, cwd: Path, core: str | None = None) -> dict[str, Any]:
    """``cfi2sframe ARGS`` of this package (``core``: CFI2SFRAME_CORE); its --json output."""
    env = {**os.environ, "PYTHONPATH": str(Path(cfi2sframe.__file__).parents[1])}
    if core:
        env["CFI2SFRAME_CORE"] = core
    done = subprocess.run([sys.executable, "-m", "cfi2sframe", *args], cwd=cwd, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    out: dict[str, Any] = json.loads(done.stdout) if "--json" in args else {}
    return out


def _reference(path: str, data: bytes, version: int) -> tuple[object, ...]:
    """What stats records of a conversion to ``version`` (``batch.record._coverage``)."""
    made = convert_elf(path, data, version)
    return (made.arch.name, made.fde_count, len(made.functions),
            [(str(skip.reason), skip.name, skip.start) for skip in made.skips],
            len(made.raw()))


def _scanned(path: str, data: bytes) -> dict[int, tuple[object, ...]] | None:
    coverage = scan_coverage(path, data, open_elf(data, path), DEFAULT_LIMITS,
                             lambda: default_sframe_address(data, path),
                             compiled=compiled_core())
    if coverage is None:
        return None
    return {version: (made.arch.name, made.fdes, made.emitted,
                      [(str(skip.reason), skip.name, skip.start) for skip in made.skips],
                      made.size) for version, made in coverage.items()}


def test_the_scan_counts_what_the_conversion_makes(report) -> None:
    """Every file's FDEs, SFrame FDEs, reasons (in order, by function) and V2 and V3
    section sizes equal the conversion's.  Floors: 256 gconv modules and the other
    files here scanned (less a margin), and the functions left to the general path
    (PLTs, outermost frames, CFA expressions) at least a few hundred."""
    require_path(GCONV, *FILES)
    paths = sorted(glob.glob(f"{GCONV}/*.so")) + FILES
    scanned = functions = skipped = 0
    for path in paths:
        data = Path(path).read_bytes()
        got = _scanned(path, data)
        if got is None:
            continue
        scanned += 1
        for version in (2, 3):
            assert got[version] == _reference(path, data, version), (path, version)
        functions += got[2][2]
        skipped += len(got[2][3])
    at_least("files scanned", scanned, 250)
    at_least("functions counted", functions, 20000)
    at_least("functions left out", skipped, 20)
    report(f"stats scan: {scanned} files, {functions} SFrame FDEs, {skipped} left out, "
           "equal to the conversion's")


def test_the_fde_count_is_readelfs() -> None:
    """The FDEs counted are those ``readelf -wF`` lists (the oracle reads the section
    itself)."""
    require("readelf")
    require_path(*FILES[:2])
    for path in FILES[:2]:
        # (readelf exits 1 on libc for a .debug_frame it does not find: the listing is whole)
        listed = subprocess.run(["readelf", "-wF", path], capture_output=True,
                                text=True).stdout
        fdes = len(re.findall(r"^\S+ \S+ \S+ FDE ", listed, re.MULTILINE))
        at_least(f"FDEs readelf lists in {path}", fdes, 1000)
        got = _scanned(path, Path(path).read_bytes())
        assert got is not None, path
        assert got[2][1] == got[3][1] == fdes, path


# Two functions whose SFrame sizes follow from the spec by hand.  f (7 bytes): rows at
# 0 (CFA rsp+8), 1 (rsp+16, rbp at c-16), 4 (rbp+16) and 6 (rsp+8, rbp still at c-16);
# on AMD64 the RA is at the header's fixed offset, so each FRE holds the CFA offset and
# the FP offset where one is saved: 1 + 1 + 1, then three of 1 + 1 + 2 bytes (1-byte
# starts and words) = 15 bytes.  g: rows at 0 (rsp+8), 7 (rsp+4104) and 314 (rsp+8):
# its last start needs 2-byte starts, 4104 a 2-byte word: 2+1+1, 2+1+2, 2+1+1 = 13 bytes.
# V2: 28-byte header, 20-byte FDEs: 28 + 2 * 20 + 28 = 96.  V3: the 28-byte header,
# 16-byte index entries and a 5-byte attribute per function: 28 + 2 * 21 + 28 = 98.
HAND = """\t.text
\t.globl f
\t.type f, @function
f:
\t.cfi_startproc
\tpushq %rbp
\t.cfi_def_cfa_offset 16
\t.cfi_offset 6, -16
\tmovq %rsp, %rbp
\t.cfi_def_cfa_register 6
\tnop
\tpopq %rbp
\t.cfi_def_cfa 7, 8
\tret
\t.cfi_endproc
\t.size f, .-f
\t.globl g
\t.type g, @function
g:
\t.cfi_startproc
\tsubq $4096, %rsp
\t.cfi_def_cfa_offset 4104
\t.skip 300, 0x90
\taddq $4096, %rsp
\t.cfi_def_cfa_offset 8
\tret
\t.cfi_endproc
\t.size g, .-g
"""
ROWS = {"f": [(0, "rsp+8", "u"), (1, "rsp+16", "c-16"), (4, "rbp+16", "c-16"),
              (6, "rsp+8", "c-16")],
        "g": [(0, "rsp+8", None), (7, "rsp+4104", None), (314, "rsp+8", None)]}


def _rows(listing: str) -> list[list[tuple[int, str, str | None]]]:
    """Each FDE's rows in ``readelf -wF``: (offset in the function, CFA, rbp or None)."""
    out = []
    for block in listing.split(" FDE ")[1:]:
        lines = block.splitlines()
        start = int(lines[0].split("pc=")[1].split("..")[0], 16)
        columns = lines[1].split()
        rows = []
        for line in lines[2:]:
            cells = line.split()
            if not cells or not re.fullmatch(r"[0-9a-f]{16}", cells[0]):
                break
            rbp = cells[columns.index("rbp")] if "rbp" in columns else None
            rows.append((int(cells[0], 16) - start, cells[1], rbp))
        out.append(rows)
    return out


def test_sizes_derived_from_the_spec(tmp_path: Path) -> None:
    require("gcc", "readelf")
    (tmp_path / "hand.s").write_text(HAND)
    subprocess.run(["gcc", "-shared", "-nostdlib", "-o", "hand.so", "hand.s"], cwd=tmp_path,
                   check=True)
    listing = subprocess.run(["readelf", "-wF", "hand.so"], cwd=tmp_path, check=True,
                             capture_output=True, text=True).stdout
    assert _rows(listing) == [ROWS["f"], ROWS["g"]]  # the rows the sizes are derived from
    record = _command("stats", "--json", "hand.so", cwd=tmp_path)["files"][0]
    assert (record["fdes"], record["emitted"], record["skipped"]) == (2, 2, {})
    assert (record["sframe_v2_bytes"], record["sframe_v3_bytes"]) == (96, 98)


@pytest.mark.parametrize("version", ["2", "3"])
def test_the_command_says_the_same_with_either_core(tmp_path: Path, version: str) -> None:
    """``stats`` records with the compiled core and with ``CFI2SFRAME_CORE=python``
    (the conversions), but for the time and memory they took: converted libc of both
    targets (its .sframe verified too), libstdc++ as installed, one gconv module."""
    require_path(*FILES)
    converted = []
    for path in (FILES[0], FILES[6]):
        copy = tmp_path / Path(path).name.replace(".so", f"-{len(converted)}.so")
        copy.write_bytes(Path(path).read_bytes())
        _command(str(copy), "--in-place", "-q", cwd=tmp_path)
        converted.append(str(copy))
    inputs = [*converted, FILES[1], f"{GCONV}/UTF-7.so"]
    records = {}
    for core in ("compiled", "python"):
        for path in inputs:
            record = _command("stats", "--json", "--sframe-version", version, path,
                              cwd=tmp_path, core=core)["files"][0]
            for key in ("seconds", "max_rss_kib"):
                record.pop(key)
            records[core, path] = record
    for path in inputs:
        assert records["compiled", path] == records["python", path], path


def _entry(body: bytes) -> bytes:
    """One .eh_frame entry: its length, then ``body`` padded to a word (DW_CFA_nop)."""
    body += bytes(-(len(body) + 4) % 4)
    return len(body).to_bytes(4, "little") + body


# Two "zR" CIEs (PC-relative 4-byte starts; CFA rsp+8, RA at c-8) that differ only in
# their code alignment, 1 and 2, and one FDE body: advance 4, CFA offset 16, advance 8,
# CFA offset 8.  Under the first the rows start at 0, 4 and 12, under the second at 0,
# 8 and 24.  An FRE starts within its function, so a range of 0xc keeps two of the
# first's, 0x15 all three; 0x18 two of the second's, 0x19 all three.  On AMD64 each
# FRE holds its 1-byte start, its info byte and the CFA offset in one byte (the RA at
# the header's fixed offset, no FP): 3 bytes in V2 and in V3 (V3's 5-byte attribute is
# counted per function by ``scan_coverage``, not here).
_CIES = (b"\x01zR\x00\x01\x78\x10\x01\x1b\x0c\x07\x08\x90\x01",
         b"\x01zR\x00\x02\x78\x10\x01\x1b\x0c\x07\x08\x90\x01")
_BODY = b"\x44\x0e\x10\x48\x0e\x08"
_SHARED = [(0, 0x15, 3), (0, 0xC, 2), (0, 0x15, 3), (1, 0x19, 3), (1, 0x18, 2)]


@pytest.mark.parametrize("order", ["as listed", "reversed"])
def test_one_body_under_other_ranges_and_cies_counts_each_fdes_fres(order: str) -> None:
    """Five FDEs of one body (``_SHARED``: CIE, range, FREs kept, derived above): the
    scan, which replays each distinct (CIE, body) once and takes that replay for
    another FDE of the body whose range holds all its FREs, counts each FDE's own FREs:
    13 of 3 bytes in each version.  Fails with a body's replay taken for a range that
    cuts its last FRE off (15 FREs counted, 14 in the reverse order), and with the CIE
    left out of what tells two bodies apart (14 as listed: the second CIE's FDE of range
    0x18 counted by the first's rows)."""
    from cfi2sframe.analysis.stats import _scan_params
    from cfi2sframe.arch import get_arch

    core = compiled_core()
    fdes = _SHARED if order == "as listed" else _SHARED[::-1]
    section, starts = bytearray(), []
    cie_at = []
    for cie in _CIES:
        cie_at.append(len(section))
        section += _entry(bytes(4) + cie)
    start = 0x1000
    for cie, size, _ in fdes:
        at = len(section)
        pointer = (at + 4 - cie_at[cie]).to_bytes(4, "little")
        begin = (start - (at + 8)).to_bytes(4, "little", signed=True)
        section += _entry(pointer + begin + size.to_bytes(4, "little") + b"\x00" + _BODY)
        starts.append(start)
        start += 0x100
    scanned = core.stats_scan(bytes(section), 0, {}, {},
                              _scan_params(get_arch("x86_64"), 8))
    fres = sum(kept for _, _, kept in fdes)
    assert fres == 13
    assert scanned == (5, 5, 3 * fres, 3 * fres, [], min(starts), max(starts))


def _counted(path: str, made: bytes, core: Any, state_of: Any = None,
             shape_of: Any = None, count: bool = True) -> tuple[Any, Any, Any] | None:
    """For a converted file ``made``: what verify's compiled walk gives with stats'
    count asked (``count``; ``compare._scan_counted``): ``verify_scan``'s own answer
    (checked, used, todo and the count) and the verify result made from it, and
    stats' own scan of the file (``stats_scan``); None where the scan does not apply.
    ``state_of``: verify's state -> id answer put in its place (with a new memo),
    ``shape_of``: stats'."""
    from cfi2sframe.analysis.stats import count_request
    from cfi2sframe.elf.compressed import section_contents

    view = open_elf(made, path)
    request = count_request(path, view, core)
    if request is None:
        return None
    shapes, sizes, params = request
    eh = view.section(".eh_frame")
    assert eh is not None
    own = core.stats_scan(section_contents(view, eh, DEFAULT_LIMITS), eh.addr, {}, {},
                          params)
    if shape_of is not None:
        request = shapes, sizes, {**params, "shape_of": shape_of}
    answers = []

    def verify_scan(*args: object, **keywords: Any) -> object:
        if state_of is not None:
            keywords.update(states={}, state_of=state_of)
        answers.append(core.verify_scan(*args, **keywords))
        return answers[-1]

    walker = type("Walker", (), {name: staticmethod(getattr(core, name))
                                 for name in dir(core) if not name.startswith("__")})
    walker.verify_scan = staticmethod(verify_scan)  # type: ignore[attr-defined]
    scanned: Any = _counted_with(path, made, walker, request if count else None)
    assert scanned is not None and len(answers) == 1, path
    return answers[0], scanned[0], own


def test_verifys_walk_counts_what_the_scan_and_the_conversion_count(report) -> None:
    """``stats`` of a file with .sframe takes its count from verify's compiled walk
    (``compare.verify_counted``): on every gconv module and the other files here,
    converted (V2; the named files in V3 too), that count is ``stats_scan``'s own walk's,
    field for field, the verify result is the one without the count, and the coverage
    made from it is the conversion's (``_reference``, as on the files as installed).
    Floors: 250 files walked and 20,000 functions counted."""
    from cfi2sframe.analysis.compare import verify_counted, verify_elf
    from cfi2sframe.analysis.stats import count_request
    from cfi2sframe.files import bytes_of

    require_path(GCONV, *FILES)
    core = compiled_core()
    walked = functions = 0
    for path in sorted(glob.glob(f"{GCONV}/*.so")) + FILES:
        data = Path(path).read_bytes()
        for version in (2, 3) if path in FILES else (2,):
            made = bytes_of(convert_elf(path, data, version).elf_copy())
            view = open_elf(made, path)
            request = count_request(path, view, core)
            if request is None or not view.holds_sframe:
                continue
            result, counted = verify_counted(path, made, DEFAULT_LIMITS, request, view=view)
            assert counted is not None, path
            assert result == verify_elf(path, made, view=view)[0], path
            both = _counted(path, made, core)
            assert both is not None and both[0][3] == both[2] == counted, path
            coverage = scan_coverage(path, made, view, DEFAULT_LIMITS,
                                     partial(default_sframe_address, made, path, view),
                                     compiled=core, counted=counted)
            assert coverage is not None, path
            for number in (2, 3):
                got = coverage[number]
                assert (got.arch.name, got.fdes, got.emitted,
                        [(str(skip.reason), skip.name, skip.start) for skip in got.skips],
                        got.size) == _reference(path, made, number), (path, number)
            walked += 1
            functions += counted[1]
    at_least("converted files walked", walked, 250)
    at_least("functions counted", functions, 20000)
    report(f"verify's walk counted {walked} converted files, {functions} functions: "
           "stats_scan's count and the conversion's")


@pytest.mark.parametrize("side", ["verify", "stats"])
def test_one_replay_serves_each_side_to_its_own_end(side: str) -> None:
    """One replay feeds verify's comparison and stats' count: where one side has no
    answer for a row, the other still gets every row.  Converted libc (x86-64, V2):
    with verify's state ids all None, the walk confirms no function itself (every FDE
    to the full check, whose result is the same), yet the count is stats_scan's; with
    stats' FRE shapes all None, no function is counted (every FDE left), yet the walk
    confirms the functions it confirms without the count.  Fails where the shared
    replay stops when either side stops."""
    from cfi2sframe.files import bytes_of

    path = FILES[0]
    require_path(path)
    core = compiled_core()
    made = bytes_of(convert_elf(path, Path(path).read_bytes(), 2).elf_copy())
    plain = _counted(path, made, core, count=False)
    counted = _counted(path, made, core)
    assert plain is not None and counted is not None
    (checked, used, todo), result, own = plain[0], plain[1], plain[2]
    assert len(plain[0]) == 3 and counted[0][:3] == plain[0] and counted[1] == result
    assert counted[0][3] == own
    fdes, functions = own[0], own[1]
    at_least("libc's functions counted", functions, 2000)
    at_least("libc's functions the walk confirms", checked, 2000)
    if side == "verify":
        changed = _counted(path, made, core, state_of=lambda key: None)
        assert changed is not None
        assert changed[0][0] == 0 and len(changed[0][2]) == fdes
        assert changed[0][3] == own
    else:
        changed = _counted(path, made, core, shape_of=lambda key: None)
        assert changed is not None
        assert changed[0][:3] == (checked, used, todo)
        assert changed[0][3][:4] == (fdes, 0, 0, 0) and len(changed[0][3][4]) == fdes
    assert changed[1] == result  # (the full check gives the same verdict)


def test_counts_of_another_target_are_refused() -> None:
    """verify_scan counts only with the replay its walk makes: stats' parameters of
    another target or address size are a ValueError, not a count of other rules."""
    from cfi2sframe.analysis.stats import _scan_params
    from cfi2sframe.arch import get_arch
    from cfi2sframe.files import bytes_of

    path = FILES[0]
    require_path(path)
    core = compiled_core()
    made = bytes_of(convert_elf(path, Path(path).read_bytes(), 2).elf_copy())
    for arch, size in ((get_arch("aarch64"), 8), (get_arch("x86_64"), 4)):
        with pytest.raises(ValueError, match="counts"):
            _counted_with(path, made, core, ({}, {}, _scan_params(arch, size)))


def _counted_with(path: str, made: bytes, core: Any, request: object) -> object:
    """``compare._scan_counted`` of ``made`` with ``request`` as its ``counts``."""
    from cfi2sframe.analysis import compare
    from cfi2sframe.arch import arch_for_machine
    from cfi2sframe.sframe.decode import FdeTable
    from cfi2sframe.sframe.load import sframe_bytes

    view = open_elf(made, path)
    raw = sframe_bytes(path, made, view=view)
    table = FdeTable(raw.data, raw.address, raw.v1_pcrel)
    arch = arch_for_machine(view.machine, path, not view.little_endian)
    return compare._scan_counted(path, view, raw, table, table.section([]), arch,
                                 DEFAULT_LIMITS, core, True, request)  # type: ignore[arg-type]
