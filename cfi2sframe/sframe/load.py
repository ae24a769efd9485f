"""Load an SFrame section from a raw section file or an ELF file (via pyelftools).

In a relocatable object the FDE start fields are relocated first (S + A - P
with every section at address 0), as readelf of binutils 2.46 does, so a
function prints at its offset in its own section.  V1 sections are shown
unrelocated, as readelf of binutils 2.40 (the last V1 reader) shows them.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..elf.compressed import DEFAULT_LIMITS, Limits, decompress
from ..elf.read import SHF_COMPRESSED, SHT_GNU_SFRAME
from ..elf.reloc import apply_relocations
from ..errors import Cfi2SframeError, decoding, from_pyelftools
from ..files import read_bytes
from .decode import DecodedSection, decode

if TYPE_CHECKING:
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import Section


@dataclass(frozen=True)
class LoadedSFrame:
    """A decoded section and where it came from."""

    path: str
    section_name: str
    section: DecodedSection
    is_elf: bool
    elf_type: str = ""
    fde_sections: dict[int, str] | None = None

    def section_of(self, fde_field_offset: int) -> str:
        """For a relocatable object, the section an FDE's function is in ("" otherwise)."""
        return (self.fde_sections or {}).get(fde_field_offset, "")


def load_sframe(path: str, data: bytes | None = None, as_readelf: bool = False,
                raw_address: int = 0, limits: Limits = DEFAULT_LIMITS) -> LoadedSFrame:
    """Read ``path`` (raw section or ELF) and decode its SFrame section.

    Relocatable objects get their start fields relocated, so every function
    has its offset in its own section.  ``as_readelf`` keeps V1 sections
    unrelocated, as binutils 2.40's readelf shows them.  A raw section is
    placed at ``raw_address`` (an ELF file says where its section is).
    """
    if data is None:
        data = read_bytes(path)
    if data[:4] != b"\x7fELF":
        return LoadedSFrame(path, ".sframe", _decode(path, data, raw_address, ".sframe"),
                            False)
    return _load_elf(path, data, as_readelf, limits)


def _decode(path: str, data: bytes, address: int, name: str,
            v1_pcrel: bool = False) -> DecodedSection:
    with decoding(path, name):
        return decode(data, address, v1_pcrel)


def _load_elf(path: str, data: bytes, as_readelf: bool, limits: Limits) -> LoadedSFrame:
    return from_pyelftools(path, lambda: _load_with_pyelftools(path, data, as_readelf,
                                                                limits))


def _load_with_pyelftools(path: str, data: bytes, as_readelf: bool,
                          limits: Limits) -> LoadedSFrame:
    from elftools.elf.elffile import ELFFile

    elf = ELFFile(io.BytesIO(data))
    # The section called .sframe; else the first of type SHT_GNU_SFRAME.
    section = elf.get_section_by_name(".sframe")
    for candidate in elf.iter_sections() if section is None else ():
        kind: object = candidate["sh_type"]  # pyelftools: a name, or the number if unnamed
        if kind == SHT_GNU_SFRAME:
            section = candidate
            break
    if section is None:
        raise Cfi2SframeError(path, "no .sframe section")
    contents = bytearray(_contents(path, data, elf, section, limits))
    elf_type = elf["e_type"]
    version = contents[2] if len(contents) > 2 else 0
    targets: dict[int, str] = {}
    relocate = elf_type == "ET_REL" and (version >= 2 or not as_readelf)
    if relocate:
        placed = apply_relocations(elf, section, contents, path)
        targets = {offset: name for offset, (name, _) in placed.items()
                   if not name.startswith("SHN_")}
    decoded = _decode(path, bytes(contents), section["sh_addr"], section.name,
                      relocate and version == 1)
    return LoadedSFrame(path, section.name, decoded, True, elf_type, targets)


def _contents(path: str, data: bytes, elf: ELFFile, section: Section, limits: Limits) -> bytes:
    """The section's bytes; a compressed one decompressed within ``limits`` (never by
    pyelftools, which believes the size the section claims)."""
    if not section["sh_flags"] & SHF_COMPRESSED:
        return bytes(section.data())
    start, size = section["sh_offset"], section["sh_size"]
    if start + size > len(data):
        raise Cfi2SframeError(path, f"{section.name}: runs past the end of the file")
    with decoding(path, section.name):
        return bytes(decompress(data[start:start + size], elf.little_endian,
                                elf.elfclass == 64, len(data), limits))
