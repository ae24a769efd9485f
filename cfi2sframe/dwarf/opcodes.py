"""The DW_CFA opcode table (DWARF 5 section 6.4.2, GNU and AArch64 extensions): the
one place in Python their numbers are written.  The decoder, the fast path and the
tests name opcodes from here; the compiled core repeats those it reads
(``csrc/dwarf_replay.c``), exported as ``_core.OPCODES`` and held equal to these by
``tests/differential/test_core.py``."""

from __future__ import annotations

TYPE_CHECKING = False  # (not ``typing``: type checkers take any name TYPE_CHECKING as true)
if TYPE_CHECKING:
    from typing import Final


class _Numbers:
    """A table of named numbers, each a constant ``int`` class attribute: what an
    ``IntEnum`` gave these tables, without a member object made for each (the three
    ``IntEnum`` classes cost ~7M instructions, 2-3 ms, at every start that reads
    CFI); ``numbers()`` lists them, as the enum's members did."""

    @classmethod
    def numbers(cls) -> dict[str, int]:
        """Name -> number of every entry, in the order written."""
        return {name: value for name, value in vars(cls).items() if type(value) is int}


class CFA(_Numbers):
    """DW_CFA_* opcodes.  The three "primary" ones carry an operand in their low six
    bits: compare ``byte & HIGH_MASK`` with them."""

    advance_loc: Final = 0x40
    offset: Final = 0x80
    restore: Final = 0xC0
    nop: Final = 0x00
    set_loc: Final = 0x01
    advance_loc1: Final = 0x02
    advance_loc2: Final = 0x03
    advance_loc4: Final = 0x04
    offset_extended: Final = 0x05
    restore_extended: Final = 0x06
    undefined: Final = 0x07
    same_value: Final = 0x08
    register: Final = 0x09
    remember_state: Final = 0x0A
    restore_state: Final = 0x0B
    def_cfa: Final = 0x0C
    def_cfa_register: Final = 0x0D
    def_cfa_offset: Final = 0x0E
    def_cfa_expression: Final = 0x0F
    expression: Final = 0x10
    offset_extended_sf: Final = 0x11
    def_cfa_sf: Final = 0x12
    def_cfa_offset_sf: Final = 0x13
    val_offset: Final = 0x14
    val_offset_sf: Final = 0x15
    val_expression: Final = 0x16
    MIPS_advance_loc8: Final = 0x1D
    AARCH64_negate_ra_state_with_pc: Final = 0x2C
    AARCH64_negate_ra_state: Final = 0x2D  # also DW_CFA_GNU_window_save (SPARC)
    GNU_args_size: Final = 0x2E
    GNU_negative_offset_extended: Final = 0x2F


# The advance operations with a fixed-size delta operand, and its size in bytes.
ADVANCE_SIZES: dict[int, int] = {CFA.advance_loc1: 1, CFA.advance_loc2: 2,
                                 CFA.advance_loc4: 4, CFA.MIPS_advance_loc8: 8}

HIGH_MASK = 0xC0  # the primary opcode of a byte
LOW_MASK = 0x3F  # its operand (a register or a delta)


class OP(_Numbers):
    """The DW_OP_* operations (DWARF 5 section 2.5) the expression evaluator and the
    location readers and writers use."""

    addr: Final = 0x03
    deref: Final = 0x06
    const1u: Final = 0x08
    const1s: Final = 0x09
    const2u: Final = 0x0A
    const2s: Final = 0x0B
    const4u: Final = 0x0C
    const4s: Final = 0x0D
    const8u: Final = 0x0E
    const8s: Final = 0x0F
    constu: Final = 0x10
    consts: Final = 0x11
    dup: Final = 0x12
    drop: Final = 0x13
    over: Final = 0x14
    pick: Final = 0x15
    swap: Final = 0x16
    and_: Final = 0x1A
    minus: Final = 0x1C
    mul: Final = 0x1E
    neg: Final = 0x1F
    not_: Final = 0x20
    or_: Final = 0x21
    plus: Final = 0x22
    plus_uconst: Final = 0x23
    shl: Final = 0x24
    shr: Final = 0x25
    shra: Final = 0x26
    xor: Final = 0x27
    bra: Final = 0x28
    eq: Final = 0x29
    ge: Final = 0x2A
    gt: Final = 0x2B
    le: Final = 0x2C
    lt: Final = 0x2D
    ne: Final = 0x2E
    skip: Final = 0x2F
    lit0: Final = 0x30
    lit31: Final = 0x4F
    breg0: Final = 0x70
    breg31: Final = 0x8F
    bregx: Final = 0x92
    nop: Final = 0x96


class EH_PE(_Numbers):
    """DW_EH_PE_* pointer encodings of ``.eh_frame`` (LSB 5.0, "DWARF Extensions"): the
    low four bits give the format, bits 4-6 what the value is relative to; 0xFF omits
    the pointer."""

    absptr: Final = 0x00
    uleb128: Final = 0x01
    udata2: Final = 0x02
    udata4: Final = 0x03
    udata8: Final = 0x04
    sleb128: Final = 0x09
    sdata2: Final = 0x0A
    sdata4: Final = 0x0B
    sdata8: Final = 0x0C
    pcrel: Final = 0x10
    indirect: Final = 0x80
    omit: Final = 0xFF


EH_PE_FORMAT = 0x0F  # the value's format, of a pointer encoding
EH_PE_APPLICATION = 0x70  # what it is relative to
