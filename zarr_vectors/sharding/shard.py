"""``shard_store`` / ``unshard_store``: repack every grid array of a store (docs/format.md §9).

Only grid arrays (``vertices``, ``vertex_fragments``, ``vertex_attributes/*``,
``fragment_attributes/*``, ``links/*/*``, ``link_fragments``,
``link_attributes/*/*/*``) of every level change layout; ``object_index``,
``object_attributes``, ``groups`` and ``group_attributes`` never do.  Logical content,
paths, ``shape`` and every attribute (``nonempty_chunks``, ``chunk_grid_origin``, ...)
are unchanged; the array's ``chunk_grid`` becomes the shard shape and its codec list
one ``sharding_indexed`` codec whose inner codecs are the array's own (the store's
compressor survives, docs/decisions.md D14).  Because the inner codecs are the array's
own, a cell's stored bytes are moved as they are -- never decompressed -- so
``shard_store`` then ``unshard_store`` gives back the original files byte for byte.

This module plans and runs the Dask graph; which arrays and layouts is
:mod:`.layout`, the staging and crash-safe commit :mod:`.journal`.

The graph
---------
The client checks the shard shape (its rank and values), reads the arrays' documents and
submits steps 1-2 as one graph (no client step between them).  It counts the pack tasks from
the presence lists' lengths; a task given the check's listings plans which shards each one
owns, as even in cells (requests) and stored bytes as whole shards allow.

1. **check** (tasks, before anything is written): per grid array, the cells actually
   on disk (``derive_nonempty_chunks``: a listing, or the shard indexes of an already
   sharded array) must be exactly its ``nonempty_chunks``; one task gathers the
   disagreements and refuses the store (D15), which is left untouched: the presence
   lists are what the packer reads, and after sharding they cannot be rebuilt from a
   listing any more.  Only then does a task remove stale staging.
2. **pack** (tasks): each task owns a group of whole target objects -- whole shards,
   or when unsharding every cell of whole source shards -- reads the source cells
   listed in ``nonempty_chunks`` (each source shard fetched once) and writes the new
   objects under the staging prefix (:mod:`.journal`).  Nothing of the store itself
   is touched, and two tasks never write the same object.  When a pack task fails
   (a cell it reads is refused), what the step staged is removed.
3. **commit** (tasks of whole arrays, a graph of its own once every pack task succeeded):
   a first task drops the root's consolidated copy
   (:func:`~zarr_vectors.store.consolidated.drop_consolidated`); then each array's new
   document and keys are planned, journaled and applied (:func:`.journal.commit_arrays`).
   A last task removes the staging prefix and writes the consolidated copy again if
   there was one.

Task sizes are the settings ``shard.min-cells-per-task``, ``shard.cells-per-batch`` and
``shard.min-cells-per-commit`` (:mod:`zarr_vectors.config`), read when the graph is planned.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dask
import numpy as np

from zarr_vectors import config
from zarr_vectors.encoding import group_rows
from zarr_vectors.errors import EncodingError, InputError, InternalError
from zarr_vectors.execution import runner
from zarr_vectors.format.paths import format_chunk_key
from zarr_vectors.reconcile import presence_mismatch, refuse_unreconciled
from zarr_vectors.sharding.journal import STAGING, Commit, commit_arrays, recover, staged_key
from zarr_vectors.sharding.layout import (
    ShardShapeArg,
    in_layout,
    new_keys,
    normalise_shard_shape,
    open_grid_arrays,
    target_document,
)
from zarr_vectors.store.backend import Storage
from zarr_vectors.store.codecs import ShardingSpec
from zarr_vectors.store.consolidated import consolidate, drop_consolidated
from zarr_vectors.store.grid import GridArray, read_stored_cells_many
from zarr_vectors.store.groups import ZVStore, open_store_beside


@dataclass(frozen=True)
class ShardResult:
    """What a relayout did."""

    url: str
    shard_shape: tuple[int, ...] | None  # None: unsharded
    arrays: int  # arrays repacked
    skipped: int  # arrays already in the requested layout
    cells: int  # cells moved
    objects: int  # objects (shards or cells) written
    tasks: int  # pack tasks
    recovered: int = 0  # interrupted commits of an earlier run that were finished first

    def __str__(self) -> str:
        layout = f"shards of {list(self.shard_shape)}" if self.shard_shape else "one object per cell"
        extra = f", {self.recovered} interrupted commit(s) finished first" if self.recovered else ""
        return (
            f"{self.arrays} grid arrays repacked into {layout} ({self.cells} cells -> {self.objects} objects, "
            f"{self.tasks} tasks; {self.skipped} already so{extra}) -> {self.url}"
        )


def _light(grid: GridArray, keys: Sequence[str] | None = None) -> GridArray:
    """The array with ``nonempty_chunks`` replaced (small to ship to a task)."""
    doc = dict(grid.doc)
    doc["attributes"] = dict(grid.attributes)
    doc["attributes"]["nonempty_chunks"] = list(keys or [])
    return GridArray(grid.storage, grid.path, doc)


class _Opaque:
    """Hands a task its arguments without dask walking through them (they hold whole documents)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


# ---------------------------------------------------------------------------------------
# check and pack tasks
# ---------------------------------------------------------------------------------------
def _derive_task(grids: _Opaque, run: slice) -> tuple[list[str | None], list[dict[str, int]]]:
    """The arrays of ``run``: how each one's presence list differs from the cells on storage (None:
    they agree), and each one's listing (its objects and their sizes), two outputs: the verdict
    needs only the first, and under a client only what a task takes moves to it."""

    def derive(grid: GridArray) -> tuple[str | None, dict[str, int]]:
        stored = grid.stored_objects()
        return presence_mismatch(grid, grid.derive_nonempty_chunks(stored)), stored

    arrays = grids.value[run]
    derived = arrays[0].storage.overlap(derive, arrays) if arrays else []
    return [mismatch for mismatch, _ in derived], [stored for _, stored in derived]


def _refuse_task(url: str, *parts: list[str | None]) -> None:
    """D15: refuse the store when any array's presence list is not what is on disk."""
    refuse_unreconciled(url, [mismatch for part in parts for mismatch in part])


def _prepare_task(storage: Storage, checked: None, planning: Exception | None, orphans: bool) -> None:
    """Once the check passed and the plan was made: drop the orphans of an interrupted pack stage
    (incomplete, never journaled; the client's look at the store said whether there are any).
    A plan that failed is raised here: after the check's verdict, which is the error a refused
    store gets, and before anything changes."""
    if planning is not None:
        raise planning
    if orphans:
        storage.delete_prefix(STAGING)


def _unconsolidate_task(storage: Storage, consolidated: bool) -> bool:
    """Before the first commit, once every pack task succeeded: drop the consolidated copy (the
    commits change the documents it copies); whether there was one."""
    return drop_consolidated(storage) if consolidated else False


def _after(storage: Storage, *done: Any) -> Storage:
    """``storage``, once ``done`` ran (orders the pack tasks after the check)."""
    return storage


def _commit_task(storage: Storage, grids: _Opaque, shard_shape: tuple[int, ...] | None, unconsolidated: bool) -> int:
    """Journal and apply the new layout of whole arrays (their documents and keys planned here),
    once the consolidated copy is gone."""
    commits: list[Commit] = [
        (g.path, target_document(g.doc, shard_shape), new_keys(g, shard_shape)) for g in grids.value
    ]
    return commit_arrays(storage, commits)


def _finish_task(storage: Storage, had_consolidated: bool, *committed: int) -> None:
    """Once every commit ran: remove the staging prefix; consolidate again if the store was."""
    storage.delete_prefix(STAGING)
    if had_consolidated:
        consolidate(storage)


@dataclass(frozen=True)
class _Job:
    """One array's share of a pack task: whole target objects and their cells."""

    source: GridArray  # light: nonempty_chunks = the cells this job reads
    shard_shape: tuple[int, ...] | None  # target layout
    groups: list[tuple[tuple[int, ...], np.ndarray]]  # (target shard or source shard, (n, D) cell indices)


def _pack_task(storage: Storage, jobs: list[_Job], cells_per_batch: int) -> dict[str, int]:
    """Read whole groups of cells and write their new objects under the staging prefix.

    Groups are handled in batches of about ``cells_per_batch`` cells (one group at
    least), so a task holds one batch in memory however many shards it owns, while
    the reads of a batch still go out concurrently.
    """
    units = [(job, group, cells) for job in jobs for group, cells in job.groups]
    cells_done = objects = 0
    start = 0
    while start < len(units):
        stop, size = start, 0
        while stop < len(units) and (stop == start or size + len(units[stop][2]) <= cells_per_batch):
            size += len(units[stop][2])
            stop += 1
        batch = units[start:stop]
        start = stop
        requests = []
        for job, _, cells in batch:
            origin = np.asarray(job.source.origin, dtype=np.int64)
            requests += [(job.source, tuple(c)) for c in (cells + origin).tolist()]
        raws = read_stored_cells_many(requests)
        puts: dict[str, bytes] = {}
        pos = 0
        for job, group, cells in batch:
            path = job.source.path
            values = raws[pos : pos + len(cells)]
            pos += len(cells)
            for c, raw in zip(cells.tolist(), values):
                if not raw:
                    chunk = np.asarray(c) + np.asarray(job.source.origin)
                    raise EncodingError(
                        f"{path}: cell {format_chunk_key(chunk)} is listed in nonempty_chunks but has no stored "
                        "bytes (was the store changed since the check?)"
                    )
            if job.shard_shape is None:
                for c, raw in zip(cells.tolist(), values):
                    puts[staged_key(path, posixpath.join("c", *map(str, c)))] = raw
            else:
                spec = ShardingSpec(job.shard_shape, job.source.pipeline, ())
                local = cells - np.asarray(group, dtype=np.int64) * np.asarray(job.shard_shape, dtype=np.int64)
                shard_bytes = spec.encode_shard(dict(zip(spec.local_linear(local).tolist(), values)))
                assert shard_bytes is not None
                puts[staged_key(path, posixpath.join("c", *map(str, group)))] = shard_bytes
        storage.put_many(puts)
        cells_done += size
        objects += len(puts)
    return {"cells": cells_done, "objects": objects}


# ---------------------------------------------------------------------------------------
# the operations
# ---------------------------------------------------------------------------------------
def _check_presence(
    store: ZVStore, grids: list[GridArray], shared: Any, min_cells_per_task: int
) -> tuple[Any, list[Any]]:
    """D15, as tasks: (the verdict, which raises for arrays whose presence list is not what is on
    disk; the listing tasks, in array order).  ``shared`` is ``grids`` as one graph node."""
    weights = [len(g.nonempty_chunks) + 1 for g in grids]
    runs = runner.task_runs(weights, min_cells_per_task, tasks_per_thread=1)  # a listing per array: few tasks
    mismatches, listings = zip(*(dask.delayed(_derive_task, pure=False, nout=2)(shared, run) for run in runs)) \
        if runs else ((), ())
    return dask.delayed(_refuse_task, pure=False)(store.url, *mismatches), list(listings)


def _plan_task(
    grids: _Opaque, shard_shape: tuple[int, ...] | None, count: int, *listings: list[dict[str, int]]
) -> list[list[_Job]] | Exception:
    """The jobs of ``count`` pack tasks, planned on a worker from the check's listings (not on the
    client, where every worker would wait for it); tasks beyond the planned ones get none.

    A failure is returned, not raised: the check's verdict must be the error a refused store
    gets, whichever task ends first; :func:`_prepare_task` raises it.
    """
    try:
        stored = [sizes for part in listings for sizes in part]
        tasks = _plan(grids.value, shard_shape, count, stored)
        if len(tasks) > count:  # split_by_weight makes at most ceil(total / target) runs
            raise InternalError(f"planned {len(tasks)} pack tasks, the graph has {count}")
    except Exception as exc:  # noqa: BLE001 - raised by _prepare_task, after the check
        return exc
    return tasks + [[] for _ in range(count - len(tasks))]


def _plan_failure(plan: list[list[_Job]] | Exception) -> Exception | None:
    return plan if isinstance(plan, Exception) else None


def _jobs(plan: list[list[_Job]] | Exception, j: int) -> list[_Job]:
    """Pack task ``j``'s jobs (none when planning failed: the prepare task raises that first)."""
    return [] if isinstance(plan, Exception) else plan[j]


def _cell_bytes(grid: GridArray, index: np.ndarray, stored: Mapping[str, int]) -> np.ndarray:
    """The stored bytes of each cell of ``index`` (cell indices): its object's size, or its share
    of its shard's (an equal share of each present cell)."""
    if grid.sharding is None:
        keys = (posixpath.join(grid.path, "c", *map(str, c)) for c in index.tolist())
        return np.fromiter((stored.get(k, 0) for k in keys), dtype=np.int64, count=len(index))
    counts = grid.shard_cell_counts()
    shards = (index // np.asarray(grid.sharding.shard_shape, dtype=np.int64)).tolist()
    share = (stored.get(posixpath.join(grid.path, "c", *map(str, s)), 0) // counts[tuple(s)] for s in shards)
    return np.fromiter(share, dtype=np.int64, count=len(index))


def _unit_weights(cells: Sequence[int], nbytes: Sequence[int]) -> np.ndarray:
    """A unit's share of the requests (its cells) plus its share of the bytes, in units of 2**-40
    (fine enough for millions of units; the sum stays far below 2**63): tasks as even in both as
    whole units allow (a points store's cells are megabytes each, a link family's mostly small;
    on an object store a request costs a round trip)."""
    cells_, bytes_ = np.asarray(cells, dtype=np.float64), np.asarray(nbytes, dtype=np.float64)
    share = cells_ / max(cells_.sum(), 1.0) + bytes_ / max(bytes_.sum(), 1.0)
    return np.maximum(np.rint(share * 2.0**40), 1).astype(np.int64)


def _plan(
    grids: list[GridArray], shard_shape: tuple[int, ...] | None, count: int, stored: Sequence[Mapping[str, int]]
) -> list[list[_Job]]:
    """Whole target objects of every array, grouped into at most ``count`` pack tasks as even in
    requests and bytes as whole objects allow (``stored``: each array's listing).  One task per
    planned thread: each task's reads and writes are concurrent already."""
    # (array, unit key, the unit's cells, their positions in the presence list)
    units: list[tuple[int, tuple[int, ...], np.ndarray, np.ndarray]] = []
    nbytes: list[int] = []
    for a, grid in enumerate(grids):
        if not grid.nonempty_chunks:
            continue
        index = np.asarray(grid.nonempty_chunk_coords(), dtype=np.int64) - np.asarray(grid.origin, dtype=np.int64)
        # a task owns whole target shards; when unsharding, whole source shards (read once)
        unit_shape = shard_shape if shard_shape is not None else grid.sharding.shard_shape  # type: ignore[union-attr]
        order, starts = group_rows(index // np.asarray(unit_shape, dtype=np.int64))
        group = index[order] // np.asarray(unit_shape, dtype=np.int64)
        ends = np.r_[starts[1:], len(order)]
        cell_bytes = np.r_[0, np.cumsum(_cell_bytes(grid, index, stored[a])[order])]
        for key, lo, hi in zip(group[starts].tolist(), starts.tolist(), ends.tolist()):
            units.append((a, tuple(key), index[order[lo:hi]], order[lo:hi]))
            nbytes.append(int(cell_bytes[hi] - cell_bytes[lo]))
    weights = _unit_weights([len(u[2]) for u in units], nbytes)
    tasks: list[list[_Job]] = []
    for run in runner.split_by_weight(weights, -(-int(weights.sum()) // max(1, count))):
        jobs: list[tuple[int, _Job, list[np.ndarray]]] = []
        for a, key, cells, rows in units[run]:
            if not jobs or jobs[-1][0] != a:
                jobs.append((a, _Job(grids[a], shard_shape, []), []))
            jobs[-1][1].groups.append((key, cells))
            jobs[-1][2].append(rows)
        # each job reads only its cells: ship just those of the presence list
        tasks.append([
            _Job(_light(j.source, [grids[a].nonempty_chunks[i] for i in np.concatenate(rows).tolist()]),
                 j.shard_shape, j.groups)
            for a, j, rows in jobs
        ])  # fmt: skip
    return tasks


def split_commits(weights: Sequence[int]) -> list[slice]:
    """Runs of arrays committed by one task (a commit costs per array and per object): one per
    worker thread, of at least ``shard.min-cells-per-commit``.  Not smaller: a task commits its
    arrays in a few rounds of concurrent requests, so on an object store more tasks than
    threads means more rounds one after another."""
    return runner.task_runs(weights, int(config.get("shard.min-cells-per-commit")), tasks_per_thread=1)


def _relayout(url: Any, shard_shape: Any, storage_options: Mapping[str, Any] | None) -> ShardResult:
    storage = url if isinstance(url, Storage) else Storage(url, storage_options)
    # the staging area's and the root's listings beside the root's read: recovery applies
    # only once the root passed its checks, and the grids are read after it
    store, (staged, top) = open_store_beside(storage, [lambda: storage.list_dir(STAGING), lambda: storage.list_dir("")])
    ndim = store.root.sid_ndim
    target = None if shard_shape is None else normalise_shard_shape(shard_shape, ndim)
    min_cells_per_task = int(config.get("shard.min-cells-per-task"))  # read here, in the client
    cells_per_batch = int(config.get("shard.cells-per-batch"))
    recovered, orphans = recover(storage, staged)  # finish what an interrupted run journaled
    grids = open_grid_arrays(store, store.level_numbers(top))  # recovery changes no level's presence
    for grid in grids:
        if grid.ndim != ndim:
            raise InputError(
                f"{grid.path}: has {grid.ndim} axes but the store's chunk keys have {ndim}; cannot shard it"
            )
    todo = [g for g in grids if not in_layout(g, target)]
    shared = runner.share(_Opaque(todo))  # the documents once, for the check and plan tasks
    # one graph: check and plan -> stale staging dropped -> pack into staging (a failure leaves the
    # store as it was: what this run staged is removed); the pack tasks' plan is made from the
    # check's listings, which give each object's size
    cells = sum(len(g.nonempty_chunks) for g in todo)
    size = runner.task_size(cells, min_cells_per_task, tasks_per_thread=1)
    # how many pack tasks, known before the plan: as many as runs of ``size`` cells, no more than
    # there are cells (every unit, a shard, holds at least one)
    count = min(cells, runner.most_runs(cells, size))
    verdict, listings = _check_presence(store, todo, shared, min_cells_per_task)
    plan = dask.delayed(_plan_task, pure=False)(shared, target, count, *listings)
    prepared = dask.delayed(_prepare_task, pure=False)(storage, verdict, dask.delayed(_plan_failure)(plan), orphans)
    ready = dask.delayed(_after, pure=False)(storage, prepared)
    jobs = runner.calls(_jobs, [(plan, j) for j in range(count)])
    try:  # the check itself is asked for too: with no cell to pack there is no pack task to wait for it
        *packed, _ = runner.compute(
            "pack shards" if target is not None else "unpack shards",
            *runner.calls(_pack_task, [(ready, jobs_j, cells_per_batch) for jobs_j in jobs]), prepared,
        )  # fmt: skip
    except Exception as exc:  # a cell the pack read refused: the store as it was, staging included
        if not orphans:  # all it holds is this run's (earlier orphans stay for the next run, as a refusal keeps them)
            _drop_staging(storage, exc)
        raise
    # commits only once every pack task succeeded (a graph of its own: a pack task cancelled or lost
    # fails its step instead of being recomputed for a commit); grouped into tasks of a useful size.
    # Their documents travel in the graph: a scattered copy lost with its worker would fail a commit
    # whose packing succeeded
    runs = split_commits([len(g.nonempty_chunks) + 8 for g in todo])
    unconsolidated = dask.delayed(_unconsolidate_task, pure=False)(storage, store.consolidated is not None)
    committed = [dask.delayed(_commit_task, pure=False)(storage, _Opaque(todo[run]), target, unconsolidated)
                 for run in runs]
    runner.compute("commit", dask.delayed(_finish_task, pure=False)(storage, unconsolidated, *committed))
    return ShardResult(
        url=storage.url,
        shard_shape=target,
        arrays=len(todo),
        skipped=len(grids) - len(todo),
        cells=cells,
        objects=sum(p["objects"] for p in packed),
        tasks=sum(1 for p in packed if p["cells"]),
        recovered=recovered,
    )


def _drop_staging(storage: Storage, failure: Exception) -> None:
    """After a failed pack step (its tasks stopped): remove what it staged, which nothing journaled
    refers to; a removal that fails too is told with the failure, not instead of it."""
    try:
        storage.delete_prefix(STAGING)
    except Exception as exc:  # noqa: BLE001 - the pack's failure is the error; this one goes with it
        failure.add_note(f"and its staged objects under {STAGING!r} were not removed: {type(exc).__name__}: {exc}")


def shard_store(
    url: str | os.PathLike[str],
    shard_shape: ShardShapeArg = 8,
    *,
    storage_options: Mapping[str, Any] | None = None,
) -> ShardResult:
    """Repack every grid array of every level into ``sharding_indexed`` shards (docs/format.md §9).

    ``shard_shape``: cells per shard, one int for every axis or one per axis (may
    exceed an array's shape).  Arrays already sharded with that shape are left
    alone; arrays sharded with another shape are resharded.  The store's
    compressor stays inside the shards (D14).  Refuses, before changing anything,
    a shard shape of the wrong rank or a non-positive one (InputError) and a store
    whose ``nonempty_chunks`` lists do not match the cells on disk
    (:class:`PresenceMismatchError`, D15).  Runs as a Dask graph on the current
    scheduler: pack tasks own whole shards, then one commit per array.  Re-running
    after a crash completes the interrupted run (see :mod:`zarr_vectors.sharding.journal`).
    """
    if shard_shape is None:
        raise InputError("shard_shape is required (use unshard_store to go back to one object per cell)")
    return _relayout(url, shard_shape, storage_options)


def unshard_store(
    url: str | os.PathLike[str], *, storage_options: Mapping[str, Any] | None = None
) -> ShardResult:
    """The inverse of :func:`shard_store`: one object per cell again, inner codecs kept.

    Unsharding a store :func:`shard_store` sharded gives back its original files byte
    for byte.  Same checks, graph and crash safety as :func:`shard_store`.
    """
    return _relayout(url, None, storage_options)
