"""The ``--jsonl`` file: one record per line, appended as each file is done.

Each line goes out in one ``write`` on a descriptor opened with ``O_APPEND``,
so a run killed at any moment leaves complete lines and at most one partial
last line; ``--resume`` cuts that line off and goes on after the others.
"""

from __future__ import annotations

import json
import os

from ..errors import Cfi2SframeError
from ..typed import TYPE_CHECKING
from .record import GOOD_STATUSES, Task, identity, options_of

if TYPE_CHECKING:
    from typing import Any


def read_journal(path: str) -> dict[str, dict[str, Any]]:
    """The records of an existing journal by path (the last one of a path wins);
    a partial last line (a killed run) is cut off the file.  No file: none."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise Cfi2SframeError(path, f"cannot read the journal: {exc.strerror}") from None
    complete = data.rfind(b"\n") + 1
    if complete < len(data):
        try:
            os.truncate(path, complete)
        except OSError as exc:
            raise Cfi2SframeError(path, f"cannot cut the partial last line: "
                                        f"{exc.strerror}") from None
    records: dict[str, dict[str, Any]] = {}
    for number, line in enumerate(data[:complete].splitlines(), 1):
        try:
            record = json.loads(line)
        except ValueError:
            raise Cfi2SframeError(f"{path}:{number}", "not a JSON record (is this a "
                                                      "cfi2sframe --jsonl file?)") from None
        if not isinstance(record, dict) or not isinstance(record.get("path"), str):
            raise Cfi2SframeError(f"{path}:{number}", "a record without a path")
        records[record["path"]] = record
    return records


class Journal:
    """An open ``--jsonl`` file (a fresh one, or an existing one to append to)."""

    def __init__(self, path: str, append: bool) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | (0 if append else os.O_TRUNC)
        try:
            self._fd = os.open(path, flags, 0o666)
        except OSError as exc:
            raise Cfi2SframeError(path, f"cannot write the journal: {exc.strerror}") \
                from None
        self.path = path

    def add(self, record: dict[str, Any]) -> None:
        line = (json.dumps(record, sort_keys=True) + "\n").encode()
        try:
            written = os.write(self._fd, line)
        except OSError as exc:
            raise Cfi2SframeError(self.path, f"cannot write the journal: "
                                             f"{exc.strerror}") from None
        if written != len(line):  # a full disk: the short line is cut off by --resume
            raise Cfi2SframeError(self.path, "cannot write the journal: the disk is full")

    def close(self) -> None:
        try:
            os.fsync(self._fd)
        except OSError:
            pass  # a pipe or a device: nothing to sync
        os.close(self._fd)


def done(record: dict[str, Any], path: str, task: Task) -> bool:
    """True when ``--resume`` may keep ``record`` for ``path`` instead of redoing it: it
    says the file is done (a status that is no failure: an error, mismatch, timeout,
    crash or internal error may go another way this time, with another option, a
    larger ``--timeout``, more memory, a fixed cfi2sframe), it was made with the
    options of this run (``record.options_of``; a record without them, from before
    they were kept, is redone) and the file is the one it was made of
    (``record.identity``)."""
    if record.get("status") not in GOOD_STATUSES or record.get("options") != options_of(task):
        return False
    try:
        info = os.stat(path)
    except OSError:
        return False
    return all(record.get(key) == value for key, value in identity(info).items())
