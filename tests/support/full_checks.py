"""The functions ``verify`` leaves to its full check (``analysis.compare._Verifier.check``)
while a block runs: what the compiled scan did not confirm itself."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from cfi2sframe.analysis import compare


@contextmanager
def full_checks_counted() -> Iterator[list[str]]:
    """The names of the functions the full check runs for inside the block, in order."""
    calls: list[str] = []
    real_check = compare._Verifier.check

    def counting(self: Any, timeline: Any, covering: Any) -> None:
        calls.append(timeline.name)
        real_check(self, timeline, covering)

    compare._Verifier.check = counting  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        compare._Verifier.check = real_check  # type: ignore[method-assign]
