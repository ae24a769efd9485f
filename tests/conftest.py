"""Shared test helpers: oracle tools are required in CI and skipped elsewhere."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
from pathlib import Path
from types import ModuleType
from typing import NoReturn

import pytest


def in_ci() -> bool:
    """True under CI (the CI environment variable set, as .ci/run does)."""
    return bool(os.environ.get("CI"))


def unavailable(message: str) -> NoReturn:
    """Skip (locally) or fail (in CI) for a missing tool, file, module or capability:
    in CI nothing the tests need may be missing silently."""
    if in_ci():
        pytest.fail(message + " (CI must provide it: see .ci/run and "
                    "tests/support/install-test-tools.sh)")
    pytest.skip(message)


def require(*tools: str) -> None:
    """Skip (locally) or fail (in CI) when a real tool the test needs is missing."""
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        unavailable(f"missing tools: {', '.join(missing)}")


def require_path(*paths: str | Path) -> None:
    """Skip (locally) or fail (in CI) when an input file the test needs (an installed
    library, say) is missing; the message names it."""
    missing = [str(path) for path in paths if not Path(path).exists()]
    if missing:
        unavailable(f"missing files: {', '.join(missing)}")


def require_module(name: str) -> ModuleType:
    """``pytest.importorskip`` that fails in CI: the module, imported."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        unavailable(f"missing Python module {name!r} ({exc})")


def at_least(what: str, measured: int, floor: int) -> None:
    """A loop over a corpus compared at least ``floor`` items (files, functions, PCs).

    Each floor is what the loop compares on the reference machine less a margin, both
    said where it is set: a loop whose inputs vanish, or whose comparison stops
    matching anything, fails instead of passing on nothing."""
    assert measured >= floor, f"{what}: {measured} compared, below the floor {floor}"


def small_program(folder: Path) -> Path:
    """A small dynamically linked program built by gcc -O2 in ``folder`` (exit status
    ``(argc * 3) & 1``)."""
    require("gcc")
    source = folder / "main.c"
    source.write_text("int work(int n) { return n * 3; }\n"
                      "int main(int c, char **v) { (void)v; return work(c) & 1; }\n")
    program = folder / "prog"
    subprocess.run(["gcc", "-O2", str(source), "-o", str(program)], check=True)
    return program


HELLO_C = ("#include <stdio.h>\n#include <stdlib.h>\n"
           "int main(int c, char **v) { printf(\"%d\\n\", atoi(v[0]) + c); puts(\"x\"); "
           "return 0; }\n")


def gsframe_program(folder: Path) -> Path:
    """A program linked here by GNU as + ld 2.40 with ``-Wa,--gsframe`` (SFrame V1, PLT
    FDEs from ld), calling libc through the PLT; it prints two lines."""
    require("gcc")
    source = folder / "hello.c"
    source.write_text(HELLO_C)
    program = folder / "gs"
    subprocess.run(["gcc", "-O1", "-Wa,--gsframe", str(source), "-o", str(program)],
                   check=True)
    return program


@pytest.fixture
def asm_timelines():
    """Parse an x86-64 assembly snippet into timelines with GNU as."""
    require("as")
    from cfi2sframe import timelines_from_asm

    def parse(text: str):
        return timelines_from_asm(text, "t.s")

    return parse


def meaning(section, fre) -> tuple:
    """(CFA base, CFA offset, FP offset, RA) of a default FRE: a compact form for tests.

    FP is None (unchanged) or its CFA offset; RA is ``("cfa", offset)``,
    ``"undefined"`` or None (unchanged).  Built on ``rules.fre_rules``, the
    package's one interpreter of data words.
    """
    from cfi2sframe.sframe.rules import RA_UNDEFINED, Loc, fre_rules

    fde = next(f for f in section.fdes if any(x is fre for x in f.fres))
    rules = fre_rules(section, fde, fre)
    base = "fp" if fre.base_fp else "sp"
    if rules.ra == RA_UNDEFINED:
        return (base, None, None, "undefined")
    assert isinstance(rules.cfa, Loc) and not fde.flex
    fp = rules.fp.offset if isinstance(rules.fp, Loc) else None
    ra = ("cfa", rules.ra.offset) if isinstance(rules.ra, Loc) else None
    return (base, rules.cfa.offset, fp, ra)


_REPORT: list[str] = []


@pytest.fixture
def report():
    """Lines a test wants shown in the run's summary (counts from differential tests)."""
    return _REPORT.append


def pytest_terminal_summary(terminalreporter) -> None:
    if _REPORT:
        terminalreporter.section("cfi2sframe figures")
        for line in _REPORT:
            terminalreporter.write_line(line)
