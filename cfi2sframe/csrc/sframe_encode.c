/* The SFrame encoder's loops: ``fres_bytes`` is ``sframe/encode.py``'s ``_fres_bytes``
 * (starts packed here, each FRE's info byte and words asked of Python once per distinct
 * FRE), ``fdes_v2`` its ``build_v2`` loop.  tests/differential/test_core.py holds each
 * equal to its Python reference. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "core.h"
#include "kept.h"
#include "sframe.h"

/* fres_bytes(fres, addr_size, big_endian, tails, tail_of) -> bytes: each FRE's start
 * in ``addr_size`` bytes, then its info byte and data words, which are found by the
 * FRE's fields after ``start`` in ``tails`` or asked of ``tail_of`` (kept there): the
 * word layouts stay in Python (``encode._fre_bytes``). */
/* An FRE's bytes after its start, kept by the identity of its fields after ``start``
 * (borrowed, from ``tails``; every FRE of the call stays alive through it, so no
 * field's address is reused): the FREs of the fast path share their fields with
 * their state's shape, so a file's few hundred distinct FREs are each looked up in
 * ``tails`` (a tuple built and hashed) once.  A miss only costs that look-up. */
#define TAIL_SLOTS 4096
#define TAIL_FIELDS 10
typedef struct { PyObject *field[TAIL_FIELDS]; Py_ssize_t n; PyObject *tail; } TailSlot;
typedef struct { TailSlot slot[TAIL_SLOTS]; } TailMemo;

static PyObject **tail_slot(TailMemo *m, PyObject *fre, int *found) {
    Py_ssize_t n = PyTuple_GET_SIZE(fre) - 1;
    *found = 0;
    if (n > TAIL_FIELDS) return NULL;
    uintptr_t h = (uintptr_t)n;
    for (Py_ssize_t i = 0; i < n; i++)
        h = h * 1000003u ^ (uintptr_t)PyTuple_GET_ITEM(fre, i + 1) >> 4;
    size_t at = (size_t)(h ^ (h >> 17)) % TAIL_SLOTS;
    for (int probe = 0; probe < 16; probe++, at = (at + 1) % TAIL_SLOTS) {
        TailSlot *slot = &m->slot[at];
        if (!slot->tail) {
            slot->n = n;
            for (Py_ssize_t i = 0; i < n; i++) slot->field[i] = PyTuple_GET_ITEM(fre, i + 1);
            return &slot->tail;
        }
        if (slot->n != n) continue;
        Py_ssize_t i = 0;
        while (i < n && slot->field[i] == PyTuple_GET_ITEM(fre, i + 1)) i++;
        if (i == n) { *found = 1; return &slot->tail; }
    }
    return NULL;
}

static PyObject *encode_fres(PyObject *fres, int addr_size, int big_endian, PyObject *tails,
                             PyObject *tail_of, TailMemo *memo);

PyObject *fres_bytes(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *fres, *tails, *tail_of;
    int addr_size, big_endian;
    if (!PyArg_ParseTuple(args, "O!ipO!O", &PyTuple_Type, &fres, &addr_size, &big_endian,
                          &PyDict_Type, &tails, &tail_of))
        return NULL;
    return encode_fres(fres, addr_size, big_endian, tails, tail_of, NULL);
}

/* ``fres_bytes`` of a tuple of FREs (a new bytes object, or NULL with an error set). */
static PyObject *encode_fres(PyObject *fres, int addr_size, int big_endian, PyObject *tails,
                             PyObject *tail_of, TailMemo *memo) {
    if (addr_size != 1 && addr_size != 2 && addr_size != 4) {
        PyErr_SetString(PyExc_ValueError, "addr_size must be 1, 2 or 4");
        return NULL;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(fres);
    PyObject **found = PyMem_New(PyObject *, count > 0 ? (size_t)count : 1);
    if (!found) return PyErr_NoMemory();
    PyObject *out = NULL;
    Py_ssize_t total = 0, kept = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *fre = PyTuple_GET_ITEM(fres, i);
        if (!PyTuple_Check(fre) || PyTuple_GET_SIZE(fre) < 1) {
            PyErr_SetString(PyExc_TypeError, "an FRE must be a tuple");
            goto done;
        }
        int hit = 0;
        PyObject **slot = memo ? tail_slot(memo, fre, &hit) : NULL;
        PyObject *tail = hit ? *slot : NULL;
        if (!tail) {
            PyObject *shape = PyTuple_GetSlice(fre, 1, PyTuple_GET_SIZE(fre));
            if (!shape) goto done;
            tail = memo_lookup(tails, shape, tail_of);  /* borrowed */
            Py_DECREF(shape);
            if (!tail) goto done;
            if (slot) *slot = tail;
        }
        if (!PyBytes_Check(tail)) {
            PyErr_SetString(PyExc_TypeError, "tail_of must give bytes");
            goto done;
        }
        Py_INCREF(tail);
        found[i] = tail;
        kept = i + 1;
        total += addr_size + PyBytes_GET_SIZE(tail);
    }
    out = PyBytes_FromStringAndSize(NULL, total);
    if (!out) goto done;
    char *to = PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < count; i++) {
        unsigned long long start = PyLong_AsUnsignedLongLong(
            PyTuple_GET_ITEM(PyTuple_GET_ITEM(fres, i), 0));
        if (PyErr_Occurred() || (addr_size < 8 && start >> (8 * addr_size))) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_OverflowError, "an FRE start does not fit addr_size");
            Py_CLEAR(out);
            goto done;
        }
        for (int b = 0; b < addr_size; b++)
            to[big_endian ? addr_size - 1 - b : b] = (char)((start >> (8 * b)) & 0xff);
        to += addr_size;
        Py_ssize_t n = PyBytes_GET_SIZE(found[i]);
        memcpy(to, PyBytes_AS_STRING(found[i]), (size_t)n);
        to += n;
    }
done:
    for (Py_ssize_t i = 0; i < kept; i++) Py_DECREF(found[i]);
    PyMem_Free(found);
    return out;
}

/* See core.h. */
int read_fre_sizes(PyObject *tuple, int sizes[FRE_TYPES_MAX]) {
    if (!PyTuple_Check(tuple)) {
        PyErr_SetString(PyExc_TypeError, "the FRE start sizes must be a tuple");
        return -1;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(tuple);
    if (count < 1 || count > FRE_TYPES_MAX) {
        PyErr_SetString(PyExc_ValueError, "the FRE start sizes must be 1 to 16 sizes");
        return -1;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        long size = PyLong_AsLong(PyTuple_GET_ITEM(tuple, i));
        if (size == -1 && PyErr_Occurred()) return -1;
        if (size < 1 || size > 8) {
            PyErr_SetString(PyExc_ValueError, "an FRE start size must be 1 to 8 bytes");
            return -1;
        }
        sizes[i] = (int)size;
    }
    return (int)count;
}

/* See core.h. */
int fre_type_for(uint64_t top, const int *sizes, int count) {
    for (int type = 0; type < count; type++)
        if (sizes[type] >= 8 || top < (1ULL << (8 * sizes[type]))) return type;
    return count - 1;
}

/* The encoding of each distinct FRE tuple of one ``fdes_v2`` call (functions made from
 * identical CFI share one): kept.h's ``KeptIds`` from the tuple's address to an index
 * into the call's ``Encodings`` (the call's ``functions`` holds every tuple alive, so
 * no address is reused), which hold each encoding (a reference) and its FRE type. */
typedef struct { PyObject *encoded; long type; } Encoding;
typedef struct { Encoding *at; size_t used, cap; } Encodings;

/* Room for one more encoding: 0, or -1 with MemoryError. */
static int encodings_room(Encodings *e) {
    if (e->used < e->cap) return 0;
    size_t cap = e->cap ? 2 * e->cap : 1024;
    Encoding *more = PyMem_Realloc(e->at, cap * sizeof *more);
    if (!more) { PyErr_NoMemory(); return -1; }
    e->at = more;
    e->cap = cap;
    return 0;
}

static void encodings_free(Encodings *e) {
    for (size_t i = 0; i < e->used; i++) Py_DECREF(e->at[i].encoded);
    PyMem_Free(e->at);
}

/* A flag field of an ``SFrameFunction``: Python's truth of it (a bool's without a call). */
static int flag(PyObject *field) {
    return field == Py_True ? 1 : field == Py_False ? 0 : PyObject_IsTrue(field);
}

/* fdes_v2(functions, big_endian, tails, tail_of, addr_sizes, pc_mask_bit, pauth_bit)
 * -> (FDE tails, FRE bytes, FRE count): ``encode.build_v2``'s loop (its reference).
 * Per function (``SFrameFunction``, in FDE order) its FDE without the start field,
 * its FREs at the end of the FRE bytes; functions sharing one FRE tuple share its
 * encoding.  ``addr_sizes``: the FRE start size by FRE type (``read_fre_sizes``). */
PyObject *fdes_v2(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *functions, *tails, *tail_of, *addr_sizes;
    int big, sizes[FRE_TYPES_MAX];
    long pc_mask_bit, pauth_bit;
    if (!PyArg_ParseTuple(args, "O!pO!OO!ll", &PyTuple_Type, &functions, &big, &PyDict_Type,
                          &tails, &tail_of, &PyTuple_Type, &addr_sizes, &pc_mask_bit,
                          &pauth_bit))
        return NULL;
    int types = read_fre_sizes(addr_sizes, sizes);
    if (types < 0) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(functions);
    PyObject *fde_tails = PyTuple_New(n), *blob = NULL, *out = NULL;
    KeptIds by_fres = {NULL, NULL, 0, 0, 0};
    Encodings encodings = {NULL, 0, 0};
    TailMemo *kept = PyMem_Calloc(1, sizeof(TailMemo));
    char *buf = NULL;
    Py_ssize_t used = 0, cap = 0;
    unsigned long long num_fres = 0;
    if (!fde_tails || !kept) {
        if (!kept) PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *func = PyTuple_GET_ITEM(functions, i);
        if (!PyTuple_Check(func) || PyTuple_GET_SIZE(func) != 11) {
            PyErr_SetString(PyExc_TypeError, "a function must be an SFrameFunction");
            goto done;
        }
        int flex = flag(PyTuple_GET_ITEM(func, 9));
        if (flex < 0) goto done;
        if (flex) {
            PyErr_Format(PyExc_TypeError, "V2 has no FLEX FDE (function '%U')",
                         PyTuple_GET_ITEM(func, 0));
            goto done;
        }
        PyObject *fres = PyTuple_GET_ITEM(func, 4);
        if (!PyTuple_Check(fres)) {
            PyErr_SetString(PyExc_TypeError, "a function's FREs must be a tuple");
            goto done;
        }
        uint32_t known = ids_get(&by_fres, (uint64_t)(uintptr_t)fres);
        if (known == NO_ID) {
            unsigned long long top = 0;
            for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(fres); k++) {
                unsigned long long at = PyLong_AsUnsignedLongLong(
                    PyTuple_GET_ITEM(PyTuple_GET_ITEM(fres, k), 0));
                if (PyErr_Occurred()) goto done;
                if (at > top) top = at;
            }
            /* past every type's size: the last, whose encoding raises OverflowError */
            long type = fre_type_for(top, sizes, types);
            if (encodings_room(&encodings) < 0) goto done;
            PyObject *encoded = encode_fres(fres, sizes[type], big, tails, tail_of, kept);
            if (!encoded) goto done;
            known = (uint32_t)encodings.used;
            encodings.at[encodings.used++] = (Encoding){encoded, type};
            if (ids_put(&by_fres, (uint64_t)(uintptr_t)fres, known) < 0) goto done;
        }
        long type = encodings.at[known].type;
        PyObject *encoded = encodings.at[known].encoded;
        unsigned long long size = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(func, 3));
        unsigned long long rep = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(func, 7));
        if (PyErr_Occurred()) goto done;
        Py_ssize_t count = PyTuple_GET_SIZE(fres);
        if (size > 0xffffffffULL || rep > 0xff || (unsigned long long)used > 0xffffffffULL ||
            (unsigned long long)count > 0xffffffffULL) {
            PyErr_SetString(PyExc_OverflowError, "an FDE field past its width");
            goto done;
        }
        int pc_mask = flag(PyTuple_GET_ITEM(func, 6)), pauth = flag(PyTuple_GET_ITEM(func, 5));
        if (pc_mask < 0 || pauth < 0) goto done;
        long info = type | (pc_mask ? pc_mask_bit : 0) | (pauth ? pauth_bit : 0);
        /* The V2 FDE after its start field (placed when the section is), padding 0. */
        uint8_t tail[SF_FDE_V2_BYTES - SF_FDE_START_BYTES] = {0};
        uint32_t words[3] = {(uint32_t)size, (uint32_t)used, (uint32_t)count};
        const int word_at[3] = {SF_FDE_SIZE_AT, SF_FDE_FRE_OFF_AT, SF_FDE_NUM_FRES_AT};
        for (int w = 0; w < 3; w++)
            for (int b = 0; b < SF_SIZE_BYTES; b++)
                tail[word_at[w] - SF_FDE_START_BYTES + (big ? SF_SIZE_BYTES - 1 - b : b)] =
                    (uint8_t)(words[w] >> (8 * b));
        tail[SF_FDE_INFO_AT - SF_FDE_START_BYTES] = (uint8_t)info;
        tail[SF_FDE_REP_AT - SF_FDE_START_BYTES] = (uint8_t)rep;
        PyObject *packed = PyBytes_FromStringAndSize((const char *)tail, sizeof tail);
        if (!packed) goto done;
        PyTuple_SET_ITEM(fde_tails, i, packed);
        Py_ssize_t len = PyBytes_GET_SIZE(encoded);
        if (used + len > cap) {
            Py_ssize_t grown = cap ? cap : 4096;
            while (grown < used + len) grown *= 2;
            char *more = PyMem_Realloc(buf, (size_t)grown);
            if (!more) { PyErr_NoMemory(); goto done; }
            buf = more;
            cap = grown;
        }
        if (len)  /* buf is NULL until the first FREs: memcpy from or to NULL is UB */
            memcpy(buf + used, PyBytes_AS_STRING(encoded), (size_t)len);
        used += len;
        num_fres += (unsigned long long)count;
    }
    blob = PyBytes_FromStringAndSize(buf ? buf : "", used);
    if (!blob) goto done;
    out = Py_BuildValue("(OOK)", fde_tails, blob, num_fres);
done:
    Py_XDECREF(fde_tails);
    ids_free(&by_fres);
    encodings_free(&encodings);
    Py_XDECREF(blob);
    PyMem_Free(buf);
    PyMem_Free(kept);
    return out;
}

/* place_fdes(starts, fdes, first, fde_size, big_endian) -> bytes, or an int: the FDE
 * table of a V2 section placed (``encode.SectionImage.to_bytes``, its reference): each
 * function's start (``starts``: 8 bytes each, this machine's order) less its start
 * field's address (``first``, the first field's, then every ``fde_size`` bytes) as a
 * signed 32-bit field, before its FDE's other fields (``fdes``, ``fde_size`` - 4 bytes
 * each).  An int: the index of the first function too far from its field. */
PyObject *place_fdes(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer starts, fdes;
    unsigned long long first;
    Py_ssize_t size;
    int big;
    if (!PyArg_ParseTuple(args, "y*y*Knp:place_fdes", &starts, &fdes, &first, &size, &big))
        return NULL;
    PyObject *out = NULL;
    Py_ssize_t tail = size - SF_FDE_START_BYTES, count = starts.len / 8;
    if (tail < 0 || starts.len % 8 || fdes.len != count * tail) {
        PyErr_SetString(PyExc_ValueError, "place_fdes: columns of unlike lengths");
        goto done;
    }
    out = PyBytes_FromStringAndSize(NULL, count * size);
    if (!out) goto done;
    uint8_t *to = (uint8_t *)PyBytes_AS_STRING(out);
    const uint8_t *from = fdes.buf;
    for (Py_ssize_t i = 0; i < count; i++) {
        uint64_t start, field = first + (uint64_t)i * (uint64_t)size;
        memcpy(&start, (const uint8_t *)starts.buf + 8 * i, 8);
        /* in range: -2**31 <= start - field < 2**31, with no wrap past 64 bits */
        int wrapped = field < first || (i && (uint64_t)i * (uint64_t)size / (uint64_t)i !=
                                        (uint64_t)size);
        int fits = !wrapped && (start >= field ? start - field < 0x80000000ULL
                                               : field - start <= 0x80000000ULL);
        if (!fits) {
            Py_DECREF(out);
            out = PyLong_FromSsize_t(i);
            goto done;
        }
        uint32_t delta = (uint32_t)(start - field);
        for (int b = 0; b < SF_FDE_START_BYTES; b++)
            to[big ? SF_FDE_START_BYTES - 1 - b : b] = (uint8_t)(delta >> (8 * b));
        memcpy(to + SF_FDE_START_BYTES, from, (size_t)tail);
        to += size;
        from += tail;
    }
done:
    PyBuffer_Release(&starts);
    PyBuffer_Release(&fdes);
    return out;
}
