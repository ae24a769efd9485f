"""``cli.entry`` exits with ``os._exit`` and hands ``main`` a list to hold the
conversion (and ``compact``'s rows and functions) in, so that returning from the
command does not free a large library's objects just before the process ends; ``main``
called from a library keeps nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from cfi2sframe.cli import main
from cfi2sframe.convert import ElfConversion
from cfi2sframe.model import Row
from tests.conftest import require_path


def test_the_conversion_is_held_by_the_callers_list(tmp_path: Path) -> None:
    program = "/usr/bin/true"
    require_path(program)
    kept: list[object] = []
    assert main([program, "-o", str(tmp_path / "out")], keep=kept) == 0
    assert [type(held) for held in kept] == [ElfConversion]
    assert main([program, "-o", str(tmp_path / "again")]) == 0  # no list: no hold
    assert len(kept) == 1


def test_a_failed_run_holds_nothing(tmp_path: Path) -> None:
    kept: list[object] = []
    assert main([str(tmp_path / "missing"), "-o", str(tmp_path / "out")], keep=kept) == 1
    assert kept == []


def test_compact_holds_its_rows_answers_and_functions(capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    """``compact`` of an ELF file hands the caller's list the FDE loop's rows cache and
    answers (libLLVM-14: 476k rows) and the functions it lists, whose freeing one by one
    at return was 6% of the command's instructions; without a list it holds nothing."""
    program = "/usr/bin/true"
    require_path(program)
    kept: list[object] = []
    assert main(["compact", program], keep=kept) == 0
    listed = capsys.readouterr().out.splitlines()
    assert len(kept) == 2
    loop, functions = kept
    assert isinstance(loop, tuple) and isinstance(functions, list)
    rows, _memo, _answers = loop
    assert isinstance(rows, dict) and rows  # (CIE offset, body) -> rows, ...
    assert all(isinstance(row, Row) for found in rows.values() for row in found[0])
    # each function listed, one line each, in the listing's order, then the summary
    assert [f"{func.start:#x}" for func in functions] == [line.split()[1]
                                                           for line in listed[:-1]]
    assert listed[-1].startswith(f"{len(functions)} functions: ")
    assert main(["compact", program]) == 0  # no list: no hold
    assert len(kept) == 2
