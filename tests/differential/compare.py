"""Compare our SFrame with GNU as's, function by function, rule by rule."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from cfi2sframe import convert_asm, decode_sframe
from tests.conftest import meaning

from .gas import gas_sframe, normalise


@dataclass
class Tally:
    """Counts and details over a corpus."""

    files: int = 0
    agree: int = 0
    mismatches: list = field(default_factory=list)
    ours_only: Counter = field(default_factory=Counter)
    gas_only: Counter = field(default_factory=Counter)
    gas_only_detail: list = field(default_factory=list)
    ours_only_detail: list = field(default_factory=list)

    def summary(self) -> str:
        return (f"{self.files} files: {self.agree} functions with the same rule at every PC, "
                f"{len(self.mismatches)} differ; only ours: {dict(self.ours_only)}; "
                f"only GNU as: {dict(self.gas_only)}")


def ours(asm: Path) -> tuple[dict, dict]:
    """Our functions (as ``gas_sframe`` shapes them) and our skips by (section, start)."""
    conversion = convert_asm(asm.read_text(), str(asm))
    decoded = decode_sframe(conversion.raw())
    functions = {}
    for func, fde in zip(conversion.functions, decoded.fdes, strict=True):
        assert fde.start_address == func.start and fde.size == func.size
        rows = []
        for fre in fde.fres:
            base, cfa, fp, ra = meaning(decoded, fre)
            assert ra == ("cfa", -8), ra
            rows.append((fre.start, (base, cfa, fp)))
        functions[(func.section, func.start)] = (func.size, normalise(func.size, rows))
    skips = {(s.section, s.start): s for s in conversion.skips}
    return functions, skips


def compare_file(asm: Path, workdir: Path, tally: Tally) -> None:
    mine, skips = ours(asm)
    theirs, gas_messages = gas_sframe(asm, workdir)
    tally.files += 1
    for key in sorted(set(mine) | set(theirs)):
        if key in mine and key in theirs:
            if mine[key] == theirs[key]:
                tally.agree += 1
            else:
                tally.mismatches.append((asm.name, key, mine[key], theirs[key]))
        elif key in mine:
            tally.ours_only["gas 2.40 leaves it out"] += 1
            tally.ours_only_detail.append((asm.name, key, gas_messages))
        else:
            skip = skips.get(key)
            reason = skip.reason if skip else "not found by us"
            tally.gas_only[reason] += 1
            tally.gas_only_detail.append((asm.name, key, skip, theirs[key]))
