"""``--emit elf`` and ``--in-place`` copy the bytes a converted file keeps with the
kernel (``copying``: ``copy_file_range`` from the mapped input); these tests try to
fool that shortcut.

The expected file is built independently of it: the input's bytes as ``cmp`` sees
them, with the changes the conversion makes (the ``PatchedCopy``'s patches) written
over them in memory, a chunk at a time, as the writer did before the shortcut.  Each
case must give that file byte for byte: the kernel copying one byte per call,
refusing at once or midway (EXDEV, ENOSYS, EINVAL, EOPNOTSUPP), another file system,
a pipe, ``/dev/null``; a full disk (ENOSPC from the copy or from a write) must give
one error line, exit 1, and no file.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from cfi2sframe import files
from cfi2sframe.cli import main
from cfi2sframe.convert import convert_file
from tests.conftest import require_path

PROGRAMS = ["/usr/bin/ls", "/usr/bin/gzip"]
LIBRARY = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"


def reference(path: Path) -> bytes:
    """The converted copy built in memory from the file's own bytes (no map, no kernel
    copy): the input cut at ``kept``, zeros to ``size``, the patches in order."""
    data = path.read_bytes()
    conversion = convert_file(str(path), data).laid_out(old_kernels="keep")
    payload = conversion.elf_copy()
    assert isinstance(payload, files.PatchedCopy) and payload.kept > len(data) // 2
    whole = bytearray(data[:payload.kept]) + bytes(max(0, payload.size - payload.kept))
    for at, patch in payload.patches:
        whole[at:at + len(patch)] = patch
    return bytes(whole[:payload.size])


@pytest.fixture
def program(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An installed program, copied, and mapped as a large file is (``MAP_AT_LEAST``
    lowered), so that the kernel copy is the path its conversion takes."""
    source = next((p for p in PROGRAMS if os.path.exists(p)), PROGRAMS[0])
    require_path(source)
    copy = tmp_path / "prog"
    shutil.copy(source, copy)
    monkeypatch.setattr(files, "MAP_AT_LEAST", 0)
    return copy


def convert(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    status = main(["-w", *args])
    return status, capsys.readouterr().err


def counting(monkeypatch: pytest.MonkeyPatch,
             step: Callable[[int, int, int, int | None, int | None], int]) -> list[int]:
    """``os.copy_file_range`` replaced by ``step``; returns the list of counts asked."""
    asked: list[int] = []

    def patched(src: int, dst: int, count: int, offset_src: int | None = None,
                offset_dst: int | None = None) -> int:
        asked.append(count)
        return step(src, dst, count, offset_src, offset_dst)

    monkeypatch.setattr(os, "copy_file_range", patched)
    python_copy(monkeypatch)
    return asked


def python_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The early copy made by ``kernel_copy`` on this thread, as the reference makes it
    (the compiled core's thread calls the kernel itself, past a patched
    ``os.copy_file_range``: ``tests/differential/test_core_copy.py`` holds it to
    ``kernel_copy``)."""
    monkeypatch.setattr(files, "compiled", lambda: None)


REAL_COPY = os.copy_file_range


def test_the_kernel_copies_and_the_file_is_the_reference(program, tmp_path, capsys,
                                                         monkeypatch) -> None:
    asked = counting(monkeypatch, REAL_COPY)
    out = tmp_path / "out"
    assert convert([str(program), "--emit", "elf", "-o", str(out)], capsys) == (0, "")
    assert asked, "the kept bytes were not copied by the kernel"
    assert out.read_bytes() == reference(program)


def test_one_byte_per_call(program, tmp_path, capsys, monkeypatch) -> None:
    def one(src: int, dst: int, count: int, at: int | None, to: int | None) -> int:
        return REAL_COPY(src, dst, 1, at, to)

    asked = counting(monkeypatch, one)
    out = tmp_path / "out"
    assert convert([str(program), "--emit", "elf", "-o", str(out)], capsys) == (0, "")
    assert len(asked) > 1000
    assert out.read_bytes() == reference(program)


@pytest.mark.parametrize("code", [errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP])
@pytest.mark.parametrize("after", [0, 3])
def test_a_kernel_that_cannot_copy(program, tmp_path, capsys, monkeypatch, code,
                                   after) -> None:
    """Refused at the first call, or after three calls of 4 KiB each: the rest is
    written from memory."""
    def refuse(src: int, dst: int, count: int, at: int | None, to: int | None) -> int:
        if len(asked) > after:
            raise OSError(code, os.strerror(code))
        return REAL_COPY(src, dst, min(count, 4096), at, to)

    asked = counting(monkeypatch, refuse)
    out = tmp_path / "out"
    assert convert([str(program), "--emit", "elf", "-o", str(out)], capsys) == (0, "")
    assert len(asked) == after + 1
    assert out.read_bytes() == reference(program)


@pytest.mark.parametrize("failing", ["copy_file_range", "pwrite"])
def test_a_full_disk(program, tmp_path, capsys, monkeypatch, failing) -> None:
    def full(*args: object, **kwargs: object) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, failing, full)
    python_copy(monkeypatch)
    out = tmp_path / "out"
    status, err = convert([str(program), "--emit", "elf", "-o", str(out)], capsys)
    assert status == 1
    assert err == f"{out}: error: cannot write output: No space left on device\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prog"]
    # --in-place: the input as it was.
    before = program.read_bytes()
    status, err = convert([str(program), "--in-place"], capsys)
    assert status == 1 and err.count("\n") == 1 and "No space left" in err, err
    assert program.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prog"]


def test_in_place(program, capsys) -> None:
    want = reference(program)
    assert convert([str(program), "--in-place"], capsys) == (0, "")
    assert program.read_bytes() == want


def test_another_file_system(program, tmp_path, capsys) -> None:
    """The input on /dev/shm (tmpfs), the output here, and the other way round: the
    kernel copies across them or refuses (EXDEV), and the file is the same."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("no second file system here")
    there = shm / f"cfi2sframe-test-{os.getpid()}"
    there.mkdir()
    try:
        shutil.copy(program, there / "prog")
        want = reference(program)
        for source, out in ((there / "prog", tmp_path / "out"),
                            (program, there / "out")):
            assert convert([str(source), "--emit", "elf", "-o", str(out)], capsys) == (0, "")
            assert out.read_bytes() == want, (source, out)
    finally:
        shutil.rmtree(there)


def test_a_pipe_and_dev_null(tmp_path) -> None:
    """Standard output as a pipe, and ``-o /dev/null``: written in place, a chunk at a
    time (a real process, so a library over ``MAP_AT_LEAST``, which is mapped)."""
    require_path(LIBRARY)
    big = tmp_path / "big.so"
    shutil.copy(LIBRARY, big)
    assert big.stat().st_size > (1 << 20)
    command = [sys.executable, "-m", "cfi2sframe", "-w", str(big), "--emit", "elf"]
    piped = subprocess.run([*command, "-o", "-"], capture_output=True, check=True).stdout
    assert piped == reference(big)
    done = subprocess.run([*command, "-o", os.devnull], capture_output=True)
    assert (done.returncode, done.stderr) == (0, b"")


def test_the_copy_is_begun_before_the_conversion(program, tmp_path, capsys,
                                                monkeypatch) -> None:
    """``--emit elf`` copies the input into its new file while converting it
    (``files.start_copy``: the disk writes meanwhile), writes the conversion into that
    file, and the file is still the reference.  With the compiled core the copy is
    handed to a thread of the core's (``copy_later``) before the conversion, and the
    command's own thread copies nothing; the reference copies, then converts."""
    from cfi2sframe import convert as convert_module
    from cfi2sframe.core import compiled

    core = compiled()
    events: list[str] = []

    def copy(src: int, dst: int, count: int, at: int | None, to: int | None) -> int:
        events.append("copy")
        return REAL_COPY(src, dst, count, at, to)

    real_convert = convert_module.convert_file

    def converting(*args: object, **kwargs: object) -> object:
        events.append("convert")
        return real_convert(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "copy_file_range", copy)
    monkeypatch.setattr(convert_module, "convert_file", converting)
    if core is not None:
        real_later = core.copy_later

        def later(source: int, target: int, length: int, step: int, ahead: int,
                  replaced: int = -1) -> int | None:
            events.append("copy_later")
            return real_later(source, target, length, step, ahead, replaced)

        monkeypatch.setattr(core, "copy_later", later)
    out = tmp_path / "out"
    assert convert([str(program), "--emit", "elf", "-o", str(out)], capsys) == (0, "")
    # One copy (the file begun is the one written, not dropped and copied again).
    assert events == ["copy" if core is None else "copy_later", "convert"], events
    assert out.read_bytes() == reference(program)


def test_a_failed_conversion_leaves_no_file_and_no_descriptor(program, tmp_path, capsys,
                                                              monkeypatch) -> None:
    """The copy begun before a conversion that fails goes with it: no name in the
    folder, no descriptor left open (the unnamed file's blocks would stay taken).
    The input's own descriptor is closed at once here, not on the closing thread
    (``files._close_later``), which would close it at a moment of its own."""
    monkeypatch.setattr(files, "_close_later", os.close)
    data = bytearray(program.read_bytes())
    data[0x28:0x30] = (len(data) + 64).to_bytes(8, "little")  # e_shoff past the end
    bad = tmp_path / "bad"
    bad.write_bytes(bytes(data))
    before = sorted(os.listdir("/proc/self/fd"))
    status, err = convert([str(bad), "--emit", "elf", "-o", str(tmp_path / "out")], capsys)
    assert status == 1 and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad", "prog"]
    assert sorted(os.listdir("/proc/self/fd")) == before


def test_an_early_copy_longer_than_the_kept_bytes_is_cut(tmp_path) -> None:
    """``write_patched`` over a file that already holds more of the source than the
    copy keeps: the bytes past ``kept`` are zeros (then the patches), as in a copy
    written from nothing.  Expected file built by hand."""
    from cfi2sframe.copying import write_patched

    source = bytes(range(1, 256)) * 40  # no zero byte: a left-over byte shows
    path = tmp_path / "copy"
    path.write_bytes(source)
    fd = os.open(path, os.O_RDWR)
    try:
        write_patched(fd, None, source, 4000, 6000, [(5000, b"xyz")],
                      lambda data, at, length: None, copied=len(source))
    finally:
        os.close(fd)
    want = source[:4000] + bytes(1000) + b"xyz" + bytes(997)
    assert path.read_bytes() == want


def test_the_rewritten_tail_is_not_written_back_early(tmp_path) -> None:
    """The early copy starts the writeback of whole pages up to ``REWRITTEN_TAIL``
    before the copy's end, not of the end the conversion cuts and writes again (the
    cut waited for those pages' writes in flight): ``sync_file_range(fd, 0, N,
    SYNC_FILE_RANGE_WRITE)`` with N worked out from the input's size, as strace sees
    the command ask it (a real process: the input is mapped)."""
    from tests.conftest import compiled_core, require

    require("strace")
    compiled_core()
    require_path(LIBRARY)
    big = tmp_path / "big.so"
    shutil.copy(LIBRARY, big)
    size = big.stat().st_size
    assert size > 2 << 20
    log = tmp_path / "strace.log"
    subprocess.run(["strace", "-f", "-qq", "-o", str(log), "-e", "trace=sync_file_range",
                    sys.executable, "-m", "cfi2sframe", "-w", str(big), "--emit", "elf",
                    "-o", str(tmp_path / "out")], check=True, capture_output=True)
    asked = [line.split("(", 1)[1].split(")")[0].split(", ")[1:]
             for line in log.read_text().splitlines() if "sync_file_range(" in line]
    ahead = (size - (1 << 20)) // 4096 * 4096
    assert asked == [["0", str(ahead), "SYNC_FILE_RANGE_WRITE"]], asked
    assert (tmp_path / "out").read_bytes() == reference(big)


def test_only_a_regular_file_with_one_name_is_given_as_replaced(tmp_path) -> None:
    """``files._replaced``: the output's present file is handed to the copying thread
    (whose drop of its page cache another name would still read) only where it is a
    regular file with one name, not followed through a link."""
    one = tmp_path / "one"
    one.write_bytes(b"x")
    fd = files._replaced(str(one))
    assert fd is not None and os.path.samestat(os.fstat(fd), one.stat())
    os.close(fd)
    (tmp_path / "link").symlink_to(one)
    assert files._replaced(str(tmp_path / "link")) is None
    assert files._replaced(str(tmp_path / "missing")) is None
    assert files._replaced(str(tmp_path)) is None
    os.link(one, tmp_path / "two")
    assert files._replaced(str(one)) is None
