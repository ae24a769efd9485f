"""``dump``, ``lookup`` and ``verify`` of Mach-O files, on images two linkers wrote.

zig's Mach-O linker (``zig c++``, from ``pip install ziglang``) links a small C++
program with exceptions and libc++ into x86-64 and arm64 macOS images: hundreds of
functions, a personality routine, LSDAs, DWARF-mode functions (arm64) and an
``__eh_frame`` zig relocates.  ld64.lld-14 links the images of test_macho, whose
``__eh_frame`` it copies unrelocated and whose sentinel it takes too early.  The
oracle for ``dump`` and ``lookup`` is ``llvm-objdump --unwind-info``; for ``verify``
the DWARF CFI itself, with faults planted in a correct table."""

from __future__ import annotations

import json
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from cfi2sframe.compact.table import read_unwind_info
from cfi2sframe.macho.read import open_macho
from cfi2sframe.macho.unwind import eh_frame
from tests.conftest import cfi2sframe, require, require_module

from .test_macho import _dylib, _many_functions, _objdump_table, _objects

SOURCE = """#include <stdexcept>
extern "C" {
int g(int);
struct S { ~S(); };
S::~S() {}
int f(int x) { S s; if (x > 5) throw std::runtime_error("x"); return g(x) + 1; }
int leaf(int x) { return x * 3; }
int big(int a, int b, int c, int d, int e, int f2) {
  int v[64]; for (int i = 0; i < 64; i++) v[i] = g(i + a); return v[b & 63] + c + d + e + f2; }
}
"""
MAIN = """int f(int); int leaf(int); int big(int, int, int, int, int, int);
int g(int x) { return x + 1; }
int main(void) { return f(1) + leaf(2) + big(1, 2, 3, 4, 5, 6); }
"""


@pytest.fixture(scope="module")
def zig_images(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The program linked by zig for x86-64 and arm64 macOS (libc++ built once per
    machine into zig's cache: about a minute the first time)."""
    require("llvm-objdump-14")
    require_module("ziglang")
    folder = tmp_path_factory.mktemp("zig")
    (folder / "s.cc").write_text(SOURCE)
    (folder / "main.c").write_text(MAIN)
    out = {}
    for arch in ("x86_64", "arm64"):
        image = folder / f"prog-{arch}"
        subprocess.run([sys.executable, "-m", "ziglang", "c++", "-target",
                        f"{'aarch64' if arch == 'arm64' else arch}-macos", "-O2",
                        str(folder / "s.cc"), str(folder / "main.c"), "-o", str(image)],
                       check=True, capture_output=True, cwd=folder)
        out[arch] = image
    return out


def _objdump(path: Path) -> str:
    return subprocess.run(["llvm-objdump-14", "--unwind-info", str(path)], check=True,
                          capture_output=True, text=True).stdout


def test_dump_prints_every_field_llvm_objdump_prints(zig_images: dict[str, Path],
                                                     tmp_path: Path) -> None:
    """Line for line, once each row's name and meaning (after two spaces) are set
    aside: images of both linkers (compressed and regular pages, personalities,
    LSDAs) and the objects clang-14 writes."""
    require("ld64.lld-14", "llvm-mc")
    objects = _objects(tmp_path)
    images = [*zig_images.values(), _dylib(objects, "x86_64"), _dylib(objects, "arm64"),
              _many_functions(tmp_path, 1200, True)]
    for image in images:
        proc = cfi2sframe("dump", str(image), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        ours = [re.sub(r"(=0x[0-9a-f]{8})  .*$", r"\1", line)
                for line in proc.stdout.splitlines() if not line.startswith("  problem: ")]
        assert ours == _objdump(image).splitlines()[4:], image.name
        entries = [line for line in proc.stdout.splitlines() if "function offset=" in line
                   and "encoding" in line]
        assert all(re.search(r"  \S+: \S", line) for line in entries)  # name: meaning
    # Objects: the start's and LSDA's symbols aside (on arm64 llvm-objdump names the local label
    # ltmp0 where the function's symbol also is; we name the function)
    for arch in ("x86_64", "arm64"):
        proc = cfi2sframe("dump", str(objects[arch]), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        symbol = r"((?:start|LSDA):\s+0x[0-9a-f]+) .*$"
        ours = [re.sub(r"(encoding:\s+0x[0-9a-f]{8})  .*$|" + symbol, r"\1\2", line)
                for line in proc.stdout.splitlines()]
        theirs = [re.sub(r"(personality function: )0x[0-9a-f]+ |" + symbol, r"\1\2", line)
                  for line in _objdump(objects[arch]).splitlines()[4:]]
        assert ours == theirs, arch
    # --json: every function the table holds, as llvm-objdump reads it
    table = json.loads(cfi2sframe("dump", "--json", str(zig_images["arm64"]),
                                  cwd=tmp_path).stdout)
    entries, sentinel, _ = _objdump_table(zig_images["arm64"])
    base = table["image_base"]
    assert [(f["address"] - base, f["encoding"]) for f in table["functions"]] == entries
    assert table["sentinel"] - base == sentinel


def _nm(image: Path) -> dict[str, int]:
    out = subprocess.run(["llvm-nm-14", "--defined-only", str(image)], check=True,
                         capture_output=True, text=True).stdout
    return {line.split()[2]: int(line.split()[0], 16) for line in out.splitlines()
            if len(line.split()) == 3 and line.split()[1] in "tT"}


def test_lookup_finds_the_row_llvm_objdump_lists(zig_images: dict[str, Path],
                                                tmp_path: Path) -> None:
    """At each function's first byte, at its second and by its symbol name (from
    llvm-nm): the row llvm-objdump lists for that function; before the first function
    and past the sentinel, none (exit 1)."""
    require("llvm-nm-14")
    for image in zig_images.values():
        entries, sentinel, _ = _objdump_table(image)
        base = open_macho(image.read_bytes()).image_base
        rows = [(offset, encoding) for offset, encoding in entries if encoding]
        pcs = [f"{base + offset:#x}" for offset, _ in rows] + \
              [f"{base + offset + 1:#x}" for offset, _ in rows]
        proc = cfi2sframe("lookup", "--json", str(image), *pcs, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        found = json.loads(proc.stdout)
        want = [(base + offset, encoding) for offset, encoding in rows] * 2
        assert [(hit["function_start"], hit["encoding"]) for hit in found] == want
        names = _nm(image)
        by_name = {name: address for name, address in names.items()
                   if address - base in dict(rows)}
        assert len(by_name) > 100
        proc = cfi2sframe("lookup", "--json", str(image), *by_name, cwd=tmp_path)
        assert [hit["function_start"] for hit in json.loads(proc.stdout)] == list(by_name.values())
        proc = cfi2sframe("lookup", str(image), f"{base + sentinel:#x}",
                          f"{base + entries[0][0] - 1:#x}", cwd=tmp_path)
        assert proc.returncode == 1 and proc.stderr.count("error: no row") == 2


def _fdes(image: Path) -> int:
    """FDEs in the image's __eh_frame, as llvm-objdump reads them."""
    out = subprocess.run(["llvm-objdump-14", "--dwarf=frames", str(image)], check=True,
                         capture_output=True, text=True).stdout
    return len(re.findall(r"^[0-9a-f]{8} [0-9a-f]{8} [0-9a-f]{8} FDE ", out, re.M))


def test_verify_passes_on_zigs_images(zig_images: dict[str, Path], tmp_path: Path) -> None:
    """zig relocates __eh_frame and ends its index past the last function: every
    entry with an FDE (all of arm64's, which keeps one per function) checks against
    it; on x86-64, where zig drops the FDEs of compact functions, the entries check
    against what each prologue builds (all but the few whose code starts otherwise);
    a frame encoding planted wrong there is named."""
    for arch, image in zig_images.items():
        proc = cfi2sframe("verify", str(image), cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout
        fdes = _fdes(image)
        assert (fdes > 200) if arch == "arm64" else fdes == 0
        found = re.search(r", (\d+) checked against their DWARF CFI(?:, (\d+) against their "
                          r"prologue's code)?, 0 problems", proc.stdout)
        assert found and int(found.group(1)) == fdes, proc.stdout
        if arch == "x86_64":
            entries = _objdump_table(image)[0]
            assert int(found.group(2)) >= 0.95 * len(entries), proc.stdout
    # x86-64: an RBP frame's saved-register count changed in the table (regular or
    # compressed page alike: the word llvm-objdump shows for the entry)
    image = zig_images["x86_64"]
    view = open_macho(image.read_bytes())
    section = view.section("__TEXT", "__unwind_info")
    assert section is not None
    table = read_unwind_info(view.section_data(section))
    index = next(i for i, e in enumerate(table.common) if e & 0x0F000000 == 0x01000000
                 and e & 0x7FFF and not e & 0xF0000000)
    at = section.offset + table.header[1] + 4 * index
    wrong = table.common[index] & ~0x7 | (table.common[index] & 0x7) % 5 + 1  # slot 1
    planted = _plant(image, tmp_path / "x86-planted", at, wrong)
    proc = cfi2sframe("verify", str(planted), cwd=tmp_path)
    assert proc.returncode == 1 and f"its encoding {wrong:#010x}" in proc.stdout and \
        "is not what its prologue builds" in proc.stdout, proc.stdout


def test_verify_reports_lld_14s_sentinel_and_unrelocated_eh_frame(tmp_path: Path) -> None:
    """ld64.lld-14's images: its __eh_frame FDEs (llvm-objdump's own reading) cover
    no code, and its index ends at the last function's start."""
    require("ld64.lld-14", "llvm-mc")
    image = _many_functions(tmp_path, 600, False)
    text = subprocess.run(["llvm-objdump-14", "--dwarf=frames", str(image)], check=True,
                          capture_output=True, text=True).stdout
    first = re.search(r"FDE cie=\S+ pc=([0-9a-f]+)\.\.\.([0-9a-f]+)", text)
    assert first is not None
    view = open_macho(image.read_bytes())
    code = view.section("__TEXT", "__text")
    assert code is not None
    assert not code.addr <= int(first.group(1), 16) < code.addr + code.size  # lld's bug
    proc = cfi2sframe("verify", str(image), cwd=tmp_path)
    assert proc.returncode == 1
    assert (f"covers [{int(first.group(1), 16):#x}, {int(first.group(2), 16):#x})): the "
            "section was copied without being relocated") in proc.stdout
    assert "its sentinel, is not past the last function" in proc.stdout


def _plant(image: Path, out: Path, at: int, value: int) -> Path:
    data = bytearray(image.read_bytes())
    struct.pack_into("<I", data, at, value)
    out.write_bytes(bytes(data))
    return out


def test_verify_finds_faults_planted_in_a_correct_table(zig_images: dict[str, Path],
                                                         tmp_path: Path) -> None:
    """zig's arm64 table verifies; each fault planted in it is found and named: an
    encoding that unwinds differently, a function whose entry moved (its look-up
    finds another's row), the sentinel at the last function's start, a DWARF offset
    where no FDE starts, and a page whose count runs past the section."""
    image = zig_images["arm64"]
    view = open_macho(image.read_bytes())
    section = view.section("__TEXT", "__unwind_info")
    assert section is not None
    table = read_unwind_info(view.section_data(section))
    cfi = eh_frame(view, str(image))
    assert cfi is not None
    base = view.image_base
    with_fde = {fde.start - base for fde in cfi.fdes}
    names = view.function_names

    page = table.page_details[0]  # zig writes regular pages; lld compressed ones
    entries_at = section.offset + page.at + \
        struct.unpack_from("<H", view.data, section.offset + page.at + 4)[0]
    step = 8 if page.kind == "regular" else 4

    def encoding_at(i: int) -> int:
        """The file offset of entry ``i``'s encoding word (on a compressed page, the
        common or page encoding its index names)."""
        index = page.entries[i].encoding_index
        if index is None:
            return entries_at + 8 * i + 4
        if index < len(table.common):
            return section.offset + table.header[1] + 4 * index
        own = struct.unpack_from("<H", view.data, section.offset + page.at + 8)[0]
        return section.offset + page.at + own + 4 * (index - len(table.common))

    # zig gives every arm64 function that keeps an FDE DWARF mode: the wrong encoding
    # planted is a frame with no saved pair in place of one of those
    dwarf = next(i for i, e in enumerate(page.entries) if e.offset in with_fde
                 and e.encoding & 0x0F000000 == 0x03000000)
    frame = next(i for i, e in enumerate(page.entries) if e.offset in with_fde and i > dwarf)
    frame_name = names[base + page.entries[frame].offset]
    moved = next(i for i, e in enumerate(page.entries) if e.offset in with_fde and i > 0)
    moved_word = entries_at + step * moved
    word = struct.unpack_from("<I", view.data, moved_word)[0]
    dwarf_encoding = page.entries[dwarf].encoding
    last_index = section.offset + table.header[5] + 12 * (len(table.first_level) - 1)
    faults = {
        "encoding": (encoding_at(frame), 0x04000000,
                     f"'{frame_name}' at {base + page.entries[frame].offset:#x}: its encoding "
                     "0x04000000 (frame)"),
        "moved": (moved_word, word + 4, f"'{names[base + page.entries[moved].offset]}' at "
                                        f"{base + page.entries[moved].offset:#x} has an FDE, "
                                        "but libunwind's look-up"),
        "sentinel": (last_index, table.entries[-1].offset,
                     "its sentinel, is not past the last function"),
        "dwarf": (encoding_at(dwarf), dwarf_encoding + 4,
                  f"DWARF mode at __eh_frame+{(dwarf_encoding & 0xFFFFFF) + 4:#x}, where no "
                  "FDE starts"),
    }
    for name, (at, value, said) in faults.items():
        planted = _plant(image, tmp_path / name, at, value)
        proc = cfi2sframe("verify", str(planted), cwd=tmp_path)
        assert proc.returncode == 1 and said in proc.stdout, (name, proc.stdout)
    count_at = section.offset + page.at + 6
    planted = _plant(image, tmp_path / "overflow", count_at,
                     struct.unpack_from("<I", view.data, count_at)[0] | 0xFFFF)
    proc = cfi2sframe("verify", str(planted), cwd=tmp_path)
    assert proc.returncode == 1 and len(proc.stderr.splitlines()) == 1
    assert proc.stderr.startswith(f"{planted}: error: ") and "runs past the end of " \
        "__unwind_info" in proc.stderr


def test_verify_objects_against_their_eh_frame(tmp_path: Path) -> None:
    """clang-14's x86-64 object verifies (its rows are LLVM's, its FDEs one per
    function); a row's encoding changed in the file is named."""
    objects = _objects(tmp_path)
    proc = cfi2sframe("verify", str(objects["x86_64"]), cwd=tmp_path)
    assert proc.returncode == 0 and "3 __compact_unwind rows, 3 checked" in proc.stdout
    view = open_macho(objects["x86_64"].read_bytes())
    section = view.section("__LD", "__compact_unwind")
    assert section is not None
    at = section.offset + 32 * 2 + 12  # the third row's encoding
    encoding = struct.unpack_from("<I", view.data, at)[0]
    planted = _plant(objects["x86_64"], tmp_path / "planted.o", at, encoding ^ 0x10000)
    proc = cfi2sframe("verify", str(planted), cwd=tmp_path)
    assert proc.returncode == 1 and "unwinds differently from the CFI" in proc.stdout


def test_stats_verify_and_tree_runs_read_mach_o(zig_images: dict[str, Path],
                                                tmp_path: Path) -> None:
    """A tree of Mach-O files: stats counts each image's functions by mode as
    llvm-objdump lists them, verify -r fails only lld 14's image, and a conversion of
    the tree leaves every Mach-O file as it was."""
    import shutil

    require("ld64.lld-14", "llvm-mc")
    tree = tmp_path / "tree"
    tree.mkdir()
    for arch, image in zig_images.items():
        shutil.copy(image, tree / f"zig-{arch}")
    shutil.copy(_many_functions(tmp_path, 300, False), tree / "lld-x86_64")
    objects = _objects(tmp_path)
    shutil.copy(objects["fat"], tree / "fat.o")
    jsonl = tmp_path / "stats.jsonl"
    proc = cfi2sframe("stats", "-r", str(tree), "--jsonl", str(jsonl), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr  # lld's image does not verify
    records = {Path(r["path"]).name: r for r in map(json.loads, jsonl.read_text().splitlines())}
    for arch in ("x86_64", "arm64"):
        entries, _, _ = _objdump_table(zig_images[arch])
        dwarf = 0x03000000 if arch == "arm64" else 0x04000000
        macho = records[f"zig-{arch}"]["macho"]
        assert macho["functions"] == len(entries)
        assert macho["dwarf"] == sum(1 for _, e in entries if e & 0x0F000000 == dwarf)
        assert macho["none"] == sum(1 for _, e in entries if e == 0)
        assert records[f"zig-{arch}"]["status"] == "ok"
    assert records["fat.o"]["arch"] == "x86_64+arm64" and records["fat.o"]["macho"][
        "functions"] == 6
    assert records["lld-x86_64"]["status"] == "mismatch"
    assert "Mach-O          4 files" in proc.stdout
    proc = cfi2sframe("verify", "-r", str(tree), cwd=tmp_path)
    assert proc.returncode == 1
    assert [line.split(": ")[1] for line in proc.stdout.splitlines() if line.startswith("/")] \
        == ["ok", "FAILED", "ok", "ok"]  # fat.o, lld-x86_64, zig-arm64, zig-x86_64
    before = {p.name: p.read_bytes() for p in tree.iterdir()}
    proc = cfi2sframe("--in-place", "-r", str(tree), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert {p.name: p.read_bytes() for p in tree.iterdir()} == before


def test_unwind_info_built_again_for_zigs_images_means_the_same(
        zig_images: dict[str, Path], tmp_path: Path, report) -> None:
    """zig's tables (C++: a personality routine, LSDAs, DWARF-mode functions on arm64)
    built again by our writer: libunwind's look-up finds the same row (encoding,
    personality, LSDA) at every function's first byte; the built table verifies in the
    image in place of zig's."""
    require("llvm-objcopy-14")
    from cfi2sframe.compact.table import Lookup

    for arch, image in zig_images.items():
        built = tmp_path / f"{arch}.unwind_info"
        proc = cfi2sframe("compact", str(image), "--emit", "unwind-info", "-o", str(built),
                          cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        view = open_macho(image.read_bytes())
        section = view.section("__TEXT", "__unwind_info")
        assert section is not None
        theirs, ours = view.section_data(section), built.read_bytes()
        assert len(ours) <= section.size  # fits where zig's table is
        entries, _, lsdas = _objdump_table(image)
        assert lsdas, "the C++ program has LSDAs"
        mine, zigs = Lookup(ours), Lookup(theirs)
        assert all(mine.find(offset) == zigs.find(offset) for offset, _ in entries), arch
        report(f"__unwind_info of zig's {arch} C++ image built again: the same row at all "
               f"{len(entries)} functions; {len(ours)} bytes, zig's {len(theirs)}")
        swapped = tmp_path / f"{arch}-ours"
        subprocess.run(["llvm-objcopy-14", "--update-section",
                        f"__TEXT,__unwind_info={built}", str(image), str(swapped)],
                       check=True)
        proc = cfi2sframe("verify", str(swapped), cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout
