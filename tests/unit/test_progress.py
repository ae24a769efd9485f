"""The progress bar starts no thread: the tree runner forks a child per file while it is
shown, and a fork beside a live thread inherits that thread's locks with nobody to
release them (tqdm's default monitor thread did exactly that on a terminal)."""

from __future__ import annotations

import os
import pty
import sys
import threading

import pytest

from cfi2sframe.batch.progress import Progress


def test_the_bar_on_a_terminal_starts_no_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    master, slave = pty.openpty()
    with os.fdopen(slave, "w") as terminal:
        monkeypatch.setattr(sys, "stderr", terminal)
        assert sys.stderr.isatty()
        before = threading.active_count()
        progress = Progress(3, 3000, enabled=True)
        assert progress._bar is not None  # the bar is really shown on a terminal
        for name in ("a", "b", "c"):
            progress.advance(name, 1000)
        assert threading.active_count() == before, [t.name for t in threading.enumerate()]
        progress.close()
    os.close(master)
