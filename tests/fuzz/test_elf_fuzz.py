"""Bad ELF input: truncated or mutated files give a clean one-line error, never a crash."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cfi2sframe.convert import convert_elf
from cfi2sframe.errors import Cfi2SframeError
from cfi2sframe.sframe.load import load_sframe
from tests.conftest import require, small_program

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def object_bytes(tmp_path_factory) -> bytes:
    require("as")
    out = tmp_path_factory.mktemp("elf") / "f.o"
    subprocess.run(["as", str(EXAMPLES / "frame_pointer.s"), "-o", str(out)], check=True)
    return out.read_bytes()


@pytest.fixture(scope="module")
def program_bytes(tmp_path_factory) -> bytes:
    """A small linked program: linked input takes another reader (``elfread``)."""
    return small_program(tmp_path_factory.mktemp("exe")).read_bytes()


def _located(exc: Cfi2SframeError) -> None:
    """A bad-input error names the file and fits one line; any other exception (a bug
    of ours, even one raised while reading bad input) propagates and fails the test."""
    assert exc.where == "f.o" and exc.message and "\n" not in str(exc), str(exc)


def _convert(data: bytes) -> None:
    start = time.perf_counter()
    try:
        conversion = convert_elf("f.o", data)
        conversion.raw()
    except Cfi2SframeError as exc:
        _located(exc)
    try:
        load_sframe("f.o", data)
    except Cfi2SframeError as exc:
        _located(exc)
    assert time.perf_counter() - start < 2.0


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), min_size=1,
                max_size=6))
# Findings, kept: a 4 GiB FDE range (struct.error while encoding), a relocation
# section linked to the null section, a symbol in a missing section, an offset
# past any C size.
@example(flips=[(255, 128)])
@example(flips=[(1332, 0)])
@example(flips=[(398, 13)])
@example(flips=[(25743, 128)])
def test_mutated_objects(object_bytes, flips):
    data = bytearray(object_bytes)
    for pos, value in flips:
        data[pos % len(data)] = value
    _convert(bytes(data))


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.integers(0, 1 << 16))
def test_truncated_objects(object_bytes, cut):
    _convert(object_bytes[: cut % len(object_bytes)])


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), min_size=1,
                max_size=6))
# Finding, kept: a program header offset past any C size (OverflowError in our reader,
# hidden as "malformed" by a broad catch until only located input errors passed).
@example(flips=[(39, 128)])
def test_mutated_programs(program_bytes, flips):
    data = bytearray(program_bytes)
    for pos, value in flips:
        data[pos % len(data)] = value
    _convert(bytes(data))


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.integers(0, 1 << 16))
def test_truncated_programs(program_bytes, cut):
    _convert(program_bytes[: cut % len(program_bytes)])


def test_bad_relocation_names_its_byte_offset(object_bytes):
    """A relocation of .eh_frame naming a symbol that does not exist: the error gives
    the file offset of that relocation entry."""
    from cfi2sframe.elf.read import open_elf

    view = open_elf(object_bytes, "object")
    rela = next(s for s in view.sections if s.name == ".rela.eh_frame")
    data = bytearray(object_bytes)
    data[rela.offset + 12:rela.offset + 16] = (0xFFFF).to_bytes(4, "little")  # r_sym
    with pytest.raises(Cfi2SframeError) as caught:
        convert_elf("f.o", bytes(data))
    assert f"at byte {rela.offset:#x}: relocation names symbol 65535" in str(caught.value)
