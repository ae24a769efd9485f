"""Strict SFrame reader (V1 and V2): the exact inverse of the encoder.

Every structural inconsistency (truncation, offsets past the end, FRE counts
that do not add up, unknown version, ABI or flags) raises ``DecodeError``
with the byte offset where it was found.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..errors import DecodeError
from .format import (
    ABI_AARCH64_BIG,
    ABI_AMD64_LITTLE,
    ABI_NAMES,
    BASE_REG_FP,
    F_FDE_FUNC_START_PCREL,
    F_FDE_SORTED,
    F_FRAME_POINTER,
    FDE_SIZE,
    FRE_ADDR_SIZE,
    HEADER_SIZE,
    MAGIC,
    OFFSET_SIZE,
    VERSION_1,
    VERSION_2,
    fde_struct,
    header_struct,
)

VALID_FLAGS = {VERSION_1: F_FDE_SORTED | F_FRAME_POINTER,
               VERSION_2: F_FDE_SORTED | F_FRAME_POINTER | F_FDE_FUNC_START_PCREL}


@dataclass(frozen=True)
class DecodedFre:
    """An FRE as stored: start offset, CFA base, raw offsets and the RA-mangled bit."""

    start: int
    base_fp: bool
    offsets: tuple[int, ...]
    mangled_ra: bool
    offset_size: int


@dataclass(frozen=True)
class DecodedFde:
    """An FDE with its absolute start address and its FREs."""

    index: int
    start_address: int
    raw_start: int
    size: int
    start_fre_off: int
    info: int
    rep_size: int
    fres: tuple[DecodedFre, ...]

    @property
    def fre_type(self) -> int:
        return self.info & 0xF

    @property
    def pc_mask(self) -> bool:
        return bool(self.info & 0x10)

    @property
    def pauth_b_key(self) -> bool:
        return bool(self.info & 0x20)


@dataclass(frozen=True)
class DecodedSection:
    """A whole SFrame section."""

    version: int
    flags: int
    abi: int
    fixed_fp_offset: int
    fixed_ra_offset: int
    auxhdr_len: int
    num_fres: int
    fre_len: int
    fdeoff: int
    freoff: int
    big_endian: bool
    fdes: tuple[DecodedFde, ...]

    def meaning(self, fre: DecodedFre) -> tuple:
        """(CFA base, CFA offset, FP rule, RA rule) of an FRE, comparable across versions.

        FP rule: None (unchanged) or the offset from the CFA.  RA rule:
        ``("cfa", off)``, ``"undefined"`` or None (unchanged).
        """
        if not fre.offsets:
            return ("fp" if fre.base_fp else "sp", None, None, "undefined")
        cfa = fre.offsets[0]
        fp: int | None = None
        ra: object = None
        if self.abi == ABI_AMD64_LITTLE:
            fp = fre.offsets[1] if len(fre.offsets) > 1 else None
            ra = ("cfa", self.fixed_ra_offset)
        else:
            ra = ("cfa", fre.offsets[1]) if len(fre.offsets) > 1 else None
            fp = fre.offsets[2] if len(fre.offsets) > 2 else None
        return ("fp" if fre.base_fp else "sp", cfa, fp, ra)


def _need(data: bytes, pos: int, size: int, what: str) -> None:
    if pos < 0 or pos + size > len(data):
        raise DecodeError(max(pos, 0), f"{what} runs past the end of the section "
                                       f"({len(data)} bytes)")


def decode(data: bytes, section_address: int = 0) -> DecodedSection:
    """Decode an SFrame section placed at ``section_address``."""
    _need(data, 0, HEADER_SIZE, "SFrame header")
    if int.from_bytes(data[:2], "little") == MAGIC:
        big = False
    elif int.from_bytes(data[:2], "big") == MAGIC:
        big = True
    else:
        raise DecodeError(0, f"bad magic {data[0]:02x}{data[1]:02x} (not an SFrame section)")
    (_, version, flags, abi, fixed_fp, fixed_ra, auxhdr_len, num_fdes, num_fres, fre_len,
     fdeoff, freoff) = header_struct(big).unpack_from(data, 0)
    if version not in (VERSION_1, VERSION_2):
        raise DecodeError(2, f"unsupported SFrame version {version}")
    if flags & ~VALID_FLAGS[version]:
        raise DecodeError(3, f"unknown flags {flags & ~VALID_FLAGS[version]:#x} for "
                             f"version {version}")
    if abi not in ABI_NAMES:
        raise DecodeError(4, f"unknown ABI/arch identifier {abi}")
    if (abi in (ABI_AARCH64_BIG, 4)) != big:
        raise DecodeError(0, f"byte order does not match the ABI ({ABI_NAMES[abi]})")
    base = HEADER_SIZE + auxhdr_len
    _need(data, HEADER_SIZE, auxhdr_len, "auxiliary header")
    fde = fde_struct(version, big)
    fde_size = FDE_SIZE[version]
    fde_start = base + fdeoff
    fre_start = base + freoff
    _need(data, fde_start, num_fdes * fde_size, f"FDE table ({num_fdes} FDEs)")
    _need(data, fre_start, fre_len, f"FRE sub-section ({fre_len} bytes)")
    order = ">" if big else "<"
    fdes = []
    total = 0
    for index in range(num_fdes):
        pos = fde_start + index * fde_size
        fields = fde.unpack_from(data, pos)
        raw_start, size, start_fre_off, count, info = fields[:5]
        rep_size = fields[5] if version == VERSION_2 else 0
        if info & 0xF not in FRE_ADDR_SIZE:
            raise DecodeError(pos + 16, f"FDE {index}: unknown FRE type {info & 0xF}")
        if info & 0xC0:
            raise DecodeError(pos + 16, f"FDE {index}: unused info bits set ({info:#04x})")
        fres = _decode_fres(data, fre_start, fre_len, start_fre_off, count, info & 0xF, order,
                            index)
        total += count
        address = section_address + raw_start
        if flags & F_FDE_FUNC_START_PCREL:
            address += pos
        fdes.append(DecodedFde(index, address, raw_start, size, start_fre_off, info, rep_size,
                               fres))
    if total != num_fres:
        raise DecodeError(12, f"header says {num_fres} FREs but the FDEs hold {total}")
    return DecodedSection(version, flags, abi, fixed_fp, fixed_ra, auxhdr_len, num_fres,
                          fre_len, fdeoff, freoff, big, tuple(fdes))


def _decode_fres(data: bytes, fre_start: int, fre_len: int, offset: int, count: int,
                 fre_type: int, order: str, index: int) -> tuple[DecodedFre, ...]:
    end = fre_start + fre_len
    pos = fre_start + offset
    if count and not fre_start <= pos < end:
        raise DecodeError(pos, f"FDE {index}: first FRE offset {offset:#x} is outside the "
                               f"FRE sub-section ({fre_len} bytes)")
    addr_size = FRE_ADDR_SIZE[fre_type]
    start_fmt = order + {1: "B", 2: "H", 4: "I"}[addr_size]
    fres = []
    for _ in range(count):
        if pos + addr_size + 1 > end:
            raise DecodeError(pos, f"FDE {index}: FRE runs past the FRE sub-section")
        (start,) = struct.unpack_from(start_fmt, data, pos)
        info = data[pos + addr_size]
        size_code = (info >> 5) & 3
        if size_code not in OFFSET_SIZE:
            raise DecodeError(pos + addr_size, f"FDE {index}: invalid offset size code 3")
        n = (info >> 1) & 0xF
        width = OFFSET_SIZE[size_code]
        body = pos + addr_size + 1
        if body + n * width > end:
            raise DecodeError(pos, f"FDE {index}: FRE offsets run past the FRE sub-section")
        fmt = order + {1: "b", 2: "h", 4: "i"}[width] * n
        offsets = struct.unpack_from(fmt, data, body)
        fres.append(DecodedFre(start, (info & 1) == BASE_REG_FP, tuple(offsets),
                               bool(info & 0x80), size_code))
        pos = body + n * width
    return tuple(fres)
