"""Output naming the input is refused before any work, for every form, and the input is
left byte for byte as it was (GNU as and gcc refuse the same: "The input 'x.s' and output
'x.s' files are the same").  The name may be the input's own, a symbolic link to it or a
hard link to it; the default output name (``x.sframe`` of ``x.sframe --source sframe``) too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import cfi2sframe, gsframe_program, require

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"




def _inputs(folder: Path) -> dict[str, Path]:
    """One input of each kind: assembly, a relocatable object, a linked program, a raw
    SFrame section (made by GNU as and ld, not by us)."""
    require("as", "gcc", "objcopy")
    source = folder / "frame_pointer.s"
    shutil.copy(EXAMPLES / "frame_pointer.s", source)
    obj = folder / "fp.o"
    subprocess.run(["as", str(source), "-o", str(obj)], check=True)
    program = gsframe_program(folder)
    raw = folder / "gs.sframe"
    subprocess.run(["objcopy", "-O", "binary", "--only-section=.sframe", str(program),
                    str(raw)], check=True)
    assert raw.stat().st_size > 0
    return {"asm": source, "obj": obj, "elf": program, "raw": raw}


# (input kind, --emit, extra options)
CASES = [
    ("asm", "raw", []), ("asm", "asm", []), ("asm", "obj", []),
    ("obj", "obj", []), ("obj", "raw", []),
    ("elf", "elf", []), ("elf", "raw", []),
    ("raw", "raw", ["--source", "sframe"]),
]


@pytest.mark.parametrize("link", ["same", "symlink", "hardlink"])
def test_output_naming_the_input_is_refused(tmp_path, link):
    inputs = _inputs(tmp_path)
    for kind, emit, extra in CASES:
        path = inputs[kind]
        before = path.read_bytes()
        if link == "same":
            output = path.name
        elif link == "symlink":
            output = f"{path.name}.sym"
            (tmp_path / output).unlink(missing_ok=True)
            (tmp_path / output).symlink_to(path.name)
        else:
            output = f"{path.name}.hard"
            (tmp_path / output).unlink(missing_ok=True)
            os.link(path, tmp_path / output)
        proc = cfi2sframe(path.name, "--emit", emit, *extra, "-o", output, cwd=tmp_path)
        assert proc.returncode == 1, (kind, emit, link, proc.stderr)
        lines = proc.stderr.splitlines()
        assert len(lines) == 1 and "is the input file" in lines[0], (kind, emit, lines)
        assert "--in-place" in lines[0]
        assert path.read_bytes() == before, (kind, emit, link)
        if link == "symlink":
            assert (tmp_path / output).is_symlink()


def test_default_output_naming_the_input_is_refused(tmp_path):
    """``cfi2sframe gs.sframe --source sframe`` would write gs.sframe, its own input."""
    raw = _inputs(tmp_path)["raw"]
    before = raw.read_bytes()
    proc = cfi2sframe(raw.name, "--source", "sframe", cwd=tmp_path)
    assert proc.returncode == 1 and "is the input file" in proc.stderr, proc.stderr
    assert raw.read_bytes() == before


def test_journal_or_plot_naming_an_input_is_refused(tmp_path):
    program = _inputs(tmp_path)["elf"]
    before = program.read_bytes()
    for option in ("--jsonl", "--plot"):
        proc = cfi2sframe("stats", "-q", program.name, option, program.name, cwd=tmp_path)
        assert proc.returncode == 1, (option, proc.stderr)
        assert f"{option} {program.name} is the input file" in proc.stderr, proc.stderr
        assert program.read_bytes() == before


def test_other_outputs_still_written(tmp_path):
    """The check compares files, not names: a new name and /dev/null are written."""
    inputs = _inputs(tmp_path)
    proc = cfi2sframe("frame_pointer.s", "-o", "fp.sframe", cwd=tmp_path)
    assert proc.returncode == 0 and (tmp_path / "fp.sframe").stat().st_size > 0
    proc = cfi2sframe(str(inputs["elf"]), "-o", "/dev/null", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("link", ["same", "symlink", "hardlink"])
def test_compact_output_naming_an_input_is_refused(tmp_path, link):
    """``compact -o``: the input file (assembly, a Mach-O object) or an object placed
    with ``--place``, by its name or a link to it, is refused before any work."""
    require("as")
    source = tmp_path / "fp.s"
    shutil.copy(EXAMPLES / "frame_pointer.s", source)
    inputs = [(["fp.s", "--emit", "bin"], source)]
    if shutil.which("clang-14"):
        macho = tmp_path / "m.o"
        (tmp_path / "m.c").write_text("int f(int x) { return x + 1; }\n")
        subprocess.run(["clang-14", "-target", "x86_64-apple-macosx10.15", "-c", "m.c",
                        "-o", "m.o"], cwd=tmp_path, check=True)
        inputs += [(["m.o", "--emit", "bin"], macho), (["m.o", "--emit", "obj"], macho),
                   (["--place", "m.o@0x100001000", "--emit", "unwind-info"], macho)]
    for args, path in inputs:
        before = path.read_bytes()
        output = path.name
        if link == "symlink":
            output = f"{path.name}.sym"
            (tmp_path / output).unlink(missing_ok=True)
            (tmp_path / output).symlink_to(path.name)
        elif link == "hardlink":
            output = f"{path.name}.hard"
            (tmp_path / output).unlink(missing_ok=True)
            os.link(path, tmp_path / output)
        proc = cfi2sframe("compact", *args, "-o", output, cwd=tmp_path)
        assert proc.returncode == 1, (args, proc.stderr)
        lines = proc.stderr.splitlines()
        assert len(lines) == 1 and "is the input file" in lines[0], (args, lines)
        assert path.read_bytes() == before, (args, link)
