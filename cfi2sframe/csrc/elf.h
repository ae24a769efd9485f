/* The ELF records the compiled core reads in place (elf_reloc.c's Rel and Rela
 * entries, frontend_scan.c's and elf_symbols.c's symbols), by class: the field offsets
 * and sizes and how r_info splits.  Their Python home is ``elf/structs.py`` (``SYM``,
 * ``REL``, ``RELA``, ``r_sym``, ``r_type``): ``elf_constants`` hands them to
 * tests/differential/test_core_constants.py, which holds them equal by name. */
#ifndef CFI2SFRAME_ELF_H
#define CFI2SFRAME_ELF_H

#include <Python.h>

enum {
    /* Elf32_Sym, Elf64_Sym (whose field orders differ) */
    ELF32_SYM_BYTES = 16, ELF64_SYM_BYTES = 24, ELF_ST_NAME_AT = 0, ELF_ST_NAME_BYTES = 4,
    ELF32_ST_VALUE_AT = 4, ELF64_ST_VALUE_AT = 8, ELF32_ST_SHNDX_AT = 14,
    ELF64_ST_SHNDX_AT = 6, ELF_ST_SHNDX_BYTES = 2, ELF32_ST_INFO_AT = 12,
    ELF64_ST_INFO_AT = 4,
    /* Elf_Rel, Elf_Rela: r_offset, r_info (and r_addend), one address wide each */
    ELF32_ADDR_BYTES = 4, ELF64_ADDR_BYTES = 8, ELF_R_OFFSET_AT = 0,
    ELF32_R_INFO_AT = 4, ELF64_R_INFO_AT = 8, ELF32_R_ADDEND_AT = 8, ELF64_R_ADDEND_AT = 16,
    ELF32_REL_BYTES = 8, ELF64_REL_BYTES = 16, ELF32_RELA_BYTES = 12, ELF64_RELA_BYTES = 24,
    /* r_info: the symbol above the type (ELF32_R_SYM, ELF64_R_TYPE, ...) */
    ELF32_R_SYM_SHIFT = 8, ELF64_R_SYM_SHIFT = 32,
};
#define ELF32_R_TYPE_MASK 0xFFu
#define ELF64_R_TYPE_MASK 0xFFFFFFFFu

/* The numbers above by name, for the test that binds them to Python (a new dict). */
static inline PyObject *elf_constants(void) {
    return Py_BuildValue(
        "{sisisisisisisisisisisisisisisisisisisisisisisisisIsI}",
        "ELF32_SYM_BYTES", ELF32_SYM_BYTES, "ELF64_SYM_BYTES", ELF64_SYM_BYTES,
        "ELF_ST_NAME_AT", ELF_ST_NAME_AT, "ELF_ST_NAME_BYTES", ELF_ST_NAME_BYTES,
        "ELF32_ST_VALUE_AT", ELF32_ST_VALUE_AT, "ELF64_ST_VALUE_AT", ELF64_ST_VALUE_AT,
        "ELF32_ST_SHNDX_AT", ELF32_ST_SHNDX_AT, "ELF64_ST_SHNDX_AT", ELF64_ST_SHNDX_AT,
        "ELF_ST_SHNDX_BYTES", ELF_ST_SHNDX_BYTES, "ELF32_ST_INFO_AT", ELF32_ST_INFO_AT,
        "ELF64_ST_INFO_AT", ELF64_ST_INFO_AT, "ELF32_ADDR_BYTES", ELF32_ADDR_BYTES,
        "ELF64_ADDR_BYTES", ELF64_ADDR_BYTES, "ELF_R_OFFSET_AT", ELF_R_OFFSET_AT,
        "ELF32_R_INFO_AT", ELF32_R_INFO_AT, "ELF64_R_INFO_AT", ELF64_R_INFO_AT,
        "ELF32_R_ADDEND_AT", ELF32_R_ADDEND_AT, "ELF64_R_ADDEND_AT", ELF64_R_ADDEND_AT,
        "ELF32_REL_BYTES", ELF32_REL_BYTES, "ELF64_REL_BYTES", ELF64_REL_BYTES,
        "ELF32_RELA_BYTES", ELF32_RELA_BYTES, "ELF64_RELA_BYTES", ELF64_RELA_BYTES,
        "ELF32_R_SYM_SHIFT", ELF32_R_SYM_SHIFT, "ELF64_R_SYM_SHIFT", ELF64_R_SYM_SHIFT,
        "ELF32_R_TYPE_MASK", ELF32_R_TYPE_MASK, "ELF64_R_TYPE_MASK", ELF64_R_TYPE_MASK);
}

#endif
