"""The DW_CFA opcode table (DWARF 5 section 6.4.2, GNU and AArch64 extensions): the
one place in Python their numbers are written.  The decoder, the fast path and the
tests name opcodes from here; the compiled core repeats those it reads
(``csrc/dwarf_replay.c``), exported as ``_core.OPCODES`` and held equal to these by
``tests/differential/test_core.py``."""

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


class OP(IntEnum):
    """The DW_OP_* operations (DWARF 5 section 2.5) the expression evaluator and the
    location readers and writers use."""

    addr = 0x03
    deref = 0x06
    const1u = 0x08
    const1s = 0x09
    const2u = 0x0A
    const2s = 0x0B
    const4u = 0x0C
    const4s = 0x0D
    const8u = 0x0E
    const8s = 0x0F
    constu = 0x10
    consts = 0x11
    dup = 0x12
    drop = 0x13
    over = 0x14
    pick = 0x15
    swap = 0x16
    and_ = 0x1A
    minus = 0x1C
    mul = 0x1E
    neg = 0x1F
    not_ = 0x20
    or_ = 0x21
    plus = 0x22
    plus_uconst = 0x23
    shl = 0x24
    shr = 0x25
    shra = 0x26
    xor = 0x27
    bra = 0x28
    eq = 0x29
    ge = 0x2A
    gt = 0x2B
    le = 0x2C
    lt = 0x2D
    ne = 0x2E
    skip = 0x2F
    lit0 = 0x30
    lit31 = 0x4F
    breg0 = 0x70
    breg31 = 0x8F
    bregx = 0x92
    nop = 0x96


class EH_PE(IntEnum):
    """DW_EH_PE_* pointer encodings of ``.eh_frame`` (LSB 5.0, "DWARF Extensions"): the
    low four bits give the format, bits 4-6 what the value is relative to; 0xFF omits
    the pointer."""

    absptr = 0x00
    uleb128 = 0x01
    udata2 = 0x02
    udata4 = 0x03
    udata8 = 0x04
    sleb128 = 0x09
    sdata2 = 0x0A
    sdata4 = 0x0B
    sdata8 = 0x0C
    pcrel = 0x10
    indirect = 0x80
    omit = 0xFF


EH_PE_FORMAT = 0x0F  # the value's format, of a pointer encoding
EH_PE_APPLICATION = 0x70  # what it is relative to
