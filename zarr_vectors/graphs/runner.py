"""Running graphs on whatever scheduler is current.

A library call on numpy arrays and a cluster job share one code path: the graph
is the same, only the scheduler differs (a distributed ``Client`` if one is
active, else dask's local threads).
"""

from __future__ import annotations

import os


def current_client():  # -> distributed.Client | None
    """The active distributed client, if any."""
    try:
        from distributed import default_client
    except ImportError:  # pragma: no cover - distributed is a dependency
        return None
    try:
        return default_client()
    except ValueError:
        return None


def parallelism() -> int:
    """How many tasks the current scheduler runs at once (worker threads or cores)."""
    client = current_client()
    if client is not None:
        try:
            return max(1, sum(client.nthreads().values()))
        except Exception:  # scheduler unreachable: fall back to the local guess
            pass
    return max(1, os.cpu_count() or 1)


def split_by_weight(weights, target: int) -> list[slice]:  # noqa: ANN001 - numpy array of ints
    """Contiguous runs of items whose summed weight is about ``target`` (each run >= 1 item).

    Used to group whole cells into owner tasks: tasks of a useful size (per-task
    scheduler overhead is milliseconds), never splitting a cell.
    """
    import numpy as np

    weights = np.asarray(weights, dtype=np.int64)
    if len(weights) == 0:
        return []
    target = max(1, int(target))
    run_ids = np.cumsum(weights) // target
    # a new run starts wherever the cumulative bucket advances
    starts = np.flatnonzero(np.r_[True, run_ids[1:] != run_ids[:-1]])
    ends = np.r_[starts[1:], len(weights)]
    return [slice(int(s), int(e)) for s, e in zip(starts, ends)]
