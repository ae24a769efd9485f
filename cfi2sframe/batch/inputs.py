"""The input files of a run: named ones, trees (``-r``) and lists (``--files-from``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

from ..errors import Cfi2SframeError
from ..kinds import Kind, input_kind


def is_elf(path: str) -> bool:
    """True when ``path`` is a regular file that starts with the ELF magic, is a
    static library (an ar archive of objects) or a Mach-O file (``stats`` and
    ``verify`` read its compact unwind; a conversion keeps it): the files a run
    takes.  Only the first 8 bytes are read (``O_NONBLOCK``: a FIFO put in the
    file's place does not hang the walk)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        head = os.read(fd, 8)
    except OSError:
        return False
    finally:
        os.close(fd)
    return input_kind(head) in _TAKEN


_TAKEN = (Kind.elf, Kind.archive, Kind.macho, Kind.fat_macho)


def walk_tree(root: str) -> list[str]:
    """The ELF files, static libraries and Mach-O files under ``root``, sorted (a
    folder's files, then its folders' in turn); symbolic links are not followed (a
    link names a file the walk finds under its own name, or one outside the tree),
    and other files are skipped silently.  A regular file is told by its directory
    entry's type, without a ``stat`` (where the file system gives it)."""
    found: list[str] = []
    folders = [root]
    while folders:
        folder = folders.pop()
        try:
            with os.scandir(folder) as entries:
                listed = sorted(entries, key=lambda entry: entry.name)
        except OSError as exc:
            raise Cfi2SframeError(exc.filename or root, f"cannot read the folder: "
                                                        f"{exc.strerror}") from None
        below = []
        for entry in listed:
            try:
                if entry.is_dir(follow_symlinks=False):
                    below.append(entry.path)
                elif entry.is_file(follow_symlinks=False) and is_elf(entry.path):
                    found.append(entry.path)
            except OSError:
                continue  # vanished while we walked
        folders.extend(reversed(below))
    return found


def read_list(source: str, nul: bool) -> list[str]:
    """The names in a ``--files-from`` file (``-``: standard input), one per line or
    NUL-separated; empty entries are ignored."""
    try:
        if source == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(source, "rb") as handle:
                data = handle.read()
    except OSError as exc:
        raise Cfi2SframeError(source, f"cannot read the file list: {exc.strerror}") from None
    parts = data.split(b"\0") if nul else data.splitlines()
    return [os.fsdecode(part) for part in parts if part]


def gather(names: Iterable[str], recursive: bool, files_from: str | None = None,
           nul: bool = False) -> list[str]:
    """Every input once, in order: named files, the ELF files of named folders
    (``recursive``), then the listed names."""
    result: list[str] = []
    for name in list(names) + (read_list(files_from, nul) if files_from else []):
        if os.path.isdir(name):
            if not recursive:
                raise Cfi2SframeError(name, "is a folder (use -r to take the ELF files "
                                            "under it)")
            result.extend(walk_tree(name))
        else:
            result.append(name)
    return list(dict.fromkeys(result))
