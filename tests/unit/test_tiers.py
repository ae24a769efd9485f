"""The test tiers hold every test module, and the slow list names only tests that exist
(so the quick tier cannot silently grow or the list rot)."""

from __future__ import annotations

import ast

from tests.conftest import SLOW, TESTS, TIERS


def test_every_test_module_is_in_a_tier() -> None:
    outside = [p.relative_to(TESTS).as_posix() for p in TESTS.rglob("test_*.py")
               if p.relative_to(TESTS).parts[0] not in TIERS]
    assert not outside
    counts = {tier: len(list((TESTS / tier).glob("test_*.py"))) for tier in TIERS}
    assert all(counts.values()), counts


def test_every_slow_entry_names_a_test() -> None:
    for entry in SLOW:
        module, name = entry.split("::")
        tree = ast.parse((TESTS / module).read_text())
        names = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
        assert name in names, entry
