/* The compiled core's Mach-O half: an image's ``__TEXT,__unwind_info`` listed as
 * ``dump`` prints it.
 *
 * ``unwind_info_text`` is ``compact/listing.py``'s ``unwind_info_lines`` over
 * ``compact/table.py``'s ``read_unwind_info`` (their reference and fallback), for a
 * well-formed table: wherever the Python reader would raise, this gives None and the
 * Python path runs and says why.  The problems a readable table may have (libunwind
 * would not find a row) come back as (name, numbers...) for ``table.PROBLEMS`` to
 * put in words.  The table is read and checked through ``unwind_info.h`` (the reader
 * ``compact_table.c`` shares); what is this file's is the text and the names.
 * Function names are read from the image's symbol table here, as
 * ``MachoView.function_names`` reads them (a global symbol first, then file order);
 * each encoding's meaning is asked of Python once (a STACK_IND's at each function,
 * as its words depend on the code).  A 100k-function listing takes about 20 ms here
 * against 0.35 s in Python.  tests/differential/test_core_unwind_info.py holds the
 * two equal on real images and on planted faults.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "kept.h"
#include "out.h"
#include "unwind_info.h"

/* The Mach-O symbol numbers the names are read with (the layout's are
 * ``unwind_info.h``'s). */
enum { N_STAB = 0xE0, N_TYPE = 0x0E, N_SECT = 0x0E, N_EXT = 0x01 };

/* Each number above has its Python home (``macho/read.py``);
 * tests/differential/test_core_unwind_info.py holds them equal. */
PyObject *unwind_info_constants(void) {
    return Py_BuildValue("{sisisisi}", "N_STAB", N_STAB, "N_TYPE", N_TYPE, "N_SECT", N_SECT,
                         "N_EXT", N_EXT);
}

/* Mach-O symbol fields are little-endian on every target here. */
static uint32_t rd32(const uint8_t *p) { return (uint32_t)read_uint(p, 4, 0); }
static uint64_t rd64(const uint8_t *p) { return read_uint(p, 8, 0); }

/* [at, at + size) lies in a buffer of len bytes (sizes up to 2**34: no overflow). */
static int fits(uint64_t at, uint64_t size, uint64_t len) {
    return at <= len && size <= len - at;
}

/* A defined symbol that may name a function: its value, its rank (a global one
 * first, then file order) and its name in the string table. */
typedef struct { uint64_t value, rank; uint32_t strx, size; } Name;

static int by_value_then_rank(const void *a, const void *b) {
    const Name *x = a, *y = b;
    if (x->value != y->value) return x->value < y->value ? -1 : 1;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* ``MachoView.function_names`` as a sorted array, one name per address (the best
 * ranked); *count set.  NULL with *count 0 for no names; NULL with an error set. */
static Name *read_names(const uint8_t *image, uint64_t len, uint64_t symoff, uint64_t nsyms,
                        uint64_t stroff, uint64_t strsize, int wide, size_t *count,
                        int *bad) {
    uint64_t entry = wide ? 16 : 12;
    *count = 0;
    if (!fits(symoff, entry * nsyms, len) || !fits(stroff, strsize, len)) {
        *bad = 1;
        return NULL;
    }
    if (!nsyms) return NULL;
    Name *names = PyMem_Malloc(sizeof(Name) * nsyms);
    if (!names) { PyErr_NoMemory(); return NULL; }
    const uint8_t *strings = image + stroff;
    size_t n = 0;
    for (uint64_t i = 0; i < nsyms; i++) {
        const uint8_t *p = image + symoff + entry * i;
        uint32_t strx = rd32(p);
        uint8_t kind = p[4];
        if (kind & N_STAB || (kind & N_TYPE) != N_SECT) continue;
        if (strx >= strsize || !strings[strx]) continue;  /* no name, or an empty one */
        const uint8_t *end = memchr(strings + strx, 0, strsize - strx);
        names[n].value = wide ? rd64(p + 8) : rd32(p + 8);
        names[n].rank = (uint64_t)!(kind & N_EXT) << 32 | i;
        names[n].strx = strx;
        names[n].size = (uint32_t)(end ? (uint64_t)(end - strings) - strx : strsize - strx);
        n++;
    }
    qsort(names, n, sizeof(Name), by_value_then_rank);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (!kept || names[kept - 1].value != names[i].value) names[kept++] = names[i];
    *count = kept;
    return names;
}

static int by_number(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* The meaning of ``encoding`` at ``address`` (plus 2**64 where ``wrapped``) as UTF-8 (a
 * bytes object owned by the cache, or a new reference in *fresh for a STACK_IND's);
 * NULL on error.  Meanings are
 * asked of Python once per encoding, kept by it in ``w``. */
static PyObject *meaning(Kept *w, PyObject *describe, uint32_t encoding, uint64_t address,
                         int wrapped, int keep, PyObject **fresh) {
    if (keep) {
        PyObject *kept = kept_get(w, &encoding, sizeof encoding);
        if (kept) return kept;
    }
    PyObject *where = PyLong_FromUnsignedLongLong(address);
    if (where && wrapped) {  /* the address is 2**64 more */
        PyObject *carry = PyLong_FromString("10000000000000000", NULL, 16);
        PyObject *sum = carry ? PyNumber_Add(where, carry) : NULL;
        Py_XDECREF(carry);
        Py_SETREF(where, sum);
    }
    if (!where) return NULL;
    PyObject *text = PyObject_CallFunction(describe, "kN", (unsigned long)encoding, where);
    if (!text) return NULL;
    if (!PyUnicode_Check(text)) {
        Py_DECREF(text);
        PyErr_SetString(PyExc_TypeError, "a meaning must be a str");
        return NULL;
    }
    PyObject *utf8 = PyUnicode_AsUTF8String(text);
    Py_DECREF(text);
    if (!utf8) return NULL;
    if (!keep) return *fresh = utf8;
    return kept_put(w, &encoding, sizeof encoding, utf8) < 0 ? NULL : utf8;
}

static const char *const HEADER_LABELS[UI_HEADER_WORDS] = {
    "Version:", "Common encodings array section offset:",
    "Number of common encodings in array:", "Personality function array section offset:",
    "Number of personality functions in array:", "Index array section offset:",
    "Number of indices in array:",
};

/* A titled list of 32-bit words, numbered from ``first``, at ``indent``. */
static int put_words(Out *o, const char *indent, const char *title, const char *label,
                     const Bytes *b, uint64_t words, uint32_t count, uint32_t first) {
    size_t width = strlen(indent);
    put(o, indent, width);
    put(o, title, strlen(title));
    PUTS(o, ": (count = ");
    put_dec(o, count);
    PUTS(o, ")\n");
    for (uint32_t i = 0; i < count; i++) {
        put(o, indent, width);
        PUTS(o, "  ");
        put(o, label, strlen(label));
        PUTS(o, "[");
        put_dec(o, first + i);
        PUTS(o, "]: ");
        put_hex(o, ui_word(b, words + (uint64_t)UI_WORD_BYTES * i, UI_WORD_BYTES), 8);
        PUTS(o, "\n");
    }
    return o->failed ? -1 : 0;
}

/* The first name at or after ``address``. */
static size_t name_from(const Name *names, size_t count, uint64_t address) {
    size_t lo = 0, hi = count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (names[mid].value < address) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Append (name, numbers...) to the problems; -1 on error. */
static int problem(PyObject *problems, const char *format, ...) {
    va_list numbers;
    va_start(numbers, format);
    PyObject *item = Py_VaBuildValue(format, numbers);
    va_end(numbers);
    return append_new(problems, item);
}

/* One listing in the making: the section and the image's names (the input), where it
 * goes, and what the header's check found (its seven words, the LSDA index). */
typedef struct {
    Out *o;
    Bytes b;
    const uint8_t *strings;
    uint64_t base;
    const Name *names;
    size_t name_count, name_at;  /* name_at: where the walk over the names is */
    Kept *w;
    PyObject *describe, *problems;
    long long stack_ind;
    uint32_t head[UI_HEADER_WORDS], lsda_count, first_lsda;
    uint32_t *lsda_functions;  /* the LSDA index's function offsets, sorted */
    uint64_t last_offset;      /* the last entry's function offset, if any */
    int any;
} Listing;

/* One second-level page: its number, the functions it covers (``function`` to
 * ``next_function``), its offset in the section and what ``ui_page`` read of it. */
typedef struct {
    uint32_t number, function, next_function, offset;
    UiPage p;
} Page;

/* The header's words and the LSDA index checked (1: malformed), the index's function
 * offsets sorted for the look-ups of ``check_entry`` (a linker sorts them; a damaged
 * table need not).  -1 on error. */
static int check_header(Listing *l) {
    if (!ui_header(&l->b, l->head, &l->first_lsda, &l->lsda_count)) return 1;
    l->lsda_functions = PyMem_Malloc(sizeof(uint32_t) * ((size_t)l->lsda_count + 1));
    if (!l->lsda_functions) { PyErr_NoMemory(); return -1; }
    uint32_t lsda;
    for (uint32_t i = 0; i < l->lsda_count; i++)
        ui_lsda(&l->b, l->first_lsda, i, &l->lsda_functions[i], &lsda);
    qsort(l->lsda_functions, l->lsda_count, sizeof(uint32_t), by_number);
    return 0;
}

/* The listing's first part: the header, the common encodings and personalities, the
 * top-level index and the LSDA descriptors.  -1 on error. */
static int list_header(Listing *l) {
    Out *o = l->o;
    const uint32_t *head = l->head;
    PUTS(o, "Contents of __unwind_info section:\n");
    for (int i = 0; i < UI_HEADER_WORDS; i++) {
        size_t n = strlen(HEADER_LABELS[i]);
        PUTS(o, "  ");
        put(o, HEADER_LABELS[i], n);
        if (n < 43) put_fill(o, ' ', 43 - n);
        put_hex(o, head[i], 1);
        PUTS(o, "\n");
    }
    if (put_words(o, "  ", "Common encodings", "encoding", &l->b, head[1], head[2], 0) < 0 ||
        put_words(o, "  ", "Personality functions", "personality", &l->b, head[3], head[4],
                  1) < 0)
        return -1;
    PUTS(o, "  Top level indices: (count = ");
    put_dec(o, head[6]);
    PUTS(o, ")\n");
    for (uint32_t i = 0; i < head[6]; i++) {
        uint32_t function, page_at, lsda_at;
        ui_index(&l->b, head, i, &function, &page_at, &lsda_at);
        PUTS(o, "    [");
        put_dec(o, i);
        PUTS(o, "]: function offset=");
        put_hex(o, function, 8);
        PUTS(o, ", 2nd level page offset=");
        put_hex(o, page_at, 8);
        PUTS(o, ", LSDA offset=");
        put_hex(o, lsda_at, 8);
        PUTS(o, "\n");
    }
    PUTS(o, "  LSDA descriptors:\n");
    for (uint32_t i = 0; i < l->lsda_count; i++) {
        uint32_t function, lsda;
        ui_lsda(&l->b, l->first_lsda, i, &function, &lsda);
        PUTS(o, "    [");
        put_dec(o, i);
        PUTS(o, "]: function offset=");
        put_hex(o, function, 8);
        PUTS(o, ", LSDA offset=");
        put_hex(o, lsda, 8);
        PUTS(o, "\n");
    }
    PUTS(o, "  Second level indices:\n");
    return o->failed ? -1 : 0;  /* before Python is called */
}

/* Second-level page ``number`` read from the top-level index (1: malformed; an index
 * out of order is a problem, not a fault).  -1 on error. */
static int read_page(Listing *l, uint32_t number, Page *p) {
    uint32_t next_at, lsda_at;
    p->number = number;
    ui_index(&l->b, l->head, number, &p->function, &p->offset, &lsda_at);
    ui_index(&l->b, l->head, number + 1, &p->next_function, &next_at, &lsda_at);
    if (p->next_function < p->function &&
        problem(l->problems, "(sIkk)", "index-order", number, (unsigned long)p->next_function,
                (unsigned long)p->function) < 0)
        return -1;
    return !ui_page(&l->b, p->offset, &p->p);
}

/* An entry's problems (outside its page's functions, out of order) and faults (a
 * personality past the list, an LSDA the index lacks: 1).  -1 on error. */
static int check_entry(Listing *l, const Page *p, uint64_t offset, uint32_t encoding) {
    if ((offset < p->function || offset >= p->next_function) &&
        problem(l->problems, "(sIKkkO)", "outside", p->number, (unsigned long long)offset,
                (unsigned long)p->function, (unsigned long)p->next_function,
                p->number + 2 == l->head[6] ? Py_True : Py_False) < 0)
        return -1;
    if (l->any && offset < l->last_offset) {
        if (problem(l->problems, "(sIKK)", "entry-order", p->number,
                    (unsigned long long)offset, (unsigned long long)l->last_offset) < 0)
            return -1;
        l->name_at = name_from(l->names, l->name_count, l->base + offset);
    }
    l->any = 1;
    l->last_offset = offset;
    if (ui_personality(encoding) > l->head[4]) return 1;
    if (encoding & UI_HAS_LSDA) {  /* its LSDA index entry must exist */
        uint32_t lo = 0, hi = l->lsda_count;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (l->lsda_functions[mid] < offset) lo = mid + 1;
            else hi = mid;
        }
        if (lo == l->lsda_count || l->lsda_functions[lo] != offset) return 1;
    }
    return 0;
}

/* Entry ``i``'s line: its offset, encoding, function name (else pc+ADDRESS) and the
 * encoding's meaning.  -1 on error. */
static int list_entry(Listing *l, const Page *p, uint32_t i, uint64_t offset,
                      uint32_t encoding, uint32_t which) {
    Out *o = l->o;
    uint64_t address = l->base + offset;
    int wrapped = address < l->base;  /* past 2**64: 1 and these 64 bits, no name */
    const Name *name = NULL;
    if (!wrapped) {  /* entries come in address order: the names are walked once */
        while (l->name_at < l->name_count && l->names[l->name_at].value < address)
            l->name_at++;
        if (l->name_at < l->name_count && l->names[l->name_at].value == address)
            name = &l->names[l->name_at];
    }
    PyObject *fresh = NULL;
    int keep = (long long)(encoding & UI_MODE_MASK) != l->stack_ind;
    PyObject *words = meaning(l->w, l->describe, encoding, address, wrapped, keep, &fresh);
    if (!words) return -1;
    PUTS(o, "      [");
    put_dec(o, i);
    PUTS(o, "]: function offset=");
    put_hex(o, offset, 8);
    if (p->p.kind == UI_REGULAR) {
        PUTS(o, ", encoding=");
    } else {
        PUTS(o, ", encoding[");
        put_dec(o, which);
        PUTS(o, "]=");
    }
    put_hex(o, encoding, 8);
    PUTS(o, "  ");
    if (name) {
        put(o, (const char *)l->strings + name->strx, name->size);
    } else {
        PUTS(o, "pc+");
        if (wrapped) {
            PUTS(o, "0x1");
            put_hex_digits(o, address, 16);
        } else {
            put_hex(o, address, 1);
        }
    }
    PUTS(o, ": ");
    put(o, PyBytes_AS_STRING(words), (size_t)PyBytes_GET_SIZE(words));
    PUTS(o, "\n");
    Py_XDECREF(fresh);
    return o->failed ? -1 : 0;  /* before Python is called again */
}

/* Second-level page ``number``: its title, its own encodings, its entries.  1 when it
 * is malformed, -1 on error, 0. */
static int list_page(Listing *l, uint32_t number) {
    Out *o = l->o;
    Page p;
    int status = read_page(l, number, &p);
    if (status) return status;
    if (o->failed) return -1;
    PUTS(o, "    Second level index[");
    put_dec(o, number);
    PUTS(o, "]: offset in section=");
    put_hex(o, p.offset, 8);
    PUTS(o, ", base function offset=");
    put_hex(o, p.function, 8);
    PUTS(o, "\n");
    if (p.p.local_count &&  /* llvm-objdump leaves out an empty list */
        put_words(o, "      ", "Page encodings", "encoding", &l->b, p.p.local_at,
                  p.p.local_count, l->head[2]) < 0)
        return -1;
    for (uint32_t i = 0; i < p.p.count; i++) {
        uint64_t offset;
        uint32_t encoding, which;
        if (!ui_entry(&l->b, l->head, &p.p, p.function, i, &offset, &encoding, &which))
            return 1;
        if ((status = check_entry(l, &p, offset, encoding)) != 0 ||
            (status = list_entry(l, &p, i, offset, encoding, which)) != 0)
            return status;
    }
    return 0;
}

/* The listing into *o, problems into ``problems``; 1 when the table is malformed
 * (the Python reader then raises and says where), -1 on error, 0 when done. */
static int list_table(Listing *l) {
    int status = check_header(l);
    if (status) return status;
    if (list_header(l) < 0) return -1;
    for (uint32_t number = 0; number + 1 < l->head[6]; number++)
        if ((status = list_page(l, number)) != 0) return status;
    return l->o->failed ? -1 : 0;
}

PyObject *unwind_info_text(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer section, image;
    unsigned long long base, symoff, nsyms, stroff, strsize;
    int wide;
    long long stack_ind;
    PyObject *describe;
    if (!PyArg_ParseTuple(args, "y*Ky*(KKKK)pOL", &section, &base, &image, &symoff, &nsyms,
                          &stroff, &strsize, &wide, &describe, &stack_ind))
        return NULL;
    PyObject *result = NULL;
    Out out = {NULL, 0, 0, 0};
    Kept words = {NULL, 0, 0};
    size_t name_count = 0;
    int bad = 0;
    Name *names = NULL;
    uint32_t *lsda_functions = NULL;
    if (kept_init(&words, 64) < 0) goto done;
    names = read_names(image.buf, (uint64_t)image.len, symoff, nsyms, stroff, strsize, wide,
                       &name_count, &bad);
    if (PyErr_Occurred()) goto done;
    if (bad) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    PyObject *problems = PyList_New(0);
    if (!problems) goto done;
    Listing listing = {&out, {section.buf, section.len, 0},
                       (const uint8_t *)image.buf + stroff, base, names, name_count, 0, &words, describe,
                       problems, stack_ind, {0}, 0, 0, NULL, 0, 0};
    int status = list_table(&listing);
    lsda_functions = listing.lsda_functions;
    if (out.failed) status = -1;  /* a write failed: its MemoryError, not a verdict */
    if (status == 0) {
        PyObject *text = out_text(&out, "replace");
        if (text) result = Py_BuildValue("(NO)", text, problems);
    } else if (status == 1) {
        result = Py_NewRef(Py_None);
    }
    Py_DECREF(problems);
done:
    PyMem_Free(lsda_functions);
    PyMem_Free(names);
    out_free(&out);
    kept_free(&words);
    PyBuffer_Release(&section);
    PyBuffer_Release(&image);
    return result;
}
