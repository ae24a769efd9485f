"""What the known SFrame readers require of a linked file, as checks with citations.

- glibc 2.42 ``backtrace()`` (``sysdeps/generic/sframe-read.c``, ``--enable-sframe``):
  reads V2 only, finds the section through ``PT_GNU_SFRAME``, binary-searches the
  FDEs (``SFRAME_F_FDE_SORTED``), and has SFrame support on x86-64 and AArch64.
- The Linux kernel's deferred user unwinder (``unwind_deferred: Implement sframe
  handling``, v13, Jan 2026): V3 only, ``SFRAME_F_FDE_FUNC_START_PCREL``, no
  auxiliary header, sorted FDEs, non-zero FDE and FRE counts, found through
  ``PT_GNU_SFRAME``; AMD64, AArch64 and s390x.
"""

from __future__ import annotations

from collections.abc import Callable

from ..arch import by_sframe_abi
from ..elf.read import PT_GNU_SFRAME, open_elf
from ..errors import decoding
from ..sframe.decode import DecodedSection
from ..sframe.format import F_FDE_FUNC_START_PCREL, F_FDE_SORTED
from ..sframe.load import load_sframe
from ..typed import NamedTuple


class Facts(NamedTuple):
    """What the checks look at: the decoded section, and where the file says it is."""

    section: DecodedSection
    linked: bool
    segment: tuple[int, int] | None  # PT_GNU_SFRAME (address, size), if any
    placed: tuple[int, int]  # the .sframe section (address, size)


class Requirement(NamedTuple):
    """One thing a reader needs; ``check`` gives None when met, else what the file has."""

    text: str
    source: str
    check: Callable[[Facts], str | None]


def _version(wanted: int) -> Callable[[Facts], str | None]:
    return lambda f: None if f.section.version == wanted else f"version {f.section.version}"


def _flag(flag: int, name: str) -> Callable[[Facts], str | None]:
    return lambda f: None if f.section.flags & flag else f"{name} not set"


def _sorted(f: Facts) -> str | None:
    starts = [fde.start_address for fde in f.section.fdes]
    if not f.section.flags & F_FDE_SORTED:
        return "SFRAME_F_FDE_SORTED not set"
    if starts != sorted(starts):
        return "the flag is set but the FDEs are not in address order"
    return None


def _segment(f: Facts) -> str | None:
    if not f.linked:
        return "not a linked file (readers look at programs and shared libraries)"
    if f.segment is None:
        return "no PT_GNU_SFRAME program header"
    if f.segment[0] != f.placed[0] or f.segment[1] < f.placed[1]:
        return (f"PT_GNU_SFRAME covers [{f.segment[0]:#x}, +{f.segment[1]:#x}), the section "
                f"is at [{f.placed[0]:#x}, +{f.placed[1]:#x})")
    return None


def _abi(allowed: tuple[str, ...]) -> Callable[[Facts], str | None]:
    """The section's target is one of ``allowed`` (names), else its ABI's name."""
    def check(f: Facts) -> str | None:
        arch = by_sframe_abi(f.section.abi)  # the decoder admits known ids only
        return None if arch.name in allowed else arch.sframe_abi_name
    return check


def _no_aux(f: Facts) -> str | None:
    size = f.section.auxhdr_len
    return None if size == 0 else f"an auxiliary header of {size} bytes"


def _counts(f: Facts) -> str | None:
    if not f.section.fdes:
        return "no FDEs"
    if not any(fde.fres for fde in f.section.fdes):
        return "no FREs"
    return None


def _no_flex(f: Facts) -> str | None:
    flex = [fde for fde in f.section.fdes if fde.flex]
    if not flex:
        return None
    return (f"{len(flex)} FLEX FDE{'s' if len(flex) > 1 else ''} (first: func idx "
            f"[{flex[0].index}] at {flex[0].start_address:#x}); convert with --no-flex")


GLIBC = "glibc 2.42 sysdeps/generic/sframe-read.c"
KERNEL = "kernel unwind_deferred sframe v13 (kernel/unwind/sframe.c)"
CONSUMERS: dict[str, tuple[str, tuple[Requirement, ...]]] = {
    "glibc": ("glibc 2.42 backtrace()", (
        Requirement("SFrame version 2 (glibc 2.42 reads no other)", GLIBC, _version(2)),
        Requirement("FDEs sorted by address, SFRAME_F_FDE_SORTED set (binary search)", GLIBC,
                    _sorted),
        Requirement("a PT_GNU_SFRAME program header for the section (found through "
                    "dl_iterate_phdr)", GLIBC, _segment),
        Requirement("ABI AMD64 or AArch64 little-endian (the targets with SFrame support)",
                    GLIBC, _abi(("x86_64", "aarch64"))),
    )),
    "kernel": ("Linux deferred user unwinder", (
        Requirement("SFrame version 3 (the series reads no other)", KERNEL, _version(3)),
        Requirement("SFRAME_F_FDE_FUNC_START_PCREL set", KERNEL,
                    _flag(F_FDE_FUNC_START_PCREL, "SFRAME_F_FDE_FUNC_START_PCREL")),
        Requirement("no auxiliary header", KERNEL, _no_aux),
        Requirement("FDEs sorted by address, SFRAME_F_FDE_SORTED set", KERNEL, _sorted),
        Requirement("non-zero FDE and FRE counts", KERNEL, _counts),
        Requirement("default FDEs only: no FLEX FDE (the series up to v13 reads none)",
                    KERNEL, _no_flex),
        Requirement("a PT_GNU_SFRAME program header for the section", KERNEL, _segment),
        Requirement("ABI AMD64, AArch64 or s390x", KERNEL,
                    _abi(("x86_64", "aarch64", "aarch64_be", "s390x"))),
    )),
}


def check_consumer(consumer: str, facts: Facts) -> list[tuple[Requirement, str | None]]:
    """Each requirement of ``consumer`` with None (met) or what the file has instead."""
    return [(req, req.check(facts)) for req in CONSUMERS[consumer][1]]


def facts_of(path: str, data: bytes) -> Facts:
    """The facts of an ELF file's (or a raw section's) SFrame."""
    loaded = load_sframe(path, data)
    if not loaded.is_elf:
        return Facts(loaded.section, False, None, (0, len(data)))
    with decoding(path):
        view = open_elf(data, "ELF file")
        segments = view.segments()
    section = view.section(loaded.section_name)
    placed = (section.addr, section.size) if section is not None else (0, 0)
    segment = next(((seg.vaddr, seg.memsz) for seg in segments if seg.kind == PT_GNU_SFRAME),
                   None)
    return Facts(loaded.section, loaded.elf_type != "ET_REL", segment, placed)
