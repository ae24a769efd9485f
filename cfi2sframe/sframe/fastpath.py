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
``tests/differential/test_fastpath.py`` checks it against the general path on
every distinct FDE body of real libraries.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from types import ModuleType

from ..arch.base import Arch
from ..core import compiled as compiled_core
from ..dwarf.leb128 import read_sleb, read_uleb
from ..dwarf.opcodes import ADVANCE_SIZES, CFA, HIGH_MASK, LOW_MASK
from ..errors import DecodeError
from ..typed import TYPE_CHECKING
from .format import Fre, FreShape
from .lower import cfa_problem, words_problem

if TYPE_CHECKING:
    from ..arch.base import ByteOrder

_NO_CFA = -1
_new_tuple = tuple.__new__
_COMPILED = compiled_core()

# The opcode table's numbers as plain ints for the loop below (see dwarf.opcodes).
_ADVANCE_LOC, _OFFSET, _RESTORE = int(CFA.advance_loc), int(CFA.offset), int(CFA.restore)
_DEF_CFA_OFFSET, _DEF_CFA_REGISTER = int(CFA.def_cfa_offset), int(CFA.def_cfa_register)
_DEF_CFA, _NOP, _ARGS_SIZE = int(CFA.def_cfa), int(CFA.nop), int(CFA.GNU_args_size)
_OFFSET_EXTENDED, _OFFSET_EXTENDED_SF = int(CFA.offset_extended), int(CFA.offset_extended_sf)
_RESTORE_EXTENDED = int(CFA.restore_extended)
_REMEMBER, _RESTORE_STATE = int(CFA.remember_state), int(CFA.restore_state)
_UNDEFINED, _SAME_VALUE, _REGISTER = int(CFA.undefined), int(CFA.same_value), int(CFA.register)
_EXPRESSION, _VAL_EXPRESSION = int(CFA.expression), int(CFA.val_expression)
_NEGATE_RA_STATE = int(CFA.AARCH64_negate_ra_state)

# The state of one row: (CFA register or _NO_CFA, CFA offset, FP slot, RA slot,
# RA signed).  A slot is a CFA offset, or None when the register is not saved
# (no rule, or same_value).
_State = tuple[int, int, int | None, int | None, bool]


class _Fallback(Exception):
    """The CFI leaves the subset this module handles."""


ShapeMemo = dict[_State, "FreShape | None"]
"""A caller's memo of state -> FRE fields (``_state_shape``), one per target."""


def direct_fres(initial: bytes, body: bytes, code_align: int, data_align: int,
                arch: Arch, big_endian: bool,
                compiled: ModuleType | None = _COMPILED,
                shapes: ShapeMemo | None = None) -> tuple[Fre, ...] | None:
    """Default FREs of a CIE's initial instructions followed by an FDE body.

    Rows are unbounded: the caller drops FREs that start at or past the
    function's size.  ``None``: use the general path.  ``compiled``: the compiled
    core's loop (``core.compiled()``, the default where it is built), or None for
    the pure-Python loop below, its reference.  ``shapes``: the caller's memo of
    state -> FRE fields for ``arch``, kept across calls (the compiled loop builds
    each FRE from it without returning to Python).
    """
    if not serves(arch):
        return None
    start = initial_state(initial, code_align, data_align, arch, big_endian)
    if start is None:
        return None
    if compiled is not None:
        try:
            fres: tuple[Fre, ...] | None = compiled.fast_fres(
                body, start, code_align, data_align, {} if shapes is None else shapes,
                core_target(arch, big_endian))
            return fres
        except OverflowError:
            pass  # an alignment or CIE value past 64 bits: the Python loop below
    try:
        fres, _ = _run(body, start, start, code_align, data_align, arch, big_endian, True)
    except (_Fallback, DecodeError, IndexError):
        return None
    return fres


def serves(arch: Arch) -> bool:
    """Whether the fast path makes FREs for ``arch``: targets with encoded CFA offsets,
    RA padding or register words (s390x) take the general path."""
    return not (arch.sframe_cfa_encoded or arch.sframe_ra_padding
                or arch.sframe_register_words)


@lru_cache(maxsize=16)
def shape_of(arch: Arch) -> Callable[[_State], FreShape | None]:
    """``_state_shape`` for one target, as the compiled loop calls it."""
    return lambda state: _state_shape(state, arch)


@lru_cache(maxsize=16)
def replay_target(arch: Arch, big_endian: bool) -> dict[str, object]:
    """The compiled replay's target parameters, by name (the compiled core reads each by
    its name, so none can be given in another's place): what ``fast_fres``,
    ``lower_fdes`` and ``stats_scan`` share; built once, never changed."""
    return {"sp": arch.sp, "fp": arch.fp, "ra": arch.ra, "tracks_ra": arch.tracks_ra,
            "big_endian": big_endian, "shape_of": shape_of(arch)}


@lru_cache(maxsize=16)
def core_target(arch: Arch, big_endian: bool) -> dict[str, object]:
    """``_core.fast_fres``'s target parameters: the replay's and the FRE type."""
    return {**replay_target(arch, big_endian), "fre_type": Fre}


@lru_cache(maxsize=256)
def initial_state(initial: bytes, code_align: int, data_align: int, arch: Arch,
                   big_endian: bool) -> _State | None:
    """The state after a CIE's initial instructions (advances there are ignored)."""
    empty: _State = (_NO_CFA, 0, None, None, False)
    try:
        _, state = _run(initial, empty, empty, code_align, data_align, arch, big_endian,
                        False)
    except (_Fallback, DecodeError, IndexError):
        return None
    return state


def _run(data: bytes, state: _State, initial: _State, code_align: int, data_align: int,
         arch: Arch, big_endian: bool, emit: bool) -> tuple[tuple[Fre, ...], _State]:
    """Replay ``data`` from ``state``; FREs at every advance when ``emit``."""
    sp, fp, ra = arch.sp, arch.fp, arch.ra
    tracks_ra = arch.tracks_ra
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
            high = op & HIGH_MASK
            delta = 0
            if high == _ADVANCE_LOC:
                delta = (op & LOW_MASK) * code_align
            elif high == _OFFSET:  # the register saves of every prologue
                value = data[pos]
                pos += 1
                if value >= 0x80:
                    value, pos = read_uleb(data, pos - 1)
                reg = op & LOW_MASK
                if reg == fp:
                    fp_slot = value * data_align
                elif reg == ra:
                    ra_slot = value * data_align
                elif reg == sp:
                    raise _Fallback
                continue
            elif op == _DEF_CFA_OFFSET:  # every push and pop
                if cfa_reg == _NO_CFA:
                    raise _Fallback
                cfa_off = data[pos]
                pos += 1
                if cfa_off >= 0x80:
                    cfa_off, pos = read_uleb(data, pos - 1)
                continue
            elif op == _OFFSET_EXTENDED or op == _OFFSET_EXTENDED_SF:  # rare, kept apart
                # so the hot DW_CFA_offset branch above stays inline
                reg, pos = read_uleb(data, pos)
                if op == _OFFSET_EXTENDED_SF:
                    value, pos = read_sleb(data, pos)
                else:
                    value, pos = read_uleb(data, pos)
                if reg == fp:
                    fp_slot = value * data_align
                elif reg == ra:
                    ra_slot = value * data_align
                elif reg == sp:
                    raise _Fallback
                continue
            elif high == _RESTORE or op == _RESTORE_EXTENDED:
                if high == _RESTORE:
                    reg = op & LOW_MASK
                else:
                    reg, pos = read_uleb(data, pos)
                if reg == fp:
                    fp_slot = initial[2]
                elif reg == ra:
                    ra_slot = initial[3]
                elif reg == sp:
                    raise _Fallback
                continue
            elif op == _DEF_CFA_REGISTER:
                if cfa_reg == _NO_CFA:
                    raise _Fallback
                cfa_reg, pos = read_uleb(data, pos)
                continue
            elif op == _DEF_CFA:
                cfa_reg, pos = read_uleb(data, pos)
                cfa_off, pos = read_uleb(data, pos)
                continue
            elif op == _REMEMBER:
                stack.append((cfa_reg, cfa_off, fp_slot, ra_slot, signed))
                continue
            elif op == _RESTORE_STATE:
                if not stack:
                    raise _Fallback
                cfa_reg, cfa_off, fp_slot, ra_slot, signed = stack.pop()
                continue
            elif op == _ARGS_SIZE:  # no effect on recovery
                _, pos = read_uleb(data, pos)
                continue
            elif op == _NOP:
                continue
            elif op in ADVANCE_SIZES:
                size = ADVANCE_SIZES[op]
                if pos + size > end:
                    raise _Fallback
                delta = int.from_bytes(data[pos:pos + size], order) * code_align
                pos += size
            elif op == _UNDEFINED or op == _SAME_VALUE:
                reg, pos = read_uleb(data, pos)
                if reg in (sp, ra) or (reg == fp and op == _UNDEFINED):
                    raise _Fallback
                if reg == fp:
                    fp_slot = None
                continue
            elif op == _REGISTER:
                reg, pos = read_uleb(data, pos)
                _, pos = read_uleb(data, pos)
                if reg in (sp, fp, ra):
                    raise _Fallback
                continue
            elif op == _EXPRESSION or op == _VAL_EXPRESSION:
                reg, pos = read_uleb(data, pos)
                length, pos = read_uleb(data, pos)
                pos += length
                if reg in (sp, fp, ra) or pos > end:
                    raise _Fallback
                continue
            elif op == _NEGATE_RA_STATE and tracks_ra:
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
            shape = _state_shape(key, arch)
            if shape is None:
                raise _Fallback
            # Built as a plain tuple of all nine fields: a named tuple's own
            # constructor costs twice as much, and libraries have ~500k FREs.
            fres.append(_new_tuple(Fre, (at, *shape)))
            last = key
        if pos >= end:
            return tuple(fres), (cfa_reg, cfa_off, fp_slot, ra_slot, signed)
        at += delta


@lru_cache(maxsize=4096)
def _state_shape(state: _State, arch: Arch) -> FreShape | None:
    """The fields after ``start`` of a state's default FRE, by the rules ``lower_row``
    applies (``lower.cfa_problem``, ``lower.words_problem``); None when it has none."""
    cfa_reg, cfa_off, fp_slot, ra_slot, signed = state
    if cfa_problem(cfa_reg, signed, arch) is not None:
        return None
    if not arch.tracks_ra and ra_slot != arch.sframe_fixed_ra_offset:
        return None  # lower_row: the RA rule must be the header's fixed offset
    fre = Fre(0, cfa_reg == arch.fp, cfa_off, fp_slot, ra_slot if arch.tracks_ra else None,
              signed)
    return None if words_problem(fre, arch) is not None else fre[1:]
