"""Function names read from ELF symbol tables: the whole table, the names at a few
addresses only (what ``lookup`` of numeric PCs reads), and ``nm`` as the oracle.

A string table's offsets count bytes: a name that is not UTF-8 must not move the
names after it (ELF gABI, "String Table": a name is the bytes from its offset up to
the next NUL, and a name may be the tail of another)."""

from __future__ import annotations

from cfi2sframe.elf.read import _cstr, _string_table


def test_offsets_count_bytes_when_a_name_is_not_utf8() -> None:
    # offsets 1..4 "a\xffb", 5..8 "foo", 9..13 "\xc3\xa9t\xe9", 14..17 "bar"; 7 is the
    # tail "o" of "foo", 11 the tail "t\xe9"
    table = b"\0a\xffb\0foo\0\xc3\xa9t\xe9\0bar\0"
    name = _string_table(table)
    assert name(5) == "foo" and name(7) == "o" and name(14) == "bar"
    assert name(9) == "\u00e9t\ufffd" and name(11) == "t\ufffd" and name(1) == "a\ufffdb"
    assert all(name(at) == _cstr(table, at) for at in range(len(table) + 2))
