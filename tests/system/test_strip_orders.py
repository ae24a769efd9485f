"""Both strip orders end in a good file, and converting a converted file again reuses
the space the first conversion added.

Convert, then strip as debhelper's dh_strip does (``objcopy --only-keep-debug``,
``strip --strip-unneeded``, ``objcopy --add-gnu-debuglink``), then BFD ``strip``
again: a table that grew in place stays where every kernel finds it; a moved one
(the static program's) is moved by BFD where Linux before 5.18 and qemu-user no
longer find it (qemu segfaults), and ``--in-place --replace`` places the table and
section again.  Every outcome
is checked by running the file natively and under qemu-user and by ``verify``;
sizes are bounded by the SFrame section sizes plus one page (the file's segment
alignment, 4 KiB here).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cfi2sframe.analysis.compare import check_rewritten
from cfi2sframe.elf.read import open_elf
from cfi2sframe.errors import Cfi2SframeError
from cfi2sframe.sframe.load import load_sframe
from tests.conftest import cfi2sframe, require, require_path

PAGE = 0x1000  # the PT_LOAD alignment gcc's ld gives x86-64 programs here
PROGRAM = ('#include <stdio.h>\n#include <zlib.h>\n'
           'int main(int c, char **v) { (void)v; printf("%s %d\\n", zlibVersion(), c);'
           ' return c == 1 ? 0 : 3; }\n')
STATIC = ('#include <stdio.h>\nint main(int c, char **v) { (void)v; printf("%d\\n", c);'
          ' return c == 1 ? 0 : 3; }\n')


def _build(folder: Path) -> dict[str, Path]:
    """A dynamic program using a copy of libz, the library itself, and a static one."""
    require("gcc", "strip", "objcopy", "eu-strip", "qemu-x86_64")
    require_path("/usr/include/zlib.h")
    (folder / "p.c").write_text(PROGRAM)
    (folder / "s.c").write_text(STATIC)
    lib = folder / "libz.so.1"
    shutil.copy(Path("/usr/lib/x86_64-linux-gnu/libz.so.1").resolve(), lib)
    subprocess.run(["gcc", "-O2", "-g", str(folder / "p.c"), "-o", str(folder / "prog"),
                    "-lz"], check=True)
    subprocess.run(["gcc", "-O2", "-g", "-static", str(folder / "s.c"), "-o",
                    str(folder / "static")], check=True)
    return {"prog": folder / "prog", "static": folder / "static", "lib": lib}


def _runs(path: Path, folder: Path) -> None:
    """The program (or, for the library, the program using it) runs natively and under
    qemu-user with exit status 0."""
    program = folder / "prog" if path.name.startswith("libz") else path
    env = {"LD_LIBRARY_PATH": str(folder), "PATH": "/usr/bin:/bin"}
    for runner in ([], ["qemu-x86_64"]):
        proc = subprocess.run([*runner, str(program)], capture_output=True, text=True,
                              env=env, check=False)
        assert proc.returncode == 0, (runner, path, proc.stderr)


def _verifies(path: Path, gaps: bool = False) -> None:
    """verify passes; or, with ``gaps``, fails on functions without SFrame alone."""
    proc = cfi2sframe("verify", str(path), cwd=path.parent)
    assert proc.returncode == (1 if gaps else 0), proc.stdout + proc.stderr
    assert not re.search(r"\b[1-9]\d* layout problems", proc.stdout), proc.stdout
    assert " 0 mismatches" in proc.stdout
    assert gaps == (": not covered: " in proc.stdout), proc.stdout


def _convert(path: Path, *args: str) -> None:
    proc = cfi2sframe("-w", "--in-place", *args, str(path), cwd=path.parent)
    assert proc.returncode == 0, proc.stderr


def _dh_strip(path: Path) -> None:
    """debhelper's dh_strip steps (Debian's compat 13), then BFD strip once more."""
    debug = path.with_name(path.name + ".debug")
    subprocess.run(["objcopy", "--only-keep-debug", "--compress-debug-sections", str(path),
                    str(debug)], check=True, capture_output=True)
    subprocess.run(["strip", "--remove-section=.comment", "--remove-section=.note",
                    "--strip-unneeded", str(path)], check=True)
    subprocess.run(["objcopy", f"--add-gnu-debuglink={debug}", str(path)], check=True,
                   cwd=path.parent)
    subprocess.run(["strip", str(path)], check=True)


def _section_size(path: Path) -> int:
    return load_sframe(str(path), path.read_bytes()).section.size


@pytest.mark.slow
def test_convert_then_strip_is_repaired_by_replace(tmp_path: Path) -> None:
    """A grown table (the dynamic program, libz) is where BFD keeps it: after dh_strip
    and strip the file runs everywhere and verifies.  A moved one (the static program:
    .rela.plt follows its notes, so there is no room) is put where no section covers it
    and where Linux before 5.18 does not look: the damage is named, and --replace
    places the table and section again."""
    files = _build(tmp_path)
    damaged_files = []
    for name, path in files.items():
        phoff = path.read_bytes()[0x20:0x28]
        _convert(path)
        grown = path.read_bytes()[0x20:0x28] == phoff
        _dh_strip(path)
        damaged = path.read_bytes()
        if grown:
            check_rewritten(name, damaged)
            _runs(path, tmp_path)
            _verifies(path)
            continue
        damaged_files.append(name)
        with pytest.raises(Cfi2SframeError, match=r"does not verify \(bad layout: "):
            check_rewritten(name, damaged, original=damaged)  # strip's, not ours
        proc = cfi2sframe("-q", "--in-place", "--replace", str(path), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        _runs(path, tmp_path)
        _verifies(path)
    assert damaged_files == ["static"]


@pytest.mark.slow
def test_eu_strip_after_conversion_and_strip_before_it(tmp_path: Path) -> None:
    files = _build(tmp_path)
    for path in files.values():
        _convert(path)
        subprocess.run(["eu-strip", str(path)], check=True)
        _runs(path, tmp_path)
        _verifies(path)
    again = tmp_path / "again"
    again.mkdir()
    for path in _build(again).values():
        subprocess.run(["strip", str(path)], check=True)
        _convert(path)
        _runs(path, path.parent)
        _verifies(path)


@pytest.mark.slow
def test_v2_v3_v2_reuses_the_space_added_before(tmp_path: Path) -> None:
    """V2 -> V3 -> V2 in place, from the DWARF CFI and from the file's own SFrame: no
    --old-kernels needed, each step grows the file by at most the growth of the
    section plus a page, and the last file is the first one again."""
    files = _build(tmp_path)
    for path in files.values():
        before = path.stat().st_size
        _convert(path)
        v2 = path.read_bytes()
        v2_section = _section_size(path)
        # The first conversion: at most the section plus a page.
        assert len(v2) - before <= v2_section + PAGE, path
        _convert(path, "--replace", "--sframe-version", "3")
        v3_section = _section_size(path)
        assert path.stat().st_size - len(v2) <= max(v3_section - v2_section, 0) + PAGE
        _runs(path, tmp_path)
        _verifies(path)
        _convert(path, "--replace")
        assert path.read_bytes() == v2
        _convert(path, "--source", "sframe", "--sframe-version", "3")
        assert path.stat().st_size - len(v2) <= max(v3_section - v2_section, 0) + PAGE
        _runs(path, tmp_path)
        # Made from the V2 section, which lacks what V3 alone holds: a program's _start
        # (an outermost frame), static glibc's _dl_runtime_* (FLEX FDEs); those are gaps.
        _verifies(path, gaps=not path.name.startswith("libz"))


def test_objects_and_archives_convert_again_in_their_space(tmp_path: Path) -> None:
    """A relocatable object and a static library, V2 -> V3 -> V2 in place: the old
    section, its relocations and the section header table are written again where
    they were (each conversion used to append a new copy), and the last file is the
    first one again; a program still links against the object."""
    require("gcc", "ar")
    require_path("/usr/lib/x86_64-linux-gnu/libexpat.a")
    (tmp_path / "f.c").write_text("int f(int x) { return x * 3; }\n"
                                  "int g(int x) { return f(x) + 1; }\n")
    obj = tmp_path / "f.o"
    subprocess.run(["gcc", "-O2", "-c", str(tmp_path / "f.c"), "-o", str(obj)], check=True)
    lib = tmp_path / "libexpat.a"
    shutil.copy("/usr/lib/x86_64-linux-gnu/libexpat.a", lib)
    for path in (obj, lib):
        _convert(path, "--objects")
        first = path.read_bytes()
        _convert(path, "--objects", "--replace", "--sframe-version", "3", "--linker-reads",
                 "any")
        assert path.stat().st_size <= len(first) + PAGE
        _convert(path, "--objects", "--replace")
        assert path.read_bytes() == first
        _verifies(path)
    (tmp_path / "main.c").write_text("int g(int); int main(void) { return g(2) - 7; }\n")
    program = tmp_path / "prog"
    subprocess.run(["gcc", str(tmp_path / "main.c"), str(obj), "-o", str(program)],
                   check=True)
    assert subprocess.run([str(program)], check=False).returncode == 0


def test_nothing_left_to_describe_takes_the_old_section_out(tmp_path: Path) -> None:
    """Scrt1.o: V3 describes its _start (an outermost frame), V2 cannot.  Converted to V3
    and then to V2 with --replace, it must not keep a section with no FDE (GNU ld
    refuses the .sframe of every later link against such an object): the section and
    its relocations are taken out, and a program links against it."""
    require("gcc", "readelf")
    require_path("/usr/lib/x86_64-linux-gnu/Scrt1.o")
    obj = tmp_path / "Scrt1.o"
    shutil.copy("/usr/lib/x86_64-linux-gnu/Scrt1.o", obj)
    _convert(obj, "--objects", "--sframe-version", "3", "--linker-reads", "any")
    assert " .sframe " in subprocess.run(["readelf", "-SW", str(obj)], capture_output=True,
                                         text=True).stdout.replace("[ ", "[")
    _convert(obj, "--objects", "--replace")
    sections = subprocess.run(["readelf", "-SW", str(obj)], capture_output=True, text=True,
                              check=True).stdout
    assert ".sframe" not in sections
    (tmp_path / "m.c").write_text("int main(void) { return 0; }\n")
    proc = subprocess.run(["gcc", "-nostartfiles", "-Wa,--gsframe",
                           "/usr/lib/x86_64-linux-gnu/crti.o", str(obj),
                           str(tmp_path / "m.c"), "/usr/lib/x86_64-linux-gnu/crtn.o", "-o",
                           str(tmp_path / "m")], capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and ".sframe" not in proc.stderr, proc.stderr


def _phnum(path: Path) -> int:
    return int.from_bytes(path.read_bytes()[0x38:0x3A], "little")


def _memory_end(path: Path) -> int:
    """The end of the file's memory image, rounded up to a page."""
    view = open_elf(path.read_bytes(), str(path))
    end = max(seg.vaddr + seg.memsz for seg in view.segments() if seg.kind == 1)
    return (end + PAGE - 1) // PAGE * PAGE


@pytest.mark.slow
def test_first_conversion_grows_a_file_by_the_section_and_at_most_a_page(
        tmp_path: Path) -> None:
    """A first conversion (after strip, as documented) grows a file by its .sframe, the
    program header table (where it was moved) and at most a page, and where a moved
    table's file ends below its memory image, by that difference too: the table's
    address must equal its offset for Linux before 5.18 and qemu-user.  A grown table
    (the dynamic program, libz) costs no such difference.  ``--old-kernels no`` writes
    no padding: within one page of the section."""
    files = _build(tmp_path)
    for path in files.values():
        subprocess.run(["strip", str(path)], check=True)
        small = path.with_name(path.name + ".no")
        shutil.copy(path, small)
        before = path.stat().st_size
        short = max(0, _memory_end(path) - before)
        _convert(path)
        table = _phnum(path) * 56
        assert path.stat().st_size - before <= _section_size(path) + table + short + PAGE, \
            path
        _runs(path, tmp_path)
        _verifies(path)
        _convert(small, "--old-kernels", "no")
        assert small.stat().st_size - before <= _section_size(small) + PAGE, small
        assert small.stat().st_size <= path.stat().st_size
        program = tmp_path / "prog" if path.name.startswith("libz") else small
        env = {"LD_LIBRARY_PATH": str(tmp_path), "PATH": "/usr/bin:/bin"}
        if path.name.startswith("libz"):  # the program with the small library
            shutil.copy(small, tmp_path / "libz.so.1.keep")
            shutil.copy(path, tmp_path / "libz.so.1.conv")
            shutil.copy(small, path)
        proc = subprocess.run([str(program)], capture_output=True, env=env, check=False)
        assert proc.returncode == 0, (small, proc.stderr)
        if path.name.startswith("libz"):
            shutil.copy(tmp_path / "libz.so.1.conv", path)
        _verifies(small)
