"""Sharding: repack a store's grid arrays into Zarr v3 ``sharding_indexed`` shards and back.

The byte-level codec (shard objects, their index and CRC32C) lives in
:mod:`zarr_vectors.store.codecs` as :class:`ShardingSpec`, because the core readers
decode shards transparently and ``core`` must not depend on this package; the store
operations, as Dask graphs, live in :mod:`zarr_vectors.sharding.shard`.
"""

from __future__ import annotations

from zarr_vectors.sharding.shard import (
    PresenceMismatchError,
    ShardResult,
    grid_array_paths,
    normalise_shard_shape,
    shard_store,
    target_document,
    unshard_store,
)
from zarr_vectors.store.codecs import ShardingSpec, crc32c, morton_codes

__all__ = [
    "PresenceMismatchError",
    "ShardResult",
    "ShardingSpec",
    "crc32c",
    "grid_array_paths",
    "morton_codes",
    "normalise_shard_shape",
    "shard_store",
    "target_document",
    "unshard_store",
]
