/* The module cfi2sframe._core: each entry point, the file that defines it (core.h),
 * and the numbers the C files repeat (OPCODES, EH_PE, ROW_STATE, UNWIND_INFO, UNWIND_TABLE, SFRAME,
 * ELF, XRAY). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "core.h"
#include "elf.h"
#include "sframe.h"
#include "unwind_info.h"

static PyMethodDef methods[] = {
    {"fast_fres", fast_fres, METH_VARARGS,
     "fast_fres(body, start, code_align, data_align, shapes, target) -> tuple of FREs,\n"
     "or None (general path); target: sp, fp, ra, tracks_ra, big_endian, fre_type and\n"
     "shape_of by name."},
    {"eh_fdes", eh_fdes, METH_VARARGS,
     "eh_fdes(eh, address, names, cie_of, placements, target) -> the Fdes of an\n"
     ".eh_frame, or None; target: address_size, big_endian and fde_type by name;\n"
     "see dwarf_cfi.c."},
    {"cfi_rows", cfi_rows, METH_VARARGS,
     "cfi_rows(body, initial, params) -> one FDE body's rows (every register's rule) as\n"
     "dwarf/interpret.py gives them, or None (the interpreter decides); params:\n"
     "replay_params' capsule; see dwarf_cfi.c."},
    {"replay_params", replay_params, METH_O,
     "replay_params(params) -> cfi_rows' parameters read once (a capsule); params:\n"
     "code_align, data_align, big_endian, row_type, states and state_of by name."},
    {"verify_scan", (PyCFunction)(void (*)(void))verify_scan, METH_VARARGS | METH_KEYWORDS,
     "verify_scan(eh, sframe, *, eh_address, address_size, big_endian, fde_start, entry,\n"
     "count, version, pcrel, address, fre_start, fre_end, num_fres, fre_type_mask,\n"
     "pc_mask_bit, unused_bits, fde_type_mask, flex_type, fre_addr_sizes, attr_size, sp,\n"
     "fp, ra, tracks_ra, fre_table, states, state_of, fre_ids, fre_id_of, placed)\n"
     "-> (checked, used, todo), or None; see analysis_compare.c."},
    {"stats_scan", stats_scan, METH_VARARGS,
     "stats_scan(eh, eh_address, shapes, sizes, params)\n"
     "-> (FDEs, functions, V2 FRE bytes, V3 FRE bytes, todo, low, high), or None;\n"
     "params: sp, fp, ra, tracks_ra, big_endian, shape_of, address_size, max_size,\n"
     "max_fres_v3, addr_sizes and size_of by name; see analysis_stats.c."},
    {"agree", agree, METH_VARARGS,
     "agree(body, start, code_align, data_align, size, fres, (sp, fp, ra, tracks_ra,\n"
     "      big_endian, states, state_of, fre_ids, fre_id_of, none_id)) -> whether a DWARF FDE\n"
     "and its SFrame FREs give the same rules at every PC (False: not known here)."},
    {"scan_cfi", scan_cfi, METH_VARARGS,
     "scan_cfi(text, comment_chars, statement) -> (CFI statements, those in bodies),\n"
     "or None for text that is not ASCII; see frontend_scan.c."},
    {"probe_symbols", probe_symbols, METH_VARARGS,
     "probe_symbols(symtab, strtab, is64, big_endian, prefix, count) -> (places, indices\n"
     "of the other symbols), or None; see frontend_scan.c."},
    {"function_names", function_names, METH_VARARGS,
     "function_names(symtab, strtab, is64, big_endian, limit, sections) -> {(section,\n"
     "value): name} of the functions (then untyped entries) of one symbol table; see\n"
     "elf_symbols.c."},
    {"with_labels", with_labels, METH_VARARGS,
     "with_labels(text, offsets, prefix) -> text with PREFIX<i>: at each offset, or None\n"
     "for text that is not ASCII; see frontend_scan.c."},
    {"lower_fdes", lower_fdes, METH_VARARGS,
     "lower_fdes(fdes, cies, shapes, direct, params) -> per FDE its SFrameFunction, or\n"
     "None (the general path); params: fast_fres's target, version, max_size,\n"
     "max_fres_v3 and function_type by name."},
    {"eh_functions", eh_functions, METH_VARARGS,
     "eh_functions(eh, address, address_size, names, cie_of, params) -> (per FDE its\n"
     "SFrameFunction or None, the None FDEs' offsets, FDE count), or None; params:\n"
     "lower_fdes'; see sframe_fastpath.c."},
    {"eh_table_v2", eh_table_v2, METH_VARARGS,
     "eh_table_v2(eh, address, address_size, cie_of, params, general, encoding)\n"
     "-> (starts, FDEs, FRE bytes, FRE count, function count, FDE count) of an SFrame V2\n"
     "section, sorted, or None; see sframe_fastpath.c."},
    {"place_fdes", place_fdes, METH_VARARGS,
     "place_fdes(starts, fdes, first, fde_size, big_endian) -> the V2 FDE table placed,\n"
     "or the index of the first start out of range; see sframe_encode.c."},
    {"fdes_v2", fdes_v2, METH_VARARGS,
     "fdes_v2(functions, big_endian, tails, tail_of, addr_sizes, pc_mask_bit, pauth_bit)\n"
     "-> (FDE tails, FRE bytes, FRE count) of an SFrame V2 section."},
    {"decode_fres", decode_fres, METH_VARARGS,
     "decode_fres(data, pos, count, addr_size, flex, section)\n"
     "-> (FREs, position after them), or None (the Python loop reports the error);\n"
     "section: fre_end, big_endian, fre_type and fre_table by name; see sframe_decode.c."},
    {"fres_bytes", fres_bytes, METH_VARARGS,
     "fres_bytes(fres, addr_size, big_endian, tails, tail_of) -> the FREs' bytes."},
    {"relocate", relocate, METH_VARARGS,
     "relocate(contents, rel, is64, little, rela, kinds, target_of)\n"
     "-> {field offset: (target, S + A)}, contents relocated; or None (the Python loop\n"
     "reports what is wrong); see elf_reloc.c."},
    {"rela_within", rela_within, METH_VARARGS,
     "rela_within(rela, symbols, big, start, stop) -> whether a 64-bit RELA section\n"
     "writes in [start, stop) or makes an address there; see elf_grow.c."},
    {"sframe_dump", (PyCFunction)(void (*)(void))sframe_dump, METH_VARARGS | METH_KEYWORDS,
     "sframe_dump(data, first, last, *, fde_start, entry, fre_start, fre_end, version,\n"
     "big, pcrel, address, aarch64, masks, fre_table, columns_of, heads, text)\n"
     "-> the FDEs' text (text) or their FRE count, or None (the Python reader reports\n"
     "what is wrong); see sframe_dump.c."},
    {"fde_index", (PyCFunction)(void (*)(void))fde_index, METH_VARARGS | METH_KEYWORDS,
     "fde_index(data, *, fde_start, count, entry, wide, big, base, step)\n"
     "-> (starts, ends, disjoint): native int64 arrays' bytes, or None (Python's numbers\n"
     "are needed, or the table is cut short); see sframe_decode.c."},
    {"sframe_check", (PyCFunction)(void (*)(void))sframe_check, METH_VARARGS | METH_KEYWORDS,
     "sframe_check(data, *, fde_start, count, entry, fre_start, fre_end, version, big,\n"
     "pcrel, address, sorted, num_fres, unused, masks)\n"
     "-> True where the FDEs and FREs of a section we wrote are sound, else None (the\n"
     "Python check says what is wrong); see sframe_selfcheck.c."},
    {"unwind_info_text", unwind_info_text, METH_VARARGS,
     "unwind_info_text(section, base, image, symtab, wide, words, stack_ind)\n"
     "-> the listing of an __unwind_info section, or None (the Python reader reports\n"
     "what is wrong with it); see compact_listing.c."},
    {"unwind_info_entries", unwind_info_entries, METH_VARARGS,
     "unwind_info_entries(section) -> (offsets, encodings, personalities, LSDAs,\n"
     "sentinel, problems) of an __unwind_info section, or None (the Python reader\n"
     "reports what is wrong with it); see compact_table.c."},
    {"unwind_info_rows", unwind_info_rows, METH_VARARGS,
     "unwind_info_rows(section, offsets) -> the (start, encoding) or None libunwind's\n"
     "look-up finds at each offset, or None (the Python look-up decides); see\n"
     "compact_table.c."},
    {"unwind_info_misses", unwind_info_misses, METH_VARARGS,
     "unwind_info_misses(section, offsets, lengths, encodings) -> the indices of the\n"
     "functions whose first or last byte libunwind's look-up does not find with their\n"
     "encoding, or whose encoding names a personality or an LSDA; or None (the Python\n"
     "look-up decides); see compact_table.c."},
    {"unwind_info_build", (PyCFunction)(void (*)(void))unwind_info_build, METH_VARARGS | METH_KEYWORDS,
     "unwind_info_build(offsets, lengths, encodings, personalities, lsdas, fde_offsets,\n"
     "*, dwarf, stack_ind, max_common, max_index, max_compressed, max_regular,\n"
     "max_personalities, reach, fde_mask) -> (section, final encodings, personality\n"
     "routines, indices put in DWARF mode), or (what, number) for input no table holds,\n"
     "or None (the Python builder decides); see table_writer.c."},
    {"image_entries", (PyCFunction)(void (*)(void))image_entries, METH_VARARGS | METH_KEYWORDS,
     "image_entries(*, offsets, ends, encodings, in_code, fde_starts, relocated,\n"
     "code_problem, image, sections, base, mode_mask, dwarf, stack_ind, reach)\n"
     "-> (checked, from_code, events), or None (the Python loop takes numbers past\n"
     "its reach); see compact_check.c."},
    {"row_state_ids", row_state_ids, METH_O,
     "row_state_ids(rows) -> bytes: each Row's cfa, regs, ra_signed and ra_signed_pc\n"
     "objects' addresses, in order (compact/lower._sequence's key); see compact_lower.c."},
    {"placed_spans", placed_spans, METH_VARARGS,
     "placed_spans(rows, exact, size) -> (inexact spans, exact bytes) of a function of\n"
     "size bytes whose rows at the indices exact are exact, or None (Python decides);\n"
     "see compact_lower.c."},
    {"compact_rows_text", compact_rows_text, METH_VARARGS,
     "compact_rows_text(functions, tail, check) -> (text, compact, inexact, inexact in\n"
     "the body) of compact's listing of these CompactFunctions, or None (the Python\n"
     "formatter makes it); see compact_text.c."},
    {"fde_extents", (PyCFunction)(void (*)(void))fde_extents, METH_VARARGS | METH_KEYWORDS,
     "fde_extents(*, eh, address, address_size, cie_of, code) -> (FDEs, stray, the first\n"
     "stray's (offset, start, size) or None, offsets of those in code, {offset: start}),\n"
     "or None (the Python walker decides); see compact_check.c."},
    {"xray_labels", (PyCFunction)(void (*)(void))xray_labels, METH_VARARGS | METH_KEYWORDS,
     "xray_labels(labels) -> {function ID: label} prepared for xray_dump, or None;\n"
     "see xray.c."},
    {"xray_dump", (PyCFunction)(void (*)(void))xray_dump, METH_VARARGS | METH_KEYWORDS,
     "xray_dump(data, at, stop, labels, lines) -> (text, at, stop, more): an FDR\n"
     "trace's dump lines from at; see xray.c."},
    {"xray_stacks", (PyCFunction)(void (*)(void))xray_stacks, METH_VARARGS | METH_KEYWORDS,
     "xray_stacks(data, per_thread) -> (totals, notes), or None (the general path);\n"
     "see xray.c."},
    {"start_writeback", start_writeback, METH_VARARGS,
     "start_writeback(fd) -> whether the kernel was asked to start writing the file's\n"
     "dirty pages (not waited for); see files.c."},
    {"close_later", close_later, METH_VARARGS,
     "close_later(fd) -> True once a thread of the core's has it to close, False where\n"
     "it was closed at once; see files.c."},
    {"copy_later", copy_later, METH_VARARGS,
     "copy_later(source, target, length, step, ahead, replaced=-1) -> a pipe's read\n"
     "end that gives\n"
     "the bytes a thread of the core's copied (the first ahead then written back) and\n"
     "the errno that stopped it, or None;\n"
     "see files.c."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "cfi2sframe._core",
    "The compiled core: the ELF fast path's loop (sframe/fastpath.py is its reference) "
    "and the __unwind_info listing (compact/listing.py is its reference).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__core(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    /* The numbers the C files repeat, for the tests that bind them to their Python
     * home, one dict per file or header. */
    struct { const char *name; PyObject *(*make)(void); } constants[] = {
        {"OPCODES", dwarf_opcodes}, {"EH_PE", eh_constants}, {"ROW_STATE", row_state_constants},
        {"UNWIND_INFO", unwind_info_constants}, {"UNWIND_TABLE", unwind_info_layout},
        {"SFRAME", sframe_constants},
        {"ELF", elf_constants}, {"XRAY", xray_constants},
    };
    for (size_t i = 0; i < sizeof constants / sizeof constants[0]; i++) {
        PyObject *numbers = constants[i].make();
        if (!numbers || PyModule_AddObject(m, constants[i].name, numbers) < 0) {
            Py_XDECREF(numbers);
            Py_DECREF(m);
            return NULL;
        }
    }
    return m;
}
