"""ARCHITECTURE.md's two tables stay true to the code.

"Modules": one short row per module file of the package, so a new module without a row,
a row left behind by a rename or a row grown into a page fails here.  "The compiled
core": one row per entry point of ``cfi2sframe._core`` with its C file, its Python
reference, its differential tests and its fuzz targets; an entry point added without
its row, or a row naming a test that is gone, fails here.  Read without importing the
package's modules (but the built core, where it is).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import compiled_core
from tests.unit.test_claims import problem

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "cfi2sframe"
ROW_LIMIT = 400
TICKED = re.compile(r"`([^`]+)`")


def _section(text: str, title: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index(f"## {title}")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")),
               len(lines))
    return lines[start + 1:end]


def _rows(section: list[str]) -> list[list[str]]:
    """The cells of each table row of a section, heading and rule left out."""
    table = [line for line in section if line.startswith("|")][2:]
    return [[cell.strip() for cell in line.strip().strip("|").split(" | ")] for line in table]


def _architecture() -> str:
    return (ROOT / "ARCHITECTURE.md").read_text()


def module_problems(text: str, files: list[str]) -> list[str]:
    """What the module table gets wrong about ``files`` (paths under the package)."""
    section = _section(text, "Modules")
    found: list[str] = []
    named: dict[str, int] = {}
    for line in (line for line in section if line.startswith("| `")):
        if len(line) > ROW_LIMIT:
            found.append(f"row of {len(line)} characters: {line[:60]}...")
    for cells in _rows(section):
        names = TICKED.findall(cells[0])
        if len(names) != 1 or cells[0] != f"`{names[0]}`":
            found.append(f"a row names one module, in backticks: {cells[0]}")
            continue
        name = names[0]
        named[name] = named.get(name, 0) + 1
        if not ((PKG / name).exists() or (ROOT / name).exists()):
            found.append(f"row for {name}, which does not exist")
    found += [f"{name}: {count} rows" for name, count in named.items() if count > 1]
    found += [f"{name}: no row" for name in files if name not in named]
    return found


def _package_modules() -> list[str]:
    return sorted(str(path.relative_to(PKG)) for path in PKG.rglob("*.py"))


def _entry_points_declared() -> set[str]:
    """The entry points ``_core.pyi`` declares and ``csrc/module.c`` registers."""
    stub = ast.parse((PKG / "_core.pyi").read_text())
    declared = {node.name for node in stub.body if isinstance(node, ast.FunctionDef)}
    registered = set(re.findall(r'^\s*\{"(\w+)",.*\bMETH_', (PKG / "csrc" / "module.c").read_text(),
                                re.M))  # the method table's rows, not the constants'
    assert declared == registered, declared ^ registered
    return declared


def _fuzz_entry_points() -> dict[str, set[str]]:
    """``ENTRY_POINTS`` of the fuzz tier: target -> the entry points it must call."""
    tree = ast.parse((ROOT / "tests" / "fuzz" / "test_fuzz_budget.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "ENTRY_POINTS" for t in node.targets):
            return {target: set(names)
                    for target, names in ast.literal_eval(node.value).items()}
    raise AssertionError("tests/fuzz/test_fuzz_budget.py has no ENTRY_POINTS")


def _defines(path: Path, function: str) -> bool:
    return any(isinstance(node, ast.FunctionDef) and node.name == function
               for node in ast.parse(path.read_text()).body)


def core_problems(text: str, entry_points: set[str],
                  fuzzed: dict[str, set[str]]) -> list[str]:
    """What the compiled core's table gets wrong about the module's entry points and
    the fuzz targets that call them."""
    found: list[str] = []
    listed: set[str] = set()
    for cells in _rows(_section(text, "The compiled core")):
        if len(cells) != 5:
            found.append(f"a row of {len(cells)} cells: {cells}")
            continue
        entry, c_file, reference, tests, targets = cells
        name = entry.strip("`")
        if name in listed:
            found.append(f"{name}: two rows")
        listed.add(name)
        source = PKG / c_file.strip("`")
        if not source.is_file() or not re.search(rf"^PyObject \*{name}\(", source.read_text(),
                                                 re.M):
            found.append(f"{name}: {c_file} does not define it")
        for token in TICKED.findall(reference):
            top_level = (PKG / (token.split(".")[0] + ".py")).is_file()  # convert.convert_elf
            if ("/" not in token and not top_level) or problem(token) is not None:
                found.append(f"{name}: reference {token} does not resolve")
        test_file: Path | None = None
        for token in TICKED.findall(tests):
            if "::" in token:
                path, _, token = token.partition("::")
                test_file = ROOT / path
            if test_file is None or not test_file.is_file() or not _defines(test_file, token):
                found.append(f"{name}: no test {token} in {test_file}")
        if test_file is None:
            found.append(f"{name}: no differential test named")
        want = sorted(target for target, names in fuzzed.items() if name in names)
        if sorted(t.strip() for t in targets.split(",") if t.strip()) != want:
            found.append(f"{name}: fuzz targets {targets}, tests/fuzz says {', '.join(want)}")
    found += [f"{name}: no row" for name in sorted(entry_points - listed)]
    found += [f"{name}: a row, but no such entry point" for name in sorted(listed - entry_points)]
    return found


def test_every_module_has_one_short_row() -> None:
    assert module_problems(_architecture(), _package_modules()) == []


def test_every_entry_point_of_the_built_core_has_its_row() -> None:
    declared = _entry_points_declared()
    core = compiled_core()
    built = {name for name in dir(core)
             if not name.startswith("_") and callable(getattr(core, name))}
    assert built == declared, built ^ declared
    assert core_problems(_architecture(), built, _fuzz_entry_points()) == []


def test_the_checks_find_what_is_wrong() -> None:
    """Each check fails on a table with the fault it looks for."""
    text = _architecture()
    modules = _package_modules()
    assert module_problems(text, [*modules, "new.py"]) == ["new.py: no row"]
    row = next(line for line in text.splitlines() if line.startswith("| `model.py` |"))
    long_row = row[:-2] + "x" * ROW_LIMIT + " |"
    assert any("characters" in p for p in module_problems(text.replace(row, long_row), modules))
    assert module_problems(text.replace("| `model.py` |", "| `gone.py` |"), modules) == \
        ["row for gone.py, which does not exist", "model.py: no row"]
    entry_points, fuzzed = _entry_points_declared(), _fuzz_entry_points()
    assert core_problems(text, entry_points | {"new_loop"}, fuzzed) == ["new_loop: no row"]
    row = next(line for line in text.splitlines() if line.startswith("| `agree` |"))
    assert core_problems(text.replace(row, ""), entry_points, fuzzed) == ["agree: no row"]
    broken = {"`csrc/analysis_compare.c` |": "`csrc/xray.c` |",
              "`analysis/compare._Verifier.check`": "`analysis/compare._Verifier.nope`",
              "test_agree_per_function_gives": "test_agree_per_function_takes",
              "| rewrite |": "| elf |"}
    for old, new in broken.items():
        assert len(core_problems(text.replace(row, row.replace(old, new)), entry_points,
                                 fuzzed)) == 1, old
