/* The structural self-check of a section we wrote, in one pass (``sframe/selfcheck.py``'s
 * ``_fde_problem`` its reference and fallback; tests/differential/test_core_selfcheck.py
 * holds the two to one verdict).  Only "sound" is answered here: every other case
 * gives None and the Python loop says what is wrong (or, where FDEs' FREs tile the
 * sub-section in another order than the table's, that nothing is).  Read through
 * sframe.h, the one SFrame reader in C. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "core.h"
#include "sframe.h"

/* ``selfcheck._MASKS``: the FDE info bits (FRE type, PC-mask), V3's FDE type mask and
 * its FLEX value, V3's attribute size, each FRE type's start size; then the FRE info
 * byte's fields (``sframe/words.py``): its CFA base bit and the value of it that means
 * FP, its word count's and size code's (shift, mask), each size code's width (0 where
 * invalid), from which the reader's table of 256 info bytes is filled here. */
typedef struct {
    unsigned fre_type, pc_mask, fde_type, flex_type;
    int attr_size, addr_size[16];
} CheckMasks;

static int bad_masks(void) {
    PyErr_SetString(PyExc_ValueError, "bad SFrame masks");
    return -1;
}

static int read_masks(PyObject *masks, CheckMasks *m, SfFreInfo *infos) {
    PyObject *sizes, *widths;
    unsigned base_bit, base_fp, words_shift, words_mask, size_shift, size_mask;
    if (!PyArg_ParseTuple(masks, "IIIIiO!IIIIIIO!", &m->fre_type, &m->pc_mask, &m->fde_type,
                          &m->flex_type, &m->attr_size, &PyTuple_Type, &sizes, &base_bit,
                          &base_fp, &words_shift, &words_mask, &size_shift, &size_mask,
                          &PyTuple_Type, &widths))
        return -1;
    if (PyTuple_GET_SIZE(sizes) != 16 || words_shift > 7 || size_shift > 7 ||
        size_mask > 7 || PyTuple_GET_SIZE(widths) != (Py_ssize_t)size_mask + 1)
        return bad_masks();
    for (int i = 0; i < 16; i++) {
        long size = PyLong_AsLong(PyTuple_GET_ITEM(sizes, i));
        if (PyErr_Occurred()) return -1;
        if (size != 0 && size != 1 && size != 2 && size != 4) return bad_masks();
        m->addr_size[i] = (int)size;
    }
    int width[8];
    for (unsigned code = 0; code <= size_mask; code++) {
        long w = PyLong_AsLong(PyTuple_GET_ITEM(widths, code));
        if (PyErr_Occurred()) return -1;
        if (w != 0 && w != 1 && w != 2 && w != 4) return bad_masks();
        width[code] = (int)w;
    }
    for (unsigned i = 0; i < SF_FRE_INFOS; i++) {
        int words = (int)((i >> words_shift) & words_mask);
        infos[i].base_fp = (i & base_bit) == base_fp;
        infos[i].words = words;
        infos[i].width = width[(i >> size_shift) & size_mask];
        infos[i].valid = infos[i].width != 0 && words <= SF_FRE_WORDS_MAX;
    }
    return 0;
}

/* Each FRE's length by its info byte, for a start of ``addr_size`` bytes (``flex``: in a
 * FLEX FDE), 0 where the byte is invalid there. */
static void fre_lengths(const SfFreInfo *infos, int addr_size, int flex, uint8_t *out) {
    for (int i = 0; i < SF_FRE_INFOS; i++)
        out[i] = (uint8_t)(!infos[i].valid || (flex && !infos[i].base_fp) ? 0 :
                           addr_size + 1 + infos[i].words * infos[i].width);
}

/* The most bytes an FRE takes: a 4-byte start, its info byte, 15 words of 4 bytes. */
#define FRE_MAX (4 + 1 + SF_FRE_WORDS_MAX * 4)

/* ``count`` FREs from ``*at`` whose starts take ``addr_size`` bytes (turned round where
 * ``turn``), all inside the section (the caller has checked ``count * FRE_MAX`` bytes
 * are there): 1 where each has a valid info byte and starts below ``bound`` (below
 * 2**32: a function's size); ``*at`` then where they end.  No test per FRE, one sign
 * bit kept: with the size and byte order constants where it is inlined, some ten
 * instructions an FRE (libLLVM-14's 861k FREs: 34M instructions through ``sf_fre``'s
 * checks one at a time, 20M this way). */
static inline int walk(const uint8_t *d, Py_ssize_t *at, uint64_t count, int addr_size,
                       int turn, uint64_t bound, const uint8_t *length) {
    Py_ssize_t p = *at;
    int64_t all = -1;  /* negative while every FRE is: a start below the bound, a size */
    for (uint64_t n = 0; n < count; n++) {
        uint64_t start;
        if (addr_size == 1) {
            start = d[p];
        } else if (addr_size == 2) {
            uint16_t v;
            memcpy(&v, d + p, 2);
            start = turn ? __builtin_bswap16(v) : v;
        } else {
            uint32_t v;
            memcpy(&v, d + p, 4);
            start = turn ? __builtin_bswap32(v) : v;
        }
        uint8_t size = length[d[p + addr_size]];
        all &= (int64_t)(start - bound) & -(int64_t)size;  /* (both below 2**32) */
        p += size;
    }
    *at = p;
    return all < 0;
}

/* ``walk`` for one FDE, its size and byte order made constants; where its FREs could
 * reach past ``end``, ``sf_fre``'s checks one at a time.  Where they end, or -1. */
static Py_ssize_t walk_fres(const SfSection *s, Py_ssize_t at, uint64_t count, int addr_size,
                            int flex, uint64_t bound, const uint8_t *length,
                            const SfFreInfo *infos) {
    if (count > (uint64_t)(s->fre_end - at) / FRE_MAX) {
        for (uint64_t n = 0; n < count; n++) {
            SfFre f;
            if (!sf_fre(s, at, addr_size, flex, infos, &f) || f.start >= bound) return -1;
            at = f.next;
        }
        return at;
    }
    int turn = (s->big != 0) != HOST_BIG, ok;
    switch (addr_size * 2 + turn) {
    case 2: ok = walk(s->d, &at, count, 1, 0, bound, length); break;
    case 3: ok = walk(s->d, &at, count, 1, 1, bound, length); break;
    case 4: ok = walk(s->d, &at, count, 2, 0, bound, length); break;
    case 5: ok = walk(s->d, &at, count, 2, 1, bound, length); break;
    case 8: ok = walk(s->d, &at, count, 4, 0, bound, length); break;
    default: ok = walk(s->d, &at, count, 4, 1, bound, length); break;
    }
    return ok && at <= s->fre_end ? at : -1;
}

/* The rules of ``_fde_problem`` over FDEs [0, count): 1 where all hold, else 0 (also
 * where a start leaves 64 bits: the reference's numbers are Python's). */
static int sound(const SfSection *s, Py_ssize_t fde_start, Py_ssize_t count,
                 Py_ssize_t entry, int pcrel, uint64_t address, int is_sorted,
                 uint64_t num_fres, const CheckMasks *m, const SfFreInfo *infos) {
    uint8_t lengths[2][5][SF_FRE_INFOS];  /* by flex and start size (1, 2, 4) */
    for (int flex = 0; flex < 2; flex++)
        for (int size = 1; size <= 4; size *= 2) fre_lengths(infos, size, flex, lengths[flex][size]);
    Py_ssize_t cursor = s->fre_start;  /* where the next FDE's FREs must begin */
    uint64_t total = 0;
    int64_t last = INT64_MIN;
    if (address > INT64_MAX) return 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t pos = fde_start + i * entry;
        SfEntry e;
        if (!sf_entry(s, pos, &e)) return 0;
        int addr_size = m->addr_size[e.info & m->fre_type];
        int pc_mask = (e.info & m->pc_mask) != 0;
        if (!addr_size || (pc_mask && !e.rep && s->version != 1)) return 0;
        int64_t start;
        if (__builtin_add_overflow((int64_t)address, e.raw_start, &start) ||
            __builtin_add_overflow(start, pcrel ? (int64_t)pos : 0, &start))
            return 0;
        if (is_sorted && start < last) return 0;
        last = start;
        Py_ssize_t first = s->version == 3 ? e.fres - s->attr_size : e.fres;
        Py_ssize_t at = e.count ? walk_fres(s, e.fres, e.count, addr_size, e.flex,
                                            pc_mask ? e.rep : e.size,
                                            lengths[e.flex][addr_size], infos) : e.fres;
        if (at < 0) return 0;
        total += e.count;
        if (at > first) {  /* (a V1 or V2 FDE without FREs holds no byte) */
            if (first != cursor) return 0;
            cursor = at;
        }
    }
    return total == num_fres && cursor == s->fre_end;
}

/* sframe_check(data, *, fde_start, count, entry, fre_start, fre_end, version, big,
 * pcrel, address, sorted, num_fres, unused, masks) -> True, or None: the
 * FDE table and FRE sub-section of a section whose header Python has read
 * (``selfcheck._header_problem``), checked as ``selfcheck._fde_problem`` checks them;
 * ``unused``: the FDE info bits this version leaves 0; ``masks``: ``selfcheck._MASKS``. */
PyObject *sframe_check(PyObject *Py_UNUSED(self), PyObject *args, PyObject *kwargs) {
    static char *names[] = {"data", "fde_start", "count", "entry", "fre_start", "fre_end",
                            "version", "big", "pcrel", "address", "sorted", "num_fres",
                            "unused", "masks", NULL};
    Py_buffer data;
    Py_ssize_t fde_start, count, entry, fre_start, fre_end;
    int version;
    PyObject *big_obj, *pcrel_obj, *sorted_obj;
    unsigned long long address;
    unsigned long long num_fres;
    unsigned unused;
    PyObject *masks;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*$nnnnniO!O!KO!KIO!:sframe_check", names,
                                     &data, &fde_start, &count, &entry, &fre_start,
                                     &fre_end, &version, &PyBool_Type, &big_obj,
                                     &PyBool_Type, &pcrel_obj, &address, &PyBool_Type,
                                     &sorted_obj, &num_fres, &unused, &PyTuple_Type, &masks))
        return NULL;
    int big = big_obj == Py_True, pcrel = pcrel_obj == Py_True;
    int is_sorted = sorted_obj == Py_True;
    CheckMasks m;
    SfFreInfo infos[SF_FRE_INFOS];
    if (read_masks(masks, &m, infos) < 0) {
        PyBuffer_Release(&data);
        return NULL;
    }
    int fits = fde_start >= 0 && count >= 0 && fre_start >= 0 && fre_start <= fre_end &&
        fre_end <= data.len && entry >= SF_FDE_SIZE_AT + SF_SIZE_BYTES &&
        (version == 3 ? entry >= SF_IDX_FRE_OFF_AT + SF_SIZE_BYTES
                      : entry >= SF_FDE_INFO_AT + 1 + (version == 2)) &&
        m.attr_size >= SF_ATTR_REP_AT + 1 && fde_start <= data.len &&
        count <= (data.len - fde_start) / entry;
    SfSection sec = {data.buf, fre_start, fre_end, big, version, m.attr_size, m.fde_type,
                     m.flex_type, unused};
    int ok = fits && sound(&sec, fde_start, count, entry, pcrel, address, is_sorted,
                           num_fres, &m, infos);
    PyBuffer_Release(&data);
    if (ok) Py_RETURN_TRUE;
    Py_RETURN_NONE;
}
