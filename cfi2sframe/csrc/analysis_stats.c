/* stats' count in C (``analysis/stats.py``): ``stats_scan`` walks a linked file's
 * .eh_frame (dwarf_cfi.c's ``eh_walk``), replays each FDE as the ELF fast path does
 * (dwarf_replay.c's ``replay``, the conditions of sframe_fastpath.c's ``lower_fdes``)
 * and adds up the bytes its FREs take in an SFrame V2 and a V3 section, without
 * making an FRE: which FRE a state gives and its size in each version are Python's
 * answers, asked once per distinct state (this file holds no target fact).  Each
 * distinct (CIE, body) is replayed once, as eh_functions replays it (sframe_fastpath.c's
 * ``body_hash``): what its rows add up to serves every FDE of that body whose range
 * holds them all (a row at or past the end is dropped, so a shorter one is replayed).
 * The FDEs the fast path leaves to the general path are handed back.  The count goes
 * one FDE at a time (``stats_begin``, ``stats_row``, ``stats_end``), so verify_scan's
 * walk counts the same in its own replay (analysis_compare.c).  Reference: the
 * conversion (``sframe.build.lower_fdes`` and the encoders);
 * tests/differential/test_core_stats.py holds both equal. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "core.h"
#include "kept.h"

/* A state's answer: taken (an FRE; its bytes after the start in V2 and in V3) or not
 * (no default FRE: the general path).  Kept by the state for the call (kept.h's state
 * table; the dicts answer what it does not keep). */
typedef struct {
    StateKey key;
    int taken;
    long long v2, v3;
} SizeSlot;

/* A distinct (CIE, body) replayed (``same_body``'s fields), and what it gave with
 * every row kept: ``done`` the replay's answer (0: the general path, whatever the
 * range), its FREs, their bytes after the start and the last FRE's start, which a
 * range past it keeps all of. */
typedef struct {
    Py_ssize_t cie_at, at, len;
    int done;
    long long kept, v2, v3;
    int64_t last;
} StatsBody;

struct StatsCtx {
    SizeSlot *slot;
    PyObject *shapes, *shape_of, *sizes, *size_of, *todo;
    FastLimits limits;  /* V3's: a function is counted where both versions make it */
    int addr_sizes[FRE_TYPES_MAX];
    int naddr;
    /* the file so far */
    Py_ssize_t fdes, functions;
    long long v2, v3;
    uint64_t low, high;  /* the lowest and highest start of the functions counted */
    /* the FDE being replayed, its body's hash and index (NO_ID: none kept) */
    int64_t range, last;
    long long kept, fde_v2, fde_v3;
    int beyond;  /* an FRE at or past the end was dropped */
    uint64_t hash;
    uint32_t index;
    /* the bodies replayed: a hash (``body_hash``) -> index into ``body`` */
    KeptIds seen;
    StatsBody *body;
    size_t bodies, cap;
};

/* Python's answer for a state: the FRE's shape (``shape_of``), then its sizes
 * (``size_of``, a pair of ints), each kept in its dict.  1 taken, 0 none, -1 error. */
static int ask(StatsCtx *ctx, const State *s, long long *v2, long long *v3) {
    PyObject *key = state_key(s);
    if (!key) return -1;
    PyObject *shape = memo_lookup(ctx->shapes, key, ctx->shape_of);  /* borrowed */
    Py_DECREF(key);
    if (!shape) return -1;
    if (shape == Py_None) return 0;
    PyObject *sizes = memo_lookup(ctx->sizes, shape, ctx->size_of);  /* borrowed */
    if (!sizes) return -1;
    if (!PyTuple_Check(sizes) || PyTuple_GET_SIZE(sizes) != 2) {
        PyErr_SetString(PyExc_TypeError, "size_of must give a pair of ints");
        return -1;
    }
    *v2 = PyLong_AsLongLong(PyTuple_GET_ITEM(sizes, 0));
    *v3 = PyLong_AsLongLong(PyTuple_GET_ITEM(sizes, 1));
    if (PyErr_Occurred()) return -1;
    if (*v2 < 0 || *v3 < 0 || *v2 > 64 || *v3 > 64) {
        PyErr_SetString(PyExc_ValueError, "size_of gave an FRE size out of range");
        return -1;
    }
    return 1;
}

/* One row of the replay: its FRE counted where it starts inside the function (those at
 * or past the end are dropped, as ``lower_fdes`` drops them, but still need an FRE). */
int stats_row(void *raw, int64_t at, const State *s) {
    StatsCtx *ctx = raw;
    long long v2 = 0, v3 = 0;
    int found;
    SizeSlot *slot = STATE_SLOT(ctx->slot, s, &found);
    int taken;
    if (found) {
        taken = slot->taken;
        v2 = slot->v2;
        v3 = slot->v3;
    } else {
        taken = ask(ctx, s, &v2, &v3);
        if (taken < 0) return -1;
        if (slot) {
            slot->taken = taken;
            slot->v2 = v2;
            slot->v3 = v3;
        }
    }
    if (!taken) return 0;
    if (at < ctx->range) {
        ctx->kept++;
        ctx->last = at;
        ctx->fde_v2 += v2;
        ctx->fde_v3 += v3;
    } else {
        ctx->beyond = 1;
    }
    return 1;
}

static int leave(StatsCtx *ctx, const EhFde *e) {
    PyObject *offset = PyLong_FromSsize_t(e->start);
    if (!offset || PyList_Append(ctx->todo, offset) < 0) { Py_XDECREF(offset); return -1; }
    Py_DECREF(offset);
    return 1;
}

/* The FDE's replay answered (``done``: 1 done, 0 the general path) with its counts in
 * ``kept``, ``last``, ``fde_v2``, ``fde_v3``: counted where the fast path makes its
 * function in both versions (core.h's ``fast_path_fits``), else left in ``todo``. */
static int settle(StatsCtx *ctx, const EhFde *e, int done) {
    if (done == 0 || !fast_path_fits(&ctx->limits, ctx->kept)) return leave(ctx, e);
    /* The start size of the FRE type the encoder gives (the last start is at least 0) */
    long long addr =
        ctx->addr_sizes[fre_type_for((uint64_t)ctx->last, ctx->addr_sizes, ctx->naddr)];
    if (!ctx->functions || e->pc < ctx->low) ctx->low = e->pc;
    if (!ctx->functions || e->pc > ctx->high) ctx->high = e->pc;
    ctx->functions++;
    ctx->v2 += ctx->kept * addr + ctx->fde_v2;
    ctx->v3 += ctx->kept * addr + ctx->fde_v3;
    return 1;
}

/* See core.h.  Left where the fast path does not take it (core.h's
 * ``fast_path_takes``); counted from a replay of the same (CIE, body) where its FREs
 * all start within this range; else made ready for its own replay. */
int stats_begin(StatsCtx *ctx, const EhFde *e) {
    const CieInfo *cie = e->cie;
    ctx->fdes++;
    if (!fast_path_takes(&ctx->limits, e->range, cie->ra, cie->start_ok))
        return leave(ctx, e);
    ctx->hash = body_hash(cie->at, e->data + e->body, e->end - e->body);
    ctx->index = ids_get(&ctx->seen, ctx->hash);  /* (checked by ``same_body``) */
    if (ctx->index != NO_ID) {
        const StatsBody *b = &ctx->body[ctx->index];
        if (same_body(e, b->cie_at, b->at, b->len) &&
            (!b->done || b->last < (int64_t)e->range)) {
            ctx->kept = b->kept;
            ctx->last = b->last;
            ctx->fde_v2 = b->v2;
            ctx->fde_v3 = b->v3;
            return settle(ctx, e, b->done);
        }
    }
    ctx->range = (int64_t)e->range;
    ctx->kept = ctx->fde_v2 = ctx->fde_v3 = 0;
    ctx->last = 0;
    ctx->beyond = 0;
    return 0;
}

/* See core.h.  A replay that dropped no FRE is kept for later FDEs of its body (one
 * whose hash another body holds is not). */
int stats_end(StatsCtx *ctx, const EhFde *e, int done) {
    if (done < 0) return -1;
    if (ctx->index == NO_ID && !(done && ctx->beyond)) {
        if (room((void **)&ctx->body, &ctx->cap, ctx->bodies, sizeof *ctx->body) < 0 ||
            ids_put(&ctx->seen, ctx->hash, (uint32_t)ctx->bodies) < 0)
            return -1;
        ctx->body[ctx->bodies++] = (StatsBody){e->cie->at, e->body, e->end - e->body, done,
                                               ctx->kept, ctx->fde_v2, ctx->fde_v3,
                                               ctx->last};
    }
    return settle(ctx, e, done);
}

/* One FDE of stats_scan's own walk: begun, replayed where it must be, ended. */
static int stats_fde(void *raw, const EhFde *e) {
    StatsCtx *ctx = raw;
    int begun = stats_begin(ctx, e);
    if (begun != 0) return begun;
    Params p = e->params;
    int done = replay(e->data + e->body, e->end - e->body, e->cie->start, &p, stats_row,
                      ctx);
    return stats_end(ctx, e, done);
}

/* See core.h.  ``shapes``, ``sizes`` and ``params`` as stats_scan takes them. */
StatsCtx *stats_open(PyObject *shapes, PyObject *sizes, PyObject *params, Params *p,
                     int *address_size) {
    static char *names[] = {TARGET_NAMES, "address_size", "max_size", "max_fres_v3",
                            "addr_sizes", "size_of", NULL};
    PyObject *tracks, *big, *addr_tuple, *shape_of, *size_of;
    FastLimits limits = {0, 0, 0, 3};
    *p = (Params){0, 0, 0, 0, 0, 0, 0};
    if (!PyDict_Check(shapes) || !PyDict_Check(sizes)) {
        PyErr_SetString(PyExc_TypeError, "the shapes and sizes memos must be dicts");
        return NULL;
    }
    if (!read_params(params, "$" TARGET_FORMAT "iLLO!O:stats_scan", names,
                     TARGET_ARGS(p, &tracks, &big, &shape_of), address_size,
                     &limits.max_size, &limits.max_fres, &PyTuple_Type, &addr_tuple,
                     &size_of))
        return NULL;
    target_flags(p, tracks, big);
    limits.ra = p->ra;
    StatsCtx *ctx = PyMem_Calloc(1, sizeof *ctx);
    if (!ctx) { PyErr_NoMemory(); return NULL; }
    ctx->naddr = read_fre_sizes(addr_tuple, ctx->addr_sizes);
    ctx->slot = PyMem_Calloc(STATE_SLOTS, sizeof *ctx->slot);
    ctx->todo = PyList_New(0);
    if (ctx->naddr < 0 || !ctx->slot || !ctx->todo) {
        if (ctx->naddr >= 0 && !PyErr_Occurred()) PyErr_NoMemory();
        stats_close(ctx);
        return NULL;
    }
    ctx->shapes = shapes;
    ctx->shape_of = shape_of;
    ctx->sizes = sizes;
    ctx->size_of = size_of;
    ctx->limits = limits;
    ctx->index = NO_ID;
    return ctx;
}

/* See core.h: (FDEs, functions, V2 FRE bytes, V3 FRE bytes, todo, low, high). */
PyObject *stats_counts(const StatsCtx *ctx) {
    return Py_BuildValue("(nnLLOKK)", ctx->fdes, ctx->functions, ctx->v2, ctx->v3,
                         ctx->todo, (unsigned long long)ctx->low,
                         (unsigned long long)ctx->high);
}

/* See core.h: what ``stats_open`` made, freed (NULL: nothing). */
void stats_close(StatsCtx *ctx) {
    if (!ctx) return;
    Py_XDECREF(ctx->todo);
    PyMem_Free(ctx->slot);
    ids_free(&ctx->seen);
    PyMem_Free(ctx->body);
    PyMem_Free(ctx);
}

/* stats_scan(eh, eh_address, shapes, sizes, params)
 * -> (FDEs, functions, V2 FRE bytes, V3 FRE bytes, todo, low, high), or None.
 * ``eh``: a linked file's .eh_frame at ``eh_address``; ``shapes``: the caller's state
 * -> FRE fields memo, ``sizes`` its FRE fields -> (V2, V3) sizes memo.  ``params``, by
 * name (``analysis/stats._scan_params``): the replay's target (core.h's TARGET_NAMES;
 * ``shape_of`` gives a state's FRE fields after its start, or None: the general path),
 * the file's ``address_size``, the formats' ``max_size`` and ``max_fres_v3``,
 * ``addr_sizes`` (the FRE start sizes by FRE type, ``read_fre_sizes``) and ``size_of``
 * (an FRE's fields' bytes after its start in V2 and in V3).  ``functions``: the FDEs
 * the fast path makes a function of; the bytes: their FREs' (start included);
 * ``low``, ``high``: their lowest and highest start (0 without any); ``todo``: the
 * .eh_frame offsets of the other FDEs.  None: the section is out of the ordinary (the
 * Python reader reads it or reports it).  verify_scan counts the same in its own walk
 * where asked (``counts``). */
PyObject *stats_scan(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer eh;
    unsigned long long eh_address;
    int address_size;
    PyObject *params, *shapes, *sizes;
    Params p;
    if (!PyArg_ParseTuple(args, "y*KO!O!O!:stats_scan", &eh, &eh_address, &PyDict_Type,
                          &shapes, &PyDict_Type, &sizes, &PyDict_Type, &params))
        return NULL;
    PyObject *out = NULL;
    StatsCtx *ctx = stats_open(shapes, sizes, params, &p, &address_size);
    if (!ctx) goto done;
    if (address_size != 4 && address_size != 8) goto none;
    int walked = eh_walk(eh.buf, eh.len, eh_address, address_size, p.big_endian, &p,
                         stats_fde, ctx);
    if (walked < 0) goto done;
    if (walked == 0) goto none;
    out = stats_counts(ctx);
    goto done;
none:
    out = Py_None;
    Py_INCREF(out);
done:
    stats_close(ctx);
    PyBuffer_Release(&eh);
    return out;
}
