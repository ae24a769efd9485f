/* The compiled core's SFrame dump: the FDEs of a section and their FREs, read and
 * written as ``dump`` prints them (readelf --sframe's layout).
 *
 * ``sframe_dump`` is ``sframe/decode.py``'s ``_Reader.fde`` and ``fres`` with
 * ``sframe/dump.py``'s ``_function`` (their reference and fallback) over the FDEs
 * [first, last): with ``text`` false it only checks them (every FDE and FRE as the
 * Python reader checks them, and the header's FRE total) and gives the FRE count;
 * with ``text`` true it gives their text.  Wherever the Python reader would raise,
 * it gives None and the Python path runs and says where.  The bit layouts come from
 * Python (``masks``, the FRE info table), so do the column texts of each distinct
 * FRE shape (``columns_of``, asked once per call and shape) and the two column
 * headings; no format or target fact is decided here.
 * tests/differential/test_core_sframe_dump.py holds the two equal.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "core.h"
#include "kept.h"
#include "out.h"
#include "sframe.h"

/* The columns of one FRE shape as UTF-8, kept by the shape (flex, info byte, data
 * words) in ``shapes``, which owns it; NULL on error. */
static PyObject *columns(Kept *shapes, PyObject *columns_of, int flex, uint8_t info,
                         const int64_t *words, int count) {
    uint8_t key[64];
    size_t n = 0;
    key[n++] = (uint8_t)flex;
    key[n++] = info;
    for (int w = 0; w < count; w++) {  /* at most 15 words of 32 bits */
        uint32_t v = (uint32_t)(int32_t)words[w];
        memcpy(key + n, &v, 4);
        n += 4;
    }
    PyObject *kept = kept_get(shapes, key, n);
    if (kept) return kept;
    PyObject *tuple = PyTuple_New(count);
    if (!tuple) return NULL;
    for (int w = 0; w < count; w++) {
        PyObject *number = PyLong_FromLongLong(words[w]);
        if (!number) { Py_DECREF(tuple); return NULL; }
        PyTuple_SET_ITEM(tuple, w, number);
    }
    PyObject *text = PyObject_CallFunction(columns_of, "OiN", flex ? Py_True : Py_False,
                                           (int)info, tuple);
    if (!text) return NULL;
    PyObject *utf8 = PyUnicode_Check(text) ? PyUnicode_AsUTF8String(text) : NULL;
    Py_DECREF(text);
    if (!utf8) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "columns must be a str");
        return NULL;
    }
    return kept_put(shapes, key, n, utf8) < 0 ? NULL : utf8;
}

/* The masks, as ``dump.py`` hands them over from ``sframe/words.py``. */
typedef struct {
    unsigned fre_type, pc_mask, pauth, signal, unused, fde_type, flex_type;
    int attr_size, addr_size[16];
} Masks;

/* sframe_dump(data, first, last, *, fde_start, entry, fre_start, fre_end, version, big,
 *             pcrel, address, aarch64, masks, fre_table, columns_of, heads, text): the
 * section's parameters by name (``dump.compiled_chunks`` builds them once), so no two
 * of its numbers can change places unnoticed. */
PyObject *sframe_dump(PyObject *Py_UNUSED(self), PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"data", "first", "last", "fde_start", "entry", "fre_start",
                             "fre_end", "version", "big", "pcrel", "address", "aarch64",
                             "masks", "fre_table", "columns_of", "heads", "text", NULL};
    Py_buffer data;
    Py_ssize_t fde_start, first, last, entry, fre_start, fre_end;
    int version, big, pcrel, aarch64, text;
    unsigned long long address;
    PyObject *masks_in, *table, *columns_of, *heads;
    Masks m;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*nn$nnnniipKiO!O!OO!p:sframe_dump",
                                     kwlist, &data, &first, &last, &fde_start, &entry,
                                     &fre_start, &fre_end, &version, &big, &pcrel, &address,
                                     &aarch64, &PyTuple_Type, &masks_in, &PyTuple_Type,
                                     &table, &columns_of, &PyTuple_Type, &heads, &text))
        return NULL;
    PyObject *result = NULL, *addr_sizes;
    Out out = {NULL, 0, 0, 0};
    Kept shapes = {NULL, 0, 0};
    SfFreInfo infos[SF_FRE_INFOS];
    const char *head[2];
    Py_ssize_t head_size[2];
    if (kept_init(&shapes, 256) < 0) goto done;
    if (!PyArg_ParseTuple(masks_in, "IIIIIIIiO!", &m.fre_type, &m.pc_mask, &m.pauth,
                          &m.signal, &m.unused, &m.fde_type, &m.flex_type, &m.attr_size,
                          &PyTuple_Type, &addr_sizes) ||
        PyTuple_GET_SIZE(addr_sizes) != 16 || PyTuple_GET_SIZE(table) != SF_FRE_INFOS ||
        PyTuple_GET_SIZE(heads) != 2) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "bad tables");
        goto done;
    }
    for (int i = 0; i < 16; i++) {
        m.addr_size[i] = (int)PyLong_AsLong(PyTuple_GET_ITEM(addr_sizes, i));
        if (PyErr_Occurred()) goto done;
    }
    if (sf_fre_infos(table, infos) < 0) goto done;
    for (int i = 0; i < 2; i++) {
        head[i] = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(heads, i), &head_size[i]);
        if (!head[i]) goto done;
    }
    const uint8_t *d = data.buf;
    Py_ssize_t len = data.len;
    if (first < 0 || last < first || fde_start < 0 || fre_start < 0 || fre_end > len ||
        fre_start > fre_end || fde_start + last * entry > len)
        goto give_up;
    SfSection sec = {d, fre_start, fre_end, big, version, m.attr_size, m.fde_type,
                     m.flex_type, m.unused};
    long long fres_total = 0;
    for (Py_ssize_t index = first; index < last; index++) {
        Py_ssize_t pos = fde_start + index * entry;
        SfEntry e;
        if (!sf_entry(&sec, pos, &e)) goto give_up;
        Py_ssize_t at = e.fres;
        int64_t raw_start = e.raw_start;
        uint64_t size = e.size, count = e.count;
        unsigned info = e.info, rep = e.rep;
        int addr_size = m.addr_size[info & m.fre_type];
        if (!addr_size || (info & m.pc_mask && !rep && version != 1)) goto give_up;
        int flex = e.flex;
        __int128 start = (__int128)address + raw_start + (pcrel ? pos : 0);
        if (text) {
            int signal = version >= 3 && info & m.signal, pauth = aarch64 && info & m.pauth;
            put(&out, "\n    func idx [", 15);
            put_dec(&out, (uint64_t)index);
            put(&out, "]: pc = ", 8);
            if (start < 0) put(&out, "-", 1);
            put(&out, "0x", 2);
            put_hex_digits(&out, (uint64_t)(start < 0 ? -start : start), 1);
            put(&out, ", size = ", 9);
            put_dec(&out, size);
            put(&out, " bytes", 6);
            if (signal || flex) {
                put(&out, ", attr = \"", 10);
                if (signal) put(&out, "S", 1);
                if (flex) put(&out, "F", 1);
                put(&out, "\"", 1);
            }
            if (pauth) put(&out, ", pauth = B key", 15);
            int masked = (info & m.pc_mask) != 0;
            put(&out, head[masked], (size_t)head_size[masked]);
        }
        uint64_t base = info & m.pc_mask ? 0 : (uint64_t)start;
        for (uint64_t n = 0; n < count; n++) {
            SfFre fre;
            if (!sf_fre(&sec, at, addr_size, flex, infos, &fre)) goto give_up;
            at = fre.next;
            fres_total++;
            if (!text) continue;
            const SfFreInfo *f = &infos[fre.info];
            int64_t words[SF_FRE_WORDS_MAX];
            for (int w = 0; w < f->words; w++) words[w] = sf_word(&sec, fre.body, w, f->width);
            if (out.failed) goto done;  /* before Python is called again */
            PyObject *cells = columns(&shapes, columns_of, flex, fre.info, words, f->words);
            if (!cells) goto done;
            put(&out, "\n    ", 5);
            put_hex_digits(&out, base + fre.start, 16);
            put(&out, "  ", 2);
            put(&out, PyBytes_AS_STRING(cells), (size_t)PyBytes_GET_SIZE(cells));
        }
        if (text) put(&out, "\n", 1);
    }
    if (text)
        result = out_text(&out, "strict");
    else
        result = PyLong_FromLongLong(fres_total);
    goto done;
give_up:
    result = out.failed ? NULL : Py_NewRef(Py_None);  /* a failed write: its error */
done:
    kept_free(&shapes);
    out_free(&out);
    PyBuffer_Release(&data);
    return result;
}
