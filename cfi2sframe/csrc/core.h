/* The compiled core's parts (the extension cfi2sframe._core): one C file per Python
 * module whose loops it runs, named after it (sframe_decode.c for sframe/decode.py),
 * module.c the module.  Each declares here what the others use of it. */
#ifndef CFI2SFRAME_CORE_H
#define CFI2SFRAME_CORE_H

#include <Python.h>
#include <stdarg.h>
#include <stdint.h>

#include "bytes.h"

/* dwarf_replay.c: the DWARF replay (the fast path's loop, ``sframe/fastpath._run``): the
 * state a default FRE holds, the target facts it reads, and where each changed row goes. */
#define NO_CFA (-1)  /* cfa_reg before any CFA rule */

typedef struct {
    int64_t cfa_reg, cfa_off, fp_slot, ra_slot;
    int has_fp, has_ra, signed_ra, huge;  /* huge: the H_ fields that hold huge numbers */
} State;

typedef struct {
    long long code_align, data_align, sp, fp, ra;
    int tracks_ra, big_endian;
} Params;

/* emit(ctx, row start, state): 1 taken, 0 the row has no answer (fall back), -1 a
 * Python error is set. */
typedef int (*Emit)(void *ctx, int64_t at, const State *s);

/* Replay one FDE body from ``s`` and emit the state at each row start where it
 * changes.  1: done; 0: the CFI left the subset (use the general path); -1: error. */
int replay(const uint8_t *data, Py_ssize_t len, State s, const Params *p, Emit emit,
           void *ctx);

/* The replay's full mode (``dwarf/cfi._interpreted`` is its reference): every register's
 * rule, as ``dwarf/interpret.py`` keeps them, for compact unwind.  ``Rules``' first
 * ``3 + 3 * count`` int64 words are a row's state as ``_core.cfi_rows`` hands it to
 * Python (flags, CFA register, CFA offset, then register, kind, value per rule, sorted
 * by register; ``_core.ROW_STATE`` gives the numbers). */
#define RULES_MAX 32
typedef struct { int64_t reg, kind, value; } RegRule;
typedef struct {
    int64_t flags, cfa_reg, cfa_off;
    RegRule regs[RULES_MAX];
    int count;
} Rules;

/* emit(ctx, row start, rules): as ``Emit``. */
typedef int (*EmitRules)(void *ctx, int64_t at, const Rules *rules);

/* Replay an FDE body in the full mode from the state its CIE's initial instructions
 * (``init``) give, emitting the rules at each row start where they change.  1: done;
 * 0: what the mode does not express (an expression, a number past 64 bits, an
 * unknown or cut operation, a CFI error): the interpreter decides; -1: error. */
int replay_rules(const uint8_t *data, Py_ssize_t len, const uint8_t *init,
                 Py_ssize_t init_len, const Params *p, EmitRules emit, void *ctx);
size_t rules_bytes(const Rules *rules);  /* the size of its words handed to Python */
PyObject *row_state_constants(void);  /* ROW_STATE: the flags and kinds, by name */

/* A state as the Python loop keys it: (CFA register, CFA offset, FP slot or None, RA
 * slot or None, RA signed); and back. */
PyObject *state_key(const State *s);
int read_state(PyObject *tuple, State *s);
int state_same(const State *a, const State *b);
size_t state_hash(const State *s);  /* for a table of states (equal: state_same) */
PyObject *dwarf_opcodes(void);  /* the DWARF CFA opcode numbers it reads, by name */

/* sframe_fastpath.c: one FDE body's FREs (fast_fres), a file's functions (lower_fdes;
 * eh_functions from its .eh_frame's bytes). */
PyObject *fast_fres(PyObject *self, PyObject *args);
PyObject *lower_fdes(PyObject *self, PyObject *args);
PyObject *eh_functions(PyObject *self, PyObject *args);  /* lower_fdes of an .eh_frame */
PyObject *eh_table_v2(PyObject *self, PyObject *args);  /* ... to a V2 table */

/* The replay's target parameters by name, as every entry point that replays for the
 * fast path reads them from Python's dict (``sframe/fastpath.replay_target``): SP's,
 * FP's and RA's DWARF numbers, whether RA's signing is tracked, the byte order, and
 * the state -> FRE fields answer; ``target_flags`` sets the two flags in ``Params``. */
#define TARGET_FORMAT "LLLO!O!O"
#define TARGET_NAMES "sp", "fp", "ra", "tracks_ra", "big_endian", "shape_of"
#define TARGET_ARGS(p, tracks, big, shape_of) \
    &(p)->sp, &(p)->fp, &(p)->ra, &PyBool_Type, (tracks), &PyBool_Type, (big), (shape_of)

static inline void target_flags(Params *p, PyObject *tracks, PyObject *big) {
    p->tracks_ra = tracks == Py_True;
    p->big_endian = big == Py_True;
}

/* What the fast path takes, checked by ``lower_fdes`` and ``stats_scan`` alike (the
 * conditions of ``sframe/build.lower_fdes``, ``format.fits``): before the replay, a
 * size from 1 to ``max_size``, the CIE's RA column the target's and its initial
 * state known; after it, at most ``max_fres`` FREs inside the function in V3.  Any
 * other FDE is the general path's. */
typedef struct {
    long long ra, max_size, max_fres;
    int version;
} FastLimits;

static inline int fast_path_takes(const FastLimits *l, uint64_t size, long long cie_ra,
                                  int start_known) {
    return size > 0 && l->max_size >= 0 && size <= (uint64_t)l->max_size &&
        cie_ra == l->ra && start_known;
}

static inline int fast_path_fits(const FastLimits *l, long long fres) {
    return l->version < 3 || fres <= l->max_fres;
}

/* sframe_encode.c: FREs to bytes (fres_bytes), a V2 section's FDEs and FREs (fdes_v2). */
PyObject *fres_bytes(PyObject *self, PyObject *args);
PyObject *fdes_v2(PyObject *self, PyObject *args);
PyObject *place_fdes(PyObject *self, PyObject *args);  /* a V2 FDE table placed */

/* The FRE start sizes by FRE type, smallest first (Python's ``FRE_START_SIZES``, from
 * ``sframe/format.FRE_ADDR_SIZE``), read into ``sizes``: their count, or -1 with a
 * TypeError or ValueError set (not 1 to FRE_TYPES_MAX sizes of 1 to 8 bytes). */
#define FRE_TYPES_MAX 16
int read_fre_sizes(PyObject *tuple, int sizes[FRE_TYPES_MAX]);

/* The FRE type of a function whose last FRE starts at ``top``: the first whose start
 * size holds it, else the last (``sframe/format.fre_type_for``, fed the same table);
 * ``fdes_v2`` encodes with it and ``stats_scan`` counts with it. */
int fre_type_for(uint64_t top, const int *sizes, int count);

/* sframe_decode.c: FREs from bytes (decode_fres), where the FDE ranges start and end
 * (fde_index). */
PyObject *decode_fres(PyObject *self, PyObject *args);
PyObject *fde_index(PyObject *self, PyObject *args, PyObject *kwargs);

/* sframe_selfcheck.c: a section we wrote, checked before an output holds it. */
PyObject *sframe_check(PyObject *self, PyObject *args, PyObject *kwargs);

/* dwarf_cfi.c: an .eh_frame walked (dwarf/cfi._walk).  A CIE as the walk keeps it, and an
 * FDE as it hands it on (``body``: its instructions' offset; ``params``: the target's,
 * with the CIE's alignment factors). */
typedef struct {
    Py_ssize_t at;
    int64_t code_align, data_align, ra;
    int fde_encoding, lsda_encoding, augmented, start_ok;
    State start;  /* the state after its initial instructions, if start_ok */
} CieInfo;

typedef struct {
    const uint8_t *data;
    Py_ssize_t start, end, body, field;  /* field: the start field's offset */
    const CieInfo *cie;
    uint64_t pc, range, lsda;
    int has_lsda;
    Params params;
} EhFde;

/* on_fde(ctx, fde): 1 go on, 0 stop (not ordinary), -1 a Python error is set. */
typedef int (*OnFde)(void *ctx, const EhFde *fde);
int eh_walk(const uint8_t *data, Py_ssize_t size, uint64_t address, int address_size,
            int big, const Params *arch, OnFde on_fde, void *ctx);
PyObject *eh_fdes(PyObject *self, PyObject *args);
/* Shared with analysis_stats.c, which also replays each distinct (CIE, body) once: a
 * body's hash with its CIE's offset (a hash two bodies share is checked byte for byte
 * by ``same_body``), and room for one more item in a growing array. */
uint64_t body_hash(Py_ssize_t cie_at, const uint8_t *bytes, Py_ssize_t len);
int same_body(const EhFde *e, Py_ssize_t cie_at, Py_ssize_t at, Py_ssize_t len);
int room(void **items, size_t *cap, size_t used, size_t item);
/* An FDE's function named as ``dwarf/cfi.function_name`` names it: ``names``'
 * (section, start) entry, else SECTION+ADDR (pc+ADDR when ``section`` is ""); ``value``
 * is ``start``'s.  A new reference, or NULL with an error set. */
PyObject *fde_name(PyObject *names, PyObject *section, PyObject *start,
                   unsigned long long value);
PyObject *cfi_rows(PyObject *self, PyObject *args);  /* one body's rows (full mode) */
PyObject *replay_params(PyObject *self, PyObject *params);  /* cfi_rows' parameters */
PyObject *eh_constants(void);  /* the DW_EH_PE numbers it reads, by name */

/* analysis_compare.c: verify's check of functions, one (agree) or a whole file's. */
PyObject *agree(PyObject *self, PyObject *args);
PyObject *verify_scan(PyObject *self, PyObject *args, PyObject *kwargs);

/* analysis_stats.c: stats' count of a linked file's FDEs and their SFrame sizes, in
 * its own walk (stats_scan) or in verify_scan's, one FDE at a time: ``stats_begin``
 * (1 counted or left without a replay, 0 replay it: its rows to ``stats_row``, an
 * ``Emit``, then ``stats_end`` with the replay's answer; -1 error).  ``stats_open``
 * reads stats_scan's memos and parameters (the replay's target into ``p``, the file's
 * address size), NULL with an error set; ``stats_counts`` is stats_scan's answer. */
typedef struct StatsCtx StatsCtx;
StatsCtx *stats_open(PyObject *shapes, PyObject *sizes, PyObject *params, Params *p,
                     int *address_size);
int stats_begin(StatsCtx *ctx, const EhFde *e);
int stats_row(void *ctx, int64_t at, const State *s);
int stats_end(StatsCtx *ctx, const EhFde *e, int done);
PyObject *stats_counts(const StatsCtx *ctx);
void stats_close(StatsCtx *ctx);
PyObject *stats_scan(PyObject *self, PyObject *args);

/* frontend_scan.c: the assembler text's CFI directives and probe labels. */
PyObject *scan_cfi(PyObject *self, PyObject *args);
PyObject *with_labels(PyObject *self, PyObject *args);
PyObject *probe_symbols(PyObject *self, PyObject *args);

/* elf_symbols.c: the function names of a symbol table. */
PyObject *function_names(PyObject *self, PyObject *args);

/* ``item`` (a new reference, or NULL where making it failed) appended to ``list``,
 * which takes it over; -1 on error.  How the loops in C hand back their findings. */
static inline int append_new(PyObject *list, PyObject *item) {
    if (!item) return -1;
    int status = PyList_Append(list, item);
    Py_DECREF(item);
    return status;
}

/* ``memo[key]``, else ``make(key)`` kept there: a borrowed reference (the dict holds
 * it), or NULL with a Python error set.  How the loops in C ask Python once per
 * distinct state, FRE or CIE and remember the answer. */
static inline PyObject *memo_lookup(PyObject *memo, PyObject *key, PyObject *make) {
    PyObject *found = PyDict_GetItemWithError(memo, key);
    if (found || PyErr_Occurred()) return found;
    PyObject *made = PyObject_CallOneArg(make, key);
    if (!made) return NULL;
    int failed = PyDict_SetItem(memo, key, made) < 0;
    Py_DECREF(made);
    return failed ? NULL : PyDict_GetItemWithError(memo, key);
}

/* An entry point's target and format parameters, read by name from the one dict
 * Python builds for them once (``format`` and ``names`` as PyArg_ParseTupleAndKeywords
 * takes them, every one keyword-only, "$..."): a parameter missing, unknown, of the
 * wrong type, or the dict given in another argument's place is a TypeError, where a
 * dozen positional ints swapped would run on.  1, or 0 with the error set. */
static inline int read_params(PyObject *params, const char *format, char **names, ...) {
    if (!PyDict_Check(params)) {
        PyErr_SetString(PyExc_TypeError, "the parameters must be a dict of them by name");
        return 0;
    }
    PyObject *none = PyTuple_New(0);
    if (!none) return 0;
    va_list va;
    va_start(va, names);
    int ok = PyArg_VaParseTupleAndKeywords(none, params, format, names, va);
    va_end(va);
    Py_DECREF(none);
    return ok;
}

/* compact_listing.c: an image's __unwind_info listed as ``dump`` prints it. */
PyObject *unwind_info_text(PyObject *self, PyObject *args);
PyObject *unwind_info_constants(void);  /* its Mach-O symbol numbers */

/* compact_table.c: an __unwind_info's entries read into columns, and looked up. */
PyObject *unwind_info_entries(PyObject *self, PyObject *args);
PyObject *unwind_info_rows(PyObject *self, PyObject *args);
PyObject *unwind_info_misses(PyObject *self, PyObject *args);

/* table_writer.c: an __unwind_info built from columns of functions. */
PyObject *unwind_info_build(PyObject *self, PyObject *args, PyObject *kwargs);

/* compact_lower.c: a function's rows as their states' objects (compact/lower's key). */
PyObject *row_state_ids(PyObject *self, PyObject *rows);
PyObject *placed_spans(PyObject *self, PyObject *args);  /* inexact spans of a placed row */

/* compact_text.c: compact's listing of functions, their rows and check lines. */
PyObject *compact_rows_text(PyObject *self, PyObject *args);

/* compact_check.c: verify's loop over an image's __unwind_info entries. */
PyObject *image_entries(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *fde_extents(PyObject *self, PyObject *args, PyObject *kwargs);

/* sframe_dump.c: an SFrame section's FDEs checked, or written as dump prints them. */
PyObject *sframe_dump(PyObject *self, PyObject *args, PyObject *kwargs);

/* elf_reloc.c: one relocation section of an ELF object applied. */
PyObject *relocate(PyObject *self, PyObject *args);

/* elf_grow.c: whether a relocation section refers to a span (a grown table's check). */
PyObject *rela_within(PyObject *self, PyObject *args);

/* xray.c: an XRay FDR trace's dump lines and stacks (keyword arguments). */
PyObject *xray_labels(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *xray_dump(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *xray_stacks(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *xray_constants(void);  /* its FDR record sizes and kinds, by name */

/* files.c: a new file's writeback started, not waited for (--in-place's check meanwhile). */
PyObject *start_writeback(PyObject *self, PyObject *args);
PyObject *close_later(PyObject *self, PyObject *args);
PyObject *copy_later(PyObject *self, PyObject *args);

#endif
