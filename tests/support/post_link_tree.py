"""The post-link step over a copy of installed files, measured: the machinery shared by
``benchmarks/post_link_tree.py`` (the figures of docs/post-link.md) and
``tests/system/test_post_link_tree.py`` (the same figures as assertions).

Every regular 64-bit ELF program and shared library under some roots is copied twice
(``WORK/orig`` and ``WORK/conv``, the same relative paths); ``WORK/conv`` is converted
by the command with its default options (``--in-place -r``); then both copies are
run the same way and compared: programs with ``--version`` and ``--help``, libraries
through ``dlopen``, natively (where the host runs the file) and under qemu-user.
``verify -r`` checks the converted tree.

Sizes and the ``.sframe`` section are read here from the files' own headers (a few
lines of ``struct``, not the package's reader), so the figures do not depend on the
code they measure.  Standard library only.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

ET_EXEC, ET_DYN = 2, 3
EM_X86_64, EM_AARCH64 = 62, 183
PT_DYNAMIC, PT_INTERP = 2, 3
DT_NULL, DT_FLAGS_1 = 0, 0x6FFFFFFB
DF_1_PIE = 0x08000000
MACHINES = {EM_X86_64: "x86_64", EM_AARCH64: "aarch64"}
# qemu-user for each target, with its sysroot where the host has none of its own.
QEMU = {EM_X86_64: ["qemu-x86_64"],
        EM_AARCH64: ["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"]}
# The C compiler that builds the dlopen probe for each target.
COMPILER = {EM_X86_64: "gcc", EM_AARCH64: "aarch64-linux-gnu-gcc"}
HOST_MACHINE = {"x86_64": EM_X86_64, "aarch64": EM_AARCH64}.get(platform.machine())
ARGUMENTS = ("--version", "--help")

# Programs never run (as root they could change this machine, or they ignore their
# arguments): a name in DENY, or one starting with a prefix in DENY_PREFIXES.  Under
# an sbin folder only --version is run.
DENY = frozenset({
    "shutdown", "reboot", "halt", "poweroff", "init", "telinit", "runlevel", "systemctl",
    "ctrlaltdel", "killall5", "kill", "killall", "pkill", "skill", "snice", "pidwait",
    "xkill", "login", "su", "sulogin", "agetty", "getty", "newgrp", "sg", "passwd",
    "chage", "chfn", "chsh", "gpasswd", "chpasswd", "chgpasswd", "mount", "umount",
    "swapon", "swapoff", "mkswap", "wipefs", "blkdiscard", "fsfreeze", "hwclock",
    "rtcwake", "pivot_root", "switch_root", "ldconfig", "hostnamectl", "timedatectl",
    "localectl", "loginctl", "networkctl", "busctl", "systemd-firstboot",
    "systemd-machine-id-setup", "systemd-sysusers", "systemd-tmpfiles", "systemd-repart",
    "systemd-sysext", "systemd-cryptenroll", "systemd-mount", "systemd-run",
    "systemd-notify", "systemd-inhibit", "systemd-socket-activate",
    "start-stop-daemon", "sysctl", "losetup", "dmsetup", "zramctl",
})
DENY_PREFIXES = ("mkfs", "fsck", "e2fsck", "mke2fs", "tune2fs", "resize2fs", "fdisk",
                 "sfdisk", "cfdisk", "parted", "debugfs")
TIMEOUT = 5.0

DLOPEN_C = r"""#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
    if (argc != 2) return 2;
    if (!dlopen(argv[1], RTLD_NOW | RTLD_LOCAL)) {
        fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    return 0;
}
"""


@dataclass
class ElfFile:
    """One file of the tree: where it came from and what it is."""

    source: str
    rel: str  # its path under WORK/orig and WORK/conv
    size: int
    machine: int
    elf_type: int
    program: bool  # run with --version and --help
    library: bool  # dlopened
    sbin: bool  # under an sbin folder: --version only


def _elf_facts(data: bytes) -> tuple[int, int, bool, bool, int] | None:
    """(e_type, e_machine, has PT_INTERP, DF_1_PIE, e_entry) of a little-endian ELF64
    program or shared library, else None."""
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    elf_type, machine = struct.unpack_from("<HH", data, 16)
    if elf_type not in (ET_EXEC, ET_DYN):
        return None
    entry, phoff = struct.unpack_from("<QQ", data, 24)
    phentsize, phnum = struct.unpack_from("<HH", data, 54)
    interp = pie = False
    for n in range(phnum):
        at = phoff + n * phentsize
        if at + 56 > len(data):
            break
        kind, _, offset, _, _, filesz = struct.unpack_from("<IIQQQQ", data, at)
        interp |= kind == PT_INTERP
        if kind == PT_DYNAMIC:
            for d in range(offset, min(offset + filesz, len(data)) - 15, 16):
                tag, value = struct.unpack_from("<qQ", data, d)
                if tag == DT_NULL:
                    break
                if tag == DT_FLAGS_1 and value & DF_1_PIE:
                    pie = True
    return elf_type, machine, interp, pie, entry


def sections(path: Path) -> list[tuple[str, int, int, int, int]]:
    """(name, type, address, offset, size) of each section of a little-endian ELF64 file."""
    data = path.read_bytes()
    shoff, = struct.unpack_from("<Q", data, 40)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 58)
    if not shoff or not shnum:
        return []
    rows = [struct.unpack_from("<IIQQQQ", data, shoff + n * shentsize) for n in range(shnum)]
    names_at = rows[shstrndx][4]
    out = []
    for name, kind, _, address, offset, size in rows:
        end = data.index(b"\0", names_at + name)
        out.append((data[names_at + name:end].decode(errors="replace"), kind, address, offset,
                    size))
    return out


def sframe_bytes(path: Path) -> int:
    """The size of the sections named ``.sframe`` of an ELF64 file (0 when none)."""
    return sum(size for name, _, _, _, size in sections(path) if name == ".sframe")


PAGE = 4096
# The largest page of each target's kernels (the x86-64 and AArch64 psABIs: 4 KiB; 4, 16
# or 64 KiB): the bound on what a file may grow by besides .sframe.
LARGEST_PAGE = {EM_X86_64: 0x1000, EM_AARCH64: 0x10000}


def growth_bound(converted: Path) -> int:
    """What a first conversion may add besides ``.sframe``: a page of the file's target
    (issue 39), for every file.  A program whose table cannot grow where it is may
    still take up to a page of zeros for old kernels and its table after them (more
    than a page in all); with .dynsym moving too, no file of the measured trees does."""
    with open(converted, "rb") as handle:
        machine, = struct.unpack_from("<H", handle.read(20), 18)
    return LARGEST_PAGE[machine]


R_X86_64_64, R_AARCH64_ABS64 = 1, 257
SHT_RELA = 4


def symbol_addends_among_first_sections(path: Path) -> list[int]:
    """The addends of absolute relocations against a symbol (R_X86_64_64,
    R_AARCH64_ABS64 with a symbol index) that fall among the addresses of ``.interp``,
    the notes and the hash tables: offsets from that symbol which a reader taking
    every addend for an address mistakes for a reference to those sections."""
    rows = sections(path)
    first = [(address, address + size) for name, kind, address, _, size in rows
             if name == ".interp" or kind in (5, 7, 0x6FFFFFF6)]
    if not first:
        return []
    low, high = min(a for a, _ in first), max(b for _, b in first)
    data = path.read_bytes()
    out = []
    for _, kind, _, offset, size in rows:
        if kind != SHT_RELA:
            continue
        for _, info, addend in struct.iter_unpack("<QQq", data[offset:offset + size - size % 24]):
            if info & 0xFFFFFFFF in (R_X86_64_64, R_AARCH64_ABS64) and info >> 32 \
                    and low <= addend < high:
                out.append(addend)
    return out


def find_files(roots: Sequence[str], limit: int | None = None) -> list[ElfFile]:
    """Every regular (not symbolic link) ELF64 program or shared library of the targets
    above under ``roots``, no larger than ``limit`` bytes; sorted by path."""
    found = []
    for root in roots:
        for folder, _, names in os.walk(root):
            for name in names:
                path = os.path.join(folder, name)
                if os.path.islink(path) or not os.path.isfile(path):
                    continue
                size = os.path.getsize(path)
                if limit is not None and size > limit:
                    continue
                try:
                    with open(path, "rb") as handle:
                        head = handle.read(64)
                        if head[:4] != b"\x7fELF":
                            continue
                        data = head + handle.read()
                except OSError:
                    continue
                facts = _elf_facts(data)
                if facts is None or facts[1] not in MACHINES:
                    continue
                elf_type, machine, interp, pie, _ = facts
                executable = os.access(path, os.X_OK)
                parts = Path(path).parts
                in_bin = any(p in ("bin", "sbin") for p in parts)
                program = (elf_type == ET_EXEC or pie
                           or (executable and (interp or in_bin)))
                library = elf_type == ET_DYN and not pie
                found.append(ElfFile(path, path.lstrip("/"), size, machine, elf_type,
                                     program, library, "sbin" in parts))
    return sorted(found, key=lambda f: f.rel)


def denied(name: str) -> bool:
    return name in DENY or name.startswith(DENY_PREFIXES) or any(
        word in name for word in ("reboot", "shutdown", "poweroff"))


def copy_files(files: Iterable[ElfFile], work: Path) -> None:
    """WORK/orig and WORK/conv, each a copy of every file (mode and times kept)."""
    for f in files:
        for side in ("orig", "conv"):
            target = work / side / f.rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f.source, target)


def cfi2sframe_env() -> dict[str, str]:
    """The environment the command runs in: this one (PYTHONPATH picks the checkout)."""
    return dict(os.environ)


def convert(work: Path, jobs: int, extra: Sequence[str] = ()) -> tuple[int, dict[str, dict]]:
    """``--in-place -r WORK/conv`` with the default options: (exit status, the journal's
    records by relative path)."""
    journal = work / "convert.jsonl"
    journal.unlink(missing_ok=True)
    proc = subprocess.run([sys.executable, "-m", "cfi2sframe", "--in-place", "-r",
                           str(work / "conv"), "--jsonl", str(journal), "-j", str(jobs), "-q",
                           *extra], cwd=work, env=cfi2sframe_env(), capture_output=True,
                          text=True, check=False)
    assert "Traceback" not in proc.stderr, proc.stderr
    records = {}
    conv = str(work / "conv") + "/"
    for line in journal.read_text().splitlines():
        record = json.loads(line)
        records[record["path"].removeprefix(conv)] = record
    return proc.returncode, records


def verify(work: Path, jobs: int) -> tuple[int, list[dict]]:
    """``verify -r WORK/conv``: (exit status, the records of files with a problem)."""
    journal = work / "verify.jsonl"
    journal.unlink(missing_ok=True)
    proc = subprocess.run([sys.executable, "-m", "cfi2sframe", "verify", "-r",
                           str(work / "conv"), "--jsonl", str(journal), "-j", str(jobs), "-q"],
                          cwd=work, env=cfi2sframe_env(), capture_output=True, text=True,
                          check=False)
    assert "Traceback" not in proc.stderr, proc.stderr
    problems = []
    for line in journal.read_text().splitlines():
        record = json.loads(line)
        checked = record.get("verify")
        if record["status"] not in ("ok", "no-cfi", "no-sframe") or (
                checked is not None and not checked.get("ok")):
            problems.append(record)
    return proc.returncode, problems


def which_cfi2sframe(work: Path) -> str:
    """Where the package the command runs is (the checkout PYTHONPATH names)."""
    return subprocess.run([sys.executable, "-c", "import cfi2sframe; print(cfi2sframe.__file__)"],
                          cwd=work, env=cfi2sframe_env(), capture_output=True, text=True,
                          check=True).stdout.strip()


# Runs ------------------------------------------------------------------------------

def dlopen_probe(work: Path, machine: int) -> Path | None:
    """The dlopen probe built for ``machine`` (None where its compiler is missing)."""
    compiler = COMPILER[machine]
    if shutil.which(compiler) is None:
        return None
    probe = work / f"dlopen-{MACHINES[machine]}"
    if not probe.exists():
        source = work / "dlopen.c"
        source.write_text(DLOPEN_C)
        subprocess.run([compiler, "-O2", str(source), "-o", str(probe), "-ldl"], check=True)
    return probe


def runners(machine: int) -> list[tuple[str, list[str]]]:
    """(name, command prefix) of each way to run a file of ``machine`` here."""
    out = []
    if machine == HOST_MACHINE:
        out.append(("native", []))
    if shutil.which(QEMU[machine][0]):
        out.append((QEMU[machine][0], QEMU[machine]))
    return out


def run_once(command: list[str], timeout: float = TIMEOUT) -> str:
    """The outcome of one run: ``exit N``, ``signal N`` or ``timeout``.  Standard input
    /dev/null, output discarded, a scratch working folder, ``env -i
    PATH=/usr/bin:/bin``, its own session, killed with its whole group at the timeout."""
    scratch = tempfile.mkdtemp(prefix="run-")
    try:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, cwd=scratch,
                                env={"PATH": "/usr/bin:/bin"}, start_new_session=True)
        try:
            status = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            return "timeout"
        return f"signal {-status}" if status < 0 else f"exit {status}"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@dataclass
class Comparison:
    """One check run on both copies: what it was, and each copy's outcome."""

    rel: str
    kind: str  # "--version", "--help" or "dlopen"
    runner: str
    orig: str
    conv: str

    @property
    def same(self) -> bool:
        return self.orig == self.conv


def _compare(work: Path, f: ElfFile, kind: str, runner: tuple[str, list[str]],
             probe: Path | None) -> Comparison:
    def outcome(side: str) -> str:
        path = str(work / side / f.rel)
        command = [path, kind] if kind != "dlopen" else [str(probe), path]
        return run_once(runner[1] + command)

    result = Comparison(f.rel, kind, runner[0], outcome("orig"), outcome("conv"))
    if not result.same:  # a loaded machine: once more before it counts
        result.orig, result.conv = outcome("orig"), outcome("conv")
    return result


def checks(files: Sequence[ElfFile]) -> tuple[list[tuple[ElfFile, str]], list[str]]:
    """(file, "--version" / "--help" / "dlopen") to run, and the programs skipped."""
    todo: list[tuple[ElfFile, str]] = []
    skipped = []
    for f in files:
        if f.program:
            if denied(Path(f.rel).name):
                skipped.append(f.rel)
            else:
                todo += [(f, kind) for kind in ARGUMENTS if kind == "--version" or not f.sbin]
        if f.library:
            todo.append((f, "dlopen"))
    return todo, skipped


def run_checks(work: Path, files: Sequence[ElfFile], jobs: int) -> tuple[list[Comparison],
                                                                         list[str]]:
    """Every check on both copies under every runner, ``jobs`` at a time."""
    todo, skipped = checks(files)
    probes = {m: dlopen_probe(work, m) for m in {f.machine for f, kind in todo
                                                  if kind == "dlopen"}}
    tasks = [(f, kind, runner) for f, kind in todo for runner in runners(f.machine)
             if kind != "dlopen" or probes[f.machine] is not None]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        done = list(pool.map(lambda t: _compare(work, t[0], t[1], t[2], probes.get(t[0].machine)),
                             tasks))
    return done, skipped


# Figures ---------------------------------------------------------------------------

@dataclass
class Report:
    roots: list[str]
    limit: int | None
    package: str
    files: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)  # path -> message (refused, ...)
    bytes_before: int = 0
    bytes_after: int = 0
    sframe_bytes: int = 0  # .sframe added to the converted files
    converted: int = 0
    growth: dict[str, int] = field(default_factory=dict)  # path -> bytes beyond .sframe
    sframe_of: dict[str, int] = field(default_factory=dict)
    machine_of: dict[str, str] = field(default_factory=dict)
    convert_status: int = 0
    runs: list[dict] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    verify_status: int = 0
    verify_problems: list[dict] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)  # copy, convert, runs, verify

    def distribution(self) -> dict[str, float]:
        values = sorted(self.growth.values())
        if not values:
            return {}
        p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
        return {"median": statistics.median(values), "p90": p90, "max": values[-1]}

    def largest(self, count: int = 3) -> list[tuple[str, int]]:
        return sorted(self.growth.items(), key=lambda item: -item[1])[:count]

    @property
    def tree_multiple(self) -> float:
        return (self.bytes_after - self.bytes_before) / self.sframe_bytes if self.sframe_bytes \
            else float("nan")

    def run_table(self) -> dict[tuple[str, str], tuple[int, int, int]]:
        """(check, runner) -> (compared, same, orig passed)."""
        table: dict[tuple[str, str], list[int]] = {}
        for run in self.runs:
            row = table.setdefault((run["kind"], run["runner"]), [0, 0, 0])
            row[0] += 1
            row[1] += run["orig"] == run["conv"]
            row[2] += run["orig"] == "exit 0"
        return {key: (a, b, c) for key, (a, b, c) in sorted(table.items())}

    def differing(self) -> list[dict]:
        return [run for run in self.runs if run["orig"] != run["conv"]]


def measure(roots: Sequence[str], work: Path, limit: int | None = None, jobs: int = 2,
            run: bool = True) -> Report:
    """Copy, convert, run and verify; the figures."""
    work.mkdir(parents=True, exist_ok=True)
    for side in ("orig", "conv"):
        shutil.rmtree(work / side, ignore_errors=True)
    clock = time.monotonic()
    files = find_files(roots, limit)
    copy_files(files, work)
    report = Report(list(roots), limit, which_cfi2sframe(work), files=len(files))

    def lap(name: str) -> None:
        nonlocal clock
        report.seconds[name] = round(time.monotonic() - clock, 1)
        clock = time.monotonic()

    lap("copy")
    report.convert_status, records = convert(work, jobs)
    lap("convert")
    for f in files:
        record = records.get(f.rel, {"status": "missing", "error": "no record"})
        status = record["status"]
        report.statuses[status] = report.statuses.get(status, 0) + 1
        if record.get("error"):
            report.errors[f.rel] = record["error"]
        before = f.size
        after = (work / "conv" / f.rel).stat().st_size
        report.bytes_before += before
        report.bytes_after += after
        report.machine_of[f.rel] = MACHINES[f.machine]
        if status == "ok" and after != before:
            added = sframe_bytes(work / "conv" / f.rel) - sframe_bytes(work / "orig" / f.rel)
            report.converted += 1
            report.sframe_bytes += added
            report.sframe_of[f.rel] = added
            report.growth[f.rel] = after - before - added
    if run:
        comparisons, report.skipped = run_checks(work, files, jobs)
        report.runs = [asdict(c) for c in comparisons]
        lap("runs")
    report.verify_status, report.verify_problems = verify(work, jobs)
    lap("verify")
    return report


def _size(n: float) -> str:
    return f"{n:,.0f}"


def render(report: Report) -> str:
    """The report as a readable table."""
    lines = [f"roots: {' '.join(report.roots)}"
             + (f" (files up to {_size(report.limit)} bytes)" if report.limit else ""),
             f"cfi2sframe: {report.package}", ""]
    refused = report.statuses.get("error", 0)
    others = sum(v for k, v in report.statuses.items() if k not in ("ok", "error"))
    lines += ["| files | converted | refused/errors | kept (other statuses) | exit status |",
              "|---|---|---|---|---|",
              f"| {report.files} | {report.converted} | {refused} | {others} "
              f"({', '.join(f'{k} {v}' for k, v in sorted(report.statuses.items()) if k != 'ok')})"
              f" | {report.convert_status} |", ""]
    dist = report.distribution()
    growth = report.bytes_after - report.bytes_before
    lines += ["| bytes before | bytes after | growth | .sframe bytes | growth / .sframe |",
              "|---|---|---|---|---|",
              f"| {_size(report.bytes_before)} | {_size(report.bytes_after)} | {_size(growth)} "
              f"| {_size(report.sframe_bytes)} | {report.tree_multiple:.3f}x |", ""]
    if dist:
        largest = ", ".join(f"{Path(p).name} {_size(g)} (.sframe {_size(report.sframe_of[p])})"
                            for p, g in report.largest())
        over = sum(1 for g in report.growth.values() if g > 4096)
        lines += ["| growth beyond .sframe per file | median | p90 | max | over 4096 |",
                  "|---|---|---|---|---|",
                  f"| bytes | {_size(dist['median'])} | {_size(dist['p90'])} | "
                  f"{_size(dist['max'])} | {over} |", "", f"largest: {largest}", ""]
    if report.runs or report.skipped:
        lines += ["| check | runner | compared | same | orig exit 0 |", "|---|---|---|---|---|"]
        for (kind, runner), (count, same, passed) in report.run_table().items():
            lines.append(f"| {kind} | {runner} | {count} | {same} | {passed} |")
        lines += ["", f"not run (deny-list): {' '.join(sorted(report.skipped)) or 'none'}"]
        for run in report.differing():
            lines.append(f"DIFFERS: {run['rel']} {run['kind']} ({run['runner']}): "
                         f"orig {run['orig']}, conv {run['conv']}")
        lines.append("")
    lines.append(f"verify -r: {len(report.verify_problems)} files with problems "
                 f"(exit status {report.verify_status})")
    lines.append("seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in report.seconds.items()))
    for record in report.verify_problems:
        lines.append(f"  {record['path']}: {record['status']} {record.get('error') or ''} "
                     f"{record.get('verify')}")
    for path, message in sorted(report.errors.items()):
        lines.append(f"ERROR {path}: {message}")
    return "\n".join(lines)


def as_json(report: Report) -> str:
    data = asdict(report)
    data["distribution"] = report.distribution()
    data["tree_multiple"] = report.tree_multiple
    data["run_table"] = [{"check": k, "runner": r, "compared": a, "same": b, "orig_exit_0": c}
                         for (k, r), (a, b, c) in report.run_table().items()]
    return json.dumps(data, indent=1)
