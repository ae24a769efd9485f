"""``dump`` gives back the pages of a trace it has read: ``dump_lines`` reports how far
it has read (``read_to``), on every path, and never reads before that again; a large
trace is memory-mapped so that giving pages back is possible (``files.read_input``)."""

from __future__ import annotations

import mmap
from pathlib import Path

import pytest

from cfi2sframe.files import MAP_AT_LEAST, read_input
from cfi2sframe.xray.records import read_header
from cfi2sframe.xray.text import dump_lines
from tests.support.xray_traces import block, func, header

# Enough function records for several rounds of lines, in two threads' buffers; the
# second buffer starts with an event the fast loops hand to the general reader.
CALLS = b"".join(func(0, 1, 1) + func(1, 1, 1) for _ in range(6000))


def _trace(version: int) -> bytes:
    return header(version=version) + block(7, CALLS, version=version) + \
        block(8, CALLS, version=version)


@pytest.mark.parametrize("core", ["compiled", "python"])
@pytest.mark.parametrize("version", [1, 5])
def test_read_to_only_moves_on_and_no_line_comes_from_before_it(
        core: str, version: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CFI2SFRAME_CORE", core)
    data = _trace(version)
    marks: list[int] = []
    lines: list[str] = []
    for chunk in dump_lines(data, read_header(data), None, marks.append):
        for line in chunk.splitlines():
            offset = int(line.split()[0], 16)
            assert not marks or offset >= marks[-1], (offset, marks[-1])
            lines.append(line)
    assert len(marks) >= 2 and marks == sorted(marks) and marks[-1] <= len(data)
    assert lines == "".join(dump_lines(data, read_header(data))).splitlines()


def test_a_large_trace_is_mapped_a_small_one_read(tmp_path: Path) -> None:
    big = _trace(5)
    big += b"\0" * (MAP_AT_LEAST - len(big))  # at the bound: mapped
    (tmp_path / "big").write_bytes(big)
    (tmp_path / "small").write_bytes(big[:MAP_AT_LEAST - 1])  # one short: read
    assert isinstance(read_input(str(tmp_path / "big")), mmap.mmap)
    assert isinstance(read_input(str(tmp_path / "small")), bytes)
    (tmp_path / "text").write_bytes(b"x" * (MAP_AT_LEAST + 1))
    assert isinstance(read_input(str(tmp_path / "text")), bytes)
