"""The DW_CFA opcode table (DWARF 5 section 6.4.2, GNU and AArch64 extensions): the
one place their numbers are written.  The decoder, the fast path and the tests name
opcodes from here."""

from __future__ import annotations

from enum import IntEnum


class CFA(IntEnum):
    """DW_CFA_* opcodes.  The three "primary" ones carry an operand in their low six
    bits: compare ``byte & HIGH_MASK`` with them."""

    advance_loc = 0x40
    offset = 0x80
    restore = 0xC0
    nop = 0x00
    set_loc = 0x01
    advance_loc1 = 0x02
    advance_loc2 = 0x03
    advance_loc4 = 0x04
    offset_extended = 0x05
    restore_extended = 0x06
    undefined = 0x07
    same_value = 0x08
    register = 0x09
    remember_state = 0x0A
    restore_state = 0x0B
    def_cfa = 0x0C
    def_cfa_register = 0x0D
    def_cfa_offset = 0x0E
    def_cfa_expression = 0x0F
    expression = 0x10
    offset_extended_sf = 0x11
    def_cfa_sf = 0x12
    def_cfa_offset_sf = 0x13
    val_offset = 0x14
    val_offset_sf = 0x15
    val_expression = 0x16
    MIPS_advance_loc8 = 0x1D
    AARCH64_negate_ra_state_with_pc = 0x2C
    AARCH64_negate_ra_state = 0x2D  # also DW_CFA_GNU_window_save (SPARC)
    GNU_args_size = 0x2E
    GNU_negative_offset_extended = 0x2F


# The advance operations with a fixed-size delta operand, and its size in bytes.
ADVANCE_SIZES: dict[int, int] = {CFA.advance_loc1: 1, CFA.advance_loc2: 2,
                                 CFA.advance_loc4: 4, CFA.MIPS_advance_loc8: 8}

HIGH_MASK = 0xC0  # the primary opcode of a byte
LOW_MASK = 0x3F  # its operand (a register or a delta)
