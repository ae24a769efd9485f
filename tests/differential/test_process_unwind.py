"""Unwinding real processes (issue 14): programs (PIE and -no-pie) using a shared
library are stopped by gdb at every instruction of the library's and the program's
functions (prologues and epilogues included) and inside libc; gdb
writes the snapshot and the mappings with the shipped script (``unwind
--gdb-script``), and ``unwind --maps`` must give gdb's own backtrace: every frame gdb
shows, same PC, and gdb's function name among the symbols at that address (aliases:
gdb says ``__GI__IO_puts`` where the dynamic symbol is ``puts``).  The walk crosses
the program, the library and libc (whose SFrame is made from its DWARF in memory) and
ends at ``_start`` with exit 0."""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cfi2sframe.analysis.process import Module, module_for, modules_from_maps
from cfi2sframe.convert import sframe_from_dwarf
from tests.conftest import at_least, require

LIB = """#include <stdio.h>
int depth_in_lib(int n) { if (n <= 0) { puts("bottom"); return 0; }
                          return depth_in_lib(n - 1) + 1; }
"""
MAIN = """#include <stdio.h>
int depth_in_lib(int);
static int __attribute__((noinline)) mid(int n) { return depth_in_lib(n) + 1; }
int main(int c, char **v) { (void)v; printf("%d\\n", mid(c + 2)); return 0; }
"""
STOPS = ["puts", "depth_in_lib", "mid", "*mid+4"]


def _instruction_stops(programs: dict[str, Path], kind: str) -> list[str]:
    """``*function+offset`` at every instruction of the library's and the program's
    functions (prologues and epilogues included), as objdump lists them."""
    stops = []
    for path, names in ((programs[kind].with_name("libd.so"), ("depth_in_lib",)),
                        (programs[kind], ("mid", "main"))):
        text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(path)],
                              capture_output=True, text=True, check=True).stdout
        for name in names:
            body = re.search(rf"^([0-9a-f]+) <{name}>:\n(.*?)\n\n", text, re.S | re.M)
            assert body is not None, name
            start = int(body.group(1), 16)
            stops += [f"*{name}+{int(line.split(':')[0], 16) - start}"
                      for line in body.group(2).splitlines() if ":" in line]
    return stops
FRAME = re.compile(r"^#(\d+)\s+(?:(0x[0-9a-f]+) in )?(\S+) ")


@functools.cache
def _gdb_script() -> str:
    """The shipped gdb script's path, as ``unwind --gdb-script`` prints it (one path
    for the whole run: asked once, not once a stop)."""
    return subprocess.run([sys.executable, "-m", "cfi2sframe", "unwind", "--gdb-script"],
                          capture_output=True, text=True, check=True).stdout.strip()


_MODULES: dict[str, list[Module]] = {}


def _modules(maps: Path) -> list[Module]:
    """``modules_from_maps`` once per distinct listing: gdb runs the program without
    ASLR, so every stop of a program maps the same files at the same places and would
    convert libc's DWARF again for the same answer."""
    text = maps.read_text()
    if text not in _MODULES:
        _MODULES[text] = modules_from_maps(str(maps), sframe_from_dwarf)
    return _MODULES[text]


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    require("gcc", "gdb")
    tmp = tmp_path_factory.mktemp("process")
    (tmp / "lib.c").write_text(LIB)
    (tmp / "main.c").write_text(MAIN)
    for cmd in (["gcc", "-O1", "-g", "-shared", "-fPIC", "lib.c", "-o", "libd.so"],
                ["gcc", "-O1", "-g", "main.c", "-L.", "-ld", f"-Wl,-rpath,{tmp}", "-o", "pie"],
                ["gcc", "-O1", "-g", "-no-pie", "main.c", "-L.", "-ld", f"-Wl,-rpath,{tmp}",
                 "-o", "nopie"]):
        subprocess.run(cmd, cwd=tmp, check=True, capture_output=True)
    return {"pie": tmp / "pie", "nopie": tmp / "nopie"}


def _gdb(program: Path, stop: str, snap: Path, maps: Path) -> list[tuple[int | None, str]]:
    out = subprocess.run(["gdb", "-nx", "-batch", "-ex", "set breakpoint pending on",
                          "-ex", f"break {stop}", "-ex", "run", "-ex", f"source {_gdb_script()}",
                          "-ex", f"snapshot {snap} {maps}", "-ex", "bt", str(program)],
                         capture_output=True, text=True, timeout=120).stdout
    frames = []
    for line in out.splitlines():
        match = FRAME.match(line)
        if match:
            frames.append((int(match.group(2), 16) if match.group(2) else None,
                           match.group(3)))
    return frames


@pytest.mark.parametrize("kind", ["pie", "nopie"])
def test_unwind_with_maps_reproduces_gdbs_backtrace(programs, kind: str, tmp_path: Path,
                                                   report) -> None:
    require("objdump")
    agreed = 0
    stops = STOPS + _instruction_stops(programs, kind)
    for index, stop in enumerate(stops):
        snap, maps = tmp_path / f"s{index}.json", tmp_path / f"m{index}.txt"
        want = _gdb(programs[kind], stop, snap, maps)
        assert want and want[0][1] in (stop.strip("*").split("+")[0], "puts", "__GI__IO_puts"), \
            (stop, want)
        proc = subprocess.run([sys.executable, "-m", "cfi2sframe", "unwind", "--maps",
                               str(maps), "--snapshot", str(snap), "--json"],
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        walked = json.loads(proc.stdout)
        assert walked["stopped"].startswith("outermost frame"), walked["stopped"]
        frames = walked["frames"]
        assert frames[-1]["text"].startswith("_start+"), frames[-1]
        # The same place as fields: symbol, offset in it, module (the program's file).
        last = frames[-1]
        assert (last["symbol"], Path(last["module"]).name) == ("_start", programs[kind].name)
        assert last["text"] == f"_start+{last['offset']:#x} ({last['module']})"
        modules = _modules(maps)
        regs = json.loads(snap.read_text())["regs"]
        for depth, (pc, name) in enumerate(want):
            ours = frames[depth]["pc"]
            assert ours == (pc if pc is not None else int(regs["rip"], 16)), (stop, depth)
            module = module_for(modules, ours if depth == 0 else ours - 1)
            names = [n for _, n in module.names_at(ours if depth == 0 else ours - 1)]
            assert name in names, (stop, depth, name, names)
            agreed += 1
    report(f"unwind --maps ({kind}): {len(stops)} stops (every instruction of the library's "
           f"and the program's functions, and libc's puts), {agreed} gdb frames agree (PC "
           "and name), every walk ends at _start through the program, library and libc")
    # Measured here: (31, 90) (stops, frames) for pie and nopie; floors 10% lower.
    at_least("stops", len(stops), 27)
    at_least("gdb frames agreeing", agreed, 81)
