"""``--dask ADDRESS``: the same per-file work on a ``dask.distributed`` cluster.

Each file is one task; the task runs ``pool.run_isolated`` on the worker, so a
file there is isolated, timed out and measured as on the local pool, and the
records are the same.  Workers read the files themselves: the names sent are
absolute, so they must see the same paths (a shared or identical file system).
Dask is an optional extra, imported only here.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any

from ..errors import Cfi2SframeError
from .pool import run_isolated
from .record import Task


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
        futures = {client.submit(run_isolated, path, task, timeout, os.path.abspath(path),
                                 pure=False): index for index, path in items}
        for future in dask.as_completed(futures):
            yield futures[future], future.result()
    finally:
        client.close()
