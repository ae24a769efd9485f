"""The compiled XRay loops (``csrc/xray.c``) held to the Python loops they were written
from, on one trace: what ``tests/differential/test_core_xray.py`` asserts on real,
hand-made and damaged traces, and the fuzz tier's ``xray`` target on mutated ones
(tests/support/fuzz.py, run as a script: it imports only what is below)."""

from __future__ import annotations

from collections.abc import Generator, Mapping
from types import ModuleType

from cfi2sframe.errors import DecodeError
from cfi2sframe.xray.fast import fdr_stacks, python_stacks
from cfi2sframe.xray.records import HEADER_SIZE, read_header
from cfi2sframe.xray.text import _fast_buffers, _whole_buffers, dump_lines, function_id


def drained(lines: Generator[str, None, tuple[int, int | None]]
            ) -> tuple[str, tuple[int, int | None]]:
    """A dump loop's text and where it handed back to the general reader."""
    text = []
    while True:
        try:
            text.append(next(lines))
        except StopIteration as done:
            return "".join(text), done.value


def python_dump(data: bytes, names: Mapping[int, str]) -> tuple[str, tuple[int, int | None]]:
    """``_whole_buffers``' text and where it hands back."""
    return drained(_whole_buffers(data, read_header(data), names))


def c_dump(core: ModuleType, data: bytes, names: Mapping[int, str], lines: int = 4096
           ) -> tuple[str, tuple[int, int | None]]:
    """``xray_dump`` called until it hands back, ``lines`` lines a call at most."""
    labels = core.xray_labels(labels={i: function_id(i, names) for i in names}) \
        if names else None
    assert labels is not None or not names
    at, stop, more, chunks = HEADER_SIZE, None, True, []
    while more:
        text, at, stop, more = core.xray_dump(data=data, at=at, stop=stop, labels=labels,
                                              lines=lines)
        assert text.count("\n") <= lines
        chunks.append(text)
    return "".join(chunks), (at, stop)


def whole_dump(data: bytes) -> tuple[str, str | None]:
    """Every line ``dump_lines`` gives and the error that stops it."""
    lines: list[str] = []
    try:
        for chunk in dump_lines(data, read_header(data)):
            lines.append(chunk)
    except DecodeError as exc:
        return "".join(lines), str(exc)
    return "".join(lines), None


def readable(data: bytes) -> bool:
    """Little-endian FDR of version 2 on: what the compiled loops are given."""
    try:
        header_ = read_header(data)
    except DecodeError:
        return False
    return header_.type == 1 and header_.version >= 2 and header_.order == "little"


def check(core: ModuleType, data: bytes, names: Mapping[int, str] | None = None,
          lines: tuple[int, ...] = (4096,)) -> None:
    """The C loops equal to the Python ones on one trace (with names, if given): called
    directly (``xray_labels``, ``xray_dump`` a chunk of ``lines`` at a time,
    ``xray_stacks``) and through the callers that pick them (``_fast_buffers``,
    ``fdr_stacks``)."""
    if not readable(data):
        return
    header = read_header(data)
    expected = python_dump(data, names or {})
    for each in lines:
        assert c_dump(core, data, names or {}, each) == expected
    assert drained(_fast_buffers(data, header, names or {})) == expected
    for per_thread in (False, True):
        found = core.xray_stacks(data=data, per_thread=per_thread)
        reference = python_stacks(data, per_thread)
        assert fdr_stacks(data, header, per_thread) == reference
        if reference is None:
            assert found is None
        else:
            assert found is not None
            totals, notes = found
            assert [tuple(row) for row in reference.stacks] == totals
            assert [(list(type(n)).index(n), f, c) for (n, f), c in reference.notes.items()] \
                == notes
