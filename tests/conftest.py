"""Shared test helpers: oracle tools are required in CI and skipped elsewhere."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest


def require(*tools: str) -> None:
    """Skip (locally) or fail (in CI) when a real tool the test needs is missing."""
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if not missing:
        return
    message = f"missing tools: {', '.join(missing)}"
    if os.environ.get("CI"):
        pytest.fail(message + " (CI must install them: see .ci/run)")
    pytest.skip(message)


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
