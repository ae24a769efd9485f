"""Hostile XRay instrumentation maps (issue 41): a small instrumented ELF file built
by hand (tests/support/xray_maps.py: a PC-relative map, an ``xray_fn_idx``, RELATIVE
relocations, symbols), cut at every byte and flipped at every bit, and fields that
claim more than the file holds.  Only a map or a located error may come out; never a
traceback, and nothing allocated for what a field only claims."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest

from cfi2sframe.errors import DecodeError
from cfi2sframe.xray.instr_map import id_names, read_instr_map
from tests.conftest import cfi2sframe
from tests.support.xray_maps import (
    ET_DYN,
    MAP_AT,
    SHT_PROGBITS,
    SHT_RELA,
    Part,
    elf,
    entry,
    pcrel_map,
    rela,
    with_symbols,
)

INDEX_AT = 0x5000
SLEDS = [(0x1000, 0x1000, 0), (0x100E, 0x1000, 1), (0x1020, 0x1020, 3),
         (0x1028, 0x1020, 2), (0x1030, 0x1030, 5)]


def _binary(index_rows: list[tuple[int, int]] | None = None) -> bytes:
    words = pcrel_map(SLEDS)
    rows = index_rows if index_rows is not None else [(MAP_AT, MAP_AT + 64),
                                                      (MAP_AT + 64, MAP_AT + 160)]
    parts = [Part("xray_instr_map", SHT_PROGBITS, MAP_AT, words),
             Part("xray_fn_idx", SHT_PROGBITS, INDEX_AT,
                  b"".join(struct.pack("<QQ", a % 2**64, b % 2**64) for a, b in rows)),
             Part(".rela.dyn", SHT_RELA, 0, rela([(INDEX_AT, 8, MAP_AT)]), 0, 24)]
    return elf(with_symbols(parts, [("f", 0x1000), ("_ZN1a1bEv", 0x1020)]), elf_type=ET_DYN)


GOOD = _binary()


def _read(data: bytes) -> None:
    try:
        found = read_instr_map(data)
    except DecodeError:
        return
    id_names(found)
    id_names(found, demangle=False)


def test_the_hand_made_binary_reads() -> None:
    found = read_instr_map(GOOD)
    assert found.fn_idx == "absolute"
    assert id_names(found) == {1: "f", 2: "a::b()"}


def test_cut_at_every_byte() -> None:
    for end in range(len(GOOD)):
        _read(GOOD[:end])


def test_every_bit_flipped() -> None:
    started = time.monotonic()
    for at in range(len(GOOD)):
        for bit in range(8):
            data = bytearray(GOOD)
            data[at] ^= 1 << bit
            _read(bytes(data))
    assert time.monotonic() - started < 120


@pytest.mark.parametrize("rows", [
    [(MAP_AT, MAP_AT + 2**63)],  # an end far past the map
    [(MAP_AT - INDEX_AT, 2**62)],  # a count far past it (new layout)
    # (the first word of entry 0 is relocated to MAP_AT: entry 1 ends before it starts)
    [(MAP_AT, MAP_AT + 64), (MAP_AT + 96, MAP_AT + 64)],
])
def test_index_entries_that_claim_too_much(rows: list[tuple[int, int]]) -> None:
    with pytest.raises(DecodeError, match=f"xray_fn_idx entry {len(rows) - 1} names no run"):
        read_instr_map(_binary(rows))


def test_the_cli_gives_one_located_line(tmp_path: Path) -> None:
    """A damaged binary beside a trace: ``BIN: error: ...``, exit 1, for dump and
    verify."""
    trace = tmp_path / "trace"
    trace.write_bytes(struct.pack("<HHIQQ8x", 3, 0, 3, 10**9, 0))
    bad = tmp_path / "bad"
    data = bytearray(GOOD)
    data[GOOD.find(entry(SLEDS[4][0] - (MAP_AT + 128), SLEDS[4][1] - (MAP_AT + 136), 5, 2))
         + 16] = 9  # sled kind 9
    bad.write_bytes(data)
    for command in ("dump", "verify"):
        proc = cfi2sframe(command, str(trace), "--binary", str(bad), cwd=tmp_path)
        assert proc.returncode == 1, proc.stdout
        assert proc.stderr.strip().count("\n") == 0, proc.stderr
        assert proc.stderr.startswith(f"{bad}: error: at byte "), proc.stderr
        assert "sled kind 9 (known: 0 to 5)" in proc.stderr
