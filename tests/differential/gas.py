"""GNU as as an oracle: ``as --gsframe`` (SFrame V1) read back with ``readelf --sframe``.

Only meaning is compared, never bytes: V1's layout differs from V2.  Each
function becomes ``{(section, offset): (size, [(start, (base, cfa, fp)), ...])}``
where ``fp`` is None when readelf prints ``u``.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

_FUNC = re.compile(r"^\s+func idx \[(\d+)\]: pc = 0x([0-9a-f]+), size = (\d+) bytes")
_FRE = re.compile(r"^\s+([0-9a-f]{16})\s+(sp|fp)\+(-?\d+)\s+(u|c[+-]\d+)\s+(\S+)")
_RELOC = re.compile(r"^([0-9a-f]+)\s+[0-9a-f]+\s+R_X86_64_PC32\s+[0-9a-f]+\s+(\S+) \+ ([0-9a-f]+)")

Meaning = tuple


def normalise(size: int, rows: list[tuple[int, Meaning]]) -> tuple[tuple[int, Meaning], ...]:
    """Rows as a step function over [0, size): later duplicates win, equal neighbours merge."""
    by_start: dict[int, Meaning] = {}
    for start, meaning in rows:
        if start < size:
            by_start[start] = meaning
    out: list[tuple[int, Meaning]] = []
    for start in sorted(by_start):
        if out and out[-1][1] == by_start[start]:
            continue
        out.append((start, by_start[start]))
    return tuple(out)


def gas_sframe(asm: Path, workdir: Path) -> tuple[dict, str]:
    """Assemble with ``as --gsframe``; return the functions it describes and its stderr."""
    obj = workdir / (asm.stem + ".gas.o")
    proc = subprocess.run(["as", "--gsframe", str(asm), "-o", str(obj)],
                          capture_output=True, text=True, check=True)
    text = subprocess.run(["readelf", "--sframe", str(obj)], capture_output=True, text=True,
                          check=True).stdout
    relocs = subprocess.run(["readelf", "-rW", str(obj)], capture_output=True, text=True,
                            check=True).stdout
    starts = _sframe_relocs(relocs)
    functions: dict = {}
    current = None
    for line in text.splitlines():
        match = _FUNC.match(line)
        if match:
            index, pc, size = int(match.group(1)), int(match.group(2), 16), int(match.group(3))
            current = (pc, size, [])
            functions[starts[index]] = current
            continue
        match = _FRE.match(line)
        if match and current is not None:
            start = int(match.group(1), 16) - current[0]
            fp = None if match.group(4) == "u" else int(match.group(4)[1:])
            current[2].append((start, (match.group(2), int(match.group(3)), fp)))
    result = {key: (size, normalise(size, rows)) for key, (_, size, rows) in functions.items()}
    return result, proc.stderr


def _sframe_relocs(text: str) -> list[tuple[str, int]]:
    """(section, addend) of each .rela.sframe entry, in offset order."""
    out = []
    in_sframe = False
    for line in text.splitlines():
        if line.startswith("Relocation section"):
            in_sframe = "'.rela.sframe'" in line
            continue
        if in_sframe:
            match = _RELOC.match(line)
            if match:
                out.append((int(match.group(1), 16), match.group(2), int(match.group(3), 16)))
    return [(name, addend) for _, name, addend in sorted(out)]
