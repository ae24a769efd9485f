"""Ordinary conditions are never internal errors (issue 40): a full disk, an I/O error or
a closed pipe on standard output, numbers at and past the bounds of every numeric
option, a bad maps file, usage mistakes (exit 2), and ``--json`` for one file.

Expected values come from the contract (README's exit statuses), from errno's own
words (``os.strerror``), and from readelf for the record's counts.
"""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cfi2sframe.cli import main
from tests.conftest import require, small_program

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _run(*args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    kwargs.setdefault("stdout", subprocess.PIPE)
    return subprocess.run([sys.executable, "-m", "cfi2sframe", *args], text=True, errors="replace",
                          stderr=subprocess.PIPE, check=False, **kwargs)


def _clean(stderr: str) -> None:
    assert "internal error" not in stderr and "Traceback" not in stderr, stderr


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A program, its copy with .sframe, an object, and a snapshot of regs only."""
    require("gcc", "as")
    folder = tmp_path_factory.mktemp("ordinary")
    program = small_program(folder)
    with_sframe = folder / "prog.sf"
    assert main([str(program), "-w", "--emit", "elf", "-o", str(with_sframe)]) == 0
    obj = folder / "f.o"
    subprocess.run(["as", str(EXAMPLES / "frame_pointer.s"), "-o", str(obj)], check=True)
    work = next(int(line.split()[0], 16) for line in subprocess.run(
        ["nm", str(program)], capture_output=True, text=True, check=True).stdout.splitlines()
        if line.endswith(" work"))
    snapshot = folder / "snap.json"
    snapshot.write_text(json.dumps({"regs": {"rip": hex(work), "rsp": "0x7000",
                                             "rbp": "0x0"}, "memory": []}))
    return {"prog": program, "sf": with_sframe, "obj": obj, "snap": snapshot,
            "work": Path(hex(work))}


def _commands(f: dict[str, Path]) -> dict[str, list[str]]:
    """Every command, each printing something on standard output."""
    sf, work = str(f["sf"]), str(f["work"])
    return {
        "convert": [str(f["prog"]), "-w", "-o", "-"],
        "dump": ["dump", sf],
        "dump-json": ["dump", "--json", sf],
        "lookup": ["lookup", sf, work],
        "diff": ["diff", sf, sf],
        "verify": ["verify", sf],
        "verify-json": ["verify", "--json", sf],
        "stats": ["stats", "-q", sf],
        "compact": ["compact", str(f["obj"])],
        "unwind": ["unwind", "--snapshot", str(f["snap"]), sf],
    }


COMMANDS = ["convert", "dump", "dump-json", "lookup", "diff", "verify", "verify-json",
            "stats", "compact", "unwind"]


@pytest.mark.parametrize("command", COMMANDS)
def test_commands_print_something(files: dict[str, Path], command: str) -> None:
    """(The cases below are only worth something where the command writes.)"""
    proc = _run(*_commands(files)[command])
    _clean(proc.stderr)
    assert proc.stdout and proc.returncode in (0, 1), proc.stderr  # unwind: stops early


class _Failing:
    """A standard output whose every write fails with ``code``."""

    def __init__(self, code: int) -> None:
        self.code = code
        self.buffer = self

    def write(self, data: object) -> int:
        raise OSError(self.code, os.strerror(self.code))

    def flush(self) -> None:
        pass


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO])
@pytest.mark.parametrize("command", COMMANDS)
def test_stdout_error_is_one_line(files: dict[str, Path], command: str, code: int,
                                  capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdout", _Failing(code))
    status = main(_commands(files)[command])
    err = capsys.readouterr().err
    assert status == 1
    assert err == f"<stdout>: error: cannot write output: {os.strerror(code)}\n"


@pytest.mark.parametrize("command", COMMANDS)
def test_stdout_closed_pipe_ends_quietly(files: dict[str, Path], command: str,
                                         capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdout", _Failing(errno.EPIPE))
    assert main(_commands(files)[command]) == 128 + signal.SIGPIPE
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("command", COMMANDS)
def test_real_full_disk_and_closed_pipe(files: dict[str, Path], command: str) -> None:
    """/dev/full: ENOSPC, one line, exit 1; a pipe whose reader is gone (``| head -1``):
    killed by SIGPIPE with no message, as cat is."""
    argv = _commands(files)[command]
    with open("/dev/full", "w") as full:
        proc = _run(*argv, stdout=full)
    assert proc.returncode == 1
    assert proc.stderr == "<stdout>: error: cannot write output: No space left on device\n"
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = _run(*argv, stdout=write_end)
    finally:
        os.close(write_end)
    assert proc.returncode == -signal.SIGPIPE and proc.stderr == ""


def _stats(f: dict[str, Path], *options: str) -> subprocess.CompletedProcess[str]:
    return _run("stats", "-q", *options, str(f["sf"]))


@pytest.mark.parametrize(("options", "status"), [
    (["--timeout", "0"], 2), (["--timeout=-1"], 2), (["--timeout", "nan"], 2),
    (["--timeout", "inf"], 2), (["--timeout", "1e30"], 2),
    (["--timeout", "31536000"], 0), (["--timeout", "31536000.5"], 2),
    (["-j", "0"], 2), (["-j=-1"], 2), (["-j", "256"], 0), (["-j", "257"], 2),
    (["-j", "1e3"], 2),
    (["--max-section-size", "0"], 0), (["--max-section-size=-1"], 2),
    (["--max-section-size", "99999999999999999999999G"], 0),
    (["--max-section-ratio", "0"], 2), (["--max-section-ratio", "1"], 0),
    (["--max-section-ratio=-1"], 2), (["--max-section-ratio", "9" * 30], 0),
])
def test_batch_numbers_at_their_bounds(files: dict[str, Path], options: list[str],
                                       status: int) -> None:
    """--timeout above 0 and at most a year; -j 1 to 256 (select() watches descriptors
    below 1024, two per worker); sizes from 0, ratios from 1, however large."""
    proc = _stats(files, *options)
    _clean(proc.stderr)
    assert proc.returncode == status, proc.stderr
    if status == 2:
        assert proc.stderr.splitlines()[-1].startswith("cfi2sframe stats: error: argument ")


@pytest.mark.parametrize(("value", "status"), [
    ("-1", 2), ("0", 0), (hex((1 << 64) - 1), 0), (hex(1 << 64), 2), ("0x", 2)])
@pytest.mark.parametrize("command", ["dump", "lookup", "diff", "compact"])
def test_addresses_at_their_bounds(files: dict[str, Path], value: str, status: int,
                                   command: str) -> None:
    """An address a 64-bit file can hold: 0 to 2**64-1."""
    sf = str(files["sf"])
    argv = {"dump": ["dump", f"--address={value}", sf],
            "lookup": ["lookup", f"--address={value}", sf, str(files["work"])],
            "diff": ["diff", f"--address={value}", sf, sf],
            "compact": ["compact", f"--image-base={value}", str(files["obj"])]}[command]
    proc = _run(*argv)
    _clean(proc.stderr)
    assert proc.returncode == status, proc.stderr


@pytest.mark.parametrize(("frames", "usage"), [("0", True), ("-1", True), ("1", False),
                                               (str(10 ** 30), False)])
def test_max_frames(files: dict[str, Path], frames: str, usage: bool) -> None:
    proc = _run("unwind", f"--max-frames={frames}", "--snapshot", str(files["snap"]),
                str(files["sf"]))
    _clean(proc.stderr)
    assert (proc.returncode == 2) == usage, proc.stderr
    if not usage:
        assert proc.stdout.startswith("#0 ")


def _segments_end(path: Path) -> int:
    """The end of the last PT_LOAD, as readelf gives it."""
    lines = subprocess.run(["readelf", "-lW", str(path)], capture_output=True, text=True,
                           check=True).stdout.splitlines()
    return max(int(parts[2], 16) + int(parts[5], 16)
               for parts in (line.split() for line in lines) if parts[:1] == ["LOAD"])


def test_impossible_sframe_address_refused_before_any_work(files: dict[str, Path],
                                                           tmp_path: Path) -> None:
    """Inside a segment, or 2 GiB or more beyond all of them: one line, no notes of a
    conversion before it, no output.  One byte nearer is not refused by this check."""
    out = tmp_path / "x"
    prog = str(files["prog"])
    text = subprocess.run(["nm", prog], capture_output=True, text=True,
                          check=True).stdout
    main_at = int(next(line for line in text.splitlines() if line.endswith(" main")).split()[0],
                  16)
    end = _segments_end(files["prog"])
    for address, message in ((main_at, "lies inside the segment"),
                             (end + (1 << 31), "is 2 GiB or more from all of")):
        proc = _run(prog, "--sframe-address", hex(address), "-o", str(out))
        assert proc.returncode == 1 and not out.exists()
        assert proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr
    proc = _run(prog, "-w", "--sframe-address", hex(end + (1 << 31) - 1), "-o", str(out))
    _clean(proc.stderr)
    assert "2 GiB" not in proc.stderr
    for other in (str(files["obj"]), str(EXAMPLES / "frameless.s")):
        proc = _run(other, "--sframe-address", "0x5000", "-o", str(out))
        assert proc.returncode == 1 and not out.exists()
        assert proc.stderr.endswith("error: --sframe-address places a linked file's section; "
                                    "the linker places an object's\n")


def test_emit_asm_of_elf_refused_before_any_work(files: dict[str, Path],
                                                 tmp_path: Path) -> None:
    """Without -w: a conversion would have printed its note on _start first."""
    out = tmp_path / "x.s"
    proc = _run(str(files["prog"]), "--emit", "asm", "-o", str(out))
    assert proc.returncode == 1 and not out.exists()
    assert proc.stderr == (f"{files['prog']}: error: --emit asm needs assembly input; use "
                           "--emit raw, obj (objects) or elf (executables, libraries)\n")


def test_maps_file_errors(files: dict[str, Path], tmp_path: Path) -> None:
    junk = tmp_path / "random.bin"
    junk.write_bytes(bytes(range(256)) * 4)
    proc = _run("unwind", "--maps", str(junk), "--snapshot", str(files["snap"]))
    assert proc.returncode == 1
    assert re.fullmatch(rf"{re.escape(str(junk))}:1: error: not a /proc/PID/maps line .*\n",
                        proc.stderr), proc.stderr
    maps = tmp_path / "maps"
    maps.write_text("7f0000000000-7f0000001000 r-xp 00000000 00:00 0 /nonexistent\n\n"
                    "7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0 [stack]\n")
    proc = _run("unwind", "--maps", str(maps), "--snapshot", str(files["snap"]))
    assert proc.returncode == 1
    assert proc.stderr == (f"{maps}: error: no ELF file of the process to walk with: none "
                           "is mapped from its start (offset 0) and readable\n")


@pytest.mark.parametrize("argv", [
    [], ["unwind", "--snapshot", "X"], ["unwind", "PROG"], ["lookup", "--json"],
    ["stats", "--resume", "PROG"], ["verify", "--json", "--consumer", "glibc", "PROG"],
    ["compact"], ["compact", "--place", "nowhere", "--emit", "unwind-info"],
])
def test_usage_errors_exit_2(files: dict[str, Path], argv: list[str]) -> None:
    argv = [str(files["sf"]) if word == "PROG" else word for word in argv]
    proc = _run(*argv)
    _clean(proc.stderr)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines()[-1].startswith("cfi2sframe"), proc.stderr


@pytest.mark.parametrize(("word", "command"), [("dmp", "dump"), ("verfy", "verify"),
                                               ("stat", "stats"), ("unwnd", "unwind")])
def test_mistyped_command(files: dict[str, Path], tmp_path: Path, word: str,
                          command: str) -> None:
    """A plain word naming no file, close to a command; the same word naming a file is
    the conversion's input."""
    proc = _run(word, str(files["sf"]), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == (f"cfi2sframe: error: unknown command '{word}' (did you mean "
                           f"'{command}'?)\n")
    (tmp_path / word).write_text((EXAMPLES / "frameless.s").read_text())
    proc = _run(word, "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out").read_bytes()[:2] == b"\xe2\xde"  # an SFrame section


def test_unknown_word_without_a_near_command_is_an_input(tmp_path: Path) -> None:
    proc = _run("frobnicate", cwd=tmp_path)
    _clean(proc.stderr)
    assert proc.returncode == 1 and proc.stderr.startswith("frobnicate: error: ")


def test_build_unwind_info_refuses_other_architectures() -> None:
    from cfi2sframe import build_unwind_info

    for arch in ("riscv", "s390x"):
        with pytest.raises(ValueError, match=arch):
            build_unwind_info([], arch)


def test_verify_json_one_file(files: dict[str, Path]) -> None:
    """One JSON object, as for many; the record's arch and DWARF FDEs (readelf's count)."""
    proc = _run("verify", "--json", str(files["sf"]))
    _clean(proc.stderr)
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)
    [record] = document["files"]
    frames = subprocess.run(["readelf", "--debug-dump=frames", str(files["sf"])],
                            capture_output=True, text=True, check=True).stdout
    assert record["arch"] == "x86_64"
    assert record["fdes"] == len(re.findall(r" FDE cie=", frames))
    assert record["verify"]["ok"] and document["failed"] == 0
