"""The single-process links API: write, append and read link families directly.

For scripts and tests that hold every record of a family in one process.  It is built
on exactly the code the Dask writers use -- placement from
:func:`~zarr_vectors.format.links.partition_records_by_offset`, cells from
:mod:`zarr_vectors.store.link_cells`, presence and counts from
:mod:`zarr_vectors.reconcile` -- so both paths give byte-identical stores.  The readers
and the coordinator steps of a decentralised write are re-exported so the whole page is
reachable from one module.
"""

from __future__ import annotations

import functools
import posixpath
from collections.abc import Callable, Sequence
from typing import Concatenate, Literal, ParamSpec, TypeVar

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from zarr_vectors import reconcile
from zarr_vectors.errors import ArrayError, InputError
from zarr_vectors.format import bounds
from zarr_vectors.format.links import (
    Chunk,
    LinkCounts,
    LinkPartition,
    LinkPolicy,
    LinkRecords,
    StorePolicy,
    as_chunk,
    as_int_array,
    as_records,
    check_endpoint_deltas,
    links_has_perm,
    make_policy,
    offsets_tuple,
    partition_records_by_offset,
)
from zarr_vectors.format.paths import (
    check_new_name,
    format_chunk_key,
    format_delta,
    format_offsets,
    link_attributes_group_path,
)
from zarr_vectors.format.schema import vertices_row_dtype
from zarr_vectors.reconcile import merge_presence
from zarr_vectors.store.codecs import ZSTD_DEFAULT, compressor_config
from zarr_vectors.store.consolidated import reconsolidating
from zarr_vectors.store.grid import GridArray, read_cells_many, write_cells_many
from zarr_vectors.store.groups import Level, refuse_unfinished_relayout
from zarr_vectors.store.link_cells import (
    LinkWriteSummary,
    attribute_cell_batches,
    attribute_values,
    create_attribute_family,
    create_link_attribute_arrays,
    encode_link_cell,
    open_or_create_attribute_array,
    partition_cell_batches,
    stored_groups,
    write_link_attribute_cells,
    write_link_cells,
)
from zarr_vectors.store.link_family import (
    LINK_FRAGMENTS,
    VERTICES,
    CompressorArg,
    FamilyArray,
    array_has_perm,
    check_covers,
    check_link_dtype,
    check_partition_policy,
    create_links_arrays,
    create_links_family,
    create_links_segments,
    enumerate_family,
    extent_for,
    family_counts,
    family_path,
    link_anchor_ratios,
    link_array_rel,
    link_array_segments,
    link_attribute_array_rel,
    link_family_policy,
    link_row_dtype,
    list_link_attribute_names,
    list_link_deltas,
    list_link_offsets,
    open_or_create_fragments,
    open_or_create_links_array,
    require_policy,
    stamp_counts,
    update_group_attributes,
)
from zarr_vectors.store.link_read import (
    LinkCell,
    read_chunk_links,
    read_family_rows,
    read_link_attributes,
    read_links,
    read_links_for_tuple,
)
from zarr_vectors.store.nodes import read_node

__all__ = [
    "LinkCell",
    "LinkCounts",
    "LinkPartition",
    "LinkPolicy",
    "LinkRecords",
    "LinkWriteSummary",
    "create_link_attribute_arrays",
    "create_links_arrays",
    "create_links_family",
    "create_links_segments",
    "finalize_links",
    "link_anchor_ratios",
    "link_family_policy",
    "links_has_perm",
    "list_link_attribute_names",
    "list_link_deltas",
    "list_link_offsets",
    "partition_records_by_offset",
    "read_chunk_links",
    "read_link_attributes",
    "read_links",
    "read_links_for_tuple",
    "write_chunk_links",
    "write_link_attribute_cells",
    "write_link_attributes",
    "write_link_cells",
    "write_links",
]


P = ParamSpec("P")
R = TypeVar("R")


def _changes_links(write: Callable[Concatenate[Level, P], R]) -> Callable[Concatenate[Level, P], R]:
    """A links write of this API: refused on a store an interrupted ``zv shard`` left commits in
    (it would make their journals stale, and their replay move old cells over the new ones; one
    listing of the root), and never leaving a consolidated copy stale (dropped first, written
    again when the write succeeds)."""

    @functools.wraps(write)
    def changing(level: Level, *args: P.args, **kwargs: P.kwargs) -> R:
        refuse_unfinished_relayout(level.storage, level.storage.list_dir(""), "writing links")
        with reconsolidating(level.storage):  # the root as it is now: it may have been consolidated since
            return write(level, *args, **kwargs)

    return changing


finalize_links = _changes_links(reconcile.finalize_links)


def write_chunk_links(
    level: Level,
    delta: int,
    offsets: str | Sequence[Sequence[int]],
    chunk: Sequence[int],
    rows: ArrayLike,
    *,
    mode: Literal["replace", "append"] = "replace",
    record_presence: bool = True,
    dtype: DTypeLike = "int64",
    compressor: CompressorArg = ZSTD_DEFAULT,
) -> None:
    """Write one cell of ``links/<delta>/<offsets>`` from its stored rows.

    ``rows`` are ``(m, L)``, or ``(m, 1 + L)`` with the ``perm_idx`` column first when
    the array has one; they form one write group.  ``mode="replace"`` makes them the
    whole cell, ``"append"`` adds them as a new group.  Encoding follows the single
    condition: ``delta == 0`` and all offsets zero -> flat rows plus a
    ``link_fragments`` entry at the same chunk; otherwise a self-describing blob.
    The family must exist; the array is created when missing (single-process use; a
    coordinator creates arrays for concurrent writers).  Family counts are left to
    :func:`finalize_links`, which also refuses a store with unfinished shard commits and writes
    a consolidated copy again: a cell write is one step of many, and checking (or rebuilding the
    copy) per cell would cost a listing and every node's document each time.
    """
    policy = require_policy(level, delta)
    offs = offsets_tuple(offsets, policy)
    cell = as_chunk(chunk, policy.sid_ndim)
    if mode not in ("replace", "append"):
        raise InputError(f"mode must be 'replace' or 'append', got {mode!r}")
    segment = format_offsets(offs)
    cells = np.asarray([cell], dtype=np.int64)
    comp = compressor_config(compressor)
    extent = extent_for(level, cells)
    grid = open_or_create_links_array(
        level,
        policy,
        segment,
        offs,
        cells,
        extent=extent,
        dtype=check_link_dtype(dtype),
        compressor=comp,
        check_perm=False,  # rows are given as stored: the array's own stamp decides their width
    )
    width = policy.link_width + int(array_has_perm(grid, policy, offs))
    new = as_int_array(rows, "rows")
    if new.ndim != 2 or new.shape[1] != width:
        raise ArrayError(f"{grid.path}: rows must have shape (m, {width}), got {new.shape}")
    flat = policy.is_flat(offs)
    groups = stored_groups(level, policy, grid, offs, [cell])[0] if mode == "append" else []
    payload, side = encode_link_cell(groups + [new], flat=flat, dtype=link_row_dtype(grid))
    batches: list[tuple[GridArray, dict[Chunk, bytes]]] = [(grid, {cell: payload})]
    if flat:
        frag = open_or_create_fragments(level, cells, extent=extent, compressor=comp)
        batches.append((frag, {cell: side or b""}))
    write_cells_many(batches)
    if record_presence:
        for g, cs in batches:
            merge_presence(g, cs)


def _clear_family(level: Level, delta: int) -> None:
    """Remove ``links/<delta>`` with its attribute families (and link_fragments at delta 0)."""
    level.known_arrays.clear()
    for name in list_link_attribute_names(level):
        rel = link_attributes_group_path(name, delta)
        if level.storage.exists(posixpath.join(level.node_path(rel), "zarr.json")) or level.children(rel):
            level.storage.delete_prefix(level.node_path(rel))
    level.storage.delete_prefix(family_path(level, delta))
    if delta == 0 and level.has(LINK_FRAGMENTS):
        level.storage.delete_prefix(level.node_path(LINK_FRAGMENTS))


@_changes_links
def write_links(
    level: Level,
    delta: int,
    chunks: ArrayLike,
    vi: ArrayLike,
    *,
    directed: bool = False,
    store: StorePolicy = "canonical",
    mode: Literal["replace", "append"] = "replace",
    dtype: DTypeLike = "int64",
    compressor: CompressorArg = ZSTD_DEFAULT,
    anchor_ratios: tuple[Sequence[int], Sequence[int]] | None = None,
    endpoint_deltas: ArrayLike | None = None,
) -> LinkPartition:
    """Write link records into ``links/<delta>/`` of one level (single process).

    Args:
        level: the owning level.
        delta: level delta: endpoints ``1..L-1`` live at ``level + delta``.
        chunks: ``(n, L, D)`` absolute chunk coordinates per endpoint, input order.
        vi: ``(n, L)`` chunk-local vertex rows per endpoint.
        directed, store: the family policy (docs/format.md §7.2).
        mode: ``"replace"`` makes the family hold exactly these records: the whole
            ``links/<delta>/`` family, its ``link_attributes/*/<delta>/`` families
            and, at delta 0, ``link_fragments`` are removed first (so a policy change
            is allowed).  ``"append"`` adds the records as one new group per touched
            cell and refuses a policy that differs from the family's.
        dtype: row element type of newly created arrays (int64 or int32).
        compressor: codec of newly created arrays (``None`` for raw cells).
        anchor_ratios: ``(r_src, r_trg)`` for ``delta != 0``; default from the
            owning and target levels' chunk shapes (:func:`link_anchor_ratios`).
        endpoint_deltas: optional ``(n, L)`` level delta of every endpoint, checked
            so a mixed-resolution record is refused rather than misfiled.

    Returns:
        The :class:`LinkPartition` (record numbering = this call's input order; pass it
        to :func:`write_link_attributes`).  Family counts and every touched array's
        ``nonempty_chunks`` are up to date on return.
    """
    if mode not in ("replace", "append"):
        raise InputError(f"mode must be 'replace' or 'append', got {mode!r}")
    existing = link_family_policy(level, delta)
    c, v = as_records(chunks, vi, sid_ndim=existing.sid_ndim if existing and mode == "append" else None)
    check_endpoint_deltas(endpoint_deltas, v.shape, delta)
    n, width, ndim = c.shape
    policy = make_policy(delta, width, directed, store, ndim)
    if mode == "append" and existing is not None and existing != policy:
        raise ArrayError(
            f"level {level.number}: cannot append to links/{format_delta(delta)} with a different policy "
            f"({'; '.join(existing.differences(policy))}); the family's arrays decode against its stamped policy"
        )
    if level.has(VERTICES) and level.array(VERTICES).ndim != ndim:
        raise ArrayError(
            f"level {level.number}: endpoint chunk coordinates have {ndim} components but the vertices "
            f"array has {level.array(VERTICES).ndim} dimensions"
        )
    _check_endpoint_rows(level, delta, c, v)
    ratios = None
    if delta != 0:
        ratios = anchor_ratios if anchor_ratios is not None else link_anchor_ratios(level, delta, ndim)
    partition = partition_records_by_offset(
        c, v, delta=delta, directed=directed, store=store, anchor_ratios=ratios
    )
    comp = compressor_config(compressor)
    dtype_name = check_link_dtype(dtype)
    append = mode == "append" and existing is not None
    extent = extent_for(level, partition.cell) if n else None
    if append:  # check every existing array covers its new cells before writing anything
        for s, segment in enumerate(partition.segments):
            rel = link_array_rel(delta, segment)
            if level.has(rel):
                check_covers(level.array(rel), partition.cell[partition.segment == s])
        if level.has(LINK_FRAGMENTS) and delta == 0:
            check_covers(level.array(LINK_FRAGMENTS), partition.cell)
    elif mode == "append" and link_array_segments(level, delta):
        raise ArrayError(
            f"level {level.number}: links/{format_delta(delta)} holds arrays but no family policy; "
            "cannot append to it (rewrite it with mode='replace')"
        )
    if n and dtype_name == "int32":  # everything is checked before anything is removed or written
        limit = np.iinfo(np.int32).max
        if int(partition.vi.max()) > limit or int(partition.perm.max()) > limit:
            raise InputError("link rows do not fit int32; use dtype='int64'")
    if mode == "replace":
        _clear_family(level, delta)
    create_links_family(level, delta, link_width=width, directed=directed, store=store, sid_ndim=ndim)
    if n:
        create_links_arrays(level, delta, partition, dtype=dtype_name, compressor=comp, extent=extent)
    existing_groups: dict[tuple[int, Chunk], list[np.ndarray]] = {}
    if append and n:
        base = np.zeros(partition.num_groups, dtype=np.int64)
        by_segment: dict[int, list[tuple[int, Chunk]]] = {}
        for g, (s, cell, _, _) in enumerate(partition.iter_groups()):
            by_segment.setdefault(s, []).append((g, cell))
        for s, items in by_segment.items():
            grid = level.array(link_array_rel(delta, partition.segments[s]))
            stored = stored_groups(level, policy, grid, partition.segment_offsets[s], [c_ for _, c_ in items])
            for (g, cell), groups in zip(items, stored):
                existing_groups[(s, cell)] = groups
                base[g] = sum(x.shape[0] for x in groups)
        partition = LinkPartition(
            policy=partition.policy,
            num_links=partition.num_links,
            segments=partition.segments,
            segment_offsets=partition.segment_offsets,
            segment=partition.segment,
            cell=partition.cell,
            record=partition.record,
            vi=partition.vi,
            perm=partition.perm,
            base_rows=base,
        )
    batches = partition_cell_batches(level, policy, partition, existing_groups) if n else []
    write_cells_many(batches)
    for grid, cells in batches:
        merge_presence(grid, cells)
    old = family_counts(level, delta) if append else LinkCounts(0, 0)
    if old is None:
        reconcile.finalize_links(level, delta)
    else:
        stamp_counts(
            level,
            delta,
            LinkCounts(old.num_links + n, old.num_physical_records + partition.num_physical_records),
            attributes=False,
        )
    return partition


def _check_endpoint_rows(level: Level, delta: int, chunks: np.ndarray, vi: np.ndarray) -> None:
    """Every endpoint names a vertex its chunk holds, on each level whose vertices are written,
    checked before the family is touched: a row past the chunk's vertices (or a chunk without
    any) made a store no reader opens, and ``mode="replace"`` had removed the family's records
    first.  Reads the vertex cells the records touch, once each.  Links may be written before
    their level, or its vertices, exist (an array listing no cell yet): nothing to check them by."""
    levels = level.store.level_numbers()
    for column in range(vi.shape[1]):
        number = level.number if column == 0 else level.number + delta
        if number not in levels:
            continue
        target = level.store.level(number) if number != level.number else level
        grid = target.array(VERTICES) if target.has(VERTICES) else None
        if grid is None or not grid.nonempty_chunks:
            continue
        listed = set(grid.nonempty_chunks)
        cells, which = np.unique(chunks[:, column], axis=0, return_inverse=True)
        keys = [format_chunk_key(cell.tolist()) for cell in cells]
        present = [cell for cell, key in zip(cells, keys) if key in listed]
        payloads = iter(read_cells_many([(grid, cell.tolist()) for cell in present]))
        row_bytes = grid.ndim * vertices_row_dtype(grid.attributes).itemsize
        rows = np.array([len(next(payloads)) // row_bytes if key in listed else 0 for key in keys], dtype=np.int64)
        which = which.ravel()
        outside = (vi[:, column] < 0) | (vi[:, column] >= rows[which])
        if outside.any():
            r = int(np.argmax(outside))
            raise InputError(f"links record {r} endpoint {column} names row {int(vi[r, column])} of chunk "
                             f"{keys[which[r]]} of level {target.number}, which holds {int(rows[which[r]])} vertices; "
                             "nothing was written")


def _link_cell_sets(arrays: Sequence[FamilyArray]) -> dict[str, set[Chunk]]:
    return {fa.segment: set(fa.cells) for fa in arrays}


@_changes_links
def write_link_attributes(
    level: Level,
    name: str,
    delta: int,
    values: ArrayLike,
    *,
    partition: LinkPartition | None = None,
    compressor: CompressorArg = ZSTD_DEFAULT,
) -> None:
    """Write ``link_attributes/<name>/<delta>/``, one row per stored link record.

    Without ``partition``, ``values`` are already in the family's enumeration order
    (the order :func:`read_links` returns) and cover every stored record; the writer
    re-derives each cell's share from the link cells on disk.  With the
    :class:`LinkPartition` returned by :func:`write_links`, ``values`` are in that
    call's input order and fan out to every placement.  Under ``store="duplicate"`` a
    partition is required: positional rows cannot express the fan-out of copies.
    A partition from a ``mode="append"`` write appends to the existing attribute cells.
    """
    policy = require_policy(level, delta)
    check_new_name(name, "link attribute")
    arr = attribute_values(values, name)
    comp = compressor_config(compressor)
    arrays = enumerate_family(level, policy)
    counts = family_counts(level, delta)
    if partition is None:
        if policy.store == "duplicate":
            raise ArrayError(
                f"level {level.number}: links/{format_delta(delta)} stores duplicate copies, so a partition is "
                "required: pass the LinkPartition returned by write_links so attribute rows fan out to every copy"
            )
        rows_per_array = read_family_rows(arrays)
        total = sum(r.shape[0] for rows in rows_per_array for r in rows)
        if arr.shape[0] != total:
            raise ArrayError(
                f"link attribute {name!r}: {arr.shape[0]} rows given, links/{format_delta(delta)} stores "
                f"{total} records (values must be in enumeration order, one per stored record)"
            )
        _clear_attribute_family(level, name, delta)
        create_attribute_family(level, name, delta, counts.num_links if counts else None)
        batches = []
        pos = 0
        for fa, rows in zip(arrays, rows_per_array):
            if not fa.cells:
                continue
            grid = open_or_create_attribute_array(
                level, name, delta, fa.segment, fa.offsets, arr.dtype, arr.shape[1:], comp
            )
            cells = {}
            for cell, r in zip(fa.cells, rows):
                cells[cell] = arr[pos : pos + r.shape[0]].tobytes()
                pos += r.shape[0]
            batches.append((grid, cells))
        write_cells_many(batches)
        for grid, cells in batches:
            grid.set_nonempty_chunks(format_chunk_key(c) for c, p in cells.items() if p)
        return

    if partition.policy.delta != delta:
        raise ArrayError(f"the partition is for delta {partition.policy.delta}, not {delta}")
    check_partition_policy(level, partition)
    physical = partition.scatter(arr)
    appending = bool(partition.base_rows.any())
    on_disk = _link_cell_sets(arrays)
    if not appending:
        mine: dict[str, set[Chunk]] = {}
        for s, cell, _, _ in partition.iter_groups():
            mine.setdefault(partition.segments[s], set()).add(cell)
        theirs = {s: cells for s, cells in on_disk.items() if cells}
        if mine != theirs:
            raise ArrayError(
                f"link attribute {name!r}: the partition's cells do not match links/{format_delta(delta)} "
                "on disk (was the family rewritten since, or its nonempty_chunks not reconciled? run "
                "finalize_links after decentralised writes)"
            )
        _clear_attribute_family(level, name, delta)
        create_attribute_family(level, name, delta, counts.num_links if counts else None)
    elif read_node(level.storage, level.node_path(link_attributes_group_path(name, delta))) is None:
        raise ArrayError(f"link attribute {name!r}: nothing to append to at delta {delta}")
    for s, (segment, offsets) in enumerate(zip(partition.segments, partition.segment_offsets)):
        open_or_create_attribute_array(level, name, delta, segment, offsets, arr.dtype, arr.shape[1:], comp)
    existing: dict[int, bytes] = {}
    if appending:
        row_bytes = arr.dtype.itemsize * int(np.prod(arr.shape[1:], dtype=np.int64))
        requests = []
        groups = []
        for g, (s, cell, _, _) in enumerate(partition.iter_groups()):
            if partition.base_rows[g]:
                requests.append((level.array(link_attribute_array_rel(name, delta, partition.segments[s])), cell))
                groups.append(g)
        limits = [bounds.rows_bound(int(partition.base_rows[g]), row_bytes) for g in groups]  # exact size: below
        for g, (grid, cell), raw in zip(groups, requests, read_cells_many(requests, max_payload_bytes=limits)):
            if len(raw) != int(partition.base_rows[g]) * row_bytes:
                raise ArrayError(
                    f"{grid.path} cell {format_chunk_key(cell)}: holds {len(raw) // max(row_bytes, 1)} rows, "
                    f"the link cell held {int(partition.base_rows[g])} before the append"
                )
            existing[g] = raw
    batches = attribute_cell_batches(level, name, delta, partition, physical, existing)
    write_cells_many(batches)
    for grid, cells in batches:
        merge_presence(grid, cells)
    if appending and counts is not None:
        update_group_attributes(level, link_attributes_group_path(name, delta), {"num_links": counts.num_links})


def _clear_attribute_family(level: Level, name: str, delta: int) -> None:
    level.known_arrays.clear()
    level.storage.delete_prefix(level.node_path(link_attributes_group_path(name, delta)))
