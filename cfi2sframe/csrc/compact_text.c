/* ``compact``'s listing of an ELF file's or an object's functions: each function's rows
 * and, with ``--check``, the line saying where its rows are not exact.
 *
 * ``compact_rows_text`` is ``cli/compact._Rows.text`` (its reference and fallback) for
 * a part of the functions: a library's 95k function lines and 71k check lines were
 * a third of ``compact --check`` formatted in Python.  Only the numbers and the
 * padding are made here; a row's encoding in words is asked of Python (``tail``) once
 * per encoding, kept in a ``Kept`` table for the call where Python says it may be (not
 * DWARF mode, whose words name the function's reason).  Wherever a field is not what
 * ``lower.CompactFunction`` holds (a function without rows, a name UTF-8 cannot hold,
 * a number or address past 64 bits or negative), this gives None and the Python
 * formatter makes the part.  tests/differential/test_compact_alike.py holds the two
 * equal on real libraries; tests/unit/test_compact_alike.py on functions by hand.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "core.h"
#include "kept.h"
#include "out.h"

enum { NAME_WIDTH = 24 };  /* f"{name:<24}" */

/* CompactFunction's and CompactRow's fields, by index. */
enum { F_NAME = 0, F_START = 2, F_ROWS = 4, F_REASON = 5, F_BODY = 10, F_INEXACT = 11,
       F_FIELDS = 12 };
enum { R_START = 0, R_LENGTH = 1, R_ENCODING = 2, R_FIELDS = 3 };

/* Python's ``f"{v:#{width}x}"``: 0x and the digits, spaces before up to ``width``. */
static int put_hash_hex(Out *o, uint64_t v, size_t width) {
    size_t digits = 1;
    for (uint64_t rest = v >> 4; rest; rest >>= 4) digits++;
    if (digits + 2 < width && put_fill(o, ' ', width - digits - 2) < 0) return -1;
    return put_hex(o, v, 0);
}

/* A non-negative int below 2**64 in *v: 1; 0 (no error left set) where it is not one. */
static int u64_of(PyObject *obj, uint64_t *v) {
    if (!PyLong_Check(obj)) return 0;
    unsigned long long got = PyLong_AsUnsignedLongLong(obj);
    if (got == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    *v = (uint64_t)got;
    return 1;
}

/* A pair of such ints. */
static int pair_of(PyObject *obj, uint64_t *a, uint64_t *b) {
    return PyTuple_Check(obj) && PyTuple_GET_SIZE(obj) == 2
        && u64_of(PyTuple_GET_ITEM(obj, 0), a) && u64_of(PyTuple_GET_ITEM(obj, 1), b);
}

/* ``start + at`` in *sum where it stays below 2**64. */
static int placed(uint64_t start, uint64_t at, uint64_t *sum) {
    return !__builtin_add_overflow(start, at, sum);
}

/* The spans ``[lo, hi)`` of ``spans`` (all when ``side`` is 0; those wholly before
 * ``lo_body`` where -1, from ``hi_body`` on where 1), each at ``start``: 1, 0 where a
 * field is not a number or an address passes 2**64, -1 on a failed growth. */
static int put_spans(Out *o, PyObject *spans, int side, uint64_t lo_body, uint64_t hi_body,
                     uint64_t start) {
    int first = 1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(spans); i++) {
        uint64_t a, b, x, y;
        if (!pair_of(PyTuple_GET_ITEM(spans, i), &a, &b)) return 0;
        if ((side < 0 && b > lo_body) || (side > 0 && a < hi_body)) continue;
        if (!placed(start, a, &x) || !placed(start, b, &y)) return 0;
        if (!first) PUTS(o, ", ");
        first = 0;
        PUTS(o, "[");
        put_hex(o, x, 0);
        PUTS(o, ", ");
        put_hex(o, y, 0);
        PUTS(o, ")");
    }
    return o->failed ? -1 : 1;
}

/* The check line of a compact function whose ``inexact`` spans are not empty
 * (``cli/compact._check_format``'s): 1, 0 (give the part to Python), -1 on error. */
static int put_check(Out *o, PyObject *inexact, uint64_t lo, uint64_t hi, int in_body,
                     uint64_t start) {
    static const char head[] = "                         check: ";
    put(o, head, sizeof head - 1);
    int done;
    if (!in_body) {
        PUTS(o, "NOT exact inside the body state at ");
        done = put_spans(o, inexact, 0, lo, hi, start);
    } else {
        uint64_t x, y;
        if (!placed(start, lo, &x) || !placed(start, hi, &y)) return 0;
        int before = 0, after = 0;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(inexact); i++) {
            uint64_t a, b;
            if (!pair_of(PyTuple_GET_ITEM(inexact, i), &a, &b)) return 0;
            before |= b <= lo;
            after |= a >= hi;
        }
        PUTS(o, "exact over the body state [");
        put_hex(o, x, 0);
        PUTS(o, ", ");
        put_hex(o, y, 0);
        PUTS(o, "); not ");
        done = 1;
        if (before) {
            PUTS(o, "before it (prologue, stack changes) at ");
            done = put_spans(o, inexact, -1, lo, hi, start);
        }
        if (done == 1 && after) {
            if (before) PUTS(o, " nor ");
            PUTS(o, "from the first epilogue on at ");
            done = put_spans(o, inexact, 1, lo, hi, start);
        }
    }
    if (done != 1) return done;
    PUTS(o, ": use --ranges\n");
    return o->failed ? -1 : 1;
}

/* A row's encoding and words (``tail``'s, as UTF-8 bytes, borrowed from ``kept`` or a
 * new reference in *fresh), or NULL with an error set. */
static PyObject *row_tail(Kept *kept, PyObject *tail, PyObject *func, PyObject *row,
                          uint32_t encoding, PyObject **fresh) {
    PyObject *found = kept_get(kept, &encoding, sizeof encoding);
    if (found) return found;
    PyObject *answer = PyObject_CallFunctionObjArgs(tail, func, row, NULL);
    if (!answer) return NULL;
    if (!PyTuple_Check(answer) || PyTuple_GET_SIZE(answer) != 2
            || !PyUnicode_Check(PyTuple_GET_ITEM(answer, 0))) {
        Py_DECREF(answer);
        PyErr_SetString(PyExc_TypeError, "tail must give (str, keep)");
        return NULL;
    }
    PyObject *utf8 = PyUnicode_AsUTF8String(PyTuple_GET_ITEM(answer, 0));
    int keep = PyObject_IsTrue(PyTuple_GET_ITEM(answer, 1));
    Py_DECREF(answer);
    if (!utf8 || keep < 0) {
        Py_XDECREF(utf8);
        return NULL;
    }
    if (!keep) return *fresh = utf8;
    return kept_put(kept, &encoding, sizeof encoding, utf8) < 0 ? NULL : utf8;
}

/* One function's lines: 1, 0 (give the part to Python), -1 on error.  Its counts
 * (compact; with inexact spans; of those, inexact in the body) are added to ``counts``. */
static int put_function(Out *o, Kept *kept, PyObject *tail, PyObject *func, int check,
                        Py_ssize_t counts[3]) {
    if (!PyTuple_Check(func) || PyTuple_GET_SIZE(func) < F_FIELDS) return 0;
    PyObject *name = PyTuple_GET_ITEM(func, F_NAME);
    PyObject *rows = PyTuple_GET_ITEM(func, F_ROWS);
    PyObject *inexact = PyTuple_GET_ITEM(func, F_INEXACT);
    uint64_t start, lo, hi;
    if (!PyUnicode_CheckExact(name) || !PyTuple_Check(rows) || !PyTuple_GET_SIZE(rows)
            || !PyTuple_Check(inexact) || !u64_of(PyTuple_GET_ITEM(func, F_START), &start)
            || !pair_of(PyTuple_GET_ITEM(func, F_BODY), &lo, &hi))
        return 0;
    Py_ssize_t size;
    const char *text = PyUnicode_AsUTF8AndSize(name, &size);
    if (!text) {  /* (a lone surrogate: Python's text layer decides) */
        PyErr_Clear();
        return 0;
    }
    Py_ssize_t width = PyUnicode_GET_LENGTH(name);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(rows); i++) {
        PyObject *row = PyTuple_GET_ITEM(rows, i);
        uint64_t at, length, encoding, address;
        if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) < R_FIELDS
                || !u64_of(PyTuple_GET_ITEM(row, R_START), &at)
                || !u64_of(PyTuple_GET_ITEM(row, R_LENGTH), &length)
                || !u64_of(PyTuple_GET_ITEM(row, R_ENCODING), &encoding)
                || encoding > UINT32_MAX || !placed(start, at, &address))
            return 0;
        if (i == 0) {
            put(o, text, (size_t)size);
            if (width < NAME_WIDTH) put_fill(o, ' ', (size_t)(NAME_WIDTH - width));
        } else {
            put_fill(o, ' ', NAME_WIDTH);
        }
        PUTS(o, " ");
        put_hash_hex(o, address, 8);
        PUTS(o, " ");
        put_hash_hex(o, length, 6);
        PUTS(o, "  ");
        if (o->failed) return -1;
        PyObject *fresh = NULL;
        PyObject *words = row_tail(kept, tail, func, row, (uint32_t)encoding, &fresh);
        if (!words) return -1;
        put(o, PyBytes_AS_STRING(words), (size_t)PyBytes_GET_SIZE(words));
        Py_XDECREF(fresh);
        PUTS(o, "\n");
        if (o->failed) return -1;
    }
    if (PyTuple_GET_ITEM(func, F_REASON) != Py_None) return 1;
    counts[0]++;
    if (!PyTuple_GET_SIZE(inexact)) return 1;
    int in_body = 1;  /* CompactFunction.exact_in_body */
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(inexact); i++) {
        uint64_t a, b;
        if (!pair_of(PyTuple_GET_ITEM(inexact, i), &a, &b)) return 0;
        if (a < hi && b > lo) in_body = 0;
    }
    counts[1]++;
    counts[2] += !in_body;
    return check ? put_check(o, inexact, lo, hi, in_body, start) : 1;
}

PyObject *compact_rows_text(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *functions, *tail;
    int check;
    if (!PyArg_ParseTuple(args, "O!Op:compact_rows_text", &PyList_Type, &functions, &tail,
                          &check))
        return NULL;
    Out o = {0};
    Kept kept;
    if (kept_init(&kept, 64) < 0) return NULL;
    Py_ssize_t counts[3] = {0, 0, 0};
    int done = 1;
    for (Py_ssize_t i = 0; done == 1 && i < PyList_GET_SIZE(functions); i++) {
        PyObject *func = PyList_GET_ITEM(functions, i);
        Py_INCREF(func);  /* (``tail`` runs Python, which may change the list) */
        done = put_function(&o, &kept, tail, func, check, counts);
        Py_DECREF(func);
    }
    kept_free(&kept);
    PyObject *result = NULL;
    if (done == 1) {
        PyObject *text = out_text(&o, "strict");
        if (text)
            result = Py_BuildValue("Nnnn", text, counts[0], counts[1], counts[2]);
    } else if (done == 0) {
        result = Py_NewRef(Py_None);
    }
    out_free(&o);
    return result;
}
