/* The compiled core's ``__unwind_info`` writer: ``compact/table_writer.py``'s
 * ``_final_encodings``, ``_fold``, the common encodings, ``_pages`` and ``_layout``
 * (their reference and fallback), over columns of functions sorted by offset, without
 * a Python object per function or per row.  The Python builder's loops were most of
 * a 100k-function image's ``compact --emit unwind-info`` (0.6 s of its 0.67 s).
 *
 * ``unwind_info_build(offsets, lengths, encodings, personalities, lsdas, fde_offsets,
 * *, dwarf, stack_ind, ...)`` answers (data, final encodings, personality routines,
 * indices of the functions put in DWARF mode), or (what, number) for input no table
 * can hold (Python puts it in words: "overlap" and the first function's index, "end"
 * and the end, "fourth" or "fde" and the function's index), or None where a number
 * lies past 32 bits or the offsets are not sorted (the Python builder then runs and
 * says what is wrong).  The builder checks the bytes with the reader
 * (``unwind_info_misses``), not here.  The section's layout numbers are
 * ``unwind_info.h``'s (bound to ``compact/layout.py``); the writer's limits come from
 * ``table_writer.py`` as arguments, by name. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

#include "core.h"
#include "out.h"
#include "unwind_info.h"

#define NO_VALUE UINT64_MAX  /* a column's None */

/* The writer's limits and words, from ``table_writer.py``. */
typedef struct {
    long long dwarf, stack_ind;  /* stack_ind: -1 where no encoding reads its code */
    Py_ssize_t max_common, max_index, max_compressed, max_regular, max_personalities;
    unsigned long long reach, fde_mask;
} Limits;

/* A row of the table: a function whose encoding differs from the one before it, or
 * that has an LSDA, or reads its own code. */
typedef struct {
    uint32_t offset, encoding, lsda, id;  /* id: its encoding's, dense from 0 */
    int has_lsda;
} Row;

/* A second-level page: its kind, first row, row count and own encodings. */
typedef struct {
    uint32_t kind, first, count, local_first, local_count;
} Page;

/* Item ``i`` of a column as an unsigned number up to ``limit`` (NO_VALUE for None where
 * ``none`` allows it): 1, 0 (past the limit, negative, or not a number: Python's), -1
 * on another error. */
static int number(PyObject *column, Py_ssize_t i, int none, uint64_t limit, uint64_t *out) {
    PyObject *item = PyList_GET_ITEM(column, i);
    if (item == Py_None) {
        *out = NO_VALUE;
        return none;
    }
    if (!PyLong_Check(item)) return 0;
    uint64_t v = PyLong_AsUnsignedLongLong(item);
    if (v == (uint64_t)-1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return -1;
        PyErr_Clear();
        return 0;
    }
    *out = v;
    return v <= limit;
}

static int by_value(const void *a, const void *b) {
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* (count, encoding) pairs: most used first, then the smaller encoding, as the Python
 * builder's ``sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))``. */
typedef struct { uint64_t count; uint32_t encoding, id; } Used;

static int by_use(const void *a, const void *b) {
    const Used *x = a, *y = b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    return x->encoding < y->encoding ? -1 : x->encoding > y->encoding;
}

/* Little-endian words into the output. */
static void put_u32(Out *o, uint32_t v) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(o, (const char *)b, 4);
}

static void put_u16(Out *o, uint32_t v) {
    uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    put(o, (const char *)b, 2);
}

/* The build in the making: its inputs read, its rows, its encodings' ids and pages. */
typedef struct {
    Py_ssize_t n;
    uint32_t *final;
    uint64_t personalities[4];
    Py_ssize_t personality_count;
    Row *rows;
    Py_ssize_t row_count;
    uint32_t *encoding_of;  /* id -> encoding */
    Py_ssize_t ids;
    int32_t *common_index;  /* id -> its index in the common encodings, or -1 */
    uint32_t common[128];
    Py_ssize_t common_count;
    Page *pages;
    Py_ssize_t page_count;
    uint32_t *local;  /* every page's own encodings' ids, one after another */
    Py_ssize_t local_count;
} Build;

/* Each row's encoding id and the common encodings: those of more than one row, most
 * used first, at most ``max_common``.  0, or -1 (no memory). */
static int encodings(Build *w, const Limits *lim) {
    uint64_t *keyed = PyMem_Malloc(sizeof(uint64_t) * ((size_t)w->row_count + 1));
    if (!keyed) return -1;
    for (Py_ssize_t r = 0; r < w->row_count; r++)
        keyed[r] = (uint64_t)w->rows[r].encoding << 32 | (uint64_t)r;
    qsort(keyed, (size_t)w->row_count, sizeof *keyed, by_value);
    Used *used = PyMem_Malloc(sizeof(Used) * ((size_t)w->row_count + 1));
    w->encoding_of = PyMem_Malloc(sizeof(uint32_t) * ((size_t)w->row_count + 1));
    w->common_index = PyMem_Malloc(sizeof(int32_t) * ((size_t)w->row_count + 1));
    if (!used || !w->encoding_of || !w->common_index) {
        PyMem_Free(keyed);
        PyMem_Free(used);
        return -1;
    }
    w->ids = 0;
    for (Py_ssize_t k = 0; k < w->row_count; k++) {
        uint32_t encoding = (uint32_t)(keyed[k] >> 32);
        if (k == 0 || encoding != w->encoding_of[w->ids - 1]) {
            w->encoding_of[w->ids] = encoding;
            w->common_index[w->ids] = -1;
            used[w->ids] = (Used){0, encoding, (uint32_t)w->ids};
            w->ids++;
        }
        used[w->ids - 1].count++;
        w->rows[(uint32_t)keyed[k]].id = (uint32_t)(w->ids - 1);
    }
    qsort(used, (size_t)w->ids, sizeof *used, by_use);
    w->common_count = 0;
    for (Py_ssize_t k = 0; k < w->ids && w->common_count < lim->max_common &&
                           w->common_count < 128 && used[k].count > 1; k++) {
        w->common_index[used[k].id] = (int32_t)w->common_count;
        w->common[w->common_count++] = used[k].encoding;
    }
    PyMem_Free(keyed);
    PyMem_Free(used);
    return 0;
}

/* ``_pages``: compressed while a page can hold the rows, else regular.  0, or -1. */
static int pages(Build *w, const Limits *lim) {
    w->pages = PyMem_Malloc(sizeof(Page) * ((size_t)w->row_count + 1));
    /* (each of a page's own encodings is one of its rows': at most a row each) */
    w->local = PyMem_Malloc(sizeof(uint32_t) * ((size_t)w->row_count + 1));
    uint32_t *stamp = PyMem_Calloc((size_t)w->ids + 1, sizeof(uint32_t));
    if (!w->pages || !w->local || !stamp) {
        PyMem_Free(stamp);
        return -1;
    }
    Py_ssize_t i = 0;
    uint32_t page = 0;
    w->page_count = w->local_count = 0;
    while (i < w->row_count) {
        page++;  /* stamp[id] == page: the id is one of this page's own */
        uint32_t base = w->rows[i].offset;
        Py_ssize_t n = 0, local = 0, local_first = w->local_count;
        while (i + n < w->row_count && n < lim->max_compressed) {
            const Row *row = &w->rows[i + n];
            if ((uint64_t)(row->offset - base) >= lim->reach) break;
            if (w->common_index[row->id] < 0 && stamp[row->id] != page) {
                if (w->common_count + local >= lim->max_index ||
                    n + 1 + local + 1 > lim->max_compressed)
                    break;
                stamp[row->id] = page;
                w->local[local_first + local++] = row->id;
            } else if (n + 1 + local > lim->max_compressed) {
                break;
            }
            n++;
        }
        Page *p = &w->pages[w->page_count++];
        if (i + n < w->row_count && n < lim->max_regular) {
            Py_ssize_t take = w->row_count - i < lim->max_regular ? w->row_count - i
                                                                  : lim->max_regular;
            *p = (Page){UI_REGULAR, (uint32_t)i, (uint32_t)take, 0, 0};
            i += take;
        } else {
            *p = (Page){UI_COMPRESSED, (uint32_t)i, (uint32_t)n, (uint32_t)local_first,
                        (uint32_t)local};
            w->local_count += local;
            i += n;
        }
    }
    PyMem_Free(stamp);
    return 0;
}

/* A page's bytes. */
static uint64_t page_bytes(const Page *p) {
    if (p->kind == UI_REGULAR) return UI_PAGE_BYTES + (uint64_t)UI_REGULAR_ENTRY_BYTES * p->count;
    return UI_COMPRESSED_BYTES + (uint64_t)UI_WORD_BYTES * (p->count + p->local_count);
}

/* ``_layout``: header, common encodings, personalities, first-level index and its
 * sentinel at ``end``, LSDA index, pages.  1, 0 where the table would pass the 32-bit
 * offsets of its fields (Python's struct then says so), -1 (no memory). */
static int layout(const Build *w, uint32_t end, Out *o) {
    uint64_t lsdas = 0, size = 0;
    for (Py_ssize_t r = 0; r < w->row_count; r++) lsdas += (uint64_t)w->rows[r].has_lsda;
    uint64_t common_at = UI_HEADER_BYTES;
    uint64_t person_at = common_at + UI_WORD_BYTES * (uint64_t)w->common_count;
    uint64_t index_at = person_at + UI_WORD_BYTES * (uint64_t)w->personality_count;
    uint64_t lsda_at = index_at + UI_INDEX_BYTES * (uint64_t)(w->page_count + 1);
    uint64_t first_page = lsda_at + (uint64_t)UI_LSDA_BYTES * lsdas;
    for (Py_ssize_t k = 0; k < w->page_count; k++) size += page_bytes(&w->pages[k]);
    if (first_page + size > UINT32_MAX) return 0;
    int32_t *position = PyMem_Malloc(sizeof(int32_t) * ((size_t)w->ids + 1));
    if (!position || out_room(o, (size_t)(first_page + size)) < 0) {
        PyMem_Free(position);
        return -1;
    }
    uint32_t head[UI_HEADER_WORDS] = {
        UI_VERSION, (uint32_t)common_at, (uint32_t)w->common_count, (uint32_t)person_at,
        (uint32_t)w->personality_count, (uint32_t)index_at, (uint32_t)w->page_count + 1};
    for (int k = 0; k < UI_HEADER_WORDS; k++) put_u32(o, head[k]);
    for (Py_ssize_t k = 0; k < w->common_count; k++) put_u32(o, w->common[k]);
    for (Py_ssize_t k = 0; k < w->personality_count; k++)
        put_u32(o, (uint32_t)w->personalities[k]);
    uint64_t lsda_first = 0, page_at = first_page;
    for (Py_ssize_t k = 0; k < w->page_count; k++) {
        const Page *p = &w->pages[k];
        put_u32(o, w->rows[p->first].offset);
        put_u32(o, (uint32_t)page_at);
        put_u32(o, (uint32_t)(lsda_at + UI_LSDA_BYTES * lsda_first));
        for (uint32_t r = p->first; r < p->first + p->count; r++)
            lsda_first += (uint64_t)w->rows[r].has_lsda;
        page_at += page_bytes(p);
    }
    put_u32(o, end);
    put_u32(o, 0);
    put_u32(o, (uint32_t)(lsda_at + UI_LSDA_BYTES * lsda_first));
    for (Py_ssize_t r = 0; r < w->row_count; r++)
        if (w->rows[r].has_lsda) {
            put_u32(o, w->rows[r].offset);
            put_u32(o, w->rows[r].lsda);
        }
    for (Py_ssize_t k = 0; k < w->page_count; k++) {
        const Page *p = &w->pages[k];
        const Row *rows = &w->rows[p->first];
        put_u32(o, p->kind);
        if (p->kind == UI_REGULAR) {
            put_u16(o, UI_PAGE_BYTES);
            put_u16(o, p->count);
            for (uint32_t r = 0; r < p->count; r++) {
                put_u32(o, rows[r].offset);
                put_u32(o, rows[r].encoding);
            }
            continue;
        }
        put_u16(o, UI_COMPRESSED_BYTES);
        put_u16(o, p->count);
        put_u16(o, UI_COMPRESSED_BYTES + UI_WORD_BYTES * p->count);
        put_u16(o, p->local_count);
        const uint32_t *local = &w->local[p->local_first];
        for (uint32_t l = 0; l < p->local_count; l++)
            position[local[l]] = (int32_t)(w->common_count + l);
        for (uint32_t r = 0; r < p->count; r++) {
            int32_t which = w->common_index[rows[r].id];
            if (which < 0) which = position[rows[r].id];
            put_u32(o, (uint32_t)which << UI_ENTRY_OFFSET_BITS |
                           (rows[r].offset - rows[0].offset));
        }
        for (uint32_t l = 0; l < p->local_count; l++) put_u32(o, w->encoding_of[local[l]]);
    }
    PyMem_Free(position);
    return o->failed ? -1 : 1;
}

/* (what, number): input no table can hold, for Python to put in words. */
static PyObject *refused(const char *what, unsigned long long number) {
    return Py_BuildValue("(sK)", what, number);
}

/* ``_final_encodings`` and ``_fold`` over the columns: each function's final encoding,
 * the personality routines, the rows; the DWARF-mode notes' function indices into
 * ``notes``.  NULL and *result set: refused (a new reference) or None (Python's). */
static int final_rows(Build *w, const Limits *lim, PyObject *const *column, PyObject *notes,
                      PyObject **result) {
    for (Py_ssize_t i = 0; i < w->n; i++) {
        uint64_t offset, encoding, personality, lsda, fde;
        int ok = number(column[0], i, 0, UINT32_MAX, &offset);
        if (ok > 0) ok = number(column[2], i, 0, UINT32_MAX, &encoding);
        if (ok > 0) ok = number(column[3], i, 1, UINT32_MAX, &personality);
        if (ok > 0) ok = number(column[4], i, 1, UINT32_MAX, &lsda);
        if (ok > 0) ok = number(column[5], i, 1, UINT64_MAX - 1, &fde);
        if (ok < 0) return -1;
        if (ok == 0) {
            *result = Py_NewRef(Py_None);
            return 0;
        }
        uint32_t final = (uint32_t)encoding & ~(uint32_t)(UI_PERSONALITY_MASK | UI_HAS_LSDA);
        uint32_t slot = 0;
        if (personality != NO_VALUE) {
            Py_ssize_t k = 0;
            while (k < w->personality_count && w->personalities[k] != personality) k++;
            if (k == w->personality_count && k < lim->max_personalities && k < 4)
                w->personalities[w->personality_count++] = personality;
            if (k < w->personality_count) {
                slot = (uint32_t)k + 1;
            } else if (fde == NO_VALUE) {
                *result = refused("fourth", (unsigned long long)i);
                return 0;
            } else {
                if (fde > lim->fde_mask) {
                    *result = refused("fde", (unsigned long long)i);
                    return 0;
                }
                final = (uint32_t)lim->dwarf | (uint32_t)fde;
                PyObject *at = PyLong_FromSsize_t(i);
                if (!at || PyList_Append(notes, at) < 0) {
                    Py_XDECREF(at);
                    return -1;
                }
                Py_DECREF(at);
            }
        }
        if ((final & UI_MODE_MASK) == (uint32_t)lim->dwarf && fde != NO_VALUE) {
            if (fde > lim->fde_mask) {
                *result = refused("fde", (unsigned long long)i);
                return 0;
            }
            final = (uint32_t)lim->dwarf | (uint32_t)fde;
        }
        final |= slot << UI_PERSONALITY_SHIFT;
        if (lsda != NO_VALUE) final |= UI_HAS_LSDA;
        w->final[i] = final;
        int stack_ind = lim->stack_ind >= 0 &&
                        (long long)(final & UI_MODE_MASK) == lim->stack_ind;
        Row *last = w->row_count ? &w->rows[w->row_count - 1] : NULL;
        if (last && last->encoding == final && lsda == NO_VALUE && !last->has_lsda &&
            !stack_ind)
            continue;
        w->rows[w->row_count++] = (Row){(uint32_t)offset, final,
                                        lsda == NO_VALUE ? 0 : (uint32_t)lsda, 0,
                                        lsda != NO_VALUE};
    }
    return 0;
}

/* The offsets sorted, none overlapping the next, every end within 32 bits: 0, or -1
 * on error; *result set to the refusal, or to None where a number is Python's (a
 * negative length among them, which Python refuses before any overlap). */
static int placed(Build *w, PyObject *offsets, PyObject *lengths, uint32_t *end,
                  PyObject **result) {
    uint64_t previous = 0, previous_end = 0;
    Py_ssize_t overlap = -1;
    for (Py_ssize_t i = 0; i < w->n; i++) {
        uint64_t offset, length;
        int ok = number(offsets, i, 0, UINT32_MAX, &offset);
        if (ok > 0) ok = number(lengths, i, 0, UINT32_MAX, &length);
        if (ok < 0) return -1;
        if (ok == 0 || (i && offset < previous)) {
            *result = Py_NewRef(Py_None);
            return 0;
        }
        if (i && previous_end > offset && overlap < 0) overlap = i - 1;
        previous = offset;
        previous_end = offset + length;
    }
    if (overlap >= 0) {
        *result = refused("overlap", (unsigned long long)overlap);
        return 0;
    }
    /* Sorted and apart: the last function ends last. */
    if (previous_end > UINT32_MAX) {
        *result = refused("end", (unsigned long long)previous_end);
        return 0;
    }
    *end = (uint32_t)previous_end;
    return 0;
}

static void build_free(Build *w) {
    PyMem_Free(w->final);
    PyMem_Free(w->rows);
    PyMem_Free(w->encoding_of);
    PyMem_Free(w->common_index);
    PyMem_Free(w->pages);
    PyMem_Free(w->local);
}

PyObject *unwind_info_build(PyObject *Py_UNUSED(self), PyObject *args, PyObject *kwargs) {
    static char *names[] = {"offsets", "lengths", "encodings", "personalities", "lsdas",
                            "fde_offsets", "dwarf", "stack_ind", "max_common", "max_index",
                            "max_compressed", "max_regular", "max_personalities", "reach",
                            "fde_mask", NULL};
    PyObject *column[6];
    Limits lim;
    if (!PyArg_ParseTupleAndKeywords(
            args, kwargs, "O!O!O!O!O!O!$LLnnnnnKK:unwind_info_build", names, &PyList_Type,
            &column[0], &PyList_Type, &column[1], &PyList_Type, &column[2], &PyList_Type,
            &column[3], &PyList_Type, &column[4], &PyList_Type, &column[5], &lim.dwarf,
            &lim.stack_ind, &lim.max_common, &lim.max_index, &lim.max_compressed,
            &lim.max_regular, &lim.max_personalities, &lim.reach, &lim.fde_mask))
        return NULL;
    Build w = {0};
    w.n = PyList_GET_SIZE(column[0]);
    for (int c = 1; c < 6; c++)
        if (PyList_GET_SIZE(column[c]) != w.n) {
            PyErr_SetString(PyExc_ValueError, "the columns differ in length");
            return NULL;
        }
    /* Limits a page's 16-bit fields and a compressed entry's two parts hold, and that
     * let every page take a row. */
    if (lim.max_common < 0 || lim.max_common > 128 || lim.max_index <= lim.max_common ||
        lim.max_index > 1 << (32 - UI_ENTRY_OFFSET_BITS) || lim.max_compressed < 2 ||
        lim.max_compressed > (0xFFFF - UI_COMPRESSED_BYTES) / UI_WORD_BYTES ||
        lim.max_regular < 1 || lim.max_regular > 0xFFFF || lim.max_personalities < 0 ||
        lim.reach < 1 || lim.reach > 1u << UI_ENTRY_OFFSET_BITS || lim.fde_mask > UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "limits no __unwind_info page holds");
        return NULL;
    }
    if (w.n == 0 || w.n > UINT32_MAX)
        Py_RETURN_NONE;  /* (the Python builder refuses an empty table) */
    PyObject *result = NULL, *notes = PyList_New(0), *final = NULL, *routines = NULL;
    Out o = {0};
    uint32_t end = 0;
    w.final = PyMem_Malloc(sizeof(uint32_t) * (size_t)w.n);
    w.rows = PyMem_Malloc(sizeof(Row) * (size_t)w.n);
    if (!notes || !w.final || !w.rows) {
        if (notes) PyErr_NoMemory();
        goto done;
    }
    if (placed(&w, column[0], column[1], &end, &result) < 0 || result) goto done;
    if (final_rows(&w, &lim, column, notes, &result) < 0 || result) goto done;
    if (encodings(&w, &lim) < 0 || pages(&w, &lim) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    int laid = layout(&w, end, &o);
    if (laid < 0) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    if (laid == 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    final = PyList_New(w.n);
    routines = PyList_New(w.personality_count);
    if (!final || !routines) goto done;
    for (Py_ssize_t i = 0; i < w.n; i++) {
        PyObject *v = PyLong_FromUnsignedLong(w.final[i]);
        if (!v) goto done;
        PyList_SET_ITEM(final, i, v);
    }
    for (Py_ssize_t k = 0; k < w.personality_count; k++) {
        PyObject *v = PyLong_FromUnsignedLongLong(w.personalities[k]);
        if (!v) goto done;
        PyList_SET_ITEM(routines, k, v);
    }
    result = Py_BuildValue("(y#OOO)", o.buf ? o.buf : "", (Py_ssize_t)o.len, final,
                           routines, notes);
done:
    Py_XDECREF(notes);
    Py_XDECREF(final);
    Py_XDECREF(routines);
    out_free(&o);
    build_free(&w);
    return result;
}
