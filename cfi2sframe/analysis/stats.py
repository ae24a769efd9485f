"""Coverage and size figures for one ELF file: what ``cfi2sframe stats`` prints."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..convert import convert_elf
from ..elf.read import open_elf
from ..files import read_bytes


def file_stats(path: str, version: int = 2) -> dict[str, Any]:
    """FDE counts, section sizes and skip reasons for one ELF file."""
    data = read_bytes(path)
    conversion = convert_elf(path, data, version)
    view = open_elf(data, "ELF file")  # cannot fail: convert_elf read these headers
    sizes = {}
    for name in (".eh_frame", ".eh_frame_hdr"):
        section = view.section(name)
        sizes[name] = section.size if section is not None else 0
    return {"file": path, "fdes": conversion.fde_count, "emitted": len(conversion.functions),
            "eh_frame_bytes": sizes[".eh_frame"], "eh_frame_hdr_bytes": sizes[".eh_frame_hdr"],
            "sframe_bytes": len(conversion.raw()),
            "skipped": dict(Counter(skip.reason for skip in conversion.skips).most_common())}
