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
``verify`` finds the eu-stripped files sound and reports the one hazard BFD leaves
(a table between sections); stripping first, then converting gives files that run
natively and under qemu and verify clean; the file grows by the section, the
moved table and less than a page (two for a file
shorter than its memory image); a second run with --replace gives the same file;
dwz afterwards refuses or is caught by verify.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require, require_path
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


def test_nothing_moves_and_the_growth_is_bounded(built, report) -> None:
    from cfi2sframe.elf.read import open_elf

    tmp, programs, _ = built
    for name, path in programs.items():
        old, new = (tmp / "orig" / name).read_bytes(), path.read_bytes()
        view, was = open_elf(new, name), open_elf(old, name)
        shstrndx, = struct.unpack_from("<H", old, 0x3E)
        cut = min(was.sections[shstrndx].offset, _header(old)[1])
        assert new[:0x20] == old[:0x20] and new[0x40:cut] == old[0x40:cut], name
        for a, b in zip(was.sections, view.sections[: len(was.sections)], strict=True):
            if a.name != ".shstrtab":
                assert (a.name, a.addr, a.offset, a.size) == (b.name, b.addr, b.offset, b.size)
        sframe = view.section(".sframe")
        assert sframe is not None
        table = _header(new)[2] * 56
        growth = len(new) - len(old)
        # One page of alignment, and one more where the file is shorter than its
        # memory image (.bss): the table's offset must equal its address minus the
        # first segment's for old kernels, and its address follows the image.
        loads = [s for s in was.segments() if s.kind == 1]
        memory_end = max(s.vaddr + s.memsz for s in loads) - (loads[0].vaddr - loads[0].offset)
        extra = PAGE if len(old) < memory_end + PAGE else 0
        assert growth < sframe.size + table + PAGE + extra + 2 * 64 + 16, (name, growth)
        report(f"post-link {name}: {len(old)} -> {len(new)} bytes (.sframe {sframe.size}, "
               f"program headers {table})")


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
    require("strip", "objcopy", "eu-strip")
    tmp, programs, before = built
    for recipe, (steps, bfd_last) in AFTER.items():
        work = tmp / f"after-{recipe}"
        work.mkdir()
        for name, path in programs.items():
            shutil.copy(path, work / name)
        _run_steps(work, list(programs), steps)
        for name, expected in before.items():
            assert _out([f"./{name}"], work) == expected, (recipe, name)
        for name, problems in _layout(work, list(programs)).items():
            if bfd_last:
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
           "files: all run; verify clean after eu-strip, one hazard noted after BFD")


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
    padded = []
    for name in programs:
        # A stripped file far shorter than its memory image needs more than a page of
        # zeros to keep the table where old kernels look: refused with a reason unless
        # asked to pad (README).
        proc = subprocess.run([sys.executable, "-m", "cfi2sframe", "-w", "--in-place",
                               "--replace", name], cwd=work, capture_output=True, text=True)
        if proc.returncode:
            assert proc.returncode == 1 and "--old-kernels pad" in proc.stderr \
                and len(proc.stderr.splitlines()) == 1, proc.stderr
            _convert(work / name, "--replace", "--old-kernels", "pad")
            padded.append(name)
    assert len(padded) < len(programs) // 2
    for name, expected in before.items():
        assert _out([f"./{name}"], work) == expected, name
        assert _first_segment_rule(work / name), name
        assert _out(["qemu-x86_64", f"./{name}"], work) == expected, name
    assert _layout(work, list(programs)) == {name: [] for name in programs}
    for step in (["eu-strip", "{}"], ["strip", "{}"]):
        _run_steps(work, list(programs), [step])
        for name, expected in before.items():
            assert _out([f"./{name}"], work) == expected, (step, name)
    report(f"post-link: dh_strip then cfi2sframe, {len(programs)} files ({len(padded)} "
           f"refused by default, then --old-kernels pad: {padded}): run natively and under "
           "qemu, verify clean, then eu-strip and strip: all run")


def test_old_kernels_no_gives_a_file_for_new_kernels_only(built, tmp_path: Path) -> None:
    """--old-kernels no on a stripped -no-pie program with a large .data: no padding,
    the table follows the memory image; it runs natively (Linux >= 5.18) and the
    first-segment rule does not hold (so qemu-user would not find the table)."""
    require("strip")
    tmp, _, before = built
    program = tmp_path / "csmith2"
    shutil.copy(tmp / "orig" / "csmith2", program)
    program.chmod(0o755)
    subprocess.run(["strip", str(program)], check=True)
    size = program.stat().st_size
    _convert(program, "--old-kernels", "no")
    assert _out([str(program)], tmp_path) == before["csmith2"]
    assert not _first_segment_rule(program)
    assert program.stat().st_size - size < 2 * PAGE


def _first_segment_rule(path: Path) -> bool:
    """The table's address minus its offset is the first PT_LOAD's."""
    from cfi2sframe.elf.read import open_elf

    data = path.read_bytes()
    loads = [s for s in open_elf(data, path.name).segments() if s.kind == 1]
    phoff = _header(data)[0]
    holder = next(s for s in loads if s.offset <= phoff < s.offset + s.filesz)
    return holder.vaddr - holder.offset == loads[0].vaddr - loads[0].offset


def test_debug_answers_are_unchanged(built) -> None:
    require("gdb", "nm", "readelf")
    tmp, programs, _ = built
    for name in [name for name in programs if name not in ("static", "libz.so.1")]:
        old, new = tmp / "orig" / name, programs[name]
        for cmd in (["nm"], ["readelf", "--debug-dump=line"]):
            a = subprocess.run([*cmd, str(old)], capture_output=True, text=True).stdout
            b = subprocess.run([*cmd, str(new)], capture_output=True, text=True).stdout
            assert a.replace(str(old), "F") == b.replace(str(new), "F"), (name, cmd)
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
