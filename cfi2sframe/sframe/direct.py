"""The fast path for large ELF files: DWARF CFI bytes straight to default FREs.

Real libraries repeat a few shapes of CFI (push/pop sequences, a frame
pointer, args_size) tens of thousands of times.  For those shapes the general
pipeline (decode to ``Op``s, interpret to full ``Row``s, lower each row) does
work SFrame never uses: rules of callee-saved registers other than FP and RA.

``direct_fres`` runs one tight loop over the bytes that tracks only what a
default FRE holds (CFA register and offset, FP and RA save slots, the signed
RA bit) and returns exactly the FREs ``lower.lower`` would.  It answers
``None`` (the caller then takes the general path) for anything outside that
subset: set_loc, expressions or register rules for SP/FP/RA, CFA not on
SP/FP, RA not where the ABI wants it, an unknown opcode, truncated operands.
``tests/differential/test_direct.py`` checks it against the general path on
every distinct FDE body of real libraries.
"""

from __future__ import annotations

from functools import lru_cache

from ..arch.base import Arch, ByteOrder
from .format import Fre

_NO_CFA = -1
_INT32 = 1 << 31

# The state of one row: (CFA register or _NO_CFA, CFA offset, FP slot, RA slot,
# RA signed).  A slot is a CFA offset, or None when the register is not saved
# (no rule, or same_value).
_State = tuple[int, int, int | None, int | None, bool]


class _Fallback(Exception):
    """The CFI leaves the subset this module handles."""


def direct_fres(initial: bytes, body: bytes, code_align: int, data_align: int,
                arch: Arch, big_endian: bool) -> tuple[Fre, ...] | None:
    """Default FREs of a CIE's initial instructions followed by an FDE body.

    Rows are unbounded: the caller drops FREs that start at or past the
    function's size.  ``None``: use the general path.
    """
    if arch.s390x:
        return None  # encoded CFA offsets, RA padding, register words: the general path
    start = _initial_state(initial, code_align, data_align, arch, big_endian)
    if start is None:
        return None
    try:
        fres, _ = _run(body, start, start, code_align, data_align, arch, big_endian, True)
    except (_Fallback, IndexError):
        return None
    return fres


@lru_cache(maxsize=256)
def _initial_state(initial: bytes, code_align: int, data_align: int, arch: Arch,
                   big_endian: bool) -> _State | None:
    """The state after a CIE's initial instructions (advances there are ignored)."""
    empty: _State = (_NO_CFA, 0, None, None, False)
    try:
        _, state = _run(initial, empty, empty, code_align, data_align, arch, big_endian,
                        False)
    except (_Fallback, IndexError):
        return None
    return state


def _run(data: bytes, state: _State, initial: _State, code_align: int, data_align: int,
         arch: Arch, big_endian: bool, emit: bool) -> tuple[tuple[Fre, ...], _State]:
    """Replay ``data`` from ``state``; FREs at every advance when ``emit``."""
    sp, fp, ra = arch.sp, arch.fp, arch.ra
    tracks_ra = arch.tracks_ra
    fixed_ra = arch.sframe_fixed_ra_offset
    cfa_reg, cfa_off, fp_slot, ra_slot, signed = state
    order: ByteOrder = "big" if big_endian else "little"
    stack: list[_State] = []
    fres: list[Fre] = []
    last: tuple[object, ...] | None = None
    at = 0
    pos, end = 0, len(data)
    while True:
        if pos < end:
            op = data[pos]
            pos += 1
            high = op & 0xC0
            delta = 0
            if high == 0x40:
                delta = (op & 0x3F) * code_align
            elif high == 0x80:  # offset: the register saves of every prologue
                value = data[pos]
                pos += 1
                if value >= 0x80:
                    value, pos = _uleb(data, pos - 1)
                reg = op & 0x3F
                if reg == fp:
                    fp_slot = value * data_align
                elif reg == ra:
                    ra_slot = value * data_align
                elif reg == sp:
                    raise _Fallback
                continue
            elif op == 0x0E:  # def_cfa_offset: every push and pop
                if cfa_reg == _NO_CFA:
                    raise _Fallback
                cfa_off = data[pos]
                pos += 1
                if cfa_off >= 0x80:
                    cfa_off, pos = _uleb(data, pos - 1)
                continue
            elif op in (0x05, 0x11):  # offset_extended(_sf); rare, kept apart so the
                # hot DW_CFA_offset branch above stays inline
                reg, pos = _uleb(data, pos)
                if op == 0x11:
                    value, pos = _sleb(data, pos)
                else:
                    value, pos = _uleb(data, pos)
                if reg == fp:
                    fp_slot = value * data_align
                elif reg == ra:
                    ra_slot = value * data_align
                elif reg == sp:
                    raise _Fallback
                continue
            elif high == 0xC0 or op == 0x06:  # restore, restore_extended
                if high == 0xC0:
                    reg = op & 0x3F
                else:
                    reg, pos = _uleb(data, pos)
                if reg == fp:
                    fp_slot = initial[2]
                elif reg == ra:
                    ra_slot = initial[3]
                elif reg == sp:
                    raise _Fallback
                continue
            elif op == 0x0D:  # def_cfa_register
                if cfa_reg == _NO_CFA:
                    raise _Fallback
                cfa_reg, pos = _uleb(data, pos)
                continue
            elif op == 0x0C:  # def_cfa
                cfa_reg, pos = _uleb(data, pos)
                cfa_off, pos = _uleb(data, pos)
                continue
            elif op == 0x0A:  # remember_state
                stack.append((cfa_reg, cfa_off, fp_slot, ra_slot, signed))
                continue
            elif op == 0x0B:  # restore_state
                if not stack:
                    raise _Fallback
                cfa_reg, cfa_off, fp_slot, ra_slot, signed = stack.pop()
                continue
            elif op == 0x2E:  # GNU_args_size: no effect on recovery
                _, pos = _uleb(data, pos)
                continue
            elif op == 0x00:  # nop
                continue
            elif op in (0x02, 0x03, 0x04):  # advance_loc1/2/4
                size = 1 << (op - 2)
                if pos + size > end:
                    raise _Fallback
                delta = int.from_bytes(data[pos:pos + size], order) * code_align
                pos += size
            elif op in (0x07, 0x08):  # undefined, same_value
                reg, pos = _uleb(data, pos)
                if reg in (sp, ra) or (reg == fp and op == 0x07):
                    raise _Fallback
                if reg == fp:
                    fp_slot = None
                continue
            elif op == 0x09:  # register
                reg, pos = _uleb(data, pos)
                _, pos = _uleb(data, pos)
                if reg in (sp, fp, ra):
                    raise _Fallback
                continue
            elif op in (0x10, 0x16):  # expression, val_expression
                reg, pos = _uleb(data, pos)
                length, pos = _uleb(data, pos)
                pos += length
                if reg in (sp, fp, ra) or pos > end:
                    raise _Fallback
                continue
            elif op == 0x2D and tracks_ra:  # AArch64 negate_ra_state
                signed = not signed
                continue
            else:
                raise _Fallback
            if not delta or not emit:
                at += delta
                continue
        elif not emit:
            return (), (cfa_reg, cfa_off, fp_slot, ra_slot, signed)
        else:
            delta = 0
        # The row in force from ``at`` ends here: lower it as lower_row does.  A
        # valid state maps to exactly one FRE, so an unchanged state adds nothing.
        key = (cfa_reg, cfa_off, fp_slot, ra_slot, signed)
        if key != last:
            if cfa_reg != sp and cfa_reg != fp:
                raise _Fallback
            if tracks_ra:
                ra_word = ra_slot
                if fp_slot is not None and ra_word is None:
                    raise _Fallback
            elif ra_slot != fixed_ra or signed:
                raise _Fallback
            else:
                ra_word = None
            if cfa_off >= _INT32 or (
                    fp_slot is not None and not -_INT32 <= fp_slot < _INT32) or (
                    ra_word is not None and not -_INT32 <= ra_word < _INT32):
                raise _Fallback
            fres.append(Fre(at, cfa_reg == fp, cfa_off, fp_slot, ra_word, signed))
            last = key
        if pos >= end:
            return tuple(fres), (cfa_reg, cfa_off, fp_slot, ra_slot, signed)
        at += delta


def _uleb(data: bytes, pos: int) -> tuple[int, int]:
    byte = data[pos]
    if byte < 0x80:
        return byte, pos + 1
    value, shift = 0, 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def _sleb(data: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            if byte & 0x40:
                value -= 1 << shift
            return value, pos
