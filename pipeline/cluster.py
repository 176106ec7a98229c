"""Choosing where a command's graphs run: local threads, an embedded cluster, or a running one.

Precedence: an explicit scheduler file or address, then the ``DASK_SCHEDULER_ADDRESS``
environment variable, then an in-process scheduler named in dask.config
(``DASK_SCHEDULER=threads``); then an embedded ``LocalCluster`` when one is asked for
(``--cluster``, ``--workers``, ``--memory-limit``, ``--report``) or when the work is large
(``zarr_vectors.cli.cluster-threshold`` bytes of input or store), else dask's local threads.
A cluster costs seconds to start and a process per worker, which a small job never
repays; :func:`choose` decides and says why in one line the command prints.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import dask
from dask.utils import parse_bytes

from pipeline.summary import size
from zarr_vectors import config
from zarr_vectors.errors import InputError

if TYPE_CHECKING:  # distributed costs ~0.5 s to import: only a command that uses a cluster pays it
    from distributed import Client, LocalCluster

#: Environment of embedded worker processes, on top of distributed's defaults.  Distributed
#: sets ``MALLOC_TRIM_THRESHOLD_``, and setting any ``MALLOC_*_`` variable turns off glibc's
#: adaptive mmap threshold: every NumPy temporary over 128 KiB then becomes a fresh mmap
#: whose pages fault in again on every call (measured: +45% on link placement, all of it
#: system time).  Raising the mmap threshold to glibc's maximum (32 MiB) lets those
#: temporaries reuse heap memory while the trim threshold still returns freed memory.
WORKER_ENVIRON = {"MALLOC_MMAP_THRESHOLD_": str(32 * 1024 * 1024)}

#: dask.config ``scheduler`` values that run a graph in the calling process
LOCAL_SCHEDULERS = frozenset({"threads", "threading", "sync", "synchronous", "single-threaded"})


def local_scheduler(*, scheduler_address: str | None = None, scheduler_file: str | None = None) -> str | None:
    """The in-process scheduler dask.config names, when no cluster address is given (else None).

    A user who set ``DASK_SCHEDULER=threads`` (or ``dask.config.set(scheduler="synchronous")``)
    asked for no cluster; an address given explicitly or in ``DASK_SCHEDULER_ADDRESS`` still wins.
    """
    if scheduler_address or scheduler_file or os.environ.get("DASK_SCHEDULER_ADDRESS"):
        return None
    name = dask.config.get("scheduler", None)
    return name if isinstance(name, str) and name in LOCAL_SCHEDULERS else None


def _workers(workers: int | None, threads_per_worker: int) -> int:
    """An embedded cluster's worker processes: as asked, else one per ``threads_per_worker`` cores."""
    return workers or max(1, (os.cpu_count() or 1) // threads_per_worker)


@dataclass(frozen=True)
class Choice:
    """Where a command runs: ``threads`` (no cluster), ``embedded`` (a LocalCluster of
    ``workers`` processes, stopped with the command) or ``connect`` (a running scheduler)."""

    where: str
    reason: str
    workers: int = 0
    scheduler_address: str | None = None
    scheduler_file: str | None = None
    memory_limit: str | None = None

    def line(self) -> str:
        """The one line a command prints about its choice."""
        if self.where == "threads":
            return f"running on local threads ({self.reason})"
        if self.where == "embedded":
            return f"starting a local cluster of {self.workers} workers ({self.reason})"
        return f"connecting to {self.reason}"


def choose(
    *,
    work_bytes: int | None,
    what: str = "input",
    scheduler_address: str | None = None,
    scheduler_file: str | None = None,
    cluster: bool = False,
    workers: int | None = None,
    memory_limit: str | None = None,
    needs_cluster: str | None = None,
    threads_per_worker: int = 1,
) -> Choice:
    """Decide where the work runs (see the module's precedence).

    ``work_bytes``: the size of the work (input files, or the store worked on; None when
    not known); ``needs_cluster``: why the command needs a distributed client whatever
    its size (``--report``), or None.
    """
    if scheduler_file:
        return Choice("connect", f"the scheduler in {scheduler_file}", scheduler_file=scheduler_file)
    address = scheduler_address or os.environ.get("DASK_SCHEDULER_ADDRESS")
    if address:
        source = "" if scheduler_address else " (DASK_SCHEDULER_ADDRESS)"
        return Choice("connect", f"the scheduler at {address}{source}", scheduler_address=address)
    named = local_scheduler()
    if named:
        return Choice("threads", f"dask.config scheduler={named!r}")
    n = _workers(workers, threads_per_worker)
    asked = [opt for opt, given in (("--cluster", cluster), ("--workers", workers), ("--memory-limit", memory_limit))
             if given]
    threshold = parse_bytes(config.get("cli.cluster-threshold"))
    amount = f"{size(work_bytes)} of {what}" if work_bytes is not None else f"{what} of unknown size"
    if asked or needs_cluster:
        return Choice("embedded", f"asked for: {', '.join(asked) or needs_cluster}", n, memory_limit=memory_limit)
    if work_bytes is None or work_bytes >= threshold:
        return Choice("embedded", f"large job: {amount} >= {size(threshold)}, zarr_vectors.cli.cluster-threshold",
                      n, memory_limit=memory_limit)
    return Choice("threads", f"small job: {amount} < {size(threshold)}, zarr_vectors.cli.cluster-threshold")


@contextmanager
def session(choice: Choice, *, threads_per_worker: int = 1) -> Iterator[Client | None]:
    """Run the block where ``choice`` says: a client (closed on exit, an embedded cluster
    stopped), or None on local threads (or the in-process scheduler dask.config names),
    set in dask.config for the block as the scheduler function itself: a scheduler *name*
    makes dask import distributed (~0.4 s) to look for a client first."""
    if choice.where == "threads":
        import dask.local
        import dask.threaded

        synchronous = local_scheduler() not in (None, "threads", "threading")
        with dask.config.set(scheduler=dask.local.get_sync if synchronous else dask.threaded.get):
            yield None
        return
    with connect(scheduler_address=choice.scheduler_address, scheduler_file=choice.scheduler_file,
                 workers=choice.workers or None, threads_per_worker=threads_per_worker,
                 memory_limit=choice.memory_limit) as client:
        yield client


@contextmanager
def connect(
    *,
    scheduler_address: str | None = None,
    scheduler_file: str | None = None,
    workers: int | None = None,
    threads_per_worker: int = 1,
    memory_limit: str | None = None,
) -> Iterator[Client]:
    """A client on the selected cluster, closed (and an embedded cluster stopped) on exit.
    A scheduler that cannot be reached, or a scheduler file that names none, is an
    :class:`InputError` naming it (distributed waits forever for a file that is not there);
    so is an external cluster that does not run this package's version
    (:func:`zarr_vectors.execution.environment.check_cluster`)."""
    from distributed import Client

    from zarr_vectors.execution.environment import check_cluster
    from zarr_vectors.execution.runner import current_client

    address = scheduler_address or os.environ.get("DASK_SCHEDULER_ADDRESS")
    where = f"the scheduler at {address!r}"
    if scheduler_file:
        address, where = _address_in(scheduler_file), f"the scheduler in {scheduler_file!r}"
    if address:
        before = current_client()
        try:
            client = Client(address)
        except (OSError, ValueError, TypeError) as exc:  # refused, timed out, not an address
            failed = current_client()
            if failed is not None and failed is not before:  # it made itself the process's client and
                failed.close()  # scheduler before it failed: every later graph went to a dead scheduler
            waited = dask.config.get("distributed.comm.timeouts.connect")
            raise InputError(f"cannot connect to {where} (tried for distributed.comm.timeouts.connect, {waited}): "
                             f"{type(exc).__name__}: {exc}") from exc
        with client:
            check_cluster(client, where)
            yield client
        return
    with local_cluster(workers=workers, threads_per_worker=threads_per_worker, memory_limit=memory_limit) as cluster, \
            Client(cluster) as client:
        yield client


def _address_in(scheduler_file: str) -> str:
    """The address a scheduler wrote to its ``--scheduler-file``, waiting for it as long as for
    a connection (``distributed.comm.timeouts.connect``): a batch script may start the
    scheduler and the job together, and the scheduler writes the file in place (it may be
    empty or partial for a moment)."""
    import json
    import time

    from dask.utils import parse_timedelta

    deadline = time.monotonic() + parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), "s")
    while True:
        try:
            with open(scheduler_file, encoding="utf-8") as f:
                doc = json.load(f)
            address = doc.get("address") if isinstance(doc, dict) else None
            if isinstance(address, str) and address:
                return address
            problem = "names no scheduler address"
        except FileNotFoundError:
            problem = "did not appear: start the scheduler with --scheduler-file first"
        except (OSError, ValueError) as exc:
            problem = f"cannot be read: {type(exc).__name__}: {exc}"
        if time.monotonic() >= deadline:
            raise InputError(f"scheduler file {scheduler_file!r} {problem}")
        time.sleep(0.1)


def local_cluster(
    *, workers: int | None = None, threads_per_worker: int = 1, memory_limit: str | None = None
) -> LocalCluster:
    """The embedded cluster: worker processes sized to the machine, a dashboard on a free port.

    For a notebook, ``Client(local_cluster())`` keeps it for the session; jobs use
    :func:`connect`, which closes it.
    """
    from distributed import LocalCluster

    n = _workers(workers, threads_per_worker)
    environ = {**dask.config.get("distributed.nanny.pre-spawn-environ", {}), **WORKER_ENVIRON}
    waited = dask.config.get("distributed.scheduler.no-workers-timeout", None) or config.get("cli.no-workers-timeout")
    with dask.config.set({"distributed.nanny.pre-spawn-environ": environ,
                          "distributed.scheduler.no-workers-timeout": waited}):
        return LocalCluster(
            n_workers=n,
            threads_per_worker=threads_per_worker,
            processes=True,
            memory_limit=memory_limit or "auto",
            dashboard_address=":0",
        )
