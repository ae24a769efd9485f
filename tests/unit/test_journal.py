"""What ``--resume`` keeps (``batch.journal.done``): a record that says its file is done,
made with this run's options, of the file as it is now.  The statuses and options are
written out here from docs/trees.md, not taken from the code's own tables."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from cfi2sframe.batch.journal import done
from cfi2sframe.batch.record import STATUSES, Task, empty_record, identity
from cfi2sframe.elf.compressed import Limits

FAILURES = {"mismatch", "error", "timeout", "crash", "internal-error"}
TASK = Task("convert")


def recorded(path: Path, task: Task = TASK, status: str = "ok") -> dict:
    record = empty_record(str(path), task)
    record.update(identity(os.stat(path)), status=status)
    return record


@pytest.fixture()
def file(tmp_path: Path) -> Path:
    path = tmp_path / "f"
    path.write_bytes(b"\x7fELF" + bytes(60))
    return path


def test_failures_are_redone_and_the_rest_kept(file: Path) -> None:
    assert FAILURES < set(STATUSES)
    for status in STATUSES:
        assert done(recorded(file, status=status), str(file), TASK) is (
            status not in FAILURES), status


@pytest.mark.parametrize("other", [
    Task("stats"), Task("convert", sframe_version=3), Task("convert", replace=True),
    Task("convert", old_kernels="pad"), Task("convert", objects=True),
    Task("convert", flex=False), Task("convert", limits=Limits(1 << 20, 64))])
def test_other_options_redo_the_file(file: Path, other: Task) -> None:
    assert not done(recorded(file, other), str(file), TASK)
    assert not done(recorded(file), str(file), other)


def test_dates_kept_or_not_change_no_record(file: Path) -> None:
    """-p changes the dates a conversion leaves, not the file it makes; --resume's
    own recognition of converted files is not an option of the record."""
    for task in (Task("convert", preserve_dates=True), Task("convert", recognise=True)):
        assert done(recorded(file), str(file), task)
        assert done(recorded(file, task), str(file), TASK)


def test_a_record_without_options_is_redone(file: Path) -> None:
    record = recorded(file)
    del record["options"]
    assert not done(record, str(file), TASK)


def test_the_same_name_size_and_mtime_is_not_the_same_file(file: Path) -> None:
    """Another file renamed over the name, or the file written over, with the size and
    dates the record has (``cp -p``, ``touch -r``): redone.  Gone: redone."""
    record = recorded(file)
    info = os.stat(file)
    assert done(record, str(file), TASK)
    other = file.with_name("other")
    other.write_bytes(b"\x7fELF" + b"\1" * 60)
    os.utime(other, ns=(info.st_atime_ns, info.st_mtime_ns))
    os.replace(other, file)
    assert (os.stat(file).st_size, os.stat(file).st_mtime_ns) == (info.st_size,
                                                                   info.st_mtime_ns)
    assert not done(record, str(file), TASK)
    record = recorded(file)
    time.sleep(0.05)  # past the file system's clock tick: a new change time
    file.write_bytes(b"\x7fELF" + b"\2" * 60)
    os.utime(file, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert not done(record, str(file), TASK)
    file.unlink()
    assert not done(record, str(file), TASK)
