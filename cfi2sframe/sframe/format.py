"""SFrame layouts and constants, from the SFrame V2 (errata 1) and V3 specs.

The records are declared once as ``elf.structs.Layout``s: ``PREAMBLE``, ``HEADER``,
``FDE_LAYOUT`` (V1 17 bytes, V2 20, V3's index entry 16), ``V3_ATTR`` (5), ``FRE_HEAD``
(an FRE's start address of 1, 2 or 4 bytes and its info byte); the readers and writers
take offsets and ``struct``s from them. Also ``Fre`` (with ``frame_rules``),
``SFrameFunction``, ``fre_words``, ``cfa_word``/``cfa_offset``, size selection and
``fits`` (32-bit sizes, V3's 65535 FREs)."""

from __future__ import annotations

from ..arch import as_arch
from ..cstruct import Layout
from ..typed import TYPE_CHECKING, NamedTuple
from .recovery import RA_UNDEFINED, FrameRules, Loc, Recovery, RuleFre
from .words import s390x_reg_word

if TYPE_CHECKING:
    from ..arch.base import Arch

MAGIC = 0xDEE2
VERSION_1, VERSION_2, VERSION_3 = 1, 2, 3

F_FDE_SORTED = 0x1
F_FRAME_POINTER = 0x2
F_FDE_FUNC_START_PCREL = 0x4

# The header flags each version defines (any other bit set is an error).
VALID_FLAGS = {
    VERSION_1: F_FDE_SORTED | F_FRAME_POINTER,
    VERSION_2: F_FDE_SORTED | F_FRAME_POINTER | F_FDE_FUNC_START_PCREL,
    VERSION_3: F_FDE_SORTED | F_FDE_FUNC_START_PCREL,
}


def starts_pcrel(version: int, flags: int, v1_pcrel: bool) -> bool:
    """Whether a section's FDE start fields are each relative to itself: flagged so, or
    (``v1_pcrel``: an object's, relocated by PC32 relocations) V1 or unflagged V2."""
    return bool(flags & F_FDE_FUNC_START_PCREL) or (v1_pcrel and version <= VERSION_2)


# ABI/arch ids and their names are target facts: ``Arch.sframe_abi``, ``sframe_abi_name``.

FRE_ADDR1, FRE_ADDR2, FRE_ADDR4 = 0, 1, 2
FRE_ADDR_SIZE = {FRE_ADDR1: 1, FRE_ADDR2: 2, FRE_ADDR4: 4}
# The start sizes by FRE type, as the FRE type of a function is chosen (``fre_type_for``,
# and the compiled core's ``fdes_v2`` and ``stats_scan`` given this tuple).
FRE_START_SIZES = tuple(FRE_ADDR_SIZE[fre_type] for fre_type in range(len(FRE_ADDR_SIZE)))
FDE_PCINC, FDE_PCMASK = 0, 1
OFFSET_1B, OFFSET_2B, OFFSET_4B = 0, 1, 2
OFFSET_SIZE = {OFFSET_1B: 1, OFFSET_2B: 2, OFFSET_4B: 4}
# The ``struct`` code of an FRE's signed data word, by its size in bytes.
WORD_CODE = {1: "b", 2: "h", 4: "i"}
BASE_REG_FP, BASE_REG_SP = 0, 1

# The records, each field named once (the specs' sframe_preamble, sframe_header,
# sframe_func_desc_entry (V1, V2), sframe_func_desc_idx and sframe_func_desc_attr
# (V3)); sizes and offsets computed, sizes held to the specs by a unit test.
_PREAMBLE_FIELDS = (("magic", "H"), ("version", "B"), ("flags", "B"))
PREAMBLE = Layout("sframe_preamble", _PREAMBLE_FIELDS)
HEADER = Layout("sframe_header", (
    *_PREAMBLE_FIELDS, ("abi_arch", "B"), ("cfa_fixed_fp_offset", "b"),
    ("cfa_fixed_ra_offset", "b"), ("auxhdr_len", "B"), ("num_fdes", "I"), ("num_fres", "I"),
    ("fre_len", "I"), ("fdeoff", "I"), ("freoff", "I")))
# func_start: the specs' func_start_address (V1, V2), func_start_offset (V3).
_FDE_V1_FIELDS = (("func_start", "i"), ("func_size", "I"),
                  ("func_start_fre_off", "I"), ("func_num_fres", "I"), ("info", "B"))
FDE_LAYOUT = {
    VERSION_1: Layout("sframe_func_desc_entry_v1", _FDE_V1_FIELDS),
    VERSION_2: Layout("sframe_func_desc_entry", (*_FDE_V1_FIELDS, ("rep_size", "B"),
                                                 ("padding", "H"))),
    VERSION_3: Layout("sframe_func_desc_idx", (("func_start", "q"), ("func_size", "I"),
                                               ("func_start_fre_off", "I")))}
V3_ATTR = Layout("sframe_func_desc_attr", (("func_num_fres", "H"), ("func_info", "B"),
                                           ("func_info2", "B"), ("func_rep_size", "B")))
# An FRE's fixed part, by the size of its start address (the specs'
# sframe_frame_row_entry_addr1, 2 and 4): the start, then the info byte.
FRE_HEAD = {size: Layout(f"sframe_frame_row_entry_addr{size}",
                         (("sfre_start_address", code), ("sfre_info", "B")))
            for size, code in ((1, "B"), (2, "H"), (4, "I"))}

HEADER_SIZE = HEADER.size
FDE_SIZE = {VERSION_1: FDE_LAYOUT[VERSION_1].size, VERSION_2: FDE_LAYOUT[VERSION_2].size}


def fre_type_for(max_start: int) -> int:
    """The smallest FRE start-address type that holds ``max_start`` (the largest where
    none does: its encoding then refuses the start), from ``FRE_START_SIZES``: the
    compiled core's choice (``fre_type_for`` in csrc/sframe_encode.c) is fed the same."""
    for fre_type, size in enumerate(FRE_START_SIZES):
        if max_start < 1 << (8 * size):
            return fre_type
    return len(FRE_START_SIZES) - 1


def offset_size_for(values: tuple[int, ...]) -> int | None:
    """The smallest signed offset size code for all ``values``; None if over 32 bits."""
    low, high = min(values), max(values)
    if -0x80 <= low and high <= 0x7F:
        return OFFSET_1B
    if -0x8000 <= low and high <= 0x7FFF:
        return OFFSET_2B
    if -0x80000000 <= low and high <= 0x7FFFFFFF:
        return OFFSET_4B
    return None


# Limits of the format: function sizes are 32-bit fields; V3 counts FREs in 16 bits.
MAX_FUNCTION_SIZE = 0xFFFFFFFF
MAX_FRES_V3 = 0xFFFF


def fits(function_size: int, fre_count: int, version: int) -> bool:
    """Whether a function of this size and FRE count has an FDE in ``version``."""
    return function_size <= MAX_FUNCTION_SIZE and (version < 3 or fre_count <= MAX_FRES_V3)


class Fre(NamedTuple):
    """One frame row entry, in the meaning of the spec (not yet in bytes).

    ``cfa_base_fp`` selects FP (else SP) as the CFA base; ``cfa_offset`` is
    the real offset (s390x encodes it only in bytes).  ``ra_offset`` is set
    only on ABIs that track RA per row; ``ra_undefined`` marks an outermost
    frame (no offsets at all).  ``fp_reg``/``ra_reg``: s390x V2 only, the
    register holding the caller's FP/RA (written as ``(reg << 1) | 1``).
    """

    start: int
    cfa_base_fp: bool
    cfa_offset: int
    fp_offset: int | None = None
    ra_offset: int | None = None
    mangled_ra: bool = False
    ra_undefined: bool = False
    fp_reg: int | None = None
    ra_reg: int | None = None

    def same_rules(self, other: Fre) -> bool:
        return self[1:] == other[1:]

    def frame_rules(self, arch: Arch | str) -> FrameRules:
        """The recovery rules of this row: CFA, FP and RA (as V3 FLEX rows give them, and
        as ``rules.fre_rules`` reads them back once encoded)."""
        target = as_arch(arch)
        if self.ra_undefined:
            return FrameRules(None, None, RA_UNDEFINED)
        cfa = Loc(target.fp if self.cfa_base_fp else target.sp, self.cfa_offset, False)
        fp = Loc(self.fp_reg, 0, False) if self.fp_reg is not None else (
            Loc(None, self.fp_offset, True) if self.fp_offset is not None else None)
        ra: Recovery | None
        if not target.tracks_ra:
            ra = Loc(None, target.sframe_fixed_ra_offset, True)
        elif self.ra_reg is not None:
            ra = Loc(self.ra_reg, 0, False)
        else:
            ra = Loc(None, self.ra_offset, True) if self.ra_offset is not None else None
        return FrameRules(cfa, fp, ra)


# An FRE without its start: (cfa_base_fp, cfa_offset, fp_offset, ra_offset, mangled_ra,
# ra_undefined, fp_reg, ra_reg).
FreShape = tuple[bool, int, int | None, int | None, bool, bool, int | None, int | None]


def cfa_word(offset: int, arch: Arch) -> int:
    """The SFrame word that stores a CFA offset (s390x: (offset - 160) / 8)."""
    return (offset - arch.cfa_adjustment) // arch.cfa_alignment


def cfa_offset(word: int, arch: Arch) -> int:
    """The CFA offset an SFrame CFA word stores: the inverse of ``cfa_word``."""
    return word * arch.cfa_alignment + arch.cfa_adjustment


def fre_words(fre: Fre, arch: Arch) -> tuple[int, ...]:
    """The data words of a default FRE, in the spec's order CFA, [RA], [FP].

    s390x: the CFA offset is stored as (offset - 160) / 8, an FP without a
    saved RA needs the RA padding word 0, and (V2) a register is ``reg<<1|1``.
    """
    if fre.ra_undefined:
        return ()
    cfa = fre.cfa_offset
    if arch.sframe_cfa_encoded:
        cfa = cfa_word(cfa, arch)
    fp = fre.fp_offset if fre.fp_reg is None else s390x_reg_word(fre.fp_reg)
    ra = fre.ra_offset if fre.ra_reg is None else s390x_reg_word(fre.ra_reg)
    if ra is not None:
        return (cfa, ra) if fp is None else (cfa, ra, fp)
    if fp is None:
        return (cfa,)
    return (cfa, 0, fp) if arch.sframe_ra_padding else (cfa, fp)


class SFrameFunction(NamedTuple):
    """A function ready to encode: where it is and its FREs, ordered by start.

    ``anchor`` (symbol, distance) carries the timeline's way to name the start
    in assembly output.  A named tuple: a large library makes
    a hundred thousand of them, and a frozen dataclass costs several times more.
    """

    name: str
    section: str
    start: int
    size: int
    fres: tuple[Fre | RuleFre, ...]  # RuleFre only in FLEX (V3) functions
    pauth_b_key: bool = False
    pc_mask: bool = False
    rep_size: int = 0
    anchor: tuple[str, int] | None = None
    flex: bool = False
    signal: bool = False

