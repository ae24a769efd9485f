"""Add the records of a run up: the table printed at its end (or ``--json``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from ..typed import TYPE_CHECKING
from .record import GOOD_STATUSES, described

if TYPE_CHECKING:
    from typing import Any

SIZE_KEYS = ("fdes", "emitted", "eh_frame_bytes", "eh_frame_hdr_bytes", "sframe_v2_bytes",
             "sframe_v3_bytes", "sframe_bytes_in_file")


def summarize(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Totals over ``records``: files by status, FDEs and emitted, section bytes,
    reasons, verify outcomes, seconds of work and the largest worker."""
    statuses: Counter[str] = Counter()
    totals: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    verified: Counter[str] = Counter()
    seconds, peak = 0.0, 0
    versions: set[int] = set()
    macho: Counter[str] = Counter()
    macho_reasons: Counter[str] = Counter()
    for record in records:
        statuses[record["status"]] += 1
        seconds += record.get("seconds") or 0.0
        peak = max(peak, record.get("max_rss_kib") or 0)
        if record.get("macho") is not None:  # compact unwind: its own totals
            _add_macho(record, macho, macho_reasons)
            continue
        for key in SIZE_KEYS:
            totals[key] += record.get(key) or 0
        totals["described"] += described(record)
        reasons.update(record.get("skipped") or {})
        check = record.get("verify")
        if check:
            verified["files"] += 1
            verified["made"] += bool(check.get("made"))
            verified["ok" if check["ok"] else "failed"] += 1
            verified["functions"] += check["checked"]
            verified["uncovered"] += check.get("uncovered") or 0  # (added within schema 1)
        versions.add(int(record.get("sframe_version") or 0))
    return {"files": sum(statuses.values()), "statuses": dict(statuses.most_common()),
            "failed": sum(n for s, n in statuses.items() if s not in GOOD_STATUSES),
            **{key: totals[key] for key in SIZE_KEYS}, "described": totals["described"],
            "sframe_version": min(versions) if len(versions) == 1 else None,
            "skipped": dict(reasons.most_common()), "verified": dict(verified),
            "macho": {**macho, "dwarf_reasons": dict(macho_reasons.most_common())}
            if macho else None,
            "seconds": round(seconds, 2), "max_rss_kib": peak}


def _add_macho(record: dict[str, Any], totals: Counter[str], reasons: Counter[str]) -> None:
    """A Mach-O file's compact unwind coverage and check, added to the run's."""
    part = record["macho"]
    totals["files"] += 1
    for key in ("functions", "compact", "dwarf", "none", "unwind_info_bytes",
                "compact_unwind_bytes"):
        totals[key] += part.get(key) or 0
    reasons.update(part.get("dwarf_reasons") or {})
    check = record.get("verify")
    if check:
        totals["ok" if check["ok"] else "failed"] += 1
        totals["checked"] += check["checked"]


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def summary_table(summary: dict[str, Any], top: int = 8) -> str:
    """The summary as aligned ``label  value`` lines."""
    eh = summary["eh_frame_bytes"] + summary["eh_frame_hdr_bytes"]
    version = summary["sframe_version"]
    statuses = ", ".join(f"{n} {s}" for s, n in summary["statuses"].items()) or "none"
    reasons = ", ".join(f"{r} {n}" for r, n in list(summary["skipped"].items())[:top])
    more = len(summary["skipped"]) - top
    rows = [("files", f"{summary['files']} ({statuses})")]
    if summary["fdes"]:
        split = summary["emitted"] - summary["described"]
        rows.append(("FDEs", f"{summary['fdes']}, {summary['described']} in SFrame"
                             + (f" V{version}" if version else "")
                             + f" ({_share(summary['described'], summary['fdes'])})"
                             + (f"; {summary['emitted']} SFrame FDEs (a PLT's one DWARF "
                                "FDE is two)" if split > 0 else "")))
    if eh or not summary.get("macho"):
        rows.append((".eh_frame+_hdr", f"{eh} bytes"))
    for v in (2, 3):
        size = summary[f"sframe_v{v}_bytes"]
        if size:
            rows.append((f".sframe V{v}", f"{size} bytes ({_share(size, eh)} of .eh_frame"
                                          "+.eh_frame_hdr)"))
    if summary["sframe_bytes_in_file"]:
        rows.append((".sframe found", f"{summary['sframe_bytes_in_file']} bytes in the files"))
    if summary["fdes"]:
        rows.append(("left out", (reasons or "none") + (f", {more} more reasons" if more > 0
                                                         else "")))
    checked = summary["verified"]
    if checked:
        made = checked.get("made", 0)
        rows.append(("verified", f"{checked.get('files', 0)} files with .sframe"
                                 + (f" ({made} without, as converted in memory)" if made
                                    else "") + ": "
                                 f"{checked.get('ok', 0)} correct, "
                                 f"{checked.get('failed', 0)} not; "
                                 f"{checked.get('functions', 0)} functions checked"
                                 + (f"; {checked['uncovered']} without the SFrame FDE "
                                    "they could have" if checked.get("uncovered") else "")))
    macho = summary.get("macho")
    if macho:
        why = ", ".join(f"{r} {n}" for r, n in list(macho["dwarf_reasons"].items())[:top])
        rows.append(("Mach-O", f"{macho['files']} files, {macho.get('functions', 0)} "
                               f"functions: {macho.get('compact', 0)} compact "
                               f"({_share(macho.get('compact', 0), macho.get('functions', 0))}"
                               f"), {macho.get('dwarf', 0)} DWARF mode"
                               + (f" ({why})" if why else "")
                               + f", {macho.get('none', 0)} without unwind information"))
        rows.append(("Mach-O checked", f"{macho.get('ok', 0)} correct, "
                                       f"{macho.get('failed', 0)} not; "
                                       f"{macho.get('checked', 0)} functions checked "
                                       "against their DWARF CFI"))
    rows.append(("work", f"{summary['seconds']:.1f} s over all files; largest worker "
                         f"{summary['max_rss_kib'] // 1024} MiB"))
    width = max(len(label) for label, _ in rows)
    return "\n".join(f"{label:<{width}}  {value}" for label, value in rows)
