"""The most bytes each stored cell may decode to, known from metadata before it is decoded.

A compressed cell can describe far more output than it occupies (docs/DESIGN.md,
"Decompression bounds"), so every reader and the validator decode a cell with a limit
derived here from what the store declares -- row counts times row bytes, plus the framing
the cell's encoding adds -- and refuse a cell that would decode to more.  Per-cell row
counts are not stored anywhere, so a cell is bounded by the count of the whole it belongs
to: a vertex-family cell by the level's ``vertex_count``, a link cell by its family's
``num_physical_records`` (or ``num_links`` times the link width), a manifests chunk by its
rows, ``num_present`` and ``vertex_count``.  Where the metadata says nothing usable the
function returns None and only the global ceiling ``zarr_vectors.limits.max-decoded-bytes``
applies.

Every bound adds ``zarr_vectors.limits.decode-allowance-bytes``: the bound guards memory,
and a count that is merely wrong (a ``vertex_count`` off by a few rows) must still decode,
so that the rule owning that count reports it, rather than surfacing as a resource limit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zarr_vectors import config
from zarr_vectors.encoding.fragment_index import max_encoded_size
from zarr_vectors.encoding.manifest import manifest_row_max_size
from zarr_vectors.encoding.ragged import ragged_blob_max_size
from zarr_vectors.encoding.vlen import framed_size

EMPTY_FRAGMENTS_PER_CELL = 1 << 20
"""Empty fragments a cell may carry besides one per row: a binned point cloud writes one
fragment per bin slot, empty bins included, and writers cap bins per chunk at 2**20."""


def count(value: Any) -> int | None:
    """A declared count usable for a bound: a non-negative JSON integer, else None."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _bounded(nbytes: int | None) -> int | None:
    if nbytes is None:
        return None
    return nbytes + int(config.get("limits.decode-allowance-bytes"))


def rows_bound(rows: Any, row_bytes: int | None) -> int | None:
    """A cell of at most ``rows`` fixed-size rows (vertices, vertex / link attributes, flat links)."""
    n = count(rows)
    if n is None or row_bytes is None:
        return None
    return _bounded(n * int(row_bytes))


def rows_bounds(rows: np.ndarray, row_bytes: int) -> list[int]:
    """:func:`rows_bound` of many cells at once (known non-negative row counts, e.g. per links cell)."""
    allowance = int(config.get("limits.decode-allowance-bytes"))
    return (np.asarray(rows, dtype=np.int64) * int(row_bytes) + allowance).tolist()


def fragment_index_bound(rows: Any) -> int | None:
    """A FragmentIndex of a cell of at most ``rows`` rows: one fragment per row plus the empty
    bin slots of a binned point cloud, and each row listed at most once."""
    n = count(rows)
    return None if n is None else _bounded(max_encoded_size(n + EMPTY_FRAGMENTS_PER_CELL, n))


def fragment_rows_bound(rows: Any, row_bytes: int | None) -> int | None:
    """A fragment-attribute cell: one row per fragment, as many fragments as :func:`fragment_index_bound` allows."""
    n = count(rows)
    if n is None or row_bytes is None:
        return None
    return _bounded((n + EMPTY_FRAGMENTS_PER_CELL) * int(row_bytes))


def family_records(attrs: dict[str, Any]) -> int | None:
    """Most rows a links family stores in all: ``num_physical_records``, else ``num_links`` times
    the link width (a duplicate family stores a record at most once per endpoint chunk)."""
    physical = count(attrs.get("num_physical_records"))
    if physical is not None:
        return physical
    logical, width = count(attrs.get("num_links")), count(attrs.get("link_width"))
    return None if logical is None or width is None else logical * max(width, 1)


def link_cell_bound(records: Any, row_bytes: int, *, flat: bool) -> int | None:
    """A link cell of a family storing at most ``records`` rows: a flat row dump, or a ragged blob."""
    n = count(records)
    if n is None:
        return None
    return _bounded(n * row_bytes if flat else ragged_blob_max_size(n, row_bytes))


def manifest_chunk_bound(
    rows_in_chunk: int, rows_per_chunk: int, num_present: Any, vertex_count: Any, sid_ndim: int
) -> int | None:
    """A manifests chunk: ``rows_per_chunk`` framed items, ``rows_in_chunk`` of them rows of the
    array (the rest empty padding), at most ``num_present`` of those non-empty, each naming at
    most every non-empty fragment of the level once -- and a level has at most
    ``vertex_count`` non-empty fragments.  Loose on purpose where objects share fragments (a
    pyramid level): that is what the metadata allows."""
    fragments = count(vertex_count)
    if fragments is None:
        return None
    present = count(num_present)
    nonempty = rows_in_chunk if present is None else min(rows_in_chunk, present)
    payload = 4 * rows_in_chunk + nonempty * (manifest_row_max_size(fragments, sid_ndim) - 4)
    return _bounded(framed_size(rows_per_chunk, payload))
