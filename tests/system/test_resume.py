"""``--resume`` of in-place tree conversions (issue 39, item 6): what it keeps and what
it redoes, on inputs built to fool it.

Failures are made by construction (a disk too small for one output, a run killed by
strace at its first journal write), not by files the default options refuse.  What
a file holds comes from readelf (is there an ``.sframe``, which SFrame version its
preamble names: the spec's byte 2) and from the files' own identities; never from an
earlier run of ours.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import require, require_path
from tests.system.test_batch import LIB, cli, journal

LIBZ = LIB / "libz.so.1"
CAT = Path("/usr/bin/cat")


def sframe_version(path: Path) -> int | None:
    """The version byte of the file's ``.sframe`` preamble (readelf finds the section);
    None when it has none."""
    out = subprocess.run(["readelf", "-SW", str(path)], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        fields = line.replace("[ ", "[").split()
        if len(fields) > 5 and fields[1] == ".sframe":
            with open(path, "rb") as handle:
                handle.seek(int(fields[4], 16))
                preamble = handle.read(3)
            assert preamble[:2] in (b"\xe2\xde", b"\xde\xe2"), preamble  # the magic
            return preamble[2]
    return None


def statuses(jsonl: Path) -> dict[str, str]:
    """The last record's status of each file (as --resume reads the journal)."""
    return {Path(r["path"]).name: r["status"] for r in journal(jsonl)}


def run_killed_at_first_record(folder: Path, jsonl: Path, *args: str) -> None:
    """``--in-place -r folder --jsonl jsonl -j 1 ARGS`` killed (SIGKILL, by strace) as the
    parent starts writing the first record: the largest file is converted and renamed
    over its name, and the journal holds nothing of it."""
    require("strace")
    proc = subprocess.run(
        ["strace", "-f", "-qq", "-o", os.devnull, "-P", str(jsonl), "-e", "trace=write",
         "-e", "inject=write:signal=SIGKILL:when=1", sys.executable, "-m", "cfi2sframe",
         "--in-place", "-r", str(folder), "--jsonl", str(jsonl), "-j", "1", "-q", *args],
        capture_output=True, text=True, check=False)
    assert proc.returncode == -signal.SIGKILL or proc.returncode == 128 + signal.SIGKILL, \
        (proc.returncode, proc.stderr)
    assert jsonl.read_bytes() == b""


@pytest.fixture()
def objects(tmp_path: Path) -> dict[str, Path]:
    """A relocatable object and a static library of it, from gcc and ar."""
    require("gcc", "ar")
    source = tmp_path / "f.c"
    source.write_text("int g(int x);\nint f(int x) { return g(x) * 3 + 1; }\n"
                      "int h(int *p, int n) { int s = 0; for (int i = 0; i < n; i++) "
                      "s += f(p[i]); return s; }\n")
    obj = tmp_path / "f.o"
    subprocess.run(["gcc", "-O2", "-c", str(source), "-o", str(obj)], check=True)
    lib = tmp_path / "libf.a"
    subprocess.run(["ar", "rcs", str(lib), str(obj)], check=True)
    return {"object": obj, "archive": lib}


@pytest.mark.parametrize("kind", ["linked", "object", "archive"])
def test_converted_but_not_recorded_is_ok_on_resume(tmp_path: Path, objects: dict[str, Path],
                                                    kind: str) -> None:
    """A run killed between a file's rename and its record left the file converted: the
    resumed run records it ok (as the killed run would have), not has-sframe, and
    leaves it as it is; a resumed run with other options does not take it for its
    own."""
    require("readelf")
    require_path(LIBZ)
    source = {"linked": LIBZ, **objects}[kind]
    # --linker-reads any: objects get V2 whatever the ld on PATH merges (tests/unit/
    # test_linker.py is about that choice; this test is about resuming)
    extra = [] if kind == "linked" else ["--objects", "--linker-reads", "any"]
    tree = tmp_path / "tree"
    tree.mkdir()
    name = "libz.so.1" if kind == "linked" else source.name
    shutil.copy(source, tree / name)
    jsonl = tmp_path / "out.jsonl"
    run_killed_at_first_record(tree, jsonl, *extra)
    converted = (tree / name).read_bytes()
    assert converted != source.read_bytes()
    member = tmp_path / "member.o"
    if kind == "archive":  # the member got the section
        member.write_bytes(subprocess.run(["ar", "p", str(tree / name), "f.o"],
                                          capture_output=True, check=True).stdout)
    assert sframe_version(member if kind == "archive" else tree / name) == 2

    proc = cli("--in-place", "-r", str(tree), "--jsonl", str(jsonl), "--resume", *extra,
               cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert statuses(jsonl) == {name: "ok"}
    assert (tree / name).read_bytes() == converted

    # Under other options the file is not what this conversion writes: kept.
    again = tmp_path / "again.jsonl"
    proc = cli("--in-place", "-r", str(tree), "--jsonl", str(again), "--resume",
               "--sframe-version", "3", *extra, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert statuses(again) == {name: "nothing-to-describe" if kind == "archive"
                               else "has-sframe"}
    assert (tree / name).read_bytes() == converted


def test_sframe_of_another_tool_is_not_taken_for_ours(tmp_path: Path) -> None:
    """GNU ld's .sframe (gcc -Wa,--gsframe) with no record: has-sframe on resume, as on
    a fresh run, and the file is left alone."""
    require("gcc", "readelf")
    tree = tmp_path / "tree"
    tree.mkdir()
    source = tmp_path / "hello.c"
    source.write_text("#include <stdio.h>\nint main(void) { puts(\"hi\"); return 0; }\n")
    program = tree / "gsframe"
    subprocess.run(["gcc", "-Wa,--gsframe", str(source), "-o", str(program)], check=True)
    assert sframe_version(program) is not None
    before = program.read_bytes()
    proc = cli("--in-place", "-r", str(tree), "--jsonl", str(tmp_path / "j"), "--resume",
               cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert statuses(tmp_path / "j") == {"gsframe": "has-sframe"}
    assert program.read_bytes() == before


def test_failed_files_are_redone_with_the_same_options(tmp_path: Path) -> None:
    """A file whose conversion failed (here the disk could not take its new copy:
    writes beyond 80 KB fail with EFBIG) is redone by --resume with the very same
    options and file; the file that was converted is kept, recorded once."""
    import resource

    require("readelf")
    require_path(LIBZ, CAT)
    tree = tmp_path / "tree"
    tree.mkdir()
    shutil.copy(LIBZ, tree / "libz.so.1")  # 120 KB: its copy cannot be written
    shutil.copy(CAT, tree / "cat")  # 44 KB: converted
    assert (tree / "libz.so.1").stat().st_size > 80_000 > (tree / "cat").stat().st_size + 8192
    jsonl = tmp_path / "out.jsonl"

    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (80_000, 80_000))

    proc = subprocess.run([sys.executable, "-m", "cfi2sframe", "--in-place", "-r", str(tree),
                           "-j", "1", "--jsonl", str(jsonl), "-q"], cwd=tmp_path,
                          capture_output=True, text=True, preexec_fn=small_files,
                          env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
    assert proc.returncode == 1, proc.stderr
    assert statuses(jsonl) == {"libz.so.1": "error", "cat": "ok"}
    assert "cannot write output" in proc.stderr
    assert sframe_version(tree / "libz.so.1") is None
    cat_before = os.stat(tree / "cat")

    proc = cli("--in-place", "-r", str(tree), "-j", "1", "--jsonl", str(jsonl), "--resume",
               cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert statuses(jsonl) == {"libz.so.1": "ok", "cat": "ok"}
    assert sframe_version(tree / "libz.so.1") == 2
    assert Counter(Path(r["path"]).name for r in journal(jsonl)) == {"libz.so.1": 2, "cat": 1}
    assert os.stat(tree / "cat").st_ctime_ns == cat_before.st_ctime_ns  # not touched


def test_changed_options_redo_the_files_they_change(tmp_path: Path,
                                                    objects: dict[str, Path]) -> None:
    """Each option that changes a file's outcome redoes it: --objects converts the
    object a default run kept; a V3 run keeps the V2 files (has-sframe, as a fresh V3
    run would); with --replace it rewrites them in V3."""
    require("readelf")
    require_path(LIBZ)
    tree = tmp_path / "tree"
    tree.mkdir()
    shutil.copy(LIBZ, tree / "libz.so.1")
    shutil.copy(objects["object"], tree / "f.o")
    jsonl = tmp_path / "out.jsonl"

    def resume(*args: str) -> dict[str, str]:
        proc = cli("--in-place", "-r", str(tree), "--jsonl", str(jsonl), "--resume",
                   "--linker-reads", "any", *args, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        return statuses(jsonl)

    assert resume() == {"libz.so.1": "ok", "f.o": "object-kept"}
    assert sframe_version(tree / "f.o") is None
    assert resume("--objects") == {"libz.so.1": "ok", "f.o": "ok"}  # libz: ours, current
    assert sframe_version(tree / "f.o") == 2
    assert resume("--objects", "--sframe-version", "3") == {"libz.so.1": "has-sframe",
                                                             "f.o": "has-sframe"}
    assert resume("--objects", "--sframe-version", "3", "--replace") == {"libz.so.1": "ok",
                                                                          "f.o": "ok"}
    assert sframe_version(tree / "libz.so.1") == sframe_version(tree / "f.o") == 3
    lines = len(journal(jsonl))
    assert resume("--objects", "--sframe-version", "3", "--replace") == {"libz.so.1": "ok",
                                                                          "f.o": "ok"}
    assert len(journal(jsonl)) == lines  # the same options again: nothing redone


def test_tree_changed_between_runs(tmp_path: Path) -> None:
    """A file replaced by an unconverted one of the converted file's size and mtime
    (padded, dated as the record says) is converted; a file added is converted; a
    file removed is no longer counted."""
    require("readelf")
    require_path(LIBZ, CAT)
    tree = tmp_path / "tree"
    tree.mkdir()
    shutil.copy(LIBZ, tree / "libz.so.1")
    shutil.copy(CAT, tree / "cat")
    jsonl = tmp_path / "out.jsonl"
    proc = cli("--in-place", "-r", str(tree), "--jsonl", str(jsonl), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    converted = os.stat(tree / "libz.so.1")
    original = LIBZ.read_bytes()
    assert converted.st_size > len(original)
    impostor = tmp_path / "impostor"  # an ELF file is read by its headers: the zeros stay
    impostor.write_bytes(original + bytes(converted.st_size - len(original)))
    os.utime(impostor, ns=(converted.st_atime_ns, converted.st_mtime_ns))
    os.replace(impostor, tree / "libz.so.1")
    assert sframe_version(tree / "libz.so.1") is None
    (tree / "cat").unlink()
    shutil.copy(CAT, tree / "cat2")

    proc = cli("--in-place", "-r", str(tree), "--jsonl", str(jsonl), "--resume", "--json",
               cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    import json

    shown = {Path(r["path"]).name: r["status"] for r in json.loads(proc.stdout)["files"]}
    assert shown == {"libz.so.1": "ok", "cat2": "ok"}
    assert sframe_version(tree / "libz.so.1") == 2 and sframe_version(tree / "cat2") == 2
