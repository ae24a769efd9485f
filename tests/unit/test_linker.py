"""The linker asked what it merges: a fake ``ld`` on PATH printing each linker's
``--version`` first line (as GNU ld, gold, LLD and mold print it), the choice that
follows, and a version asked for that the linker cannot merge refused in one line."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from cfi2sframe.arch import get_arch
from cfi2sframe.elf.read import open_elf
from cfi2sframe.errors import Cfi2SframeError
from cfi2sframe.linker import ObjectForm, ask, linker_command, object_form

VERSIONS = {
    # --version first line -> what an object gets by default (gas-sframe-notes.md 6, 10)
    "GNU ld (GNU Binutils for Debian) 2.40": ObjectForm(1, False),
    "GNU ld (GNU Binutils) 2.41": ObjectForm(2, False),
    "GNU ld (GNU Binutils for Debian) 2.44": ObjectForm(2, False),
    "GNU ld (GNU Binutils) 2.45": ObjectForm(2, True),
    "GNU ld (GNU Binutils) 2.45.50.20250801": ObjectForm(2, True),
    "GNU ld (GNU Binutils) 2.46": ObjectForm(3, True),
    "GNU ld (GNU Binutils) 2.39": ObjectForm(2, True),  # knows no SFrame: copies it
    "GNU gold (GNU Binutils for Debian 2.40) 1.16": ObjectForm(2, True),
    "LLD 14.0.6 (compatible with GNU linkers)": ObjectForm(2, True),
    "Debian LLD 19.1.7 (compatible with GNU linkers)": ObjectForm(2, True),
    "mold 2.40.4 (compatible with GNU ld)": ObjectForm(3, True),
}


def _fake_ld(folder: Path, first_line: str | None, name: str = "ld") -> None:
    """An ``ld`` that prints ``first_line`` for --version (None: it fails)."""
    script = folder / name
    body = f"echo '{first_line}'\necho 'Copyright'\n" if first_line else "exit 1\n"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def path_with(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    ask.cache_clear()
    yield tmp_path
    ask.cache_clear()


@pytest.mark.parametrize("line", sorted(VERSIONS))
def test_each_linker_version_gives_its_choice(path_with, line):
    _fake_ld(path_with, line)
    assert object_form("auto", None, get_arch("x86_64")) == VERSIONS[line]


def test_no_ld_or_a_failing_one_writes_the_default(path_with):
    x86 = get_arch("x86_64")
    assert object_form("auto", None, x86) == ObjectForm(2, True)  # none on PATH
    assert object_form("auto", 3, x86) == ObjectForm(3, True)
    ask.cache_clear()
    _fake_ld(path_with, None)
    assert object_form("auto", None, x86) == ObjectForm(2, True)


def test_asked_once_per_process(path_with):
    _fake_ld(path_with, "GNU ld (GNU Binutils) 2.40")
    assert object_form("auto", None, get_arch("x86_64")).version == 1
    _fake_ld(path_with, "GNU ld (GNU Binutils) 2.46")
    assert object_form("auto", None, get_arch("x86_64")).version == 1  # cached


def test_a_cross_target_asks_its_own_linker(path_with):
    assert linker_command("aarch64-linux-gnu-as") == "aarch64-linux-gnu-ld"
    assert linker_command("as") == "ld"
    _fake_ld(path_with, "GNU ld (GNU Binutils) 2.46")
    _fake_ld(path_with, "GNU ld (GNU Binutils) 2.40", "aarch64-linux-gnu-ld")
    assert object_form("auto", None, get_arch("aarch64")).version == 1
    assert object_form("auto", None, get_arch("x86_64")).version == 3


@pytest.mark.parametrize(("line", "asked"), [("GNU ld (GNU Binutils) 2.40", 2),
                                             ("GNU ld (GNU Binutils) 2.40", 3),
                                             ("GNU ld (GNU Binutils) 2.46", 2),
                                             ("GNU ld (GNU Binutils) 2.45", 1)])
def test_a_version_the_linker_cannot_merge_is_refused(path_with, line, asked):
    _fake_ld(path_with, line)
    with pytest.raises(Cfi2SframeError) as caught:
        object_form("auto", asked, get_arch("x86_64"), "foo.o")
    message = str(caught.value)
    assert message.startswith("foo.o: ") and "\n" not in message
    assert f"--sframe-version {asked}" in message and line.split()[-1] in message
    assert "--linker-reads any" in message  # the way out
    assert object_form("any", asked, get_arch("x86_64")) == ObjectForm(asked)


def test_the_version_it_merges_asked_for_explicitly(path_with):
    _fake_ld(path_with, "GNU ld (GNU Binutils) 2.40")
    assert object_form("auto", 1, get_arch("x86_64")) == ObjectForm(1, False)
    assert object_form("v2", 2, get_arch("x86_64")) == ObjectForm(2, True)
    assert object_form("v2-noflag", None, get_arch("x86_64")) == ObjectForm(2, False)


def test_s390x_has_no_v1_or_unflagged_v2(path_with):
    """ABI 4 came with V2 errata 1: a linker reading V1 or V2 without the flag has no
    SFrame for s390x objects."""
    s390x = get_arch("s390x")
    for choice in ("v1", "v2-noflag"):
        with pytest.raises(Cfi2SframeError, match="--linker-reads v2 or v3"):
            object_form(choice, None, s390x)
    assert object_form("v2", None, s390x) == ObjectForm(2, True)


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "frame_pointer.s"


@pytest.mark.parametrize(("line", "version"), [("GNU ld (GNU Binutils) 2.40", 1),
                                               ("GNU ld (GNU Binutils) 2.46", 3),
                                               ("LLD 14.0.6 (compatible with GNU linkers)", 2)])
def test_the_command_writes_what_the_fake_ld_merges(tmp_path, line, version):
    """The command, with only a fake ``ld`` and the real ``as`` on PATH: the object's
    version byte; a raw section stays V2 (no linker reads it)."""
    tools = tmp_path / "bin"
    tools.mkdir()
    _fake_ld(tools, line)
    real_as = subprocess.run(["sh", "-c", "command -v as"], capture_output=True, text=True,
                             check=False).stdout.strip()
    if not real_as:
        pytest.skip("no as")
    (tools / "as").symlink_to(real_as)
    env = {**os.environ, "PATH": str(tools)}
    for output, expected in (("f.o", version), ("f.sframe", 2)):
        proc = subprocess.run([sys.executable, "-m", "cfi2sframe", str(EXAMPLE), "-o", output],
                              cwd=tmp_path, env=env, capture_output=True, text=True,
                              check=False)
        assert proc.returncode == 0, proc.stderr
        data = (tmp_path / output).read_bytes()
        if output.endswith(".o"):
            section = open_elf(data, "object").section(".sframe")
            assert section is not None
            data = data[section.offset:section.offset + section.size]
        assert data[:2] == b"\xe2\xde" and data[2] == expected, output
