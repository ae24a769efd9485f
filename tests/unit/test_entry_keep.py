"""``cli.entry`` exits with ``os._exit`` and hands ``main`` a list to hold the
conversion in, so that returning from the command does not free a large library's
objects just before the process ends; ``main`` called from a library keeps nothing."""

from __future__ import annotations

from pathlib import Path

from cfi2sframe.cli import main
from cfi2sframe.convert import ElfConversion
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
