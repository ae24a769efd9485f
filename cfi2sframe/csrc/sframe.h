/* The compiled core's one SFrame reader: an FDE entry's fields and an FRE's, read and
 * checked as ``sframe/decode.py``'s ``_Reader.fde`` and ``_Reader.fres`` check them
 * (their reference), for the dump (sframe_dump.c) and verify (analysis_compare.c).
 * Where the Python reader would raise, these answer 0 and the caller hands the
 * section back to Python, which says where.  The bit layouts are Python's
 * (``sframe/words.py``), passed in: the masks below and the FRE info table.
 * Inline: the dump runs them once per FDE and FRE of a section. */
#ifndef CFI2SFRAME_SFRAME_H
#define CFI2SFRAME_SFRAME_H

#include <Python.h>
#include <stdint.h>

#include "bytes.h"

/* Where the fields these readers (and sframe_encode.c's V2 FDE writer) use lie in the
 * spec's records, and their sizes.  Their Python home is ``sframe/format.py``'s layouts
 * (``FDE_LAYOUT``, ``V3_ATTR``, ``FRE_HEAD``): ``sframe_constants`` hands them to
 * tests/differential/test_core_constants.py, which holds them equal by name. */
enum {
    /* sframe_func_desc_entry (V1, V2): func_start is 4 bytes, signed */
    SF_FDE_START_BYTES = 4, SF_FDE_SIZE_AT = 4, SF_FDE_FRE_OFF_AT = 8,
    SF_FDE_NUM_FRES_AT = 12, SF_FDE_INFO_AT = 16, SF_FDE_REP_AT = 17, SF_FDE_V2_BYTES = 20,
    /* sframe_func_desc_idx (V3): func_start is 8 bytes */
    SF_IDX_START_BYTES = 8, SF_IDX_SIZE_AT = 8, SF_IDX_FRE_OFF_AT = 12,
    /* sframe_func_desc_attr (V3) */
    SF_ATTR_NUM_FRES_AT = 0, SF_ATTR_INFO_AT = 2, SF_ATTR_INFO2_AT = 3, SF_ATTR_REP_AT = 4,
    SF_SIZE_BYTES = 4,  /* func_size, func_start_fre_off and (V1, V2) func_num_fres */
    SF_ATTR_NUM_FRES_BYTES = 2,
    SF_FRE_INFOS = 256,     /* an info byte's values: the FRE info table's size */
    SF_FRE_WORDS_MAX = 15,  /* the info byte's 4-bit word count */
};

/* The numbers above by name, for the test that binds them to Python (a new dict). */
static inline PyObject *sframe_constants(void) {
    return Py_BuildValue(
        "{sisisisisisisisisisisisisisisisisisi}",
        "FDE_START_BYTES", SF_FDE_START_BYTES, "FDE_SIZE_AT", SF_FDE_SIZE_AT,
        "FDE_FRE_OFF_AT", SF_FDE_FRE_OFF_AT, "FDE_NUM_FRES_AT", SF_FDE_NUM_FRES_AT,
        "FDE_INFO_AT", SF_FDE_INFO_AT, "FDE_REP_AT", SF_FDE_REP_AT,
        "FDE_V2_BYTES", SF_FDE_V2_BYTES, "IDX_START_BYTES", SF_IDX_START_BYTES,
        "IDX_SIZE_AT", SF_IDX_SIZE_AT, "IDX_FRE_OFF_AT", SF_IDX_FRE_OFF_AT,
        "ATTR_NUM_FRES_AT", SF_ATTR_NUM_FRES_AT, "ATTR_INFO_AT", SF_ATTR_INFO_AT,
        "ATTR_INFO2_AT", SF_ATTR_INFO2_AT, "ATTR_REP_AT", SF_ATTR_REP_AT,
        "SIZE_BYTES", SF_SIZE_BYTES, "ATTR_NUM_FRES_BYTES", SF_ATTR_NUM_FRES_BYTES,
        "FRE_INFOS", SF_FRE_INFOS, "FRE_WORDS_MAX", SF_FRE_WORDS_MAX);
}

/* A section as the readers see it: its bytes, its version, the FRE sub-section
 * [fre_start, fre_end) and the FDE bits (``fde_type``: V3's FDE type mask, whose
 * value ``flex_type`` marks a FLEX FDE; ``unused``: the info bits this version
 * leaves 0; ``attr_size``: V3's FDE attributes' size). */
typedef struct {
    const uint8_t *d;
    Py_ssize_t fre_start, fre_end;
    int big, version, attr_size;
    unsigned fde_type, flex_type, unused;
} SfSection;

/* One FDE entry's fields: the start field (sign-extended in V1 and V2), size, FRE
 * count, info bytes, repetition block size, where its FREs begin, whether FLEX. */
typedef struct {
    int64_t raw_start;
    uint64_t size, count;
    unsigned info, info2, rep;
    Py_ssize_t fres;
    int flex;
} SfEntry;

/* The entry at ``pos`` (its extent within the section checked by the caller): 1, or
 * 0 where its attributes lie past the FRE sub-section, its type or info bits are
 * unknown, or its FREs begin past the sub-section's end. */
static inline int sf_entry(const SfSection *s, Py_ssize_t pos, SfEntry *e) {
    const uint8_t *d = s->d;
    e->info2 = 0;
    if (s->version == 3) {
        e->raw_start = (int64_t)read_uint(d + pos, SF_IDX_START_BYTES, s->big);
        e->size = read_uint(d + pos + SF_IDX_SIZE_AT, SF_SIZE_BYTES, s->big);
        Py_ssize_t attr = s->fre_start +
            (Py_ssize_t)read_uint(d + pos + SF_IDX_FRE_OFF_AT, SF_SIZE_BYTES, s->big);
        if (attr + s->attr_size > s->fre_end) return 0;
        e->count = read_uint(d + attr + SF_ATTR_NUM_FRES_AT, SF_ATTR_NUM_FRES_BYTES, s->big);
        e->info = d[attr + SF_ATTR_INFO_AT];
        e->info2 = d[attr + SF_ATTR_INFO2_AT];
        e->rep = d[attr + SF_ATTR_REP_AT];
        if ((e->info2 & s->fde_type) > s->flex_type || e->info2 & ~s->fde_type) return 0;
        e->fres = attr + s->attr_size;
    } else {
        e->raw_start = (int32_t)read_uint(d + pos, SF_FDE_START_BYTES, s->big);
        e->size = read_uint(d + pos + SF_FDE_SIZE_AT, SF_SIZE_BYTES, s->big);
        e->fres = s->fre_start +
            (Py_ssize_t)read_uint(d + pos + SF_FDE_FRE_OFF_AT, SF_SIZE_BYTES, s->big);
        e->count = read_uint(d + pos + SF_FDE_NUM_FRES_AT, SF_SIZE_BYTES, s->big);
        e->info = d[pos + SF_FDE_INFO_AT];
        /* V1 has no repetition block size, and needs none */
        e->rep = s->version == 2 ? d[pos + SF_FDE_REP_AT] : 0;
        if (e->count && !(e->fres < s->fre_end)) return 0;
    }
    if (e->info & s->unused) return 0;
    e->flex = s->version == 3 && (e->info2 & s->fde_type) == s->flex_type;
    return 1;
}

/* One FRE info byte's fields (``decode._FRE_TABLE``): valid where its offset width is
 * known (and its word count one an info byte can give). */
typedef struct { int base_fp, words, width, valid; } SfFreInfo;

/* The FRE info table from Python's (256 tuples of base_fp, word count, width or 0,
 * mangled_ra, size code): 0, or -1 with an error set. */
static inline int sf_fre_infos(PyObject *table, SfFreInfo *infos) {
    if (!PyTuple_Check(table) || PyTuple_GET_SIZE(table) != SF_FRE_INFOS) {
        PyErr_SetString(PyExc_ValueError, "bad FRE info table");
        return -1;
    }
    for (int i = 0; i < SF_FRE_INFOS; i++) {
        PyObject *e = PyTuple_GET_ITEM(table, i);
        if (!PyTuple_Check(e) || PyTuple_GET_SIZE(e) != 5) {
            PyErr_SetString(PyExc_ValueError, "bad FRE info table");
            return -1;
        }
        infos[i].base_fp = PyObject_IsTrue(PyTuple_GET_ITEM(e, 0));
        infos[i].words = (int)PyLong_AsLong(PyTuple_GET_ITEM(e, 1));
        infos[i].width = (int)PyLong_AsLong(PyTuple_GET_ITEM(e, 2));
        if (infos[i].base_fp < 0 || PyErr_Occurred()) return -1;
        infos[i].valid = infos[i].width != 0 && infos[i].words >= 0 &&
            infos[i].words <= SF_FRE_WORDS_MAX;
    }
    return 0;
}

/* One FRE: its start field, info byte, where its words begin, where the next FRE does. */
typedef struct {
    uint64_t start;
    uint8_t info;
    Py_ssize_t body, next;
} SfFre;

/* The FRE at ``at`` of an FDE whose starts take ``addr_size`` bytes: 1, or 0 where it
 * runs past the FRE sub-section or its info byte is invalid (or not FLEX's: bit 0 of a
 * FLEX FDE's FREs must be 0). */
static inline int sf_fre(const SfSection *s, Py_ssize_t at, int addr_size, int flex,
                         const SfFreInfo *infos, SfFre *f) {
    if (at + addr_size + 1 > s->fre_end) return 0;
    f->start = read_uint(s->d + at, addr_size, s->big);
    f->info = s->d[at + addr_size];
    const SfFreInfo *i = &infos[f->info];
    if (!i->valid || (flex && !i->base_fp)) return 0;
    f->body = at + addr_size + 1;
    f->next = f->body + (Py_ssize_t)i->words * i->width;
    return f->next <= s->fre_end;
}

/* Word ``w`` of an FRE whose words begin at ``body``, ``width`` (1, 2 or 4) bytes each:
 * a signed number (the FRE already read by ``sf_fre``, so inside the section). */
static inline int64_t sf_word(const SfSection *s, Py_ssize_t body, int w, int width) {
    uint64_t raw = read_uint(s->d + body + (Py_ssize_t)w * width, width, s->big);
    return width == 1 ? (int8_t)raw : width == 2 ? (int16_t)raw : (int32_t)raw;
}

#endif
