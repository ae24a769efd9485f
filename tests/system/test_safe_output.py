"""Files are complete or absent: real failures injected at each step.

- the assembler crashes (a real process killed by SIGSEGV);
- the disk is full: writes fail with EFBIG under RLIMIT_FSIZE (SIGXFSZ ignored),
  the kernel's own refusal, for a regular output file and for --in-place;
- cfi2sframe is killed with SIGKILL at many points of a long run;
  (found here: LIEF wrote --emit elf's intermediate file and, on a full disk,
  left it truncated without an error; it now builds in memory.)
- --in-place on a file whose folder cannot be written (when not root).

Each time: exit status and one error line where there is a process left to
report, no output file (or the complete one), no temporary left behind, and the
input unchanged.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import require, require_path, small_program

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LIBRARY = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"


def run(*args: str, cwd: Path, limit: int | None = None,
        wrapper: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """``cfi2sframe ARGS`` in ``cwd`` (under ``wrapper``, a command that runs it: strace,
    unshare), files limited to ``limit`` bytes; never an internal error."""
    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    # No bytecode caching under a size limit: Python would leave truncated .pyc files.
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run([*wrapper, sys.executable, "-m", "cfi2sframe", *args], cwd=cwd,
                          env=env,
                          capture_output=True, text=True, check=False,
                          preexec_fn=small_files if limit is not None else None)
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    return proc


def leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.startswith(".cfi2sframe-")]


def test_assembler_crash_leaves_no_output(tmp_path):
    require("as")
    crash = tmp_path / "crash.sh"
    crash.write_text("#!/bin/sh\nkill -SEGV $$\n")
    crash.chmod(0o755)
    shutil.copy(EXAMPLES / "frame_pointer.s", tmp_path / "f.s")
    proc = run("f.s", "-o", "out.sframe", "--assembler", str(crash), cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1].startswith("f.s: error: assembler")
    assert not (tmp_path / "out.sframe").exists() and not leftovers(tmp_path)


def test_full_disk_leaves_no_output(tmp_path):
    require("as")
    shutil.copy(EXAMPLES / "frame_pointer.s", tmp_path / "f.s")
    proc = run("f.s", "-o", "out.o", cwd=tmp_path, limit=64)  # objects are > 64 bytes
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.count("\n") == 1 and "error" in proc.stderr
    assert not (tmp_path / "out.o").exists() and not leftovers(tmp_path)


def test_in_place_that_cannot_be_written_leaves_the_input(tmp_path):
    require("gcc")
    (tmp_path / "m.c").write_text("int main(void) { return 0; }\n")
    exe = tmp_path / "m"
    subprocess.run(["gcc", "-O2", str(tmp_path / "m.c"), "-o", str(exe)], check=True)
    before = exe.read_bytes()
    # The new file is larger than the input: a size limit just above the input's
    # size lets the input be read but not the new file be written.
    proc = run(str(exe), "--in-place", "-w", cwd=tmp_path, limit=len(before) + 16)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert exe.read_bytes() == before and not leftovers(tmp_path)
    if os.geteuid() != 0:  # root writes anywhere; permissions only bind others
        tmp_path.chmod(0o555)
        try:
            proc = run(str(exe), "--in-place", cwd=tmp_path)
            assert proc.returncode == 1 and exe.read_bytes() == before
        finally:
            tmp_path.chmod(0o755)


@pytest.mark.parametrize("fraction", [0.2, 0.4, 0.6, 0.8, 0.95])
def test_kill_at_any_moment_leaves_complete_or_no_output(tmp_path, fraction):
    require_path(LIBRARY)
    start = time.perf_counter()
    full = run(LIBRARY, "-o", "whole.sframe", cwd=tmp_path)
    assert full.returncode == 0, full.stderr
    duration = time.perf_counter() - start
    expected = (tmp_path / "whole.sframe").read_bytes()
    proc = subprocess.Popen([sys.executable, "-m", "cfi2sframe", LIBRARY, "-o", "out.sframe"],
                            cwd=tmp_path, stderr=subprocess.DEVNULL)
    time.sleep(duration * fraction)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    out = tmp_path / "out.sframe"
    assert not out.exists() or out.read_bytes() == expected
    assert not leftovers(tmp_path)


def test_rewritten_elf_files_keep_the_input_permission_bits(tmp_path: Path) -> None:
    """--emit elf/obj to a new file: the input's permission bits, less the umask (as
    objcopy does); the rewritten program runs."""
    require("gcc", "as")
    prog = small_program(tmp_path)
    obj = tmp_path / "f.o"
    subprocess.run(["as", str(EXAMPLES / "frame_pointer.s"), "-o", str(obj)], check=True)
    umask = os.umask(0)
    os.umask(umask)
    for path, mode, emit in ((prog, 0o750, "elf"), (obj, 0o640, "obj")):
        path.chmod(mode)
        out = tmp_path / f"{path.name}.new"
        proc = run(str(path), "--emit", emit, "-o", str(out), "-w", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert out.stat().st_mode & 0o7777 == mode & ~umask
    assert subprocess.run([str(tmp_path / "prog.new"), "x"]).returncode == 0


def test_a_large_file_rewritten_in_place_from_its_map(tmp_path: Path) -> None:
    """A library over 1 MiB with one name is read through a memory map for --in-place
    (its rewrite is a new inode, so the map never changes under it); with two names it
    is read whole and rewritten in its own inode (append-only, so its layout is its
    own).  The first gives the bytes --emit elf writes, both verify, and the mapped
    old inode is never changed."""
    require_path(LIBRARY)
    source = tmp_path / "lib.so"
    shutil.copy(LIBRARY, source)
    assert source.stat().st_size > (1 << 20)
    want = tmp_path / "want.so"
    assert run("-q", str(source), "--emit", "elf", "-o", str(want), cwd=tmp_path)\
        .returncode == 0
    one = tmp_path / "one.so"
    shutil.copy(source, one)
    kept = tmp_path / "kept.so"
    os.link(one, kept)  # a second name: read whole, rewritten in its own inode
    alone = tmp_path / "alone.so"
    shutil.copy(source, alone)
    held = os.open(alone, os.O_RDONLY)  # the old inode, as the map holds it
    try:
        for path in (alone, one):
            proc = run("-q", "--in-place", str(path), cwd=tmp_path)
            assert proc.returncode == 0, proc.stderr
        assert alone.read_bytes() == want.read_bytes()
        assert one.read_bytes() == kept.read_bytes() != source.read_bytes()
        for path in (alone, one):
            assert run("verify", str(path), cwd=tmp_path).returncode == 0, path
        assert os.pread(held, 1 << 16, 0) == source.read_bytes()[:1 << 16]  # old inode
    finally:
        os.close(held)
