"""Does the assembler's own CFI say what the directives say?

The assembler's run leaves the object it wrote, with its ``.eh_frame`` (or
``.debug_frame``).  Decoding it and comparing each function with the timeline we
built from the directives, PC by PC, catches an assembler that encodes the
directives wrongly (clang 14 after ``.cfi_restore_state`` with
``.cfi_adjust_cfa_offset``) and any mistake of ours, before SFrame built from one
and DWARF from the other disagree in a user's program.  A unit whose functions the
FDEs placed (each FDE with exactly its function's operations and CIE) agrees by
construction and is not compared (``AsmConversion.assembler_disagreements``).
"""

from __future__ import annotations

from ..arch.base import Arch
from ..dwarf.cfi import Cfi, RowsCache
from ..model import Row, Timeline
from ..sframe.text import row_words
from ..typed import NamedTuple
from .compare import differing_ranges


class Disagreement(NamedTuple):
    """Where the assembler's CFI for a function differs from the directives: offsets
    [start, end) in the function, and each side's row there (None: no row)."""

    timeline: Timeline
    start: int
    end: int
    directives: Row | None
    assembler: Row | None

    def message(self, arch: Arch) -> str:
        t = self.timeline
        return (f"the assembler's CFI for '{t.name}' differs from the directives at "
                f"[{t.start + self.start:#x}, {t.start + self.end:#x}): directives "
                f"{row_words(self.directives, arch)}; assembler "
                f"{row_words(self.assembler, arch)} [assembler-disagrees]")


def assembler_disagreements(timelines: tuple[Timeline, ...], assembled: Cfi
                            ) -> list[Disagreement]:
    """Every PC range where ``timelines`` (from the directives) and ``assembled`` (the
    CFI of the assembler's object: the same functions) recover registers differently.
    Functions are matched by section and start; invalid ones are left to the caller.

    Both sides hand out one rows tuple for functions whose CFI is the same, so each
    pair of rows tuples (and size) is compared once.
    """
    theirs = {(fde.section, fde.start): fde for fde in assembled.fdes}
    cache: RowsCache = {}
    out = []
    compared: dict[tuple[int, int, int], list[tuple[int, int, object, object]]] = {}
    for timeline in timelines:
        fde = theirs.get((timeline.section, timeline.start))
        if timeline.invalid is not None or fde is None:
            continue
        rows, invalid = assembled.rows(fde, cache)
        if invalid is not None:
            continue
        key = (id(timeline.rows), id(rows), timeline.size)  # both alive: ids unique
        ranges = compared.get(key)
        if ranges is None:
            mine = [(row.start, row._replace(start=0)) for row in timeline.rows]
            found = [(row.start, row._replace(start=0)) for row in rows]
            ranges = compared[key] = list(differing_ranges(mine, found, timeline.size))
        for start, end, ours, asm in ranges:
            out.append(Disagreement(timeline, start, end, _row(ours), _row(asm)))
    return out


def _row(value: object) -> Row | None:
    return value if isinstance(value, Row) else None
