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
 * raises).  The builder looks its table up at every function's first and last byte
 * with it.
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
        add_problem(r->problems, Py_BuildValue("(sIkk)", "index-order", number,
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

PyObject *unwind_info_rows(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer section;
    PyObject *pcs;
    if (!PyArg_ParseTuple(args, "y*O!:unwind_info_rows", &section, &PyList_Type, &pcs))
        return NULL;
    Bytes b = {section.buf, section.len, 0};
    PyObject *result = NULL, *out = NULL;
    uint64_t *starts = NULL;
    Rows *pages = NULL;
    uint32_t head[UI_HEADER_WORDS] = {0};
    int status = ui_head(&b, head) &&  /* no version check: the Python look-up makes none */
                 ui_inside(&b, head[5], (uint64_t)UI_INDEX_BYTES * head[6]) &&
                 ui_inside(&b, head[1], (uint64_t)UI_WORD_BYTES * head[2]);  /* up front */
    if (status) {
        starts = PyMem_Malloc(sizeof(uint64_t) * ((size_t)head[6] + 1));
        pages = PyMem_Calloc((size_t)head[6] + 1, sizeof(Rows));
        out = PyList_New(PyList_GET_SIZE(pcs));
        if (!starts || !pages || !out) goto done;
        for (uint32_t e = 0; e < head[6]; e++)
            starts[e] = ui_word(&b, (uint64_t)head[5] + (uint64_t)UI_INDEX_BYTES * e,
                                UI_WORD_BYTES);
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
                uint32_t function, page_at, lsda_at;
                ui_index(&b, head, (uint64_t)e, &function, &page_at, &lsda_at);
                status = read_rows(&b, head, function, page_at, p);
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
