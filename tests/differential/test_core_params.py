"""The compiled core's entry points that take a target's and a format's parameters
read them by name: ``fast_fres``, ``lower_fdes`` (and ``eh_functions``, ``eh_table_v2``),
``eh_fdes``, ``replay_params`` (``cfi_rows``' parameters, read once), ``stats_scan`` and
``decode_fres`` from the one dict Python builds
(``fastpath.core_target``, ``build._lower_params``, ``cfi._eh_target``,
``cfi._replay_params``, ``stats._scan_params``,
``decode._Reader.fre_params``), ``fde_index`` as keyword-only arguments: the
parameters Python builds are the ones the core reads, and a parameter missing,
unknown, of the wrong type, or given in another argument's place is a TypeError, where
the dozen positional ints these calls took would have run on, swapped.
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Callable

import pytest

from cfi2sframe.analysis.stats import _scan_params
from cfi2sframe.arch import arch_for_machine
from cfi2sframe.dwarf.cfi import _eh_target, _replay_params, cie_reader
from cfi2sframe.model import CfaReg
from cfi2sframe.sframe import selfcheck
from cfi2sframe.sframe.build import _cie_entry, _lower_params
from cfi2sframe.sframe.decode import FRE_TABLE, DecodedFre, _Reader
from cfi2sframe.sframe.encode import v2_encoding
from cfi2sframe.sframe.fastpath import core_target, initial_state
from cfi2sframe.sframe.format import Fre, SFrameFunction
from cfi2sframe.sframe.words import FDE_INFO_UNUSED
from tests.conftest import compiled_core

from .test_fastpath import _X86_CIE

X86 = arch_for_machine("EM_X86_64", "t.o")
BODY = b"\x41\x0e\x10"  # advance_loc 1; def_cfa_offset 16 (a push)

# An .eh_frame at 0x1000 (DWARF 5 6.4.1, LSB 10.6.1): a CIE (version 1, "zR", code
# alignment 1, data alignment -8, RA column 16, FDE starts pcrel|sdata4 (0x1b), x86-64's
# initial instructions, two nops to a 4-byte end), then an FDE for 0x2000..0x2020
# (its start field at 0x1020 holds 0x2000 - 0x1020) whose body is BODY, then the
# terminator.  Its two rows (CFA rsp+8 from 0, rsp+16 from 1) are two SFrame FREs of a
# 1-byte start, the info byte and a 1-byte CFA offset each (RA at a fixed offset on
# x86-64, FP not saved: SFrame spec, "SFrame FRE"): 6 bytes in V2 and in V3.
_CIE = b"\0\0\0\0\x01zR\0\x01\x78\x10\x01\x1b" + _X86_CIE + b"\0\0"
_FDE = (28).to_bytes(4, "little") + (0x2000 - 0x1020).to_bytes(4, "little") \
    + (0x20).to_bytes(4, "little") + b"\0" + BODY
EH = b"".join(len(part).to_bytes(4, "little") + part for part in (_CIE, _FDE)) + bytes(4)
FDE_AT = 4 + len(_CIE)

# Two FREs of 1-byte starts (FDE type ADDR1) as SFrame V2 writes them for x86-64: start,
# info 0x03 (base register 1, SP (SFRAME_BASE_REG_SP); one data word of 1 byte), the
# CFA offset.
FRES = bytes([0, 0x03, 8, 1, 0x03, 16])
SECTION = {"fre_end": len(FRES), "big_endian": False, "fre_type": DecodedFre,
           "fre_table": FRE_TABLE}

# Two V2 FDE entries (start, size, FRE offset, FRE count, info, repeat size, padding).
TABLE = b"".join(start.to_bytes(4, "little", signed=True) + size.to_bytes(4, "little")
                 + bytes(12) for start, size in ((0x10, 0x20), (-0x10, 0x8)))
INDEX = {"fde_start": 0, "count": 2, "entry": 20, "wide": False, "big": False,
         "base": 0x1000, "step": 0}


def _fast_fres(target: object, shapes: object = None) -> object:
    start = initial_state(_X86_CIE, 1, -8, X86, False)
    return compiled_core().fast_fres(BODY, start, 1, -8, {} if shapes is None else shapes,
                                     target)


def _lower_fdes(params: object, shapes: object = None) -> object:
    return compiled_core().lower_fdes((), {}, {} if shapes is None else shapes, {}, params)


def _eh_functions(params: object, names: object = None, address_size: int = 8) -> object:
    cie_of = cie_reader(EH, 0x1000, 8, True)
    return compiled_core().eh_functions(EH, 0x1000, address_size,
                                        {} if names is None else names,
                                        lambda at: _cie_entry(cie_of(at), X86, False),
                                        params)


def _eh_table_v2(params: object, general: object = None, address_size: int = 8) -> object:
    cie_of = cie_reader(EH, 0x1000, 8, True)
    return compiled_core().eh_table_v2(
        EH, 0x1000, address_size, lambda at: _cie_entry(cie_of(at), X86, False), params,
        general or (lambda todo: [() for _ in todo]), v2_encoding(X86))


def _eh_fdes(target: object, placements: object = None) -> object:
    return compiled_core().eh_fdes(b"", 0, {}, lambda at: None,
                                   {} if placements is None else placements, target)


def _cfi_rows(params: object, initial: object = _X86_CIE) -> object:
    """The dict read once, by ``replay_params``; each body then takes its capsule."""
    core = compiled_core()
    return core.cfi_rows(BODY, initial, core.replay_params(params))


def _stats_scan(params: object, shapes: object = None) -> object:
    return compiled_core().stats_scan(EH, 0x1000, {} if shapes is None else shapes, {},
                                      params)


def _decode_fres(section: object, count: object = 2) -> object:
    return compiled_core().decode_fres(FRES, 0, count, 1, False, section)


def _fde_index(params: object, data: object = TABLE) -> object:
    """Keyword-only: the parameters given by name at the call."""
    if not isinstance(params, dict):
        raise TypeError("keyword arguments are given by name")
    return compiled_core().fde_index(data, **params)


# A V2 section holding one FDE with those two FREs (SFrame V2 spec: a 28-byte header,
# x86-64's ABI 3, flags SORTED, RA at CFA - 8, one 20-byte FDE for 0x1000..0x1020, its
# FREs at 0), as ``selfcheck`` reads its header for ``sframe_check``.
CHECKED = struct.pack("<HBBBbbBIIIII", 0xDEE2, 2, 1, 3, 0, -8, 0, 1, 2, len(FRES), 0, 20) \
    + struct.pack("<iIIIBBH", 0x1000, 0x20, 0, 2, 0, 0, 0) + FRES
CHECK = {"fde_start": 28, "count": 1, "entry": 20, "fre_start": 48, "fre_end": 48 + len(FRES),
         "version": 2, "big": False, "pcrel": False, "address": 0, "sorted": True,
         "num_fres": 2, "unused": FDE_INFO_UNUSED[2], "masks": selfcheck._MASKS}


def _sframe_check(params: object, data: object = CHECKED) -> object:
    """Keyword-only: the parameters given by name at the call."""
    if not isinstance(params, dict):
        raise TypeError("keyword arguments are given by name")
    return compiled_core().sframe_check(data, **params)


CALLS: list[tuple[str, Callable[..., object], dict[str, object]]] = [
    ("fast_fres", _fast_fres, core_target(X86, False)),
    ("lower_fdes", _lower_fdes, _lower_params(X86, False, 2)),
    ("eh_functions", _eh_functions, _lower_params(X86, False, 2)),
    ("eh_table_v2", _eh_table_v2, _lower_params(X86, False, 2)),
    ("eh_fdes", _eh_fdes, _eh_target(8, False)),
    ("cfi_rows", _cfi_rows, _replay_params(1, -8, False)),
    ("stats_scan", _stats_scan, _scan_params(X86, 8)),
    ("decode_fres", _decode_fres, SECTION),
    ("fde_index", _fde_index, INDEX),
    ("sframe_check", _sframe_check, CHECK),
]
# Parameters that are any callable (called, not read) and the flags, which are bools.
CALLABLES = ("shape_of", "size_of", "state_of")
FLAGS = ("tracks_ra", "big_endian", "wide", "big", "pcrel", "sorted")


def test_the_parameters_python_builds_are_the_ones_the_core_reads() -> None:
    fres = _fast_fres(core_target(X86, False))
    assert isinstance(fres, tuple) and [fre[0] for fre in fres] == [0, 1]
    assert fres[1][1:3] == (False, 16)  # CFA at SP+16 (not FP-based) from byte 1
    assert _lower_fdes(_lower_params(X86, False, 2)) == []
    assert _eh_fdes(_eh_target(8, False)) == []
    # EH's one FDE: its two rows as default FREs (CFA SP+8 from 0, SP+16 from 1; FP and
    # RA not saved: x86-64's RA at its fixed offset), named from ``names`` (else pc+0x2000)
    fres = (Fre(0, False, 8, None, None, False), Fre(1, False, 16, None, None, False))
    assert _eh_functions(_lower_params(X86, False, 2), {("", 0x2000): "f"}) == (
        [SFrameFunction("f", "", 0x2000, 0x20, fres)], [], 1)
    assert _eh_functions(_lower_params(X86, False, 2))[0][0].name == "pc+0x2000"
    # The same FDE as a V2 table (the SFrame spec's layouts, little-endian): its start;
    # size 0x20, FREs at 0, 2 FREs, info 0 (1-byte FRE starts); the FREs: start, info
    # 0x03 (CFA from SP, one 1-byte offset), offset 8 / 16.
    assert _eh_table_v2(_lower_params(X86, False, 2)) == (
        (0x2000).to_bytes(8, sys.byteorder), bytes.fromhex("20000000" "00000000" "02000000"
                                                          "00000000"),
        bytes.fromhex("000308" "010310"), 2, 1, 1)
    rows = _cfi_rows(_replay_params(1, -8, False))  # CFA rsp+8 from 0, rsp+16 from 1
    assert isinstance(rows, tuple) and [(row.start, row.cfa) for row in rows] == [
        (0, CfaReg(7, 8)), (1, CfaReg(7, 16))]
    # (FDEs, functions, V2 and V3 FRE bytes, FDEs left to the general path, low, high)
    assert _stats_scan(_scan_params(X86, 8)) == (1, 1, 6, 6, [], 0x2000, 0x2000)
    assert _decode_fres(_Reader(FRES, "<", 0, len(FRES), 2, 0).fre_params) == (
        (DecodedFre(0, False, (8,), False, 0, 0x03),
         DecodedFre(1, False, (16,), False, 0, 0x03)), len(FRES))
    assert _sframe_check(CHECK) is True
    assert _sframe_check({**CHECK, "num_fres": 3}) is None  # (the reference says why)
    index = _fde_index(INDEX)
    assert isinstance(index, tuple)
    assert array("q", index[0]).tolist() == [0x1010, 0xFF0]
    assert array("q", index[1]).tolist() == [0x1030, 0xFF8] and index[2] is False


def test_each_of_stats_scans_parameters_is_read() -> None:
    """Each limit and size decides what the scan counts: an FDE the fast path does not
    take (another RA column, a size past ``max_size``, more FREs than ``max_fres_v3``)
    is left to the general path; 2-byte starts count 2 bytes each."""
    params = _scan_params(X86, 8)
    for changed in ({"ra": 15}, {"max_size": 0x1F}, {"max_fres_v3": 1}):
        assert _stats_scan({**params, **changed}) == (1, 0, 0, 0, [FDE_AT], 0, 0)
    assert _stats_scan({**params, "addr_sizes": (2, 4)}) == (1, 1, 8, 8, [], 0x2000, 0x2000)
    assert _stats_scan({**params, "address_size": 5}) is None  # no ELF class of ours
    for walk in (_eh_functions, _eh_table_v2):  # (eh_walk's rule, theirs too)
        assert walk(_lower_params(X86, False, 2), address_size=5) is None
    lowering = _lower_params(X86, False, 3)  # eh_functions: the same limits as lower_fdes
    for changed in ({"ra": 15}, {"max_size": 0x1F}, {"max_fres_v3": 1}):
        assert _eh_functions({**lowering, **changed}) == ([None], [FDE_AT], 1)
    assert _eh_functions(_lower_params(X86, False, 2)) == _eh_functions(lowering)
    table = _lower_params(X86, False, 2)  # eh_table_v2: those limits, V2 alone
    for changed in ({"ra": 15}, {"max_size": 0x1F}):
        assert _eh_table_v2({**table, **changed})[3:] == (0, 0, 1)  # the general path's
    with pytest.raises(ValueError, match="V2"):
        _eh_table_v2(lowering)
    assert _decode_fres({**SECTION, "fre_end": len(FRES) - 1}) is None  # cut: Python's
    assert _fde_index({**INDEX, "step": 0x100})[0] == array("q", [0x1010, 0x10F0]).tobytes()


@pytest.mark.parametrize(("name", "call", "params"), CALLS, ids=[c[0] for c in CALLS])
def test_a_missing_or_unknown_parameter_is_a_type_error(name, call, params) -> None:
    for key in params:
        with pytest.raises(TypeError, match=key):
            call({k: v for k, v in params.items() if k != key})
    with pytest.raises(TypeError):
        call({**params, "nine": 9})


@pytest.mark.parametrize(("name", "call", "params"), CALLS, ids=[c[0] for c in CALLS])
def test_a_parameter_of_the_wrong_type_is_a_type_error(name, call, params) -> None:
    for key in params:
        if key in CALLABLES:
            continue  # any callable: it is called, not read
        with pytest.raises(TypeError):
            call({**params, key: "x"})
    for key in FLAGS:  # a flag is a bool, not a number given for it
        if key in params:
            with pytest.raises(TypeError):
                call({**params, key: 1})


@pytest.mark.parametrize(("name", "call", "params"), CALLS, ids=[c[0] for c in CALLS])
def test_the_parameters_in_another_arguments_place_are_a_type_error(name, call,
                                                                    params) -> None:
    memo = {(7, 8, None, None, False): None}  # the caller's memo, given as the parameters
    with pytest.raises(TypeError):
        call(memo, params)
    with pytest.raises(TypeError):
        call({}, params)
    with pytest.raises(TypeError):
        call(tuple(params.values()))  # the values without their names


def test_the_old_positional_calls_are_type_errors() -> None:
    core = compiled_core()
    start = initial_state(_X86_CIE, 1, -8, X86, False)
    with pytest.raises(TypeError):
        core.fast_fres(BODY, start, 1, -8, X86.sp, X86.fp, X86.ra, True, False, tuple, {},
                       lambda state: None)
    with pytest.raises(TypeError):
        core.eh_fdes(b"", 0, 8, False, {}, lambda at: None, tuple, {})
    with pytest.raises(TypeError):
        core.lower_fdes((), {}, 2, 1 << 32, 255, X86.sp, X86.fp, X86.ra, True, False, tuple,
                        {}, lambda state: None, tuple, {})
    with pytest.raises(TypeError):
        core.stats_scan(EH, 0x1000, 8, False, (X86.sp, X86.fp, X86.ra, False),
                        ((1 << 32) - 1, 0xFFFF), (1, 2, 4), {}, lambda state: None, {},
                        lambda shape: (2, 2))
    with pytest.raises(TypeError):
        core.decode_fres(FRES, 0, len(FRES), 2, 1, False, False, DecodedFre, FRE_TABLE)
    with pytest.raises(TypeError):
        core.fde_index(TABLE, 0, 2, 20, False, False, 0x1000, 0)
