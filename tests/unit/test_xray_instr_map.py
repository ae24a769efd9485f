"""XRay instrumentation maps built by hand (issue 41): entry versions 0 to 2, absolute
(in place, or by R_X86_64_RELATIVE addends) and PC-relative, all six sled kinds, a map
at an odd address, both ``xray_fn_idx`` layouts, ELF32 and big-endian.  Expected
values are chosen here and written into the bytes by the rules of the notes
(xray-notes.md, "The instrumentation map"); every limit at its bound and one past.
"""

from __future__ import annotations

import re
import struct

import pytest

from cfi2sframe.errors import DecodeError
from cfi2sframe.xray.instr_map import SledKind, id_names, read_instr_map
from tests.support.xray_maps import (
    ET_DYN,
    MAP_AT,
    SHT_PROGBITS,
    SHT_RELA,
    Part,
    absolute_map,
    elf,
    entry,
    pcrel_map,
    rela,
    with_symbols,
)

# (sled address, function, kind): three functions, the six kinds
SLEDS = [(0x1000, 0x1000, 0), (0x100E, 0x1000, 1),
         (0x1020, 0x1020, 3), (0x1028, 0x1020, 2),
         (0x1030, 0x1030, 0), (0x1032, 0x1030, 4), (0x1034, 0x1030, 5), (0x1038, 0x1030, 1)]
SYMBOLS = [("f", 0x1000), ("_ZN2ns1gEi", 0x1020), ("_ZN2ns3BoxIiE3getEi", 0x1030)]
# Itanium C++ ABI, by hand: N 2ns 1g E i; N 2ns 3Box I i E 3get E i
NAMES = {1: "f", 2: "ns::g(int)", 3: "ns::Box<int>::get(int)"}
IDS = [1, 1, 2, 2, 3, 3, 3, 3]


def binary(map_bytes: bytes, extra: list[Part] | None = None, elf_type: int = 2,
           machine: int = 62, is64: bool = True, order: str = "<") -> bytes:
    """An ELF file with the map at ``MAP_AT`` (after ``extra`` sections) and SYMBOLS."""
    parts = [Part("xray_instr_map", SHT_PROGBITS, MAP_AT, map_bytes), *(extra or [])]
    return elf(with_symbols(parts, SYMBOLS, is64, order), elf_type, machine, is64, order)


def sled_rows(data: bytes) -> list[tuple[int, int, str, int]]:
    found = read_instr_map(data)
    return [(s.address, s.function, str(s.kind), s.func_id) for s in found.sleds]


WANT = [(address, function, str(list(SledKind)[kind]), i)
        for (address, function, kind), i in zip(SLEDS, IDS, strict=True)]


def test_version_2_is_relative_to_each_field_at_an_odd_address() -> None:
    data = binary(pcrel_map(SLEDS))
    assert sled_rows(data) == WANT
    found = read_instr_map(data)
    assert found.fn_idx == "none" and found.section_address == MAP_AT
    assert [(f.func_id, f.address, len(f.sleds)) for f in found.functions] == \
        [(1, 0x1000, 2), (2, 0x1020, 2), (3, 0x1030, 4)]
    assert id_names(found) == NAMES
    assert id_names(found, demangle=False) == {1: "f", 2: "_ZN2ns1gEi",
                                               3: "_ZN2ns3BoxIiE3getEi"}


@pytest.mark.parametrize("version", [0, 1])
def test_versions_0_and_1_are_absolute(version: int) -> None:
    assert sled_rows(binary(absolute_map(SLEDS, version))) == WANT


def test_a_pie_takes_its_absolute_fields_from_relative_relocations() -> None:
    """The fields hold 0 in the file (RELA: the addend is the value); R_X86_64_RELATIVE
    is type 8.  A RELATIVE relocation elsewhere changes nothing."""
    zeros = absolute_map([(0, 0, kind) for _, _, kind in SLEDS], 1)
    relocations = [(MAP_AT + i * 32 + half * 8, 8, value) for i, sled in enumerate(SLEDS)
                   for half, value in enumerate(sled[:2])]
    relocations.append((0x9000, 8, 0x1234))
    data = binary(zeros, [Part(".rela.dyn", SHT_RELA, 0, rela(relocations), 0, 24)],
                  elf_type=ET_DYN)
    assert sled_rows(data) == WANT


def test_elf32_entries_are_16_bytes() -> None:
    data = binary(absolute_map(SLEDS, 0, is64=False), is64=False, machine=3)
    assert sled_rows(data) == WANT
    data = binary(pcrel_map(SLEDS, is64=False), is64=False, machine=3)
    assert sled_rows(data) == WANT


def test_big_endian() -> None:
    data = binary(pcrel_map(SLEDS, order=">"), order=">", machine=22)
    assert sled_rows(data) == WANT
    assert id_names(read_instr_map(data)) == NAMES


def _fn_idx(rows: list[tuple[int, int]], at: int = 0x5000) -> Part:
    return Part("xray_fn_idx", SHT_PROGBITS, at,
                b"".join(struct.pack("<QQ", a & (2**64 - 1), b) for a, b in rows))


def test_fn_idx_old_layout_numbers_the_functions() -> None:
    """The runtime numbers by xray_fn_idx entry: listed third function first, it is #1
    (the walk of the map would make it #3)."""
    rows = [(MAP_AT + 4 * 32, MAP_AT + 8 * 32), (MAP_AT, MAP_AT + 2 * 32),
            (MAP_AT + 2 * 32, MAP_AT + 4 * 32)]
    found = read_instr_map(binary(pcrel_map(SLEDS), [_fn_idx(rows)]))
    assert found.fn_idx == "absolute"
    assert [s.func_id for s in found.sleds] == [2, 2, 3, 3, 1, 1, 1, 1]
    assert id_names(found) == {1: NAMES[3], 2: NAMES[1], 3: NAMES[2]}


def test_fn_idx_new_layout_is_a_relative_start_and_a_count() -> None:
    """Entry i's start is relative to its own field, 0x5000 + 16 i."""
    rows = [(MAP_AT + 4 * 32 - 0x5000, 4), (MAP_AT - 0x5010, 2),
            (MAP_AT + 2 * 32 - 0x5020, 2)]
    found = read_instr_map(binary(pcrel_map(SLEDS), [_fn_idx(rows)]))
    assert found.fn_idx == "pc-relative"
    assert [s.func_id for s in found.sleds] == [2, 2, 3, 3, 1, 1, 1, 1]


def test_fn_idx_bounds() -> None:
    """The last function's sleds end at the map's end (bound) or one entry past it."""
    fits = [(MAP_AT + 4 * 32 - 0x5000, 4)]
    assert read_instr_map(binary(pcrel_map(SLEDS), [_fn_idx(fits)])).fn_idx == "pc-relative"
    past = [(MAP_AT + 4 * 32 - 0x5000, 5)]
    data = binary(pcrel_map(SLEDS), [_fn_idx(past)])
    with pytest.raises(DecodeError, match="xray_fn_idx entry 0 names no run of the 8"):
        read_instr_map(data)
    old_past = [(MAP_AT, MAP_AT + 9 * 32)]
    with pytest.raises(DecodeError, match="xray_fn_idx entry 0"):
        read_instr_map(binary(pcrel_map(SLEDS), [_fn_idx(old_past)]))


@pytest.mark.parametrize(("kind", "version", "message"), [
    (5, 2, None), (6, 2, "sled kind 6 (known: 0 to 5)"),
    (0, 2, None), (0, 3, "version 3 (known: 0 to 2)")])
def test_kind_and_version_bounds(kind: int, version: int, message: str | None) -> None:
    raw = entry(0x1000 - MAP_AT, 0x1000 - MAP_AT - 8, kind, version)
    data = binary(raw)
    if message is None:
        assert read_instr_map(data).sleds[0].address == 0x1000
        return
    with pytest.raises(DecodeError, match=re.escape(message)) as info:
        read_instr_map(data)
    map_offset = data.find(raw)
    assert info.value.offset == map_offset + (16 if "kind" in message else 18)


def test_a_map_not_in_whole_entries_or_past_the_file() -> None:
    raw = pcrel_map(SLEDS[:1]) + b"\0"
    data = binary(raw)
    with pytest.raises(DecodeError, match="33 bytes: not whole 32-byte entries") as info:
        read_instr_map(data)
    assert info.value.offset == data.find(raw) + 32
    # The section's size field says 2**60 bytes: an error, nothing allocated.
    data = bytearray(binary(pcrel_map(SLEDS)))
    shoff, = struct.unpack_from("<Q", data, 0x28)
    struct.pack_into("<Q", data, shoff + 2 * 64 + 32, 2**60)  # section 2's sh_size
    with pytest.raises(DecodeError, match="runs past the end of the file"):
        read_instr_map(bytes(data))


def test_an_unnamed_function_and_an_empty_map() -> None:
    found = read_instr_map(binary(pcrel_map([(0x2000, 0x2000, 0)])))
    assert id_names(found) == {1: "@(2000)"}  # llvm-xray's words for it
    assert read_instr_map(binary(b"")).functions == ()


def test_objects_and_files_without_a_map_are_refused() -> None:
    with pytest.raises(DecodeError, match="relocatable object"):
        read_instr_map(binary(pcrel_map(SLEDS), elf_type=1))
    plain = elf(with_symbols([], SYMBOLS))
    with pytest.raises(DecodeError, match="no xray_instr_map section"):
        read_instr_map(plain)
