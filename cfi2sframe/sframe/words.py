"""Every packed SFrame word's bit layout, as named encode/decode pairs.

The spec's ``sframe.h`` in Python: the encoder, the reader, the lowering and the dump
all pack and unpack these words here, so a bit moves in one place only.  Bit numbers
are from the SFrame V2 (errata 1) and V3 specs, least significant bit first.
"""

from __future__ import annotations

from ..typed import NamedTuple

# -- FDE info byte (V1, V2, V3) ---------------------------------------------------------
# bits 0-3: FRE start-address type; bit 4: FDE type (1: PC-mask); bit 5: PAuth key
# (1: B key; AArch64); bit 6: unused; bit 7: V3 signal frame, unused before V3.

FDE_INFO_FRE_TYPE = 0x0F
FDE_INFO_PC_MASK = 0x10
FDE_INFO_PAUTH_B_KEY = 0x20
FDE_INFO_SIGNAL = 0x80
FDE_INFO_UNUSED = {1: 0xC0, 2: 0xC0, 3: 0x40}  # by version


def fde_info(fre_type: int, pc_mask: bool, pauth_b_key: bool, signal: bool = False) -> int:
    """The FDE info byte."""
    return (fre_type | int(pc_mask) << 4 | int(pauth_b_key) << 5 | int(signal) << 7)


# -- V3 FDE type byte (``sfda_func_info2``) ------------------------------------------------
# bits 0-4: FDE type (0 default, 1 FLEX); bits 5-7 unused.

FDE_TYPE_MASK = 0x1F
FDE_TYPE_DEFAULT, FDE_TYPE_FLEX = 0, 1


def fde_type(info2: int) -> int:
    """The FDE type a V3 ``info2`` byte holds."""
    return info2 & FDE_TYPE_MASK


# -- FRE info byte -----------------------------------------------------------------------
# bit 0: CFA base register (BASE_REG_FP 0, BASE_REG_SP 1; must be 0 in a FLEX FDE);
# bits 1-4: number of data words; bits 5-6: data word size code; bit 7: RA mangled.

FRE_INFO_BASE = 0x01
# (shift, mask) of the data word count and of the word size code
FRE_INFO_WORDS = (1, 0xF)
FRE_INFO_SIZE = (5, 3)


class FreInfo(NamedTuple):
    base_reg: int
    word_count: int
    size_code: int
    mangled_ra: bool


def fre_info(base_reg: int, word_count: int, size_code: int, mangled_ra: bool) -> int:
    """The FRE info byte."""
    return (base_reg | word_count << FRE_INFO_WORDS[0] | size_code << FRE_INFO_SIZE[0]
            | int(mangled_ra) << 7)


def fre_info_fields(info: int) -> FreInfo:
    """The fields of an FRE info byte (the inverse of ``fre_info``)."""
    return FreInfo(info & FRE_INFO_BASE, (info >> FRE_INFO_WORDS[0]) & FRE_INFO_WORDS[1],
                   (info >> FRE_INFO_SIZE[0]) & FRE_INFO_SIZE[1], bool(info & 0x80))


# -- V3 FLEX control data word -----------------------------------------------------------
# bit 0: reg_p (the base is a register, else the CFA); bit 1: deref_p (the value is
# loaded from base + offset); bit 2: unused; bits 3 and up: the DWARF register number.
# 0 is the padding word: no rule for that entity.

FLEX_PADDING = 0


def flex_control(reg: int | None, deref: bool) -> int:
    """The control word of a FLEX pair: ``reg`` None means the base is the CFA."""
    if reg is None:
        return int(deref) << 1
    return reg << 3 | int(deref) << 1 | 1


def flex_control_fields(ctrl: int) -> tuple[int | None, bool]:
    """(register or None for the CFA, deref) of a FLEX control word."""
    return (ctrl >> 3 if ctrl & 1 else None), bool(ctrl & 2)


# -- s390x V2 register word --------------------------------------------------------------
# An RA or FP data word that is odd names the register holding the value:
# ``reg << 1 | 1``; an even word is a CFA offset (stack slots are 8-byte aligned).

def s390x_reg_word(reg: int) -> int:
    """The data word for "the value is in register ``reg``" (s390x V2)."""
    return reg << 1 | 1


def s390x_word_reg(word: int) -> int | None:
    """The register an s390x V2 data word names, or None when it is a CFA offset."""
    return word >> 1 if word & 1 else None
