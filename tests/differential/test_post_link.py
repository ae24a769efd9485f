"""The post-link step (--in-place on linked files) moves nothing and survives the
tools that run after it (issue 13).

Programs built here by gcc and g++ (PIE with backtrace(), -no-pie, C++ exceptions,
a shared library and its user, a static program, csmith programs at -O2 and -O0)
and an installed library (Debian's libz.so.1, with a program using it) are
converted, then: every byte
of the original before the rewritten section name table is unchanged apart from
the four ELF header fields that locate the tables; nm, readelf's line table and
gdb's ``info line`` give the same answers; the program prints the same, natively
and under qemu-x86_64 (which, like Linux before 5.18, takes AT_PHDR from the first
segment); BFD strip in every mode (twice), Debian's dh_strip steps, eu-strip
(twice, -g, -f, then BFD strip) and debugedit give programs that print the same;
``verify`` finds them sound (and reports the one hazard BFD leaves in a file whose
table was moved: a table between sections); stripping first, then converting gives files that run
natively and under qemu and verify clean; the file grows by the section and less
than a page (a program's table grows where it is, into the bytes of .interp and the
notes, which move beside .sframe); a program without that room gets the moved table
and --old-kernels; a second run with --replace gives the same file; dwz afterwards
refuses or is caught by verify.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import pinned_notes_program, readelf_section, require, require_path
from tests.corpus import csmith_source

HELLO = r"""
#include <stdio.h>
#include <execinfo.h>
static int depth(int n) {
  if (n == 0) { void *b[32]; int k = backtrace(b, 32); printf("frames>3 %d\n", k > 3); return k; }
  return depth(n - 1) + 1;
}
int main(int c, char **v) { (void)v; printf("hi %d\n", depth(c + 2) > 0); return 0; }
"""
CXX = r"""
#include <cstdio>
#include <stdexcept>
static void f(int n) { if (n > 2) throw std::runtime_error("deep"); f(n + 1); }
int main() {
  try { f(0); } catch (const std::exception &e) { std::printf("caught %s\n", e.what()); }
}
"""
LIB = "int twice(int x) { return 2 * x; }\n"
USER = '#include <stdio.h>\nint twice(int);\nint main(void) { printf("%d\\n", twice(21)); }\n'
ZUSER = r"""
#include <stdio.h>
unsigned long crc32(unsigned long crc, const unsigned char *buf, unsigned len);
int compress(unsigned char *dest, unsigned long *destLen, const unsigned char *source,
             unsigned long sourceLen);
int main(void) {
  unsigned char out[256]; unsigned long n = sizeof out;
  int rc = compress(out, &n, (const unsigned char *)"hello hello hello hello", 23);
  printf("%lx %d %lu\n", crc32(0, (const unsigned char *)"hello", 5), rc, n);
  return 0;
}
"""
LIBZ = Path("/usr/lib/x86_64-linux-gnu/libz.so.1")
CSMITH = {"csmith1": ("1", ["-O2"]), "csmith2": ("2", ["-O2", "-no-pie"]),
          "csmith3": ("3", ["-O0"])}
PAGE = 0x1000


def _build(tmp: Path) -> dict[str, Path]:
    (tmp / "hello.c").write_text(HELLO)
    (tmp / "ex.cc").write_text(CXX)
    (tmp / "lib.c").write_text(LIB)
    (tmp / "user.c").write_text(USER)
    cmds = {
        "pie": ["gcc", "-O2", "-g", "hello.c", "-o", "pie"],
        "nopie": ["gcc", "-O2", "-g", "-no-pie", "hello.c", "-o", "nopie"],
        "cxx": ["g++", "-O2", "-g", "ex.cc", "-o", "cxx"],
        "libtwice.so": ["gcc", "-O2", "-g", "-shared", "-fPIC", "lib.c", "-o", "libtwice.so"],
        "user": ["gcc", "-O2", "-g", "user.c", "-L.", "-ltwice", "-Wl,-rpath,$ORIGIN",
                 "-o", "user"],
        "static": ["gcc", "-O2", "-static", "hello.c", "-o", "static"],
    }
    shutil.copy(LIBZ, tmp / "libz.so.1")
    (tmp / "zuser.c").write_text(ZUSER)
    cmds["zuser"] = ["gcc", "-O2", "-g", "zuser.c", "./libz.so.1", "-Wl,-rpath,$ORIGIN",
                     "-o", "zuser"]
    for name, (seed, flags) in CSMITH.items():
        source = csmith_source(seed, "--max-funcs", "8")
        (tmp / f"{name}.c").write_bytes(source)
        cmds[name] = ["gcc", *flags, "-g", "-w", "-I/usr/include/csmith", f"{name}.c",
                      "-o", name]
    for cmd in cmds.values():
        subprocess.run(cmd, cwd=tmp, check=True, capture_output=True)
    names = [*cmds, "libz.so.1"]
    # Every kind of file, none dropped: 6 built from the sources above, libz and its
    # user, 3 csmith programs.
    assert len(names) == 11, names
    return {name: tmp / name for name in names}


def _out(cmd: list[str], cwd: Path) -> str:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=60)
    return f"{proc.returncode}:{proc.stdout}"


def _header(data: bytes) -> tuple[int, int, int, int]:
    phoff, shoff = struct.unpack_from("<QQ", data, 0x20)
    phnum, = struct.unpack_from("<H", data, 0x38)
    shnum, = struct.unpack_from("<H", data, 0x3C)
    return phoff, shoff, phnum, shnum


def _convert(path: Path, *extra: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "cfi2sframe", "-w", "--in-place", *extra,
                           str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory
          ) -> tuple[Path, dict[str, Path], dict[str, str]]:
    """The programs, converted in place (originals in ``orig/``), and what each
    printed before."""
    require("gcc", "g++", "csmith")
    require_path(LIBZ)  # Debian's zlib1g, installed with gcc
    tmp = tmp_path_factory.mktemp("postlink")
    programs = _build(tmp)
    before = {name: path.read_bytes() for name, path in programs.items()}
    outputs = {name: _out([f"./{name}"], tmp) for name in programs if ".so" not in name}
    orig = tmp / "orig"
    orig.mkdir()
    for name, path in programs.items():
        (orig / name).write_bytes(before[name])
        _convert(path)
    return tmp, programs, outputs


# The sections a program's table may grow into, which move to the new segment: .interp,
# the notes and the symbol hash tables (SHT_NOTE, SHT_HASH, SHT_GNU_HASH), and the
# dynamic linking tables (SHT_DYNSYM, SHT_STRTAB, SHT_GNU_verdef, _verneed, _versym).
MOVABLE_KINDS = (7, 5, 0x6FFFFFF6, 11, 3, 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF)
# Their dynamic tags (gABI: DT_HASH, DT_STRTAB, DT_SYMTAB; GNU: DT_GNU_HASH, DT_VERSYM,
# DT_VERDEF, DT_VERNEED).
MOVABLE_TAGS = (4, 5, 6, 0x6FFFFEF5, 0x6FFFFFF0, 0x6FFFFFFC, 0x6FFFFFFE)


def _moved(old: bytes, new: bytes, name: str) -> list[int]:
    """The indices of the sections whose address or offset the conversion changed."""
    from cfi2sframe.elf.read import open_elf

    was, view = open_elf(old, name), open_elf(new, name)
    return [i for i, (a, b) in enumerate(zip(was.sections, view.sections, strict=False))
            if a.name != ".shstrtab" and (a.addr, a.offset) != (b.addr, b.offset)]


def test_nothing_moves_and_the_growth_is_bounded(built, report) -> None:
    """Every section keeps its name, size, offset, address and bytes, but the few a
    program's table grows into (.interp, the notes, the hash tables, and .dynsym in
    libtwice.so), which keep their bytes at their new place; the dynamic entries and
    symbols that change are exactly those of the moved sections; a program's table keeps
    its offset (e_phoff) and so its address, where Linux before 5.18 finds it; each file
    grows by its .sframe and at most a page."""
    from cfi2sframe.elf.read import open_elf

    tmp, programs, _ = built
    grown = 0
    for name, path in programs.items():
        old, new = (tmp / "orig" / name).read_bytes(), path.read_bytes()
        view, was = open_elf(new, name), open_elf(old, name)
        assert new[:0x20] == old[:0x20], name
        moved = _moved(old, new, name)
        for i in moved:
            section = was.sections[i]
            assert section.name == ".interp" or section.kind in MOVABLE_KINDS, (name, section)
        for a, b in zip(was.sections, view.sections, strict=False):
            if a.name == ".shstrtab":
                continue
            assert (a.name, a.kind, a.size) == (b.name, b.kind, b.size), name
            if a.kind != 8 and a.name not in (".dynamic", ".dynsym", ".symtab"):
                assert old[a.offset:a.offset + a.size] == new[b.offset:b.offset + b.size], \
                    (name, a.name)
        moved_addresses = {was.sections[i].addr for i in moved}
        dynamic = was.section(".dynamic")
        if dynamic is not None:
            before = list(struct.iter_unpack("<qQ", old[dynamic.offset:dynamic.offset
                                                        + dynamic.size]))
            after = list(struct.iter_unpack("<qQ", new[dynamic.offset:dynamic.offset
                                                       + dynamic.size]))
            changed = [(tag, value) for (tag, value), new_entry in zip(before, after,
                                                                        strict=True)
                       if (tag, value) != new_entry]
            # the tags of the moved tables only
            assert all(tag in MOVABLE_TAGS and value in moved_addresses
                       for tag, value in changed), (name, changed)
        for index, table in ((i, s) for i, s in enumerate(was.sections) if s.kind in (2, 11)):
            at = view.sections[index].offset  # a moved .dynsym is read where it went
            rows = zip(struct.iter_unpack("<IBBHQQ", old[table.offset:table.offset
                                                         + table.size]),
                       struct.iter_unpack("<IBBHQQ", new[at:at + table.size]), strict=True)
            assert all(a == b or a[3] in moved for a, b in rows), (name, table.name)
        sframe = view.section(".sframe")
        assert sframe is not None
        if _header(new)[0] == _header(old)[0]:
            grown += 1
            assert _first_segment_rule(path), name
        growth = len(new) - len(old)
        assert growth - sframe.size <= PAGE, (name, growth, sframe.size)
        report(f"post-link {name}: {len(old)} -> {len(new)} bytes (.sframe {sframe.size}, "
               f"moved {[was.sections[i].name for i in moved]})")
    # Every program here has room but the static one (104 bytes of the 112 it needs:
    # .rela.plt follows its notes); the libraries take whichever layout is smaller.
    assert grown >= 8, grown


def test_programs_print_the_same_natively_and_under_qemu(built) -> None:
    require("qemu-x86_64")
    tmp, _, before = built
    assert len(before) == 9  # every file above but the libraries libtwice.so and libz.so.1
    for name, expected in before.items():
        assert _out([f"./{name}"], tmp) == expected, name
        assert _out(["qemu-x86_64", f"./{name}"], tmp) == expected, name


# What verify says after BFD's strip or objcopy wrote the file: the table lies between
# two sections, uncovered.  True: the file runs, BFD may run again, but eu-strip
# zero-fills the table where it has something left to remove (tests/system/test_layout.py).
BFD_PROBLEM = "lies between sections and no section covers it"


def _layout(folder: Path, names: list[str]) -> dict[str, list[str]]:
    """verify's layout problems, per file."""
    from cfi2sframe.elf.layout import layout_problems
    from cfi2sframe.elf.read import open_elf

    return {name: [p.text for p in layout_problems(open_elf((folder / name).read_bytes(),
                                                            name), PAGE)]
            for name in names}


def _run_steps(work: Path, names: list[str], steps: list[list[str]]) -> None:
    for name in names:
        for step in steps:
            cmd = [part.replace("{}", name) for part in step]
            proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
            assert proc.returncode == 0, (cmd, proc.stderr)


# What Debian's dh_strip runs: the debug file, strip, the link to it.
DH_STRIP = [["objcopy", "--only-keep-debug", "--compress-debug-sections", "{}", "{}.debug"],
            ["strip", "--remove-section=.comment", "--remove-section=.note",
             "--strip-unneeded", "{}"],
            ["objcopy", "--add-gnu-debuglink", "{}.debug", "{}"]]

# Each recipe run on the converted files, and whether BFD wrote the file last.
AFTER: dict[str, tuple[list[list[str]], bool]] = {
    "strip-twice": ([["strip", "{}"]] * 2, True),
    "strip-debug-twice": ([["strip", "--strip-debug", "{}"]] * 2, True),
    "strip-unneeded-twice": ([["strip", "--strip-unneeded", "{}"]] * 2, True),
    "strip-all-twice": ([["strip", "--strip-all", "{}"]] * 2, True),
    "dh_strip": (DH_STRIP, True),
    "debuglink": ([["objcopy", "--only-keep-debug", "{}", "{}.debug"],
                   ["objcopy", "--strip-debug", "--add-gnu-debuglink={}.debug", "{}"]], True),
    "eu-strip-twice": ([["eu-strip", "{}"]] * 2, False),
    "eu-strip-g": ([["eu-strip", "-g", "{}"]], False),
    "eu-strip-f": ([["eu-strip", "--remove-comment", "-f", "{}.debug", "{}"]], False),
    "eu-strip-then-strip": ([["eu-strip", "{}"], ["strip", "{}"]], True),
}


def test_strip_after_conversion_keeps_them_running(built, report) -> None:
    """Every strip recipe after the conversion: the programs print the same natively
    and, where the table grew in place, also under qemu-user after BFD's tools (qemu,
    like Linux before 5.18, takes AT_PHDR from the first segment): the grown table is
    where BFD keeps it, so verify finds no problem.  A file whose table was moved (the
    static program: its notes are followed at once by .rela.plt, which its code
    addresses, leaving 104 of the 112 bytes two entries take) gets the one hazard BFD
    leaves, named, which --replace repairs (tests/system/test_strip_orders.py)."""
    require("strip", "objcopy", "eu-strip", "qemu-x86_64")
    tmp, programs, before = built
    table_moved = {name for name, path in programs.items()
                   if _header(path.read_bytes())[0] != _header((tmp / "orig" /
                                                                name).read_bytes())[0]}
    for recipe, (steps, bfd_last) in AFTER.items():
        work = tmp / f"after-{recipe}"
        work.mkdir()
        for name, path in programs.items():
            shutil.copy(path, work / name)
        _run_steps(work, list(programs), steps)
        for name, expected in before.items():
            assert _out([f"./{name}"], work) == expected, (recipe, name)
            if bfd_last and name not in table_moved and recipe in ("strip-all-twice",
                                                                   "dh_strip"):
                assert _out(["qemu-x86_64", f"./{name}"], work) == expected, (recipe, name)
        for name, problems in _layout(work, list(programs)).items():
            if bfd_last and name in table_moved:
                assert len(problems) == 1 and BFD_PROBLEM in problems[0], (recipe, name)
            else:
                assert problems == [], (recipe, name, problems)
        if any("--add-gnu-debuglink" in part for step in steps for part in step):
            # The split debug file (BFD warns "can't be allocated in segment 0" while
            # writing it) serves gdb through the debuglink.
            require("gdb")
            lines = subprocess.run(["gdb", "-nx", "-batch", "-ex", "info line main", "pie"],
                                   cwd=work, capture_output=True, text=True).stdout
            assert "starts at address" in lines, (recipe, lines)
    report(f"post-link: {len(AFTER)} strip recipes after conversion x {len(programs)} "
           f"files: all run; verify clean but for {len(table_moved)} with a moved table "
           "after BFD")


def test_strip_first_then_convert_passes_everything(built, report) -> None:
    """The README's order for packages: dh_strip's steps, then cfi2sframe.  The result
    runs (natively and under qemu), verifies clean, and survives eu-strip and strip."""
    require("strip", "objcopy", "eu-strip", "qemu-x86_64")
    tmp, programs, before = built
    work = tmp / "strip-first"
    work.mkdir()
    for name in programs:
        shutil.copy(tmp / "orig" / name, work / name)
        (work / name).chmod(0o755)
    _run_steps(work, list(programs), DH_STRIP)
    for name in programs:
        # Stripped, csmith2 (-no-pie, a large .data) is far shorter than its memory
        # image: its table grows where it is, so no option and no zeros are needed.
        _convert(work / name, "--replace")
    for name, expected in before.items():
        assert _out([f"./{name}"], work) == expected, name
        assert _first_segment_rule(work / name), name
        assert _out(["qemu-x86_64", f"./{name}"], work) == expected, name
    assert _layout(work, list(programs)) == {name: [] for name in programs}
    for step in (["eu-strip", "{}"], ["strip", "{}"]):
        _run_steps(work, list(programs), [step])
        for name, expected in before.items():
            assert _out([f"./{name}"], work) == expected, (step, name)
    report(f"post-link: dh_strip then cfi2sframe, {len(programs)} files with the defaults: "
           "run natively and under qemu, verify clean, then eu-strip and strip: all run")


def test_a_program_shorter_than_its_image_needs_no_zeros(built, tmp_path: Path) -> None:
    """A stripped -no-pie program with a large .data (far shorter than its memory image,
    refused by default before): its table grows where it is, so the first-segment rule
    holds (it runs under qemu-user) and the file grows by its .sframe and less than a
    page."""
    require("strip", "qemu-x86_64")
    tmp, _, before = built
    program = tmp_path / "csmith2"
    shutil.copy(tmp / "orig" / "csmith2", program)
    program.chmod(0o755)
    subprocess.run(["strip", str(program)], check=True)
    size = program.stat().st_size
    _convert(program)
    assert _out([str(program)], tmp_path) == before["csmith2"]
    assert _out(["qemu-x86_64", str(program)], tmp_path) == before["csmith2"]
    assert _first_segment_rule(program)
    from cfi2sframe.elf.read import open_elf
    sframe = open_elf(program.read_bytes(), "csmith2").section(".sframe")
    assert sframe is not None and program.stat().st_size - size - sframe.size < PAGE


def test_no_room_moves_the_table_and_old_kernels_chooses(tmp_path: Path) -> None:
    """A program whose notes cannot move (tests/conftest.py pinned_notes_program) gets
    the moved table.  With a 1 MiB .bss, keeping it where Linux before 5.18 looks takes
    a megabyte of zeros: refused by default with one line naming the choices;
    --old-kernels pad runs everywhere (the first-segment rule), --old-kernels no runs
    natively without the zeros."""
    require("qemu-x86_64")
    program = pinned_notes_program(tmp_path, 1 << 20)
    expected = _out(["./pinned"], tmp_path)
    assert expected == "0:1 1\n"
    size = program.stat().st_size
    proc = subprocess.run([sys.executable, "-m", "cfi2sframe", "-w", "--in-place",
                           "pinned"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 1 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "--old-kernels pad" in proc.stderr and program.stat().st_size == size
    padded, new_only = tmp_path / "padded", tmp_path / "new-only"
    for copy, choice in ((padded, "pad"), (new_only, "no")):
        shutil.copy(program, copy)
        _convert(copy, "--old-kernels", choice)
        assert _out([str(copy)], tmp_path) == expected
    assert _first_segment_rule(padded) and not _first_segment_rule(new_only)
    assert _out(["qemu-x86_64", str(padded)], tmp_path) == expected
    assert new_only.stat().st_size - size < 3 * PAGE
    assert padded.stat().st_size > size + (1 << 20)


def _first_segment_rule(path: Path) -> bool:
    """The table's address minus its offset is the first PT_LOAD's."""
    from cfi2sframe.elf.read import open_elf

    data = path.read_bytes()
    loads = [s for s in open_elf(data, path.name).segments() if s.kind == 1]
    phoff = _header(data)[0]
    holder = next(s for s in loads if s.offset <= phoff < s.offset + s.filesz)
    return holder.vaddr - holder.offset == loads[0].vaddr - loads[0].offset


def test_debug_answers_are_unchanged(built) -> None:
    """nm, the line table and gdb's ``info line`` give the same answers, but for the
    symbols of the sections a program's table grew into (``__abi_tag``, in its note),
    which follow their section."""
    require("gdb", "nm", "readelf")
    from cfi2sframe.elf.read import open_elf

    tmp, programs, _ = built
    for name in [name for name in programs if name not in ("static", "libz.so.1")]:
        old, new = tmp / "orig" / name, programs[name]
        was = open_elf(old.read_bytes(), name)
        spans = [(was.sections[i].addr, was.sections[i].addr + was.sections[i].size)
                 for i in _moved(old.read_bytes(), new.read_bytes(), name)]
        in_moved = {line.split()[2] for line in subprocess.run(
            ["nm", str(old)], capture_output=True, text=True).stdout.splitlines()
            if len(line.split()) == 3
            and any(lo <= int(line.split()[0], 16) < hi for lo, hi in spans)}
        for cmd in (["nm"], ["readelf", "--debug-dump=line"]):
            a, b = (
                "\n".join(line for line in subprocess.run(
                    [*cmd, str(path)], capture_output=True, text=True).stdout.replace(
                        str(path), "F").splitlines() if line.split()[-1:] != [] and
                    line.split()[-1] not in in_moved)
                for path in (old, new))
            assert a == b, (name, cmd)
        functions = [line.split()[2] for line in
                     subprocess.run(["nm", str(old)], capture_output=True,
                                    text=True).stdout.splitlines()
                     if len(line.split()) == 3 and line.split()[1] in "tT"]
        args = [a for f in functions for a in ("-ex", f"info line {f}")]
        a, b = (subprocess.run(["gdb", "-nx", "-batch", *args, str(p)], capture_output=True,
                               text=True).stdout for p in (old, new))
        assert a == b and "starts at address" in a, name


def test_a_second_run_with_replace_gives_the_same_file(built) -> None:
    tmp, programs, _ = built
    for name, path in programs.items():
        again = tmp / f"again-{name}"
        shutil.copy(path, again)
        _convert(again, "--replace")
        assert again.read_bytes() == path.read_bytes(), name


def test_dwz_afterwards_refuses_or_is_caught_by_verify(tmp_path: Path, report) -> None:
    """dwz after cfi2sframe (the README says: before).  dwz shifts every section after
    the debug sections it shrinks, allocated ones included, without touching the
    segments; it refuses only when the shift misaligns something.  So on most files it
    exits 1 and leaves them alone, and on the rest it exits 0 with .sframe's bytes
    moved away from where PT_GNU_SFRAME maps them: verify must report those."""
    require("gcc", "csmith", "dwz")
    refused = caught = 0
    for seed in ("26", "32", "39", "12", "13", "14"):
        source = csmith_source(seed, "--max-funcs", "8")
        (tmp_path / f"c{seed}.c").write_bytes(source)
        program = tmp_path / f"c{seed}"
        subprocess.run(["gcc", "-O2", "-g", "-w", "-I/usr/include/csmith", f"c{seed}.c",
                        "-o", program.name], cwd=tmp_path, check=True, capture_output=True)
        _convert(program)
        converted = program.read_bytes()
        proc = subprocess.run(["dwz", str(program)], capture_output=True, text=True)
        if proc.returncode:
            assert "Allocatable section" in proc.stderr and program.read_bytes() == converted
            refused += 1
            continue
        problems = _layout(tmp_path, [program.name])[program.name]
        assert any("section '.sframe'" in p for p in problems), (seed, problems)
        caught += 1
    assert refused and caught, (refused, caught)
    report(f"post-link: dwz afterwards: {refused} refused (file untouched), {caught} "
           "accepted with .sframe moved off its segment, each reported by verify")


def test_debugedit_afterwards_keeps_them_running_and_sound(built, report) -> None:
    """debugedit (rpm's find-debuginfo, Debian's dh_strip with build-id seeds) rewrites
    the source paths in the debug sections, which grows them, and the build-id: the
    converted files still run, verify clean, and gdb sees the new paths."""
    require("debugedit")
    tmp, programs, before = built
    work = tmp / "debugedit"
    work.mkdir()
    dest = "/usr/src/debug/cfi2sframe-test/a-longer-path-than-before"
    for name, path in programs.items():
        shutil.copy(path, work / name)
        proc = subprocess.run(["debugedit", "-b", str(tmp), "-d", dest, "-i", name],
                              cwd=work, capture_output=True, text=True)
        assert proc.returncode == 0, (name, proc.stderr)
    for name, expected in before.items():
        assert _out([f"./{name}"], work) == expected, name
    assert _layout(work, list(programs)) == {name: [] for name in programs}
    info = subprocess.run(["readelf", "--debug-dump=info", "pie"], cwd=work,
                          capture_output=True, text=True).stdout
    assert dest in info
    report(f"post-link: debugedit on {len(programs)} converted files: all run, layout sound")


def _readelf_rows(path: Path, option: str, kind: str) -> list[list[str]]:
    """The rows of ``readelf -W option`` whose first word (after the index) is ``kind``."""
    text = subprocess.run(["readelf", "-W", option, str(path)], capture_output=True,
                          text=True, check=True).stdout
    rows = [line.split("]", 1)[1].split() if "]" in line else line.split()
            for line in text.splitlines()]
    return [row for row in rows if row[:1] == [kind]]


def test_a_library_table_follows_its_sframe(tmp_path: Path) -> None:
    """Libraries whose .gnu.hash is larger than a page move their table instead, right
    after .sframe, which is zero-padded to 8 bytes (BFD writes the table's segment where
    the section before it ends, unpadded, and keeps its address: so that address is
    congruent to the table's offset only from an 8-byte boundary).  For .sframe sizes
    of several remainders modulo 8 (the sections before padding, --emit raw): no padding
    (each file grows by under a page besides .sframe), every PT_LOAD's offset congruent to
    its address (readelf), loaded by ld.so natively and under qemu-user before and after
    BFD's strip twice, and V3 then V2 again gives the same bytes."""
    require("gcc", "strip", "readelf", "qemu-x86_64")
    probe = tmp_path / "probe.c"
    probe.write_text("#include <dlfcn.h>\n#include <stdio.h>\nint main(int c, char **v) {\n"
                     "  void *h = dlopen(v[1], RTLD_NOW | RTLD_LOCAL);\n"
                     "  int (*f)(int) = h ? (int (*)(int))dlsym(h, \"f7\") : 0;\n"
                     "  printf(\"%d\\n\", f ? f(c) : -1);\n  return 0;\n}\n")
    subprocess.run(["gcc", "-o", str(tmp_path / "probe"), str(probe), "-ldl"], check=True)
    remainders = set()
    for n in range(1200, 1206):
        source = tmp_path / f"lib{n}.c"
        source.write_text("".join(f"int f{i}(int x) {{ return x * {i + 2}; }}\n"
                                  for i in range(n)))
        library = tmp_path / f"lib{n}.so"
        subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(library), str(source)],
                       check=True)
        raw = tmp_path / f"lib{n}.sframe"
        proc = subprocess.run([sys.executable, "-m", "cfi2sframe", str(library), "--emit",
                               "raw", "-o", str(raw)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        size = raw.stat().st_size
        remainders.add(size % 8)
        before = library.stat().st_size
        _convert(library)
        converted = library.read_bytes()
        _, offset = readelf_section(library, ".sframe")
        phoff = _header(converted)[0]
        assert phoff == offset + -(-size // 8) * 8, (n, size)
        assert len(converted) - before - size < PAGE, n
        stripped = tmp_path / f"lib{n}.stripped.so"
        shutil.copy(library, stripped)
        for _ in range(2):
            subprocess.run(["strip", str(stripped)], check=True)
        for path in (library, stripped):
            for row in _readelf_rows(path, "-l", "LOAD"):
                assert int(row[1], 16) % PAGE == int(row[2], 16) % PAGE, (path, row)
            for runner in ([], ["qemu-x86_64"]):
                assert _out([*runner, str(tmp_path / "probe"), str(path)], tmp_path) \
                    == "0:18\n", (runner, path)
        _convert(library, "--replace", "--sframe-version", "3")
        _convert(library, "--replace")
        assert library.read_bytes() == converted, n
    assert 0 in remainders and len(remainders) > 1, remainders


VERSIONED = r"""
#include <unistd.h>
const char interp[] __attribute__((section(".interp"))) = "/lib64/ld-linux-x86-64.so.2";
int twice_old(int x) { return 2 * x + 1; }
int twice_new(int x) { return 2 * x; }
__asm__(".symver twice_old, twice@LIBT_2.2.5");
__asm__(".symver twice_new, twice@@LIBT_2.3");
int counter = 7;
void entry(void) { static const char m[] = "runnable\n"; write(1, m, sizeof m - 1); _exit(0); }
"""
# libc-like versions: an old default kept (twice@LIBT_2.2.5) beside the new one.
VERSION_SCRIPT = ("LIBT_2.2.5 { global: twice; counter; local: *; };\n"
                  "LIBT_2.3 { global: twice; } LIBT_2.2.5;\n")
VERSIONED_PROBE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
int main(int c, char **v) {
  (void)c; void *h = dlopen(v[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) { printf("%s\n", dlerror()); return 1; }
  int (*o)(int) = (int (*)(int))dlvsym(h, "twice", "LIBT_2.2.5");
  int (*n)(int) = (int (*)(int))dlvsym(h, "twice", "LIBT_2.3");
  int (*d)(int) = (int (*)(int))dlsym(h, "twice");
  int *k = (int *)dlsym(h, "counter");
  printf("%d %d %d %d\n", o(20), n(20), d(20), *k);
  return 0;
}
"""
VERSIONED_USER = ('#include <stdio.h>\nint twice(int); extern int counter;\n'
                  'int main(void) { printf("%d %d\\n", twice(21), counter); return 0; }\n')
PAM_CAP = Path("/usr/lib/x86_64-linux-gnu/security/pam_cap.so")
# readelf -d names of the tags that follow a moved table, and the section each names.
TAG_SECTIONS = {"SYMTAB": ".dynsym", "STRTAB": ".dynstr", "VERSYM": ".gnu.version",
                "VERNEED": ".gnu.version_r", "VERDEF": ".gnu.version_d",
                "GNU_HASH": ".gnu.hash"}


def _dynamic_tables(path: Path) -> dict[str, tuple[int, int]]:
    """(tag's value, address of the section it should name) by readelf -d tag name."""
    text = subprocess.run(["readelf", "-dW", str(path)], capture_output=True, text=True,
                          check=True).stdout
    rows = [line.split() for line in text.splitlines() if line.strip().startswith("0x")]
    tags = {row[1].strip("()"): int(row[2], 16) for row in rows
            if row[1].strip("()") in TAG_SECTIONS}
    return {tag: (tags[tag], readelf_section(path, name)[0])
            for tag, name in TAG_SECTIONS.items() if tag in tags}


def _symbol_answers(path: Path) -> list[str]:
    """readelf's dynamic symbols and version tables (but the tables' own addresses and
    offsets) and nm -D: what a moved table must answer the same."""
    out = []
    for cmd in (["readelf", "-W", "--dyn-syms", "-V"], ["nm", "-D"]):
        text = subprocess.run([*cmd, str(path)], capture_output=True, text=True,
                              check=True).stdout
        out += [line for line in text.splitlines() if "Addr:" not in line]
    return out


def test_dynamic_tables_move_with_a_grown_table(tmp_path: Path, report) -> None:
    """Where .dynsym directly follows the sections a table grows into (a gold-linked PIE
    without a build-id note, a symbol-versioned library, the same library runnable with
    PT_INTERP and an entry point, and Debian's pam_cap.so, whose table was moved before
    at 6,526 bytes beyond .sframe, 5,486 of them zeros up to its memory image): the
    table grows where it is (e_phoff kept, the first-segment rule) and .dynsym moves
    with the tables in front of it; DT_SYMTAB, DT_GNU_HASH (and DT_STRTAB, DT_VERSYM,
    ... where those moved) name the moved sections (readelf -d against readelf -S);
    readelf --dyn-syms -V and nm -D answer the same; each grows by its .sframe and at
    most a page; the programs print the same natively and under qemu-x86_64, the
    libraries dlopen with every version resolving (dlvsym), before and after BFD's
    strip."""
    require("gcc", "ld.gold", "strip", "readelf", "nm", "qemu-x86_64")
    require_path(PAM_CAP)
    for name, text in (("v.c", VERSIONED), ("v.map", VERSION_SCRIPT),
                       ("probe.c", VERSIONED_PROBE), ("u.c", VERSIONED_USER)):
        (tmp_path / name).write_text(text)
    library = ["gcc", "-O2", "-shared", "-fPIC", "-Wl,--build-id=none",
               "-Wl,--version-script=v.map", "v.c"]
    for cmd in ([*library, "-o", "libv.so"], [*library, "-Wl,-e,entry", "-o", "runv.so"],
                ["gcc", "-O2", "-fuse-ld=gold", "-Wl,--build-id=none", "u.c", "-L.", "-lv",
                 "-Wl,-rpath,$ORIGIN", "-o", "pie"],
                ["gcc", "-O2", "probe.c", "-o", "probe", "-ldl"]):
        subprocess.run(cmd, cwd=tmp_path, check=True, capture_output=True)
    shutil.copy(PAM_CAP, tmp_path / "pam_cap.so")
    (tmp_path / "pam_cap.so").chmod(0o755)
    orig = tmp_path / "orig"
    orig.mkdir()
    names = ["libv.so", "runv.so", "pie", "pam_cap.so"]
    runs = {"libv.so": [["./probe", "./libv.so"]],
            "runv.so": [["./probe", "./runv.so"], ["./runv.so"]],
            "pie": [["./pie"]], "pam_cap.so": [["./pam_cap.so"]]}
    expected = {"libv.so": ["0:41 40 40 7\n"], "runv.so": ["0:41 40 40 7\n", "0:runnable\n"],
                "pie": ["0:42 7\n"]}
    expected["pam_cap.so"] = [_out(["./pam_cap.so"], tmp_path)]
    assert "PAM module" in expected["pam_cap.so"][0]
    for name in names:
        shutil.copy(tmp_path / name, orig / name)
        phoff, _, phnum, _ = _header((tmp_path / name).read_bytes())
        # .dynsym starts before the table's end with two more entries: it must move
        assert readelf_section(tmp_path / name, ".dynsym")[1] < phoff + 56 * (phnum + 2)
        _convert(tmp_path / name)
    stripped = tmp_path / "stripped"
    stripped.mkdir()
    for name in names:
        old, new = orig / name, tmp_path / name
        old_bytes, new_bytes = old.read_bytes(), new.read_bytes()
        assert _header(new_bytes)[0] == _header(old_bytes)[0] and _first_segment_rule(new)
        assert readelf_section(new, ".dynsym") != readelf_section(old, ".dynsym"), name
        tables = _dynamic_tables(new)
        assert {"SYMTAB", "STRTAB", "GNU_HASH"} <= set(tables), (name, tables)
        assert all(value == address for value, address in tables.values()), (name, tables)
        assert _symbol_answers(new) == _symbol_answers(old), name
        sframe = readelf_section(new, ".sframe")
        size = int(next(row for row in _readelf_rows(new, "-S", ".sframe"))[4], 16)
        growth = len(new_bytes) - len(old_bytes) - size
        assert 0 < growth <= PAGE, (name, growth)
        report(f"post-link {name}: {len(old_bytes)} -> {len(new_bytes)} bytes "
               f"(.sframe {size} at {sframe[1]:#x}, beyond it {growth})")
        shutil.copy(new, stripped / name)
        subprocess.run(["strip", str(stripped / name)], check=True)
    shutil.copy(tmp_path / "probe", stripped / "probe")
    for folder in (tmp_path, stripped):
        for name in names:
            for cmd, want in zip(runs[name], expected[name], strict=True):
                for runner in ([], ["qemu-x86_64"]):
                    assert _out([*runner, *cmd], folder) == want, (folder, runner, cmd)
    assert _symbol_answers(stripped / "libv.so") == _symbol_answers(orig / "libv.so")



def _patched(source: Path, target: Path, section: str, row: str, match: int,
             field: int, value: int) -> None:
    """``target``: ``source`` with field ``field`` of the first ``row``-packed entry of
    ``section`` whose field 0 (a dynamic tag) or, for RELA, type (info & 0xffffffff)
    is ``match`` set to ``value``."""
    data = bytearray(source.read_bytes())
    _, offset = readelf_section(source, section)
    size = struct.calcsize(row)
    for at in range(offset, len(data) - size, size):
        entry = list(struct.unpack_from(row, data, at))
        key = entry[1] & 0xFFFFFFFF if section.startswith(".rela") else entry[0]
        if key == match:
            entry[field] = value
            struct.pack_into(row, data, at, *entry)
            target.write_bytes(bytes(data))
            return
    raise AssertionError((source, section, match))


def test_dynamic_tables_referred_to_otherwise_keep_their_place(tmp_path: Path) -> None:
    """The symbol-versioned library above, where .dynsym (and .gnu.hash before it) must
    move for the table to grow, but something besides DT_SYMTAB refers into it (written
    into a copy by hand, as gABI lays the entries out): a RELATIVE relocation's addend
    (.dynsym + 8, or its last byte), another address tag (DT_VERSYM at .dynsym + 24),
    or DT_SYMTAB itself not at its start.  The table is then moved (e_phoff changes)
    and .dynsym keeps its address; the unchanged library, and the addend one past
    .dynsym (.dynstr, which stays), keep e_phoff."""
    require("gcc", "readelf")
    (tmp_path / "v.c").write_text(VERSIONED)
    (tmp_path / "v.map").write_text(VERSION_SCRIPT)
    plain = tmp_path / "libv.so"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-Wl,--build-id=none",
                    "-Wl,--version-script=v.map", "v.c", "-o", "libv.so"],
                   cwd=tmp_path, check=True, capture_output=True)
    dynsym, _ = readelf_section(plain, ".dynsym")
    dynstr, _ = readelf_section(plain, ".dynstr")  # right after .dynsym, stays
    cases = {"relocated": (".rela.dyn", "<QQq", 8, 2, dynsym + 8),  # R_X86_64_RELATIVE
             "last-byte": (".rela.dyn", "<QQq", 8, 2, dynstr - 1),  # .dynsym's last byte
             "past-end": (".rela.dyn", "<QQq", 8, 2, dynstr),  # one past: not moved
             "tagged": (".dynamic", "<qQ", 0x6FFFFFF0, 1, dynsym + 24),  # DT_VERSYM
             "off-start": (".dynamic", "<qQ", 6, 1, dynsym + 24)}  # DT_SYMTAB not at it
    for name, (section, row, match, field, value) in cases.items():
        _patched(plain, tmp_path / f"{name}.so", section, row, match, field, value)
    for path, kept in ((plain, True), *((tmp_path / f"{name}.so", name == "past-end")
                                        for name in cases)):
        phoff = _header(path.read_bytes())[0]
        _convert(path)
        assert (_header(path.read_bytes())[0] == phoff) == kept, path.name
        assert (readelf_section(path, ".dynsym")[0] == dynsym) != kept, path.name


def test_dynamic_tables_move_on_aarch64(tmp_path: Path) -> None:
    """The runnable symbol-versioned library for AArch64 (cross gcc, .dynsym right after
    .gnu.hash): its table grows where it is, .dynsym and the tables before it move,
    DT_SYMTAB and the others name them, readelf and nm answer the same, and under
    qemu-aarch64 it runs and dlopens with every version resolving, before and after
    the cross strip."""
    require("aarch64-linux-gnu-gcc", "aarch64-linux-gnu-strip", "qemu-aarch64", "readelf")
    (tmp_path / "v.c").write_text(VERSIONED.replace("/lib64/ld-linux-x86-64.so.2",
                                                    "/lib/ld-linux-aarch64.so.1"))
    (tmp_path / "v.map").write_text(VERSION_SCRIPT)
    (tmp_path / "probe.c").write_text(VERSIONED_PROBE)
    gcc = "aarch64-linux-gnu-gcc"
    for cmd in ([gcc, "-O2", "-shared", "-fPIC", "-Wl,--build-id=none",
                 "-Wl,--version-script=v.map", "-Wl,-e,entry", "v.c", "-o", "runv.so"],
                [gcc, "-O2", "probe.c", "-o", "probe", "-ldl"]):
        subprocess.run(cmd, cwd=tmp_path, check=True, capture_output=True)
    library, old = tmp_path / "runv.so", tmp_path / "runv.orig"
    shutil.copy(library, old)
    phoff, _, phnum, _ = _header(old.read_bytes())
    assert readelf_section(old, ".dynsym")[1] < phoff + 56 * (phnum + 2)
    _convert(library)
    assert _header(library.read_bytes())[0] == phoff and _first_segment_rule(library)
    assert readelf_section(library, ".dynsym") != readelf_section(old, ".dynsym")
    tables = _dynamic_tables(library)
    assert {"SYMTAB", "GNU_HASH"} <= set(tables)
    assert all(value == address for value, address in tables.values()), tables
    assert _symbol_answers(library) == _symbol_answers(old)
    stripped = tmp_path / "stripped.so"
    shutil.copy(library, stripped)
    subprocess.run(["aarch64-linux-gnu-strip", str(stripped)], check=True)
    qemu = ["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"]
    for path in (library, stripped):
        assert _out([*qemu, "./probe", str(path)], tmp_path) == "0:41 40 40 7\n", path
        assert _out([*qemu, str(path)], tmp_path) == "0:runnable\n", path
