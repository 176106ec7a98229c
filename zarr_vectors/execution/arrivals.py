"""The scheduler plugin that tells a client which workers joined after its version check.

A cluster grows while a job runs (an adaptive deployment scaling up, a worker restarted from
another image), and a worker that joins after the client's check was never asked its
version.  Once a client's cluster passed, the scheduler logs each joining worker's address on
a topic the client subscribes to, and the client asks those workers before its next graph
(:func:`zarr_vectors.execution.environment.check_once`).  Apart from ``environment.py``
because it subclasses distributed's ``SchedulerPlugin``: imported only once a client exists.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin

NAME = "zarr-vectors-worker-arrivals"
TOPIC = NAME  # the scheduler's event topic: one message per joining worker, {"worker": address}


class WorkerArrivals(SchedulerPlugin):
    """On the scheduler: an event on :data:`TOPIC` for every worker that joins."""

    name = NAME

    def add_worker(self, scheduler: Any, worker: str) -> None:
        scheduler.log_event(TOPIC, {"worker": worker})


def watch(client: Any, arrived: Callable[[str], None]) -> set[str]:
    """Call ``arrived(address)`` for every worker that joins ``client``'s cluster from now on
    (in the client's event loop); returns the workers there now, which the caller has to ask
    too if its check did not (the check ran before the plugin saw any join)."""
    client.register_plugin(WorkerArrivals(), name=NAME)
    client.subscribe_topic(TOPIC, lambda event: arrived(str(event[1]["worker"])))
    return set(client.scheduler_info(n_workers=-1).get("workers", {}))
