/* The compiled core's loop of ``verify`` over an image's ``__unwind_info`` entries:
 * ``compact/check.py``'s ``entry_events`` (its reference), the same keyword arguments,
 * the same answer.
 *
 * Each entry is told apart as the Python loop tells it: no unwind information (a
 * problem where an FDE in code starts there), DWARF mode (its FDE offset must start an
 * FDE, of this function where ``__eh_frame`` is relocated), a function with an FDE in
 * code (an event for Python, which interprets its CFI), else the encoding against the
 * code, asked of Python (``code_problem``) once per distinct (encoding, code it reads),
 * the answers kept in a dict by that key.  The code is the image's bytes as
 * ``MachoView.bytes_at`` reads them: the first section holding them all that has file
 * contents, cut at the file's end as a slice is.  A 100k-function image's entries take
 * about 20 ms here against 0.3 s in Python.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "core.h"

/* A section with its file offset: where ``bytes_at`` reads. */
typedef struct { uint64_t addr, size, offset; } Placed;

/* The function's code as ``bytes_at`` gives it (a new bytes object), or None where no
 * section with contents holds [address, address + size); NULL on error.  A size below
 * 0 (entries out of order) gives the empty slice Python's gives. */
static PyObject *code_at(const Placed *sections, Py_ssize_t count, const uint8_t *image,
                         Py_ssize_t len, uint64_t address, int64_t size) {
    uint64_t back = size < 0 ? (uint64_t)0 - (uint64_t)size : 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        const Placed *s = &sections[i];
        if (s->addr > address || !s->offset) continue;
        uint64_t d = address - s->addr;  /* address + size <= addr + s->size */
        if (size >= 0 ? d > s->size || (uint64_t)size > s->size - d
                      : d > s->size && d - s->size > back)
            continue;
        uint64_t at = s->offset + d, stop = size >= 0 ? at + (uint64_t)size : at;
        if (at > (uint64_t)len || at < d) at = (uint64_t)len;  /* past the end: cut */
        if (stop > (uint64_t)len || stop < at) stop = at;
        return PyBytes_FromStringAndSize((const char *)image + at, (Py_ssize_t)(stop - at));
    }
    return Py_NewRef(Py_None);
}

/* ``sections``: a tuple of (address, size, file offset) into a new array; NULL on
 * error (a TypeError, or an OverflowError for a number past 64 bits). */
static Placed *read_sections(PyObject *sections, Py_ssize_t *count) {
    if (!PyTuple_Check(sections)) {
        PyErr_SetString(PyExc_TypeError, "sections must be a tuple");
        return NULL;
    }
    *count = PyTuple_GET_SIZE(sections);
    Placed *out = PyMem_Malloc(sizeof(Placed) * ((size_t)*count + 1));
    if (!out) { PyErr_NoMemory(); return NULL; }
    for (Py_ssize_t i = 0; i < *count; i++) {
        unsigned long long a, s, o;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(sections, i), "KKK", &a, &s, &o)) {
            PyMem_Free(out);
            return NULL;
        }
        out[i] = (Placed){a, s, o};
    }
    return out;
}

/* Whether ``address`` is a key of ``dict``: 1, 0, or -1 on error. */
static int holds(PyObject *dict, uint64_t address) {
    PyObject *key = PyLong_FromUnsignedLongLong(address);
    if (!key) return -1;
    int found = PyDict_Contains(dict, key);
    Py_DECREF(key);
    return found;
}

/* The inputs of one check, read once. */
typedef struct {
    PyObject *in_code, *fde_starts, *code_problem, *memo, *events;
    const uint8_t *image;
    Py_ssize_t image_len, section_count;
    const Placed *sections;
    uint64_t base;
    unsigned long mode_mask, dwarf;
    long long stack_ind, reach;
    int relocated;
    long checked, from_code;
} Check;

/* A DWARF-mode entry: its FDE offset must start an FDE, this function's where the
 * section is relocated.  -1 on error. */
static int dwarf_entry(Check *c, Py_ssize_t i, uint64_t address, uint32_t encoding) {
    unsigned long at = encoding & 0xFFFFFFul;
    PyObject *key = PyLong_FromUnsignedLong(at);
    if (!key) return -1;
    PyObject *start = PyDict_GetItemWithError(c->fde_starts, key);  /* borrowed */
    Py_DECREF(key);
    if (!start) {
        if (PyErr_Occurred()) return -1;
        return append_new(c->events, Py_BuildValue("(snk)", "no-fde", i, at));
    }
    unsigned long long target = PyLong_AsUnsignedLongLong(start);
    if (target == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    if (c->relocated && target != address)
        return append_new(c->events, Py_BuildValue("(snk)", "other-fde", i, at));
    c->checked++;
    return 0;
}

/* An entry without CFI: its encoding against its code, Python asked once per key.
 * -1 on error. */
static int code_entry(Check *c, Py_ssize_t i, uint64_t address, int64_t length,
                      uint32_t encoding) {
    PyObject *code = code_at(c->sections, c->section_count, c->image, c->image_len, address,
                             length);
    if (!code) return -1;
    if (code != Py_None && c->reach >= 0 &&
        (long long)(encoding & c->mode_mask) != c->stack_ind &&
        PyBytes_GET_SIZE(code) > c->reach) {
        PyObject *cut = PyBytes_FromStringAndSize(PyBytes_AS_STRING(code),
                                                  (Py_ssize_t)c->reach);
        Py_SETREF(code, cut);
        if (!code) return -1;
    }
    PyObject *key = Py_BuildValue("(kN)", (unsigned long)encoding, code);
    if (!key) return -1;
    PyObject *answer = PyDict_GetItemWithError(c->memo, key);  /* borrowed */
    if (!answer) {
        if (PyErr_Occurred()) { Py_DECREF(key); return -1; }
        PyObject *made = PyObject_CallFunction(c->code_problem, "KLk",
                                               (unsigned long long)address,
                                               (long long)length,
                                               (unsigned long)encoding);
        if (!made || PyDict_SetItem(c->memo, key, made) < 0) {
            Py_XDECREF(made);
            Py_DECREF(key);
            return -1;
        }
        Py_DECREF(made);  /* the memo holds it */
        answer = made;
    }
    Py_DECREF(key);
    if (answer == Py_True) {
        c->from_code++;
        return 0;
    }
    int problem = PyObject_IsTrue(answer);
    if (problem < 0) return -1;
    return problem ? append_new(c->events, Py_BuildValue("(snO)", "code", i, answer)) : 0;
}

/* One entry, as ``entry_events``'s loop body (offsets and ends below 2**40, their
 * address below 2**64: the caller checked).  -1 on error. */
static int check_entry(Check *c, Py_ssize_t i, uint64_t offset, uint64_t end,
                       uint32_t encoding) {
    uint64_t address = c->base + offset;
    if (encoding == 0) {
        int found = holds(c->in_code, address);
        if (found <= 0) return found;
        return append_new(c->events, Py_BuildValue("(sn)", "no-info", i));
    }
    if ((encoding & c->mode_mask) == c->dwarf) return dwarf_entry(c, i, address, encoding);
    int found = holds(c->in_code, address);
    if (found < 0) return -1;
    if (found) return append_new(c->events, Py_BuildValue("(sn)", "cfi", i));
    return code_entry(c, i, address, (int64_t)(end - offset), encoding);
}

/* Item ``i`` of a list as an unsigned number; -1 with an error set where it is not. */
static int item(PyObject *list, Py_ssize_t i, uint64_t *out) {
    *out = PyLong_AsUnsignedLongLong(PyList_GET_ITEM(list, i));
    return *out == (uint64_t)-1 && PyErr_Occurred() ? -1 : 0;
}

PyObject *image_entries(PyObject *Py_UNUSED(self), PyObject *args, PyObject *kwargs) {
    static char *names[] = {"offsets", "ends", "encodings", "in_code", "fde_starts",
                            "relocated", "code_problem", "image", "sections", "base",
                            "mode_mask", "dwarf", "stack_ind", "reach", NULL};
    PyObject *offsets, *ends, *encodings, *sections;
    Py_buffer image;
    unsigned long long base;
    Check c;
    memset(&c, 0, sizeof c);
    if (PyTuple_GET_SIZE(args)) {
        PyErr_SetString(PyExc_TypeError, "image_entries takes keyword arguments only");
        return NULL;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O!O!O!O!pOy*OKkkLL:image_entries",
                                     names, &PyList_Type, &offsets, &PyList_Type, &ends,
                                     &PyList_Type, &encodings, &PyDict_Type, &c.in_code,
                                     &PyDict_Type, &c.fde_starts, &c.relocated,
                                     &c.code_problem, &image, &sections, &base, &c.mode_mask,
                                     &c.dwarf, &c.stack_ind, &c.reach))
        return NULL;
    PyObject *result = NULL;
    Placed *placed = NULL;
    Py_ssize_t n = PyList_GET_SIZE(offsets);
    if (PyList_GET_SIZE(ends) != n || PyList_GET_SIZE(encodings) != n) {
        PyErr_SetString(PyExc_ValueError, "image_entries: columns of unequal lengths");
        goto done;
    }
    placed = read_sections(sections, &c.section_count);
    if (!placed) goto done;
    c.sections = placed;
    c.image = image.buf;
    c.image_len = image.len;
    c.base = base;
    c.memo = PyDict_New();
    c.events = PyList_New(0);
    if (!c.memo || !c.events) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t offset, end, encoding;
        if (item(offsets, i, &offset) < 0 || item(ends, i, &end) < 0 ||
            item(encodings, i, &encoding) < 0)
            goto done;
        if (encoding > 0xFFFFFFFFu || offset >> 40 || end >> 40 || base + offset < base) {
            result = Py_NewRef(Py_None);  /* numbers the loop in Python must take */
            goto done;
        }
        if (check_entry(&c, i, offset, end, (uint32_t)encoding) < 0) goto done;
    }
    result = Py_BuildValue("(llO)", c.checked, c.from_code, c.events);
done:
    Py_XDECREF(c.memo);
    Py_XDECREF(c.events);
    PyMem_Free(placed);
    PyBuffer_Release(&image);
    return result;
}

/* What ``fde_extents`` gathers over an ``.eh_frame``'s FDEs: the code sections, each
 * CIE's answer from Python (kept by offset), and the answer being made. */
typedef struct {
    const uint64_t *code;  /* [lo, hi) pairs */
    Py_ssize_t code_count;
    PyObject *cie_of, *cies, *in_code, *starts;
    Py_ssize_t count, stray;
    uint64_t first[3];  /* the first stray FDE's offset, start and size */
} Extents;

/* One FDE: its CIE read by Python once (as ``parse_cfi`` asks it: its error is the
 * command's), its start kept by offset, and it counted in code or not.  1, or -1 on
 * error. */
static int extent(void *raw, const EhFde *e) {
    Extents *x = raw;
    PyObject *cie_at = PyLong_FromSsize_t(e->cie->at);
    if (!cie_at) return -1;
    PyObject *cie = memo_lookup(x->cies, cie_at, x->cie_of);  /* borrowed */
    Py_DECREF(cie_at);
    if (!cie) return -1;
    PyObject *offset = PyLong_FromSsize_t(e->start);
    PyObject *start = PyLong_FromUnsignedLongLong(e->pc);
    int failed = !offset || !start || PyDict_SetItem(x->starts, offset, start) < 0;
    Py_XDECREF(start);
    int inside = 0;  /* [pc, pc + range) in a code section (Python's numbers: no wrap) */
    for (Py_ssize_t i = 0; i < x->code_count && !failed; i++) {
        uint64_t lo = x->code[2 * i], hi = x->code[2 * i + 1];
        if (lo <= e->pc && e->pc <= hi && e->range <= hi - e->pc) inside = 1;
    }
    if (!failed && inside) failed = PyList_Append(x->in_code, offset) < 0;
    Py_XDECREF(offset);
    if (failed) return -1;
    if (!inside && !x->stray++) {
        x->first[0] = (uint64_t)e->start;
        x->first[1] = e->pc;
        x->first[2] = e->range;
    }
    x->count++;
    return 1;
}

PyObject *fde_extents(PyObject *Py_UNUSED(self), PyObject *args, PyObject *kwargs) {
    static char *names[] = {"eh", "address", "address_size", "cie_of", "code", NULL};
    Py_buffer eh;
    unsigned long long address;
    int address_size;
    PyObject *cie_of, *code;
    if (PyTuple_GET_SIZE(args)) {
        PyErr_SetString(PyExc_TypeError, "fde_extents takes keyword arguments only");
        return NULL;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*KiOO!:fde_extents", names, &eh,
                                     &address, &address_size, &cie_of, &PyTuple_Type, &code))
        return NULL;
    PyObject *result = NULL;
    Extents x;
    memset(&x, 0, sizeof x);
    x.code_count = PyTuple_GET_SIZE(code);
    uint64_t *ranges = PyMem_Malloc(sizeof(uint64_t) * (2 * (size_t)x.code_count + 1));
    if (!ranges) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t i = 0; i < x.code_count; i++) {
        unsigned long long lo, hi;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(code, i), "KK", &lo, &hi)) goto done;
        ranges[2 * i] = lo;
        ranges[2 * i + 1] = hi;
    }
    x.code = ranges;
    x.cie_of = cie_of;
    x.cies = PyDict_New();
    x.in_code = PyList_New(0);
    x.starts = PyDict_New();
    if (!x.cies || !x.in_code || !x.starts) goto done;
    /* The replay's parameters matter only for a CIE's start state: none is asked for. */
    Params p = {1, 1, -1, -1, -1, 0, 0};
    int walked = eh_walk(eh.buf, eh.len, address, address_size, 0, &p, extent, &x);
    if (walked > 0) {
        PyObject *first = x.stray ? Py_BuildValue("(KKK)", (unsigned long long)x.first[0],
                                                  (unsigned long long)x.first[1],
                                                  (unsigned long long)x.first[2])
                                  : Py_NewRef(Py_None);
        if (first)
            result = Py_BuildValue("(nnNOO)", x.count, x.stray, first, x.in_code, x.starts);
    } else if (walked == 0) {
        result = Py_NewRef(Py_None);
    }
done:
    Py_XDECREF(x.cies);
    Py_XDECREF(x.in_code);
    Py_XDECREF(x.starts);
    PyMem_Free(ranges);
    PyBuffer_Release(&eh);
    return result;
}
