"""Zarr Vectors: chunked vector geometry on Zarr v3, written and checked as Dask graphs.

The public API: writers (``write_points``, ``write_graph``, ``write_mesh``,
``write_skeleton``, ``write_polylines``), the reader (``read``), the store
operations (``build_pyramid``, ``shard_store`` / ``unshard_store``,
``consolidate_store``) and the store layer (``create_store``, ``open_store``,
``get_resolution_level``).
"""

from __future__ import annotations

from zarr_vectors.pyramid.build import PyramidResult, build_pyramid
from zarr_vectors.read import VectorData, read
from zarr_vectors.sharding import shard_store, unshard_store
from zarr_vectors.store.consolidated import consolidate_store
from zarr_vectors.store.groups import create_store, get_resolution_level, open_store
from zarr_vectors.write.linked import write_graph, write_mesh, write_polylines, write_skeleton
from zarr_vectors.write.points import WriteResult, write_points

__all__ = [
    "PyramidResult",
    "VectorData",
    "WriteResult",
    "build_pyramid",
    "consolidate_store",
    "create_store",
    "get_resolution_level",
    "open_store",
    "read",
    "shard_store",
    "unshard_store",
    "write_graph",
    "write_mesh",
    "write_points",
    "write_polylines",
    "write_skeleton",
]
