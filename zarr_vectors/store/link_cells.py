"""Link and link-attribute cells: their encoding and the owner-task writers.

A link cell is flat rows plus a ``link_fragments`` entry when the family is at delta 0
and the array is the intra one, else a self-describing ragged blob (docs/format.md
§6.5, §7.3).  The owner writers (:func:`write_link_cells`,
:func:`write_link_attribute_cells`) write whole cells and touch nothing array-wide:
presence lists and counts belong to :mod:`zarr_vectors.reconcile`.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from zarr_vectors.encoding import (
    FragmentIndex,
    decode_ragged_blob,
    decode_ragged_ints,
    encode_ragged_blob,
    encode_ragged_ints,
)
from zarr_vectors.errors import ArrayError, EncodingError, InputError
from zarr_vectors.format import bounds
from zarr_vectors.format.links import Chunk, LinkPartition, LinkPolicy, OffsetsT
from zarr_vectors.format.paths import format_chunk_key, link_attributes_group_path
from zarr_vectors.format.schema import attribute_dtype_problem
from zarr_vectors.store.codecs import ZSTD_DEFAULT, compressor_config
from zarr_vectors.store.grid import GridArray, read_cells_many, write_cells_many
from zarr_vectors.store.groups import Level
from zarr_vectors.store.link_family import (
    LINK_ATTRIBUTES,
    LINK_FRAGMENTS,
    CompressorArg,
    CreatedFamily,
    array_has_perm,
    attribute_family_attributes,
    check_partition_policy,
    ensure_plain_group,
    family_document,
    link_array_rel,
    link_array_segments,
    link_attribute_array_rel,
    link_row_dtype,
    parse_segment,
    require_policy,
)
from zarr_vectors.store.nodes import group_document, read_node, write_node


@dataclass(frozen=True)
class LinkWriteSummary:
    """What one :func:`write_link_cells` call wrote: dotted cell keys per segment, and rows."""

    cells: dict[str, list[str]]
    num_physical_records: int


def encode_link_cell(groups: Sequence[np.ndarray], *, flat: bool, dtype: np.dtype) -> tuple[bytes, bytes | None]:
    """(cell payload, link_fragments payload or None) for the cell's write groups."""
    if flat:
        rows = np.concatenate(groups) if len(groups) > 1 else groups[0]
        counts = [g.shape[0] for g in groups]
        if rows.shape[0] == 0:
            return b"", b""
        return encode_ragged_ints(rows, dtype), FragmentIndex.from_counts(counts).encode()
    if sum(g.shape[0] for g in groups) == 0:
        return b"", None
    return encode_ragged_blob([g for g in groups if g.shape[0]], dtype), None


def decode_link_cell(
    payload: bytes, *, flat: bool, width: int, dtype: np.dtype, where: str
) -> tuple[np.ndarray, np.ndarray]:
    """(rows (m, width) int64, group row starts) of one stored cell."""
    try:
        if flat:
            rows = decode_ragged_ints(payload, width, dtype)
            starts = np.array([0, rows.shape[0]], dtype=np.int64)
        else:
            rows, starts = decode_ragged_blob(payload, width, dtype)
    except EncodingError as exc:
        raise EncodingError(f"{where}: {exc}") from None
    return rows.astype(np.int64), starts


def sidecar_groups(raw: bytes, n_rows: int, where: str) -> list[np.ndarray]:
    """Row indices of every group of a flat cell, from its link_fragments payload."""
    if not raw:
        return [np.arange(n_rows, dtype=np.int64)]
    index = FragmentIndex.decode(raw)
    if index.max_row() >= n_rows:
        raise EncodingError(f"{where}: link_fragments names row {index.max_row()} of a {n_rows}-row cell")
    return index.fragment_rows()


def stored_groups(
    level: Level, policy: LinkPolicy, grid: GridArray, offsets: OffsetsT, cells: list[Chunk]
) -> list[list[np.ndarray]]:
    """Existing groups (lists of row arrays) of some cells of one offsets array.

    Each cell decodes with its bound from the family's declared records (format/bounds.py).
    """
    flat = policy.is_flat(offsets)
    width = policy.link_width + int(array_has_perm(grid, policy, offsets))
    dtype = link_row_dtype(grid)
    records = bounds.family_records((family_document(level, policy.delta) or {}).get("attributes") or {})
    requests = [(grid, c) for c in cells]
    limits = [bounds.link_cell_bound(records, dtype.itemsize * width, flat=flat)] * len(cells)
    frag = level.array(LINK_FRAGMENTS) if flat and level.has(LINK_FRAGMENTS) else None
    if frag is not None:
        requests += [(frag, c) for c in cells]
        limits += [bounds.fragment_index_bound(records)] * len(cells)
    raws = read_cells_many(requests, max_payload_bytes=limits)
    out = []
    for i, cell in enumerate(cells):
        where = f"{grid.path} cell {format_chunk_key(cell)}"
        rows, starts = decode_link_cell(raws[i], flat=flat, width=width, dtype=dtype, where=where)
        if flat:
            side = raws[len(cells) + i] if frag is not None else b""
            groups = [rows[idx] for idx in sidecar_groups(side, rows.shape[0], where)] if rows.shape[0] else []
        else:
            groups = [rows[a:b] for a, b in zip(starts[:-1], starts[1:])]
        out.append(groups)
    return out


def partition_cell_batches(
    level: Level,
    policy: LinkPolicy,
    partition: LinkPartition,
    existing: Mapping[tuple[int, Chunk], list[np.ndarray]] | None = None,
    arrays: Mapping[str, GridArray] | None = None,
) -> list[tuple[GridArray, dict[Chunk, bytes]]]:
    """Encoded cells (and sidecars) of every group of the partition (``arrays``: the family's
    arrays by relative path, when the coordinator handed them over; else the level's)."""

    def known(rel: str) -> GridArray | None:
        return arrays.get(rel) if arrays is not None else level.known_array(rel)

    grids: dict[int, GridArray] = {}
    cells: dict[int, dict[Chunk, bytes]] = {}
    frag_cells: dict[Chunk, bytes] = {}
    frag: GridArray | None = None
    for s, cell, start, stop in partition.iter_groups():
        if s not in grids:
            rel = link_array_rel(policy.delta, partition.segments[s])
            grid = known(rel)
            if grid is None:
                raise ArrayError(
                    f"level {level.number}: {rel} does not exist; the coordinator creates arrays "
                    "(create_links_arrays) before cell owners write"
                )
            grids[s] = grid
            cells[s] = {}
        offsets = partition.segment_offsets[s]
        flat = policy.is_flat(offsets)
        rows = partition.stored_rows(start, stop)
        groups = list(existing.get((s, cell), [])) if existing else []
        payload, side = encode_link_cell(groups + [rows], flat=flat, dtype=link_row_dtype(grids[s]))
        cells[s][cell] = payload
        if flat:
            if frag is None:
                frag = known(LINK_FRAGMENTS)
                if frag is None:
                    raise ArrayError(f"level {level.number}: link_fragments does not exist; create_links_arrays first")
            frag_cells[cell] = side or b""
    out = [(grids[s], cells[s]) for s in sorted(grids)]
    if frag is not None:
        out.append((frag, frag_cells))
    return out


def write_link_cells(
    level: Level, delta: int, partition: LinkPartition, created: CreatedFamily | None = None
) -> LinkWriteSummary:
    """Write every cell group of ``partition`` as a whole cell (one write group each).

    The per-cell writer of Dask owner tasks: the partition must hold whole cells (an
    owner's :meth:`LinkPartition.select_groups` share of a partition of the records it
    was routed), and nothing array-wide is touched.  Without ``created`` the family and
    arrays must exist and ``nonempty_chunks`` and the counts are left to
    :func:`finalize_links`; with it (the family as its coordinator composed it, nothing
    read back) the arrays' documents and presence lists come from the reconcile
    (:func:`~zarr_vectors.reconcile.write_family_documents`).
    Idempotent: a retried task writes the same bytes.
    """
    return write_link_partitions(level, delta, [partition], created)


def write_link_partitions(
    level: Level, delta: int, partitions: Sequence[LinkPartition], created: CreatedFamily | None = None
) -> LinkWriteSummary:
    """:func:`write_link_cells` for partitions that hold disjoint whole cells, in one concurrent
    batch of writes (one round trip on an object store, not one per partition)."""
    batches: list[tuple[GridArray, dict[Chunk, bytes]]] = []
    summary: dict[str, list[str]] = {}
    for partition in partitions:
        if partition.policy.delta != delta:
            raise ArrayError(f"the partition is for delta {partition.policy.delta}, not {delta}")
        policy = check_partition_policy(level, partition, created.policy if created is not None else None)
        if partition.base_rows.any():
            raise ArrayError("write_link_cells writes whole cells; this partition appends to existing cells")
        batches += partition_cell_batches(level, policy, partition,
                                          arrays=created.arrays if created is not None else None)
        for s, cell, _, _ in partition.iter_groups():
            summary.setdefault(partition.segments[s], []).append(format_chunk_key(cell))
    write_cells_many(batches)
    return LinkWriteSummary(summary, sum(p.num_physical_records for p in partitions))


def attribute_values(values: ArrayLike, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim == 0:
        raise InputError(f"link attribute {name!r}: values must have one row per link record")
    if problem := attribute_dtype_problem(arr.dtype):
        raise InputError(f"link attribute {name!r} has {problem}")
    return np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))


def _attribute_array_attributes(
    name: str, dtype: np.dtype, row_shape: tuple[int, ...], offsets: OffsetsT, delta: int
) -> dict[str, Any]:
    return {
        "zv_array": "link_attribute",
        "name": name,
        "dtype": dtype.name,
        "offsets": [list(o) for o in offsets],
        "level_delta": delta,
        "row_shape": list(row_shape),
    }


def compose_link_attribute(
    level: Level, created: CreatedFamily, name: str, *, dtype: DTypeLike, row_shape: Sequence[int] = (),
    compressor: CompressorArg = ZSTD_DEFAULT,
) -> CreatedFamily:  # fmt: skip
    """``created`` with the link attribute ``name``: one array per offsets array, on its grid
    (what :func:`create_link_attribute_arrays` would create; nothing is written)."""
    dt = np.dtype(dtype).newbyteorder("<")
    if problem := attribute_dtype_problem(dt):
        raise InputError(f"link attribute {name!r} has {problem}")
    comp = compressor_config(compressor)
    shape = tuple(int(x) for x in row_shape)
    if any(x < 1 for x in shape):
        raise InputError(f"link attribute {name!r}: row_shape {list(shape)} must be integers >= 1")
    delta = created.policy.delta
    grids: dict[str, GridArray] = {}
    for rel, mirror in created.arrays.items():
        if rel == LINK_FRAGMENTS:
            continue
        segment = posixpath.basename(rel)
        offsets = parse_segment(level, created.policy, segment)
        attr_rel = link_attribute_array_rel(name, delta, segment)
        grids[attr_rel] = GridArray.new(
            level.storage, level.node_path(attr_rel), shape=mirror.shape, origin=mirror.origin,
            attributes=_attribute_array_attributes(name, dt, shape, offsets, delta), compressor=comp,
        )  # fmt: skip
    return replace(
        created,
        attributes={**created.attributes, name: grids},
        attribute_groups={**created.attribute_groups, name: level.node_path(link_attributes_group_path(name, delta))},
    )


def create_attribute_family(level: Level, name: str, delta: int, num_links: int | None) -> None:
    ensure_plain_group(level, LINK_ATTRIBUTES)
    ensure_plain_group(level, f"{LINK_ATTRIBUTES}/{name}")
    attrs = attribute_family_attributes(name, delta, num_links)
    write_node(level.storage, level.node_path(link_attributes_group_path(name, delta)), group_document(attrs))


def open_or_create_attribute_array(
    level: Level,
    name: str,
    delta: int,
    segment: str,
    offsets: OffsetsT,
    dtype: np.dtype,
    row_shape: tuple[int, ...],
    compressor: dict[str, Any] | None,
) -> GridArray:
    rel = link_attribute_array_rel(name, delta, segment)
    if level.has(rel):
        grid = level.array(rel)
        attrs = grid.attributes
        if attrs.get("dtype") != dtype.name or tuple(attrs.get("row_shape", ())) != row_shape:
            raise ArrayError(
                f"{grid.path}: holds {attrs.get('dtype')} rows of shape {attrs.get('row_shape')}, "
                f"cannot write {dtype.name} rows of shape {list(row_shape)}"
            )
        return level.remember(grid)
    links_rel = link_array_rel(delta, segment)
    mirror = level.known_array(links_rel)  # only its grid, which never changes
    if mirror is None:
        raise ArrayError(f"level {level.number}: {links_rel} does not exist; link attributes mirror link arrays")
    return level.create_array(
        rel, shape=mirror.shape, origin=mirror.origin,
        attributes=_attribute_array_attributes(name, dtype, row_shape, offsets, delta), compressor=compressor,
    )  # fmt: skip


def create_link_attribute_arrays(
    level: Level,
    name: str,
    delta: int,
    *,
    dtype: DTypeLike,
    row_shape: Sequence[int] = (),
    partition: LinkPartition | None = None,
    compressor: CompressorArg = ZSTD_DEFAULT,
) -> list[str]:
    """Create (metadata only) ``link_attributes/<name>/<delta>/`` and its arrays.

    One array per segment of ``partition`` (default: every offsets array of the link
    family), each mirroring its link array's grid.  The family group gets no
    ``num_links`` until :func:`finalize_links`.  Coordinator step; returns the segments.
    """
    policy = require_policy(level, delta)
    dt = np.dtype(dtype).newbyteorder("<")
    if problem := attribute_dtype_problem(dt):
        raise InputError(f"link attribute {name!r} has {problem}")
    if partition is not None:
        check_partition_policy(level, partition)
        segments = list(zip(partition.segments, partition.segment_offsets))
    else:
        segments = [(s, parse_segment(level, policy, s)) for s in link_array_segments(level, delta)]
    comp = compressor_config(compressor)
    if read_node(level.storage, level.node_path(link_attributes_group_path(name, delta))) is None:
        create_attribute_family(level, name, delta, None)
    shape = tuple(int(x) for x in row_shape)
    seen = level.observed([link_attributes_group_path(name, delta)])  # one walk, not a probe per array
    seen.storage.overlap(
        lambda so: open_or_create_attribute_array(seen, name, delta, so[0], so[1], dt, shape, comp), segments
    )
    return [s for s, _ in segments]


def attribute_cell_batches(
    level: Level,
    name: str,
    delta: int,
    partition: LinkPartition,
    physical: np.ndarray,
    existing: Mapping[int, bytes] | None = None,
    arrays: Mapping[str, GridArray] | None = None,
) -> list[tuple[GridArray, dict[Chunk, bytes]]]:
    """Encoded attribute cells of every group of the partition (``arrays``: as in
    :func:`partition_cell_batches`)."""
    grids: dict[int, GridArray] = {}
    cells: dict[int, dict[Chunk, bytes]] = {}
    for g, (s, cell, start, stop) in enumerate(partition.iter_groups()):
        if s not in grids:
            rel = link_attribute_array_rel(name, delta, partition.segments[s])
            grid = arrays.get(rel) if arrays is not None else level.known_array(rel)
            if grid is None:
                raise ArrayError(f"level {level.number}: {rel} does not exist; create_link_attribute_arrays first")
            grids[s] = grid
            cells[s] = {}
        prefix = existing.get(g, b"") if existing else b""
        cells[s][cell] = prefix + physical[start:stop].tobytes()
    return [(grids[s], cells[s]) for s in sorted(grids)]


def write_link_attribute_cells(
    level: Level, name: str, delta: int, values: ArrayLike, partition: LinkPartition,
    created: CreatedFamily | None = None,
) -> None:  # fmt: skip
    """Write the attribute cells of every cell group of ``partition`` (Dask owner writer).

    ``values`` are in the partition's input record order (``num_links`` rows); each
    placement gets its record's row, so duplicate copies each get a copy.  The arrays
    must exist (:func:`create_link_attribute_arrays`), or be handed over in ``created``
    (:func:`compose_link_attribute`); ``nonempty_chunks`` and the family's ``num_links``
    are left to the reconcile.
    """
    if partition.policy.delta != delta:
        raise ArrayError(f"the partition is for delta {partition.policy.delta}, not {delta}")
    check_partition_policy(level, partition, created.policy if created is not None else None)
    if partition.base_rows.any():
        raise ArrayError("write_link_attribute_cells writes whole cells; this partition appends to existing cells")
    arr = attribute_values(values, name)
    physical = partition.scatter(arr)
    arrays = None if created is None else created.attributes.get(name, {})
    batches = attribute_cell_batches(level, name, delta, partition, physical, arrays=arrays)
    for grid, _ in batches:
        attrs = grid.attributes
        if attrs.get("dtype") != arr.dtype.name or tuple(attrs.get("row_shape", ())) != arr.shape[1:]:
            raise ArrayError(
                f"{grid.path}: holds {attrs.get('dtype')} rows of shape {attrs.get('row_shape')}, values are "
                f"{arr.dtype.name} rows of shape {list(arr.shape[1:])}"
            )
    write_cells_many(batches)
