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


def _lines(proc: subprocess.CompletedProcess, kind: str) -> list[str]:
    return [line for line in proc.stderr.splitlines() if f": {kind}: " in line]


def test_aarch64_start_after_its_nop_is_an_outermost_frame(tmp_path):
    """glibc's AArch64 _start opens with a nop (bti c where BTI is on) before
    .cfi_undefined x30: readelf shows the FDE's advance of 4 and the rule, in crt1.o
    and in every program linked with it.  --fatal-warnings passes on such a program,
    which still runs; a static one has a note for _start too, and warnings only for
    libc's functions SFrame cannot hold (__longjmp's CFA on x0, ...)."""
    require("aarch64-linux-gnu-gcc", "aarch64-linux-gnu-readelf", "qemu-aarch64")
    crt = subprocess.run(["aarch64-linux-gnu-readelf", "-wf",
                          "/usr/aarch64-linux-gnu/lib/Scrt1.o"], capture_output=True,
                         text=True, check=True).stdout
    assert "DW_CFA_advance_loc: 4 to 0000000000000004\n  DW_CFA_undefined: r30" in crt
    source = tmp_path / "h.c"
    source.write_text('#include <stdio.h>\nint main(void) { puts("hi"); return 0; }\n')
    for link in ([], ["-static"], ["-static-pie"]):
        program = tmp_path / f"h{''.join(link)}"
        subprocess.run(["aarch64-linux-gnu-gcc", "-O2", *link, str(source), "-o",
                        str(program)], check=True)
        proc = run("--in-place", "--fatal-warnings", str(program),
                   cwd=tmp_path)
        start = [line for line in proc.stderr.splitlines() if "'_start'" in line]
        assert len(start) == 1 and ": note: no SFrame FDE for '_start' (an outermost " \
            "frame): return address is undefined at offset 0x4 [ra-undefined]" in start[0], \
            proc.stderr
        if not link:
            assert (proc.returncode, _lines(proc, "error")) == (0, []), proc.stderr
        else:  # the other functions left out are errors here, so nothing was written
            assert proc.returncode == 1 and all("'_start'" not in line
                                                for line in _lines(proc, "error"))
            proc = run("--in-place", str(program), cwd=tmp_path)
            assert proc.returncode == 0, proc.stderr
        ran = subprocess.run(["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu", str(program)],
                             capture_output=True, text=True, check=False)
        assert (ran.returncode, ran.stdout) == (0, "hi\n"), link
        assert subprocess.run(["aarch64-linux-gnu-readelf", "-lW", str(program)],
                              capture_output=True, text=True,
                              check=True).stdout.count("GNU_SFRAME") == 1


# An outermost function's first instructions, assembled: (arch, assembler, body,
# the note's offset or None where a warning is right).
_PADS = (
    ("aarch64", "aarch64-linux-gnu-as", "nop\n\t.cfi_undefined x30\n\tmov x29, #0", 4),
    ("aarch64", "aarch64-linux-gnu-as", "bti c\n\t.cfi_undefined x30\n\tmov x29, #0", 4),
    # Two instructions before it: one past the landing pad.
    ("aarch64", "aarch64-linux-gnu-as", "nop\n\tnop\n\t.cfi_undefined x30\n\tmov x29, #0",
     None),
    # A frame record saved, then the RA undefined midway: a surprise, so a warning.
    ("aarch64", "aarch64-linux-gnu-as",
     "stp x29, x30, [sp, -16]!\n\t.cfi_def_cfa_offset 16\n\t.cfi_offset 29, -16\n\t"
     ".cfi_offset 30, -8\n\t.cfi_undefined x30\n\tmov x29, #0", None),
    # The pad saves nothing, but moves the CFA: not the entry state.
    ("aarch64", "aarch64-linux-gnu-as",
     "sub sp, sp, #16\n\t.cfi_def_cfa_offset 16\n\t.cfi_undefined x30\n\tmov x29, #0", None),
    # glibc's x86-64 _start where CET is on: endbr64 (4 bytes) first.
    ("x86_64", "as", "endbr64\n\t.cfi_undefined rip\n\txorl %ebp, %ebp", 4),
    ("x86_64", "as", "endbr64\n\tnop\n\t.cfi_undefined rip\n\txorl %ebp, %ebp", None),
    ("x86_64", "as", "pushq %rbp\n\t.cfi_def_cfa_offset 16\n\t.cfi_undefined rip\n\t"
     "xorl %ebp, %ebp", None),
)


def test_ra_undefined_after_a_landing_pad_is_a_note_and_later_a_warning(tmp_path):
    for arch, assembler, body, note_at in _PADS:
        require(assembler)
        source = tmp_path / "start.s"
        source.write_text(f"\t.text\n\t.globl _start\n_start:\n\t.cfi_startproc\n\t{body}\n"
                          "\tnop\n\t.cfi_endproc\n")
        proc = run(str(source), "--arch", arch, "--fatal-warnings", "-o",
                   str(tmp_path / "start.sframe"), cwd=tmp_path)
        if note_at is not None:
            assert proc.returncode == 0, (body, proc.stderr)
            (note,) = _lines(proc, "note")
            assert note.endswith(f"(an outermost frame): return address is undefined at "
                                 f"offset {note_at:#x} [ra-undefined]"), (body, note)
        else:
            assert proc.returncode == 1, (body, proc.stderr)
            assert "error: no SFrame FDE for '_start': return address is undefined" \
                in proc.stderr and "outermost" not in proc.stderr, (body, proc.stderr)
        # V3 holds each of them exactly (an RA-undefined row), so nothing is left out.
        proc = run(str(source), "--arch", arch, "--sframe-version", "3", "--fatal-warnings",
                   "-o", str(tmp_path / "start.sframe"), cwd=tmp_path)
        assert (proc.returncode, proc.stderr) == (0, ""), (body, proc.stderr)


def test_x86_64_and_s390x_programs_pass_fatal_warnings_in_place(tmp_path):
    """Their _start has the RA undefined from the first instruction (in the CIE):
    a note, so --fatal-warnings passes on an ordinary program, which still runs."""
    source = tmp_path / "h.c"
    source.write_text('#include <stdio.h>\nint main(void) { puts("hi"); return 0; }\n')
    for compiler, runner in (("gcc", []),
                             ("s390x-linux-gnu-gcc", ["qemu-s390x", "-L",
                                                      "/usr/s390x-linux-gnu"])):
        require(compiler, *runner[:1])
        program = tmp_path / compiler
        subprocess.run([compiler, "-O2", str(source), "-o", str(program)], check=True)
        proc = run("--in-place", "--fatal-warnings", str(program), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        (note,) = _lines(proc, "note")
        assert "'_start' (an outermost frame)" in note and not _lines(proc, "warning")
        ran = subprocess.run([*runner, str(program)], capture_output=True, text=True,
                             check=False)
        assert (ran.returncode, ran.stdout) == (0, "hi\n"), compiler
