"""No binary layout is written as a raw ``struct`` call outside the layout modules
(issue 42: every layout named once).

Every call of ``struct.pack``, ``unpack``, ``pack_into``, ``unpack_from``,
``iter_unpack``, ``calcsize`` or ``struct.Struct`` in the package is read with ``ast``;
outside the modules that declare layouts it fails, unless its place (module, outermost
function or class) is a deliberate exception listed here with the reason.  Readers
and writers elsewhere take their records from the layout modules (``CStruct``,
``Layout``, ``ElfRecord``) and name fields, so a literal format or offset is a layout
declared twice.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "cfi2sframe"

# The modules that declare layouts (through cstruct.py, the one mechanism).
LAYOUT_MODULES = frozenset({"cstruct", "elf.structs", "macho.layout", "compact.layout",
                            "sframe.format"})
CALLS = frozenset({"pack", "unpack", "pack_into", "unpack_from", "iter_unpack", "calcsize",
                   "Struct"})
_XRAY = "XRay's trace records and instrumentation map are not among issue 42's layouts"
_FRE_WORDS = ("an FRE's data words: as many as the row has, each of the size its info byte "
              "gives, in the codes sframe/format.py declares (WORD_CODE, FRE_HEAD)")
# (module, outermost function or class, or "" at module level) -> why.
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("batch.pool", ""): "the length prefix of a message on a worker's pipe: no file's layout",
    ("dwarf.cfi", "_Reader"): "DWARF CFI is variable-length (LEB128, encodings an "
                              "augmentation picks): the fast path's two leading fields",
    ("dwarf.frames", "entries"): "a CFI entry's length and CIE id, before its LEB128 fields",
    ("sframe.encode", "_fre_struct"): _FRE_WORDS,
    ("sframe.decode", "_data_words"): _FRE_WORDS,
    ("sframe.encode", "SectionImage"): "every FDE's start field in one pack: as many as the "
                                       "section has, 32 or 64 bits as the version's FDE",
    ("xray.fast", ""): _XRAY,
    ("xray.text", ""): _XRAY,
    ("xray.instr_map", "_sleds"): _XRAY,
    ("xray.instr_map", "_index_groups"): _XRAY,
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def raw_calls(source: str) -> list[tuple[str, int, str]]:
    """(outermost function or class, or "", line, call) of each raw ``struct`` call."""
    found: list[tuple[str, int, str]] = []

    def visit(node: ast.AST, outer: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = outer
            if not outer and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                ast.ClassDef)):
                inner = child.name
            if isinstance(child, ast.ImportFrom) and child.module == "struct":
                found.append((outer, child.lineno, ast.unparse(child)))
            if (isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute)
                    and isinstance(child.func.value, ast.Name)
                    and child.func.value.id == "struct" and child.func.attr in CALLS):
                found.append((outer, child.lineno, ast.unparse(child)[:80]))
            visit(child, inner)

    visit(ast.parse(source), "")
    return found


def test_no_raw_struct_call_outside_the_layout_modules() -> None:
    unexpected, used = [], set()
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        if module in LAYOUT_MODULES:
            continue
        for outer, line, call in raw_calls(path.read_text()):
            if (module, outer) in EXCEPTIONS:
                used.add((module, outer))
            else:
                unexpected.append(f"{path.relative_to(ROOT)}:{line} ({outer or 'module'}): "
                                  f"{call}")
    assert not unexpected, "raw struct calls outside the layout modules (declare the " \
        "record in a layout module, or list a deliberate exception):\n" + "\n".join(unexpected)
    assert used == set(EXCEPTIONS), f"exceptions no longer needed: {set(EXCEPTIONS) - used}"


def test_the_scan_finds_each_form() -> None:
    """The scan sees a call at module level, in a function and in a method, and an
    import of struct's functions, with a literal format or not."""
    source = ("import struct\nA = struct.Struct('<I')\n"
              "def f(order):\n    return struct.unpack_from(order + 'Q', b'', 0)\n"
              "class C:\n    def m(self, fmt):\n        return struct.pack(fmt, 1)\n"
              "from struct import pack\n")
    assert [(outer, line) for outer, line, _ in raw_calls(source)] == [
        ("", 2), ("f", 4), ("C", 7), ("", 8)]
