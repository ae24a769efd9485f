"""The progress bar of a run on a terminal (tqdm), and nothing elsewhere."""

from __future__ import annotations

import os
import sys

from ..typed import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any


class Progress:
    """Files done of all, bytes, the file last done and an ETA, on standard error
    when it is a terminal and the run is not ``-q``; otherwise silent."""

    def __init__(self, files: int, total_bytes: int, enabled: bool) -> None:
        self.files, self.done = files, 0
        self._bar: Any = None
        if enabled and sys.stderr.isatty():
            bar = _bar_class()
            self._bar = bar(total=total_bytes, unit="B", unit_scale=True, unit_divisor=1024,
                            dynamic_ncols=True, file=sys.stderr, smoothing=0.1,
                            desc=f"0/{files} files")

    def advance(self, path: str, size: int) -> None:
        self.done += 1
        if self._bar is not None:
            self._bar.set_description(f"{self.done}/{self.files} files", refresh=False)
            self._bar.set_postfix_str(os.path.basename(path), refresh=False)
            self._bar.update(size)

    def write(self, line: str, error: bool = False) -> None:
        """Print a line above the bar (or plainly, without one)."""
        stream = sys.stderr if error else sys.stdout
        if self._bar is not None:
            self._bar.write(line, file=stream)
        else:
            print(line, file=stream)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def _bar_class() -> Any:
    """tqdm without its monitor thread: the tree runner forks a child per file, and a
    fork beside a live thread copies a process whose other thread is gone (its locks
    held forever); the bar is redrawn on every update anyway."""
    from tqdm import tqdm

    class Bar(tqdm):  # type: ignore[type-arg]
        monitor_interval = 0

    return Bar
