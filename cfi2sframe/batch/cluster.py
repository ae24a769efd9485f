"""``--dask ADDRESS``: the same per-file work on a ``dask.distributed`` cluster.

The files go out in tasks of ``FILES_PER_TASK``, in the order given (the largest
first); a task runs ``pool.run_files`` on the worker, so its files are done in a
forked worker, isolated, timed out and measured as on the local pool, and the records
are the same.  (A task per file forked a child per file: the child's first writes to
the pages it shared with the Dask worker faulted: over two system folders, two Dask
workers took 1.78x the time of `-j 2`; now 1.05x.)  Workers read the files themselves:
the names sent are absolute, so they must see the same paths (a shared or identical
file system).  Dask is an optional extra, imported only here.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from ..errors import Cfi2SframeError
from ..typed import TYPE_CHECKING
from .pool import run_files
from .record import Task

if TYPE_CHECKING:
    from typing import Any

# Files a task does: enough to spread a worker's fork over many, few enough that the
# last tasks (of the smallest files) balance the workers at the end.
FILES_PER_TASK = 16


def run_dask(address: str, items: Iterable[tuple[int, str]], task: Task,
             timeout: float | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(index, record)`` for every ``(index, path)``, as the cluster finishes them."""
    try:
        import distributed
    except ImportError:
        raise Cfi2SframeError("", "--dask needs dask.distributed: pip install "
                                  "'cfi2sframe[dask]'") from None
    dask: Any = distributed  # untyped
    try:
        client = dask.Client(address, timeout=30)
    except (OSError, TimeoutError) as exc:
        raise Cfi2SframeError(address, f"cannot reach the Dask scheduler: {exc}") from None
    try:
        todo = list(items)
        shares = [todo[start:start + FILES_PER_TASK]
                  for start in range(0, len(todo), FILES_PER_TASK)]
        futures = {client.submit(run_files, [(path, os.path.abspath(path))
                                             for _, path in share], task, timeout,
                                 pure=False): share for share in shares}
        for future in dask.as_completed(futures):
            for (index, _), record in zip(futures[future], future.result(), strict=True):
                yield index, record
    finally:
        client.close()
