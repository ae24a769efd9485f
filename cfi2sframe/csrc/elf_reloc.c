/* The compiled core's relocation loop: one relocation section of an ELF object
 * applied to the section it relocates, every section at address 0.
 *
 * ``relocate`` is the loop of ``elf/reloc.py``'s ``relocate_view`` (its reference
 * and fallback) over one SHT_REL or SHT_RELA section: each entry's type looked up in
 * the target's table (size and PC-relativity, from ``arch/``: passed in, no target
 * fact here), its symbol resolved by Python once (a symbol's section and value; an
 * object's .sframe relocations all name one section symbol), S + A (- P) written in
 * the file's byte order, and field offset -> (target, S + A) collected.  Wherever
 * the Python loop would raise (a field outside the section, an unusable symbol) or a
 * value leaves 64 bits, this gives None having written nothing the caller keeps (the
 * caller restores the section and runs the Python loop, which says where).
 * tests/differential/test_core_reloc.py holds the two equal on real objects and on
 * damaged ones.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "core.h"
#include "elf.h"

#define MAX_KINDS 32

typedef struct { uint32_t kind; int size, pcrel; } Kind;

static void store(uint8_t *p, int size, int little, uint64_t v) {
    for (int i = 0; i < size; i++)
        p[little ? i : size - 1 - i] = (uint8_t)(v >> (8 * i));
}

/* The value read from ``size`` bytes as a signed number (a REL entry's addend). */
static int64_t load_signed(const uint8_t *p, int size, int little) {
    uint64_t v = read_uint(p, size, !little);
    if (size < 8 && v >> (8 * size - 1)) v |= ~(uint64_t)0 << (8 * size);
    return (int64_t)v;
}

/* The table of relocation kinds: {type: (size, pc-relative)}; -1 on error. */
static int read_kinds(PyObject *table, Kind *kinds, int *count) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    *count = 0;
    if (!PyDict_Check(table)) {
        PyErr_SetString(PyExc_TypeError, "kinds must be a dict");
        return -1;
    }
    while (PyDict_Next(table, &pos, &key, &value)) {
        unsigned long kind;
        int size, pcrel;
        if (*count == MAX_KINDS) {
            PyErr_SetString(PyExc_ValueError, "too many relocation kinds");
            return -1;
        }
        kind = PyLong_AsUnsignedLong(key);
        if (PyErr_Occurred() || !PyArg_ParseTuple(value, "ip", &size, &pcrel)) return -1;
        if (size < 1 || size > 8) {
            PyErr_SetString(PyExc_ValueError, "a relocation size must be 1 to 8 bytes");
            return -1;
        }
        kinds[(*count)++] = (Kind){(uint32_t)kind, size, pcrel};
    }
    return 0;
}

PyObject *relocate(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer contents, rel;
    int is64, little, rela;
    PyObject *table, *target_of;
    if (!PyArg_ParseTuple(args, "w*y*pppOO", &contents, &rel, &is64, &little, &rela, &table,
                          &target_of))
        return NULL;
    PyObject *placed = NULL, *last_target = NULL, *last_name = NULL;
    uint64_t last_sym = 0, last_value = 0;
    Kind kinds[MAX_KINDS];
    int kind_count;
    if (read_kinds(table, kinds, &kind_count) < 0) goto fail;
    placed = PyDict_New();
    if (!placed) goto fail;
    int word = is64 ? ELF64_ADDR_BYTES : ELF32_ADDR_BYTES;
    Py_ssize_t entry = rela ? (is64 ? ELF64_RELA_BYTES : ELF32_RELA_BYTES)
                            : (is64 ? ELF64_REL_BYTES : ELF32_REL_BYTES);
    Py_ssize_t info_at = is64 ? ELF64_R_INFO_AT : ELF32_R_INFO_AT;
    Py_ssize_t addend_at = is64 ? ELF64_R_ADDEND_AT : ELF32_R_ADDEND_AT;
    const uint8_t *r = rel.buf;
    uint8_t *data = contents.buf;
    uint64_t len = (uint64_t)contents.len;
    for (Py_ssize_t at = 0; at + entry <= rel.len; at += entry) {
        uint64_t offset = read_uint(r + at + ELF_R_OFFSET_AT, word, !little);
        uint64_t info = read_uint(r + at + info_at, word, !little);
        uint64_t sym = is64 ? info >> ELF64_R_SYM_SHIFT : info >> ELF32_R_SYM_SHIFT;
        uint32_t type = (uint32_t)(is64 ? info & ELF64_R_TYPE_MASK : info & ELF32_R_TYPE_MASK);
        const Kind *k = NULL;
        for (int i = 0; i < kind_count; i++)
            if (kinds[i].kind == type) { k = &kinds[i]; break; }
        if (!k) continue;  /* not an address relocation CFI or SFrame uses */
        if (offset > len || (uint64_t)k->size > len - offset) goto give_up;
        if (!last_target || sym != last_sym) {  /* resolved by Python, the last kept */
            PyObject *found = PyObject_CallFunction(target_of, "K", (unsigned long long)sym);
            if (!found) goto fail;
            if (!PyTuple_Check(found) || PyTuple_GET_SIZE(found) != 2) {  /* why not */
                Py_DECREF(found);
                goto give_up;
            }
            unsigned long long value = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(found, 1));
            if (PyErr_Occurred()) {  /* a negative or huge value: Python's numbers */
                PyErr_Clear();
                Py_DECREF(found);
                goto give_up;
            }
            Py_XSETREF(last_target, found);
            last_name = PyTuple_GET_ITEM(found, 0);
            last_sym = sym;
            last_value = value;
        }
        int64_t addend = rela ? (is64 ? (int64_t)read_uint(r + at + addend_at, word, !little)
                                      : load_signed(r + at + addend_at, word, little))
                              : load_signed(data + offset, k->size, little);
        __int128 total = (__int128)last_value + addend;
        if (total > INT64_MAX || total < INT64_MIN) goto give_up;
        __int128 stored = k->pcrel ? total - (__int128)offset : total;
        /* a value its field cannot hold (a linker's "truncated to fit"): Python says so */
        int bits = 8 * k->size;
        if (stored < -((__int128)1 << (bits - 1)) ||
            stored >= (__int128)1 << (k->pcrel ? bits - 1 : bits))
            goto give_up;
        PyObject *key = PyLong_FromUnsignedLongLong(offset);
        PyObject *item = key ? Py_BuildValue("(OL)", last_name, (long long)total) : NULL;
        int status = item ? PyDict_SetItem(placed, key, item) : -1;
        Py_XDECREF(key);
        Py_XDECREF(item);
        if (status < 0) goto fail;
        store(data + offset, k->size, little, (uint64_t)stored);
    }
    Py_XDECREF(last_target);
    PyBuffer_Release(&contents);
    PyBuffer_Release(&rel);
    return placed;
give_up:
    Py_XDECREF(last_target);
    Py_XDECREF(placed);
    PyBuffer_Release(&contents);
    PyBuffer_Release(&rel);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(last_target);
    Py_XDECREF(placed);
    PyBuffer_Release(&contents);
    PyBuffer_Release(&rel);
    return NULL;
}
