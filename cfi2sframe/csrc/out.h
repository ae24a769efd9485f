/* The compiled core's text output, shared by its listings (sframe_dump.c,
 * compact_listing.c, xray.c): a buffer that every writer grows itself, and the few
 * number formats Python's f-strings give there.
 *
 * No caller estimates its room first: each writer checks it and grows the buffer.  A
 * failed growth sets a Python MemoryError and ``failed``, after which every writer
 * writes nothing and answers -1 (the failure is sticky), so a caller may write a line
 * of pieces and check once (``o->failed``), before it next calls into Python or hands
 * the text on (``out_text``). */
#ifndef CFI2SFRAME_OUT_H
#define CFI2SFRAME_OUT_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    char *buf;
    size_t len, cap;
    int failed;  /* a growth failed: a MemoryError is set, nothing more is written */
} Out;

/* Room for ``n`` more bytes: 0, or -1 (``failed``) where it cannot be had. */
static inline int out_room(Out *o, size_t n) {
    if (o->failed) return -1;
    if (o->cap - o->len >= n) return 0;
    size_t cap = o->cap ? o->cap : 1 << 16;
    while (cap - o->len < n) {
        if (cap > PY_SSIZE_T_MAX / 2) {
            o->failed = 1;
            PyErr_NoMemory();
            return -1;
        }
        cap *= 2;
    }
    char *moved = PyMem_Realloc(o->buf, cap);
    if (!moved) {
        o->failed = 1;
        PyErr_NoMemory();
        return -1;
    }
    o->buf = moved;
    o->cap = cap;
    return 0;
}

static inline int put(Out *o, const char *s, size_t n) {
    if (out_room(o, n) < 0) return -1;
    if (n) memcpy(o->buf + o->len, s, n);
    o->len += n;
    return 0;
}

#define PUTS(o, literal) put((o), (literal), sizeof(literal) - 1)

/* ``c`` ``n`` times. */
static inline int put_fill(Out *o, char c, size_t n) {
    if (out_room(o, n) < 0) return -1;
    memset(o->buf + o->len, c, n);
    o->len += n;
    return 0;
}

/* ``v`` in hex, at least ``digits`` of them (zeros before). */
static inline int put_hex_digits(Out *o, uint64_t v, int digits) {
    char tmp[16];
    size_t i = sizeof tmp;
    do {
        tmp[--i] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v);
    size_t n = sizeof tmp - i;
    if (digits > 0 && (size_t)digits > n && put_fill(o, '0', (size_t)digits - n) < 0)
        return -1;
    return put(o, tmp + i, n);
}

/* Python's ``f"{v:#0{2 + digits}x}"``: 0x and at least ``digits`` hex digits. */
static inline int put_hex(Out *o, uint64_t v, int digits) {
    if (PUTS(o, "0x") < 0) return -1;
    return put_hex_digits(o, v, digits);
}

/* ``v`` in decimal, at least ``width`` digits (zeros before): ``f"{v:0{width}}"``. */
static inline int put_dec_width(Out *o, uint64_t v, int width) {
    char tmp[20];
    size_t i = sizeof tmp;
    do {
        tmp[--i] = (char)('0' + (int)(v % 10));
        v /= 10;
    } while (v);
    size_t n = sizeof tmp - i;
    if (width > 0 && (size_t)width > n && put_fill(o, '0', (size_t)width - n) < 0) return -1;
    return put(o, tmp + i, n);
}

static inline int put_dec(Out *o, uint64_t v) { return put_dec_width(o, v, 1); }

/* Python's ``f"{v:0{width}}"`` of a signed number: the sign, then the digits
 * zero-padded to fill ``width``. */
static inline int put_signed(Out *o, int64_t v, int width) {
    if (v >= 0) return put_dec_width(o, (uint64_t)v, width);
    if (PUTS(o, "-") < 0) return -1;
    return put_dec_width(o, (uint64_t)0 - (uint64_t)v, width - 1);
}

/* The text written, as a str (``errors``: the UTF-8 decoder's), or NULL with the error
 * set (a failed growth's, or the decoder's). */
static inline PyObject *out_text(const Out *o, const char *errors) {
    if (o->failed) return NULL;
    return PyUnicode_DecodeUTF8(o->buf ? o->buf : "", (Py_ssize_t)o->len, errors);
}

static inline void out_free(Out *o) {
    PyMem_Free(o->buf);
    o->buf = NULL;
    o->len = o->cap = 0;
}

#endif
