"""Byte-level encodings of cell payloads and object manifests (docs/format.md §2.2, §6, §7.3).

Pure functions over bytes and numpy arrays: nothing here knows about stores, zarr or
paths, so every other layer can rely on one exact encoding of each format structure.
"""

from __future__ import annotations

from zarr_vectors.encoding.fragment_index import FragmentIndex, rows_back_to_back
from zarr_vectors.encoding.lehmer import (
    MAX_ROWS_WIDTH,
    lehmer_decode,
    lehmer_decode_rows,
    lehmer_encode,
    lehmer_encode_rows,
)
from zarr_vectors.encoding.manifest import (
    MAX_SID_NDIM,
    ManifestBlock,
    ManifestSummary,
    decode_manifest,
    decode_manifest_table,
    encode_manifest,
    encode_mode0_manifests,
    group_rows,
    merge_manifest_summaries,
    named_coverage,
    summarize_manifest_rows,
)
from zarr_vectors.encoding.ragged import (
    decode_ragged_blob,
    decode_ragged_ints,
    encode_ragged_blob,
    encode_ragged_ints,
)
from zarr_vectors.encoding.vlen import (
    MAX_ITEM_BYTES,
    FramedItems,
    frame_items,
    frame_single,
    item_spans,
    unframe_items,
    unframe_single,
)

__all__ = [
    "MAX_ITEM_BYTES",
    "MAX_ROWS_WIDTH",
    "MAX_SID_NDIM",
    "FragmentIndex",
    "FramedItems",
    "ManifestBlock",
    "ManifestSummary",
    "decode_manifest",
    "decode_manifest_table",
    "decode_ragged_blob",
    "decode_ragged_ints",
    "encode_manifest",
    "encode_mode0_manifests",
    "encode_ragged_blob",
    "encode_ragged_ints",
    "frame_items",
    "frame_single",
    "group_rows",
    "item_spans",
    "lehmer_decode",
    "lehmer_decode_rows",
    "lehmer_encode",
    "lehmer_encode_rows",
    "merge_manifest_summaries",
    "named_coverage",
    "rows_back_to_back",
    "summarize_manifest_rows",
    "unframe_items",
    "unframe_single",
]
