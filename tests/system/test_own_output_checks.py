"""A bug of ours found by a check of our own output is an internal error: exit status
70, one line that names the file, the first failure and says it is ours, no output
file, the input untouched.  The writer is broken here on purpose: the section's bytes
given to every output (``SectionImage.to_bytes``, ``unplaced_bytes``) with the header's
FRE sub-section length one byte short, the copy of the bug where the last FRE ran past
the sub-section; and ``--in-place``'s verify of the rewritten file made to find an
SFrame FDE at 0x1234 that no DWARF FDE has.  Run in this process (``cli.main``), the
tree run's workers forked from it with the same breakage."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

from cfi2sframe.analysis import compare
from cfi2sframe.cli import main
from cfi2sframe.sframe.encode import SectionImage
from cfi2sframe.sframe.format import HEADER
from tests.conftest import require, require_path

PROGRAM = "/usr/bin/true"
FRE_LEN = HEADER.offset("fre_len")


def _short(make: Callable[..., bytes]) -> Callable[..., bytes]:
    """``make``, its section's FRE sub-section length one byte short."""
    def broken(self: SectionImage, *args: object, **kwargs: object) -> bytes:
        data = bytearray(make(self, *args, **kwargs))
        length = int.from_bytes(data[FRE_LEN:FRE_LEN + 4], "little")
        data[FRE_LEN:FRE_LEN + 4] = (length - 1).to_bytes(4, "little")
        return bytes(data)
    return broken


def _in_place_of_a_copy(folder: Path) -> Path:
    """``--in-place`` of a copy of PROGRAM in ``folder``: exit 70, the copy's bytes as
    they were and no other file left; the copy's name."""
    require_path(PROGRAM)
    path = folder / "prog"
    shutil.copy(PROGRAM, path)
    before = path.read_bytes()
    assert main(["-w", "--in-place", str(path)]) == 70
    assert path.read_bytes() == before and sorted(p.name for p in folder.iterdir()) == ["prog"]
    return path


@pytest.fixture
def broken_writer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SectionImage, "to_bytes", _short(SectionImage.to_bytes))
    monkeypatch.setattr(SectionImage, "unplaced_bytes", _short(SectionImage.unplaced_bytes))


@pytest.mark.parametrize("form", [["--emit", "elf", "-o", "out.so"], ["-o", "out.sframe"]])
def test_a_broken_section_is_an_internal_error_and_no_output(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], broken_writer: None,
        form: list[str]) -> None:
    require_path(PROGRAM)
    output = tmp_path / form[-1]
    status = main(["-w", PROGRAM, *form[:-1], str(output)])
    err = capsys.readouterr().err
    assert status == 70 and not output.exists() and list(tmp_path.iterdir()) == []
    assert err == (f"{PROGRAM}: internal error: the .sframe section we wrote is unsound: "
                   "header: ") + err.split("header: ", 1)[1]
    assert err.endswith("and its zero padding (please report it)\n") and err.count("\n") == 1


def test_a_broken_object_section_is_an_internal_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], broken_writer: None) -> None:
    require("gcc")
    (tmp_path / "m.c").write_text("int work(int n) { return n * 3; }\n")
    subprocess.run(["gcc", "-O2", "-c", str(tmp_path / "m.c"), "-o", str(tmp_path / "m.o")],
                   check=True)
    obj = tmp_path / "out.o"
    assert main([str(tmp_path / "m.o"), "-o", str(obj)]) == 70  # an object's -o x.o
    assert not obj.exists()
    assert "internal error: the .sframe section we wrote is unsound" in capsys.readouterr().err


def test_in_place_with_a_broken_section_leaves_the_input(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], broken_writer: None) -> None:
    _in_place_of_a_copy(tmp_path)
    assert "internal error: the .sframe section we wrote is unsound" in capsys.readouterr().err


@pytest.fixture
def not_verified(monkeypatch: pytest.MonkeyPatch) -> None:
    """verify of the rewritten file finds an SFrame FDE at 0x1234 without a DWARF FDE."""
    extra = SimpleNamespace(start_address=0x1234)
    monkeypatch.setattr(compare, "verify_elf", lambda *args, **kwargs: (
        compare.VerifyResult(1, (), (), (extra,)), 3))  # type: ignore[arg-type]


def test_in_place_that_does_not_verify_is_ours(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               not_verified: None) -> None:
    path = _in_place_of_a_copy(tmp_path)
    assert capsys.readouterr().err == (
        f"{path}: internal error: the rewritten file does not verify (an SFrame FDE at "
        "0x1234 has no DWARF FDE); input left untouched (please report it)\n")


def test_a_tree_run_records_it_as_an_internal_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], not_verified: None) -> None:
    """docs/trees.md: a run with an internal-error record exits 70."""
    require_path(PROGRAM)
    tree = tmp_path / "tree"
    tree.mkdir()
    shutil.copy(PROGRAM, tree / "prog")
    before = (tree / "prog").read_bytes()
    jsonl = tmp_path / "run.jsonl"
    status = main(["-w", "--in-place", "-r", str(tree), "-j", "1", "-q", "--jsonl", str(jsonl)])
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert status == 70 and (tree / "prog").read_bytes() == before
    assert [(r["status"], r["error"]) for r in records] == [(
        "internal-error", "the rewritten file does not verify (an SFrame FDE at 0x1234 has "
        "no DWARF FDE); input left untouched")]
    assert (f"{tree / 'prog'}: internal error: the rewritten file does not verify"
            in capsys.readouterr().err)
