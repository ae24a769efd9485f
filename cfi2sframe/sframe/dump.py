"""Text dump of an SFrame section, column for column as binutils' readelf prints it.

V2 and V3 follow readelf of binutils 2.46 (libsframe's dumper); V1 follows
readelf of binutils 2.40, the last one that reads V1 (its header shows no
fixed offsets and its RA column shows ``u`` for AMD64).  Trailing spaces are
part of the format.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

from ..arch import by_sframe_abi
from ..errors import DecodeError
from .decode import FRE_TABLE, V3_ATTR_SIZE, DecodedFde, DecodedFre, DecodedSection, FdeTable
from .format import (
    BASE_REG_FP,
    F_FDE_FUNC_START_PCREL,
    F_FDE_SORTED,
    F_FRAME_POINTER,
    FRE_ADDR_SIZE,
    VERSION_1,
    VERSION_2,
    cfa_offset,
)
from .words import (
    FDE_INFO_FRE_TYPE,
    FDE_INFO_PAUTH_B_KEY,
    FDE_INFO_PC_MASK,
    FDE_INFO_SIGNAL,
    FDE_INFO_UNUSED,
    FDE_TYPE_FLEX,
    FDE_TYPE_MASK,
    FLEX_PADDING,
    flex_control_fields,
    fre_info_fields,
    s390x_word_reg,
)

# (FLEX FDE, FRE info byte, data words) -> the CFA, FP and RA columns.
_Columns = dict[tuple[bool, int, tuple[int, ...]], str]


def dump_text(section: DecodedSection, name: str = ".sframe") -> str:
    """The whole ``readelf --sframe`` text for one section."""
    return "".join(dump_chunks(section, name))


def dump_chunks(section: DecodedSection, name: str = ".sframe") -> Iterator[str]:
    """``dump_text`` a function at a time, for writing as it is made: a large
    library's dump is some 100 MB of text, never held whole."""
    yield _title(section, name, len(section.fdes))
    # An FRE's columns depend on its words and bits, not on where it starts: libraries
    # repeat a few thousand shapes over a million FREs, so each is written once.
    columns: _Columns = {}
    aarch64 = by_sframe_abi(section.abi).name.startswith("aarch64")
    for fde in section.fdes:
        yield _function(section, fde, columns, aarch64)


def compiled_chunks(data: bytes, section_address: int = 0, v1_pcrel: bool = False,
                    name: str = ".sframe", compiled: ModuleType | None = None,
                    batch: int = 8192) -> Iterator[str] | None:
    """``dump_chunks`` of what ``decode(data, section_address, v1_pcrel)`` gives, made
    by the compiled core (``_core.sframe_dump``: every FDE and FRE read and checked
    before the first line, then ``batch`` FDEs at a time written) without an object
    per FDE or FRE; None without the core or where ``decode`` would raise (it then
    says where)."""
    if compiled is None:
        return None
    try:
        table = FdeTable(data, section_address, v1_pcrel)
    except DecodeError:
        return None
    version, _, abi, *_, big = table.header
    section = table.section([])
    arch = by_sframe_abi(abi)

    def columns_of(flex: bool, info: int, words: tuple[int, ...]) -> str:
        base_reg, _, size_code, mangled = fre_info_fields(info)
        return _columns(section, flex, DecodedFre(0, base_reg == BASE_REG_FP, words, mangled,
                                                  size_code, info))

    masks = (FDE_INFO_FRE_TYPE, FDE_INFO_PC_MASK, FDE_INFO_PAUTH_B_KEY, FDE_INFO_SIGNAL,
             FDE_INFO_UNUSED[version], FDE_TYPE_MASK, FDE_TYPE_FLEX, V3_ATTR_SIZE,
             tuple(FRE_ADDR_SIZE.get(fre_type, 0) for fre_type in range(16)))
    params = {"fde_start": table.fde_start, "entry": table.entry,
              "fre_start": table.reader.fre_start, "fre_end": table.reader.fre_end,
              "version": version, "big": big, "pcrel": table.pcrel, "address": table.address,
              "aarch64": arch.name.startswith("aarch64"), "masks": masks,
              "fre_table": FRE_TABLE, "columns_of": columns_of,
              "heads": (_heading(False), _heading(True))}
    if compiled.sframe_dump(data, 0, table.count, text=False, **params) != table.num_fres:
        return None  # a malformed FDE or FRE, or the header's FRE total wrong

    def chunks() -> Iterator[str]:
        yield _title(section, name, table.count)
        for first in range(0, table.count, batch):
            text: str = compiled.sframe_dump(data, first, min(first + batch, table.count),
                                             text=True, **params)
            yield text

    return chunks()


def _title(section: DecodedSection, name: str, fde_count: int) -> str:
    return (f"Contents of the SFrame section {name}:" + _header(section, fde_count) +
            "\n  Function Index :\n")


def _heading(pc_mask: bool) -> str:
    """The line above a function's FREs (``[m]``: PC-mask FREs)."""
    marker = "[m]" if pc_mask else "   "
    return f"\n    {'STARTPC':<7}{marker:<8} {'CFA':<10}{'FP':<10}{'RA':<13}"


def _header(section: DecodedSection, fde_count: int) -> str:
    lines = ["\n  Header :\n\n"]
    version = f"SFRAME_VERSION_{section.version}" if section.version <= 3 else "(null)"
    lines.append(f"    Version: {version}\n")
    lines.append(_flags(section))
    if section.version != VERSION_1:
        if section.fixed_fp_offset:
            lines.append(f"    CFA fixed FP offset: {section.fixed_fp_offset}\n")
        if section.fixed_ra_offset:
            lines.append(f"    CFA fixed RA offset: {section.fixed_ra_offset}\n")
    lines.append(f"    Num FDEs: {fde_count}\n")
    lines.append(f"    Num FREs: {section.num_fres}\n")
    return "".join(lines)


def _flags(section: DecodedSection) -> str:
    flags = section.flags
    if flags == 0:
        return "    Flags: NONE\n"
    if section.version == VERSION_1:
        # readelf 2.40 copies one name over the other: the last set flag wins.
        if flags & F_FRAME_POINTER:
            return "    Flags: SFRAME_F_FRAME_POINTER\n"
        return "    Flags: SFRAME_F_FDE_SORTED\n" if flags & F_FDE_SORTED else "    Flags: \n"
    names = []
    if flags & F_FDE_SORTED:
        names.append("SFRAME_F_FDE_SORTED")
    if section.version == VERSION_2 and flags & F_FRAME_POINTER:
        names.append("SFRAME_F_FRAME_POINTER")
    if flags & F_FDE_FUNC_START_PCREL:
        names.append("SFRAME_F_FDE_FUNC_START_PCREL")
    lines = []
    for i, flag in enumerate(names):
        prefix = "Flags: " if i == 0 else " "
        lines.append(f"{prefix:>11}{flag}{',' if i + 1 < len(names) else ''}\n")
    return "".join(lines)


def _function(section: DecodedSection, fde: DecodedFde, columns: _Columns,
              aarch64: bool) -> str:
    head = f"\n    func idx [{fde.index}]: pc = {fde.start_address:#x}, size = {fde.size} bytes"
    flex = fde.flex
    if section.version >= 3:
        attr = ("S" if fde.signal else "") + ("F" if flex else "")
        if attr:
            head += f', attr = "{attr}"'
    if aarch64 and fde.pauth_b_key:
        head += ", pauth = B key"
    lines = [head, _heading(fde.pc_mask)]
    base = 0 if fde.pc_mask else fde.start_address
    get = columns.get
    for fre in fde.fres:
        # The info byte holds the base register bit, the RA-mangled bit and the word
        # size: with the words and the FDE type it decides the columns.
        key = (flex, fre.info, fre.offsets)
        text = get(key)
        if text is None:
            text = columns[key] = _columns(section, flex, fre)
        lines.append(f"\n    {(base + fre.start) & 0xFFFFFFFFFFFFFFFF:016x}  {text}")
    lines.append("\n")
    return "".join(lines)


def _columns(section: DecodedSection, flex: bool, fre: DecodedFre) -> str:
    """The CFA, FP and RA columns of one FRE (of a FLEX FDE or not)."""
    if not fre.offsets and section.version != VERSION_1:
        return "RA undefined"
    cfa, fp, ra = (_flex_cells if flex else _default_cells)(section, fre)
    ra += "[s]" if fre.mangled_ra else "   "
    return f"{cfa:<10}{fp:<10}{ra:<13}"


def _default_cells(section: DecodedSection, fre: DecodedFre) -> tuple[str, str, str]:
    words = fre.offsets
    arch = by_sframe_abi(section.abi)
    cfa = f"{'fp' if fre.base_fp else 'sp'}+{cfa_offset(words[0] if words else 0, arch)}"
    amd64 = not arch.tracks_ra  # FP in the second word, RA at the fixed offset
    fp_word = (words[1] if len(words) > 1 else None) if amd64 else (
        words[2] if len(words) > 2 else None)
    ra_word = None if amd64 else (words[1] if len(words) > 1 else None)
    reg_encoded = arch.sframe_register_words and section.version == VERSION_2
    fp = "u" if fp_word is None else _slot(fp_word, reg_encoded)
    if section.version == VERSION_1:
        ra = "u" if ra_word is None else f"c{ra_word:+d}"
    elif section.fixed_ra_offset:
        ra = "f"
    elif ra_word is not None and ra_word == 0 and arch.sframe_ra_padding:
        ra = "U"
    elif ra_word is not None:
        ra = _slot(ra_word, reg_encoded)
    else:
        ra = "u"
    return cfa, fp, ra


def _slot(word: int, reg_encoded: bool) -> str:
    reg = s390x_word_reg(word) if reg_encoded else None
    return f"r{reg}" if reg is not None else f"c{word:+d}"


def _flex_cells(section: DecodedSection, fre: DecodedFre) -> tuple[str, str, str]:
    words = fre.offsets
    arch = by_sframe_abi(section.abi)
    names = {arch.sp: "sp", arch.fp: "fp"}  # readelf's names; others are rN

    def cell(i: int, is_cfa: bool = False) -> str:
        reg, deref = flex_control_fields(fre.unsigned(i))
        offset = words[i + 1] if i + 1 < len(words) else 0
        if is_cfa:
            offset = cfa_offset(offset, arch)
        if reg is None:
            return f"c{offset:+d}"
        text = f"{names.get(reg, f'r{reg}')}{offset:+d}"
        return f"({text})" if deref else text

    cfa = cell(0, True)
    i = 2
    if i >= len(words):
        ra = "f" if section.fixed_ra_offset else "u"
    elif fre.unsigned(i) == FLEX_PADDING:
        ra = "U"
        i += 1
    else:
        ra = cell(i)
        i += 2
    fp = cell(i) if i < len(words) else "u"
    return cfa, fp, ra
