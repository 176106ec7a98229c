"""``shard_store`` / ``unshard_store``: repack every grid array of a store (FORMAT.md §9).

Only grid arrays (``vertices``, ``vertex_fragments``, ``vertex_attributes/*``,
``fragment_attributes/*``, ``links/*/*``, ``link_fragments``,
``link_attributes/*/*/*``) of every level change layout; ``object_index``,
``object_attributes``, ``groups`` and ``group_attributes`` never do.  Logical content,
paths, ``shape`` and every attribute (``nonempty_chunks``, ``chunk_grid_origin``, ...)
are unchanged; the array's ``chunk_grid`` becomes the shard shape and its codec list
one ``sharding_indexed`` codec whose inner codecs are the array's own (the store's
compressor survives, DECISIONS.md D14).  Because the inner codecs are the array's
own, a cell's stored bytes are moved as they are -- never decompressed -- so
``shard_store`` then ``unshard_store`` gives back the original files byte for byte.

The graph
---------
1. **check** (before anything is written): the shard shape's rank and values; then,
   per grid array, the cells actually on disk (``derive_nonempty_chunks``: a listing,
   or the shard indexes of an already sharded array) must be exactly its
   ``nonempty_chunks``, otherwise the store is refused and left untouched (D15):
   the presence lists are what the packer reads, and after sharding they cannot be
   rebuilt from a listing any more.
2. **pack** (tasks): each task owns a group of whole target objects -- whole shards,
   or when unsharding every cell of whole source shards -- reads the source cells
   listed in ``nonempty_chunks`` (each source shard fetched once) and writes the new
   objects under a staging prefix, ``.zv-shard-staging/<array path in hex>/c.<i>.<j>...``.  Nothing
   of the store itself is touched, and two tasks never write the same object.
3. **commit** (tasks of whole arrays, only after every pack task succeeded): write a
   journal ``.zv-shard-staging/<array path in hex>/commit.json`` (the new ``zarr.json`` and
   the new object keys), then delete the array's old objects that are not new keys,
   move the staged objects into place, write the new ``zarr.json``, and drop the
   array's staging.  Finally the staging prefix is removed.

Crash safety
------------
Cell keys ``c/i/j/k`` and shard keys ``c/a/b/c`` share one namespace (shard (1,0,0)
and cell (1,0,0) are both ``c/1/0/0``), so shards cannot be written in place while
their source cells may still be needed.  Hence the staging: until a journal exists
the store itself is untouched, so a crash during packing leaves every array in its
old, complete layout (the orphan staging is deleted by the next run).  Once the
journal exists the staging is complete, and the commit only moves data whose copy
is in the staging, so every step of it can be replayed: ``shard_store`` and
``unshard_store`` first finish every journal they find (whatever operation wrote
it), then do what they were asked.  Arrays are committed independently, so after a
crash during commits some arrays may be sharded and others not -- each array
describes its own layout, and readers read such a store as usual.  The window in
which one array's objects and ``zarr.json`` disagree is its commit, which re-running
closes; do not read a store while it is being resharded.  Two runs on one store at
the same time are not supported.
"""

from __future__ import annotations

import copy
import json
import math
import os
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dask
import numpy as np

from zarr_vectors.errors import ArrayError, EncodingError, InputError
from zarr_vectors.execution import runner
from zarr_vectors.format.paths import format_chunk_key
from zarr_vectors.store.backend import Storage
from zarr_vectors.store.codecs import MAX_CELLS_PER_SHARD, ShardingSpec
from zarr_vectors.store.consolidated import reconsolidating
from zarr_vectors.store.grid import GridArray, read_stored_cells_many
from zarr_vectors.store.groups import ZVStore, open_store
from zarr_vectors.store.nodes import meta_key, write_node
from zarr_vectors.store.strict_json import load_document

STAGING = ".zv-shard-staging"
JOURNAL = "commit.json"
MIN_CELLS_PER_TASK = 2048
CELLS_PER_BATCH = 512

ShardShapeArg = int | Sequence[int]


class PresenceMismatchError(ArrayError):
    """A grid array's ``nonempty_chunks`` does not list exactly the cells on disk (D15)."""


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


# ---------------------------------------------------------------------------------------
# arguments and discovery
# ---------------------------------------------------------------------------------------
def normalise_shard_shape(shard_shape: Any, ndim: int) -> tuple[int, ...]:
    """``shard_shape`` (an int for every axis, or one per axis) as a tuple; InputError when unusable."""

    def positive_int(v: Any) -> bool:
        return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) and int(v) >= 1

    if isinstance(shard_shape, (int, np.integer)) and not isinstance(shard_shape, (bool, np.bool_)):
        values: tuple[Any, ...] = (shard_shape,) * ndim
    elif isinstance(shard_shape, (str, bytes)) or not isinstance(shard_shape, Sequence | np.ndarray):
        raise InputError(f"shard_shape must be a positive integer or {ndim} of them, got {shard_shape!r}")
    else:
        values = tuple(shard_shape)
        if len(values) != ndim:
            raise InputError(
                f"shard_shape {list(values)} has rank {len(values)}, but the store's grid arrays have "
                f"{ndim} axes: give one positive integer, or {ndim}"
            )
    if not all(positive_int(v) for v in values):
        raise InputError(f"shard_shape entries must be integers >= 1, got {list(values)}")
    shape = tuple(int(v) for v in values)
    if math.prod(shape) > MAX_CELLS_PER_SHARD:
        raise InputError(
            f"shard_shape {list(shape)} packs {math.prod(shape)} cells per shard, more than "
            f"{MAX_CELLS_PER_SHARD} (the index alone would be {16 * math.prod(shape) >> 20} MiB)"
        )
    return shape


def grid_array_paths(storage: Storage, level: int) -> list[str]:
    """Paths of the grid arrays of one level (FORMAT.md §2.1), whatever their layout."""
    lp = str(level)

    def children(rel: str) -> list[str]:
        return [n for n in storage.list_dir(posixpath.join(lp, rel)) if n != "zarr.json"]

    paths = [posixpath.join(lp, n) for n in ("vertices", "vertex_fragments", "link_fragments")]
    for group in ("vertex_attributes", "fragment_attributes"):
        paths += [posixpath.join(lp, group, n) for n in children(group)]
    for d in children("links"):
        paths += [posixpath.join(lp, "links", d, o) for o in children(posixpath.join("links", d))]
    for name in children("link_attributes"):
        for d in children(posixpath.join("link_attributes", name)):
            paths += [
                posixpath.join(lp, "link_attributes", name, d, o)
                for o in children(posixpath.join("link_attributes", name, d))
            ]
    return paths


def open_grid_arrays(store: ZVStore) -> list[GridArray]:
    """Every grid array of every level, read strictly (one concurrent batch of documents)."""
    storage = store.storage
    paths = [p for n in store.level_numbers() for p in grid_array_paths(storage, n)]
    raws = storage.get_many([meta_key(p) for p in paths])
    grids = []
    for path, raw in zip(paths, raws):
        if raw is None:
            continue
        doc = load_document(raw, file=meta_key(path))
        if doc.get("node_type") == "array":
            grids.append(GridArray(storage, path, doc))
    return grids


def _light(grid: GridArray, keys: Sequence[str] | None = None) -> GridArray:
    """The array with ``nonempty_chunks`` replaced (small to ship to a task)."""
    doc = dict(grid.doc)
    doc["attributes"] = dict(grid.attributes)
    doc["attributes"]["nonempty_chunks"] = list(keys or [])
    return GridArray(grid.storage, grid.path, doc)


# ---------------------------------------------------------------------------------------
# layouts
# ---------------------------------------------------------------------------------------
def target_document(doc: dict[str, Any], shard_shape: tuple[int, ...] | None) -> dict[str, Any]:
    """An array document relaid out: sharded with ``shard_shape``, or unsharded (None).

    Only ``chunk_grid.configuration.chunk_shape`` and ``codecs`` change, in place, so
    unsharding a document this function sharded gives the original back exactly.
    """
    new = copy.deepcopy(doc)
    ndim = len(new["shape"])
    codecs = new["codecs"]
    inner = codecs[0]["configuration"]["codecs"] if codecs and codecs[0].get("name") == "sharding_indexed" else codecs
    if shard_shape is None:
        new["chunk_grid"]["configuration"]["chunk_shape"] = [1] * ndim
        new["codecs"] = copy.deepcopy(inner)
    else:
        new["chunk_grid"]["configuration"]["chunk_shape"] = list(shard_shape)
        new["codecs"] = [ShardingSpec.codec_json(ndim, inner)]
    return new


def _in_layout(grid: GridArray, shard_shape: tuple[int, ...] | None) -> bool:
    if shard_shape is None:
        return grid.sharding is None
    return grid.sharding is not None and grid.sharding.shard_shape == shard_shape


# ---------------------------------------------------------------------------------------
# staging and commit (every step idempotent)
# ---------------------------------------------------------------------------------------
def _staging(path: str) -> str:
    """One flat staging directory per array, named by its path in hex (creating directories is what
    costs on a local disk; hex keeps the name injective and free of characters object stores escape)."""
    return posixpath.join(STAGING, path.encode("utf-8").hex())


def _staged(path: str, key: str) -> str:
    """Where the new object ``<path>/<key>`` is staged."""
    return posixpath.join(_staging(path), key.replace("/", "."))


class _Opaque:
    """Hands a task its arguments without dask walking through them (they hold whole documents)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def apply_commit(storage: Storage, path: str, document: dict[str, Any], keys: Sequence[str]) -> None:
    """Make the array at ``path`` the staged one; safe to replay from any point.

    Old objects that are not new keys are deleted, staged objects moved over, the
    new document written, the array's staging removed.  Everything the array needs
    is in the staging (or already in place) while its journal exists.
    """
    keep = set(keys)
    prefix = posixpath.join(path, "c")
    stale = [rel for rel in storage.list_files(prefix) if rel[len(path) + 1 :] not in keep]
    storage.delete_many(stale)
    storage.move_many([(_staged(path, k), posixpath.join(path, k)) for k in keys])
    # directories the old layout needed and the new one does not; never above <path>/c
    parents = {posixpath.dirname(k) for k in stale} - {posixpath.dirname(posixpath.join(path, k)) for k in keys}
    storage.remove_empty_dirs(parents, floor=prefix)
    write_node(storage, path, document)
    storage.delete_prefix(_staging(path))


def _commit_task(storage: Storage, commits: _Opaque) -> int:
    """Journal, then apply, the new layout of some arrays (runs after every pack task)."""
    for path, document, keys in commits.value:
        journal = posixpath.join(_staging(path), JOURNAL)
        if storage.get(journal) is None:
            staged = set(storage.list_files(_staging(path)))
            missing = [k for k in keys if _staged(path, k) not in staged]
            if missing:
                raise RuntimeError(
                    f"{path}: {len(missing)} staged objects are missing (e.g. {missing[:3]}); not committing"
                )
            record = {"array": path, "document": document, "keys": keys}
            storage.put(journal, json.dumps(record, allow_nan=True).encode("utf-8"))
        apply_commit(storage, path, document, keys)
    return len(commits.value)


def recover(storage: Storage) -> int:
    """Finish every commit an interrupted run journaled; returns how many."""
    done = 0
    for name in storage.list_dir(STAGING):
        key = posixpath.join(STAGING, name, JOURNAL)
        raw = storage.get(key)
        if raw is None:  # staging of an interrupted pack stage: never journaled, discarded later
            continue
        record = json.loads(raw)
        path = record["array"]
        if _staging(path) != posixpath.join(STAGING, name):
            raise EncodingError(f"{key}: journal names array {path!r}, which does not match its location")
        apply_commit(storage, path, record["document"], list(record["keys"]))
        done += 1
    return done


# ---------------------------------------------------------------------------------------
# check and pack tasks
# ---------------------------------------------------------------------------------------
def _derive_task(grids: _Opaque) -> list[list[str]]:
    return [g.derive_nonempty_chunks() for g in grids.value]


@dataclass(frozen=True)
class _Job:
    """One array's share of a pack task: whole target objects and their cells."""

    source: GridArray  # light: nonempty_chunks = the cells this job reads
    shard_shape: tuple[int, ...] | None  # target layout
    groups: list[tuple[tuple[int, ...], np.ndarray]]  # (target shard or source shard, (n, D) cell indices)


def _pack_task(storage: Storage, jobs: list[_Job] | _Opaque) -> dict[str, int]:
    """Read whole groups of cells and write their new objects under the staging prefix.

    Groups are handled in batches of about :data:`CELLS_PER_BATCH` cells (one group at
    least), so a task holds one batch in memory however many shards it owns, while
    the reads of a batch still go out concurrently.
    """
    if isinstance(jobs, _Opaque):
        jobs = jobs.value
    units = [(job, group, cells) for job in jobs for group, cells in job.groups]
    cells_done = objects = 0
    start = 0
    while start < len(units):
        stop, size = start, 0
        while stop < len(units) and (stop == start or size + len(units[stop][2]) <= CELLS_PER_BATCH):
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
                    puts[_staged(path, posixpath.join("c", *map(str, c)))] = raw
            else:
                spec = ShardingSpec(job.shard_shape, job.source.pipeline, ())
                local = cells - np.asarray(group, dtype=np.int64) * np.asarray(job.shard_shape, dtype=np.int64)
                shard_bytes = spec.encode_shard(dict(zip(spec.local_linear(local).tolist(), values)))
                assert shard_bytes is not None
                puts[_staged(path, posixpath.join("c", *map(str, group)))] = shard_bytes
        storage.put_many(puts)
        cells_done += size
        objects += len(puts)
    return {"cells": cells_done, "objects": objects}


# ---------------------------------------------------------------------------------------
# the operations
# ---------------------------------------------------------------------------------------
def _check_presence(store: ZVStore, grids: list[GridArray]) -> None:
    """D15: refuse, before anything changes, arrays whose presence list is not what is on disk."""
    if not grids:
        return
    weights = [len(g.nonempty_chunks) + 1 for g in grids]
    tasks = [
        dask.delayed(_derive_task, pure=False)(_Opaque([_light(g) for g in grids[s]]))
        for s in runner.task_runs(weights, MIN_CELLS_PER_TASK)
    ]
    derived = [keys for part in runner.compute("check presence", *tasks) for keys in part]
    bad = []
    for grid, on_disk in zip(grids, derived):
        listed, present = set(grid.nonempty_chunks), set(on_disk)
        if listed != present:
            bad.append((grid.path, sorted(listed - present), sorted(present - listed)))
    if bad:
        lines = [
            f"  {path}: {len(absent)} listed but not on disk {absent[:3]}, {len(extra)} on disk but not listed "
            f"{extra[:3]}"
            for path, absent, extra in bad[:5]
        ]
        raise PresenceMismatchError(
            f"{store.url}: the nonempty_chunks of {len(bad)} grid array(s) do not match the cells on disk:\n"
            + "\n".join(lines)
            + "\nRun the reconcile step first (the writers' reconcile task; finalize_links for link families) "
            "so every presence list names exactly its cells -- they are what sharding reads, and cannot be "
            "rebuilt from a listing afterwards (DECISIONS.md D15). Nothing was changed."
        )


def _plan(grids: list[GridArray], shard_shape: tuple[int, ...] | None) -> tuple[list[list[_Job]], int]:
    """Whole target objects of every array, grouped into pack tasks of a useful size."""
    units: list[tuple[int, tuple[int, ...], np.ndarray]] = []
    for a, grid in enumerate(grids):
        if not grid.nonempty_chunks:
            continue
        index = np.asarray(grid.nonempty_chunk_coords(), dtype=np.int64) - np.asarray(grid.origin, dtype=np.int64)
        # a task owns whole target shards; when unsharding, whole source shards (read once)
        unit_shape = shard_shape if shard_shape is not None else grid.sharding.shard_shape  # type: ignore[union-attr]
        group = index // np.asarray(unit_shape, dtype=np.int64)
        keys, inverse = np.unique(group, axis=0, return_inverse=True)
        order = np.argsort(inverse.ravel(), kind="stable")
        bounds = np.r_[0, np.cumsum(np.bincount(inverse.ravel(), minlength=len(keys)))]
        for g, key in enumerate(keys.tolist()):
            units.append((a, tuple(key), index[order[bounds[g] : bounds[g + 1]]]))
    total = sum(len(u[2]) for u in units)
    tasks: list[list[_Job]] = []
    for run in runner.task_runs([len(u[2]) for u in units], MIN_CELLS_PER_TASK):
        jobs: list[_Job] = []
        for a, key, cells in units[run]:
            if not jobs or jobs[-1].source.path != grids[a].path:
                jobs.append(_Job(grids[a], shard_shape, []))
            jobs[-1].groups.append((key, cells))
        # each job reads only its cells: ship just those in the presence list
        tasks.append(
            [
                _Job(
                    _light(j.source, [format_chunk_key(c) for _, cells in j.groups
                                      for c in (cells + np.asarray(j.source.origin)).tolist()]),
                    j.shard_shape,
                    j.groups,
                )
                for j in jobs
            ]
        )
    return tasks, total


def split_commits(weights: Sequence[int]) -> list[slice]:
    """Runs of arrays committed by one task (a commit costs per array and per object)."""
    return runner.task_runs(weights, 256)


def _new_keys(grid: GridArray, shard_shape: tuple[int, ...] | None) -> list[str]:
    if not grid.nonempty_chunks:
        return []
    index = np.asarray(grid.nonempty_chunk_coords(), dtype=np.int64) - np.asarray(grid.origin, dtype=np.int64)
    if shard_shape is not None:
        index = np.unique(index // np.asarray(shard_shape, dtype=np.int64), axis=0)
    return sorted(posixpath.join("c", *map(str, c)) for c in index.tolist())


def _relayout(url: Any, shard_shape: Any, storage_options: Mapping[str, Any] | None) -> ShardResult:
    storage = url if isinstance(url, Storage) else Storage(url, storage_options)
    store = open_store(storage)
    ndim = store.root.sid_ndim
    target = None if shard_shape is None else normalise_shard_shape(shard_shape, ndim)
    recovered = recover(storage)  # finish what an interrupted run journaled
    grids = open_grid_arrays(store)
    for grid in grids:
        if grid.ndim != ndim:
            raise InputError(
                f"{grid.path}: has {grid.ndim} axes but the store's chunk keys have {ndim}; cannot shard it"
            )
    todo = [g for g in grids if not _in_layout(g, target)]
    _check_presence(store, todo)
    # from here on the store may change
    storage.delete_prefix(STAGING)  # orphans of an interrupted pack stage: incomplete, never journaled
    tasks, cells = _plan(todo, target)
    with reconsolidating(storage):
        packed = runner.compute(
            "pack shards" if target is not None else "unpack shards",
            *[dask.delayed(_pack_task, pure=False)(storage, _Opaque(jobs)) for jobs in tasks],
        )
        # commits only once every pack task succeeded; grouped into tasks of a useful size
        commits = [(g.path, target_document(g.doc, target), _new_keys(g, target)) for g in todo]
        runs = split_commits([len(keys) + 8 for _, _, keys in commits])
        runner.compute(
            "commit", *[dask.delayed(_commit_task, pure=False)(storage, _Opaque(commits[r])) for r in runs]
        )
    storage.delete_prefix(STAGING)
    return ShardResult(
        url=storage.url,
        shard_shape=target,
        arrays=len(todo),
        skipped=len(grids) - len(todo),
        cells=cells,
        objects=sum(p["objects"] for p in packed),
        tasks=len(tasks),
        recovered=recovered,
    )


def shard_store(
    url: str | os.PathLike[str],
    shard_shape: ShardShapeArg = 8,
    *,
    storage_options: Mapping[str, Any] | None = None,
) -> ShardResult:
    """Repack every grid array of every level into ``sharding_indexed`` shards (FORMAT.md §9).

    ``shard_shape``: cells per shard, one int for every axis or one per axis (may
    exceed an array's shape).  Arrays already sharded with that shape are left
    alone; arrays sharded with another shape are resharded.  The store's
    compressor stays inside the shards (D14).  Refuses, before changing anything,
    a shard shape of the wrong rank or a non-positive one (InputError) and a store
    whose ``nonempty_chunks`` lists do not match the cells on disk
    (:class:`PresenceMismatchError`, D15).  Runs as a Dask graph on the current
    scheduler: pack tasks own whole shards, then one commit per array.  Re-running
    after a crash completes the interrupted run (see the module documentation).
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
