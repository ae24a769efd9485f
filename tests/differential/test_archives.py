"""Static libraries converted member by member (a copy of Debian's libz.a, and one made
here with every kind of member): GNU ar and nm read the result as they read the
input (``ar tv`` but for sizes, ``nm -s`` with its symbol index), each object
member has SFrame that verifies against its own .eh_frame, other members are kept
byte for byte, and a program linked against the library runs."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

from cfi2sframe.elf.archive import read_archive, write_archive
from tests.conftest import cfi2sframe, require, require_path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LIBZ = Path("/usr/lib/x86_64-linux-gnu/libz.a")
ZLIB_USER = ("#include <zlib.h>\n#include <stdio.h>\n"
             "int main(void) { unsigned char out[64]; unsigned long n = sizeof out;\n"
             "  compress(out, &n, (const unsigned char *)\"hello hello hello\", 17);\n"
             "  printf(\"%lu\\n\", n); return 0; }\n")




def _out(*cmd: str, cwd: Path) -> str:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=True).stdout


def _listing(archive: Path) -> list[str]:
    """``ar tv`` without the sizes (mode, owner, date and name stay)."""
    return [re.sub(r"^(\S+ \S+)\s+\d+ ", r"\1 ", line)
            for line in _out("ar", "tv", str(archive), cwd=archive.parent).splitlines()]


def test_reading_and_writing_back_unchanged_is_the_identity():
    require_path(LIBZ)
    data = LIBZ.read_bytes()
    members = read_archive(data)
    assert [m.name for m in members if not m.special] == \
        _out("ar", "t", str(LIBZ), cwd=LIBZ.parent).split()
    assert write_archive(members, [m.data for m in members]) == data


def test_libz_converted_in_place_reads_links_and_runs_the_same(tmp_path):
    require("ar", "nm", "gcc", "readelf")
    require_path(LIBZ)
    lib = tmp_path / "libz.a"
    shutil.copy(LIBZ, lib)
    listing, index = _listing(lib), _out("nm", "-s", str(lib), cwd=tmp_path)
    proc = cfi2sframe(str(lib), "--in-place", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert lib.read_bytes() != LIBZ.read_bytes()
    assert _listing(lib) == listing
    assert _out("nm", "-s", str(lib), cwd=tmp_path) == index  # the index names members
    members = tmp_path / "members"
    members.mkdir()
    subprocess.run(["ar", "x", str(lib)], cwd=members, check=True)
    objects = sorted(members.glob("*.o"))
    assert len(objects) == 15
    for obj in objects:
        assert ".sframe" in _out("readelf", "-S", "-W", str(obj), cwd=tmp_path), obj
        check = cfi2sframe("verify", str(obj), cwd=tmp_path)
        assert check.returncode == 0 and " 0 mismatches" in check.stdout, check.stdout
    # The program prints what it prints linked against Debian's own libz.a.
    (tmp_path / "z.c").write_text(ZLIB_USER)
    for program, library in (("z", lib), ("z0", LIBZ)):
        subprocess.run(["gcc", "z.c", "-o", program, str(library)], cwd=tmp_path,
                       check=True, capture_output=True)
    printed = _out(str(tmp_path / "z"), cwd=tmp_path)
    assert printed == _out(str(tmp_path / "z0"), cwd=tmp_path) and printed.strip().isdigit()


def test_every_kind_of_member(tmp_path):
    """Objects with and without CFI, one that has .sframe already (gas --gsframe), a
    text file and a long name: only the object with CFI and no SFrame changes;
    -o leaves the input as it was and writes what --in-place writes."""
    require("ar", "as", "nm")
    (tmp_path / "a_function_with_a_long_name.o").write_bytes(b"")
    subprocess.run(["as", str(EXAMPLES / "frame_pointer.s"), "-o",
                    "a_function_with_a_long_name.o"], cwd=tmp_path, check=True)
    (tmp_path / "data.s").write_text("\t.data\nvalue:\n\t.long 1\n")
    subprocess.run(["as", "data.s", "-o", "data.o"], cwd=tmp_path, check=True)
    subprocess.run(["as", "--gsframe", str(EXAMPLES / "frameless.s"), "-o", "gas.o"],
                   cwd=tmp_path, check=True)
    (tmp_path / "notes.txt").write_text("not an object\n")
    names = ["a_function_with_a_long_name.o", "data.o", "gas.o", "notes.txt"]
    subprocess.run(["ar", "rcs", "libmix.a", *names], cwd=tmp_path, check=True)
    lib = tmp_path / "libmix.a"
    before = lib.read_bytes()
    proc = cfi2sframe(str(lib), "-o", str(tmp_path / "out.a"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert lib.read_bytes() == before
    old = {m.name: m.data for m in read_archive(before)}
    new = {m.name: m.data for m in read_archive((tmp_path / "out.a").read_bytes())}
    assert list(new) == list(old)
    assert new["a_function_with_a_long_name.o"] != old["a_function_with_a_long_name.o"]
    for kept in ("data.o", "gas.o", "notes.txt"):
        assert new[kept] == old[kept], kept
    assert _out("nm", "-s", "out.a", cwd=tmp_path) == _out("nm", "-s", "libmix.a",
                                                             cwd=tmp_path)
    proc = cfi2sframe(str(lib), "--in-place", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert lib.read_bytes() == (tmp_path / "out.a").read_bytes()
    # Without --in-place or -o there is no archive to write to.
    proc = cfi2sframe(str(lib), cwd=tmp_path)
    assert proc.returncode == 1 and "--in-place, or -o FILE.a" in proc.stderr


def test_stats_verify_dump_and_trees_read_archives(tmp_path):
    """The read commands on a static library: ``stats`` and ``verify`` give a record per
    member (each object's FDE count from readelf's own reading of its .eh_frame), ``dump``
    prints each member after a ``File: LIB(MEMBER)`` line; a tree run keeps the
    library unless ``--objects``, then converts it."""
    require("ar", "readelf")
    require_path(LIBZ)
    tree = tmp_path / "tree"
    tree.mkdir()
    lib = tree / "libz.a"
    shutil.copy(LIBZ, lib)
    members = tmp_path / "members"
    members.mkdir()
    subprocess.run(["ar", "x", str(lib)], cwd=members, check=True)
    objects = sorted(p.name for p in members.glob("*.o"))
    fdes = sum(_out("readelf", "--debug-dump=frames", str(members / name),
                    cwd=members).count(" FDE cie=") for name in objects)
    proc = cfi2sframe("stats", str(lib), "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    records = json.loads(proc.stdout)["files"]  # one per member, in the library's order
    listed = [name for name in _out("ar", "t", str(lib), cwd=tmp_path).split()
              if name in objects]
    assert [r["path"] for r in records] == [f"{lib}({name})" for name in listed]
    assert {r["archive"] for r in records} == {str(lib)}
    assert {r["elf_type"] for r in records} == {"ET_REL"}
    assert sum(r["fdes"] for r in records) == fdes
    for name, record in zip(listed, records, strict=True):
        assert record["fdes"] == _out("readelf", "--debug-dump=frames", str(members / name),
                                      cwd=members).count(" FDE cie="), name
    kept = cfi2sframe("--in-place", "-r", str(tree), cwd=tmp_path)
    assert kept.returncode == 0 and lib.read_bytes() == LIBZ.read_bytes()
    assert f"{lib}: kept: a static library (--objects converts its members)" in kept.stdout
    done = cfi2sframe("--in-place", "-r", str(tree), "--objects", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"{lib}: rewritten: {fdes} of {fdes} FDEs" in done.stdout
    for args in (["verify", str(lib)], ["verify", "-r", str(tree)], ["stats", "-r", str(tree)]):
        proc = cfi2sframe(*args, cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    checked = cfi2sframe("verify", str(lib), cwd=tmp_path).stdout
    for name in listed:
        assert re.search(rf"^{re.escape(f'{lib}({name})')}: ok: \d+ functions checked at "
                         r"every PC, 0 mismatches", checked, re.M), (name, checked)
    assert f"{len(listed)} correct, 0 not; {fdes} functions checked" in checked
    dump = cfi2sframe("dump", str(lib), cwd=tmp_path).stdout
    assert [line[len(f"File: {lib}("):-1] for line in dump.splitlines()
            if line.startswith("File: ")] == [
        name for name in _out("ar", "t", str(lib), cwd=tmp_path).split() if name in objects]
    lookup = cfi2sframe("lookup", str(lib), "0x10", cwd=tmp_path)
    assert lookup.returncode == 1 and lookup.stderr.count("\n") == 1
    assert "a static library (ar archive): this command reads one file" in lookup.stderr
