"""The probe object as the builder reads it when the assembler wrote Mach-O (assembly
for Apple targets): its sections named ``SEGMENT,section`` and numbered as symbols'
``n_sect`` numbers them (1-based), and its symbols given section-relative values, as
an ELF object's are."""

from __future__ import annotations

from ..elf.read import Symbol
from ..macho.read import MachoView

_N_EXT = 0x01


def darwin_text(text: str) -> bool:
    """Assembly written for an Apple target: Mach-O section names, or the directives
    clang and LLVM write for macOS and iOS only."""
    return any(marker in text for marker in (
        ".section\t__TEXT,", ".section __TEXT,", ".subsections_via_symbols",
        ".build_version", ".macosx_version_min", ".ios_version_min"))


def section_names(view: MachoView) -> list[str]:
    """Index ``n`` (``n_sect``) -> ``SEGMENT,section``; index 0 is no section."""
    return ["", *(f"{s.segment},{s.name}" for s in view.sections)]


def elf_like_symbols(view: MachoView) -> list[Symbol]:
    """The symbols defined in a section, with section-relative values (ELF's kind and
    binding: no function type in Mach-O, external symbols global)."""
    out = []
    for symbol in view.symbols:
        if not symbol.defined_in_section or not 0 < symbol.sect <= len(view.sections):
            continue
        section = view.sections[symbol.sect - 1]
        out.append(Symbol(symbol.name, symbol.value - section.addr, 0, 0,
                          1 if symbol.kind & _N_EXT else 0, symbol.sect))
    return out
