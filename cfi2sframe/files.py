"""File input and output: one-line errors on read, atomic writes (complete or absent).

Reading: one-line errors; ``read_input`` memory-maps a large ELF file that no command
writes in place. Output is complete or absent: an ``O_TMPFILE`` prepared and linked in
when complete; a ``PatchedCopy`` (a large file's converted copy: the input's bytes with
the changes over them) written a chunk at a time, never whole in memory; devices and
FIFOs written in place; stale temporaries of dead runs swept. ``--in-place``:
``rewrite`` (the new file checked as written, read back through a map before it takes
the name; symbolic links followed and kept; owner, mode, attributes, dates kept; refused
if the input changed) and ``rewrite_inode`` (hard links: append, sync, then the one-page
header write)."""

from __future__ import annotations

import errno
import mmap
import os
import stat
import sys
from collections.abc import Callable, Iterable, Iterator

from .copying import NOT_COPYABLE, STEP, kernel_copy, pwrite_all, write_patched
from .core import compiled
from .errors import Cfi2SframeError
from .kinds import is_elf, xray_byte_order
from .typed import TYPE_CHECKING, NamedTuple, cast

if TYPE_CHECKING:
    from types import ModuleType
    from typing import BinaryIO


def read_bytes(path: str) -> bytes:
    """The contents of ``path`` (``-`` is standard input), or a one-line error."""
    try:
        if path == "-":
            return sys.stdin.buffer.read()
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise Cfi2SframeError(path, f"cannot read input: {exc.strerror}") from None


MAP_AT_LEAST = 1 << 20  # smaller files are read: a map costs more than it saves there


def read_input(path: str) -> bytes:
    """``read_bytes`` for commands that read an ELF file and write no file in its place:
    a large ELF file is memory-mapped read-only, not copied, so that only the pages
    its sections use are read (a 110 MB library is converted in 200 MB, not 290 MB);
    so is a large XRay trace, whose pages ``dump`` gives back as it reads on.

    The map stands in for ``bytes`` where an ELF file or trace is read: slicing (which gives
    ``bytes``), indexing, ``len``, ``find`` and the ``struct`` calls.  Anything else
    (assembly, archives, small files, standard input) is read as ``read_bytes`` does.
    ``--in-place`` maps only a file with one name (``read_for_rewrite``): a file
    rewritten in its own inode would change under the map.
    """
    if path == "-":
        return read_bytes(path)
    try:
        with open(path, "rb") as handle:
            mapped = _mapped(handle, os.fstat(handle.fileno()).st_size)
    except (OSError, ValueError):
        mapped = None  # not mappable (a pipe, a special file): read it
    return read_bytes(path) if mapped is None else mapped


class MappedFile(mmap.mmap):
    """A read-only map that keeps its file open (``origin``, a descriptor of its own,
    closed with the map): a converted copy of the file is then copied by the kernel
    from there (``copying``), not through the map."""

    __slots__ = ("origin",)
    origin: int

    def __del__(self) -> None:
        # The map goes first, so that the descriptor is the file's last reference:
        # closed later where it is a replaced file's (``_close_later``).
        try:
            self.close()
        except BufferError:  # (a view outlives it: the map goes with the last view)
            pass
        try:
            _close_later(self.origin)
        except ImportError:  # (the interpreter's end: no core to ask)
            os.close(self.origin)


def _mapped(handle: BinaryIO, size: int) -> bytes | None:
    """The open file, memory-mapped read-only, where it is a large ELF file or XRay
    trace (``size`` bytes: a trace is read once, front to back, and ``dump`` gives its
    pages back as it goes); else None, the handle left where it was."""
    head = handle.read(_HEAD) if size >= MAP_AT_LEAST else b""
    if not (is_elf(head) or xray_byte_order(head) is not None):
        handle.seek(0)
        return None
    origin = os.dup(handle.fileno())
    try:
        mapped = MappedFile(handle.fileno(), 0, access=mmap.ACCESS_READ)
    except BaseException:
        os.close(origin)
        raise
    mapped.origin = origin
    return cast("bytes", mapped)


_HEAD = 64  # an XRay header and its first record (a basic-mode record is 32 bytes)


def same_file(a: str, b: str) -> bool:
    """True when ``a`` and ``b`` name one existing regular file (one inode: through
    symbolic and hard links too)."""
    if "-" in (a, b):
        return False
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return False
    # Only a regular file is destroyed by being written: ``-o /dev/null`` of ``/dev/null``
    # is harmless.
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino) and stat.S_ISREG(sa.st_mode)


def refuse_output_naming_input(output: str, inputs: list[str], what: str = "the output") -> None:
    """A one-line error, before any work, when ``output`` is one of ``inputs``: writing
    it would destroy the input (GNU as and gcc refuse the same)."""
    for path in inputs:
        if same_file(output, path):
            raise Cfi2SframeError(output, f"{what} is the input file {path}; nothing written "
                                          "(use --in-place to rewrite a file in place)")


def write_output(path: str, data: Payload | str, mode_of: str | None = None,
                 started: StartedCopy | None = None) -> None:
    """Write ``data`` to ``path`` (``-`` is stdout): complete, or not at all.

    The file keeps the permission bits of the file it replaces; a new file gets those
    of ``mode_of`` (the input an ELF output is a copy of, as objcopy does) or 0666,
    less the umask.

    The bytes go to an unnamed file (``O_TMPFILE``) in the target's folder,
    which gets a name only once complete and synced, and then replaces
    ``path``; a process killed while writing leaves nothing behind.  Where
    ``O_TMPFILE`` is missing, a named temporary is used (and removed on errors).
    ``started``: that unnamed file, begun before the conversion (``start_copy``),
    taken where ``data`` is a copy of its input and closed unused otherwise.
    """
    payload = data.encode() if isinstance(data, str) else data
    if started is not None and (not started.copies(payload) or path == "-"
                                or _is_special(path)):
        started.close()
        started = None
    if path == "-":
        for piece in _pieces(payload):
            sys.stdout.buffer.write(piece)
        sys.stdout.buffer.flush()
        return
    if _is_special(path):
        # A device or FIFO (``-o /dev/null``) is written in place: renaming a
        # temporary over it would replace the device with a regular file.
        with open(path, "wb") as handle:
            for piece in _pieces(payload):
                handle.write(piece)
        return
    if os.path.exists(path):
        mode = os.stat(path).st_mode & 0o7777
    else:
        umask = os.umask(0)
        os.umask(umask)
        mode = (os.stat(mode_of).st_mode & 0o777 if mode_of else 0o666) & ~umask
    _replace_with(path, payload, lambda fd: os.fchmod(fd, mode), started=started)


def _replace_with(path: str, payload: Payload, prepare: Callable[[int], None],
                  check: Callable[[int], None] | None = None,
                  started: StartedCopy | None = None,
                  unchanged: Callable[[], None] | None = None) -> None:
    """Write ``payload`` to a file in ``path``'s folder, ``check`` it, run ``prepare``
    on its descriptor (mode, owner, attributes, dates) and sync it (``_synced``) while
    it has no name, ask ``unchanged`` (the input's check, last), name it and rename it
    over ``path``; on any failure remove it and leave ``path`` as it was.

    Only a kill between the naming and the rename (two system calls) can leave
    the temporary behind, named ``.cfi2sframe-PID-...``; a later process's first
    write into that folder removes those whose process is gone (``_sweep``).
    """
    directory = os.path.dirname(os.path.abspath(path))
    _sweep(directory)
    tmp = _write_unnamed(directory, payload, prepare, check, started, unchanged)
    try:
        if tmp is None:
            import tempfile  # only where unnamed files fail (and not at every start-up)

            fd, tmp = tempfile.mkstemp(prefix=f".cfi2sframe-{os.getpid()}-", dir=directory)
            try:
                _write_all(fd, payload)
                _synced(fd, check, prepare)
            finally:
                os.close(fd)
            if unchanged is not None:
                unchanged()
        replaced = _held(path)
        try:
            os.replace(tmp, path)
        finally:
            if replaced is not None:
                _close_later(replaced)
    except BaseException:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _held(path: str) -> int | None:
    """A descriptor of the file ``path`` names now (``O_PATH``: nothing read), or None:
    held over the rename that replaces it, the old inode is freed when it is closed
    (``_close_later``), not in the rename.  Freeing a file waits on the disk where it
    has no journal or discards freed blocks (a few ms a file: as long as its
    ``fsync``)."""
    flag = getattr(os, "O_PATH", 0)
    if not flag:
        return None
    try:
        return os.open(path, flag | os.O_NOFOLLOW)
    except OSError:
        return None  # nothing there yet, or not ours to open: the rename frees it


def _close_later(fd: int) -> None:
    """Close ``fd``, the last reference to a replaced file: on the compiled core's
    closing thread, so that freeing the old inode (which waits on the disk) overlaps
    the caller's next work (``_core.close_later``); at once under
    ``CFI2SFRAME_CORE=python``, the reference."""
    core = compiled()
    if core is None:
        os.close(fd)
    else:
        core.close_later(fd)


# The folders this process has swept (a tree run's worker writes many files into one
# folder: listing /usr/lib/x86_64-linux-gnu, 1,100 names, took longer than converting
# a small library in it).  A fork's copy is its own.
_SWEPT: set[str] = set()


def _sweep(directory: str) -> None:
    """Remove the temporaries that killed runs of ours left in ``directory``, once per
    process and folder (those of runs killed since are the next process's)."""
    if directory in _SWEPT:
        return
    _SWEPT.add(directory)
    try:
        names = [n for n in os.listdir(directory) if n.startswith(".cfi2sframe-")]
    except OSError:
        return
    for name in names:
        pid = name.split("-")[1]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        try:
            os.unlink(os.path.join(directory, name))
        except OSError:
            pass  # another run swept it, or the folder is not ours to clean


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def _write_all(fd: int, payload: Payload, copied: int = 0, refused: bool = False) -> None:
    """``payload`` into the new file at ``fd`` (synced by ``_synced``), empty or
    holding the first ``copied`` bytes of the ``PatchedCopy``'s source
    (``start_copy``); a ``PatchedCopy`` of a mapped input (``MappedFile``) with the
    bytes it keeps copied by the kernel, unless it ``refused`` already."""
    if isinstance(payload, PatchedCopy):
        source = payload.source
        origin = source.origin if isinstance(source, MappedFile) and not refused else None
        write_patched(fd, origin, source, payload.kept, payload.size, payload.patches,
                      release, copied)
    else:
        pwrite_all(fd, payload, 0)


def _synced(fd: int, check: Callable[[int], None] | None,
            prepare: Callable[[int], None]) -> None:
    """Run ``check`` on the new file at ``fd``, then ``prepare`` (its owner, mode,
    attributes and dates: after the check, whose map could update the access time, and
    before the ``fsync``, which then makes them durable with the bytes), then sync it.
    The disk writes while the check reads the same bytes from the page cache (the
    compiled core starts the writeback, ``_core.start_writeback``; the ``fsync`` after
    the check then waits for less: it was most of a small file's rewrite).  An error
    of the sync is the one reported, as if it had come before the check."""
    if check is not None:
        core = compiled()
        if core is not None:
            core.start_writeback(fd)
        try:
            check(fd)
        except Exception:
            os.fsync(fd)
            raise
    prepare(fd)
    os.fsync(fd)


def _write_unnamed(directory: str, payload: Payload, prepare: Callable[[int], None],
                   check: Callable[[int], None] | None = None,
                   started: StartedCopy | None = None,
                   unchanged: Callable[[], None] | None = None) -> str | None:
    """``payload`` in a new file of ``directory`` (or ``started``'s), ``check``ed,
    ``prepare``d and synced (``_synced``), and named only when complete and then
    ``unchanged`` (the input's check, last); None when the file system has no unnamed
    files."""
    opened = started.take() if started is not None else _unnamed(directory)
    if opened is None:
        return None
    fd, copied, refused = (opened, 0, False) if isinstance(opened, int) else opened
    try:
        _write_all(fd, payload, copied, refused)
        _synced(fd, check, prepare)
        if unchanged is not None:
            unchanged()
        name = os.path.join(directory, f".cfi2sframe-{os.getpid()}-{os.urandom(6).hex()}")
        root = os.open("/", os.O_RDONLY)
        try:
            # A dir fd makes Python call linkat(..., AT_SYMLINK_FOLLOW), which
            # links the open file itself; plain link() would refuse the
            # /proc magic link (EXDEV).
            os.link(f"/proc/self/fd/{fd}", name, src_dir_fd=root, follow_symlinks=True)
        except OSError as exc:  # file systems without unnamed files in the end
            if exc.errno in (errno.EXDEV, errno.EPERM, errno.ENOENT, errno.EOPNOTSUPP):
                return None
            raise
        finally:
            os.close(root)
    finally:
        os.close(fd)
    return name


def _unnamed(directory: str) -> int | None:
    """A new file in ``directory`` with no name (``O_TMPFILE``), open for reading and
    writing; None where the system or file system has none."""
    flag = getattr(os, "O_TMPFILE", 0)
    if not flag or not os.path.isdir("/proc/self/fd"):
        return None
    try:
        return os.open(directory, flag | os.O_RDWR, 0o600)  # read back by checks
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
            return None
        raise


class StartedCopy:
    """``write_output``'s unnamed file for a copy of a large mapped input, begun
    before the conversion (``start_copy``): the kernel copies the input into it and the
    disk writes those pages while the conversion runs, so the ``fsync`` that comes
    before the file's name waits for less.  The file has no name until then: a failed
    conversion or a killed process leaves nothing.

    With the compiled core the copy and its writeback's start run on a thread of the
    core's that never takes the GIL (``_core.copy_later``, on descriptors of its own),
    so that where a core is free the conversion does not wait for the kernel's copy;
    the file is touched here only once that thread has told how far it got
    (``_settled``).  Under ``CFI2SFRAME_CORE=python``, the reference, the copy is made
    before ``start_copy`` returns and nothing more is asked."""

    __slots__ = ("fd", "source", "copied", "_told")

    def __init__(self, fd: int, source: bytes, copied: int | None,
                 told: int | None = None) -> None:
        self.fd: int | None = fd
        self.source = source
        self.copied = copied  # None until the thread has told
        self._told = told  # the pipe the thread tells through, until read

    def _settled(self) -> None:
        """Wait for the copying thread, if any, and take its outcome: how far it got,
        or (an error other than the kernel's refusal, such as a full disk) the file
        dropped, so that the output is written as if no copy had been begun and
        reports that error there (``copying.kernel_copy``'s rule)."""
        told, self._told = self._told, None
        if told is None:
            return
        try:
            outcome = _read_all(told)
        finally:
            os.close(told)
        done = int.from_bytes(outcome[:8], sys.byteorder, signed=True)
        error = int.from_bytes(outcome[8:], sys.byteorder, signed=True)
        if len(outcome) == 16 and (error == 0 or error in NOT_COPYABLE):
            self.copied = done
        else:
            self.close()

    def copies(self, payload: Payload | str) -> bool:
        """Whether ``payload`` is a copy of this file's input, which it can then hold."""
        self._settled()
        return isinstance(payload, PatchedCopy) and payload.source is self.source \
            and self.fd is not None

    def take(self) -> tuple[int, int, bool]:
        """The descriptor (the taker closes it), how many bytes it holds, and whether
        the kernel stopped short of the input's end (then it is not asked again)."""
        self._settled()
        fd, self.fd = self.fd, None
        assert fd is not None and self.copied is not None
        return fd, self.copied, self.copied < len(self.source)

    def close(self) -> None:
        """Drop the file (never named, it goes with its descriptor and the copying
        thread's, which is waited for); again: nothing."""
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)
        self._settled()

    __del__ = close  # a conversion that failed drops it with its other objects


# The copy's last bytes, which the conversion writes again (section headers and names,
# the cut and the new section after it): their writeback is not started early, so that
# the cut and those writes wait for no write of the same pages in flight (libLLVM-14:
# the cut's page waited 10-53 ms, strace -T).
REWRITTEN_TAIL = 1 << 20


def _written_ahead(size: int) -> int:
    """The bytes of a ``size``-byte copy whose writeback starts with it: whole pages, up
    to ``REWRITTEN_TAIL`` before its end."""
    return max(0, size - REWRITTEN_TAIL) // PAGE * PAGE


def _copy_later(core: ModuleType, data: MappedFile, fd: int, path: str) -> int | None:
    """``_core.copy_later`` of ``data`` into ``fd``, told also of the file ``path``
    names now, where it is a regular file with that one name (``_replaced``): its
    clean page cache is then dropped while the conversion runs, not truncated by its
    last close at the exit."""
    replaced = _replaced(path)
    try:
        told: int | None = core.copy_later(data.origin, fd, len(data), STEP,
                                           _written_ahead(len(data)),
                                           -1 if replaced is None else replaced)
        return told
    finally:
        if replaced is not None:
            os.close(replaced)


def _replaced(path: str) -> int | None:
    """A descriptor of the regular file with one name that ``path`` names now (not
    followed through a link), or None: another name would still read its pages."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    status = os.fstat(fd)
    if stat.S_ISREG(status.st_mode) and status.st_nlink == 1:
        return fd
    os.close(fd)
    return None


def _read_all(fd: int) -> bytes:
    """What the pipe ``fd`` gives until its write end is closed (by the copying
    thread, its last step: none of the thread's descriptors is open then)."""
    got = b""
    while True:
        more = os.read(fd, 64)
        if not more:
            return got
        got += more


def start_copy(path: str, data: bytes) -> StartedCopy | None:
    """The new file a converted copy of ``data`` will be written to at ``path``,
    begun now: ``data``'s bytes copied in by the kernel and their writeback started,
    on a thread of the compiled core's (``StartedCopy``); the reference under
    ``CFI2SFRAME_CORE=python`` copies here and asks nothing more.  Only for a mapped
    input (``read_input``) and a regular file or new name; None otherwise, or where
    anything fails: ``write_output`` then writes as it would have, and reports what
    fails there."""
    if not isinstance(data, MappedFile) or path == "-" or _is_special(path):
        return None
    fd = None
    try:
        fd = _unnamed(os.path.dirname(os.path.abspath(path)))
        if fd is None:
            return None
        core = compiled()
        told = None if core is None else _copy_later(core, data, fd, path)
        if told is not None:
            return StartedCopy(fd, cast("bytes", data), None, told)
        copied = kernel_copy(data.origin, fd, len(data))
        if core is not None and copied:
            core.start_writeback(fd)
    except OSError:
        if fd is not None:
            os.close(fd)
        return None
    return StartedCopy(fd, cast("bytes", data), copied)


def _is_special(path: str) -> bool:
    """True when ``path`` exists and is not a regular file (a device, FIFO, socket)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


PAGE = 4096  # one write within one page is whole or absent when the process is killed


def read_for_rewrite(path: str) -> tuple[bytes, os.stat_result]:
    """The contents of the file ``path`` names (through symbolic links) and its status
    from before the read (its access time not yet updated by it), for an in-place
    rewrite that checks nothing changed meanwhile.

    A large ELF file with one name is memory-mapped as ``read_input`` maps it: its
    rewrite is a new inode renamed over the name, so the mapped one never changes
    under the map.  A file with several names is rewritten in its own inode: it is
    read."""
    try:
        status = os.stat(path)
        with open(path, "rb") as handle:
            mapped = _mapped(handle, status.st_size) if status.st_nlink == 1 else None
            data = handle.read() if mapped is None else mapped
    except (OSError, ValueError) as exc:
        raise Cfi2SframeError(path, f"cannot read input: {getattr(exc, 'strerror', exc)}") \
            from None
    _check_unchanged(path, path, status)
    return data, status


def release(data: bytes, start: int = 0, length: int | None = None) -> None:
    """Give back the pages of a memory-mapped input (``read_input``) read so far (from
    ``start``, ``length`` bytes; by default all): they stay in the page cache, and a
    later read faults them in again.  For a large file read once (its CFI and
    symbols) and copied later, chunk by chunk.  Anything else is left as it is."""
    dontneed = getattr(mmap, "MADV_DONTNEED", None)
    if isinstance(data, mmap.mmap) and dontneed is not None and len(data):
        page = start - start % mmap.PAGESIZE
        data.madvise(dontneed, page, (len(data) - start if length is None else length)
                     + start - page)


COPY_CHUNK = 1 << 22


class PatchedCopy(NamedTuple):
    """A file to write: the first ``kept`` bytes of ``source`` (``read_input``'s bytes,
    perhaps a map), zeros up to ``size``, and ``patches`` (offset, bytes) written over
    them in order.

    It is produced a chunk at a time (``chunks``), never whole: a converted copy
    of a 110 MB library costs a chunk of memory, not its size, and a mapped source
    gives each chunk's pages back once copied (``release``).  ``bytes_of`` gives
    the whole file where a caller needs it in memory.
    """

    size: int
    source: bytes
    kept: int
    patches: tuple[tuple[int, bytes], ...]

    def chunks(self, length: int = COPY_CHUNK) -> Iterator[bytearray]:
        """The file in order, ``length`` bytes at a time."""
        view = memoryview(self.source)
        for first in range(0, self.size, length):
            last = min(first + length, self.size)
            chunk = bytearray(last - first)
            if first < self.kept:
                stop = min(last, self.kept)
                chunk[:stop - first] = view[first:stop]
                release(self.source, first, stop - first)
            for at, data in self.patches:
                low, high = max(at, first), min(at + len(data), last)
                if low < high:
                    chunk[low - first:high - first] = memoryview(data)[low - at:high - at]
            yield chunk


Payload = bytes | PatchedCopy  # what the writers below take


def bytes_of(payload: Payload) -> bytes:
    """The whole file in memory (a ``bytearray`` read as bytes, not copied again)."""
    if not isinstance(payload, PatchedCopy):
        return payload
    whole = bytearray()
    for chunk in payload.chunks():
        whole += chunk
    return cast("bytes", whole)


def same_bytes(payload: Payload, data: bytes) -> bool:
    """True when ``payload`` is ``data``, compared a chunk at a time (never whole)."""
    if not isinstance(payload, PatchedCopy):
        return payload == data
    at = 0
    for piece in _pieces(payload):
        if data[at:at + len(piece)] != piece:
            return False
        at += len(piece)
    return at == len(data)


def _pieces(payload: Payload) -> Iterable[bytes | bytearray]:
    return payload.chunks() if isinstance(payload, PatchedCopy) else (payload,)


def rewrite(path: str, old: bytes, read_stat: os.stat_result, new: Payload,
            preserve_dates: bool = False,
            check: Callable[[bytes], None] | None = None) -> None:
    """Replace the file ``path`` names (``--in-place``) by ``new``: complete, or the old
    file as it was.

    A symbolic link is followed and kept: the file it names is rewritten, as
    strip does.  A file with one name gets a new inode that takes its name
    only when complete (``_replace_with``) and keeps its owner, group, mode
    (setuid and setgid included) and extended attributes (file capabilities);
    with ``preserve_dates`` its access and modification times.  A file with
    several names (hard links) is rewritten in its own inode, so every name
    sees the new contents (``rewrite_inode``).  If the file changed or vanished
    since it was read, nothing is written.

    ``check`` (a one-line error, or nothing) is given the new file before it takes
    the name: as written and synced, read back through a map; in memory for a file
    rewritten in its own inode.
    """
    target = os.path.realpath(path)
    _check_unchanged(path, target, read_stat)
    if read_stat.st_nlink > 1:
        whole = bytes_of(new)
        if check is not None:
            check(whole)
        rewrite_inode(path, target, old, read_stat, whole)
        if preserve_dates:
            _utime(path, target, read_stat)
    else:
        attributes = _xattrs(target, path)

        def prepare(fd: int) -> None:
            try:
                os.fchown(fd, read_stat.st_uid, read_stat.st_gid)
            except PermissionError:
                pass  # not ours to give away: the writer keeps it, as with strip
            os.fchmod(fd, read_stat.st_mode & 0o7777)  # after chown, which clears setuid
            _set_xattrs(fd, attributes, path)
            if preserve_dates:
                _utime(path, fd, read_stat)

        try:
            _replace_with(target, new, prepare,
                          None if check is None else lambda fd: _check_written(fd, check),
                          unchanged=lambda: _check_unchanged(path, target, read_stat))
        except OSError as exc:
            raise Cfi2SframeError(path, f"cannot write output: {exc.strerror or exc}") \
                from None


def _check_written(fd: int, check: Callable[[bytes], None]) -> None:
    """``check`` the file open at ``fd`` as it is on disk, through a read-only map (its
    pages are the page cache's, not a copy)."""
    written = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    try:
        check(cast("bytes", written))
    finally:
        try:
            written.close()
        except BufferError:  # a view of it outlives the check: the map goes with it
            pass


def rewrite_inode(path: str, target: str, old: bytes, read_stat: os.stat_result,
                  new: bytes) -> None:
    """Turn the file ``old`` into ``new`` within its own inode, so that a kill at any
    moment leaves the old file (perhaps with unused bytes after its end) or the
    new one: the bytes past the old end are written first and synced; then the
    rest of the change, which must lie within one page (the ELF header of an
    append-only conversion), in one write.  A full disk while appending cuts the
    file back to its old length.  Other changes are refused."""
    size = len(old)
    span = _changed_span(old, new[:size])
    if len(new) < size or (span is not None and span[0] // PAGE != (span[1] - 1) // PAGE):
        raise Cfi2SframeError(path, f"the file has {read_stat.st_nlink} names (hard links) "
                                    "and this conversion would change it in more than one "
                                    "place, which cannot be done in place without a moment "
                                    "where it is half-written; convert a copy (cp) instead")
    attributes = _xattrs(target, path)
    try:
        fd = os.open(target, os.O_WRONLY)
    except OSError as exc:
        raise Cfi2SframeError(path, f"cannot write output: {exc.strerror}") from None
    try:
        _check_unchanged(path, target, read_stat, fd)
        try:
            pwrite_all(fd, new[size:], size)
            os.fsync(fd)
        except OSError as exc:
            os.ftruncate(fd, size)
            os.fsync(fd)
            raise Cfi2SframeError(path, f"cannot write output: {exc.strerror}; the file "
                                        "is as it was") from None
        if span is not None:
            os.pwrite(fd, new[span[0]:span[1]], span[0])  # within one page: one write
            os.fsync(fd)
        # A write clears setuid/setgid for non-root writers and the file capabilities
        # for everyone: put them back.
        os.fchmod(fd, read_stat.st_mode & 0o7777)
        _set_xattrs(fd, attributes, path)
    except OSError as exc:
        raise Cfi2SframeError(path, f"cannot write output: {exc.strerror}") from None
    finally:
        os.close(fd)


def _changed_span(old: bytes, new: bytes) -> tuple[int, int] | None:
    """[first, last + 1) of the bytes where two equally long strings differ; None if
    they are equal.  Compared a block at a time (memcmp), then byte by byte."""
    if old == new:
        return None
    block = 1 << 16
    start = 0
    while old[start:start + block] == new[start:start + block]:
        start += block
    while old[start] == new[start]:
        start += 1
    end = len(old)
    while old[max(start, end - block):end] == new[max(start, end - block):end]:
        end -= block
    while old[end - 1] == new[end - 1]:
        end -= 1
    return start, end


def _check_unchanged(path: str, target: str, read_stat: os.stat_result,
                     fd: int | None = None) -> None:
    """An error when the file is not the one read (replaced, vanished, written since)."""
    try:
        now = os.fstat(fd) if fd is not None else os.stat(target)
    except OSError:
        now = None
    same = now is not None and (now.st_dev, now.st_ino, now.st_size, now.st_mtime_ns) == (
        read_stat.st_dev, read_stat.st_ino, read_stat.st_size, read_stat.st_mtime_ns)
    if not same:
        raise Cfi2SframeError(path, "the file changed or vanished while it was converted; "
                                    "nothing written")


def _xattrs(path: str, where: str) -> dict[str, bytes]:
    """The extended attributes of ``path`` (none where the system has none), read
    before anything is written: one that cannot be read (a security module's
    denial, an I/O error) refuses the rewrite, as it could not be kept; one
    removed between listing and reading is gone and not kept."""
    if not hasattr(os, "listxattr"):
        return {}
    try:
        names = os.listxattr(path)
    except OSError as exc:
        if exc.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            return {}
        raise Cfi2SframeError(where, f"cannot read the extended attributes: {exc.strerror}; "
                                     "nothing written") from None
    attributes = {}
    for name in names:
        try:
            attributes[name] = os.getxattr(path, name)
        except OSError as exc:
            if exc.errno == errno.ENODATA:
                continue
            raise Cfi2SframeError(where, f"cannot read the extended attribute {name}: "
                                         f"{exc.strerror}; nothing written") from None
    return attributes


def _set_xattrs(target: int | str, attributes: dict[str, bytes], where: str) -> None:
    for name, value in attributes.items():
        try:
            os.setxattr(target, name, value)
        except OSError as exc:
            raise Cfi2SframeError(where, f"cannot keep the extended attribute {name}: "
                                         f"{exc.strerror}") from None


def _utime(path: str, target: int | str, read_stat: os.stat_result) -> None:
    try:
        os.utime(target, ns=(read_stat.st_atime_ns, read_stat.st_mtime_ns))
    except OSError as exc:
        raise Cfi2SframeError(path, f"cannot keep the dates: {exc.strerror}") from None
