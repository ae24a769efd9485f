"""A bug of ours found by a check of our own output is an internal error: exit status
70, one line that names the file, the first failure and says it is ours, no output
file, the input untouched.  ``--in-place``'s verify of the rewritten file is made to
find an SFrame FDE at 0x1234 that no DWARF FDE has.  Run in this process
(``cli.main``), the tree run's workers forked from it with the same breakage."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from cfi2sframe.analysis import compare
from cfi2sframe.cli import main
from tests.conftest import require_path

PROGRAM = "/usr/bin/true"


@pytest.fixture
def not_verified(monkeypatch: pytest.MonkeyPatch) -> None:
    """verify of the rewritten file finds an SFrame FDE at 0x1234 without a DWARF FDE."""
    extra = SimpleNamespace(start_address=0x1234)
    monkeypatch.setattr(compare, "verify_elf", lambda *args, **kwargs: (
        compare.VerifyResult(1, (), (), (extra,)), 3))  # type: ignore[arg-type]


def test_in_place_that_does_not_verify_is_ours(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               not_verified: None) -> None:
    require_path(PROGRAM)
    path = tmp_path / "prog"
    shutil.copy(PROGRAM, path)
    before = path.read_bytes()
    assert main(["-w", "--in-place", str(path)]) == 70
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["prog"]
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
