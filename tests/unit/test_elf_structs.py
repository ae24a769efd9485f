"""The declared ELF and SFrame records have the sizes and offsets their specs give
(derived by hand from the gABI's type widths and the SFrame specs), declared through
``cfi2sframe/cstruct.py`` as every layout is (``test_layouts.py``: the mechanism,
Mach-O's and ``__unwind_info``'s)."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest

from cfi2sframe.analysis.process import build_id_of
from cfi2sframe.elf import structs
from cfi2sframe.elf.archive import AR_HDR, HEADER_SIZE
from cfi2sframe.elf.grow import allocated_section, read_only_segment
from cfi2sframe.elf.read import open_elf
from cfi2sframe.errors import DecodeError
from cfi2sframe.sframe import format as sf
from tests.conftest import require, require_path

SIZES = [  # (record, ELF32 size, ELF64 size), from the gABI
    (structs.EHDR, 52, 64), (structs.SHDR, 40, 64), (structs.PHDR, 32, 56),
    (structs.SYM, 16, 24), (structs.RELA, 12, 24), (structs.REL, 8, 16),
    (structs.DYN, 8, 16), (structs.CHDR, 12, 24), (structs.NHDR, 12, 12),
    (structs.RELR, 4, 8), (structs.ADDR, 4, 8)]  # Elf_Relr: Word/Xword; a pointer: Addr


@pytest.mark.parametrize(("record", "size32", "size64"), SIZES)
def test_elf_record_sizes(record: structs.ElfRecord, size32: int, size64: int) -> None:
    assert (record[False].size, record[True].size) == (size32, size64)
    for is64 in (False, True):
        for little in (False, True):
            assert record[is64].of(little).size == record[is64].size


def test_elf_offsets_the_gabi_gives() -> None:
    e64, e32 = structs.EHDR[True], structs.EHDR[False]
    assert [e64.offset(f) for f in ("e_entry", "e_phoff", "e_shoff", "e_phentsize",
                                    "e_shentsize", "e_shstrndx")] == [0x18, 0x20, 0x28, 0x36,
                                                                      0x3A, 0x3E]
    assert [e32.offset(f) for f in ("e_entry", "e_phoff", "e_shoff", "e_phentsize",
                                    "e_shentsize", "e_shstrndx")] == [0x18, 0x1C, 0x20, 0x2A,
                                                                      0x2E, 0x32]
    assert structs.PHDR[True].offset("p_flags") == 4
    assert structs.PHDR[False].offset("p_flags") == 24
    assert structs.SYM[False].offset("st_shndx") == 14
    assert structs.SYM[True].offset("st_shndx") == 6


def test_one_field_read_and_written_in_either_order() -> None:
    for little in (False, True):
        out = bytearray(structs.SHDR[True].size)
        structs.SHDR[True].write(out, 0, "sh_offset", 0x1122334455, little)
        assert structs.SHDR[True].of(little).unpack_from(out)[4] == 0x1122334455
        assert structs.SHDR[True].read(out, 0, "sh_offset", little) == 0x1122334455


def test_relocation_info() -> None:
    for is64 in (False, True):
        info = structs.r_info(5, 7, is64)
        assert (structs.r_sym(info, is64), structs.r_type(info, is64)) == (5, 7)


def test_sframe_record_sizes() -> None:
    """SFrame V2 errata 1 and V3: preamble 4, header 28, FDE 17 (V1), 20 (V2), 16 (V3
    index entry) with V3's 5-byte attribute; FRE start fields of 1, 2 and 4 bytes."""
    assert sf.PREAMBLE.size == 4
    assert sf.HEADER.size == sf.HEADER_SIZE == 28
    assert {v: layout.size for v, layout in sf.FDE_LAYOUT.items()} == {1: 17, 2: 20, 3: 16}
    assert sf.FDE_SIZE == {1: 17, 2: 20}
    assert sf.V3_ATTR.size == 5
    assert {size: sf.FRE_HEAD[size].size for size in sf.FRE_ADDR_SIZE.values()} == {
        1: 2, 2: 3, 4: 5}
    assert sf.HEADER.offset("num_fdes") == 8 and sf.HEADER.offset("freoff") == 24
    assert sf.FDE_LAYOUT[2].offset("info") == 16
    assert struct.calcsize("<" + "H") == sf.PREAMBLE.offset("version")


def test_ar_member_header() -> None:
    """ar(5): name 16, date 12, uid 6, gid 6, mode 8, size 10, magic 2: 60 bytes."""
    assert AR_HDR.size == HEADER_SIZE == 60
    assert AR_HDR.span("ar_size") == slice(48, 58)
    assert AR_HDR.span("ar_fmag") == slice(58, 60)


def test_the_entries_a_linked_file_gains() -> None:
    """The program header entry and section header a conversion adds, ELF64 (gABI:
    Phdr type, flags, offset, vaddr, paddr, filesz, memsz, align; Shdr name, type,
    flags, addr, offset, size, link, info, addralign, entsize), bytes written by hand."""
    load = ("01000000" "04000000" "0010000000000000" "0020400000000000" "0020400000000000"
            "3000000000000000" "3000000000000000" "0010000000000000")
    assert read_only_segment(True, 1, 0x1000, 0x402000, 0x30, 0x1000) == bytes.fromhex(load)
    sframe = ("00000011" "6ffffff4" "0000000000000002" "0000000000005000" "0000000000003000"
              "0000000000000040" "00000000" "00000000" "0000000000000008" "0000000000000000")
    assert allocated_section(False, 0x11, 0x6FFFFFF4, 0x5000, 0x3000, 0x40) == \
        bytes.fromhex(sframe)


def _note(name: bytes, desc: bytes, little: bool) -> bytes:
    """A gABI note written by hand: three 4-byte words, the name padded to 4, the desc."""
    order = "little" if little else "big"
    words = b"".join(n.to_bytes(4, order) for n in (len(name), len(desc), 3))
    return words + name + bytes(-len(name) % 4) + desc


@pytest.mark.parametrize("little", [True, False])
@pytest.mark.parametrize("is64", [True, False])
def test_a_notes_descriptor_follows_its_padded_name(is64: bool, little: bool) -> None:
    ident = bytes(range(20))
    gnu = _note(b"GNU\0", ident, little)  # name 4: the descriptor at 16
    assert build_id_of(b"xx" + gnu, is64, little, 2, len(gnu)) == ident
    odd = _note(b"GNU!\0", ident, little)  # name 5, padded to 8: the descriptor at 20
    assert build_id_of(odd, is64, little, 0, len(odd)) == ident
    assert build_id_of(gnu, is64, little, 0, len(gnu) - 1) == b""  # cut: one byte short
    assert build_id_of(gnu, is64, little, 0, 11) == b""  # shorter than its header
    assert build_id_of(gnu[:-1], is64, little, 0, len(gnu)) == b""  # past the file's end


def test_a_programs_build_id_is_readelfs() -> None:
    require("readelf")
    path = "/usr/bin/true"
    require_path(path)
    shown = subprocess.run(["readelf", "-n", path], capture_output=True, text=True,
                           check=True).stdout
    expected = next(line.split(":", 1)[1].strip() for line in shown.splitlines()
                    if "Build ID" in line)
    data = Path(path).read_bytes()
    view = open_elf(data, path)
    note = view.section(".note.gnu.build-id")
    assert note is not None
    assert build_id_of(data, view.is64, view.little_endian, note.offset,
                       note.size).hex() == expected


def test_a_section_name_table_of_no_bytes_is_an_error() -> None:
    """Found by fuzzing the rewrite path: a linked file whose section name table's type
    was SHT_NOBITS (8; gABI: such a section occupies no space in the file).  The reader
    took names from its bytes, the rewriter kept none of them, and the rewritten file's
    check found an empty .sframe: an internal error for the input's fault.  Now the
    reader says so, at that section's header (ELF64: e_shoff at 0x28, e_shentsize at
    0x3A, e_shstrndx at 0x3E; sh_type at byte 4 of a header)."""
    data = bytearray(Path("/usr/bin/true").read_bytes())
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, _, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    header = shoff + shstrndx * shentsize
    assert struct.unpack_from("<I", data, header + 4)[0] == 3  # SHT_STRTAB
    assert open_elf(bytes(data), "true").section(".text") is not None
    struct.pack_into("<I", data, header + 4, 8)  # SHT_NOBITS
    try:
        open_elf(bytes(data), "true")
    except DecodeError as exc:
        assert exc.offset == header and str(exc.args[-1]).endswith(
            f"the section name table (section {shstrndx}) is SHT_NOBITS: it holds no "
            "names in the file"), exc.args
    else:
        raise AssertionError("a SHT_NOBITS section name table was read")


@pytest.mark.parametrize(("field", "value", "words"), [
    (4, 2, "section 0 has type 2, not SHT_NULL"),
    (0, 0x3B, "section 0 has a name (at 0x3b), not 0"),
])
def test_a_section_0_not_all_null_is_an_error(field: int, value: int, words: str) -> None:
    """Found by fuzzing the rewrite path, objects whose section 0 had type SHT_SYMTAB
    (2), which the writer took for the symbol table and linked .rela.sframe to; or an
    sh_name of the name table's old length (0x3b), so the ".sframe" the writer appends
    there named section 0 too, found first (empty) by the rewritten file's check.  Each
    was an internal error.  gABI: section index 0 is reserved, SHT_NULL and nameless;
    the reader now says so at e_shoff.  ``field``: sh_type (+4) or sh_name (+0)."""
    data = bytearray(Path("/usr/bin/true").read_bytes())
    shoff, = struct.unpack_from("<Q", data, 0x28)
    assert struct.unpack_from("<I", data, shoff + field)[0] == 0
    struct.pack_into("<I", data, shoff + field, value)
    try:
        open_elf(bytes(data), "true")
    except DecodeError as exc:
        assert exc.offset == shoff and str(exc.args[-1]).endswith(words), exc.args
    else:
        raise AssertionError(f"a section 0 with {value:#x} at +{field} was read")
