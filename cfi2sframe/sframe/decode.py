"""Strict SFrame reader (V1, V2 with both errata, V3): the exact inverse of the encoder.

Every structural inconsistency (truncation, offsets past the end, FRE counts
that do not add up, unknown version, ABI, flags or types) raises
``DecodeError`` with the byte offset where it was found; nothing else escapes.

``FdeTable`` is the header, checked, and the FDE index; ``decode_covering`` (lookup)
reads the FDE index in one pass and decodes only the FDEs covering the PCs;
``DecodedSection.find_fde`` searches by bisection where FDEs follow one another, else
takes the first in table order.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from types import ModuleType

from ..arch import by_sframe_abi, is_sframe_abi
from ..basics import in_force
from ..core import compiled as compiled_core
from ..errors import DecodeError
from ..typed import TYPE_CHECKING, NamedTuple
from .format import (
    BASE_REG_FP,
    FDE_LAYOUT,
    FRE_ADDR_SIZE,
    FRE_HEAD,
    HEADER,
    HEADER_SIZE,
    MAGIC,
    OFFSET_SIZE,
    PREAMBLE,
    V3_ATTR,
    VALID_FLAGS,
    VERSION_1,
    VERSION_2,
    VERSION_3,
    WORD_CODE,
    starts_pcrel,
)
from .words import (
    FDE_INFO_FRE_TYPE,
    FDE_INFO_PAUTH_B_KEY,
    FDE_INFO_PC_MASK,
    FDE_INFO_SIGNAL,
    FDE_INFO_UNUSED,
    FDE_TYPE_FLEX,
    FDE_TYPE_MASK,
    fde_type,
    fre_info_fields,
)

if TYPE_CHECKING:
    from typing import Final

FDE_ENTRY_SIZE = {version: layout.size for version, layout in FDE_LAYOUT.items()}
V3_ATTR_SIZE = V3_ATTR.size
# The preamble's magic, read before the byte order is known.
_MAGIC = slice(PREAMBLE.offset("magic"), PREAMBLE.offset("version"))
# An FDE index entry's start and size, each version's.
_START_AND_SIZE = {version: layout.pick("func_start", "func_size")
                   for version, layout in FDE_LAYOUT.items()}
# Where the fields an error names are, in an FDE (V1, V2) and in V3's attribute.
_FDE_INFO_AT = FDE_LAYOUT[VERSION_2].offset("info")
_FDE_FRE_OFF_AT = FDE_LAYOUT[VERSION_2].offset("func_start_fre_off")
_V3_FRE_OFF_AT = FDE_LAYOUT[VERSION_3].offset("func_start_fre_off")
_V3_INFO_AT, _V3_INFO2_AT = V3_ATTR.offset("func_info"), V3_ATTR.offset("func_info2")
# Every FRE info byte's fields, decoded once (``words.fre_info_fields``).
_FRE_INFO = tuple(fre_info_fields(info) for info in range(256))
_COMPILED = compiled_core()
# The info byte's fields as the compiled loop takes them: (base_fp, word count, word
# width or 0 where the size code is invalid, mangled_ra, size code).
FRE_TABLE = tuple((base_reg == BASE_REG_FP, n, OFFSET_SIZE.get(size_code, 0), mangled,
                    size_code) for base_reg, n, size_code, mangled in _FRE_INFO)


class DecodedFre(NamedTuple):
    """An FRE as stored: start offset, CFA base bit, signed data words, RA-mangled bit.

    A named tuple: a large library has near a million FREs, and a frozen dataclass
    costs three times as much to build."""

    start: int
    base_fp: bool
    offsets: tuple[int, ...]
    mangled_ra: bool
    offset_size: int
    info: int

    def unsigned(self, index: int) -> int:
        """Data word ``index`` read as unsigned (FLEX control words)."""
        return self.offsets[index] & ((1 << (8 * OFFSET_SIZE[self.offset_size])) - 1)


class DecodedFde(NamedTuple):
    """An FDE (V3: index entry plus attribute) with its absolute start address and FREs.
    (A named tuple: a dump decodes one per function, and a frozen dataclass's
    construction was most of a large decode: docs/performance.md.)"""

    # The FDE's number; it shadows tuple.index, which nothing calls on an FDE.
    index: int  # type: ignore[assignment]
    start_address: int
    raw_start: int
    size: int
    start_fre_off: int
    info: int
    info2: int
    rep_size: int
    fres: tuple[DecodedFre, ...]
    field_offset: int

    # The info byte's fields, read with the masks of ``words`` (a property is read per
    # PC by look-ups: no tuple of all fields is built for one).
    @property
    def fre_type(self) -> int:
        return self.info & FDE_INFO_FRE_TYPE

    @property
    def pc_mask(self) -> bool:
        return bool(self.info & FDE_INFO_PC_MASK)

    @property
    def pauth_b_key(self) -> bool:
        return bool(self.info & FDE_INFO_PAUTH_B_KEY)

    @property
    def signal(self) -> bool:
        """V3 signal-frame bit (always False before V3: the reader refuses it there)."""
        return bool(self.info & FDE_INFO_SIGNAL)

    @property
    def flex(self) -> bool:
        return fde_type(self.info2) == FDE_TYPE_FLEX

    def fre_at(self, pc: int) -> DecodedFre | None:
        """The FRE covering ``pc`` (an address), following the spec's look-up rules."""
        offset = pc - self.start_address
        if not 0 <= offset < self.size:
            return None
        if self.pc_mask and self.rep_size:
            offset %= self.rep_size
        return in_force(self.fres, offset)


class FdeIndex(NamedTuple):
    """Where each FDE's range starts and ends, in table order.  ``disjoint``: each
    ends at or before the next starts, so the spec's binary search finds a PC's FDE;
    else the first in table order that holds it is searched for."""

    starts: Sequence[int]
    ends: Sequence[int]
    disjoint: bool

    @classmethod
    def of_ranges(cls, ranges: list[tuple[int, int]]) -> FdeIndex:
        """The index of (start, size) ranges (the compiled core's ``fde_index``
        reference)."""
        starts = [start for start, _ in ranges]
        ends = [start + size for start, size in ranges]
        return cls(starts, ends, all(end <= start for end, start in zip(ends, starts[1:],
                                                                         strict=False)))

    def find(self, pc: int) -> int | None:
        """The index of the first range in table order that holds ``pc``."""
        if self.disjoint:
            index = bisect_right(self.starts, pc) - 1
            return index if index >= 0 and pc < self.ends[index] else None
        return next((i for i, (start, end) in enumerate(zip(self.starts, self.ends,
                                                            strict=True))
                     if start <= pc < end), None)


class DecodedSection:
    """A whole SFrame section as read, placed at ``section_address``.

    A plain class, not a named tuple: it keeps the FDE index that ``find_fde`` builds
    on first use.  Its fields are not written after ``__init__``.
    """

    __slots__ = ("version", "flags", "abi", "fixed_fp_offset", "fixed_ra_offset",
                 "auxhdr_len", "num_fres", "fre_len", "fdeoff", "freoff", "big_endian",
                 "fdes", "section_address", "size", "_find")

    def __init__(self, version: int, flags: int, abi: int, fixed_fp_offset: int,
                 fixed_ra_offset: int, auxhdr_len: int, num_fres: int, fre_len: int,
                 fdeoff: int, freoff: int, big_endian: bool, fdes: tuple[DecodedFde, ...],
                 section_address: int = 0, size: int = 0) -> None:
        self.version: Final = version
        self.flags: Final = flags
        self.abi: Final = abi
        self.fixed_fp_offset: Final = fixed_fp_offset
        self.fixed_ra_offset: Final = fixed_ra_offset
        self.auxhdr_len: Final = auxhdr_len
        self.num_fres: Final = num_fres
        self.fre_len: Final = fre_len
        self.fdeoff: Final = fdeoff
        self.freoff: Final = freoff
        self.big_endian: Final = big_endian
        self.fdes: Final = fdes
        self.section_address: Final = section_address
        self.size: Final = size
        self._find: Callable[[int], int | None] | None = None

    def _key(self) -> tuple[object, ...]:
        return (self.version, self.flags, self.abi, self.fixed_fp_offset,
                self.fixed_ra_offset, self.auxhdr_len, self.num_fres, self.fre_len,
                self.fdeoff, self.freoff, self.big_endian, self.fdes, self.section_address,
                self.size)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DecodedSection) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (f"DecodedSection(version={self.version}, abi={self.abi}, "
                f"{len(self.fdes)} FDEs, section_address={self.section_address:#x})")

    def find_fde(self, pc: int) -> DecodedFde | None:
        """The first FDE in table order whose range holds ``pc``; where the FDEs follow
        one another, found as the spec's look-up does (a binary search for the last
        FDE starting at or before ``pc``)."""
        if self._find is None:
            self._find = FdeIndex.of_ranges([(fde.start_address, fde.size)
                                             for fde in self.fdes]).find
        index = self._find(pc)
        return self.fdes[index] if index is not None else None



def _need(data: bytes, pos: int, size: int, what: str) -> None:
    if pos < 0 or size < 0 or pos + size > len(data):
        raise DecodeError(max(pos, 0), f"{what} runs past the end of the section "
                                       f"({len(data)} bytes)")


def decode(data: bytes, section_address: int = 0, v1_pcrel: bool = False) -> DecodedSection:
    """Decode an SFrame section placed at ``section_address``.

    ``v1_pcrel``: read V1 start fields (and V2 ones without the PC-relative flag, as
    GNU as 2.41-2.44 wrote them) as relative to the field itself, as they are in a
    relocatable object once its PC32 relocations are applied.
    """
    table = FdeTable(data, section_address, v1_pcrel)
    fdes = [table.fde(index) for index in range(table.count)]
    total = sum(len(fde.fres) for fde in fdes)
    if total != table.num_fres:
        raise DecodeError(HEADER.offset("num_fres"),
                          f"header says {table.num_fres} FREs but the FDEs hold {total}")
    return table.section(fdes)


def decode_covering(data: bytes, pcs: Iterable[int], section_address: int = 0,
                    v1_pcrel: bool = False) -> DecodedSection:
    """The section with only the FDEs that cover ``pcs``, each with its FREs: what a
    look-up reads (the spec's algorithm: search the FDE index, decode one FDE).

    ``find_fde`` answers on it as on the whole section: the index's start and size
    fields are read for every FDE (in one pass, no objects), the FDE chosen as
    ``DecodedSection.find_fde`` chooses.  Only the counts that need every FDE
    decoded (the header's FRE total) are left unchecked."""
    table = FdeTable(data, section_address, v1_pcrel)
    found = table.index().find
    wanted = sorted({index for index in map(found, pcs) if index is not None})
    return table.section([table.fde(index) for index in wanted])


class FdeTable:
    """A section's header, checked, and its FDE index."""

    def __init__(self, data: bytes, section_address: int, v1_pcrel: bool) -> None:
        _need(data, 0, HEADER_SIZE, "SFrame header")
        if int.from_bytes(data[_MAGIC], "little") == MAGIC:
            big = False
        elif int.from_bytes(data[_MAGIC], "big") == MAGIC:
            big = True
        else:
            raise DecodeError(0, f"bad magic {data[0]:02x}{data[1]:02x} (not an SFrame "
                                 "section)")
        (_, version, flags, abi, fixed_fp, fixed_ra, auxhdr_len, num_fdes, num_fres, fre_len,
         fdeoff, freoff) = HEADER.of(not big).unpack_from(data, 0)
        if version not in VALID_FLAGS:
            raise DecodeError(HEADER.offset("version"), f"unsupported SFrame version {version}")
        if flags & ~VALID_FLAGS[version]:
            raise DecodeError(HEADER.offset("flags"), f"unknown flags "
                                                      f"{flags & ~VALID_FLAGS[version]:#x} for "
                                                      f"version {version}")
        if not is_sframe_abi(abi):
            raise DecodeError(HEADER.offset("abi_arch"), f"unknown ABI/arch identifier {abi}")
        if by_sframe_abi(abi).big_endian != big:
            raise DecodeError(0, f"byte order does not match the ABI "
                                 f"({by_sframe_abi(abi).sframe_abi_name})")
        base = HEADER_SIZE + auxhdr_len
        _need(data, HEADER_SIZE, auxhdr_len, "auxiliary header")
        self.entry = FDE_ENTRY_SIZE[version]
        self.fde_start = base + fdeoff
        fre_start = base + freoff
        _need(data, self.fde_start, num_fdes * self.entry, f"FDE table ({num_fdes} FDEs)")
        _need(data, fre_start, fre_len, f"FRE sub-section ({fre_len} bytes)")
        self.reader = _Reader(data, ">" if big else "<", fre_start, fre_len, version, abi)
        self.header = (version, flags, abi, fixed_fp, fixed_ra, auxhdr_len, num_fres,
                       fre_len, fdeoff, freoff, big)
        self.data, self.count, self.num_fres = data, num_fdes, num_fres
        self.address = section_address
        self.pcrel = starts_pcrel(version, flags, v1_pcrel)

    def fde(self, index: int) -> DecodedFde:
        return self.reader.fde(index, self.fde_start + index * self.entry, self.address,
                               self.pcrel)

    def ranges(self) -> list[tuple[int, int]]:
        """(start address, size) of every FDE, from the index alone."""
        layout = FDE_LAYOUT[self.header[0]].of(self.reader.order == "<")
        rows = layout.iter_unpack(self.data[self.fde_start:self.fde_start
                                            + self.count * self.entry])
        base, step = self._start_base()
        return [(base + raw + index * step, size)
                for index, (raw, size) in enumerate(map(_START_AND_SIZE[self.header[0]],
                                                        rows))]

    def _start_base(self) -> tuple[int, int]:
        """What the start field of FDE ``i`` is added to, as (base, step): base + i * step;
        where starts are PC-relative, the field's own address."""
        return (self.address + self.fde_start, self.entry) if self.pcrel else (self.address, 0)

    def index(self, compiled: ModuleType | None = _COMPILED) -> FdeIndex:
        """The FDE index (``ranges``) for look-ups; ``compiled``: the compiled core's
        loop (the default where it is built), which keeps it out of Python objects, or
        None for the reference, which also runs where it gives up."""
        if compiled is not None:
            base, step = self._start_base()
            done = compiled.fde_index(self.data, fde_start=self.fde_start, count=self.count,
                                      entry=self.entry, wide=self.header[0] == VERSION_3,
                                      big=self.reader.order == ">", base=base, step=step)
            if done is not None:
                starts, ends = array("q"), array("q")
                starts.frombytes(done[0])
                ends.frombytes(done[1])
                return FdeIndex(starts, ends, done[2])
        return FdeIndex.of_ranges(self.ranges())

    def section(self, fdes: list[DecodedFde]) -> DecodedSection:
        return DecodedSection(*self.header, tuple(fdes), self.address, len(self.data))


@lru_cache(maxsize=64)
def _data_words(order: str, width: int, count: int) -> struct.Struct:
    """The layout of ``count`` signed data words of ``width`` bytes."""
    return struct.Struct(order + WORD_CODE[width] * count)


class _Reader:
    """Reads FDEs and FREs of one section (keeps the shared layout facts)."""

    def __init__(self, data: bytes, order: str, fre_start: int, fre_len: int, version: int,
                 abi: int) -> None:
        self.data = data
        self.order = order
        self.fre_start = fre_start
        self.fre_end = fre_start + fre_len
        self.version = version
        self.abi = abi
        self.fde_layout = FDE_LAYOUT[version].of(order == "<")  # this section's FDE
        self.attr_layout = V3_ATTR.of(order == "<")
        # ``_core.decode_fres``'s parameters of this section, by name
        self.fre_params = {"fre_end": self.fre_end, "big_endian": order == ">",
                           "fre_type": DecodedFre, "fre_table": FRE_TABLE}

    def fde(self, index: int, pos: int, section_address: int, pcrel: bool) -> DecodedFde:
        data = self.data
        if self.version == VERSION_3:
            raw_start, size, fre_off = self.fde_layout.unpack_from(data, pos)
            attr = self.fre_start + fre_off
            if not (self.fre_start <= attr and attr + V3_ATTR_SIZE <= self.fre_end):
                raise DecodeError(pos + _V3_FRE_OFF_AT, f"FDE {index}: attribute at FRE offset "
                                                        f"{fre_off:#x} is outside the FRE "
                                                        "sub-section")
            count, info, info2, rep_size = self.attr_layout.unpack_from(data, attr)
            if fde_type(info2) > FDE_TYPE_FLEX or info2 & ~FDE_TYPE_MASK:
                raise DecodeError(attr + _V3_INFO2_AT,
                                  f"FDE {index}: unknown FDE type byte {info2:#04x}")
            if info & FDE_INFO_UNUSED[VERSION_3]:
                raise DecodeError(attr + _V3_INFO_AT, f"FDE {index}: unused info bit 6 set")
            first = attr + V3_ATTR_SIZE
            info_at = attr + _V3_INFO_AT
        else:
            if self.version == VERSION_1:
                raw_start, size, fre_off, count, info = self.fde_layout.unpack_from(data, pos)
                # V1 has no repetition size field: the target says what its PC-mask
                # FDEs mean (``Arch.sframe_v1_pcmask_rep``).
                rep_size = by_sframe_abi(self.abi).sframe_v1_pcmask_rep \
                    if info & FDE_INFO_PC_MASK else 0
            else:
                raw_start, size, fre_off, count, info, rep_size, _ = \
                    self.fde_layout.unpack_from(data, pos)
            info2 = 0
            if info & FDE_INFO_UNUSED[self.version]:
                raise DecodeError(pos + _FDE_INFO_AT,
                                  f"FDE {index}: unused info bits set ({info:#04x})")
            first = self.fre_start + fre_off
            info_at = pos + _FDE_INFO_AT
            if count and not self.fre_start <= first < self.fre_end:
                raise DecodeError(pos + _FDE_FRE_OFF_AT, f"FDE {index}: first FRE offset "
                                                         f"{fre_off:#x} is outside the FRE "
                                                         "sub-section")
        fre_type = info & FDE_INFO_FRE_TYPE
        if fre_type not in FRE_ADDR_SIZE:
            raise DecodeError(info_at, f"FDE {index}: unknown FRE type {fre_type}")
        if info & FDE_INFO_PC_MASK and not rep_size and self.version != VERSION_1:
            # V1 FDEs have no repeat size field (GNU ld 2.40 writes PC-mask FDEs for the
            # PLT, whose FRE starts the V1 spec calls masks); V2 and V3 need one.
            raise DecodeError(info_at, f"FDE {index}: PC-mask FDE with a repeat size of 0")
        flex = self.version == VERSION_3 and fde_type(info2) == FDE_TYPE_FLEX
        fres = self.fres(first, count, fre_type, index, flex)
        address = section_address + raw_start + (pos if pcrel else 0)
        return DecodedFde(index, address, raw_start, size, fre_off, info, info2, rep_size,
                          fres, pos)

    def fres(self, pos: int, count: int, fre_type: int, index: int,
             flex: bool, compiled: ModuleType | None = _COMPILED) -> tuple[DecodedFre, ...]:
        """``count`` FREs from ``pos``; ``compiled``: the compiled core's loop (the default
        where it is built), which gives None where the loop below reports an error."""
        data, end = self.data, self.fre_end
        addr_size = FRE_ADDR_SIZE[fre_type]
        if compiled is not None:
            done = compiled.decode_fres(data, pos, count, addr_size, flex, self.fre_params)
            if done is not None:
                fres: tuple[DecodedFre, ...] = done[0]
                return fres
        head = FRE_HEAD[addr_size].of(self.order == "<")
        info_off = FRE_HEAD[addr_size].offset("sfre_info")
        order = self.order
        out = []
        for _ in range(count):
            if pos + head.size > end:
                raise DecodeError(pos, f"FDE {index}: FRE runs past the FRE sub-section")
            start, info = head.unpack_from(data, pos)
            base_reg, n, size_code, mangled_ra = _FRE_INFO[info]
            if size_code not in OFFSET_SIZE:
                raise DecodeError(pos + info_off, f"FDE {index}: invalid data word size code 3")
            if flex and base_reg:
                raise DecodeError(pos + info_off, f"FDE {index}: CFA base bit set in a "
                                                  "FLEX FDE")
            width = OFFSET_SIZE[size_code]
            body = pos + head.size
            if body + n * width > end:
                raise DecodeError(pos, f"FDE {index}: FRE data words run past the FRE "
                                       "sub-section")
            words = _data_words(order, width, n).unpack_from(data, body)
            out.append(DecodedFre(start, base_reg == BASE_REG_FP, words, mangled_ra,
                                  size_code, info))
            pos = body + n * width
        return tuple(out)
