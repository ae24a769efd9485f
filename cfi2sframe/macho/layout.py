"""The Mach-O structures this package reads and writes, each field named once, as
Apple's <mach-o/loader.h>, <mach-o/nlist.h>, <mach-o/reloc.h> and <mach-o/fat.h>
declare them, and the ``__LD,__compact_unwind`` row LLVM and ld64 exchange.

Thin files are little-endian on every target read here (x86-64, arm64, i386); the
fat header and its ``fat_arch`` entries are big-endian.  ``Widths`` picks the 32- or
64-bit form of each structure that has two.  ``tests/unit/test_layouts.py`` holds
every size and offset against the headers, counted by hand.
"""

from __future__ import annotations

from ..cstruct import Array, CStruct
from ..typed import NamedTuple

LOAD_COMMAND = CStruct("load_command", (("cmd", "I"), ("cmdsize", "I")))

_HEADER = (("magic", "I"), ("cputype", "i"), ("cpusubtype", "i"), ("filetype", "I"),
           ("ncmds", "I"), ("sizeofcmds", "I"), ("flags", "I"))
MACH_HEADER = CStruct("mach_header", _HEADER)
MACH_HEADER_64 = CStruct("mach_header_64", (*_HEADER, ("reserved", "I")))


def _segment(name: str, word: str) -> CStruct:
    return CStruct(name, (("cmd", "I"), ("cmdsize", "I"), ("segname", "16s"),
                          ("vmaddr", word), ("vmsize", word), ("fileoff", word),
                          ("filesize", word), ("maxprot", "i"), ("initprot", "i"),
                          ("nsects", "I"), ("flags", "I")))


SEGMENT_COMMAND = _segment("segment_command", "I")
SEGMENT_COMMAND_64 = _segment("segment_command_64", "Q")

_SECTION_TAIL = (("offset", "I"), ("align", "I"), ("reloff", "I"), ("nreloc", "I"),
                 ("flags", "I"), ("reserved1", "I"), ("reserved2", "I"))
SECTION = CStruct("section", (("sectname", "16s"), ("segname", "16s"), ("addr", "I"),
                              ("size", "I"), *_SECTION_TAIL))
SECTION_64 = CStruct("section_64", (("sectname", "16s"), ("segname", "16s"), ("addr", "Q"),
                                    ("size", "Q"), *_SECTION_TAIL, ("reserved3", "I")))

_NLIST = (("n_strx", "I"), ("n_type", "B"), ("n_sect", "B"), ("n_desc", "h"))
NLIST = CStruct("nlist", (*_NLIST, ("n_value", "I")))
NLIST_64 = CStruct("nlist_64", (*_NLIST, ("n_value", "Q")))

SYMTAB_COMMAND = CStruct("symtab_command", (("cmd", "I"), ("cmdsize", "I"), ("symoff", "I"),
                                            ("nsyms", "I"), ("stroff", "I"),
                                            ("strsize", "I")))
# The (offset, count) pairs of dysymtab_command that name link-edit tables.
DYSYMTAB_TABLES = (("tocoff", "ntoc"), ("modtaboff", "nmodtab"),
                   ("extrefsymoff", "nextrefsyms"), ("indirectsymoff", "nindirectsyms"),
                   ("extreloff", "nextrel"), ("locreloff", "nlocrel"))
DYSYMTAB_COMMAND = CStruct("dysymtab_command", (
    ("cmd", "I"), ("cmdsize", "I"), ("ilocalsym", "I"), ("nlocalsym", "I"),
    ("iextdefsym", "I"), ("nextdefsym", "I"), ("iundefsym", "I"), ("nundefsym", "I"),
    *((field, "I") for pair in DYSYMTAB_TABLES for field in pair)))
LINKEDIT_DATA_COMMAND = CStruct("linkedit_data_command", (
    ("cmd", "I"), ("cmdsize", "I"), ("dataoff", "I"), ("datasize", "I")))

# The entries of the tables dysymtab_command names, by size only (nothing here reads
# them): dylib_table_of_contents, dylib_module(_64), uint32_t indices, relocation_info.
DYLIB_TABLE_OF_CONTENTS_SIZE = 8
DYLIB_MODULE_SIZE, DYLIB_MODULE_64_SIZE = 52, 56
INDEX = Array("uint32_t", "I")

# relocation_info: r_address, then one word of bit fields (r_symbolnum:24, r_pcrel:1,
# r_length:2, r_extern:1, r_type:4, from bit 0 up); a scattered_relocation_info has
# r_scattered set in its first word (r_address:24, r_type:4, r_length:2, r_pcrel:1).
RELOCATION_INFO = CStruct("relocation_info", (("r_address", "I"), ("r_info", "I")))
R_SCATTERED = 0x80000000


class RelocFields(NamedTuple):
    """The fields of a ``relocation_info`` (or a scattered one's, symbolnum 0)."""

    address: int
    symbolnum: int
    pcrel: bool
    length: int
    extern: bool
    kind: int


def relocation_fields(r_address: int, r_info: int) -> RelocFields:
    """The bit fields of a relocation's two words."""
    if r_address & R_SCATTERED:  # r_value (the second word) holds the target's address
        return RelocFields(r_address & 0xFFFFFF, 0, bool(r_address >> 30 & 1),
                           r_address >> 28 & 3, False, r_address >> 24 & 0xF)
    return RelocFields(r_address, r_info & 0xFFFFFF, bool(r_info >> 24 & 1),
                       r_info >> 25 & 3, bool(r_info >> 27 & 1), r_info >> 28)


def relocation_info(address: int, symbolnum: int, pcrel: bool, length: int, extern: bool,
                    kind: int) -> bytes:
    """A (not scattered) ``relocation_info``."""
    return RELOCATION_INFO.pack(address, symbolnum | int(pcrel) << 24 | length << 25
                                | int(extern) << 27 | kind << 28)


FAT_HEADER = CStruct("fat_header", (("magic", "I"), ("nfat_arch", "I")), ">")
FAT_ARCH = CStruct("fat_arch", (("cputype", "i"), ("cpusubtype", "i"), ("offset", "I"),
                                ("size", "I"), ("align", "I")), ">")
FAT_ARCH_64 = CStruct("fat_arch_64", (("cputype", "i"), ("cpusubtype", "i"),
                                      ("offset", "Q"), ("size", "Q"), ("align", "I"),
                                      ("reserved", "I")), ">")


def _compact_unwind_entry(word: str) -> CStruct:
    """A ``__LD,__compact_unwind`` row: pointers of the file's size around two 32-bit
    words (LLVM's MCCompactUnwind layout, which ld64 reads)."""
    return CStruct("compact_unwind_entry", (("start", word), ("length", "I"),
                                            ("encoding", "I"), ("personality", word),
                                            ("lsda", word)))


COMPACT_UNWIND_ENTRY = _compact_unwind_entry("I")
COMPACT_UNWIND_ENTRY_64 = _compact_unwind_entry("Q")

# A relocated field's value: relocation_info's r_length (2: 4 bytes, 3: 8 bytes).
RELOCATED_FIELD = {2: Array("uint32_t", "I"), 3: Array("uint64_t", "Q")}


class Widths(NamedTuple):
    """The forms of one pointer size: 32-bit (i386) or 64-bit files."""

    pointer: int
    header: CStruct
    segment_cmd: int  # LC_SEGMENT or LC_SEGMENT_64
    segment: CStruct
    section: CStruct
    nlist: CStruct
    compact_unwind_entry: CStruct
    dylib_module_size: int
    reloc_length: int  # a pointer's r_length


LC_SEGMENT, LC_SEGMENT_64 = 0x1, 0x19
WIDE = Widths(8, MACH_HEADER_64, LC_SEGMENT_64, SEGMENT_COMMAND_64, SECTION_64, NLIST_64,
              COMPACT_UNWIND_ENTRY_64, DYLIB_MODULE_64_SIZE, 3)
NARROW = Widths(4, MACH_HEADER, LC_SEGMENT, SEGMENT_COMMAND, SECTION, NLIST,
                COMPACT_UNWIND_ENTRY, DYLIB_MODULE_SIZE, 2)


def widths(pointer_size: int) -> Widths:
    return WIDE if pointer_size == 8 else NARROW
