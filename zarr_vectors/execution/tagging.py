"""The worker plugin that turns on request accounting of annotated tasks in every worker process.

Apart from ``requests.py`` because it subclasses distributed's ``WorkerPlugin``: imported
only once a count meets a distributed client, so a process without one never imports
distributed for it.  Registered once per client, it reaches workers that join later too.
"""

from __future__ import annotations

import weakref
from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin

from zarr_vectors.store.accounting import enable_tagging, pop_tagged

NAME = "zarr-vectors-request-accounting"


def topic(token: str) -> str:
    """The scheduler's event topic where workers say they recorded requests of count ``token``."""
    return f"{NAME}-{token}"


class RequestTagging(WorkerPlugin):
    """On each worker: look for the ``zv_requests`` annotation on the tasks it runs, and tell the
    scheduler (an event) the first time it records a count's request."""

    name = NAME

    def setup(self, worker: Any) -> None:
        enable_tagging(lambda token: worker.log_event(topic(token), {"worker_id": worker.id}))


def _pop_counts(token: str, dask_worker: Any = None) -> dict[str, Any]:
    return {"worker": dask_worker.id if dask_worker is not None else None, "counts": pop_tagged(token)}


def gather_counts(client: Any, token: str) -> tuple[list[dict[str, dict[str, int]]], list[str]]:
    """Every worker's counts of ``token`` (forgotten there), and why some are missing.

    A worker that recorded requests and left (killed, restarted by its nanny, retired) took
    them with it; it announced itself when it recorded the first, so the count says so
    rather than report a smaller number as complete.  (A worker killed within its first
    batched send after that request is not seen: a few milliseconds.)
    """
    answers = client.run(_pop_counts, token)
    answered = {a["worker"] for a in answers.values()}
    # the scheduler adds the sender's address to a worker's event as "worker"
    announced = {m.get("worker_id"): m.get("worker") for _, m in client.get_events(topic(token)) if isinstance(m, dict)}
    lost = sorted(str(address) for wid, address in announced.items() if wid not in answered)
    why = [f"worker {a} recorded requests of this count and left before it ended: they are not counted" for a in lost]
    return [a["counts"] for a in answers.values()], why


_REGISTERED: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def ensure_registered(client: Any) -> None:
    """Register :class:`RequestTagging` with ``client``'s cluster, once per client and scheduler."""
    address = str(getattr(client.scheduler, "address", ""))
    if _REGISTERED.get(client) == address:
        return
    client.register_plugin(RequestTagging(), name=NAME)
    _REGISTERED[client] = address
