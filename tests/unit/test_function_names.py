"""``elf.symbols.function_names`` of a whole symbol table, by the compiled core
(``_core.function_names``) and by its Python reference, on tables built byte by byte
here: the names expected are worked out by hand from the gABI ("Symbol Table",
"String Table") and the rules the function's docstring states (functions first,
then untyped entries; no ``.L`` label, no mapping symbol; an object's per section)."""

from __future__ import annotations

import struct

import pytest

from cfi2sframe.core import compiled
from cfi2sframe.elf.read import open_elf
from cfi2sframe.elf.symbols import function_names
from tests.support.xray_maps import ET_DYN, SHT_PROGBITS, SHT_STRTAB, SHT_SYMTAB, Part, elf

ET_REL = 1
FUNC, NOTYPE, OBJECT = 2, 0, 1
GLOBAL = 1 << 4
CORES = pytest.mark.parametrize("core", ["compiled", "python"])


def _core(which: str) -> object:
    core = compiled() if which == "compiled" else None
    if which == "compiled" and core is None:
        pytest.skip("the compiled core is not built")
    return core


def _file(symbols: list[tuple[object, int, int, int]], elf_type: int = ET_DYN,
          is64: bool = True, order: str = "<", tail: bytes = b"") -> bytes:
    """An ELF file with sections .text (1), .data (2), .symtab (3), .strtab (4) and
    .shstrtab (5); ``symbols``: (name, or a string-table offset, type, section index,
    value) after the null entry; ``tail``: bytes ending the string table (no NUL)."""
    strings = b"\0"
    rows = [b"\0" * (24 if is64 else 16)]
    for name, kind, shndx, value in symbols:
        if isinstance(name, int):
            at = name
        else:
            assert isinstance(name, bytes)
            at = len(strings)
            strings += name + b"\0"
        info = GLOBAL | kind
        rows.append(struct.pack(order + "IBBHQQ", at, info, 0, shndx, value, 0) if is64
                    else struct.pack(order + "IIIBBH", at, value, 0, info, 0, shndx))
    return elf([Part(".text", SHT_PROGBITS, 0x1000, b"\xc3" * 16),
                Part(".data", SHT_PROGBITS, 0x2000, b"\0" * 16),
                Part(".symtab", SHT_SYMTAB, 0, b"".join(rows), 4, 24 if is64 else 16),
                Part(".strtab", SHT_STRTAB, 0, strings + tail)],
               elf_type=elf_type, is64=is64, order=order)


@CORES
def test_a_linked_files_names_by_hand(core: str) -> None:
    data = _file([
        (b"", FUNC, 1, 0x10), (b"u10", NOTYPE, 1, 0x10),  # no name: the untyped one's
        (b"n20", NOTYPE, 1, 0x20), (b"f20", FUNC, 1, 0x20),  # a function's first
        (b"first", FUNC, 1, 0x30), (b"second", FUNC, 1, 0x30),  # the first function's
        (b".Llocal", FUNC, 1, 0x40), (b"x40", NOTYPE, 1, 0x40),  # no .L label
        (b"$x", NOTYPE, 1, 0x50), (b"$d.1", NOTYPE, 1, 0x50),  # mapping symbols
        (b"$xa", NOTYPE, 1, 0x60), (b"$q", NOTYPE, 1, 0x70),  # not mapping symbols
        (b"obj", OBJECT, 1, 0x80),  # neither a function nor untyped
        (b"abs", FUNC, 0xFFF1, 0x90), (b"undef", FUNC, 0, 0x90),  # in no section
        (b"past", FUNC, 6, 0x90),  # past the section headers (6 of them)
        (0x7FFF, FUNC, 1, 0xA0),  # a name past the string table
        (b"caf\xe9", FUNC, 1, 0xB0),  # not UTF-8: replaced
        (b"high", FUNC, 2, 0xFFFF_FFFF_FFFF_FFF0),  # unsigned
        # .strtab: "\0", "" at 1, "u10" at 2, "n20" at 6, "f20" at 10: at 11 its tail
        (11, FUNC, 1, 0xC0), (0, FUNC, 1, 0xD0),  # "20"; at 0 the empty name
    ])
    view = open_elf(data, "test")
    expected = {("", 0x10): "u10", ("", 0x20): "f20", ("", 0x30): "first",
                ("", 0x40): "x40", ("", 0x60): "$xa", ("", 0x70): "$q",
                ("", 0xB0): "caf\ufffd", ("", 0xFFFF_FFFF_FFFF_FFF0): "high",
                ("", 0xC0): "20"}
    assert function_names(view, compiled=_core(core)) == expected


@CORES
def test_a_name_the_string_table_ends_without_a_nul(core: str) -> None:
    # .strtab: "\0" "f\0" then "tail" with no NUL (offset 3): read to the table's end.
    data = _file([(b"f", FUNC, 1, 0x10), (3, FUNC, 1, 0x20)], tail=b"tail")
    assert function_names(open_elf(data, "test"), compiled=_core(core)) == \
        {("", 0x10): "f", ("", 0x20): "tail"}


@CORES
def test_an_objects_names_per_section(core: str) -> None:
    data = _file([(b"g", FUNC, 1, 0), (b"h", FUNC, 2, 0), (b"d", NOTYPE, 2, 0),
                  (b"e", NOTYPE, 2, 8)], elf_type=ET_REL)
    assert function_names(open_elf(data, "test"), compiled=_core(core)) == \
        {(".text", 0): "g", (".data", 0): "h", (".data", 8): "e"}


@CORES
@pytest.mark.parametrize("is64, order", [(False, ">"), (False, "<"), (True, ">")])
def test_other_classes_and_byte_orders(core: str, is64: bool, order: str) -> None:
    top = (1 << (64 if is64 else 32)) - 16
    data = _file([(b"n", NOTYPE, 1, 0x1234), (b"b", FUNC, 1, 0x1234), (b"t", FUNC, 1, top),
                  (b"o", OBJECT, 1, 0x40)], is64=is64, order=order)
    assert function_names(open_elf(data, "test"), compiled=_core(core)) == \
        {("", 0x1234): "b", ("", top): "t"}
