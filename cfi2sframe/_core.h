/* The compiled core's parts: _core.c holds the module and the ELF loops, each other
 * file one function it registers. */
#ifndef CFI2SFRAME_CORE_H
#define CFI2SFRAME_CORE_H

#include <Python.h>
#include <stdint.h>

/* The unsigned number of ``size`` bytes (1 to 8) at ``p`` in the file's byte order
 * (``big``: most significant first): what the readers of ELF and SFrame fields share. */
static inline uint64_t read_uint(const uint8_t *p, int size, int big) {
    uint64_t v = 0;
    for (int i = 0; i < size; i++) v |= (uint64_t)p[big ? size - 1 - i : i] << (8 * i);
    return v;
}

/* _core_unwind_info.c: an image's __unwind_info listed as ``dump`` prints it. */
PyObject *unwind_info_text(PyObject *self, PyObject *args);

/* _core_sframe_dump.c: an SFrame section's FDEs checked, or written as dump prints them. */
PyObject *sframe_dump(PyObject *self, PyObject *args);

/* _core_reloc.c: one relocation section of an ELF object applied. */
PyObject *relocate(PyObject *self, PyObject *args);

#endif
