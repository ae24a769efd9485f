"""The compiled FDE index (``csrc/sframe_decode.c``) against ``sframe/decode.py``'s
``FdeTable.ranges`` and ``FdeIndex.of_ranges``, which it was written from and which stay
the reference and the fallback.

On the sections of three targets in V2 and V3 (s390x big-endian), at address 0 (where
PC-relative starts fall below zero) and where their files place them, and on gas's V1
object read both ways (unrelocated, as readelf shows it, every range starts at 0): the
same starts, ends and verdict on whether the ranges follow one another, and the same
FDE for PCs at and around every range's edges.  Sections
whose ranges overlap take the search in table order in both; where a start leaves 64
bits the compiled loop gives None and the reference answers."""

from __future__ import annotations

import random
import struct
import subprocess

import pytest

from cfi2sframe.sframe.decode import FdeIndex, FdeTable, decode_covering
from cfi2sframe.sframe.load import sframe_bytes
from tests.conftest import compiled_core, converted_libraries, require

LIBRARIES = {"x86_64": "/usr/lib/x86_64-linux-gnu/libz.so.1",
             "aarch64": "/usr/aarch64-linux-gnu/lib/libresolv.so.2",
             "s390x": "/usr/s390x-linux-gnu/lib/libresolv.so.2"}


@pytest.fixture(scope="module")
def sections(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[bytes, int, bool]]:
    """name -> (section bytes, address, V1 PC-relative)."""
    require("gcc", "as")
    folder = tmp_path_factory.mktemp("index")
    out = {}
    for name, made in converted_libraries(folder, LIBRARIES, "elf").items():
        raw = sframe_bytes(str(made))
        out[name] = (raw.data, raw.address, raw.v1_pcrel)
        out[f"{name}-at-0"] = (raw.data, 0, raw.v1_pcrel)
    source = folder / "p.c"
    source.write_text("".join(f"int f{i}(int x) {{ return x * {i} + (x > {i}); }}\n"
                              for i in range(40)))
    obj = folder / "p.o"
    subprocess.run(["gcc", "-O2", "-Wa,--gsframe", "-c", str(source), "-o", str(obj)],
                   check=True)
    for as_readelf in (True, False):
        raw = sframe_bytes(str(obj), None, as_readelf)
        out[f"gas-v1{'' if as_readelf else '-pcrel'}"] = (raw.data, raw.address, raw.v1_pcrel)
    return out


def _both(data: bytes, address: int, v1_pcrel: bool) -> tuple[FdeIndex, FdeIndex]:
    table = FdeTable(data, address, v1_pcrel)
    return table.index(compiled_core()), table.index(None)


def _same(compiled: FdeIndex, python: FdeIndex) -> None:
    assert list(compiled.starts) == list(python.starts)
    assert list(compiled.ends) == list(python.ends)
    assert compiled.disjoint == python.disjoint
    edges = {pc for start, end in zip(python.starts, python.ends, strict=True)
             for pc in (start - 1, start, end - 1, end)}
    for pc in edges:
        assert compiled.find(pc) == python.find(pc), hex(pc)


def test_the_same_index_on_three_targets_in_every_version(sections) -> None:
    big = 0
    for name, section in sections.items():
        compiled, python = _both(*section)
        assert type(compiled.starts).__name__ == "array", name  # the compiled loop ran
        assert len(python.starts) > 20, name
        # gas's V1 object as readelf shows it, unrelocated: every start 0, overlapping
        assert python.disjoint == (name != "gas-v1"), name
        _same(compiled, python)
        big += section[0][:2] == b"\xde\xe2"  # the magic, most significant byte first
    assert big == 4  # s390x V2 and V3, placed and at 0, were read big-endian
    assert min(_both(*sections["x86_64-v2-at-0"])[0].starts) < 0


def _with_sizes(data: bytes, table: FdeTable, sizes: dict[int, int]) -> bytes:
    """``data`` with the size fields of some FDE entries rewritten."""
    out = bytearray(data)
    wide = table.header[0] == 3
    for index, size in sizes.items():
        struct.pack_into(table.reader.order + "I", out,
                         table.fde_start + index * table.entry + (8 if wide else 4), size)
    return bytes(out)


@pytest.mark.parametrize("name", ["x86_64-v2", "s390x-v3", "gas-v1-pcrel"])
def test_overlapping_ranges_are_searched_in_table_order_in_both(sections, name: str) -> None:
    data, address, v1_pcrel = sections[name]
    table = FdeTable(data, address, v1_pcrel)
    rng = random.Random(name)
    for _ in range(20):
        grown = {rng.randrange(table.count): rng.choice([0, 1, 4096, 0xFFFFFFFF])
                 for _ in range(3)}
        changed = _with_sizes(data, table, grown)
        compiled, python = _both(changed, address, v1_pcrel)
        _same(compiled, python)
        if max(grown.values()) > 4096:
            assert not python.disjoint
        wanted = [pc + 1 for pc in python.starts[::7]]
        partial = decode_covering(changed, wanted, address, v1_pcrel)
        for pc in wanted:
            index = python.find(pc)
            found = partial.find_fde(pc)
            assert (found.index if found else None) == index


def test_starts_beyond_64_bits_fall_back_to_the_reference(sections) -> None:
    data, _, v1_pcrel = sections["x86_64-v3"]
    table = FdeTable(data, 2**64 - 0x100, v1_pcrel)  # starts past 2**63 - 1
    core = compiled_core()
    base, step = table._start_base()
    assert core.fde_index(data, fde_start=table.fde_start, count=table.count,
                          entry=table.entry, wide=True, big=False, base=base, step=step) is None
    index = table.index(core)
    assert isinstance(index.starts, list) and index == table.index(None)
    assert max(index.starts) >= 2**63


def test_a_table_cut_short_is_left_to_the_reference(sections) -> None:
    data, address, v1_pcrel = sections["aarch64-v2"]
    table = FdeTable(data, address, v1_pcrel)
    assert compiled_core().fde_index(data, fde_start=table.fde_start,
                                     count=table.count + len(data), entry=table.entry,
                                     wide=False, big=False, base=0, step=0) is None
