"""The structural self-check of a section we wrote, before any output holds it: a bug
of the writer (an FRE copied short or long, an offset off by one) would otherwise be
written with exit status 0, since no reader runs on that path.

``section_problem`` is the reference: the first rule the section breaks, in words, or
None.  It is strict about our own layout (FDE table right after the header, FRE
sub-section right after it, only the zero padding of ``SectionImage.align`` after
that), not only what the spec allows.  ``_core.sframe_check`` runs the same rules
in one pass (libLLVM-14's 95k FDEs and 861k FREs: 21M instructions) and answers only
True; where it does not, this module's loop says what is wrong.  Both read the
section with ``format``'s layouts, not through ``decode``, which an ELF file's
conversion does not import (5 ms).  ``check_written`` turns a problem into an
internal error: the bytes are ours, never the input's."""

from __future__ import annotations

from functools import lru_cache
from types import ModuleType

from ..arch import by_sframe_abi, is_sframe_abi
from ..core import compiled as compiled_core
from ..errors import InternalError
from . import format as fmt  # (the layouts and numbers, by name: fmt.HEADER)
from .words import (
    FDE_INFO_FRE_TYPE,
    FDE_INFO_PC_MASK,
    FDE_INFO_UNUSED,
    FDE_TYPE_FLEX,
    FDE_TYPE_MASK,
    FRE_INFO_BASE,
    FRE_INFO_SIZE,
    FRE_INFO_WORDS,
    fde_type,
    fre_info_fields,
)

_COMPILED = compiled_core()
# The most zero bytes ``SectionImage.padding`` puts after the FREs (s390x: to 8).
MAX_PADDING = 7
# ``_core.sframe_check``'s masks: the FDE info bits, V3's FDE type and attribute size,
# each FRE type's start size; the FRE info byte's fields (``words``) and each word
# size code's width (0: invalid), so that no table of 256 is built per run.
_MASKS = (FDE_INFO_FRE_TYPE, FDE_INFO_PC_MASK, FDE_TYPE_MASK, FDE_TYPE_FLEX, fmt.V3_ATTR.size,
          tuple(fmt.FRE_ADDR_SIZE.get(fre_type, 0) for fre_type in range(16)),
          FRE_INFO_BASE, fmt.BASE_REG_FP, *FRE_INFO_WORDS, *FRE_INFO_SIZE,
          tuple(fmt.OFFSET_SIZE.get(code, 0) for code in range(FRE_INFO_SIZE[1] + 1)))


def check_written(where: str, data: bytes, section_address: int = 0,
                  compiled: ModuleType | None = _COMPILED) -> None:
    """Raise ``InternalError`` where the section ``data`` we wrote (placed at
    ``section_address``) breaks a rule of ``section_problem``.  Its starts are read as
    ``SectionImage.to_bytes`` writes them, each relative to its field: V1 and V2 without
    the PC-relative flag too (an object's PC32 relocations make them so; read as
    absolute, two functions closer than an FDE entry looked out of order)."""
    problem = section_problem(data, section_address, compiled, v1_pcrel=True)
    if problem is not None:
        raise InternalError(where, f"the .sframe section we wrote is unsound: {problem}")


def section_problem(data: bytes, section_address: int = 0,
                    compiled: ModuleType | None = _COMPILED, v1_pcrel: bool = False
                    ) -> str | None:
    """The first structural rule ``data`` breaks, in words, or None; ``compiled``: the
    compiled core's one pass over the FDEs first (None: the reference alone);
    ``v1_pcrel``: V1 and unflagged V2 starts are relative to their field, as
    ``decode``'s."""
    header = _header_problem(data)
    if isinstance(header, str):
        return f"header: {header}"
    if compiled is not None and compiled_sound(data, section_address, compiled, header,
                                               v1_pcrel):
        return None
    return _fde_problem(data, header, section_address, v1_pcrel)


def compiled_sound(data: bytes, section_address: int, compiled: ModuleType,
                   header: tuple[int, int, bool, int, int, int, int, int] | None = None,
                   v1_pcrel: bool = False) -> bool:
    """``_core.sframe_check``'s verdict alone (its differential test's side): True where
    the header (``header``: read already) and the compiled pass find the section
    sound."""
    if header is None:
        read = _header_problem(data)
        if isinstance(read, str):
            return False
        header = read
    version, flags, big, count, num_fres, fde_start, fre_start, fre_end = header
    return compiled.sframe_check(
        data, fde_start=fde_start, count=count, entry=fmt.FDE_LAYOUT[version].size,
        fre_start=fre_start, fre_end=fre_end, version=version, big=big,
        pcrel=fmt.starts_pcrel(version, flags, v1_pcrel), address=section_address,
        sorted=bool(flags & fmt.F_FDE_SORTED), num_fres=num_fres,
        unused=FDE_INFO_UNUSED[version], masks=_MASKS) is True


def _header_problem(data: bytes) -> str | tuple[int, int, bool, int, int, int, int, int]:
    """The header's fields (version, flags, byte order, FDE and FRE counts, where the FDE
    table, the FRE sub-section and it end), or its first broken rule: a magic, version,
    flags and ABI the format defines, the FDE table right after the header, the FRE
    sub-section right after it, then only ``SectionImage``'s zero padding."""
    if len(data) < fmt.HEADER_SIZE:
        return f"{len(data)} bytes, shorter than a header"
    magic = data[0] | data[1] << 8
    big = magic != fmt.MAGIC
    if big and magic != (fmt.MAGIC >> 8 | (fmt.MAGIC & 0xFF) << 8):
        return f"bad magic {magic:#06x}"
    (_, version, flags, abi, _, _, auxhdr_len, count, num_fres, fre_len, fdeoff,
     freoff) = fmt.HEADER.of(not big).unpack_from(data, 0)
    if version not in fmt.VALID_FLAGS or flags & ~fmt.VALID_FLAGS[version]:
        return f"version {version} with flags {flags:#x}"
    if not is_sframe_abi(abi) or by_sframe_abi(abi).big_endian != big:
        return f"ABI {abi} in the {'big' if big else 'little'}-endian byte order"
    fde_start = fmt.HEADER_SIZE + auxhdr_len + fdeoff
    fre_start = fmt.HEADER_SIZE + auxhdr_len + freoff
    fde_end = fde_start + count * fmt.FDE_LAYOUT[version].size
    if fdeoff:
        return f"the FDE table at offset {fdeoff:#x}, not right after the header"
    if fre_start != fde_end:
        return f"the FRE sub-section at {fre_start:#x}, not at the FDE table's end " \
               f"({fde_end:#x})"
    tail = len(data) - fre_start - fre_len
    if not 0 <= tail <= MAX_PADDING or any(data[fre_start + fre_len:]):
        return f"{len(data)} bytes, not the FRE sub-section's end ({fre_start + fre_len:#x}) " \
               "and its zero padding"
    return version, flags, big, count, num_fres, fde_start, fre_start, fre_start + fre_len


def _fde_problem(data: bytes, header: tuple[int, int, bool, int, int, int, int, int],
                 address: int, v1_pcrel: bool) -> str | None:
    """The reference's rules of the FDEs and their FREs, the header's holding (read by
    the layouts of ``format``, not by ``decode``, whose import an ELF file's conversion
    does without)."""
    version, flags, big, count, num_fres, fde_start, fre_start, fre_end = header
    layout, attrs = fmt.FDE_LAYOUT[version].of(not big), fmt.V3_ATTR.of(not big)
    pcrel, is_sorted = fmt.starts_pcrel(version, flags, v1_pcrel), flags & fmt.F_FDE_SORTED
    extents: list[tuple[int, int, int]] = []
    last = None
    total = 0
    for index in range(count):
        pos = fde_start + index * layout.size
        flex = False
        if version == fmt.VERSION_3:
            raw_start, size, fre_off = layout.unpack_from(data, pos)
            first = fre_start + fre_off
            if first + attrs.size > fre_end:
                return f"FDE {index}: its attribute at {first:#x} runs past the FRE sub-section"
            fres, info, info2, rep = attrs.unpack_from(data, first)
            if fde_type(info2) > FDE_TYPE_FLEX or info2 & ~FDE_TYPE_MASK:
                return f"FDE {index}: unknown FDE type byte {info2:#04x}"
            flex, at = fde_type(info2) == FDE_TYPE_FLEX, first + attrs.size
        else:
            raw_start, size, fre_off, fres, info, *rest = layout.unpack_from(data, pos)
            rep = rest[0] if rest else 0  # (V1 has none: its PC-mask FREs are in the size)
            first = at = fre_start + fre_off
            if fres and not first < fre_end:
                return f"FDE {index}: its first FRE at {first:#x} is past the FRE sub-section"
        if info & FDE_INFO_UNUSED[version] or info & FDE_INFO_FRE_TYPE not in fmt.FRE_ADDR_SIZE:
            return f"FDE {index}: info byte {info:#04x}"
        pc_mask = info & FDE_INFO_PC_MASK and version != fmt.VERSION_1
        if pc_mask and not rep:
            return f"FDE {index}: a PC-mask FDE with a repeat size of 0"
        start = address + raw_start + (pos if pcrel else 0)
        if is_sorted and last is not None and start < last:
            return f"FDE {index} starts at {start:#x}, before FDE {index - 1} ({last:#x}), " \
                   "in a table flagged sorted"
        last = start
        problem = _fre_problem(data, at, fres, fmt.FRE_ADDR_SIZE[info & FDE_INFO_FRE_TYPE], big,
                               flex, rep if pc_mask else size, fre_end)
        if isinstance(problem, str):
            what = "repeat block" if pc_mask else "function"
            return f"FDE {index}: {problem.replace('its bound', f'its {what}')}"
        total += fres
        if problem > first:  # (a V1 or V2 FDE without FREs holds no byte)
            extents.append((first, problem, index))
    if total != num_fres:
        return f"the header says {num_fres} FREs but the FDEs hold {total}"
    at = fre_start
    for first, end, index in sorted(extents):
        if first != at:
            what = "overlaps the one before" if first < at else f"leaves {first - at} " \
                                                                 "stray byte(s) before it"
            return f"FDE {index}: its FREs at {first:#x} {what}"
        at = end
    if at != fre_end:
        return f"{fre_end - at} stray byte(s) at the FRE sub-section's end"
    return None


def _fre_problem(data: bytes, at: int, count: int, addr_size: int, big: bool, flex: bool,
                 bound: int, fre_end: int) -> str | int:
    """Where ``count`` FREs from ``at`` end, or the first one's problem."""
    head = fmt.FRE_HEAD[addr_size].of(not big)
    lengths = _lengths(addr_size, flex)
    for number in range(count):
        if at + head.size > fre_end:
            return f"FRE {number} at {at:#x} runs past the FRE sub-section"
        start, info = head.unpack_from(data, at)
        if not lengths[info]:
            return f"FRE {number} at {at:#x}: info byte {info:#04x}"
        at += lengths[info]
        if at > fre_end:
            return f"FRE {number}'s words run past the FRE sub-section"
        if start >= bound:
            return f"FRE {number} starts at {start:#x}, past its bound ({bound:#x} bytes)"
    return at


@lru_cache(maxsize=8)
def _lengths(addr_size: int, flex: bool) -> tuple[int, ...]:
    """Each info byte's FRE length with ``addr_size``-byte starts (``flex``: in a FLEX
    FDE), 0 where it is invalid there (``words.fre_info_fields``, once per byte)."""
    out = []
    for info in range(256):
        base_reg, words, size_code, _ = fre_info_fields(info)
        valid = size_code in fmt.OFFSET_SIZE and not (flex and base_reg != fmt.BASE_REG_FP)
        out.append(addr_size + 1 + words * fmt.OFFSET_SIZE[size_code] if valid else 0)
    return tuple(out)
