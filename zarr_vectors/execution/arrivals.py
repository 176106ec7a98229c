"""The scheduler plugin that records which workers joined a cluster after a client's version check.

A cluster grows while a job runs (an adaptive deployment scaling up, a worker restarted from
another image), and a worker that joins after the client's check was never asked its
version.  Once a client's cluster passed, the scheduler logs every worker that joins on an
event topic of its own and pushes each entry to the client, and logs every worker that leaves
on another; before each later graph the client asks the workers that joined, with no request
when none did (:func:`zarr_vectors.execution.environment.check_once`).  Reading the log of joins
with a request before each graph cost a round trip that waited behind the scheduler's handling
of the graph before it (0.4 s after a graph of 4,000 tasks).  The subscription is made on the
scheduler together with the read of the log so far, in one call its event loop runs whole: a
subscription sent on its own starts some time later, and a worker joining in between would
never be reported.  Departures are read, one request, only when a worker joined: pushing them
too would send each worker's departure to clients closing while their cluster stops, which
distributed reports as a critical error.  Apart from ``environment.py`` because it subclasses
distributed's ``SchedulerPlugin``: imported only once a client exists.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin

NAME = "zarr-vectors-worker-arrivals"
JOINED = NAME  # the scheduler's event topic of joins, pushed to the watching clients: {"worker": address}
LEFT = f"{NAME}-left"  # and of departures, read when needed


class WorkerArrivals(SchedulerPlugin):
    """On the scheduler: an event on :data:`JOINED` for every worker that joins, on :data:`LEFT`
    for every worker that leaves."""

    name = NAME
    idempotent = True  # a second client on the scheduler keeps the first one's (its log goes on)

    def add_worker(self, scheduler: Any, worker: str) -> None:
        scheduler.log_event(JOINED, {"worker": worker})

    def remove_worker(self, scheduler: Any, worker: str, **kwargs: Any) -> None:
        scheduler.log_event(LEFT, {"worker": worker})


def latest(events: Iterable[Any]) -> dict[str, float]:
    """Per worker, the scheduler's time of its latest entry among ``events`` (``(time, message)``)."""
    times: dict[str, float] = {}
    for event in events:
        when, message = event if isinstance(event, (tuple, list)) and len(event) == 2 else (None, None)
        if isinstance(message, dict) and "worker" in message and isinstance(when, (int, float)):
            worker = str(message["worker"])
            times[worker] = max(times.get(worker, -math.inf), float(when))
    return times


class JoinLog:
    """The client's copy of the log of joins: the entries read when the watch began, and those
    pushed since (on the client's event loop thread, possibly before the first read's answer:
    entries are kept by time, so the order they arrive in does not matter)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._joins: dict[str, float] = {}

    def pushed(self, event: Any) -> None:
        """The subscription's handler: ``event`` is ``(time, message)``."""
        self.add([event])

    def add(self, events: Iterable[Any]) -> None:
        with self._lock:
            for worker, when in latest(events).items():
                self._joins[worker] = max(self._joins.get(worker, -math.inf), when)

    def joins(self) -> dict[str, float]:
        """Per worker that joined since the log began, the time it last joined."""
        with self._lock:
            return dict(self._joins)


def subscribe(dask_scheduler: Any, client: str) -> tuple[list[str], tuple[Any, ...]]:
    """On the scheduler, in one turn of its event loop: subscribe ``client`` to the log of joins;
    the workers there now and the log so far, so that every later join is pushed."""
    dask_scheduler.subscribe_topic(JOINED, client)
    return list(dask_scheduler.workers), tuple(dask_scheduler.get_events(JOINED))


def watch(client: Any) -> tuple[set[str], JoinLog]:
    """Start logging ``client``'s cluster's joins (if no client did already) and pushing them to
    ``client``: the workers there now (which joined before the log began) and the client's log."""
    client.register_plugin(WorkerArrivals(), name=NAME)
    log = JoinLog()
    client.subscribe_topic(JOINED, log.pushed)  # the handler; the scheduler-side subscription is below
    try:
        present, events = client.run_on_scheduler(subscribe, client=client.id)
    except BaseException:
        client.unsubscribe_topic(JOINED)
        raise
    log.add(events)
    return set(present), log


def departures(client: Any) -> dict[str, float]:
    """Per worker that left ``client``'s cluster since the log began, the time it last left (one request)."""
    return latest(client.get_events(LEFT))
