/* The compiled core: the ELF fast path's loop over one FDE's DWARF CFI bytes, and
 * the FRE encoder's loop.
 *
 * ``fast_fres`` is the same loop as ``sframe/fastpath.py``'s ``_run`` (its reference
 * and fallback): it tracks only what a default SFrame FRE holds (CFA register and
 * offset, FP and RA save slots, the signed-RA bit) and gives an FRE at each row
 * start where the state changes, or None when the CFI leaves that subset (the
 * caller then takes the general path).  Which FRE a state gives is Python's answer
 * (``_state_shape``), asked once per distinct state.  ``fres_bytes`` is
 * ``sframe/encode.py``'s ``_fres_bytes``: starts packed here, each FRE's info byte
 * and words asked of Python once per distinct FRE.
 * tests/differential/test_core.py holds the two equal on every distinct FDE body
 * of installed libraries and on random bytes; tests/unit/test_core.py holds the
 * opcode numbers below equal to dwarf/opcodes.py, their one home.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_core.h"

/* DWARF 5 section 7.24 (and GNU/AArch64 extensions); checked against CFA. */
enum {
    OP_NOP = 0x00, OP_ADVANCE_LOC1 = 0x02, OP_ADVANCE_LOC2 = 0x03,
    OP_ADVANCE_LOC4 = 0x04, OP_OFFSET_EXTENDED = 0x05, OP_RESTORE_EXTENDED = 0x06,
    OP_UNDEFINED = 0x07, OP_SAME_VALUE = 0x08, OP_REGISTER = 0x09,
    OP_REMEMBER_STATE = 0x0a, OP_RESTORE_STATE = 0x0b, OP_DEF_CFA = 0x0c,
    OP_DEF_CFA_REGISTER = 0x0d, OP_DEF_CFA_OFFSET = 0x0e, OP_EXPRESSION = 0x10,
    OP_OFFSET_EXTENDED_SF = 0x11, OP_VAL_EXPRESSION = 0x16, OP_MIPS_ADVANCE_LOC8 = 0x1d,
    OP_AARCH64_NEGATE_RA_STATE = 0x2d, OP_GNU_ARGS_SIZE = 0x2e,
    OP_ADVANCE_LOC = 0x40, OP_OFFSET = 0x80, OP_RESTORE = 0xc0,
};

/* A number as the Python loop holds it: exact when it fits 64 bits; else ``huge``.
 * A huge number the loop never uses (an ignored register's slot, a GNU_args_size)
 * changes nothing; one in a row the loop emits would give an FRE no default FRE can
 * hold, so the Python loop gives up there too (the general path decides). */
typedef struct { int64_t v; int huge; } Num;

enum { H_CFA_REG = 1, H_CFA_OFF = 2, H_FP = 4, H_RA = 8 };

typedef struct {
    const uint8_t *data;
    Py_ssize_t pos, end;
    int failed;  /* the CFI left the subset, or was truncated: fall back */
} Reader;

/* LEB128 read into 128 bits (exact for numbers of up to 17 bytes; longer ones with
 * bits past 120 count as huge), then held as a Num. */
static Num leb(Reader *r, int is_signed) {
    unsigned __int128 result = 0;
    int shift = 0, past = 0;
    uint8_t byte;
    do {
        if (r->pos >= r->end) { r->failed = 1; return (Num){0, 0}; }
        byte = r->data[r->pos++];
        if (shift < 120) result |= (unsigned __int128)(byte & 0x7f) << shift;
        else if (byte & 0x7f) past = 1;
        shift += 7;
    } while (byte & 0x80);
    __int128 value = (__int128)result;
    if (is_signed && (byte & 0x40) && shift < 128) value -= (__int128)1 << shift;
    if (past || value > INT64_MAX || value < INT64_MIN) return (Num){0, 1};
    return (Num){(int64_t)value, 0};
}

static Num uleb(Reader *r) { return leb(r, 0); }
static Num sleb(Reader *r) { return leb(r, 1); }

static Num times(Num a, int64_t b) {
    Num out = {0, a.huge};
    if (!out.huge && __builtin_mul_overflow(a.v, b, &out.v)) out.huge = 1;
    return out;
}

static int is_reg(Num reg, int64_t which) { return !reg.huge && reg.v == which; }

static PyObject *slot(int has, int64_t value) {
    if (!has) Py_RETURN_NONE;
    return PyLong_FromLongLong(value);
}

PyObject *state_key(const State *s) {
    PyObject *fp = slot(s->has_fp, s->fp_slot);
    PyObject *ra = slot(s->has_ra, s->ra_slot);
    if (!fp || !ra) { Py_XDECREF(fp); Py_XDECREF(ra); return NULL; }
    PyObject *key = Py_BuildValue("(LLNNO)", (long long)s->cfa_reg, (long long)s->cfa_off,
                                  fp, ra, s->signed_ra ? Py_True : Py_False);
    return key;
}

static int same(const State *a, const State *b) {
    return a->cfa_reg == b->cfa_reg && a->cfa_off == b->cfa_off && a->has_fp == b->has_fp &&
        (!a->has_fp || a->fp_slot == b->fp_slot) && a->has_ra == b->has_ra &&
        (!a->has_ra || a->ra_slot == b->ra_slot) && a->signed_ra == b->signed_ra;
}

int read_state(PyObject *tuple, State *s) {
    PyObject *fp, *ra;
    long long cfa_reg, cfa_off;
    int signed_ra;
    if (!PyArg_ParseTuple(tuple, "LLOOp", &cfa_reg, &cfa_off, &fp, &ra, &signed_ra))
        return 0;
    s->cfa_reg = cfa_reg;
    s->cfa_off = cfa_off;
    s->has_fp = fp != Py_None;
    s->has_ra = ra != Py_None;
    s->fp_slot = s->has_fp ? PyLong_AsLongLong(fp) : 0;
    s->ra_slot = s->has_ra ? PyLong_AsLongLong(ra) : 0;
    s->signed_ra = signed_ra;
    s->huge = 0;
    return !PyErr_Occurred();
}

static void set(int64_t *field, int *huge, int bit, Num value) {
    *field = value.v;
    *huge = value.huge ? (*huge | bit) : (*huge & ~bit);
}

#define STACK_MAX 64

/* See _core.h. */
int replay(const uint8_t *data, Py_ssize_t len, State s, const Params *p, Emit emit,
           void *ctx) {
    State initial = s, last = {0, 0, 0, 0, 0, 0, 0, 0}, stack[STACK_MAX];
    int depth = 0, have_last = 0;
    Reader r = {data, 0, len, 0};
    const long long code_align = p->code_align, data_align = p->data_align;
    const long long sp = p->sp, fp = p->fp, ra = p->ra;
    int64_t at = 0;
    int at_huge = 0;  /* the row start is past 64 bits (a huge 8-byte advance) */
    for (;;) {
        Num delta = {0, 0};
        if (r.failed) break;  /* a truncated operand of the last operation */
        if (r.pos < r.end) {
            uint8_t op = r.data[r.pos++];
            uint8_t high = op & 0xc0;
            if (high == OP_ADVANCE_LOC) {
                delta = times((Num){op & 0x3f, 0}, code_align);
            } else if (high == OP_OFFSET || op == OP_OFFSET_EXTENDED ||
                       op == OP_OFFSET_EXTENDED_SF) {
                Num reg, value;
                if (high == OP_OFFSET) {
                    reg = (Num){op & 0x3f, 0};
                    value = uleb(&r);
                } else {
                    reg = uleb(&r);
                    value = op == OP_OFFSET_EXTENDED_SF ? sleb(&r) : uleb(&r);
                }
                if (r.failed) break;
                if (is_reg(reg, fp)) {
                    set(&s.fp_slot, &s.huge, H_FP, times(value, data_align));
                    s.has_fp = 1;
                } else if (is_reg(reg, ra)) {
                    set(&s.ra_slot, &s.huge, H_RA, times(value, data_align));
                    s.has_ra = 1;
                } else if (is_reg(reg, sp)) {
                    r.failed = 1;
                    break;
                }
                continue;
            } else if (op == OP_DEF_CFA_OFFSET) {
                if (s.cfa_reg == NO_CFA && !(s.huge & H_CFA_REG)) { r.failed = 1; break; }
                set(&s.cfa_off, &s.huge, H_CFA_OFF, uleb(&r));
                continue;
            } else if (high == OP_RESTORE || op == OP_RESTORE_EXTENDED) {
                Num reg = high == OP_RESTORE ? (Num){op & 0x3f, 0} : uleb(&r);
                if (r.failed) break;
                if (is_reg(reg, fp)) {
                    s.fp_slot = initial.fp_slot;
                    s.has_fp = initial.has_fp;
                    s.huge &= ~H_FP;
                } else if (is_reg(reg, ra)) {
                    s.ra_slot = initial.ra_slot;
                    s.has_ra = initial.has_ra;
                    s.huge &= ~H_RA;
                } else if (is_reg(reg, sp)) {
                    r.failed = 1;
                    break;
                }
                continue;
            } else if (op == OP_DEF_CFA_REGISTER) {
                if (s.cfa_reg == NO_CFA && !(s.huge & H_CFA_REG)) { r.failed = 1; break; }
                set(&s.cfa_reg, &s.huge, H_CFA_REG, uleb(&r));
                continue;
            } else if (op == OP_DEF_CFA) {
                set(&s.cfa_reg, &s.huge, H_CFA_REG, uleb(&r));
                set(&s.cfa_off, &s.huge, H_CFA_OFF, uleb(&r));
                continue;
            } else if (op == OP_REMEMBER_STATE) {
                if (depth == STACK_MAX) { r.failed = 1; break; }
                stack[depth++] = s;
                continue;
            } else if (op == OP_RESTORE_STATE) {
                if (!depth) { r.failed = 1; break; }
                s = stack[--depth];
                continue;
            } else if (op == OP_GNU_ARGS_SIZE) {
                uleb(&r);
                continue;
            } else if (op == OP_NOP) {
                continue;
            } else if (op == OP_ADVANCE_LOC1 || op == OP_ADVANCE_LOC2 || op == OP_ADVANCE_LOC4 ||
                       op == OP_MIPS_ADVANCE_LOC8) {
                int size = op == OP_ADVANCE_LOC1 ? 1 : op == OP_ADVANCE_LOC2 ? 2 :
                    op == OP_ADVANCE_LOC4 ? 4 : 8;
                if (r.pos + size > r.end) { r.failed = 1; break; }
                uint64_t value = 0;
                for (int i = 0; i < size; i++) {
                    int shift = p->big_endian ? 8 * (size - 1 - i) : 8 * i;
                    value |= (uint64_t)r.data[r.pos + i] << shift;
                }
                r.pos += size;
                delta = times((Num){(int64_t)value, value > (uint64_t)INT64_MAX}, code_align);
            } else if (op == OP_UNDEFINED || op == OP_SAME_VALUE) {
                Num reg = uleb(&r);
                if (r.failed || is_reg(reg, sp) || is_reg(reg, ra) ||
                    (is_reg(reg, fp) && op == OP_UNDEFINED)) {
                    r.failed = 1;
                    break;
                }
                if (is_reg(reg, fp)) { s.has_fp = 0; s.huge &= ~H_FP; }
                continue;
            } else if (op == OP_REGISTER) {
                Num reg = uleb(&r);
                uleb(&r);
                if (r.failed || is_reg(reg, sp) || is_reg(reg, fp) || is_reg(reg, ra)) {
                    r.failed = 1;
                    break;
                }
                continue;
            } else if (op == OP_EXPRESSION || op == OP_VAL_EXPRESSION) {
                Num reg = uleb(&r);
                Num length = uleb(&r);
                if (r.failed || length.huge || length.v > (int64_t)(r.end - r.pos)) {
                    r.failed = 1;
                    break;
                }
                r.pos += (Py_ssize_t)length.v;
                if (is_reg(reg, sp) || is_reg(reg, fp) || is_reg(reg, ra)) {
                    r.failed = 1;
                    break;
                }
                continue;
            } else if (op == OP_AARCH64_NEGATE_RA_STATE && p->tracks_ra) {
                s.signed_ra = !s.signed_ra;
                continue;
            } else {
                r.failed = 1;
                break;
            }
            if (r.failed) break;
            if (!delta.v && !delta.huge) continue;
        }
        /* The row in force from ``at`` ends here; an unchanged state adds nothing.  A
         * row the loop emits with a huge number has no default FRE: give up, as the
         * Python loop does when it finds no FRE shape for it. */
        if (!have_last || !same(&s, &last) || s.huge) {
            if (s.huge || at_huge) { r.failed = 1; break; }
            int taken = emit(ctx, at, &s);
            if (taken <= 0) return taken;
            last = s;
            have_last = 1;
        }
        if (r.pos >= r.end) break;
        /* The Python loop's row starts are unbounded: a row emitted past 64 bits is
         * left to it (only an emitted one: an unchanged state adds no row). */
        if (delta.huge || __builtin_add_overflow(at, delta.v, &at)) at_huge = 1;
    }
    return r.failed ? 0 : 1;
}

/* Each changed state as an FRE (a ``Fre`` named tuple), its fields after
 * ``start`` found by state key in ``shapes``, or asked of ``shape_of`` (whose answer,
 * None included, is kept there).  The rules that map a state to an FRE stay in
 * Python (``fastpath._state_shape``, from ``arch/``): this file holds no target fact. */
/* A whole file's loop meets a few hundred distinct states: each one's entry of
 * ``shapes`` (borrowed; the dict outlives the call) kept by the state itself, so the
 * key tuple is built and looked up once per distinct state, not once per FRE.  A full
 * table only stops taking entries. */
#define MEMO_SLOTS 4096
typedef struct { State s; PyObject *shape; } MemoSlot;
typedef struct { MemoSlot slot[MEMO_SLOTS]; } StateMemo;

static size_t state_hash(const State *s) {
    uint64_t h = (uint64_t)s->cfa_reg * 0x9e3779b97f4a7c15ULL ^ (uint64_t)s->cfa_off;
    h = h * 31 + (s->has_fp ? (uint64_t)s->fp_slot * 2 + 1 : 0);
    h = h * 31 + (s->has_ra ? (uint64_t)s->ra_slot * 2 + 1 : 0);
    h = h * 31 + (uint64_t)s->signed_ra;
    return (size_t)(h ^ (h >> 29));
}

static PyObject **memo_slot(StateMemo *m, const State *s, int *found) {
    size_t at = state_hash(s) % MEMO_SLOTS;
    for (int probe = 0; probe < 16; probe++, at = (at + 1) % MEMO_SLOTS) {
        MemoSlot *slot = &m->slot[at];
        if (!slot->shape) { *found = 0; slot->s = *s; return &slot->shape; }
        if (same(&slot->s, s)) { *found = 1; return &slot->shape; }
    }
    *found = 0;
    return NULL;
}

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
    PyObject **kept = ctx->memo && !s->huge ? memo_slot(ctx->memo, s, &hit) : NULL;
    PyObject *shape = hit ? *kept : NULL;
    if (!shape) {
        PyObject *key = state_key(s);
        if (!key) return -1;
        shape = memo_lookup(ctx->shapes, key, ctx->shape_of);  /* borrowed */
        Py_DECREF(key);
        if (!shape) return -1;
        if (kept) *kept = shape;
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

/* fast_fres(body, start, code_align, data_align, sp, fp, ra, tracks_ra, big_endian,
 *           fre_type, shapes, shape_of) -> tuple of FREs, or None (general path). */
static PyObject *fast_fres(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer body;
    PyObject *start, *fre_type;
    Params p;
    State s;
    FreCtx ctx;
    if (!PyArg_ParseTuple(args, "y*OLLLLLppO!O!O", &body, &start, &p.code_align,
                          &p.data_align, &p.sp, &p.fp, &p.ra, &p.tracks_ra, &p.big_endian,
                          &PyType_Type, &fre_type, &PyDict_Type, &ctx.shapes, &ctx.shape_of))
        return NULL;
    if (!PyType_IsSubtype((PyTypeObject *)fre_type, &PyTuple_Type)) {
        PyBuffer_Release(&body);
        PyErr_SetString(PyExc_TypeError, "fre_type must be a tuple type");
        return NULL;
    }
    ctx.fre_type = (PyTypeObject *)fre_type;
    ctx.memo = NULL;
    ctx.made = NULL;
    if (!read_state(start, &s)) { PyBuffer_Release(&body); return NULL; }
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

/* lower_fdes(fdes, cies, version, max_size, max_fres_v3, sp, fp, ra, tracks_ra,
 *            big_endian, fre_type, shapes, shape_of, function_type, direct)
 * -> list: for each FDE (``dwarf.cfi.Fde``) its ``SFrameFunction``, or None where the
 * general path decides (``sframe.build.lower_fdes`` is this loop's reference: the
 * same conditions, FREs and fields).  ``cies``: CIE offset -> (start state or None,
 * code_align, data_align, ra, b_key, signal), made in Python once per CIE; ``direct``:
 * (CIE offset, body) -> FREs or None, the caller's memo. */
static PyObject *lower_fdes(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *fdes, *cies, *fre_type, *func_type, *direct;
    int version, tracks_ra, big;
    long long max_size, max_fres, sp, fp, ra;
    FreCtx ctx = {NULL, NULL, NULL, NULL, NULL, NULL};
    if (!PyArg_ParseTuple(args, "O!O!iLLLLLppO!O!OO!O!", &PyTuple_Type, &fdes,
                          &PyDict_Type, &cies, &version, &max_size, &max_fres, &sp, &fp, &ra,
                          &tracks_ra, &big, &PyType_Type, &fre_type, &PyDict_Type,
                          &ctx.shapes, &ctx.shape_of, &PyType_Type, &func_type,
                          &PyDict_Type, &direct))
        return NULL;
    PyTypeObject *ftype = (PyTypeObject *)func_type;
    if (!PyType_IsSubtype((PyTypeObject *)fre_type, &PyTuple_Type) ||
        !PyType_IsSubtype(ftype, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "fre_type and function_type must be tuple types");
        return NULL;
    }
    ctx.fre_type = (PyTypeObject *)fre_type;
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
        long long size = PyLong_AsLongLong(PyTuple_GET_ITEM(fde, 3));
        if (size == -1 && PyErr_Occurred()) { PyErr_Clear(); goto store; }
        PyObject *cie = PyDict_GetItemWithError(cies, PyTuple_GET_ITEM(fde, 5));
        if (!cie) { if (PyErr_Occurred()) goto fail_made; goto store; }
        /* (start state or None, code_align, data_align, ra, b_key, signal) */
        PyObject *start = PyTuple_GET_ITEM(cie, 0);
        long long cie_ra = PyLong_AsLongLong(PyTuple_GET_ITEM(cie, 3));
        if (cie_ra == -1 && PyErr_Occurred()) { PyErr_Clear(); goto store; }
        if (size <= 0 || size > max_size || cie_ra != ra || start == Py_None) goto store;
        PyObject *key = PyTuple_Pack(2, PyTuple_GET_ITEM(fde, 5), PyTuple_GET_ITEM(fde, 6));
        if (!key) goto fail_made;
        PyObject *fres = PyDict_GetItemWithError(direct, key);  /* borrowed */
        if (fres) {
            Py_INCREF(fres);
        } else if (PyErr_Occurred()) {
            Py_DECREF(key);
            goto fail_made;
        } else {
            Params p = {0, 0, sp, fp, ra, tracks_ra, big};
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
            if (at < size) break;
            kept--;
        }
        if (kept < count) {
            /* Only the tail can be past the end: starts grow along the tuple. */
            PyObject *cut = PyTuple_GetSlice(fres, 0, kept);
            Py_DECREF(fres);
            if (!cut) goto fail_made;
            fres = cut;
        }
        if (version >= 3 && kept > max_fres) { Py_DECREF(fres); goto store; }
        PyObject *func = ftype->tp_alloc(ftype, 11);
        if (!func) { Py_DECREF(fres); goto fail_made; }
        PyObject *signal = version == 3 && PyObject_IsTrue(PyTuple_GET_ITEM(cie, 5)) ?
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

static PyObject *fres_bytes(PyObject *Py_UNUSED(self), PyObject *args) {
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

/* fdes_v2(functions, big_endian, tails, tail_of, addr_sizes, pc_mask_bit, pauth_bit)
 * -> (FDE tails, FRE bytes, FRE count): ``encode.build_v2``'s loop (its reference).
 * Per function (``SFrameFunction``, in FDE order) its FDE without the start field,
 * its FREs at the end of the FRE bytes; functions sharing one FRE tuple share its
 * encoding.  ``addr_sizes``: the FRE start size by FRE type (smallest first). */
static PyObject *fdes_v2(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *functions, *tails, *tail_of, *addr_sizes;
    int big;
    long pc_mask_bit, pauth_bit;
    if (!PyArg_ParseTuple(args, "O!pO!OO!ll", &PyTuple_Type, &functions, &big, &PyDict_Type,
                          &tails, &tail_of, &PyTuple_Type, &addr_sizes, &pc_mask_bit,
                          &pauth_bit))
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(functions), types = PyTuple_GET_SIZE(addr_sizes);
    PyObject *fde_tails = PyTuple_New(n), *memo = PyDict_New(), *blob = NULL, *out = NULL;
    TailMemo *kept = PyMem_Calloc(1, sizeof(TailMemo));
    char *buf = NULL;
    Py_ssize_t used = 0, cap = 0;
    unsigned long long num_fres = 0;
    if (!fde_tails || !memo || !kept) {
        if (!kept) PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *func = PyTuple_GET_ITEM(functions, i);
        if (!PyTuple_Check(func) || PyTuple_GET_SIZE(func) != 11) {
            PyErr_SetString(PyExc_TypeError, "a function must be an SFrameFunction");
            goto done;
        }
        if (PyObject_IsTrue(PyTuple_GET_ITEM(func, 9))) {  /* flex */
            PyErr_Format(PyExc_TypeError, "V2 has no FLEX FDE (function '%U')",
                         PyTuple_GET_ITEM(func, 0));
            goto done;
        }
        PyObject *fres = PyTuple_GET_ITEM(func, 4);
        if (!PyTuple_Check(fres)) {
            PyErr_SetString(PyExc_TypeError, "a function's FREs must be a tuple");
            goto done;
        }
        PyObject *id = PyLong_FromVoidPtr(fres);
        if (!id) goto done;
        PyObject *hit = PyDict_GetItemWithError(memo, id);  /* (fre type, bytes) */
        if (!hit) {
            if (PyErr_Occurred()) { Py_DECREF(id); goto done; }
            unsigned long long top = 0;
            for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(fres); k++) {
                unsigned long long at = PyLong_AsUnsignedLongLong(
                    PyTuple_GET_ITEM(PyTuple_GET_ITEM(fres, k), 0));
                if (PyErr_Occurred()) { Py_DECREF(id); goto done; }
                if (at > top) top = at;
            }
            long type = 0, size = 0;
            for (; type < types; type++) {
                size = PyLong_AsLong(PyTuple_GET_ITEM(addr_sizes, type));
                if (size >= 8 || top < (1ULL << (8 * size))) break;
            }
            if (type == types) {
                PyErr_SetString(PyExc_OverflowError, "an FRE start past every FRE type");
                Py_DECREF(id);
                goto done;
            }
            PyObject *encoded = encode_fres(fres, (int)size, big, tails, tail_of, kept);
            if (!encoded) { Py_DECREF(id); goto done; }
            PyObject *entry = Py_BuildValue("(lN)", type, encoded);
            if (!entry || PyDict_SetItem(memo, id, entry) < 0) {
                Py_XDECREF(entry);
                Py_DECREF(id);
                goto done;
            }
            Py_DECREF(entry);
            hit = PyDict_GetItemWithError(memo, id);
            if (!hit) { Py_DECREF(id); goto done; }
        }
        Py_DECREF(id);
        long type = PyLong_AsLong(PyTuple_GET_ITEM(hit, 0));
        PyObject *encoded = PyTuple_GET_ITEM(hit, 1);
        unsigned long long size = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(func, 3));
        unsigned long long rep = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(func, 7));
        if (PyErr_Occurred()) goto done;
        Py_ssize_t count = PyTuple_GET_SIZE(fres);
        if (size > 0xffffffffULL || rep > 0xff || (unsigned long long)used > 0xffffffffULL ||
            (unsigned long long)count > 0xffffffffULL) {
            PyErr_SetString(PyExc_OverflowError, "an FDE field past its width");
            goto done;
        }
        long info = type | (PyObject_IsTrue(PyTuple_GET_ITEM(func, 6)) ? pc_mask_bit : 0) |
            (PyObject_IsTrue(PyTuple_GET_ITEM(func, 5)) ? pauth_bit : 0);
        uint8_t tail[16];
        uint32_t words[3] = {(uint32_t)size, (uint32_t)used, (uint32_t)count};
        for (int w = 0; w < 3; w++)
            for (int b = 0; b < 4; b++)
                tail[4 * w + (big ? 3 - b : b)] = (uint8_t)(words[w] >> (8 * b));
        tail[12] = (uint8_t)info;
        tail[13] = (uint8_t)rep;
        tail[14] = tail[15] = 0;
        PyObject *packed = PyBytes_FromStringAndSize((const char *)tail, 16);
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
    Py_XDECREF(memo);
    Py_XDECREF(blob);
    PyMem_Free(buf);
    PyMem_Free(kept);
    return out;
}

/* decode_fres(data, pos, end, count, addr_size, big_endian, flex, fre_type, table)
 * -> (tuple of FREs, position after them), or None where anything is out of order
 * (the Python loop, ``decode._Reader.fres``, then raises the located error).  ``table``
 * holds per info byte (base_fp, word count, word width or 0 when invalid, mangled_ra,
 * size code): the bit layouts stay in Python (``sframe/words.py``).  Each FRE is a
 * ``fre_type`` (``DecodedFre``): start, base_fp, words, mangled_ra, size code, info. */
static PyObject *decode_fres(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer data;
    Py_ssize_t pos, end, count;
    int addr_size, big_endian, flex;
    PyObject *fre_type, *table;
    if (!PyArg_ParseTuple(args, "y*nnnippO!O!", &data, &pos, &end, &count, &addr_size,
                          &big_endian, &flex, &PyType_Type, &fre_type, &PyTuple_Type, &table))
        return NULL;
    PyTypeObject *type = (PyTypeObject *)fre_type;
    /* Each FRE takes at least its start and info byte: a count the bytes cannot hold is
     * the Python loop's error to report (and never a tuple of that size to allocate). */
    if (PyTuple_GET_SIZE(table) != 256 || end > data.len || pos < 0 || count < 0 ||
        (addr_size != 1 && addr_size != 2 && addr_size != 4) || pos > end ||
        count > (end - pos) / (addr_size + 1) || !PyType_IsSubtype(type, &PyTuple_Type)) {
        PyBuffer_Release(&data);
        Py_RETURN_NONE;
    }
    const uint8_t *bytes = data.buf;
    PyObject *fres = PyTuple_New(count);
    if (!fres) { PyBuffer_Release(&data); return NULL; }
    for (Py_ssize_t n = 0; n < count; n++) {
        if (pos + addr_size + 1 > end) goto fallback;
        uint64_t start = read_uint(bytes + pos, addr_size, big_endian);
        uint8_t info = bytes[pos + addr_size];
        PyObject *entry = PyTuple_GET_ITEM(table, info);
        if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 5) goto fallback;
        PyObject *base_fp = PyTuple_GET_ITEM(entry, 0);
        long words = PyLong_AsLong(PyTuple_GET_ITEM(entry, 1));
        long width = PyLong_AsLong(PyTuple_GET_ITEM(entry, 2));
        if (PyErr_Occurred()) { Py_DECREF(fres); PyBuffer_Release(&data); return NULL; }
        /* 0 marks an invalid info byte; anything but 1, 2 or 4 is not a table of ours */
        if ((width != 1 && width != 2 && width != 4) || (flex && base_fp != Py_True))
            goto fallback;  /* FLEX: bit 0 is 0 */
        Py_ssize_t body = pos + addr_size + 1;
        if (words < 0 || words > (end - body) / width) goto fallback;
        PyObject *offsets = PyTuple_New(words);
        if (!offsets) { Py_DECREF(fres); PyBuffer_Release(&data); return NULL; }
        for (long w = 0; w < words; w++) {
            uint64_t raw = read_uint(bytes + body + w * width, (int)width, big_endian);
            int64_t value = width == 1 ? (int8_t)raw : width == 2 ? (int16_t)raw :
                (int32_t)raw;
            PyObject *number = PyLong_FromLongLong(value);
            if (!number) {
                Py_DECREF(offsets); Py_DECREF(fres); PyBuffer_Release(&data);
                return NULL;
            }
            PyTuple_SET_ITEM(offsets, w, number);
        }
        PyObject *fre = type->tp_alloc(type, 6);
        PyObject *start_obj = PyLong_FromUnsignedLongLong(start);
        PyObject *info_obj = PyLong_FromLong(info);
        if (!fre || !start_obj || !info_obj) {
            Py_XDECREF(fre); Py_XDECREF(start_obj); Py_XDECREF(info_obj);
            Py_DECREF(offsets); Py_DECREF(fres); PyBuffer_Release(&data);
            return NULL;
        }
        PyObject *mangled = PyTuple_GET_ITEM(entry, 3);
        PyObject *size_code = PyTuple_GET_ITEM(entry, 4);
        Py_INCREF(base_fp); Py_INCREF(mangled); Py_INCREF(size_code);
        PyTuple_SET_ITEM(fre, 0, start_obj);
        PyTuple_SET_ITEM(fre, 1, base_fp);
        PyTuple_SET_ITEM(fre, 2, offsets);
        PyTuple_SET_ITEM(fre, 3, mangled);
        PyTuple_SET_ITEM(fre, 4, size_code);
        PyTuple_SET_ITEM(fre, 5, info_obj);
        PyTuple_SET_ITEM(fres, n, fre);
        pos = body + words * width;
    }
    PyBuffer_Release(&data);
    return Py_BuildValue("(Nn)", fres, pos);
fallback:
    Py_DECREF(fres);
    PyBuffer_Release(&data);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"fast_fres", fast_fres, METH_VARARGS,
     "fast_fres(body, start, code_align, data_align, sp, fp, ra, tracks_ra, big_endian,\n"
     "          fre_type, shapes, shape_of) -> tuple of FREs, or None (general path)."},
    {"eh_fdes", eh_fdes, METH_VARARGS,
     "eh_fdes(eh, address, address_size, big_endian, names, cie_of, fde_type, placements)\n"
     "-> the Fdes of an .eh_frame, or None; see _core_eh.c."},
    {"verify_scan", verify_scan, METH_VARARGS,
     "verify_scan(eh, eh_address, address_size, big_endian, sframe, index, arch, table,\n"
     "            states, state_of, fre_ids, fre_id_of) -> (checked, used, todo), or None;\n"
     "see _core_verify.c."},
    {"agree", agree, METH_VARARGS,
     "agree(body, start, code_align, data_align, sp, fp, ra, tracks_ra, big_endian, size,\n"
     "      states, state_of, fres, fre_ids, fre_id_of, none_id) -> whether a DWARF FDE\n"
     "and its SFrame FREs give the same rules at every PC (False: not known here)."},
    {"scan_cfi", scan_cfi, METH_VARARGS,
     "scan_cfi(text, comment_chars, statement) -> (CFI statements, those in bodies),\n"
     "or None for text that is not ASCII; see _core_scan.c."},
    {"probe_symbols", probe_symbols, METH_VARARGS,
     "probe_symbols(symtab, strtab, is64, big_endian, prefix, count) -> (places, indices\n"
     "of the other symbols), or None; see _core_scan.c."},
    {"with_labels", with_labels, METH_VARARGS,
     "with_labels(text, offsets, prefix) -> text with PREFIX<i>: at each offset, or None\n"
     "for text that is not ASCII; see _core_scan.c."},
    {"lower_fdes", lower_fdes, METH_VARARGS,
     "lower_fdes(fdes, cies, version, max_size, max_fres_v3, sp, fp, ra, tracks_ra,\n"
     "           big_endian, fre_type, shapes, shape_of, function_type, direct)\n"
     "-> per FDE its SFrameFunction, or None (the general path)."},
    {"fdes_v2", fdes_v2, METH_VARARGS,
     "fdes_v2(functions, big_endian, tails, tail_of, addr_sizes, pc_mask_bit, pauth_bit)\n"
     "-> (FDE tails, FRE bytes, FRE count) of an SFrame V2 section."},
    {"decode_fres", decode_fres, METH_VARARGS,
     "decode_fres(data, pos, end, count, addr_size, big_endian, flex, fre_type, table)\n"
     "-> (FREs, position after them), or None (the Python loop reports the error)."},
    {"fres_bytes", fres_bytes, METH_VARARGS,
     "fres_bytes(fres, addr_size, big_endian, tails, tail_of) -> the FREs' bytes."},
    {"relocate", relocate, METH_VARARGS,
     "relocate(contents, rel, is64, little, rela, kinds, target_of)\n"
     "-> {field offset: (target, S + A)}, contents relocated; or None (the Python loop\n"
     "reports what is wrong); see _core_reloc.c."},
    {"sframe_dump", sframe_dump, METH_VARARGS,
     "sframe_dump(data, fde_start, first, last, entry, fre_start, fre_end, version, big,\n"
     "pcrel, address, aarch64, masks, fre_table, columns_of, heads, text)\n"
     "-> the FDEs' text (text) or their FRE count, or None (the Python reader reports\n"
     "what is wrong); see _core_sframe_dump.c."},
    {"fde_index", fde_index, METH_VARARGS,
     "fde_index(data, fde_start, count, entry, wide, big, base, step)\n"
     "-> (starts, ends, disjoint): native int64 arrays' bytes, or None (Python's numbers\n"
     "are needed, or the table is cut short); see _core_sframe_index.c."},
    {"unwind_info_text", unwind_info_text, METH_VARARGS,
     "unwind_info_text(section, base, image, symtab, wide, words, stack_ind)\n"
     "-> the listing of an __unwind_info section, or None (the Python reader reports\n"
     "what is wrong with it); see _core_unwind_info.c."},
    {"xray_labels", (PyCFunction)(void (*)(void))xray_labels, METH_VARARGS | METH_KEYWORDS,
     "xray_labels(labels) -> {function ID: label} prepared for xray_dump, or None;\n"
     "see _core_xray.c."},
    {"xray_dump", (PyCFunction)(void (*)(void))xray_dump, METH_VARARGS | METH_KEYWORDS,
     "xray_dump(data, at, stop, labels, lines) -> (text, at, stop, more): an FDR\n"
     "trace's dump lines from at; see _core_xray.c."},
    {"xray_stacks", (PyCFunction)(void (*)(void))xray_stacks, METH_VARARGS | METH_KEYWORDS,
     "xray_stacks(data, per_thread) -> (totals, notes), or None (the general path);\n"
     "see _core_xray.c."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "cfi2sframe._core",
    "The compiled core: the ELF fast path's loop (sframe/fastpath.py is its reference) "
    "and the __unwind_info listing (compact/listing.py is its reference).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__core(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    PyObject *opcodes = Py_BuildValue(
        "{sisisisisisisisisisisisisisisisisisisisisisi}",
        "nop", OP_NOP, "advance_loc1", OP_ADVANCE_LOC1, "advance_loc2", OP_ADVANCE_LOC2,
        "advance_loc4", OP_ADVANCE_LOC4, "MIPS_advance_loc8", OP_MIPS_ADVANCE_LOC8,
        "offset_extended", OP_OFFSET_EXTENDED,
        "restore_extended", OP_RESTORE_EXTENDED, "undefined", OP_UNDEFINED,
        "same_value", OP_SAME_VALUE, "register", OP_REGISTER,
        "remember_state", OP_REMEMBER_STATE, "restore_state", OP_RESTORE_STATE,
        "def_cfa", OP_DEF_CFA, "def_cfa_register", OP_DEF_CFA_REGISTER,
        "def_cfa_offset", OP_DEF_CFA_OFFSET, "expression", OP_EXPRESSION,
        "offset_extended_sf", OP_OFFSET_EXTENDED_SF, "val_expression", OP_VAL_EXPRESSION,
        "AARCH64_negate_ra_state", OP_AARCH64_NEGATE_RA_STATE,
        "GNU_args_size", OP_GNU_ARGS_SIZE, "advance_loc", OP_ADVANCE_LOC,
        "offset", OP_OFFSET, "restore", OP_RESTORE);
    if (!opcodes || PyModule_AddObject(m, "OPCODES", opcodes) < 0) {
        Py_XDECREF(opcodes);
        Py_DECREF(m);
        return NULL;
    }
    /* The other numbers C repeats, for the tests that bind them to their Python home. */
    PyObject *eh_pe = eh_constants();
    if (!eh_pe || PyModule_AddObject(m, "EH_PE", eh_pe) < 0) {
        Py_XDECREF(eh_pe);
        Py_DECREF(m);
        return NULL;
    }
    PyObject *unwind_info = unwind_info_constants();
    if (!unwind_info || PyModule_AddObject(m, "UNWIND_INFO", unwind_info) < 0) {
        Py_XDECREF(unwind_info);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
