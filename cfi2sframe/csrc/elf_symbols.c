/* The function names of one ELF symbol table (elf/symbols.function_names' loop over
 * ``_function_rows``, its reference): what ``compact`` and ``--emit`` name each FDE by.
 * In Python each entry's name was a find, a slice and a decode (libLLVM-14's 35k
 * named entries of 45k: ~390M instructions, a tenth of ``compact --check``). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#include "bytes.h"
#include "core.h"
#include "elf.h"

enum { STT_NOTYPE = 0, STT_FUNC = 2, ST_TYPE_MASK = 0xF };

/* Whether a name (``len`` bytes, no NUL) names no function: a local label (``.L``)
 * or an ARM/AArch64 mapping symbol (``$x``, ``$d``, ``$a``, ``$t``, maybe ``.N``), as
 * elf/read.is_mapping_symbol says of its decoded text (the same for UTF-8 bytes:
 * these characters are ASCII, and no other byte decodes to one). */
static int names_no_function(const uint8_t *name, size_t len) {
    if (len < 2) return 0;
    if (name[0] == '.' && name[1] == 'L') return 1;
    return name[0] == '$' && memchr("xdat", name[1], 4) != NULL &&
           (len == 2 || name[2] == '.');
}

/* One pass over the entries of type ``type``: each named entry in a section below
 * ``limit`` put in ``names`` under (its section's name, or "" where ``sections`` is
 * None, its value) unless a name is there already (``dict.setdefault``). */
static int add_names(PyObject *names, const uint8_t *sym, Py_ssize_t n, int is64, int big,
                     const uint8_t *strings, Py_ssize_t size, uint64_t limit,
                     PyObject *sections, PyObject *empty, int type) {
    Py_ssize_t entry = is64 ? ELF64_SYM_BYTES : ELF32_SYM_BYTES;
    for (Py_ssize_t i = 0; i < n; i++) {
        const uint8_t *e = sym + i * entry;
        uint64_t shndx = read_uint(e + (is64 ? ELF64_ST_SHNDX_AT : ELF32_ST_SHNDX_AT),
                                   ELF_ST_SHNDX_BYTES, big);
        uint8_t info = e[is64 ? ELF64_ST_INFO_AT : ELF32_ST_INFO_AT];
        if (shndx == 0 || shndx >= limit || (info & ST_TYPE_MASK) != type) continue;
        uint64_t at = read_uint(e + ELF_ST_NAME_AT, ELF_ST_NAME_BYTES, big);
        if (at >= (uint64_t)size) continue;  /* past the table: no name */
        const uint8_t *name = strings + at;
        const uint8_t *nul = memchr(name, 0, (size_t)(size - (Py_ssize_t)at));
        size_t len = nul ? (size_t)(nul - name) : (size_t)(size - (Py_ssize_t)at);
        if (len == 0 || names_no_function(name, len)) continue;
        PyObject *section = empty;
        if (sections != Py_None) {
            if ((Py_ssize_t)shndx >= PyTuple_GET_SIZE(sections)) {
                PyErr_SetString(PyExc_IndexError, "a section index past the sections given");
                return -1;
            }
            section = PyTuple_GET_ITEM(sections, (Py_ssize_t)shndx);
        }
        uint64_t value = is64 ? read_uint(e + ELF64_ST_VALUE_AT, ELF64_ADDR_BYTES, big)
                              : read_uint(e + ELF32_ST_VALUE_AT, ELF32_ADDR_BYTES, big);
        PyObject *number = PyLong_FromUnsignedLongLong(value);
        PyObject *key = number ? PyTuple_Pack(2, section, number) : NULL;
        Py_XDECREF(number);
        if (!key) return -1;
        int held = PyDict_Contains(names, key);
        PyObject *text = held ? NULL : PyUnicode_DecodeUTF8((const char *)name,
                                                            (Py_ssize_t)len, "replace");
        int status = held < 0 || (!held && (!text || PyDict_SetItem(names, key, text) < 0));
        Py_XDECREF(text);
        Py_DECREF(key);
        if (status) return -1;
    }
    return 0;
}

/* function_names(symtab, strtab, is64, big_endian, limit, sections) -> a new dict:
 * (section name, or "" where ``sections`` is None, value) -> name of the entries of
 * ``symtab`` (whole entries; names in ``strtab``) typed a function, then of the
 * untyped ones where no function's name is, each in a section in [1, ``limit``);
 * ``sections``: a tuple of the sections' names (an object's), else None. */
PyObject *function_names(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer symtab, strtab;
    int is64, big;
    unsigned long long limit;
    PyObject *sections;
    if (!PyArg_ParseTuple(args, "y*y*ppKO", &symtab, &strtab, &is64, &big, &limit,
                          &sections))
        return NULL;
    PyObject *names = NULL, *empty = NULL;
    if (sections != Py_None && !PyTuple_Check(sections)) {
        PyErr_SetString(PyExc_TypeError, "sections: a tuple of names, or None");
        goto done;
    }
    Py_ssize_t entry = is64 ? ELF64_SYM_BYTES : ELF32_SYM_BYTES;
    names = PyDict_New();
    empty = PyUnicode_New(0, 0);
    if (!names || !empty) goto fail;
    for (int pass = 0; pass < 2; pass++)  /* functions first, then untyped entries */
        if (add_names(names, symtab.buf, symtab.len / entry, is64, big, strtab.buf,
                      strtab.len, (uint64_t)limit, sections, empty,
                      pass ? STT_NOTYPE : STT_FUNC) < 0)
            goto fail;
    goto done;
fail:
    Py_CLEAR(names);
done:
    Py_XDECREF(empty);
    PyBuffer_Release(&symtab);
    PyBuffer_Release(&strtab);
    return names;
}
