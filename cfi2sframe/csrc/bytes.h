/* The compiled core's byte reader: the fields of a file's sections, in either byte
 * order, read where they are (no copy).
 *
 * ``Bytes`` is a span (its bytes, where it ends, its byte order); ``get_uint`` reads
 * a field of it only where the whole field lies inside, and says whether it did: what
 * every reader of untrusted sections calls.  ``read_uint`` reads a field the caller
 * has already found inside its span (a loop that checked a record's whole extent once
 * reads the record's fields with it). */
#ifndef CFI2SFRAME_BYTES_H
#define CFI2SFRAME_BYTES_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

/* This machine's byte order (GCC and clang say it), against which a field of 2, 4 or
 * 8 bytes is one load, turned round where the file's order differs. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define HOST_BIG 1
#else
#define HOST_BIG 0
#endif

/* The unsigned number of ``size`` bytes (1 to 8) at ``p`` in the file's byte order
 * (``big``: most significant first); the caller has checked they are there.  The
 * usual sizes are one load (a byte at a time, libLLVM-14's 355k relocations were
 * 100M instructions of ``rela_within``); the others a byte at a time. */
static inline uint64_t read_uint(const uint8_t *p, int size, int big) {
    int turn = (big != 0) != HOST_BIG;
    if (size == 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        return turn ? __builtin_bswap64(v) : v;
    }
    if (size == 4) {
        uint32_t v;
        memcpy(&v, p, 4);
        return turn ? __builtin_bswap32(v) : v;
    }
    if (size == 2) {
        uint16_t v;
        memcpy(&v, p, 2);
        return turn ? __builtin_bswap16(v) : v;
    }
    uint64_t v = 0;
    for (int i = 0; i < size; i++) v |= (uint64_t)p[big ? size - 1 - i : i] << (8 * i);
    return v;
}

/* Bytes of a section in the file's byte order: [d, d + end). */
typedef struct {
    const uint8_t *d;
    Py_ssize_t end;
    int big;
} Bytes;

/* The unsigned number of ``size`` bytes at ``pos`` of ``b`` into *out: 1, or 0 (and
 * *out untouched) where any of them lies outside. */
static inline int get_uint(const Bytes *b, Py_ssize_t pos, int size, uint64_t *out) {
    if (pos < 0 || size > b->end - pos) return 0;
    *out = read_uint(b->d + pos, size, b->big);
    return 1;
}

#endif
