"""Mach-O, read by our own code: objects clang-14 writes for x86-64 and arm64 macOS, and
a universal file llvm-lipo makes of them.  The oracle for the reader is
``llvm-objdump --unwind-info`` (the ``__compact_unwind`` rows: start, length, encoding,
personality, LSDA); the oracle for the encodings computed from an x86-64 object's
``__eh_frame`` is LLVM's own encoder, whose rows the object holds."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from cfi2sframe.macho.read import open_macho
from cfi2sframe.macho.unwind import compact_unwind_rows
from tests.conftest import cfi2sframe, require, require_module
from tests.corpus import csmith_source

CXX = """int g(int);
struct S { ~S(); };
int f(int x) { S s; return g(x) + 1; }
int leaf(int x) { return x * 3; }
int big(int a, int b, int c, int d, int e, int f2) {
  int v[64]; for (int i = 0; i < 64; i++) v[i] = g(i + a); return v[b & 63] + c + d + e + f2; }
"""
TARGETS = {"x86_64": "x86_64-apple-macosx10.15", "arm64": "arm64-apple-macosx11"}


def _objects(tmp_path: Path) -> dict[str, Path]:
    require("clang-14", "llvm-objdump-14", "llvm-lipo-14")
    source = tmp_path / "f.cc"
    source.write_text(CXX)
    out = {}
    for arch, target in TARGETS.items():
        obj = tmp_path / f"{arch}.o"
        subprocess.run(["clang-14", "-target", target, "-O2", "-c", "-x", "c++",
                        str(source), "-o", str(obj)], check=True, capture_output=True)
        out[arch] = obj
    fat = tmp_path / "fat.o"
    subprocess.run(["llvm-lipo-14", "-create", str(out["x86_64"]), str(out["arm64"]),
                    "-output", str(fat)], check=True)
    out["fat"] = fat
    return out


def _objdump_rows(path: Path, arch: str | None = None) -> list[tuple]:
    """(start, length, encoding, personality, LSDA) of each row as llvm-objdump prints
    them."""
    text = subprocess.run(["llvm-objdump-14", "--unwind-info", *(
        [f"--arch-name={arch}"] if arch else []), str(path)], capture_output=True,
        text=True, check=True).stdout
    rows = []
    for block in text.split("Entry at offset")[1:]:
        fields = dict(re.findall(r"^\s+([a-zA-Z ]+):\s+(0x[0-9a-f]+)", block, re.M))
        person = re.search(r"personality function: 0x[0-9a-f]+ (\S+)", block)
        rows.append((int(fields["start"], 16), int(fields["length"], 16),
                     int(fields["compact encoding"], 16), person.group(1) if person else None,
                     int(fields["LSDA"], 16) if "LSDA" in fields else None))
    return rows


def test_compact_unwind_rows_as_llvm_objdump_reads_them(tmp_path: Path) -> None:
    objects = _objects(tmp_path)
    for arch in TARGETS:
        ours = [(r.start, r.length, r.encoding, r.personality, r.lsda)
                for r in compact_unwind_rows(open_macho(objects[arch].read_bytes()))]
        assert ours == _objdump_rows(objects[arch]) and len(ours) == 3, arch
        # each slice of the universal file is the thin file
        sliced = compact_unwind_rows(open_macho(objects["fat"].read_bytes(), arch))
        assert [(r.start, r.length, r.encoding) for r in sliced] == [o[:3] for o in ours]


def test_compact_reads_mach_o_and_agrees_with_llvm(tmp_path: Path) -> None:
    objects = _objects(tmp_path)
    proc = cfi2sframe("compact", str(objects["x86_64"]), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "3 rows as computed here, 0 differ, 0 not computed (no CFI here for them)" in proc.stdout
    # clang writes no __eh_frame for arm64 where every function is compact: each row
    # computed from what its code builds (the leaf's, 0x02000000, from code that moves
    # no sp and calls nothing), equal to LLVM's own
    proc = cfi2sframe("compact", str(objects["arm64"]), cwd=tmp_path)
    assert proc.returncode == 0 and "3 rows as computed here, 0 differ, 0 not computed" \
        in proc.stdout and "; 3 of them computed from the prologue" in proc.stdout
    assert "frameless, stack 0; = ours (from the prologue)" in proc.stdout
    proc = cfi2sframe("compact", str(objects["fat"]), cwd=tmp_path)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1
    assert "slices for x86_64, arm64: pick one with --arch" in proc.stderr
    for arch in ("x86_64", "aarch64"):
        proc = cfi2sframe("compact", str(objects["fat"]), "--arch", arch, cwd=tmp_path)
        assert proc.returncode == 0 and "3 rows" in proc.stdout, proc.stderr
    proc = cfi2sframe(str(objects["x86_64"]), "-o", str(tmp_path / "x.sframe"), cwd=tmp_path)
    assert proc.returncode == 1  # SFrame is for ELF; the commands that read Mach-O named
    assert "'lookup', 'verify' and 'stats' read Mach-O files" in proc.stderr


def _csmith_preprocessed(folder: Path, seed: int) -> Path:
    """A csmith program preprocessed for Linux by clang-14 (the macOS targets have no
    headers here; the preprocessed C compiles for them)."""
    source = folder / f"s{seed}.c"
    source.write_bytes(csmith_source(seed, "--max-funcs", "12"))
    pre = folder / f"s{seed}.i"
    subprocess.run(["clang-14", "-E", "-P", "-I/usr/include/csmith", str(source), "-o",
                    str(pre)], check=True, capture_output=True)
    return pre


@pytest.mark.slow
def test_encodings_from_eh_frame_agree_with_llvm_on_csmith(tmp_path: Path, report) -> None:
    """csmith programs (preprocessed for Linux by clang, compiled for macOS x86-64 and
    i386 at four levels): every function's encoding computed here from the object's
    DWARF CFI is LLVM's own row, personality and LSDA bits aside (i386: the esp and ebp
    numbers Darwin swaps in __eh_frame read as such), and verify passes each object."""
    require("csmith", "clang-14")
    agree = {"x86_64": 0, "i386": 0}
    per_level: dict[tuple[str, str], int] = {}
    for seed in range(1, 9):
        pre = _csmith_preprocessed(tmp_path, seed)
        for arch, target in (("x86_64", TARGETS["x86_64"]), ("i386", "i386-apple-macosx10.15")):
            for level in ("-O0", "-O1", "-O2", "-Os"):
                obj = tmp_path / f"s{seed}{level}{arch}.o"
                subprocess.run(["clang-14", "-target", target, level, "-w", "-c",
                                str(pre), "-o", str(obj)], check=True, capture_output=True)
                out = cfi2sframe("compact", str(obj), cwd=tmp_path).stdout
                found = re.search(r"(\d+) rows as computed here, (\d+) differ, (\d+) not",
                                  out)
                assert found and found.group(2) == "0" and found.group(3) == "0", out
                agree[arch] += int(found.group(1))
                per_level[arch, level] = per_level.get((arch, level), 0) + int(found.group(1))
                proc = cfi2sframe("verify", str(obj), cwd=tmp_path)
                assert proc.returncode == 0, proc.stdout
    report("Mach-O objects (clang-14, csmith 1-8), rows from __eh_frame = LLVM's row: " +
           ", ".join(f"{arch} {level} {n}" for (arch, level), n in sorted(per_level.items())) +
           "; 0 differ")
    assert agree["x86_64"] >= 150 and agree["i386"] >= 150, agree


def _objdump_table(path: Path) -> tuple[list[tuple[int, int]], int, list[tuple[int, int]]]:
    """llvm-objdump's reading of an image's __unwind_info: (function offset, encoding) of
    every second-level entry, the last first-level index entry's function offset (the
    sentinel) and the LSDA descriptors."""
    text = subprocess.run(["llvm-objdump-14", "--unwind-info", str(path)],
                          capture_output=True, text=True, check=True).stdout
    common = [int(x, 16) for x in re.findall(r"^\s+encoding\[\d+\]: (0x[0-9a-f]+)$",
                                               text.split("Personality functions")[0], re.M)]
    entries = []
    local: list[int] = []
    for line in text.split("Second level indices:")[1].splitlines():
        page_local = re.match(r"\s+encoding\[(\d+)\]: (0x[0-9a-f]+)$", line)
        if "Page encodings" in line or "Second level index" in line:
            local = [] if "Second level index" in line else local
        elif page_local:
            local.append(int(page_local.group(2), 16))
        found = re.search(r"function offset=(0x[0-9a-f]+), encoding(?:\[(\d+)\]=|=)"
                          r"(0x[0-9a-f]+)", line)
        if found:
            entries.append((int(found.group(1), 16), int(found.group(3), 16)))
    del common, local
    top = re.findall(r"\[\d+\]: function offset=(0x[0-9a-f]+), 2nd level page offset",
                     text)
    lsdas = [(int(a, 16), int(b, 16)) for a, b in re.findall(
        r"\[\d+\]: function offset=(0x[0-9a-f]+), LSDA offset=(0x[0-9a-f]+)$", text, re.M)]
    return entries, int(top[-1], 16), lsdas


def _dylib(objects: dict[str, Path], arch: str) -> Path:
    """The object of ``arch`` linked by ld64.lld-14 into a dylib (no SDK: undefined
    symbols looked up at run time)."""
    dylib = objects[arch].with_suffix(".dylib")
    version = "10.15" if arch == "x86_64" else "11.0"
    subprocess.run(["ld64.lld-14", "-arch", arch, "-platform_version", "macos", version,
                    version, "-dylib", "-undefined", "dynamic_lookup", "-o", str(dylib),
                    str(objects[arch])], check=True)
    return dylib


def _many_functions(tmp_path: Path, count: int, distinct: bool) -> Path:
    """``count`` small x86-64 functions (frameless, stack sizes distinct or a few) plus
    _main, assembled by llvm-mc and linked by ld64.lld-14 into an executable."""
    lines = ["\t.section __TEXT,__text,regular,pure_instructions"]
    for i in range(count):
        # distinct: 250 stack sizes, with and without a saved rbx (500 encodings: more
        # than a compressed page holds, so the linker writes regular pages)
        size = 8 * (i % 250 + 1) if distinct else 8 * (i % 4 + 1)
        push = distinct and i % 500 >= 250
        lines += [f"\t.globl _f{i}", f"_f{i}:", "\t.cfi_startproc"]
        if push:
            lines += ["\tpushq %rbx", "\t.cfi_def_cfa_offset 16", "\t.cfi_offset %rbx, -16"]
        lines += [f"\tsubq ${size}, %rsp", f"\t.cfi_def_cfa_offset {size + (16 if push else 8)}",
                  f"\taddq ${size}, %rsp"] + (["\tpopq %rbx"] if push else []) + [
                  "\tretq", "\t.cfi_endproc"]
    lines += ["\t.globl _main", "_main:", "\t.cfi_startproc", "\txorl %eax, %eax", "\tretq",
              "\t.cfi_endproc", "\t.subsections_via_symbols", ""]
    source = tmp_path / f"many{count}{distinct}.s"
    source.write_text("\n".join(lines))
    obj = source.with_suffix(".o")
    subprocess.run(["llvm-mc", "-triple", "x86_64-apple-macosx10.15", "-filetype=obj",
                    str(source), "-o", str(obj)], check=True)
    image = source.with_suffix("")
    subprocess.run(["ld64.lld-14", "-arch", "x86_64", "-platform_version", "macos", "10.15",
                    "10.15", "-execute", "-e", "_main", "-o", str(image), str(obj)],
                   check=True)
    return image


def test_unwind_info_of_images_as_llvm_objdump_reads_it(tmp_path: Path) -> None:
    """Images linked by ld64.lld-14: the C++ dylibs (compressed pages, a personality, an
    LSDA) and executables of 3000 functions with few or 1000 distinct encodings (three
    compressed pages; regular pages of 511 entries)."""
    require("ld64.lld-14", "llvm-mc")
    from cfi2sframe.compact.table import read_unwind_info

    objects = _objects(tmp_path)
    images = [_dylib(objects, arch) for arch in ("x86_64", "arm64")]
    images += [_many_functions(tmp_path, 3000, False), _many_functions(tmp_path, 3000, True)]
    kinds = set()
    for image in images:
        view = open_macho(image.read_bytes())
        section = view.section("__TEXT", "__unwind_info")
        assert section is not None
        table = read_unwind_info(view.section_data(section))
        entries, sentinel, lsdas = _objdump_table(image)
        assert [(e.offset, e.encoding) for e in table.entries] == entries, image.name
        assert table.sentinel == sentinel
        assert [(e.offset, e.lsda) for e in table.entries if e.lsda is not None] == lsdas
        kinds.update(kind for kind, _ in table.pages)
        proc = cfi2sframe("compact", str(image), cwd=tmp_path)
        assert proc.returncode == 0 and f"{len(entries)} entries" in proc.stdout, proc.stderr
    assert kinds == {"regular", "compressed"}


def test_the_lld_14_sentinel_bug_is_named(tmp_path: Path) -> None:
    """ld64.lld-14 ends its first-level index at the start of the last function when
    that one has no row of its own (here _main: lld gives it encoding 0), so
    libunwind's binary search never finds _main's entry: the table is read, and the
    problem named.  The expected addresses come from llvm-nm and llvm-objdump."""
    require("ld64.lld-14", "llvm-mc", "llvm-nm-14")
    image = _many_functions(tmp_path, 3000, False)
    main = next(int(line.split()[0], 16) for line in subprocess.run(
        ["llvm-nm-14", str(image)], capture_output=True, text=True, check=True
    ).stdout.splitlines() if line.endswith(" _main"))
    _, sentinel, _ = _objdump_table(image)
    assert main - 0x100000000 == sentinel  # lld's bug, as llvm-objdump shows it
    proc = cfi2sframe("compact", str(image), cwd=tmp_path)
    assert proc.returncode == 0
    assert (f"problem: page 2: the function at offset {sentinel:#x} lies outside the page's "
            f"index range") in proc.stdout
    assert "its sentinel, is not past the last function" in proc.stdout


def test_a_damaged_unwind_info_is_one_located_error(tmp_path: Path) -> None:
    from cfi2sframe.compact.table import read_unwind_info
    from cfi2sframe.errors import DecodeError

    require("ld64.lld-14")
    dylib = _dylib(_objects(tmp_path), "x86_64")
    view = open_macho(dylib.read_bytes())
    section = view.section("__TEXT", "__unwind_info")
    data = view.section_data(section)
    for at, value in ((0, 2), (8, 0xFFFF), (24, 0)):  # version, common count, index count
        damaged = data[:at] + value.to_bytes(4, "little") + data[at + 4:]
        with pytest.raises(DecodeError):
            read_unwind_info(damaged)


def test_unwind_info_built_again_reads_in_llvm_objdump(tmp_path: Path) -> None:
    """Each ld64.lld-14 image's table built again by our writer (``compact --emit
    unwind-info``) and put in place of lld's (llvm-objcopy --update-section): llvm-objdump
    reads every entry we wrote; libunwind's look-up gives every function the row lld's
    table gives it, and also the last function, which lld's sentinel left out."""
    require("ld64.lld-14", "llvm-mc", "llvm-objcopy-14")
    from cfi2sframe.compact.table import lookup, read_unwind_info

    objects = _objects(tmp_path)
    images = [_many_functions(tmp_path, 3000, False), _many_functions(tmp_path, 3000, True),
              *(_dylib(objects, arch) for arch in ("x86_64", "arm64"))]
    for image in images:
        built = tmp_path / f"{image.name}.unwind"
        proc = cfi2sframe("compact", str(image), "--emit", "unwind-info", "-o", str(built),
                          cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        ours = built.read_bytes()
        patched = tmp_path / f"{image.name}.ours"
        subprocess.run(["llvm-objcopy-14", "--update-section",
                        f"__TEXT,__unwind_info={built}", str(image), str(patched)],
                       check=True)
        table = read_unwind_info(ours)
        assert table.problems == ()
        entries, sentinel, lsdas = _objdump_table(patched)
        assert entries == [(e.offset, e.encoding) for e in table.entries]
        assert sentinel == table.sentinel
        assert lsdas == [(e.offset, e.lsda) for e in table.entries if e.lsda is not None]
        view = open_macho(image.read_bytes())
        theirs = view.section_data(view.section("__TEXT", "__unwind_info"))
        for entry in read_unwind_info(theirs).entries:
            got = lookup(ours, entry.offset)
            if entry.encoding == 0:  # no unwind information, in either table
                assert got is None
                continue
            assert got is not None and (got.encoding, got.personality, got.lsda) == (
                entry.encoding, entry.personality, entry.lsda), hex(entry.offset)
            if lookup(theirs, entry.offset) is None:  # lld's sentinel stops before it
                assert entry.offset >= read_unwind_info(theirs).sentinel


def test_damaged_mach_o_is_one_located_line(tmp_path: Path) -> None:
    """A clang object cut short or with bytes changed in its headers and load commands:
    ``compact`` reads it or says in one line what is wrong, never a traceback."""
    import random

    data = _objects(tmp_path)["x86_64"].read_bytes()
    rng = random.Random(5)
    for trial in range(90):
        damaged = bytearray(data)
        if trial % 3 == 0:
            damaged = damaged[:rng.randrange(8, len(damaged))]
        else:
            for _ in range(rng.randrange(1, 8)):
                damaged[rng.randrange(16, min(len(damaged), 1200))] = rng.randrange(256)
        path = tmp_path / "bad.o"
        path.write_bytes(bytes(damaged))
        proc = cfi2sframe("compact", str(path), cwd=tmp_path)  # no traceback, no bug
        assert proc.returncode == 0 or (proc.returncode == 1 and proc.stderr.count("\n") == 1
                                        and proc.stderr.startswith(f"{path}: error: ")), (
            trial, proc.stderr)


def test_darwin_assembly_from_clang_agrees_with_llvm_mc(tmp_path: Path) -> None:
    """clang-14's own macOS assembly (Mach-O sections, .build_version,
    .subsections_via_symbols, '##' comments, '__Z' names), assembled by llvm-mc as
    Mach-O: the encodings computed here from its directives equal the rows llvm-mc wrote
    in the object, for x86-64 and arm64."""
    require("clang-14", "llvm-mc")
    source = tmp_path / "f.cc"
    source.write_text(CXX)
    for arch, target in (("x86_64", TARGETS["x86_64"]), ("aarch64", TARGETS["arm64"])):
        asm = tmp_path / f"{arch}.s"
        subprocess.run(["clang-14", "-target", target, "-O2", "-S", "-x", "c++", str(source),
                        "-o", str(asm)], check=True, capture_output=True)
        assert ".subsections_via_symbols" in asm.read_text()
        proc = cfi2sframe("compact", str(asm), "--arch", arch, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "3 rows as computed here, 0 differ, 0 not computed" in proc.stdout, proc.stdout
        sframe = cfi2sframe(str(asm), "-o", str(tmp_path / "x.sframe"), cwd=tmp_path)
        assert sframe.returncode == 1 and "SFrame is for ELF; 'cfi2sframe compact'" in \
            sframe.stderr and sframe.stderr.count("\n") == 1


def test_darwin_assembly_without_llvm_mc_names_what_to_install(tmp_path: Path) -> None:
    import os
    import sys

    require("clang-14")
    source = tmp_path / "f.cc"
    source.write_text(CXX)
    asm = tmp_path / "f.s"
    subprocess.run(["clang-14", "-target", TARGETS["x86_64"], "-O2", "-S", "-x", "c++",
                    str(source), "-o", str(asm)], check=True, capture_output=True)
    proc = subprocess.run([sys.executable, "-m", "cfi2sframe", "compact", str(asm)],
                          capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PATH": str(tmp_path)})
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert "needs an assembler that writes Mach-O: install LLVM" in proc.stderr


@pytest.mark.slow
def test_darwin_assembly_agrees_with_llvm_mc_on_csmith(tmp_path: Path, report) -> None:
    """csmith programs through clang-14 -S for macOS, x86-64 and arm64, at -O0, -O2,
    -Os, -O2 -fno-omit-frame-pointer and -O2 -fomit-frame-pointer (DWARF mode on
    arm64): every encoding computed here from the directives is llvm-mc's own row."""
    require("csmith", "clang-14", "llvm-mc")
    agree = 0
    per_flags: dict[tuple[str, str], int] = {}
    for seed in range(1, 7):
        pre = _csmith_preprocessed(tmp_path, seed)
        for arch, target in (("x86_64", TARGETS["x86_64"]), ("aarch64", TARGETS["arm64"])):
            for flags in (["-O0"], ["-O2"], ["-Os"], ["-O2", "-fno-omit-frame-pointer"],
                          ["-O2", "-fomit-frame-pointer"]):
                asm = tmp_path / f"s{seed}{arch}{''.join(flags)}.s"
                subprocess.run(["clang-14", "-target", target, *flags, "-w", "-S", str(pre),
                                "-o", str(asm)], check=True, capture_output=True)
                out = cfi2sframe("compact", str(asm), "--arch", arch, cwd=tmp_path).stdout
                found = re.search(r"(\d+) rows as computed here, (\d+) differ, (\d+) not",
                                  out)
                assert found and found.group(2) == "0" and found.group(3) == "0", out
                agree += int(found.group(1))
                key = arch, " ".join(flags)
                per_flags[key] = per_flags.get(key, 0) + int(found.group(1))
    report("Darwin assembly (clang-14 -S, csmith 1-6), rows from the directives = llvm-mc's: "
           + ", ".join(f"{arch} {flags} {n}" for (arch, flags), n in sorted(per_flags.items()))
           + "; 0 differ")
    assert agree >= 150, agree


def _frame_saving_five(order: list[tuple[str, int]]) -> str:
    """An x86-64 RBP frame saving r15, r14, r13, r12 and rbx, its .cfi_offset lines in
    the order given (the same code either way)."""
    lines = ["\t.section __TEXT,__text,regular,pure_instructions", "\t.globl _f", "_f:",
             "\t.cfi_startproc", "\tpushq %rbp", "\t.cfi_def_cfa_offset 16",
             "\t.cfi_offset %rbp, -16", "\tmovq %rsp, %rbp", "\t.cfi_def_cfa_register %rbp",
             *(f"\tpushq %{reg}" for reg in ("r15", "r14", "r13", "r12", "rbx")),
             *(f"\t.cfi_offset %{reg}, {offset}" for reg, offset in order), "\tnop",
             *(f"\tpopq %{reg}" for reg in ("rbx", "r12", "r13", "r14", "r15")),
             "\tpopq %rbp", "\tretq", "\t.cfi_endproc", "\t.subsections_via_symbols", ""]
    return "\n".join(lines)


def test_llvm_mc_swaps_registers_we_do_not_and_emit_obj_fixes_the_row(tmp_path: Path) -> None:
    """compact-unwind-notes §4.7: with its .cfi_offset lines in descending address order,
    llvm-mc encodes an RBP frame with every saved register swapped.  The right encoding
    is llvm-mc's own for the same frame written in ascending order; ours is that for
    both.  --emit obj writes it into the object, and ld64.lld-14 carries it into the
    image's __unwind_info."""
    require("llvm-mc", "ld64.lld-14", "llvm-objdump-14")
    saves = [("r15", -24), ("r14", -32), ("r13", -40), ("r12", -48), ("rbx", -56)]
    ascending, descending = tmp_path / "asc.s", tmp_path / "desc.s"
    ascending.write_text(_frame_saving_five(list(reversed(saves))))
    descending.write_text(_frame_saving_five(saves))
    encodings = {}
    for path in (ascending, descending):
        obj = path.with_suffix(".llvm.o")
        subprocess.run(["llvm-mc", "-triple", TARGETS["x86_64"], "-filetype=obj", str(path),
                        "-o", str(obj)], check=True)
        encodings[path.name] = _objdump_rows(obj)[0][2]
    right = encodings["asc.s"]
    assert encodings["desc.s"] != right  # llvm-mc's wrong row, the premise
    proc = cfi2sframe("compact", str(descending), cwd=tmp_path)
    assert f"DIFFERS: ours {right:#010x}" in proc.stdout, proc.stdout
    fixed = tmp_path / "fixed.o"
    proc = cfi2sframe("compact", str(descending), "--emit", "obj", "-o", str(fixed),
                      cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"{right:#010x} for the object's {encodings['desc.s']:#010x}" in proc.stderr
    assert _objdump_rows(fixed)[0][2] == right
    dylib = tmp_path / "fixed.dylib"
    subprocess.run(["ld64.lld-14", "-arch", "x86_64", "-platform_version", "macos", "10.15",
                    "10.15", "-dylib", "-o", str(dylib), str(fixed)], check=True)
    assert [encoding for _, encoding in _objdump_table(dylib)[0]] == [right]
    # zig's Mach-O linker carries it too
    require_module("ziglang")
    zig = tmp_path / "fixed-zig.dylib"
    subprocess.run([sys.executable, "-m", "ziglang", "cc", "-target", "x86_64-macos",
                    "-dynamiclib", str(fixed), "-o", str(zig)], check=True, cwd=tmp_path)
    assert [encoding for _, encoding in _objdump_table(zig)[0]] == [right]
    # verify names llvm-mc's row as unwinding differently from the CFI, and passes ours
    proc = cfi2sframe("verify", str(descending.with_suffix(".llvm.o")), cwd=tmp_path)
    assert proc.returncode == 1
    assert (f"its encoding {encodings['desc.s']:#010x} (RBP frame; saved rbx at [rbp-8]"
            in proc.stdout and f"unwinds differently from the CFI, which says {right:#010x}"
            in proc.stdout), proc.stdout
    assert cfi2sframe("verify", str(fixed), cwd=tmp_path).returncode == 0


def test_in_place_on_a_mach_o_object(tmp_path: Path) -> None:
    """compact --in-place on llvm-mc's object of the descending-order frame: its row gets
    the right encoding (llvm-mc's own for the ascending order), nothing else changes; an
    object whose rows are right is left byte for byte; arm64 objects (no __eh_frame) and
    images are refused in one line, untouched."""
    require("llvm-mc", "llvm-objdump-14")
    saves = [("r15", -24), ("r14", -32), ("r13", -40), ("r12", -48), ("rbx", -56)]
    rows = {}
    for name, order in (("asc", list(reversed(saves))), ("desc", saves)):
        source = tmp_path / f"{name}.s"
        source.write_text(_frame_saving_five(order))
        subprocess.run(["llvm-mc", "-triple", TARGETS["x86_64"], "-filetype=obj",
                        str(source), "-o", str(tmp_path / f"{name}.o")], check=True)
        rows[name] = _objdump_rows(tmp_path / f"{name}.o")[0]
    before = (tmp_path / "desc.o").read_bytes()
    proc = cfi2sframe("compact", "--in-place", str(tmp_path / "desc.o"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    after = (tmp_path / "desc.o").read_bytes()
    assert _objdump_rows(tmp_path / "desc.o")[0] == (*rows["desc"][:2], rows["asc"][2],
                                                     *rows["desc"][3:])
    assert sum(a != b for a, b in zip(before, after, strict=True)) <= 4  # one word
    right = (tmp_path / "asc.o").read_bytes()
    assert cfi2sframe("compact", "--in-place", str(tmp_path / "asc.o"),
                      cwd=tmp_path).returncode == 0
    assert (tmp_path / "asc.o").read_bytes() == right
    objects = _objects(tmp_path)
    arm = objects["arm64"].read_bytes()
    proc = cfi2sframe("compact", "--in-place", str(objects["arm64"]), cwd=tmp_path)
    assert proc.returncode == 1 and "no __eh_frame" in proc.stderr
    assert objects["arm64"].read_bytes() == arm


def test_i386_objects_and_darwin_assembly(tmp_path: Path) -> None:
    """32-bit Mach-O (i386): rows of 20 bytes read as llvm-objdump reads them, and
    clang-14's i386 macOS assembly and object computed here as llvm-mc encodes them
    (the object's __eh_frame read with Darwin's swapped esp and ebp numbers)."""
    require("clang-14", "llvm-mc", "llvm-objdump-14")
    source = tmp_path / "i.c"
    source.write_text("int g(int); int f(int x) { return g(x) + 1; }\n"
                      "int leaf(int x) { return x * 3; }\n")
    obj, asm = tmp_path / "i.o", tmp_path / "i.s"
    for kind, out in (("-c", obj), ("-S", asm)):
        subprocess.run(["clang-14", "-target", "i386-apple-macosx10.15", "-O2", kind,
                        str(source), "-o", str(out)], check=True, capture_output=True)
    ours = [(r.start, r.length, r.encoding, r.personality, r.lsda)
            for r in compact_unwind_rows(open_macho(obj.read_bytes()))]
    assert ours == _objdump_rows(obj) and len(ours) == 2
    proc = cfi2sframe("compact", str(obj), cwd=tmp_path)
    assert proc.returncode == 0 and "2 rows as computed here, 0 differ" in proc.stdout, \
        proc.stdout
    proc = cfi2sframe("compact", str(asm), "--arch", "i386", cwd=tmp_path)
    assert "2 rows as computed here, 0 differ, 0 not computed" in proc.stdout, proc.stdout
