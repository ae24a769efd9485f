"""Hostile input and the file system (issue 16): bounded time and memory on
decompression bombs and zero runs, links kept by --in-place, and nothing lost when
the process is killed at a write, the disk is full, or the input changes.

Oracles: readelf (the bomb's one FDE), the same CFI assembled without the padding
(what the output must equal), the kernel (strace kills the process at an exact
system call), and the programs themselves (they still run).
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cfi2sframe.elf.read import PT_LOAD, open_elf
from cfi2sframe.errors import Cfi2SframeError
from tests.conftest import require, unavailable
from tests.system.test_safe_output import run as cli

BOMB_ZEROS = 300_000_000
FUNCTION = ("\t.text\n\t.globl f\n\t.type f, @function\nf:\n\t.cfi_startproc\n"
            "\tpushq %rbp\n\t.cfi_def_cfa_offset 16\n\tpopq %rbp\n\t.cfi_def_cfa_offset 8\n"
            "\tret\n\t.cfi_endproc\n")


def measured(*args: str, cwd: Path) -> tuple[subprocess.CompletedProcess, float, int]:
    """Run cfi2sframe; its wall seconds and peak RSS (KiB), measured by a parent of its
    own so that no earlier child's peak counts."""
    probe = ("import resource, subprocess, sys, time\n"
             "t = time.perf_counter()\n"
             "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
             "sys.stdout.write(f'{time.perf_counter() - t} "
             "{resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}\\n')\n"
             "sys.stdout.write(str(p.returncode) + '\\n' + p.stderr)\n")
    out = subprocess.run([sys.executable, "-c", probe, sys.executable, "-m", "cfi2sframe",
                          *args], cwd=cwd, capture_output=True, text=True, check=True).stdout
    figures, status, stderr = out.split("\n", 2)
    seconds, rss = figures.split()
    return (subprocess.CompletedProcess(args, int(status), "", stderr), float(seconds),
            int(rss))


def assemble(folder: Path, name: str, text: str, compress: bool = False) -> Path:
    source = folder / f"{name}.s"
    source.write_text(text)
    obj = folder / f"{name}.o"
    subprocess.run(["as", str(source), "-o", str(obj)], check=True)
    source.unlink()
    if compress:
        packed = folder / f"{name}.z.o"
        subprocess.run(["objcopy", "--compress-debug-sections=zlib", str(obj), str(packed)],
                       check=True)
        obj.unlink()
        return packed
    return obj


@pytest.fixture(scope="module")
def bomb(tmp_path_factory) -> tuple[Path, Path]:
    """The issue's bomb (300 MB of zeros in .debug_frame, about 290 KB compressed) and the
    same function without the zeros."""
    require("as", "objcopy", "readelf")
    folder = tmp_path_factory.mktemp("bomb")
    text = "\t.cfi_sections .debug_frame\n" + FUNCTION
    padded = text + f"\t.section .debug_frame,\"\",@progbits\n\t.skip {BOMB_ZEROS}\n"
    return assemble(folder, "bomb", padded, compress=True), assemble(folder, "plain", text)


def test_bomb_is_refused_at_once(bomb, tmp_path: Path) -> None:
    packed, _ = bomb
    assert packed.stat().st_size < 400_000
    frames = subprocess.run(["readelf", "--debug-dump=frames", str(packed)],
                            capture_output=True, text=True).stdout
    assert "pc=0000000000000000..0000000000000003" in frames  # readelf: one real FDE
    proc, seconds, rss = measured(str(packed), "-o", "out.sframe", cwd=tmp_path)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"{packed}: error: .debug_frame: at byte ")
    cfi = open_elf(bomb[1].read_bytes(), "plain").section(".debug_frame")
    assert cfi is not None
    assert f"claims {BOMB_ZEROS + cfi.size} bytes uncompressed" in proc.stderr
    assert "--max-section-size" in proc.stderr
    assert not (tmp_path / "out.sframe").exists()
    assert seconds < 5 and rss < 150_000, (seconds, rss)  # before: 13.7 s, 610 MB


def test_bomb_within_raised_limits_gives_the_plain_output(bomb, tmp_path: Path) -> None:
    packed, plain = bomb
    proc, seconds, rss = measured(str(packed), "-o", "bomb.sframe", "--max-section-ratio",
                                  "2000", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    reference = tmp_path / "plain.sframe"
    subprocess.run([sys.executable, "-m", "cfi2sframe", str(plain), "-o", str(reference)],
                   check=True)
    assert (tmp_path / "bomb.sframe").read_bytes() == reference.read_bytes()
    # Memory: the 300 MB section and its relocated copy, nothing that grows past them.
    assert seconds < 30 and rss < 1_000_000, (seconds, rss)
    proc, _, _ = measured(str(packed), "-o", "x.sframe", "--max-section-size", "100M",
                          "--max-section-ratio", "2000", cwd=tmp_path)
    assert proc.returncode == 1 and "more than the 104857600 allowed" in proc.stderr


def _compressed_header(path: Path) -> int:
    """Where the Elf64_Chdr of the file's .debug_frame is."""
    section = open_elf(path.read_bytes(), "x").section(".debug_frame")
    assert section is not None
    return section.offset


def test_bomb_variants_that_lie_about_their_size(bomb, tmp_path: Path) -> None:
    packed, _ = bomb
    data = bytearray(packed.read_bytes())
    at = _compressed_header(packed)
    for claim, expected in ((1 << 44, "claims 17592186044416 bytes uncompressed"),
                            (4096, "gives more bytes than the 4096 it claims"),
                            (BOMB_ZEROS + 4096, "gives fewer bytes than the")):
        struct.pack_into("<Q", data, at + 8, claim)
        variant = tmp_path / "variant.o"
        variant.write_bytes(data)
        proc, seconds, rss = measured(str(variant), "-o", "v.sframe", "--max-section-ratio",
                                      "2000", "--max-section-size", "2G", cwd=tmp_path)
        assert proc.returncode == 1 and expected in proc.stderr, proc.stderr
        assert proc.stderr.count("\n") == 1 and not (tmp_path / "v.sframe").exists()
        assert seconds < 30 and rss < 1_000_000, (claim, seconds, rss)
    for command in (["stats", str(packed)], ["compact", str(packed)]):
        proc, seconds, _ = measured(*command, cwd=tmp_path)
        assert proc.returncode == 1 and "claims" in proc.stderr and seconds < 5, command


def test_zero_runs_are_skipped(tmp_path: Path) -> None:
    """50 MB of zeros before the CIE in a plain .debug_frame: skipped as readelf does."""
    require("as", "readelf")
    text = "\t.cfi_sections .debug_frame\n" + FUNCTION
    padded = assemble(tmp_path, "padded",
                      text + "\t.section .debug_frame,\"\",@progbits\n\t.skip 50000000\n")
    plain = assemble(tmp_path, "plain", text)
    assert "pc=0000000000000000..0000000000000003" in subprocess.run(
        ["readelf", "--debug-dump=frames", str(padded)], capture_output=True, text=True).stdout
    proc, seconds, _ = measured(str(padded), "-o", "padded.sframe", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    subprocess.run([sys.executable, "-m", "cfi2sframe", str(plain), "-o",
                    str(tmp_path / "plain.sframe")], check=True)
    assert (tmp_path / "padded.sframe").read_bytes() == \
        (tmp_path / "plain.sframe").read_bytes()
    assert seconds < 5, seconds  # byte by byte in Python: about 12 s


# --- links, owners, modes, dates -------------------------------------------------------


def has_sframe(path: Path) -> bool:
    out = subprocess.run(["readelf", "-SW", str(path)], capture_output=True, text=True).stdout
    return " .sframe " in out


@pytest.fixture()
def linked(tmp_path: Path) -> Path:
    """A program and the shared library it uses, as packages install them: the library
    under its versioned name with a symbolic link, the program with a second name."""
    require("gcc", "readelf")
    (tmp_path / "lib.c").write_text("int twice(int x) { return 2 * x; }\n")
    (tmp_path / "main.c").write_text("#include <stdio.h>\nint twice(int);\n"
                                     "int main(int c, char **v) { (void)v; "
                                     "printf(\"%d\\n\", twice(c + 20)); return 0; }\n")
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-Wl,-soname,libtw.so.1", "lib.c",
                    "-o", "libtw.so.1.0"], cwd=tmp_path, check=True)
    os.symlink("libtw.so.1.0", tmp_path / "libtw.so.1")
    os.symlink("libtw.so.1", tmp_path / "libtw.so")
    subprocess.run(["gcc", "-O2", "main.c", "-L.", "-ltw", "-o", "prog"], cwd=tmp_path,
                   check=True)
    os.link(tmp_path / "prog", tmp_path / "prog-alias")
    for name in ("lib.c", "main.c"):
        (tmp_path / name).unlink()
    return tmp_path


def run_prog(folder: Path, name: str = "prog") -> str:
    return subprocess.run([str(folder / name), "x"], capture_output=True, text=True,
                          env={"LD_LIBRARY_PATH": str(folder)}, check=True).stdout


def test_in_place_keeps_links_and_converts_every_name(linked: Path) -> None:
    before = run_prog(linked)
    assert before == "44\n"
    inode = (linked / "prog").stat().st_ino
    for name in ("libtw.so", "prog"):  # the library through two links; the program
        proc = cli("--in-place", "-w", name, cwd=linked)
        assert proc.returncode == 0, proc.stderr
    assert os.readlink(linked / "libtw.so") == "libtw.so.1"
    assert os.readlink(linked / "libtw.so.1") == "libtw.so.1.0"
    assert has_sframe(linked / "libtw.so.1.0")
    assert (linked / "prog").stat().st_ino == inode == (linked / "prog-alias").stat().st_ino
    assert (linked / "prog").stat().st_nlink == 2
    assert has_sframe(linked / "prog") and has_sframe(linked / "prog-alias")
    assert run_prog(linked) == run_prog(linked, "prog-alias") == before
    for name in ("libtw.so.1.0", "prog"):
        check = cli("verify", name, cwd=linked)
        assert check.returncode == 0, check.stdout
    assert not [p for p in linked.iterdir() if p.name.startswith(".cfi2sframe-")]


def test_in_place_keeps_the_file_form_whatever_its_name(linked: Path) -> None:
    """A program named like an object and an object named like nothing are rewritten as
    what they are (the name said obj for the program, which was refused as not ELF);
    an --emit that is not the file's form is refused, the file untouched."""
    shutil.copy(linked / "prog", linked / "prog.o")
    (linked / "f.c").write_text("int f(int x) { return x * 3; }\n")
    subprocess.run(["gcc", "-O1", "-c", "f.c", "-o", "fobj"], cwd=linked, check=True)
    for name in ("prog.o", "fobj"):
        wrong = "obj" if name == "prog.o" else "elf"
        before = (linked / name).read_bytes()
        proc = cli("--in-place", "--emit", wrong, "-w", name, cwd=linked)
        assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
        assert f"not --emit {wrong}" in proc.stderr
        assert (linked / name).read_bytes() == before
        proc = cli("--in-place", "-w", name, cwd=linked)
        assert proc.returncode == 0, proc.stderr
        assert has_sframe(linked / name)
        assert cli("verify", name, cwd=linked).returncode == 0
    assert run_prog(linked, "prog.o") == "44\n"
    sections = subprocess.run(["readelf", "-SW", str(linked / "fobj")], capture_output=True,
                              text=True).stdout
    assert " .rela.sframe " in sections  # an object: relocations, no program headers


def test_in_place_keeps_owner_mode_attributes_and_with_p_dates(linked: Path) -> None:
    single = linked / "single"
    shutil.copy(linked / "prog", single)
    for path in (single, linked / "prog"):
        if os.geteuid() == 0:
            os.chown(path, 1234, 2345)
        path.chmod(0o4751)  # setuid: kept (chown and writes clear it; we put it back)
        try:
            os.setxattr(path, "user.cfi2sframe", b"kept")
        except OSError:
            unavailable("no user extended attributes on this file system")
        os.utime(path, ns=(1_000_000_000_000_000_000, 1_100_000_000_000_000_000))
    for name in ("single", "prog"):
        proc = cli("--in-place", "-p", "-w", name, cwd=linked)
        assert proc.returncode == 0, proc.stderr
        info = (linked / name).stat()
        assert info.st_mode & 0o7777 == 0o4751, oct(info.st_mode)
        if os.geteuid() == 0:
            assert (info.st_uid, info.st_gid) == (1234, 2345)
        assert os.getxattr(linked / name, "user.cfi2sframe") == b"kept"
        assert (info.st_atime_ns, info.st_mtime_ns) == (1_000_000_000_000_000_000,
                                                         1_100_000_000_000_000_000)
        assert has_sframe(linked / name)
    single.chmod(0o755)  # setuid programs ignore LD_LIBRARY_PATH
    assert run_prog(linked, "single") == "44\n"


def _under_strace(folder: Path, inject: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``cfi2sframe ARGS`` in ``folder`` with strace's fault injection ``inject``."""
    call = inject.split(":")[0]
    return cli(*args, cwd=folder, wrapper=("strace", "-f", "-qq", "-o", os.devnull, "-e",
                                           f"trace={call}", "-e", f"inject={inject}"))


@pytest.mark.parametrize("inject", ["listxattr:error=EIO", "getxattr:error=EACCES"])
def test_unreadable_extended_attributes_refuse_in_place(linked: Path, inject: str) -> None:
    """An attribute that cannot be read (strace makes the kernel deny it, as a security
    module or a failing disk would) could not be kept: one error line, exit 1, the
    file untouched, through one name and through two (hard links)."""
    require("strace")
    shutil.copy(linked / "prog", linked / "single")
    for name in ("single", "prog"):
        try:
            os.setxattr(linked / name, "user.cfi2sframe", b"kept")
        except OSError:
            unavailable("no user extended attributes on this file system")
        before = (linked / name).read_bytes()
        proc = _under_strace(linked, inject, "--in-place", "-w", name)
        assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
        assert proc.stderr.startswith(f"{name}: error: cannot read the extended attribute")
        assert "nothing written" in proc.stderr
        assert (linked / name).read_bytes() == before
    assert os.getxattr(linked / "prog-alias", "user.cfi2sframe") == b"kept"


def test_extended_attribute_gone_while_read_is_not_kept(linked: Path) -> None:
    """An attribute listed and then gone when read (ENODATA: removed meanwhile) is not
    kept, and the conversion goes on."""
    require("strace")
    single = linked / "single"
    shutil.copy(linked / "prog", single)
    try:
        os.setxattr(single, "user.cfi2sframe", b"gone")
    except OSError:
        unavailable("no user extended attributes on this file system")
    proc = _under_strace(linked, "getxattr:error=ENODATA", "--in-place", "-w", "single")
    assert proc.returncode == 0, proc.stderr
    assert has_sframe(single) and "user.cfi2sframe" not in os.listxattr(single)


def test_hard_linked_file_converted_again_is_appended_to(tmp_path: Path) -> None:
    """A file with two names is rewritten in its own inode, so only appending (and one
    write within the first page: the ELF header and the program header table) can be
    done without a half-written moment.  Converting a converted file again (here V3
    made V2, more than two pages of section) places our earlier additions again at the
    new end: both names see the new file, every old byte past the first page is where
    it was, and the program runs and verifies."""
    require("gcc", "readelf")
    source = tmp_path / "many.c"
    source.write_text("".join(f"int f{i}(int x) {{ return x * {i} + f{i - 1}(x ^ {i}); }}\n"
                              if i else "int f0(int x) { return x; }\n" for i in range(300))
                      + "int main(int c, char **v) { (void)v; return f299(c) & 1; }\n")
    prog = tmp_path / "many"
    subprocess.run(["gcc", "-O1", "-fno-inline", str(source), "-o", str(prog)], check=True)
    expected = subprocess.run([str(prog)], check=False).returncode
    assert cli("--in-place", "--sframe-version", "3", "-w", str(prog),
               cwd=tmp_path).returncode == 0
    sections = subprocess.run(["readelf", "-SW", str(prog)], capture_output=True,
                              text=True).stdout
    size = next(int(line.split()[5], 16) for line in sections.splitlines()
                if " .sframe " in line.replace("[ ", "["))
    assert size > 2 * 4096
    os.link(prog, tmp_path / "many-alias")
    before = prog.read_bytes()
    proc = cli("--in-place", "--replace", "-w", str(prog), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    after = prog.read_bytes()
    assert after == (tmp_path / "many-alias").read_bytes()
    assert len(after) > len(before) and after[4096:len(before)] == before[4096:]
    assert subprocess.run([str(prog)], check=False).returncode == expected
    assert cli("verify", str(prog), cwd=tmp_path).returncode == 0


def test_tree_run_over_links(linked: Path, tmp_path: Path) -> None:
    proc = cli("--in-place", "-r", str(linked), "--json", "-j", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    status = {Path(r["path"]).name: r["status"] for r in json.loads(proc.stdout)["files"]}
    # Symbolic links are not walked; the second name of the program finds it converted.
    assert status == {"libtw.so.1.0": "ok", "prog": "ok", "prog-alias": "has-sframe"}
    assert run_prog(linked) == "44\n" and os.readlink(linked / "libtw.so") == "libtw.so.1"


# --- nothing lost -----------------------------------------------------------------------


def test_full_disk_leaves_linked_files_as_they_were(linked: Path) -> None:
    for name, real in (("prog", "prog"), ("libtw.so", "libtw.so.1.0")):
        before = (linked / real).read_bytes()
        proc = cli("--in-place", "-w", name, cwd=linked, limit=len(before) + 64)
        assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
        assert (linked / real).read_bytes() == before, name
        assert os.path.islink(linked / "libtw.so")
    assert (linked / "prog").stat().st_nlink == 2 and run_prog(linked) == "44\n"
    assert not [p for p in linked.iterdir() if p.name.startswith(".cfi2sframe-")]


WRITES = ("pwrite64", "write", "fsync", "ftruncate", "fchmod", "rename", "linkat")


@pytest.mark.parametrize("name", ["prog", "libtw.so"])
def test_kill_at_every_write_leaves_old_or_new(linked: Path, name: str) -> None:
    """strace kills the conversion at the 1st, 2nd, 3rd call of each writing system
    call: the file is then the old one (the same-inode rewrite may leave unused bytes
    after its end) or exactly the converted one, through every name."""
    require("strace")
    real = linked / ("prog" if name == "prog" else "libtw.so.1.0")
    old = real.read_bytes()
    copy = linked.parent / f"{linked.name}-expected"  # the same conversion, no kill
    shutil.copytree(linked, copy, symlinks=True)
    (copy / "prog-alias").unlink()
    os.link(copy / "prog", copy / "prog-alias")
    assert cli("--in-place", "-w", name, cwd=copy).returncode == 0
    new = (copy / real.name).read_bytes()
    seen = set()
    for call in WRITES:
        for nth in (1, 2, 3):
            real.write_bytes(old)  # same inode: prog keeps its second name
            _under_strace(linked, f"{call}:signal=SIGKILL:when={nth}", "--in-place", "-w",
                          name)
            now = real.read_bytes()
            state = "new" if now == new else "old" if now == old else \
                "old with unused bytes" if now[:len(old)] == old else "broken"
            assert state != "broken", (call, nth, len(now))
            seen.add(state)
            if name == "prog":
                assert (linked / "prog-alias").read_bytes() == now
            assert run_prog(linked) == "44\n"
    # Kills landed before, inside and after the rewrite.
    assert {"old", "new"} <= seen
    if name == "prog":
        assert "old with unused bytes" in seen  # killed between the end and the header
    # A kill between naming the new file and the rename leaves it; the next write into
    # the folder removes it.
    real.write_bytes(old)
    assert cli("--in-place", "-w", name, cwd=linked).returncode == 0
    assert real.read_bytes() == new
    assert not [p for p in linked.iterdir() if p.name.startswith(".cfi2sframe-")]


@pytest.mark.parametrize("core", ["compiled", "python"])
def test_a_failed_sync_is_each_files_error(linked: Path, core: str) -> None:
    """The disk fails every sync (strace makes fsync fail with EIO): a tree run in
    place gives each file its one line and record with strerror's words, exit 1, and
    leaves every file as it was and nothing behind, through one name and through two
    (hard links).  The writeback started before the check (``sync_file_range``, the
    compiled core's) is a hint: when it fails the file is converted all the same."""
    require("strace")
    names = {"libtw.so.1.0": b"", "prog": b""}
    for name in names:
        names[name] = (linked / name).read_bytes()
    env = ("env", f"CFI2SFRAME_CORE={core if core == 'python' else ''}")
    trace = ("strace", "-f", "-qq", "-o", os.devnull)
    proc = cli("--in-place", "-r", "-j", "1", "--jsonl", "out.jsonl", ".", cwd=linked,
               wrapper=(*env, *trace, "-e", "trace=fsync", "-e", "inject=fsync:error=EIO"))
    assert proc.returncode == 1, proc.stderr
    errors = {f"./{name}: error: cannot write output: Input/output error"
              for name in ("libtw.so.1.0", "prog", "prog-alias")}
    assert errors <= set(proc.stderr.splitlines()), proc.stderr
    records = [json.loads(line) for line in (linked / "out.jsonl").read_text().splitlines()]
    assert {r["error"] for r in records} == errors
    assert all((linked / name).read_bytes() == old for name, old in names.items())
    assert not [p for p in linked.iterdir() if p.name.startswith(".cfi2sframe-")]
    proc = cli("--in-place", "-w", "libtw.so", cwd=linked,
               wrapper=(*env, *trace, "-e", "trace=sync_file_range",
                        "-e", "inject=sync_file_range:error=EIO"))
    assert proc.returncode == 0, proc.stderr
    assert has_sframe(linked / "libtw.so.1.0") and run_prog(linked) == "44\n"


def _in_read_only_folder(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``cfi2sframe ARGS`` in ``folder``, which a private mount namespace makes a
    read-only bind mount of itself (EROFS for every write, root included)."""
    script = 'mount --bind -o ro "$PWD" "$PWD" && cd "$PWD" && exec "$@"'
    return cli(*args, cwd=folder, wrapper=("unshare", "-m", "sh", "-c", script, "sh"))


def test_read_only_target_leaves_everything_as_it_was(linked: Path) -> None:
    """On a read-only file system every write path fails with one line and exit 1:
    in place through a hard link and a symbolic link, new raw/obj/elf files, the
    JSONL of a tree run and an in-place tree run; nothing changes."""
    require("unshare", "gcc")
    (linked / "f.c").write_text("int f(int x) { return x * 3; }\n")
    subprocess.run(["gcc", "-O1", "-c", "f.c", "-o", "f.o"], cwd=linked, check=True)
    probe = subprocess.run(["unshare", "-m", "sh", "-c",
                            f"mount --bind -o ro {linked} {linked} && ! touch {linked}/x"],
                           capture_output=True)
    if probe.returncode != 0:
        unavailable("cannot make a read-only bind mount here (unshare -m, mount): "
                    + probe.stderr.decode(errors="replace").strip())
    before = {p.name: p.read_bytes() for p in linked.iterdir() if not p.is_symlink()}
    for args in (("--in-place", "-w", "prog"), ("--in-place", "-w", "libtw.so"),
                 ("-w", "prog", "-o", "out.sframe"), ("-w", "f.o", "--emit", "obj",
                                                      "-o", "g.o"),
                 ("-w", "prog", "--emit", "elf", "-o", "prog2"),
                 ("stats", "-r", ".", "-q", "--jsonl", "j.jsonl")):
        proc = _in_read_only_folder(linked, *args)
        assert proc.returncode == 1 and proc.stderr.count("\n") == 1, (args, proc.stderr)
        assert "Read-only file system" in proc.stderr, proc.stderr
    proc = _in_read_only_folder(linked, "--in-place", "-r", "--objects", ".", "-q", "-j", "1")
    assert proc.returncode == 1
    # f.o, the library and the program under both its names (f.c is not ELF).
    assert proc.stderr.count("cannot write output: Read-only file system") == 4
    after = {p.name: p.read_bytes() for p in linked.iterdir() if not p.is_symlink()}
    assert after == before
    assert os.readlink(linked / "libtw.so") == "libtw.so.1" and run_prog(linked) == "44\n"


def test_changed_or_vanished_input_is_not_overwritten(linked: Path) -> None:
    from cfi2sframe.files import read_for_rewrite, rewrite

    path = linked / "libtw.so.1.0"
    data, status = read_for_rewrite(str(path))
    time.sleep(0.01)
    path.write_bytes(data + b"later")  # someone else wrote it meanwhile
    with pytest.raises(Cfi2SframeError, match="changed or vanished"):
        rewrite(str(path), data, status, data + b"ours")
    assert path.read_bytes() == data + b"later"
    data, status = read_for_rewrite(str(path))
    path.unlink()
    with pytest.raises(Cfi2SframeError, match="changed or vanished"):
        rewrite(str(path), data, status, data + b"ours")
    assert not path.exists()



def test_in_place_checks_the_file_as_written(linked: Path) -> None:
    """``rewrite``'s check reads the new file back from disk before it takes the name
    (a patched copy is never whole in memory); a failing check leaves the input as it
    was and no file behind."""
    from cfi2sframe.files import PatchedCopy, read_for_rewrite, rewrite

    path = linked / "libtw.so.1.0"
    before = sorted(p.name for p in linked.iterdir())
    data, status = read_for_rewrite(str(path))
    new = PatchedCopy(len(data) + 8, data, len(data), ((4, b"\x02"), (len(data), b"appended")))
    expected = data[:4] + b"\x02" + data[5:] + b"appended"
    seen: list[bytes] = []

    def refuse(written: bytes) -> None:
        seen.append(bytes(written))
        raise Cfi2SframeError(str(path), "the rewritten file does not verify")

    with pytest.raises(Cfi2SframeError, match="does not verify"):
        rewrite(str(path), data, status, new, check=refuse)
    assert seen == [expected]
    assert path.read_bytes() == data and sorted(p.name for p in linked.iterdir()) == before
    rewrite(str(path), data, status, new, check=lambda written: seen.append(bytes(written)))
    assert seen[1] == expected and path.read_bytes() == expected

# --- what the new fuzz targets found (tests/support/fuzz.py rewrite|compressed) --------


def _patched_example(tmp_path: Path, patch) -> Path:
    require("as")
    obj = tmp_path / "f.o"
    subprocess.run(["as", str(Path(__file__).resolve().parents[2] / "examples" / "frameless.s"),
                    "-o", str(obj)], check=True)
    data = bytearray(obj.read_bytes())
    patch(data, open_elf(bytes(data), "f.o"))
    obj.write_bytes(data)
    return obj


def _refused_in_place(obj: Path, message: str) -> None:
    """--in-place on ``obj`` fails with one line holding ``message``; the file stays."""
    _refused_in_place_with(obj, (), message)


def _refused_in_place_with(obj: Path, args: tuple[str, ...], message: str) -> None:
    before = obj.read_bytes()
    proc = cli("--in-place", *args, str(obj), cwd=obj.parent)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert message in proc.stderr and obj.read_bytes() == before


def _patched_program(tmp_path: Path, field: int, value: int) -> Path:
    """A gcc program whose last PT_LOAD has ``value`` in the 8-byte field at ``field``
    of its program header (40: p_memsz, 48: p_align)."""
    require("gcc")
    (tmp_path / "p.c").write_text("int main(void) { return 0; }\n")
    prog = tmp_path / "prog"
    subprocess.run(["gcc", "-O1", "p.c", "-o", str(prog)], cwd=tmp_path, check=True)
    data = bytearray(prog.read_bytes())
    last = [s for s in open_elf(bytes(data), "prog").segments() if s.kind == PT_LOAD][-1]
    struct.pack_into("<Q", data, last.header_at + field, value)
    prog.write_bytes(data)
    return prog


def test_fuzz_finding_segment_alignment_of_512_mib(tmp_path: Path) -> None:
    """A PT_LOAD claiming 512 MiB alignment: the new segments took that alignment and
    --in-place wrote a 1 GiB file (6 s, 2 GiB of memory: the rewrite target ran out of
    memory).  New segments are aligned to the target's largest page now, whatever the
    file claims; this file's own segment breaks the alignment it claims (offset and
    address differ modulo 512 MiB), which the check of the written file names, and the
    input is left as it was."""
    prog = _patched_program(tmp_path, 48, 1 << 29)
    start = time.monotonic()
    _refused_in_place_with(prog, ("-w",), "differ modulo its alignment 0x20000000")
    assert time.monotonic() - start < 5


def test_memory_image_claims_are_bounded(tmp_path: Path) -> None:
    """A last PT_LOAD claiming a 1 TiB memory image: --old-kernels pad wrote (or was
    refused) that many zeros.  The program's table now grows where it is, so no zeros
    are written for any claim: V3 (64-bit starts) converts, the file growing by less
    than a page besides .sframe; V2's 32-bit starts cannot reach a section placed after
    1 TiB and say so (was reported as a function too far from its FDE only after the
    padding).  A memory image reaching the top of the address space leaves no addresses
    for the new segment."""
    prog = _patched_program(tmp_path, 40, 1 << 40)
    size = prog.stat().st_size
    assert cli("--in-place", "-w", "--sframe-version", "3", str(prog),
               cwd=tmp_path).returncode == 0
    sframe = open_elf(prog.read_bytes(), "prog").section(".sframe")
    assert sframe is not None and prog.stat().st_size - size - sframe.size < 4096
    for args in (("-w",), ("-w", "--old-kernels", "pad")):
        prog = _patched_program(tmp_path, 40, 1 << 40)
        _refused_in_place_with(prog, args, "out of range for a 32-bit PC-relative start")
    top = _patched_program(tmp_path, 40, (1 << 64) - 1)
    _refused_in_place_with(top, ("-w", "--old-kernels", "no"), "no addresses are left")


def test_fuzz_finding_symbol_table_of_odd_size(tmp_path: Path) -> None:
    """--in-place on an object whose symbol table is not whole entries: was an
    internal error (struct.error) in the object writer."""
    def shrink(data: bytearray, view) -> None:
        symtab = view.section(".symtab")
        struct.pack_into("<Q", data, symtab.header_at + 0x20, symtab.size - 1)

    _refused_in_place(_patched_example(tmp_path, shrink), "malformed symbol table")


def test_fuzz_finding_names_from_the_file_stay_on_one_line(tmp_path: Path) -> None:
    """A CIE augmentation string with a newline split the error in two lines."""
    def newline(data: bytearray, view) -> None:
        eh = view.section(".eh_frame")
        assert data[eh.offset + 9] == ord("z")
        data[eh.offset + 9] = ord("\n")

    obj = _patched_example(tmp_path, newline)
    proc = cli(str(obj), "-o", "x.sframe", cwd=tmp_path)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert "unknown CIE augmentation '\\x0aR'" in proc.stderr


def test_fuzz_finding_relocation_naming_a_missing_symbol(tmp_path: Path) -> None:
    """An object without a section symbol for its code (so --in-place inserts one and
    renumbers every relocation) and a relocation of .text naming symbol 0xffffffff
    (the CFI reader never reads it): was an internal error (struct.error) while
    renumbering."""
    def break_it(data: bytearray, view) -> None:
        symtab = view.section(".symtab")
        text = view.sections.index(view.section(".text"))
        for at in range(symtab.offset, symtab.offset + symtab.size, 24):
            info, shndx = data[at + 4], struct.unpack_from("<H", data, at + 6)[0]
            if info & 0xF == 3 and shndx == text:  # STT_SECTION of .text: now NOTYPE
                data[at + 4] = info & 0xF0
        rela = view.section(".rela.text")  # symbol 0xffffffff, a type nobody knows
        struct.pack_into("<Q", data, rela.offset + 8, 0xFFFFFFFF_FFFFFFFC)

    _refused_in_place(_patched_example(tmp_path, break_it),
                      "relocation names symbol 4294967295 of")


def test_fuzz_finding_object_fde_without_relocation(tmp_path: Path) -> None:
    """An object whose .eh_frame relocations apply to another section: its FDEs have no
    section, and --in-place wrote .sframe relocations against section 0 (a wrong
    object), or, for a start past 2**63, raised struct.error (an internal error)."""
    def detach(data: bytearray, view) -> None:
        rela = view.section(".rela.eh_frame")
        struct.pack_into("<I", data, rela.header_at + 0x2C, 0)  # sh_info: section 0

    _refused_in_place(_patched_example(tmp_path, detach),
                      "has no relocation, so the section of its function is unknown")


def test_fuzz_finding_cie_shorter_than_its_fields(tmp_path: Path) -> None:
    """A CIE whose fields run past its length, last in its section: the reader indexed
    past the section (IndexError, an internal error); also for the elf target."""
    def shorten(data: bytearray, view) -> None:
        eh = view.section(".eh_frame")
        struct.pack_into("<IIBBBB", data, eh.offset, 8, 0, 1, 0, 0, 0)  # v1, "", 0, 0
        struct.pack_into("<Q", data, eh.header_at + 0x20, 12)  # the section: this CIE
        rela = view.section(".rela.eh_frame")  # its FDE's relocation: elsewhere
        struct.pack_into("<I", data, rela.header_at + 0x2C, 0)

    obj = _patched_example(tmp_path, shorten)
    proc = cli(str(obj), "-o", "x.sframe", cwd=tmp_path)
    assert proc.returncode == 1 and proc.stderr == (
        f"{obj}: error: .eh_frame: at byte 0x0: CIE of 12 bytes is shorter than its "
        "fields\n")


def test_fuzz_finding_symbol_table_past_the_end_of_a_program(tmp_path: Path) -> None:
    """A program's .symtab header claiming more bytes than the file has: the grown
    table's symbol update (the symbols of the sections that move, ``__abi_tag``) read
    it as whole entries and failed (an internal error, struct.error).  Now the table is
    read as far as the file holds it, and the rewritten file's own check names the
    claim (a section past the end of the file: the input's layout problem, so the
    input's error); the input is left as it was."""
    prog = _patched_program(tmp_path, 0, 1)  # p_type PT_LOAD: the file as gcc wrote it
    data = bytearray(prog.read_bytes())
    symtab = open_elf(bytes(data), "prog").section(".symtab")
    assert symtab is not None
    struct.pack_into("<Q", data, symtab.header_at + 32, symtab.size + len(data))
    prog.write_bytes(data)
    _refused_in_place_with(prog, ("-w",), f"section '.symtab' at offset {symtab.offset:#x} "
                           "runs past the end of the file")


def test_a_symbol_table_linked_to_a_missing_section_is_refused_first(tmp_path: Path) -> None:
    """The table pass reads no name up front, yet the symbol tables are checked at the
    step that reads them (``cfi_section``): a ``.symtab`` whose ``sh_link`` (offset
    0x28 of an ELF64 section header) names no section is the file's error, not the
    CFI section's, for ``--emit elf`` and the raw section alike."""
    prog = _patched_program(tmp_path, 0, 1)  # p_type PT_LOAD: the file as gcc wrote it
    data = bytearray(prog.read_bytes())
    symtab = open_elf(bytes(data), "prog").section(".symtab")
    assert symtab is not None
    struct.pack_into("<I", data, symtab.header_at + 0x28, 0xFFFF)
    prog.write_bytes(data)
    for args in (("--emit", "elf", "-o", "out"), ("-o", "out.sframe")):
        proc = cli("-w", str(prog), *args, cwd=tmp_path)
        assert proc.returncode == 1 and proc.stderr == (
            f"{prog}: error: ELF file: at byte 0x0: symbol table .symtab links to a "
            "missing section\n"), proc.stderr
