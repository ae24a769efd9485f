"""The bounded memo (``cfi2sframe.memo``) and verify's meanings kept in it.

The helper at its bound and one past it, counted by hand; then verify's two memos
(``analysis/compare``: a DWARF state's and an FRE's meaning, kept from file to file)
asked the same key bytes in another context after the first filled them, each answer
worked out by hand from the SFrame spec's FRE layout and each target's registers.
The PLT expression's memos are held the same way in ``test_pcmask.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import pytest

from cfi2sframe.analysis import compare
from cfi2sframe.arch import get_arch
from cfi2sframe.memo import Memo
from cfi2sframe.sframe.decode import DecodedSection
from cfi2sframe.sframe.rules import FrameRules, Loc


def _counted(memo: Memo[str, int], asked: list[str]) -> Callable[[str], int]:
    """Each key's answer (its length) from ``memo``, made and kept where missing."""
    def ask(key: str) -> int:
        known = memo.get(key, None)
        if known is None:
            asked.append(key)
            known = memo.keep(key, len(key))
        return known
    return ask


def test_a_memo_keeps_its_bound_and_is_emptied_one_past_it() -> None:
    memo: Memo[str, int] = Memo(3)
    asked: list[str] = []
    ask = _counted(memo, asked)
    assert [ask(key) for key in ("a", "bb", "ccc")] == [1, 2, 3]
    assert [ask(key) for key in ("ccc", "a", "bb")] == [3, 1, 2]  # at the bound: all kept
    assert asked == ["a", "bb", "ccc"] and len(memo) == 3
    assert ask("dddd") == 4  # one past: emptied, then the new answer kept
    assert len(memo) == 1 and "dddd" in memo and "a" not in memo
    assert ask("a") == 1 and asked == ["a", "bb", "ccc", "dddd", "a"]
    assert len(memo) == 2


def test_a_memo_keeps_none_and_gives_the_default_for_a_missing_key() -> None:
    memo: Memo[str, int | None] = Memo(1)
    missing = object()
    assert memo.get("k", missing) is missing and len(memo) == 0
    assert memo.keep("k", None) is None
    assert memo.get("k", missing) is None and "k" in memo  # None is an answer
    assert memo.keep("k", 7) == 7 and len(memo) == 1  # a key kept again: replaced
    assert memo.get("k", missing) == 7
    with pytest.raises(ValueError, match="keeps nothing"):
        Memo(0)


def _section(abi: int, fixed_ra_offset: int, version: int = 2) -> DecodedSection:
    big_endian = abi in (1, 4)  # AArch64 big-endian, s390x
    return DecodedSection(version, 0, abi, 0, fixed_ra_offset, 0, 0, 0, 0, 0, big_endian, ())


def _meaning(check: compare._FastCheck, known: int | None) -> object:
    """The value behind an id the check gave the core."""
    assert known is not None
    return {value: key for key, value in check.ids.items()}[known]


NO_CORE = ModuleType("no core")  # _fre_id and state_id do not call the core


def test_verify_kept_fre_meanings_are_not_fooled_by_the_same_words_elsewhere(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """One FRE's info byte and words read under other section headers: each context
    differs from the one before it in one field of the memo's key.  Info 0x05: the
    CFA on SP, two one-byte words; 0x04: on FP (the spec's ``sfre_info``: bit 0 the
    base register, 1 for SP; bits 1-4 the word count; bits 5-6 the size, 0 a byte)."""
    monkeypatch.setattr(compare, "_FRE_RULES", Memo(compare._MEMO_ENTRIES))
    x86, arm, s390 = get_arch("x86_64"), get_arch("aarch64"), get_arch("s390x")
    cfa16 = Loc(7, 16, False)
    cases = [
        # AMD64: the second word is the FP's slot, the RA at the header's fixed offset.
        (_section(3, -8), x86, 0x05, (16, -16), FrameRules(cfa16, Loc(None, -16, True),
                                                           Loc(None, -8, True))),
        (_section(3, -8), x86, 0x05, (24, -16), FrameRules(Loc(7, 24, False),
                                                           Loc(None, -16, True),
                                                           Loc(None, -8, True))),
        (_section(3, -16), x86, 0x05, (24, -16), FrameRules(Loc(7, 24, False),
                                                            Loc(None, -16, True),
                                                            Loc(None, -16, True))),
        (_section(3, -16), x86, 0x05, (16, -16), FrameRules(cfa16, Loc(None, -16, True),
                                                            Loc(None, -16, True))),
        (_section(3, -16), x86, 0x04, (16, -16), FrameRules(Loc(6, 16, False),
                                                            Loc(None, -16, True),
                                                            Loc(None, -16, True))),
        # s390x: the CFA word is (offset - 160) / 8; in V2 an odd RA word is a register
        # (word >> 1: r14), in V3 a slot.
        (_section(4, 0), s390, 0x05, (0, 29), FrameRules(Loc(15, 160, False), None,
                                                         Loc(14, 0, False))),
        (_section(4, 0, 3), s390, 0x05, (0, 29), FrameRules(Loc(15, 160, False), None,
                                                            Loc(None, 29, True))),
        # AArch64 (ABI 2, no fixed RA offset): the second word is the RA's slot.
        (_section(2, 0, 3), arm, 0x05, (0, 29), FrameRules(Loc(31, 0, False), None,
                                                           Loc(None, 29, True))),
    ]
    for section, arch, info, words, expected in cases + cases[::-1]:
        check = compare._FastCheck(section, arch, section.big_endian, NO_CORE)
        assert _meaning(check, check._fre_id((info, words))) == expected, \
            (section.abi, section.fixed_ra_offset, section.version, info)


def test_verify_kept_state_meanings_are_not_fooled_by_another_target(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """One replayed DWARF state (CFA = reg 31 + 16, FP at CFA-16, RA at CFA-8, the RA
    signed) on two targets: AArch64 states it (its SP is 31; SFrame marks a signed RA),
    x86-64 has no signed return address, so the check says so in words."""
    monkeypatch.setattr(compare, "_STATE_SIDES", Memo(compare._MEMO_ENTRIES))
    x86, arm = get_arch("x86_64"), get_arch("aarch64")
    state = (31, 16, -16, -8, True)
    expected_arm = FrameRules(Loc(31, 16, False), Loc(None, -16, True), Loc(None, -8, True))
    for arch in (x86, arm, x86):
        check = compare._FastCheck(_section(arch.sframe_abi, 0), arch, False, NO_CORE)
        side = _meaning(check, check.state_id(state))
        if arch is arm:
            assert side == expected_arm
        else:
            assert isinstance(side, str) and "the return address is signed" in side, side
