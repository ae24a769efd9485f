"""The input files of a run: named ones, trees (``-r``) and lists (``--files-from``)."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterable

from ..errors import Cfi2SframeError
from ..kinds import Kind, input_kind


def is_elf(path: str) -> bool:
    """True when ``path`` is a regular file that starts with the ELF magic, is a
    static library (an ar archive of objects) or a Mach-O file (``stats`` and
    ``verify`` read its compact unwind; a conversion keeps it): the files a run
    takes."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(8)
    except OSError:
        return False
    return input_kind(head) in (Kind.elf, Kind.archive, Kind.macho, Kind.fat_macho)


def walk_tree(root: str) -> list[str]:
    """The ELF files, static libraries and Mach-O files under ``root``, sorted; symbolic links are
    not followed (a link names a file the walk finds under its own name, or one
    outside the tree), and other files are skipped silently."""
    found: list[str] = []

    def failed(exc: OSError) -> None:
        raise Cfi2SframeError(exc.filename or root, f"cannot read the folder: "
                                                    f"{exc.strerror}")

    for folder, dirs, files in os.walk(root, onerror=failed):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(folder, name)
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue  # vanished while we walked
            if stat.S_ISREG(mode) and is_elf(path):
                found.append(path)
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
