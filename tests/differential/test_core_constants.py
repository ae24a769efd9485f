"""The record layouts the compiled core repeats, bound to their Python homes by name: the
SFrame records of ``csrc/sframe.h`` (``SFRAME``) to ``sframe/format.py`` and
``sframe/words.py``, the ELF records of ``csrc/elf.h`` (``ELF``) to ``elf/structs.py``,
the XRay FDR records of ``csrc/xray.c`` (``XRAY``) to ``xray/records.py``, the
``__unwind_info`` layout of ``csrc/unwind_info.h`` (``UNWIND_TABLE``) to
``compact/layout.py`` and ``compact/words.py``, the full replay's row states of
``csrc/dwarf_replay.c`` (``ROW_STATE``) to ``dwarf/cfi.py``.  Changing a number on one side alone
fails here.  (``OPCODES``, ``EH_PE`` and ``UNWIND_INFO``, the listing's Mach-O symbol
numbers, are bound in test_core.py, test_core_eh.py and test_core_unwind_info.py.)
"""

from __future__ import annotations

from cfi2sframe.dwarf.cfi import ROW_FLAGS, RULE_KINDS, _replay
from cfi2sframe.elf.structs import REL, RELA, SYM, r_info, r_sym, r_type
from cfi2sframe.sframe.decode import FRE_TABLE
from cfi2sframe.sframe.format import FDE_LAYOUT, V3_ATTR, VERSION_1, VERSION_2, VERSION_3
from cfi2sframe.sframe.words import fre_info, fre_info_fields
from cfi2sframe.xray.records import (
    FUNC_KINDS,
    FUNCTION_SIZE,
    HEADER_SIZE,
    META_KINDS,
    METADATA_SIZE,
)
from tests.conftest import compiled_core


def _where(layout, field: str) -> tuple[int, int]:
    """A field's offset and size in a ``Layout``."""
    span = layout.span(field)
    return span.start, span.stop - span.start


def test_the_sframe_records_are_sframe_formats() -> None:
    c = dict(compiled_core().SFRAME)
    v1, v2, v3 = FDE_LAYOUT[VERSION_1], FDE_LAYOUT[VERSION_2], FDE_LAYOUT[VERSION_3]
    for fde in (v1, v2):  # V1 and V2 share every field the readers take
        assert _where(fde, "func_start") == (0, c["FDE_START_BYTES"])
        assert _where(fde, "func_size") == (c["FDE_SIZE_AT"], c["SIZE_BYTES"])
        assert _where(fde, "func_start_fre_off") == (c["FDE_FRE_OFF_AT"], c["SIZE_BYTES"])
        assert _where(fde, "func_num_fres") == (c["FDE_NUM_FRES_AT"], c["SIZE_BYTES"])
        assert _where(fde, "info") == (c["FDE_INFO_AT"], 1)
    assert _where(v2, "rep_size") == (c.pop("FDE_REP_AT"), 1)
    assert v2.size == c.pop("FDE_V2_BYTES")
    assert _where(v3, "func_start") == (0, c.pop("IDX_START_BYTES"))
    assert _where(v3, "func_size") == (c.pop("IDX_SIZE_AT"), c["SIZE_BYTES"])
    assert _where(v3, "func_start_fre_off") == (c.pop("IDX_FRE_OFF_AT"), c["SIZE_BYTES"])
    assert _where(V3_ATTR, "func_num_fres") == (c.pop("ATTR_NUM_FRES_AT"),
                                                c.pop("ATTR_NUM_FRES_BYTES"))
    assert _where(V3_ATTR, "func_info") == (c.pop("ATTR_INFO_AT"), 1)
    assert _where(V3_ATTR, "func_info2") == (c.pop("ATTR_INFO2_AT"), 1)
    assert _where(V3_ATTR, "func_rep_size") == (c.pop("ATTR_REP_AT"), 1)
    assert len(FRE_TABLE) == c.pop("FRE_INFOS") == 1 << 8  # one entry per info byte
    most = c.pop("FRE_WORDS_MAX")  # the widest word count an info byte holds
    assert fre_info_fields(fre_info(0, most, 0, False)).word_count == most
    assert fre_info_fields(fre_info(0, most + 1, 0, False)).word_count != most + 1
    for name in ("FDE_START_BYTES", "FDE_SIZE_AT", "FDE_FRE_OFF_AT", "FDE_NUM_FRES_AT",
                 "FDE_INFO_AT", "SIZE_BYTES"):
        c.pop(name)
    assert not c, f"numbers no test binds: {sorted(c)}"


def test_the_elf_records_are_elf_structs() -> None:
    c = dict(compiled_core().ELF)
    for bits, is64 in ((32, False), (64, True)):
        sym, rel, rela = SYM[is64], REL[is64], RELA[is64]
        assert sym.size == c.pop(f"ELF{bits}_SYM_BYTES")
        assert _where(sym, "st_name") == (c["ELF_ST_NAME_AT"], c["ELF_ST_NAME_BYTES"])
        assert _where(sym, "st_value") == (c.pop(f"ELF{bits}_ST_VALUE_AT"),
                                           c.pop(f"ELF{bits}_ADDR_BYTES"))
        assert _where(sym, "st_shndx") == (c.pop(f"ELF{bits}_ST_SHNDX_AT"),
                                           c["ELF_ST_SHNDX_BYTES"])
        assert _where(sym, "st_info") == (c.pop(f"ELF{bits}_ST_INFO_AT"), 1)
        assert rel.size == c.pop(f"ELF{bits}_REL_BYTES")
        assert rela.size == c.pop(f"ELF{bits}_RELA_BYTES")
        info_at = c.pop(f"ELF{bits}_R_INFO_AT")
        for layout in (rel, rela):
            assert layout.offset("r_offset") == c["ELF_R_OFFSET_AT"]
            assert layout.offset("r_info") == info_at
        assert rela.offset("r_addend") == c.pop(f"ELF{bits}_R_ADDEND_AT")
        shift, mask = c.pop(f"ELF{bits}_R_SYM_SHIFT"), c.pop(f"ELF{bits}_R_TYPE_MASK")
        info = r_info(0x5A, 0xC3, is64)
        assert (info >> shift, info & mask) == (r_sym(info, is64), r_type(info, is64))
        assert r_info(1, 0, is64) == 1 << shift and r_type(mask, is64) == mask
        assert r_type(mask + 1, is64) == 0
    for name in ("ELF_ST_NAME_AT", "ELF_ST_NAME_BYTES", "ELF_ST_SHNDX_BYTES",
                 "ELF_R_OFFSET_AT"):
        c.pop(name)
    assert not c, f"numbers no test binds: {sorted(c)}"


def test_the_xray_records_are_xray_records() -> None:
    c = dict(compiled_core().XRAY)
    assert c.pop("METADATA_SIZE") == METADATA_SIZE
    assert c.pop("FUNCTION_SIZE") == FUNCTION_SIZE
    assert c.pop("HEADER_SIZE") == HEADER_SIZE
    assert c.pop("META_KIND_COUNT") == len(META_KINDS)
    for number, kind in enumerate(META_KINDS):
        assert c.pop(kind.name) == number, kind
    for number, kind in enumerate(FUNC_KINDS):
        assert c.pop(kind.name) == number, kind
    assert not c, f"numbers no test binds: {sorted(c)}"


def test_the_unwind_table_records_are_compact_layouts() -> None:
    """``csrc/unwind_info.h``'s ``__unwind_info`` numbers (both readers') are
    ``compact/layout.py``'s structures and ``compact/words.py``'s bits."""
    from cfi2sframe.compact import layout, words

    c = dict(compiled_core().UNWIND_TABLE)
    assert (c.pop("VERSION"), c.pop("REGULAR"), c.pop("COMPRESSED")) == (
        layout.VERSION, layout.REGULAR, layout.COMPRESSED)
    assert c.pop("HEADER_BYTES") == layout.HEADER.size
    assert c.pop("HEADER_WORDS") == len(layout.HEADER.fields)
    assert c.pop("INDEX_BYTES") == layout.INDEX_ENTRY.size
    assert c.pop("INDEX_PAGE_AT") == layout.INDEX_ENTRY.offset("secondLevelPagesSectionOffset")
    assert c.pop("INDEX_LSDA_AT") == layout.INDEX_ENTRY.offset("lsdaIndexArraySectionOffset")
    assert c.pop("LSDA_BYTES") == layout.LSDA_ENTRY.size
    assert c.pop("LSDA_VALUE_AT") == layout.LSDA_ENTRY.offset("lsdaOffset")
    assert c.pop("PAGE_BYTES") == layout.PAGE_KIND.size
    assert _where(layout.PAGE_KIND, "entryPageOffset") == (c.pop("PAGE_ENTRY_AT"), 2)
    assert _where(layout.PAGE_KIND, "entryCount") == (c.pop("PAGE_COUNT_AT"), 2)
    assert c.pop("COMPRESSED_BYTES") == layout.COMPRESSED_PAGE.size
    assert _where(layout.COMPRESSED_PAGE, "encodingsPageOffset") == (
        c.pop("COMPRESSED_LOCAL_AT"), 2)
    assert _where(layout.COMPRESSED_PAGE, "encodingsCount") == (
        c.pop("COMPRESSED_LOCAL_COUNT_AT"), 2)
    assert c.pop("REGULAR_ENTRY_BYTES") == layout.REGULAR_ENTRY.size
    assert c.pop("REGULAR_ENCODING_AT") == layout.REGULAR_ENTRY.offset("encoding")
    word = c.pop("WORD_BYTES")
    assert word == layout.COMPRESSED_ENTRY.size == layout.ENCODINGS.size == \
        layout.PERSONALITIES.size
    assert c.pop("ENTRY_OFFSET_BITS") == layout.ENTRY_FUNC_OFFSET_BITS
    assert (c.pop("PERSONALITY_MASK"), c.pop("PERSONALITY_SHIFT"), c.pop("HAS_LSDA")) == (
        words.PERSONALITY_MASK, words.PERSONALITY_SHIFT, words.HAS_LSDA)
    assert c.pop("MODE_MASK") == words.MODE_MASK
    assert not c, f"numbers no test binds: {sorted(c)}"


def test_the_row_states_are_dwarf_cfis() -> None:
    """``csrc/dwarf_replay.c``'s full mode hands each row's rules to ``dwarf/cfi.row_state``
    as flags and rule kinds by number; ``rules_max`` rules per row are kept in C, one
    more leaves the body to the interpreter."""
    c = dict(compiled_core().ROW_STATE)
    for name, bit in ROW_FLAGS.items():
        assert c.pop(name) == bit, name
    for number, kind in enumerate(RULE_KINDS):
        assert c.pop(kind.value) == number, kind
    most = c.pop("rules_max")
    params = _replay(1, -8, False, compiled_core())
    for count, answered in ((most, True), (most + 1, False)):
        body = bytes(byte for reg in range(count) for byte in (0x80 | reg, 1))  # offset r, 1
        rows = compiled_core().cfi_rows(body, b"\x0c\x07\x08", params)
        assert (rows is not None) == answered, count
        if rows is not None:
            assert len(rows[0].regs) == most
    assert not c, f"numbers no test binds: {sorted(c)}"
