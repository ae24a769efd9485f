"""Mach-O objects written: ``__LD,__compact_unwind`` added to objects that have none,
and one row per CFI state (``--ranges``) in place of each function's one row.

The oracle for an added section is LLVM itself: clang-14 writes no compact unwind
for macOS 10.5 and does for 10.15, with the same code (checked), so our rows for the
10.5 object must read in llvm-objdump exactly as LLVM's own rows of the 10.15
object, and both linkers (ld64.lld-14 and zig's) must give the two images the same
``__unwind_info``.  Rows per state are checked by verify, each exact over its own
range of the function's CFI, and by zig's linker, which keeps every row."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

from cfi2sframe.macho.read import open_macho
from tests.conftest import cfi2sframe, require, require_module

from .test_macho import CXX, _csmith_preprocessed, _objdump_table

OLD, NEW = "x86_64-apple-macosx10.5", "x86_64-apple-macosx10.15"


def _compile(source: Path, target: str, level: str, out: Path, lang: str = "c") -> Path:
    """clang-14 for ``target``, the CPU pinned (each macOS version has its own default:
    the same code for both versions is the premise)."""
    subprocess.run(["clang-14", "-target", target, "-march=penryn", level, "-w", "-c",
                    "-x", lang, str(source), "-o", str(out)], check=True, capture_output=True)
    return out


def _text(args: list[str]) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def _instructions(obj: Path) -> list[tuple[str, str]]:
    """(address, mnemonic) of each instruction: the same code, whatever the distance
    to data the later sections' layout gives a RIP-relative operand."""
    out = []
    for line in _text(["llvm-objdump-14", "-d", str(obj)]).splitlines():
        parts = line.split("\t")
        if len(parts) >= 2 and parts[0].startswith(" ") and ":" in parts[0]:
            out.append((parts[0].split(":")[0].strip(), parts[1].strip()))
    return out


def _link(obj: Path, out: Path, linker: str) -> Path:
    if linker == "lld":
        subprocess.run(["ld64.lld-14", "-arch", "x86_64", "-platform_version", "macos",
                        "10.15", "10.15", "-dylib", "-undefined", "dynamic_lookup", "-o",
                        str(out), str(obj)], check=True, capture_output=True)
    else:
        subprocess.run([sys.executable, "-m", "ziglang", "cc", "-target", "x86_64-macos",
                        "-dynamiclib", "-Wl,-undefined,dynamic_lookup", str(obj), "-o",
                        str(out)], check=True, capture_output=True, cwd=out.parent)
    return out


def test_objects_without_compact_unwind_get_llvms_own_rows(tmp_path: Path) -> None:
    """C++ with a personality routine and an LSDA, and csmith programs at -O0 and -O2:
    the 10.5 object with our section reads as LLVM's 10.15 object, verifies, and links
    (lld and zig) to the __unwind_info LLVM's object links to."""
    require("clang-14", "csmith", "llvm-objdump-14", "ld64.lld-14")
    require_module("ziglang")
    cxx = tmp_path / "f.cc"
    cxx.write_text(CXX)
    cases = [(cxx, "-O2", "c++")] + [(_csmith_preprocessed(tmp_path, seed), level, "c")
                                     for seed in (1, 2) for level in ("-O0", "-O2")]
    rows = 0
    for n, (source, level, lang) in enumerate(cases):
        old = _compile(source, OLD, level, tmp_path / f"old{n}.o", lang)
        new = _compile(source, NEW, level, tmp_path / f"new{n}.o", lang)
        assert _instructions(old) == _instructions(new)  # the same code
        assert open_macho(old.read_bytes()).section("__LD", "__compact_unwind") is None
        proc = cfi2sframe("compact", "--in-place", str(old), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        ours = _text(["llvm-objdump-14", "--unwind-info", str(old)]).split("\n", 2)[2]
        assert ours == _text(["llvm-objdump-14", "--unwind-info", str(new)]).split("\n", 2)[2]
        rows += ours.count("Entry at offset")
        assert cfi2sframe("verify", str(old), cwd=tmp_path).returncode == 0
        for linker in ("lld", "zig"):
            mine = _link(old, tmp_path / f"old{n}-{linker}.dylib", linker)
            llvm = _link(new, tmp_path / f"new{n}-{linker}.dylib", linker)
            assert _objdump_table(mine)[0] == _objdump_table(llvm)[0], (n, linker)
    assert rows >= 40, rows


def _rows(path: Path) -> list[tuple[int, int, int]]:
    """(start, length, encoding) of each row, from llvm-objdump."""
    text = _text(["llvm-objdump-14", "--unwind-info", str(path)])
    out = []
    for block in text.split("Entry at offset")[1:]:
        fields = dict(line.split(":", 1) for line in block.splitlines()[1:] if ":" in line)
        out.append((int(fields["    start"].split()[0], 16),
                    int(fields["    length"].split()[0], 16),
                    int(fields["    compact encoding"].split()[0], 16)))
    return out


def test_ranges_rows_written_into_an_object(tmp_path: Path) -> None:
    """--in-place --ranges: each function's rows tile it with no gap, later rows marked
    NOT_FUNCTION_START; verify checks each row exact over its range and passes; zig's
    linker keeps every row in __unwind_info (ld64.lld-14 keeps only each function's
    first); a row planted wrong is named with its range."""
    require("clang-14", "llvm-objdump-14")
    require_module("ziglang")
    cxx = tmp_path / "f.cc"
    cxx.write_text(CXX)
    obj = _compile(cxx, NEW, "-O2", tmp_path / "f.o", "c++")
    before = _rows(obj)
    proc = cfi2sframe("compact", "--in-place", "--ranges", str(obj), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    after = _rows(obj)
    assert len(after) > len(before)
    for start, length, _ in before:
        mine = sorted(r for r in after if start <= r[0] < start + length)
        assert mine[0][0] == start and not mine[0][2] & 0x80000000
        assert all(a[0] + a[1] == b[0] for a, b in zip(mine, mine[1:], strict=False))  # tiled
        assert mine[-1][0] + mine[-1][1] == start + length
        assert all(r[2] & 0x80000000 for r in mine[1:])
    proc = cfi2sframe("verify", str(obj), cwd=tmp_path)
    assert proc.returncode == 0 and f"{len(after)} __compact_unwind rows, {len(after)} " \
        "checked" in proc.stdout, proc.stdout
    image = _link(obj, tmp_path / "f.dylib", "zig")
    assert len(_objdump_table(image)[0]) == len(after)
    # one mid-function row made wrong: verify names it with its range
    view = open_macho(obj.read_bytes())
    section = view.section("__LD", "__compact_unwind")
    assert section is not None
    index, (start, length, encoding) = next(
        (i, r) for i, r in enumerate(after) if r[2] & 0x80000000 and r[2] & 0x0F000000
        == 0x02000000)
    data = bytearray(obj.read_bytes())
    struct.pack_into("<I", data, section.offset + 32 * index + 12, encoding + 0x10000)
    planted = tmp_path / "planted.o"
    planted.write_bytes(bytes(data))
    proc = cfi2sframe("verify", str(planted), cwd=tmp_path)
    assert proc.returncode == 1
    assert f"unwinds differently from the CFI at [{start:#x}, " in proc.stdout, proc.stdout


def test_emit_obj_ranges_from_darwin_assembly(tmp_path: Path) -> None:
    """clang-14's macOS assembly through --emit obj --ranges: the object's rows are one
    per state, each exact (verify), as many as --emit asm --ranges lists."""
    require("clang-14", "llvm-mc", "llvm-objdump-14")
    cxx = tmp_path / "f.cc"
    cxx.write_text(CXX)
    asm = tmp_path / "f.s"
    subprocess.run(["clang-14", "-target", NEW, "-O2", "-S", "-x", "c++", str(cxx), "-o",
                    str(asm)], check=True, capture_output=True)
    obj = tmp_path / "f.o"
    proc = cfi2sframe("compact", str(asm), "--emit", "obj", "--ranges", "-o", str(obj),
                      cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    listed = cfi2sframe("compact", str(asm), "--emit", "asm", "--ranges", cwd=tmp_path)
    rows = _rows(obj)
    assert len(rows) > 3 and len(rows) == listed.stdout.count("\t.quad ") // 3  # 3 each
    proc = cfi2sframe("verify", str(obj), cwd=tmp_path)
    assert proc.returncode == 0 and f"{len(rows)} checked" in proc.stdout, proc.stdout


def _object_of(tmp_path: Path, name: str, count: int, shift: int) -> Path:
    """An llvm-mc object of ``count`` frameless functions of varied stack sizes (some
    saving rbx), the sizes shifted by ``shift`` so two objects differ."""
    lines = ["\t.section __TEXT,__text,regular,pure_instructions"]
    for i in range(count):
        size, push = 8 * ((i + shift) % 90 + 1), i % 3 == 0
        lines += [f"\t.globl _{name}{i}", f"_{name}{i}:", "\t.cfi_startproc"]
        if push:
            lines += ["\tpushq %rbx", "\t.cfi_def_cfa_offset 16", "\t.cfi_offset %rbx, -16"]
        lines += [f"\tsubq ${size}, %rsp", f"\t.cfi_def_cfa_offset {size + 8 + 8 * push}",
                  f"\taddq ${size}, %rsp", *(["\tpopq %rbx"] if push else []), "\tretq",
                  "\t.cfi_endproc"]
    source = tmp_path / f"{name}.s"
    source.write_text("\n".join([*lines, "\t.subsections_via_symbols", ""]))
    obj = source.with_suffix(".o")
    subprocess.run(["llvm-mc", "-triple", NEW, "-filetype=obj", str(source), "-o", str(obj)],
                   check=True)
    return obj


def _symbols(path: Path) -> dict[str, int]:
    return {line.split()[2]: int(line.split()[0], 16) for line in _text(
        ["llvm-nm-14", "--defined-only", str(path)]).splitlines() if len(line.split()) == 3}


def test_unwind_info_for_objects_placed_as_lld_placed_them(tmp_path: Path, report) -> None:
    """Two objects linked by ld64.lld-14 into a dylib; each object's place read from
    the symbols (image address minus object address); --place builds the table from
    the objects alone, and libunwind's look-up finds in it what it finds in lld's at
    every function's first and last byte."""
    require("llvm-mc", "ld64.lld-14", "llvm-nm-14")
    from cfi2sframe.compact.table import Lookup

    objects = [_object_of(tmp_path, "a", 700, 0), _object_of(tmp_path, "b", 500, 37)]
    image = tmp_path / "ab.dylib"
    subprocess.run(["ld64.lld-14", "-arch", "x86_64", "-platform_version", "macos", "10.15",
                    "10.15", "-dylib", "-o", str(image), *map(str, objects)], check=True)
    in_image = _symbols(image)
    places = []
    for obj in objects:
        name, at = next(iter(_symbols(obj).items()))
        places += ["--place", f"{obj}@{in_image[name] - at:#x}"]
    built = tmp_path / "ours.bin"
    proc = cfi2sframe("compact", "--emit", "unwind-info", *places, "--image-base", "0",
                      "-o", str(built), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    view = open_macho(image.read_bytes())
    section = view.section("__TEXT", "__unwind_info")
    assert section is not None
    lld, ours = Lookup(view.section_data(section)), Lookup(built.read_bytes())
    names = {name: address for name, address in in_image.items() if name[1] in "ab"}
    assert len(names) == 1200
    ends = sorted(names.values()) + [max(names.values()) + 1]
    for address in names.values():
        last = ends[ends.index(address) + 1] - 1
        for pc in (address, last):
            assert ours.find(pc) == lld.find(pc) or (
                address == max(names.values()) and lld.find(pc) is None), hex(pc)
    report(f"__unwind_info for two objects placed as ld64.lld-14 placed them: the same row "
           f"at the first and last byte of all 1200 functions (lld's last one aside: its "
           f"sentinel); {built.stat().st_size} bytes, lld's {section.size}")
    proc = cfi2sframe("compact", "--emit", "unwind-info", "--place", f"{objects[0]}@0x10",
                      "--image-base", "0x1000", cwd=tmp_path)
    assert proc.returncode == 1 and "lies below the image base 0x1000" in proc.stderr


def test_unwind_info_for_a_cxx_object_with_its_lsdas_placed_apart(tmp_path: Path) -> None:
    """clang-14's C++ object (a personality routine, an LSDA) linked by ld64.lld-14:
    its __text and its __gcc_except_tab placed where lld put them (read from the
    symbols), the personality routine's pointer where lld's table says; libunwind's
    look-up finds the same row, personality and LSDA in our table at every function.
    Naming a section the object lacks is a one-line error."""
    require("clang-14", "ld64.lld-14", "llvm-nm-14", "llvm-objdump-14")
    from cfi2sframe.compact.table import Lookup, read_unwind_info

    cxx = tmp_path / "f.cc"
    cxx.write_text(CXX)
    obj = _compile(cxx, NEW, "-O2", tmp_path / "f.o", "c++")
    image = tmp_path / "f.dylib"
    subprocess.run(["ld64.lld-14", "-arch", "x86_64", "-platform_version", "macos", "10.15",
                    "10.15", "-dylib", "-undefined", "dynamic_lookup", "-o", str(image),
                    str(obj)], check=True)
    mine, theirs = _symbols(obj), _symbols(image)
    view = open_macho(image.read_bytes())
    section = view.section("__TEXT", "__unwind_info")
    assert section is not None
    lld_table = read_unwind_info(view.section_data(section))
    (slot,) = lld_table.personalities
    text_at = theirs["__Z1fi"] - mine["__Z1fi"]
    table_at = theirs["GCC_except_table0"] - mine["GCC_except_table0"] + open_macho(
        obj.read_bytes()).section("__TEXT", "__gcc_except_tab").addr
    built = tmp_path / "ours.bin"
    proc = cfi2sframe("compact", "--emit", "unwind-info", "--place", f"{obj}@{text_at:#x}",
                      "--place", f"{obj}:__TEXT,__gcc_except_tab@{table_at:#x}",
                      "--personality", f"___gxx_personality_v0={slot:#x}", "--image-base",
                      "0", "-o", str(built), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lld, ours = Lookup(view.section_data(section)), Lookup(built.read_bytes())
    functions = [theirs[name] for name in ("__Z1fi", "__Z4leafi", "__Z3bigiiiiii")]
    found = [ours.find(pc) for pc in functions]
    assert found == [lld.find(pc) for pc in functions]
    assert found[0] is not None and found[0].lsda is not None and found[0].personality == slot
    proc = cfi2sframe("compact", "--emit", "unwind-info", "--place", f"{obj}@{text_at:#x}",
                      "--place", f"{obj}:__DATA,__nothing@0x10", cwd=tmp_path)
    assert proc.returncode == 1 and "no section __DATA,__nothing to place" in proc.stderr
