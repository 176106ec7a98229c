"""What a relayout acts on: the grid arrays of a store and the layout each should get.

Pure decisions about documents and keys (no Dask, nothing written): the shard shape
argument checked against the store's rank, the grid arrays of every level, an array
document relaid out, and the object keys an array has in a layout.
"""

from __future__ import annotations

import copy
import math
import posixpath
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np

from zarr_vectors.errors import InputError
from zarr_vectors.format.schema import GRID_KINDS, expected_node
from zarr_vectors.store.backend import Storage
from zarr_vectors.store.codecs import MAX_CELLS_PER_SHARD, ShardingSpec
from zarr_vectors.store.grid import GridArray
from zarr_vectors.store.groups import ZVStore
from zarr_vectors.store.nodes import meta_key
from zarr_vectors.store.snapshot import snapshot_level
from zarr_vectors.store.strict_json import load_document

ShardShapeArg = int | Sequence[int]


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


def _grid_documents(storage: Storage, level: int) -> list[tuple[str, bytes]]:
    """``(path, zarr.json bytes)`` of one level's grid arrays (docs/format.md §2.1), from one walk
    of the level's metadata (a few concurrent waves, not one listing per group)."""
    snap = snapshot_level(storage, str(level))
    found = []
    for rel, raw in snap.documents.items():
        expected = expected_node(tuple(rel.split("/"))) if rel else None
        if expected is not None and expected.node_type == "array" and expected.kind in GRID_KINDS:
            found.append((posixpath.join(str(level), rel), raw))
    return sorted(found)


def grid_array_paths(storage: Storage, level: int) -> list[str]:
    """Paths of the grid arrays of one level, whatever their layout."""
    return [path for path, _ in _grid_documents(storage, level)]


def open_grid_arrays(store: ZVStore, levels: Sequence[int] | None = None) -> list[GridArray]:
    """Every grid array of every level (of ``levels``, where the caller listed them), read
    strictly; the levels' walks overlap."""
    storage = store.storage
    grids = []
    levels = store.level_numbers() if levels is None else levels
    for found in storage.overlap(partial(_grid_documents, storage), levels):
        for path, raw in found:
            doc = load_document(raw, file=meta_key(path))
            if doc.get("node_type") == "array":
                grids.append(GridArray(storage, path, doc))
    return grids


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


def in_layout(grid: GridArray, shard_shape: tuple[int, ...] | None) -> bool:
    """Whether the array already has the layout (sharded with ``shard_shape``, or unsharded for None)."""
    if shard_shape is None:
        return grid.sharding is None
    return grid.sharding is not None and grid.sharding.shard_shape == shard_shape


def new_keys(grid: GridArray, shard_shape: tuple[int, ...] | None) -> list[str]:
    """The object keys (``c/...``, relative to the array) of the array's present cells in a layout."""
    if not grid.nonempty_chunks:
        return []
    index = np.asarray(grid.nonempty_chunk_coords(), dtype=np.int64) - np.asarray(grid.origin, dtype=np.int64)
    if shard_shape is not None:
        index = index // np.asarray(shard_shape, dtype=np.int64)
    return sorted({"c/" + "/".join(map(str, c)) for c in index.tolist()})
