/* The compiled core's text output, shared by its listings (compact_listing.c,
 * sframe_dump.c): a buffer grown as needed and the few number formats Python's
 * f-strings give there. */
#ifndef CFI2SFRAME_CORE_TEXT_H
#define CFI2SFRAME_CORE_TEXT_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

/* The text a listing is written into, grown as needed: every writer first reserves
 * what it may write. */
typedef struct { char *buf; size_t len, cap; } Out;

static inline int reserve(Out *o, size_t more) {
    if (o->len + more <= o->cap) return 0;
    size_t cap = o->cap ? o->cap : 1 << 16;
    while (cap < o->len + more) cap *= 2;
    char *buf = PyMem_Realloc(o->buf, cap);
    if (!buf) { PyErr_NoMemory(); return -1; }
    o->buf = buf;
    o->cap = cap;
    return 0;
}

static inline void put(Out *o, const char *s, size_t n) { memcpy(o->buf + o->len, s, n); o->len += n; }

#define PUTS(o, literal) put((o), (literal), sizeof(literal) - 1)

/* ``v`` in hex, at least ``digits`` of them. */
static inline void put_digits(Out *o, uint64_t v, int digits) {
    char tmp[16];
    int n = 0;
    do { tmp[n++] = "0123456789abcdef"[v & 15]; v >>= 4; } while (v);
    while (n < digits) tmp[n++] = '0';
    while (n) o->buf[o->len++] = tmp[--n];
}

/* Python's ``f"{v:#0{2 + digits}x}"``: 0x and at least ``digits`` hex digits. */
static inline void put_hex(Out *o, uint64_t v, int digits) {
    o->buf[o->len++] = '0';
    o->buf[o->len++] = 'x';
    put_digits(o, v, digits);
}

static inline void put_dec(Out *o, uint64_t v) {
    char tmp[20];
    int n = 0;
    do { tmp[n++] = (char)('0' + v % 10); v /= 10; } while (v);
    while (n) o->buf[o->len++] = tmp[--n];
}

#endif
