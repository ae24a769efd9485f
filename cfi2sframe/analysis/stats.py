"""``stats``' coverage of a linked ELF file in SFrame V2 and V3 without converting it:
the counts and section sizes a conversion to each version would give.

The compiled core walks ``.eh_frame`` once and replays every FDE as the ELF fast path
does, adding up each function's FRE bytes in both versions with no FRE made
(``_core.stats_scan``, once per distinct state asking Python for its FRE and sizes;
for a file with ``.sframe``, ``stats`` checks too, and ``verify_scan``'s walk counts
the same in its own replay of each FDE: ``count_request``, ``compare.verify_counted``);
the FDEs the fast path leaves to the general path (a PLT, a CFA expression, what
SFrame cannot hold) are lowered and encoded here, as the conversion does them.  The
reference is the conversion itself (``convert.convert_elf`` per version and its
section's length), which ``batch.record`` runs where this gives None: the pure-Python
core, objects, ``.debug_frame``, s390x, a start far from where ``.sframe`` would go.
``tests/differential/test_core_stats.py`` holds the two equal.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from types import ModuleType

from ..arch import arch_for_machine
from ..arch.base import Arch
from ..core import compiled as compiled_core
from ..dwarf.cfi import Cfi, fdes_at
from ..elf.cfi import named_fdes
from ..elf.compressed import Limits, section_contents
from ..elf.read import SHT_NOBITS, ElfView, Section
from ..errors import decoding
from ..sframe.build import encode_sframe, lower_fdes
from ..sframe.encode import tail_sizes
from ..sframe.fastpath import replay_target, serves
from ..sframe.format import (
    FDE_LAYOUT,
    FRE_START_SIZES,
    HEADER_SIZE,
    MAX_FRES_V3,
    MAX_FUNCTION_SIZE,
    V3_ATTR,
    VERSION_2,
    VERSION_3,
)
from ..sframe.lower import Skip
from ..typed import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from .compare import Counted, Counts

_COMPILED = compiled_core()

# The FDE table's entry of each function (V3's index entry; its attribute goes before
# its FREs, with them).
_ENTRY = {2: FDE_LAYOUT[VERSION_2].size, 3: FDE_LAYOUT[VERSION_3].size}


class Coverage(NamedTuple):
    """What converting a file to one SFrame version gives: the target, the DWARF FDEs
    read, the SFrame FDEs made, the functions left out (in FDE order) and the bytes of
    the section."""

    arch: Arch
    fdes: int
    emitted: int
    skips: tuple[Skip, ...]
    size: int


def scan_coverage(path: str, data: bytes, view: ElfView, limits: Limits,
                  sframe_address: Callable[[], int], flex: bool = True,
                  compiled: ModuleType | None = _COMPILED,
                  counted: Counted | None = None) -> dict[int, Coverage] | None:
    """Per version (2 and 3) the ``Coverage`` of ``convert_elf(path, data, version,
    sframe_address)``, or None where the scan does not apply (the caller converts).
    ``sframe_address``: where the conversion would place ``.sframe`` (asked after the
    scan, as the conversion asks it after lowering): a function whose start field
    could leave its 32 bits from there is the conversion's to report.  ``counted``:
    the scan's answer where another walk made it (``compare.verify_counted`` for
    ``count_request``), so the section is not walked again."""
    scanned = _applies(path, view, compiled)
    if scanned is None:
        return None
    arch, chosen = scanned
    address_size = 8 if view.is64 else 4
    with decoding(path, chosen.name):
        eh = section_contents(view, chosen, limits)
    if counted is None and compiled is not None:  # (``_applies``: never None here)
        counted = compiled.stats_scan(eh, chosen.addr, {}, {},
                                      _scan_params(arch, address_size))
    if counted is None:
        return None
    fdes, functions, v2_bytes, v3_bytes, todo, low, high = counted
    if todo:
        with decoding(path, chosen.name):
            rest = named_fdes(view, fdes_at(bytes(eh), todo, chosen.addr, address_size,
                                            view.little_endian))
    else:
        rest = []
    cfi = Cfi(path, view.machine, view.elf_type, tuple(rest), chosen.name, arch.big_endian)
    address = sframe_address()
    out = {}
    for version, fre_bytes in ((2, v2_bytes), (3, v3_bytes + functions * V3_ATTR.size)):
        made, skips = lower_fdes(cfi, arch, version, flex, compiled)
        image = encode_sframe(made, arch, version)
        count = functions + len(made)
        starts = [func.start for func in made] + ([low, high] if functions else [])
        if starts and not _reaches(min(starts), max(starts), address, count,
                                   image.fde_size, 8 * image.start_size):
            return None
        size = HEADER_SIZE + count * _ENTRY[version] + fre_bytes + len(image.fres)
        out[version] = Coverage(arch, fdes, count, tuple(skips),
                                size + -size % arch.sframe_section_align)
    return out


def count_request(path: str, view: ElfView,
                  compiled: ModuleType | None = _COMPILED) -> Counts | None:
    """``_core.stats_scan``'s memos (new) and parameters for the file, as another walk
    of its ``.eh_frame`` takes them to count for ``scan_coverage`` (``verify_scan``'s
    ``counts``); None where ``scan_coverage`` does not scan."""
    scanned = _applies(path, view, compiled)
    if scanned is None:
        return None
    return {}, {}, _scan_params(scanned[0], 8 if view.is64 else 4)


def _applies(path: str, view: ElfView, compiled: ModuleType | None
             ) -> tuple[Arch, Section] | None:
    """The target and ``.eh_frame`` of a file the scan counts: a linked file with that
    section, of a target the fast path serves, with the compiled core; else None."""
    if compiled is None or view.elf_type == "ET_REL":
        return None
    chosen = view.section(".eh_frame")
    if chosen is None or chosen.kind == SHT_NOBITS:
        return None
    with decoding(path, "ELF file"):
        arch = arch_for_machine(view.machine, path, not view.little_endian)
    if not arch.sframe_abi or not serves(arch):
        return None
    return arch, chosen


@lru_cache(maxsize=16)
def _scan_params(arch: Arch, address_size: int) -> dict[str, object]:
    """``_core.stats_scan``'s parameters by name: the replay's target (``replay_target``),
    the file's address size, the formats' limits, the FRE start sizes and an FRE's sizes
    after its start; built once, never changed."""
    return {**replay_target(arch, arch.big_endian), "address_size": address_size,
            "max_size": MAX_FUNCTION_SIZE, "max_fres_v3": MAX_FRES_V3,
            "addr_sizes": FRE_START_SIZES, "size_of": tail_sizes(arch)}


def _reaches(low: int, high: int, address: int, count: int, fde_size: int,
             bits: int) -> bool:
    """Whether every start field of a section at ``address`` surely holds its function's
    start relative to itself (``SectionImage.to_bytes``): the farthest function from
    the first and from the last field within ``bits`` signed."""
    first = address + HEADER_SIZE
    last = first + max(count - 1, 0) * fde_size
    bound = 1 << (bits - 1)
    return -bound <= low - last and high - first < bound
