"""Counting a job's storage requests across the processes its tasks run in.

``with count_requests() as tally:`` counts every request the block causes: those this
thread makes (and the I/O threads it starts), and those of every task the runner
submits inside the block, wherever the task runs.  Tasks cannot add to a counter in the
client's process, so the runner annotates each graph it submits with the count's token
and the stage name (:func:`stage`); a worker records an annotated task's requests under
that annotation (``store/accounting.py``), and when the block ends the client collects
them from every worker (``client.run``), stage by stage.  What a request is, and how
each kind counts, is ``store/accounting.py``'s rule.

Counts nest: an inner count's requests are in the outer one's too.  Tasks started
with ``runner.start`` are counted under ``"background"`` if they finished by the end of
the block.
"""

from __future__ import annotations

import contextvars
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import dask

from zarr_vectors.store.accounting import ANNOTATION, Recorder, RequestCounts, pop_tagged, recording

CLIENT = "client"
"""The stage name of requests made in the counting process itself, outside any stage's tasks."""


class RequestTally:
    """The requests counted by one :func:`count_requests` block, in total and by stage.

    Complete once the block has ended; stage names are the runner's (``"write vertices"``,
    ``"validate"``...), plus :data:`CLIENT`.
    """

    def __init__(self) -> None:
        self.token = uuid.uuid4().hex
        self._lock = threading.Lock()
        self._stages: dict[str, Recorder] = {CLIENT: Recorder()}
        self._clients: dict[int, Any] = {}
        self.incomplete: list[str] = []
        """Why some workers' counts could not be gathered (a lost worker, a closed client); empty when complete."""

    def recorder(self, stage: str) -> Recorder:
        with self._lock:
            rec = self._stages.get(stage)
            if rec is None:
                rec = self._stages[stage] = Recorder()
            return rec

    def add(self, stage: str, counts: RequestCounts) -> None:
        self.recorder(stage).add(counts)

    @property
    def by_stage(self) -> dict[str, RequestCounts]:
        with self._lock:
            return {name: rec.counts for name, rec in self._stages.items() if rec.counts.requests}

    @property
    def counts(self) -> RequestCounts:
        """Every request counted, all stages together."""
        return sum(self.by_stage.values(), RequestCounts())

    def to_json(self) -> dict[str, Any]:
        out = {**self.counts.to_json(), "by_stage": {k: v.to_json() for k, v in self.by_stage.items()}}
        return {**out, "incomplete": list(self.incomplete)} if self.incomplete else out

    def _gather(self) -> None:
        """Collect what workers (and this process, for in-process workers) recorded for this count."""
        found = [pop_tagged(self.token)]
        for client in self._clients.values():
            from zarr_vectors.execution.tagging import gather_counts  # a client exists: distributed is imported

            try:
                counts, lost = gather_counts(client, self.token)
            except Exception as exc:  # noqa: BLE001 - the counts are lost, the work is not: say so in the tally
                self.incomplete.append(f"workers of {client!r}: {type(exc).__name__}: {exc}")
                continue
            found.extend(counts)
            self.incomplete.extend(lost)
        for per_stage in found:
            for name, doc in per_stage.items():
                self.add(name, RequestCounts.from_json(doc))

    def _merge_into(self, parent: RequestTally) -> None:
        for name, counts in self.by_stage.items():
            parent.add(name, counts)


_ACTIVE: contextvars.ContextVar[RequestTally | None] = contextvars.ContextVar("zv_request_tally", default=None)


@contextmanager
def count_requests() -> Iterator[RequestTally]:
    """Count the storage requests of the work inside the block; the tally is complete after it."""
    parent = _ACTIVE.get()
    tally = RequestTally()
    token = _ACTIVE.set(tally)
    try:
        with recording(tally.recorder(CLIENT)):
            yield tally
    finally:
        _ACTIVE.reset(token)
        tally._gather()
        if parent is not None:
            tally._merge_into(parent)
            parent.incomplete.extend(tally.incomplete)


@contextmanager
def stage(name: str, client: Any = None) -> Iterator[None]:
    """Inside a count: attribute the stage's requests to ``name``, here and on ``client``'s workers.

    The runner wraps each stage it runs in this.  Local threads count through the
    ``pool`` setting (a :class:`~zarr_vectors.store.accounting.ContextExecutor` for
    dask's threaded scheduler); distributed tasks through the graph annotation.
    """
    tally = _ACTIVE.get()
    if tally is None:
        yield
        return
    if client is not None:
        from zarr_vectors.execution.tagging import ensure_registered

        ensure_registered(client)
        tally._clients.setdefault(id(client), client)
        with dask.annotate(**{ANNOTATION: (tally.token, name)}):
            yield
        return
    with recording(tally.recorder(name)), _local_pool():
        yield


def attribute(name: str) -> AbstractContextManager[Any]:
    """Inside a count: this thread's requests in the block go to stage ``name`` (a job's journal, say)."""
    tally = _ACTIVE.get()
    return nullcontext() if tally is None else recording(tally.recorder(name))


_POOL: dict[int, Any] = {}
_POOL_LOCK = threading.Lock()


def on_dask_threads() -> bool:
    """Whether graphs run here go to dask's threaded scheduler.  Decided without
    ``dask.base.get_scheduler`` where possible: it imports distributed (~0.4 s) to look for
    a client, which no process that never imported distributed can have."""
    import dask.threaded

    name = dask.config.get("scheduler", None)
    if isinstance(name, str):
        return name.lower() in ("threads", "threading")
    if name is None and "distributed" not in sys.modules:
        return True
    from dask.base import get_scheduler

    return get_scheduler() in (None, dask.threaded.get)


def _local_pool() -> AbstractContextManager[Any]:
    """dask's threaded scheduler on a pool that carries this context (and so the count) into its threads."""
    import dask.threaded

    if not on_dask_threads() or dask.config.get("pool", None) is not None:
        return nullcontext()  # synchronous runs here; processes are not counted; a user's pool is kept
    from zarr_vectors.store.accounting import ContextExecutor

    workers = dask.config.get("num_workers", None) or dask.threaded.CPU_COUNT
    with _POOL_LOCK:
        pool = _POOL.get(workers)
        if pool is None:
            pool = _POOL[workers] = ContextExecutor(workers, thread_name_prefix="zv-dask")
    return dask.config.set(pool=pool)
