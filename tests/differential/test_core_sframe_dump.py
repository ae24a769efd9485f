"""The compiled SFrame dump (``csrc/sframe_dump.c``) against the Python reader and
dump it was written from (``sframe/decode.py``, ``sframe/dump.py``), which stay the
reference and the fallback.

Both must give the same text, character for character, on the sections of three
targets in every version: V2 and V3 (with FLEX FDEs) made here from installed x86-64,
AArch64 and s390x (big-endian) libraries, gas's V1 objects, and a program ld 2.40
linked (PC-mask FDEs for its PLT); a raw section at address 0, where PC-relative
starts fall below zero. Sections damaged at random or field by field give the same
text, or None exactly where the Python reader raises.
``test_readers.py`` holds the dump equal to readelf's (V1) with whichever core runs."""

from __future__ import annotations

import random
import subprocess

import pytest

from cfi2sframe.errors import DecodeError
from cfi2sframe.sframe.decode import decode
from cfi2sframe.sframe.dump import compiled_chunks, dump_text
from cfi2sframe.sframe.load import sframe_bytes
from tests.conftest import compiled_core, converted_libraries, require

LIBRARIES = {"x86_64": "/usr/lib/x86_64-linux-gnu/libz.so.1",
             "aarch64": "/usr/aarch64-linux-gnu/lib/libc.so.6",
             "s390x": "/usr/s390x-linux-gnu/lib/libc.so.6"}


def _python(data: bytes, address: int, v1_pcrel: bool = False) -> str | None:
    try:
        return dump_text(decode(data, address, v1_pcrel))
    except DecodeError:
        return None


def _compiled(data: bytes, address: int, v1_pcrel: bool = False) -> str | None:
    chunks = compiled_chunks(data, address, v1_pcrel, ".sframe", compiled_core(), batch=50)
    return None if chunks is None else "".join(chunks)


@pytest.fixture(scope="module")
def sections(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[bytes, int, bool]]:
    """name -> (section bytes, address, V1 PC-relative)."""
    require("gcc", "as")
    folder = tmp_path_factory.mktemp("dump")
    out = {name: (raw.read_bytes(), 0, False)  # at 0: starts below zero
           for name, raw in converted_libraries(folder, LIBRARIES, "raw", ".sframe").items()}
    source = folder / "p.c"
    source.write_text("#include <stdio.h>\nstatic int g(int x) { return x * 3; }\n"
                      "int f(int x) { if (x > 3) puts(\"big\"); return g(x) + 1; }\n"
                      "int main(int c, char **v) { printf(\"%d\\n\", f(c)); return 0; }\n")
    obj, program = folder / "p.o", folder / "p"
    subprocess.run(["gcc", "-O2", "-Wa,--gsframe", "-c", str(source), "-o", str(obj)],
                   check=True)
    subprocess.run(["gcc", "-Wa,--gsframe", str(obj), "-o", str(program)], check=True)
    for path, as_readelf in ((obj, True), (program, True), (obj, False)):
        raw = sframe_bytes(str(path), None, as_readelf)
        out[f"{path.name}-v1{'' if as_readelf else '-pcrel'}"] = (raw.data, raw.address,
                                                                 raw.v1_pcrel)
    return out


def test_the_same_dump_of_three_targets_in_every_version(sections) -> None:
    flex = pcmask = 0
    for name, (data, address, v1_pcrel) in sections.items():
        ours = _compiled(data, address, v1_pcrel)
        assert ours is not None and ours == _python(data, address, v1_pcrel), name
        flex += ours.count('attr = "F"') + ours.count('attr = "SF"')
        pcmask += ours.count("[m]")
    assert flex > 0 and pcmask > 0  # FLEX FDEs (V3) and the PLT's PC-mask FDEs seen
    assert "pc = -0x" in _compiled(*sections["x86_64-v2"])  # type: ignore[operator]


@pytest.mark.parametrize("name", ["x86_64-v3", "s390x-v2", "p-v1"])
def test_the_same_text_or_none_where_decode_raises(sections, name: str) -> None:
    """Random bytes written into the section (the first 4 KiB, where the header, the
    FDE index and the first FREs are): the same text, or None and an error."""
    compiled_core()
    data, address, v1_pcrel = sections[name]
    chance = random.Random(name)
    outcomes = {"same": 0, "raises": 0}
    for _ in range(400):
        damaged = bytearray(data)
        for _ in range(chance.randint(1, 3)):
            damaged[chance.randrange(min(len(data), 4096))] = chance.randrange(256)
        ours = _compiled(bytes(damaged), address, v1_pcrel)
        assert ours == _python(bytes(damaged), address, v1_pcrel)
        outcomes["raises" if ours is None else "same"] += 1
    assert outcomes["raises"] >= 20 and outcomes["same"] >= 20, outcomes


def _fde_fields(data: bytes) -> list[tuple[int, int, list[int]]]:
    """(offset, size, values) for the fields of the first FDEs: info and FDE-type bytes,
    repeat size, FRE offset and count, set to values that cross their checks."""
    from cfi2sframe.sframe.decode import FdeTable

    table = FdeTable(data, 0, False)
    version, big = table.header[0], table.header[-1]
    fre_start, fre_len = table.reader.fre_start, table.reader.fre_end - table.reader.fre_start
    infos = [0x00, 0x01, 0x02, 0x03, 0x0F, 0x10, 0x11, 0x12, 0x20, 0x40, 0x80, 0x92, 0xFF]
    offsets = [0, fre_len - 5, fre_len - 1, fre_len, 0xFFFFFFFF]
    out = []
    for index in range(min(table.count, 12)):
        pos = table.fde_start + index * table.entry
        out.append((pos + (12 if version == 3 else 8), 4, offsets))
        if version == 3:
            attr = fre_start + int.from_bytes(data[pos + 12:pos + 16], "big" if big else "little")
            out += [(attr, 2, [0, 1, 0xFFFF]), (attr + 2, 1, infos),
                    (attr + 3, 1, [0, 1, 2, 0x1F, 0x20, 0x21, 0xFF]), (attr + 4, 1, [0, 1, 0xFF])]
        else:
            out += [(pos + 12, 4, [0, 1, 0xFFFF, 0xFFFFFFFF]), (pos + 16, 1, infos)]
            if version == 2:
                out.append((pos + 17, 1, [0, 1, 0xFF]))
    return out


@pytest.mark.parametrize("name", ["x86_64-v2", "x86_64-v3", "aarch64-v3", "p.o-v1"])
def test_every_fde_field_damaged(sections, name: str) -> None:
    """Each field of the first FDEs set to values that cross its checks (random writes
    seldom hit them), and a PC-mask FDE with a repeat size of 0: the same text, or
    None exactly where decode raises."""
    compiled_core()
    data, address, v1_pcrel = sections[name]
    big = data[0] != 0xE2  # the magic 0xdee2 as stored
    nones = 0
    for at, size, values in _fde_fields(data):
        for value in values:
            damaged = bytearray(data)
            damaged[at:at + size] = value.to_bytes(size, "big" if big else "little")
            ours = _compiled(bytes(damaged), address, v1_pcrel)
            assert ours == _python(bytes(damaged), address, v1_pcrel), (at, size, value)
            nones += ours is None
    assert nones >= 20
