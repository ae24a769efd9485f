"""SFrame section builders (V1, V2, V3): the smallest exact encoding of a list of functions.

Per function the FRE start-address type is the smallest that holds its last
FRE start; per FRE the offset size is the smallest that holds its offsets.
The function start fields are PC-relative (``SFRAME_F_FDE_FUNC_START_PCREL``),
so a section image can be placed anywhere: raw bytes get them computed for a
given address, assembly output writes them as expressions.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import chain
from operator import attrgetter, itemgetter, sub
from types import ModuleType

from ..arch import by_sframe_abi
from ..arch.base import Arch
from ..core import compiled as compiled_core
from ..errors import Cfi2SframeError
from ..typed import TYPE_CHECKING, NamedTuple, cast
from .columns import Later, Packed
from .format import (
    BASE_REG_FP,
    BASE_REG_SP,
    F_FDE_FUNC_START_PCREL,
    F_FDE_SORTED,
    FDE_LAYOUT,
    FDE_SIZE,
    FRE_ADDR_SIZE,
    FRE_HEAD,
    FRE_START_SIZES,
    HEADER,
    HEADER_SIZE,
    MAGIC,
    OFFSET_SIZE,
    V3_ATTR,
    VERSION_1,
    VERSION_2,
    VERSION_3,
    WORD_CODE,
    Fre,
    FreShape,
    SFrameFunction,
    cfa_word,
    fre_type_for,
    fre_words,
    offset_size_for,
)
from .rules import RA_UNDEFINED, Loc, RuleFre, as_loc, fre_rules, opt_loc
from .words import FLEX_PADDING, fde_info, flex_control, fre_info

if TYPE_CHECKING:  # (the decoder: an annotation here; a conversion loads none)
    from ..arch.base import ByteOrder
    from .decode import DecodedSection

_COMPILED = compiled_core()
_START = itemgetter(0)  # an FRE's start (Fre and RuleFre both open with it)
_START_FIELD = attrgetter("start")  # a function's


class SectionImage(NamedTuple):
    """An encoded section whose FDE start fields are still to be filled in.

    ``fde_tails[i]`` is FDE ``i`` without its start field (4 bytes in V2, 8 in
    V3); ``functions[i]`` is the function it describes.  ``starts``: each function's
    start, 8 bytes in this machine's order, where the compiled table pass made the
    image (``sframe.build.eh_table``: ``functions`` are made when read, ``fde_tails`` is
    ``columns.Packed``, and placing it is ``_core.place_fdes``).
    """

    header: bytes
    functions: Sequence[SFrameFunction]
    fde_tails: Sequence[bytes]
    fres: bytes
    big_endian: bool
    fde_size: int
    start_size: int = 4
    align: int = 1  # s390x: the section is zero-padded to a multiple of 8 (not in fre_len)
    starts: bytes | None = None

    @property
    def padding(self) -> bytes:
        """Zero bytes after the FREs that round the section up to ``align``."""
        size = len(self.header) + len(self.fde_tails) * self.fde_size + len(self.fres)
        return bytes(-size % self.align)

    @property
    def size(self) -> int:
        """The section's length in bytes (what ``to_bytes`` gives, without building it)."""
        return (len(self.header) + len(self.fde_tails) * self.fde_size + len(self.fres)
                + len(self.padding))

    def start_field_offset(self, index: int) -> int:
        """Offset in the section of FDE ``index``'s start field."""
        return len(self.header) + index * self.fde_size

    def to_bytes(self, section_address: int = 0,
                 address_of: Callable[[SFrameFunction], int] | None = None,
                 where: str = "") -> bytes:
        """The section placed at ``section_address``, with each start made PC-relative.

        ``address_of`` gives each function's address; by default its ``start`` (the
        address itself for functions of a linked image; the offset in its section
        for relocatable input, which then places every section at 0).  ``where``
        names the input in the error for a start out of range."""
        functions = self.functions
        count, size = len(functions), self.fde_size
        bits = 8 * self.start_size
        low, high = -(1 << (bits - 1)), 1 << (bits - 1)
        first = section_address + len(self.header)
        if self.starts is not None and address_of is None and self.start_size == 4 \
                and isinstance(self.fde_tails, Packed) and _COMPILED is not None \
                and 0 <= first < 1 << 64:  # the columns placed in C, else as below
            placed = _COMPILED.place_fdes(self.starts, self.fde_tails.blob, first, size,
                                          self.big_endian)
            if not isinstance(placed, int):
                return b"".join((self.header, placed, self.fres, self.padding))
        # Each start less its field's place, in C loops (``map``): a Python loop per
        # function cost libLLVM-14's 95k some 0.1 s.
        deltas = list(map(sub, map(address_of or _START_FIELD, functions),
                          range(first, first + count * size, size)))
        if deltas and not (low <= min(deltas) and max(deltas) < high):
            at = next(i for i, delta in enumerate(deltas) if not low <= delta < high)
            raise Cfi2SframeError(
                where, f"function '{functions[at].name}' is {deltas[at]:#x} bytes from its "
                f"FDE: out of range for a {bits}-bit PC-relative start")
        start = struct.Struct(f"{'>' if self.big_endian else '<'}{'i' if bits == 32 else 'q'}")
        fdes = chain.from_iterable(zip(map(start.pack, deltas), self.fde_tails, strict=True))
        return b"".join((self.header, *fdes, self.fres, self.padding))

    def __bytes__(self) -> bytes:
        """``to_bytes()``: the section at address 0, each function at its ``start``."""
        return self.to_bytes()

    def unplaced_bytes(self) -> bytes:
        """The section with every start field 0: for an object, whose relocations
        (``start_field_offset``, each function's section and start) fill them in."""
        zero = bytes(self.start_size)
        return b"".join((self.header, *(zero + tail for tail in self.fde_tails), self.fres,
                         self.padding))


def _fres_bytes(fres: tuple[Fre, ...], addr_size: int, arch: Arch,
                tails: dict[FreShape, bytes],
                compiled: ModuleType | None = _COMPILED) -> bytes:
    """The FREs of one function: each start, then its info and data words.

    ``tails`` memoises those words by FRE shape (the caller's, one per section):
    a few hundred distinct shapes cover the ~500k FREs of a large library.
    ``compiled``: the compiled core's loop (the default where it is built), or None
    for the loop below, its reference.
    """
    if compiled is not None:
        encoded: bytes = compiled.fres_bytes(fres, addr_size, arch.big_endian, tails,
                                             _tail_of(arch))
        return encoded
    endian: ByteOrder = "big" if arch.big_endian else "little"
    out = bytearray()
    for fre in fres:
        shape = fre[1:]
        tail = tails.get(shape)
        if tail is None:
            tail = tails[shape] = _tail_of(arch)(shape)
        out += fre.start.to_bytes(addr_size, endian)
        out += tail
    return bytes(out)


@lru_cache(maxsize=16)
def _tail_of(arch: Arch) -> Callable[[FreShape], bytes]:
    """An FRE's bytes after its start, by its fields after ``start``."""
    return lambda shape: _fre_bytes(Fre(0, *shape), 1, arch)[1:]


def tail_sizes(arch: Arch) -> Callable[[FreShape], tuple[int, int]]:
    """A default FRE's bytes after its start, in V2 and in V3 (where an outermost frame's
    FRE is its info byte alone), by its fields after ``start``: what ``stats`` adds up
    without encoding a section."""
    tail = _tail_of(arch)

    def sizes(shape: FreShape) -> tuple[int, int]:
        size = len(tail(shape))
        return size, 1 if Fre(0, *shape).ra_undefined else size
    return sizes


def _fre_bytes(fre: Fre, addr_size: int, arch: Arch) -> bytes:
    words = fre_words(fre, arch)
    size_code = offset_size_for(words) if words else 0
    assert size_code is not None, "lowering guarantees 32-bit words"
    base = BASE_REG_FP if fre.cfa_base_fp else BASE_REG_SP
    if fre.ra_undefined:
        base = 0
    info = fre_info(base, len(words), size_code, fre.mangled_ra)
    order = ">" if arch.big_endian else "<"
    return _fre_struct(order, addr_size, OFFSET_SIZE[size_code], len(words)).pack(
        fre.start, info, *words)


@lru_cache(maxsize=256)
def _fre_struct(order: str, addr_size: int, word_size: int, count: int) -> struct.Struct:
    """The layout of one FRE: start address, info byte, ``count`` signed words."""
    return struct.Struct(order + FRE_HEAD[addr_size].format
                         + WORD_CODE[word_size] * count)


def _default_fres(func: SFrameFunction) -> tuple[Fre, ...]:
    """The FREs of a function without FLEX FREs (lowering makes FLEX only for V3)."""
    if func.flex:
        raise TypeError(f"V2 has no FLEX FDE (function '{func.name}')")  # a bug of ours
    return cast("tuple[Fre, ...]", func.fres)


def build_v2(functions: Sequence[SFrameFunction], arch: Arch, sort_flag: bool,
             compiled: ModuleType | None = _COMPILED, pcrel: bool = True) -> SectionImage:
    """Encode ``functions`` (already in final FDE order) as an SFrame V2 section.
    ``compiled``: the compiled core's loop (``_core.fdes_v2``, the default where it is
    built), or None for the loop below, its reference.  ``pcrel`` False: without the
    errata-1 flag, as GNU ld 2.41-2.44 read V2 (objects only: their start fields are
    relocated PC-relative to the field all the same)."""
    if compiled is not None:
        fde_tails, fres, count = compiled.fdes_v2(tuple(functions), arch.big_endian,
                                                  *v2_encoding(arch))
        return _image(functions, arch, sort_flag, fde_tails, fres, count, VERSION_2, pcrel)
    return _build_v1_v2(functions, arch, sort_flag, VERSION_2, pcrel)


def v2_encoding(arch: Arch) -> tuple[dict[FreShape, bytes], Callable[[FreShape], bytes],
                                     tuple[int, ...], int, int]:
    """How the compiled V2 encoders (``_core.fdes_v2``, ``eh_table_v2``) encode for
    ``arch``: a new FRE shape -> bytes memo, the maker of those bytes, the FRE start
    sizes by FRE type, the PC-mask and pauth bits of an FDE's info byte."""
    return ({}, _tail_of(arch), FRE_START_SIZES, fde_info(0, True, False),
            fde_info(0, False, True))


def v2_image(functions: Later[SFrameFunction], fde_tails: Packed, fres: bytes, num_fres: int,
             arch: Arch, starts: bytes) -> SectionImage:
    """The V2 image of a linked file's table made in C (``sframe.build.eh_table``): sorted, its
    starts PC-relative, its functions made when read."""
    return _image(functions, arch, True, fde_tails, fres, num_fres, VERSION_2, True, starts)


def build_v1(functions: Sequence[SFrameFunction], arch: Arch, sort_flag: bool) -> SectionImage:
    """Encode ``functions`` as an SFrame V1 section: what GNU ld 2.40 merges.  V1's
    17-byte FDE has no repetition size (a PC-mask FDE repeats every
    ``Arch.sframe_v1_pcmask_rep`` bytes: lowering leaves out the others) and no flag for
    PC-relative starts: in an object each start is relocated PC-relative to its field,
    as GNU as 2.40 writes it."""
    return _build_v1_v2(functions, arch, sort_flag, VERSION_1, False)


def _build_v1_v2(functions: Sequence[SFrameFunction], arch: Arch, sort_flag: bool,
                 version: int, pcrel: bool) -> SectionImage:
    """The V1 or V2 section, a function at a time: the reference of ``_core.fdes_v2``."""
    shape_bytes: dict[FreShape, bytes] = {}
    fde_tail = FDE_LAYOUT[version].after("func_start", not arch.big_endian)
    tails = []
    memo: dict[int, tuple[tuple[Fre, ...], int, bytes]] = {}
    fre_blob = bytearray()
    num_fres = 0
    for func in functions:
        fres = _default_fres(func)
        hit = memo.get(id(fres))
        if hit is None or hit[0] is not fres:
            # Functions made from identical CFI share one FRE tuple: encode it once.
            fre_type = fre_type_for(max(map(_START, fres), default=0))
            hit = memo[id(fres)] = (fres, fre_type,
                                    _fres_bytes(fres, FRE_ADDR_SIZE[fre_type], arch, shape_bytes))
        _, fre_type, encoded = hit
        info = fde_info(fre_type, func.pc_mask, func.pauth_b_key)
        fields = (func.rep_size, 0) if version == VERSION_2 else ()  # rep size, padding
        tails.append(fde_tail.pack(func.size, len(fre_blob), len(fres), info, *fields))
        fre_blob += encoded
        num_fres += len(fres)
    return _image(functions, arch, sort_flag, tuple(tails), bytes(fre_blob), num_fres, version,
                  pcrel)


def _image(functions: Sequence[SFrameFunction], arch: Arch, sort_flag: bool,
           fde_tails: Sequence[bytes], fres: bytes, num_fres: int, version: int,
           pcrel: bool, starts: bytes | None = None) -> SectionImage:
    """The V1 or V2 section image of encoded FDEs and FREs: the header in front."""
    flags = (F_FDE_FUNC_START_PCREL if pcrel else 0) | (F_FDE_SORTED if sort_flag else 0)
    header = HEADER.of(not arch.big_endian).pack(
        MAGIC, version, flags, arch.sframe_abi, arch.sframe_fixed_fp_offset,
        arch.sframe_fixed_ra_offset, 0, len(functions), num_fres, len(fres), 0,
        len(functions) * FDE_SIZE[version])
    assert len(header) == HEADER_SIZE
    made = functions if isinstance(functions, Later) else tuple(functions)
    return SectionImage(header, made, fde_tails, fres, arch.big_endian, FDE_SIZE[version],
                        align=arch.sframe_section_align, starts=starts)


def _flex_words(rule: RuleFre, fixed_ra: Loc | None,
                arch: Arch) -> tuple[list[int], list[int]]:
    """(data words, indices of the unsigned control words) of a FLEX FRE, in their order.

    s390x stores the CFA offset as (offset - 160) / 8 here too.
    """
    words: list[int] = []
    controls: list[int] = []

    def pair(loc: Loc) -> None:
        words.extend((flex_control(loc.reg, loc.deref), loc.offset))
        controls.append(len(words) - 2)

    rules = rule.rules  # lowering admits only locations into FLEX FREs
    cfa, fp = as_loc(rules.cfa), opt_loc(rules.fp)
    if arch.sframe_cfa_encoded:
        cfa = cfa._replace(offset=cfa_word(cfa.offset, arch))
    pair(cfa)
    ra = opt_loc(rules.ra) if rules.ra != fixed_ra else None
    if ra is not None:
        pair(ra)
    elif fp is not None:
        words.append(FLEX_PADDING)  # no RA pair: the fixed RA offset applies
        controls.append(len(words) - 1)
    if fp is not None:
        pair(fp)
    return words, controls


def _flex_fre_bytes(rule: RuleFre, addr_size: int, order: str, fixed_ra: Loc | None,
                    arch: Arch) -> bytes:
    head = FRE_HEAD[addr_size].of(order == "<")
    if rule.rules.ra == RA_UNDEFINED:
        return head.pack(rule.start, 0)
    words, controls = _flex_words(rule, fixed_ra, arch)
    offsets = tuple(w for i, w in enumerate(words) if i not in controls)
    size_code = offset_size_for(offsets) if offsets else 0
    widest = max((words[i] for i in controls), default=0)
    unsigned_code = 0 if widest <= 0xFF else 1 if widest <= 0xFFFF else 2
    size_code = max(size_code if size_code is not None else 2, unsigned_code)
    width = OFFSET_SIZE[size_code]
    packed = b"".join(
        (words[i] & ((1 << (8 * width)) - 1)).to_bytes(width, "big" if order == ">" else
                                                         "little")
        for i in range(len(words)))
    info = fre_info(0, len(words), size_code, rule.mangled_ra)  # base bit 0 in FLEX
    return head.pack(rule.start, info) + packed


def build_v3(functions: Sequence[SFrameFunction], arch: Arch, sort_flag: bool) -> SectionImage:
    """Encode ``functions`` (already in final FDE order) as an SFrame V3 section.

    The FDE index holds 64-bit PC-relative starts; each function's FREs are
    preceded by its 5-byte attribute (FRE count, info bytes, repeat size).
    """
    order = ">" if arch.big_endian else "<"
    little = not arch.big_endian
    index_tail = FDE_LAYOUT[VERSION_3].after("func_start", little)
    attr = V3_ATTR.of(little)
    fixed_ra = None if arch.tracks_ra else Loc(None, arch.sframe_fixed_ra_offset, True)
    tails = []
    fre_blob = bytearray()
    num_fres = 0
    for func in functions:
        fre_type = fre_type_for(max(map(_START, func.fres), default=0))
        addr_size = FRE_ADDR_SIZE[fre_type]
        tails.append(index_tail.pack(func.size, len(fre_blob)))
        info = fde_info(fre_type, func.pc_mask, func.pauth_b_key, func.signal)
        fre_blob += attr.pack(len(func.fres), info, int(func.flex), func.rep_size)
        for fre in func.fres:
            if isinstance(fre, RuleFre):
                fre_blob += _flex_fre_bytes(fre, addr_size, order, fixed_ra, arch)
            elif fre.ra_undefined:
                fre_blob += FRE_HEAD[addr_size].of(little).pack(fre.start, 0)
            else:
                fre_blob += _fre_bytes(fre, addr_size, arch)
        num_fres += len(func.fres)
    flags = F_FDE_FUNC_START_PCREL | (F_FDE_SORTED if sort_flag else 0)
    header = HEADER.of(not arch.big_endian).pack(
        MAGIC, VERSION_3, flags, arch.sframe_abi, arch.sframe_fixed_fp_offset,
        arch.sframe_fixed_ra_offset, 0, len(functions), num_fres, len(fre_blob), 0,
        len(functions) * 16)
    return SectionImage(header, tuple(functions), tuple(tails), bytes(fre_blob),
                        arch.big_endian, 16, 8, align=arch.sframe_section_align)


def functions_from_decoded(section: DecodedSection) -> list[SFrameFunction]:
    """The functions a decoded V2 section describes, ready to encode again.

    With ``build_v2`` this closes the round trip encode -> decode -> encode.
    Only what V2 can hold is carried: default FDEs, RA tracked per ABI.  The words
    are read by ``rules.fre_rules``, the interpreter of data words.
    """
    arch = by_sframe_abi(section.abi)
    out = []
    for fde in section.fdes:
        fres = []
        for fre in fde.fres:
            rules = fre_rules(section, fde, fre)
            if rules.ra == RA_UNDEFINED:
                fres.append(Fre(fre.start, False, 0, ra_undefined=True))
                continue
            cfa, fp, ra = as_loc(rules.cfa), opt_loc(rules.fp), opt_loc(rules.ra)
            if not arch.tracks_ra:
                ra = None  # at the header's fixed offset
            fres.append(Fre(fre.start, fre.base_fp, cfa.offset,
                            None if fp is None or fp.reg is not None else fp.offset,
                            None if ra is None or ra.reg is not None else ra.offset,
                            fre.mangled_ra, False,
                            None if fp is None else fp.reg, None if ra is None else ra.reg))
        out.append(SFrameFunction(f"fde{fde.index}", "", fde.start_address, fde.size,
                                  tuple(fres), fde.pauth_b_key, fde.pc_mask, fde.rep_size))
    return out
