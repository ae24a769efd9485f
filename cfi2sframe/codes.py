"""The base of the reason-code enums (``reasons.SframeReason``,
``compact_reasons.CompactReason``), in a module of its own so that each of the two
can be imported without the other (and ``basics``, which every command loads, makes
no enum class more: ~0.3M instructions)."""

from __future__ import annotations

from .basics import Name


class Code(Name):
    """A reason code: its repr is the code's (``'ra-undefined'``), so a table of counts
    prints as it did when codes were strings."""

    def __repr__(self) -> str:
        return repr(self.value)
