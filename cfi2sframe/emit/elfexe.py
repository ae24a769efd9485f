"""Add a loadable ``.sframe`` and a ``PT_GNU_SFRAME`` program header to a linked ELF file.

Growing the program header table of a linked file safely (moving it, keeping
``PT_PHDR`` covered by a load segment, shifting what follows) is what LIEF does
well, so LIEF adds the section, its load segment and one spare program header.
We then fill in the section bytes, whose PC-relative start fields depend on the
address LIEF chose, and turn the spare header into ``PT_GNU_SFRAME``.
"""

from __future__ import annotations

import os
import struct
import tempfile
from collections.abc import Callable

from ..errors import Cfi2SframeError
from ..sframe.encode import SectionImage

PT_NOTE, PT_GNU_SFRAME = 4, 0x6474E554
SHT_GNU_SFRAME = 0x6FFFFFF4
PF_R = 4


def add_loadable_sframe(data: bytes, image: SectionImage, where: str,
                        rebuild: Callable[[bytes], SectionImage]) -> tuple[bytes, int]:
    """The linked ELF64 ``data`` with SFrame added; returns (file, section address).

    LIEF may move code to make room for the program headers, so the section is
    built again (``rebuild``) from the CFI of the rewritten file; only its size
    is taken from ``image``.
    """
    try:
        import lief
    except ImportError:
        raise Cfi2SframeError(where, "--emit elf needs LIEF (pip install lief)") from None
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise Cfi2SframeError(where, "--emit elf needs a 64-bit little-endian ELF file")
    size = len(image.to_bytes(0, lambda func: 0x1000)) if image.functions else len(
        image.to_bytes(0, lambda func: 0))
    with tempfile.TemporaryDirectory(prefix="cfi2sframe-") as tmp:
        src, dst = os.path.join(tmp, "in"), os.path.join(tmp, "out")
        with open(src, "wb") as handle:
            handle.write(data)
        lief.logging.disable()
        binary = lief.parse(src)
        if binary is None:
            raise Cfi2SframeError(where, "LIEF cannot parse this ELF file")
        if binary.get_section(".sframe") is not None:
            raise Cfi2SframeError(where, "the file already has an .sframe section")
        section = lief.ELF.Section(".sframe")
        section.type = lief.ELF.Section.TYPE.PROGBITS
        section.flags = lief.ELF.Section.FLAGS.ALLOC
        section.content = [0] * size
        section.alignment = 8
        binary.add(section, loaded=True)
        spare = lief.ELF.Segment()
        spare.type = lief.ELF.Segment.TYPE.NOTE
        spare.flags = lief.ELF.Segment.FLAGS.R
        binary.add(spare)
        binary.write(dst)
        with open(dst, "rb") as handle:
            out = bytearray(handle.read())
    address, offset = _patch_section_header(out, size, where)
    final = rebuild(bytes(out))
    sframe = final.to_bytes(address, lambda func: func.start)
    if len(sframe) != size:
        raise Cfi2SframeError(where, "the SFrame section changed size after relinking")
    out[offset : offset + size] = sframe
    _patch_spare_segment(out, address, offset, size, where)
    return bytes(out), address


def _section_headers(out: bytearray) -> tuple[int, int, int, int]:
    (shoff,) = struct.unpack_from("<Q", out, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", out, 0x3A)
    return shoff, shentsize, shnum, shstrndx


def _patch_section_header(out: bytearray, size: int, where: str) -> tuple[int, int]:
    shoff, entsize, count, strndx = _section_headers(out)
    names_at, names_size = struct.unpack_from("<QQ", out, shoff + strndx * entsize + 24)
    names = bytes(out[names_at : names_at + names_size])
    for i in range(count):
        at = shoff + i * entsize
        name, _, _, addr, offset, sec_size = struct.unpack_from("<IIQQQQ", out, at)
        if names[name : names.find(b"\0", name)] == b".sframe":
            if sec_size < size:
                raise Cfi2SframeError(where, "the added .sframe section is too small")
            # LIEF may round the section up; the section is exactly the SFrame data.
            struct.pack_into("<I", out, at + 4, SHT_GNU_SFRAME)
            struct.pack_into("<Q", out, at + 32, size)
            return addr, offset
    raise Cfi2SframeError(where, "LIEF did not add the .sframe section")


def _patch_spare_segment(out: bytearray, address: int, offset: int, size: int,
                         where: str) -> None:
    (phoff,) = struct.unpack_from("<Q", out, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", out, 0x36)
    spare = None
    for i in range(phnum):
        at = phoff + i * phentsize
        kind, _, _, _, _, filesz, memsz, _ = struct.unpack_from("<IIQQQQQQ", out, at)
        if kind == PT_NOTE and filesz == 0 and memsz == 0:
            spare = at
    if spare is None:
        raise Cfi2SframeError(where, "no spare program header to describe .sframe")
    struct.pack_into("<IIQQQQQQ", out, spare, PT_GNU_SFRAME, PF_R, offset, address, address,
                     size, size, 8)
