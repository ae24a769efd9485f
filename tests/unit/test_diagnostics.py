"""The -W policy's order of precedence (cli/diagnostics.py)."""

from __future__ import annotations

from cfi2sframe.cli.diagnostics import WarningPolicy


def test_policy_table():
    """The order of precedence, derived from gcc's: a named error beats a silenced
    code; a silenced code beats -Werror; an outermost frame is a note unless named."""
    policy = WarningPolicy(quiet=False, all_errors=True, silenced=frozenset({"a"}),
                           errors=frozenset({"b", "ra-undefined"}))
    assert policy.severity("a") is None
    assert policy.severity("b") == "error"
    assert policy.severity("c") == "error"
    assert policy.severity("ra-undefined", outermost=True) == "error"
    plain = WarningPolicy()
    assert plain.severity("ra-undefined", outermost=True) == "note"
    assert plain.severity("c") == "warning"
    assert WarningPolicy(quiet=True).severity("c") is None
    assert WarningPolicy(quiet=True).severity("x", outermost=True) is None
    assert WarningPolicy(quiet=True, all_errors=True).severity("c") == "error"
