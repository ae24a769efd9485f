"""``__unwind_info`` written by ``compact.table_writer``: properties over random
function lists (every function found by libunwind's look-up rules at its first and
last byte, every page within 4096 bytes, at most three personality routines and each
function of a later one in DWARF mode, the index ending past the last function), and
format limits derived from ``compact_unwind_encoding.h``."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cfi2sframe.compact.table import Lookup, lookup, read_unwind_info
from cfi2sframe.compact.table_writer import TableFunction, build_unwind_info
from cfi2sframe.errors import Cfi2SframeError

X86_DWARF, X86_RBP_FRAME, X86_STACK_IND = 0x04000000, 0x01000000, 0x03000000


@st.composite
def _functions(draw):
    count = draw(st.integers(1, 2500))
    pool = draw(st.lists(st.integers(0, 0x00FFFFFF), min_size=1, max_size=600))
    functions = []
    at = draw(st.integers(0, 0x10000))
    for i in range(count):
        length = draw(st.integers(1, 64)) if i % 50 else draw(st.integers(1, 1 << 22))
        encoding = X86_RBP_FRAME | pool[draw(st.integers(0, len(pool) - 1))] & 0x00FFFFFF
        personality = draw(st.none() | st.sampled_from([0x4000, 0x4008, 0x4010, 0x4018,
                                                        0x4020]))
        lsda = draw(st.none() | st.just(0x9000 + 16 * i))
        functions.append(TableFunction(at, length, encoding, personality, lsda, 0x40 * i))
        at += length + draw(st.sampled_from([0, 0, 0, 16, 1 << 20]))
    return functions


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.data_too_large])
@given(_functions())
def test_random_tables_are_found_at_every_function(functions) -> None:
    built = build_unwind_info(functions, "x86_64")  # looks every function up itself
    table = read_unwind_info(built.data)
    assert table.problems == ()
    assert len(table.personalities) <= 3
    assert table.sentinel == max(f.offset + f.length for f in functions)
    personalities = []
    for func in functions:
        if func.personality is not None and func.personality not in personalities:
            personalities.append(func.personality)
    moved = {f.offset for f in functions if f.personality in personalities[3:]}
    assert {int(note.split()[2].rstrip(":"), 16) for note in built.notes} == moved
    for func in functions:
        found = lookup(built.data, func.offset)
        assert found is not None
        if func.offset in moved:  # DWARF mode, pointing at its FDE; the LSDA kept
            assert found.encoding & 0x0FFFFFFF == X86_DWARF | func.fde_offset
            assert found.lsda == func.lsda
        else:
            assert found.encoding & 0x0FFFFFFF == func.encoding
            assert found.personality == func.personality and found.lsda == func.lsda
    _pages_fit(built.data)
    # the one-pass look-up the writer checks with finds what ``find`` finds, anywhere
    look = Lookup(built.data)
    probes = [pc for f in functions for pc in (f.offset - 1, f.offset, f.offset + f.length)]
    probes += [0, table.sentinel, table.sentinel + 1, *reversed(probes)]
    assert look.rows_at(probes) == [None if (f := look.find(pc)) is None else
                                    (f.start, f.encoding) for pc in probes]


def _pages_fit(data: bytes) -> None:
    """Every second-level page lies within 4096 bytes of its start."""
    index_at, index_count = struct.unpack_from("<II", data, 20)
    pages = sorted(struct.unpack_from("<I", data, index_at + 12 * i + 4)[0]
                   for i in range(index_count - 1))
    for at, after in zip(pages, pages[1:] + [len(data)], strict=True):
        assert after - at <= 4096


def test_a_function_beyond_24_bits_of_its_page_base_takes_a_regular_page() -> None:
    """A compressed entry holds its function's offset from the page's first function in
    24 bits: with a function 16 MiB further on, a compressed page would stop after two
    entries, so the three go to one regular page (8-byte entries, 32-bit offsets), as
    lld 14 and zig do (the oracles' note: 3 functions with a 16 MiB gap, R3)."""
    functions = [TableFunction(0x1000, 16, X86_RBP_FRAME),
                 TableFunction(0x1010, 16, X86_RBP_FRAME | 0x10000),
                 TableFunction(0x1010 + (1 << 24) + 0x100, 16, X86_RBP_FRAME | 0x20000)]
    built = build_unwind_info(functions, "x86_64")
    assert read_unwind_info(built.data).pages == (("regular", 3),)
    for func in functions:
        assert lookup(built.data, func.offset).encoding == func.encoding


def test_stack_ind_is_never_folded_and_equal_neighbours_are() -> None:
    same = [TableFunction(0x1000 + 32 * i, 32, X86_RBP_FRAME) for i in range(4)]
    assert len(read_unwind_info(build_unwind_info(same, "x86_64").data).entries) == 1
    ind = [TableFunction(0x1000 + 32 * i, 32, X86_STACK_IND | 0x00040000) for i in range(4)]
    assert len(read_unwind_info(build_unwind_info(ind, "x86_64").data).entries) == 4


def test_limits_are_one_line_errors() -> None:
    with pytest.raises(Cfi2SframeError, match="overlap"):
        build_unwind_info([TableFunction(0, 32, X86_RBP_FRAME),
                           TableFunction(16, 32, X86_RBP_FRAME)], "x86_64")
    with pytest.raises(Cfi2SframeError, match="past the 24 bits"):
        build_unwind_info([TableFunction(0, 32, X86_DWARF, fde_offset=1 << 24)], "x86_64")
    fourth = [TableFunction(64 * i, 32, X86_RBP_FRAME, personality=0x4000 + 8 * i)
              for i in range(4)]
    with pytest.raises(Cfi2SframeError, match="fourth personality .* no FDE"):
        build_unwind_info(fourth, "x86_64")
