/* The compiled core's SFrame FDE index: where each FDE's range starts and ends, and
 * whether the ranges follow one another (then a PC's FDE is found by the spec's
 * binary search).
 *
 * ``fde_index`` is ``sframe/decode.py``'s ``FdeTable.ranges`` with ``FdeIndex.of_ranges``
 * (their reference and fallback): every entry's start field read (signed, 32 bits, or
 * 64 in V3), placed (``base`` plus the field, plus ``step`` per entry where starts are
 * PC-relative), its end the start plus the size field.  The starts and ends come back
 * as native 64-bit integers (an ``array('q')`` each); where one leaves 64 bits it
 * gives None and the Python loop, with Python's numbers, runs.  A look-up reads the
 * index of every FDE but decodes one: this keeps that index out of Python objects.
 * tests/differential/test_core_sframe_index.py holds the two equal.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "_core.h"

PyObject *fde_index(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer data;
    Py_ssize_t start, count, entry;
    int wide, big;
    PyObject *base_obj, *step_obj;
    if (!PyArg_ParseTuple(args, "y*nnnppOO", &data, &start, &count, &entry, &wide, &big,
                          &base_obj, &step_obj))
        return NULL;
    PyObject *starts = NULL, *ends = NULL;
    int overflow = 0;
    long long base = PyLong_AsLongLongAndOverflow(base_obj, &overflow);
    if (base == -1 && PyErr_Occurred()) goto fail;
    int step_overflow = 0;
    long long step = PyLong_AsLongLongAndOverflow(step_obj, &step_overflow);
    if (step == -1 && PyErr_Occurred()) goto fail;
    int field = wide ? 8 : 4;
    if (overflow || step_overflow || count < 0 || entry < field + 4 || start < 0 ||
        count > (data.len - start) / entry)
        goto give_up;  /* Python says why (or works with its numbers) */
    starts = PyBytes_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(int64_t));
    ends = starts ? PyBytes_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(int64_t))
                  : NULL;
    if (!ends) goto fail;
    /* Stored through memcpy: a bytes object's characters have no alignment the C API
     * promises (clang's -Wcast-align). */
    char *s = PyBytes_AS_STRING(starts), *e = PyBytes_AS_STRING(ends);
    const uint8_t *p = (const uint8_t *)data.buf + start;
    int disjoint = 1;
    int64_t last_end = 0;
    for (Py_ssize_t i = 0; i < count; i++, p += entry) {
        uint64_t raw = read_uint(p, field, big);
        int64_t value = wide ? (int64_t)raw : (int64_t)(int32_t)(uint32_t)raw;
        __int128 at = (__int128)base + value + (__int128)step * i;
        __int128 end = at + (__int128)read_uint(p + field, 4, big);
        if (at < INT64_MIN || end > INT64_MAX) goto give_up;
        int64_t at64 = (int64_t)at, end64 = (int64_t)end;
        memcpy(s + i * 8, &at64, 8);
        memcpy(e + i * 8, &end64, 8);
        if (i && last_end > at64) disjoint = 0;
        last_end = end64;
    }
    PyBuffer_Release(&data);
    return Py_BuildValue("(NNO)", starts, ends, disjoint ? Py_True : Py_False);
give_up:
    Py_XDECREF(starts);
    Py_XDECREF(ends);
    PyBuffer_Release(&data);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(starts);
    Py_XDECREF(ends);
    PyBuffer_Release(&data);
    return NULL;
}
