/* The compiled core's XRay loops: the FDR trace's common buffers read without an
 * object per record, for ``dump`` and ``stacks``.
 *
 * ``xray_dump`` is ``xray/text.py``'s ``_whole_buffers`` (its reference and fallback):
 * the lines of whole buffers of function records and 16-byte metadata records, from
 * a position between buffers or inside one, a chunk of about ``lines`` lines a call
 * (the text stays streamed), handing back to the general reader at the record where
 * the Python loop does (an event's payload, a second BufferExtents, a record of an
 * unknown kind, a record cut by its extent, a buffer past the file's end).  Names
 * beside IDs come from ``xray_labels``: the ID -> label mapping prepared once (a
 * capsule), never asked per record.
 *
 * ``xray_stacks`` is ``xray/fast.py``'s ``fdr_stacks`` loop (``_Walk``): every
 * distinct stack's calls, self and inclusive cycles, and the notes the walk decides,
 * in the order the Python loop makes them; None where it declines (then the general
 * path reads the trace).  TSCs and sums are 128-bit: exact for any trace shorter
 * than 2**48 bytes (longer ones are declined).
 *
 * Both read little-endian traces of version 2 on; the caller checks the header.
 * tests/differential/test_core_xray.py holds them equal to the Python loops.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "core.h"
#include "kept.h"
#include "out.h"

/* The FDR records' sizes and kinds.  Their Python home is ``xray/records.py``
 * (``METADATA_SIZE``, ``FUNCTION_SIZE``, ``HEADER_SIZE``, ``META_KINDS`` and
 * ``FUNC_KINDS`` indexed by kind): ``xray_constants`` hands them to
 * tests/differential/test_core_constants.py, which holds them equal by name. */
enum {
    META_SIZE = 16, FUNCTION_SIZE = 8, TRACE_HEADER_SIZE = 32,
    /* a metadata record's kind: byte 0 is kind << 1 | 1 */
    META_NEW_BUFFER = 0, META_END_OF_BUFFER = 1, META_NEW_CPU = 2, META_TSC_WRAP = 3,
    META_WALL_CLOCK = 4, META_CUSTOM_EVENT = 5, META_CALL_ARGUMENT = 6,
    META_BUFFER_EXTENTS = 7, META_TYPED_EVENT = 8, META_PID = 9, META_KIND_COUNT = 10,
    /* a function record's kind: (word >> 1) & 7 */
    FUNC_ENTER = 0, FUNC_EXIT = 1, FUNC_TAIL_EXIT = 2, FUNC_ENTER_ARGS = 3,
    EXTENTS_BYTE = META_BUFFER_EXTENTS << 1 | 1,
};

PyObject *xray_constants(void) {
    return Py_BuildValue(
        "{sisisisisisisisisisisisisisisisisisi}", "METADATA_SIZE", META_SIZE,
        "FUNCTION_SIZE", FUNCTION_SIZE, "HEADER_SIZE", TRACE_HEADER_SIZE,
        "new_buffer", META_NEW_BUFFER, "end_of_buffer", META_END_OF_BUFFER,
        "new_cpu", META_NEW_CPU, "tsc_wrap", META_TSC_WRAP, "wall_clock", META_WALL_CLOCK,
        "custom_event", META_CUSTOM_EVENT, "call_argument", META_CALL_ARGUMENT,
        "buffer_extents", META_BUFFER_EXTENTS, "typed_event", META_TYPED_EVENT,
        "pid", META_PID, "META_KIND_COUNT", META_KIND_COUNT, "enter", FUNC_ENTER,
        "exit", FUNC_EXIT, "tail_exit", FUNC_TAIL_EXIT, "enter_args", FUNC_ENTER_ARGS);
}
#define MAX_FUNC_ID (1u << 28)
#define MAX_TRACE ((uint64_t)1 << 48)

static inline uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static inline uint64_t le64(const uint8_t *p) {
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* A growing array of ``count`` items of ``item`` bytes: room for one more, or -1 with
 * a Python error set. */
static int room_for_one(void **items, size_t *cap, size_t count, size_t item) {
    if (count < *cap) return 0;
    size_t grown = *cap ? *cap * 2 : 16;
    if (grown > PY_SSIZE_T_MAX / item) {
        PyErr_NoMemory();
        return -1;
    }
    void *moved = PyMem_Realloc(*items, grown * item);
    if (!moved) {
        PyErr_NoMemory();
        return -1;
    }
    *items = moved;
    *cap = grown;
    return 0;
}

/* ---- dump ---------------------------------------------------------------------- */

/* The labels of ``xray_labels``: each ID's UTF-8 text in one arena. */
typedef struct {
    KeptIds ids;       /* function ID -> entry */
    size_t *start; /* entry -> its text's offset in arena */
    size_t *size;
    char *arena;
    int ascii; /* every label is ASCII (then so is every line) */
} Labels;

#define LABELS_NAME "cfi2sframe._core.xray_labels"

static void labels_free(Labels *l) {
    if (!l) return;
    ids_free(&l->ids);
    PyMem_Free(l->start);
    PyMem_Free(l->size);
    PyMem_Free(l->arena);
    PyMem_Free(l);
}

static void labels_destroy(PyObject *capsule) {
    labels_free(PyCapsule_GetPointer(capsule, LABELS_NAME));
}

/* xray_labels(labels): {function ID: label} prepared for xray_dump, or None where a
 * key is not an int or a label is not text UTF-8 can hold (the Python loop runs). */
PyObject *xray_labels(PyObject *Py_UNUSED(self), PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"labels", NULL};
    PyObject *mapping;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!:xray_labels", kwlist, &PyDict_Type,
                                     &mapping))
        return NULL;
    Labels *l = PyMem_Calloc(1, sizeof *l);
    if (!l) return PyErr_NoMemory();
    l->ascii = 1;
    Py_ssize_t count = PyDict_Size(mapping), pos = 0, entries = 0;
    size_t used = 0, cap = 0;
    PyObject *key, *value;
    l->start = PyMem_Calloc((size_t)count + 1, sizeof *l->start);
    l->size = PyMem_Calloc((size_t)count + 1, sizeof *l->size);
    if (!l->start || !l->size) {
        PyErr_NoMemory();
        goto fail;
    }
    while (PyDict_Next(mapping, &pos, &key, &value)) {
        if (!PyLong_Check(key) || !PyUnicode_Check(value)) goto decline;
        int overflow = 0;
        long long id = PyLong_AsLongLongAndOverflow(key, &overflow);
        if (id == -1 && PyErr_Occurred()) goto fail;
        Py_ssize_t size;
        const char *text = PyUnicode_AsUTF8AndSize(value, &size);
        if (!text) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeError)) goto fail;
            PyErr_Clear();
            goto decline;
        }
        /* An ID no record can have, or an empty label (the loop's ``or`` gives #ID). */
        if (overflow || id < 0 || id >= MAX_FUNC_ID || size == 0) continue;
        if (!PyUnicode_IS_ASCII(value)) l->ascii = 0;
        while (cap - used < (size_t)size) {
            size_t grown = cap ? cap * 2 : 4096;
            char *moved = PyMem_Realloc(l->arena, grown);
            if (!moved) {
                PyErr_NoMemory();
                goto fail;
            }
            l->arena = moved;
            cap = grown;
        }
        if (entries >= count) goto decline; /* the dict changed under us */
        memcpy(l->arena + used, text, (size_t)size);
        l->start[entries] = used;
        l->size[entries] = (size_t)size;
        used += (size_t)size;
        if (ids_put(&l->ids, (uint64_t)id, (uint32_t)entries) < 0) goto fail;
        entries++;
    }
    PyObject *capsule = PyCapsule_New(l, LABELS_NAME, labels_destroy);
    if (!capsule) labels_free(l);
    return capsule;
decline:
    labels_free(l);
    Py_RETURN_NONE;
fail:
    labels_free(l);
    return NULL;
}

/* The text being made: out.h's writers, each checking its own room. */

/* A record's offset as ``f"{pos:#08x}  "``. */
static int put_offset(Out *o, size_t pos) {
    if (put_hex(o, (uint64_t)pos, 6) < 0) return -1;
    return PUTS(o, "  ");
}

static const char *const FUNCTION_WORDS[FUNC_ENTER_ARGS + 1] = {
    "Function Enter: ", "Function Exit: ", "Function Tail Exit: ",
    "Function Enter With Arg: "};

/* One function record's line (``kind`` 0 to 3). */
static int function_line(Out *o, const Labels *labels, size_t pos, uint32_t word,
                         uint32_t delta) {
    unsigned kind = (word >> 1) & 7;
    uint32_t id = word >> 4;
    const char *words = FUNCTION_WORDS[kind];
    if (put_offset(o, pos) < 0 || put(o, words, strlen(words)) < 0) return -1;
    uint32_t entry = labels ? ids_get(&labels->ids, id) : NO_ID;
    if (entry != NO_ID) {
        if (put(o, labels->arena + labels->start[entry], labels->size[entry]) < 0) return -1;
    } else if (PUTS(o, "#") < 0 || put_dec(o, id) < 0) {
        return -1;
    }
    if (PUTS(o, " delta = +") < 0 || put_dec(o, delta) < 0) return -1;
    return PUTS(o, "\n");
}

/* The line of the 16-byte metadata record at ``r`` (its kind one ``record_text``
 * words without a payload: 0-4, 6, 9). */
static int metadata_line(Out *o, size_t pos, const uint8_t *r) {
    unsigned kind = r[0] >> 1;
    const uint8_t *body = r + 1;
    if (put_offset(o, pos) < 0) return -1;
    int bad = 0;
    switch (kind) {
    case META_NEW_BUFFER:
        bad = PUTS(o, "Thread ID: ") < 0 ||
              put_signed(o, (int32_t)le32(body), 1) < 0;
        break;
    case META_END_OF_BUFFER:
        bad = PUTS(o, "End of Buffer") < 0;
        break;
    case META_NEW_CPU:
        bad = PUTS(o, "CPU: id = ") < 0 ||
              put_dec(o, (uint64_t)body[0] | (uint64_t)body[1] << 8) < 0 ||
              PUTS(o, ", tsc = ") < 0 || put_dec(o, le64(body + 2)) < 0;
        break;
    case META_TSC_WRAP:
        bad = PUTS(o, "TSC Wrap: base = ") < 0 || put_dec(o, le64(body)) < 0;
        break;
    case META_WALL_CLOCK:
        bad = PUTS(o, "Wall Time: seconds = ") < 0 ||
              put_signed(o, (int64_t)le64(body), 1) < 0 || PUTS(o, ".") < 0 ||
              put_signed(o, (int32_t)le32(body + 8), 6) < 0;
        break;
    case META_CALL_ARGUMENT:
        bad = PUTS(o, "Call Argument: data = ") < 0 || put_dec(o, le64(body)) < 0 ||
              PUTS(o, " (hex = ") < 0 || put_hex(o, le64(body), 1) < 0 ||
              PUTS(o, ")") < 0;
        break;
    default: /* META_PID */
        bad = PUTS(o, "PID: ") < 0 || put_signed(o, (int32_t)le32(body), 1) < 0;
        break;
    }
    return bad ? -1 : PUTS(o, "\n");
}

/* xray_dump(data, at, stop, labels, lines) -> (text, at, stop, more).  ``at`` a
 * position between buffers (``stop`` None) or a record's inside the buffer whose
 * extent ends at ``stop``; ``labels`` None or ``xray_labels``'s.  Lines are made until
 * there are ``lines`` of them (then ``more`` is true: call again from the ``at`` and
 * ``stop`` it gives) or the loop stops (``more`` false: the general reader goes on
 * from that ``at`` and ``stop``, as from ``_whole_buffers``' return). */
PyObject *xray_dump(PyObject *Py_UNUSED(self), PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"data", "at", "stop", "labels", "lines", NULL};
    Py_buffer data;
    Py_ssize_t at_arg, lines;
    PyObject *stop_arg, *labels_arg;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*nOOn:xray_dump", kwlist, &data,
                                     &at_arg, &stop_arg, &labels_arg, &lines))
        return NULL;
    const Labels *labels = NULL;
    Out o = {NULL, 0, 0, 0};
    size_t end = (size_t)data.len, at, stop = 0;
    int inside = stop_arg != Py_None, more = 0;
    if (labels_arg != Py_None) {
        labels = PyCapsule_GetPointer(labels_arg, LABELS_NAME);
        if (!labels) goto fail;
    }
    if (at_arg < 0 || at_arg > data.len || lines < 1) goto bad_position;
    if (inside) {
        Py_ssize_t s = PyLong_AsSsize_t(stop_arg);
        if (s == -1 && PyErr_Occurred()) goto fail;
        if (s < at_arg || s > data.len || (s - at_arg) % FUNCTION_SIZE) goto bad_position;
        stop = (size_t)s;
    }
    at = (size_t)at_arg;
    const uint8_t *d = data.buf;
    size_t made = 0;
    for (;;) {
        if (!inside) {
            if (made >= (size_t)lines) {
                more = 1;
                break;
            }
            if (end - at < META_SIZE || d[at] != EXTENTS_BYTE) break;
            uint64_t size = le64(d + at + 1);
            if (size % FUNCTION_SIZE || size > end - at - META_SIZE) break;
            if (put_offset(&o, at) < 0 || PUTS(&o, "Buffer: size = ") < 0 ||
                put_dec(&o, size) < 0 || PUTS(&o, " bytes\n") < 0)
                goto fail;
            made++;
            at += META_SIZE;
            stop = at + (size_t)size;
            inside = 1;
        }
        while (at < stop) { /* stop - at: a multiple of FUNCTION_SIZE */
            if (made >= (size_t)lines) {
                more = 1;
                goto done;
            }
            uint32_t word = le32(d + at);
            if (!(word & 1)) {
                if (((word >> 1) & 7) > FUNC_ENTER_ARGS) goto done;
                if (function_line(&o, labels, at, word, le32(d + at + 4)) < 0) goto fail;
                at += FUNCTION_SIZE;
            } else {
                unsigned kind = (word & 0xFF) >> 1;
                if (kind == META_CUSTOM_EVENT || kind == META_BUFFER_EXTENTS ||
                    kind == META_TYPED_EVENT || kind >= META_KIND_COUNT ||
                    stop - at < META_SIZE)
                    goto done;
                if (metadata_line(&o, at, d + at) < 0) goto fail;
                at += META_SIZE;
            }
            made++;
        }
        inside = 0;
    }
done:;
    PyObject *text;
    if (!labels || labels->ascii) {
        text = PyUnicode_New((Py_ssize_t)o.len, 127);
        if (text && o.len) memcpy(PyUnicode_DATA(text), o.buf, o.len);
    } else {
        text = PyUnicode_DecodeUTF8(o.buf ? o.buf : "", (Py_ssize_t)o.len, "strict");
    }
    out_free(&o);
    PyBuffer_Release(&data);
    if (!text) return NULL;
    PyObject *stop_out = inside ? PyLong_FromSize_t(stop) : Py_NewRef(Py_None);
    if (!stop_out) {
        Py_DECREF(text);
        return NULL;
    }
    return Py_BuildValue("(NnNO)", text, (Py_ssize_t)at, stop_out, more ? Py_True : Py_False);
bad_position:
    PyErr_SetString(PyExc_ValueError, "xray_dump: at and stop are not a record's position");
fail:
    out_free(&o);
    PyBuffer_Release(&data);
    return NULL;
}

/* ---- stacks -------------------------------------------------------------------- */

typedef __int128 Wide;

typedef struct {
    Wide start, callees;
    uint32_t node;
    int32_t func;
} Frame;

typedef struct {
    Frame *frames;
    size_t count, cap;
} Thread;

typedef struct {
    uint64_t count;
    int32_t func;
    uint8_t note;
} NoteCount;

/* ``Note``'s members, in their order. */
enum { TAIL_EXIT, UNMATCHED_EXIT, MISSING_EXIT, OPEN_AT_END, BACKWARDS };

typedef struct {
    /* the trie: node 0 the root; func of a thread's node is -1 - its ID */
    uint32_t *parent;
    int32_t *func;
    uint8_t *is_thread;
    uint64_t *calls;
    Wide *own, *inclusive;
    size_t nodes, node_cap;
    KeptIds children; /* parent << 32 | (uint32) func -> node */
    Thread *threads; /* in the order they were first seen */
    size_t thread_count, thread_cap;
    KeptIds thread_of; /* (uint32) tid -> index */
    NoteCount *notes; /* in the order they were first counted */
    size_t note_count, note_cap;
    KeptIds note_of; /* note << 32 | (uint32) func -> index */
    int per_thread;
} Walk;

static void walk_free(Walk *w) {
    PyMem_Free(w->parent);
    PyMem_Free(w->func);
    PyMem_Free(w->is_thread);
    PyMem_Free(w->calls);
    PyMem_Free(w->own);
    PyMem_Free(w->inclusive);
    ids_free(&w->children);
    for (size_t i = 0; i < w->thread_count; i++) PyMem_Free(w->threads[i].frames);
    PyMem_Free(w->threads);
    ids_free(&w->thread_of);
    PyMem_Free(w->notes);
    ids_free(&w->note_of);
}

static int note(Walk *w, uint8_t kind, int32_t func) {
    uint64_t key = (uint64_t)kind << 32 | (uint32_t)func;
    uint32_t found = ids_get(&w->note_of, key);
    if (found != NO_ID) {
        w->notes[found].count++;
        return 0;
    }
    if (w->note_count >= NO_ID - 1) {
        PyErr_NoMemory();
        return -1;
    }
    if (room_for_one((void **)&w->notes, &w->note_cap, w->note_count, sizeof *w->notes) < 0 ||
        ids_put(&w->note_of, key, (uint32_t)w->note_count) < 0)
        return -1;
    w->notes[w->note_count++] = (NoteCount){1, func, kind};
    return 0;
}

/* The node of ``func`` under ``parent`` (``StackTrie.child``): made on first use.
 * NO_ID with no error set where the trie would outgrow 32-bit node numbers. */
static uint32_t child(Walk *w, uint32_t parent, int32_t func) {
    uint64_t key = (uint64_t)parent << 32 | (uint32_t)func;
    uint32_t node = ids_get(&w->children, key);
    if (node != NO_ID) return node;
    if (w->nodes >= NO_ID - 1) return NO_ID;
    if (w->nodes == w->node_cap) {
        size_t cap = w->node_cap ? w->node_cap * 2 : 64;
        uint32_t *p = PyMem_Realloc(w->parent, cap * sizeof *p);
        if (p) w->parent = p;
        int32_t *f = p ? PyMem_Realloc(w->func, cap * sizeof *f) : NULL;
        if (f) w->func = f;
        uint8_t *t = f ? PyMem_Realloc(w->is_thread, cap) : NULL;
        if (t) w->is_thread = t;
        uint64_t *c = t ? PyMem_Realloc(w->calls, cap * sizeof *c) : NULL;
        if (c) w->calls = c;
        Wide *own = c ? PyMem_Realloc(w->own, cap * sizeof *own) : NULL;
        if (own) w->own = own;
        Wide *inc = own ? PyMem_Realloc(w->inclusive, cap * sizeof *inc) : NULL;
        if (!inc) {
            PyErr_NoMemory();
            return NO_ID;
        }
        w->inclusive = inc;
        w->node_cap = cap;
    }
    node = (uint32_t)w->nodes++;
    w->parent[node] = parent;
    w->func[node] = func;
    w->is_thread[node] = 0;
    w->calls[node] = 0;
    w->own[node] = w->inclusive[node] = 0;
    if (ids_put(&w->children, key, node) < 0) return NO_ID;
    return node;
}

/* A thread's stack (``stacks.setdefault(tid, [])``): its index, or -1 (error set). */
static Py_ssize_t thread_index(Walk *w, int32_t tid) {
    uint32_t found = ids_get(&w->thread_of, (uint32_t)tid);
    if (found != NO_ID) return (Py_ssize_t)found;
    if (room_for_one((void **)&w->threads, &w->thread_cap, w->thread_count,
                     sizeof *w->threads) < 0 ||
        ids_put(&w->thread_of, (uint32_t)tid, (uint32_t)w->thread_count) < 0)
        return -1;
    w->threads[w->thread_count] = (Thread){NULL, 0, 0};
    return (Py_ssize_t)w->thread_count++;
}

/* An exit of ``func`` at ``end`` (``StackWalk._exit``): the innermost open call of
 * it and any above it close. */
static int close_calls(Walk *w, Thread *t, int32_t func, Wide end) {
    size_t depth = t->count;
    while (depth > 0 && t->frames[depth - 1].func != func) depth--;
    if (depth == 0) return note(w, UNMATCHED_EXIT, func);
    depth--;
    while (t->count > depth) {
        Frame frame = t->frames[--t->count];
        if (t->count > depth && note(w, MISSING_EXIT, frame.func) < 0) return -1;
        Wide span = end - frame.start;
        if (span < 0) {
            if (note(w, BACKWARDS, frame.func) < 0) return -1;
            span = 0;
        }
        if (t->count) t->frames[t->count - 1].callees += span;
        w->calls[frame.node]++;
        if (span > frame.callees) w->own[frame.node] += span - frame.callees;
        w->inclusive[frame.node] += span;
    }
    return 0;
}

/* 1: the whole trace walked; 0: a record the loop does not read (decline); -1: error. */
static int walk_trace(Walk *w, const uint8_t *d, size_t end) {
    int32_t tid = 0;
    Wide base = 0;
    size_t at = TRACE_HEADER_SIZE;
    while (at < end) {
        if (end - at < META_SIZE || d[at] != EXTENTS_BYTE) return 0;
        uint64_t size = le64(d + at + 1);
        at += META_SIZE;
        if (size % FUNCTION_SIZE || size > end - at) return 0;
        size_t stop = at + (size_t)size;
        Py_ssize_t index = thread_index(w, tid);
        if (index < 0) return -1;
        while (at < stop) {
            uint32_t word = le32(d + at);
            if (!(word & 1)) {
                unsigned kind = (word >> 1) & 7;
                int32_t func = (int32_t)(word >> 4);
                base += le32(d + at + 4);
                at += FUNCTION_SIZE;
                Thread *t = &w->threads[index];
                if (kind == FUNC_ENTER || kind == FUNC_ENTER_ARGS) {
                    uint32_t parent = 0;
                    if (t->count) {
                        parent = t->frames[t->count - 1].node;
                    } else if (w->per_thread) {
                        parent = child(w, 0, (int32_t)(-1 - (int64_t)tid));
                        if (parent == NO_ID) return PyErr_Occurred() ? -1 : 0;
                        w->is_thread[parent] = 1;
                    }
                    uint32_t node = child(w, parent, func);
                    if (node == NO_ID) return PyErr_Occurred() ? -1 : 0;
                    if (room_for_one((void **)&t->frames, &t->cap, t->count,
                                     sizeof *t->frames) < 0)
                        return -1;
                    t->frames[t->count++] = (Frame){base, 0, node, func};
                } else if (kind == FUNC_EXIT || kind == FUNC_TAIL_EXIT) {
                    if (kind == FUNC_TAIL_EXIT && note(w, TAIL_EXIT, func) < 0) return -1;
                    if (close_calls(w, t, func, base) < 0) return -1;
                } else {
                    return 0;
                }
                continue;
            }
            if (stop - at < META_SIZE) return 0; /* the buffer ends inside it */
            const uint8_t *r = d + at;
            at += META_SIZE;
            switch ((word & 0xFF) >> 1) {
            case META_NEW_BUFFER:
                tid = (int32_t)le32(r + 1);
                index = thread_index(w, tid);
                if (index < 0) return -1;
                break;
            case META_NEW_CPU: /* the CPU, then the TSC */
                base = (Wide)le64(r + 3);
                break;
            case META_TSC_WRAP:
                base = (Wide)le64(r + 1);
                break;
            case META_WALL_CLOCK: case META_CALL_ARGUMENT: case META_PID:
                break;
            default:
                return 0;
            }
        }
    }
    return 1;
}

static PyObject *wide_long(Wide v) {
    if (v >= INT64_MIN && v <= INT64_MAX) return PyLong_FromLongLong((long long)v);
    PyObject *high = PyLong_FromLongLong((long long)(v >> 64));
    PyObject *low = PyLong_FromUnsignedLongLong((unsigned long long)(uint64_t)v);
    PyObject *shift = PyLong_FromLong(64);
    PyObject *moved = high && shift ? PyNumber_Lshift(high, shift) : NULL;
    PyObject *sum = moved && low ? PyNumber_Or(moved, low) : NULL;
    Py_XDECREF(high);
    Py_XDECREF(low);
    Py_XDECREF(shift);
    Py_XDECREF(moved);
    return sum;
}

/* (totals, notes): ``Stacks``' parts as tuples. */
static PyObject *walk_result(Walk *w) {
    for (size_t i = 0; i < w->thread_count; i++) {
        const Thread *t = &w->threads[i];
        for (size_t j = 0; j < t->count; j++)
            if (note(w, OPEN_AT_END, t->frames[j].func) < 0) return NULL;
    }
    PyObject *totals = PyList_New(0), *notes = NULL;
    if (!totals) return NULL;
    for (size_t node = 1; node < w->nodes; node++) {
        if (!w->calls[node]) continue;
        size_t depth = 0;
        uint32_t up = (uint32_t)node;
        while (up && !w->is_thread[up]) {
            up = w->parent[up];
            depth++;
        }
        PyObject *ids = PyTuple_New((Py_ssize_t)depth);
        if (!ids) goto fail;
        up = (uint32_t)node;
        for (size_t k = depth; k > 0; k--) {
            PyObject *id = PyLong_FromLong(w->func[up]);
            if (!id) {
                Py_DECREF(ids);
                goto fail;
            }
            PyTuple_SET_ITEM(ids, (Py_ssize_t)(k - 1), id);
            up = w->parent[up];
        }
        PyObject *thread = up ? PyLong_FromLongLong(-1 - (long long)w->func[up])
                              : Py_NewRef(Py_None);
        PyObject *own = wide_long(w->own[node]), *inc = wide_long(w->inclusive[node]);
        PyObject *row = thread && own && inc ? Py_BuildValue(
            "(OOKOO)", thread, ids, (unsigned long long)w->calls[node], own, inc) : NULL;
        Py_XDECREF(thread);
        Py_DECREF(ids);
        Py_XDECREF(own);
        Py_XDECREF(inc);
        if (!row) goto fail;
        int failed = PyList_Append(totals, row) < 0;
        Py_DECREF(row);
        if (failed) goto fail;
    }
    notes = PyList_New((Py_ssize_t)w->note_count);
    if (!notes) goto fail;
    for (size_t i = 0; i < w->note_count; i++) {
        const NoteCount *n = &w->notes[i];
        PyObject *item = Py_BuildValue("(iiK)", (int)n->note, (int)n->func,
                                       (unsigned long long)n->count);
        if (!item) goto fail;
        PyList_SET_ITEM(notes, (Py_ssize_t)i, item);
    }
    return Py_BuildValue("(NN)", totals, notes);
fail:
    Py_XDECREF(totals);
    Py_XDECREF(notes);
    return NULL;
}

/* xray_stacks(data, per_thread) -> (totals, notes), or None where the Python loop
 * declines.  totals: (thread or None, path, calls, self cycles, inclusive cycles) per
 * stack with calls, in node order; notes: (Note's index, function ID, count) in the
 * order first counted. */
PyObject *xray_stacks(PyObject *Py_UNUSED(self), PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"data", "per_thread", NULL};
    Py_buffer data;
    int per_thread;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*p:xray_stacks", kwlist, &data,
                                     &per_thread))
        return NULL;
    if (data.len < TRACE_HEADER_SIZE || (uint64_t)data.len >= MAX_TRACE) {
        PyBuffer_Release(&data);
        Py_RETURN_NONE;
    }
    Walk w;
    memset(&w, 0, sizeof w);
    w.per_thread = per_thread;
    PyObject *out = NULL;
    if (child(&w, 0, 0) != 0) goto done; /* the root, node 0 (not in the map's use) */
    ids_free(&w.children); /* the root is no child: (0, 0) may be a function's key */
    int walked = walk_trace(&w, data.buf, (size_t)data.len);
    if (walked > 0) {
        out = walk_result(&w);
    } else if (walked == 0) {
        out = Py_NewRef(Py_None);
    }
done:
    walk_free(&w);
    PyBuffer_Release(&data);
    return out;
}
