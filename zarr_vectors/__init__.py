"""Zarr Vectors: chunked vector geometry on Zarr v3, written and checked as Dask graphs.

The public API: writers (``write_points``, ``write_graph``, ``write_mesh``,
``write_skeleton``, ``write_polylines``) with their shared settings (``WriteOptions``)
and plan (``plan_write``), the reader (``read``), the store operations
(``build_pyramid``, ``shard_store`` / ``unshard_store``, ``consolidate_store``), the
validator (``validate``), progress callbacks (``callbacks``, ``ProgressCallback``), request
accounting (``count_requests``: GET/PUT/LIST/HEAD/DELETE counts and bytes by stage), the
store layer (``create_store``, ``open_store``, ``get_resolution_level``) and every
exception this package raises on purpose (all subclasses of ``ZarrVectorsError``).
The single-process links API is :mod:`zarr_vectors.links_api`.
"""

from __future__ import annotations

from zarr_vectors.errors import (
    ArrayError,
    EncodingError,
    InconsistentStoreError,
    InputError,
    InternalError,
    MetadataError,
    PresenceMismatchError,
    ResourceLimitError,
    StageFailedError,
    StorageObjectError,
    StoreExistsError,
    StoreNotFoundError,
    UnsupportedLayoutError,
    ValidationFailedError,
    ZarrVectorsError,
)
from zarr_vectors.execution.requests import RequestTally, count_requests
from zarr_vectors.execution.runner import ProgressCallback, callbacks
from zarr_vectors.pyramid.build import PyramidResult, build_pyramid
from zarr_vectors.read import VectorData, read
from zarr_vectors.sharding import shard_store, unshard_store
from zarr_vectors.store.accounting import RequestCounts
from zarr_vectors.store.consolidated import consolidate_store
from zarr_vectors.store.groups import create_store, get_resolution_level, open_store
from zarr_vectors.validation import ValidationResult, validate
from zarr_vectors.write.linked import write_graph, write_mesh, write_polylines, write_skeleton
from zarr_vectors.write.options import WriteOptions
from zarr_vectors.write.plan import WritePlan, plan_write
from zarr_vectors.write.points import WriteResult, write_points

__all__ = [
    "ArrayError",
    "EncodingError",
    "InconsistentStoreError",
    "InputError",
    "InternalError",
    "MetadataError",
    "PresenceMismatchError",
    "ProgressCallback",
    "PyramidResult",
    "RequestCounts",
    "RequestTally",
    "ResourceLimitError",
    "StageFailedError",
    "StorageObjectError",
    "StoreExistsError",
    "StoreNotFoundError",
    "UnsupportedLayoutError",
    "ValidationFailedError",
    "ValidationResult",
    "VectorData",
    "WriteOptions",
    "WritePlan",
    "WriteResult",
    "ZarrVectorsError",
    "build_pyramid",
    "callbacks",
    "consolidate_store",
    "count_requests",
    "create_store",
    "get_resolution_level",
    "open_store",
    "plan_write",
    "read",
    "shard_store",
    "unshard_store",
    "validate",
    "write_graph",
    "write_mesh",
    "write_points",
    "write_polylines",
    "write_skeleton",
]
