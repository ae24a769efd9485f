"""benchmarks/run.py's goal rows and their summary: a ratio or a time holds at or
under its limit, the ``-j 2`` speed-up at or over its floor (issue 43's goals: within
2x, 3x, 1.2x; 1.8x; 40 ms; 0.5 ms), a row is a goal row only when it names a goal and
has a yardstick, and every item of the issue has a part of the run.  The expected
verdicts are worked out by hand from the limits; nothing here runs a benchmark."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def run() -> ModuleType:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module("run")
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_a_ratio_or_a_time_holds_at_its_limit_and_under(run: ModuleType) -> None:
    assert run.Goal("verify", 2.0, 2.0).met
    assert run.Goal("verify", 0.8, 2.0).met
    assert not run.Goal("verify", 2.01, 2.0).met
    assert run.Goal("start-up", 40.0, 40, unit=" ms").met
    assert not run.Goal("start-up", 40.1, 40, unit=" ms").met


def test_a_speed_up_holds_at_its_floor_and_over(run: ModuleType) -> None:
    assert run.Goal("-j 2", 1.8, 1.8, at_least=True).met
    assert run.Goal("-j 2", 1.96, 1.8, at_least=True).met
    assert not run.Goal("-j 2", 1.79, 1.8, at_least=True).met


def test_a_row_with_a_goal_and_a_yardstick_is_a_goal_row(run: ModuleType,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    table = run.Table()
    table.row("verify", "dense", (0.3, 80.0), (0.1, 20.0), "readelf -wF", goal=2.0)
    table.row("dump", "dense", (0.3, 80.0), (0.1, 20.0), "readelf --sframe")
    table.row("verify", "no tool", (0.3, 80.0), None, "(none)", goal=2.0)
    assert [(g.value, g.limit, g.met) for g in table.goals] == [(pytest.approx(3.0), 2.0,
                                                                False)]
    rows = capsys.readouterr().out.splitlines()
    assert rows[2].endswith("| 3.00x | <= 2x |")
    assert rows[3].endswith("| 3.00x |  |")


def test_linearity_is_a_goal_of_1_3(run: ModuleType) -> None:
    table = run.Table()
    table.per_function = {"verify": {10_000: 10e-6, 100_000: 14e-6},
                          "dump": {10_000: 10e-6, 100_000: 13e-6},
                          "one size": {10_000: 10e-6}}
    table.linearity()
    assert [(g.label.split(",")[0], round(g.value, 2), g.met) for g in table.goals] == [
        ("linear: verify", 1.4, False), ("linear: dump", 1.3, True)]


def test_the_summary_gives_each_goal_row_its_verdict(run: ModuleType,
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    table = run.Table()
    table.goals += [run.Goal("a", 1.5, 2.0), run.Goal("b", 1.7, 1.8, at_least=True),
                    run.Goal("c", 0.61, 0.5, unit=" ms")]
    capsys.readouterr()
    table.summary(["item 3 (dense)"])
    out = capsys.readouterr().out
    assert "| a | 1.50x | <= 2x | met |" in out
    assert "| b | 1.70x | >= 1.8x | NOT met |" in out
    assert "| c | 0.61 ms | <= 0.5 ms | NOT met |" in out
    assert "1 of 3 goal rows met." in out
    assert "Not measured in this run: item 3 (dense)." in out


def test_every_item_of_the_issue_has_a_part(run: ModuleType) -> None:
    items = {item.strip() for items in run.GOAL_PARTS.values() for item in items.split(",")}
    assert items == {"1", "2", "3", "4", "5", "6"}
    assert set(run.GOAL_PARTS) <= set(run.PARTS)


def test_each_start_up_row_has_its_c_tool(run: ModuleType) -> None:
    assert run.startup_tool(["small.s", "-o", "x.o"])[0] == "as"
    assert run.startup_tool(["verify", "/usr/bin/true"]) == ["readelf", "-wF", "/usr/bin/true"]
    assert run.startup_tool(["lookup", "small.o", "0"]) == ["readelf", "-wF", "small.o"]
    assert run.startup_tool(["--help"]) == ["readelf", "--help"]
