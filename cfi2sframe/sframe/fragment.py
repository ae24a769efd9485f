"""Assembly output: the section as data, function starts as PC-relative expressions.

The assembler then makes one relocation per FDE (``R_X86_64_PC32`` for the
32-bit V2 start field, ``R_X86_64_PC64`` for V3's 64-bit one), exactly as it
does for ``.eh_frame``.
"""

from __future__ import annotations

from collections.abc import Callable

from ..elf.read import SHT_GNU_SFRAME
from .encode import SectionImage
from .format import SFrameFunction


def _bytes_lines(data: bytes, per_line: int = 16) -> list[str]:
    return [
        "\t.byte " + ", ".join(f"{b:#04x}" for b in data[i : i + per_line])
        for i in range(0, len(data), per_line)
    ]


def anchor_expression(func: SFrameFunction) -> str | None:
    """``symbol`` or ``symbol + N`` naming the function start, from the source's symbols."""
    if func.anchor is None:
        return None
    symbol, delta = func.anchor
    quoted = symbol if symbol.replace("_", "a").replace(".", "a").replace("$", "a").isalnum() \
        else f'"{symbol}"'
    return quoted if delta == 0 else f"{quoted} + {delta}"


def section_asm(image: SectionImage, start_of: Callable[[SFrameFunction], str | None],
                comment: str = "#") -> str:
    """Assembly that reproduces ``image`` in a ``.sframe`` section of type SHT_GNU_SFRAME."""
    lines = [
        f"{comment} SFrame section written by cfi2sframe",
        f'\t.pushsection .sframe,"a",@{SHT_GNU_SFRAME:#x}',
        "\t.p2align 3",
    ]
    lines += _bytes_lines(image.header)
    for func, tail in zip(image.functions, image.fde_tails, strict=False):
        start = start_of(func)
        if start is None:
            raise ValueError(func.name)
        lines.append(f"\t{comment} FDE for {func.name}")
        lines.append(f"\t{'.long' if image.start_size == 4 else '.quad'} ({start}) - .")
        lines += _bytes_lines(tail)
    lines.append(f"\t{comment} FREs")
    lines += _bytes_lines(image.fres)
    if image.padding:
        lines.append(f"\t{comment} padding to {image.align} bytes (s390x)")
        lines += _bytes_lines(image.padding)
    lines.append("\t.popsection")
    return "\n".join(lines) + "\n"
