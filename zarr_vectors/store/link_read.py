"""Reading links families back: records in input endpoint order, and their attributes.

Every reader walks the family in its one enumeration order
(:func:`zarr_vectors.store.link_family.enumerate_family`), so records and attribute rows
line up.  Missing arrays or cells read as empty only where the format says they are
empty: a cell a presence list names but storage lacks is an
:class:`InconsistentStoreError`, and a cell that does not decode an
:class:`EncodingError`, each naming the cell.  :class:`RecordSources` says which cell
every record came from, so checks made later on whole arrays can still name it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import DTypeLike

from zarr_vectors.encoding import lehmer_decode_rows
from zarr_vectors.errors import ArrayError, EncodingError, InconsistentStoreError
from zarr_vectors.format import bounds
from zarr_vectors.format.links import (
    Chunk,
    LinkPolicy,
    LinkRecords,
    OffsetsT,
    anchor_chunks,
    as_chunk,
    offsets_tuple,
    ratios_arg,
)
from zarr_vectors.format.paths import format_chunk_key, format_delta, format_offsets, link_attributes_group_path
from zarr_vectors.store.grid import GridArray, read_cells_many
from zarr_vectors.store.groups import Level
from zarr_vectors.store.link_cells import decode_link_cell, stored_groups
from zarr_vectors.store.link_family import (
    FamilyArray,
    array_has_perm,
    covers,
    enumerate_family,
    family_document,
    link_anchor_ratios,
    link_array_rel,
    link_attribute_array_rel,
    link_family_policy,
    require_policy,
)


@dataclass(frozen=True, eq=False)
class LinkCell:
    """One cell of one offsets array as stored, and its records decoded."""

    segment: str
    offsets: OffsetsT
    cell: Chunk
    has_perm: bool
    groups: list[np.ndarray]  # stored rows of each write group, (m_k, L or 1 + L)
    records: LinkRecords

    # the reference's read_chunk_links returns the list of stored groups: a cell is that list too
    def __len__(self) -> int:
        return len(self.groups)

    def __iter__(self) -> Iterator[np.ndarray]:
        return iter(self.groups)

    def __getitem__(self, i: int) -> np.ndarray:
        return self.groups[i]


@dataclass(frozen=True)
class RecordSources:
    """The stored cell of every record of a family read: runs of records, one per cell, in read order."""

    paths: tuple[str, ...]  # the links array of each run
    cells: tuple[Chunk, ...]  # its cell
    counts: np.ndarray  # records in the run (int64)

    @classmethod
    def of(cls, arrays: Sequence[FamilyArray], rows_per_array: Sequence[Sequence[np.ndarray]]) -> RecordSources:
        paths, cells, counts = [], [], []
        for fa, rows in zip(arrays, rows_per_array):
            for cell, r in zip(fa.cells, rows):
                paths.append(fa.grid.path)
                cells.append(cell)
                counts.append(r.shape[0])
        return cls(tuple(paths), tuple(cells), np.asarray(counts, dtype=np.int64))

    def where(self, record: int) -> str:
        """``<array> cell <key> (row <r>)`` of record ``record`` (its index in the read)."""
        ends = np.cumsum(self.counts)
        run = int(np.searchsorted(ends, record, side="right"))
        row = record - int(ends[run] - self.counts[run])
        return f"{self.paths[run]} cell {format_chunk_key(self.cells[run])} (row {row})"


def read_family_rows(arrays: Sequence[FamilyArray], records: int | None = None) -> list[list[np.ndarray]]:
    """Stored rows of every enumerated cell, per array (one concurrent read; a listed cell must exist).

    ``records`` is the most rows the family stores (:func:`zarr_vectors.format.bounds.family_records`);
    no cell decodes to more than that many rows and its framing.
    """
    requests = [(fa.grid, cell) for fa in arrays for cell in fa.cells]
    limits = [lim for fa in arrays
              for lim in [bounds.link_cell_bound(records, fa.dtype.itemsize * fa.width, flat=fa.flat)] * len(fa.cells)]
    raws = iter(read_cells_many(requests, required=True, max_payload_bytes=limits))
    out = []
    for fa in arrays:
        rows = []
        for cell in fa.cells:
            where = f"{fa.grid.path} cell {format_chunk_key(cell)}"
            r, _ = decode_link_cell(next(raws), flat=fa.flat, width=fa.width, dtype=fa.dtype, where=where)
            rows.append(r)
        out.append(rows)
    return out


def family_records_bound(level: Level, delta: int) -> int | None:
    """Most rows the family ``links/<delta>`` stores, as its document declares (None: not declared)."""
    return bounds.family_records((family_document(level, delta) or {}).get("attributes") or {})


def decode_rows(
    policy: LinkPolicy,
    offsets: OffsetsT,
    has_perm: bool,
    cells: np.ndarray,
    rows: np.ndarray,
    ratios: tuple[np.ndarray, np.ndarray] | None,
    where: str,
) -> LinkRecords:
    """Stored rows of one offsets array (with their cells) -> records in input endpoint order."""
    width = policy.link_width
    count = rows.shape[0]
    vi_stored = rows[:, int(has_perm) :]
    stored = np.empty((count, width, policy.sid_ndim), dtype=np.int64)
    stored[:, 0, :] = cells
    if width > 1:
        anchor = cells
        if policy.delta != 0:
            assert ratios is not None
            anchor = anchor_chunks(cells, ratios[0], ratios[1])
        stored[:, 1:, :] = anchor[:, None, :] + np.asarray(offsets, dtype=np.int64)[None, :, :]
    if not has_perm:
        return LinkRecords(stored, np.ascontiguousarray(vi_stored))
    if width == 2:  # edges: perm 1 swaps the two endpoints back
        codes = rows[:, 0]
        bad = (codes < 0) | (codes > 1)
        if bad.any():
            i = int(np.argmax(bad))
            raise EncodingError(f"{where}: Lehmer: perm_idx {int(codes[i])} at row {i} is outside [0, 2) for L=2")
        swap = codes == 1
        stored[swap] = stored[swap][:, ::-1]
        vi = np.ascontiguousarray(vi_stored)
        vi[swap] = vi[swap][:, ::-1]
        return LinkRecords(stored, vi)
    try:
        sigma = lehmer_decode_rows(rows[:, 0], width)
    except EncodingError as exc:
        raise EncodingError(f"{where}: {exc}") from None
    chunks = np.empty_like(stored)
    vi = np.empty_like(vi_stored)
    np.put_along_axis(chunks, sigma[:, :, None], stored, axis=1)
    np.put_along_axis(vi, sigma, vi_stored, axis=1)
    return LinkRecords(chunks, vi)


def ratios_for(
    level: Level, policy: LinkPolicy, anchor_ratios: tuple[Sequence[int], Sequence[int]] | None
) -> tuple[np.ndarray, np.ndarray] | None:
    if policy.delta == 0:
        return None
    ratios = anchor_ratios if anchor_ratios is not None else link_anchor_ratios(level, policy.delta, policy.sid_ndim)
    return ratios_arg(ratios, policy.sid_ndim)


def read_family_records(
    level: Level, policy: LinkPolicy, anchor_ratios: tuple[Sequence[int], Sequence[int]] | None
) -> tuple[LinkRecords, int]:
    records, sources = read_family_located(level, policy, anchor_ratios)
    return records, int(sources.counts.sum())


def read_family_located(
    level: Level, policy: LinkPolicy, anchor_ratios: tuple[Sequence[int], Sequence[int]] | None
) -> tuple[LinkRecords, RecordSources]:
    """Every record of the family in enumeration order, and the cell each came from."""
    arrays = enumerate_family(level, policy)
    rows_per_array = read_family_rows(arrays, family_records_bound(level, policy.delta))
    ratios = ratios_for(level, policy, anchor_ratios) if arrays else None
    parts = []
    for fa, rows in zip(arrays, rows_per_array):
        if not rows:
            continue
        counts = [r.shape[0] for r in rows]
        cells = np.repeat(np.asarray(fa.cells, dtype=np.int64).reshape(-1, policy.sid_ndim), counts, axis=0)
        stacked = np.concatenate(rows) if rows else np.zeros((0, fa.width), np.int64)
        parts.append(decode_rows(policy, fa.offsets, fa.has_perm, cells, stacked, ratios, fa.grid.path))
    return LinkRecords.concat(parts, policy.link_width, policy.sid_ndim), RecordSources.of(arrays, rows_per_array)


def read_links(
    level: Level, delta: int = 0, *, anchor_ratios: tuple[Sequence[int], Sequence[int]] | None = None
) -> LinkRecords:
    """Every record of ``links/<delta>/``, endpoints in input order.

    Enumeration order: offsets segments sorted as ASCII strings (so the all-zero intra
    segment comes last), cells as signed integer tuples (docs/decisions.md D8), then write
    order.  Under ``store="duplicate"`` every physical copy is returned.  An absent or
    unstamped family reads as no records.
    """
    return read_links_located(level, delta, anchor_ratios=anchor_ratios)[0]


def read_links_located(
    level: Level, delta: int = 0, *, anchor_ratios: tuple[Sequence[int], Sequence[int]] | None = None
) -> tuple[LinkRecords, RecordSources]:
    """:func:`read_links`, and the stored cell of every record (for checks that name it)."""
    policy = link_family_policy(level, delta)
    if policy is None:
        empty = RecordSources((), (), np.zeros(0, dtype=np.int64))
        return LinkRecords.empty(0, len(level.store.root.chunk_shape)), empty
    return read_family_located(level, policy, anchor_ratios)


def read_chunk_links(
    level: Level,
    chunk_coords: Sequence[int],
    dtype: DTypeLike | None = None,
    link_width: int | None = None,
    *,
    delta: int = 0,
    offsets: str | Sequence[Sequence[int]] | None = None,
    anchor_ratios: tuple[Sequence[int], Sequence[int]] | None = None,
) -> LinkCell:
    """One cell (source chunk ``chunk_coords``) of ``links/<delta>/<offsets>``: its stored groups and records.

    ``offsets`` (a segment or its tuples) names the array; None is the all-zero intra one.
    ``dtype`` converts the stored groups (a value it cannot hold is an ArrayError) and
    ``link_width``, when given, must be the family's: the call shape of the reference's
    reader.  A flat (intra, delta 0) cell is split into groups by its ``link_fragments``
    entry; a blob cell by its own header.  A missing array or cell reads as empty.
    """
    policy = require_policy(level, delta)
    if link_width is not None and link_width != policy.link_width:
        raise ArrayError(f"link_width {link_width!r} given, the family at delta {format_delta(delta)} has "
                         f"{policy.link_width}")
    if offsets is None:
        offsets = ((0,) * policy.sid_ndim,) * (policy.link_width - 1)
    offs = offsets_tuple(offsets, policy)
    cell = as_chunk(chunk_coords, policy.sid_ndim)
    segment = format_offsets(offs)
    empty = LinkCell(segment, offs, cell, policy.has_perm(offs), [], LinkRecords.empty(policy.link_width, policy.sid_ndim))
    rel = link_array_rel(delta, segment)
    if not level.has(rel):
        return empty
    grid = level.array(rel)
    lo, shape = np.asarray(grid.origin), np.asarray(grid.shape)
    if not covers(lo, shape, np.asarray([cell])):
        return empty
    has_perm = array_has_perm(grid, policy, offs)
    groups = stored_groups(level, policy, grid, offs, [cell])[0]
    rows = np.concatenate(groups) if groups else np.zeros((0, policy.link_width + int(has_perm)), np.int64)
    cells = np.repeat(np.asarray([cell], dtype=np.int64), rows.shape[0], axis=0)
    records = decode_rows(policy, offs, has_perm, cells, rows, ratios_for(level, policy, anchor_ratios), grid.path)
    if dtype is not None:
        groups = [_exactly_as(g, np.dtype(dtype), grid.path) for g in groups]
    return LinkCell(segment, offs, cell, has_perm, groups, records)


def _exactly_as(rows: np.ndarray, dtype: np.dtype, path: str) -> np.ndarray:
    """``rows`` converted to ``dtype``, refusing a value the conversion would change."""
    if dtype.kind not in "iu":
        raise ArrayError(f"{path}: link rows are integers, dtype {dtype} asked")
    out = rows.astype(dtype)
    if not np.array_equal(out.astype(np.int64), rows):
        raise ArrayError(f"{path}: link rows hold values {dtype} cannot represent")
    return out


def read_links_for_tuple(
    level: Level,
    chunk_tuple: Sequence[Sequence[int]],
    *,
    delta: int = 0,
    anchor_ratios: tuple[Sequence[int], Sequence[int]] | None = None,
) -> LinkRecords:
    """Records whose endpoints span exactly the ``L`` chunks of ``chunk_tuple``.

    The tuple resolves to the single ``(offsets, source)`` cell that can hold such
    records.  For an undirected canonical family at ``delta == 0`` the tuple may be in
    any order (the placement sorts endpoint chunks); every other family leads with
    the stored endpoint 0 (input endpoint 0, or the lead chunk of a duplicate copy),
    so the order is meaningful.
    """
    policy = link_family_policy(level, delta)
    if policy is None:
        return LinkRecords.empty()
    chunks = [as_chunk(c, policy.sid_ndim) for c in chunk_tuple]
    if len(chunks) != policy.link_width:
        raise ArrayError(f"chunk tuple has {len(chunks)} chunks, the family has link_width {policy.link_width}")
    if policy.delta == 0 and not policy.directed and policy.store == "canonical":
        chunks = sorted(chunks)
    source = np.asarray(chunks[0], dtype=np.int64)
    anchor = source
    if policy.delta != 0:
        r_src, r_trg = ratios_for(level, policy, anchor_ratios)  # type: ignore[misc]
        anchor = anchor_chunks(source, r_src, r_trg)
    offsets = tuple(tuple(int(x) for x in np.asarray(c) - anchor) for c in chunks[1:])
    return read_chunk_links(level, chunks[0], delta=delta, offsets=offsets, anchor_ratios=anchor_ratios).records


def read_link_attributes(
    level: Level, name: str, delta: int = 0, *, sources: RecordSources | None = None
) -> np.ndarray:
    """Rows of ``link_attributes/<name>/<delta>/``, aligned with :func:`read_links`.

    Uses the same enumeration of the link family; the attribute family must mirror its
    cells (and, when the link family records it, its row count), else ArrayError.  With
    the ``sources`` of a records read, every attribute cell must hold exactly as many rows
    as its links cell, else :class:`InconsistentStoreError` naming the cell.
    """
    policy = link_family_policy(level, delta)
    if policy is None:
        return np.zeros(0)
    arrays = enumerate_family(level, policy)
    group_rel = link_attributes_group_path(name, delta)
    group = level.node(group_rel)
    if group is None:
        if any(fa.cells for fa in arrays):
            raise ArrayError(f"level {level.number}: no link attribute {name!r} at delta {format_delta(delta)}")
        return np.zeros(0)
    attr_segments = set(level.children(group_rel))
    extra = attr_segments - {fa.segment for fa in arrays}
    if extra:
        raise ArrayError(f"{level.node_path(group_rel)}: arrays {sorted(extra)} have no link array to mirror")
    requests = []
    spec: tuple[np.dtype, tuple[int, ...]] | None = None
    filled = [fa for fa in arrays if fa.cells]
    rels = [link_attribute_array_rel(name, delta, fa.segment) for fa in filled]
    for fa, rel, grid in zip(filled, rels, level.arrays(rels, missing=True)):  # one batch of documents
        if grid is None:
            raise ArrayError(f"level {level.number}: {rel} is missing; attributes must mirror every link array")
        if set(grid.nonempty_chunk_coords()) != set(fa.cells):
            raise ArrayError(f"{grid.path}: its cells do not mirror {fa.grid.path}")
        dt = np.dtype(grid.attributes["dtype"]).newbyteorder("<")  # required, checked when the array opened
        rs = tuple(int(x) for x in grid.attributes.get("row_shape", []))
        if spec is None:
            spec = (dt, rs)
        elif spec != (dt, rs):
            raise ArrayError(f"{grid.path}: dtype/row_shape {dt}/{list(rs)} differ across the family")
        requests += [(grid, cell) for cell in fa.cells]
    if spec is None:
        return np.zeros(0)
    dt, rs = spec
    row_elems = int(np.prod(rs, dtype=np.int64))
    row_bytes = dt.itemsize * max(row_elems, 1)
    if sources is not None and len(sources.counts) == len(requests):  # each cell: its links cell's records
        limits: list[int | None] = list(bounds.rows_bounds(sources.counts, row_bytes))
    else:
        limits = [bounds.rows_bound(family_records_bound(level, delta), row_bytes)] * len(requests)
    cells = read_cells_many(requests, required=True, max_payload_bytes=limits)
    sizes = np.fromiter((len(c) for c in cells), dtype=np.int64, count=len(cells))
    if (sizes % row_bytes).any() or (sources is not None and not np.array_equal(sizes // row_bytes, sources.counts)):
        _attribute_cell_mismatch(requests, sizes, row_bytes, sources, f"{dt} x {list(rs)}")
    payload = b"".join(cells)
    out = np.frombuffer(payload, dtype=dt).reshape((-1, *rs)) if row_elems else np.zeros((0, *rs), dt)
    stamped = ((family_document(level, delta) or {}).get("attributes") or {}).get("num_physical_records")
    if stamped is not None and stamped != out.shape[0]:
        raise ArrayError(
            f"link attribute {name!r}: {out.shape[0]} rows but links/{format_delta(delta)} stores "
            f"{stamped} records"
        )
    return out


def _attribute_cell_mismatch(
    requests: Sequence[tuple[GridArray, Chunk]], sizes: np.ndarray, row_bytes: int, sources: RecordSources | None,
    row: str,
) -> None:
    """Raise for the first attribute cell that is not whole rows, or not one row per record of its links cell."""
    partial = sizes % row_bytes != 0
    if partial.any():
        i = int(np.argmax(partial))
        grid, cell = requests[i]
        raise EncodingError(
            f"{grid.path} cell {format_chunk_key(cell)}: {int(sizes[i])} bytes are not whole rows of {row}"
        )
    assert sources is not None
    if len(sources.counts) != len(sizes):
        raise InconsistentStoreError(
            f"{requests[0][0].path}: the attribute family has {len(sizes)} cells, the links family "
            f"{len(sources.counts)}"
        )
    i = int(np.argmax(sizes // row_bytes != sources.counts))
    grid, cell = requests[i]
    raise InconsistentStoreError(
        f"{grid.path} cell {format_chunk_key(cell)}: {int(sizes[i] // row_bytes)} attribute rows, but "
        f"{sources.paths[i]} cell {format_chunk_key(sources.cells[i])} holds {int(sources.counts[i])} records"
    )
