"""A level's object index (docs/format.md §6.7): writing layout v1, reading under the policy of D1.

Only ``vlen_manifests_v1`` (row = id) is read by default.  ``vlen_manifests_v2``
(rows + an ``object_ids`` table, what the reference writes) is read only when the
caller opts in through ``allow_layouts``; anything else -- a missing ``layout``
included: no default applies -- is refused by name.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

from zarr_vectors.encoding import decode_manifest_table
from zarr_vectors.errors import (
    EncodingError,
    InconsistentStoreError,
    MetadataError,
    ResourceLimitError,
    UnsupportedLayoutError,
)
from zarr_vectors.format.bounds import manifest_chunk_bound
from zarr_vectors.format.coarsen import unique_sorted
from zarr_vectors.format.metadata import OBJECT_INDEX_LAYOUT, OBJECT_INDEX_LAYOUT_V2
from zarr_vectors.store.groups import Level
from zarr_vectors.store.nodes import group_document, write_node
from zarr_vectors.store.tables import read_table, read_vlen_rows, write_vlen_rows


@dataclass(frozen=True)
class ObjectIndex:
    """Object ids per manifest row and every fragment the manifests name, in manifest order."""

    ids: np.ndarray  # int64, one per row
    block_row: np.ndarray  # (F,) manifest row of each named fragment
    block_chunk: np.ndarray  # (F, D) its chunk
    block_fragment: np.ndarray  # (F,) its fragment index in that chunk
    layout: str

    def blocks_table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(object id, chunk coords, fragment) per referenced fragment, in manifest order."""
        return self.ids[self.block_row], self.block_chunk, self.block_fragment


def write_object_index(
    level: Level, manifests: Sequence[bytes], *, num_objects: int, num_present: int, sid_ndim: int
) -> None:
    """The ``object_index`` group (layout v1: manifest row = object id) and its manifests."""
    write_node(
        level.storage,
        level.node_path("object_index"),
        group_document(
            {
                "zv_array": "object_index",
                "num_objects": num_objects,
                "num_present": num_present,
                "sid_ndim": sid_ndim,
                "layout": OBJECT_INDEX_LAYOUT,
            }
        ),
    )
    write_vlen_rows(level.storage, level.node_path("object_index/manifests"), manifests)


def read_object_index(level: Level, *, allow_layouts: Collection[str] = ()) -> ObjectIndex | None:
    """The level's object index, or None when the level has none."""
    path = level.node_path("object_index")
    doc = level.node("object_index")
    if doc is None:
        return None
    file = f"{path}/zarr.json"
    if doc.get("node_type") != "group":
        raise MetadataError(f"expected a group, found a {doc.get('node_type')}", file=file, pointer="/node_type")
    attrs = doc.get("attributes", {})  # zv_array checked by Level.node
    if "layout" not in attrs:
        raise UnsupportedLayoutError(
            f"object_index has no layout; it must say which layout its manifests follow ({OBJECT_INDEX_LAYOUT!r})",
            file=file,
            pointer="/attributes/layout",
        )
    layout = attrs["layout"]
    if layout != OBJECT_INDEX_LAYOUT and not (layout == OBJECT_INDEX_LAYOUT_V2 and layout in allow_layouts):
        hint = " (pass allow_layouts=('vlen_manifests_v2',) to read it)" if layout == OBJECT_INDEX_LAYOUT_V2 else ""
        raise UnsupportedLayoutError(
            f"object_index layout {layout!r} is not {OBJECT_INDEX_LAYOUT!r}{hint}",
            file=file,
            pointer="/attributes/layout",
        )
    # read_node has checked the counts' types (format/schema.py); the rank must be the level's
    rank = level.store.root.sid_ndim + (1 if "chunk_dims" in level.meta.extra else 0)
    sid_ndim = attrs.get("sid_ndim", rank)
    if sid_ndim != rank:
        raise MetadataError(f"object_index sid_ndim is {sid_ndim}, the level's chunk keys have {rank} components",
                            file=file, pointer="/attributes/sid_ndim")
    vertex_count, num_present = level.meta.vertex_count, attrs.get("num_present")
    stored = read_vlen_rows(level.storage, f"{path}/manifests", chunk_limit=lambda rows, per_chunk: (
        manifest_chunk_bound(rows, per_chunk, num_present, vertex_count, sid_ndim)))
    if len(stored.rows) != stored.num_rows:  # a missing chunk: its rows would be "", never a manifest
        gap = np.flatnonzero(stored.row_numbers != np.arange(len(stored.rows)))
        first = int(gap[0]) if gap.size else len(stored.rows)
        raise EncodingError(
            f"{path}/manifests: row {first} of {stored.num_rows} is not stored (its chunk is missing); "
            "a manifest row is at least its 4-byte block count"
        )
    rows = stored.rows
    try:
        block_row, block_chunk, block_fragment = decode_manifest_table(rows, sid_ndim)
    except (EncodingError, ResourceLimitError) as exc:
        raise type(exc)(f"{path}/manifests: {exc}") from exc
    if layout == OBJECT_INDEX_LAYOUT_V2:
        ids, _ = read_table(level.storage, f"{path}/object_ids")
        if ids.shape != (len(rows),):
            raise MetadataError(
                f"object_ids has shape {ids.shape}, manifests has {len(rows)} rows", file=f"{path}/object_ids/zarr.json"
            )
        ids = ids.astype(np.int64)
        if len(ids) and (ids.min() < 0 or len(unique_sorted(ids)) != len(ids)):
            raise InconsistentStoreError(
                f"{path}/object_ids: object ids must be distinct and >= 0 (each manifest row is one object)"
            )
    else:
        ids = np.arange(len(rows), dtype=np.int64)
    return ObjectIndex(ids, block_row, block_chunk, block_fragment, layout)
