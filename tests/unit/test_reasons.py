"""One registry of reason codes (cfi2sframe/reasons.py): every code the backends can
give is registered there and documented (docs/reasons.md for SFrame, docs/compact.md for
compact unwind), and every registered code is used somewhere."""

from __future__ import annotations

import re
from pathlib import Path

from cfi2sframe.reasons import COMPACT_REASONS, SFRAME_REASONS, CompactReason, SframeReason

ROOT = Path(__file__).resolve().parents[2]
# A reason given in the source: SframeReason.member or CompactReason.member.
_GIVEN = re.compile(r"\b(SframeReason|CompactReason)\.([a-z0-9_]+)\b")


# Modules scanned per folder (counted in the tree: sframe/ holds 15, compact/ 10);
# fewer means the scan lost files, so a code given there would go unchecked.
SCANNED = {"sframe": 15, "compact": 10}


def _given(folder: str, enum: str) -> set[str]:
    codes: set[str] = set()
    paths = list((ROOT / "cfi2sframe" / folder).rglob("*.py"))
    assert len(paths) >= SCANNED[folder], (folder, paths)
    for path in paths:
        codes |= {member for kind, member in _GIVEN.findall(path.read_text()) if kind == enum}
    return codes


def test_every_code_is_registered_and_documented() -> None:
    """Each enum member has its table entry, spells its member name as its code, and is
    documented; a code given in the source is a member (mypy checks that too)."""
    docs = {name: (ROOT / "docs" / f"{name}.md").read_text() for name in ("reasons", "compact")}
    assert set(SFRAME_REASONS) == set(SframeReason)
    assert set(COMPACT_REASONS) == set(CompactReason)
    for enum in (SframeReason, CompactReason):
        for code in enum:
            assert code.value == code.name.replace("_", "-"), code
    for code in SframeReason:
        assert f"`{code}`" in docs["reasons"], code
    for code in CompactReason:  # invalid-cfi and empty-function are shared: reasons.md
        assert f"`{code}`" in docs["compact"] + docs["reasons"], code
    sframe = _given("sframe", "SframeReason")
    compact = _given("compact", "CompactReason")
    assert sframe and compact, "the pattern finds the codes"
    assert sframe - set(SframeReason.__members__) == set()
    assert compact - set(CompactReason.__members__) == set()


def test_every_registered_code_is_given() -> None:
    """No code is registered that no back end gives."""
    assert _given("sframe", "SframeReason") == set(SframeReason.__members__)
    assert _given("compact", "CompactReason") == set(CompactReason.__members__)
