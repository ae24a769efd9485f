"""``spawn`` runs a tool as ``subprocess`` does for the conversion's runs: the same
output, messages, exit status and start-up error, with ``subprocess`` itself as the
oracle; a timeout kills the child."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from cfi2sframe.spawn import Child, TimedOut, on_path, run

SCRIPTS = [
    "printf out; printf err >&2; exit 3",
    # more than a pipe holds on both streams at once: read together, never stuck
    "head -c 300000 /dev/zero; head -c 200000 /dev/zero >&2",
    "printf 'a\\r\\nb'; kill -9 $$",  # killed: -9
    "cat; printf done",  # standard input from /dev/null where asked
    # the signals the child ignores and blocks (SIGPIPE and SIGXFSZ back to their
    # defaults); glibc's posix_spawn ignores its two internal ones, 32 and 33, which
    # a program's C library sets up for itself: left out
    "grep -E '^Sig(Ign|Blk)' /proc/self/status",
]


def _without_glibc_internal(out: bytes) -> bytes:
    lines = []
    for line in out.split(b"\n"):
        if line.startswith(b"SigIgn:"):
            line = b"SigIgn:%x" % (int(line.split()[1], 16) & ~(3 << 31))
        lines.append(line)
    return b"\n".join(lines)


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_same_as_subprocess(script: str) -> None:
    argv = ["sh", "-c", script]
    oracle = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL)
    expected = oracle.communicate()
    child = Child(argv, no_input=True)
    out, err = child.communicate()
    assert (_without_glibc_internal(out), err) == (_without_glibc_internal(expected[0]),
                                                   expected[1])
    assert child.returncode == oracle.returncode
    assert child.poll() == oracle.returncode


def test_a_program_that_cannot_start_is_the_same_error() -> None:
    for name in ("cfi2sframe-no-such-tool", "/etc/passwd"):
        with pytest.raises(OSError) as oracle:
            subprocess.Popen([name, "--version"], stdout=subprocess.PIPE)
        with pytest.raises(OSError) as ours:
            Child([name, "--version"])
        assert type(ours.value) is type(oracle.value)
        assert str(ours.value) == str(oracle.value)


def test_killed_while_running_and_a_timeout() -> None:
    child = Child(["sleep", "30"], no_input=True)
    assert child.poll() is None
    child.kill()
    assert child.communicate() == (b"", b"") and child.returncode == -9
    started = time.monotonic()
    with pytest.raises(TimedOut):
        run(["sh", "-c", "printf x; exec sleep 30"], 0.2)
    assert time.monotonic() - started < 10
    assert run(["sh", "-c", "printf 'GNU x'; exit 0"], 30) == (0, b"GNU x")


def test_no_descriptor_is_left_open() -> None:
    before = set(os.listdir("/proc/self/fd"))
    run(["true"], 30)
    child = Child(["sleep", "30"])
    child.kill()
    child.communicate()
    assert set(os.listdir("/proc/self/fd")) == before


def test_on_path_answers_as_shutil_which(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                         ) -> None:
    """``on_path`` (the look for the assembler, without importing ``shutil``) says
    what ``shutil.which(name) is not None`` says: a program on ``PATH``, one missing,
    a file not executable, a folder by the name, a path given with its folder, the
    current folder as ``PATH``'s empty entry, ``PATH`` empty and unset."""
    import shutil

    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "tool").write_text("#!/bin/sh\n")
    (tmp_path / "bin" / "tool").chmod(0o755)
    (tmp_path / "bin" / "plain").write_text("")
    (tmp_path / "bin" / "plain").chmod(0o644)
    (tmp_path / "bin" / "folder").mkdir()
    (tmp_path / "here").write_text("#!/bin/sh\n")
    (tmp_path / "here").chmod(0o755)
    monkeypatch.chdir(tmp_path)
    names = ["tool", "plain", "folder", "nosuch", "sh", "here", str(tmp_path / "bin" / "tool"),
             "bin/tool", "bin/plain", "bin/folder", "./here", "/nonexistent/tool"]
    paths: list[str | None] = [f"{tmp_path / 'bin'}:/bin", f"/nonexistent:{tmp_path / 'bin'}",
                               f"{tmp_path / 'bin'}::/bin", "", None]
    answers = []
    for path in paths:
        if path is None:
            monkeypatch.delenv("PATH", raising=False)
        else:
            monkeypatch.setenv("PATH", path)
        for name in names:
            assert on_path(name) == (shutil.which(name) is not None), (path, name)
            answers.append(on_path(name))
    assert True in answers and False in answers  # (both answers reached)
