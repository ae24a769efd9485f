/* The DWARF CFA replay: one FDE body run from its CIE's state, as
 * ``sframe/fastpath.py``'s ``_run`` runs it (its reference and fallback), tracking
 * only what a default SFrame FRE holds (CFA register and offset, FP and RA save
 * slots, the signed-RA bit).  Written once: the fast path (sframe_fastpath.c), the
 * .eh_frame walk's CIEs (dwarf_cfi.c) and verify (analysis_compare.c) all call
 * ``replay``.  tests/differential/test_core.py holds it equal to the Python loop;
 * the opcode numbers are given as ``_core.OPCODES``, held equal to dwarf/opcodes.py. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "core.h"

/* DWARF 5 section 7.24 (and GNU/AArch64 extensions); checked against CFA. */
enum {
    OP_NOP = 0x00, OP_ADVANCE_LOC1 = 0x02, OP_ADVANCE_LOC2 = 0x03,
    OP_ADVANCE_LOC4 = 0x04, OP_OFFSET_EXTENDED = 0x05, OP_RESTORE_EXTENDED = 0x06,
    OP_UNDEFINED = 0x07, OP_SAME_VALUE = 0x08, OP_REGISTER = 0x09,
    OP_REMEMBER_STATE = 0x0a, OP_RESTORE_STATE = 0x0b, OP_DEF_CFA = 0x0c,
    OP_DEF_CFA_REGISTER = 0x0d, OP_DEF_CFA_OFFSET = 0x0e, OP_EXPRESSION = 0x10,
    OP_OFFSET_EXTENDED_SF = 0x11, OP_DEF_CFA_SF = 0x12, OP_DEF_CFA_OFFSET_SF = 0x13,
    OP_VAL_OFFSET = 0x14, OP_VAL_OFFSET_SF = 0x15, OP_VAL_EXPRESSION = 0x16,
    OP_MIPS_ADVANCE_LOC8 = 0x1d, OP_AARCH64_NEGATE_RA_STATE_WITH_PC = 0x2c,
    OP_AARCH64_NEGATE_RA_STATE = 0x2d, OP_GNU_ARGS_SIZE = 0x2e,
    OP_GNU_NEGATIVE_OFFSET_EXTENDED = 0x2f,
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
    if (r->pos < r->end && !(r->data[r->pos] & 0x80)) {  /* one byte: most of them */
        uint8_t only = r->data[r->pos++];
        return (Num){is_signed && (only & 0x40) ? (int64_t)only - 0x80 : (int64_t)only, 0};
    }
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

int state_same(const State *a, const State *b) {
    return a->cfa_reg == b->cfa_reg && a->cfa_off == b->cfa_off && a->has_fp == b->has_fp &&
        (!a->has_fp || a->fp_slot == b->fp_slot) && a->has_ra == b->has_ra &&
        (!a->has_ra || a->ra_slot == b->ra_slot) && a->signed_ra == b->signed_ra;
}

size_t state_hash(const State *s) {
    uint64_t h = (uint64_t)s->cfa_reg * 0x9e3779b97f4a7c15ULL ^ (uint64_t)s->cfa_off;
    h = h * 31 + (s->has_fp ? (uint64_t)s->fp_slot * 2 + 1 : 0);
    h = h * 31 + (s->has_ra ? (uint64_t)s->ra_slot * 2 + 1 : 0);
    h = h * 31 + (uint64_t)s->signed_ra;
    return (size_t)(h ^ (h >> 29));
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
#define FULL_STACK_MAX 16  /* deeper remembering is the interpreter's */

/* The full mode's state (see core.h): the rules now, the CIE's (restore's), the last
 * row's, the remembered ones, and where rows go. */
typedef struct {
    Rules now, initial, last;
    int have_last, depth;
    Rules stack[FULL_STACK_MAX];
    EmitRules emit;
    void *ctx;
} Full;

/* One body's replay between rows: the bytes, the state, the CIE's state (restore's),
 * the remembered states and the target; ``full``: the full mode's, else NULL. */
typedef struct {
    Reader r;
    State s, initial;
    const Params *p;
    int depth;
    State stack[STACK_MAX];
    Full *full;
} Replay;

/* A register's rule (offset, restore, undefined, same_value, register, expression):
 * FP's and RA's save slots are the state; SP's rule, or one for FP or RA a default FRE
 * cannot hold, leaves the subset.  1: it was one (``r.failed`` set where it leaves);
 * 0: ``op`` is not a register rule. */
static int register_rule(Replay *x, uint8_t op, uint8_t high) {
    Reader *r = &x->r;
    State *s = &x->s;
    const long long sp = x->p->sp, fp = x->p->fp, ra = x->p->ra;
    if (high == OP_OFFSET || op == OP_OFFSET_EXTENDED || op == OP_OFFSET_EXTENDED_SF) {
        Num reg = high == OP_OFFSET ? (Num){op & 0x3f, 0} : uleb(r);
        Num value = high == OP_OFFSET || op == OP_OFFSET_EXTENDED ? uleb(r) : sleb(r);
        if (r->failed) return 1;
        if (is_reg(reg, fp)) {
            set(&s->fp_slot, &s->huge, H_FP, times(value, x->p->data_align));
            s->has_fp = 1;
        } else if (is_reg(reg, ra)) {
            set(&s->ra_slot, &s->huge, H_RA, times(value, x->p->data_align));
            s->has_ra = 1;
        } else if (is_reg(reg, sp)) {
            r->failed = 1;
        }
    } else if (high == OP_RESTORE || op == OP_RESTORE_EXTENDED) {
        Num reg = high == OP_RESTORE ? (Num){op & 0x3f, 0} : uleb(r);
        if (r->failed) return 1;
        if (is_reg(reg, fp)) {
            s->fp_slot = x->initial.fp_slot;
            s->has_fp = x->initial.has_fp;
            s->huge &= ~H_FP;
        } else if (is_reg(reg, ra)) {
            s->ra_slot = x->initial.ra_slot;
            s->has_ra = x->initial.has_ra;
            s->huge &= ~H_RA;
        } else if (is_reg(reg, sp)) {
            r->failed = 1;
        }
    } else if (op == OP_UNDEFINED || op == OP_SAME_VALUE) {
        Num reg = uleb(r);
        if (r->failed || is_reg(reg, sp) || is_reg(reg, ra) ||
            (is_reg(reg, fp) && op == OP_UNDEFINED))
            r->failed = 1;
        else if (is_reg(reg, fp)) { s->has_fp = 0; s->huge &= ~H_FP; }
    } else if (op == OP_REGISTER) {
        Num reg = uleb(r);
        uleb(r);
        if (r->failed || is_reg(reg, sp) || is_reg(reg, fp) || is_reg(reg, ra)) r->failed = 1;
    } else if (op == OP_EXPRESSION || op == OP_VAL_EXPRESSION) {
        Num reg = uleb(r);
        Num length = uleb(r);
        if (r->failed || length.huge || length.v > (int64_t)(r->end - r->pos)) {
            r->failed = 1;
            return 1;
        }
        r->pos += (Py_ssize_t)length.v;
        if (is_reg(reg, sp) || is_reg(reg, fp) || is_reg(reg, ra)) r->failed = 1;
    } else {
        return 0;
    }
    return 1;
}

/* A CFA rule, the state stack's operations, the signed-RA toggle (where the target
 * tracks RA) and the operations that change nothing here.  1: it was one
 * (``r.failed`` set where the body leaves the subset); 0: ``op`` is not. */
static int other_rule(Replay *x, uint8_t op) {
    Reader *r = &x->r;
    State *s = &x->s;
    int no_cfa = s->cfa_reg == NO_CFA && !(s->huge & H_CFA_REG);
    switch (op) {
    case OP_DEF_CFA_OFFSET:
        if (no_cfa) r->failed = 1;
        else set(&s->cfa_off, &s->huge, H_CFA_OFF, uleb(r));
        return 1;
    case OP_DEF_CFA_REGISTER:
        if (no_cfa) r->failed = 1;
        else set(&s->cfa_reg, &s->huge, H_CFA_REG, uleb(r));
        return 1;
    case OP_DEF_CFA:
        set(&s->cfa_reg, &s->huge, H_CFA_REG, uleb(r));
        set(&s->cfa_off, &s->huge, H_CFA_OFF, uleb(r));
        return 1;
    case OP_REMEMBER_STATE:
        if (x->depth == STACK_MAX) r->failed = 1;
        else x->stack[x->depth++] = *s;
        return 1;
    case OP_RESTORE_STATE:
        if (!x->depth) r->failed = 1;
        else *s = x->stack[--x->depth];
        return 1;
    case OP_GNU_ARGS_SIZE:
        uleb(r);
        return 1;
    case OP_NOP:
        return 1;
    case OP_AARCH64_NEGATE_RA_STATE:
        if (!x->p->tracks_ra) return 0;
        s->signed_ra = !s->signed_ra;
        return 1;
    default:
        return 0;
    }
}

/* An advance's delta (times the code alignment; a 1 to 8-byte operand in the file's
 * byte order).  1: it was one (``r.failed`` set where the operand is cut short); 0:
 * ``op`` is not an advance. */
static int advance(Replay *x, uint8_t op, uint8_t high, Num *delta) {
    Reader *r = &x->r;
    if (high == OP_ADVANCE_LOC) {
        *delta = times((Num){op & 0x3f, 0}, x->p->code_align);
        return 1;
    }
    int size = op == OP_ADVANCE_LOC1 ? 1 : op == OP_ADVANCE_LOC2 ? 2 :
        op == OP_ADVANCE_LOC4 ? 4 : op == OP_MIPS_ADVANCE_LOC8 ? 8 : 0;
    if (!size) return 0;
    if (r->pos + size > r->end) { r->failed = 1; return 1; }
    uint64_t value = 0;
    for (int i = 0; i < size; i++) {
        int shift = x->p->big_endian ? 8 * (size - 1 - i) : 8 * i;
        value |= (uint64_t)r->data[r->pos + i] << shift;
    }
    r->pos += size;
    *delta = times((Num){(int64_t)value, value > (uint64_t)INT64_MAX}, x->p->code_align);
    return 1;
}

static int full_rule(Replay *x, uint8_t op, uint8_t high);
static int full_row(Full *f, int64_t at);

/* ``replay``, and with ``full`` the full mode's (``replay_rules``).  Inlined into both,
 * so ``replay``'s copy (``full`` NULL) has no test of the mode left in its loop. */
static inline __attribute__((always_inline)) int replay_in(const uint8_t *data, Py_ssize_t len, State s, const Params *p,
                     Emit emit, void *ctx, Full *full) {
    Replay x;  /* its stack is written before it is read: not cleared */
    x.r = (Reader){data, 0, len, 0};
    x.s = x.initial = s;
    x.p = p;
    x.depth = 0;
    x.full = full;
    State last = {0, 0, 0, 0, 0, 0, 0, 0};
    int have_last = 0;
    int64_t at = 0;
    int at_huge = 0;  /* the row start is past 64 bits (a huge 8-byte advance) */
    for (;;) {
        Num delta = {0, 0};
        if (x.r.failed) break;  /* a truncated operand, or the CFI left the subset */
        if (x.r.pos < x.r.end) {
            uint8_t op = x.r.data[x.r.pos++];
            uint8_t high = op & 0xc0;
            if (full ? full_rule(&x, op, high)
                     : register_rule(&x, op, high) || other_rule(&x, op)) continue;
            if (!advance(&x, op, high, &delta)) x.r.failed = 1;  /* an unknown operation */
            if (x.r.failed || (!delta.v && !delta.huge)) continue;
        }
        /* The row in force from ``at`` ends here; an unchanged state adds nothing.  A
         * row the loop emits with a huge number has no default FRE: give up, as the
         * Python loop does when it finds no FRE shape for it. */
        if (full) {
            int taken = at_huge ? 0 : full_row(full, at);  /* past 64 bits: Python's */
            if (taken <= 0) return taken;
        } else if (!have_last || !state_same(&x.s, &last) || x.s.huge) {
            if (x.s.huge || at_huge) { x.r.failed = 1; break; }
            int taken = emit(ctx, at, &x.s);
            if (taken <= 0) return taken;
            last = x.s;
            have_last = 1;
        }
        if (x.r.pos >= x.r.end) break;
        /* The Python loop's row starts are unbounded: a row emitted past 64 bits is
         * left to it (only an emitted one: an unchanged state adds no row). */
        if (delta.huge || __builtin_add_overflow(at, delta.v, &at)) at_huge = 1;
    }
    return x.r.failed ? 0 : 1;
}

/* See core.h. */
int replay(const uint8_t *data, Py_ssize_t len, State s, const Params *p, Emit emit,
           void *ctx) {
    return replay_in(data, len, s, p, emit, ctx, NULL);
}

/* The full mode.  A row's flags and each rule's kind, as ``dwarf/cfi.py`` reads them
 * (``ROW_STATE``, bound to it by tests/differential/test_core_constants.py). */
enum { F_CFA = 1, F_SIGNED = 2, F_SIGNED_PC = 4 };
enum { K_UNDEFINED = 0, K_SAME_VALUE = 1, K_OFFSET = 2, K_VAL_OFFSET = 3, K_REGISTER = 4 };

size_t rules_bytes(const Rules *rules) {
    return sizeof(int64_t) * 3 + sizeof(RegRule) * (size_t)rules->count;
}

static int rules_same(const Rules *a, const Rules *b) {
    return a->count == b->count && !memcmp(a, b, rules_bytes(a));
}

static void rules_copy(Rules *to, const Rules *from) {
    memcpy(to, from, rules_bytes(from));
    to->count = from->count;
}

/* The index of ``reg``'s rule, or of where it would go (the rules stay sorted). */
static int rule_at(const Rules *s, int64_t reg) {
    int i = 0;
    while (i < s->count && s->regs[i].reg < reg) i++;
    return i;
}

/* ``reg``'s rule set; a number past 64 bits, or more rules than the mode keeps, leave
 * it (``r.failed``). */
static void set_rule(Reader *r, Rules *s, Num reg, int64_t kind, Num value) {
    if (r->failed || reg.huge || value.huge) { r->failed = 1; return; }
    int i = rule_at(s, reg.v);
    if (i == s->count || s->regs[i].reg != reg.v) {
        if (s->count == RULES_MAX) { r->failed = 1; return; }
        memmove(&s->regs[i + 1], &s->regs[i], sizeof(RegRule) * (size_t)(s->count - i));
        s->count++;
    }
    s->regs[i] = (RegRule){reg.v, kind, value.v};
}

/* DW_CFA_restore: the CIE's rule for ``reg``, or none (``interpret._restore``). */
static void restore_rule(Reader *r, Rules *s, const Rules *initial, Num reg) {
    if (r->failed || reg.huge) { r->failed = 1; return; }
    int i = rule_at(initial, reg.v);
    if (i < initial->count && initial->regs[i].reg == reg.v) {
        const RegRule *was = &initial->regs[i];
        set_rule(r, s, reg, was->kind, (Num){was->value, 0});
        return;
    }
    i = rule_at(s, reg.v);
    if (i < s->count && s->regs[i].reg == reg.v) {
        memmove(&s->regs[i], &s->regs[i + 1], sizeof(RegRule) * (size_t)(s->count - i - 1));
        s->count--;
    }
}

/* A CFA rule of register and offset (an offset needs one already: the interpreter's
 * error otherwise). */
static void set_cfa(Reader *r, Rules *s, const Num *reg, const Num *offset) {
    if (r->failed || (!(s->flags & F_CFA) && (!reg || !offset)) ||
        (reg && reg->huge) || (offset && offset->huge)) {
        r->failed = 1;
        return;
    }
    if (reg) s->cfa_reg = reg->v;
    if (offset) s->cfa_off = offset->v;
    s->flags |= F_CFA;
}

/* One operation other than an advance, as ``dwarf/interpret.py``'s handlers apply it
 * (``dwarf/ops.decode_ops`` reading its operands): 1 it was one (``r.failed`` set
 * where the mode leaves it to the interpreter: an expression, the CFI's errors); 0
 * it is not. */
static int full_rule(Replay *x, uint8_t op, uint8_t high) {
    Reader *r = &x->r;
    Full *f = x->full;
    Rules *s = &f->now;
    const long long da = x->p->data_align;
    Num reg;
    if (high == OP_OFFSET) {
        reg = (Num){op & 0x3f, 0};
        set_rule(r, s, reg, K_OFFSET, times(uleb(r), da));
        return 1;
    }
    if (high == OP_RESTORE) {
        restore_rule(r, s, &f->initial, (Num){op & 0x3f, 0});
        return 1;
    }
    switch (op) {
    case OP_OFFSET_EXTENDED: case OP_VAL_OFFSET:
        reg = uleb(r);
        set_rule(r, s, reg, op == OP_VAL_OFFSET ? K_VAL_OFFSET : K_OFFSET,
                 times(uleb(r), da));
        return 1;
    case OP_OFFSET_EXTENDED_SF: case OP_VAL_OFFSET_SF:
        reg = uleb(r);
        set_rule(r, s, reg, op == OP_VAL_OFFSET_SF ? K_VAL_OFFSET : K_OFFSET,
                 times(sleb(r), da));
        return 1;
    case OP_GNU_NEGATIVE_OFFSET_EXTENDED:
        reg = uleb(r);
        set_rule(r, s, reg, K_OFFSET, times(times(uleb(r), da), -1));
        return 1;
    case OP_RESTORE_EXTENDED:
        restore_rule(r, s, &f->initial, uleb(r));
        return 1;
    case OP_UNDEFINED: case OP_SAME_VALUE:
        set_rule(r, s, uleb(r), op == OP_UNDEFINED ? K_UNDEFINED : K_SAME_VALUE,
                 (Num){0, 0});
        return 1;
    case OP_REGISTER:
        reg = uleb(r);
        set_rule(r, s, reg, K_REGISTER, uleb(r));
        return 1;
    case OP_DEF_CFA: case OP_DEF_CFA_SF: {
        reg = uleb(r);
        Num offset = op == OP_DEF_CFA ? uleb(r) : times(sleb(r), da);
        set_cfa(r, s, &reg, &offset);
        return 1;
    }
    case OP_DEF_CFA_REGISTER:
        reg = uleb(r);
        set_cfa(r, s, &reg, NULL);
        return 1;
    case OP_DEF_CFA_OFFSET: case OP_DEF_CFA_OFFSET_SF: {
        Num offset = op == OP_DEF_CFA_OFFSET ? uleb(r) : times(sleb(r), da);
        set_cfa(r, s, NULL, &offset);
        return 1;
    }
    case OP_REMEMBER_STATE:
        if (f->depth == FULL_STACK_MAX) r->failed = 1;
        else rules_copy(&f->stack[f->depth++], s);
        return 1;
    case OP_RESTORE_STATE:
        if (!f->depth) r->failed = 1;  /* the interpreter's error */
        else rules_copy(s, &f->stack[--f->depth]);
        return 1;
    case OP_AARCH64_NEGATE_RA_STATE:  /* ra_signed_pc kept only while signed */
        s->flags ^= F_SIGNED;
        if (!(s->flags & F_SIGNED)) s->flags &= ~F_SIGNED_PC;
        return 1;
    case OP_AARCH64_NEGATE_RA_STATE_WITH_PC:
        s->flags ^= F_SIGNED;
        s->flags = s->flags & F_SIGNED ? s->flags | F_SIGNED_PC : s->flags & ~F_SIGNED_PC;
        return 1;
    case OP_GNU_ARGS_SIZE:
        uleb(r);
        return 1;
    case OP_NOP:
        return 1;
    default:
        return 0;
    }
}

/* The row from ``at``, if its rules are not the last row's. */
static int full_row(Full *f, int64_t at) {
    if (f->have_last && rules_same(&f->now, &f->last)) return 1;
    int taken = f->emit(f->ctx, at, &f->now);
    rules_copy(&f->last, &f->now);
    f->have_last = 1;
    return taken;
}

/* See core.h. */
int replay_rules(const uint8_t *data, Py_ssize_t len, const uint8_t *init,
                 Py_ssize_t init_len, const Params *p, EmitRules emit, void *ctx) {
    Full f;  /* its stacks are written before they are read: not cleared */
    f.now.flags = f.now.cfa_reg = f.now.cfa_off = 0;
    f.now.count = 0;
    rules_copy(&f.initial, &f.now);  /* the CIE's own restore: no rule */
    f.have_last = f.depth = 0;
    f.emit = emit;
    f.ctx = ctx;
    /* The CIE's instructions from no rules, advances ignored (``cfi.initial_ops``). */
    Replay x;
    x.r = (Reader){init, 0, init_len, 0};
    x.p = p;
    x.full = &f;
    while (!x.r.failed && x.r.pos < x.r.end) {
        uint8_t op = x.r.data[x.r.pos++];
        Num ignored;
        if (!full_rule(&x, op, op & 0xc0) && !advance(&x, op, op & 0xc0, &ignored))
            x.r.failed = 1;
    }
    if (x.r.failed) return 0;
    rules_copy(&f.initial, &f.now);
    f.depth = 0;  /* the body starts with nothing remembered */
    State none = {0, 0, 0, 0, 0, 0, 0, 0};
    return replay_in(data, len, none, p, NULL, NULL, &f);
}

PyObject *row_state_constants(void) {
    return Py_BuildValue("{sisisisisisisisisi}", "cfa", F_CFA, "ra_signed", F_SIGNED,
                         "ra_signed_pc", F_SIGNED_PC, "undefined", K_UNDEFINED,
                         "same_value", K_SAME_VALUE, "offset", K_OFFSET,
                         "val_offset", K_VAL_OFFSET, "register", K_REGISTER,
                         "rules_max", RULES_MAX);
}

/* See core.h. */
PyObject *dwarf_opcodes(void) {
    return Py_BuildValue(
        "{sisisisisisisisisisisisisisisisisisisisisisisisisisisisi}",
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
        "offset", OP_OFFSET, "restore", OP_RESTORE, "def_cfa_sf", OP_DEF_CFA_SF,
        "def_cfa_offset_sf", OP_DEF_CFA_OFFSET_SF, "val_offset", OP_VAL_OFFSET,
        "val_offset_sf", OP_VAL_OFFSET_SF,
        "AARCH64_negate_ra_state_with_pc", OP_AARCH64_NEGATE_RA_STATE_WITH_PC,
        "GNU_negative_offset_extended", OP_GNU_NEGATIVE_OFFSET_EXTENDED);
}
