"""Regular expressions compiled when first used, not at import.

``re`` compiles in Python: 0.3-1.4M instructions a pattern.  Compiled at import, every
pattern of the frontend's modules was paid for by each ``.s`` conversion, most of them
for statements a small file never holds (assignments, labels before a statement,
``.addrsig``, an Apple target's registers, an assembler error): 5.6M of its 157M."""

from __future__ import annotations

import re
from functools import cache

TYPE_CHECKING = False  # (as type checkers read it: ``cli.early`` loads no ``typing``)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import AnyStr


def deferred(pattern: AnyStr, flags: int = 0) -> Callable[[], re.Pattern[AnyStr]]:
    """What gives ``re.compile(pattern, flags)``, compiled the first time it is called
    and the same object after."""
    return cache(lambda: re.compile(pattern, flags))
