/* The compiled core's reads of an ``__unwind_info``: into columns, ``compact/table.py``'s
 * ``read_unwind_info`` (its reference and fallback) as ``table.read_columns`` wants it
 * for ``verify`` and the builder, each entry's function offset, encoding, personality
 * routine slot and LSDA in four lists, without a named tuple per entry.
 *
 * Wherever the Python reader would raise, this gives None and the Python reader runs
 * and says where.  The problems a readable table may have (libunwind would not find a
 * row) come back as (name, numbers...) for ``table.PROBLEMS`` to put in words, in the
 * reader's order.  The table is read and checked through ``unwind_info.h``, the one
 * reader both files share (its layout numbers are ``compact/layout.py``'s); what is
 * this file's is the columns, the LSDA look-up and the problems.  A 100k-function
 * table takes about 10 ms here against 0.25 s in Python.
 *
 * ``unwind_info_rows`` is ``table.Lookup.rows_at`` (its reference and fallback): the row
 * libunwind's look-up finds at each of many offsets, each page read when a look-up
 * first lands in it, None where a page the Python look-up reads is malformed (it then
 * raises).  ``unwind_info_misses`` is the builder's check of its table
 * (``table_writer._misses`` its reference): the functions whose first or last byte
 * that look-up does not give their encoding, or whose encoding names a personality
 * routine or an LSDA (Python reads those as libunwind does).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

#include "bytes.h"
#include "core.h"
#include "unwind_info.h"

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
    uint32_t head[UI_HEADER_WORDS];
    Lsda *lsdas;
    uint32_t lsda_count;
    PyObject *offsets, *encodings, *personalities, *lsda_column, *problems;
    uint64_t previous;  /* the last entry's offset */
    int any;
} Read;

/* The header, its arrays and the LSDA index checked (1: the reader raises), the index
 * sorted for ``lsda_of``.  -1 on error. */
static int read_header(Read *r) {
    const Bytes *b = &r->b;
    uint32_t first;
    if (!ui_header(b, r->head, &first, &r->lsda_count)) return 1;
    r->lsdas = PyMem_Malloc(sizeof(Lsda) * ((size_t)r->lsda_count + 1));
    if (!r->lsdas) { PyErr_NoMemory(); return -1; }
    for (uint32_t i = 0; i < r->lsda_count; i++) {
        r->lsdas[i].at = i;
        ui_lsda(b, first, i, &r->lsdas[i].function, &r->lsdas[i].lsda);
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
        append_new(r->problems, Py_BuildValue("(sIKkkO)", "outside", number,
                                              (unsigned long long)offset,
                                              (unsigned long)function,
                                              (unsigned long)next_function,
                                              number + 2 == r->head[6] ? Py_True : Py_False))
        < 0)
        return -1;
    if (r->any && offset < r->previous &&
        append_new(r->problems, Py_BuildValue("(sIKK)", "entry-order", number,
                                              (unsigned long long)offset,
                                              (unsigned long long)r->previous)) < 0)
        return -1;
    r->any = 1;
    r->previous = offset;
    uint32_t slot = ui_personality(encoding), lsda = 0;
    if (slot > r->head[4]) return 1;
    if (encoding & UI_HAS_LSDA && !lsda_of(r, offset, &lsda)) return 1;
    PyObject *routine = slot ? PyLong_FromUnsignedLong(
        ui_word(&r->b, (uint64_t)r->head[3] + (uint64_t)UI_WORD_BYTES * (slot - 1),
                UI_WORD_BYTES)) :
        Py_NewRef(Py_None);
    PyObject *lsda_value = encoding & UI_HAS_LSDA ? PyLong_FromUnsignedLong(lsda) :
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
    uint32_t function, at, next_function, next_at, lsda_at;
    ui_index(b, r->head, number, &function, &at, &lsda_at);
    ui_index(b, r->head, number + 1, &next_function, &next_at, &lsda_at);
    if (next_function < function &&
        append_new(r->problems, Py_BuildValue("(sIkk)", "index-order", number,
                                              (unsigned long)next_function,
                                              (unsigned long)function)) < 0)
        return -1;
    UiPage p;
    uint64_t offset = 0;
    uint32_t encoding = 0, which = 0;
    if (!ui_page(b, at, &p)) return 1;
    /* the reader resolves every encoding index of a compressed page first */
    for (uint32_t i = 0; p.kind == UI_COMPRESSED && i < p.count; i++)
        if (!ui_entry(b, r->head, &p, function, i, &offset, &encoding, &which)) return 1;
    for (uint32_t i = 0; i < p.count; i++) {
        ui_entry(b, r->head, &p, function, i, &offset, &encoding, &which);
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
        uint32_t sentinel, page_at, lsda_at;
        ui_index(&r.b, r.head, r.head[6] - 1, &sentinel, &page_at, &lsda_at);
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

/* The page at ``page_at``, whose first function is at ``base``, read into *p (0:
 * malformed, where the Python look-up raises; -1: no memory). */
static int read_rows(const Bytes *b, const uint32_t *head, uint32_t base, uint32_t page_at,
                     Rows *p) {
    UiPage page;
    if (!ui_page(b, page_at, &page)) return 0;
    p->offsets = PyMem_Malloc(sizeof(uint64_t) * ((size_t)page.count + 1));
    p->encodings = PyMem_Malloc(sizeof(uint32_t) * ((size_t)page.count + 1));
    if (!p->offsets || !p->encodings) return -1;
    p->count = page.count;
    p->read = 1;
    uint32_t which;
    for (uint32_t i = 0; i < page.count; i++)
        if (!ui_entry(b, head, &page, base, i, &p->offsets[i], &p->encodings[i], &which))
            return 0;
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

/* A table opened for look-ups: its header, its first-level index's starts, and its
 * pages as each is first read. */
typedef struct {
    Bytes b;
    uint32_t head[UI_HEADER_WORDS];
    uint64_t *starts;
    Rows *pages;
} Table;

/* The header and index read up front: 1, 0 (malformed: Python's look-up decides), -1
 * (no memory). */
static int table_open(Table *t, const Py_buffer *section) {
    t->b = (Bytes){section->buf, section->len, 0};
    t->starts = NULL;
    t->pages = NULL;
    if (!(ui_head(&t->b, t->head) &&  /* no version check: the Python look-up makes none */
          ui_inside(&t->b, t->head[5], (uint64_t)UI_INDEX_BYTES * t->head[6]) &&
          ui_inside(&t->b, t->head[1], (uint64_t)UI_WORD_BYTES * t->head[2])))  /* up front */
        return 0;
    t->starts = PyMem_Malloc(sizeof(uint64_t) * ((size_t)t->head[6] + 1));
    t->pages = PyMem_Calloc((size_t)t->head[6] + 1, sizeof(Rows));
    if (!t->starts || !t->pages) return -1;
    for (uint32_t e = 0; e < t->head[6]; e++)
        t->starts[e] = ui_word(&t->b, (uint64_t)t->head[5] + (uint64_t)UI_INDEX_BYTES * e,
                               UI_WORD_BYTES);
    return 1;
}

static void table_close(Table *t) {
    if (t->pages)
        for (uint32_t e = 0; e < t->head[6]; e++) {
            PyMem_Free(t->pages[e].offsets);
            PyMem_Free(t->pages[e].encodings);
        }
    PyMem_Free(t->pages);
    PyMem_Free(t->starts);
}

/* The row libunwind's look-up finds at ``pc``: its start and encoding (encoding 0: no
 * row).  1, 0 (a malformed page), -1 (no memory). */
static int table_row(Table *t, uint64_t pc, uint64_t *start, uint32_t *encoding) {
    *encoding = 0;
    Py_ssize_t e = last_at_or_before(t->starts, t->head[6], pc);
    if (e < 0 || e >= (Py_ssize_t)t->head[6] - 1) return 1;
    Rows *p = &t->pages[e];
    if (!p->read) {
        uint32_t function, page_at, lsda_at;
        ui_index(&t->b, t->head, (uint64_t)e, &function, &page_at, &lsda_at);
        int status = read_rows(&t->b, t->head, function, page_at, p);
        if (status <= 0) return status;
    }
    Py_ssize_t i = last_at_or_before(p->offsets, p->count, pc);
    if (i >= 0) {
        *start = p->offsets[i];
        *encoding = p->encodings[i];
    }
    return 1;
}

/* Item ``k`` of a list of numbers below 2**64: 1, 0 (past: Python's), -1 (error). */
static int list_number(PyObject *list, Py_ssize_t k, uint64_t *out) {
    *out = PyLong_AsUnsignedLongLong(PyList_GET_ITEM(list, k));
    if (*out != (uint64_t)-1 || !PyErr_Occurred()) return 1;
    if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return -1;
    PyErr_Clear();
    return 0;
}

PyObject *unwind_info_rows(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer section;
    PyObject *pcs;
    if (!PyArg_ParseTuple(args, "y*O!:unwind_info_rows", &section, &PyList_Type, &pcs))
        return NULL;
    PyObject *result = NULL, *out = NULL;
    Table t;
    int status = table_open(&t, &section);
    if (status > 0) out = PyList_New(PyList_GET_SIZE(pcs));
    if (status < 0 || (status > 0 && !out)) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; status > 0 && k < PyList_GET_SIZE(pcs); k++) {
        uint64_t pc, start = 0;
        uint32_t encoding;
        status = list_number(pcs, k, &pc);  /* past 64 bits: the Python look-up's */
        if (status > 0) status = table_row(&t, pc, &start, &encoding);
        if (status < 0) {
            if (!PyErr_Occurred()) PyErr_NoMemory();
            goto done;
        }
        if (!status) break;
        PyObject *row = encoding ? Py_BuildValue("(Kk)", (unsigned long long)start,
                                                 (unsigned long)encoding)
                                 : Py_NewRef(Py_None);
        if (!row) goto done;
        PyList_SET_ITEM(out, k, row);
    }
    result = status > 0 ? Py_NewRef(out) : Py_NewRef(Py_None);
done:
    Py_XDECREF(out);
    table_close(&t);
    PyBuffer_Release(&section);
    return result;
}

PyObject *unwind_info_misses(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer section;
    PyObject *offsets, *lengths, *encodings;
    if (!PyArg_ParseTuple(args, "y*O!O!O!:unwind_info_misses", &section, &PyList_Type,
                          &offsets, &PyList_Type, &lengths, &PyList_Type, &encodings))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(offsets);
    PyObject *result = NULL, *out = NULL;
    Table t;
    int status = table_open(&t, &section);
    if (PyList_GET_SIZE(lengths) != n || PyList_GET_SIZE(encodings) != n) {
        PyErr_SetString(PyExc_ValueError, "the columns differ in length");
        goto done;
    }
    if (status > 0) out = PyList_New(0);
    if (status < 0 || (status > 0 && !out)) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; status > 0 && k < n; k++) {
        uint64_t offset, length, want, start;
        uint32_t first = 0, last = 0;
        status = list_number(offsets, k, &offset);
        if (status > 0) status = list_number(lengths, k, &length);
        if (status > 0) status = list_number(encodings, k, &want);
        if (status > 0 && (want > UINT32_MAX || length > UINT64_MAX - offset)) status = 0;
        if (status > 0) status = table_row(&t, offset, &start, &first);
        if (status > 0) status = table_row(&t, length ? offset + length - 1 : offset, &start,
                                           &last);
        if (status < 0) {
            if (!PyErr_Occurred()) PyErr_NoMemory();
            goto done;
        }
        if (!status) break;
        if (want & (UI_PERSONALITY_MASK | UI_HAS_LSDA) || first != want || last != want) {
            PyObject *at = PyLong_FromSsize_t(k);
            if (!at || PyList_Append(out, at) < 0) {
                Py_XDECREF(at);
                goto done;
            }
            Py_DECREF(at);
        }
    }
    result = status > 0 ? Py_NewRef(out) : Py_NewRef(Py_None);
done:
    Py_XDECREF(out);
    table_close(&t);
    PyBuffer_Release(&section);
    return result;
}
