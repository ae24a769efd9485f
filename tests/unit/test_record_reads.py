"""A tree run reads each file's section headers once (``batch.record.file_record``).

Every command of a tree run (``stats``, ``verify``, ``--in-place``) used to open the
same bytes as ELF up to seven times a file, reading the section headers and their
names each time: about half of the work on a file with nothing to convert.  Here
``elf.read.open_elf`` is counted, wherever it was imported, per distinct contents:
the file as read, and for ``--in-place`` the file as written (checked before it
replaces the input), each once.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest

from cfi2sframe.batch.record import Task, file_record
from cfi2sframe.elf import read
from tests.conftest import require_path

PROGRAM = "/usr/bin/true"  # GNU ld's: .eh_frame with the PLT's CFA expression


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How many times each distinct contents is opened as ELF."""
    counts: Counter[str] = Counter()
    real = read.open_elf

    def counted(data: bytes, where: str) -> read.ElfView:
        counts[hashlib.sha256(bytes(data)).hexdigest()] += 1
        return real(data, where)

    for name, module in list(sys.modules.items()):
        if name.startswith("cfi2sframe") and getattr(module, "open_elf", None) is real:
            monkeypatch.setattr(module, "open_elf", counted)
    return counts


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_each_command_opens_the_file_once(opened: Counter[str], tmp_path: Path) -> None:
    require_path(PROGRAM)
    copy = tmp_path / "true"
    shutil.copyfile(PROGRAM, copy)
    before = _digest(copy)
    for command in ("stats", "verify"):  # without .sframe: verify converts in memory
        opened.clear()
        record = file_record(str(copy), Task(command))
        assert record["status"] == "ok" and record["verify" if command == "verify" else
                                                    "sframe_v2_bytes"], record
        assert opened == {before: 1}, command
    opened.clear()
    record = file_record(str(copy), Task("convert"))
    after = _digest(copy)
    assert record["status"] == "ok" and after != before, record
    assert opened == {before: 1, after: 1}  # the input, and the file written, checked
    for command in ("stats", "verify"):  # with .sframe: verify checks it
        opened.clear()
        record = file_record(str(copy), Task(command))
        assert record["status"] == "ok" and record["verify"]["ok"], record
        assert opened == {after: 1}, command
