/* The compiled core's hash tables: two kinds that grow, and one fixed.
 *
 * ``Kept``: Python's answers kept in C by a short byte key (an FRE shape's info byte and
 * words, an encoding), so a loop asks Python once per distinct key.  Open addressing,
 * grown at half full; the table owns its values.
 *
 * ``KeptIds``: 64-bit integers to 32-bit ones (xray.c's calls, threads and notes;
 * sframe_encode.c's FRE tuples by address to their encodings): the same open addressing
 * without objects, for a loop that runs once per record.
 *
 * ``StateTable`` slots: a state's answer kept by the state itself, for the loops that
 * meet a state once per FRE they make or count (sframe_fastpath.c's state -> FRE fields,
 * analysis_stats.c's state -> FRE sizes): a word hash of the state's five numbers into
 * a fixed table of 16 probes that stops taking entries when full (a miss only costs
 * the caller's dict look-up); each caller's slot is a ``StateKey`` and its payload.
 *
 * Fixed, by measurement, as are the fast path's two other caches (sframe_fastpath.c's
 * (start, fields) -> FRE, sframe_encode.c's FRE fields -> bytes, keyed by addresses of
 * objects the call's arguments hold alive): they sit in front of the caller's dicts
 * and are asked once per FRE made or encoded, so their look-up is the loop's cost.  As
 * ``Kept`` tables (a byte hash of a 40 to 80-byte key, growing, the key's objects
 * held) they cost libLLVM-14's conversion 20% more time in lower_fdes (0.74 -> 0.89 s)
 * and 38% in build_v2 (0.15 -> 0.21 s) (both builds in one process, alternated, medians
 * of five), and the command 11 MiB more peak memory (125 -> 136 MiB).  ``memo_lookup`` (core.h) is not a C table: it keeps
 * answers in the caller's dict, which outlives the call and which the Python
 * reference loop fills and reads too. */
#ifndef CFI2SFRAME_KEPT_H
#define CFI2SFRAME_KEPT_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "core.h"

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

/* KeptIds: 64-bit keys to 32-bit values (NO_ID: empty, and not found). */
typedef struct {
    uint64_t *keys;
    uint32_t *values;
    size_t size, used; /* size: a power of two */
    unsigned bits;
} KeptIds;

#define NO_ID UINT32_MAX

static inline size_t ids_slot(const KeptIds *m, uint64_t key) {
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> (64 - m->bits));
}

static inline uint32_t ids_get(const KeptIds *m, uint64_t key) {
    if (!m->size) return NO_ID;
    size_t i = ids_slot(m, key);
    while (m->values[i] != NO_ID) {
        if (m->keys[i] == key) return m->values[i];
        i = (i + 1) & (m->size - 1);
    }
    return NO_ID;
}

static inline int ids_grow(KeptIds *m) {
    unsigned bits = m->size ? m->bits + 1 : 6;
    size_t size = (size_t)1 << bits;
    uint64_t *keys = PyMem_Calloc(size, sizeof *keys);
    uint32_t *values = PyMem_Malloc(size * sizeof *values);
    if (!keys || !values) {
        PyMem_Free(keys);
        PyMem_Free(values);
        PyErr_NoMemory();
        return -1;
    }
    memset(values, 0xFF, size * sizeof *values);
    KeptIds grown = {keys, values, size, m->used, bits};
    for (size_t j = 0; j < m->size; j++) {
        if (m->values[j] == NO_ID) continue;
        size_t i = ids_slot(&grown, m->keys[j]);
        while (values[i] != NO_ID) i = (i + 1) & (size - 1);
        keys[i] = m->keys[j];
        values[i] = m->values[j];
    }
    PyMem_Free(m->keys);
    PyMem_Free(m->values);
    *m = grown;
    return 0;
}

/* Set ``key`` (not yet in the map) to ``value``; -1 with a Python error set. */
static inline int ids_put(KeptIds *m, uint64_t key, uint32_t value) {
    if ((m->used + 1) * 2 > m->size && ids_grow(m) < 0) return -1;
    size_t i = ids_slot(m, key);
    while (m->values[i] != NO_ID) i = (i + 1) & (m->size - 1);
    m->keys[i] = key;
    m->values[i] = value;
    m->used++;
    return 0;
}

static inline void ids_free(KeptIds *m) {
    PyMem_Free(m->keys);
    PyMem_Free(m->values);
    memset(m, 0, sizeof *m);
}

/* StateTable: STATE_SLOTS slots, zeroed, each a StateKey first and the caller's payload
 * after it (``struct { StateKey key; ... }``). */
#define STATE_SLOTS 4096
#define STATE_PROBES 16

typedef struct {
    State s;
    int used;
} StateKey;

/* The slot of ``s`` among ``slots`` (of ``slot_size`` bytes each): its own (``*found``
 * 1), or a free one now keyed by ``s`` whose payload the caller fills (``*found`` 0);
 * NULL where the probes find neither, or ``s`` holds a huge number (keep nothing). */
static inline void *state_slot(void *slots, size_t slot_size, const State *s, int *found) {
    *found = 0;
    if (s->huge) return NULL;
    size_t at = state_hash(s) % STATE_SLOTS;
    for (int probe = 0; probe < STATE_PROBES; probe++, at = (at + 1) % STATE_SLOTS) {
        StateKey *key = (void *)((char *)slots + at * slot_size);
        if (!key->used) {
            key->s = *s;
            key->used = 1;
            return key;
        }
        if (state_same(&key->s, s)) {
            *found = 1;
            return key;
        }
    }
    return NULL;
}

/* ``state_slot`` of a table of slots of the caller's type. */
#define STATE_SLOT(slots, s, found) state_slot((slots), sizeof *(slots), (s), (found))

#endif
