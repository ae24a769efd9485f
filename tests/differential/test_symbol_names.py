"""Function names read from ELF symbol tables: the whole table, the names at a few
addresses only (what ``lookup`` of numeric PCs reads), and ``nm`` as the oracle.

A string table's offsets count bytes: a name that is not UTF-8 must not move the
names after it (ELF gABI, "String Table": a name is the bytes from its offset up to
the next NUL, and a name may be the tail of another)."""

from __future__ import annotations

import random
import re
import subprocess
from pathlib import Path

import pytest

from cfi2sframe.core import compiled
from cfi2sframe.elf.read import _string_table, open_elf_file, string_at
from cfi2sframe.elf.symbols import function_names
from tests.conftest import cfi2sframe, require, require_path

# Big-endian (s390x) and 32-bit (i386) tables too: the values at some addresses are
# read from a strided view of the table where its byte order is this machine's.
LIBRARIES = ["/usr/lib/x86_64-linux-gnu/libstdc++.so.6", "/usr/lib/x86_64-linux-gnu/libz.so.1",
             "/usr/aarch64-linux-gnu/lib/libc.so.6", "/usr/s390x-linux-gnu/lib/libc.so.6",
             "/usr/lib32/libstdc++.so.6"]


def test_offsets_count_bytes_when_a_name_is_not_utf8() -> None:
    # offsets 1..4 "a\xffb", 5..8 "foo", 9..13 "\xc3\xa9t\xe9", 14..17 "bar"; 7 is the
    # tail "o" of "foo", 11 the tail "t\xe9"
    table = b"\0a\xffb\0foo\0\xc3\xa9t\xe9\0bar\0"
    name = _string_table(table)
    assert name(5) == "foo" and name(7) == "o" and name(14) == "bar"
    assert name(9) == "\u00e9t\ufffd" and name(11) == "t\ufffd" and name(1) == "a\ufffdb"
    assert all(name(at) == string_at(table, at) for at in range(len(table) + 2))


def _built(folder: Path) -> list[str]:
    """An object and a program with .symtab: global and static functions, and an alias
    (two names at one address)."""
    require("gcc")
    source = folder / "many.c"
    source.write_text("".join(f"{'static ' if i % 3 else ''}int s{i}(int x) "
                              f"{{ return x * {i}; }}\n" for i in range(120)) +
                      "int alias(int) __attribute__((alias(\"s0\")));\n"
                      "int main(void) { return " +
                      " + ".join(f"s{i}({i})" for i in range(120)) + "; }\n")
    obj, program = folder / "many.o", folder / "many"
    subprocess.run(["gcc", "-O1", "-fno-inline", "-c", str(source), "-o", str(obj)],
                   check=True)
    subprocess.run(["gcc", str(obj), "-o", str(program)], check=True)
    return [str(obj), str(program)]


@pytest.mark.parametrize("path", [*LIBRARIES, "built"])
def test_names_at_some_addresses_are_those_the_whole_table_gives(path: str,
                                                                 tmp_path: Path) -> None:
    """Stripped libraries (.dynsym; AArch64 mapping symbols) and unstripped files
    (.symtab, per-section names in the object)."""
    paths = _built(tmp_path) if path == "built" else [path]
    for path in paths:
        _same_names(path)


def _same_names(path: str) -> None:
    require_path(path)
    view = open_elf_file(path, Path(path).read_bytes())
    everything = function_names(view)
    assert len(everything) > 50
    addresses = sorted({address for _, address in everything})
    some = set(addresses[::97]) | {addresses[0], addresses[-1], 0, 1}
    assert function_names(view, some) == {key: name for key, name in everything.items()
                                          if key[1] in some}


@pytest.mark.parametrize("path", LIBRARIES)
def test_names_at_a_few_addresses_searched_in_place(path: str) -> None:
    """A few addresses (the general path's FDEs, a PLT's one): each value's bytes
    searched for in the table, not every value read; the whole table's names are the
    oracle (and readelf theirs, below)."""
    require_path(path)
    view = open_elf_file(path, Path(path).read_bytes())
    everything = function_names(view)
    addresses = sorted({address for _, address in everything})
    rng = random.Random(path)
    picks = [{a} for a in rng.sample(addresses, 40)] + \
        [set(rng.sample(addresses, 5)) for _ in range(10)] + \
        [{0}, {1}, {addresses[0] + 1}, {addresses[-1], 1 << 64}]
    for some in picks:
        assert function_names(view, some) == {key: name for key, name in everything.items()
                                              if key[1] in some}, sorted(some)


def test_lookup_names_each_function_as_nm_does(tmp_path: Path) -> None:
    """An object (names per section) and a program: ``lookup`` of each function's
    start by number names it as ``nm`` does, and by name finds the same row."""
    require("gcc", "nm")
    source = tmp_path / "f.c"
    chain = "".join(f"int f{i + 1}(int x);\nint f{i}(int x) {{ return x * {i} + f{i + 1}(x); }}\n"
                    for i in range(8))
    source.write_text(chain + "int f8(int x) { return x; }\n"
                      "static int g(int x) { return f0(x) + 1; }\n"
                      "int main(void) { return g(3); }\n")
    asm, obj, program = tmp_path / "f.s", tmp_path / "f.o", tmp_path / "f"
    subprocess.run(["gcc", "-O1", "-fno-inline", "-S", str(source), "-o", str(asm)],
                   check=True)
    subprocess.run(["gcc", "-c", str(asm), "-o", str(obj)], check=True)
    subprocess.run(["gcc", str(obj), "-o", str(program)], check=True)
    ours = tmp_path / "ours.o", tmp_path / "ours"
    assert cfi2sframe(str(asm), "--emit", "obj", "-o", str(ours[0]),
                      cwd=tmp_path).returncode == 0
    assert cfi2sframe(str(program), "--emit", "elf", "-o", str(ours[1]),
                      cwd=tmp_path).returncode == 0
    for path, converted in zip((obj, program), ours, strict=True):
        symbols = {}
        for line in subprocess.run(["nm", "--defined-only", str(path)], capture_output=True,
                                   text=True, check=True).stdout.splitlines():
            value, kind, name = line.split()
            if kind in "tT":
                symbols[name] = int(value, 16)
        assert {"f0", "f8", "g", "main"} <= symbols.keys()
        named = 0
        for name, start in symbols.items():
            by_number = cfi2sframe("lookup", str(converted), hex(start), cwd=tmp_path)
            by_name = cfi2sframe("lookup", str(converted), name, cwd=tmp_path)
            if name == "_start" or by_number.returncode:  # crt code without an FDE
                continue
            assert f": {name}+0x0: " in by_number.stdout, (path.name, name, by_number.stdout)
            assert by_name.stdout == by_number.stdout
            named += 1
        assert named >= 11, path.name


def _readelf_names(path: str) -> dict[tuple[str, int], str]:
    """What ``function_names`` must give, from ``readelf -sW``: in the first table with
    entries (.symtab, else .dynsym), the first function symbol at each address in a
    section, else the first untyped one (no ``.L`` label, no mapping symbol); per
    section in an object."""
    listing = subprocess.run(["readelf", "-sW", "--dyn-syms", path], capture_output=True,
                             text=True, check=True).stdout
    headers = subprocess.run(["readelf", "-SW", path], capture_output=True, text=True,
                             check=True).stdout
    section_names = {int(number): name for number, name in
                     re.findall(r"^\s*\[\s*(\d+)\]\s+(\S+)", headers, re.MULTILINE)}
    relocatable = "REL (Relocatable file)" in subprocess.run(
        ["readelf", "-h", path], capture_output=True, text=True, check=True).stdout
    tables: dict[str, list[tuple[str, int, str, str]]] = {}
    table = ""
    for line in listing.splitlines():
        heading = re.match(r"Symbol table '(\S+)' contains", line)
        if heading:
            table = heading.group(1)
            tables[table] = []
            continue
        fields = line.split(None, 7)
        if len(fields) < 7 or not fields[0][:-1].isdigit():
            continue
        name = re.sub(r"@.*$", "", re.sub(r" \(\d+\)$", "", fields[7])) \
            if len(fields) == 8 else ""
        tables[table].append((fields[3], int(fields[1], 16), fields[6], name))
    chosen = tables.get(".symtab") or tables.get(".dynsym") or []
    names: dict[tuple[str, int], str] = {}
    for wanted in ("FUNC", "NOTYPE"):
        for kind, value, ndx, name in chosen:
            if kind != wanted or not ndx.isdigit() or int(ndx) == 0 or not name or \
                    name.startswith(".L") or re.fullmatch(r"\$[xdat](\..*)?", name):
                continue
            names.setdefault((section_names[int(ndx)] if relocatable else "", value), name)
    return names


@pytest.mark.parametrize("path", [*LIBRARIES, "built"])
def test_every_function_is_named_as_readelf_lists_it(path: str, tmp_path: Path) -> None:
    """readelf -sW is the oracle: the first function symbol at each address, else the
    first untyped one; of the compiled core's loop (``_core.function_names``) and of its
    Python reference alike."""
    require("readelf")
    paths = _built(tmp_path) if path == "built" else [path]
    for path in paths:
        require_path(path)
        expected = _readelf_names(path)
        assert len(expected) > 50
        view = open_elf_file(path, Path(path).read_bytes())
        for core in {compiled(), None}:
            assert function_names(view, compiled=core) == expected, core
