"""``stats --plot FILE.png``: the picture distribution discussions show (optional
``matplotlib`` extra, imported only here)."""

from __future__ import annotations

import io
import os
from collections import Counter
from collections.abc import Sequence

from ..errors import Cfi2SframeError
from ..files import write_output
from ..typed import TYPE_CHECKING
from .record import described

if TYPE_CHECKING:
    from typing import Any


def plot_records(records: Sequence[dict[str, Any]], output: str, top: int = 12) -> Any:
    """Draw and save the figure; return it (its axes hold the plotted values).

    Left: per file, ``.sframe`` bytes (V2 and V3) against ``.eh_frame`` +
    ``.eh_frame_hdr`` bytes, log-log, coloured by coverage (FDEs in SFrame / FDEs).
    Right: how many functions each reason leaves out, over all files.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise Cfi2SframeError("", "--plot needs matplotlib: pip install "
                                  "'cfi2sframe[plot]'") from None
    rows = [r for r in records if r.get("fdes") and r.get("sframe_v2_bytes")]
    eh = [r["eh_frame_bytes"] + r["eh_frame_hdr_bytes"] for r in rows]
    coverage = [100 * described(r) / r["fdes"] for r in rows]
    figure, (sizes, reasons) = plt.subplots(1, 2, figsize=(13, 5.5))
    for version, marker in ((2, "o"), (3, "^")):
        dots = sizes.scatter(eh, [r[f"sframe_v{version}_bytes"] for r in rows], c=coverage,
                             cmap="viridis", vmin=0, vmax=100, marker=marker, s=14,
                             label=f"SFrame V{version}")
        dots.set_gid(f"v{version}")
    if eh:
        low, high = min(eh), max(eh)
        sizes.plot([low, high], [low, high], color="grey", linewidth=0.8, label="same size")
        sizes.set_xscale("log")
        sizes.set_yscale("log")
    sizes.set_xlabel(".eh_frame + .eh_frame_hdr bytes")
    sizes.set_ylabel(".sframe bytes")
    sizes.set_title(f"{len(rows)} files")
    sizes.legend(loc="upper left")
    figure.colorbar(dots, ax=sizes, label="FDEs in SFrame (%)")
    counts: Counter[str] = Counter()
    for record in records:
        if record.get("macho") is None:  # a Mach-O file's are compact unwind's reasons
            counts.update(record.get("skipped") or {})
    common = counts.most_common(top)
    reasons.barh([name for name, _ in common][::-1], [n for _, n in common][::-1])
    reasons.set_xlabel("functions left out")
    reasons.set_title("reasons")
    figure.tight_layout()
    image = io.BytesIO()
    kind = os.path.splitext(output)[1].lstrip(".").lower() or "png"
    try:
        figure.savefig(image, format=kind, dpi=100)
    except ValueError as exc:  # a name whose ending no backend writes
        raise Cfi2SframeError(output, f"cannot write the plot: {exc}") from None
    finally:
        plt.close(figure)
    try:
        write_output(output, image.getvalue())
    except OSError as exc:
        raise Cfi2SframeError(output, f"cannot write the plot: {exc.strerror or exc}") \
            from None
    return figure
