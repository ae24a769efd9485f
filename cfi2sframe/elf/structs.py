"""ELF's fixed records, each field named once (the gABI's ``Elf32_*``/``Elf64_*``).

Readers and writers ask a record for its ``struct.Struct``, a field's offset or
one field's value, so no header offset is written as a number anywhere else.
Each record is declared once with the gABI's type names; the class (32 or 64
bit) decides their widths and, for ``Elf_Phdr`` and ``Elf_Sym``, the field order;
each class is a ``cstruct.Layout`` (both byte orders).  Every ``struct.Struct`` is
built here at import, once per record, class and byte order: these readers run over
whole trees.

The records: ``EHDR``, ``SHDR``, ``PHDR``, ``SYM``, ``REL``, ``RELA``, ``DYN``, ``CHDR``,
``RELR``, ``ADDR`` and ``NHDR`` (each an ``ElfRecord``, whose ``record[is64]`` is the class's
``cstruct.Layout``, with ELF32's field order where it differs); ``r_sym``/``r_type``/
``r_info``, ``st_type``/``st_bind``.  ``elf/read.py``, ``elf/obj.py``, ``elf/reloc.py``,
``elf/compressed.py``, ``elf/archive.py``, ``elf/grow.py``, ``elf/linked.py`` and the
SFrame layouts (``sframe/format.py``) write no header offset as a number;
``tests/unit/test_elf_structs.py`` holds the sizes to the gABI's and the SFrame specs'.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..cstruct import Layout

# e_ident: where the class and the data encoding are, and their values (gABI).
EI_CLASS, EI_DATA = 4, 5
ELFCLASS32, ELFCLASS64 = 1, 2
ELFDATA2LSB, ELFDATA2MSB = 1, 2


# The gABI's types, by class: (ELF32, ELF64).  Xword and Sxword stand for the fields
# that are Word/Sword in ELF32 and Xword/Sxword in ELF64 (sh_flags, r_info, d_tag...).
_TYPES = {"Half": ("H", "H"), "Word": ("I", "I"), "Sword": ("i", "i"),
          "Addr": ("I", "Q"), "Off": ("I", "Q"), "Xword": ("I", "Q"), "Sxword": ("i", "q"),
          "uchar": ("B", "B"), "ident": ("16s", "16s")}


class ElfRecord:
    """An ELF record in both classes: ``record[is64]`` is its ``Layout``.  Fields are
    given in ELF64's order; ``order32`` gives ELF32's where it differs (and leaves
    out a field ELF32 has not)."""

    __slots__ = ("name", "_classes")

    def __init__(self, name: str, fields: Sequence[tuple[str, str]],
                 order32: Sequence[str] | None = None) -> None:
        self.name = name
        types = dict(fields)
        names32 = order32 if order32 is not None else [field for field, _ in fields]
        self._classes = (
            Layout(f"Elf32_{name}", [(field, _TYPES[types[field]][0]) for field in names32]),
            Layout(f"Elf64_{name}", [(field, _TYPES[kind][1]) for field, kind in fields]))

    def __getitem__(self, is64: bool) -> Layout:
        return self._classes[is64]


EHDR = ElfRecord("Ehdr", (
    ("e_ident", "ident"), ("e_type", "Half"), ("e_machine", "Half"), ("e_version", "Word"),
    ("e_entry", "Addr"), ("e_phoff", "Off"), ("e_shoff", "Off"), ("e_flags", "Word"),
    ("e_ehsize", "Half"), ("e_phentsize", "Half"), ("e_phnum", "Half"),
    ("e_shentsize", "Half"), ("e_shnum", "Half"), ("e_shstrndx", "Half")))

SHDR = ElfRecord("Shdr", (
    ("sh_name", "Word"), ("sh_type", "Word"), ("sh_flags", "Xword"), ("sh_addr", "Addr"),
    ("sh_offset", "Off"), ("sh_size", "Xword"), ("sh_link", "Word"), ("sh_info", "Word"),
    ("sh_addralign", "Xword"), ("sh_entsize", "Xword")))

PHDR = ElfRecord("Phdr", (
    ("p_type", "Word"), ("p_flags", "Word"), ("p_offset", "Off"), ("p_vaddr", "Addr"),
    ("p_paddr", "Addr"), ("p_filesz", "Xword"), ("p_memsz", "Xword"), ("p_align", "Xword")),
    order32=("p_type", "p_offset", "p_vaddr", "p_paddr", "p_filesz", "p_memsz", "p_flags",
             "p_align"))

SYM = ElfRecord("Sym", (
    ("st_name", "Word"), ("st_info", "uchar"), ("st_other", "uchar"), ("st_shndx", "Half"),
    ("st_value", "Addr"), ("st_size", "Xword")),
    order32=("st_name", "st_value", "st_size", "st_info", "st_other", "st_shndx"))

REL = ElfRecord("Rel", (("r_offset", "Addr"), ("r_info", "Xword")))

RELA = ElfRecord("Rela", (("r_offset", "Addr"), ("r_info", "Xword"), ("r_addend", "Sxword")))

DYN = ElfRecord("Dyn", (("d_tag", "Sxword"), ("d_un", "Xword")))

# Bare words: an SHT_RELR entry (Elf_Relr: an address, or a bitmap if odd) and a
# pointer-sized word in a segment (a relocated place's implicit addend).
RELR = ElfRecord("Relr", (("r_relr", "Xword"),))
ADDR = ElfRecord("Addr", (("a_addr", "Addr"),))

# A note's header (gABI "Note Section"): three words in both classes; its name follows,
# padded to 4 bytes, then its descriptor.
NHDR = ElfRecord("Nhdr", (("n_namesz", "Word"), ("n_descsz", "Word"), ("n_type", "Word")))

CHDR = ElfRecord("Chdr", (
    ("ch_type", "Word"), ("ch_reserved", "Word"), ("ch_size", "Xword"),
    ("ch_addralign", "Xword")),
    order32=("ch_type", "ch_size", "ch_addralign"))


def r_sym(info: int, is64: bool) -> int:
    """The symbol index of a relocation's r_info (ELF32_R_SYM, ELF64_R_SYM)."""
    return info >> 32 if is64 else info >> 8


def r_type(info: int, is64: bool) -> int:
    """The relocation type of r_info (ELF32_R_TYPE, ELF64_R_TYPE)."""
    return info & 0xFFFFFFFF if is64 else info & 0xFF


def r_info(sym: int, kind: int, is64: bool) -> int:
    """r_info from its symbol index and type (ELF32_R_INFO, ELF64_R_INFO)."""
    return (sym << 32 | kind) if is64 else (sym << 8 | kind & 0xFF)


# st_info's two halves (ELF_ST_TYPE, ELF_ST_BIND), for loops that split it inline.
ST_TYPE_MASK, ST_BIND_SHIFT = 0xF, 4


def st_type(info: int) -> int:
    """A symbol's type from st_info (ELF_ST_TYPE)."""
    return info & ST_TYPE_MASK


def st_bind(info: int) -> int:
    """A symbol's binding from st_info (ELF_ST_BIND)."""
    return info >> ST_BIND_SHIFT
