"""The worker plugin that turns on request accounting of annotated tasks in every worker process.

Apart from ``requests.py`` because it subclasses distributed's ``WorkerPlugin``: imported
only once a count meets a distributed client, so a process without one never imports
distributed for it.  Registered once per client, it reaches workers that join later too.
"""

from __future__ import annotations

import weakref
from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin

from zarr_vectors.store.accounting import enable_tagging

NAME = "zarr-vectors-request-accounting"


class RequestTagging(WorkerPlugin):
    """On each worker: look for the ``zv_requests`` annotation on the tasks it runs."""

    name = NAME

    def setup(self, worker: Any) -> None:
        enable_tagging()


_REGISTERED: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def ensure_registered(client: Any) -> None:
    """Register :class:`RequestTagging` with ``client``'s cluster, once per client and scheduler."""
    address = str(getattr(client.scheduler, "address", ""))
    if _REGISTERED.get(client) == address:
        return
    client.register_plugin(RequestTagging(), name=NAME)
    _REGISTERED[client] = address
