"""The worker plugin that turns on request accounting of annotated tasks in every worker process.

Apart from ``requests.py`` because it subclasses distributed's ``WorkerPlugin``: imported
only once a count meets a distributed client, so a process without one never imports
distributed for it.  Registered once per client, it reaches workers that join later too.
"""

from __future__ import annotations

from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin

from zarr_vectors.store.accounting import enable_tagging

NAME = "zarr-vectors-request-accounting"


class RequestTagging(WorkerPlugin):
    """On each worker: look for the ``zv_requests`` annotation on the tasks it runs."""

    name = NAME

    def setup(self, worker: Any) -> None:
        enable_tagging()


_REGISTERED: set[tuple[int, str]] = set()


def ensure_registered(client: Any) -> None:
    """Register :class:`RequestTagging` with ``client``'s cluster, once per client and scheduler."""
    key = (id(client), str(getattr(client.scheduler, "address", "")))
    if key in _REGISTERED:
        return
    client.register_plugin(RequestTagging(), name=NAME)
    _REGISTERED.add(key)
