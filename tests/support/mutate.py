#!/usr/bin/env python3
"""Mutation testing of the core modules, rerunnable by anyone.

    python tests/support/mutate.py [--modules GLOB ...] [--max-mutants N] [--seed S]
                                   [--timeout S] [--jobs N] [--json FILE]

1. Copies the checkout (``git ls-files``, untracked test files and the ``.corpus`` cache)
   to a temporary folder: the source tree is never edited.
2. Runs the test suite there once under coverage.py, with each test's node id as the
   coverage context (also in ``python -m cfi2sframe`` subprocesses and forked children),
   to learn which tests execute each line.  Tests that fail on the unmutated code are
   never used to kill a mutant.
3. Generates one-token mutants of the chosen modules with ``ast``: comparison operators,
   arithmetic and bitwise operators (also in ``+=``), a dropped unary minus or ``~`` or
   ``not``, integer constants (0<->1, else +-1), True<->False, and<->or, ``is``<->``is
   not``, ``in``<->``not in``.  String constants (docstrings, messages), f-strings and
   type annotations are left alone.  Mutants on lines no test executes are counted as
   "not covered" and not run.
4. Runs a deterministic sample (``--max-mutants``, ``--seed``): each mutant is written
   into a worker's own copy and only the tests covering its line run
   (``pytest -x -q -p no:cacheprovider ID...``, fastest first, ``PYTHONPATH`` = the copy,
   so subprocesses see the mutant too); tests slower than ``--test-seconds`` (3) in the
   baseline are left out when a faster one covers the line.  Killed: a test failed,
   errored or timed out.
   Survived: they all passed.  A line run only at import time (tables, constants) is
   covered by every test that executes package code.
5. Prints killed/total per module and every survivor as ``path:line: original -> mutant``.
   Survivors listed in ``tests/support/mutation-equivalent.txt`` (with the reason they
   cannot be told apart) are reported as equivalent instead.

Exit status: 0 when there are no survivors, 1 otherwise, 2 on a setup problem.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import contextlib
import fnmatch
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EQUIVALENT = Path(__file__).with_name("mutation-equivalent.txt")

CORE = [
    "cfi2sframe/dwarf/*.py",
    "cfi2sframe/sframe/lower.py",
    "cfi2sframe/sframe/encode.py",
    "cfi2sframe/sframe/decode.py",
    "cfi2sframe/sframe/format.py",
    "cfi2sframe/sframe/rules.py",
    "cfi2sframe/sframe/fastpath.py",
    "cfi2sframe/sframe/words.py",
    "cfi2sframe/sframe/build.py",
    "cfi2sframe/sframe/pcmask.py",
    "cfi2sframe/compact/encoding.py",
    "cfi2sframe/compact/words.py",
    "cfi2sframe/compact/x86.py",
    "cfi2sframe/compact/arm64.py",
    "cfi2sframe/compact/step.py",
    "cfi2sframe/elf/cfi.py",
    "cfi2sframe/compact/lower.py",
    "cfi2sframe/arch/*.py",
]

IMPORT_TIME = ""  # the coverage context of code run before any test (imports)

# --- mutants -------------------------------------------------------------------------

COMPARE = {ast.Lt: ("<", "<="), ast.LtE: ("<=", "<"), ast.Gt: (">", ">="),
           ast.GtE: (">=", ">"), ast.Eq: ("==", "!="), ast.NotEq: ("!=", "=="),
           ast.Is: ("is", "is not"), ast.IsNot: ("is not", "is"),
           ast.In: ("in", "not in"), ast.NotIn: ("not in", "in")}
BINARY = {ast.Add: ("+", "-"), ast.Sub: ("-", "+"), ast.Mult: ("*", "//"),
          ast.FloorDiv: ("//", "*"), ast.Mod: ("%", "//"), ast.LShift: ("<<", ">>"),
          ast.RShift: (">>", "<<"), ast.BitAnd: ("&", "|"), ast.BitOr: ("|", "&"),
          ast.BitXor: ("^", "|")}
BOOLEAN = {ast.And: ("and", "or"), ast.Or: ("or", "and")}


@dataclass
class Mutant:
    path: str           # relative to the checkout, e.g. cfi2sframe/sframe/lower.py
    line: int           # line of the mutated token
    stmt_line: int      # first line of the enclosing statement
    start: int          # character offsets of the replaced text in the file
    end: int
    replacement: str
    kind: str
    original: str       # the smallest enclosing expression, before and after
    mutant: str
    status: str = ""    # killed, survived, equivalent, timeout, not-covered
    tests: int = 0
    seconds: float = 0.0
    why: str = ""

    @property
    def key(self) -> str:
        return f"{self.path}:{self.line}: {self.original} -> {self.mutant}"


class _Source:
    """A module's text with (line, UTF-8 column) to character offset conversion."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, line: int, col: int) -> int:
        chars = len(self.lines[line - 1].encode()[:col].decode(errors="replace"))
        return self.starts[line - 1] + chars

    def line_of(self, offset: int) -> int:
        lo, hi = 0, len(self.starts) - 1
        while lo < hi - 1:
            mid = (lo + hi) // 2
            if self.starts[mid] <= offset:
                lo = mid
            else:
                hi = mid
        return lo + 1

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (self.offset(node.lineno, node.col_offset),
                self.offset(node.end_lineno, node.end_col_offset))


def _short(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


_GAP_JUNK = re.compile(r"(\s|\\\n|#[^\n]*|[()])*")


def _operator_in_gap(src: _Source, lo: int, hi: int, token: str) -> tuple[int, int] | None:
    """The offsets of ``token`` between two operands, or None when the text between
    them is not exactly parentheses, blanks, comments and that token."""
    gap = src.text[lo:hi]
    head = _GAP_JUNK.match(gap).end()
    rest = gap[head:]
    if not rest.startswith(token):
        return None
    tail = rest[len(token):]
    if _GAP_JUNK.fullmatch(tail) is None:
        return None
    if token.isalpha() or " " in token:
        if not (tail[:1].isspace() or tail[:1] in ("(", "")):
            return None
    return lo + head, lo + head + len(token)


def _skipped_nodes(tree: ast.AST) -> set[int]:
    """ids of nodes never mutated: annotations, f-strings, docstrings and their insides."""
    skip: set[int] = set()

    def drop(node: ast.AST | None) -> None:
        if node is not None:
            skip.update(id(n) for n in ast.walk(node))

    for node in ast.walk(tree):
        if isinstance(node, ast.arg):
            drop(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            drop(node.returns)
        elif isinstance(node, ast.AnnAssign):
            drop(node.annotation)
        elif isinstance(node, ast.JoinedStr):
            drop(node)
    return skip


def _statement_lines(tree: ast.AST) -> dict[int, int]:
    """id(node) -> first line of the innermost statement holding it."""
    owner: dict[int, int] = {}

    def visit(node: ast.AST, stmt_line: int) -> None:
        if isinstance(node, ast.stmt):
            stmt_line = node.lineno
        owner[id(node)] = stmt_line
        for child in ast.iter_child_nodes(node):
            visit(child, stmt_line)

    visit(tree, 0)
    return owner


def mutants_of(path: str, text: str) -> list[Mutant]:
    """Every one-token mutant of one module, in source order."""
    src = _Source(text)
    tree = ast.parse(text)
    skip = _skipped_nodes(tree)
    stmt = _statement_lines(tree)
    found: list[Mutant] = []

    def add(node: ast.AST, at: tuple[int, int] | None, replacement: str, kind: str) -> None:
        """One mutant, shown as the physical line of its token before and after."""
        if at is None:
            return
        line = src.line_of(at[0])
        lo = src.starts[line - 1]
        before = src.lines[line - 1].rstrip("\n")
        comment = before.find("  # ")
        if comment > at[1] - lo and "'" not in before[comment:] and '"' not in before[comment:]:
            before = before[:comment]
        after = before[:at[0] - lo] + replacement + before[at[1] - lo:]
        found.append(Mutant(path, line, stmt[id(node)], at[0], at[1], replacement, kind,
                            _short(before), _short(after)))

    for node in ast.walk(tree):
        if id(node) in skip or not hasattr(node, "lineno"):
            continue
        if isinstance(node, ast.Compare):
            left = node.left
            for op, right in zip(node.ops, node.comparators, strict=True):
                token, new = COMPARE[type(op)]
                at = _operator_in_gap(src, src.span(left)[1], src.span(right)[0], token)
                add(node, at, new, "compare")
                left = right
        elif isinstance(node, ast.BinOp) and type(node.op) in BINARY:
            token, new = BINARY[type(node.op)]
            at = _operator_in_gap(src, src.span(node.left)[1], src.span(node.right)[0], token)
            add(node, at, new, "binary")
        elif isinstance(node, ast.AugAssign) and type(node.op) in BINARY:
            token, new = BINARY[type(node.op)]
            at = _operator_in_gap(src, src.span(node.target)[1], src.span(node.value)[0],
                                  token + "=")
            add(node, at, new + "=", "binary")
        elif isinstance(node, ast.BoolOp):
            token, new = BOOLEAN[type(node.op)]
            for left, right in zip(node.values, node.values[1:], strict=False):
                at = _operator_in_gap(src, src.span(left)[1], src.span(right)[0], token)
                add(node, at, new, "boolean")
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Invert,
                                                                       ast.Not)):
            lo = src.span(node)[0]
            token = {ast.USub: "-", ast.Invert: "~", ast.Not: "not"}[type(node.op)]
            if src.text.startswith(token, lo):
                add(node, (lo, lo + len(token)), "", "unary")
        elif isinstance(node, ast.Constant):
            value = node.value
            at = src.span(node)
            literal = src.text[at[0]:at[1]]
            if isinstance(value, bool):
                add(node, at, str(not value), "constant")
            elif isinstance(value, int) and literal.replace("_", "").isalnum():
                news = {0: [1], 1: [0]}.get(value, [value + 1, value - 1])
                for new in news:
                    shown = hex(new) if literal.lower().startswith("0x") else str(new)
                    add(node, at, shown, "constant")
    found.sort(key=lambda m: (m.start, m.kind, m.replacement))
    return found


def apply(text: str, mutant: Mutant) -> str:
    return text[:mutant.start] + mutant.replacement + text[mutant.end:]


# --- the copy and the coverage map -----------------------------------------------------

PLUGIN = '''\
"""Per-test coverage contexts for tests/support/mutate.py (also in subprocesses)."""
import base64, json, os, time
import coverage
import pytest

_TIMES = {}
_FAILED = set()


def _context(name):
    cov = coverage.Coverage.current()
    if cov is None:
        return
    cov.switch_context(name)
    cov.config.context = name            # inherited by forked children (patch = fork)
    encoded = os.environ.get("COVERAGE_PROCESS_CONFIG")
    if encoded is None:
        return
    data = json.loads(base64.b64decode(encoded))
    data["context"] = name               # and by python subprocesses (patch = subprocess)
    os.environ["COVERAGE_PROCESS_CONFIG"] = base64.b64encode(
        json.dumps(data).encode()).decode()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _context(item.nodeid)
    start = time.monotonic()
    yield
    _TIMES[item.nodeid] = time.monotonic() - start
    _context("")


def pytest_runtest_logreport(report):
    if report.failed:
        _FAILED.add(report.nodeid)


def pytest_sessionfinish(session):
    with open(os.environ["MUTATE_TIMES"], "w") as out:
        json.dump({"times": _TIMES, "failed": sorted(_FAILED)}, out)
'''

COVERAGERC = """\
[run]
data_file = {data}
parallel = true
include = {root}/cfi2sframe/*
patch = subprocess
    fork
    _exit
"""


def _files_to_copy(root: Path) -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                          "--exclude-standard"], cwd=root, check=True,
                         capture_output=True).stdout.decode()
    return [name for name in out.split("\0") if name and (root / name).is_file()]


def copy_tree(root: Path, dest: Path, files: list[str]) -> None:
    for name in files:
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target)
    if (root / ".corpus").is_dir() and not (dest / ".corpus").exists():
        shutil.copytree(root / ".corpus", dest / ".corpus", symlinks=True)


def _env(copy: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(copy)] + (
        [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.pop("COVERAGE_PROCESS_START", None)
    env.pop("COVERAGE_PROCESS_CONFIG", None)
    env.update(extra)
    return env


@dataclass
class CoverageMap:
    lines: dict[str, dict[int, list[str]]]      # path -> line -> test ids
    times: dict[str, float]
    failed: list[str]
    all_tests: list[str] = field(default_factory=list)   # tests that ran package code


def build_coverage(base: Path, work: Path, pytest_args: list[str]) -> CoverageMap:
    """Run the suite once in ``base`` under coverage, one context per test."""
    import coverage

    plugin_dir = work / "plugin"
    plugin_dir.mkdir()
    (plugin_dir / "mutate_contexts.py").write_text(PLUGIN)
    rc = work / "coveragerc"
    rc.write_text(COVERAGERC.format(data=work / "cov" / "data", root=base))
    (work / "cov").mkdir()
    times = work / "times.json"
    env = _env(base, MUTATE_TIMES=str(times))
    env["PYTHONPATH"] = os.pathsep.join([str(plugin_dir), env["PYTHONPATH"]])
    cmd = [sys.executable, "-m", "coverage", "run", f"--rcfile={rc}", "-m", "pytest",
           "-q", "-p", "no:cacheprovider", "-p", "mutate_contexts", *pytest_args]
    print("baseline:", " ".join(cmd[2:]), flush=True)
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=base, env=env, capture_output=True, text=True)
    print(f"baseline: {time.monotonic() - start:.0f} s, pytest exit status "
          f"{proc.returncode}", flush=True)
    tail = proc.stdout.strip().splitlines()[-1:] if proc.stdout.strip() else []
    for line in tail:
        print("baseline:", line, flush=True)
    if not times.exists():
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
        raise SystemExit(2)
    recorded = json.loads(times.read_text())
    combiner = coverage.Coverage(data_file=str(work / "cov" / "data"), config_file=str(rc))
    combiner.combine(data_paths=[str(work / "cov")], keep=False)
    data = combiner.get_data()
    lines: dict[str, dict[int, list[str]]] = {}
    everyone: set[str] = set()
    failed = set(recorded["failed"])
    for filename in data.measured_files():
        rel = os.path.relpath(filename, base)
        by_line = data.contexts_by_lineno(filename)
        clean: dict[int, list[str]] = {}
        for line, contexts in by_line.items():
            tests = sorted({c for c in contexts if c not in failed})
            clean[line] = tests
            everyone.update(t for t in tests if t != IMPORT_TIME)
        lines[rel] = clean
    return CoverageMap(lines, recorded["times"], sorted(failed), sorted(everyone))


def _fingerprint(base: Path, files: list[str], pytest_args: str) -> str:
    digest = hashlib.sha256(pytest_args.encode())
    for name in sorted(f for f in files if f.startswith("cfi2sframe/")):
        digest.update(name.encode() + b"\0" + (base / name).read_bytes() + b"\0")
    return digest.hexdigest()


def _cached_coverage(cache: Path | None, base: Path, files: list[str],
                     pytest_args: str) -> CoverageMap | None:
    if cache is None or not cache.exists():
        return None
    saved = json.loads(cache.read_text())
    if saved.get("fingerprint") != _fingerprint(base, files, pytest_args):
        return None
    print("baseline: coverage map from", cache, flush=True)
    lines = {path: {int(k): v for k, v in by_line.items()}
             for path, by_line in saved["lines"].items()}
    return CoverageMap(lines, saved["times"], saved["failed"], saved["all_tests"])


def _save_coverage(cache: Path, base: Path, files: list[str], pytest_args: str,
                   cov: CoverageMap) -> None:
    cache.write_text(json.dumps({"fingerprint": _fingerprint(base, files, pytest_args)}
                                | asdict(cov)))


def covering_tests(cov: CoverageMap, mutant: Mutant, test_seconds: float) -> list[str]:
    """The tests that run the mutant's line, fastest first; of those slower than
    ``test_seconds`` in the baseline, none when a faster one covers the line."""
    by_line = cov.lines.get(mutant.path, {})
    tests: set[str] = set()
    for line in {mutant.line, mutant.stmt_line}:
        tests.update(by_line.get(line, ()))
    if IMPORT_TIME in tests:
        # Run at import: a table or a constant whose effect any test may see.
        tests.discard(IMPORT_TIME)
        tests.update(cov.all_tests)
    fast = {t for t in tests if not test_seconds or cov.times.get(t, 0.0) <= test_seconds}
    return sorted(fast or tests, key=lambda t: (cov.times.get(t, 0.0), t))


# --- running mutants -------------------------------------------------------------------

_RUNNING: set[int] = set()   # process groups of the pytest runs under way


def _stop(*_: object) -> None:
    """SIGTERM: end the pytest runs under way, then exit (the copies are removed)."""
    for pgid in list(_RUNNING):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
    sys.exit(143)


def run_mutant(copy: Path, original: str, mutant: Mutant, tests: list[str],
               timeout: float) -> tuple[str, float]:
    target = copy / mutant.path
    cache = target.parent / "__pycache__"
    for stale in cache.glob(target.stem + ".*.pyc"):
        stale.unlink()
    target.write_text(apply(original, mutant))
    start = time.monotonic()
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
    proc = subprocess.Popen(cmd, cwd=copy, env=_env(copy), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    _RUNNING.add(proc.pid)
    status = "interrupted"
    try:
        status = "survived" if proc.wait(timeout=timeout) == 0 else "killed"
    except subprocess.TimeoutExpired:
        status = "timeout"
    finally:
        with contextlib.suppress(ProcessLookupError):   # and what the tests left running
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        _RUNNING.discard(proc.pid)
        target.write_text(original)
        for stale in cache.glob(target.stem + ".*.pyc"):
            stale.unlink()
    return status, time.monotonic() - start


def read_equivalent(path: Path) -> list[tuple[str, int, str, str, str]]:
    """(path, line, original, mutant, why) from the equivalent-mutant list."""
    entries: list[tuple[str, int, str, str, str]] = []
    if not path.exists():
        return entries
    current: list = []
    pattern = re.compile(r"^(\S+?):(\d+): (.*) -> (.*)$")
    for raw in path.read_text().splitlines():
        if not raw.strip() or raw.startswith("#"):
            continue
        if raw[:1].isspace():
            if current:
                current[4] = (current[4] + " " + raw.strip()).strip()
            continue
        match = pattern.match(raw.rstrip())
        if match is None:
            raise SystemExit(f"{path}: cannot read {raw!r}")
        if current:
            entries.append(tuple(current))
        current = [match[1], int(match[2]), match[3], match[4], ""]
    if current:
        entries.append(tuple(current))
    for entry in entries:
        if not entry[4]:
            raise SystemExit(f"{path}: no reason given for {entry[0]}:{entry[1]}")
    return entries


def equivalent_reason(entries, mutant: Mutant, every: list[Mutant]) -> str:
    """The listed reason this mutant is equivalent: same place and text, or the same
    text at another line when it is the only such mutant of its module (lines move)."""
    same = [e for e in entries if e[0] == mutant.path and e[2] == mutant.original
            and e[3] == mutant.mutant]
    for entry in same:
        if entry[1] == mutant.line:
            return entry[4]
    twins = [m for m in every if m.path == mutant.path and m.original == mutant.original
             and m.mutant == mutant.mutant]
    if same and len(twins) == 1:
        return same[0][4]
    return ""


def _columns(row: list[int]) -> str:
    return " ".join(f"{v:>{w}}" for v, w in zip(row, (7, 7, 5, 6, 5, 5), strict=True))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modules", nargs="+", default=CORE, metavar="GLOB",
                        help="modules to mutate, paths or globs relative to the checkout "
                             "(default: the core modules)")
    parser.add_argument("--max-mutants", type=int, default=150, metavar="N",
                        help="run a deterministic sample of N covered mutants; 0: all "
                             "(default 150)")
    parser.add_argument("--seed", type=int, default=24, help="sample seed (default 24)")
    parser.add_argument("--timeout", type=float, default=None, metavar="S",
                        help="seconds per mutant (default: 2 x the covering tests' "
                             "baseline time + 30)")
    parser.add_argument("--test-seconds", type=float, default=3.0, metavar="S",
                        help="leave out tests slower than S seconds in the baseline when a "
                             "faster test covers the line (default 3; 0: keep all)")
    parser.add_argument("--jobs", "-j", type=int, default=1, metavar="N",
                        help="mutants run at once, each in its own copy (default 1)")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write every mutant here")
    parser.add_argument("--only", nargs="+", metavar="PATH:LINE", default=[],
                        help="run only the mutants on these lines (ignores the sample)")
    parser.add_argument("--list", action="store_true",
                        help="print the mutants and their coverage, run none")
    parser.add_argument("--pytest-args", default="", metavar="ARGS",
                        help="extra arguments of the baseline pytest run, e.g. "
                             "'--deselect tests/system/test_wheel.py'")
    parser.add_argument("--cache", type=Path, metavar="FILE",
                        help="keep the coverage map here and reuse it while the package "
                             "is unchanged (tests added since are not used: delete it)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary copy")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _stop)

    started = time.monotonic()
    files = _files_to_copy(ROOT)
    modules = sorted({name for name in files
                      if any(fnmatch.fnmatch(name, pattern) for pattern in args.modules)
                      and name.endswith(".py")})
    if not modules:
        print("no module matches", args.modules, file=sys.stderr)
        return 2
    texts = {name: (ROOT / name).read_text() for name in modules}
    every = [m for name in modules for m in mutants_of(name, texts[name])]

    work = Path(tempfile.mkdtemp(prefix="cfi2sframe-mutate-"))
    try:
        base = work / "base"
        copy_tree(ROOT, base, files)
        cov = _cached_coverage(args.cache, base, files, args.pytest_args)
        if cov is None:
            cov = build_coverage(base, work, args.pytest_args.split())
            if args.cache:
                _save_coverage(args.cache, base, files, args.pytest_args, cov)
        if cov.failed:
            print(f"baseline: {len(cov.failed)} failing tests are not used:", flush=True)
            for test in cov.failed:
                print("   ", test)
        plan: list[tuple[Mutant, list[str]]] = []
        for mutant in every:
            tests = covering_tests(cov, mutant, args.test_seconds)
            mutant.tests = len(tests)
            if not tests:
                mutant.status = "not-covered"
            else:
                plan.append((mutant, tests))
        if args.only:
            wanted = set()
            for item in args.only:
                name, _, line = item.rpartition(":")
                wanted.add((name, int(line)))
            plan = [(m, t) for m, t in plan if (m.path, m.line) in wanted]
        elif args.max_mutants and len(plan) > args.max_mutants:
            rng = random.Random(args.seed)
            chosen = set(rng.sample(range(len(plan)), args.max_mutants))
            plan = [item for index, item in enumerate(plan) if index in chosen]
        if args.list:
            for mutant, tests in plan:
                print(f"{mutant.key}  [{mutant.kind}, {len(tests)} tests]")
            return 0
        entries = read_equivalent(EQUIVALENT)
        workers: list[Path] = []
        for index in range(max(1, args.jobs)):
            dest = work / f"worker{index}"
            copy_tree(base, dest, files)
            workers.append(dest)
        free = list(workers)
        lock = threading.Lock()
        done = [0]

        def one(item: tuple[Mutant, list[str]]) -> None:
            mutant, tests = item
            with lock:
                copy = free.pop()
            try:
                budget = args.timeout or (2 * sum(cov.times.get(t, 1.0) for t in tests) + 30)
                status, seconds = run_mutant(copy, texts[mutant.path], mutant, tests, budget)
            finally:
                with lock:
                    free.append(copy)
            mutant.seconds = round(seconds, 2)
            mutant.status = status
            if status == "survived":
                why = equivalent_reason(entries, mutant, every)
                if why:
                    mutant.status, mutant.why = "equivalent", why
            with lock:
                done[0] += 1
                print(f"[{done[0]}/{len(plan)}] {mutant.status:10} {seconds:6.1f}s "
                      f"{mutant.key}", flush=True)
                if args.json:
                    _write_json(args, modules, cov, every)

        with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
            list(pool.map(one, plan))
    finally:
        if args.keep:
            print("kept", work)
        else:
            shutil.rmtree(work, ignore_errors=True)

    run = [m for m, _ in plan]
    print()
    print(f"{'module':36} {'mutants':>7} {'not cov':>7} {'run':>5} {'killed':>6} "
          f"{'equiv':>5} {'surv':>5}")
    totals = [0, 0, 0, 0, 0, 0]
    for name in modules:
        mine = [m for m in every if m.path == name]
        ran = [m for m in run if m.path == name]
        row = [len(mine), sum(m.status == "not-covered" for m in mine), len(ran),
               sum(m.status in ("killed", "timeout") for m in ran),
               sum(m.status == "equivalent" for m in ran),
               sum(m.status == "survived" for m in ran)]
        totals = [a + b for a, b in zip(totals, row, strict=True)]
        print(f"{name:36} {_columns(row)}")
    print(f"{'total':36} {_columns(totals)}")
    killed, equivalent, survived = totals[3], totals[4], totals[5]
    score = killed / max(1, killed + survived)
    print(f"\nscore: {killed}/{killed + survived} killed ({100 * score:.1f}%) of the "
          f"non-equivalent mutants run; {equivalent} equivalent; "
          f"{time.monotonic() - started:.0f} s")
    survivors = [m for m in run if m.status == "survived"]
    if survivors:
        print("\nsurvivors:")
        for mutant in survivors:
            print("  " + mutant.key)
    if args.json:
        _write_json(args, modules, cov, every)
    return 1 if survivors else 0


def _write_json(args: argparse.Namespace, modules: list[str], cov: CoverageMap,
                every: list[Mutant]) -> None:
    """Every mutant with its status (empty: not in the sample), rewritten as they finish."""
    args.json.write_text(json.dumps({
        "seed": args.seed, "max_mutants": args.max_mutants, "modules": modules,
        "baseline_failed": cov.failed,
        "mutants": [asdict(m) | {"key": m.key} for m in every]}, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
