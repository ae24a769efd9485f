/* The directive scanner of frontend/scan.py (``scan``, its reference) in C, for ASCII
 * text: the lines holding a needle are split into statements (comments dropped,
 * strings respected, ``;`` separating), labels are stripped, and the ``.cfi_*``
 * statements are returned with their 1-based line and the offset of their first
 * character, those inside ``.macro``/``.rept``/``.irp`` bodies apart.
 *
 * Whitespace, word and digit classes are Python's for ASCII str: what ``str.strip``,
 * ``str.split`` and the ``re`` module's ``\s``, ``\w`` and ``\d`` accept there.  Text
 * holding any other character is left to the reference (None). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#include "core.h"
#include "elf.h"

static inline int is_space(unsigned char c) {
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

static inline int is_word(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
        || c == '_';
}

static inline int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

static inline int is_name_start(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '.'
        || c == '$';
}

static inline char lower(char c) { return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c; }

/* Whether ``line`` (``n`` bytes) holds ``needle``. */
static inline int holds(const char *line, size_t n, const char *needle) {
    return memmem(line, n, needle, strlen(needle)) != NULL;
}

/* A statement being collected: its characters and the column of each. */
typedef struct {
    char *chars;
    Py_ssize_t *cols;
    Py_ssize_t len;
} Piece;

typedef struct {
    PyObject *cls;        /* Statement */
    PyObject *items, *in_bodies;
    int bodies;           /* the text has bodies: track their depth */
    int depth;
    Py_ssize_t line_start, line_no;
} Scan;

static PyObject *statement(PyObject *cls, const char *text, Py_ssize_t n, Py_ssize_t line,
                           Py_ssize_t offset) {
    PyObject *self = ((PyTypeObject *)cls)->tp_alloc((PyTypeObject *)cls, 3);
    if (!self) return NULL;
    PyObject *t = PyUnicode_DecodeASCII(text, n, NULL);
    PyObject *l = PyLong_FromSsize_t(line);
    PyObject *o = PyLong_FromSsize_t(offset);
    if (!t || !l || !o) {
        Py_XDECREF(t); Py_XDECREF(l); Py_XDECREF(o); Py_DECREF(self);
        return NULL;
    }
    PyTuple_SET_ITEM(self, 0, t);
    PyTuple_SET_ITEM(self, 1, l);
    PyTuple_SET_ITEM(self, 2, o);
    return self;
}

/* Length of the labels (``name:`` or ``1:``, each with the whitespace around its
 * colon) at the start of ``s``: scan.py's ``_LABELS``. */
static Py_ssize_t label_prefix(const char *s, Py_ssize_t n) {
    Py_ssize_t done = 0;
    for (;;) {
        Py_ssize_t i = done;
        if (i < n && (is_digit((unsigned char)s[i]))) {
            while (i < n && is_digit((unsigned char)s[i])) i++;
        } else if (i < n && is_name_start((unsigned char)s[i])) {
            i++;
            while (i < n && (is_word((unsigned char)s[i]) || s[i] == '.' || s[i] == '$')) i++;
        } else {
            return done;
        }
        while (i < n && is_space((unsigned char)s[i])) i++;
        if (i >= n || s[i] != ':' || (i + 1 < n && s[i + 1] == ':')) return done;
        i++;
        while (i < n && is_space((unsigned char)s[i])) i++;
        done = i;
    }
}

static int word_is(const char *w, Py_ssize_t n, const char *word) {
    if ((size_t)n != strlen(word)) return 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (lower(w[i]) != word[i]) return 0;
    return 1;
}

/* One statement (``p``, unstripped): stripped, its labels dropped, kept if CFI. */
static int take(Scan *sc, const Piece *p) {
    Py_ssize_t lead = 0, end = p->len;
    while (lead < end && is_space((unsigned char)p->chars[lead])) lead++;
    while (end > lead && is_space((unsigned char)p->chars[end - 1])) end--;
    if (lead == end) return 0;
    const char *stmt = p->chars + lead;
    Py_ssize_t n = end - lead;
    Py_ssize_t skip = label_prefix(stmt, n);
    const char *body = stmt + skip;
    Py_ssize_t blen = n - skip;
    if (blen >= 5 && word_is(body, 5, ".cfi_")) {
        PyObject *found = statement(sc->cls, body, blen, sc->line_no,
                                    sc->line_start + p->cols[lead + skip]);
        if (!found) return -1;
        int rc = PyList_Append(sc->depth ? sc->in_bodies : sc->items, found);
        Py_DECREF(found);
        return rc;
    }
    if (sc->bodies && blen) {
        Py_ssize_t w = 0;
        while (w < blen && !is_space((unsigned char)body[w])) w++;
        if (word_is(body, w, ".macro") || word_is(body, w, ".rept")
                || word_is(body, w, ".irp") || word_is(body, w, ".irpc"))
            sc->depth++;
        else if ((word_is(body, w, ".endm") || word_is(body, w, ".endr")) && sc->depth)
            sc->depth--;
    }
    return 0;
}

/* scan.py's ``_split`` of one line, each statement given to ``take``; returns -1 on
 * an error, else whether a ``/ *`` comment is still open at the line's end. */
static int split(Scan *sc, const char *line, Py_ssize_t n, const char *comment_chars,
                 int in_comment, Piece *p) {
    p->len = 0;
    int slow = in_comment;
    for (Py_ssize_t i = 0; i < n && !slow; i++)
        slow = line[i] == '"' || line[i] == ';' || line[i] == '/' || line[i] == '*';
    if (!slow) {
        Py_ssize_t cut = n;
        for (Py_ssize_t i = 0; i < n; i++)
            if (strchr(comment_chars, line[i]) && line[i]) { cut = i; break; }
        for (Py_ssize_t i = 0; i < cut; i++) {
            p->chars[p->len] = line[i];
            p->cols[p->len++] = i;
        }
        return take(sc, p) < 0 ? -1 : 0;
    }
    int in_string = 0;
    Py_ssize_t i = 0;
    while (i < n) {
        char ch = line[i];
        if (in_comment) {
            const char *end = memmem(line + i, (size_t)(n - i), "*/", 2);
            if (!end) break;
            in_comment = 0;
            i = end - line + 2;
            continue;
        }
        if (!in_string) {
            if (ch == '/' && i + 1 < n && line[i + 1] == '*') {
                in_comment = 1;
                i += 2;
                continue;
            }
            if ((ch && strchr(comment_chars, ch)) || (ch == '/' && i + 1 < n && line[i + 1] == '/'))
                break;
            if (ch == ';') {
                if (take(sc, p) < 0) return -1;
                p->len = 0;
                i++;
                continue;
            }
        }
        if (ch == '"') {
            in_string = !in_string;
        } else if (in_string && ch == '\\' && i + 1 < n) {
            p->chars[p->len] = ch;
            p->cols[p->len++] = i;
            i++;
            ch = line[i];
        }
        p->chars[p->len] = ch;
        p->cols[p->len++] = i;
        i++;
    }
    if (take(sc, p) < 0) return -1;
    return in_comment;
}

PyObject *scan_cfi(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *text_obj, *cls;
    const char *comment_chars;
    if (!PyArg_ParseTuple(args, "UsO", &text_obj, &comment_chars, &cls)) return NULL;
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "scan_cfi: the statement class must be a tuple");
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(text_obj)) Py_RETURN_NONE;
    const char *text = (const char *)PyUnicode_DATA(text_obj);
    Py_ssize_t size = PyUnicode_GET_LENGTH(text_obj);
    size_t usize = (size_t)size;  /* a length: never negative */
    Scan sc = {cls, PyList_New(0), PyList_New(0), 0, 0, 0, 1};
    if (!sc.items || !sc.in_bodies) goto fail;
    sc.bodies = memmem(text, usize, ".macro", 6) || memmem(text, usize, ".rept", 5)
        || memmem(text, usize, ".irp", 4);
    const char *needles[8] = {".cfi_", ".macro", ".endm", ".rept", ".irp", ".endr", NULL, NULL};
    int count = sc.bodies ? 6 : 1;
    if (memmem(text, usize, "/*", 2)) {
        needles[count++] = "/*";
        needles[count++] = "*/";
    }
    Piece piece = {NULL, NULL, 0};
    Py_ssize_t longest = 0;
    int in_comment = 0;
    Py_ssize_t counted_to = 0;
    for (Py_ssize_t start = 0; start <= size;) {
        const char *nl = memchr(text + start, '\n', (size_t)(size - start));
        Py_ssize_t end = nl ? nl - text : size;
        const char *line = text + start;
        Py_ssize_t n = end - start;
        int wanted = 0;
        for (int k = 0; k < count && !wanted; k++) wanted = holds(line, (size_t)n, needles[k]);
        if (wanted) {
            for (Py_ssize_t j = counted_to; j < start; j++) sc.line_no += text[j] == '\n';
            counted_to = start;
            if (n > longest) {
                char *chars = PyMem_Realloc(piece.chars, (size_t)n + 1);
                if (chars) piece.chars = chars;
                Py_ssize_t *cols = PyMem_Realloc(piece.cols, ((size_t)n + 1) * sizeof(Py_ssize_t));
                if (cols) piece.cols = cols;
                if (!chars || !cols) { PyErr_NoMemory(); goto fail_piece; }
                longest = n;
            }
            sc.line_start = start;
            int rc = split(&sc, line, n, comment_chars, in_comment, &piece);
            if (rc < 0) goto fail_piece;
            in_comment = rc;
        }
        if (!nl) break;
        start = end + 1;
    }
    PyMem_Free(piece.chars);
    PyMem_Free(piece.cols);
    return Py_BuildValue("(NN)", sc.items, sc.in_bodies);
fail_piece:
    PyMem_Free(piece.chars);
    PyMem_Free(piece.cols);
fail:
    Py_XDECREF(sc.items);
    Py_XDECREF(sc.in_bodies);
    return NULL;
}

/* ``text`` with ``prefix`` + its index + ``": "`` inserted at each of ``offsets`` (in
 * order): frontend/probe.with_probes, its reference.  None for text that is not
 * ASCII or a prefix that is not. */
PyObject *with_labels(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *text_obj, *offsets, *prefix_obj;
    if (!PyArg_ParseTuple(args, "UO!U", &text_obj, &PyTuple_Type, &offsets, &prefix_obj))
        return NULL;
    if (!PyUnicode_IS_ASCII(text_obj) || !PyUnicode_IS_ASCII(prefix_obj)) Py_RETURN_NONE;
    const char *text = (const char *)PyUnicode_DATA(text_obj);
    const char *prefix = (const char *)PyUnicode_DATA(prefix_obj);
    Py_ssize_t size = PyUnicode_GET_LENGTH(text_obj);
    Py_ssize_t plen = PyUnicode_GET_LENGTH(prefix_obj);
    Py_ssize_t n = PyTuple_GET_SIZE(offsets);
    Py_ssize_t total = size, last = 0;
    char digits[32];
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t at = PyLong_AsSsize_t(PyTuple_GET_ITEM(offsets, i));
        if (at == -1 && PyErr_Occurred()) return NULL;
        if (at < last || at > size) {
            PyErr_SetString(PyExc_ValueError, "with_labels: offsets out of order or range");
            return NULL;
        }
        last = at;
        total += plen + snprintf(digits, sizeof digits, "%zd", i) + 2;
    }
    PyObject *out = PyUnicode_New(total, 127);
    if (!out) return NULL;
    char *dst = (char *)PyUnicode_DATA(out);
    last = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t at = PyLong_AsSsize_t(PyTuple_GET_ITEM(offsets, i));
        memcpy(dst, text + last, (size_t)(at - last));  /* at >= last: checked above */
        dst += at - last;
        memcpy(dst, prefix, (size_t)plen);
        dst += plen;
        dst += sprintf(dst, "%zd: ", i);
        last = at;
    }
    memcpy(dst, text + last, (size_t)(size - last));
    return out;
}

/* The probe labels of the assembler's symbol table (``symtab``, entries of 24 bytes
 * in ELF64 or 16 in ELF32, names in ``strtab``): frontend/probe.read_probes's loop,
 * its reference.  Returns (places, others): ``places[N]`` is (section index, value)
 * of ``PREFIX<N>`` for N below ``count``, else None; ``others`` the indices of the
 * entries not named ``PREFIX...``.  None where a probe's number is not a decimal one
 * (the reference then reports what it finds). */
PyObject *probe_symbols(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer symtab, strtab;
    int is64, big;
    const char *prefix;
    Py_ssize_t plen, count;
    if (!PyArg_ParseTuple(args, "y*y*ppy#n", &symtab, &strtab, &is64, &big, &prefix, &plen,
                          &count))
        return NULL;
    PyObject *places = NULL, *others = NULL, *result = NULL;
    const uint8_t *sym = symtab.buf, *names = strtab.buf;
    Py_ssize_t entry = is64 ? ELF64_SYM_BYTES : ELF32_SYM_BYTES;
    Py_ssize_t n = symtab.len / entry, size = strtab.len;
    if (count < 0) count = 0;
    places = PyList_New(count);
    others = PyList_New(0);
    if (!places || !others) goto done;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_INCREF(Py_None);
        PyList_SET_ITEM(places, i, Py_None);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        const uint8_t *e = sym + i * entry;
        uint64_t name = read_uint(e + ELF_ST_NAME_AT, ELF_ST_NAME_BYTES, big);
        int probe = name + (uint64_t)plen <= (uint64_t)size &&
            memcmp(names + name, prefix, (size_t)plen) == 0;
        if (!probe) {
            PyObject *index = PyLong_FromSsize_t(i);
            if (!index || PyList_Append(others, index) < 0) { Py_XDECREF(index); goto done; }
            Py_DECREF(index);
            continue;
        }
        uint64_t number = 0;
        Py_ssize_t at = (Py_ssize_t)name + plen, digits = 0;
        while (at < size && names[at] >= '0' && names[at] <= '9' && digits < 18) {
            number = number * 10 + (uint64_t)(names[at] - '0');
            at++;
            digits++;
        }
        if (!digits || at >= size || names[at] != 0) {  /* not PREFIX<decimal> */
            Py_DECREF(places); Py_DECREF(others);
            PyBuffer_Release(&symtab); PyBuffer_Release(&strtab);
            Py_RETURN_NONE;
        }
        if (number >= (uint64_t)count) continue;
        uint64_t shndx = read_uint(e + (is64 ? ELF64_ST_SHNDX_AT : ELF32_ST_SHNDX_AT),
                                   ELF_ST_SHNDX_BYTES, big);
        uint64_t value = is64 ? read_uint(e + ELF64_ST_VALUE_AT, ELF64_ADDR_BYTES, big)
                              : read_uint(e + ELF32_ST_VALUE_AT, ELF32_ADDR_BYTES, big);
        PyObject *place = Py_BuildValue("(KK)", (unsigned long long)shndx,
                                        (unsigned long long)value);
        if (!place) goto done;
        PyList_SetItem(places, (Py_ssize_t)number, place);  /* the old item is dropped */
    }
    result = Py_BuildValue("(OO)", places, others);
done:
    Py_XDECREF(places);
    Py_XDECREF(others);
    PyBuffer_Release(&symtab);
    PyBuffer_Release(&strtab);
    return result;
}
