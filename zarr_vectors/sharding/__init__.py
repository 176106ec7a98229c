"""Sharding: repack a store's grid arrays into Zarr v3 ``sharding_indexed`` shards and back.

The byte-level codec (shard objects, their index and CRC32C) lives in
:mod:`zarr_vectors.store.codecs` as :class:`ShardingSpec`, because the core readers
decode shards transparently and ``core`` must not depend on this package.  Here:
which arrays and layouts (:mod:`.layout`), the staging and crash-safe commit
(:mod:`.journal`), and the store operations as Dask graphs (:mod:`.shard`).
"""

from __future__ import annotations

from zarr_vectors.errors import PresenceMismatchError
from zarr_vectors.sharding.layout import grid_array_paths, normalise_shard_shape, target_document
from zarr_vectors.sharding.shard import ShardResult, shard_store, unshard_store
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
