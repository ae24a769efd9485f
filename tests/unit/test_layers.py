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
    ("basics", "codes", "errors", "memo", "model", "reasons", "compact_reasons", "spawn",
     "typed"),
    ("files", "copying", "arch", "kinds", "core", "linker", "cstruct"),
    ("dwarf",),
    ("elf", "macho", "sections", "inputs"),
    ("frontend", "sframe", "xray", "compact.words", "compact.rules", "compact.x86", "compact.arm64",
     "compact.encoding", "compact.step", "compact.lower", "compact.writer", "compact.layout",
     "compact.table", "compact.table_writer", "compact.listing", "compact.prologue"),
    ("compact.inputs", "compact.check"),
    ("analysis",),
    ("convert",),
    ("batch",),
    ("cli", "__main__", ""),  # "" is the package's __init__: the lazy public API
]

# Imports inside functions, where they are deliberate: module -> (why, the functions
# (outermost, by name) that may import inside).  Every other import of the package is at
# its module's top, where a reader sees the graph; the public API (``__init__``) imports
# each name on first use through ``importlib``, no import statement.
_SUBCOMMAND = "the subcommand imports only what it runs (start-up time), the rest when it runs"
DEFERRED: dict[str, tuple[str, frozenset[str]]] = {
    "cli": ("the subcommand's module is imported when it runs; the assembler starts "
            "before the conversion loads", frozenset({"_dispatch"})),
    "reasons": ("the compact unwind codes (an enum of 28 members, ~2.5M instructions) "
                "load when first asked for: an ELF file's commands give none",
                frozenset({"__getattr__"})),
    "cli.early": ("the assembler's launcher (spawn, its private folder) loads only for a "
                  "command line whose assembler run starts here", frozenset({"launch"})),
    "cli.batch": (_SUBCOMMAND, frozenset({"_here", "_runner", "print_summary", "run_batch"})),
    "cli.common": (_SUBCOMMAND, frozenset({"add_limit_options", "function_names_of",
                                           "limits_of", "modules_of", "sframe_or_made"})),
    "cli.convert": (_SUBCOMMAND, frozenset({
        "_convert_archive", "_convert_compact", "_convert_many", "_epilog", "_object_arch",
        "_print_reasons", "_report_skips", "_sframe_form", "converted_line", "run"})),
    "cli.diff": (_SUBCOMMAND, frozenset({"run"})),
    "cli.dump": (_SUBCOMMAND, frozenset({"_compiled", "_dump", "_dump_archive", "_empty",
                                         "run"})),
    "cli.lookup": (_SUBCOMMAND, frozenset({"_debug_names", "run"})),
    "cli.macho": ("the Mach-O and compact modules load only for a Mach-O file",
                  frozenset({"dump", "lookup", "open_view", "verify"})),
    "cli.stats": (_SUBCOMMAND, frozenset({"run"})),
    "cli.unwind": (_SUBCOMMAND, frozenset({"_run_modules", "run"})),
    "cli.verify": (_SUBCOMMAND, frozenset({"_consumer", "run"})),
    "cli.xray": (_SUBCOMMAND, frozenset({"_coverage"})),
    "convert": ("assembly input loads Lark and the assembler front end only when it is "
                "assembly, and the back end after the assembler has started", frozenset({
                    "_lower_and_encode", "_object_with", "_without_sframe",
                    "already_converted", "asm", "assembler_disagreements",
                    "convert_archive", "convert_asm", "convert_elf", "convert_file",
                    "convert_probe", "convert_sframe", "elf_copy", "obj", "object_arch",
                    "rewrite_in_place", "sframe_from_eh_frame", "timelines_from_asm",
                    "verify_as_converted"})),
    "compact.inputs": ("the same for compact unwind: Lark only for assembly input; the "
                       "ELF CFI reader, the prologue reader and the Mach-O writer only "
                       "for what reads or writes them; the __unwind_info table reader "
                       "and writer only for an image's table", frozenset({
                           "_with_new_rows", "compact_asm_rows", "compact_elf",
                           "darwin_object", "from_prologues", "unwind_table",
                           "unwind_columns", "image_functions", "image_columns",
                           "placed_functions"})),
    "cli.compact": ("the __unwind_info writer loads for a table written only",
                    frozenset({"_write_placed", "_write_unwind_info"})),
    "frontend.macho_probe": ("the Mach-O reader loads only for an Apple target's probe "
                             "object, not where ELF assembly asks whether it is Darwin's",
                             frozenset({"elf_like_symbols"})),
    "frontend.timelines": ("the Mach-O reader loads only for an assembler that wrote "
                           "Mach-O (an Apple target), never on the ELF path",
                           frozenset({"_macho_of"})),
    "frontend.directives": ("the Lark grammar loads only for a statement read not at a "
                            "glance", frozenset({"parse_statement"})),
    "analysis.snapshot": ("the compact unwind rows are made (and their modules loaded) "
                          "only for a walk with --compact", frozenset({"walk_snapshot"})),
    "batch.record": ("warm_up imports what the per-file children run, before they fork; "
                     "each task loads only what it runs", frozenset({
                         "_convert", "_convert_archive", "_coverage", "_fill_archive",
                         "_fill_data", "_fill_macho", "_object_form", "_recognised",
                         "_scanned", "_verify", "_verify_made", "warm_up"})),
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(name: str) -> bool:
    base = PACKAGE.joinpath(*name.split(".")) if name else PACKAGE
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _imports(path: Path) -> list[tuple[str, int, str | None]]:
    """(imported module of the package, line, the outermost function it is inside or
    None) for every import."""
    name = _module_name(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    if name == "":
        package = []
    tree = ast.parse(path.read_text())
    found: list[tuple[str, int, str | None]] = []

    def visit(node: ast.AST, in_function: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function
            if inner is None and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inner = child.name
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

    visit(tree, None)
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


def _graph() -> dict[str, list[tuple[str, int, str | None]]]:
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
    """Each import inside a function is at a site ``DEFERRED`` lists, and every site
    listed still defers one (a site whose imports moved to the top is struck off)."""
    graph = _graph()
    hidden = [f"cfi2sframe/{module.replace('.', '/') or '__init__'}.py:{line}: imports "
              f"{target} inside {function}(): import it at the top, or list the site in "
              "DEFERRED with why" for module, imports in graph.items()
              for target, line, function in imports
              if function is not None and function not in DEFERRED.get(module, ("", ()))[1]]
    assert not hidden, "\n".join(hidden)
    used = {(module, function) for module, imports in graph.items()
            for _, _, function in imports if function is not None}
    stale = [f"{module}.{function}" for module, (_, functions) in DEFERRED.items()
             for function in functions if (module, function) not in used]
    assert not stale, "listed in DEFERRED, but import nothing inside: " + ", ".join(stale)


def _redundant(path: Path) -> list[str]:
    """Imports inside a function of a name the module already imports at its top."""
    tree = ast.parse(path.read_text())
    top = {(node.level, node.module, alias.name, alias.asname) for node in tree.body
           if isinstance(node, ast.ImportFrom) for alias in node.names}
    top |= {(0, alias.name, None, alias.asname) for node in tree.body
            if isinstance(node, ast.Import) for alias in node.names}
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            names = [(node.level, node.module, a.name, a.asname) for a in node.names] \
                if isinstance(node, ast.ImportFrom) else \
                [(0, a.name, None, a.asname) for a in node.names] \
                if isinstance(node, ast.Import) else []
            found += [f"{path.relative_to(ROOT)}:{node.lineno}: {name[2] or name[1]}"
                      for name in names if name in top]
    return found


def test_no_import_inside_a_function_repeats_one_at_the_top() -> None:
    redundant = [line for path in sorted(PACKAGE.rglob("*.py")) for line in _redundant(path)]
    assert not redundant, "imported at the top already:\n" + "\n".join(redundant)


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


def test_the_elf_and_ar_magic_numbers_are_written_only_in_kinds() -> None:
    """What an input is is told in one place (``kinds``, through ``inputs``): no other
    module tests the ELF or ar magic itself."""
    magic = ('b"\\x7fELF"', 'b"!<arch>', 'b"!<thin>')
    found = [f"{path.relative_to(ROOT)}: {word}" for path in sorted(PACKAGE.rglob("*.py"))
             if path.name != "kinds.py" for word in magic if word in path.read_text()]
    assert not found, "\n".join(found)


def test_the_gdb_script_imports_nothing_of_the_package() -> None:
    """gdb sources ``gdb_snapshot.py`` as a file of its own, outside any package: an
    import of the package's modules (``from ..typed import``) fails there, at gdb's
    first use of ``snapshot``."""
    path = PACKAGE / "analysis" / "gdb_snapshot.py"
    ours = [f"{path.name}:{node.lineno}" for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "")
                                                     .startswith("cfi2sframe"))]
    assert not ours, ours
