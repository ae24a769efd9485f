"""The one benchmark table: every path a user runs, timed against the nearest C tool in
the same run, on dense and sparse real input, with peak memory, a linearity check and
each of issue 43's goals met or not.

Usage: python benchmarks/run.py [--sizes 10000,30000,100000] [--runs 3]
                                [--library LIB] [--tree DIR...] [--tree-runs 1]
                                [--overhead-files 1000] [--startup-runs 10] [--quick]
                                [--only PART...] [--form clean|beside]
                                [--command CFI2SFRAME]

Input, per the performance issue:
  dense    ``make_dense_asm.py``: gcc -O0 style functions (push/mov/pop CFI) of each size
  sparse   ``make_big_asm.py``: csmith programs compiled by gcc -O0/-O2, concatenated
  library  libLLVM-14.so.1 (Debian's llvm-14), 95k FDEs
  stats    libLLVM-14 converted: ``stats`` beside its ``verify`` and readelf -wF
  Mach-O   x86-64 macOS images of each dense size (llvm-mc, ld64.lld-14)
  XRay     ``make_xray_trace.py``: a 4-thread clang-14 program's FDR trace, 10.8 million
           function records (made once, cached in /tmp), dump and stacks
  tree     item 2's trees (/usr/lib/x86_64-linux-gnu and /usr/bin): ``stats -r``,
           ``verify -r`` and ``--in-place -r`` (on a fresh copy) with -j 1 and -j 2,
           each alternated with ``readelf -wF`` one process per file, one or two at a
           time (``bench_tree.py``'s rows), and the -j 2 speed-ups beside ``ceiling.py``
  overhead a tree run's CPU per file with nothing to convert: ``stats -r`` over 1,000
           copies of /usr/bin/true without CFI against over two
  startup  each command of ``startup.py`` on its smallest input (40 ms goal)

Prints a markdown table (medians of ``--runs``, of ``--tree-runs`` for the trees, of 3
for the overhead, of ``--startup-runs`` for start-up; peak RSS is the largest of the
runs, from ``os.wait4``; the rows whose ratio is a goal time ours and the C tool
alternated: ``compact --check`` of the library against our own ``verify`` of it) and,
per path, the time per function at the largest dense size over that at the smallest:
1.3 or less is linear cost.  At the end every goal row of the run, its figure, its goal
and met or not.  ``--quick``: sizes 2000 and 6000, one run, no library, tree or stats,
at most 100 files for the overhead (a smoke run of this script, under a minute).
``--only``: those parts.

The command timed (named at the head with the Python that runs it and the ``.pth``
files that Python's ``site`` runs): by default (``--form clean``) the console script of
a clean virtual environment holding this checkout's package and its dependencies, as
``pip install`` leaves it (``startup.installed``), run without ``PYTHONPATH``; ``--form
beside``: the console script beside this Python, whose site-packages may hold ``.pth``
hooks that are not ours (this sandbox's certificate and coverage hooks, an editable
install's finder: 15-25 ms a process); ``--command``: any cfi2sframe (a worktree's
wrapper).
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import bench_tree
import startup
from ceiling import pair_ceiling
from installed import cfi2sframe_command

HERE = Path(__file__).resolve().parent
LIBRARY = "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1"
TREES = ["/usr/lib/x86_64-linux-gnu", "/usr/bin"]  # issue 43 item 2's trees

PARTS = ["dense", "sparse", "macho", "library", "stats", "xray", "tree", "overhead",
         "startup"]
# The parts that hold a goal row, by issue 43's item.
GOAL_PARTS = {"stats": "1", "library": "1, 5", "tree": "2", "overhead": "2", "dense": "3",
              "macho": "4", "startup": "6"}

Timing = tuple[float, float]  # median wall seconds, peak RSS MiB (0: not measured)


class Goal(NamedTuple):
    """One goal row of issue 43: what was measured against its limit (a ratio, a
    speed-up or a time), ``at_least`` for a floor, else a ceiling."""

    label: str
    value: float
    limit: float
    at_least: bool = False
    unit: str = "x"

    @property
    def met(self) -> bool:
        return self.value >= self.limit if self.at_least else self.value <= self.limit

    def line(self) -> str:
        bound = ">=" if self.at_least else "<="
        return (f"| {self.label} | {self.value:.2f}{self.unit} | {bound} "
                f"{self.limit:g}{self.unit} | {'met' if self.met else 'NOT met'} |")


# Starts each timed command and reports its wall seconds, peak RSS (KiB) and CPU
# seconds.  A child's ru_maxrss counts the memory of the process it was forked from
# (Linux keeps the larger at exec): forked from this script (some 100 MiB once the
# Mach-O images are made) every row's peak would be at least that; this process,
# Python without ``site``, is some 10 MiB.
SPAWNER = r"""
import os, sys, time
home = os.getcwd()
quiet = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)]
for line in sys.stdin:
    cwd, *cmd = line.rstrip("\n").split("\0")
    os.chdir(cwd or home)
    start = time.perf_counter()
    try:
        pid = os.posix_spawnp(cmd[0], cmd, os.environ, file_actions=quiet)
    except OSError:
        print(0, 0, 0, 127 << 8, flush=True)
        continue
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    print(wall, usage.ru_maxrss, usage.ru_utime + usage.ru_stime, status, flush=True)
"""


@functools.cache
def spawner() -> subprocess.Popen[str]:
    """The one process that starts the timed commands (started at first use, so that
    it has the environment ``main`` settled)."""
    return subprocess.Popen([sys.executable, "-S", "-c", SPAWNER], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)


def once(cmd: list[str], cwd: str | None = None) -> tuple[float, float, float]:
    """One run: wall seconds, peak RSS (MiB) and CPU seconds (user and system, its
    reaped children's too: a tree run's workers), from ``os.wait4`` in ``spawner``.
    Exit statuses are not checked (readelf exits 1 on warnings after printing) but
    for 127, a command that could not start."""
    child = spawner()
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write("\0".join([cwd or "", *cmd]) + "\n")
    child.stdin.flush()
    wall, peak, cpu, status = child.stdout.readline().split()
    if os.waitstatus_to_exitcode(int(status)) == 127:
        sys.exit(f"could not run {cmd[0]}")
    return float(wall), int(peak) / 1024, float(cpu)


def timed(cmd: list[str], runs: int, cwd: str | None = None) -> Timing:
    """Median wall seconds over ``runs``, and the largest peak RSS (MiB) of those runs."""
    walls, peaks = zip(*(once(cmd, cwd)[:2] for _ in range(runs)), strict=True)
    return statistics.median(walls), max(peaks)


def paired(first: list[str], second: list[str], runs: int) -> tuple[Timing, Timing]:
    """Both commands timed ``runs`` times, alternated, so that both see the machine of
    the same minutes (this VM's speed moves by 20-40% from one minute to the next):
    the rows whose ratio is a goal."""
    one, two = alternated([first, second], runs)
    return one, two


def alternated(commands: list[list[str]], runs: int, cwd: str | None = None) -> list[Timing]:
    """``paired`` for any number of commands: each timed once per round, in turn."""
    rounds = [[timed(cmd, 1, cwd) for cmd in commands] for _ in range(runs)]
    return [(statistics.median(t[0] for t in ts), max(t[1] for t in ts))
            for ts in zip(*rounds, strict=True)]


class Table:
    """Rows of the markdown table, printed as they are measured."""

    def __init__(self) -> None:
        self.per_function: dict[str, dict[int, float]] = {}
        self.goals: list[Goal] = []
        print("| path | input | cfi2sframe | peak | µs per function | C tool | ratio | goal |")
        print("|---|---|---|---|---|---|---|---|", flush=True)

    def row(self, path: str, what: str, ours: Timing, theirs: Timing | None, tool: str,
            functions: int = 0, goal: float = 0.0) -> None:
        """A row; with ``goal``, its ratio is a goal row (ours over the tool's at most
        ``goal``)."""
        per = ""
        if functions:
            per = f"{ours[0] / functions * 1e6:.1f}"
            self.per_function.setdefault(path, {})[functions] = ours[0] / functions
        against = f"{tool} {theirs[0]:.3f} s" if theirs else tool
        ratio = f"{ours[0] / theirs[0]:.2f}x" if theirs else ""
        peak = f"{ours[1]:.0f} MiB" if ours[1] else ""
        if goal and theirs:
            self.goals.append(Goal(f"{path}, {what}, against {tool}", ours[0] / theirs[0],
                                   goal))
        self.line(path, what, f"{ours[0]:.3f} s", peak, per, against, ratio,
                  f"<= {goal:g}x" if goal else "")

    def line(self, *cells: str) -> None:
        print("| " + " | ".join(cells) + " |", flush=True)

    def linearity(self) -> None:
        print("\nLinearity (time per function, largest dense size over smallest; <= 1.3 "
              "is linear):")
        for path, per in self.per_function.items():
            if len(per) > 1:
                low, high = min(per), max(per)
                growth = per[high] / per[low]
                verdict = "linear" if growth <= 1.3 else "NOT linear"
                print(f"- {path}: {growth:.2f} ({low} -> {high} functions): {verdict}")
                self.goals.append(Goal(f"linear: {path}, {low} -> {high} functions",
                                       growth, 1.3, unit=""))

    def summary(self, unmeasured: list[str]) -> None:
        """Each goal row of the run, its figure, its goal and whether it holds."""
        print("\nGoals (issue 43), this run:\n")
        print("| goal row | measured | goal | |\n|---|---|---|---|")
        for goal in self.goals:
            print(goal.line())
        met = sum(goal.met for goal in self.goals)
        print(f"\n{met} of {len(self.goals)} goal rows met.")
        if unmeasured:
            print("Not measured in this run: " + "; ".join(unmeasured) + ".")
        print("Not judged by one run: the goals' \"no row of today's table slower\" "
              "(against the table before, docs/performance.md).")


def dense(table: Table, ours: str, tmp: str, sizes: list[int], runs: int) -> None:
    """Dense objects of each size; the largest's ``verify`` is item 3's goal row."""
    for n in sizes:
        src, gas_o, our_o = (str(Path(tmp) / f"{n}{ext}") for ext in (".s", ".gas.o", ".o"))
        subprocess.run([sys.executable, str(HERE / "make_dense_asm.py"), src, str(n)],
                       check=True)
        what = f"dense, {n} functions"
        converted, gas = paired([ours, src, "--emit", "obj", "-o", our_o],
                                ["as", "--gsframe", src, "-o", gas_o], runs)
        table.row(".s -> object", what, converted, gas, "as --gsframe", n)
        readelf = timed(["readelf", "--sframe", gas_o], runs)
        table.row("dump", what, timed([ours, "dump", our_o], runs), readelf,
                  "readelf --sframe (gas's object)", n)
        table.row("lookup one PC", what, timed([ours, "lookup", our_o, "0x100"], runs),
                  readelf, "readelf --sframe (gas's object)", n)
        # Issue 43's goal: within 2x readelf -wF, so alternated with it.
        checked, frames = paired([ours, "verify", our_o],
                                 ["readelf", "--debug-dump=frames-interp", our_o], runs)
        table.row("verify", what, checked, frames, "readelf -wF", n,
                  goal=2.0 if n == max(sizes) else 0.0)


def sparse(table: Table, ours: str, tmp: str, runs: int, lines: int) -> None:
    big = str(Path(tmp) / "csmith.s")
    subprocess.run([sys.executable, str(HERE / "make_big_asm.py"), big, str(lines)],
                   check=True, stdout=subprocess.DEVNULL)
    functions = Path(big).read_text().count(".cfi_startproc")
    converted, gas = paired([ours, big, "--emit", "obj", "-o", str(Path(tmp) / "csmith.o")],
                            ["as", "--gsframe", big, "-o", str(Path(tmp) / "csmith.gas.o")],
                            runs)
    table.row(".s -> object", f"csmith corpus, {functions} functions", converted, gas,
              "as --gsframe")


def library(table: Table, ours: str, tmp: str, runs: int, path: str) -> None:
    if not os.path.exists(path):
        print(f"| (library) | {path} not found (apt-get install llvm-14) | | | | | |")
        return
    what = Path(path).name
    converted = str(Path(tmp) / "lib.so")
    converted_once, frames = paired([ours, "-w", path, "-o", os.devnull],
                                    ["readelf", "--debug-dump=frames-interp", path], runs)
    tool = "readelf -wF"
    table.row("ELF -> SFrame", what, converted_once, frames, tool)
    checked, verified = paired([ours, "compact", "--check", path],
                               [ours, "verify", path], runs)
    table.row("compact --check", what, checked, verified, "(ours) verify", goal=3.0)
    emit_elf(table, ours, tmp, runs, path, converted)
    table.row("verify", what + " converted", timed([ours, "verify", converted], runs), frames,
              tool)
    table.row("dump", what + " converted", timed([ours, "dump", converted], runs),
              timed(["readelf", "--debug-dump=frames", path], runs), "readelf -wf")
    table.row("lookup one PC", what + " converted",
              timed([ours, "lookup", converted, "0x1000000"], runs), frames, tool)
    copy = str(Path(tmp) / "inplace.so")
    walls, peak = [], 0.0
    for _ in range(runs):
        shutil.copy(path, copy)
        wall, rss = timed([ours, "-w", "--in-place", copy], 1)
        walls.append(wall)
        peak = max(peak, rss)
    table.row("--in-place", what, (statistics.median(walls), peak), frames, tool)


def emit_elf(table: Table, ours: str, tmp: str, runs: int, path: str,
             converted: str) -> None:
    """``--emit elf`` of ``path`` to ``converted`` beside ``strip`` of it to a new file,
    alternated: both read the file and write a copy of about its size.  Alone:
    ``cd benchmarks && python3 -c "import run, tempfile; t = tempfile.mkdtemp();
    run.emit_elf(run.Table(), 'cfi2sframe', t, 7, run.LIBRARY, t + '/lib.so')"``."""
    emitted, stripped = paired([ours, "-w", path, "--emit", "elf", "-o", converted],
                               ["strip", path, "-o", str(Path(tmp) / "s.so")], runs)
    table.row("--emit elf", Path(path).name, emitted, stripped, "strip", goal=2.0)


def stats(table: Table, ours: str, tmp: str, runs: int, path: str) -> None:
    """``stats`` of the converted library beside ``verify`` of it and readelf -wF of it,
    the three alternated: stats counts what verify checks (issue 43's goal: within
    ~1.2x of verify)."""
    if not os.path.exists(path):
        print(f"| (stats) | {path} not found (apt-get install llvm-14) | | | | | |")
        return
    converted = str(Path(tmp) / "stats.so")
    shutil.copy(path, converted)
    subprocess.run([ours, "-w", "-q", "--in-place", converted], check=True)
    what = Path(path).name + " converted"
    counted, checked, frames = alternated([[ours, "stats", converted],
                                           [ours, "verify", converted],
                                           ["readelf", "--debug-dump=frames-interp",
                                            converted]], runs)
    table.row("stats", what, counted, checked, "its verify", goal=1.2)
    table.row("stats", what, counted, frames, "readelf -wF")


def macho_image(path: Path, count: int) -> bool:
    """An x86-64 macOS executable of ``count`` small frameless functions (250 stack
    sizes, half with a saved rbx: regular and compressed pages), assembled by llvm-mc
    and linked by ld64.lld-14; False when those tools are missing."""
    if not (shutil.which("llvm-mc") and shutil.which("ld64.lld-14")):
        return False
    lines = ["\t.section __TEXT,__text,regular,pure_instructions"]
    for i in range(count):
        size, push = 8 * (i % 250 + 1), i % 500 >= 250
        lines += [f"\t.globl _f{i}", f"_f{i}:", "\t.cfi_startproc"]
        if push:
            lines += ["\tpushq %rbx", "\t.cfi_def_cfa_offset 16", "\t.cfi_offset %rbx, -16"]
        lines += [f"\tsubq ${size}, %rsp", f"\t.cfi_def_cfa_offset {size + 8 + 8 * push}",
                  f"\taddq ${size}, %rsp", *(["\tpopq %rbx"] if push else []), "\tretq",
                  "\t.cfi_endproc"]
    lines += ["\t.globl _main", "_main:", "\tretq", "\t.subsections_via_symbols", ""]
    source = path.with_suffix(".s")
    source.write_text("\n".join(lines))
    subprocess.run(["llvm-mc", "-triple", "x86_64-apple-macosx10.15", "-filetype=obj",
                    str(source), "-o", str(path.with_suffix(".o"))], check=True)
    subprocess.run(["ld64.lld-14", "-arch", "x86_64", "-platform_version", "macos", "10.15",
                    "10.15", "-execute", "-e", "_main", "-o", str(path),
                    str(path.with_suffix(".o"))], check=True)
    return True


def macho(table: Table, ours: str, tmp: str, sizes: list[int], runs: int) -> None:
    """Mach-O images: dump, verify, one look-up and __unwind_info built again, against
    llvm-objdump --unwind-info on the same image (the largest's verify and build are
    item 4's goal rows); the object's rows listed against ours, against llvm-objdump
    --unwind-info on the object."""
    for n in sizes:
        goal = 3.0 if n == max(sizes) else 0.0
        image = Path(tmp) / f"macho{n}"
        if not macho_image(image, n):
            print("| (Mach-O) | llvm-mc or ld64.lld-14 not found | | | | | |")
            return
        what = f"Mach-O image (ld64.lld-14), {n} functions"
        objdump = timed(["llvm-objdump-14", "--unwind-info", str(image)], runs)
        tool = "llvm-objdump --unwind-info"
        table.row("Mach-O dump", what, timed([ours, "dump", str(image)], runs), objdump,
                  tool, n)
        objdump_cmd = ["llvm-objdump-14", "--unwind-info", str(image)]
        verified, objdump_v = paired([ours, "verify", str(image)], objdump_cmd, runs)
        table.row("Mach-O verify", what, verified, objdump_v, tool, n, goal)
        table.row("Mach-O lookup one PC", what, timed([ours, "lookup", str(image), "_f100"],
                                                      runs), objdump, tool, n)
        built, objdump_b = paired([ours, "compact", str(image), "--emit", "unwind-info", "-o",
                                   str(image.with_suffix(".bin"))], objdump_cmd, runs)
        table.row("__unwind_info built", what, built, objdump_b, tool, n, goal)
        # The object's own __compact_unwind rows, each against ours from its CFI (a
        # listing that once asked every function per row: quadratic).
        obj = image.with_suffix(".o")
        listed, objdump_o = paired([ours, "compact", str(obj)],
                                   ["llvm-objdump-14", "--unwind-info", str(obj)], runs)
        table.row("Mach-O object compact", f"its object (llvm-mc), {n} functions", listed,
                  objdump_o, tool, n)


def xray(table: Table, ours: str, runs: int) -> None:
    """A trace of 10.8 million function records: ``dump`` against ``llvm-xray-14
    fdr-dump`` and ``stacks`` (folded) against ``llvm-xray-14 stack``'s flame output."""
    if not (shutil.which("clang-14") and shutil.which("llvm-xray-14")):
        print("| (XRay) | clang-14 or llvm-xray-14 not found | | | | | |")
        return
    trace = subprocess.run([sys.executable, str(HERE / "make_xray_trace.py")], check=True,
                           capture_output=True, text=True).stdout.strip()
    what = "XRay FDR trace, 10.8M function records, 4 threads"
    dumped, fdr_dump = paired([ours, "dump", trace], ["llvm-xray-14", "fdr-dump", trace], runs)
    table.row("XRay dump", what, dumped, fdr_dump, "llvm-xray-14 fdr-dump")
    stacked, stack = paired([ours, "stacks", trace],
                            ["llvm-xray-14", "stack", "-all-stacks", "-stack-format=flame",
                             "-aggregation-type=time", trace], runs)
    table.row("XRay stacks", what, stacked, stack, "llvm-xray-14 stack (flame)")


def tree(table: Table, ours: str, tmp: str, runs: int, folders: list[str]) -> None:
    """Issue 43 item 2: ``stats -r``, ``verify -r`` and ``--in-place -r`` (on a fresh
    copy in ``tmp`` every run) with ``-j 1`` and ``-j 2``, each alternated with
    ``readelf -wF`` over the same files, one process at a time for ``-j 1`` and two for
    ``-j 2`` (``bench_tree.measure``); then each ``-j 2`` speed-up beside what two
    processes side by side get here (``ceiling.py``)."""
    missing = [folder for folder in folders if not os.path.isdir(folder)]
    if missing:
        table.line("(tree)", f"{' '.join(missing)} not found", *[""] * 6)
        return
    checkout = str(HERE.parent)
    speed_ups = {}
    for command in bench_tree.COMMANDS:
        walls = {}
        for jobs in (1, 2):
            mine, theirs, count = bench_tree.measure(command, folders, jobs, runs, checkout,
                                                     tmp, [ours])
            what = f"{' and '.join(folders)}, {count} files"
            tool = f"readelf -wF per file, {'one' if jobs == 1 else 'two'} at a time"
            table.row(f"{bench_tree.COMMANDS[command][0]} -r -j {jobs}", what, (mine, 0.0),
                      (theirs, 0.0), tool, goal=2.0)
            walls[jobs] = mine
        speed_ups[command] = walls[1] / walls[2]
    ceiling = pair_ceiling()
    for command, speed_up in speed_ups.items():
        label = f"{bench_tree.COMMANDS[command][0]} -r, -j 2 speed-up over -j 1"
        table.line(label, "the same", f"{speed_up:.2f}x", "", "",
                   f"two processes side by side (ceiling.py) {ceiling:.2f}x", "", ">= 1.8x")
        table.goals.append(Goal(label + f" (ceiling {ceiling:.2f}x)", speed_up, 1.8,
                                at_least=True))


def overhead(table: Table, ours: str, tmp: str, runs: int, count: int) -> None:
    """Issue 43 item 2's per-file cost of a tree run for a file with nothing to convert
    (open, classify, record), as docs/performance.md's "Tree runs" measured it: ``stats
    -q -r`` over ``count`` copies of /usr/bin/true without CFI and over a few, alternated
    with ``readelf -wF`` of one copy; CPU seconds of the process tree (the workers'
    too), medians, the difference over the difference in files.  A few is two: one
    file's ``stats`` is worked on without the pool (``cli/batch._here``), whose start
    would then count as the files'."""
    bare = Path(tmp) / "no-cfi"
    few, many = bare / "few", bare / "many"
    few.mkdir(parents=True)
    many.mkdir()
    first = few / "true0"
    subprocess.run(["objcopy", "--remove-section=.eh_frame", "--remove-section=.eh_frame_hdr",
                    "/usr/bin/true", str(first)], check=True)
    shutil.copy(first, few / "true1")
    for number in range(count):
        shutil.copy(first, many / f"true{number}")
    what = f"{count} copies of /usr/bin/true without CFI"
    for jobs in (1, 2):
        commands = [[ours, "stats", "-q", "-r", str(folder), "-j", str(jobs)]
                    for folder in (many, few)] + [["readelf", "-wF", str(first)]]
        rounds = [[once(cmd) for cmd in commands] for _ in range(runs)]
        cpu = [statistics.median(run[index][2] for run in rounds) for index in range(3)]
        per_file = (cpu[0] - cpu[1]) / (count - 2) * 1000
        table.line(f"tree per-file overhead -j {jobs}", what,
                   f"{per_file:.2f} ms CPU a file ({cpu[0]:.3f} s; 2 files {cpu[1]:.3f} s)",
                   "", "", f"readelf -wF of one copy {cpu[2] * 1000:.2f} ms CPU", "",
                   "<= 0.5 ms")
        table.goals.append(Goal(f"tree per-file overhead, -j {jobs}, {what} (CPU)",
                                per_file, 0.5, unit=" ms"))


def startup_tool(argv: list[str]) -> list[str]:
    """The C tool beside a start-up row: ``as`` for an assembly input, llvm-xray's
    ``fdr-dump`` for a trace (where installed), ``readelf -wF`` for an ELF file,
    ``readelf`` itself for ``--version`` and ``--help`` (and a trace without llvm-xray)."""
    if "small.s" in argv:
        return ["as", "--gsframe", "small.s", "-o", "as.o"]
    if "trace.xray" in argv:
        if shutil.which("llvm-xray-14"):
            return ["llvm-xray-14", "fdr-dump", "trace.xray"]
        return ["readelf", "--version"]
    elf = [arg for arg in argv if arg in ("small.o", "/usr/bin/true")]
    return ["readelf", "-wF", elf[0]] if elf else ["readelf", argv[0]]


def startup_rows(table: Table, ours: str, tmp: str, runs: int) -> None:
    """Issue 43 item 6: each command of ``startup.py`` on its smallest input (made by
    ``startup.prepare``) within 40 ms wall, alternated with its C tool, medians."""
    work = Path(tmp) / "startup"
    work.mkdir()
    startup.prepare(work, HERE.parent)
    for label, argv in startup.COMMANDS:
        mine, theirs = alternated([[ours, *argv], startup_tool(argv)], runs, str(work))
        tool = " ".join(startup_tool(argv)[:2])
        table.line(f"start-up: {label}", "smallest input", f"{mine[0] * 1000:.1f} ms",
                   f"{mine[1]:.0f} MiB", "", f"{tool} {theirs[0] * 1000:.1f} ms",
                   f"{mine[0] / theirs[0]:.1f}x", "<= 40 ms")
        table.goals.append(Goal(f"start-up: {label}", mine[0] * 1000, 40, unit=" ms"))


def command_of(args: argparse.Namespace, tmp: str) -> tuple[str, str]:
    """The cfi2sframe timed and how it was chosen: ``--command``, else the console
    script of a clean virtual environment (``startup.installed``: this checkout's
    package, no ``.pth`` hook), else (``--form beside``) the one beside this Python."""
    if args.command:
        return args.command, "--command"
    if args.form == "beside":
        return cfi2sframe_command(), "the console script beside this Python"
    os.environ.pop("PYTHONPATH", None)  # as a user's shell: the venv finds the package
    return (startup.installed(Path(tmp), HERE.parent)[1],
            "a clean virtual environment's console script, as pip install leaves it")


def python_of(command: str) -> str:
    """The Python that runs ``command`` (its ``#!`` line's), its version and the
    ``.pth`` files its ``site`` runs at every start."""
    try:
        with open(command, "rb") as script:
            first = script.readline()
    except OSError:
        first = b""
    if not first.startswith(b"#!"):
        return "(not a Python script: its own)"
    python = first[2:].decode().split()[0]
    if "python" not in Path(python).name:
        return f"the Python that {python} runs"
    probe = ("import glob, os, site, sys; print(sys.version.split()[0]); print(' '.join("
             "sorted(os.path.basename(p) for d in site.getsitepackages() "
             "for p in glob.glob(os.path.join(d, '*.pth')))))")
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True)
    version, _, hooks = done.stdout.partition("\n")
    return f"{python} {version}; its site's .pth files: {hooks.strip() or 'none'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,30000,100000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--library", default=LIBRARY)
    parser.add_argument("--tree", nargs="+", default=TREES)
    parser.add_argument("--tree-runs", type=int, default=1)
    parser.add_argument("--overhead-files", type=int, default=1000)
    parser.add_argument("--startup-runs", type=int, default=10)
    parser.add_argument("--csmith-lines", type=int, default=200_000)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", nargs="+", choices=PARTS, default=PARTS)
    parser.add_argument("--form", choices=["clean", "beside"], default="clean")
    parser.add_argument("--command")
    args = parser.parse_args()
    started = time.perf_counter()
    sizes = [2000, 6000] if args.quick else [int(x) for x in args.sizes.split(",")]
    runs = 1 if args.quick else args.runs
    only = set(args.only) - ({"library", "xray", "tree", "stats"} if args.quick else set())
    with tempfile.TemporaryDirectory() as tmp:
        ours, how = command_of(args, tmp)
        core = subprocess.run([ours, "--version"], capture_output=True, text=True).stdout
        print(f"timed: {ours} ({how}); Python: {python_of(ours)}")
        print(f"{core.strip()}; {os.cpu_count()} cores; medians of {runs}\n")
        table = Table()
        if "dense" in only:
            dense(table, ours, tmp, sizes, runs)
        if "sparse" in only:
            sparse(table, ours, tmp, runs, 20_000 if args.quick else args.csmith_lines)
        if "macho" in only:
            macho(table, ours, tmp, sizes, runs)
        if "library" in only:
            library(table, ours, tmp, runs, args.library)
        if "stats" in only:
            stats(table, ours, tmp, runs, args.library)
        if "xray" in only:
            xray(table, ours, runs)
        if "tree" in only:
            tree(table, ours, tmp, args.tree_runs, [os.path.abspath(f) for f in args.tree])
        if "overhead" in only:
            overhead(table, ours, tmp, 1 if args.quick else 3,
                     min(args.overhead_files, 100) if args.quick else args.overhead_files)
        if "startup" in only:
            startup_rows(table, ours, tmp, 1 if args.quick else args.startup_runs)
    table.linearity()
    table.summary([f"item {item} ({part})" for part, item in GOAL_PARTS.items()
                   if part not in only])
    print(f"\nThis run took {time.perf_counter() - started:.0f} s.")


if __name__ == "__main__":
    main()
