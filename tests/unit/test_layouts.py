"""The declared layouts against the headers and specs, counted by hand.

One mechanism declares them all (``cfi2sframe/cstruct.py``); ELF's, SFrame's and the
ar header's are held to their specs in ``test_elf_structs.py``.
``__unwind_info``: /work/shared/reference/compact_unwind_encoding.h (every field a
uint32_t or uint16_t, in declaration order).  Mach-O: <mach-o/loader.h>, <nlist.h>,
<reloc.h>, <fat.h> (cpu_type_t, cpu_subtype_t and vm_prot_t are int32; char[16] names;
uint64_t in the _64 forms).  Each expected offset below is the sum of the sizes of the
fields before it, written out, not computed by the module under test.
"""

from __future__ import annotations

import struct

import pytest

from cfi2sframe.compact import layout as ui
from cfi2sframe.cstruct import CStruct, Layout
from cfi2sframe.macho import layout as mo

# (layout, size, {field: offset}) for each structure.
UNWIND_INFO = [
    (ui.HEADER, 28, {"version": 0, "commonEncodingsArraySectionOffset": 4,
                     "commonEncodingsArrayCount": 8, "personalityArraySectionOffset": 12,
                     "personalityArrayCount": 16, "indexSectionOffset": 20,
                     "indexCount": 24}),
    (ui.INDEX_ENTRY, 12, {"functionOffset": 0, "secondLevelPagesSectionOffset": 4,
                          "lsdaIndexArraySectionOffset": 8}),
    (ui.LSDA_ENTRY, 8, {"functionOffset": 0, "lsdaOffset": 4}),
    (ui.REGULAR_ENTRY, 8, {"functionOffset": 0, "encoding": 4}),
    (ui.REGULAR_PAGE, 8, {"kind": 0, "entryPageOffset": 4, "entryCount": 6}),
    (ui.COMPRESSED_PAGE, 12, {"kind": 0, "entryPageOffset": 4, "entryCount": 6,
                              "encodingsPageOffset": 8, "encodingsCount": 10}),
]

MACHO = [
    (mo.MACH_HEADER, 28, {"magic": 0, "cputype": 4, "cpusubtype": 8, "filetype": 12,
                          "ncmds": 16, "sizeofcmds": 20, "flags": 24}),
    (mo.MACH_HEADER_64, 32, {"ncmds": 16, "sizeofcmds": 20, "flags": 24, "reserved": 28}),
    (mo.LOAD_COMMAND, 8, {"cmd": 0, "cmdsize": 4}),
    (mo.SEGMENT_COMMAND, 56, {"segname": 8, "vmaddr": 24, "vmsize": 28, "fileoff": 32,
                              "filesize": 36, "maxprot": 40, "initprot": 44, "nsects": 48,
                              "flags": 52}),
    (mo.SEGMENT_COMMAND_64, 72, {"segname": 8, "vmaddr": 24, "vmsize": 32, "fileoff": 40,
                                 "filesize": 48, "maxprot": 56, "initprot": 60,
                                 "nsects": 64, "flags": 68}),
    (mo.SECTION, 68, {"sectname": 0, "segname": 16, "addr": 32, "size": 36, "offset": 40,
                      "align": 44, "reloff": 48, "nreloc": 52, "flags": 56,
                      "reserved1": 60, "reserved2": 64}),
    (mo.SECTION_64, 80, {"addr": 32, "size": 40, "offset": 48, "align": 52, "reloff": 56,
                         "nreloc": 60, "flags": 64, "reserved1": 68, "reserved2": 72,
                         "reserved3": 76}),
    (mo.NLIST, 12, {"n_strx": 0, "n_type": 4, "n_sect": 5, "n_desc": 6, "n_value": 8}),
    (mo.NLIST_64, 16, {"n_strx": 0, "n_type": 4, "n_sect": 5, "n_desc": 6, "n_value": 8}),
    (mo.SYMTAB_COMMAND, 24, {"symoff": 8, "nsyms": 12, "stroff": 16, "strsize": 20}),
    (mo.DYSYMTAB_COMMAND, 80, {"ilocalsym": 8, "nundefsym": 28, "tocoff": 32, "ntoc": 36,
                               "modtaboff": 40, "nmodtab": 44, "extrefsymoff": 48,
                               "nextrefsyms": 52, "indirectsymoff": 56,
                               "nindirectsyms": 60, "extreloff": 64, "nextrel": 68,
                               "locreloff": 72, "nlocrel": 76}),
    (mo.LINKEDIT_DATA_COMMAND, 16, {"dataoff": 8, "datasize": 12}),
    (mo.RELOCATION_INFO, 8, {"r_address": 0, "r_info": 4}),
    (mo.FAT_HEADER, 8, {"magic": 0, "nfat_arch": 4}),
    (mo.FAT_ARCH, 20, {"cputype": 0, "cpusubtype": 4, "offset": 8, "size": 12,
                       "align": 16}),
    (mo.FAT_ARCH_64, 32, {"offset": 8, "size": 16, "align": 24, "reserved": 28}),
    # LLVM's and ld64's __compact_unwind row: pointer, uint32 length, uint32 encoding,
    # pointer personality, pointer LSDA (compact-unwind-notes.md: 32 and 20 bytes).
    (mo.COMPACT_UNWIND_ENTRY, 20, {"start": 0, "length": 4, "encoding": 8,
                                   "personality": 12, "lsda": 16}),
    (mo.COMPACT_UNWIND_ENTRY_64, 32, {"start": 0, "length": 8, "encoding": 12,
                                      "personality": 16, "lsda": 24}),
]


@pytest.mark.parametrize(("layout", "size", "offsets"), UNWIND_INFO + MACHO,
                         ids=lambda v: v.name if isinstance(v, CStruct) else "")
def test_sizes_and_offsets_as_the_headers_declare(layout: CStruct, size: int,
                                                  offsets: dict[str, int]) -> None:
    assert layout.size == size
    assert {field: layout.offset(field) for field in offsets} == offsets


def test_byte_orders_and_fields_round_trip() -> None:
    """The fat header is big-endian, the rest little; a field written by name is the
    field read back by name, and the others are left as they were."""
    assert mo.FAT_HEADER.pack(0xCAFEBABE, 2) == bytes.fromhex("cafebabe00000002")
    assert mo.MACH_HEADER.in_order(">").pack(1, 2, 3, 4, 5, 6, 7)[:8] == bytes.fromhex(
        "0000000100000002")
    buffer = bytearray(mo.SECTION_64.size)
    mo.SECTION_64.put(buffer, 0, "offset", 0x11223344)
    assert buffer[48:52] == bytes.fromhex("44332211")
    assert mo.SECTION_64.get(buffer, 0, "offset") == 0x11223344
    assert mo.SECTION_64.read(buffer)["align"] == 0
    fields = mo.SECTION_64.read(bytes(range(80)))
    assert mo.SECTION_64.pack_fields(fields) == bytes(range(80))


def test_bit_fields() -> None:
    """relocation_info's word (reloc.h: symbolnum 24 bits, pcrel, length 2, extern,
    type 4, from bit 0) and a compressed entry's (offset 24 bits, index 8)."""
    word = mo.relocation_info(0x10, 5, True, 3, True, 2)
    assert struct.unpack("<II", word) == (0x10, 5 | 1 << 24 | 3 << 25 | 1 << 27 | 2 << 28)
    assert mo.relocation_fields(*struct.unpack("<II", word)) == (0x10, 5, True, 3, True, 2)
    scattered = 0x80000000 | 1 << 30 | 2 << 28 | 1 << 24 | 0x123
    assert mo.relocation_fields(scattered, 0x4000) == (0x123, 0, True, 2, False, 1)
    assert ui.compressed_entry(0xABCDEF, 0x12) == 0x12ABCDEF
    assert (ui.entry_offset(0x12ABCDEF), ui.entry_encoding_index(0x12ABCDEF)) == \
        (0xABCDEF, 0x12)


def test_one_declaration_in_both_byte_orders() -> None:
    """A ``Layout`` is one ``CStruct`` per byte order: the same offsets, the bytes of
    each order as written out by hand."""
    layout = Layout("pair", (("a", "H"), ("b", "I")))
    assert isinstance(layout[True], CStruct)
    assert (layout[False].order, layout[True].order) == (">", "<")
    assert layout[True].pack(1, 2) == bytes.fromhex("0100 02000000")
    assert layout[False].pack(1, 2) == bytes.fromhex("0001 00000002")
    assert layout.offset("b") == layout[False].offset("b") == layout[True].offset("b") == 2
    assert layout.pack(False, b=2) == bytes.fromhex("0000 00000002")
    assert layout[True].pack_field("b", 2) == bytes.fromhex("02000000")
    assert layout.alone("b", True).unpack(bytes.fromhex("ffff 07000000")) == (7,)
    assert layout.after("a", False).unpack(bytes.fromhex("00000009")) == (9,)
