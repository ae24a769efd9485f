"""Concatenate csmith assembly files into one large, valid .s (symbols renamed per file).

Usage: python benchmarks/make_big_asm.py OUT.s [MIN_LINES]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.corpus import csmith_asm  # noqa: E402

_DEFINED = re.compile(r"^([A-Za-z_.$][\w.$]*):", re.M)
_COMM = re.compile(r"^\s*\.(?:comm|lcomm)\s+([A-Za-z_.$][\w.$]*)", re.M)


def rename(text: str, suffix: str) -> str:
    """Give every symbol the file defines a per-file suffix."""
    names = set(_DEFINED.findall(text)) | set(_COMM.findall(text))
    if not names:
        return text
    pattern = re.compile(r"(?<![\w.$])(" + "|".join(sorted(map(re.escape, names), key=len,
                                                             reverse=True)) + r")(?![\w.$])")
    return pattern.sub(lambda m: m.group(1) + suffix, text)


def main() -> None:
    out = Path(sys.argv[1])
    min_lines = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
    parts, lines, seed = [], 0, 1
    while lines < min_lines:
        for path in csmith_asm(range(seed, seed + 10), ["O2", "O0"]):
            text = rename(path.read_text(), f"_b{len(parts)}")
            text = re.sub(r"^\s*\.(?:file|ident)\b.*$", "", text, flags=re.M)
            parts.append(text)
            lines += text.count("\n")
        seed += 10
    out.write_text("".join(parts))
    print(f"{out}: {lines} lines from {len(parts)} files")


if __name__ == "__main__":
    main()
