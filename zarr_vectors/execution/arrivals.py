"""The scheduler plugin that records which workers joined a cluster after a client's version check.

A cluster grows while a job runs (an adaptive deployment scaling up, a worker restarted from
another image), and a worker that joins after the client's check was never asked its
version.  Once a client's cluster passed, the scheduler logs every worker that joins or
leaves on an event topic of its own; before each later graph the client reads that log (one
small request) and asks the workers that joined and are still there
(:func:`zarr_vectors.execution.environment.check_once`).  The log, not a subscription: a
subscription starts some time after it is asked for, and a worker joining in between would
never be reported.  Apart from ``environment.py`` because it subclasses distributed's
``SchedulerPlugin``: imported only once a client exists.
"""

from __future__ import annotations

from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin

NAME = "zarr-vectors-worker-arrivals"
TOPIC = NAME  # the scheduler's event topic: {"worker": address, "joined": bool} per join or departure


class WorkerArrivals(SchedulerPlugin):
    """On the scheduler: an event on :data:`TOPIC` for every worker that joins or leaves."""

    name = NAME
    idempotent = True  # a second client on the scheduler keeps the first one's (its log goes on)

    def add_worker(self, scheduler: Any, worker: str) -> None:
        scheduler.log_event(TOPIC, {"worker": worker, "joined": True})

    def remove_worker(self, scheduler: Any, worker: str, **kwargs: Any) -> None:
        scheduler.log_event(TOPIC, {"worker": worker, "joined": False})


def watch(client: Any) -> set[str]:
    """Start logging ``client``'s cluster's joins (if no client did already); the workers there
    now, which joined before the log began."""
    client.register_plugin(WorkerArrivals(), name=NAME)
    return set(client.scheduler_info(n_workers=-1).get("workers", {}))


def joined(client: Any) -> set[str]:
    """The workers the log says joined, less those it says left since."""
    here: dict[str, bool] = {}
    for _, message in client.get_events(TOPIC):
        if isinstance(message, dict) and "worker" in message:
            here[str(message["worker"])] = bool(message.get("joined"))
    return {worker for worker, present in here.items() if present}
