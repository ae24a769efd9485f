"""The import graph follows the documented layer order (ARCHITECTURE.md, "Layers").

Every import of the package's own modules is read from the source with ``ast``: at module
level, inside functions and under ``TYPE_CHECKING`` alike.  A module may import its own
layer or the layers below it, never one above; the graph has no cycle; and an import
inside a function is allowed only at the deliberate boundaries listed here, so that the
graph a reader sees at the top of each file is the real one.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "cfi2sframe"

# Bottom to top.  A module belongs to the first entry that is it or a package above it.
LAYERS: list[tuple[str, ...]] = [
    ("errors", "model", "reasons"),
    ("files", "arch", "kinds", "core", "linker"),
    ("dwarf",),
    ("elf", "macho", "sections", "inputs"),
    ("frontend", "sframe", "xray", "compact.words", "compact.rules", "compact.x86", "compact.arm64",
     "compact.encoding", "compact.step", "compact.lower", "compact.writer", "compact.table",
     "compact.table_writer", "compact.listing", "compact.prologue"),
    ("compact.inputs", "compact.check"),
    ("analysis",),
    ("convert",),
    ("batch",),
    ("cli", "__main__", ""),  # "" is the package's __init__: the lazy public API
]

# Imports inside functions, where they are deliberate (module: why).
DEFERRED = {
    "": "the public API imports each name on first use",
    "cli": "each subcommand imports only what it runs; the assembler starts before Lark loads",
    "convert": "assembly input loads Lark and the assembler front end only when it is assembly",
    "compact.inputs": "the same for compact unwind: Lark only for assembly input",
    "frontend.directives": "the Lark grammar loads only for a statement read not at a glance",
    "batch.record": "warm_up imports what the per-file children run, before they fork",
    "batch.cluster": "dask is an optional extra",
    "batch.plot": "matplotlib is an optional extra",
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(name: str) -> bool:
    base = PACKAGE.joinpath(*name.split(".")) if name else PACKAGE
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _imports(path: Path) -> list[tuple[str, int, bool]]:
    """(imported module of the package, line, inside a function) for every import."""
    name = _module_name(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    if name == "":
        package = []
    tree = ast.parse(path.read_text())
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package[: len(package) - (child.level - 1)]
                    target = ".".join(base + ([child.module] if child.module else []))
                elif (child.module or "").startswith("cfi2sframe"):
                    target = child.module.removeprefix("cfi2sframe").lstrip(".")  # type: ignore[union-attr]
                else:
                    continue
                for alias in child.names:
                    sub = f"{target}.{alias.name}".lstrip(".")
                    found.append((sub if _is_module(sub) else target, child.lineno, in_function))
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name.startswith("cfi2sframe"):
                        target = alias.name.removeprefix("cfi2sframe").lstrip(".")
                        found.append((target, child.lineno, in_function))
            visit(child, inner)

    visit(tree, False)
    return found


def _entry(module: str, entries: dict[str, object] | tuple[str, ...]) -> str | None:
    """The longest entry that is ``module`` or a package holding it."""
    best = None
    for entry in entries:
        if entry == "":
            if module == "" and best is None:
                best = ""
            continue
        if (module == entry or module.startswith(entry + ".")) and \
                (best is None or len(entry) > len(best)):
            best = entry
    return best


def _layer(module: str) -> int:
    for index, names in enumerate(LAYERS):
        if _entry(module, names) is not None:
            return index
    raise AssertionError(f"module '{module}' is in no layer: add it to LAYERS and "
                         "ARCHITECTURE.md")


def _graph() -> dict[str, list[tuple[str, int, bool]]]:
    return {_module_name(path): _imports(path) for path in sorted(PACKAGE.rglob("*.py"))
            if "gdb_snapshot" not in path.name}  # run by gdb's Python, not imported


def test_every_import_runs_down_the_layers() -> None:
    graph = _graph()
    assert len(graph) > 70
    upward = [f"cfi2sframe/{module.replace('.', '/') or '__init__'}.py:{line}: "
              f"{module or 'cfi2sframe'} (layer {_layer(module)}) imports {target} "
              f"(layer {_layer(target)})"
              for module, imports in graph.items() for target, line, _ in imports
              if _layer(target) > _layer(module)]
    assert not upward, "\n".join(upward)


def test_imports_inside_functions_only_at_deliberate_boundaries() -> None:
    hidden = [f"cfi2sframe/{module.replace('.', '/')}.py:{line}: imports {target} inside a "
              "function" for module, imports in _graph().items()
              for target, line, deferred in imports
              if deferred and _entry(module, DEFERRED) is None]
    assert not hidden, "\n".join(hidden)


def test_the_import_graph_has_no_cycle() -> None:
    graph = {module: {t for t, _, _ in imports if t != module and t in _graph_keys()}
             for module, imports in _graph().items()}
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycle = path[path.index(nxt):] + [nxt] if nxt in path else [node, nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])


def _graph_keys() -> set[str]:
    return {_module_name(path) for path in PACKAGE.rglob("*.py")}


def test_the_checker_sees_an_upward_import(tmp_path: Path) -> None:
    """The walker itself: a relative import from a function of ``elf`` up to ``convert``
    is found and placed in its layers (so the tests above can fail)."""
    probe = PACKAGE / "elf" / "read.py"
    imports = _imports(probe)
    assert any(target == "arch" for target, _, _ in imports)
    assert _layer("dwarf.cfi") < _layer("elf.cfi") < _layer("convert")
    assert _layer("sframe.words") == 4
    assert _layer("compact.inputs") > _layer("compact.lower")
