"""One registry of reason codes (cfi2sframe/reasons.py): every code the backends can
give is registered there and documented (docs/reasons.md for SFrame, docs/compact.md for
compact unwind), and every registered code is used somewhere."""

from __future__ import annotations

import re
from pathlib import Path

from cfi2sframe.reasons import COMPACT_REASONS, SFRAME_REASONS

ROOT = Path(__file__).resolve().parents[2]
# A reason code given in the source: Unrepresentable("code", ...), skip("code", ...),
# _Unrepresentable("code", ...), result(..., "code", ...), reason = "code".
_GIVEN = re.compile(r'(?:Unrepresentable\(|skip\(|result\(\[[^\]]*\], |reason = |'
                    r'reason: str = )\s*"([a-z0-9]+(?:-[a-z0-9]+)+)"')


# Modules scanned per folder (counted in the tree: sframe/ holds 15, compact/ 10);
# fewer means the scan lost files, so a code given there would go unchecked.
SCANNED = {"sframe": 15, "compact": 10}


def _given(folder: str) -> set[str]:
    codes: set[str] = set()
    paths = list((ROOT / "cfi2sframe" / folder).rglob("*.py"))
    assert len(paths) >= SCANNED[folder], (folder, paths)
    for path in paths:
        codes |= set(_GIVEN.findall(path.read_text()))
    return codes


def test_every_code_given_is_registered_and_documented() -> None:
    docs = {name: (ROOT / "docs" / f"{name}.md").read_text() for name in ("reasons", "compact")}
    sframe = _given("sframe")
    compact = _given("compact")
    assert sframe, "the pattern finds the codes"
    assert sframe - set(SFRAME_REASONS) == set()
    assert compact - set(COMPACT_REASONS) == set()
    for code in SFRAME_REASONS:
        assert f"`{code}`" in docs["reasons"], code
    for code in COMPACT_REASONS:  # invalid-cfi and empty-function are shared: reasons.md
        assert f"`{code}`" in docs["compact"] + docs["reasons"], code


def test_every_registered_code_is_given() -> None:
    # fp-* reasons come from a table keyed by rule kind; ra-signed-with-pc from the
    # directive table: both are in lower.py as plain strings.
    lower = (ROOT / "cfi2sframe" / "sframe" / "lower.py").read_text()
    compact = "".join(p.read_text() for p in (ROOT / "cfi2sframe" / "compact").rglob("*.py"))
    for code in SFRAME_REASONS:
        assert f'"{code}"' in lower, code
    for code in COMPACT_REASONS:
        assert f'"{code}"' in compact, code
