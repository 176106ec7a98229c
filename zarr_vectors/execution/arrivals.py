"""The scheduler plugin that records which workers joined a cluster after a client's version check.

A cluster grows while a job runs (an adaptive deployment scaling up, a worker restarted from
another image), and a worker that joins after the client's check was never asked its
version.  The client's check registers this plugin, which numbers every worker that joins or
leaves (one count per scheduler, so a clock stepping back changes nothing) and logs the joins
on an event topic of its own, pushed to the watching clients, and the departures on another;
before each later graph the client asks the workers that joined, with no request when none did
(:func:`zarr_vectors.execution.environment.check_once`).  Reading the log of joins with a
request before each graph cost a round trip that waited behind the scheduler's handling of the
graph before it (0.4 s after a graph of 4,000 tasks).  The subscription is made on the
scheduler together with the read of the log so far, in one call its event loop runs whole: a
subscription sent on its own starts some time later, and a worker joining in between would
never be reported.  The scheduler drops pushes to a client whose connection is down, so after a
reconnection the client takes a new snapshot.  Departures are read, one request, only when a
worker joined: pushing them too would send each worker's departure to clients closing while
their cluster stops, which distributed reports as a critical error.  Apart from
``environment.py`` because it subclasses distributed's ``SchedulerPlugin``: imported only once
a client exists.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin

NAME = "zarr-vectors-worker-arrivals"
JOINED = NAME  # the scheduler's event topic of joins, pushed to the watching clients: {"worker": address, "n": count}
LEFT = f"{NAME}-left"  # and of departures, read when needed


class WorkerArrivals(SchedulerPlugin):
    """On the scheduler: an event on :data:`JOINED` for every worker that joins and on :data:`LEFT`
    for every worker that leaves, numbered in the order they happened."""

    name = NAME
    idempotent = True  # a second client on the scheduler keeps the first one's (its log and count go on)

    def __init__(self) -> None:
        self.count = 0

    def add_worker(self, scheduler: Any, worker: str) -> None:
        self._log(scheduler, JOINED, worker)

    def remove_worker(self, scheduler: Any, worker: str, **kwargs: Any) -> None:
        self._log(scheduler, LEFT, worker)

    def _log(self, scheduler: Any, topic: str, worker: str) -> None:
        self.count += 1
        scheduler.log_event(topic, {"worker": worker, "n": self.count})


def latest(events: Iterable[Any]) -> dict[str, int]:
    """Per worker, the number of its latest entry among ``events`` (``(time, message)``)."""
    numbers: dict[str, int] = {}
    for event in events:
        message = event[1] if isinstance(event, (tuple, list)) and len(event) == 2 else None
        if isinstance(message, dict) and "worker" in message and type(message.get("n")) is int:
            worker = str(message["worker"])
            numbers[worker] = max(numbers.get(worker, 0), message["n"])
    return numbers


class JoinLog:
    """The client's copy of the log of joins: the entries read when the watch began, and those
    pushed since (on the client's event loop thread, possibly before the first read's answer:
    entries are kept by number, so the order they arrive in does not matter)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._joins: dict[str, int] = {}

    def pushed(self, event: Any) -> None:
        """The subscription's handler: ``event`` is ``(time, message)``."""
        self.add([event])

    def add(self, events: Iterable[Any]) -> None:
        with self._lock:
            for worker, n in latest(events).items():
                self._joins[worker] = max(self._joins.get(worker, 0), n)

    def joins(self) -> dict[str, int]:
        """Per worker that joined since the log began, the number of its latest join."""
        with self._lock:
            return dict(self._joins)


@dataclass(frozen=True)
class Snapshot:
    """What a watch began with: the scheduler (its id: another after a restart), the client's
    connection it was taken on (a new one after a reconnection), the workers there, the number
    of each one's latest logged join (0: none), and the log the later joins are pushed to."""

    scheduler: str
    comm: Any
    present: dict[str, int]
    log: JoinLog


def subscribe(dask_scheduler: Any, client: str) -> tuple[str, list[str], tuple[Any, ...]]:
    """On the scheduler, in one turn of its event loop: subscribe ``client`` to the log of joins;
    the scheduler's id, the workers there now and the log so far, so that every later join is pushed."""
    dask_scheduler.subscribe_topic(JOINED, client)
    return str(dask_scheduler.id), list(dask_scheduler.workers), tuple(dask_scheduler.get_events(JOINED))


def watch(client: Any) -> Snapshot:
    """Start logging ``client``'s cluster's joins (if no client did already) and pushing them to
    ``client`` (again after a reconnection, into a new log)."""
    client.register_plugin(WorkerArrivals(), name=NAME)
    log = JoinLog()
    comm = getattr(client, "scheduler_comm", None)
    client.subscribe_topic(JOINED, log.pushed)  # the handler first; the scheduler-side subscription below
    try:
        scheduler, present, events = client.run_on_scheduler(subscribe, client=client.id)
    except BaseException:
        with contextlib.suppress(Exception):  # a closed client: the error to report is the one above
            client.unsubscribe_topic(JOINED)
        raise
    log.add(events)
    joins = log.joins()
    return Snapshot(scheduler, comm, {w: joins.get(w, 0) for w in present}, log)


def departures(client: Any) -> dict[str, int]:
    """Per worker that left ``client``'s cluster since the log began, the number of its latest
    departure (one request)."""
    return latest(client.get_events(LEFT))
