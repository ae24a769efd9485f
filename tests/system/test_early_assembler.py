"""The assembler started by the command line before the conversion's imports
(``cli.early``), and taken over by the conversion only where it is the run the
conversion would start (``probe.AssemblerJob``), with GNU as itself.

The command line's output is byte for byte the library's (which starts its own run);
no command line leaves the run's temporary folder behind, whether the conversion took
the run over, refused its output, failed in the assembler or went to probes; and
only the plain forms of the command start anything."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cfi2sframe.arch import get_arch
from cfi2sframe.cli.early import launch
from cfi2sframe.convert import convert_asm
from cfi2sframe.frontend.launch import Launch
from cfi2sframe.frontend.probe import AssemblerJob
from cfi2sframe.linker import object_form
from tests.conftest import require

SOURCE = "".join(f"""\t.text
\t.globl\tf{i}
\t.type\tf{i}, @function
f{i}:
\t.cfi_startproc
\tpushq\t%rbp
\t.cfi_def_cfa_offset 16
\t.cfi_offset 6, -16
\tmovq\t%rsp, %rbp
\t.cfi_def_cfa_register 6
\tmovl\t${i}, %eax
\tpopq\t%rbp
\t.cfi_def_cfa 7, 8
\tret
\t.cfi_endproc
\t.size\tf{i}, .-f{i}
""" for i in range(40))


def _run(args: list[str], cwd: Path, tmpdir: Path) -> subprocess.CompletedProcess:
    """The command with its own TMPDIR, so that what it leaves there can be seen."""
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    proc = subprocess.run([sys.executable, "-m", "cfi2sframe", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, check=False)
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
    return proc


@pytest.fixture
def source(tmp_path: Path) -> Path:
    require("as")
    path = tmp_path / "f.s"
    path.write_text(SOURCE)
    return path


def test_the_output_is_the_librarys_and_nothing_is_left_behind(source: Path,
                                                               tmp_path: Path) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    # The object is what the ld on PATH merges (linker.object_form), the raw section V2.
    form = object_form("auto", None, get_arch("x86_64"))
    for emit, name in (("obj", "f.o"), ("raw", "f.sframe")):
        proc = _run([source.name, "--emit", emit, "-o", name], tmp_path, scratch)
        assert proc.returncode == 0, proc.stderr
        library = convert_asm(SOURCE, source.name, include_dir=str(tmp_path),
                              version=form.version if emit == "obj" else 2,
                              pcrel=form.pcrel if emit == "obj" else True)
        expected = library.obj() if emit == "obj" else library.raw()
        assert (tmp_path / name).read_bytes() == expected
    assert list(scratch.iterdir()) == []


def test_no_run_is_left_behind_where_the_conversion_does_not_take_it(source: Path,
                                                                     tmp_path: Path) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    # the output names the input: refused before any work
    assert _run([source.name, "-o", source.name], tmp_path, scratch).returncode == 1
    # the assembler fails
    bad = tmp_path / "bad.s"
    bad.write_text("\t.text\nf:\n\t.cfi_startproc\n\tnot_an_instruction %rax\n"
                   "\t.cfi_endproc\n")
    failed = _run([bad.name, "-o", "bad.sframe"], tmp_path, scratch)
    assert failed.returncode == 1 and "not_an_instruction" in failed.stderr
    assert not (tmp_path / "bad.sframe").exists()
    # a usage error after the run started
    assert _run([source.name, "--emit", "nonsense"], tmp_path, scratch).returncode == 2
    assert list(scratch.iterdir()) == []


def _stop(started: Launch | None) -> bool:
    if started is None:
        return False
    started.stop()
    return True


def test_only_the_plain_forms_start_the_assembler(source: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    other = tmp_path / "g.s"
    other.write_text(SOURCE)
    probes = tmp_path / "p.s"
    probes.write_text(SOURCE + "\t.section .sframe\n")
    os.mkfifo(tmp_path / "pipe.s")
    (tmp_path / "folder.s").mkdir()
    for plain in (["f.s"], ["f.s", "-o", "f.sframe"], ["--emit=obj", "f.s", "-o", "f.o"],
                  ["-w", "--sframe-version", "3", "f.s", "--output=f.sframe"]):
        assert _stop(launch(plain)), plain
    for other_form in (["f.s", "--arch", "aarch64"], ["f.s", "--assembler", "as"],
                       ["f.s", "g.s"], ["-"], ["f.s", "-o"], ["f.s", "--in-place"],
                       ["f.s", "-r"], ["f.asm"], ["missing.s"], ["pipe.s"], ["folder.s"],
                       ["p.s"], ["compact", "f.s"], ["f.s", "--", "g.s"]):
        assert not _stop(launch(other_form)), other_form


def test_a_run_is_taken_over_only_where_it_is_the_conversions(source: Path) -> None:
    data = source.read_bytes()
    folder = str(source.parent)
    started = Launch(("as",), data, "f.s", folder)
    job = AssemblerJob(("as",), data, "f.s", folder, started)
    assert job.launch is started
    obj, _ = job.finish()
    job.cancel()
    assert obj[:4] == b"\x7fELF" and not os.path.exists(started.tmp.name)
    for differs in ((("as",), data + b"\n", "f.s", folder), (("as",), data, "g.s", folder),
                    (("as", "--64"), data, "f.s", folder), (("as",), data, "f.s", "/")):
        started = Launch(("as",), data, "f.s", folder)
        job = AssemblerJob(*differs, started)
        assert job.launch is not started
        assert started.proc.poll() is not None and not os.path.exists(started.tmp.name)
        job.cancel()


def test_the_assembler_started_early_never_outlives_the_command(source: Path,
                                                               tmp_path: Path) -> None:
    """An assembler that would run for a minute (``as`` on PATH is a stand-in that
    sleeps, with a mark of its own): a command that refuses its output or its
    arguments after starting it leaves no such process."""
    require("pgrep")
    mark = f"{60 + os.getpid() % 1000 / 1000:.3f}"
    stand_in = tmp_path / "bin" / "as"
    stand_in.parent.mkdir()
    stand_in.write_text(f"#!/bin/sh\nexec sleep {mark}\n")
    stand_in.chmod(0o755)
    env = {**os.environ, "PATH": f"{stand_in.parent}{os.pathsep}{os.environ['PATH']}"}
    try:
        for args, status in (([source.name, "-o", source.name], 1),
                             ([source.name, "--emit", "nonsense"], 2)):
            proc = subprocess.run([sys.executable, "-m", "cfi2sframe", *args], cwd=tmp_path,
                                  env=env, capture_output=True, text=True, check=False)
            assert proc.returncode == status, proc.stderr
            left = subprocess.run(["pgrep", "-f", f"sleep {mark}"], capture_output=True,
                                  text=True, check=False).stdout.split()
            assert left == [], args
    finally:
        subprocess.run(["pkill", "-f", f"sleep {mark}"], check=False)


def test_the_early_run_is_the_default_targets_assembler() -> None:
    """cli.early names the default target's assembler itself (importing ``arch`` would
    cost what it saves): it must be the one the conversion's default ``--arch`` runs."""
    from cfi2sframe.arch import ARCHES
    from cfi2sframe.cli import early
    from cfi2sframe.cli.convert import parser

    default = parser().parse_args(["f.s"]).arch
    assert early._ASSEMBLER == (ARCHES[default].default_assembler,)


def test_a_small_text_is_read_before_the_assembler_is_asked_its_version(
        source: Path, tmp_path: Path) -> None:
    """``as --version`` (a process, ~2 ms) runs only where the text leaves it open: a
    small source with no section switch inside a function asks nothing, one with a
    ``.pushsection`` inside a function asks it (``as`` on PATH is a stand-in that
    logs its arguments, then runs the real one)."""
    real = shutil.which("as")
    log = tmp_path / "log"
    stand_in = tmp_path / "bin" / "as"
    stand_in.parent.mkdir()
    stand_in.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec {real} "$@"\n')
    stand_in.chmod(0o755)
    env = {**os.environ, "PATH": f"{stand_in.parent}{os.pathsep}{os.environ['PATH']}"}
    switching = tmp_path / "g.s"
    switching.write_text(SOURCE.replace("\tmovl\t$0, %eax\n",
                                        "\tmovl\t$0, %eax\n\t.pushsection .data\n\t.long 1\n"
                                        "\t.popsection\n", 1))
    for name, asked in ((source.name, False), (switching.name, True)):
        log.unlink(missing_ok=True)
        proc = subprocess.run([sys.executable, "-m", "cfi2sframe", name, "-o", "out.sframe"],
                              cwd=tmp_path, env=env, capture_output=True, text=True,
                              check=False)
        assert proc.returncode == 0, proc.stderr
        assert ("--version" in log.read_text().splitlines()) == asked, name
