"""Symbol tables read where they are (``elf/read.py``): the entries at a few values found
by searching the table's bytes for each value, names read from the string table in
place, a table only checked, not copied, where no entry is asked for; and a grown
table's relocations read in place (``elf/grow.py``).  Expected values are laid out and
counted by hand here; the whole-table reading is the oracle on real files
(tests/differential/test_symbol_names.py)."""

from __future__ import annotations

import struct

from cfi2sframe.elf.grow import _whole_span
from cfi2sframe.elf.read import _entries_valued, open_elf, string_at, string_in

# An ELF64 entry: st_name (4), st_info, st_other, st_shndx (2), st_value (8) at 8,
# st_size (8); 24 bytes (gABI, "Symbol Table").
VALUE_AT = (8, 8, True)


def _entry(value: int, size: int = 0, name: int = 0) -> bytes:
    return struct.pack("<IBBHQQ", name, 0x12, 0, 1, value, size)


def test_only_a_value_in_st_value_is_found() -> None:
    # its bytes 34 12 00 00 00 00 00 00: entry 0 holds them as its size, entry 1 as its
    # value, entry 2 across its value's last byte and its size, entry 3 as its value
    wanted = 0x1234
    table = (_entry(7, size=wanted) + _entry(wanted) +
             _entry(0x34 << 56, size=0x12) + _entry(wanted, size=9))
    data = b"\xff" * 5 + table + b"\xff" * 3
    assert _entries_valued(data, 5, 4, 24, VALUE_AT, {wanted}) == [1, 3]
    assert _entries_valued(data, 5, 4, 24, VALUE_AT, frozenset({wanted, 7})) == [0, 1, 3]
    # a count that stops before entry 3; past 64 bits or negative: none holds it
    assert _entries_valued(data, 5, 3, 24, VALUE_AT, {wanted}) == [1]
    assert _entries_valued(data, 5, 4, 24, VALUE_AT, {1 << 64, -1}) == []


def test_big_endian_32_bit_values() -> None:
    # ELF32: st_name (4), st_value (4) at 4, st_size (4), info, other, shndx; 16 bytes
    table = struct.pack(">IIIBBH", 0, 0x8000, 0x10, 0, 0, 1) + \
        struct.pack(">IIIBBH", 0, 0x10, 0x8000, 0, 0, 1)
    assert _entries_valued(table, 0, 2, 16, (4, 4, False), {0x8000}) == [0]
    assert _entries_valued(table, 0, 2, 16, (4, 4, False), {0x10}) == [1]
    assert _entries_valued(table, 0, 2, 16, (4, 4, False), {1 << 32}) == []


def test_where_the_search_does_not_pay_the_caller_reads_every_value() -> None:
    table = b"".join(_entry(0) for _ in range(300))
    assert _entries_valued(table, 0, 300, 24, VALUE_AT, {0}) is None  # met too often
    assert _entries_valued(table, 0, 300, 24, VALUE_AT, set(range(1, 10))) is None
    assert _entries_valued(table, 0, 300, 24, VALUE_AT, {1.0}) is None  # 1.0 == 1
    assert _entries_valued(table, 0, 300, 24, VALUE_AT, {True}) is None
    assert _entries_valued(table, 0, 300, 24, VALUE_AT, range(3)) is None

    class Odd(set[int]):
        def __contains__(self, value: object) -> bool:
            return True

    assert _entries_valued(table, 0, 300, 24, VALUE_AT, Odd({5})) is None


def test_names_in_place_are_those_of_the_table_copied() -> None:
    strings = b"\0main\0\xc3\xa9t\xe9\0tail"  # a name that is not UTF-8; no NUL at the end
    data = b"junk\0" + strings + b"\0more\0"
    held = len(strings)
    for offset in range(held + 3):
        assert string_in(data, 5, held, offset) == string_at(strings, offset), offset
    assert string_in(data, 5, held, 1) == "main"
    assert string_in(data, 5, held, held - 4) == "tail"  # cut at the table's end
    assert string_in(data, 5, held, held + 1) == ""


class _Reads(bytes):
    """File bytes that keep the length of every slice taken of them."""

    taken: list[int]

    def __getitem__(self, key: object) -> object:  # type: ignore[override]
        got = bytes.__getitem__(self, key)  # type: ignore[index]
        if isinstance(key, slice):
            self.taken.append(len(got))
        return got


def _elf_with_dynsym(entries: int) -> bytes:
    """A little-endian ELF64 file: the header, a .dynsym of ``entries`` entries named
    f0, f1, ... (each a function at 0x1000 + 16 * i), its .dynstr, the section names and
    four section headers (null, .dynsym, .dynstr, .shstrtab)."""
    names = b"\0" + b"".join(b"f%d\0" % i for i in range(entries))
    offsets, at = [], 1
    for i in range(entries):
        offsets.append(at)
        at += len(b"f%d" % i) + 1
    dynsym = _entry(0, 0) + b"".join(_entry(0x1000 + 16 * i, 16, offsets[i])
                                     for i in range(entries))
    shstr = b"\0.dynsym\0.dynstr\0.shstrtab\0"
    body = dynsym + names + shstr
    header_size = 64
    sym_off, str_off = header_size, header_size + len(dynsym)
    shstr_off = str_off + len(names)
    sh_off = shstr_off + len(shstr)
    sh_off += -sh_off % 8
    headers = bytes(64) + b"".join(
        struct.pack("<IIQQQQIIQQ", name, kind, 2, 0, offset, size, link, info, 8, entsize)
        for name, kind, offset, size, link, info, entsize in (
            (1, 11, sym_off, len(dynsym), 2, 1, 24),
            (9, 3, str_off, len(names), 0, 0, 0),
            (17, 3, shstr_off, len(shstr), 0, 0, 0)))
    ident = b"\x7fELF\x02\x01\x01" + bytes(9)
    elf_header = ident + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, sh_off, 0, 64, 0,
                                     0, 64, 4, 3)
    padding = bytes(sh_off - header_size - len(body))
    return elf_header + body + padding + headers


def test_a_few_functions_named_without_copying_the_tables() -> None:
    data = _Reads(_elf_with_dynsym(2000))
    data.taken = []
    view = open_elf(data, "f")
    data.taken.clear()
    found = view.symbols(".dynsym", {0x1000 + 16 * 1500, 0x1000 + 16 * 7})
    assert [(s.name, s.value) for s in found] == [("f7", 0x1070), ("f1500", 0x1000 + 24000)]
    assert max(data.taken, default=0) < 100  # the names read one by one, no table copied
    data.taken.clear()
    assert view.symbols(".dynsym", ()) == []
    assert max(data.taken, default=0) < 100  # checked only
    assert len(view.symbols(".dynsym")) == 2001  # the whole table: read as before


def test_a_grown_tables_relocations_span_the_whole_entries_the_file_holds() -> None:
    # (file length, offset, size, entry size) -> the slice, counted by hand
    assert _whole_span(100, 10, 50, 24) == slice(10, 58)  # two entries, 2 bytes over
    assert _whole_span(100, 10, 200, 24) == slice(10, 82)  # cut at the file's end: 90 -> 72
    assert _whole_span(100, 4, 96, 24) == slice(4, 100)  # exactly four
    data = bytes(range(100))
    assert data[_whole_span(100, 120, 24, 24)] == b""  # past the end
    assert data[_whole_span(100, 10, 0, 24)] == b""
    assert data[_whole_span(100, 99, 24, 24)] == b""  # less than one entry held


def test_a_table_past_a_mapped_files_end_holds_nothing() -> None:
    """Found by fuzzing the rewrite path (whose check reads the written file mapped): a
    symbol or string table whose offset lies past the file.  ``bytes.find`` takes such
    a start, ``mmap.find`` raises OverflowError; both now give what the table holds
    there: no entry, no name (as ``string_at`` past its table)."""
    import mmap

    mapped = mmap.mmap(-1, 64)
    far = 1 << 70
    assert _entries_valued(mapped, far, 0, 24, (8, 8, True), {0x10}) == []
    assert string_in(mapped, far, 0, 0) == ""
    assert string_in(mapped, 0, 8, 8) == "" and string_in(mapped, 0, 8, 7) == ""
