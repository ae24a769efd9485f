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
#include "out.h"
#include "sframe.h"

/* Each changed state as an FRE (a ``Fre`` named tuple), its fields after
 * ``start`` found by state key in ``shapes``, or asked of ``shape_of`` (whose answer,
 * None included, is kept there).  The rules that map a state to an FRE stay in
 * Python (``fastpath._state_shape``, from ``arch/``): this file holds no target fact. */
/* A whole file's loop meets a few hundred distinct states: each one's entry of
 * ``shapes`` (borrowed; the dict outlives the call) kept by the state itself (kept.h's
 * state table), so the key tuple is built and looked up once per distinct state, not
 * once per FRE; ``tail``: the table pass's bytes after the FRE's start for that shape
 * (borrowed from its ``tails``; NULL: not yet, or another pass), found once per state
 * too. */
typedef struct { StateKey key; PyObject *shape, *tail; } MemoSlot;
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

/* The FRE fields of state ``s`` (its entry of ``shapes``, asked of ``shape_of`` where
 * it has none; kept in ``kept``, the memo's slot, where there is one): a tuple,
 * Py_None (no FRE), or NULL with an error set. */
static PyObject *state_shape(MemoSlot *kept, int hit, const State *s, PyObject *shapes,
                             PyObject *shape_of) {
    PyObject *shape = hit ? kept->shape : NULL;
    if (!shape) {
        PyObject *key = state_key(s);
        if (!key) return NULL;
        shape = memo_lookup(shapes, key, shape_of);  /* borrowed */
        Py_DECREF(key);
        if (!shape) return NULL;
        if (kept) kept->shape = shape;
    }
    if (shape != Py_None && !PyTuple_Check(shape)) {
        PyErr_SetString(PyExc_TypeError, "shape_of must give a tuple or None");
        return NULL;
    }
    return shape;
}

static int emit_fre(void *raw, int64_t at, const State *s) {
    FreCtx *ctx = raw;
    int hit = 0;
    MemoSlot *kept = ctx->memo ? STATE_SLOT(ctx->memo->slot, s, &hit) : NULL;
    PyObject *shape = state_shape(kept, hit, s, ctx->shapes, ctx->shape_of);
    if (!shape) return -1;
    if (shape == Py_None) return 0;
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

/* The replay's parameters and start state for a body of the CIE whose entry is ``cie``
 * (the target's ``target`` with the CIE's alignments): 1, 0 where a value is past 64
 * bits (the general path, no memo entry), or -1 with an error set. */
static int cie_start(PyObject *cie, const Params *target, Params *p, State *s) {
    *p = *target;
    p->code_align = PyLong_AsLongLong(PyTuple_GET_ITEM(cie, 1));
    p->data_align = PyLong_AsLongLong(PyTuple_GET_ITEM(cie, 2));
    if (!PyErr_Occurred() && read_state(PyTuple_GET_ITEM(cie, 0), s)) return 1;
    if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return -1;
    PyErr_Clear();
    return 0;
}

/* The FREs of one body from its CIE's entry (``cie``: start state or None, code_align,
 * data_align, ra, b_key, signal; ``fast_fres``'s loop): a new reference to a tuple,
 * Py_None (the general path), or NULL with an error set.  ``*keep``: 0 where the answer
 * must not be remembered for the body (an alignment past 64 bits). */
static PyObject *body_fres(const uint8_t *bytes, Py_ssize_t len, PyObject *cie,
                           const Params *target, FreCtx *ctx, int *keep) {
    Params p;
    State s;
    int started = cie_start(cie, target, &p, &s);
    *keep = started;
    if (started < 0) return NULL;
    if (!started) Py_RETURN_NONE;
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
/* The CIEs' entries a walk asks of ``cie_of`` (once per CIE, kept in ``cies``), the
 * last one at hand: an FDE's CIE is mostly the one before's. */
typedef struct {
    PyObject *cies, *cie_of;
    Py_ssize_t last_at;  /* the CIE offset of the FDE before (-1: none) ... */
    PyObject *last_entry;  /* ... and its entry (borrowed: ``cies`` holds it) */
} CieEntries;

/* The entry of the CIE at ``at`` (borrowed), or NULL with an error set. */
static PyObject *cie_entry(CieEntries *c, Py_ssize_t at) {
    if (at == c->last_at) return c->last_entry;
    PyObject *key = PyLong_FromSsize_t(at);
    if (!key) return NULL;
    PyObject *entry = memo_lookup(c->cies, key, c->cie_of);  /* borrowed */
    Py_DECREF(key);
    if (!entry) return NULL;
    c->last_at = at;
    c->last_entry = entry;
    return entry;
}

/* Whether the body met at ``at`` (``len`` bytes, its CIE at ``cie_at``) is ``e``'s: a
 * hash two bodies share is checked byte for byte. */
int same_body(const EhFde *e, Py_ssize_t cie_at, Py_ssize_t at, Py_ssize_t len) {
    return cie_at == e->cie->at && len == e->end - e->body &&
           !memcmp(e->data + at, e->data + e->body, (size_t)len);
}

/* Room for one more item in a growing array: 0, or -1 with MemoryError. */
int room(void **items, size_t *cap, size_t used, size_t item) {
    if (used < *cap) return 0;
    size_t more = *cap ? 2 * *cap : 1024;
    void *grown = PyMem_Realloc(*items, more * item);
    if (!grown) { PyErr_NoMemory(); return -1; }
    *items = grown;
    *cap = more;
    return 0;
}

typedef struct { Py_ssize_t cie_at, at, len; PyObject *fres; } Body;

/* What eh_functions carries along: the lowering, the bodies met (kept.h's KeptIds from
 * a hash of the CIE's offset and the bytes to an index into ``body``), the CIEs'
 * entries and what it hands back. */
typedef struct {
    Lowering l;
    KeptIds seen;
    Body *body;
    size_t bodies, cap;
    PyObject *out, *todo, *names, *section;
    CieEntries cies;
    Py_ssize_t fdes;
} EhCtx;

/* A hash of a body and its CIE's offset, eight bytes at a time (a byte at a time was
 * 4% of eh_table_v2's instructions on libLLVM-14); a hash two bodies share costs only
 * a replay, never a wrong answer (``same_body``). */
uint64_t body_hash(Py_ssize_t cie_at, const uint8_t *bytes, Py_ssize_t len) {
    uint64_t h = 1469598103934665603ull ^ (uint64_t)cie_at ^ ((uint64_t)len << 40), word;
    Py_ssize_t i = 0;
    for (; i + 8 <= len; i += 8) {
        memcpy(&word, bytes + i, sizeof word);
        h = (h ^ word) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    for (word = 0; i < len; i++) word = word << 8 | bytes[i];
    h = (h ^ word) * 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 29);
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
        if (same_body(e, b->cie_at, b->at, b->len)) {
            Py_INCREF(b->fres);
            return b->fres;
        }
    }
    int keep;
    PyObject *fres = body_fres(bytes, len, cie, &ctx->l.target, &ctx->l.fre, &keep);
    if (!fres || !keep || index != NO_ID) return fres;
    if (room((void **)&ctx->body, &ctx->cap, ctx->bodies, sizeof *ctx->body) < 0 ||
        ids_put(&ctx->seen, h, (uint32_t)ctx->bodies) < 0) {
        Py_DECREF(fres);
        return NULL;
    }
    Py_INCREF(fres);
    ctx->body[ctx->bodies++] = (Body){cie_at, e->body, len, fres};
    return fres;
}

/* One FDE of the walk: its function, or None and its offset in ``todo``. */
static int eh_function(void *raw, const EhFde *e) {
    EhCtx *ctx = raw;
    ctx->fdes++;
    PyObject *cie = cie_entry(&ctx->cies, e->cie->at);
    if (!cie) return -1;
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
    ctx.cies.last_at = -1;
    if (!PyArg_ParseTuple(args, "y*KiO!OO!:eh_functions", &eh, &address, &address_size,
                          &PyDict_Type, &names, &cie_of, &PyDict_Type, &params))
        return NULL;
    ctx.l.fre.shapes = PyDict_New();
    ctx.out = PyList_New(0);
    ctx.todo = PyList_New(0);
    ctx.cies.cies = PyDict_New();
    ctx.section = PyUnicode_FromString("");
    ctx.cies.cie_of = cie_of;
    ctx.names = names;
    if (!ctx.l.fre.shapes || !ctx.out || !ctx.todo || !ctx.cies.cies || !ctx.section ||
        !lowering_of(params, "eh_functions", &ctx.l))
        goto done;
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
    Py_XDECREF(ctx.cies.cies);
    Py_XDECREF(ctx.section);
    PyBuffer_Release(&eh);
    return out;
}

/* ------------------------------------------------------------------------------------
 * eh_table_v2: the same pass to a V2 section's FDE table and FRE bytes, sorted, with no
 * ``Fre`` or ``SFrameFunction`` made (``sframe/build.eh_table``; its reference is
 * ``lower_eh_frame`` then ``encode_sframe``).  Each distinct body's FREs are kept as
 * (start, bytes after the start) in one pool; each function is a row of columns. */

/* One FRE of the pool: its start and its bytes after the start (borrowed: ``tails``,
 * the caller's dict, holds them for the call). */
typedef struct { int64_t at; PyObject *tail; } PoolFre;

/* One function of the table: from the fast path (``extra`` -1: ``count`` FREs of the
 * pool from ``first``, of the distinct body ``body``, NO_ID where the body is not
 * kept) or the general path (``extra``: its index in what ``general`` gave); ``fde``
 * and ``sub`` its FDE's place in the walk and its place among that FDE's functions,
 * which order equal (start, size) as Python's stable sort does. */
typedef struct {
    uint64_t start, size;
    uint32_t fde, sub, first, count, body;
    int32_t extra;
    int b_key;
} TableRow;

/* A distinct (CIE, body) met (as ``Body``), its FREs in the pool: ``first`` and
 * ``count``, ``count`` -1 where the fast path declines it. */
typedef struct { Py_ssize_t cie_at, at, len; size_t first; Py_ssize_t count; } PoolBody;

typedef struct {
    Lowering l;
    KeptIds seen, tail_ids;  /* body hash -> PoolBody; shape address -> tail index */
    PoolBody *body;
    size_t bodies, body_cap;
    PoolFre *pool;
    size_t fres, pool_cap;
    PyObject **tail;  /* borrowed, by tail index */
    size_t tails_used, tails_cap;
    TableRow *row;
    size_t rows, row_cap;
    uint32_t *todo_fde;  /* the walk's place of each FDE in ``todo`` */
    PyObject *todo, *tails, *tail_of;
    CieEntries cies;
    Py_ssize_t fdes;
    /* ``cie_start`` of the last CIE entry asked (borrowed: ``cies`` holds it), kept:
     * read once per CIE, not once per distinct body (3.4% of the pass's instructions) */
    PyObject *started_cie;
    int started;
    Params start_params;
    State start;
} TableCtx;

/* The bytes after an FRE's start for ``shape`` (its fields after ``start``, borrowed
 * from ``shapes``), found by the shape's address, else in ``tails``, else asked of
 * ``tail_of`` (kept there): borrowed, or NULL with an error set. */
static PyObject *tail_for(TableCtx *ctx, PyObject *shape) {
    uint32_t known = ids_get(&ctx->tail_ids, (uint64_t)(uintptr_t)shape);
    if (known != NO_ID) return ctx->tail[known];
    PyObject *tail = memo_lookup(ctx->tails, shape, ctx->tail_of);
    if (!tail) return NULL;
    if (!PyBytes_Check(tail)) {
        PyErr_SetString(PyExc_TypeError, "tail_of must give bytes");
        return NULL;
    }
    if (room((void **)&ctx->tail, &ctx->tails_cap, ctx->tails_used, sizeof *ctx->tail) < 0 ||
        ids_put(&ctx->tail_ids, (uint64_t)(uintptr_t)shape, (uint32_t)ctx->tails_used) < 0)
        return NULL;
    ctx->tail[ctx->tails_used++] = tail;
    return tail;
}

/* ``emit_fre`` for the pool: the state's FRE as (start, bytes after it). */
static int pool_fre(void *raw, int64_t at, const State *s) {
    TableCtx *ctx = raw;
    int hit = 0;
    MemoSlot *kept = STATE_SLOT(ctx->l.fre.memo->slot, s, &hit);
    PyObject *tail = hit ? kept->tail : NULL;
    if (!tail) {  /* the state's first FRE, or its shape is None */
        PyObject *shape = state_shape(kept, hit, s, ctx->l.fre.shapes, ctx->l.fre.shape_of);
        if (!shape) return -1;
        if (shape == Py_None) return 0;
        tail = tail_for(ctx, shape);
        if (!tail) return -1;
        if (kept) kept->tail = tail;
    }
    if (room((void **)&ctx->pool, &ctx->pool_cap, ctx->fres, sizeof *ctx->pool) < 0)
        return -1;
    ctx->pool[ctx->fres++] = (PoolFre){at, tail};
    return 1;
}

/* The pool's FREs of ``e``'s body (``body_fres`` to the pool), each distinct (CIE, body)
 * replayed once: 0 with ``*first``, ``*count`` and ``*body`` (its index among the
 * bodies kept, NO_ID where it is not kept) set, -2 (the general path), or -1 with an
 * error set. */
static Py_ssize_t pool_body(TableCtx *ctx, const EhFde *e, PyObject *cie, size_t *first,
                            Py_ssize_t *count, uint32_t *body) {
    const uint8_t *bytes = e->data + e->body;
    Py_ssize_t len = e->end - e->body, cie_at = e->cie->at;
    uint64_t h = body_hash(cie_at, bytes, len);
    uint32_t index = ids_get(&ctx->seen, h);
    if (index != NO_ID) {
        const PoolBody *b = &ctx->body[index];
        if (same_body(e, b->cie_at, b->at, b->len)) {
            *first = b->first;
            *count = b->count;
            *body = index;
            return b->count < 0 ? -2 : 0;
        }
    }
    int keep, done = 0;
    size_t from = ctx->fres;
    if (cie != ctx->started_cie) {
        int started = cie_start(cie, &ctx->l.target, &ctx->start_params, &ctx->start);
        if (started < 0) return -1;
        ctx->started_cie = cie;
        ctx->started = started;
    }
    keep = ctx->started;  /* 0: a value past 64 bits, the general path (as body_fres) */
    if (keep) {
        done = replay(bytes, len, ctx->start, &ctx->start_params, pool_fre, ctx);
        if (done < 0) return -1;
    }
    if (done == 0) ctx->fres = from;  /* declined: its FREs so far are not used */
    *first = from;
    *count = done ? (Py_ssize_t)(ctx->fres - from) : -1;
    *body = NO_ID;
    if (keep && index == NO_ID) {
        if (room((void **)&ctx->body, &ctx->body_cap, ctx->bodies, sizeof *ctx->body) < 0 ||
            ids_put(&ctx->seen, h, (uint32_t)ctx->bodies) < 0)
            return -1;
        *body = (uint32_t)ctx->bodies;
        ctx->body[ctx->bodies++] = (PoolBody){cie_at, e->body, len, from, *count};
    }
    return done ? 0 : -2;
}

/* One FDE of the walk: a row of the table, or its offset in ``todo``. */
static int table_fde(void *raw, const EhFde *e) {
    TableCtx *ctx = raw;
    uint32_t fde = (uint32_t)ctx->fdes++;
    PyObject *cie = cie_entry(&ctx->cies, e->cie->at);
    if (!cie) return -1;
    int taken = takes(&ctx->l.limits, e->range, cie);
    if (taken < 0) return -1;
    if (taken) {
        size_t first;
        Py_ssize_t count;
        uint32_t body;
        Py_ssize_t found = pool_body(ctx, e, cie, &first, &count, &body);
        if (found == -1) return -1;
        if (found != -2) {
            /* FREs at or past the function's end dropped (``function_of``) */
            while (count > 0 && ctx->pool[first + (size_t)count - 1].at >= (int64_t)e->range)
                count--;
            if (fast_path_fits(&ctx->l.limits, count)) {
                int b_key = PyObject_IsTrue(PyTuple_GET_ITEM(cie, 4));
                if (b_key < 0 ||
                    room((void **)&ctx->row, &ctx->row_cap, ctx->rows, sizeof *ctx->row) < 0)
                    return -1;
                ctx->row[ctx->rows++] = (TableRow){e->pc, e->range, fde, 0, (uint32_t)first,
                                                   (uint32_t)count, body, -1, b_key};
                return 1;
            }
        }
    }
    size_t todo = (size_t)PyList_GET_SIZE(ctx->todo);
    if (todo % 1024 == 0) {  /* todo_fde grows 1024 places at a time, as the list does */
        uint32_t *more = PyMem_Realloc(ctx->todo_fde, (todo + 1024) * sizeof *more);
        if (!more) { PyErr_NoMemory(); return -1; }
        ctx->todo_fde = more;
    }
    ctx->todo_fde[todo] = fde;
    return append_new(ctx->todo, PyLong_FromSsize_t(e->start)) < 0 ? -1 : 1;
}

static int row_order(const void *a, const void *b) {
    const TableRow *x = a, *y = b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    if (x->size != y->size) return x->size < y->size ? -1 : 1;
    if (x->fde != y->fde) return x->fde < y->fde ? -1 : 1;
    return x->sub < y->sub ? -1 : x->sub > y->sub;
}

/* The rows sorted by ``row_order``.  A linker writes most FDEs in address order; the
 * others (a hot function's cold part, placed apart, and the general path's rows: a
 * PLT's, at the lowest addresses, after the walk's) are few: each row that does not
 * follow the last one kept in place is taken out, those few are sorted and each is put
 * back by binary search, one ``memmove`` each (sorting all of libLLVM-14's 95k rows,
 * 600 of them out of order, was 31M instructions).  ``row_order`` is a total order
 * (no two rows share ``fde`` and ``sub``), so the result is a whole sort's.  0, or -1
 * with an error set. */
static int sort_rows(TableRow *rows, size_t count) {
    TableRow *stray = NULL;
    size_t strays = 0, cap = 0, kept = count ? 1 : 0;
    for (size_t r = 1; r < count; r++) {
        if (row_order(&rows[kept - 1], &rows[r]) <= 0) {
            rows[kept++] = rows[r];
        } else {
            if (room((void **)&stray, &cap, strays, sizeof *stray) < 0) {
                PyMem_Free(stray);
                return -1;
            }
            stray[strays++] = rows[r];
        }
    }
    if (!strays) return 0;
    qsort(stray, strays, sizeof *stray, row_order);
    /* From the back: rows[0, kept) are the kept rows not yet placed, rows[to, count)
     * final; each stray goes after the kept rows that precede it. */
    size_t to = count;
    for (size_t j = strays; j-- > 0;) {
        size_t lo = 0, hi = kept;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (row_order(&rows[mid], &stray[j]) > 0) hi = mid;
            else lo = mid + 1;
        }
        to -= kept - lo;
        memmove(rows + to, rows + lo, (kept - lo) * sizeof *rows);
        rows[--to] = stray[j];
        kept = lo;
    }
    PyMem_Free(stray);
    return 0;
}

/* The rows of the general path's functions: ``made`` holds, per FDE of ``todo``, a
 * tuple of its functions (``SFrameFunction``s; none: left out).  Their FDEs and FREs
 * are ``fdes_v2``'s (``encoded``: its answer for all of them, in this order).  0, or
 * -1 with an error set. */
static int general_rows(TableCtx *ctx, PyObject *made, PyObject **functions) {
    if (!PyList_Check(made) || PyList_GET_SIZE(made) != PyList_GET_SIZE(ctx->todo)) {
        PyErr_SetString(PyExc_TypeError, "general must give a list, one entry per FDE");
        return -1;
    }
    *functions = PyList_New(0);
    if (!*functions) return -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(made); i++) {
        PyObject *each = PyList_GET_ITEM(made, i);
        if (!PyTuple_Check(each)) {
            PyErr_SetString(PyExc_TypeError, "general must give tuples of functions");
            return -1;
        }
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(each); j++) {
            PyObject *func = PyTuple_GET_ITEM(each, j);
            if (!PyTuple_Check(func) || PyTuple_GET_SIZE(func) != 11) {
                PyErr_SetString(PyExc_TypeError, "a function must be an SFrameFunction");
                return -1;
            }
            unsigned long long start = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(func, 2));
            unsigned long long size = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(func, 3));
            if (PyErr_Occurred() ||
                room((void **)&ctx->row, &ctx->row_cap, ctx->rows, sizeof *ctx->row) < 0)
                return -1;
            ctx->row[ctx->rows++] = (TableRow){start, size, ctx->todo_fde[i], (uint32_t)j, 0,
                                               0, NO_ID, (int32_t)PyList_GET_SIZE(*functions),
                                               0};
            if (PyList_Append(*functions, func) < 0) return -1;
        }
    }
    return 0;
}

/* ``value``'s low ``size`` bytes at ``to`` in the file's byte order (one loop per
 * order: the order asked inside the loop was 2.5% of the pass's instructions). */
static inline void store_uint(uint8_t *to, uint64_t value, int size, int big) {
    if (big)
        for (int b = size - 1; b >= 0; b--, value >>= 8) to[b] = (uint8_t)value;
    else
        for (int b = 0; b < size; b++, value >>= 8) to[b] = (uint8_t)value;
}

/* A 32-bit field of a V2 FDE after its start field, ``at`` its offset in the FDE. */
static void put_word(uint8_t *tail, int at, uint32_t value, int big) {
    store_uint(tail + at - SF_FDE_START_BYTES, value, SF_SIZE_BYTES, big);
}

static uint32_t get_word(const uint8_t *tail, int at, int big) {
    uint32_t value = 0;
    for (int b = 0; b < SF_SIZE_BYTES; b++)
        value |= (uint32_t)tail[at - SF_FDE_START_BYTES + (big ? SF_SIZE_BYTES - 1 - b : b)]
                 << (8 * b);
    return value;
}

#define TAIL_BYTES (SF_FDE_V2_BYTES - SF_FDE_START_BYTES)

/* Where a body's FREs were first written among the FRE bytes (``at`` + 1; 0: not
 * yet), how many, how long they are and their FRE type: a later row of the same body
 * with as many FREs (the same pool range, so the same starts and tails) copies those
 * bytes in one memcpy.  A row of the same body may keep fewer (those at or past its
 * function's end are dropped), and its FRE type may then be smaller: it is written.
 * One per distinct body kept (by ``TableRow.body``), not one per FRE of the pool: the
 * pool's 475k places of libLLVM-14 were 11 MB, each page touched (34k bodies). */
typedef struct { size_t at1, len; uint32_t count; int type; } Written;

/* A fast-path row's FREs written to ``fres`` (each start in the smallest FRE type its
 * largest start fits, then its tail's bytes): that type, or -1 with an error set. */
static int write_fres(const TableCtx *ctx, const TableRow *row, const int *sizes, int types,
                      size_t longest, int big, Out *fres) {
    int64_t top = 0;
    for (uint32_t k = 0; k < row->count; k++) {
        int64_t at = ctx->pool[row->first + k].at;
        if (at < 0) {
            PyErr_SetString(PyExc_OverflowError, "can't convert negative int to unsigned");
            return -1;
        }
        if (at > top) top = at;
    }
    int type = fre_type_for((uint64_t)top, sizes, types), addr = sizes[type];
    size_t offset = fres->len;
    /* written in place, the room made once per row (a put per piece was 15%) */
    if (out_room(fres, row->count * ((size_t)addr + longest)) < 0) return -1;
    uint8_t *to = (uint8_t *)fres->buf + offset;
    for (uint32_t k = 0; k < row->count; k++) {
        const PoolFre *fre = &ctx->pool[row->first + k];
        if (addr < 8 && (uint64_t)fre->at >> (8 * addr)) {
            PyErr_SetString(PyExc_OverflowError, "an FRE start does not fit addr_size");
            return -1;
        }
        store_uint(to, (uint64_t)fre->at, addr, big);
        to += addr;
        const uint8_t *bytes = (const uint8_t *)PyBytes_AS_STRING(fre->tail);
        for (Py_ssize_t b = 0; b < PyBytes_GET_SIZE(fre->tail); b++) *to++ = bytes[b];
    }
    fres->len = (size_t)(to - (uint8_t *)fres->buf);
    return type;
}

/* The sorted rows written: each start (8 bytes, native order) to ``starts``, its FDE
 * after the start field to ``fdes``, its FREs to ``fres`` (``fdes_v2``'s bytes; the
 * general path's as ``encoded``, (FDE tails, FRE bytes, FRE count), gave them).  The
 * FRE count, or -1 with an error set. */
static long long write_rows(const TableCtx *ctx, PyObject *encoded, const int *sizes,
                            int types, long pauth_bit, int big, Out *starts, Out *fdes,
                            Out *fres, Written *written) {
    PyObject *tails = PyTuple_GET_ITEM(encoded, 0), *blob = PyTuple_GET_ITEM(encoded, 1);
    if (!PyTuple_Check(tails) || !PyBytes_Check(blob)) {
        PyErr_SetString(PyExc_TypeError, "fdes_v2 gave an unexpected answer");
        return -1;
    }
    const uint8_t *extra_fres = (const uint8_t *)PyBytes_AS_STRING(blob);
    Py_ssize_t extras = PyTuple_GET_SIZE(tails), extra_len = PyBytes_GET_SIZE(blob);
    long long total = 0;
    size_t longest = 0;  /* the longest tail: a row's FREs take at most count * (8 + it) */
    for (size_t t = 0; t < ctx->tails_used; t++)
        if ((size_t)PyBytes_GET_SIZE(ctx->tail[t]) > longest)
            longest = (size_t)PyBytes_GET_SIZE(ctx->tail[t]);
    if (out_room(starts, ctx->rows * sizeof ctx->row->start) < 0 ||
        out_room(fdes, ctx->rows * TAIL_BYTES) < 0)
        return -1;
    for (size_t r = 0; r < ctx->rows; r++) {
        const TableRow *row = &ctx->row[r];
        uint8_t tail[TAIL_BYTES] = {0};
        if ((unsigned long long)fres->len > 0xffffffffULL) {
            PyErr_SetString(PyExc_OverflowError, "an FDE field past its width");
            return -1;
        }
        if (put(starts, (const char *)&row->start, sizeof row->start) < 0) return -1;
        if (row->extra >= 0) {
            PyObject *own = PyTuple_GET_ITEM(tails, row->extra);
            if (row->extra >= extras || !PyBytes_Check(own) ||
                PyBytes_GET_SIZE(own) != TAIL_BYTES) {
                PyErr_SetString(PyExc_TypeError, "fdes_v2 gave an unexpected answer");
                return -1;
            }
            memcpy(tail, PyBytes_AS_STRING(own), TAIL_BYTES);
            uint32_t from = get_word(tail, SF_FDE_FRE_OFF_AT, big);
            uint32_t to = (Py_ssize_t)row->extra + 1 < extras ?
                get_word((const uint8_t *)PyBytes_AS_STRING(
                    PyTuple_GET_ITEM(tails, row->extra + 1)), SF_FDE_FRE_OFF_AT, big) :
                (uint32_t)extra_len;
            if (from > to || (Py_ssize_t)to > extra_len) {
                PyErr_SetString(PyExc_ValueError, "fdes_v2 gave FREs out of order");
                return -1;
            }
            put_word(tail, SF_FDE_FRE_OFF_AT, (uint32_t)fres->len, big);
            total += get_word(tail, SF_FDE_NUM_FRES_AT, big);
            if (put(fres, (const char *)extra_fres + from, to - from) < 0) return -1;
        } else {
            size_t offset = fres->len;
            int type;
            Written *w = row->body == NO_ID ? NULL : &written[row->body];
            if (row->count && w && w->at1 && w->count == row->count) {
                /* a body written before */
                if (out_room(fres, w->len) < 0) return -1;
                memcpy((uint8_t *)fres->buf + offset, (const uint8_t *)fres->buf + w->at1 - 1,
                       w->len);
                fres->len += w->len;
                type = w->type;
            } else {
                type = write_fres(ctx, row, sizes, types, longest, big, fres);
                if (type < 0) return -1;
                if (row->count && w && !w->at1)
                    *w = (Written){offset + 1, fres->len - offset, row->count, type};
            }
            if (row->size > 0xffffffffULL) {
                PyErr_SetString(PyExc_OverflowError, "an FDE field past its width");
                return -1;
            }
            put_word(tail, SF_FDE_SIZE_AT, (uint32_t)row->size, big);
            put_word(tail, SF_FDE_FRE_OFF_AT, (uint32_t)offset, big);
            put_word(tail, SF_FDE_NUM_FRES_AT, row->count, big);
            tail[SF_FDE_INFO_AT - SF_FDE_START_BYTES] =
                (uint8_t)(type | (row->b_key ? pauth_bit : 0));
            total += row->count;
        }
        if (put(fdes, (const char *)tail, TAIL_BYTES) < 0) return -1;
    }
    return total;
}

static void table_free(TableCtx *ctx) {
    PyMem_Free(ctx->body);
    PyMem_Free(ctx->pool);
    PyMem_Free(ctx->tail);
    PyMem_Free(ctx->row);
    PyMem_Free(ctx->todo_fde);
    ids_free(&ctx->seen);
    ids_free(&ctx->tail_ids);
    lowering_free(&ctx->l);
    Py_XDECREF(ctx->l.fre.shapes);
    Py_XDECREF(ctx->todo);
    Py_XDECREF(ctx->cies.cies);
}

/* The walk's rows sorted and written, the general path's functions among them: the
 * answer of ``eh_table_v2``, or None where ``general`` gives None. */
static PyObject *table_of(TableCtx *ctx, PyObject *general, PyObject *encoding) {
    PyObject *tails, *tail_of, *addr_sizes, *functions = NULL, *args = NULL,
        *encoded = NULL, *out = NULL;
    long pc_mask_bit, pauth_bit;
    int sizes[FRE_TYPES_MAX], big = ctx->l.target.big_endian;
    Out starts = {NULL, 0, 0, 0}, fdes = {NULL, 0, 0, 0}, fres = {NULL, 0, 0, 0};
    if (!PyArg_ParseTuple(encoding, "O!OO!ll:eh_table_v2 encoding", &PyDict_Type, &tails,
                          &tail_of, &PyTuple_Type, &addr_sizes, &pc_mask_bit, &pauth_bit))
        return NULL;
    int types = read_fre_sizes(addr_sizes, sizes);
    if (types < 0) return NULL;
    PyObject *made = PyObject_CallOneArg(general, ctx->todo);
    if (!made) return NULL;
    if (made == Py_None) return made;
    if (general_rows(ctx, made, &functions) < 0) goto done;
    PyObject *listed = PyList_AsTuple(functions);
    args = listed ? Py_BuildValue("(NOOOOll)", listed, big ? Py_True : Py_False, tails,
                                  tail_of, addr_sizes, pc_mask_bit, pauth_bit) : NULL;
    encoded = args ? fdes_v2(NULL, args) : NULL;
    if (!encoded) goto done;
    if (sort_rows(ctx->row, ctx->rows) < 0) goto done;
    Written *written = PyMem_Calloc(ctx->bodies + 1, sizeof *written);
    if (!written) {
        PyErr_NoMemory();
        goto done;
    }
    long long count = write_rows(ctx, encoded, sizes, types, pauth_bit, big, &starts, &fdes,
                                 &fres, written);
    PyMem_Free(written);
    if (count < 0) goto done;
    out = Py_BuildValue("(y#y#y#LnL)", starts.buf ? starts.buf : "", (Py_ssize_t)starts.len,
                        fdes.buf ? fdes.buf : "", (Py_ssize_t)fdes.len,
                        fres.buf ? fres.buf : "", (Py_ssize_t)fres.len, count,
                        (Py_ssize_t)ctx->rows, (long long)ctx->fdes);
done:
    Py_DECREF(made);
    Py_XDECREF(functions);
    Py_XDECREF(args);
    Py_XDECREF(encoded);
    out_free(&starts);
    out_free(&fdes);
    out_free(&fres);
    return out;
}

/* eh_table_v2(eh, address, address_size, cie_of, params, general, encoding)
 * -> (starts, FDEs, FRE bytes, FRE count, function count, FDE count), or None:
 * ``eh_functions``' pass to an SFrame V2 section's FDE table and FREs, sorted as
 * ``order_functions`` sorts a linked file's (by start, size, then FDE order).
 * ``starts``: each function's start, 8 bytes in this machine's order; ``FDEs``: each
 * FDE without its start field (placed later: ``place_fdes``).  ``general(todo)``: per
 * FDE the fast path leaves (their offsets, in order) a tuple of its functions, or None
 * (no table: the caller takes the reference path); ``encoding``: (tails, tail_of,
 * addr_sizes, pc_mask_bit, pauth_bit) as ``fdes_v2`` takes them.  None: the section is
 * out of the ordinary (as ``eh_functions``). */
PyObject *eh_table_v2(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer eh;
    unsigned long long address;
    int address_size;
    PyObject *params, *general, *encoding, *out = NULL;
    TableCtx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.cies.last_at = -1;
    if (!PyArg_ParseTuple(args, "y*KiOO!OO!:eh_table_v2", &eh, &address, &address_size,
                          &ctx.cies.cie_of, &PyDict_Type, &params, &general, &PyTuple_Type,
                          &encoding))
        return NULL;
    if (PyTuple_GET_SIZE(encoding) != 5) {
        PyErr_SetString(PyExc_TypeError, "encoding must be a 5-tuple");
        PyBuffer_Release(&eh);
        return NULL;
    }
    ctx.tails = PyTuple_GET_ITEM(encoding, 0);
    ctx.tail_of = PyTuple_GET_ITEM(encoding, 1);
    ctx.l.fre.shapes = PyDict_New();
    ctx.todo = PyList_New(0);
    ctx.cies.cies = PyDict_New();
    if (!PyDict_Check(ctx.tails)) {
        PyErr_SetString(PyExc_TypeError, "encoding's tails must be a dict");
        goto done;
    }
    if (!ctx.l.fre.shapes || !ctx.todo || !ctx.cies.cies ||
        !lowering_of(params, "eh_table_v2", &ctx.l))
        goto done;
    if (ctx.l.limits.version != 2) {
        PyErr_SetString(PyExc_ValueError, "eh_table_v2 makes SFrame V2");
        goto done;
    }
    int walked = eh_walk(eh.buf, eh.len, address, address_size, ctx.l.target.big_endian,
                         &ctx.l.target, table_fde, &ctx);
    if (walked > 0) {
        out = table_of(&ctx, general, encoding);
    } else if (walked == 0) {
        out = Py_None;
        Py_INCREF(out);
    }
done:
    table_free(&ctx);
    PyBuffer_Release(&eh);
    return out;
}
