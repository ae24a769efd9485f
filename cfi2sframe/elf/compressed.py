"""SHF_COMPRESSED sections, decompressed with a bound on what they may claim and give.

A compressed section says how large it is uncompressed (``ch_size``), and zlib
turns a few hundred kilobytes into gigabytes of zeros.  So the claim is checked
against ``Limits`` before anything is allocated, the data are inflated in
bounded steps, and a stream that gives more (or less) than it claimed is an
error: the work and memory follow the limit, never the file's word.

The limits are ``--max-section-size`` and ``--max-section-ratio``. ``section_contents``
gives a section's bytes, bounds checked and inflated when compressed: the CFI reader and
the ``.sframe`` loader share it.
"""

from __future__ import annotations

from ..errors import DecodeError
from ..typed import NamedTuple
from .read import SHF_COMPRESSED, ElfView, Section
from .structs import CHDR

ELFCOMPRESS_ZLIB, ELFCOMPRESS_ZSTD = 1, 2
_STEP = 1 << 20  # bytes inflated per step: the most the loop holds beyond the output


class Limits(NamedTuple):
    """How large a decompressed section may be: at most ``max_bytes``, and at most
    ``max_ratio`` times the size of the file holding it (CFI compresses 3-10x;
    a run of zeros 1000x)."""

    max_bytes: int = 1 << 30
    max_ratio: int = 64

    def allowed(self, file_size: int) -> int:
        return min(self.max_bytes, self.max_ratio * max(file_size, 1 << 16))


DEFAULT_LIMITS = Limits()


def decompress(raw: bytes, little: bool, is64: bool, file_size: int,
               limits: Limits = DEFAULT_LIMITS, header_at: int = 0) -> bytearray:
    """The contents of a compressed section from its bytes in the file (``Elf_Chdr``
    and the stream); ``DecodeError`` (at ``header_at``, the section header, or at an
    offset in ``raw``) for a claim beyond the limits, an unknown or broken stream, or
    one whose length is not what it claimed.  The caller names the section."""
    chdr = CHDR[is64]
    if len(raw) < chdr.size:
        raise DecodeError(header_at, "compressed section shorter than its header")
    kind, size = (chdr.read(raw, 0, field, little) for field in ("ch_type", "ch_size"))
    allowed = limits.allowed(file_size)
    if size > allowed:
        raise DecodeError(header_at, f"compressed section claims {size} bytes "
                                     f"uncompressed, more than the {allowed} allowed "
                                     "(--max-section-size, --max-section-ratio)")
    if kind == ELFCOMPRESS_ZSTD:
        raise DecodeError(header_at, "zstd-compressed sections are not supported "
                                     "(objcopy --decompress-debug-sections first)")
    if kind != ELFCOMPRESS_ZLIB:
        raise DecodeError(header_at, f"unknown compression type {kind}")
    import zlib  # (a C extension, ~2M instructions to load: an uncompressed file's never)

    inflater = zlib.decompressobj()
    out = bytearray()
    pending = memoryview(raw)[chdr.size:]
    try:
        while pending and len(out) <= size:
            out += inflater.decompress(pending, min(_STEP, size + 1 - len(out)))
            pending = memoryview(inflater.unconsumed_tail)
            if inflater.eof:
                break
        if not inflater.eof and len(out) <= size:
            out += inflater.flush()  # what zlib still holds: at most its window
    except zlib.error as exc:
        raise DecodeError(chdr.size, f"broken zlib stream: {exc}") from None
    if len(out) != size or not inflater.eof:
        grew = "more" if len(out) > size else "fewer"
        raise DecodeError(header_at, f"compressed section gives {grew} bytes than "
                                     f"the {size} it claims")
    return out  # mutable, for the relocations of an object: no copy of a large section


def section_contents(view: ElfView, section: Section,
                     limits: Limits = DEFAULT_LIMITS) -> bytes | bytearray:
    """A section's bytes as a reader sees them: checked against the file's end, and
    decompressed within ``limits`` when ``SHF_COMPRESSED`` (``DecodeError`` at the
    section header otherwise)."""
    end = section.offset + section.size
    if end > len(view.data):
        raise DecodeError(section.header_at, f"{section.name} ends at {end:#x}, past the "
                                             "end of the file")
    raw = view.data[section.offset:end]
    if section.flags & SHF_COMPRESSED:
        return decompress(raw, view.little_endian, view.is64, len(view.data), limits,
                          section.header_at)
    return raw
