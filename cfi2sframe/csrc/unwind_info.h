/* The compiled core's one ``__unwind_info`` reader: the layout's numbers and the
 * pieces ``compact/table.py``'s ``read_unwind_info`` (their reference) reads and checks
 * in the same order, for the columns and look-ups (compact_table.c) and the dump's
 * listing (compact_listing.c).  Each piece answers 1, or 0 where the Python reader
 * would raise (the caller then hands the table back to Python, which says where).
 * Every field is read through ``bytes.h``'s ``get_uint``: the fields are little-endian
 * on every target here.  Inline: the readers run them once per entry of a table. */
#ifndef CFI2SFRAME_UNWIND_INFO_H
#define CFI2SFRAME_UNWIND_INFO_H

#include <Python.h>
#include <stdint.h>

#include "bytes.h"

/* Their Python home is ``compact/layout.py``'s structures and ``compact/words.py``'s
 * bits: ``unwind_info_layout`` (``UNWIND_TABLE``) hands them to
 * tests/differential/test_core_constants.py, which holds them equal by name. */
enum {
    UI_VERSION = 1, UI_REGULAR = 2, UI_COMPRESSED = 3,
    UI_HEADER_BYTES = 28, UI_HEADER_WORDS = 7,
    UI_INDEX_BYTES = 12, UI_INDEX_PAGE_AT = 4, UI_INDEX_LSDA_AT = 8,
    UI_LSDA_BYTES = 8, UI_LSDA_VALUE_AT = 4,
    UI_PAGE_BYTES = 8, UI_PAGE_ENTRY_AT = 4, UI_PAGE_COUNT_AT = 6,
    UI_COMPRESSED_BYTES = 12, UI_COMPRESSED_LOCAL_AT = 8, UI_COMPRESSED_LOCAL_COUNT_AT = 10,
    UI_REGULAR_ENTRY_BYTES = 8, UI_REGULAR_ENCODING_AT = 4, UI_WORD_BYTES = 4,
    UI_ENTRY_OFFSET_BITS = 24,
    UI_MODE_MASK = 0x0F000000, UI_PERSONALITY_MASK = 0x30000000, UI_PERSONALITY_SHIFT = 28,
    UI_HAS_LSDA = 0x40000000,
};

/* The numbers above by name, for the test that binds them to Python (a new dict). */
static inline PyObject *unwind_info_layout(void) {
    return Py_BuildValue(
        "{sisisisisisisisisisisisisisisisisisisisisIsIsisI}",
        "VERSION", UI_VERSION, "REGULAR", UI_REGULAR, "COMPRESSED", UI_COMPRESSED,
        "HEADER_BYTES", UI_HEADER_BYTES, "HEADER_WORDS", UI_HEADER_WORDS,
        "INDEX_BYTES", UI_INDEX_BYTES, "INDEX_PAGE_AT", UI_INDEX_PAGE_AT,
        "INDEX_LSDA_AT", UI_INDEX_LSDA_AT, "LSDA_BYTES", UI_LSDA_BYTES,
        "LSDA_VALUE_AT", UI_LSDA_VALUE_AT, "PAGE_BYTES", UI_PAGE_BYTES,
        "PAGE_ENTRY_AT", UI_PAGE_ENTRY_AT, "PAGE_COUNT_AT", UI_PAGE_COUNT_AT,
        "COMPRESSED_BYTES", UI_COMPRESSED_BYTES, "COMPRESSED_LOCAL_AT", UI_COMPRESSED_LOCAL_AT,
        "COMPRESSED_LOCAL_COUNT_AT", UI_COMPRESSED_LOCAL_COUNT_AT,
        "REGULAR_ENTRY_BYTES", UI_REGULAR_ENTRY_BYTES,
        "REGULAR_ENCODING_AT", UI_REGULAR_ENCODING_AT, "WORD_BYTES", UI_WORD_BYTES,
        "ENTRY_OFFSET_BITS", UI_ENTRY_OFFSET_BITS,
        "MODE_MASK", (unsigned)UI_MODE_MASK, "PERSONALITY_MASK", (unsigned)UI_PERSONALITY_MASK,
        "PERSONALITY_SHIFT", UI_PERSONALITY_SHIFT, "HAS_LSDA", (unsigned)UI_HAS_LSDA);
}

/* [at, at + size) lies in the section (both below 2**34: no overflow). */
static inline int ui_inside(const Bytes *b, uint64_t at, uint64_t size) {
    return at <= (uint64_t)b->end && size <= (uint64_t)b->end - at;
}

/* The little-endian ``size``-byte field at ``at`` (its extent checked by the caller;
 * 0 outside: ``get_uint`` checks it again).  The byte order is a constant here, so the
 * compiler folds ``read_uint``'s. */
static inline uint32_t ui_word(const Bytes *b, uint64_t at, int size) {
    const Bytes little = {b->d, b->end, 0};
    uint64_t v = 0;
    get_uint(&little, (Py_ssize_t)at, size, &v);
    return (uint32_t)v;
}

/* The header's seven words into ``head``: 1, or 0 where the section is shorter. */
static inline int ui_head(const Bytes *b, uint32_t *head) {
    if (!ui_inside(b, 0, UI_HEADER_BYTES)) return 0;
    for (int i = 0; i < UI_HEADER_WORDS; i++)
        head[i] = ui_word(b, (uint64_t)UI_WORD_BYTES * (unsigned)i, UI_WORD_BYTES);
    return 1;
}

/* The header and where its LSDA index lies (the first-level index's first and last
 * ``lsdaIndexArraySectionOffset``), checked as the Python reader checks them: the
 * version, the common encodings, personalities and first-level index inside, at least
 * one index entry (the sentinel), the LSDA index whole and inside.  1, or 0. */
static inline int ui_header(const Bytes *b, uint32_t *head, uint32_t *lsda_at,
                            uint32_t *lsda_count) {
    if (!ui_head(b, head)) return 0;
    if (head[0] != UI_VERSION || !ui_inside(b, head[1], (uint64_t)UI_WORD_BYTES * head[2]) ||
        !ui_inside(b, head[3], (uint64_t)UI_WORD_BYTES * head[4]) ||
        !ui_inside(b, head[5], (uint64_t)UI_INDEX_BYTES * head[6]) || head[6] == 0)
        return 0;
    uint32_t first = ui_word(b, (uint64_t)head[5] + UI_INDEX_LSDA_AT, UI_WORD_BYTES);
    uint32_t end = ui_word(b, (uint64_t)head[5] + (uint64_t)UI_INDEX_BYTES * (head[6] - 1) +
                           UI_INDEX_LSDA_AT, UI_WORD_BYTES);
    if (end < first || (end - first) % UI_LSDA_BYTES || !ui_inside(b, first, end - first))
        return 0;
    *lsda_at = first;
    *lsda_count = (end - first) / UI_LSDA_BYTES;
    return 1;
}

/* First-level index entry ``e`` (inside: the header checked): its first function, its
 * page's offset and its LSDA index offset. */
static inline void ui_index(const Bytes *b, const uint32_t *head, uint64_t e,
                            uint32_t *function, uint32_t *page_at, uint32_t *lsda_at) {
    uint64_t at = (uint64_t)head[5] + (uint64_t)UI_INDEX_BYTES * e;
    *function = ui_word(b, at, UI_WORD_BYTES);
    *page_at = ui_word(b, at + UI_INDEX_PAGE_AT, UI_WORD_BYTES);
    *lsda_at = ui_word(b, at + UI_INDEX_LSDA_AT, UI_WORD_BYTES);
}

/* LSDA index entry ``i`` at ``lsda_at`` (inside: the header checked): its function and
 * its LSDA. */
static inline void ui_lsda(const Bytes *b, uint32_t lsda_at, uint32_t i, uint32_t *function,
                           uint32_t *lsda) {
    uint64_t at = (uint64_t)lsda_at + (uint64_t)UI_LSDA_BYTES * i;
    *function = ui_word(b, at, UI_WORD_BYTES);
    *lsda = ui_word(b, at + UI_LSDA_VALUE_AT, UI_WORD_BYTES);
}

/* A second-level page: where it lies, its kind, where its entries begin and how many,
 * and (compressed) where its own encodings begin and how many. */
typedef struct {
    uint64_t at, entries, local_at;
    uint32_t kind, entry_at, count, local_offset, local_count;
} UiPage;

/* The page at ``at``: 1, or 0 where its kind is unknown or its header, entries or own
 * encodings lie outside the section. */
static inline int ui_page(const Bytes *b, uint32_t at, UiPage *p) {
    p->at = at;
    p->local_at = p->local_offset = p->local_count = 0;
    if (!ui_inside(b, at, UI_PAGE_BYTES)) return 0;
    p->kind = ui_word(b, at, UI_WORD_BYTES);
    p->entry_at = ui_word(b, (uint64_t)at + UI_PAGE_ENTRY_AT, 2);
    p->count = ui_word(b, (uint64_t)at + UI_PAGE_COUNT_AT, 2);
    p->entries = (uint64_t)at + p->entry_at;
    if (p->kind == UI_REGULAR)
        return ui_inside(b, p->entries, (uint64_t)UI_REGULAR_ENTRY_BYTES * p->count);
    if (p->kind != UI_COMPRESSED || !ui_inside(b, at, UI_COMPRESSED_BYTES)) return 0;
    p->local_offset = ui_word(b, (uint64_t)at + UI_COMPRESSED_LOCAL_AT, 2);
    p->local_count = ui_word(b, (uint64_t)at + UI_COMPRESSED_LOCAL_COUNT_AT, 2);
    p->local_at = (uint64_t)at + p->local_offset;
    return ui_inside(b, p->entries, (uint64_t)UI_WORD_BYTES * p->count) &&
           ui_inside(b, p->local_at, (uint64_t)UI_WORD_BYTES * p->local_count);
}

/* Entry ``i`` of page ``p`` (read by ``ui_page``), whose first function is
 * ``function``: its function offset, its encoding (a compressed entry's through the
 * common or the page's own encodings) and (compressed) the encoding's index.  1, or 0
 * where that index is past both lists. */
static inline int ui_entry(const Bytes *b, const uint32_t *head, const UiPage *p,
                           uint32_t function, uint32_t i, uint64_t *offset,
                           uint32_t *encoding, uint32_t *which) {
    *which = 0;
    if (p->kind == UI_REGULAR) {
        uint64_t at = p->entries + (uint64_t)UI_REGULAR_ENTRY_BYTES * i;
        *offset = ui_word(b, at, UI_WORD_BYTES);
        *encoding = ui_word(b, at + UI_REGULAR_ENCODING_AT, UI_WORD_BYTES);
        return 1;
    }
    uint32_t w = ui_word(b, p->entries + (uint64_t)UI_WORD_BYTES * i, UI_WORD_BYTES);
    uint32_t common_count = head[2];
    *which = w >> UI_ENTRY_OFFSET_BITS;
    *offset = (uint64_t)function + (w & ((1u << UI_ENTRY_OFFSET_BITS) - 1));
    if (*which < common_count)
        *encoding = ui_word(b, (uint64_t)head[1] + (uint64_t)UI_WORD_BYTES * *which,
                            UI_WORD_BYTES);
    else if (*which - common_count < p->local_count)
        *encoding = ui_word(b, p->local_at + (uint64_t)UI_WORD_BYTES * (*which - common_count),
                            UI_WORD_BYTES);
    else
        return 0;
    return 1;
}

/* An encoding's personality routine slot (0: none; 1 is the list's first). */
static inline uint32_t ui_personality(uint32_t encoding) {
    return (encoding & UI_PERSONALITY_MASK) >> UI_PERSONALITY_SHIFT;
}

#endif
