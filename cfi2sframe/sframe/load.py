"""Load an SFrame section from a raw section file or an ELF file (``elf.read``).

In a relocatable object the FDE start fields are relocated first (S + A - P
with every section at address 0), as readelf of binutils 2.46 does, so a
function prints at its offset in its own section; a V1 section's (and a V2 one's
without the PC-relative flag, as GNU as 2.41-2.44 wrote it) then read relative to
the field, as the PC32 relocation made them.  ``as_readelf`` shows V1 sections
unrelocated, as readelf of binutils 2.40 (the last V1 reader) shows them.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..elf.compressed import DEFAULT_LIMITS, Limits, section_contents
from ..elf.read import ElfView, open_elf_file
from ..elf.reloc import relocate_view
from ..errors import Cfi2SframeError, decoding
from ..files import read_bytes
from ..kinds import Kind, input_kind, is_elf, refuse_unreadable
from ..typed import NamedTuple
from .decode import DecodedSection, decode, decode_covering


class LoadedSFrame(NamedTuple):
    """A decoded section and where it came from."""

    path: str
    section_name: str
    section: DecodedSection
    is_elf: bool
    elf_type: str = ""
    # A relocatable object's relocated fields: offset -> (the section or special
    # index the relocation points into, S + A), as ``relocate_view`` gives them.
    placements: dict[int, tuple[str, int]] | None = None

    def section_of(self, fde_field_offset: int) -> str:
        """For a relocatable object, the section an FDE's function is in ("" otherwise)."""
        return placed_section(self.placements, fde_field_offset)

    @property
    def fde_sections(self) -> bool:
        """Whether functions are placed in sections (a relocated object's)."""
        return any(not name.startswith("SHN_") for name, _ in (self.placements or {}).values())


def placed_section(placements: dict[int, tuple[str, int]] | None, field_offset: int) -> str:
    """The section a relocated FDE start field points into ("" where none does, or only
    a special index such as ``SHN_ABS``)."""
    found = (placements or {}).get(field_offset)
    return "" if found is None or found[0].startswith("SHN_") else found[0]


class SFrameBytes(NamedTuple):
    """A section's bytes as ``decode`` takes them (an object's relocated), where they
    came from and where they are placed."""

    path: str
    section_name: str
    data: bytes
    address: int
    v1_pcrel: bool
    is_elf: bool
    elf_type: str = ""
    placements: dict[int, tuple[str, int]] | None = None


def load_sframe(path: str, data: bytes | None = None, as_readelf: bool = False,
                raw_address: int = 0, limits: Limits = DEFAULT_LIMITS,
                pcs: Sequence[int] | None = None) -> LoadedSFrame:
    """Read ``path`` (raw section or ELF) and decode its SFrame section.

    Relocatable objects get their start fields relocated, so every function
    has its offset in its own section.  ``as_readelf`` keeps V1 sections
    unrelocated, as binutils 2.40's readelf shows them.  A raw section is
    placed at ``raw_address`` (an ELF file says where its section is).  ``pcs``:
    decode only the FDEs that cover these addresses (``decode.decode_covering``).
    """
    raw = sframe_bytes(path, data, as_readelf, raw_address, limits)
    with decoding(path, raw.section_name):
        decoded = decode_covering(raw.data, pcs, raw.address, raw.v1_pcrel) \
            if pcs is not None else decode(raw.data, raw.address, raw.v1_pcrel)
    return LoadedSFrame(path, raw.section_name, decoded, raw.is_elf, raw.elf_type,
                        raw.placements)


def sframe_bytes(path: str, data: bytes | None = None, as_readelf: bool = False,
                 raw_address: int = 0, limits: Limits = DEFAULT_LIMITS,
                 view: ElfView | None = None) -> SFrameBytes:
    """``load_sframe`` up to the decoding: the section's bytes, relocated in an
    object, and where they are placed (``dump`` writes them without decoding them
    into objects first); ``view``: an ELF file's section headers, read already."""
    if data is None:
        data = read_bytes(path)
    if not is_elf(data):
        kind = input_kind(data)
        if kind == Kind.archive:
            raise Cfi2SframeError(path, "a static library (ar archive): this command reads "
                                        "one file; 'dump', 'stats' and 'verify' read every "
                                        "member, or extract one (ar x)")
        if not data:
            raise Cfi2SframeError(path, "an empty file: this command reads ELF files and raw "
                                        "SFrame sections")
        if kind == Kind.text:
            raise Cfi2SframeError(path, "text (assembly converts with 'cfi2sframe FILE -o "
                                        "FILE.o'): this command reads ELF files and raw "
                                        "SFrame sections")
        if kind != Kind.sframe:
            refuse_unreadable(path, data)  # Mach-O, thin archives, other binary data
        return SFrameBytes(path, ".sframe", data, raw_address, False, False)
    return _elf_bytes(path, data, as_readelf, limits, view)


def _elf_bytes(path: str, data: bytes, as_readelf: bool, limits: Limits,
               view: ElfView | None = None) -> SFrameBytes:
    if view is None:
        view = open_elf_file(path, data)
    section = view.sframe_section()
    if section is None:
        raise Cfi2SframeError(path, "no .sframe section")
    if section.size == 0:  # dump, verify, stats and lookup read it as no section
        raise Cfi2SframeError(path, f"{section.name} is empty (0 bytes): no SFrame FDEs")
    with decoding(path, section.name):
        contents = bytearray(section_contents(view, section, limits))
    version = contents[2] if len(contents) > 2 else 0
    placed: dict[int, tuple[str, int]] = {}
    relocate = view.elf_type == "ET_REL" and (version >= 2 or not as_readelf)
    if relocate:
        placed = relocate_view(view, view.sections.index(section), contents, path)
    return SFrameBytes(path, section.name, bytes(contents), section.addr,
                       relocate and version <= 2, True, view.elf_type, placed)
