"""What a tree run's parent imports before it forks its workers (``batch.record.warm_up``):
exactly the modules a worker's ``file_record`` imports for the run's command on a
linked program of this machine and a static library.  One more is serial time before
any worker starts (a tree run's -j 2 speed-up is bound by it); one fewer is imported
again in every worker.

Each side runs in a fresh interpreter that holds what the parent holds at that point
(the command's module, the batch modules): one runs ``warm_up``, the other the work.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import cfi2sframe
from tests.conftest import require, require_path

PROGRAM = "/usr/bin/true"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "frame_pointer.s"

PROBE = """
import sys
import cfi2sframe.cli.{module}, cfi2sframe.cli.batch
import cfi2sframe.batch.inputs, cfi2sframe.batch.progress, cfi2sframe.batch.pool
from cfi2sframe.batch.record import Task, file_record, warm_up
before = set(sys.modules)
if sys.argv[1] == "warm":
    warm_up(Task({command!r}))
else:
    for path in sys.argv[2:]:
        assert file_record(path, Task({command!r}))["status"] in ("ok", "object-kept")
print(*sorted(m for m in set(sys.modules) - before if m.startswith("cfi2sframe")))
"""


def _run(side: str, command: str, files: list[Path]) -> subprocess.Popen[str]:
    module = "convert" if command == "convert" else command
    env = {**os.environ, "PYTHONPATH": str(Path(cfi2sframe.__file__).parents[1])}
    return subprocess.Popen([sys.executable, "-S", "-c", PROBE.format(
        module=module, command=command), side, *map(str, files)], env=env,
        stdout=subprocess.PIPE, text=True)


@pytest.mark.parametrize("command", ["stats", "verify", "convert"])
def test_the_parent_imports_what_the_workers_run_and_no_more(tmp_path: Path,
                                                             command: str) -> None:
    require("as", "ar")
    require_path(PROGRAM)
    program = tmp_path / "true"  # (a copy: the conversion rewrites it)
    shutil.copy(PROGRAM, program)
    subprocess.run(["as", str(EXAMPLE), "-o", str(tmp_path / "f.o")], check=True)
    subprocess.run(["ar", "rc", str(tmp_path / "libf.a"), str(tmp_path / "f.o")], check=True)
    files = [program, tmp_path / "libf.a"]
    warm, work = (_run(side, command, files) for side in ("warm", "work"))
    imported = [process.communicate()[0].split() for process in (warm, work)]
    assert warm.returncode == work.returncode == 0
    assert imported[0] == imported[1]
    assert "cfi2sframe.sframe.build" in imported[0]  # (the probe sees the work's imports)
