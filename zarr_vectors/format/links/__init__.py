"""Links: every rule of the links layout, in one package, pure (docs/format.md §7).

* :mod:`.policy` -- a family's policy (``has_perm``, flat cells, copies per record), the
  record arrays and their input checks;
* :mod:`.placement` -- where each record is filed: anchors, canonical order, the filing
  rule routing uses, segment names, the enumeration order (docs/decisions.md D8);
* :mod:`.partition` -- :func:`partition_records_by_offset`, the single place every record
  of a write (base level or cross-level) is given its array, cell and stored row;
* :mod:`.crosslevel` -- the pyramid's ``+k`` / ``-k`` records placed through it, one
  distinct chunk pair at a time (:func:`place_cross_level`, :func:`cross_level_segments`).

Nothing here touches a store: :mod:`zarr_vectors.store.link_family`,
:mod:`zarr_vectors.store.link_cells` and :mod:`zarr_vectors.store.link_read` turn these
decisions into bytes and back.
"""

from __future__ import annotations

from zarr_vectors.format.links.crosslevel import CrossLevelRecords, cross_level_segments, place_cross_level
from zarr_vectors.format.links.partition import LinkPartition, partition_records_by_offset, partition_records_by_rank
from zarr_vectors.format.links.placement import (
    CANONICAL,
    DUPLICATE,
    STORE_POLICIES,
    Placements,
    anchor_chunks,
    canonical_order,
    copies_per_record,
    enumeration_order,
    intra_mask,
    place_records,
    segment_names,
)
from zarr_vectors.format.links.policy import (
    Chunk,
    LinkCounts,
    LinkPolicy,
    LinkRecords,
    OffsetsT,
    StorePolicy,
    as_chunk,
    as_int_array,
    as_records,
    check_endpoint_deltas,
    links_has_perm,
    logical_count,
    make_policy,
    offsets_tuple,
    ratios_arg,
)

__all__ = [
    "CANONICAL",
    "DUPLICATE",
    "STORE_POLICIES",
    "Chunk",
    "CrossLevelRecords",
    "LinkCounts",
    "LinkPartition",
    "LinkPolicy",
    "LinkRecords",
    "OffsetsT",
    "Placements",
    "StorePolicy",
    "anchor_chunks",
    "as_int_array",
    "as_records",
    "canonical_order",
    "check_endpoint_deltas",
    "as_chunk",
    "copies_per_record",
    "cross_level_segments",
    "enumeration_order",
    "intra_mask",
    "links_has_perm",
    "logical_count",
    "make_policy",
    "offsets_tuple",
    "partition_records_by_offset",
    "partition_records_by_rank",
    "place_cross_level",
    "place_records",
    "ratios_arg",
    "segment_names",
]
