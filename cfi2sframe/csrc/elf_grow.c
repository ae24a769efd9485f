/* The compiled core's part of ``elf/grow.py``: ``rela_within`` is ``_rela_refers``'s
 * search (its reference) over one SHT_RELA section of a 64-bit file, whether any
 * relocation writes in [start, stop) or makes an address there: its place; with no
 * symbol (RELATIVE, IRELATIVE) its addend; with a symbol the symbol table defines (a
 * section index other than 0), the symbol's value plus the addend.  A symbol past the
 * table, or one it does not define, gives no address of this file.  One pass over
 * the entries, nothing sorted and no Python number made: libLLVM-14's 355k
 * relocations, which the Python search sorts as columns.
 * tests/differential/test_core_grow.py holds the two equal. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "core.h"
#include "elf.h"

static int within(__int128 value, uint64_t start, uint64_t stop) {
    return value >= (__int128)start && value < (__int128)stop;
}

/* rela_within(rela, symbols, big, start, stop) -> bool.  ``rela``: the section's whole
 * Elf64_Rela entries; ``symbols``: its symbol table's whole Elf64_Sym entries (empty
 * where the section links to none). */
PyObject *rela_within(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer rela, symbols;
    int big;
    unsigned long long start, stop;
    if (!PyArg_ParseTuple(args, "y*y*pKK:rela_within", &rela, &symbols, &big, &start, &stop))
        return NULL;
    const uint8_t *r = rela.buf, *syms = symbols.buf;
    uint64_t count = (uint64_t)(symbols.len / ELF64_SYM_BYTES);
    int found = 0;
    for (Py_ssize_t at = 0; !found && ELF64_RELA_BYTES <= rela.len - at;
         at += ELF64_RELA_BYTES) {
        const uint8_t *e = r + at;
        uint64_t place = read_uint(e + ELF_R_OFFSET_AT, ELF64_ADDR_BYTES, big);
        uint64_t sym = read_uint(e + ELF64_R_INFO_AT, ELF64_ADDR_BYTES, big) >>
            ELF64_R_SYM_SHIFT;
        int64_t addend = (int64_t)read_uint(e + ELF64_R_ADDEND_AT, ELF64_ADDR_BYTES, big);
        if (within(place, start, stop)) found = 1;
        else if (!sym) found = within(addend, start, stop);
        else if (sym < count) {
            const uint8_t *s = syms + sym * ELF64_SYM_BYTES;
            if (read_uint(s + ELF64_ST_SHNDX_AT, ELF_ST_SHNDX_BYTES, big))
                found = within((__int128)read_uint(s + ELF64_ST_VALUE_AT, ELF64_ADDR_BYTES,
                                                   big) + addend, start, stop);
        }
    }
    PyBuffer_Release(&rela);
    PyBuffer_Release(&symbols);
    return PyBool_FromLong(found);
}
