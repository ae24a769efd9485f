"""The post-link step (--in-place on linked files) moves nothing and survives the
tools that run after it (issue 13).

Programs built here by gcc and g++ (PIE with backtrace(), -no-pie, C++ exceptions,
a shared library and its user, a static program) are converted, then: every byte
of the original before the rewritten section name table is unchanged apart from
the four ELF header fields that locate the tables; nm, readelf's line table and
gdb's ``info line`` give the same answers; the program prints the same, natively
and under qemu-x86_64 (which, like Linux before 5.18, takes AT_PHDR from the first
segment); BFD strip in every mode, eu-strip and objcopy --add-gnu-debuglink give
programs that print the same; the file grows by the section, the moved table and
less than a page (two for a file shorter than its memory image); a second run
with --replace gives the same file.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require

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
    for cmd in cmds.values():
        subprocess.run(cmd, cwd=tmp, check=True, capture_output=True)
    return {name: tmp / name for name in cmds}


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
    require("gcc", "g++")
    tmp = tmp_path_factory.mktemp("postlink")
    programs = _build(tmp)
    before = {name: path.read_bytes() for name, path in programs.items()}
    outputs = {name: _out([f"./{name}"], tmp) for name in programs if name != "libtwice.so"}
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
    tmp, _, before = built
    qemu = shutil.which("qemu-x86_64")
    for name, expected in before.items():
        assert _out([f"./{name}"], tmp) == expected, name
        if qemu:
            assert _out([qemu, f"./{name}"], tmp) == expected, name


def test_strip_eu_strip_and_debuglink_keep_them_running(built, report) -> None:
    tmp, programs, before = built
    modes = [["strip"], ["strip", "--strip-debug"], ["strip", "--strip-unneeded"],
             ["strip", "--strip-all"]]
    if shutil.which("eu-strip"):
        modes.append(["eu-strip"])
    lib = programs["libtwice.so"].read_bytes()
    for mode in modes:
        work = tmp / ("s-" + "-".join(mode).replace("--", ""))
        work.mkdir()
        for name, path in programs.items():
            shutil.copy(path, work / name)
            proc = subprocess.run([*mode, name], cwd=work, capture_output=True, text=True)
            assert proc.returncode == 0, (mode, name, proc.stderr)
        for name, expected in before.items():
            assert _out([f"./{name}"], work) == expected, (mode, name)
        (work / "libtwice.so").write_bytes(lib)
    debug = tmp / "dbg"
    debug.mkdir()
    shutil.copy(programs["pie"], debug / "pie")
    subprocess.run(["objcopy", "--only-keep-debug", "pie", "pie.debug"], cwd=debug,
                   check=True, capture_output=True)
    subprocess.run(["objcopy", "--strip-debug", "--add-gnu-debuglink=pie.debug", "pie"],
                   cwd=debug, check=True, capture_output=True)
    assert _out(["./pie"], debug) == before["pie"]
    report(f"post-link: {len(modes)} strip modes, objcopy --add-gnu-debuglink: all run")


def test_debug_answers_are_unchanged(built) -> None:
    require("gdb", "nm", "readelf")
    tmp, programs, _ = built
    for name in ("pie", "nopie", "cxx", "user"):
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
