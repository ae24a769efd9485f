"""One input file of a tree run -> one JSON record (the line ``--jsonl`` writes).

The record is the whole result of a file: a worker returns it, the journal
stores it, the summary adds records up.  Schema (``SCHEMA``; docs/trees.md, "Record
schema"): a new field may be added within a version; a field changes
meaning or goes away only with a new version.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Sequence

from ..arch import arch_for_machine
from ..elf.compressed import DEFAULT_LIMITS, Limits
from ..elf.read import open_elf_file
from ..errors import Cfi2SframeError, DecodeError, InternalError, decoding
from ..files import read_for_rewrite, rewrite
from ..kinds import Kind, input_kind, is_archive, is_elf, refuse_unreadable
from ..typed import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from typing import Any, Literal

    from ..analysis.compare import VerifyResult
    from ..convert import ElfConversion
    from ..dwarf.cfi import Cfi
    from ..elf.linked import OldKernels
    from ..elf.read import ElfView
    from ..linker import ObjectForm
    from ..macho.read import MachoView
    from ..sframe.lower import Skip

    Command = Literal["stats", "verify", "convert"]

SCHEMA = 1

# Every status a record can have; those in GOOD_STATUSES are not failures.
STATUSES = {
    "ok": "done",
    "no-cfi": "an ELF file without .eh_frame, .debug_frame or .sframe",
    "no-sframe": "(verify) an ELF file without .sframe, and nothing SFrame can describe",
    "has-sframe": "(conversion) kept as it is: it has .sframe (--replace regenerates it)",
    "object-kept": "(conversion) a relocatable object, kept as it is (--objects converts "
                   "objects too)",
    "nothing-to-describe": "(conversion) kept as it is: no function has SFrame, and a "
                           "section with no FDE breaks later links",
    "macho-kept": "(conversion) a Mach-O file, kept as it is: SFrame is for ELF ('stats', "
                  "'verify', 'dump' and 'compact' read its compact unwind)",
    "mismatch": "(verify) SFrame and the DWARF CFI disagree, or the layout is wrong",
    "error": "bad input: the file cannot be read or converted (the error says why)",
    "timeout": "the worker ran out of --timeout and was stopped",
    "crash": "the worker died (a signal) before it returned a record",
    "internal-error": "a bug of ours (please report it with the file)",
}
GOOD_STATUSES = ("ok", "no-cfi", "no-sframe", "has-sframe", "object-kept",
                 "nothing-to-describe", "macho-kept")


class Task(NamedTuple):
    """What to do with every file of a run (the same for all of them)."""

    command: Command
    sframe_version: int = 2
    replace: bool = False  # convert: regenerate an .sframe the file has
    old_kernels: OldKernels = "keep"  # convert: where the moved header table goes
    limits: Limits = DEFAULT_LIMITS  # how far a compressed section may expand
    preserve_dates: bool = False  # convert: keep the access and modification times
    objects: bool = False  # convert: rewrite relocatable objects too (crt1.o, archives' .o)
    flex: bool = True  # V3: FLEX FDEs allowed (False: --no-flex)
    # convert, objects and archive members: --linker-reads, and the version asked for
    # (None: what the linker merges; ``sframe_version`` is then the linked files' one).
    linker_reads: str = "auto"
    object_version: int | None = None
    # convert (--resume): a file with .sframe that is what this conversion writes is
    # recorded ok, not has-sframe (a killed run converted it, then lost its record)
    recognise: bool = False


# Task fields that do not change what a file's record says: the dates a conversion
# leaves (its bytes are the same) and how a kept file is told apart.
_NOT_OPTIONS = ("preserve_dates", "recognise")


def options_of(task: Task) -> dict[str, Any]:
    """The options a record was made with (``--resume`` redoes a file whose record has
    others), as JSON has them (a tuple, ``limits``, as a list: no ``json`` for one
    file's stats); every ``Task`` field but ``_NOT_OPTIONS``, so that a field added later
    counts until it is shown not to."""
    return {name: list(value) if isinstance(value, tuple) else value
            for name, value in task._asdict().items() if name not in _NOT_OPTIONS}


def described(record: dict[str, Any]) -> int:
    """The DWARF FDEs SFrame describes.  Not ``emitted``, the SFrame FDEs: a linker's
    PLT is one DWARF FDE and two SFrame FDEs, which read as "135 of 134".  Records
    written before the field (schema 1 allows adding it) count ``emitted``."""
    return int(record.get("described", record.get("emitted")) or 0)


def warm_up(task: Task) -> None:
    """Import what ``file_record`` runs for ``task`` on an ELF file of this machine's
    architecture or a static library, so that the workers forked for a run inherit it
    (importing it in each one cost more than the work on a small file), and nothing it
    does not run: this is the serial part of a tree run, before any worker starts."""
    from .. import convert  # noqa: F401
    from ..arch import ARCHES
    from ..dwarf import cfi  # noqa: F401
    from ..elf import archive, reloc  # noqa: F401
    from ..elf import cfi as elf_cfi  # noqa: F401
    from ..sframe import build, encode, fastpath, lower, pcmask  # noqa: F401

    ARCHES.get(os.uname().machine)  # (its module loads on the first look-up)
    if task.command == "stats":
        from ..analysis import stats  # noqa: F401
        return
    from ..analysis import compare  # noqa: F401
    from ..elf import layout  # noqa: F401
    from ..sframe import load  # noqa: F401
    if task.command == "convert":
        from .. import linker  # noqa: F401
        from ..elf import linked  # noqa: F401
    else:  # (verify reads a library's members as objects)
        from ..elf import obj  # noqa: F401


def empty_record(path: str, task: Task) -> dict[str, Any]:
    """A record with every field, none filled in yet."""
    return {"schema": SCHEMA, "path": path, "command": task.command, "status": "ok",
            "error": None, "size": None, "mtime_ns": None, "arch": None, "elf_type": None,
            "sframe_version": task.sframe_version, "fdes": None, "emitted": None,
            "skipped": {}, "eh_frame_bytes": None, "eh_frame_hdr_bytes": None,
            "sframe_bytes_in_file": None, "sframe_v2_bytes": None, "sframe_v3_bytes": None,
            "verify": None, "seconds": None, "max_rss_kib": None, "ino": None,
            "ctime_ns": None, "options": options_of(task)}


def failed_record(path: str, task: Task, status: str, error: str) -> dict[str, Any]:
    """The record of a file whose worker produced none (timeout, crash)."""
    record = empty_record(path, task)
    record.update(status=status, error=error)
    _stamp(record, path)
    return record


def file_record(path: str, task: Task, read_as: str | None = None) -> dict[str, Any]:
    """Do ``task`` on one file and describe the outcome; never raises for bad input
    (it becomes the record's error) nor for a bug of ours (status internal-error).

    ``read_as``: where the file is read from when ``path`` (the name recorded, as
    the user gave it) is not valid where this runs (a Dask worker).
    """
    started = time.perf_counter()
    record = empty_record(path, task)
    try:
        _fill(record, path, read_as or path, task)
    except Cfi2SframeError as exc:
        record.update(status="error", error=exc.summary)
    except DecodeError as exc:
        record.update(status="error", error=f"{path}: error: {exc}")
    except InternalError as exc:  # a check of our own output failed: said as it found it
        record.update(status="internal-error",
                      error=exc.message if exc.where == path else str(exc))
    except Exception as exc:  # a bug of ours: recorded as such, never as bad input
        record.update(status="internal-error", error=f"{type(exc).__name__}: {exc}")
    _stamp(record, read_as or path)
    record["seconds"] = round(time.perf_counter() - started, 4)
    return record


def _stamp(record: dict[str, Any], path: str) -> None:
    """The file as it is now (after a conversion wrote it): what ``--resume`` compares."""
    try:
        info = os.stat(path)
    except OSError:
        return
    record.update(identity(info))


def identity(info: os.stat_result) -> dict[str, int]:
    """What tells a file from another one under its name, or from itself changed: size
    and mtime, which ``cp -p``, ``tar`` and ``touch -r`` give another file too (and a
    reproducible build gives every file), and the inode and change time, which no one
    sets (a file renamed over the name, or written, chmodded or linked, has new ones)."""
    return {"size": info.st_size, "mtime_ns": info.st_mtime_ns, "ino": info.st_ino,
            "ctime_ns": info.st_ctime_ns}


def _fill(record: dict[str, Any], path: str, read_path: str, task: Task) -> None:
    data, read_stat = read_for_rewrite(read_path)  # the status: for --in-place
    kind = input_kind(data)
    if kind in (Kind.macho, Kind.fat_macho):
        _fill_macho(record, path, data, task)
        return
    if kind not in (Kind.elf, Kind.archive):
        refuse_unreadable(path, data)  # Mach-O, thin archives, binary data: one line
        what = ("a raw SFrame section ('dump' and 'lookup' read it)" if kind == Kind.sframe
                else "an empty file" if not data
                else "text (assembly converts with 'cfi2sframe FILE -o FILE.o')")
        raise Cfi2SframeError(path, f"{what}: {task.command} reads ELF files and static "
                                    "libraries")
    if is_archive(data):
        _fill_archive(record, path, read_path, data, read_stat, task)
        return
    _fill_data(record, path, data, task, read_path, read_stat)


def _fill_data(record: dict[str, Any], path: str, data: bytes, task: Task,
               read_path: str = "", read_stat: os.stat_result | None = None) -> None:
    """``_fill`` for a file's bytes (also an archive member's: ``read_stat`` None, and
    conversion is the archive's)."""
    from ..elf.cfi import read_elf_cfi

    view = open_elf_file(path, data)
    names = set(view.section_names)
    dwarf = ".eh_frame" in names or ".debug_frame" in names
    sframe = view.holds_sframe  # an empty .sframe (no FDE) counts as none
    _section_sizes(record, view)
    record["elf_type"] = view.elf_type
    if not dwarf and not sframe:
        record["status"] = "no-cfi"
        return
    if task.command == "convert":
        if sframe and not task.replace:
            if not (task.recognise and read_stat is not None and
                    _recognised(record, path, data, read_stat, task)):
                record["status"] = "has-sframe"
        elif view.elf_type == "ET_REL" and not task.objects:
            # A toolchain's objects (crt1.o, Scrt1.o) end up in every later link:
            # rewriting them is a choice, not a side effect of converting a tree.
            record["status"] = "object-kept"
        elif read_stat is not None:
            _convert(record, path, read_path, data, read_stat, task, view)
        return
    if task.command == "stats" and dwarf and _scanned(record, path, data, view, task, sframe):
        return
    # The CFI is read once, for both versions and the check (stats) or the check alone.
    checked = dwarf and sframe
    cfi = read_elf_cfi(path, data, task.limits, view=view) if dwarf else None
    if cfi is not None and task.command == "verify":  # as a stats record says them
        record.update(arch=arch_for_machine(cfi.machine, path, cfi.big_endian).name,
                      fdes=len(cfi.fdes))
    if task.command == "stats":
        for version in (2, 3):
            record[f"sframe_v{version}_bytes"] = _coverage(record, path, data, version,
                                                           task.limits, cfi, view)
    if cfi is not None and checked:
        _verify(record, path, data, task.limits, cfi, task.flex, view)
    elif task.command == "verify" and not sframe:
        _verify_made(record, path, data, task.limits, view, cfi)


def _fill_macho(record: dict[str, Any], path: str, data: bytes, task: Task) -> None:
    """A Mach-O file (each slice of a universal one): its compact unwind coverage
    (``macho``) for stats, and its check (``verify``) for both commands; a
    conversion keeps it."""
    if task.command == "convert":
        record["status"] = "macho-kept"
        return
    from ..compact.check import check_macho, macho_coverage
    from ..macho.read import CPU_ARCH, fat_slices, open_macho
    from ..macho.unwind import eh_frame

    with decoding(path, "Mach-O file"):
        if input_kind(data) == Kind.fat_macho:
            views = [open_macho(data, CPU_ARCH[cpu]) for cpu, _, _ in fat_slices(data)
                     if cpu in CPU_ARCH]
        else:
            views = [open_macho(data)]
        record["arch"] = "+".join(view.arch for view in views)
        cfis = [eh_frame(view, path) for view in views]
        slices = [macho_coverage(path, view, cfi) for view, cfi in zip(views, cfis,
                                                                        strict=True)]
        checks = [check_macho(path, view, cfi) for view, cfi in zip(views, cfis, strict=True)
                  if _has_unwind(view)]
    total: dict[str, Any] = {}
    for part in slices:
        for key, value in part.items():
            if isinstance(value, int):
                total[key] = total.get(key, 0) + value
            elif isinstance(value, dict):
                merged = total.setdefault(key, {})
                for reason, count in value.items():
                    merged[reason] = merged.get(reason, 0) + count
            else:
                total[key] = value if key not in total or total[key] == value else "mixed"
    record["macho"] = total
    record["fdes"] = total["fdes"]
    record["skipped"] = total["dwarf_reasons"]
    if not total["functions"]:
        record["status"] = "no-cfi"
        return
    record["verify"] = {"ok": all(c.ok for c in checks),
                        "checked": sum(c.checked + c.from_code for c in checks),
                        "mismatches": sum(len(c.problems) for c in checks), "missing": 0,
                        "extra": 0, "unevaluated": 0, "layout": 0,
                        "problems": [p for c in checks for p in c.problems]}
    if not record["verify"]["ok"]:
        record["status"] = "mismatch"


def _has_unwind(view: MachoView) -> bool:
    return view.section("__TEXT", "__unwind_info") is not None or \
        view.section("__LD", "__compact_unwind") is not None


def _section_sizes(record: dict[str, Any], view: ElfView) -> None:
    """The sizes of the file's unwind sections (``.sframe``: None when it has none)."""
    for name, key in ((".eh_frame", "eh_frame_bytes"), (".eh_frame_hdr", "eh_frame_hdr_bytes"),
                      (".sframe", "sframe_bytes_in_file")):
        section = view.section(name)
        record[key] = section.size if section is not None else (None if key.startswith(
            "sframe") else 0)


# What a static library's record adds up over its members (each a relocatable object).
_SUMMED = ("eh_frame_bytes", "eh_frame_hdr_bytes", "sframe_bytes_in_file", "fdes", "emitted",
           "described", "sframe_v2_bytes", "sframe_v3_bytes")


def _fill_archive(record: dict[str, Any], path: str, read_path: str, data: bytes,
                  read_stat: os.stat_result, task: Task) -> None:
    """A static library: its object members, each as ``_fill`` does a file, added up in
    the library's record (``members``: how many objects).  Conversion rewrites the
    library (``convert.convert_archive``) only with ``--objects``: its members are
    relocatable objects, which every later link takes in."""
    from ..elf.archive import read_archive

    with decoding(path, "ar archive"):
        members = [m for m in read_archive(data) if not m.special and is_elf(m.data)]
    record.update(elf_type="archive", members=len(members))
    for member in members:
        part = empty_record(path, task)
        _section_sizes(part, open_elf_file(f"{path}({member.name})", member.data))
        for key in ("eh_frame_bytes", "eh_frame_hdr_bytes", "sframe_bytes_in_file"):
            if part[key] is not None:
                record[key] = (record[key] or 0) + part[key]
    if task.command == "convert":
        if not task.objects:
            record["status"] = "object-kept"
        else:
            _convert_archive(record, path, read_path, data, read_stat, task)
        return
    if not members:
        record["status"] = "no-cfi"
        return
    statuses = []
    verify: dict[str, Any] = {}
    skipped: Counter[str] = Counter()
    parts = []
    for member in members:
        part = empty_record(f"{path}({member.name})", task)
        _fill_data(part, f"{path}({member.name})", member.data, task)
        part["archive"] = path
        parts.append(part)
        statuses.append(part["status"])
        for key in _SUMMED[3:]:  # the section sizes are added up above
            if part.get(key) is not None:
                record[key] = (record.get(key) or 0) + part[key]
        skipped.update(part["skipped"])
        record["arch"] = record["arch"] or part["arch"]
        for key, value in (part["verify"] or {}).items():
            if key == "ok":
                verify[key] = verify.get(key, True) and value
            elif key == "first_uncovered":  # the library's first, member by member
                verify[key] = verify.get(key) or value
            else:
                verify[key] = verify.get(key, 0) + value
    record["skipped"] = dict(skipped.most_common())
    record["verify"] = verify or None
    record["member_records"] = parts
    if "mismatch" in statuses:
        record["status"] = "mismatch"
    elif all(status == "no-cfi" for status in statuses):
        record["status"] = "no-cfi"
    elif task.command == "verify" and not verify:
        record["status"] = "no-sframe"


def per_member(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The records a run shows and counts for one input: each member of a static
    library read by stats or verify (its path ``LIB(MEMBER)``, ``archive`` naming the
    library; the library's seconds of work are counted on its first member, its
    largest worker on each), else the record itself.  The journal keeps the
    library's own record, with these as ``member_records``."""
    members = record.get("member_records")
    if not members:
        return [record]
    return [{**part, "seconds": record["seconds"] if index == 0 else 0.0,
             "max_rss_kib": record["max_rss_kib"]} for index, part in enumerate(members)]


def _convert_archive(record: dict[str, Any], path: str, read_path: str, data: bytes,
                     read_stat: os.stat_result, task: Task) -> None:
    from ..convert import archive_already_converted, convert_archive

    form = _object_form(path, data, task)
    archive = convert_archive(path, data, form.version, task.replace, task.limits,
                              task.flex, form.pcrel)
    if archive.converted:
        rewrite(read_path, data, read_stat, archive.payload, task.preserve_dates)
    elif task.recognise and not task.replace and (recognised := archive_already_converted(
            path, data, form.version, task.limits, task.flex, form.pcrel)) is not None:
        archive = recognised  # done by a run killed before its record: ok
        record["sframe_bytes_in_file"] = None  # as the run that wrote it read the file
    else:
        record["status"] = "nothing-to-describe"
    fdes = sum(c.fde_count for c in archive.converted)
    record.update(arch=archive.converted[0].arch.name if archive.converted else None,
                  fdes=fdes, emitted=sum(len(c.functions) for c in archive.converted),
                  skipped=_reasons(archive.skips), described=fdes - len(archive.skips))
    record["sframe_version"] = form.version
    record[f"sframe_v{form.version}_bytes"] = sum(c.image.size for c in archive.converted)


def _object_form(path: str, data: bytes, task: Task,
                 view: ElfView | None = None) -> ObjectForm:
    """The SFrame a file of a conversion run gets: an object (or a static library's
    members) what its linker merges (``linker.object_form``, ``ld`` asked once per
    worker), a linked file ``task.sframe_version`` (``view``: an ELF file's)."""
    from ..convert import object_arch
    from ..linker import ObjectForm, object_form

    arch = object_arch(path, data, view)
    if arch is None:
        return ObjectForm(task.sframe_version)
    return object_form(task.linker_reads, task.object_version, arch, path)


def _reasons(skips: Sequence[Skip]) -> dict[str, int]:
    """How many functions each reason leaves out, the commonest first."""
    return dict(Counter(skip.reason for skip in skips).most_common())


def _coverage(record: dict[str, Any], path: str, data: bytes, version: int,
              limits: Limits, cfi: Cfi | None, view: ElfView) -> int:
    """Convert for ``version`` (from ``cfi``, else the file's own .sframe); fill arch,
    FDEs, emitted and reasons; the section size (``view``: the file's, opened once)."""
    from ..convert import convert_elf, convert_sframe

    conversion = convert_elf(path, data, version, limits=limits, cfi=cfi, view=view) \
        if cfi is not None else convert_sframe(path, data, version, limits=limits)
    if version == record["sframe_version"]:
        record.update(arch=conversion.arch.name, fdes=conversion.fde_count,
                      emitted=len(conversion.functions), skipped=_reasons(conversion.skips),
                      described=conversion.fde_count - len(conversion.skips))
    return len(conversion.raw())


def _scanned(record: dict[str, Any], path: str, data: bytes, view: ElfView,
             task: Task, sframe: bool) -> bool:
    """``stats``' coverage as ``_coverage`` fills it for both versions, from one compiled
    scan of the file's ``.eh_frame`` (``analysis.stats``) instead of two conversions,
    and for a file with ``.sframe`` its check (``_verify``'s), whose compiled walk of
    ``.eh_frame`` counts for the scan too (``compare.verify_counted``); False where the
    scan does not apply (the caller converts, and checks).  Where the check raises,
    the scan and the check run again in this order, so the first error is the one the
    scan or the check says first."""
    from ..analysis.stats import count_request, scan_coverage
    from ..convert import default_sframe_address

    verified = None
    if sframe:
        from ..analysis.compare import verify_counted

        try:
            request = count_request(path, view)
            if request is not None:
                verified = verify_counted(path, data, task.limits, request, task.flex, view)
        except Cfi2SframeError:
            verified = None
    coverage = scan_coverage(path, data, view, task.limits,
                             lambda: default_sframe_address(data, path, view),
                             counted=None if verified is None else verified[1])
    if coverage is None:
        return False
    for version in (2, 3):
        made = coverage[version]
        if version == record["sframe_version"]:
            record.update(arch=made.arch.name, fdes=made.fdes, emitted=made.emitted,
                          skipped=_reasons(made.skips), described=made.fdes - len(made.skips))
        record[f"sframe_v{version}_bytes"] = made.size
    if verified is not None:
        _record_verify(record, verified[0])
    elif sframe:
        _verify(record, path, data, task.limits, None, task.flex, view)
    return True


def _verify(record: dict[str, Any], path: str, data: bytes, limits: Limits,
            cfi: Cfi | None, flex: bool = True, view: ElfView | None = None) -> None:
    """Check the file's own .sframe against its DWARF CFI (``cfi`` None: read by
    ``verify_elf``, whose compiled scan then reads neither section into objects;
    ``flex``: as ``verify_elf``'s; ``view``: the file's, opened once)."""
    from ..analysis.compare import verify_elf

    _record_verify(record, verify_elf(path, data, limits, cfi, flex=flex, view=view)[0])


def _verify_made(record: dict[str, Any], path: str, data: bytes, limits: Limits,
                 view: ElfView | None = None, cfi: Cfi | None = None) -> None:
    """A file without .sframe: the file --in-place would write, made in memory and
    checked (as ``verify FILE`` does); status no-sframe when it would write none
    (``view``, ``cfi``: the file's, read once)."""
    from ..convert import verify_as_converted

    made = verify_as_converted(path, data, limits, view, cfi)
    if made is None:
        record["status"] = "no-sframe"
        return
    _record_verify(record, made[0])
    record["verify"]["made"] = True


def _record_verify(record: dict[str, Any], result: VerifyResult) -> None:
    uncovered = result.uncovered
    first = None if not uncovered else {"name": uncovered[0].name,
                                        "section": uncovered[0].section,
                                        "address": uncovered[0].start}
    record["verify"] = {"ok": result.ok, "checked": result.checked,
                        "mismatches": len(result.mismatches), "missing": len(result.missing),
                        "extra": len(result.extra), "unevaluated": len(result.unevaluated),
                        "layout": len(result.layout), "uncovered": len(uncovered),
                        "first_uncovered": first}
    if not result.ok:
        record["status"] = "mismatch"


def _recognised(record: dict[str, Any], path: str, data: bytes, read_stat: os.stat_result,
                task: Task) -> bool:
    """True, with the conversion's counts filled in, when the file is what this
    conversion writes (``convert.already_converted``): done, ``ok``."""
    from ..convert import already_converted

    form = _object_form(path, data, task)
    conversion = already_converted(path, data, read_stat, form.version, task.old_kernels,
                                   task.limits, task.flex, form.pcrel)
    if conversion is None:
        return False
    _conversion_counts(record, conversion, form.version)
    record["sframe_bytes_in_file"] = None  # as the run that wrote it read the file
    return True


def _conversion_counts(record: dict[str, Any], conversion: ElfConversion,
                       version: int) -> None:
    record.update(arch=conversion.arch.name, fdes=conversion.fde_count,
                  emitted=len(conversion.functions), skipped=_reasons(conversion.skips),
                  described=conversion.fde_count - len(conversion.skips))
    record["sframe_version"] = version
    record[f"sframe_v{version}_bytes"] = conversion.image.size


def _convert(record: dict[str, Any], path: str, read_path: str, data: bytes,
             read_stat: os.stat_result, task: Task, view: ElfView | None = None) -> None:
    """``--in-place``: rewrite the file with a new .sframe once the copy verifies
    (``view``: the file's, opened once)."""
    from ..convert import ElfConversion, convert_file, rewrite_in_place

    form = _object_form(path, data, task, view)
    conversion = convert_file(path, data, version=form.version, replace=task.replace,
                              limits=task.limits, flex=task.flex, pcrel=form.pcrel, view=view)
    if not isinstance(conversion, ElfConversion):  # an ELF file always converts as one
        raise TypeError(f"{path}: converted as {type(conversion).__name__}")
    conversion = conversion.laid_out(old_kernels=task.old_kernels)
    rewrite_in_place(read_path, conversion, data, read_stat, task.limits,
                     task.preserve_dates)
    _conversion_counts(record, conversion, form.version)
    if conversion.empty and not task.replace:
        record["status"] = "nothing-to-describe"  # rewrite_in_place left the file alone
