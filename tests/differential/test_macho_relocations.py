"""Mach-O relocations as the readers meet them, on objects LLVM 14 writes.

arm64 objects hold every ``__eh_frame`` FDE's start and LSDA as an
``ARM64_RELOC_SUBTRACTOR``/``ARM64_RELOC_UNSIGNED`` pair against the section's own
``ltmpN`` symbol, the field holding only the addend; x86-64 objects resolve them in
place.  The oracle for each value is the object's symbol table as ``llvm-objdump -t``
prints it and the layout of the source, derived by hand; for the encodings, LLVM's
own ``__compact_unwind`` rows."""

from __future__ import annotations

import re
import struct
import subprocess
from pathlib import Path

import pytest

from cfi2sframe.macho.read import open_macho
from cfi2sframe.macho.unwind import eh_frame, relocated
from tests.conftest import at_least, cfi2sframe, require
from tests.corpus import csmith_source

from .test_macho import CXX

TRIPLES = {"x86_64": "x86_64-apple-macosx10.15", "arm64": "arm64-apple-macosx11"}

# Every form of a pointer field: symbol differences (SUBTRACTOR pairs) with and without
# an addend, to and from local labels, PC-relative by '.', 4 and 8 bytes wide, plain
# symbol pointers (extern UNSIGNED), and a label in a section with no symbol of its own
# (section-relative on x86-64, both halves of a pair).
FORMS = """\t.section __TEXT,__text,regular,pure_instructions
\t.globl _foo
_foo:
\tnop
\tnop
Lloc:
\tnop
\t.globl _bar
_bar:
\tnop
\t.section __TEXT,__const
\t.p2align 3
\t.quad 7
Lc:
\t.quad 9
\t.section __DATA,__data
\t.globl _d
_d:
\t.quad _foo - _d
\t.quad Lloc - _d
\t.quad _bar - _d + 4
\t.quad _foo - Lhere
Lhere:
\t.quad Lloc - Lhere
\t.quad _foo - .
\t.long _bar - .
\t.long 0
\t.quad Lloc
\t.quad _bar + 2
\t.quad Lc
\t.quad Lc - _d
\t.quad _d - Lc
\t.subsections_via_symbols
"""


def _symbols(obj: Path) -> dict[str, int]:
    """Name -> address, as llvm-objdump prints the symbol table."""
    text = subprocess.run(["llvm-objdump-14", "-t", str(obj)], capture_output=True,
                          text=True, check=True).stdout
    return {name: int(value, 16) for value, name in
            re.findall(r"^([0-9a-f]{16}) .* (\S+)$", text, re.M)}


def _sections(obj: Path) -> dict[str, int]:
    text = subprocess.run(["llvm-objdump-14", "-h", str(obj)], capture_output=True,
                          text=True, check=True).stdout
    return {name: int(vma, 16) for name, vma in
            re.findall(r"^\s*\d+ (\S+)\s+[0-9a-f]+ ([0-9a-f]+)", text, re.M)}


@pytest.mark.parametrize("arch", TRIPLES)
def test_every_pointer_form_resolves_in_the_objects_address_space(arch: str,
                                                                 tmp_path: Path) -> None:
    """Each field of FORMS, relocated, holds the value of its expression with the
    addresses the symbol table gives (labels: a nop is 1 byte on x86-64, 4 on arm64;
    Lc 8 bytes into __const, Lhere 0x20 into __data)."""
    require("llvm-mc", "llvm-objdump-14")
    source, obj = tmp_path / "forms.s", tmp_path / "forms.o"
    source.write_text(FORMS)
    subprocess.run(["llvm-mc", "-triple", TRIPLES[arch], "-filetype=obj", str(source), "-o",
                    str(obj)], check=True)
    sym, nop = _symbols(obj), 1 if arch == "x86_64" else 4
    foo, bar, d = sym["_foo"], sym["_bar"], sym["_d"]
    lloc, lc, lhere = foo + 2 * nop, _sections(obj)["__const"] + 8, d + 0x20
    expected = [foo - d, lloc - d, bar - d + 4, foo - lhere, lloc - lhere, foo - (d + 0x28),
                bar - (d + 0x30), lloc, bar + 2, lc, lc - d, d - lc]
    view = open_macho(obj.read_bytes())
    section = view.section("__DATA", "__data")
    assert section is not None and section.nreloc >= 20  # the pairs are there
    data = relocated(view, section)
    got = [*struct.unpack_from("<6q", data), struct.unpack_from("<i", data, 0x30)[0],
           *struct.unpack_from("<5q", data, 0x38)]
    assert got == expected


def test_arm64_eh_frame_starts_and_lsda_at_their_symbols(tmp_path: Path) -> None:
    """clang-14's arm64 C++ object with -fomit-frame-pointer has an FDE per function
    (two in DWARF mode), f's with an LSDA: each FDE starts at its function's symbol
    and f's LSDA is GCC_except_table0; verify finds no problem and compact computes
    LLVM's three rows (before: every FDE at ltmp3, the section's own symbol)."""
    require("clang-14", "llvm-objdump-14")
    source, obj = tmp_path / "f.cc", tmp_path / "f.o"
    source.write_text(CXX)
    subprocess.run(["clang-14", "-target", TRIPLES["arm64"], "-O2", "-fomit-frame-pointer",
                    "-stdlib=libc++", "-c", "-x", "c++", str(source), "-o", str(obj)],
                   check=True)
    sym = _symbols(obj)
    cfi = eh_frame(open_macho(obj.read_bytes()), str(obj))
    assert cfi is not None
    starts = {fde.name: (fde.start, fde.lsda) for fde in cfi.fdes}
    assert starts == {"__Z1fi": (sym["__Z1fi"], sym["GCC_except_table0"]),
                      "__Z4leafi": (sym["__Z4leafi"], None),
                      "__Z3bigiiiiii": (sym["__Z3bigiiiiii"], None)}
    proc = cfi2sframe("verify", str(obj), cwd=tmp_path)
    assert proc.returncode == 0 and "3 checked against their DWARF CFI, 0 problems" \
        in proc.stdout, proc.stdout
    proc = cfi2sframe("compact", str(obj), cwd=tmp_path)
    assert "3 rows as computed here, 0 differ, 0 not computed" in proc.stdout, proc.stdout


def test_a_subtractor_without_its_unsigned_is_one_located_line(tmp_path: Path) -> None:
    """A SUBTRACTOR whose UNSIGNED is turned into a BRANCH26 (reloc.h: the pair's
    second half must be UNSIGNED): compact and verify say so in one line, exit 1."""
    require("clang-14")
    source, obj = tmp_path / "f.cc", tmp_path / "f.o"
    source.write_text(CXX)
    subprocess.run(["clang-14", "-target", TRIPLES["arm64"], "-O2", "-fomit-frame-pointer",
                    "-stdlib=libc++", "-c", "-x", "c++", str(source), "-o", str(obj)],
                   check=True)
    view = open_macho(obj.read_bytes())
    section = view.section("__TEXT", "__eh_frame")
    assert section is not None
    data = bytearray(obj.read_bytes())
    second = section.reloff + 8  # the UNSIGNED after the first SUBTRACTOR
    info = struct.unpack_from("<I", data, second + 4)[0]
    assert info >> 28 == 0 and struct.unpack_from("<I", data, section.reloff + 4)[0] >> 28 == 1
    struct.pack_into("<I", data, second + 4, info & 0x0FFFFFFF | 2 << 28)
    obj.write_bytes(bytes(data))
    for command in ("compact", "verify"):
        proc = cfi2sframe(command, str(obj), cwd=tmp_path)
        assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
        assert "not followed by its UNSIGNED" in proc.stderr, proc.stderr


def _csmith_preprocessed(tmp_path: Path, seed: int) -> Path:
    """A csmith program preprocessed for Linux (no macOS headers here; the result
    compiles for macOS)."""
    source, pre = tmp_path / f"p{seed}.c", tmp_path / f"p{seed}.i"
    source.write_bytes(csmith_source(seed, "--max-funcs", "8"))
    subprocess.run(["clang-14", "-E", "-P", "-I/usr/include/csmith", str(source), "-o",
                    str(pre)], check=True)
    return pre


@pytest.mark.slow
def test_arm64_objects_with_eh_frame_from_llc_and_clang(tmp_path: Path, report) -> None:
    """csmith programs compiled to arm64 Mach-O objects by llc-14 (from clang-14's IR)
    and by clang-14 itself, at -O0 and -O2, with and without -fomit-frame-pointer:
    every FDE of __eh_frame is placed at a function LLVM has a row for, every such row
    is computed here and equal to LLVM's, and verify passes each object."""
    require("csmith", "clang-14", "llc-14", "llvm-objdump-14")
    computed = fdes = 0
    for seed in range(1, 4):
        pre = _csmith_preprocessed(tmp_path, seed)
        for level in ("-O0", "-O2"):
            ll = tmp_path / f"p{seed}{level}.ll"
            subprocess.run(["clang-14", level, "-S", "-emit-llvm", "-w", str(pre), "-o",
                            str(ll)], check=True)
            for omit in ([], ["-fomit-frame-pointer"]):
                objects = {"llc": tmp_path / f"l{seed}{level}{len(omit)}.o",
                           "clang": tmp_path / f"c{seed}{level}{len(omit)}.o"}
                if not omit:
                    subprocess.run(["llc-14", level, "-filetype=obj",
                                    f"-mtriple={TRIPLES['arm64']}", str(ll), "-o",
                                    str(objects["llc"])], check=True, capture_output=True)
                else:
                    del objects["llc"]  # llc takes the frame-pointer choice from the IR
                subprocess.run(["clang-14", "-target", TRIPLES["arm64"], level, *omit, "-w",
                                "-c", str(pre),
                                "-o", str(objects["clang"])], check=True,
                               capture_output=True)
                for obj in objects.values():
                    view = open_macho(obj.read_bytes())
                    cfi = eh_frame(view, str(obj))
                    if cfi is None:
                        continue
                    functions = {s.value for s in view.symbols if s.defined_in_section
                                 and s.name.startswith("_")}
                    assert all(fde.start in functions for fde in cfi.fdes), obj
                    fdes += len(cfi.fdes)
                    out = cfi2sframe("compact", str(obj), cwd=tmp_path).stdout
                    found = re.search(r"(\d+) rows as computed here, (\d+) differ", out)
                    assert found and found.group(2) == "0", out
                    computed += int(found.group(1))
                    proc = cfi2sframe("verify", str(obj), cwd=tmp_path)
                    assert proc.returncode == 0, proc.stdout
    report(f"arm64 Mach-O objects (llc-14, clang-14; csmith 1-3): {fdes} FDEs at their "
           f"functions, {computed} rows computed from them = LLVM's")
    at_least("FDEs", fdes, 52)  # 58 here
