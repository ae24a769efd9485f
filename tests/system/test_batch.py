"""Runs over many files (issue 15): trees, lists, -j, Dask, the journal, --resume,
--timeout and in-place conversion of a tree, on real files of this machine.

Expected values come from readelf (section sizes) and from the files themselves
(a truncated ELF file is bad input, a text file is not an ELF file, a program
still prints what it printed before); never from an earlier run of ours.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import readelf_section, require, require_module, require_path

LIB = Path("/usr/lib/x86_64-linux-gnu")
# The file that times out: with the pure-Python core, stats converts it twice (about
# 10 s of work; the compiled core's count takes under a second, no sure timeout).
LLVM = LIB / "libLLVM-14.so.1"
VOLATILE = ("seconds", "max_rss_kib")


def cli(*args: str, cwd: Path, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cfi2sframe", *args], cwd=cwd,
                          capture_output=True, text=True, **kw)


def journal(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def stable(records: list[dict]) -> dict[str, dict]:
    return {r["path"]: {k: v for k, v in r.items() if k not in VOLATILE} for r in records}


def readelf_size(path: Path, section: str) -> int:
    """A section's size as readelf -SW prints it (0 when absent)."""
    out = subprocess.run(["readelf", "-SW", str(path)], capture_output=True, text=True).stdout
    for line in out.splitlines():
        fields = line.replace("[ ", "[").split()
        if len(fields) > 5 and fields[1] == section:
            return int(fields[5], 16)
    return 0


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    """Real files of every kind a tree run meets."""
    require("gcc", "as", "readelf")
    require_path(LIB / "libz.so.1", "/usr/bin/cat")
    root = tmp_path / "tree"
    (root / "lib").mkdir(parents=True)
    (root / "bin").mkdir()
    shutil.copy(LIB / "libz.so.1", root / "lib" / "libz.so.1")
    os.symlink("libz.so.1", root / "lib" / "libz.so")  # not followed: libz once
    shutil.copy("/usr/bin/cat", root / "bin" / "cat")
    src = tmp_path / "hello.c"
    src.write_text("#include <stdio.h>\nint main(void) { puts(\"hi\"); return 0; }\n")
    subprocess.run(["gcc", "-Wa,--gsframe", str(src), "-o", str(root / "bin" / "gsframe")],
                   check=True)
    empty = tmp_path / "empty.s"
    empty.write_text("\t.text\nf:\n\tret\n")
    subprocess.run(["as", str(empty), "-o", str(root / "lib" / "nocfi.o")], check=True)
    data = (LIB / "libz.so.1").read_bytes()
    (root / "lib" / "truncated.so").write_bytes(data[:3000])
    (root / "bin" / "README").write_text("not an ELF file\n")
    return root


def test_j1_j2_and_dask_give_the_same_records(tree: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    require("readelf")
    require_path(LLVM)  # the slow file; installed with llvm-14
    monkeypatch.setenv("CFI2SFRAME_CORE", "python")  # (the runs and dask's workers)
    listing = tmp_path / "list"
    listing.write_text(f"{LLVM}\n")
    runs = {}
    outputs = {}
    for name, extra in (("j1", ["-j", "1"]), ("j2", ["-j", "2"])):
        jsonl = tmp_path / f"{name}.jsonl"
        proc = cli("stats", "-r", str(tree), "--files-from", str(listing), "--timeout", "1.5",
                   "--jsonl", str(jsonl), *extra, cwd=tmp_path)
        assert proc.returncode == 1, proc.stderr  # the truncated file and the timeout
        runs[name] = stable(journal(jsonl))
        outputs[name] = proc.stdout.splitlines()[:-1]  # all but the seconds of work
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, host="127.0.0.1",
                      dashboard_address=None, processes=True) as cluster:
        jsonl = tmp_path / "dask.jsonl"
        proc = cli("stats", "-r", str(tree), "--files-from", str(listing), "--timeout", "1.5",
                   "--jsonl", str(jsonl), "--dask", cluster.scheduler_address, cwd=tmp_path)
        assert proc.returncode == 1, proc.stderr
        runs["dask"] = stable(journal(jsonl))
        outputs["dask"] = proc.stdout.splitlines()[:-1]
    assert runs["j1"] == runs["j2"] == runs["dask"]
    assert outputs["j1"] == outputs["j2"] == outputs["dask"]
    records = runs["j1"]
    # Symbolic links are not followed and non-ELF files are skipped silently.
    assert sorted(records) == sorted([str(tree / "bin" / "cat"), str(tree / "bin" / "gsframe"),
                                      str(tree / "lib" / "libz.so.1"),
                                      str(tree / "lib" / "nocfi.o"),
                                      str(tree / "lib" / "truncated.so"), str(LLVM)])
    status = {Path(p).name: r["status"] for p, r in records.items()}
    # GNU ld 2.40 gave the gsframe program's .plt.got no SFrame FDE: a gap (below).
    assert status == {"cat": "ok", "gsframe": "mismatch", "libz.so.1": "ok",
                      "nocfi.o": "no-cfi", "truncated.so": "error",
                      "libLLVM-14.so.1": "timeout"}
    assert records[str(tree / "lib" / "truncated.so")]["error"].startswith(
        f"{tree / 'lib' / 'truncated.so'}: error: ")
    for path in ("bin/cat", "lib/libz.so.1", "bin/gsframe"):
        record = records[str(tree / path)]
        for section, key in ((".eh_frame", "eh_frame_bytes"),
                             (".eh_frame_hdr", "eh_frame_hdr_bytes")):
            assert record[key] == readelf_size(tree / path, section), (path, key)
        assert record["sframe_v2_bytes"] > 0 and record["sframe_v3_bytes"] > 0
    # The program from gcc -Wa,--gsframe carries GNU ld's V1 .sframe, checked as verify does.
    made_by_ld = records[str(tree / "bin" / "gsframe")]
    assert made_by_ld["sframe_bytes_in_file"] == readelf_size(tree / "bin" / "gsframe",
                                                              ".sframe")
    plt_got = readelf_section(tree / "bin" / "gsframe", ".plt.got")[0]
    assert made_by_ld["verify"]["ok"] is False and made_by_ld["verify"]["mismatches"] == 0
    assert made_by_ld["verify"]["uncovered"] == 1
    assert made_by_ld["verify"]["first_uncovered"] == {"name": f"pc+{plt_got:#x}",
                                                       "section": "", "address": plt_got}
    # The stable order: one line per file in input order (tree, then the list).
    names = [line.split(":")[0] for line in outputs["j1"] if line.startswith("/")]
    assert names == [p for p in sorted(records)  # errors go to standard error
                     if records[p]["status"] not in ("error", "timeout")]


def test_resume_after_sigkill_records_every_file_once(tmp_path: Path) -> None:
    libs = sorted(p for p in LIB.glob("lib*.so.*") if p.is_file() and not p.is_symlink()
                  and 100_000 < p.stat().st_size < 2_000_000)[:40]
    assert len(libs) >= 20
    listing = tmp_path / "list"
    listing.write_bytes(b"\0".join(os.fsencode(p) for p in libs))
    jsonl = tmp_path / "out.jsonl"
    args = [sys.executable, "-m", "cfi2sframe", "stats", "--files-from", str(listing), "-0",
            "-j", "2", "--jsonl", str(jsonl), "-q"]
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not jsonl.exists() or
                                           jsonl.read_text().count("\n") < 4):
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)  # the run and its workers, mid-batch
    proc.wait()
    before = jsonl.read_text().count("\n")
    assert 4 <= before < len(libs)
    proc2 = cli("stats", "--files-from", str(listing), "-0", "-j", "2", "--jsonl", str(jsonl),
                "--resume", "--json", cwd=tmp_path)
    assert proc2.returncode == 0, proc2.stderr
    counts = Counter(r["path"] for r in journal(jsonl))
    assert counts == Counter(str(p) for p in libs)  # every file once, whole lines only
    total = json.loads(proc2.stdout)["total"]
    assert total["files"] == len(libs)
    assert total["eh_frame_bytes"] == sum(readelf_size(p, ".eh_frame") for p in libs)


def test_in_place_tree_runs_the_same_and_verifies(tree: Path, tmp_path: Path) -> None:
    require("gcc")
    src = tmp_path / "usez.c"
    src.write_text("#include <stdio.h>\n#include <zlib.h>\n"
                   "int main(void) { printf(\"%s %lu\\n\", zlibVersion(), "
                   "crc32(0, (const unsigned char *)\"abc\", 3)); return 0; }\n")
    program = tree / "bin" / "usez"
    subprocess.run(["gcc", str(src), "-o", str(program), "-L", str(tree / "lib"), "-l:libz.so.1"],
                   check=True)
    env = {**os.environ, "LD_LIBRARY_PATH": str(tree / "lib")}
    commands = [[str(program)], [str(tree / "bin" / "cat"), str(src)],
                [str(tree / "bin" / "gsframe")]]
    before = [subprocess.run(c, capture_output=True, env=env).stdout for c in commands]
    (tree / "lib" / "truncated.so").unlink()  # bad input: its own test
    proc = cli("--in-place", "-r", str(tree), "-j", "2", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    records = {Path(r["path"]).name: r for r in json.loads(proc.stdout)["files"]}
    assert {n: r["status"] for n, r in records.items()} == {
        "cat": "ok", "usez": "ok", "libz.so.1": "ok", "gsframe": "has-sframe",
        "nocfi.o": "no-cfi"}
    assert readelf_size(tree / "lib" / "libz.so.1", ".sframe") == \
        records["libz.so.1"]["sframe_v2_bytes"]
    assert [subprocess.run(c, capture_output=True, env=env).stdout for c in commands] == before
    check = cli("verify", "-r", str(tree), "--json", cwd=tmp_path)
    assert check.returncode == 1, check.stdout + check.stderr  # gsframe's gap: kept
    verified = {Path(r["path"]).name: r["verify"] for r in json.loads(check.stdout)["files"]}
    assert all(verified[n]["ok"] and verified[n]["mismatches"] == verified[n]["uncovered"] == 0
               for n in ("cat", "usez", "libz.so.1"))
    assert verified["gsframe"]["mismatches"] == 0 and verified["gsframe"]["uncovered"] == 1


def test_usage_and_input_errors(tmp_path: Path) -> None:
    proc = cli("stats", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 1 and re.fullmatch(
        rf"{re.escape(str(tmp_path))}: error: is a folder \(use -r.*\)\n", proc.stderr)
    proc = cli("stats", "-r", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 1 and "no input files" in proc.stderr
    proc = cli("stats", "/usr/bin/cat", "--resume", cwd=tmp_path)
    assert proc.returncode == 2 and "--resume needs --jsonl" in proc.stderr
    proc = cli("/usr/bin/cat", "/usr/bin/ls", "-o", "x", cwd=tmp_path)
    assert proc.returncode == 2 and "--in-place only" in proc.stderr
    proc = cli("stats", "-j", "0", "/usr/bin/cat", cwd=tmp_path)
    assert proc.returncode == 2 and "not a number of jobs" in proc.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"path": "x"}\nnot json\n')
    proc = cli("stats", "/usr/bin/cat", "--jsonl", str(bad), "--resume", cwd=tmp_path)
    assert proc.returncode == 1 and proc.stderr == (
        f"{bad}:2: error: not a JSON record (is this a cfi2sframe --jsonl file?)\n")


def test_plot_draws_every_file(tree: Path, tmp_path: Path) -> None:
    require_module("matplotlib")
    png = tmp_path / "sizes.png"
    proc = cli("stats", "-r", str(tree), "--plot", str(png), "--json", cwd=tmp_path)
    records = [r for r in json.loads(proc.stdout)["files"] if r["status"] == "ok"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from cfi2sframe.batch.plot import plot_records

    figure = plot_records(records, str(tmp_path / "again.png"))
    sizes = figure.axes[0]
    drawn = {c.get_gid(): c.get_offsets().tolist() for c in sizes.collections}
    for version in (2, 3):
        assert sorted(map(tuple, drawn[f"v{version}"])) == sorted(
            (readelf_size(Path(r["path"]), ".eh_frame") +
             readelf_size(Path(r["path"]), ".eh_frame_hdr"), r[f"sframe_v{version}_bytes"])
            for r in records)


def test_full_disk_under_the_journal_then_resume(tmp_path: Path) -> None:
    """A journal that cannot grow stops the run with one error line; what it holds is
    whole lines and at most one partial line, which --resume cuts off."""
    import resource

    libs = [str(p) for p in sorted(LIB.glob("libz.so.*"))[:1] + sorted(LIB.glob("libm.so.*"))[:1]
            + [Path("/usr/bin/cat"), Path("/usr/bin/ls"), Path("/usr/bin/sort")]]
    assert len(libs) == 5, libs  # libz, libm (zlib1g, libc6) and three coreutils
    jsonl = tmp_path / "out.jsonl"

    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1500, 1500))  # a record and a half

    proc = subprocess.run([sys.executable, "-m", "cfi2sframe", "stats", *libs, "-j", "1",
                           "--jsonl", str(jsonl), "-q"], cwd=tmp_path, capture_output=True,
                          text=True, preexec_fn=small_files,
                          env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.count("\n") == 1 and "cannot write the journal" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = cli("stats", *libs, "-j", "1", "--jsonl", str(jsonl), "--resume", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert Counter(r["path"] for r in journal(jsonl)) == Counter(libs)


def test_a_file_with_two_names_is_converted_once_by_its_first(tmp_path: Path) -> None:
    # Two names of one inode among files that each fill a chunk: with -j 2 both
    # names go to one worker, the first name (in the walk's order) is rewritten and
    # the second found converted, as with -j 1; readelf says the one file has .sframe.
    require("readelf")
    require_path(LIB / "libz.so.1")
    root = tmp_path / "tree"
    root.mkdir()
    for name in ("b1", "b2", "b3", "b4"):
        shutil.copy(LIB / "libz.so.1", root / name)
    os.link(root / "b2", root / "b4x")  # the walk's order: b1 b2 b3 b4 b4x
    for jobs in ("2", "1"):
        copy = tmp_path / f"j{jobs}"
        shutil.copytree(root, copy)  # (copytree keeps no hard link: make it again)
        (copy / "b4x").unlink()
        os.link(copy / "b2", copy / "b4x")
        proc = cli("--in-place", "-r", str(copy), "-j", jobs, "--json", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        statuses = {Path(r["path"]).name: r["status"] for r in json.loads(proc.stdout)["files"]}
        assert statuses == {"b1": "ok", "b2": "ok", "b3": "ok", "b4": "ok",
                            "b4x": "has-sframe"}, jobs
        assert os.path.samefile(copy / "b2", copy / "b4x")
        assert readelf_size(copy / "b4x", ".sframe") > 0
