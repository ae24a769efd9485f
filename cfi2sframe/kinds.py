"""What an input is, told from its bytes before anything runs on it.

A file's name says nothing (``libfoo.a`` may be text, ``x.s`` an object): the kind
comes from magic numbers, and text is what an assembler can read.  Binary input that
is none of the kinds we read never reaches an assembler, which would print an error
for every line of it.

Kinds: ELF, ar and thin archives, Mach-O thin and universal, raw SFrame, a bare
``__unwind_info``, an XRay trace (``xray_byte_order``: its header), text, binary. The
magic numbers ``ELF_MAGIC`` and ``AR_MAGIC`` are written here and nowhere else in the
package: other modules ask ``is_elf``, ``is_archive`` or ``input_kind``.
``COMPACT_UNWIND_KINDS`` is what is read for compact unwind; ``refuse_unreadable`` gives
one located line for kinds the conversion does not read, before any assembler runs
(given the kind when it is known).
"""

from __future__ import annotations

from .basics import Name
from .errors import Cfi2SframeError
from .typed import TYPE_CHECKING

if TYPE_CHECKING:
    from .arch.base import ByteOrder


class Kind(Name):
    """An input's kind."""

    elf = "ELF"
    archive = "ar archive"
    thin_archive = "thin ar archive"
    macho = "Mach-O"
    fat_macho = "universal Mach-O"
    sframe = "SFrame section"
    unwind_info = "__unwind_info section"
    xray = "XRay trace"
    text = "text"
    binary = "binary"


ELF_MAGIC = b"\x7fELF"
AR_MAGIC = b"!<arch>\n"  # a static library (System V / GNU ar)
THIN_AR_MAGIC = b"!<thin>\n"
# Mach-O magic numbers as the file's first four bytes, both byte orders.
_MACHO = (b"\xce\xfa\xed\xfe", b"\xcf\xfa\xed\xfe", b"\xfe\xed\xfa\xce", b"\xfe\xed\xfa\xcf")
_FAT = (b"\xca\xfe\xba\xbe", b"\xca\xfe\xba\xbf")
_SFRAME_MAGIC = 0xDEE2
# Control characters other than whitespace; text has none but by accident.
_CONTROL = bytes(c for c in range(32) if chr(c) not in "\t\n\v\f\r") + b"\x7f"
_SAMPLE = 65536


# What reads each: the kinds whose unwind information is Apple's compact unwind.
COMPACT_UNWIND_KINDS = frozenset((Kind.macho, Kind.fat_macho, Kind.unwind_info))


def is_elf(data: bytes) -> bool:
    """An ELF file (its magic number; whether it is sound is the ELF reader's to say)."""
    return data[:4] == ELF_MAGIC


def is_archive(data: bytes) -> bool:
    """A static library (System V / GNU ar; a thin one is not: its members are apart)."""
    return data[:8] == AR_MAGIC


def input_kind(data: bytes) -> Kind:
    """The kind of an input from its bytes."""
    head = data[:8]
    if is_elf(head):
        return Kind.elf
    if head == AR_MAGIC:
        return Kind.archive
    if head == THIN_AR_MAGIC:
        return Kind.thin_archive
    if head[:4] in _MACHO:
        return Kind.macho
    # A Java class file starts with 0xcafebabe too; its next word holds the class
    # version (45 and up), above the few slices a universal binary holds (file(1)
    # draws the line at 20 as well).
    if head[:4] in _FAT and 0 < int.from_bytes(head[4:8], "big") < 20:
        return Kind.fat_macho
    if len(head) >= 4 and head[2] in (1, 2, 3) and _SFRAME_MAGIC in (
            int.from_bytes(head[:2], "little"), int.from_bytes(head[:2], "big")):
        return Kind.sframe
    if _is_unwind_info(data):
        return Kind.unwind_info
    if xray_byte_order(data) is not None:
        return Kind.xray
    sample = data[:_SAMPLE]
    if b"\0" in sample:
        return Kind.binary
    control = sum(sample.count(c) for c in _CONTROL)
    return Kind.binary if control * 20 > len(sample) else Kind.text


# An XRay trace's header: u16 version, u16 type (0 basic mode: versions 1-3; 1 FDR:
# 1-5), in the producer's byte order, 32 bytes.
XRAY_TYPES = {0: range(1, 4), 1: range(1, 6)}
XRAY_HEADER_SIZE = 32


def xray_byte_order(data: bytes) -> ByteOrder | None:
    """The byte order in which ``data`` starts with an XRay trace header (a type and a
    version either type has had, so that verify can name a basic-mode header that
    claims an FDR version), None if it does not."""
    if len(data) < XRAY_HEADER_SIZE:
        return None
    orders: tuple[ByteOrder, ...] = ("little", "big")
    for order in orders:
        kind = int.from_bytes(data[2:4], order)
        if kind in XRAY_TYPES and int.from_bytes(data[0:2], order) in XRAY_TYPES[1] \
                and _xray_first_record(data, kind, order):
            return order
    return None


def _xray_first_record(data: bytes, kind: int, order: ByteOrder) -> bool:
    """What follows an XRay header, if anything: an FDR trace's first record starts a
    buffer (BufferExtents or NewBuffer), a basic-mode record's type is 0 or 1 (a few
    bytes of it do for a trace cut short)."""
    if len(data) == XRAY_HEADER_SIZE:
        return True
    if kind == 1:
        return data[XRAY_HEADER_SIZE] in (7 << 1 | 1, 0 << 1 | 1)
    return len(data) < XRAY_HEADER_SIZE + 2 or \
        int.from_bytes(data[XRAY_HEADER_SIZE:XRAY_HEADER_SIZE + 2], order) in (0, 1)


def _xray_words(data: bytes) -> str:
    """An XRay trace's mode and version, as ``dump`` names it."""
    order = xray_byte_order(data) or "little"
    mode = "FDR" if int.from_bytes(data[2:4], order) == 1 else "basic-mode"
    return f"{mode} version {int.from_bytes(data[0:2], order)}"


def _is_unwind_info(data: bytes) -> bool:
    """A bare ``__unwind_info`` (``compact --emit unwind-info``, an extracted one): its
    header (version 1, the three arrays one after the other from byte 28, as every
    writer lays them out) with the first-level index inside the file."""
    if len(data) < 28 or data[:4] != b"\1\0\0\0":
        return False
    words = [int.from_bytes(data[at:at + 4], "little") for at in range(4, 28, 4)]
    common_at, common, person_at, persons, index_at, index = words
    return (common_at == 28 and person_at == 28 + 4 * common
            and index_at == person_at + 4 * persons and index >= 1
            and index_at + 12 * index <= len(data))


_MACHO_CPUS = {7: "i386", 0x01000007: "x86-64", 12: "arm", 0x0100000C: "arm64"}
_MACHO_TYPES = {1: "object", 2: "executable", 6: "dynamic library", 8: "bundle"}


def _macho_words(data: bytes) -> str:
    """A thin Mach-O file's CPU and file type, as in ``file`` (``x86-64 object``)."""
    order: ByteOrder = "little" if data[:1] in (b"\xce", b"\xcf") else "big"
    cpu = int.from_bytes(data[4:8], order) if len(data) >= 8 else -1
    kind = int.from_bytes(data[12:16], order) if len(data) >= 16 else -1
    return (f"{_MACHO_CPUS.get(cpu, f'CPU type {cpu:#x}')} "
            f"{_MACHO_TYPES.get(kind, f'file type {kind}')}")


def refuse_unreadable(path: str, data: bytes, kind: Kind | None = None) -> Kind:
    """The input's kind (``kind``: told already, not again); a located one-line error
    for kinds the conversion does not read (archives, Mach-O) and for binary data that
    is none of the kinds we read."""
    kind = input_kind(data) if kind is None else kind
    if kind == Kind.archive:
        raise Cfi2SframeError(path, f"a static library ({kind}): conversion with --in-place "
                                    "or -o FILE.a converts its members (convert_archive); "
                                    "dump, stats and verify read them")
    if kind == Kind.thin_archive:
        raise Cfi2SframeError(path, f"a static library ({kind}): its members are files of "
                                    "their own; convert those")
    if kind == Kind.macho:
        raise Cfi2SframeError(path, f"a Mach-O {_macho_words(data)}: 'compact', 'dump', "
                                    "'lookup', 'verify' and 'stats' read Mach-O files "
                                    "(compact unwind); this command reads ELF files, "
                                    "assembly and raw SFrame sections")
    if kind == Kind.fat_macho:
        raise Cfi2SframeError(path, "a universal (fat) Mach-O file: 'compact', 'dump', "
                                    "'lookup', 'verify' and 'stats' read Mach-O files "
                                    "(compact unwind); this command reads ELF files, "
                                    "assembly and raw SFrame sections")
    if kind == Kind.unwind_info:
        raise Cfi2SframeError(path, "an __unwind_info section (Apple compact unwind): "
                                    "'compact', 'dump' and 'verify' read it; this command "
                                    "reads ELF files, assembly and raw SFrame sections")
    if kind == Kind.xray:
        raise Cfi2SframeError(path, f"an XRay trace ({_xray_words(data)}): 'dump', "
                                    "'verify' and 'stacks' read it; this command reads ELF "
                                    "files, assembly and raw SFrame sections")
    if kind == Kind.binary:
        raise Cfi2SframeError(path, "not assembly, ELF, an archive or SFrame (starts with "
                                    f"{data[:8].hex(' ')})")
    return kind
