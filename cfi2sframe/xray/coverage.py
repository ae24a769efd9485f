"""Whether a binary's unwind information covers its XRay sleds (issue 41): a tracer
that unwinds at an entry or exit sled (a profiler's stack at a call boundary) needs
an SFrame or ``.eh_frame`` FDE there.  Ranges in, answers out; the caller reads them
(``sframe.decode`` ``ranges``, ``elf.cfi``'s FDEs).

``sled_coverage`` answers which entry and exit sleds SFrame and ``.eh_frame`` cover;
``cli/xray.py`` reads the ranges (``sframe.decode.FdeTable.ranges``,
``elf.cfi.read_elf_cfi``) for ``verify TRACE --binary BIN``."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable
from itertools import accumulate

from ..typed import NamedTuple
from .instr_map import CALL_SLEDS, InstrMap, Sled, XrayFunction


class SledCover(NamedTuple):
    """One entry or exit sled and what covers its address (None: the file has no
    such section)."""

    sled: Sled
    sframe: bool | None
    eh_frame: bool | None


class FunctionCover(NamedTuple):
    function: XrayFunction
    sleds: tuple[SledCover, ...]

    @property
    def uncovered(self) -> tuple[SledCover, ...]:
        """The sleds neither SFrame nor ``.eh_frame`` covers."""
        return tuple(s for s in self.sleds if not s.sframe and not s.eh_frame)


def covers(ranges: Iterable[tuple[int, int]]) -> Callable[[int], bool]:
    """``covered(address)`` for (start, size) ranges, which may overlap or be empty:
    the ranges starting at or before the address, the furthest end among them."""
    ordered = sorted((start, start + size) for start, size in ranges)
    starts = [start for start, _ in ordered]
    furthest = list(accumulate((end for _, end in ordered), max))

    def covered(address: int) -> bool:
        at = bisect_right(starts, address) - 1
        return at >= 0 and furthest[at] > address

    return covered


def sled_coverage(instr_map: InstrMap, sframe: Iterable[tuple[int, int]] | None,
                  eh_frame: Iterable[tuple[int, int]] | None) -> list[FunctionCover]:
    """Every function's entry and exit sleds (kinds 0 to 3; events are inside the
    body) against the SFrame and ``.eh_frame`` FDE ranges (None: no such section)."""
    in_sframe = covers(sframe) if sframe is not None else None
    in_eh = covers(eh_frame) if eh_frame is not None else None
    return [FunctionCover(function, tuple(
        SledCover(sled, in_sframe(sled.address) if in_sframe else None,
                  in_eh(sled.address) if in_eh else None)
        for sled in function.sleds if sled.kind in CALL_SLEDS))
        for function in instr_map.functions]
