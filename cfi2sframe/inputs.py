"""One way in: an input read once and told what it is (``object``'s ``read::File``).

The commands that take a file of any kind (the conversion, ``dump``, ``lookup``,
``diff``, ``verify``, ``compact``) start here: the bytes are read once (a large ELF
file mapped, ``files.read_input``), its kind told once from them (``kinds.input_kind``:
the magic numbers live there), and what follows dispatches on the kind instead of
testing the bytes again.  Those that take one kind read it themselves (``extract``,
``stacks``, ``unwind``'s snapshots), and a run over many files tells each file's kind
in ``batch/record.py``.

``open_input(path)`` reads a file (``mapped=False`` reads a large ELF file instead of
mapping it) and ``input_of(path, data)`` takes bytes in hand, each an ``Input``
(``path``, ``data``, ``kind``; ``is_elf``, ``is_archive``, ``is_compact_unwind``,
``is_xray``, ``elf_arch``: the target its header names); ``file_head`` gives the first
bytes, for a run over many files that reads each later. ``convert_file`` and
``compact_file`` take the kind instead of telling it again.
"""

from __future__ import annotations

from .arch.base import Arch
from .elf.read import elf_arch
from .files import read_bytes, read_input
from .kinds import COMPACT_UNWIND_KINDS, Kind, input_kind
from .typed import NamedTuple


class Input(NamedTuple):
    """An input: the name it is given in messages, its bytes and its kind."""

    path: str
    data: bytes
    kind: Kind

    @property
    def is_elf(self) -> bool:
        """An ELF object, program or library (sound or not: its reader says)."""
        return self.kind == Kind.elf

    @property
    def is_archive(self) -> bool:
        """A static library whose members are in it (not a thin one)."""
        return self.kind == Kind.archive

    @property
    def is_compact_unwind(self) -> bool:
        """A Mach-O file (thin or universal) or a bare ``__unwind_info``: read for its
        compact unwind, not for SFrame."""
        return self.kind in COMPACT_UNWIND_KINDS

    @property
    def is_xray(self) -> bool:
        """An LLVM XRay trace (its header)."""
        return self.kind == Kind.xray

    @property
    def elf_arch(self) -> Arch | None:
        """The target an ELF file's header names (a located error if it is malformed);
        None for other kinds, whose target is said elsewhere (``--arch``, a slice)."""
        return elf_arch(self.path, self.data) if self.is_elf else None


def input_of(path: str, data: bytes) -> Input:
    """Bytes already read (standard input, an archive member, a test's), as an input."""
    return Input(path, data, input_kind(data))


def open_input(path: str, mapped: bool = True) -> Input:
    """The file ``path`` (``-``: standard input) read and told; ``mapped`` False reads
    even a large ELF file into memory (a command whose output may replace it)."""
    return input_of(path, read_input(path) if mapped else read_bytes(path))


def file_head(path: str, size: int) -> bytes:
    """The first ``size`` bytes of a file, to tell its kind before a run over many
    files reads it; empty where it cannot be read (the run says why)."""
    try:
        with open(path, "rb") as handle:
            return handle.read(size)
    except OSError:
        return b""
