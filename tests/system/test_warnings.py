"""Warnings like a compiler's: per reason code (-Wno-REASON, -Werror=REASON, -Werror),
and the outermost frame of every program's _start a note that --fatal-warnings does
not fail on (V2 cannot hold it, so leaving it out is the correct result: with
--fatal-warnings every program failed, 614 of 614 in /usr/bin)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cfi2sframe.reasons import COMPACT_REASONS, SFRAME_REASONS
from tests.conftest import require, small_program

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "cfi2sframe", *args], cwd=cwd,
                          capture_output=True, text=True, check=False)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def _two_functions(folder: Path) -> Path:
    """with_frame (SFrame holds it) and realigned (left out: cfa-not-sp-fp)."""
    both = folder / "both.s"
    both.write_text((EXAMPLES / "frame_pointer.s").read_text() + (
        EXAMPLES / "realigned.s").read_text().replace(".LFB0", ".LFB9").replace(
            ".LFE0", ".LFE9"))
    return both


def test_the_outermost_frame_of_start_is_a_note_not_a_failure(tmp_path):
    require("gcc")
    program = small_program(tmp_path)
    out = tmp_path / "prog.sframe"
    proc = run(str(program), "--fatal-warnings", "-o", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    notes = [line for line in proc.stderr.splitlines() if ": note: " in line]
    assert any("no SFrame FDE for '_start' (an outermost frame)" in line
               and line.endswith("[ra-undefined]") for line in notes), proc.stderr
    assert "warning" not in proc.stderr and "error" not in proc.stderr
    assert out.stat().st_size > 28
    assert run(str(program), "-w", "-o", str(out), cwd=tmp_path).stderr == ""
    out.unlink()
    proc = run(str(program), "-Werror=ra-undefined", "-o", str(out), cwd=tmp_path)
    assert proc.returncode == 1 and not out.exists()
    assert "error: no SFrame FDE for '_start'" in proc.stderr
    assert proc.stderr.splitlines()[-1].endswith(
        "function(s) left out and -Werror=ra-undefined is set")


def test_each_reason_can_be_silenced_or_made_an_error(tmp_path):
    require("as")
    source = _two_functions(tmp_path)
    out = tmp_path / "both.sframe"
    proc = run(str(source), "-o", str(out), cwd=tmp_path)
    assert proc.returncode == 0
    assert ": warning: no SFrame FDE for 'realigned'" in proc.stderr
    # Silenced: nothing printed, and not fatal even with -Werror (as gcc's -Wno-x -Werror).
    for extra in ([], ["-Werror"], ["--fatal-warnings"]):
        proc = run(str(source), "-Wno-cfa-not-sp-fp", *extra, "-o", str(out), cwd=tmp_path)
        assert (proc.returncode, proc.stderr) == (0, ""), (extra, proc.stderr)
    # An error for that reason alone, or for every reason.
    for option, named in (("-Werror=cfa-not-sp-fp", "-Werror=cfa-not-sp-fp"),
                          ("-Werror", "--fatal-warnings")):
        out.unlink(missing_ok=True)
        proc = run(str(source), option, "-o", str(out), cwd=tmp_path)
        assert proc.returncode == 1 and not out.exists(), (option, proc.stderr)
        assert ": error: no SFrame FDE for 'realigned'" in proc.stderr
        assert proc.stderr.splitlines()[-1].endswith(f"left out and {named} is set")
    # Another reason made an error does not touch this one.
    proc = run(str(source), "-Werror=ra-undefined", "-o", str(out), cwd=tmp_path)
    assert proc.returncode == 0 and ": warning: " in proc.stderr


def test_unknown_codes_and_options_are_usage_errors(tmp_path):
    for option, says in (("-Wno-bogus", "unknown reason code 'bogus' in '-Wno-bogus'"),
                         ("-Werror=frame-record", "unknown reason code 'frame-record'"),
                         ("-Wall", "unknown warning option '-Wall'")):
        proc = run(str(EXAMPLES / "frame_pointer.s"), option, "-o",
                   str(tmp_path / "x.sframe"), cwd=tmp_path)
        assert proc.returncode == 2, (option, proc.stderr)
        assert proc.stderr.count("\n") == 1 and says in proc.stderr, proc.stderr
    # A compact reason is known to the compact format.
    proc = run(str(EXAMPLES / "frame_pointer.s"), "--format", "compact-unwind",
               "-Wno-frame-record", "-o", str(tmp_path / "x.compact_unwind"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_list_reasons_lists_both_formats(tmp_path):
    proc = run("--list-reasons", cwd=tmp_path)
    codes = [line.split()[0] for line in proc.stdout.splitlines()
             if line and not line.startswith("compact unwind")]
    assert codes == [*map(str, SFRAME_REASONS), *map(str, COMPACT_REASONS)]


def test_a_skip_is_located_at_the_directive_that_caused_it(tmp_path):
    """Not at .cfi_startproc: at the directive whose rule SFrame cannot hold (the
    line is found in the file by its text, so the test does not count lines)."""
    require("as")
    source = tmp_path / "drap.s"
    source.write_text("\t.text\n\t.globl f\n\t.type f, @function\nf:\n\t.cfi_startproc\n"
                      "\tpushq %rbp\n\t.cfi_def_cfa_offset 16\n\t.cfi_offset 6, -16\n"
                      "\tleaq 16(%rsp), %r10\n\t.cfi_def_cfa 10, 0\n\tnop\n\tpopq %rbp\n"
                      "\t.cfi_def_cfa 7, 8\n\tret\n\t.cfi_endproc\n\t.size f, .-f\n")
    line = source.read_text().splitlines().index("\t.cfi_def_cfa 10, 0") + 1
    proc = run(str(source), "-o", str(tmp_path / "f.sframe"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"drap.s:{line}: warning: no SFrame FDE for 'f': CFA is based on r10 at offset " \
           f"0x6 [cfa-not-sp-fp]" in proc.stderr  # push (1 byte), leaq (5)
    # V3 holds it as FLEX; without FLEX it is left out at the same directive.
    proc = run(str(source), "--sframe-version", "3", "--no-flex", "-o",
               str(tmp_path / "g.sframe"), cwd=tmp_path)
    assert f"drap.s:{line}: warning: no SFrame FDE for 'f': at offset 0x6 " in proc.stderr
    assert "[flex-needed]" in proc.stderr
