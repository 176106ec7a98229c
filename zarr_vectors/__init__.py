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

from typing import TYPE_CHECKING, Any

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
    StorageRequestError,
    StoreExistsError,
    StoreNotFoundError,
    UnsupportedLayoutError,
    ValidationFailedError,
    ZarrVectorsError,
)

# ``read`` is also a submodule's name: bound here, so importing ``zarr_vectors.read``
# (the module) anywhere can never leave the package attribute pointing at the module.
from zarr_vectors.read import VectorData, read

if TYPE_CHECKING:
    from zarr_vectors.execution.requests import RequestTally, count_requests
    from zarr_vectors.execution.runner import ProgressCallback, callbacks
    from zarr_vectors.pyramid.build import PyramidResult, build_pyramid
    from zarr_vectors.sharding import shard_store, unshard_store
    from zarr_vectors.store.accounting import RequestCounts
    from zarr_vectors.store.groups import consolidate_store, create_store, get_resolution_level, open_store
    from zarr_vectors.validation import ValidationResult, validate
    from zarr_vectors.write.linked import write_graph, write_mesh, write_polylines, write_skeleton
    from zarr_vectors.write.options import WriteOptions
    from zarr_vectors.write.plan import WritePlan, plan_write
    from zarr_vectors.write.points import WriteResult, write_points

#: Where each public name lives.  Imported on first use (PEP 562): a script that only
#: writes never pays for the pyramid, the sharder or the validator.
_LAZY = {
    "RequestTally": "zarr_vectors.execution.requests",
    "count_requests": "zarr_vectors.execution.requests",
    "RequestCounts": "zarr_vectors.store.accounting",
    "ProgressCallback": "zarr_vectors.execution.runner",
    "callbacks": "zarr_vectors.execution.runner",
    "PyramidResult": "zarr_vectors.pyramid.build",
    "build_pyramid": "zarr_vectors.pyramid.build",
    "shard_store": "zarr_vectors.sharding",
    "unshard_store": "zarr_vectors.sharding",
    "consolidate_store": "zarr_vectors.store.groups",
    "create_store": "zarr_vectors.store.groups",
    "get_resolution_level": "zarr_vectors.store.groups",
    "open_store": "zarr_vectors.store.groups",
    "ValidationResult": "zarr_vectors.validation",
    "validate": "zarr_vectors.validation",
    "write_graph": "zarr_vectors.write.linked",
    "write_mesh": "zarr_vectors.write.linked",
    "write_polylines": "zarr_vectors.write.linked",
    "write_skeleton": "zarr_vectors.write.linked",
    "WriteOptions": "zarr_vectors.write.options",
    "WritePlan": "zarr_vectors.write.plan",
    "plan_write": "zarr_vectors.write.plan",
    "WriteResult": "zarr_vectors.write.points",
    "write_points": "zarr_vectors.write.points",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'zarr_vectors' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


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
    "StorageRequestError",
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
