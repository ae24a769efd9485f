/* The ELF fast path in C: ``fast_fres`` is ``sframe/fastpath.py``'s ``_run`` over one
 * FDE body (dwarf_replay.c's ``replay``, each changed state an FRE), ``lower_fdes``
 * ``sframe/build.py``'s ``lower_fdes`` loop over a file's FDEs, and ``eh_functions``
 * the same step run on each FDE of a linked file's .eh_frame as dwarf_cfi.c's walker
 * meets it (no ``Fde`` made).  Which FRE a state gives is Python's answer
 * (``_state_shape``), asked once per distinct state: this file holds no target fact.
 * tests/differential/test_core.py holds all three equal to Python. */

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

/* The FREs of one body from its CIE's entry (``cie``: start state or None, code_align,
 * data_align, ra, b_key, signal; ``fast_fres``'s loop): a new reference to a tuple,
 * Py_None (the general path), or NULL with an error set.  ``*keep``: 0 where the answer
 * must not be remembered for the body (an alignment past 64 bits). */
static PyObject *body_fres(const uint8_t *bytes, Py_ssize_t len, PyObject *cie,
                           const Params *target, FreCtx *ctx, int *keep) {
    Params p = *target;
    State s;
    *keep = 1;
    p.code_align = PyLong_AsLongLong(PyTuple_GET_ITEM(cie, 1));
    p.data_align = PyLong_AsLongLong(PyTuple_GET_ITEM(cie, 2));
    if (PyErr_Occurred() || !read_state(PyTuple_GET_ITEM(cie, 0), &s)) {
        /* a value past 64 bits: the general path (no memo entry) */
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return NULL;
        PyErr_Clear();
        *keep = 0;
        Py_RETURN_NONE;
    }
    ctx->fres = PyList_New(0);
    if (!ctx->fres) return NULL;
    int done = replay(bytes, len, s, &p, emit_fre, ctx);
    if (done <= 0) {
        Py_CLEAR(ctx->fres);
        if (done < 0) return NULL;
        Py_RETURN_NONE;
    }
    PyObject *out = PyList_AsTuple(ctx->fres);
    Py_CLEAR(ctx->fres);
    return out;
}

/* Whether the fast path takes an FDE of ``size`` bytes whose CIE's entry is ``cie``
 * (``fast_path_takes``): 1, 0 (the general path), -1 with an error set. */
static int takes(const FastLimits *limits, unsigned long long size, PyObject *cie) {
    if (!PyTuple_Check(cie) || PyTuple_GET_SIZE(cie) != 6) {
        PyErr_SetString(PyExc_TypeError, "a CIE's entry must be a 6-tuple");
        return -1;
    }
    /* an RA column that is not a 64-bit number: the general path */
    long long cie_ra = PyLong_AsLongLong(PyTuple_GET_ITEM(cie, 3));
    if (cie_ra == -1 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
    return fast_path_takes(limits, size, cie_ra, PyTuple_GET_ITEM(cie, 0) != Py_None);
}

/* The ``SFrameFunction`` the fast path makes of an FDE (``name``, ``section``, ``start``,
 * ``size`` of ``size_value`` bytes) whose body gave ``fres`` (a tuple; borrowed), its
 * CIE's entry ``cie``: FREs at or past its end dropped, then the V3 count checked.  A
 * new reference, Py_None (new; the general path), or NULL with an error set. */
static PyObject *function_of(const FastLimits *limits, PyTypeObject *ftype, PyObject *fres,
                             PyObject *cie, PyObject *name, PyObject *section,
                             PyObject *start, PyObject *size, unsigned long long size_value) {
    Py_ssize_t count = PyTuple_GET_SIZE(fres), kept = count;
    while (kept > 0) {
        long long at = PyLong_AsLongLong(PyTuple_GET_ITEM(PyTuple_GET_ITEM(fres, kept - 1), 0));
        if (at == -1 && PyErr_Occurred()) return NULL;
        if (at < (long long)size_value) break;  /* size: at most max_size */
        kept--;
    }
    if (!fast_path_fits(limits, kept)) Py_RETURN_NONE;
    /* Only the tail can be past the end: starts grow along the tuple. */
    PyObject *cut = kept < count ? PyTuple_GetSlice(fres, 0, kept) : fres;
    if (!cut) return NULL;
    if (cut == fres) Py_INCREF(cut);
    PyObject *func = ftype->tp_alloc(ftype, 11);
    PyObject *zero = PyLong_FromLong(0);
    if (!func || !zero) {
        Py_XDECREF(func);
        Py_XDECREF(zero);
        Py_DECREF(cut);
        return NULL;
    }
    PyObject *signal = limits->version == 3 && PyObject_IsTrue(PyTuple_GET_ITEM(cie, 5)) ?
        Py_True : Py_False;
    PyObject *b_key = PyObject_IsTrue(PyTuple_GET_ITEM(cie, 4)) ? Py_True : Py_False;
    PyObject *fields[11] = {name, section, start, size, cut, b_key, Py_False, zero, Py_None,
                            Py_False, signal};
    for (int f = 0; f < 11; f++) {
        Py_INCREF(fields[f]);
        PyTuple_SET_ITEM(func, f, fields[f]);
    }
    Py_DECREF(zero);
    Py_DECREF(cut);
    return func;
}

/* What lower_fdes and eh_functions read of their parameters by name (the target's,
 * ``fast_fres``'s, and the format's: ``sframe/build._lower_params``).  1, or 0 with a
 * TypeError set. */
typedef struct {
    FreCtx fre;
    Params target;
    FastLimits limits;
    PyTypeObject *ftype;
} Lowering;

static int lowering_of(PyObject *params, const char *who, Lowering *l) {
    static char *names[] = {FRES_NAMES, "version", "max_size", "max_fres_v3",
                            "function_type", NULL};
    char format[64];
    PyObject *tracks, *big, *fre_type, *func_type;
    snprintf(format, sizeof format, "$" FRES_FORMAT "iLLO!:%s", who);
    if (!read_params(params, format, names,
                     TARGET_ARGS(&l->target, &tracks, &big, &l->fre.shape_of), &PyType_Type,
                     &fre_type, &l->limits.version, &l->limits.max_size, &l->limits.max_fres,
                     &PyType_Type, &func_type) ||
        !target_of(&l->target, tracks, big, fre_type, &l->fre))
        return 0;
    l->limits.ra = l->target.ra;
    l->ftype = (PyTypeObject *)func_type;
    if (!PyType_IsSubtype(l->ftype, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "function_type must be a tuple type");
        return 0;
    }
    l->fre.memo = PyMem_Calloc(1, sizeof(StateMemo));
    l->fre.made = PyMem_Calloc(1, sizeof(FreMemo));
    if (!l->fre.memo || !l->fre.made) {
        PyErr_NoMemory();
        return 0;
    }
    return 1;
}

static void lowering_free(Lowering *l) {
    PyMem_Free(l->fre.memo);
    fre_memo_free(l->fre.made);
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
    PyObject *fdes, *cies, *direct, *params;
    Lowering l = {{NULL, NULL, NULL, NULL, NULL, NULL}, {0, 0, 0, 0, 0, 0, 0}, {0, 0, 0, 0},
                  NULL};
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!:lower_fdes", &PyTuple_Type, &fdes, &PyDict_Type,
                          &cies, &PyDict_Type, &l.fre.shapes, &PyDict_Type, &direct,
                          &PyDict_Type, &params))
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(fdes);
    PyObject *out = lowering_of(params, "lower_fdes", &l) ? PyList_New(n) : NULL;
    if (!out) { lowering_free(&l); return NULL; }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *fde = PyTuple_GET_ITEM(fdes, i);
        PyObject *made = NULL;
        if (!PyTuple_Check(fde) || PyTuple_GET_SIZE(fde) < 7) {
            PyErr_SetString(PyExc_TypeError, "an FDE must be a dwarf.cfi.Fde");
            goto fail;
        }
        /* a size that is not a 64-bit number: the general path */
        unsigned long long size = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(fde, 3));
        if (size == (unsigned long long)-1 && PyErr_Occurred()) { PyErr_Clear(); goto none; }
        PyObject *cie = PyDict_GetItemWithError(cies, PyTuple_GET_ITEM(fde, 5));
        if (!cie) { if (PyErr_Occurred()) goto fail; goto none; }
        int taken = takes(&l.limits, size, cie);
        if (taken < 0) goto fail;
        if (!taken) goto none;
        PyObject *key = PyTuple_Pack(2, PyTuple_GET_ITEM(fde, 5), PyTuple_GET_ITEM(fde, 6));
        if (!key) goto fail;
        PyObject *fres = PyDict_GetItemWithError(direct, key);  /* borrowed */
        if (fres) {
            Py_INCREF(fres);
        } else if (PyErr_Occurred()) {
            Py_DECREF(key);
            goto fail;
        } else {
            PyObject *body = PyTuple_GET_ITEM(fde, 6);
            char *bytes;
            Py_ssize_t len;
            int keep;
            fres = PyBytes_AsStringAndSize(body, &bytes, &len) < 0 ? NULL :
                body_fres((const uint8_t *)bytes, len, cie, &l.target, &l.fre, &keep);
            if (!fres || (keep && PyDict_SetItem(direct, key, fres) < 0)) {
                Py_XDECREF(fres);
                Py_DECREF(key);
                goto fail;
            }
        }
        Py_DECREF(key);
        if (fres == Py_None) { Py_DECREF(fres); goto none; }
        made = function_of(&l.limits, l.ftype, fres, cie, PyTuple_GET_ITEM(fde, 0),
                           PyTuple_GET_ITEM(fde, 1), PyTuple_GET_ITEM(fde, 2),
                           PyTuple_GET_ITEM(fde, 3), size);
        Py_DECREF(fres);
        if (!made) goto fail;
        PyList_SET_ITEM(out, i, made);
        continue;
    none:
        Py_INCREF(Py_None);
        PyList_SET_ITEM(out, i, Py_None);
    }
    lowering_free(&l);
    return out;
fail:
    Py_DECREF(out);
    lowering_free(&l);
    return NULL;
}

/* One distinct body of an .eh_frame (its CIE's offset and its bytes' place) and the
 * fast path's answer for it (a tuple of FREs or Py_None; a reference held). */
typedef struct { Py_ssize_t cie_at, at, len; PyObject *fres; } Body;

/* What eh_functions carries along: the lowering, the bodies met (kept.h's KeptIds from
 * a hash of the CIE's offset and the bytes to an index into ``body``), the CIEs'
 * entries (``cies``, asked of ``cie_of``) and what it hands back. */
typedef struct {
    Lowering l;
    KeptIds seen;
    Body *body;
    size_t bodies, cap;
    PyObject *out, *todo, *cies, *cie_of, *names, *section;
    Py_ssize_t fdes;
    Py_ssize_t last_at;  /* the CIE offset of the FDE before (-1: none) ... */
    PyObject *last_entry;  /* ... and its entry (borrowed: ``cies`` holds it) */
} EhCtx;

static uint64_t body_hash(Py_ssize_t cie_at, const uint8_t *bytes, Py_ssize_t len) {
    uint64_t h = 1469598103934665603ull ^ (uint64_t)cie_at;  /* FNV-1a */
    for (Py_ssize_t i = 0; i < len; i++) h = (h ^ bytes[i]) * 1099511628211ull;
    return h;
}

/* The fast path's FREs of ``e``'s body (a new reference; Py_None: the general path),
 * each distinct (CIE, body) replayed once: a hash that two bodies share keeps the
 * first (the other is replayed each time). */
static PyObject *eh_body_fres(EhCtx *ctx, const EhFde *e, PyObject *cie) {
    const uint8_t *bytes = e->data + e->body;
    Py_ssize_t len = e->end - e->body, cie_at = e->cie->at;
    uint64_t h = body_hash(cie_at, bytes, len);
    uint32_t index = ids_get(&ctx->seen, h);
    if (index != NO_ID) {
        const Body *b = &ctx->body[index];
        if (b->cie_at == cie_at && b->len == len && !memcmp(e->data + b->at, bytes, (size_t)len)) {
            Py_INCREF(b->fres);
            return b->fres;
        }
    }
    int keep;
    PyObject *fres = body_fres(bytes, len, cie, &ctx->l.target, &ctx->l.fre, &keep);
    if (!fres || !keep || index != NO_ID) return fres;
    if (ctx->bodies == ctx->cap) {
        size_t cap = ctx->cap ? 2 * ctx->cap : 1024;
        Body *more = PyMem_Realloc(ctx->body, cap * sizeof *more);
        if (!more) { Py_DECREF(fres); return PyErr_NoMemory(); }
        ctx->body = more;
        ctx->cap = cap;
    }
    if (ids_put(&ctx->seen, h, (uint32_t)ctx->bodies) < 0) { Py_DECREF(fres); return NULL; }
    Py_INCREF(fres);
    ctx->body[ctx->bodies++] = (Body){cie_at, e->body, len, fres};
    return fres;
}

/* One FDE of the walk: its function, or None and its offset in ``todo``. */
static int eh_function(void *raw, const EhFde *e) {
    EhCtx *ctx = raw;
    ctx->fdes++;
    PyObject *cie = ctx->last_entry;  /* an FDE's CIE is mostly the one before's */
    if (e->cie->at != ctx->last_at) {
        PyObject *cie_at = PyLong_FromSsize_t(e->cie->at);
        if (!cie_at) return -1;
        cie = memo_lookup(ctx->cies, cie_at, ctx->cie_of);  /* borrowed */
        Py_DECREF(cie_at);
        if (!cie) return -1;
        ctx->last_at = e->cie->at;
        ctx->last_entry = cie;
    }
    int taken = takes(&ctx->l.limits, e->range, cie);
    if (taken < 0) return -1;
    PyObject *made = Py_None;
    Py_INCREF(made);
    if (taken) {
        PyObject *fres = eh_body_fres(ctx, e, cie);
        if (!fres) { Py_DECREF(made); return -1; }
        if (fres != Py_None) {
            PyObject *start = PyLong_FromUnsignedLongLong(e->pc);
            PyObject *size = PyLong_FromUnsignedLongLong(e->range);
            PyObject *name = start ? fde_name(ctx->names, ctx->section, start, e->pc) : NULL;
            Py_DECREF(made);
            made = name && size ? function_of(&ctx->l.limits, ctx->l.ftype, fres, cie, name,
                                              ctx->section, start, size, e->range) : NULL;
            Py_XDECREF(start);
            Py_XDECREF(size);
            Py_XDECREF(name);
        }
        Py_DECREF(fres);
        if (!made) return -1;
    }
    if (made == Py_None && append_new(ctx->todo, PyLong_FromSsize_t(e->start)) < 0) {
        Py_DECREF(made);
        return -1;
    }
    return append_new(ctx->out, made) < 0 ? -1 : 1;
}

/* eh_functions(eh, address, address_size, names, cie_of, params)
 * -> (functions, todo, FDE count), or
 * None: ``lower_fdes`` of a linked file's .eh_frame at ``address`` read by the walker
 * (dwarf_cfi.c's ``eh_walk``), with no ``Fde`` made.  ``functions``: per FDE its
 * ``SFrameFunction``, or None where the general path decides; ``todo``: those FDEs'
 * offsets in the section, in order.  ``names``: (section or "", address) -> function
 * name (``eh_fdes``'); ``cie_of(offset)``: the CIE's entry as ``lower_fdes``' ``cies``
 * holds it, asked once per CIE; ``params``: ``lower_fdes``'.
 * None: the section is out of the ordinary (``eh_fdes`` gives None). */
PyObject *eh_functions(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer eh;
    unsigned long long address;
    int address_size;
    PyObject *names, *cie_of, *params, *out = NULL;
    EhCtx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.last_at = -1;
    if (!PyArg_ParseTuple(args, "y*KiO!OO!:eh_functions", &eh, &address, &address_size,
                          &PyDict_Type, &names, &cie_of, &PyDict_Type, &params))
        return NULL;
    ctx.l.fre.shapes = PyDict_New();
    ctx.out = PyList_New(0);
    ctx.todo = PyList_New(0);
    ctx.cies = PyDict_New();
    ctx.section = PyUnicode_FromString("");
    ctx.cie_of = cie_of;
    ctx.names = names;
    if (!ctx.l.fre.shapes || !ctx.out || !ctx.todo || !ctx.cies || !ctx.section ||
        !lowering_of(params, "eh_functions", &ctx.l))
        goto done;
    if (address_size != 4 && address_size != 8) {
        out = Py_None;
        Py_INCREF(out);
        goto done;
    }
    int walked = eh_walk(eh.buf, eh.len, address, address_size, ctx.l.target.big_endian,
                         &ctx.l.target, eh_function, &ctx);
    if (walked > 0) {
        out = Py_BuildValue("(OOn)", ctx.out, ctx.todo, ctx.fdes);
    } else if (walked == 0) {
        out = Py_None;
        Py_INCREF(out);
    }
done:
    for (size_t i = 0; i < ctx.bodies; i++) Py_DECREF(ctx.body[i].fres);
    PyMem_Free(ctx.body);
    ids_free(&ctx.seen);
    lowering_free(&ctx.l);
    Py_XDECREF(ctx.l.fre.shapes);
    Py_XDECREF(ctx.out);
    Py_XDECREF(ctx.todo);
    Py_XDECREF(ctx.cies);
    Py_XDECREF(ctx.section);
    PyBuffer_Release(&eh);
    return out;
}
