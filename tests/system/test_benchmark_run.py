"""``benchmarks/run.py`` still runs (issue 43's one table): its cheapest goal parts,
start-up and the per-file overhead, in ``--quick`` form, timed from a clean virtual
environment by default.  What it must print is the issue's, written here: every
start-up command and both ``-j`` of the overhead as goal rows with a verdict, the
command and Python timed at its head (a clean environment runs no ``.pth`` file),
and the items this run left out.  Not timed: no figure is checked."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import require

ROOT = Path(__file__).resolve().parents[2]
# benchmarks/startup.py's commands, by label.
STARTUP = ["--version", "--help", "convert .s -> .o", "convert .s -> .sframe",
           "convert ELF .o -> .sframe", "convert ELF .o -> .o",
           "convert ELF true --emit elf", "dump x.o", "lookup x.o 0", "verify x.o",
           "verify /usr/bin/true", "stats /usr/bin/true", "unwind x.o --snapshot",
           "compact .s", "dump trace.xray", "stacks trace.xray", "verify trace.xray"]


def test_the_quick_run_gives_its_goal_rows(tmp_path: Path) -> None:
    require("as", "objcopy", "readelf")
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick",
                           "--only", "startup", "overhead", "--overhead-files", "10"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    head = done.stdout.splitlines()[0]
    assert re.match(r"timed: \S+/venv/bin/cfi2sframe \(a clean virtual environment", head)
    assert head.endswith("its site's .pth files: none"), head
    summary = done.stdout.split("Goals (issue 43), this run:")[1]
    verdicts = re.findall(r"^\| (.+?) \| -?[\d.]+ ms \| <= [\d.]+ ms \| (met|NOT met) \|$",
                          summary, re.M)
    assert [label for label, _ in verdicts] == [
        "tree per-file overhead, -j 1, 10 copies of /usr/bin/true without CFI (CPU)",
        "tree per-file overhead, -j 2, 10 copies of /usr/bin/true without CFI (CPU)",
        *(f"start-up: {label}" for label in STARTUP)]
    assert (f"{sum(v == 'met' for _, v in verdicts)} of {len(verdicts)} goal rows met."
            in summary)
    assert ("Not measured in this run: item 1 (stats); item 1, 5 (library); item 2 (tree); "
            "item 3 (dense); item 4 (macho).") in summary
