"""Every code reference the documentation makes resolves.

ARCHITECTURE.md, README.md, docs/*.md, the package's docstrings and the C sources'
comments name modules, functions and files in backticks; a rename that leaves one
behind turns a claim into a dead end for the next engineer.  This test resolves each
reference that looks like code of ours (a path, a file name, a dotted name rooted in
the package) without importing anything: files must exist, names must be defined at
the top level of their module (or as a method of a class there).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "cfi2sframe"
TICKS = re.compile(r"`{1,2}([^`\n]+?)`{1,2}")
# A path (any file under a folder of ours), or a bare name of one of our source files:
# a bare ``foo.o`` or ``libz.a`` is an example, not a claim.
PATH = re.compile(r"^(?:[\w.-]+/)+[\w.-]+\.\w+$|^[\w.-]+\.(?:py|pyi|c|h|md|sh|lark)$"
                  r"|^(?:[\w-]+/)+$")
DOTTED = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")
PLACEHOLDER = re.compile(r"\b[A-Z]{2,}\b")  # cfi2sframe/arch/NAME.py
# Files of the specifications we write from, named as their projects name them.
EXTERNAL = frozenset({"sframe.h", "compact_unwind_encoding.h"})
SUFFIXES = frozenset({"py", "pyi", "c", "h", "md", "sh", "lark"})
PATH_ATTR = re.compile(r"^((?:\w+/)+\w+)\.(\w+(?:\.\w+)*)$")


def _lines() -> Iterator[tuple[Path, int, str]]:
    docs = [ROOT / "ARCHITECTURE.md", ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for path in docs:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            yield path, number, line
    for path in sorted(PKG.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                doc = ast.get_docstring(node, clean=False)
                if doc:
                    for offset, line in enumerate(doc.splitlines()):
                        yield path, node.body[0].lineno + offset, line
    for path in sorted([*PKG.rglob("*.h"), *PKG.rglob("*.c")]):
        in_comment = False
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if "/*" in line or "//" in line or in_comment:
                yield path, number, line
            in_comment = (in_comment or "/*" in line) and "*/" not in line.split("/*")[-1]


@cache
def _files_named(name: str) -> bool:
    return any(p for p in ROOT.rglob(name) if ".git" not in p.parts and "build" not in p.parts)


@cache
def _module_names(path: Path) -> frozenset[str]:
    """Top-level names of a module, and Class.method for its classes."""
    names: set[str] = set()
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        names.add(f"{node.name}.{item.name}")
                    elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        names.add(f"{node.name}.{item.target.id}")
                    elif isinstance(item, ast.Assign):
                        names.update(f"{node.name}.{t.id}" for t in item.targets
                                     if isinstance(t, ast.Name))
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                for sub in ast.walk(target):
                    if isinstance(sub, ast.Name):
                        names.add(sub.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return frozenset(names)


def _module_file(parts: list[str]) -> Path | None:
    base = (ROOT / "grammar").joinpath(*parts[1:]) if parts[0] == "grammar" \
        else PKG.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py", base.with_suffix(".pyi")):
        if candidate.is_file():
            return candidate
    return None


def _resolves_dotted(parts: list[str]) -> bool:
    """The longest module prefix exists and the rest is a name defined in it."""
    for split in range(len(parts), 0, -1):
        module = _module_file(parts[:split])
        if module is None:
            continue
        rest = parts[split:]
        if not rest:
            return True
        name = ".".join(rest[:2])
        return name in _module_names(module) or rest[0] in _module_names(module) and len(rest) == 1
    return False


def _ours(parts: list[str]) -> bool:
    return (PKG / parts[0]).is_dir() or (PKG / f"{parts[0]}.py").is_file() \
        or (ROOT / parts[0]).is_dir()


@cache
def _arch_fields() -> frozenset[str]:
    """``arch.NAME`` in a docstring is a field of the ``Arch`` value it is given."""
    tree = ast.parse((PKG / "arch" / "base.py").read_text())
    arch = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Arch")
    return frozenset(n.target.id for n in arch.body
                     if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)) \
        | frozenset(n.name for n in arch.body if isinstance(n, ast.FunctionDef))


def problem(token: str) -> str | None:
    """Why a backticked token of ours does not resolve; None when it does or is not ours."""
    token = token.strip().rstrip("()")
    if " " in token or token.startswith(("-", "/", "~", "$", "../")) or PLACEHOLDER.search(token) \
            or token in EXTERNAL:
        return None
    match = PATH_ATTR.match(token)
    if match and match.group(2) not in SUFFIXES \
            and _module_file(match.group(1).split("/")) is not None:
        return None if _resolves_dotted([*match.group(1).split("/"), *match.group(2).split(".")]) \
            else "no such name in that module"
    if PATH.match(token):
        if "/" in token and not _ours(token.split("/")):
            return None  # another project's path (glibc's sysdeps/..., ar's name/)
        if token.endswith("/"):
            ok = (ROOT / token).is_dir() or (PKG / token).is_dir()
        elif "/" in token:
            ok = (ROOT / token).exists() or (PKG / token).exists()
        else:
            ok = _files_named(token)
        return None if ok else "no such file"
    if DOTTED.match(token):
        parts = token.split(".")
        if parts[0] == "cfi2sframe":
            parts = parts[1:]
            if not parts:
                return None
        elif parts[0] == "arch" and len(parts) == 2 and parts[1] in _arch_fields():
            return None
        elif not _ours(parts):
            return None
        return None if _resolves_dotted(parts) else "no such module or name"
    return None


def test_every_code_reference_in_the_documentation_resolves() -> None:
    dead = [f"{path.relative_to(ROOT)}:{number}: `{token}`: {why}"
            for path, number, line in _lines()
            for token in TICKS.findall(line)
            if (why := problem(token)) is not None]
    assert not dead, "\n".join(dead)


def test_the_resolver_tells_dead_references_from_live_ones() -> None:
    live = ["sframe/lower.py", "sframe/lower._SIGNED_WITH_PC", "cfi2sframe.sframe.decode",
            "compact.step.step", "tests/unit/test_claims.py", "tests/unit/", "dwarf_replay.c",
            "arch.max_page_size", "cfi2sframe.grammar", "examples/frame_pointer.s"]
    dead = ["sframe/lower._signed_with_pc", "sframe/nope.py", "cfi2sframe.sframe.nope",
            "compact.encoding.step", "tests/differential/test_direct.py", "tests/nope/",
            "_core_nope.c", "arch.no_such_field", "examples/nope.s"]
    assert [t for t in live if problem(t) is not None] == []
    assert [t for t in dead if problem(t) is None] == []
    assert problem("libz.a") is None and problem("name/") is None  # examples, not claims
