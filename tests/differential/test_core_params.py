"""The compiled core's entry points that take a target's and a format's parameters
(``fast_fres``, ``lower_fdes``, ``eh_fdes``) read them by name from the one dict Python
builds (``fastpath.core_target``, ``build._lower_params``, ``cfi._eh_target``): the
dicts Python builds are the ones the core reads, and a parameter missing, unknown, of
the wrong type, or the dict given in another argument's place is a TypeError, where
the dozen positional ints these calls took would have run on, swapped.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from cfi2sframe.arch import arch_for_machine
from cfi2sframe.dwarf.cfi import _eh_target
from cfi2sframe.sframe.build import _lower_params
from cfi2sframe.sframe.fastpath import core_target, initial_state
from tests.conftest import compiled_core

from .test_fastpath import _X86_CIE

X86 = arch_for_machine("EM_X86_64", "t.o")
BODY = b"\x41\x0e\x10"  # advance_loc 1; def_cfa_offset 16 (a push)


def _fast_fres(target: object, shapes: object = None) -> object:
    start = initial_state(_X86_CIE, 1, -8, X86, False)
    return compiled_core().fast_fres(BODY, start, 1, -8, {} if shapes is None else shapes,
                                     target)


def _lower_fdes(params: object, shapes: object = None) -> object:
    return compiled_core().lower_fdes((), {}, {} if shapes is None else shapes, {}, params)


def _eh_fdes(target: object, placements: object = None) -> object:
    return compiled_core().eh_fdes(b"", 0, {}, lambda at: None,
                                   {} if placements is None else placements, target)


CALLS: list[tuple[str, Callable[..., object], dict[str, object]]] = [
    ("fast_fres", _fast_fres, core_target(X86, False)),
    ("lower_fdes", _lower_fdes, _lower_params(X86, False, 2)),
    ("eh_fdes", _eh_fdes, _eh_target(8, False)),
]


def test_the_parameters_python_builds_are_the_ones_the_core_reads() -> None:
    fres = _fast_fres(core_target(X86, False))
    assert isinstance(fres, tuple) and [fre[0] for fre in fres] == [0, 1]
    assert fres[1][1:3] == (False, 16)  # CFA at SP+16 (not FP-based) from byte 1
    assert _lower_fdes(_lower_params(X86, False, 2)) == []
    assert _eh_fdes(_eh_target(8, False)) == []


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
        if key == "shape_of":
            continue  # any callable: it is called, not read
        with pytest.raises(TypeError):
            call({**params, key: "x"})
    for key in ("tracks_ra", "big_endian"):  # a flag is a bool, not a number given for it
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
