"""One section's bytes out of an ELF or Mach-O file, and a bare ``__unwind_info``
read as the image it came from.

``extract_section`` gives what ``llvm-objcopy --dump-section`` writes (the bytes the
file holds, as stored), so a section can be taken out of a Mach-O image or an ELF file
without LLVM. A table on its own (``compact IMAGE --emit unwind-info -o F``, or an
extracted one) is read by the same code as an image's: ``table_view`` gives a view
whose ``__TEXT,__unwind_info`` is that table, over the image it belongs to (its
names, code and ``__eh_frame``) or over nothing (offsets from 0, no names).
"""

from __future__ import annotations

from .elf.read import open_elf
from .errors import Cfi2SframeError, decoding
from .kinds import Kind, input_kind, is_elf
from .macho.read import (
    CPU_ARCH,
    CPU_TYPE_I386,
    MH_EXECUTE,
    MachoView,
    Section,
    Segment,
    open_macho,
)

_SHT_NOBITS = 8  # a section with no bytes in the file (.bss)


def extract_section(data: bytes, name: str, path: str = "<input>",
                    arch: str | None = None) -> bytes:
    """The bytes of section ``name`` as the file stores them: an ELF section by its
    name (``.sframe``), a Mach-O one as ``SEGMENT,SECTION`` or by its section name
    alone where one segment has it (``__unwind_info``); ``arch``: a universal file's
    slice."""
    if is_elf(data):
        with decoding(path):
            view = open_elf(data, path)
        found = view.section(name)
        if found is None:
            raise Cfi2SframeError(path, f"no section '{name}'")
        return b"" if found.kind == _SHT_NOBITS else data[found.offset:found.offset + found.size]
    if input_kind(data) not in (Kind.macho, Kind.fat_macho):
        raise Cfi2SframeError(path, "not an ELF or Mach-O file: no sections to extract")
    with decoding(path, "Mach-O file"):
        macho = open_macho(data, {"aarch64": "arm64"}.get(arch or "", arch))
    segment, _, section_name = name.rpartition(",")
    matches = [s for s in macho.sections if s.name == section_name
               and (not segment or s.segment == segment)]
    if not matches:
        raise Cfi2SframeError(path, f"no section '{name}'")
    if len(matches) > 1:
        raise Cfi2SframeError(path, f"{len(matches)} sections named '{name}': name the "
                                    f"segment too ({matches[0].segment},{section_name})")
    return macho.section_data(matches[0]) if matches[0].offset else b""


def table_view(table: bytes, image: MachoView | None, arch: str = "x86_64") -> MachoView:
    """``image`` (or, with none, an empty image of ``arch`` at address 0) whose
    ``__TEXT,__unwind_info`` holds ``table``: every reader of an image's table then
    reads this one (its functions named, its code and FDEs at hand when ``image`` is
    given)."""
    if image is None:
        cputype = next(cpu for cpu, name in CPU_ARCH.items()
                       if name == {"aarch64": "arm64"}.get(arch, arch))
        section = Section(1, "__TEXT", "__unwind_info", 0, len(table), 0, 0, 0, 0)
        return MachoView(table, cputype, MH_EXECUTE, (section,), (0, 0, 0, 0),
                         (Segment("__TEXT", 0, 0, 0, 0),), 4 if cputype == CPU_TYPE_I386 else 8)
    old = image.section("__TEXT", "__unwind_info")
    at = len(image.data)
    number = old.number if old else len(image.sections) + 1
    address = old.addr if old else 0
    ours = Section(number, "__TEXT", "__unwind_info", address, len(table), at, 0, 0, 0)
    sections = tuple(s for s in image.sections if s is not old) + (ours,)
    return MachoView(image.data + table, image.cputype, image.filetype, sections,
                     image.symtab, image.segments, image.pointer_size)
