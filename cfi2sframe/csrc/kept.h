/* The compiled core's one hash table: Python's answers kept in C by a short byte key
 * (an FRE shape's info byte and words, an encoding), so a loop asks Python once per
 * distinct key.  Open addressing, grown at half full; the table owns its values.
 * (The fast path's fixed memos in sframe_fastpath.c and sframe_encode.c key borrowed
 * objects by identity, and xray.c's map holds integers: not Python's answers.) */
#ifndef CFI2SFRAME_KEPT_H
#define CFI2SFRAME_KEPT_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

#define KEPT_KEY 64  /* the longest key, in bytes */

typedef struct {
    uint8_t key[KEPT_KEY];
    size_t size;
    PyObject *value;  /* NULL: an empty slot */
} KeptSlot;

typedef struct {
    KeptSlot *slots;
    size_t size, used;  /* size: a power of two */
} Kept;

/* An empty table of ``size`` slots (a power of two): 0, or -1 with MemoryError. */
static inline int kept_init(Kept *k, size_t size) {
    k->slots = PyMem_Calloc(size, sizeof(KeptSlot));
    k->size = size;
    k->used = 0;
    if (!k->slots) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static inline KeptSlot *kept_slot(const Kept *k, const void *key, size_t n) {
    const uint8_t *bytes = key;
    uint64_t h = 1469598103934665603ull;  /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ bytes[i]) * 1099511628211ull;
    size_t i = (size_t)(h ^ (h >> 32)) & (k->size - 1);
    while (k->slots[i].value && (k->slots[i].size != n || memcmp(k->slots[i].key, key, n)))
        i = (i + 1) & (k->size - 1);
    return &k->slots[i];
}

/* The value kept for ``key`` (borrowed), or NULL (no error set) where none is. */
static inline PyObject *kept_get(const Kept *k, const void *key, size_t n) {
    return n <= KEPT_KEY ? kept_slot(k, key, n)->value : NULL;
}

/* Keep ``value`` (a reference the table takes) for ``key``, not yet kept: 0, or -1
 * with an error set (the value released). */
static inline int kept_put(Kept *k, const void *key, size_t n, PyObject *value) {
    if (n > KEPT_KEY) {
        Py_DECREF(value);
        PyErr_SetString(PyExc_ValueError, "kept_put: key too long");
        return -1;
    }
    if ((k->used + 1) * 2 > k->size) {
        Kept bigger;
        if (kept_init(&bigger, k->size * 2) < 0) {
            Py_DECREF(value);
            return -1;
        }
        for (size_t i = 0; i < k->size; i++)
            if (k->slots[i].value)
                *kept_slot(&bigger, k->slots[i].key, k->slots[i].size) = k->slots[i];
        bigger.used = k->used;
        PyMem_Free(k->slots);
        *k = bigger;
    }
    KeptSlot *slot = kept_slot(k, key, n);
    memcpy(slot->key, key, n);
    slot->size = n;
    slot->value = value;
    k->used++;
    return 0;
}

static inline void kept_free(Kept *k) {
    for (size_t i = 0; k->slots && i < k->size; i++) Py_XDECREF(k->slots[i].value);
    PyMem_Free(k->slots);
    k->slots = NULL;
}

#endif
