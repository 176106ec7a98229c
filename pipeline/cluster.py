"""Choosing the Dask cluster a job runs on.

Precedence: an explicit scheduler address or scheduler file, then the
``DASK_SCHEDULER_ADDRESS`` environment variable, else an embedded
``LocalCluster`` sized to the machine.  The command line (:func:`cluster_or_local`) also
honours an in-process scheduler named in dask.config (``DASK_SCHEDULER=threads``): then
no cluster starts at all.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import dask
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

    An embedded cluster costs seconds to start and worker processes; a user who set
    ``DASK_SCHEDULER=threads`` (or ``dask.config.set(scheduler="synchronous")``) asked
    for none, and an address given explicitly or in ``DASK_SCHEDULER_ADDRESS`` still wins.
    """
    if scheduler_address or scheduler_file or os.environ.get("DASK_SCHEDULER_ADDRESS"):
        return None
    name = dask.config.get("scheduler", None)
    return name if isinstance(name, str) and name in LOCAL_SCHEDULERS else None


@contextmanager
def connect(
    *,
    scheduler_address: str | None = None,
    scheduler_file: str | None = None,
    workers: int | None = None,
    threads_per_worker: int = 1,
    memory_limit: str | None = None,
) -> Iterator[Client]:
    """A client on the selected cluster, closed (and an embedded cluster stopped) on exit."""
    address = scheduler_address or os.environ.get("DASK_SCHEDULER_ADDRESS")
    if scheduler_file:
        with Client(scheduler_file=scheduler_file) as client:
            yield client
        return
    if address:
        with Client(address) as client:
            yield client
        return
    with local_cluster(workers=workers, threads_per_worker=threads_per_worker, memory_limit=memory_limit) as cluster, \
            Client(cluster) as client:
        yield client


@contextmanager
def cluster_or_local(
    *,
    scheduler_address: str | None = None,
    scheduler_file: str | None = None,
    workers: int | None = None,
    threads_per_worker: int = 1,
    memory_limit: str | None = None,
) -> Iterator[Client | None]:
    """:func:`connect`, or None -- no cluster, the graphs run on that scheduler -- when
    :func:`local_scheduler` names one."""
    if local_scheduler(scheduler_address=scheduler_address, scheduler_file=scheduler_file):
        yield None
        return
    with connect(scheduler_address=scheduler_address, scheduler_file=scheduler_file, workers=workers,
                 threads_per_worker=threads_per_worker, memory_limit=memory_limit) as client:
        yield client


def local_cluster(
    *, workers: int | None = None, threads_per_worker: int = 1, memory_limit: str | None = None
) -> LocalCluster:
    """The embedded cluster: worker processes sized to the machine, a dashboard on a free port.

    For a notebook, ``Client(local_cluster())`` keeps it for the session; jobs use
    :func:`connect`, which closes it.
    """
    n = workers or max(1, (os.cpu_count() or 1) // threads_per_worker)
    environ = {**dask.config.get("distributed.nanny.pre-spawn-environ", {}), **WORKER_ENVIRON}
    with dask.config.set({"distributed.nanny.pre-spawn-environ": environ}):
        return LocalCluster(
            n_workers=n,
            threads_per_worker=threads_per_worker,
            processes=True,
            memory_limit=memory_limit or "auto",
            dashboard_address=":0",
        )
