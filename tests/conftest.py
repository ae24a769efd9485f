"""Shared test helpers: oracle tools are required in CI and skipped elsewhere."""

from __future__ import annotations

import functools
import importlib
import os
import re
import shutil
import subprocess
import sys
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


# The oracles whose output the tests read as their version writes it (readelf --sframe
# reads V1, GNU ld merges only V1, llvm-objdump-14's listing and llvm-xray-14's known
# errors): a tool of another version is missing, not a wrong answer.
_BINUTILS = re.compile(r"^(?:[\w]+-linux-gnu-)?(?:as|ld|readelf|objcopy|strip|objdump|nm|ar)$")
_LLVM = re.compile(r"^(?:llvm-mc|[\w.-]+-14)$")
ORACLE_VERSIONS = ((_BINUTILS, re.compile(r"\b2\.40\b"), "GNU binutils 2.40"),
                   (_LLVM, re.compile(r"\b14\.\d"), "LLVM 14"))


@functools.cache
def version_problem(tool: str) -> str | None:
    """Why ``tool`` is not the version the tests assume (None: it is, or the tests
    assume nothing of its version)."""
    for name, version, wanted in ORACLE_VERSIONS:
        if name.match(tool):
            proc = subprocess.run([tool, "--version"], capture_output=True, text=True,
                                  check=False)
            said = proc.stdout + proc.stderr
            if not version.search(said):
                line = next((ln.strip() for ln in said.splitlines() if re.search(r"\d\.\d", ln)),
                            "no version")
                return f"{tool} is not {wanted} ({line})"
    return None


def require(*tools: str) -> None:
    """Skip (locally) or fail (in CI) when a real tool the test needs is missing, or is
    not the version whose output the tests assume."""
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        unavailable(f"missing tools: {', '.join(missing)}")
    wrong = [problem for tool in tools if (problem := version_problem(tool))]
    if wrong:
        unavailable("; ".join(wrong))


def require_path(*paths: str | Path) -> None:
    """Skip (locally) or fail (in CI) when an input file the test needs (an installed
    library, say) is missing; the message names it."""
    missing = [str(path) for path in paths if not Path(path).exists()]
    if missing:
        unavailable(f"missing files: {', '.join(missing)}")


def compiled_core() -> ModuleType:
    """The compiled core (``cfi2sframe._core``) whichever core CFI2SFRAME_CORE picks
    for the run: the differential tests hold it equal to the Python code."""
    try:
        return importlib.import_module("cfi2sframe._core")
    except ImportError:
        message = "the compiled core is not built (pip install . with a C compiler)"
        if in_ci():
            pytest.fail(message)  # CI builds it: a missing core there is a failure
        unavailable(message)


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


def cfi2sframe(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The command run as a user runs it, output as text; never a traceback or an
    internal error (each of those is a bug of ours, whatever the test checks)."""
    proc = subprocess.run([sys.executable, "-m", "cfi2sframe", *args], cwd=cwd,
                          capture_output=True, text=True, check=False)
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    return proc


def converted_libraries(folder: Path, libraries: dict[str, str], emit: str,
                        suffix: str = "") -> dict[str, Path]:
    """``NAME-vN`` -> each of ``libraries`` (name -> path) converted in ``folder`` to
    SFrame V2 and V3 by the command (``--emit EMIT``), named ``NAME-vN`` + ``suffix``."""
    out = {}
    for name, library in libraries.items():
        require_path(library)
        for version in ("2", "3"):
            made = folder / f"{name}-v{version}{suffix}"
            assert cfi2sframe(library, "--emit", emit, "--sframe-version", version, "-q",
                              "-o", str(made), cwd=folder).returncode == 0
            out[f"{name}-v{version}"] = made
    return out


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


PINNED_C = r"""
#include <stdio.h>
struct note { int namesz, descsz, type; char name[4]; };
__attribute__((section(".note.pinned"), used, aligned(4)))
static const struct note pinned = {3, 0, 1, "PIN"};
const void *volatile keep = &pinned;
static char scratch[SCRATCH];
int main(int c, char **v) {
  (void)v; scratch[c] = 1;
  printf("%d %d\n", ((const struct note *)keep)->type, scratch[1]);
  return 0;
}
"""


def pinned_notes_program(folder: Path, scratch: int = 16) -> Path:
    """A program whose table cannot grow where it is (the post-link step then moves
    it): gas makes ``.note.pinned`` a note, ld puts it in the build-id's PT_NOTE right
    after the notes the table would grow into, and a relocated pointer refers to it,
    so moving the notes would split that PT_NOTE or break the pointer.  A
    ``scratch``-byte .bss makes it that much shorter than its memory image; it prints
    ``1 1``."""
    require("gcc")
    (folder / "pinned.c").write_text(PINNED_C)
    program = folder / "pinned"
    subprocess.run(["gcc", "-O2", f"-DSCRATCH={scratch}", "pinned.c", "-o", "pinned"],
                   cwd=folder, check=True)
    return program


def readelf_section(path: Path, name: str) -> tuple[int, int]:
    """(address, file offset) of section ``name`` as ``readelf -SW`` lists it."""
    text = subprocess.run(["readelf", "-SW", str(path)], capture_output=True, text=True,
                          check=True).stdout
    found = [line.split("]", 1)[1].split() for line in text.splitlines()
             if "]" in line and line.split("]", 1)[1].split()[:1] == [name]]
    assert len(found) == 1, (name, text)
    return int(found[0][2], 16), int(found[0][3], 16)


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


# The tiers are folders: unit (pure Python, no toolchain), differential (against real
# tools), system (the command, files, processes and the toolchain end to end), fuzz.
# Each test gets its folder's marker: ``pytest -m unit`` runs one tier.
TESTS = Path(__file__).resolve().parent
TIERS = ("unit", "differential", "system", "fuzz")

# Tests that take 8 s or more on the 2-core machine (pytest --durations, CI=1, -n 2):
# the quick tier, ``pytest -m "not slow"``, leaves them out; the full run has them all.
SLOW = frozenset({
    "differential/test_aarch64.py::test_aarch64_csmith_corpus_matches_gnu_as",
    "differential/test_aarch64.py::test_big_endian_aarch64_matches_gnu_as",
    "differential/test_assembler_check.py::test_gnu_as_and_clang_agree_with_us_on_compiler_output",
    "differential/test_compact.py::test_csmith_through_llc_against_llvm",
    "differential/test_compact_body.py::test_the_single_row_is_exactly_the_body_state",
    "differential/test_core_stats.py::test_the_command_says_the_same_with_either_core",
    "differential/test_core_stats.py::test_the_scan_counts_what_the_conversion_makes",
    "differential/test_elf_input.py::test_every_installed_elf_file_converts_or_reports",
    "differential/test_elf_input.py::test_verify_passes_on_real_libraries",
    "differential/test_elf_output.py::test_programs_still_run_with_a_loadable_sframe",
    "differential/test_fastpath.py::test_real_libraries_give_the_same_sframe_both_ways",
    "differential/test_gas.py::test_csmith_corpus_matches_gnu_as",
    "differential/test_llvm.py::test_llvm_and_we_mean_the_same_where_llvm_is_right",
    "differential/test_plt.py::test_installed_files_have_every_plt_byte_covered",
    "differential/test_process_unwind.py::test_unwind_with_maps_reproduces_gdbs_backtrace",
    "differential/test_readers.py::test_v3_means_what_v2_means_and_verifies",
    "differential/test_readers.py::test_verify_passes_on_our_objects_and_diff_agrees_with_gas",
    "differential/test_real_unwind.py::test_aarch64_real_stacks_under_qemu_like_gdb",
    "differential/test_real_unwind.py::test_sframe_and_compact_unwind_real_stacks_like_gdb",
    "differential/test_replace.py::test_linked_programs_from_ld_are_replaced",
    "differential/test_replace.py::test_objects_from_gas_are_replaced_and_still_link",
    "differential/test_s390x.py::test_s390x_csmith_corpus_verifies",
    "differential/test_source_sframe.py::"
    "test_v1_objects_from_gas_convert_to_v2_with_the_same_meaning",
    "fuzz/test_fuzz_budget.py::test_fuzz_target_within_budget",
    "system/test_batch.py::test_j1_j2_and_dask_give_the_same_records",
    "system/test_batch.py::test_resume_after_sigkill_records_every_file_once",
    "system/test_hostile.py::test_kill_at_every_write_leaves_old_or_new",
    "system/test_layout.py::test_no_installed_file_is_reported",
    "system/test_post_link_tree.py::test_installed_files_convert_run_and_verify",
    "system/test_post_link_tree.py::test_every_installed_file_converts_runs_and_verifies",
    "system/test_post_link_tree.py::test_aarch64_cross_libraries_convert_load_and_verify",
    "system/test_library_types.py::"
    "test_mypy_strict_finds_each_misuse_and_nothing_in_documented_use",
    "system/test_readme.py::test_every_examples_readme_command_block_runs",
    "system/test_wheel.py::test_wheel_installs_and_runs_outside_the_tree",
})


def test_id(item: pytest.Item) -> str:
    """``tier/test_module.py::test_function`` (parameters left out), as SLOW names it."""
    relative = Path(str(item.path)).resolve().relative_to(TESTS).as_posix()
    return f"{relative}::{getattr(item, 'originalname', item.name)}"


def pytest_collection_modifyitems(config, items) -> None:
    """Each test's tier marker and ``slow``; the slow tests run first (in collection
    order, then the rest): pytest-xdist hands each worker a slice of this order and an
    idle worker takes tests from the end of a busy one's queue, so a slow test started
    last cannot leave one worker running alone at the end of the run."""
    slow = set()
    for item in items:
        tier = Path(str(item.path)).resolve().relative_to(TESTS).parts[0]
        if tier in TIERS:
            item.add_marker(getattr(pytest.mark, tier))
        if test_id(item) in SLOW:
            item.add_marker(pytest.mark.slow)
            slow.add(item)
    items.sort(key=lambda item: item not in slow)


_REPORT: list[str] = []


@pytest.fixture
def report():
    """Lines a test wants shown in the run's summary (counts from differential tests)."""
    return _REPORT.append


def pytest_sessionfinish(session) -> None:
    """Under pytest-xdist, a worker hands its figures to the controller."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["cfi2sframe_figures"] = list(_REPORT)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """pytest-xdist: collect a finished worker's figures for the summary."""
    _REPORT.extend(getattr(node, "workeroutput", {}).get("cfi2sframe_figures", []))


def pytest_terminal_summary(terminalreporter) -> None:
    if _REPORT:
        terminalreporter.section("cfi2sframe figures")
        for line in sorted(_REPORT):
            terminalreporter.write_line(line)
