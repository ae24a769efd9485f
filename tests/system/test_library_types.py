"""The public API as a type checker sees it (issue 40, item 11): a user's
``mypy --strict`` checks every call, and a name the package does not export is an
error.  The package exports lazily (a module ``__getattr__``, for start-up); type
checkers read the imports under ``TYPE_CHECKING`` and ``__all__`` instead."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import cfi2sframe
from tests.conftest import require, require_module

ROOT = Path(__file__).resolve().parents[2]
USE = Path(__file__).with_name("library_use.py")

# A user's mistakes, each with the error mypy --strict must give (mypy's own words).
MISUSE = '''\
from cfi2sframe import convert_asm, convert_elf_typo, get_arch
x: int = convert_asm("", "a").raw()
y: str = get_arch("x86_64").sp
convert_asm(b"bytes", "a")
'''
EXPECTED = [
    'misuse.py:1: error: Module "cfi2sframe" has no attribute "convert_elf_typo"  '
    "[attr-defined]",
    'misuse.py:2: error: Incompatible types in assignment (expression has type "bytes", '
    'variable has type "int")  [assignment]',
    'misuse.py:3: error: Incompatible types in assignment (expression has type "int", '
    'variable has type "str")  [assignment]',
    'misuse.py:4: error: Argument 1 to "convert_asm" has incompatible type "bytes"; '
    'expected "str"  [arg-type]',
]


def test_mypy_strict_finds_each_misuse_and_nothing_in_documented_use(tmp_path: Path) -> None:
    """One mypy run (a cold one reads the whole package: ~20 s) on two scripts: the
    misuse gives exactly its errors, the use of every export none."""
    require_module("mypy")
    (tmp_path / "misuse.py").write_text(MISUSE)
    (tmp_path / USE.name).write_text(USE.read_text())
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary",
         "--cache-dir", str(tmp_path / "cache"), "misuse.py", USE.name],
        cwd=tmp_path, env={"MYPYPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, check=False)
    assert proc.stdout.splitlines() == EXPECTED, proc.stdout + proc.stderr
    assert proc.returncode == 1


def test_the_documented_use_of_every_export_runs() -> None:
    require("as")
    used = {node.name for node in ast.walk(ast.parse(USE.read_text()))
            if isinstance(node, ast.alias)}
    assert set(cfi2sframe.__all__) <= used, sorted(set(cfi2sframe.__all__) - used)
    done = subprocess.run([sys.executable, str(USE), str(ROOT / "examples" /
                                                         "frame_pointer.s")],
                          capture_output=True, text=True, check=False)
    assert done.stdout == "ok\n", done.stdout + done.stderr


def test_the_lazy_table_and_the_typed_imports_name_the_same_objects() -> None:
    """``_EXPORTS`` (what ``__getattr__`` imports), ``__all__`` and the imports under
    ``TYPE_CHECKING`` (what type checkers see) list the same names, each from the same
    module; every one resolves; anything else is an AttributeError."""
    tree = ast.parse(Path(cfi2sframe.__file__).read_text())
    typed = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) \
                and node.test.id == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.level == 1
                for alias in imp.names:
                    public = alias.asname or alias.name
                    typed[public] = imp.module if alias.name == public else \
                        f"{imp.module}:{alias.name}"
    exports = cfi2sframe._EXPORTS  # type: ignore[attr-defined]
    assert typed == exports
    assert sorted(cfi2sframe.__all__) == sorted(exports)
    for name in cfi2sframe.__all__:
        assert getattr(cfi2sframe, name) is not None
    try:
        cfi2sframe.convert_elf_typo  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert str(exc) == "module 'cfi2sframe' has no attribute 'convert_elf_typo'"
    else:
        raise AssertionError("an unknown name resolved")


def test_the_docs_name_every_export_and_no_internal_module() -> None:
    """docs/library.md lists every exported name, and no page sends a user into the
    modules below the package (``cfi2sframe.analysis.unwind``, ``from cfi2sframe.x
    import``, ``compact.encoding.decode``): what a page shows is exported."""
    library = (ROOT / "docs" / "library.md").read_text()
    assert [name for name in cfi2sframe.__all__ if f"`{name}" not in library] == []
    internal = re.compile(r"\bcfi2sframe\.(?!invalid\b)[a-z_]+|`(?:compact|sframe|"
                          r"analysis|elf|convert)\.[a-z_]+\.[a-z_]+`")
    found = [f"{page.name}: {match.group()}" for page in [ROOT / "README.md",
                                                           *(ROOT / "docs").glob("*.md")]
             for match in internal.finditer(page.read_text())]
    assert found == []
