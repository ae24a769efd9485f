"""An empty .sframe (0 bytes) holds no FDE, as no section: binutils 2.45 puts one of type
SHT_GNU_SFRAME in Ubuntu 25.10's Scrt1.o (mold broke on it: rui314/mold#1646), and gold
and lld keep it in what they link.  dump says so in readelf's line, verify and stats
read the file as one without SFrame, and --in-place replaces it without --replace.
Inputs are made by real tools: as (an empty PROGBITS .sframe), objcopy on a gcc object
(the section's type then written as SHT_GNU_SFRAME, as binutils 2.45 writes it), gold."""

from __future__ import annotations

import json
import struct
import subprocess
from pathlib import Path

from tests.conftest import cfi2sframe, require

SHT_GNU_SFRAME = 0x6FFFFFF4  # GNU's section type (elf/common.h; the SFrame spec)
EMPTY_LINE = "Section '.sframe' has no data to dump.\n"


def _section_type(path: Path, name: bytes, kind: int) -> None:
    """Write ``kind`` as the sh_type of section ``name`` of a little-endian ELF64 file:
    the 4 bytes at offset 4 of its section header (ELF gABI), as objcopy cannot set it."""
    data = bytearray(path.read_bytes())
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shnum, shstrndx = struct.unpack_from("<HH", data, 0x3C)
    strings, = struct.unpack_from("<Q", data, shoff + shstrndx * 64 + 0x18)
    for header in range(shoff, shoff + shnum * 64, 64):
        at = strings + struct.unpack_from("<I", data, header)[0]
        if data[at : data.index(b"\0", at)] == name:
            struct.pack_into("<I", data, header + 4, kind)
    path.write_bytes(bytes(data))


def _sections(path: Path) -> list[list[str]]:
    """readelf -SW's rows for sections called .sframe: [name, type, address, offset,
    size, ...]."""
    text = subprocess.run(["readelf", "-SW", str(path)], capture_output=True, text=True,
                          check=True).stdout
    return [line.split("]", 1)[1].split() for line in text.splitlines()
            if "]" in line and line.split("]", 1)[1].split()[:1] == [".sframe"]]


def _fde_count(path: Path) -> int:
    text = subprocess.run(["readelf", "-wf", str(path)], capture_output=True, text=True,
                          check=True).stdout
    return text.count(" FDE cie=")


def _empty_objects(folder: Path) -> list[Path]:
    """An object from as with an empty PROGBITS .sframe, and gcc's object of a small
    program with an empty SHT_GNU_SFRAME one (objcopy, then the type)."""
    require("as", "gcc", "objcopy", "readelf")
    source = folder / "f.s"
    source.write_text('\t.section .sframe,"a",@progbits\n\t.text\n\t.globl f\n'
                      "\t.type f, @function\nf:\n\t.cfi_startproc\n\tpushq %rbp\n"
                      "\t.cfi_def_cfa_offset 16\n\t.cfi_offset 6, -16\n\tpopq %rbp\n"
                      "\t.cfi_def_cfa_offset 8\n\tret\n\t.cfi_endproc\n\t.size f, .-f\n")
    from_as = folder / "from_as.o"
    subprocess.run(["as", str(source), "-o", str(from_as)], check=True)
    program = folder / "h.c"
    program.write_text('#include <stdio.h>\nint work(int n) { return n * 3; }\n'
                       'int main(void) { printf("%d\\n", work(2)); return 0; }\n')
    plain = folder / "h.o"
    subprocess.run(["gcc", "-O2", "-c", str(program), "-o", str(plain)], check=True)
    from_gcc = folder / "from_gcc.o"
    subprocess.run(["objcopy", "--add-section", ".sframe=/dev/null", "--set-section-flags",
                    ".sframe=alloc,readonly", str(plain), str(from_gcc)], check=True)
    _section_type(from_gcc, b".sframe", SHT_GNU_SFRAME)
    assert [row[1:5:3] for row in _sections(from_as)] == [["PROGBITS", "000000"]]
    assert [row[1:5:3] for row in _sections(from_gcc)] == [["LOOS+0xffffff4", "000000"]]
    return [from_as, from_gcc]


def test_an_empty_sframe_reads_as_no_fdes(tmp_path):
    for obj in _empty_objects(tmp_path):
        # readelf 2.40 prints this line, then calls the section corrupt (exit 1).
        readelf = subprocess.run(["readelf", "--sframe", str(obj)], capture_output=True,
                                 text=True, check=False)
        assert readelf.stdout == EMPTY_LINE, readelf.stdout
        proc = cfi2sframe("dump", str(obj), cwd=tmp_path)
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, EMPTY_LINE, ""), proc.stderr
        proc = cfi2sframe("dump", "--json", str(obj), cwd=tmp_path)
        assert proc.returncode == 0
        assert (json.loads(proc.stdout)["num_fdes"], json.loads(proc.stdout)["fdes"]) == (0, [])
        # verify: as for a file without .sframe, the section --in-place would write.
        proc = cfi2sframe("verify", str(obj), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert f": {_fde_count(obj)} functions checked at every PC, 0 mismatches, 0 without " \
               "SFrame" in proc.stdout, proc.stdout
        assert "note: its .sframe is empty (0 bytes: no SFrame FDEs)" in proc.stderr
        proc = cfi2sframe("stats", str(obj), cwd=tmp_path)
        assert proc.returncode == 0 and "files           1 (1 ok)" in proc.stdout, proc.stdout
        proc = cfi2sframe("lookup", str(obj), "0", cwd=tmp_path)
        assert proc.returncode == 0 and "CFA = rsp+8" in proc.stdout, proc.stdout


def test_in_place_replaces_an_empty_sframe_without_replace(tmp_path):
    for obj in _empty_objects(tmp_path):
        proc = cfi2sframe("--in-place", "--fatal-warnings", str(obj), cwd=tmp_path)
        assert (proc.returncode, proc.stderr) == (0, ""), proc.stderr
        (row,) = _sections(obj)  # the one section, now SFrame with bytes
        assert row[1] == "LOOS+0xffffff4" and int(row[4], 16) > 28, row
        relocations = subprocess.run(["readelf", "-rW", str(obj)], capture_output=True,
                                     text=True, check=True).stdout
        assert "'.rela.sframe'" in relocations
        proc = cfi2sframe("verify", str(obj), cwd=tmp_path)
        assert proc.returncode == 0 and f": {_fde_count(obj)} functions checked at every " \
            "PC, 0 mismatches, 0 without SFrame, 0 only in SFrame" in proc.stdout, proc.stdout
        # Now it has a section of its own: refused again without --replace.
        proc = cfi2sframe("--in-place", str(obj), cwd=tmp_path)
        assert proc.returncode == 1 and "already has an .sframe section" in proc.stderr


def test_a_linked_program_with_an_empty_sframe(tmp_path):
    """gold keeps an input's empty .sframe in the program it links (GNU ld 2.40 drops
    it); --in-place then adds the loadable section without --replace, and it runs."""
    require("ld.gold")
    obj = _empty_objects(tmp_path)[1]
    program = tmp_path / "prog"
    subprocess.run(["gcc", "-fuse-ld=gold", str(obj), "-o", str(program)], check=True)
    assert [row[1:5:3] for row in _sections(program)] == [["LOOS+0xffffff4", "000000"]]
    assert cfi2sframe("dump", str(program), cwd=tmp_path).stdout == EMPTY_LINE
    proc = cfi2sframe("--in-place", "--fatal-warnings", str(program), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    headers = subprocess.run(["readelf", "-lW", str(program)], capture_output=True,
                             text=True, check=True).stdout
    assert headers.count("GNU_SFRAME") == 1
    assert subprocess.run([str(program)], capture_output=True, text=True,
                          check=False).stdout == "6\n"
    proc = cfi2sframe("verify", str(program), cwd=tmp_path)
    assert proc.returncode == 0 and " 0 mismatches" in proc.stdout, proc.stdout


def test_nothing_to_describe_leaves_the_empty_section(tmp_path):
    """An object whose only function is an outermost frame: nothing to write, so the
    file is kept as it was, its empty section with it."""
    require("as")
    source = tmp_path / "start.s"
    source.write_text('\t.section .sframe,"a",@progbits\n\t.text\n\t.globl _start\n'
                      "_start:\n\t.cfi_startproc\n\t.cfi_undefined rip\n\thlt\n"
                      "\t.cfi_endproc\n")
    obj = tmp_path / "start.o"
    subprocess.run(["as", str(source), "-o", str(obj)], check=True)
    before = obj.read_bytes()
    proc = cfi2sframe("--in-place", "--fatal-warnings", str(obj), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert obj.read_bytes() == before


def test_one_byte_is_still_corrupt_and_a_raw_empty_file_is_refused(tmp_path):
    """The bound: 0 bytes is no section; 1 byte is a truncated header.  A raw file of 0
    bytes has no container saying it is SFrame at all: refused in one line."""
    require("as", "objcopy")
    obj = _empty_objects(tmp_path)[0]
    one = tmp_path / "one.bin"
    one.write_bytes(b"\xe2")
    subprocess.run(["objcopy", "--update-section", f".sframe={one}", str(obj)], check=True)
    proc = cfi2sframe("dump", str(obj), cwd=tmp_path)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1
    assert "SFrame header runs past the end of the section (1 bytes)" in proc.stderr
    raw = tmp_path / "empty.sframe"
    raw.write_bytes(b"")
    for command in ("dump", "lookup"):
        proc = cfi2sframe(command, str(raw), *(["0"] if command == "lookup" else []),
                          cwd=tmp_path)
        assert proc.returncode == 1 and proc.stderr == \
            f"{raw}: error: an empty file: this command reads ELF files and raw SFrame " \
            "sections\n", proc.stderr
