"""The compiled replay's full mode (``_core.cfi_rows``, ``csrc/dwarf_replay.c``) against
the interpreter it stands in for (``dwarf/cfi._interpreted``: ``dwarf/interpret.py``).

``dwarf/cfi._rows`` gives an FDE body's rows by the compiled mode where it answers and
by the interpreter elsewhere (None: an expression, a number past 64 bits, an unknown or
cut operation, a CFI error).  Both must give the same rows (every register's rule, as
compact unwind reads them) for the distinct bodies of real libraries of two targets,
and the same rows or the same error for their bodies changed byte by byte and for
random bytes; where the compiled mode answers, its rows are the interpreter's and the
interpreter finds nothing wrong.  About 5 s on the 2-core machine (libLLVM: a sample,
every eighth distinct body).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cfi2sframe.dwarf import cfi
from cfi2sframe.dwarf.cfi import Cie, _interpreted, _replay, _replay_params, _rows
from cfi2sframe.elf.cfi import read_elf_cfi
from cfi2sframe.errors import DecodeError
from cfi2sframe.model import CfaReg, Row
from tests.conftest import at_least, compiled_core, in_ci, require_path, unavailable

from .test_core import AARCH64_LIBRARIES
from .test_fastpath import _AARCH64_CIE, _X86_CIE, LIBRARIES

# (path, every n-th distinct body compared, floor of bodies the compiled mode answers).
# Measured here: libc 1,870 of 1,872 distinct bodies, libstdc++ 1,698 of 1,699, libLLVM
# 34,088 of 34,089 (4,261 of the sample), AArch64 libc 1,701 of 1,701; floors ~10% lower.
CASES = [(LIBRARIES[0], 1, 1680), (LIBRARIES[1], 1, 1520), (LIBRARIES[2], 8, 3830),
         (AARCH64_LIBRARIES[0], 1, 1530)]


def _outcome(cie: Cie, body: bytes, big: bool, compiled: object) -> object:
    """The rows and why invalid, or the error, by one core."""
    try:
        return _rows(cie, body, 0, big, compiled=compiled)[:2]  # type: ignore[arg-type]
    except DecodeError as exc:
        return ("error", exc.offset, exc.message)


def _distinct(path: str, every: int) -> tuple[list[tuple[Cie, bytes]], bool]:
    if path in AARCH64_LIBRARIES and not Path(path).exists() and not in_ci():
        unavailable(f"{path}: the AArch64 cross libc (libc6-arm64-cross)")
    require_path(path)
    cfi = read_elf_cfi(path)
    seen: dict[tuple[int, bytes], Cie] = {}
    for fde in cfi.fdes:
        seen.setdefault((fde.cie_at, fde.body), fde.cie)
    return [(cie, body) for (_, body), cie in list(seen.items())[::every]], cfi.big_endian


@pytest.mark.parametrize(("path", "every", "floor"), CASES,
                         ids=[f"{Path(c[0]).parent.name}-{Path(c[0]).name}" for c in CASES])
def test_the_compiled_rows_are_the_interpreters_on_real_libraries(path: str, every: int,
                                                                    floor: int,
                                                                    report) -> None:
    core = compiled_core()
    bodies, big = _distinct(path, every)
    answered = 0
    for cie, body in bodies:
        python = _interpreted(cie, body, 0, big)
        c = core.cfi_rows(body, cie.initial, _replay(cie.code_align, cie.data_align, big,
                                                     core))
        if c is not None:
            assert python[1] is None and c == python[0], body.hex()
            answered += 1
        assert _outcome(cie, body, big, core) == python[:2]
    report(f"compiled rows = interpreted rows, {path}: {len(bodies)} distinct bodies "
           f"({answered} by the compiled mode)")
    at_least(f"{path}: bodies the compiled mode answers", answered, floor)


def _changed(body: bytes) -> list[bytes]:
    """Each byte flipped, set to an opcode of each kind, and the body cut there."""
    out = []
    for i in range(len(body)):
        out.append(body[:i])
        out.append(body[:i] + bytes([body[i] ^ 0x55]) + body[i + 1:])
        for op in (0x0F, 0x10, 0x12, 0x14, 0x2C, 0x2F, 0x0B, 0x3F, 0xFF):
            out.append(body[:i] + bytes([op]) + body[i + 1:])
    return out


@pytest.mark.parametrize("path", [LIBRARIES[0], AARCH64_LIBRARIES[0]])
def test_changed_bodies_give_the_same_rows_or_the_same_error(path: str) -> None:
    core = compiled_core()
    bodies, big = _distinct(path, 1)
    compared = 0
    for cie, body in bodies[::40]:
        for changed in _changed(body[:16]):
            assert _outcome(cie, changed, big, core) == _outcome(cie, changed, big, None), \
                changed.hex()
            compared += 1
    at_least("changed bodies", compared, 3000)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=48), st.booleans(), st.booleans(),
       st.sampled_from([(1, -8), (4, -8), (1, 4), (0, 1), (1 << 63, -8)]))
def test_random_bytes(body: bytes, big: bool, aarch64: bool, aligns) -> None:
    """Any bytes after either target's CIE instructions, or as the CIE's own (a code
    alignment past int64 is the interpreter's alone)."""
    core = compiled_core()
    code, data = aligns
    initial = _AARCH64_CIE if aarch64 else _X86_CIE
    for cie_bytes, fde_body in ((initial, body), (body, b"\x41\x0e\x10")):
        cie = Cie(code, data, 30 if aarch64 else 16, 0, 0xFF, False, False, True, cie_bytes, 8)
        assert _outcome(cie, fde_body, big, core) == _outcome(cie, fde_body, big, None)


def test_the_signed_ra_states_by_hand() -> None:
    """AArch64 PAuth_LR (DWARF for the Arm 64-bit architecture, "Call frame
    instructions"): negate_ra_state_with_pc (0x2c) signs the RA with the PC; a
    negate_ra_state (0x2d) then makes it unsigned, so nothing is signed with the PC, and
    one more signs it without the PC.  Rows at 0, 1 and 2 (advance_loc 1 = 0x41)."""
    cie = Cie(1, -8, 30, 0, 0xFF, False, False, True, _AARCH64_CIE, 8)
    body = bytes([0x2C, 0x41, 0x2D, 0x41, 0x2D])
    rows = compiled_core().cfi_rows(body, cie.initial, _replay(1, -8, False, compiled_core()))
    assert rows is not None
    assert [(row.start, row.ra_signed, row.ra_signed_pc) for row in rows] == [
        (0, True, True), (1, False, False), (2, True, False)]
    assert rows == _interpreted(cie, body, 0, False)[0]


def test_a_state_kept_under_a_rows_hash_with_other_words_is_not_taken() -> None:
    """The states memo is keyed by a hash of a state's words, which two states may
    share: the words kept with a state are compared before it is taken.  x86 CIE rsp+8,
    then ``advance_loc 1; def_cfa_offset 16``: two states; each number given the other
    state's (words, objects), as a shared hash would, the rows are still rsp+8 from 0
    and rsp+16 from 1, and each number holds its own state again.  (A new capsule on
    the same memo: a capsule's state slots would find both states without the memo.)"""
    core = compiled_core()
    named = _replay_params(1, -8, False)
    states, params = named["states"], core.replay_params(named)
    assert isinstance(states, dict)

    def cfas(rows: object) -> list[tuple[int, object]]:
        assert isinstance(rows, tuple)
        return [(row.start, row.cfa) for row in rows]

    body, want = b"\x41\x0e\x10", [(0, CfaReg(7, 8)), (1, CfaReg(7, 16))]
    assert cfas(core.cfi_rows(body, _X86_CIE, params)) == want and len(states) == 2
    (one, kept_one), (two, kept_two) = states.items()
    states[one], states[two] = kept_two, kept_one
    assert cfas(core.cfi_rows(body, _X86_CIE, core.replay_params(named))) == want
    assert sorted(pair[1][0].offset for pair in states.values()) == [8, 16]
    assert all(states[number][0] != kept[0] for number, kept in
               ((one, kept_two), (two, kept_one)))


def test_a_state_seen_under_a_capsule_is_found_without_the_memo() -> None:
    """A capsule keeps each state it was given in a slot by its words' hash, so a row of
    a state seen before needs no int made and no dict read: x86 CIE rsp+8, then
    ``advance_loc 1; def_cfa_offset 16``, two states; the memo emptied, the same body
    under the same capsule gives rows of the same state objects and leaves the memo
    empty; under a new capsule on the memo both states are asked again."""
    core = compiled_core()
    named = _replay_params(1, -8, False)
    states, params = named["states"], core.replay_params(named)
    assert isinstance(states, dict)
    first = core.cfi_rows(b"\x41\x0e\x10", _X86_CIE, params)
    assert isinstance(first, tuple) and len(states) == 2
    states.clear()
    again = core.cfi_rows(b"\x41\x0e\x10", _X86_CIE, params)
    assert isinstance(again, tuple)
    assert [(row.start, row.cfa) for row in again] == [(0, CfaReg(7, 8)), (1, CfaReg(7, 16))]
    assert all(mine is theirs for row, seen in zip(again, first, strict=True)
               for mine, theirs in zip(row[1:], seen[1:], strict=True))
    assert not states
    core.cfi_rows(b"\x41\x0e\x10", _X86_CIE, core.replay_params(named))
    assert len(states) == 2


def test_a_row_of_the_same_start_and_state_is_made_once_under_a_capsule() -> None:
    """A capsule keeps the last row it made in a slot by its start and state, so a row of
    both seen before is that row again (a prologue's rows repeat across bodies), never
    a row of another start or state.  x86 CIE rsp+8 (from 0), then ``advance_loc 1;
    def_cfa_offset 16`` (rsp+16 from 1); the same body again gives the same row
    objects; ``def_cfa_offset 24`` instead (rsp+24 from 1: the same start, another
    state) shares only the row at 0; ``advance_loc 2`` (rsp+16 from 2: the same state,
    another start) likewise; each as the interpreter gives it."""
    core = compiled_core()
    cie = Cie(1, -8, 16, 0x1B, 0xFF, False, False, True, _X86_CIE, 8)
    params = core.replay_params(_replay_params(1, -8, False))

    def rows(body: bytes) -> tuple[Row, ...]:
        made = core.cfi_rows(body, _X86_CIE, params)
        assert isinstance(made, tuple) and made == _interpreted(cie, body, 0, False)[0]
        return made

    first = rows(b"\x41\x0e\x10")
    assert [(row.start, row.cfa) for row in first] == [(0, CfaReg(7, 8)), (1, CfaReg(7, 16))]
    assert all(again is row for again, row in zip(rows(b"\x41\x0e\x10"), first, strict=True))
    deeper = rows(b"\x41\x0e\x18")
    assert [(row.start, row.cfa) for row in deeper] == [(0, CfaReg(7, 8)), (1, CfaReg(7, 24))]
    assert deeper[0] is first[0] and deeper[1] is not first[1]
    later = rows(b"\x42\x0e\x10")
    assert [(row.start, row.cfa) for row in later] == [(0, CfaReg(7, 8)), (2, CfaReg(7, 16))]
    assert later[0] is first[0] and later[1] is not first[1]


def test_the_row_states_kept_at_their_bound_and_emptied_one_past_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The states memo the compiled replay fills (a state's words' hash -> its words and
    objects), at a
    bound of 2: x86 CIE rsp+8 (RA at CFA-8), then ``advance_loc 1; def_cfa_offset 16``
    (0x41 0x0e 0x10) is two states, kept; the same body again asks none; a body to
    rsp+24 (0x18) adds one past the bound: emptied, then that one kept.  Rows made
    before stay whole, and a state asked again after is made again, equal.  Each body
    under a new capsule on the same memo (a capsule's state slots would find a state
    seen before without the memo)."""
    core = compiled_core()
    monkeypatch.setattr(cfi, "STATE_ENTRIES", 2)
    named = _replay_params(1, -8, False)
    states = named["states"]
    initial = _X86_CIE

    def rows_of(body: bytes) -> tuple[Row, ...]:
        rows = core.cfi_rows(body, initial, core.replay_params(named))
        assert isinstance(rows, tuple)
        return rows

    def cfas(rows: object) -> list[tuple[int, object]]:
        assert isinstance(rows, tuple)
        return [(row.start, row.cfa) for row in rows]

    first = rows_of(b"\x41\x0e\x10")
    assert cfas(first) == [(0, CfaReg(7, 8)), (1, CfaReg(7, 16))] and len(states) == 2
    again = rows_of(b"\x41\x0e\x10")
    assert again[1].cfa is first[1].cfa and len(states) == 2  # at the bound: kept
    deeper = rows_of(b"\x41\x0e\x18")
    assert cfas(deeper) == [(0, CfaReg(7, 8)), (1, CfaReg(7, 24))]
    assert deeper[0].cfa is first[0].cfa  # found before the memo was full
    assert len(states) == 1 and list(states.values())[0][1][0] == CfaReg(7, 24)
    assert cfas(first) == [(0, CfaReg(7, 8)), (1, CfaReg(7, 16))]  # rows keep theirs
    remade = rows_of(b"\x41\x0e\x10")
    assert cfas(remade) == cfas(first) and remade[0].cfa is not first[0].cfa
    # rsp+8 made again (2 kept), then rsp+16 past the bound: emptied, that one kept
    assert len(states) == 1 and list(states.values())[0][1][0] == CfaReg(7, 16)


def test_the_parameters_read_once_are_those_of_their_dict() -> None:
    """``replay_params`` reads the dict once; each body then replays with its values and
    its memo.  ``advance_loc 1; def_cfa_offset 2`` (0x41 0x0e 0x02) under code alignment
    4 and data alignment -8 (DWARF 5 6.4.2.1: the delta times the code alignment; the
    offset is not factored): rows at 0 and 4, CFA rsp+8 then rsp+2; under code
    alignment 1 at 0 and 1.  The states land in the dict's own memo, which the capsule
    holds after the dict is gone."""
    core = compiled_core()
    named = _replay_params(4, -8, False)
    states = named["states"]
    params = core.replay_params(named)
    del named
    rows = core.cfi_rows(b"\x41\x0e\x02", _X86_CIE, params)
    assert isinstance(rows, tuple)
    assert [(row.start, row.cfa) for row in rows] == [(0, CfaReg(7, 8)), (4, CfaReg(7, 2))]
    assert isinstance(states, dict) and sorted(kept[1][0].offset
                                               for kept in states.values()) == [2, 8]
    once = core.replay_params(_replay_params(1, -8, False))
    assert [row.start for row in core.cfi_rows(b"\x41\x0e\x02", _X86_CIE, once)] == [0, 1]


def test_only_replay_params_capsule_is_taken() -> None:
    """The dict itself, another capsule (``xray_labels``') or None in the parameters'
    place is a TypeError, not read as a replay's parameters."""
    core = compiled_core()
    named = _replay_params(1, -8, False)
    other = core.xray_labels({1: "f"})
    for wrong in (named, other, None):
        with pytest.raises(TypeError, match="replay_params"):
            core.cfi_rows(b"\x41\x0e\x10", _X86_CIE, wrong)
