/* The SFrame decoder's loops (``sframe/decode.py`` their reference and fallback):
 * ``decode_fres`` is ``_Reader.fres`` (tests/differential/test_core.py), ``fde_index``
 * ``FdeTable.ranges`` with ``FdeIndex.of_ranges`` (test_core_sframe_index.py). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "core.h"
#include "sframe.h"

/* decode_fres(data, pos, count, addr_size, flex, section)
 * -> (tuple of FREs, position after them), or None where anything is out of order
 * (the Python loop, ``decode._Reader.fres``, then raises the located error): ``count``
 * FREs from ``pos`` with ``addr_size``-byte starts, of a FLEX FDE or not.  ``section``,
 * by name (``_Reader.fre_params``, built once per section): ``fre_end``, where the FRE
 * sub-section ends; ``big_endian``; ``fre_type``, the FRE type (``DecodedFre``: start,
 * base_fp, words, mangled_ra, size code, info); ``fre_table``, per info byte
 * (base_fp, word count, word width or 0 when invalid, mangled_ra, size code): the bit
 * layouts stay in Python (``sframe/words.py``). */
PyObject *decode_fres(PyObject *Py_UNUSED(self), PyObject *args) {
    static char *names[] = {"fre_end", "big_endian", "fre_type", "fre_table", NULL};
    Py_buffer data;
    Py_ssize_t pos, end, count;
    int addr_size;
    PyObject *flex_obj, *section, *big_obj, *fre_type, *table;
    if (!PyArg_ParseTuple(args, "y*nniO!O!:decode_fres", &data, &pos, &count, &addr_size,
                          &PyBool_Type, &flex_obj, &PyDict_Type, &section))
        return NULL;
    if (!read_params(section, "$nO!O!O!:decode_fres", names, &end, &PyBool_Type, &big_obj,
                     &PyType_Type, &fre_type, &PyTuple_Type, &table)) {
        PyBuffer_Release(&data);
        return NULL;
    }
    int big_endian = big_obj == Py_True, flex = flex_obj == Py_True;
    PyTypeObject *type = (PyTypeObject *)fre_type;
    /* Each FRE takes at least its start and info byte: a count the bytes cannot hold is
     * the Python loop's error to report (and never a tuple of that size to allocate). */
    if (PyTuple_GET_SIZE(table) != SF_FRE_INFOS || end > data.len || pos < 0 || count < 0 ||
        (addr_size != 1 && addr_size != 2 && addr_size != 4) || pos > end ||
        count > (end - pos) / (addr_size + 1) || !PyType_IsSubtype(type, &PyTuple_Type)) {
        PyBuffer_Release(&data);
        Py_RETURN_NONE;
    }
    /* The reader's FRE info table, each entry filled from ``table`` when first met. */
    SfFreInfo infos[SF_FRE_INFOS];
    uint8_t known[SF_FRE_INFOS] = {0};
    SfSection sec = {data.buf, 0, end, big_endian, 0, 0, 0, 0, 0};
    PyObject *fres = PyTuple_New(count);
    if (!fres) { PyBuffer_Release(&data); return NULL; }
    for (Py_ssize_t n = 0; n < count; n++) {
        if (pos + addr_size + 1 > end) goto fallback;
        uint8_t info = ((const uint8_t *)data.buf)[pos + addr_size];
        PyObject *entry = PyTuple_GET_ITEM(table, info);
        if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 5) goto fallback;
        if (!known[info]) {
            long words = PyLong_AsLong(PyTuple_GET_ITEM(entry, 1));
            long width = PyLong_AsLong(PyTuple_GET_ITEM(entry, 2));
            if (PyErr_Occurred()) { Py_DECREF(fres); PyBuffer_Release(&data); return NULL; }
            /* 0 marks an invalid info byte; anything but 1, 2 or 4 is not a table of
             * ours, nor more words than an info byte counts */
            infos[info].base_fp = PyTuple_GET_ITEM(entry, 0) == Py_True;
            infos[info].words = (int)words;
            infos[info].width = (int)width;
            infos[info].valid = (width == 1 || width == 2 || width == 4) && words >= 0 &&
                                words <= SF_FRE_WORDS_MAX;
            known[info] = 1;
        }
        SfFre read;
        if (!sf_fre(&sec, pos, addr_size, flex, infos, &read)) goto fallback;
        PyObject *base_fp = PyTuple_GET_ITEM(entry, 0);
        int words = infos[info].words, width = infos[info].width;
        PyObject *offsets = PyTuple_New(words);
        if (!offsets) { Py_DECREF(fres); PyBuffer_Release(&data); return NULL; }
        for (int w = 0; w < words; w++) {
            PyObject *number = PyLong_FromLongLong(sf_word(&sec, read.body, w, width));
            if (!number) {
                Py_DECREF(offsets); Py_DECREF(fres); PyBuffer_Release(&data);
                return NULL;
            }
            PyTuple_SET_ITEM(offsets, w, number);
        }
        uint64_t start = read.start;
        PyObject *fre = type->tp_alloc(type, 6);
        PyObject *start_obj = PyLong_FromUnsignedLongLong(start);
        PyObject *info_obj = PyLong_FromLong(info);
        if (!fre || !start_obj || !info_obj) {
            Py_XDECREF(fre); Py_XDECREF(start_obj); Py_XDECREF(info_obj);
            Py_DECREF(offsets); Py_DECREF(fres); PyBuffer_Release(&data);
            return NULL;
        }
        PyObject *mangled = PyTuple_GET_ITEM(entry, 3);
        PyObject *size_code = PyTuple_GET_ITEM(entry, 4);
        Py_INCREF(base_fp); Py_INCREF(mangled); Py_INCREF(size_code);
        PyTuple_SET_ITEM(fre, 0, start_obj);
        PyTuple_SET_ITEM(fre, 1, base_fp);
        PyTuple_SET_ITEM(fre, 2, offsets);
        PyTuple_SET_ITEM(fre, 3, mangled);
        PyTuple_SET_ITEM(fre, 4, size_code);
        PyTuple_SET_ITEM(fre, 5, info_obj);
        PyTuple_SET_ITEM(fres, n, fre);
        pos = read.next;
    }
    PyBuffer_Release(&data);
    return Py_BuildValue("(Nn)", fres, pos);
fallback:
    Py_DECREF(fres);
    PyBuffer_Release(&data);
    Py_RETURN_NONE;
}

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


/* fde_index(data, *, fde_start, count, entry, wide, big, base, step)
 * -> (starts, ends, disjoint), or None: ``count`` entries of ``entry`` bytes from
 * ``fde_start``, V3's index (``wide``: 64-bit start fields) or V1's and V2's FDEs, in
 * either byte order; each start is ``base`` + its field + ``step`` * its index. */
PyObject *fde_index(PyObject *Py_UNUSED(self), PyObject *args, PyObject *kwargs) {
    static char *names[] = {"data", "fde_start", "count", "entry", "wide", "big", "base",
                            "step", NULL};
    Py_buffer data;
    Py_ssize_t start, count, entry;
    PyObject *wide_obj, *big_obj, *base_obj, *step_obj;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*$nnnO!O!O!O!:fde_index", names, &data,
                                     &start, &count, &entry, &PyBool_Type, &wide_obj,
                                     &PyBool_Type, &big_obj, &PyLong_Type, &base_obj,
                                     &PyLong_Type, &step_obj))
        return NULL;
    int wide = wide_obj == Py_True, big = big_obj == Py_True;
    PyObject *starts = NULL, *ends = NULL;
    int overflow = 0;
    long long base = PyLong_AsLongLongAndOverflow(base_obj, &overflow);
    if (base == -1 && PyErr_Occurred()) goto fail;
    int step_overflow = 0;
    long long step = PyLong_AsLongLongAndOverflow(step_obj, &step_overflow);
    if (step == -1 && PyErr_Occurred()) goto fail;
    int field = wide ? SF_IDX_START_BYTES : SF_FDE_START_BYTES;  /* func_start's size */
    Py_ssize_t size_at = wide ? SF_IDX_SIZE_AT : SF_FDE_SIZE_AT;
    if (overflow || step_overflow || count < 0 || entry < size_at + SF_SIZE_BYTES ||
        start < 0 ||
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
        __int128 end = at + (__int128)read_uint(p + size_at, SF_SIZE_BYTES, big);
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
