"""The structures of ``__TEXT,__unwind_info``, each field named once, as
``compact_unwind_encoding.h`` declares them (all little-endian, as the images that
carry it): the section header, the first-level index entry, the LSDA index entry, the
regular and compressed second-level page headers and their entries, and the arrays of
32-bit words (common encodings, personality routines, a page's own encodings).

``tests/unit/test_layouts.py`` holds every size and offset against the header file,
counted by hand.  The reader (``table.py``) and the writer (``table_writer.py``) name
fields here; neither writes an offset or a size as a number.
"""

from __future__ import annotations

from ..cstruct import Array, CStruct

VERSION = 1  # UNWIND_SECTION_VERSION
REGULAR, COMPRESSED = 2, 3  # UNWIND_SECOND_LEVEL_REGULAR, UNWIND_SECOND_LEVEL_COMPRESSED

HEADER = CStruct("unwind_info_section_header", (
    ("version", "I"), ("commonEncodingsArraySectionOffset", "I"),
    ("commonEncodingsArrayCount", "I"), ("personalityArraySectionOffset", "I"),
    ("personalityArrayCount", "I"), ("indexSectionOffset", "I"), ("indexCount", "I")))
INDEX_ENTRY = CStruct("unwind_info_section_header_index_entry", (
    ("functionOffset", "I"), ("secondLevelPagesSectionOffset", "I"),
    ("lsdaIndexArraySectionOffset", "I")))
LSDA_ENTRY = CStruct("unwind_info_section_header_lsda_index_entry", (
    ("functionOffset", "I"), ("lsdaOffset", "I")))
# Both page headers open with the same three fields: kind says which it is.
PAGE_KIND = CStruct("unwind_info_second_level_page_header", (
    ("kind", "I"), ("entryPageOffset", "H"), ("entryCount", "H")))
REGULAR_PAGE = CStruct("unwind_info_regular_second_level_page_header", PAGE_KIND.fields)
COMPRESSED_PAGE = CStruct("unwind_info_compressed_second_level_page_header", (
    *PAGE_KIND.fields, ("encodingsPageOffset", "H"), ("encodingsCount", "H")))
REGULAR_ENTRY = CStruct("unwind_info_regular_second_level_entry", (
    ("functionOffset", "I"), ("encoding", "I")))
# A compressed entry is one 32-bit word: the function's offset from the page's first
# function in its low 24 bits, the encoding's index in its high 8.
COMPRESSED_ENTRY = Array("uint32_t", "I")
ENTRY_FUNC_OFFSET_BITS = 24
ENTRY_FUNC_OFFSET_MASK = (1 << ENTRY_FUNC_OFFSET_BITS) - 1
ENCODINGS = Array("compact_unwind_encoding_t", "I")  # common, and a page's own
PERSONALITIES = Array("uint32_t", "I")  # image offsets of the routines' pointers


def compressed_entry(offset: int, encoding_index: int) -> int:
    """The word of a compressed entry (UNWIND_INFO_COMPRESSED_ENTRY_*, written)."""
    return encoding_index << ENTRY_FUNC_OFFSET_BITS | offset


def entry_offset(word: int) -> int:
    """UNWIND_INFO_COMPRESSED_ENTRY_FUNC_OFFSET."""
    return word & ENTRY_FUNC_OFFSET_MASK


def entry_encoding_index(word: int) -> int:
    """UNWIND_INFO_COMPRESSED_ENTRY_ENCODING_INDEX."""
    return word >> ENTRY_FUNC_OFFSET_BITS
