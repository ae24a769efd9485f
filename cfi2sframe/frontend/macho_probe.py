"""The probe object as the builder reads it when the assembler wrote Mach-O (assembly
for Apple targets): its sections named ``SEGMENT,section`` and numbered as symbols'
``n_sect`` numbers them (1-based), and its symbols given section-relative values, as
an ELF object's are."""

from __future__ import annotations

from ..elf.read import Symbol
from ..typed import TYPE_CHECKING
from .patterns import deferred

if TYPE_CHECKING:  # the Mach-O reader loads for an Apple target's probe object only
    from ..macho.read import MachoView


def darwin_text(text: str) -> bool:
    """Assembly written for an Apple target: Mach-O section names, or the directives
    clang and LLVM write for macOS and iOS only."""
    return any(marker in text for marker in (
        ".section\t__TEXT,", ".section __TEXT,", ".subsections_via_symbols",
        ".build_version", ".macosx_version_min", ".ios_version_min"))


# What only one Apple target's assembly names (clang and zig write no triple into it):
# arm64's frame registers and page relocations, unprefixed; x86-64's and i386's
# stack and frame registers, %-prefixed.  The first target whose mark is found wins.
_TARGET_MARKS = (
    ("aarch64", deferred(r"(?<![%\w])(?:[wx]29|[wx]30)\b|@PAGE(?:OFF)?\b")),
    ("x86_64", deferred(r"%r(?:sp|bp|ip|ax|di|si)\b")),
    ("i386", deferred(r"%e(?:sp|bp)\b")),
)


def darwin_arch(text: str) -> str | None:
    """The target of assembly for an Apple target, from the registers it names
    (``_TARGET_MARKS``); None where none is named."""
    for name, mark in _TARGET_MARKS:
        if mark().search(text):
            return name
    return None


def section_names(view: MachoView) -> list[str]:
    """Index ``n`` (``n_sect``) -> ``SEGMENT,section``; index 0 is no section."""
    return ["", *(f"{s.segment},{s.name}" for s in view.sections)]


def elf_like_symbols(view: MachoView) -> list[Symbol]:
    """The symbols defined in a section, with section-relative values (ELF's kind and
    binding: no function type in Mach-O, external symbols global)."""
    from ..macho.read import N_EXT

    out = []
    for symbol in view.symbols:
        if not symbol.defined_in_section or not 0 < symbol.sect <= len(view.sections):
            continue
        section = view.sections[symbol.sect - 1]
        out.append(Symbol(symbol.name, symbol.value - section.addr, 0, 0,
                          1 if symbol.kind & N_EXT else 0, symbol.sect))
    return out
