/* ``compact/lower._sequence``'s key: a function's rows as the objects of their states,
 * in order (``compact/lower.state_ids`` is its reference); and ``_placed``'s inexact
 * spans of a function from its rows' starts (``compact/lower.placed_spans``).
 *
 * ``dwarf/cfi`` makes each distinct row state's objects once, so which objects a row
 * holds names its state; a shape's key is made per shape (libLLVM-14: 40k shapes,
 * 476k rows), where a Python tuple per row cost more than the lowering it saves.
 * The key is valid while the rows it was made of are alive (the caller keeps them).
 * The spans are made once per shape too (40k): a Python loop, sort and sweep each.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

/* Row fields after its start: cfa, regs, ra_signed, ra_signed_pc. */
#define STATE_FIELDS 4

/* See core.h. */
PyObject *row_state_ids(PyObject *Py_UNUSED(self), PyObject *rows) {
    if (!PyTuple_Check(rows)) {
        PyErr_SetString(PyExc_TypeError, "rows must be a tuple");
        return NULL;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(rows);
    if (count > PY_SSIZE_T_MAX / (Py_ssize_t)(STATE_FIELDS * sizeof(uintptr_t))) {
        PyErr_NoMemory();
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(
        NULL, count * (Py_ssize_t)(STATE_FIELDS * sizeof(uintptr_t)));
    if (!out) return NULL;
    char *words = PyBytes_AS_STRING(out);  /* (written by memcpy: no alignment assumed) */
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *row = PyTuple_GET_ITEM(rows, i);
        if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != STATE_FIELDS + 1) {
            Py_DECREF(out);
            PyErr_SetString(PyExc_TypeError, "each row must be a tuple of 5 fields");
            return NULL;
        }
        for (Py_ssize_t j = 0; j < STATE_FIELDS; j++) {
            uintptr_t word = (uintptr_t)PyTuple_GET_ITEM(row, j + 1);
            memcpy(words + (i * STATE_FIELDS + j) * (Py_ssize_t)sizeof word, &word, sizeof word);
        }
    }
    return out;
}

/* A span [lo, hi) of offsets in the function. */
typedef struct { int64_t lo, hi; } Span;

static int span_order(const void *a, const void *b) {
    const Span *x = a, *y = b;
    if (x->lo != y->lo) return x->lo < y->lo ? -1 : 1;
    return x->hi < y->hi ? -1 : x->hi > y->hi;
}

/* An int of 64 bits, 1; 0 where it is none (a number past them, another type). */
static int int64_of(PyObject *value, int64_t *out) {
    if (!PyLong_Check(value)) return 0;
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    *out = v;
    return 1;
}

/* The rows ``exact`` of ``rows`` as spans cut to [0, size), sorted; the count, or -1
 * where Python decides (an index or a number out of the ordinary). */
static Py_ssize_t exact_spans(PyObject *rows, PyObject *exact, int64_t size, Span *out) {
    Py_ssize_t count = PyTuple_GET_SIZE(rows), n = 0;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(exact); k++) {
        int64_t i, lo, hi = size;
        if (!int64_of(PyTuple_GET_ITEM(exact, k), &i) || i < 0 || i >= count) return -1;
        PyObject *row = PyTuple_GET_ITEM(rows, i);
        if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) < 1 ||
                !int64_of(PyTuple_GET_ITEM(row, 0), &lo))
            return -1;
        if (i + 1 < count) {
            PyObject *next = PyTuple_GET_ITEM(rows, i + 1);
            if (!PyTuple_Check(next) || PyTuple_GET_SIZE(next) < 1 ||
                    !int64_of(PyTuple_GET_ITEM(next, 0), &hi))
                return -1;
        }
        if (lo < 0) lo = 0;
        if (hi > size) hi = size;
        if (lo < hi) out[n++] = (Span){lo, hi};
    }
    qsort(out, (size_t)n, sizeof(Span), span_order);
    return n;
}

/* See core.h. */
PyObject *placed_spans(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *rows, *exact, *size_obj;
    int64_t size;
    if (!PyArg_ParseTuple(args, "O!O!O:placed_spans", &PyTuple_Type, &rows, &PyTuple_Type,
                          &exact, &size_obj))
        return NULL;
    if (!int64_of(size_obj, &size)) Py_RETURN_NONE;
    Py_ssize_t most = PyTuple_GET_SIZE(exact);
    Span *spans = PyMem_Malloc(sizeof(Span) * ((size_t)most + 1));
    if (!spans) return PyErr_NoMemory();
    Py_ssize_t n = exact_spans(rows, exact, size, spans);
    PyObject *gaps = n < 0 ? NULL : PyList_New(0);
    int64_t at = 0, covered = 0;
    int failed = n >= 0 && !gaps;
    if (gaps) {
        spans[n++] = (Span){size, size};  /* _gaps' sentinel: the end */
        for (Py_ssize_t k = 0; k < n && !failed; k++) {
            if (spans[k].lo > at) {
                int64_t end = spans[k].lo < size ? spans[k].lo : size;
                if (at < end) {
                    PyObject *gap = Py_BuildValue("(LL)", (long long)at, (long long)end);
                    failed = !gap || PyList_Append(gaps, gap) < 0;
                    Py_XDECREF(gap);
                    covered += end - at;
                }
            }
            if (spans[k].hi > at) at = spans[k].hi;
        }
    }
    PyMem_Free(spans);
    if (failed) {
        Py_XDECREF(gaps);
        return NULL;
    }
    if (!gaps) Py_RETURN_NONE;
    PyObject *tuple = PyList_AsTuple(gaps);
    Py_DECREF(gaps);
    return tuple ? Py_BuildValue("(NL)", tuple, (long long)(size - covered)) : NULL;
}
