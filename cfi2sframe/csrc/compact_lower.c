/* ``compact/lower._sequence``'s key: a function's rows as the objects of their states,
 * in order (``compact/lower.state_ids`` is its reference).
 *
 * ``dwarf/cfi`` makes each distinct row state's objects once, so which objects a row
 * holds names its state; a shape's key is made per shape (libLLVM-14: 40k shapes,
 * 476k rows), where a Python tuple per row cost more than the lowering it saves.
 * The key is valid while the rows it was made of are alive (the caller keeps them).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

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
    uintptr_t *words = (uintptr_t *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *row = PyTuple_GET_ITEM(rows, i);
        if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != STATE_FIELDS + 1) {
            Py_DECREF(out);
            PyErr_SetString(PyExc_TypeError, "each row must be a tuple of 5 fields");
            return NULL;
        }
        for (Py_ssize_t j = 0; j < STATE_FIELDS; j++)
            words[i * STATE_FIELDS + j] = (uintptr_t)PyTuple_GET_ITEM(row, j + 1);
    }
    return out;
}
