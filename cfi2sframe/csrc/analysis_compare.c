/* verify's check in the compiled core: does the SFrame FDE covering a function give
 * the rules its DWARF FDE gives, at every PC?  ``analysis/compare.py`` holds the full
 * check (the reference, and what names a difference); these only ever answer "the
 * same" or "not known here", and the caller runs the full check on the second.
 *
 * ``agree`` compares one function; ``verify_scan`` walks a file's .eh_frame and its
 * .sframe index itself and compares every function covered by one SFrame FDE alone,
 * so a file where all agree never builds an object per FDE.  A relocatable object's
 * two sections come relocated with every section at 0, and each function is placed
 * as if linked: at its section's base (by the name its relocation points into, as the
 * Python readers name it) plus its offset there, every section a span of its own.
 * The DWARF side is
 * the fast path's replay (dwarf_replay.c: CFA, FP, RA and the signed-RA bit; anything else
 * is "not known"); the SFrame side the FREs as stored.  What a state or an FRE means
 * is Python's answer, asked once per distinct one and kept as a value id
 * (``compare._FastCheck``; verify_scan keeps the ids it was given by the bytes of each
 * state and FRE too, ``kept.h``): this file compares ids and holds no rule of meaning.
 * tests/differential/test_core_verify.py (linked files) and test_core_verify_objects.py
 * (objects) hold both equal to the full check.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "kept.h"
#include "sframe.h"

/* A step function over [0, size) as verify compares one: (start, value id) pairs,
 * strictly increasing starts, no two neighbours with one id, the first at 0. */
typedef struct {
    int64_t *at;
    long *id;
    Py_ssize_t n, cap;
} Steps;

static int steps_push(Steps *st, int64_t at, long id) {
    if (st->n && st->id[st->n - 1] == id) return 1;
    if (st->n && st->at[st->n - 1] == at) {
        st->id[st->n - 1] = id;  /* the earlier step covered nothing */
        if (st->n > 1 && st->id[st->n - 2] == id) st->n--;
        return 1;
    }
    if (st->n == st->cap) {
        Py_ssize_t cap = st->cap ? 2 * st->cap : 16;
        int64_t *at_more = PyMem_Realloc(st->at, (size_t)cap * sizeof *at_more);
        if (!at_more) { PyErr_NoMemory(); return 0; }
        st->at = at_more;
        long *id_more = PyMem_Realloc(st->id, (size_t)cap * sizeof *id_more);
        if (!id_more) { PyErr_NoMemory(); return 0; }
        st->id = id_more;
        st->cap = cap;
    }
    st->at[st->n] = at;
    st->id[st->n] = id;
    st->n++;
    return 1;
}

static int steps_equal(const Steps *a, const Steps *b) {
    if (a->n != b->n) return 0;
    for (Py_ssize_t i = 0; i < a->n; i++)
        if (a->at[i] != b->at[i] || a->id[i] != b->id[i]) return 0;
    return 1;
}

static void steps_free(Steps *st) {
    PyMem_Free(st->at);
    PyMem_Free(st->id);
    st->at = NULL;
    st->id = NULL;
    st->n = st->cap = 0;
}

/* The id of ``key`` in ``ids``, else asked of ``id_of`` (and kept): >= 0, or -1 where
 * the answer is None (no fast answer), or -2 with a Python error set. */
static long id_for(PyObject *ids, PyObject *id_of, PyObject *key) {
    PyObject *found = memo_lookup(ids, key, id_of);  /* borrowed */
    if (!found) return -2;
    if (found == Py_None) return -1;
    long id = PyLong_AsLong(found);
    if (id == -1 && PyErr_Occurred()) return -2;
    return id < 0 ? -1 : id;
}

/* ``id`` kept in ``kept`` for ``key``: 1, or -1 with an error set. */
static int keep_id(Kept *kept, const void *key, size_t n, long id) {
    PyObject *value = PyLong_FromLong(id);
    return value && kept_put(kept, key, n, value) == 0 ? 1 : -1;
}

/* An id kept in ``kept`` for ``key`` (NULL: none kept), as ``id_for`` answers. */
static int kept_id(const Kept *kept, const void *key, size_t n, long *id) {
    PyObject *found = kept ? kept_get(kept, key, n) : NULL;
    if (found) *id = PyLong_AsLong(found);
    return found != NULL;
}

typedef struct {
    Steps *steps;
    PyObject *ids, *id_of;
    int64_t size;
    Kept *kept;  /* the ids by a state's fields (verify_scan's), or NULL */
} StepCtx;

/* What ``state_key`` reads of a state, as bytes: the kept table's key. */
static size_t state_bytes(const State *s, uint8_t *out) {
    int64_t fields[4] = {s->cfa_reg, s->cfa_off, s->has_fp ? s->fp_slot : 0,
                         s->has_ra ? s->ra_slot : 0};
    memcpy(out, fields, sizeof fields);
    out[sizeof fields] = (uint8_t)((s->has_fp ? 1 : 0) | (s->has_ra ? 2 : 0) |
                                   (s->signed_ra ? 4 : 0));
    return sizeof fields + 1;
}

static int emit_step(void *raw, int64_t at, const State *s) {
    StepCtx *ctx = raw;
    if (at >= ctx->size) return 1;  /* rows past the function are not compared */
    uint8_t bytes[4 * sizeof(int64_t) + 1];
    size_t n = state_bytes(s, bytes);
    long id;
    if (!kept_id(ctx->kept, bytes, n, &id)) {
        PyObject *key = state_key(s);
        if (!key) return -1;
        id = id_for(ctx->ids, ctx->id_of, key);
        Py_DECREF(key);
        if (id == -2) return -1;
        if (ctx->kept && keep_id(ctx->kept, bytes, n, id) < 0) return -1;
    }
    if (id == -1) return 0;
    return steps_push(ctx->steps, at, id) ? 1 : -1;
}

/* One replay's rows to verify's steps and to stats' count (``stats_row``) both, each
 * until it has no answer: the replay goes on while either still takes its rows. */
typedef struct {
    StepCtx *steps;
    StatsCtx *stats;
    int steps_on, stats_on;
} BothCtx;

static int emit_both(void *raw, int64_t at, const State *s) {
    BothCtx *ctx = raw;
    if (ctx->steps_on) {
        int taken = emit_step(ctx->steps, at, s);
        if (taken < 0) return -1;
        ctx->steps_on = taken;
    }
    if (ctx->stats_on) {
        int taken = stats_row(ctx->stats, at, s);
        if (taken < 0) return -1;
        ctx->stats_on = taken;
    }
    return ctx->steps_on || ctx->stats_on;
}

/* The DWARF side: the rows of ``body`` from ``start`` as steps over [0, size); with
 * ``stats``, the same rows counted there too, and the replay's answer for them in
 * ``counted`` (as a replay of its own would give it).  1 done, 0 not known, -1 error. */
static int dwarf_steps(const uint8_t *body, Py_ssize_t len, State start, const Params *p,
                       int64_t size, PyObject *states, PyObject *state_of, long none_id,
                       Kept *kept, Steps *out, StatsCtx *stats, int *counted) {
    out->n = 0;
    if (!steps_push(out, 0, none_id)) return -1;
    StepCtx ctx = {out, states, state_of, size, kept};
    if (!stats) return replay(body, len, start, p, emit_step, &ctx);
    BothCtx both = {&ctx, stats, 1, 1};
    int done = replay(body, len, start, p, emit_both, &both);
    if (done < 0) return -1;
    *counted = both.stats_on ? done : 0;
    return both.steps_on ? done : 0;
}

/* agree(body, start, code_align, data_align, sp, fp, ra, tracks_ra, big_endian, size,
 *       states, state_of, fres, fre_ids, fre_id_of, none_id) -> bool
 * One DWARF FDE (a CIE's state ``start``, then ``body``) against the FREs of the one
 * SFrame FDE covering it (``DecodedFre``s; each keyed by (info, words) in
 * ``fre_ids``): True where they give the same value at every PC of [0, size). */
PyObject *agree(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer body;
    PyObject *start, *states, *state_of, *fres, *fre_ids, *fre_id_of;
    Params p;
    State s;
    long long size;
    long none_id;
    /* The function's fields, then the checker's (the target's registers, the byte
     * order, the memos and the id of no value) as one tuple, built once per check. */
    if (!PyArg_ParseTuple(args, "y*OLLLO!(LLLppO!OO!Ol):agree", &body, &start,
                          &p.code_align, &p.data_align, &size, &PyTuple_Type, &fres, &p.sp,
                          &p.fp, &p.ra, &p.tracks_ra, &p.big_endian, &PyDict_Type, &states,
                          &state_of, &PyDict_Type, &fre_ids, &fre_id_of, &none_id))
        return NULL;
    Steps dwarf = {0}, sframe = {0};
    PyObject *out = NULL;
    int known = 0;
    if (!read_state(start, &s)) goto done;
    int replayed = dwarf_steps(body.buf, body.len, s, &p, size, states, state_of, none_id,
                               NULL, &dwarf, NULL, NULL);
    if (replayed < 0) goto done;
    if (replayed == 0) goto answer;
    if (!steps_push(&sframe, 0, none_id)) goto done;
    int64_t last = -1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(fres); i++) {
        PyObject *fre = PyTuple_GET_ITEM(fres, i);
        if (!PyTuple_Check(fre) || PyTuple_GET_SIZE(fre) < 6) {
            PyErr_SetString(PyExc_TypeError, "an FRE must be a DecodedFre");
            goto done;
        }
        long long at = PyLong_AsLongLong(PyTuple_GET_ITEM(fre, 0));
        if (at == -1 && PyErr_Occurred()) goto done;
        if (at <= last) goto answer;  /* out of order: the full check decides */
        last = at;
        if (at >= size) continue;
        PyObject *key = PyTuple_Pack(2, PyTuple_GET_ITEM(fre, 5), PyTuple_GET_ITEM(fre, 2));
        if (!key) goto done;
        long id = id_for(fre_ids, fre_id_of, key);
        Py_DECREF(key);
        if (id == -2) goto done;
        if (id == -1) goto answer;
        if (!steps_push(&sframe, at, id)) goto done;
    }
    known = steps_equal(&dwarf, &sframe);
answer:
    out = known ? Py_True : Py_False;
    Py_INCREF(out);
done:
    PyBuffer_Release(&body);
    steps_free(&dwarf);
    steps_free(&sframe);
    return out;
}

/* ---- verify_scan -------------------------------------------------------------- */

/* One SFrame FDE as the scan needs it. */
typedef struct {
    int64_t start, size;
    Py_ssize_t fres, count, index;  /* first FRE's offset in the section, FRE count */
    int addr_size, usable;          /* usable: PC-increment, not FLEX, with FREs */
} SfFde;

static int by_start(const void *x, const void *y) {
    const SfFde *a = x, *b = y;
    if (a->start != b->start) return a->start < b->start ? -1 : 1;
    if (a->size != b->size) return a->size < b->size ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

/* The SFrame side of one FDE as steps over [0, size): each FRE's (info, words) bytes
 * keyed in ``fre_ids``.  1 done, 0 not known, -1 error. */
static int sframe_steps(const SfSection *sec, const SfFreInfo *infos, const SfFde *fde,
                        int64_t size, PyObject *fre_ids, PyObject *fre_id_of, long none_id,
                        Kept *kept, Steps *out) {
    out->n = 0;
    if (!steps_push(out, 0, none_id)) return -1;
    Py_ssize_t pos = fde->fres;
    int64_t last = -1;
    for (Py_ssize_t n = 0; n < fde->count; n++) {
        SfFre fre;
        if (!sf_fre(sec, pos, fde->addr_size, 0, infos, &fre)) return 0;
        int64_t at = (int64_t)fre.start;
        if (at <= last) return 0;  /* out of order: the full check decides */
        last = at;
        if (at < size) {
            const uint8_t *stored = sec->d + fre.body - 1;
            size_t len = (size_t)(fre.next - fre.body + 1);
            long id;
            if (!kept_id(kept, stored, len, &id)) {
                PyObject *key = PyBytes_FromStringAndSize((const char *)stored,
                                                          (Py_ssize_t)len);
                if (!key) return -1;
                id = id_for(fre_ids, fre_id_of, key);
                Py_DECREF(key);
                if (id == -2) return -1;
                if (kept && len <= KEPT_KEY && keep_id(kept, stored, len, id) < 0) return -1;
            }
            if (id == -1) return 0;
            if (!steps_push(out, at, id)) return -1;
        }
        pos = fre.next;
    }
    return 1;
}

/* The SFrame section as ``decode.FdeTable`` read its header (verify_scan's keywords):
 * the FDE index, the FRE sub-section and the FDE info fields' masks (words.py). */
typedef struct {
    Py_ssize_t fde_start, entry, count, fre_start, fre_end, num_fres;
    int version, pcrel, fre_type_mask, pc_mask_bit, attr_size;
    unsigned long long address;
    long unused, fde_type_mask, flex_type;
    PyObject *addr_sizes, *table;
} Index;

/* A relocatable object's functions placed in one address space (verify_scan's
 * ``placed``): each section name's base, ``span`` apart, and every function checked to
 * lie within its span, so two sections' functions never meet, nor one's range reach
 * another's.  One side's relocated fields (field offset -> (section, S + A)) and
 * bases (section name -> base); the name whose base was looked up last is kept. */
typedef struct {
    PyObject *placements, *bases, *last;
    long long last_base;
} Side;

typedef struct {
    Side eh, sf;
    PyObject *unplaced;  /* the name of a field no relocation placed: "" */
    uint64_t span;
} Placed;

/* The address of a function whose start field is at ``field`` and reads ``read``:
 * its section's base plus its start in that section (the placement's S + A where
 * ``take_value``, as dwarf.cfi names a DWARF FDE; else the value read, as the SFrame
 * reader does), checked to lie with ``size`` within the span.  1, 0 where it cannot be
 * placed so, -1 with a Python error set. */
static int place(Side *side, const Placed *pl, Py_ssize_t field, int take_value,
                 uint64_t read, uint64_t size, int64_t *addr) {
    PyObject *key = PyLong_FromSsize_t(field);
    if (!key) return -1;
    PyObject *placed = PyDict_GetItemWithError(side->placements, key);  /* borrowed */
    Py_DECREF(key);
    if (!placed && PyErr_Occurred()) return -1;
    PyObject *name = pl->unplaced;
    uint64_t value = read;
    if (placed) {
        if (!PyTuple_Check(placed) || PyTuple_GET_SIZE(placed) != 2) return 0;
        name = PyTuple_GET_ITEM(placed, 0);
        if (take_value) {
            long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(placed, 1));
            if (v == -1 && PyErr_Occurred()) {  /* past 64 bits: the full check */
                PyErr_Clear();
                return 0;
            }
            if (v < 0) return 0;
            value = (uint64_t)v;
        }
    }
    if (value > pl->span || size > pl->span - value) return 0;
    if (name != side->last) {
        PyObject *base = PyDict_GetItemWithError(side->bases, name);  /* borrowed */
        if (!base) return PyErr_Occurred() ? -1 : 0;
        long long b = PyLong_AsLongLong(base);
        if (b == -1 && PyErr_Occurred()) return -1;
        if (b < 0 || (uint64_t)b > ((uint64_t)1 << 62) - pl->span) return 0;
        side->last = name;
        side->last_base = b;
    }
    *addr = side->last_base + (int64_t)value;
    return 1;
}

/* Every FDE of the index, checked as ``decode.FdeTable``/``_Reader`` check them (any
 * failure: 0, and the Python reader reports it), its FREs' bounds too; in an object
 * (``pl``), each placed by its section (one that cannot be: 0, the Python path). */
static int read_index(const Bytes *sf, const Index *x, Placed *pl, SfSection *sec_out,
                      SfFreInfo *infos, SfFde **out, Py_ssize_t *count) {
    Py_ssize_t n = x->count;
    int version = x->version;
    if (version < 1 || version > 3 || PyTuple_GET_SIZE(x->table) != 256 || n < 0 ||
        x->fde_start < 0 || x->fre_start < 0 || x->fre_end > sf->end ||
        x->fre_start > x->fre_end || x->entry < (version == 3 ? 16 : version == 2 ? 20 : 17)
        || n > (sf->end - x->fde_start) / x->entry)
        return 0;
    if (sf_fre_infos(x->table, infos) < 0) return -1;
    SfFde *fdes = PyMem_New(SfFde, n > 0 ? (size_t)n : 1);
    if (!fdes) { PyErr_NoMemory(); return -1; }
    Py_ssize_t total = 0;
    SfSection sec = {sf->d, x->fre_start, x->fre_end, sf->big, version, x->attr_size,
                     (unsigned)x->fde_type_mask, (unsigned)x->flex_type, (unsigned)x->unused};
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t pos = x->fde_start + i * x->entry;
        SfEntry e;
        if (!sf_entry(&sec, pos, &e)) goto bad;
        int fre_type = (int)(e.info & (unsigned)x->fre_type_mask);
        if (fre_type >= PyTuple_GET_SIZE(x->addr_sizes)) goto bad;
        int addr_size = (int)PyLong_AsLong(PyTuple_GET_ITEM(x->addr_sizes, fre_type));
        if (addr_size == -1 && PyErr_Occurred()) goto error;
        if (addr_size <= 0) goto bad;
        int pc_mask = (e.info & (unsigned)x->pc_mask_bit) != 0;
        if (pc_mask && !e.rep && version != 1) goto bad;  /* V1's comes from the target */
        SfFde *f = &fdes[i];
        uint64_t begins = x->address + (uint64_t)e.raw_start + (x->pcrel ? (uint64_t)pos : 0);
        if (begins >> 62 || e.size >> 32) goto bad;  /* far addresses: the Python reader */
        f->start = (int64_t)begins;
        if (pl) {
            int placed = place(&pl->sf, pl, pos, 0, begins, e.size, &f->start);
            if (placed < 0) goto error;
            if (placed == 0) goto bad;
        }
        f->size = (int64_t)e.size;
        f->fres = e.fres;
        f->count = (Py_ssize_t)e.count;
        f->index = i;
        f->addr_size = addr_size;
        f->usable = !pc_mask && !e.flex && e.count > 0;
        /* Every FRE within the sub-section, as the decoder requires. */
        Py_ssize_t at = e.fres;
        for (uint64_t k = 0; k < e.count; k++) {
            SfFre fre;
            if (!sf_fre(&sec, at, addr_size, e.flex, infos, &fre)) goto bad;
            at = fre.next;
        }
        total += (Py_ssize_t)e.count;
    }
    if (total != x->num_fres) goto bad;
    *sec_out = sec;
    *out = fdes;
    *count = n;
    return 1;
bad:
    PyMem_Free(fdes);
    return 0;
error:
    PyMem_Free(fdes);
    return -1;
}

/* What verify_scan's walk carries from one FDE to the next. */
typedef struct {
    const SfFde *fdes;
    Py_ssize_t nfdes;
    const SfSection *sec;
    const SfFreInfo *infos;
    PyObject *states, *state_of, *fre_ids, *fre_id_of;
    Steps *dwarf, *sframe;
    PyObject *todo;
    char *used;
    Py_ssize_t checked;
    long long ra;
    Placed *placed;  /* an object's placements, or NULL (linked) */
    Kept *states_kept, *fres_kept;  /* the ids asked so far, by state and FRE bytes */
    StatsCtx *stats;  /* stats' count in the same walk (``counts``), or NULL */
} ScanCtx;

/* One FDE of the walk: compared with the SFrame FDE starting at its PC where that one
 * covers it alone (``compare._Verifier.alone``), else left in ``todo``; with stats'
 * count (``stats``), counted too, from the comparison's replay where there is one. */
static int scan_fde(void *raw, const EhFde *e) {
    ScanCtx *ctx = raw;
    StatsCtx *stats = ctx->stats;
    int count = 1;  /* 0: stats' count wants this FDE's rows */
    if (stats && (count = stats_begin(stats, e)) < 0) return -1;
    const SfFde *fdes = ctx->fdes;
    const CieInfo *cie = e->cie;
    uint64_t pc = e->pc, range = e->range;
    int placed = 1;
    if (ctx->placed) {  /* an object: at its section's base, if it can be placed so */
        int64_t at = 0;
        placed = place(&ctx->placed->eh, ctx->placed, e->field, 1, pc, range, &at);
        if (placed < 0) return -1;
        pc = (uint64_t)at;
    }
    Py_ssize_t lo = 0, hi = ctx->nfdes;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if ((uint64_t)fdes[mid].start < pc) lo = mid + 1; else hi = mid;
    }
    const SfFde *f = lo < ctx->nfdes ? &fdes[lo] : NULL;
    int fast = 0;
    if (placed && f && (uint64_t)f->start == pc && f->usable && range > 0 &&
        range < ((uint64_t)1 << 62) && (uint64_t)f->size >= range &&
        cie->ra == ctx->ra && cie->start_ok &&
        !(lo > 0 && fdes[lo - 1].start + fdes[lo - 1].size > f->start) &&
        !(lo + 1 < ctx->nfdes && (uint64_t)fdes[lo + 1].start < pc + range)) {
        Params p = e->params;
        int counted = 0;
        int d = dwarf_steps(e->data + e->body, e->end - e->body, cie->start, &p,
                            (int64_t)range, ctx->states, ctx->state_of, 0,
                            ctx->states_kept, ctx->dwarf, count ? NULL : stats, &counted);
        if (d < 0) return -1;
        if (!count) {
            if (stats_end(stats, e, counted) < 0) return -1;
            count = 1;
        }
        if (d == 1) {
            int s = sframe_steps(ctx->sec, ctx->infos, f, (int64_t)range, ctx->fre_ids,
                                 ctx->fre_id_of, 0, ctx->fres_kept, ctx->sframe);
            if (s < 0) return -1;
            fast = s == 1 && steps_equal(ctx->dwarf, ctx->sframe);
        }
    }
    if (!count) {  /* not compared: replayed for the count alone */
        Params p = e->params;
        int done = replay(e->data + e->body, e->end - e->body, cie->start, &p, stats_row,
                          stats);
        if (stats_end(stats, e, done) < 0) return -1;
    }
    if (fast) {
        ctx->checked++;
        ctx->used[f->index] = 1;
        return 1;
    }
    PyObject *offset = PyLong_FromSsize_t(e->start);
    if (!offset || PyList_Append(ctx->todo, offset) < 0) { Py_XDECREF(offset); return -1; }
    Py_DECREF(offset);
    return 1;
}

/* ``placed`` as verify_scan takes it: None (a linked file), or (.eh_frame's placements,
 * their bases, .sframe's placements, their bases, the unplaced name, span).  1 an
 * object's, 0 none, -1 with an error set. */
static int read_placed(PyObject *placed, Placed *pl) {
    if (placed == Py_None) return 0;
    unsigned long long span;
    if (!PyArg_ParseTuple(placed, "O!O!O!O!O!K", &PyDict_Type, &pl->eh.placements,
                          &PyDict_Type, &pl->eh.bases, &PyDict_Type, &pl->sf.placements,
                          &PyDict_Type, &pl->sf.bases, &PyUnicode_Type, &pl->unplaced,
                          &span))
        return -1;
    if (span == 0 || span >> 32 > 2) {
        PyErr_SetString(PyExc_ValueError, "placed: a span of 1 to 2**33 bytes");
        return -1;
    }
    pl->span = span;
    pl->eh.last = pl->sf.last = NULL;
    pl->eh.last_base = pl->sf.last_base = 0;
    return 1;
}

/* ``counts`` as verify_scan takes it: (shapes, sizes, params), stats_scan's last three
 * arguments, for a linked file of the walk's target and address size (any other is a
 * ValueError: the count would not be stats_scan's).  1 with ``out`` open, -1 with an
 * error set. */
static int open_counts(PyObject *counts, int is_object, const Params *p, int address_size,
                       StatsCtx **out) {
    PyObject *shapes, *sizes, *params;
    if (!PyArg_ParseTuple(counts, "O!O!O!:counts", &PyDict_Type, &shapes, &PyDict_Type,
                          &sizes, &PyDict_Type, &params))
        return -1;
    Params q;
    int size;
    StatsCtx *stats = stats_open(shapes, sizes, params, &q, &size);
    if (!stats) return -1;
    if (is_object || size != address_size || q.sp != p->sp || q.fp != p->fp ||
        q.ra != p->ra || q.tracks_ra != p->tracks_ra || q.big_endian != p->big_endian) {
        stats_close(stats);
        PyErr_SetString(PyExc_ValueError, "counts: a linked file's, of the walk's target "
                                          "and address size");
        return -1;
    }
    *out = stats;
    return 1;
}

/* verify_scan(eh, sframe, *, eh_address, address_size, big_endian, fde_start, entry,
 *             count, version, pcrel, address, fre_start, fre_end, num_fres,
 *             fre_type_mask, pc_mask_bit, unused_bits, fde_type_mask, flex_type,
 *             fre_addr_sizes, attr_size, sp, fp, ra, tracks_ra, fre_table, states,
 *             state_of, fre_ids, fre_id_of, placed, counts)
 * -> (checked, used, todo) or, with ``counts``, (checked, used, todo, stats_scan's
 * answer), or None.
 * ``eh``: a linked file's .eh_frame at ``eh_address`` (an object's, relocated with every
 * section at 0, at 0); ``sframe``: its .sframe, its index (FDE table offset, entry
 * size, FDE count, version, PC-relative starts, section address, FRE sub-section start
 * and end, header FRE count) as ``decode.FdeTable`` read them; the FDE info fields'
 * masks (words.py); the target's registers; ``placed``: an object's placements (see
 * ``Placed``), else None.  Every parameter but the two sections is keyword-only, built
 * once by ``compare._scan``.  ``counts``: None, or stats_scan's (shapes, sizes, params)
 * for stats' count in this walk, each FDE's rows replayed once for both (``stats``).
 * ``checked``: functions found the same; ``used``: one byte
 * per SFrame FDE, 1 where such a function used it; ``todo``: the .eh_frame offsets of
 * the FDEs left to the full check.  None: anything in either section out of the
 * ordinary (the Python readers then report it or read it). */
PyObject *verify_scan(PyObject *Py_UNUSED(self), PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"eh", "sframe", "eh_address", "address_size", "big_endian",
                             "fde_start", "entry", "count", "version", "pcrel", "address",
                             "fre_start", "fre_end", "num_fres", "fre_type_mask",
                             "pc_mask_bit", "unused_bits", "fde_type_mask", "flex_type",
                             "fre_addr_sizes", "attr_size", "sp", "fp", "ra", "tracks_ra",
                             "fre_table", "states", "state_of", "fre_ids", "fre_id_of",
                             "placed", "counts", NULL};
    Py_buffer eh, sf;
    unsigned long long eh_address;
    int address_size, big;
    Index x;
    Params p = {0, 0, 0, 0, 0, 0, 0};
    PyObject *states, *state_of, *fre_ids, *fre_id_of, *placed_arg, *counts_arg;
    if (!PyArg_ParseTupleAndKeywords(
            args, kwargs, "y*y*$KipnnnipKnnniilllO!iLLLpO!O!OO!OOO:verify_scan", kwlist, &eh,
            &sf, &eh_address, &address_size, &big, &x.fde_start, &x.entry, &x.count,
            &x.version, &x.pcrel, &x.address, &x.fre_start, &x.fre_end, &x.num_fres,
            &x.fre_type_mask, &x.pc_mask_bit, &x.unused, &x.fde_type_mask, &x.flex_type,
            &PyTuple_Type, &x.addr_sizes, &x.attr_size, &p.sp, &p.fp, &p.ra, &p.tracks_ra,
            &PyTuple_Type, &x.table, &PyDict_Type, &states, &state_of, &PyDict_Type,
            &fre_ids, &fre_id_of, &placed_arg, &counts_arg))
        return NULL;
    p.big_endian = big;
    PyObject *out = NULL, *todo = NULL, *used = NULL;
    SfFde *fdes = NULL;
    Py_ssize_t nfdes = 0, checked = 0;
    Steps dwarf = {0}, sframe = {0};
    Kept states_kept = {NULL, 0, 0}, fres_kept = {NULL, 0, 0};
    Placed placed;
    StatsCtx *stats = NULL;
    int is_object = read_placed(placed_arg, &placed);
    if (is_object < 0) goto done;
    if (counts_arg != Py_None && open_counts(counts_arg, is_object, &p, address_size,
                                             &stats) < 0)
        goto done;
    if (address_size != 4 && address_size != 8) goto none;
    if (kept_init(&states_kept, 64) < 0 || kept_init(&fres_kept, 64) < 0) goto done;
    Bytes sfb = {sf.buf, sf.len, big};
    SfSection sec;
    SfFreInfo infos[256];
    int got = read_index(&sfb, &x, is_object ? &placed : NULL, &sec, infos, &fdes, &nfdes);
    if (got < 0) goto done;
    if (got == 0) goto none;
    qsort(fdes, (size_t)nfdes, sizeof *fdes, by_start);
    todo = PyList_New(0);
    used = PyByteArray_FromStringAndSize(NULL, nfdes);
    if (!todo || !used) goto done;
    memset(PyByteArray_AS_STRING(used), 0, (size_t)nfdes);
    ScanCtx ctx = {fdes, nfdes, &sec, infos, states, state_of, fre_ids, fre_id_of, &dwarf,
                   &sframe, todo, PyByteArray_AS_STRING(used), 0, p.ra,
                   is_object ? &placed : NULL, &states_kept, &fres_kept, stats};
    int walked = eh_walk(eh.buf, eh.len, eh_address, address_size, big, &p, scan_fde, &ctx);
    if (walked < 0) goto done;
    if (walked == 0) goto none;
    checked = ctx.checked;
    if (stats) {
        PyObject *counted = stats_counts(stats);
        if (counted) out = Py_BuildValue("(nOON)", checked, used, todo, counted);
    } else {
        out = Py_BuildValue("(nOO)", checked, used, todo);
    }
    goto done;
none:
    out = Py_None;
    Py_INCREF(out);
done:
    Py_XDECREF(todo);
    Py_XDECREF(used);
    PyMem_Free(fdes);
    steps_free(&dwarf);
    steps_free(&sframe);
    kept_free(&states_kept);
    kept_free(&fres_kept);
    stats_close(stats);
    PyBuffer_Release(&eh);
    PyBuffer_Release(&sf);
    return out;
}
