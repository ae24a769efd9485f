"""Start-up per command on the smallest input (docs/performance.md, "Start-up").

For each command: the modules it imports beyond the interpreter's own start-up, their
summed ``-X importtime`` self times (what our imports cost, the interpreter's ``site``
apart), and the wall time best-of-N and median of ``python3 -m cfi2sframe``, of the
command as an installed user runs it (``inst``: the ``cfi2sframe`` script pip writes
for the console entry point, which imports ``re`` and calls ``cfi2sframe.cli:entry``,
run by a virtual environment made here without pip, the package linked into its
site-packages, so its ``site`` runs but no other package's ``.pth`` hooks: this
machine's editable install and certificate hook cost some 50 ms before our first
import; no ``runpy``, which ``-m`` adds) and of ``python3 -S -c 'from cfi2sframe.cli
import entry; entry()'`` (no ``site``: the interpreter and our code only).  With
``--instructions`` (valgrind present) each command's instructions in the installed
form, which the machine's load does not move.  Run from anywhere::

    python3 benchmarks/startup.py [-n 20] [--root CHECKOUT] [--instructions] [--only ELF]

It works in a temporary folder: the example's object, an XRay trace and a snapshot.
The checkout's bytecode is compiled first, as an install compiles it: a checkout
without it (``PYTHONDONTWRITEBYTECODE`` set) compiles every module on every run.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
import venv
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
# pyproject.toml's ``dependencies``: an ``.s`` statement read by the grammar needs lark.
DEPENDENCIES = ("lark", "tqdm")

COMMANDS: list[tuple[str, list[str]]] = [
    ("--version", ["--version"]),
    ("--help", ["--help"]),
    ("convert .s -> .o", ["small.s", "-o", "small2.o"]),
    ("convert .s -> .sframe", ["small.s", "-o", "small.sframe"]),
    ("convert ELF .o -> .sframe", ["small.o", "-o", "elf.sframe"]),
    ("convert ELF .o -> .o", ["small.o", "--replace", "-o", "elf.o"]),
    ("convert ELF true --emit elf", ["/usr/bin/true", "--emit", "elf", "-o", "true.elf"]),
    ("dump x.o", ["dump", "small.o"]),
    ("lookup x.o 0", ["lookup", "small.o", "0"]),
    ("verify x.o", ["verify", "small.o"]),
    ("verify /usr/bin/true", ["verify", "/usr/bin/true"]),
    ("stats /usr/bin/true", ["stats", "/usr/bin/true"]),
    ("unwind x.o --snapshot", ["unwind", "small.o", "--snapshot", "snap.json"]),
    ("compact .s", ["compact", "small.s"]),
    ("dump trace.xray", ["dump", "trace.xray"]),
    ("stacks trace.xray", ["stacks", "trace.xray"]),
    ("verify trace.xray", ["verify", "trace.xray"]),
]


def prepare(work: Path, root: Path) -> None:
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "cfi2sframe")],
                   check=True)
    shutil.copy(HERE / "examples" / "frame_pointer.s", work / "small.s")
    env = {**os.environ, "PYTHONPATH": str(root)}
    subprocess.run([sys.executable, "-m", "cfi2sframe", "small.s", "-o", "small.o"],
                   cwd=work, env=env, check=True)
    sys.path.insert(0, str(HERE / "tests" / "support"))
    import xray_traces as t  # noqa: PLC0415 (the tests' trace writer)

    (work / "trace.xray").write_bytes(t.header() + t.block(1, t.func(0, 1, 10) + t.func(1, 1, 10)))
    (work / "snap.json").write_text('{"regs": {"rip": 16, "rsp": 4096, "rbp": 4112}, '
                                    '"memory": [{"address": 4096, "hex": "0000000000000000"}]}')


# The console script pip (23 to 25) writes for ``cfi2sframe = "cfi2sframe.cli:entry"``.
SCRIPT = """#!{python}
# -*- coding: utf-8 -*-
import re
import sys
from cfi2sframe.cli import entry
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(entry())
"""


def installed(work: Path, root: Path) -> list[str]:
    """The command an installed user runs, without this machine's ``.pth`` hooks: a
    virtual environment's Python (no pip: nothing fetched) with the checkout's package
    and its dependencies (this Python's, linked) in its site-packages and pip's console
    script in its ``bin``, as ``pip install`` leaves them."""
    home = work / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(home)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(home),
                                                    "platbase": str(home)}))
    (site / "cfi2sframe").symlink_to(root / "cfi2sframe")
    for name in DEPENDENCIES:  # as pip installs them beside the package
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin is not None:
            (site / name).symlink_to(Path(spec.origin).parent)
    script = home / "bin" / "cfi2sframe"
    script.write_text(SCRIPT.format(python=home / "bin" / "python3"))
    script.chmod(0o755)
    return [str(home / "bin" / "python3"), str(script)]


def instructions(cmd: list[str], work: Path) -> float:
    """Millions of instructions the whole process runs (valgrind's callgrind), without
    the caller's ``PYTHONPATH``: the installed command finds the checkout's package in its
    virtual environment, as a user's finds it (a ``PYTHONPATH`` named another checkout
    under ``--root``, and adds a folder every import searches: ~1M)."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                           *cmd], cwd=work, env=env, capture_output=True, text=True)
    line = next(line for line in done.stderr.splitlines() if "Collected" in line)
    return int(line.split()[-1]) / 1e6


def imports(argv: list[str], work: Path, root: Path) -> tuple[int, float, list[str]]:
    """(modules, their summed self µs in ms, names) imported after ``site``."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "cfi2sframe", *argv],
                          cwd=work, env=env, capture_output=True, text=True)
    lines = [line for line in done.stderr.splitlines() if line.startswith("import time:")]
    names, total, after_site = [], 0, False
    for line in lines[1:]:
        self_us, _, name = (part.strip() for part in line[12:].split("|"))
        if after_site:
            names.append(name.strip())
            total += int(self_us)
        elif name == "site":  # the top of site's tree: everything after is ours
            after_site = True
    return len(names), total / 1000, names


def wall(cmd: list[str], work: Path, root: Path, n: int) -> tuple[float, float]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    times = []
    for _ in range(n):
        start = time.perf_counter()
        subprocess.run(cmd, cwd=work, env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return min(times) * 1000, statistics.median(times) * 1000


def paired(argv_of: dict[Path, list[str]], work: Path, n: int) -> dict[Path, tuple[float, float]]:
    """Wall time best-of-n and median of each checkout's command, their runs
    alternated (this machine's speed drifts between blocks of runs)."""
    times: dict[Path, list[float]] = {root: [] for root in argv_of}
    for _ in range(n):
        for root, cmd in argv_of.items():
            env = {**os.environ, "PYTHONPATH": str(root)}
            start = time.perf_counter()
            subprocess.run(cmd, cwd=work, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            times[root].append(time.perf_counter() - start)
    return {root: (min(t) * 1000, statistics.median(t) * 1000) for root, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=20)
    parser.add_argument("--root", type=Path, default=HERE)
    parser.add_argument("--names", action="store_true", help="list each command's modules")
    parser.add_argument("--only", metavar="WORD",
                        help="the commands whose label holds WORD (e.g. ELF)")
    parser.add_argument("--instructions", action="store_true",
                        help="each installed command's instructions (valgrind)")
    parser.add_argument("--against", type=Path, metavar="CHECKOUT",
                        help="compare with another checkout (its compiled core built): "
                             "modules, import ms and python3 -m wall time of both, the "
                             "runs alternated")
    args = parser.parse_args()
    root = args.root.resolve()
    if args.against:
        compare(root, args.against.resolve(), args.n, args.only)
        return
    with tempfile.TemporaryDirectory() as name:
        work = Path(name)
        prepare(work, root)
        command = installed(work, root)
        python = command[0]
        for label, cmd in [("python3 -c pass", [sys.executable, "-c", "pass"]),
                           ("installed python3 -c pass", [python, "-c", "pass"]),
                           ("installed -c 'import re'", [python, "-c", "import re"]),
                           ("python3 -S -c pass", [sys.executable, "-S", "-c", "pass"])]:
            best, median = wall(cmd, work, root, args.n)
            count = f"{instructions(cmd, work):7.1f}M" if args.instructions else ""
            print(f"{label:28} {'':>7} {'':>8} {best:7.1f} {median:7.1f} {count}")
        print(f"{'command':28} {'modules':>7} {'imp ms':>8} {'-m best':>7} {'median':>7} "
              f"{'inst best':>9} {'median':>7} {'-S best':>7} {'median':>7}"
              + (f" {'inst instr':>10}" if args.instructions else ""))
        entry = "from cfi2sframe.cli import entry; entry()"
        for label, argv in COMMANDS:
            if args.only and args.only not in label:
                continue
            count, ms, names = imports(argv, work, root)
            best, median = wall([sys.executable, "-m", "cfi2sframe", *argv], work, root, args.n)
            ibest, imedian = wall([*command, *argv], work, root, args.n)
            sbest, smedian = wall([sys.executable, "-S", "-c", entry, *argv], work, root,
                                  args.n)
            extra = (f" {instructions([*command, *argv], work):9.1f}M"
                     if args.instructions else "")
            print(f"{label:28} {count:7} {ms:8.1f} {best:7.1f} {median:7.1f} {ibest:9.1f} "
                  f"{imedian:7.1f} {sbest:7.1f} {smedian:7.1f}{extra}", flush=True)
            if args.names:
                print("   ", " ".join(names))


def compare(root: Path, other: Path, n: int, only: str | None = None) -> None:
    with tempfile.TemporaryDirectory() as name:
        work = Path(name)
        prepare(work, root)
        print(f"{'command':28} {'before: modules':>15} {'imp ms':>6} {'best':>6} {'median':>6}"
              f"   {'after: modules':>14} {'imp ms':>6} {'best':>6} {'median':>6}")
        for label, argv in COMMANDS:
            if only and only not in label:
                continue
            counts = {r: imports(argv, work, r) for r in (other, root)}
            for _ in range(4):  # import ms: the least of 5, alternated
                for r in (other, root):
                    again = imports(argv, work, r)
                    counts[r] = min(counts[r], again, key=lambda c: c[1])
            walls = paired({r: [sys.executable, "-m", "cfi2sframe", *argv]
                            for r in (other, root)}, work, n)
            print(f"{label:28} " + "   ".join(
                f"{counts[r][0]:15} {counts[r][1]:6.1f} {walls[r][0]:6.1f} {walls[r][1]:6.1f}"
                for r in (other, root)), flush=True)


if __name__ == "__main__":
    main()
