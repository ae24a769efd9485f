/* The .eh_frame walker of the compiled core: a file's CIEs and FDEs read as
 * ``dwarf/cfi.parse_cfi`` reads them (its reference: the same fields, and "not
 * ordinary" wherever it would fail or read something this walker does not, so the
 * Python walker then reads or reports it).  ``verify_scan`` compares each FDE it
 * finds (``analysis_compare.c``); ``eh_fdes`` gives them to Python as ``Fde``s, for
 * conversion.  tests/differential/test_core_eh.py holds ``eh_fdes`` equal to the
 * Python walker on installed files and damaged ones. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "core.h"
#include "out.h"

/* LEB128 within [pos, limit); 0 where it runs past or does not fit 64 bits. */
static int get_leb(const Bytes *b, Py_ssize_t *pos, Py_ssize_t limit, int is_signed,
                   int64_t *out) {
    uint64_t result = 0;
    int shift = 0;
    uint8_t byte;
    do {
        if (*pos >= limit) return 0;
        byte = b->d[(*pos)++];
        if (shift >= 63 && (byte & 0x7f) > (shift == 63 ? 1 : 0)) return 0;
        if (shift < 64) result |= (uint64_t)(byte & 0x7f) << shift;
        shift += 7;
    } while (byte & 0x80);
    if (is_signed && (byte & 0x40) && shift < 64) result |= ~(uint64_t)0 << shift;
    if (!is_signed && result > (uint64_t)INT64_MAX) return 0;
    *out = (int64_t)result;
    return 1;
}

/* DW_EH_PE pointer encodings (LSB 5.0, "DWARF Extensions"): their Python home is
 * ``dwarf/opcodes.EH_PE`` (with ``EH_PE_FORMAT`` and ``EH_PE_APPLICATION``), and
 * ``eh_constants`` hands them to tests/differential/test_core_eh.py, which holds
 * them equal.  PCREL_SDATA4 is the encoding nearly every .eh_frame uses. */
enum {
    EH_PE_absptr = 0x00, EH_PE_uleb128 = 0x01, EH_PE_udata2 = 0x02, EH_PE_udata4 = 0x03,
    EH_PE_udata8 = 0x04, EH_PE_sleb128 = 0x09, EH_PE_sdata2 = 0x0a, EH_PE_sdata4 = 0x0b,
    EH_PE_sdata8 = 0x0c, EH_PE_pcrel = 0x10, EH_PE_indirect = 0x80, EH_PE_omit = 0xff,
    EH_PE_FORMAT = 0x0f, EH_PE_APPLICATION = 0x70, EH_PE_SIGNED = 0x08,
    EH_PE_PCREL_SDATA4 = EH_PE_pcrel | EH_PE_sdata4,
};

PyObject *eh_constants(void) {
    return Py_BuildValue(
        "{sisisisisisisisisisisisisisisi}", "absptr", EH_PE_absptr, "uleb128", EH_PE_uleb128,
        "udata2", EH_PE_udata2, "udata4", EH_PE_udata4, "udata8", EH_PE_udata8,
        "sleb128", EH_PE_sleb128, "sdata2", EH_PE_sdata2, "sdata4", EH_PE_sdata4,
        "sdata8", EH_PE_sdata8, "pcrel", EH_PE_pcrel, "indirect", EH_PE_indirect,
        "omit", EH_PE_omit, "FORMAT", EH_PE_FORMAT, "APPLICATION", EH_PE_APPLICATION,
        "SIGNED", EH_PE_SIGNED);
}

/* The size of a pointer in ``encoding``'s format (skipped, not read); 0: not known. */
static int pointer_skip(const Bytes *b, Py_ssize_t *pos, Py_ssize_t limit, int encoding,
                        int address_size) {
    int64_t ignored;
    switch (encoding & EH_PE_FORMAT) {
    case EH_PE_absptr: *pos += address_size; break;
    case EH_PE_uleb128: return get_leb(b, pos, limit, 0, &ignored);
    case EH_PE_sleb128: return get_leb(b, pos, limit, 1, &ignored);
    case EH_PE_udata2: case EH_PE_sdata2: *pos += 2; break;
    case EH_PE_udata4: case EH_PE_sdata4: *pos += 4; break;
    case EH_PE_udata8: case EH_PE_sdata8: *pos += 8; break;
    default: return 0;
    }
    return *pos <= limit;
}

/* An FDE's pointer as ``dwarf/cfi._Reader.pointer`` reads it, fixed formats only and
 * absolute or PC-relative: anything else is left to it (0). */
static int pointer_read(const Bytes *b, Py_ssize_t *pos, Py_ssize_t limit, int encoding,
                        int address_size, uint64_t base, uint64_t mask, uint64_t *out) {
    int app = encoding & (EH_PE_APPLICATION | EH_PE_indirect), size;
    if (app != EH_PE_absptr && app != EH_PE_pcrel) return 0;
    switch (encoding & EH_PE_FORMAT) {
    case EH_PE_absptr: size = address_size; break;
    case EH_PE_udata2: case EH_PE_sdata2: size = 2; break;
    case EH_PE_udata4: case EH_PE_sdata4: size = 4; break;
    case EH_PE_udata8: case EH_PE_sdata8: size = 8; break;
    default: return 0;
    }
    uint64_t value;
    if (*pos + size > limit || !get_uint(b, *pos, size, &value)) return 0;
    if ((encoding & EH_PE_SIGNED) && size < 8 && (value >> (8 * size - 1)) & 1)
        value |= ~(uint64_t)0 << (8 * size);  /* signed formats */
    if (app == EH_PE_pcrel) value += base + (uint64_t)*pos;
    *pos += size;
    *out = value & mask;
    return 1;
}

typedef struct { State s; int have; } Capture;

static int capture(void *raw, int64_t Py_UNUSED(at), const State *s) {
    Capture *c = raw;
    c->s = *s;
    c->have = 1;
    return 1;
}

/* A CIE of .eh_frame from its body (``pos``, after the CIE id) to ``end``, as
 * ``dwarf/cfi._parse_cie`` reads it; 0 where that would fail or differ. */
static int parse_cie(const Bytes *b, Py_ssize_t pos, Py_ssize_t end, int address_size,
                     const Params *arch, CieInfo *cie) {
    if (pos + 1 > end) return 0;
    int version = b->d[pos++];
    const uint8_t *nul = memchr(b->d + pos, 0, (size_t)(end - pos));
    if (!nul) return 0;
    const char *aug = (const char *)(b->d + pos);
    Py_ssize_t aug_len = (const uint8_t *)nul - (b->d + pos);
    pos += aug_len + 1;
    int has_eh = 0;
    for (Py_ssize_t i = 0; i + 1 < aug_len; i++)
        if (aug[i] == 'e' && aug[i + 1] == 'h') has_eh = 1;
    if (has_eh) pos += address_size;
    if (pos > end) return 0;
    if (!get_leb(b, &pos, end, 0, &cie->code_align)) return 0;
    if (!get_leb(b, &pos, end, 1, &cie->data_align)) return 0;
    if (version == 1) {
        if (pos + 1 > end) return 0;
        cie->ra = b->d[pos++];
    } else if (!get_leb(b, &pos, end, 0, &cie->ra)) {
        return 0;
    }
    cie->fde_encoding = EH_PE_absptr;
    cie->lsda_encoding = EH_PE_omit;
    cie->augmented = aug_len > 0 && aug[0] == 'z';
    if (cie->augmented) {
        int64_t data_len;
        if (!get_leb(b, &pos, end, 0, &data_len) || data_len > end - pos) return 0;
        Py_ssize_t data_end = pos + (Py_ssize_t)data_len;
        for (Py_ssize_t i = 1; i < aug_len; i++) {
            if (aug[i] == 'R' || aug[i] == 'L') {
                if (pos + 1 > data_end) return 0;
                if (aug[i] == 'R') cie->fde_encoding = b->d[pos];
                else cie->lsda_encoding = b->d[pos];
                pos++;
            } else if (aug[i] == 'P') {
                if (pos + 1 > data_end) return 0;
                int encoding = b->d[pos++] & ~EH_PE_indirect;
                if (!pointer_skip(b, &pos, data_end, encoding, address_size)) return 0;
            }
        }
        pos = data_end;
    } else if (!(aug_len == 0 || (aug_len == 2 && aug[0] == 'e' && aug[1] == 'h'))) {
        return 0;
    }
    if (pos > end) return 0;
    /* The initial instructions' state, as ``fastpath.initial_state`` (no such state:
     * the FDEs of this CIE are left to the full check). */
    State empty = {NO_CFA, 0, 0, 0, 0, 0, 0, 0};
    Params p = *arch;
    p.code_align = cie->code_align;
    p.data_align = cie->data_align;
    Capture c = {empty, 0};
    int done = replay(b->d + pos, end - pos, empty, &p, capture, &c);
    if (done < 0) return -1;
    cie->start = c.have ? c.s : empty;
    cie->start_ok = done == 1;
    return 1;
}


/* Walk every entry of an .eh_frame at ``address``; each FDE goes to ``on_fde``.
 * 1: done; 0: something out of the ordinary (the Python walker decides); -1: error. */
int eh_walk(const uint8_t *data, Py_ssize_t size, uint64_t address, int address_size,
            int big, const Params *arch, OnFde on_fde, void *ctx) {
    if (address_size != 4 && address_size != 8) return 0;
    const uint64_t mask = address_size == 8 ? ~(uint64_t)0 : 0xffffffffu;
    Bytes b = {data, size, big};
    CieInfo *cies = NULL;
    Py_ssize_t ncies = 0, cap = 0, pos = 0;
    int result = 1;
    while (pos + 4 <= size) {
        Py_ssize_t start = pos;
        uint64_t length, ident;  /* each read checked: never used unset (gcc's
                                  * -Wmaybe-uninitialized, issue 42) */
        if (!get_uint(&b, pos, 4, &length)) { result = 0; break; }
        pos += 4;
        if (length == 0xffffffffu) { result = 0; break; }  /* 64-bit DWARF */
        if (length == 0) {  /* zero terminators, then the word of the next non-zero byte */
            Py_ssize_t next = pos;
            while (next < size && !b.d[next]) next++;
            pos += (next - pos) / 4 * 4;
            continue;
        }
        Py_ssize_t end = pos + (Py_ssize_t)length;
        if ((Py_ssize_t)length > size - pos || pos + 4 > end) { result = 0; break; }
        if (!get_uint(&b, pos, 4, &ident)) { result = 0; break; }
        Py_ssize_t body = pos + 4;
        if (ident == 0) {  /* a CIE */
            if (ncies == cap) {
                cap = cap ? 2 * cap : 16;
                CieInfo *more = PyMem_Realloc(cies, (size_t)cap * sizeof *more);
                if (!more) { PyErr_NoMemory(); result = -1; break; }
                cies = more;
            }
            CieInfo *cie = &cies[ncies];
            cie->at = start;
            int parsed = parse_cie(&b, body, end, address_size, arch, cie);
            if (parsed <= 0) { result = parsed; break; }
            ncies++;
            pos = end;
            continue;
        }
        /* An FDE: its CIE, met before it (a later one: the Python walker). */
        Py_ssize_t cie_at = pos - (Py_ssize_t)ident, lo = 0, hi = ncies;
        while (lo < hi) {
            Py_ssize_t mid = (lo + hi) / 2;
            if (cies[mid].at < cie_at) lo = mid + 1; else hi = mid;
        }
        if (lo == ncies || cies[lo].at != cie_at) { result = 0; break; }
        EhFde fde = {data, start, end, 0, body, &cies[lo], 0, 0, 0, 0, *arch};
        Py_ssize_t at = body;
        if (!pointer_read(&b, &at, end, fde.cie->fde_encoding, address_size, address, mask,
                          &fde.pc)) {
            result = 0;
            break;
        }
        if (fde.cie->fde_encoding == EH_PE_PCREL_SDATA4) {  /* its range read unsigned */
            if (at + 4 > end || !get_uint(&b, at, 4, &fde.range)) { result = 0; break; }
            at += 4;
        } else if (!pointer_read(&b, &at, end, fde.cie->fde_encoding & EH_PE_FORMAT,
                                 address_size, 0, mask, &fde.range)) {
            result = 0;
            break;
        }
        if (fde.cie->augmented) {
            int64_t aug;
            if (!get_leb(&b, &at, end, 0, &aug) || aug > end - at) { result = 0; break; }
            if (aug && fde.cie->lsda_encoding != EH_PE_omit) {
                /* The LSDA as the Python reader takes it (Mach-O checks read it). */
                Py_ssize_t lsda_at = at;
                if (!pointer_read(&b, &lsda_at, at + (Py_ssize_t)aug,
                                  fde.cie->lsda_encoding & ~EH_PE_indirect, address_size, address, mask,
                                  &fde.lsda)) {
                    result = 0;
                    break;
                }
                fde.has_lsda = fde.lsda != 0;
            }
            at += (Py_ssize_t)aug;
        }
        fde.body = at;
        fde.params.code_align = fde.cie->code_align;
        fde.params.data_align = fde.cie->data_align;
        pos = end;
        int went = on_fde(ctx, &fde);
        if (went <= 0) { result = went; break; }
    }
    PyMem_Free(cies);
    return result;
}

/* See core.h. */
PyObject *fde_name(PyObject *names, PyObject *section, PyObject *start,
                   unsigned long long value) {
    PyObject *key = PyTuple_Pack(2, section, start);
    PyObject *name = key ? PyDict_GetItemWithError(names, key) : NULL;  /* borrowed */
    Py_XDECREF(key);
    if (name && PyUnicode_Check(name) && PyUnicode_GET_LENGTH(name) > 0) {
        Py_INCREF(name);
        return name;
    }
    if (PyErr_Occurred()) return NULL;
    /* SECTION+ADDR or pc+ADDR, the address as f"{value:#x}" writes it, by out.h's hex:
     * snprintf and PyUnicode_FromFormat cost ~1.8k instructions a name (61k of
     * libLLVM-14's 95k FDEs have no symbol). */
    char text[24];
    Out o = {text, 0, sizeof text, 0};  /* never grown: "pc+0x" and 16 digits fit */
    int linked = PyUnicode_GET_LENGTH(section) == 0;
    if (put(&o, linked ? "pc+" : "+", linked ? 3 : 1) < 0 || put_hex(&o, value, 0) < 0)
        return NULL;
    PyObject *tail = PyUnicode_FromStringAndSize(text, (Py_ssize_t)o.len);
    if (!tail || linked) return tail;
    PyObject *joined = PyUnicode_Concat(section, tail);
    Py_DECREF(tail);
    return joined;
}

/* What eh_fdes carries along. */
typedef struct {
    PyObject *out, *names, *cie_of, *cies, *fde_type, *section, *placements;
} FdesCtx;

/* An FDE's function as ``dwarf/cfi._parse_fde`` places it: (section, start) of the
 * relocated start field, else ("", the start read); and named as ``function_name``
 * names it (else SECTION+ADDR, pc+ADDR when linked).  New references in ``out``, or
 * 0 (not ordinary: a start below zero) or -1 (error). */
static int placed_and_named(FdesCtx *ctx, const EhFde *e, PyObject **out) {
    PyObject *section = ctx->section, *start = NULL;
    if (ctx->placements) {
        PyObject *field = PyLong_FromSsize_t(e->field);
        if (!field) return -1;
        PyObject *placed = PyDict_GetItemWithError(ctx->placements, field);  /* borrowed */
        Py_DECREF(field);
        if (!placed && PyErr_Occurred()) return -1;
        if (placed) {
            if (!PyTuple_Check(placed) || PyTuple_GET_SIZE(placed) != 2 ||
                !PyUnicode_Check(PyTuple_GET_ITEM(placed, 0)))
                return 0;
            section = PyTuple_GET_ITEM(placed, 0);
            start = PyTuple_GET_ITEM(placed, 1);
            Py_INCREF(start);
        }
    }
    if (!start && !(start = PyLong_FromUnsignedLongLong(e->pc))) return -1;
    unsigned long long value = PyLong_AsUnsignedLongLong(start);
    if (value == (unsigned long long)-1 && PyErr_Occurred()) {
        Py_DECREF(start);
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return -1;
        PyErr_Clear();
        return 0;  /* below zero: the Python walker names it */
    }
    PyObject *name = fde_name(ctx->names, section, start, value);
    if (!name) { Py_DECREF(start); return -1; }
    Py_INCREF(section);
    out[0] = name;
    out[1] = section;
    out[2] = start;
    return 1;
}

static int make_fde(void *raw, const EhFde *e) {
    FdesCtx *ctx = raw;
    PyTypeObject *type = (PyTypeObject *)ctx->fde_type;
    PyObject *cie_at = PyLong_FromSsize_t(e->cie->at);
    if (!cie_at) return -1;
    PyObject *cie = memo_lookup(ctx->cies, cie_at, ctx->cie_of);  /* borrowed */
    if (!cie) { Py_DECREF(cie_at); return -1; }
    /* Every field a new reference (cie_at's is ours already), or NULL. */
    PyObject *fields[10] = {NULL};
    int placed = placed_and_named(ctx, e, fields);
    if (placed <= 0) { Py_DECREF(cie_at); return placed; }
    fields[3] = PyLong_FromUnsignedLongLong(e->range);
    fields[4] = cie;
    Py_INCREF(cie);
    fields[5] = cie_at;
    fields[6] = PyBytes_FromStringAndSize((const char *)e->data + e->body, e->end - e->body);
    fields[7] = PyLong_FromSsize_t(e->start);
    fields[8] = PyLong_FromSsize_t(e->body);
    fields[9] = e->has_lsda ? PyLong_FromUnsignedLongLong(e->lsda) : Py_None;
    if (!e->has_lsda) Py_INCREF(Py_None);
    int ok = 1;
    for (int f = 0; f < 10; f++) ok = ok && fields[f] != NULL;
    PyObject *fde = ok ? type->tp_alloc(type, 10) : NULL;
    if (!fde) {
        for (int f = 0; f < 10; f++) Py_XDECREF(fields[f]);
        return -1;
    }
    for (int f = 0; f < 10; f++) PyTuple_SET_ITEM(fde, f, fields[f]);
    int appended = PyList_Append(ctx->out, fde);
    Py_DECREF(fde);
    return appended < 0 ? -1 : 1;
}

/* eh_fdes(eh, address, names, cie_of, placements, target) -> list of ``Fde``s of an
 * .eh_frame at ``address``, or None where the Python walker decides.  ``names``:
 * (section or "", address) -> function name, as ``elf.cfi.function_names`` gives them;
 * ``cie_of(offset)``: the ``Cie`` Python reads there, asked once per CIE;
 * ``placements``: a relocatable object's relocated fields (field offset -> (section,
 * S + A), ``elf.reloc.relocate_view``); ``target``: address_size, big_endian and
 * fde_type by name (``dwarf/cfi._eh_target``). */
PyObject *eh_fdes(PyObject *Py_UNUSED(self), PyObject *args) {
    static char *keys[] = {"address_size", "big_endian", "fde_type", NULL};
    Py_buffer eh;
    unsigned long long address;
    int address_size, big;
    PyObject *names, *cie_of, *fde_type, *placements, *target, *big_obj;
    if (!PyArg_ParseTuple(args, "y*KO!OO!O!:eh_fdes", &eh, &address, &PyDict_Type, &names,
                          &cie_of, &PyDict_Type, &placements, &PyDict_Type, &target))
        return NULL;
    if (!read_params(target, "$iO!O!:eh_fdes", keys, &address_size, &PyBool_Type, &big_obj,
                     &PyType_Type, &fde_type)) {
        PyBuffer_Release(&eh);
        return NULL;
    }
    big = big_obj == Py_True;
    FdesCtx ctx = {PyList_New(0), names, cie_of, PyDict_New(), fde_type,
                   PyUnicode_FromString(""), PyDict_GET_SIZE(placements) ? placements : NULL};
    PyObject *out = NULL;
    /* The replay's parameters matter only for a CIE's start state: none is asked for. */
    Params p = {1, 1, -1, -1, -1, 0, big};
    if (ctx.out && ctx.cies && ctx.section &&
        PyType_IsSubtype((PyTypeObject *)fde_type, &PyTuple_Type)) {
        int walked = eh_walk(eh.buf, eh.len, address, address_size, big, &p, make_fde, &ctx);
        if (walked > 0) {
            out = ctx.out;
            Py_INCREF(out);
        } else if (walked == 0) {
            out = Py_None;
            Py_INCREF(out);
        }
    } else if (!PyErr_Occurred()) {
        PyErr_SetString(PyExc_TypeError, "fde_type must be a tuple type");
    }
    Py_XDECREF(ctx.out);
    Py_XDECREF(ctx.cies);
    Py_XDECREF(ctx.section);
    PyBuffer_Release(&eh);
    return out;
}

/* The last (words, state) pair asked for in each slot of a state's words' hash, kept
 * with that hash: a row whose state was seen (986 distinct in libLLVM-14's 475k rows)
 * is found without an int made and a dict read (~400 instructions a row).  A slot
 * only says where to look: the words are compared, as the states memo's are.  Fixed
 * (no growth, no eviction but by a later state in the same slot); a capsule's. */
#define ROW_STATE_SLOTS 2048  /* a power of two (not kept.h's STATE_SLOTS: another table) */

typedef struct {
    uint64_t hash;
    PyObject *pair;  /* a strong reference, or NULL */
} StateSlot;

/* cfi_rows' parameters as read once per file: ``Params``, strong references to
 * row_type, states and state_of, and the state slots, in a capsule ``replay_params``
 * makes, so each of a file's bodies (34k on libLLVM-14) is not a dict read by name
 * (~5k instructions). */
#define REPLAY_NAME "cfi2sframe._core.replay_params"

/* The last row made in each slot of a hash of its start and state: a row of the same
 * start and state objects (a prologue's rows repeat across thousands of bodies: at 1,
 * 4, 5 the same pushes) is that row again, not a new tuple and int (``Row``s are
 * immutable; the row holds its state's objects, so the pointers compared are alive).
 * Fixed, as ``slots``; a capsule's. */
#define ROW_SLOTS_BITS 12
#define ROW_SLOTS (1u << ROW_SLOTS_BITS)

typedef struct {
    int64_t at;
    PyObject *row;  /* a strong reference, or NULL */
} RowSlot;

typedef struct {
    Params p;
    PyObject *row_type, *states, *state_of;
    StateSlot slots[ROW_STATE_SLOTS];
    RowSlot rows[ROW_SLOTS];
} Replay;

/* cfi_rows' rows so far, and what it makes them with. */
typedef struct {
    PyObject *rows;
    Replay *replay;
} RowsCtx;

/* A word hash of a row's rules (their words as ``rules_bytes`` counts them): the
 * states memo's key, an int, which Python hashes in a few instructions, where a bytes
 * key of the words cost a siphash of 50 to 170 bytes per row (475k rows on
 * libLLVM-14).  Equal hashes are not trusted: the words are compared. */
static uint64_t rules_hash(const Rules *rules) {
    const char *bytes = (const char *)rules;
    size_t n = rules_bytes(rules) / sizeof(uint64_t);
    uint64_t h = (uint64_t)n;
    for (size_t i = 0; i < n; i++) {
        uint64_t word;
        memcpy(&word, bytes + i * sizeof word, sizeof word);
        h = (h ^ word) * 0x9e3779b97f4a7c15ULL;
    }
    return h ^ (h >> 29);
}

/* The state kept in ``pair`` where it is a (words, state) pair whose words are
 * ``rules``' (borrowed), else NULL (no error set). */
static PyObject *kept_state(PyObject *pair, const Rules *rules) {
    if (!pair || !PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) return NULL;
    PyObject *words = PyTuple_GET_ITEM(pair, 0);
    size_t n = rules_bytes(rules);
    if (!PyBytes_Check(words) || (size_t)PyBytes_GET_SIZE(words) != n ||
        memcmp(PyBytes_AS_STRING(words), rules, n))
        return NULL;
    return PyTuple_GET_ITEM(pair, 1);
}

/* The (words, state) pair of ``rules`` (a new reference), from the states memo under
 * their hash ``number``, else asked of ``state_of`` (number, words) (and again where
 * another's words share the number); NULL with an error set. */
static PyObject *state_pair(const Replay *r, uint64_t hash, const Rules *rules) {
    PyObject *number = PyLong_FromUnsignedLongLong(hash);
    if (!number) return NULL;
    PyObject *pair = PyDict_GetItemWithError(r->states, number);  /* borrowed */
    if (kept_state(pair, rules)) {
        Py_INCREF(pair);
    } else if (PyErr_Occurred()) {
        pair = NULL;
    } else {
        PyObject *key = PyBytes_FromStringAndSize((const char *)rules,
                                                  (Py_ssize_t)rules_bytes(rules));
        pair = key ? PyObject_CallFunctionObjArgs(r->state_of, number, key, NULL) : NULL;
        Py_XDECREF(key);
        if (pair && !kept_state(pair, rules)) {
            Py_CLEAR(pair);
            PyErr_SetString(PyExc_TypeError, "state_of must give (its words, a 4-tuple)");
        }
    }
    Py_DECREF(number);
    return pair;
}

/* One row: its rules' Python state (cfa, regs, ra_signed, ra_signed_pc), from its slot
 * where the words there are its own, else by ``state_pair`` (then kept in the slot),
 * and a ``Row`` of the start and the state's objects. */
static int make_row(void *raw, int64_t at, const Rules *rules) {
    RowsCtx *ctx = raw;
    uint64_t hash = rules_hash(rules);
    StateSlot *slot = &ctx->replay->slots[hash & (ROW_STATE_SLOTS - 1)];
    PyObject *state = slot->pair && slot->hash == hash ? kept_state(slot->pair, rules) : NULL;
    if (!state) {
        PyObject *pair = state_pair(ctx->replay, hash, rules);
        if (!pair) return -1;
        Py_XSETREF(slot->pair, pair);
        slot->hash = hash;
        state = PyTuple_GET_ITEM(pair, 1);
    }
    if (!PyTuple_Check(state) || PyTuple_GET_SIZE(state) != 4) {
        PyErr_SetString(PyExc_TypeError, "state_of must give (its words, a 4-tuple)");
        return -1;
    }
    RowSlot *kept = &ctx->replay->rows[(hash ^ (uint64_t)at * 0x9E3779B97F4A7C15u) >>
                                       (64 - ROW_SLOTS_BITS)];
    PyObject *row = kept->row;
    if (row && kept->at == at) {
        for (Py_ssize_t i = 0; i < 4 && row; i++)
            if (PyTuple_GET_ITEM(row, i + 1) != PyTuple_GET_ITEM(state, i)) row = NULL;
    } else {
        row = NULL;
    }
    if (row) return PyList_Append(ctx->rows, row) < 0 ? -1 : 1;
    PyTypeObject *type = (PyTypeObject *)ctx->replay->row_type;
    PyObject *start = PyLong_FromLongLong(at);
    row = start ? type->tp_alloc(type, 5) : NULL;
    if (!row) { Py_XDECREF(start); return -1; }
    PyTuple_SET_ITEM(row, 0, start);
    for (Py_ssize_t i = 0; i < 4; i++) {  /* (the row holds the state's objects) */
        PyObject *item = PyTuple_GET_ITEM(state, i);
        Py_INCREF(item);
        PyTuple_SET_ITEM(row, i + 1, item);
    }
    int appended = PyList_Append(ctx->rows, row);
    kept->at = at;
    Py_XSETREF(kept->row, row);  /* (the slot takes the reference made here) */
    return appended < 0 ? -1 : 1;
}

static void replay_destroy(PyObject *capsule) {
    Replay *r = PyCapsule_GetPointer(capsule, REPLAY_NAME);
    if (!r) return;
    Py_XDECREF(r->row_type);
    Py_XDECREF(r->states);
    Py_XDECREF(r->state_of);
    for (size_t i = 0; i < ROW_STATE_SLOTS; i++) Py_XDECREF(r->slots[i].pair);
    for (size_t i = 0; i < ROW_SLOTS; i++) Py_XDECREF(r->rows[i].row);
    PyMem_Free(r);
}

/* replay_params(params) -> cfi_rows' parameters, read by name once: code_align,
 * data_align, big_endian, row_type (a tuple type), states (the caller's dict: a
 * state's words' hash -> (its words, its Python state)) and state_of
 * (``dwarf/cfi._replay_params``). */
PyObject *replay_params(PyObject *Py_UNUSED(self), PyObject *params) {
    static char *keys[] = {"code_align", "data_align", "big_endian", "row_type", "states",
                           "state_of", NULL};
    PyObject *big_obj, *row_type, *states, *state_of;
    Params p = {0, 0, -1, -1, -1, 0, 0};
    if (!read_params(params, "$LLO!O!O!O:replay_params", keys, &p.code_align,
                     &p.data_align, &PyBool_Type, &big_obj, &PyType_Type, &row_type,
                     &PyDict_Type, &states, &state_of))
        return NULL;
    if (!PyType_IsSubtype((PyTypeObject *)row_type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "row_type must be a tuple type");
        return NULL;
    }
    Replay *r = PyMem_Calloc(1, sizeof *r);  /* (every slot empty) */
    if (!r) return PyErr_NoMemory();
    p.big_endian = big_obj == Py_True;
    r->p = p;
    Py_INCREF(row_type);
    Py_INCREF(states);
    Py_INCREF(state_of);
    r->row_type = row_type;
    r->states = states;
    r->state_of = state_of;
    PyObject *capsule = PyCapsule_New(r, REPLAY_NAME, replay_destroy);
    if (!capsule) {
        Py_DECREF(row_type);
        Py_DECREF(states);
        Py_DECREF(state_of);
        PyMem_Free(r);
    }
    return capsule;
}

/* cfi_rows(body, initial, params) -> the rows of one FDE body (a tuple of ``Row``s,
 * as ``dwarf/cfi._interpreted`` gives them), or None where the interpreter decides;
 * ``initial``: its CIE's instructions; params: ``replay_params``' capsule. */
PyObject *cfi_rows(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer body, init;
    PyObject *params;
    if (!PyArg_ParseTuple(args, "y*y*O:cfi_rows", &body, &init, &params)) return NULL;
    PyObject *out = NULL;
    Replay *r = PyCapsule_IsValid(params, REPLAY_NAME)
                    ? PyCapsule_GetPointer(params, REPLAY_NAME) : NULL;
    if (!r) {
        PyErr_SetString(PyExc_TypeError, "the parameters must be replay_params' capsule");
    } else {
        RowsCtx ctx = {PyList_New(0), r};
        int done = ctx.rows ? replay_rules(body.buf, body.len, init.buf, init.len, &r->p,
                                           make_row, &ctx) : -1;
        if (done > 0) {
            out = PyList_AsTuple(ctx.rows);
        } else if (done == 0) {
            out = Py_None;
            Py_INCREF(out);
        }
        Py_XDECREF(ctx.rows);
    }
    PyBuffer_Release(&body);
    PyBuffer_Release(&init);
    return out;
}
