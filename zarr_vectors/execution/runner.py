"""Running graphs on whatever scheduler is current, with progress callbacks.

A library call on numpy arrays and a cluster job share one code path: the graph
is the same, only the scheduler differs (a distributed ``Client`` if one is
active, else dask's local threads).  Every graph in the project runs through
:func:`compute` / :func:`persist`, so progress reporting has one hook: callbacks
(in the spirit of cubed's) registered with :func:`callbacks` hear of every stage
and, under a distributed client, of every finished task, driven from futures.
"""

from __future__ import annotations

import gc
import numbers
import os
import sys
import threading
import uuid
import weakref
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future, wait
from contextlib import contextmanager, suppress
from typing import Any, Protocol

import dask
import dask.threaded
import numpy as np
from dask.delayed import Delayed, DelayedLeaf
from dask.highlevelgraph import HighLevelGraph
from dask.utils import funcname

from zarr_vectors import config
from zarr_vectors.execution import environment, requests
from zarr_vectors.store.accounting import ContextExecutor


class ProgressCallback(Protocol):
    """Receives stage and task events; all methods optional in spirit, all called."""

    def on_stage_start(self, stage: str, tasks: int) -> None: ...

    def on_task_end(self, stage: str) -> None: ...

    def on_stage_end(self, stage: str) -> None: ...


_LOCAL = threading.local()


def _callbacks() -> list[ProgressCallback]:
    """This thread's callbacks.

    Per thread, because several jobs may run in one process at once -- detached jobs
    share a worker's process, each in its own (seceded) task thread -- and each job's
    journal must hear only its own stages.  A job registers its callbacks and runs its
    graphs in one thread (the command line, ``run_build``, a notebook cell).
    """
    cbs = getattr(_LOCAL, "callbacks", None)
    if cbs is None:
        cbs = _LOCAL.callbacks = []
    return cbs


@contextmanager
def callbacks(*cbs: ProgressCallback) -> Iterator[None]:
    """Register progress callbacks for the graphs this thread runs inside the block."""
    registry = _callbacks()
    registry.extend(cbs)
    try:
        yield
    finally:
        for cb in cbs:
            registry.remove(cb)


_HEAP_LOCK = threading.Lock()
_HEAP_HOLDERS = 0
_HEAP_OURS = False  # whether the freeze in force is ours to undo


@contextmanager
def frozen_heap() -> Iterator[None]:
    """Inside the block, the objects alive when it began (modules, the client, their
    caches) are left out of the garbage collector's full passes.

    The client is a serial step between stages: a full pass there pauses a job with every
    worker idle.  Over a client's ~250k long-lived objects one took 0.12 s of each
    10^7-point build; over the build's own objects, 0.01 s (benchmarks/scaling.py).  Every
    entry freezes what exists by then (a command enters before it starts its cluster, its
    job after); the objects go back to the collector when the last block of the process
    ends.  A process that froze its heap itself is left as it is, and
    ``zarr_vectors.freeze-heap: False`` leaves the collector alone (a job run inside a
    worker: its process holds other tasks' data).
    """
    global _HEAP_HOLDERS, _HEAP_OURS
    if not config.get("freeze-heap"):
        yield
        return
    with _HEAP_LOCK:
        if _HEAP_HOLDERS == 0:
            _HEAP_OURS = gc.get_freeze_count() == 0
        _HEAP_HOLDERS += 1
        if _HEAP_OURS:
            gc.freeze()
    try:
        yield
    finally:
        with _HEAP_LOCK:
            _HEAP_HOLDERS -= 1
            if _HEAP_HOLDERS == 0 and _HEAP_OURS:
                gc.unfreeze()


def current_client():  # -> distributed.Client | None
    """The distributed client graphs run on, if any.

    None when ``dask.config`` names another scheduler (``dask.config.set(scheduler=
    "synchronous")`` inside a client context is the usual way to debug a task in this
    process): the setting wins over the client, as it does for ``dask.compute``.
    """
    scheduler = dask.config.get("scheduler", None)
    if scheduler is not None and scheduler not in ("dask.distributed", "distributed"):
        return None
    if "distributed" not in sys.modules:  # no client can exist; importing it costs ~0.4 s
        return None
    try:
        from distributed import default_client
    except ImportError:  # pragma: no cover - distributed is a dependency
        return None
    try:
        return default_client()
    except ValueError:
        return None


def parallelism() -> int:
    """How many tasks the graphs are planned for: ``zarr_vectors.plan-threads`` when set,
    else what the current scheduler runs at once (worker threads or cores)."""
    planned = config.get("plan-threads")
    if planned:
        return int(planned)
    client = current_client()
    if client is not None:
        try:
            return max(1, sum(client.nthreads().values()))
        except Exception:  # scheduler unreachable: fall back to the local guess
            pass
    return max(1, os.cpu_count() or 1)


class _SettlingPool:
    """The pool a graph on local threads runs on, remembering the tasks it was handed.

    dask's threaded scheduler raises at a graph's first failed task while the tasks it had
    started go on -- writing cells behind the error, racing a caller who cleans up or runs
    the job again.  The runner waits for them (:meth:`settle`) before it raises.
    """

    def __init__(self, pool: Executor) -> None:
        self._pool = pool
        self._max_workers = pool._max_workers  # type: ignore[attr-defined]  # what dask's threaded scheduler reads
        self._running: set[Future[Any]] = set()  # not the finished: a future holds its task's result

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future = self._pool.submit(fn, *args, **kwargs)
        self._running.add(future)
        future.add_done_callback(self._running.discard)
        return future

    def settle(self) -> None:
        """Wait for the tasks that started; those still queued (on a shared pool) never start."""
        running = list(self._running)
        for future in running:
            future.cancel()  # only one not yet running
        wait(running)


_THREAD_POOLS = threading.local()


def _local_pool() -> _SettlingPool | None:
    """The pool for a graph on dask's local threads: the ``pool`` setting (a user's, or the
    request count's), else one per calling thread and ``num_workers``, as dask keeps its own
    (outside a count, a graph run from inside a task never waits on the pool running that
    task; the count's pool is one for the process).  None when the graph does not run on
    local threads, or on a pool that is no executor."""
    if not requests.on_dask_threads():
        return None
    pool = dask.config.get("pool", None)
    if pool is None:
        workers = dask.config.get("num_workers", None) or dask.threaded.CPU_COUNT
        pools = _THREAD_POOLS.__dict__.setdefault("pools", {})
        pool = pools.get(workers)
        if pool is None:
            pool = pools[workers] = ContextExecutor(workers, thread_name_prefix="zv-dask")
    return _SettlingPool(pool) if isinstance(pool, Executor) else None


def _run(stage: str, items: Sequence[Any], *, keep: bool, everywhere: bool = False) -> list[Any]:
    registered = list(_callbacks())
    client = current_client()
    if client is None:
        for cb in registered:
            cb.on_stage_start(stage, len(items))
        # no client and no configured scheduler: name dask's threads, which dask would pick
        # itself only after importing distributed to look for a client (~0.4 s, every process)
        named: dict[str, Any] = {"scheduler": dask.threaded.get}
        if dask.config.get("scheduler", None) is not None:
            named = {}
        with requests.stage(stage):
            pool = _local_pool()  # inside the stage: a request count sets the pool there
            if pool is not None:
                named["pool"] = pool
            try:
                out = list(dask.persist(*items, **named) if keep else dask.compute(*items, **named))
            except Exception:
                if pool is not None:  # the store is still when the failure is raised
                    pool.settle()
                raise
        for cb in registered:
            cb.on_stage_end(stage)
        return out
    from distributed import as_completed

    environment.check_once(client)
    with requests.stage(stage, client):
        futures = client.compute(list(items), retries=config.get("task-retries"))
    for cb in registered:
        cb.on_stage_start(stage, len(futures))
    for done in as_completed(futures):
        if done.status != "finished":  # raised here, in the step that failed, once its started tasks ended
            _stop_graph(client, futures, done)
            done.result()
        for cb in registered:
            cb.on_task_end(stage)
    for cb in registered:
        cb.on_stage_end(stage)
    if keep:  # results stay on the workers, as dask.persist would leave them
        if everywhere and len(client.nthreads()) > 1:
            client.replicate(futures)
        return [dask.delayed(f) for f in futures]
    return client.gather(futures)


def _stop_graph(client: Any, futures: Sequence[Any], failed: Any) -> None:
    """After ``failed``, a future of a graph, failed: drop the rest, and wait until no task of
    the graph runs or is still to run, as a failure on local threads waits (:class:`_SettlingPool`).

    Waiting for every future instead let a long graph run to its end behind its first
    failure.  A released task that started runs on to its end in its worker (a thread is
    not stopped), and a release reaches the scheduler and the workers a little later, so
    the graph's unfinished keys -- as the scheduler has them, after optimisation -- are
    taken before the release and looked for on the scheduler (still to run) and on the
    workers (running, or queued there) until none is.  A worker's tasks reach it on the
    scheduler's stream, which a poll can overtake, so a clean poll is confirmed by a no-op
    task on every worker (sent on that stream after them) and one more poll.  Every call is
    bounded by ``zarr_vectors.failed-graph-wait``: a task that never ends, or a worker too
    busy to answer, must not hold the error back.  Work this thread started (:func:`start`),
    which the caller still holds, is not released but waited for within that bound too,
    whether the failed graph needs it or not: it writes to the same store.
    """
    import time

    from dask.utils import parse_timedelta
    from distributed import wait

    deadline = time.monotonic() + parse_timedelta(config.get("failed-graph-wait"))

    def left() -> float:
        return max(0.01, deadline - time.monotonic())

    running_beside = [f.key for f in list(_started()) if not f.done()]  # held by the caller: not released
    try:
        keys = client.run_on_scheduler(_unfinished_keys, [f.key for f in futures] + running_beside,
                                       callback_timeout=left())
    except Exception:  # out of time, or the scheduler gone: wait for the whole graph instead, within the bound
        with suppress(TimeoutError):
            wait([f for f in futures if f is not failed], timeout=left())
        return
    for future in futures:  # released, not cancelled: distributed's cancel asserts on a key an inner task
        if future is not failed:  # depends on (a stage's item that other items' tasks take too)
            future.release()
    confirmed = False
    while keys and time.monotonic() < deadline:
        try:
            pending = client.run_on_scheduler(_pending_keys, keys, callback_timeout=left())
            running = client.run(_running_keys, keys, on_error="return", callback_timeout=left())
        except Exception:  # out of time, or the scheduler gone: nothing more to learn from it
            return
        if pending or any(isinstance(found, list) and found for found in running.values()):
            confirmed = False
            time.sleep(0.05)
            continue
        if confirmed:
            return
        barriers = [client.submit(_no_op, workers=[w], allow_other_workers=False, pure=False, priority=2**31)
                    for w in running]
        try:
            wait(barriers, timeout=left())
        except TimeoutError:  # a worker too busy to run it within the bound
            return
        confirmed = True


def _no_op() -> None:
    """A task that only marks its place in a worker's stream of tasks (:func:`_stop_graph`)."""


#: task states in which a task of a stopped graph may still run: on the scheduler, and on a worker
_SCHEDULED = frozenset({"waiting", "queued", "no-worker", "processing"})
_ON_WORKER = frozenset({"waiting", "ready", "constrained", "executing", "long-running", "cancelled", "resumed"})


def _unfinished_keys(keys: list[Any], dask_scheduler: Any = None) -> set[Any]:
    """On the scheduler: the keys the given keys depend on, themselves included, that are still
    to run (results already computed are not walked through: they run no more)."""
    tasks, seen, found = dask_scheduler.tasks, set(), set()
    stack = [tasks[k] for k in keys if k in tasks]
    while stack:
        ts = stack.pop()
        if ts.key in seen or ts.state == "memory":
            continue
        seen.add(ts.key)
        if ts.state in _SCHEDULED:
            found.add(ts.key)
        stack.extend(ts.dependencies)
    return found


def _pending_keys(keys: set[Any], dask_scheduler: Any = None) -> list[Any]:
    """On the scheduler: which of ``keys`` are still to run (not yet released)."""
    tasks = dask_scheduler.tasks
    return [k for k in keys if k in tasks and tasks[k].state in _SCHEDULED]


def _running_keys(keys: set[Any], dask_worker: Any = None) -> list[Any]:
    """On a worker: which of ``keys`` it runs or holds to run (released ones still running included)."""
    tasks = dask_worker.state.tasks
    return [k for k in keys if k in tasks and tasks[k].state in _ON_WORKER]


def compute(stage: str, *items: Any) -> list[Any]:
    """``dask.compute`` of ``items`` as one named stage; results on the client."""
    return _run(stage, items, keep=False)


def persist(stage: str, *items: Any, everywhere: bool = False) -> list[Any]:
    """``dask.persist`` of ``items`` as one named stage; results stay where they were computed.

    ``everywhere``: under a distributed client, copy the results to every worker as
    soon as they exist.  For a large result that many later tasks read (the vertex
    placement): otherwise the scheduler keeps those tasks on the one worker holding
    it, to save the transfer, and the other workers wait for work stealing.
    """
    return _run(stage, items, keep=True, everywhere=everywhere)


def persist_beside(stage: str, items: Sequence[Any], started: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    """``persist(stage, *items)``, with work handed back by :func:`start` running beside it.

    On local threads :func:`start` leaves its work unstarted; here it joins this stage's
    graph and fills the threads the stage's own tasks leave idle, instead of running after
    them in the stage that needs it.  Returns both halves' references, the started work's
    now persisted.  Under a distributed client that work is already running: it comes back
    as it is.
    """
    if current_client() is not None:
        return persist(stage, *items), list(started)
    out = persist(stage, *items, *started)
    return out[: len(items)], out[len(items) :]


def task_runs(
    weights, minimum: int, maximum: int | None = None, *, tasks_per_thread: int | None = None  # noqa: ANN001
) -> list[slice]:
    """Contiguous runs of items for one stage's tasks: about ``tasks_per_thread`` (default
    ``zarr_vectors.tasks-per-thread``: enough that a slow task or a busy core is absorbed
    by the others, few enough that per-task overhead stays small) per worker thread, each
    weighing at least ``minimum`` (rows, cells...) when there is that much, and about
    ``maximum`` at most (a bound on one task's memory).  The one task-sizing policy."""
    target = task_size(int(np.sum(weights, dtype=np.int64)), minimum, maximum, tasks_per_thread=tasks_per_thread)
    return split_by_weight(weights, target)


def task_size(total: int, minimum: int, maximum: int | None = None, *, tasks_per_thread: int | None = None) -> int:
    """The weight of one task under :func:`task_runs`' policy, for work of ``total`` that is
    cut by size rather than into runs of items (rows of an input block)."""
    per_thread = config.get("tasks-per-thread") if tasks_per_thread is None else tasks_per_thread
    target = max(minimum, -(-total // (per_thread * parallelism())))
    return target if maximum is None else max(1, min(target, maximum))


def share(value: Any) -> Any:
    """A large client-side value as one graph node that many tasks take (scattered under a
    distributed client: a list or dict into one future per item), not a copy embedded in each
    task; None stays None."""
    if value is None:
        return None
    client = current_client()
    if client is not None:
        environment.check_once(client, joined=False)  # data, not code: the workers that joined are asked at the graph
        return client.scatter(value, hash=False)
    return dask.delayed(value, name=f"zv-shared-{uuid.uuid4().hex}", traverse=False)


def shares(parts: Sequence[Any], take: Callable[[Any, int], Any], owners: int) -> list[list[Any]]:
    """Per owner ``j``, what it needs of every part: ``take(part, j)``.

    Under a distributed client each share is a task of its own, so only the share moves
    to the owner's worker; the parts x owners tasks are one graph layer (a
    ``dask.delayed`` call each cost the client about as much as the rest of the graph,
    with every worker idle).  On local threads nothing moves: every owner gets the parts
    as they are and takes its share itself, and the graph is that many tasks smaller.
    """
    if current_client() is None:
        return [list(parts) for _ in range(owners)]
    taken = calls(take, [(p, j) for j in range(owners) for p in parts])
    return [taken[j * len(parts) : (j + 1) * len(parts)] for j in range(owners)]


def per_owner(func: Callable[..., Any], parts: Sequence[Any], owners: int, *head: Any) -> list[Delayed]:
    """``func(*head, j, *parts)`` for every owner ``j``, for work whose parts are done apart.

    ``func`` must give the same (mergeable) result from each part alone as from all of
    them.  Under a distributed client it runs as ``func(*head, j, part)`` once per (owner,
    part), where the part is, so no part moves; on local threads once per owner, so the
    graph is that many tasks smaller.  Each ``head`` argument is one :func:`calls` takes.
    """
    if current_client() is None:
        return calls(func, [(*head, j, *parts) for j in range(owners)])
    return calls(func, [(*head, j, part) for j in range(owners) for part in parts])


def start(*items: Any, stage: str = "background") -> list[Any]:
    """Start ``items`` now and return references to them without waiting for them.

    For work nothing needs until a later stage: under a distributed client it runs
    beside the stages in between (a failure surfaces in the stage that needs it); on
    local threads the items come back as they are and run with that stage, or with an
    earlier one that takes them (:func:`persist_beside`).  Under a client their requests
    are counted under ``stage``; on local threads, under the stage they run with.
    """
    client = current_client()
    if client is None:
        return list(items)
    environment.check_once(client)
    with requests.stage(stage, client):
        futures = client.compute(list(items), retries=config.get("task-retries"))
    _started().update(futures)
    return [dask.delayed(f) for f in futures]


def _started() -> weakref.WeakSet[Any]:
    """This thread's started work still referenced (:func:`start`): a failed step waits for it
    too, so that its error is raised on a still store (:func:`_stop_graph`)."""
    started = getattr(_LOCAL, "started", None)
    if started is None:
        started = _LOCAL.started = weakref.WeakSet()
    return started


def calls(func: Callable[..., Any], arguments: Sequence[Sequence[Any]]) -> list[Delayed]:
    """``[dask.delayed(func)(*args) for args in arguments]``, built as one graph layer.

    Each ``dask.delayed`` call merges the graphs of everything it takes: for a stage whose
    tasks each take many graph references (an owner takes a share of every block) that
    cost the client ~1.4 ms a task with every worker idle; one layer merges each graph once.
    An argument is a graph reference -- a ``Delayed``, or a single future (:func:`share` of
    one object: a shared list or dict scatters into many) -- or a real number, a numpy array
    of numbers or None, nothing the graph could mistake for a key or a task.  Unlike ``dask.delayed``,
    a reference whose key is not in its own graph is not caught here (dask makes none).
    """
    name = f"{funcname(func)}-{uuid.uuid4().hex}"
    dependencies: dict[Any, Delayed] = {}
    layer: dict[Any, Any] = {}
    for i, args in enumerate(arguments):
        task: list[Any] = [func]
        for arg in args:
            if isinstance(arg, Delayed):
                dependencies.setdefault(_graph_of(arg), arg)
                task.append(arg.key)
            elif _is_future(arg) or arg is None or isinstance(arg, numbers.Real) or _plain_array(arg):
                task.append(arg)  # a scattered value's future is a reference the graph resolves
            else:
                raise TypeError(f"runner.calls: argument {arg!r} is neither a graph reference nor a number or array")
        layer[f"{name}-{i}"] = tuple(task)  # named as dask.delayed names its tasks
    graph = HighLevelGraph.from_collections(name, layer, dependencies=list(dependencies.values()))
    return [Delayed(key, graph, layer=name) for key in layer]


def _plain_array(value: Any) -> bool:
    """A numpy array of numbers: a literal (an array with objects, in a field too, could hold a
    reference dask would not resolve)."""
    return isinstance(value, np.ndarray) and not value.dtype.hasobject


def _graph_of(ref: Delayed) -> tuple[Any, ...]:
    """What makes two references' graphs the same: a leaf (a shared value, a persisted
    future) builds its one-key graph anew on each access, so it goes by its key; every
    other ``Delayed`` holds its graph, and references into one layer of it merge once."""
    if isinstance(ref, DelayedLeaf):
        return ("leaf", ref.key)
    return (id(ref.dask), ref.__dask_layers__())  # the graph stays alive: its id is not reused


def _is_future(value: Any) -> bool:
    """Whether ``value`` is a distributed future (only a process that imported distributed has one)."""
    distributed = sys.modules.get("distributed")
    return distributed is not None and isinstance(value, distributed.Future)


def most_runs(total: int, target: int) -> int:
    """How many runs :func:`split_by_weight` makes at most of items weighing ``total`` in all:
    ``ceil(total / target)`` (fewer when there are fewer items; one for any non-empty list)."""
    return -(-total // max(1, int(target)))


def split_by_weight(weights, target: int) -> list[slice]:  # noqa: ANN001 - numpy array of ints
    """Contiguous runs of items, each summing to about ``target`` (each run >= 1 item).

    Used to group whole cells into owner tasks: tasks of a useful size (per-task
    scheduler overhead is milliseconds), never splitting a cell.  The number of runs is
    ``ceil(total / target)`` and each cut goes where the running total is closest to
    an even share, so runs come out as equal as whole items allow (a task wave is only
    as fast as its largest task).
    """
    weights = np.asarray(weights, dtype=np.int64)
    n = len(weights)
    if n == 0:
        return []
    total = int(weights.sum())
    runs = min(n, max(1, most_runs(total, target)))
    cum = np.cumsum(weights)
    ideal = total * np.arange(1, runs) / runs
    at = np.searchsorted(cum, ideal)  # first item whose running total reaches the share
    before = np.maximum(at - 1, 0)
    ends = np.where((at > 0) & (ideal - cum[before] < cum[at] - ideal), at, at + 1)
    # a handful of cuts: a set, not np.unique, whose first plain call imports numpy.ma (~55 ms
    # of every cold process's first stage)
    bounds = [0, *sorted(set(np.clip(ends, 1, n - 1).tolist())), n] if runs > 1 else [0, n]
    return [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]
