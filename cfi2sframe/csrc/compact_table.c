/* The compiled core's reads of an ``__unwind_info``: into columns, ``compact/table.py``'s
 * ``read_unwind_info`` (its reference and fallback) as ``table.read_columns`` wants it
 * for ``verify`` and the builder, each entry's function offset, encoding, personality
 * routine slot and LSDA in four lists, without a named tuple per entry.
 *
 * Wherever the Python reader would raise, this gives None and the Python reader runs
 * and says where.  The problems a readable table may have (libunwind would not find a
 * row) come back as (name, numbers...) for ``table.PROBLEMS`` to put in words, in the
 * reader's order.  Every field is read through ``bytes.h``'s ``get_uint``; the layout
 * numbers below are ``compact/layout.py``'s (``UNWIND_TABLE``, bound by
 * tests/differential/test_core_constants.py).  A 100k-function table takes about 10 ms
 * here against 0.25 s in Python.
 *
 * ``unwind_info_rows`` is ``table.Lookup.rows_at`` (its reference and fallback): the row
 * libunwind's look-up finds at each of many offsets, each page read when a look-up
 * first lands in it, None where a page the Python look-up reads is malformed (it then
 * raises).  The builder looks its table up at every function's first and last byte
 * with it.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

#include "bytes.h"
#include "core.h"

enum {
    T_VERSION = 1, T_REGULAR = 2, T_COMPRESSED = 3,
    HEADER_BYTES = 28, HEADER_WORDS = 7,
    INDEX_BYTES = 12, INDEX_PAGE_AT = 4, INDEX_LSDA_AT = 8,
    LSDA_BYTES = 8, LSDA_VALUE_AT = 4,
    PAGE_BYTES = 8, PAGE_ENTRY_AT = 4, PAGE_COUNT_AT = 6,
    COMPRESSED_BYTES = 12, COMPRESSED_LOCAL_AT = 8, COMPRESSED_LOCAL_COUNT_AT = 10,
    REGULAR_ENTRY_BYTES = 8, REGULAR_ENCODING_AT = 4, WORD_BYTES = 4,
    ENTRY_OFFSET_BITS = 24,
    T_PERSONALITY_MASK = 0x30000000, T_PERSONALITY_SHIFT = 28, T_HAS_LSDA = 0x40000000,
};

PyObject *unwind_table_constants(void) {
    return Py_BuildValue(
        "{sisisisisisisisisisisisisisisisisisisisisIsisI}",
        "VERSION", T_VERSION, "REGULAR", T_REGULAR, "COMPRESSED", T_COMPRESSED,
        "HEADER_BYTES", HEADER_BYTES, "HEADER_WORDS", HEADER_WORDS,
        "INDEX_BYTES", INDEX_BYTES, "INDEX_PAGE_AT", INDEX_PAGE_AT,
        "INDEX_LSDA_AT", INDEX_LSDA_AT, "LSDA_BYTES", LSDA_BYTES,
        "LSDA_VALUE_AT", LSDA_VALUE_AT, "PAGE_BYTES", PAGE_BYTES,
        "PAGE_ENTRY_AT", PAGE_ENTRY_AT, "PAGE_COUNT_AT", PAGE_COUNT_AT,
        "COMPRESSED_BYTES", COMPRESSED_BYTES, "COMPRESSED_LOCAL_AT", COMPRESSED_LOCAL_AT,
        "COMPRESSED_LOCAL_COUNT_AT", COMPRESSED_LOCAL_COUNT_AT,
        "REGULAR_ENTRY_BYTES", REGULAR_ENTRY_BYTES,
        "REGULAR_ENCODING_AT", REGULAR_ENCODING_AT, "WORD_BYTES", WORD_BYTES,
        "ENTRY_OFFSET_BITS", ENTRY_OFFSET_BITS,
        "PERSONALITY_MASK", (unsigned)T_PERSONALITY_MASK,
        "PERSONALITY_SHIFT", T_PERSONALITY_SHIFT, "HAS_LSDA", (unsigned)T_HAS_LSDA);
}

/* [at, at + size) lies in the section (both below 2**34: no overflow). */
static int inside(const Bytes *b, uint64_t at, uint64_t size) {
    return at <= (uint64_t)b->end && size <= (uint64_t)b->end - at;
}

static uint32_t word(const Bytes *b, uint64_t at, int size) {
    uint64_t v = 0;
    get_uint(b, (Py_ssize_t)at, size, &v);  /* every caller checked the extent */
    return (uint32_t)v;
}

/* An LSDA index entry: its function, LSDA and place (the last of equal functions wins,
 * as the Python reader's dict keeps it). */
typedef struct { uint32_t function, lsda, at; } Lsda;

static int by_function_then_place(const void *a, const void *b) {
    const Lsda *x = a, *y = b;
    if (x->function != y->function) return x->function < y->function ? -1 : 1;
    return x->at < y->at ? -1 : x->at > y->at;
}

/* The read in the making: the section, its header words, the LSDA index sorted, and
 * the four columns and the problems being filled. */
typedef struct {
    Bytes b;
    uint32_t head[HEADER_WORDS];
    Lsda *lsdas;
    uint32_t lsda_count;
    PyObject *offsets, *encodings, *personalities, *lsda_column, *problems;
    uint64_t previous;  /* the last entry's offset */
    int any;
} Read;

/* Append (name, numbers...) to the problems; -1 on error. */
static int add_problem(PyObject *problems, PyObject *item) {
    if (!item) return -1;
    int status = PyList_Append(problems, item);
    Py_DECREF(item);
    return status;
}

/* Append a new reference to a list, stealing it; -1 on error. */
static int append_new(PyObject *list, PyObject *item) {
    if (!item) return -1;
    int status = PyList_Append(list, item);
    Py_DECREF(item);
    return status;
}

/* The header, its arrays and the LSDA index checked (1: the reader raises).  -1 on
 * error. */
static int read_header(Read *r) {
    const Bytes *b = &r->b;
    if (!inside(b, 0, HEADER_BYTES)) return 1;
    for (int i = 0; i < HEADER_WORDS; i++) r->head[i] = word(b, 4u * (unsigned)i, 4);
    const uint32_t *h = r->head;
    if (h[0] != T_VERSION || !inside(b, h[1], (uint64_t)WORD_BYTES * h[2]) ||
        !inside(b, h[3], (uint64_t)WORD_BYTES * h[4]) ||
        !inside(b, h[5], (uint64_t)INDEX_BYTES * h[6]) || h[6] == 0)
        return 1;
    uint32_t first = word(b, (uint64_t)h[5] + INDEX_LSDA_AT, 4);
    uint32_t end = word(b, (uint64_t)h[5] + (uint64_t)INDEX_BYTES * (h[6] - 1) + INDEX_LSDA_AT,
                        4);
    if (end < first || (end - first) % LSDA_BYTES || !inside(b, first, end - first)) return 1;
    r->lsda_count = (end - first) / LSDA_BYTES;
    r->lsdas = PyMem_Malloc(sizeof(Lsda) * ((size_t)r->lsda_count + 1));
    if (!r->lsdas) { PyErr_NoMemory(); return -1; }
    for (uint32_t i = 0; i < r->lsda_count; i++) {
        uint64_t at = (uint64_t)first + (uint64_t)LSDA_BYTES * i;
        r->lsdas[i] = (Lsda){word(b, at, 4), word(b, at + LSDA_VALUE_AT, 4), i};
    }
    qsort(r->lsdas, r->lsda_count, sizeof(Lsda), by_function_then_place);
    return 0;
}

/* The LSDA of the function at ``offset`` (the last entry for it); 0 without one. */
static int lsda_of(const Read *r, uint64_t offset, uint32_t *lsda) {
    uint32_t lo = 0, hi = r->lsda_count;  /* the first entry past ``offset`` */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (r->lsdas[mid].function <= offset) lo = mid + 1;
        else hi = mid;
    }
    if (lo == 0 || r->lsdas[lo - 1].function != offset) return 0;
    *lsda = r->lsdas[lo - 1].lsda;
    return 1;
}

/* One entry of page ``number`` (functions [function, next_function)) checked and
 * added to the columns (1: the reader raises).  -1 on error. */
static int add_entry(Read *r, uint32_t number, uint32_t function, uint32_t next_function,
                     uint64_t offset, uint32_t encoding) {
    if ((offset < function || offset >= next_function) &&
        add_problem(r->problems, Py_BuildValue("(sIKkkO)", "outside", number,
                                               (unsigned long long)offset,
                                               (unsigned long)function,
                                               (unsigned long)next_function,
                                               number + 2 == r->head[6] ? Py_True : Py_False))
        < 0)
        return -1;
    if (r->any && offset < r->previous &&
        add_problem(r->problems, Py_BuildValue("(sIKK)", "entry-order", number,
                                               (unsigned long long)offset,
                                               (unsigned long long)r->previous)) < 0)
        return -1;
    r->any = 1;
    r->previous = offset;
    uint32_t slot = (encoding & T_PERSONALITY_MASK) >> T_PERSONALITY_SHIFT, lsda = 0;
    if (slot > r->head[4]) return 1;
    if (encoding & T_HAS_LSDA && !lsda_of(r, offset, &lsda)) return 1;
    PyObject *routine = slot ? PyLong_FromUnsignedLong(
        word(&r->b, (uint64_t)r->head[3] + (uint64_t)WORD_BYTES * (slot - 1), 4)) :
        Py_NewRef(Py_None);
    PyObject *lsda_value = encoding & T_HAS_LSDA ? PyLong_FromUnsignedLong(lsda) :
        Py_NewRef(Py_None);
    if (append_new(r->offsets, PyLong_FromUnsignedLongLong(offset)) < 0 ||
        append_new(r->encodings, PyLong_FromUnsignedLong(encoding)) < 0) {
        Py_XDECREF(routine);
        Py_XDECREF(lsda_value);
        return -1;
    }
    if (append_new(r->personalities, routine) < 0) {
        Py_XDECREF(lsda_value);
        return -1;
    }
    return append_new(r->lsda_column, lsda_value);
}

/* Second-level page ``number``, each entry added (1: the reader raises).  -1 on
 * error. */
static int read_page(Read *r, uint32_t number) {
    const Bytes *b = &r->b;
    uint64_t e = (uint64_t)r->head[5] + (uint64_t)INDEX_BYTES * number;
    uint32_t function = word(b, e, 4), at = word(b, e + INDEX_PAGE_AT, 4);
    uint32_t next_function = word(b, e + INDEX_BYTES, 4);
    if (next_function < function &&
        add_problem(r->problems, Py_BuildValue("(sIkk)", "index-order", number,
                                               (unsigned long)next_function,
                                               (unsigned long)function)) < 0)
        return -1;
    if (!inside(b, at, PAGE_BYTES)) return 1;
    uint32_t kind = word(b, at, 4), entry_at = word(b, (uint64_t)at + PAGE_ENTRY_AT, 2);
    uint32_t count = word(b, (uint64_t)at + PAGE_COUNT_AT, 2);
    uint64_t entries = (uint64_t)at + entry_at;
    if (kind == T_REGULAR) {
        if (!inside(b, entries, (uint64_t)REGULAR_ENTRY_BYTES * count)) return 1;
        for (uint32_t i = 0; i < count; i++) {
            uint64_t p = entries + (uint64_t)REGULAR_ENTRY_BYTES * i;
            int status = add_entry(r, number, function, next_function, word(b, p, 4),
                                   word(b, p + REGULAR_ENCODING_AT, 4));
            if (status) return status;
        }
        return 0;
    }
    if (kind != T_COMPRESSED || !inside(b, at, COMPRESSED_BYTES)) return 1;
    uint64_t local_at = (uint64_t)at + word(b, (uint64_t)at + COMPRESSED_LOCAL_AT, 2);
    uint32_t local_count = word(b, (uint64_t)at + COMPRESSED_LOCAL_COUNT_AT, 2);
    uint32_t common_count = r->head[2];
    if (!inside(b, entries, (uint64_t)WORD_BYTES * count) ||
        !inside(b, local_at, (uint64_t)WORD_BYTES * local_count))
        return 1;
    for (uint32_t i = 0; i < count; i++)  /* the reader resolves every index first */
        if (word(b, entries + (uint64_t)WORD_BYTES * i, 4) >> ENTRY_OFFSET_BITS >=
            (uint64_t)common_count + local_count)
            return 1;
    for (uint32_t i = 0; i < count; i++) {
        uint32_t w = word(b, entries + (uint64_t)WORD_BYTES * i, 4);
        uint32_t which = w >> ENTRY_OFFSET_BITS;
        uint32_t encoding = which < common_count ?
            word(b, (uint64_t)r->head[1] + (uint64_t)WORD_BYTES * which, 4) :
            word(b, local_at + (uint64_t)WORD_BYTES * (which - common_count), 4);
        uint64_t offset = (uint64_t)function + (w & ((1u << ENTRY_OFFSET_BITS) - 1));
        int status = add_entry(r, number, function, next_function, offset, encoding);
        if (status) return status;
    }
    return 0;
}

PyObject *unwind_info_entries(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer section;
    if (!PyArg_ParseTuple(args, "y*", &section)) return NULL;
    PyObject *result = NULL;
    Read r = {{section.buf, section.len, 0}, {0}, NULL, 0, PyList_New(0), PyList_New(0),
              PyList_New(0), PyList_New(0), PyList_New(0), 0, 0};
    if (!r.offsets || !r.encodings || !r.personalities || !r.lsda_column || !r.problems)
        goto done;
    int status = read_header(&r);
    for (uint32_t number = 0; status == 0 && number + 1 < r.head[6]; number++)
        status = read_page(&r, number);
    if (status == 1) {
        result = Py_NewRef(Py_None);
    } else if (status == 0) {
        uint32_t sentinel = word(&r.b, (uint64_t)r.head[5] +
                                 (uint64_t)INDEX_BYTES * (r.head[6] - 1), 4);
        result = Py_BuildValue("(OOOOkO)", r.offsets, r.encodings, r.personalities,
                               r.lsda_column, (unsigned long)sentinel, r.problems);
    }
done:
    Py_XDECREF(r.offsets);
    Py_XDECREF(r.encodings);
    Py_XDECREF(r.personalities);
    Py_XDECREF(r.lsda_column);
    Py_XDECREF(r.problems);
    PyMem_Free(r.lsdas);
    PyBuffer_Release(&section);
    return result;
}

/* One second-level page as ``Lookup._page`` reads it: its function offsets and
 * encodings, read when a look-up first lands in it. */
typedef struct { uint64_t *offsets; uint32_t *encodings; uint32_t count; int read; } Rows;

/* Page ``e`` of the index at ``index_at`` read into *p (0: malformed, where the Python
 * look-up raises; -1: no memory). */
static int read_rows(const Bytes *b, const uint32_t *head, uint64_t base, uint32_t page_at,
                     Rows *p) {
    if (!inside(b, page_at, PAGE_BYTES)) return 0;
    uint32_t kind = word(b, page_at, 4), count = word(b, (uint64_t)page_at + PAGE_COUNT_AT, 2);
    uint64_t entries = (uint64_t)page_at + word(b, (uint64_t)page_at + PAGE_ENTRY_AT, 2);
    uint64_t local_at = 0;
    uint32_t local_count = 0;
    if (kind == T_REGULAR) {
        if (!inside(b, entries, (uint64_t)REGULAR_ENTRY_BYTES * count)) return 0;
    } else if (kind == T_COMPRESSED) {
        if (!inside(b, page_at, COMPRESSED_BYTES)) return 0;
        local_at = (uint64_t)page_at + word(b, (uint64_t)page_at + COMPRESSED_LOCAL_AT, 2);
        local_count = word(b, (uint64_t)page_at + COMPRESSED_LOCAL_COUNT_AT, 2);
        if (!inside(b, entries, (uint64_t)WORD_BYTES * count) ||
            !inside(b, local_at, (uint64_t)WORD_BYTES * local_count) ||
            !inside(b, head[1], (uint64_t)WORD_BYTES * head[2]))
            return 0;
    } else {
        return 0;
    }
    p->offsets = PyMem_Malloc(sizeof(uint64_t) * ((size_t)count + 1));
    p->encodings = PyMem_Malloc(sizeof(uint32_t) * ((size_t)count + 1));
    if (!p->offsets || !p->encodings) return -1;
    p->count = count;
    p->read = 1;
    for (uint32_t i = 0; i < count; i++) {
        if (kind == T_REGULAR) {
            uint64_t at = entries + (uint64_t)REGULAR_ENTRY_BYTES * i;
            p->offsets[i] = word(b, at, 4);
            p->encodings[i] = word(b, at + REGULAR_ENCODING_AT, 4);
            continue;
        }
        uint32_t w = word(b, entries + (uint64_t)WORD_BYTES * i, 4);
        uint32_t which = w >> ENTRY_OFFSET_BITS;
        if (which >= (uint64_t)head[2] + local_count) return 0;
        p->offsets[i] = base + (w & ((1u << ENTRY_OFFSET_BITS) - 1));
        p->encodings[i] = which < head[2] ?
            word(b, (uint64_t)head[1] + (uint64_t)WORD_BYTES * which, 4) :
            word(b, local_at + (uint64_t)WORD_BYTES * (which - head[2]), 4);
    }
    return 1;
}

/* Python's ``bisect_right(values, x) - 1`` over n values (sorted or not: the same
 * halvings). */
static Py_ssize_t last_at_or_before(const uint64_t *values, Py_ssize_t n, uint64_t x) {
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (x < values[mid]) hi = mid;
        else lo = mid + 1;
    }
    return lo - 1;
}

PyObject *unwind_info_rows(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer section;
    PyObject *pcs;
    if (!PyArg_ParseTuple(args, "y*O!:unwind_info_rows", &section, &PyList_Type, &pcs))
        return NULL;
    Bytes b = {section.buf, section.len, 0};
    PyObject *result = NULL, *out = NULL;
    uint64_t *starts = NULL;
    Rows *pages = NULL;
    uint32_t head[HEADER_WORDS] = {0};
    int status = inside(&b, 0, HEADER_BYTES);
    for (int i = 0; status && i < HEADER_WORDS; i++) head[i] = word(&b, 4u * (unsigned)i, 4);
    status = status && inside(&b, head[5], (uint64_t)INDEX_BYTES * head[6]) &&
             inside(&b, head[1], (uint64_t)WORD_BYTES * head[2]);  /* read up front */
    if (status) {
        starts = PyMem_Malloc(sizeof(uint64_t) * ((size_t)head[6] + 1));
        pages = PyMem_Calloc((size_t)head[6] + 1, sizeof(Rows));
        out = PyList_New(PyList_GET_SIZE(pcs));
        if (!starts || !pages || !out) goto done;
        for (uint32_t e = 0; e < head[6]; e++)
            starts[e] = word(&b, (uint64_t)head[5] + (uint64_t)INDEX_BYTES * e, 4);
    }
    for (Py_ssize_t k = 0; status > 0 && k < PyList_GET_SIZE(pcs); k++) {
        uint64_t pc = PyLong_AsUnsignedLongLong(PyList_GET_ITEM(pcs, k));
        if (pc == (uint64_t)-1 && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_OverflowError)) goto done;
            PyErr_Clear();  /* past 64 bits: the Python look-up's */
            status = 0;
            break;
        }
        Py_ssize_t e = last_at_or_before(starts, head[6], pc);
        PyObject *row = Py_None;
        if (e >= 0 && e < (Py_ssize_t)head[6] - 1) {
            Rows *p = &pages[e];
            if (!p->read) {
                uint64_t entry = (uint64_t)head[5] + (uint64_t)INDEX_BYTES * (uint64_t)e;
                uint32_t page_at = word(&b, entry + INDEX_PAGE_AT, 4);
                status = read_rows(&b, head, starts[e], page_at, p);
                if (status < 0) { PyErr_NoMemory(); goto done; }
                if (!status) break;
            }
            Py_ssize_t i = last_at_or_before(p->offsets, p->count, pc);
            if (i >= 0 && p->encodings[i])
                row = Py_BuildValue("(Kk)", (unsigned long long)p->offsets[i],
                                    (unsigned long)p->encodings[i]);
            else
                Py_INCREF(row);
        } else {
            Py_INCREF(row);
        }
        if (!row) goto done;
        PyList_SET_ITEM(out, k, row);
    }
    result = status > 0 ? Py_NewRef(out) : Py_NewRef(Py_None);
done:
    Py_XDECREF(out);
    if (pages)
        for (uint32_t e = 0; e < head[6]; e++) {
            PyMem_Free(pages[e].offsets);
            PyMem_Free(pages[e].encodings);
        }
    PyMem_Free(pages);
    PyMem_Free(starts);
    PyBuffer_Release(&section);
    return result;
}
