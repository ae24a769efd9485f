/* The ELF fast path in C: ``fast_fres`` is ``sframe/fastpath.py``'s ``_run`` over one
 * FDE body (dwarf_replay.c's ``replay``, each changed state an FRE), ``lower_fdes``
 * ``sframe/build.py``'s ``lower_fdes`` loop over a file's FDEs.  Which FRE a state
 * gives is Python's answer (``_state_shape``), asked once per distinct state: this file
 * holds no target fact.  tests/differential/test_core.py holds both equal to Python. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "core.h"
#include "kept.h"

/* Each changed state as an FRE (a ``Fre`` named tuple), its fields after
 * ``start`` found by state key in ``shapes``, or asked of ``shape_of`` (whose answer,
 * None included, is kept there).  The rules that map a state to an FRE stay in
 * Python (``fastpath._state_shape``, from ``arch/``): this file holds no target fact. */
/* A whole file's loop meets a few hundred distinct states: each one's entry of
 * ``shapes`` (borrowed; the dict outlives the call) kept by the state itself (kept.h's
 * state table), so the key tuple is built and looked up once per distinct state, not
 * once per FRE. */
typedef struct { StateKey key; PyObject *shape; } MemoSlot;
typedef struct { MemoSlot slot[STATE_SLOTS]; } StateMemo;

/* Equal FREs (one start, one shape) recur across a file's bodies (the push at 1, the
 * frame pointer at 4): one object each, kept here (a reference held) for the call. */
#define FRE_SLOTS 65536
typedef struct { int64_t at; PyObject *shape, *fre; } FreSlot;
typedef struct { FreSlot slot[FRE_SLOTS]; } FreMemo;

static PyObject **fre_slot(FreMemo *m, int64_t at, PyObject *shape) {
    uint64_t h = ((uint64_t)at * 0x9e3779b97f4a7c15ULL) ^ ((uintptr_t)shape >> 4);
    size_t i = (size_t)(h ^ (h >> 31)) % FRE_SLOTS;
    for (int probe = 0; probe < 16; probe++, i = (i + 1) % FRE_SLOTS) {
        FreSlot *slot = &m->slot[i];
        if (!slot->fre) { slot->at = at; slot->shape = shape; return &slot->fre; }
        if (slot->at == at && slot->shape == shape) return &slot->fre;
    }
    return NULL;
}

static void fre_memo_free(FreMemo *m) {
    if (!m) return;
    for (size_t i = 0; i < FRE_SLOTS; i++) Py_XDECREF(m->slot[i].fre);
    PyMem_Free(m);
}

typedef struct {
    PyObject *fres, *shapes, *shape_of;
    PyTypeObject *fre_type;
    StateMemo *memo;  /* NULL: none (one body) */
    FreMemo *made;    /* NULL: none (one body) */
} FreCtx;

static int emit_fre(void *raw, int64_t at, const State *s) {
    FreCtx *ctx = raw;
    int hit = 0;
    MemoSlot *kept = ctx->memo ? STATE_SLOT(ctx->memo->slot, s, &hit) : NULL;
    PyObject *shape = hit ? kept->shape : NULL;
    if (!shape) {
        PyObject *key = state_key(s);
        if (!key) return -1;
        shape = memo_lookup(ctx->shapes, key, ctx->shape_of);  /* borrowed */
        Py_DECREF(key);
        if (!shape) return -1;
        if (kept) kept->shape = shape;
    }
    if (shape == Py_None) return 0;
    if (!PyTuple_Check(shape)) {
        PyErr_SetString(PyExc_TypeError, "shape_of must give a tuple or None");
        return -1;
    }
    PyObject **same_fre = ctx->made ? fre_slot(ctx->made, at, shape) : NULL;
    if (same_fre && *same_fre) return PyList_Append(ctx->fres, *same_fre) < 0 ? -1 : 1;
    Py_ssize_t n = PyTuple_GET_SIZE(shape);
    PyObject *fre = ctx->fre_type->tp_alloc(ctx->fre_type, n + 1);
    if (!fre) return -1;
    PyObject *start = PyLong_FromLongLong((long long)at);
    if (!start) { Py_DECREF(fre); return -1; }
    PyTuple_SET_ITEM(fre, 0, start);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(shape, i);
        Py_INCREF(item);
        PyTuple_SET_ITEM(fre, i + 1, item);
    }
    if (same_fre) {
        Py_INCREF(fre);
        *same_fre = fre;
    }
    int failed = PyList_Append(ctx->fres, fre) < 0;
    Py_DECREF(fre);
    return failed ? -1 : 1;
}

/* The target's parameters, by name (``sframe/fastpath.core_target``): the replay's
 * (core.h's TARGET_NAMES) and the FRE type.  1, or 0 with a TypeError set. */
#define FRES_FORMAT TARGET_FORMAT "O!"
#define FRES_NAMES TARGET_NAMES, "fre_type"

static int target_of(Params *p, PyObject *tracks, PyObject *big, PyObject *fre_type,
                     FreCtx *ctx) {
    if (!PyType_IsSubtype((PyTypeObject *)fre_type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "fre_type must be a tuple type");
        return 0;
    }
    target_flags(p, tracks, big);
    ctx->fre_type = (PyTypeObject *)fre_type;
    return 1;
}

/* fast_fres(body, start, code_align, data_align, shapes, target) -> tuple of FREs, or
 * None (general path).  ``shapes``: the caller's state -> FRE fields memo. */
PyObject *fast_fres(PyObject *Py_UNUSED(self), PyObject *args) {
    static char *names[] = {FRES_NAMES, NULL};
    Py_buffer body;
    PyObject *start, *fre_type, *target, *tracks, *big;
    Params p = {0, 0, 0, 0, 0, 0, 0};
    State s;
    FreCtx ctx = {NULL, NULL, NULL, NULL, NULL, NULL};
    if (!PyArg_ParseTuple(args, "y*OLLO!O!:fast_fres", &body, &start, &p.code_align,
                          &p.data_align, &PyDict_Type, &ctx.shapes, &PyDict_Type, &target))
        return NULL;
    if (!read_params(target, "$" FRES_FORMAT ":fast_fres", names,
                     TARGET_ARGS(&p, &tracks, &big, &ctx.shape_of), &PyType_Type,
                     &fre_type) ||
        !target_of(&p, tracks, big, fre_type, &ctx) || !read_state(start, &s)) {
        PyBuffer_Release(&body);
        return NULL;
    }
    ctx.fres = PyList_New(0);
    if (!ctx.fres) { PyBuffer_Release(&body); return NULL; }
    int done = replay((const uint8_t *)body.buf, body.len, s, &p, emit_fre, &ctx);
    PyBuffer_Release(&body);
    if (done <= 0) {
        Py_DECREF(ctx.fres);
        if (done < 0) return NULL;
        Py_RETURN_NONE;
    }
    PyObject *out = PyList_AsTuple(ctx.fres);
    Py_DECREF(ctx.fres);
    return out;
}

/* The FREs of one body from its CIE's state (``fast_fres``'s loop); a new reference
 * to a tuple, Py_None (the general path), or NULL with an error set. */
static PyObject *replay_fres(PyObject *body, const State *start, const Params *p,
                             FreCtx *ctx) {
    char *bytes;
    Py_ssize_t len;
    if (PyBytes_AsStringAndSize(body, &bytes, &len) < 0) return NULL;
    ctx->fres = PyList_New(0);
    if (!ctx->fres) return NULL;
    int done = replay((const uint8_t *)bytes, len, *start, p, emit_fre, ctx);
    if (done <= 0) {
        Py_CLEAR(ctx->fres);
        if (done < 0) return NULL;
        Py_RETURN_NONE;
    }
    PyObject *out = PyList_AsTuple(ctx->fres);
    Py_CLEAR(ctx->fres);
    return out;
}

/* lower_fdes(fdes, cies, shapes, direct, params) -> list: for each FDE
 * (``dwarf.cfi.Fde``) its ``SFrameFunction``, or None where the general path decides
 * (``sframe.build.lower_fdes`` is this loop's reference: the same conditions, FREs
 * and fields).  ``cies``: CIE offset -> (start state or None, code_align, data_align,
 * ra, b_key, signal), made in Python once per CIE; ``shapes``: the caller's state ->
 * FRE fields memo; ``direct``: (CIE offset, body) -> FREs or None, the caller's memo;
 * ``params``: the target's (``fast_fres``'s) and the format's parameters by name
 * (``sframe/build._lower_params``). */
PyObject *lower_fdes(PyObject *Py_UNUSED(self), PyObject *args) {
    static char *names[] = {FRES_NAMES, "version", "max_size", "max_fres_v3",
                            "function_type", NULL};
    PyObject *fdes, *cies, *fre_type, *func_type, *direct, *params, *tracks, *big;
    FastLimits limits = {0, 0, 0, 0};
    Params target = {0, 0, 0, 0, 0, 0, 0};
    FreCtx ctx = {NULL, NULL, NULL, NULL, NULL, NULL};
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!:lower_fdes", &PyTuple_Type, &fdes, &PyDict_Type,
                          &cies, &PyDict_Type, &ctx.shapes, &PyDict_Type, &direct,
                          &PyDict_Type, &params) ||
        !read_params(params, "$" FRES_FORMAT "iLLO!:lower_fdes", names,
                     TARGET_ARGS(&target, &tracks, &big, &ctx.shape_of), &PyType_Type,
                     &fre_type, &limits.version, &limits.max_size, &limits.max_fres,
                     &PyType_Type, &func_type) ||
        !target_of(&target, tracks, big, fre_type, &ctx))
        return NULL;
    limits.ra = target.ra;
    PyTypeObject *ftype = (PyTypeObject *)func_type;
    if (!PyType_IsSubtype(ftype, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "function_type must be a tuple type");
        return NULL;
    }
    ctx.memo = PyMem_Calloc(1, sizeof(StateMemo));
    ctx.made = PyMem_Calloc(1, sizeof(FreMemo));
    if (!ctx.memo || !ctx.made) {
        PyMem_Free(ctx.memo);
        PyMem_Free(ctx.made);
        return PyErr_NoMemory();
    }
    Py_ssize_t n = PyTuple_GET_SIZE(fdes);
    PyObject *out = PyList_New(n);
    if (!out) { PyMem_Free(ctx.memo); fre_memo_free(ctx.made); return NULL; }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *fde = PyTuple_GET_ITEM(fdes, i);
        PyObject *made = Py_None;
        Py_INCREF(made);
        if (!PyTuple_Check(fde) || PyTuple_GET_SIZE(fde) < 7) {
            PyErr_SetString(PyExc_TypeError, "an FDE must be a dwarf.cfi.Fde");
            goto fail_made;
        }
        /* a size or RA column that is not a 64-bit number: the general path */
        unsigned long long size = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(fde, 3));
        if (size == (unsigned long long)-1 && PyErr_Occurred()) { PyErr_Clear(); goto store; }
        PyObject *cie = PyDict_GetItemWithError(cies, PyTuple_GET_ITEM(fde, 5));
        if (!cie) { if (PyErr_Occurred()) goto fail_made; goto store; }
        /* (start state or None, code_align, data_align, ra, b_key, signal) */
        PyObject *start = PyTuple_GET_ITEM(cie, 0);
        long long cie_ra = PyLong_AsLongLong(PyTuple_GET_ITEM(cie, 3));
        if (cie_ra == -1 && PyErr_Occurred()) { PyErr_Clear(); goto store; }
        if (!fast_path_takes(&limits, size, cie_ra, start != Py_None)) goto store;
        PyObject *key = PyTuple_Pack(2, PyTuple_GET_ITEM(fde, 5), PyTuple_GET_ITEM(fde, 6));
        if (!key) goto fail_made;
        PyObject *fres = PyDict_GetItemWithError(direct, key);  /* borrowed */
        if (fres) {
            Py_INCREF(fres);
        } else if (PyErr_Occurred()) {
            Py_DECREF(key);
            goto fail_made;
        } else {
            Params p = target;
            State s;
            p.code_align = PyLong_AsLongLong(PyTuple_GET_ITEM(cie, 1));
            p.data_align = PyLong_AsLongLong(PyTuple_GET_ITEM(cie, 2));
            if (PyErr_Occurred() || !read_state(start, &s)) {
                /* a value past 64 bits: the general path (no memo entry) */
                Py_DECREF(key);
                if (!PyErr_ExceptionMatches(PyExc_OverflowError)) goto fail_made;
                PyErr_Clear();
                goto store;
            }
            fres = replay_fres(PyTuple_GET_ITEM(fde, 6), &s, &p, &ctx);
            if (!fres || PyDict_SetItem(direct, key, fres) < 0) {
                Py_XDECREF(fres);
                Py_DECREF(key);
                goto fail_made;
            }
        }
        Py_DECREF(key);
        if (fres == Py_None) { Py_DECREF(fres); goto store; }
        /* FREs at or past the function's end are dropped (rows are unbounded). */
        Py_ssize_t count = PyTuple_GET_SIZE(fres), kept = count;
        while (kept > 0) {
            long long at = PyLong_AsLongLong(PyTuple_GET_ITEM(
                PyTuple_GET_ITEM(fres, kept - 1), 0));
            if (at == -1 && PyErr_Occurred()) { Py_DECREF(fres); goto fail_made; }
            if (at < (long long)size) break;  /* size: at most max_size */
            kept--;
        }
        if (kept < count) {
            /* Only the tail can be past the end: starts grow along the tuple. */
            PyObject *cut = PyTuple_GetSlice(fres, 0, kept);
            Py_DECREF(fres);
            if (!cut) goto fail_made;
            fres = cut;
        }
        if (!fast_path_fits(&limits, kept)) { Py_DECREF(fres); goto store; }
        PyObject *func = ftype->tp_alloc(ftype, 11);
        if (!func) { Py_DECREF(fres); goto fail_made; }
        PyObject *signal = limits.version == 3 && PyObject_IsTrue(PyTuple_GET_ITEM(cie, 5)) ?
            Py_True : Py_False;
        PyObject *b_key = PyObject_IsTrue(PyTuple_GET_ITEM(cie, 4)) ? Py_True : Py_False;
        PyObject *zero = PyLong_FromLong(0);
        if (!zero) { Py_DECREF(func); Py_DECREF(fres); goto fail_made; }
        PyObject *fields[11] = {PyTuple_GET_ITEM(fde, 0), PyTuple_GET_ITEM(fde, 1),
                                PyTuple_GET_ITEM(fde, 2), PyTuple_GET_ITEM(fde, 3), fres,
                                b_key, Py_False, zero, Py_None, Py_False, signal};
        for (int f = 0; f < 11; f++) {
            Py_INCREF(fields[f]);
            PyTuple_SET_ITEM(func, f, fields[f]);
        }
        Py_DECREF(zero);
        Py_DECREF(fres);
        Py_DECREF(made);
        made = func;
    store:
        PyList_SET_ITEM(out, i, made);
        continue;
    fail_made:
        Py_DECREF(made);
        Py_DECREF(out);
        PyMem_Free(ctx.memo);
        fre_memo_free(ctx.made);
        return NULL;
    }
    PyMem_Free(ctx.memo);
    fre_memo_free(ctx.made);
    return out;
}
