"""Reality, not other tools: unwind real stacks and compare with gdb.

csmith programs built by gcc (-O2 -fomit-frame-pointer, -O0, -O2 -mstackrealign;
-no-pie, so addresses are fixed) get SFrame from cfi2sframe (--emit elf) and run
under gdb, stopping once at each of a random sample of instruction addresses in
the functions SFrame describes (prologues and epilogues included).  At each stop
our walker (``unwind.sframe_step``) and, where a --ranges compact row is not
DWARF mode, the compact unwind stepper compute the caller's PC, SP (the CFA)
and RBP from the live registers and memory; gdb's frame 1 (from the DWARF CFI)
must be the same.

The tests can fail: at least 95% of the stops must agree with gdb (today: all), any
other stop must have a reason on an explicit allow-list (``ALLOWED_SFRAME``,
``ALLOWED_COMPACT``: each says why it is expected), a differing caller is never
allowed, and the programs, stops and compact unwind stops compared must reach floors
measured on the reference machine (so a walker that never steps, or a run that
stops nowhere, fails instead of agreeing vacuously).
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

from cfi2sframe.compact.inputs import compact_elf
from cfi2sframe.convert import convert_elf
from cfi2sframe.elf.read import open_elf
from cfi2sframe.sframe.decode import decode
from tests.conftest import require
from tests.corpus import CSMITH_INCLUDE, Failed, corpus_dir, csmith_source, fail_in_ci

ROOT = Path(__file__).resolve().parents[2]
FLAGS = {"O2nofp": ["-O2", "-fomit-frame-pointer"], "O0": ["-O0"],
         "O2realign": ["-O2", "-mstackrealign"]}
SEEDS = range(1, 1 + int(os.environ.get("CFI2SFRAME_UNWIND_SEEDS", "15")))
SYSROOT = "/usr/aarch64-linux-gnu"  # Debian's AArch64 libc, for qemu-user and gdb
BREAKPOINTS = int(os.environ.get("CFI2SFRAME_UNWIND_BREAKPOINTS", "600"))
# The floors below hold for the default seeds and breakpoints (the CI run); a run with
# fewer, asked for by these variables, keeps every other check.
DEFAULT_RUN = not {"CFI2SFRAME_UNWIND_SEEDS", "CFI2SFRAME_UNWIND_BREAKPOINTS"} & set(os.environ)
AGREE_SHARE = 0.95

# Why our SFrame walker may give no caller at a stop, and why that is expected.  None
# is: every breakpoint is inside a function the section describes (the candidates are
# taken from its FDEs), gcc's CFI for csmith code is SP/FP-based with the RA at CFA-8
# (x86-64) or in LR / at a CFA offset (AArch64), which SFrame says exactly at every
# PC, and the frames are in the stack gdb reads.  So "no SFrame FDE covers", "no FRE
# covers", "outermost frame", "RA still in its register" and "memory or register not
# in the snapshot" all mean a bug here.
ALLOWED_SFRAME: dict[str, str] = {}
# Why a --ranges compact row may not step at a stop, and why that is expected.
ALLOWED_COMPACT = {
    # compact unwind cannot say every state (arm64: only frameless leaves and frames
    # with the FP/LR record; a prologue's or epilogue's partial frame is neither), and
    # --ranges writes such a row as UNWIND_*_MODE_DWARF, meaning "use the DWARF CFI".
    "DWARF": "the row is in DWARF mode: compact unwind cannot say that state",
}


def _program(seed: int, flags: list[str], compiler: str = "gcc") -> Path | None:
    """The csmith program of ``seed`` built with ``flags``, kept in the corpus folder
    beside its source (built once, like the corpus's assembly: the same source, compiler
    and flags give the same program); a failed build is dropped locally and fails the
    test in CI (with the command and its stderr)."""
    folder = corpus_dir() / "unwind"
    folder.mkdir(parents=True, exist_ok=True)
    c_file = folder / f"p{seed}.c"
    if not c_file.exists():
        c_file.write_bytes(csmith_source(seed))
    exe = folder / f"p{seed}-{compiler}{''.join(flags)}"
    if exe.exists():
        return exe
    built_here = exe.with_name(f"{exe.name}.{os.getpid()}.tmp")  # runs in parallel
    command = [compiler, *flags, "-no-pie", "-w", f"-I{CSMITH_INCLUDE}", str(c_file), "-o",
               str(built_here)]
    built = subprocess.run(command, capture_output=True)
    if built.returncode != 0:
        fail_in_ci([Failed(command, built.stderr.decode(errors="replace"))])
        return None
    built_here.replace(exe)
    return exe


def _instructions(exe: Path, ranges: list[tuple[int, int]], objdump: str = "objdump") -> list[int]:
    listing = subprocess.run([objdump, "-d", "--no-show-raw-insn", str(exe)],
                             capture_output=True, text=True, check=True).stdout
    out = []
    for match in re.finditer(r"^\s+([0-9a-f]+):\t", listing, re.M):
        address = int(match.group(1), 16)
        if any(lo <= address < hi for lo, hi in ranges):
            out.append(address)
    return out


def _check(exe: Path, tmp: Path, rng: random.Random, tally: dict, arch: str = "x86_64",
           objdump: str = "objdump") -> None:
    """Give ``exe`` SFrame, stop gdb at random instructions, tally the comparisons."""
    with_sframe = tmp / f"{exe.name}.sf"
    with_sframe.write_bytes(convert_elf(str(exe)).elf())
    with_sframe.chmod(0o755)
    data = with_sframe.read_bytes()
    sframe = next(s for s in open_elf(data, "program").sections if s.name == ".sframe")
    raw = data[sframe.offset:sframe.offset + sframe.size]
    (tmp / "sframe.bin").write_bytes(raw)
    section = decode(raw, sframe.addr)
    # The program's own functions (a static binary also holds libc's, mostly idle).
    symbols = subprocess.run(["nm", str(with_sframe)], capture_output=True, text=True,
                             check=True).stdout
    own = {int(addr, 16) for addr, _, name in (line.split(" ", 2) for line in
                                               symbols.splitlines() if line.count(" ") == 2)
           if re.match(r"(func_\d+|main|crc32_\w+|transparent_crc\w*|platform_main\w*)$", name)}
    described = [(f.start_address, f.start_address + f.size) for f in section.fdes
                 if f.start_address in own]
    candidates = _instructions(with_sframe, described, objdump)
    chosen = rng.sample(candidates, min(BREAKPOINTS, len(candidates)))
    (tmp / "addrs.txt").write_text(" ".join(f"{a:x}" for a in chosen))
    rows = [[f.start, f.size, [[r.start, r.length, r.encoding] for r in f.rows]]
            for f in compact_elf(str(with_sframe), data, ranges=True)]
    (tmp / "compact.json").write_text(json.dumps(rows))
    env = dict(os.environ, CFI2SFRAME_ROOT=str(ROOT), SNAP_SFRAME=str(tmp / "sframe.bin"),
               SNAP_SFRAME_ADDR=hex(sframe.addr), SNAP_ADDRS=str(tmp / "addrs.txt"),
               SNAP_COMPACT=str(tmp / "compact.json"), SNAP_OUT=str(tmp / "stops.jsonl"),
               SNAP_ARCH=arch)
    (tmp / "stops.jsonl").write_text("")
    gdb, qemu = "gdb", None
    if arch == "aarch64":
        port = str(rng.randrange(20000, 60000))
        qemu = subprocess.Popen(["qemu-aarch64", "-L", SYSROOT, "-g", port, str(with_sframe)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        env["SNAP_REMOTE"] = f"localhost:{port}"
        env["SNAP_SYSROOT"] = SYSROOT
        gdb = "gdb-multiarch"
    try:
        checker = ROOT / "tests" / "support" / "gdb_unwind_check.py"
        subprocess.run([gdb, "-batch", "-nx", "-x", str(checker),
                        "--args", str(with_sframe)], env=env, capture_output=True,
                       timeout=180, cwd=tmp)
    except subprocess.TimeoutExpired:
        tally["timeouts"] += 1
    finally:
        if qemu is not None:
            qemu.kill()
            qemu.wait()
    tally["programs"] += 1
    for line in (tmp / "stops.jsonl").read_text().splitlines():
        stop = json.loads(line)
        if "gdb" not in stop:
            tally["no_gdb_frame"] += 1  # gdb itself has no caller here: nothing to compare
            continue
        tally["stops"] += 1
        if isinstance(stop["sframe"], str):
            reason = _reason(stop["sframe"])
            tally["undescribed"][reason] = tally["undescribed"].get(reason, 0) + 1
            tally["undescribed_detail"].append((exe.name, stop))
        elif stop["sframe"] == stop["gdb"]:
            tally["agree"] += 1
        else:
            tally["mismatches"].append((exe.name, stop))
        compact = stop.get("compact", "no compact row covers the PC")
        if isinstance(compact, list):
            tally["compact_stops"] += 1
            tally["compact_agree"] += compact == stop["gdb"]
        else:
            reason = _reason(compact)
            tally["compact_other"][reason] = tally["compact_other"].get(reason, 0) + 1


def _reason(message: str) -> str:
    """A walker's message without its addresses (one key per kind of reason)."""
    return re.sub(r"0x[0-9a-f]+", "ADDR", message)


def _tally() -> dict:
    return {"programs": 0, "timeouts": 0, "stops": 0, "no_gdb_frame": 0, "agree": 0,
            "compact_stops": 0, "compact_agree": 0, "undescribed": {},
            "undescribed_detail": [], "compact_other": {}, "mismatches": []}


def _summary(t: dict) -> str:
    return (f"{t['programs']} programs ({t['timeouts']} timed out), {t['stops']} stops at "
            f"random instructions: SFrame caller PC/SP/FP = gdb frame 1 at {t['agree']}, "
            f"differ at {len(t['mismatches'])}, no step {t['undescribed']} (and "
            f"{t['no_gdb_frame']} stops where gdb has no frame 1); compact unwind "
            f"(--ranges rows, not DWARF mode) at {t['compact_stops']} stops: "
            f"{t['compact_agree']} agree, other rows {t['compact_other']}")


def _assert_like_gdb(t: dict, programs: int, stops: int, compact_stops: int) -> None:
    """The checks both tests make (see the module docstring); the floors are the
    programs, stops and compact stops a default run must compare at least."""
    assert not t["mismatches"], t["mismatches"][:3]
    # gdb unwinds past main (tests/support/gdb_unwind_check.py), so it has a frame 1 at
    # every stop in these functions (none without, measured): at most 5% may lack one.
    assert t["no_gdb_frame"] <= 0.05 * (t["stops"] + t["no_gdb_frame"]), _summary(t)
    assert t["stops"] and t["agree"] >= AGREE_SHARE * t["stops"], _summary(t)
    unexpected = {r: n for r, n in t["undescribed"].items() if r not in ALLOWED_SFRAME}
    assert not unexpected, (unexpected, t["undescribed_detail"][:3])
    assert t["compact_stops"] and t["compact_agree"] == t["compact_stops"], _summary(t)
    unexpected = {r: n for r, n in t["compact_other"].items() if r not in ALLOWED_COMPACT}
    assert not unexpected, unexpected
    if DEFAULT_RUN:
        assert t["programs"] >= programs, _summary(t)
        assert t["stops"] >= stops, _summary(t)
        assert t["compact_stops"] >= compact_stops, _summary(t)


def test_sframe_and_compact_unwind_real_stacks_like_gdb(tmp_path: Path, report) -> None:
    require("gdb", "gcc", "csmith", "objdump")
    rng = random.Random(2026)
    tally = _tally()
    for seed in SEEDS:
        for flags in FLAGS.values():
            exe = _program(seed, flags)
            if exe is not None:
                _check(exe, tmp_path, rng, tally)
    report("real unwinding vs gdb, x86-64 csmith (gcc -O2 -fomit-frame-pointer, -O0, "
           f"-O2 -mstackrealign): {_summary(tally)}")
    # Measured here (15 seeds x 3 flag sets, 600 breakpoints each): 45 programs, 10558
    # stops, all at compact rows (x86-64's --ranges rows step everywhere in these
    # functions); floors about 10% lower (timeouts of a loaded machine lose programs).
    _assert_like_gdb(tally, programs=42, stops=9500, compact_stops=9500)


def test_aarch64_real_stacks_under_qemu_like_gdb(tmp_path: Path, report) -> None:
    """The same on AArch64: programs under qemu-user's gdb stub, with gdb-multiarch."""
    require("qemu-aarch64", "gdb-multiarch", "aarch64-linux-gnu-gcc", "csmith",
            "aarch64-linux-gnu-objdump")
    rng = random.Random(2027)
    tally = _tally()
    for seed in list(SEEDS)[:2]:  # (qemu and gdb-multiarch: some 8 s a program)
        for flags in (["-O2"], ["-O0"]):
            exe = _program(seed, flags, "aarch64-linux-gnu-gcc")
            if exe is not None:
                _check(exe, tmp_path, rng, tally, "aarch64", "aarch64-linux-gnu-objdump")
    report(f"real unwinding vs gdb-multiarch on qemu-aarch64 (gcc -O2, -O0): "
           f"{_summary(tally)}")
    # Measured here (2 seeds x 2 flag sets): 4 programs, 992 stops, 54 of them at
    # compact rows not in DWARF mode (938 DWARF); floors about 10% lower.
    _assert_like_gdb(tally, programs=4, stops=890, compact_stops=48)


SNAPSHOT_SCRIPT = r'''
import gdb, json, os
gdb.execute("set pagination off")
gdb.Breakpoint("leaf")
gdb.execute("run", to_string=True)
frame = gdb.newest_frame()
regs = {name: hex(int(frame.read_register(name)) & 0xFFFFFFFFFFFFFFFF)
        for name in ("rip", "rsp", "rbp")}
rsp = int(frame.read_register("rsp"))
size = 4096
while True:
    try:
        block = gdb.selected_inferior().read_memory(rsp, size).tobytes()
        break
    except gdb.MemoryError:
        size -= 64  # the window ends at the top of the stack
chain = []
while frame is not None:
    chain.append([int(frame.pc()), int(frame.read_register("rsp"))])
    frame = frame.older()
json.dump({"regs": regs, "memory": [{"address": hex(rsp), "hex": block.hex()}],
           "gdb": chain}, open(os.environ["SNAP"], "w"))
'''

CHAIN = r'''
#include <stdio.h>
__attribute__((noinline)) int leaf(volatile int *p) { return *p + 1; }
__attribute__((noinline)) int mid(int n) { volatile int v[40]; v[3] = n; return leaf(&v[3]) * 2; }
__attribute__((noinline)) int top(int n) { int r = mid(n + 1); printf("%d\n", r); return r; }
int main(int argc, char **argv) { (void)argv; return top(argc) & 1; }
'''


def test_unwind_command_walks_a_gdb_snapshot_like_gdb(tmp_path: Path) -> None:
    """`cfi2sframe unwind` (SFrame, and --compact) on registers and 4 KiB of stack
    captured by gdb in `leaf`: the frames' PCs and SPs are gdb's backtrace, to main."""
    require("gdb", "gcc")
    (tmp_path / "chain.c").write_text(CHAIN)
    exe = tmp_path / "chain"
    subprocess.run(["gcc", "-O2", "-fomit-frame-pointer", "-no-pie", str(tmp_path / "chain.c"),
                    "-o", str(exe)], check=True)
    with_sframe = tmp_path / "chain.sf"
    with_sframe.write_bytes(convert_elf(str(exe)).elf())
    with_sframe.chmod(0o755)
    (tmp_path / "snap.py").write_text(SNAPSHOT_SCRIPT)
    snap = tmp_path / "snap.json"
    subprocess.run(["gdb", "-batch", "-nx", "-x", str(tmp_path / "snap.py"), str(with_sframe)],
                   env=dict(os.environ, SNAP=str(snap)), capture_output=True, timeout=60,
                   check=True)
    proc = subprocess.run([sys.executable, "-m", "cfi2sframe", "unwind", str(with_sframe),
                           "--snapshot", str(snap), "--json"], capture_output=True, text=True)
    ours = json.loads(proc.stdout)
    # One file (libc's frames are not in it) and 4 KiB of stack: the walk stops before
    # the outermost frame, which is exit 1 with the reason.
    assert proc.returncode == (0 if ours["stopped"].startswith("outermost") else 1), ours
    want = json.loads(snap.read_text())["gdb"]
    names = ["leaf", "mid", "top", "main"]
    assert [[f["pc"], f["sp"]] for f in ours["frames"][:4]] == want[:4], (ours, want, names)
    compact = subprocess.run([sys.executable, "-m", "cfi2sframe", "unwind", "--compact",
                              str(with_sframe), "--snapshot", str(snap), "--json"],
                             capture_output=True, text=True)
    assert compact.returncode in (0, 1) and not compact.stderr, compact.stderr
    frames = json.loads(compact.stdout)["frames"]
    assert [[f["pc"], f["sp"]] for f in frames[:4]] == want[:4], (frames, want)
