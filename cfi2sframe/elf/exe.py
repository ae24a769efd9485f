"""Add a loadable ``.sframe`` and a ``PT_GNU_SFRAME`` program header to a linked ELF file.

Growing the program header table of a linked file safely (moving it, keeping
``PT_PHDR`` covered by a load segment, shifting what follows) is what LIEF does
well, so LIEF adds the section, its load segment and one spare program header.
We then fill in the section bytes, whose PC-relative start fields depend on the
address LIEF chose, and turn the spare header into ``PT_GNU_SFRAME``.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable

from ..errors import Cfi2SframeError
from ..sframe.encode import SectionImage
from .read import PT_GNU_SFRAME, PT_LOAD, PT_NOTE, SHT_GNU_SFRAME, open_elf

PF_R = 4


def add_loadable_sframe(data: bytes, image: SectionImage, where: str,
                        rebuild: Callable[[bytes], SectionImage],
                        replace: bool = False) -> tuple[bytes, int]:
    """The linked ELF64 ``data`` with SFrame added; returns (file, section address).

    LIEF may move code to make room for the program headers, so the section is
    built again (``rebuild``) from the CFI of the rewritten file; only its size
    is taken from ``image``.  ``replace``: a ``.sframe`` already there is renamed
    ``.sframe.old`` (its bytes stay, nothing reads them) and its ``PT_GNU_SFRAME``
    is pointed at the new section.
    """
    try:
        import lief
    except ImportError:
        raise Cfi2SframeError(where, "--emit elf needs LIEF (pip install lief)") from None
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise Cfi2SframeError(where, "--emit elf needs a 64-bit little-endian ELF file")
    size = image.size
    # In memory from end to end: nothing on disk can be left truncated (a full
    # disk once made LIEF write half a file without a word).
    lief.logging.disable()
    binary = lief.ELF.parse(io.BytesIO(data))
    if binary is None:
        raise Cfi2SframeError(where, "LIEF cannot parse this ELF file")
    existing = binary.get_section(".sframe")
    if existing is not None and not replace:
        raise Cfi2SframeError(where, "the file already has an .sframe section; --replace "
                                     "regenerates it from the DWARF CFI")
    if existing is not None:  # no longer an SFrame section, by name or by type
        existing.name = ".sframe.old"
        existing.type = lief.ELF.Section.TYPE.PROGBITS
    has_segment = any(seg.kind == PT_GNU_SFRAME
                      for seg in open_elf(data, "ELF file").segments())
    section = lief.ELF.Section(".sframe")
    section.type = lief.ELF.Section.TYPE.PROGBITS
    section.flags = int(lief.ELF.Section.FLAGS.ALLOC)
    section.content = [0] * size
    section.alignment = 8
    binary.add(section, loaded=True)
    if not has_segment:
        spare = lief.ELF.Segment()
        spare.type = lief.ELF.Segment.TYPE.NOTE
        spare.flags = lief.ELF.Segment.FLAGS.R
        binary.add(spare)
    builder = lief.ELF.Builder(binary)
    builder.build()
    out = bytearray(builder.get_build())
    _check_program_header_place(out, where)
    address, offset = _patch_section_header(out, size, where)
    final = rebuild(bytes(out))
    sframe = final.to_bytes(address, lambda func: func.start, where)
    if len(sframe) != size:
        raise Cfi2SframeError(where, "the SFrame section changed size after relinking")
    out[offset : offset + size] = sframe
    _patch_spare_segment(out, address, offset, size, where)
    return bytes(out), address


def _check_program_header_place(out: bytearray, where: str) -> None:
    """Refuse a file whose moved program header table a loader would not find.

    Linux before 5.18 and qemu-user take AT_PHDR as (first segment's address -
    its offset) + e_phoff; newer kernels use the segment that holds the table.
    Where the two differ (LIEF had to put the table in a new segment, as for
    static executables), the program would crash at start on the former.
    """
    segments = open_elf(bytes(out), "ELF file").segments()
    (phoff,) = struct.unpack_from("<Q", out, 0x20)
    loads = [seg for seg in segments if seg.kind == PT_LOAD]
    if not loads:
        return
    first = min(loads, key=lambda seg: seg.offset)
    holder = next((seg for seg in loads if seg.offset <= phoff < seg.offset + seg.filesz),
                  None)
    if holder is None or holder.vaddr - holder.offset != first.vaddr - first.offset:
        raise Cfi2SframeError(where, "--emit elf had to move the program header table "
                                     "where Linux before 5.18 and qemu-user do not look "
                                     "for it (a static executable?); the result would not "
                                     "start there. Use --emit raw and link .sframe in")


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
    spare = None
    for seg in open_elf(bytes(out), "ELF file").segments():
        if seg.kind == PT_NOTE and seg.filesz == 0 and seg.memsz == 0 \
                or seg.kind == PT_GNU_SFRAME:
            spare = seg.header_at
    if spare is None:
        raise Cfi2SframeError(where, "no spare program header to describe .sframe")
    struct.pack_into("<IIQQQQQQ", out, spare, PT_GNU_SFRAME, PF_R, offset, address, address,
                     size, size, 8)


def replace_in_place(data: bytes, build: Callable[[int], bytes], where: str) -> bytes | None:
    """``data`` with its ``.sframe`` contents replaced where they are, or None when the
    new section is larger than the old one or no ``PT_GNU_SFRAME`` describes it.

    ``build(address)`` gives the new section placed at ``address``.  Nothing
    moves: the bytes past the new end are zeroed, and the section header and
    ``PT_GNU_SFRAME`` get the new size (64-bit files, either byte order).
    """
    view = open_elf(data, "ELF file")
    old = view.section(".sframe")
    if old is None or not view.is64:
        return None
    segment_at = next((seg.header_at for seg in view.segments()
                       if seg.kind == PT_GNU_SFRAME and seg.vaddr == old.addr), None)
    if segment_at is None:
        return None
    sframe = build(old.addr)
    if len(sframe) > old.size:
        return None
    order = "<" if view.little_endian else ">"
    out = bytearray(data)
    out[old.offset : old.offset + old.size] = sframe + bytes(old.size - len(sframe))
    struct.pack_into(order + "Q", out, old.header_at + 32, len(sframe))
    struct.pack_into(order + "QQ", out, segment_at + 32, len(sframe), len(sframe))
    return bytes(out)

