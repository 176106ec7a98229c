"""The bin, combine and map tasks of a pyramid level: from source cells to metavertices.

* :func:`bin_group` (one task per run of whole source cells): read the cells, keep the
  vertices of surviving objects, sum their positions per ``(cell, bin)`` and reduce each
  vertex attribute there (docs/decisions.md D22);
* :func:`combine` (one task): one metavertex per occupied bin, the centroid of its
  vertices and its attributes, with its coarse cell and row (:mod:`zarr_vectors.format.coarsen`);
* :func:`map_group` (per source group): every surviving vertex's metavertex, and per
  fragment the metavertices its rows fell into (the coarse manifests).

The states stay in memory (persisted) until the level and its cross-level families are written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from zarr_vectors.encoding import FragmentIndex
from zarr_vectors.errors import EncodingError, InconsistentStoreError
from zarr_vectors.format import bounds as cell_bounds
from zarr_vectors.format.coarsen import (
    BinGrid,
    CellPartials,
    MetavertexLayout,
    cell_partials,
    centroids_in_bins,
    combine_partials,
    combine_reduced,
    layout_metavertices,
    reduce_rows,
)
from zarr_vectors.format.crosslevel import fragment_sequences
from zarr_vectors.format.paths import format_chunk_key
from zarr_vectors.format.points import check_chunk_placement
from zarr_vectors.store.grid import GridArray, read_cells_many

__all__ = [
    "AttributeSpec",
    "BinParams",
    "BinState",
    "MapState",
    "bin_group",
    "combine",
    "layout_summary",
    "map_group",
    "metavertices_of",
    "parent_map",
    "partial_rows",
    "sequences_of",
]


@dataclass(frozen=True, eq=False)
class BinState:
    """A source group after binning (kept in memory until its level is written)."""

    first_rank: int  # global rank of the group's first cell
    cells: np.ndarray  # (g, D)
    rows: np.ndarray  # (m,) row in its cell of every surviving vertex (cell order, then row)
    partials: CellPartials  # per (cell, bin); ``vertex_partial`` maps the m vertices to them
    frag_cell: np.ndarray  # (F,) global cell rank of every surviving fragment (objects only)
    frag_id: np.ndarray  # (F,)
    frag_offsets: np.ndarray  # (F + 1,) CSR into frag_members
    frag_members: np.ndarray  # vertex numbers (index into the m vertices), fragment row order
    attributes: dict[str, np.ndarray]  # per vertex attribute, its partial reduction per partial row
    rows_read: int  # every row of the group's cells, surviving or not


@dataclass(frozen=True, eq=False)
class AttributeSpec:
    """A vertex attribute of the source level and how the coarse level reduces it."""

    name: str
    grid: GridArray
    dtype: np.dtype
    row_shape: tuple[int, ...]
    reduction: str

    @classmethod
    def of(cls, name: str, grid: GridArray, reduction: str) -> AttributeSpec:
        dtype = np.dtype(grid.attributes["dtype"]).newbyteorder("<")
        return cls(name, grid, dtype, tuple(int(v) for v in grid.attributes.get("row_shape", [])), reduction)

    @property
    def row_bytes(self) -> int:
        return self.dtype.itemsize * (int(np.prod(self.row_shape)) if self.row_shape else 1)

    def rows(self, raw: bytes, n: int, chunk: tuple[int, ...]) -> np.ndarray:
        """A cell's attribute rows; there must be one per vertex row."""
        size = self.row_bytes
        if len(raw) != n * size:
            raise EncodingError(
                f"{self.grid.path} cell {format_chunk_key(chunk)}: {len(raw)} bytes, the vertex cell's {n} rows "
                f"need {n * size}"
            )
        return np.frombuffer(raw, dtype=self.dtype).reshape((n, *self.row_shape))


@dataclass(frozen=True)
class BinParams:
    """What every bin task of a level shares (published once, not shipped per task)."""

    ndim: int
    dtype: np.dtype
    chunk_shape: tuple[float, ...]  # the source level's
    grid: BinGrid
    objects: bool
    attributes: tuple[AttributeSpec, ...]
    level_path: str  # the source level's, for messages
    vertex_count: int  # the source level's: no cell holds more (the decode bound), its cells hold exactly so many
    placement_checked: bool  # its vertices must lie in their cells' chunks (format/points.chunk_placement_checked)


def _surviving_rows(
    index: FragmentIndex, sel: np.ndarray, n: int, where: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of the selected fragments of one cell: (surviving rows ascending, members, fragment lengths).

    ``members`` are the surviving-row numbers of every selected fragment's rows, in
    fragment order then row order.
    """
    if int(sel.max()) >= index.num_fragments:
        raise EncodingError(f"{where}: a manifest names fragment {int(sel.max())} of {index.num_fragments}")
    if sel.size == index.num_fragments and index.is_tiling(n):  # every fragment, ranges tiling the cell
        every = np.arange(n, dtype=np.int64)
        return every, every, index.range_counts.astype(np.int64)
    fid, frows = index.expand()
    wanted = np.zeros(index.num_fragments, dtype=bool)
    wanted[sel] = True
    take = wanted[fid]
    fid, frows = fid[take], frows[take]
    if frows.size and int(frows.max()) >= n:
        raise EncodingError(f"{where}: fragment rows run past the cell's {n} rows")
    alive = np.zeros(n, dtype=bool)
    alive[frows] = True
    number = np.cumsum(alive) - 1
    return np.flatnonzero(alive).astype(np.int64), number[frows], np.bincount(fid, minlength=index.num_fragments)[sel]


def bin_group(
    vertices: GridArray,
    fragments: GridArray | None,
    params: BinParams,
    first_rank: int,
    cells: np.ndarray,
    frag_cell: np.ndarray,
    frag_id: np.ndarray,
) -> BinState:
    """Read a group of whole source cells and sum its surviving vertices per (cell, bin)."""
    ndim, dtype = params.ndim, params.dtype
    chunks = [tuple(c) for c in cells.tolist()]
    requests = [(vertices, c) for c in chunks]
    if params.objects:
        assert fragments is not None
        requests += [(fragments, c) for c in chunks]
    attr_at = len(requests)
    requests += [(a.grid, c) for a in params.attributes for c in chunks]
    # each cell decoded no further than the level's rows allow, as a reader bounds it (a 30 KB cell
    # that inflates to gigabytes is refused at its bound, not after filling memory)
    limits = [cell_bounds.rows_bound(params.vertex_count, dtype.itemsize * ndim)] * len(chunks)
    if params.objects:
        limits += [cell_bounds.fragment_index_bound(params.vertex_count)] * len(chunks)
    limits += [cell_bounds.rows_bound(params.vertex_count, a.row_bytes) for a in params.attributes for _ in chunks]
    payloads = read_cells_many(requests, max_payload_bytes=limits)
    attr_parts: list[list[np.ndarray]] = [[] for _ in params.attributes]
    row_bytes = dtype.itemsize * ndim
    pos_parts, cell_parts, row_parts = [], [], []
    f_cell, f_id, f_len, members = [], [], [], []
    bounds = np.searchsorted(frag_cell, first_rank + np.arange(len(chunks) + 1)) if params.objects else None
    m = rows_read = 0
    whole: list[np.ndarray] = []  # every row of every cell, for the chunk rule
    for ci, chunk in enumerate(chunks):
        raw = payloads[ci]
        if len(raw) % row_bytes:
            raise EncodingError(f"{vertices.path} cell {format_chunk_key(chunk)}: not a whole number of rows")
        pos = np.frombuffer(raw, dtype=dtype).reshape(-1, ndim)
        n = len(pos)
        rows_read += n
        if params.placement_checked:
            whole.append(pos)  # before any row is left out
        if not params.objects:
            rows = np.arange(n, dtype=np.int64)
        else:
            assert bounds is not None and fragments is not None
            sel = frag_id[bounds[ci] : bounds[ci + 1]]
            if sel.size == 0:
                continue
            where = f"{fragments.path} cell {format_chunk_key(chunk)}"
            fraw = payloads[len(chunks) + ci]
            if not fraw:
                raise EncodingError(f"{where}: no FragmentIndex for a cell the manifests name")
            rows, mem, lengths = _surviving_rows(FragmentIndex.decode(fraw), sel, n, where)
            members.append(mem + m)
            f_cell.append(np.full(sel.size, first_rank + ci, dtype=np.int64))
            f_id.append(sel.astype(np.int64))
            f_len.append(lengths)
            if rows.size != n:
                pos = pos[rows]
        for ai, spec in enumerate(params.attributes):
            values = spec.rows(payloads[attr_at + ai * len(chunks) + ci], n, chunk)
            attr_parts[ai].append(values if rows.size == n else values[rows])
        pos_parts.append(pos)
        cell_parts.append(np.full(len(rows), ci, dtype=np.int64))
        row_parts.append(rows)
        m += len(rows)
    if len(pos_parts) == 1:
        positions = pos_parts[0]
    else:
        positions = np.concatenate(pos_parts) if pos_parts else np.zeros((0, ndim), dtype)
    if whole:  # as a reader refuses such a cell, so does the build; without objects every row survives
        every = np.concatenate(whole) if params.objects else positions
        check_chunk_placement(vertices.path, every, [len(p) for p in whole], chunks, params.chunk_shape)
    vertex_cell = np.concatenate(cell_parts) if cell_parts else np.zeros(0, np.int64)
    partials = cell_partials(positions, vertex_cell, cells, params.chunk_shape, params.grid, vertices.path)
    reduced = {
        spec.name: reduce_rows(
            np.concatenate(parts) if parts else np.zeros((0, *spec.row_shape), spec.dtype),
            partials.vertex_partial, len(partials.keys), spec.reduction,
        )
        for spec, parts in zip(params.attributes, attr_parts)
    }  # fmt: skip
    lengths = np.concatenate(f_len) if f_len else np.zeros(0, np.int64)
    offsets = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return BinState(
        first_rank=first_rank,
        cells=cells,
        rows=np.concatenate(row_parts) if row_parts else np.zeros(0, np.int64),
        partials=partials,
        frag_cell=np.concatenate(f_cell) if f_cell else np.zeros(0, np.int64),
        frag_id=np.concatenate(f_id) if f_id else np.zeros(0, np.int64),
        frag_offsets=offsets,
        frag_members=np.concatenate(members) if members else np.zeros(0, np.int64),
        attributes=reduced,
        rows_read=rows_read,
    )


def partial_rows(
    state: BinState,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, dict[str, np.ndarray], int]:
    """A group's partial sums, surviving vertex count, attribute partials and rows read: all the
    combine task needs of it."""
    p = state.partials
    return p.keys, p.sums, p.counts, int(state.rows.size), state.attributes, state.rows_read


def combine(params: BinParams, chunk_shape: tuple[float, ...], *parts: tuple[Any, ...]) -> MetavertexLayout:
    """The level's metavertices and their attributes from every group's partial rows, in cell order.

    The source's cells must hold its ``vertex_count`` rows, as a reader of the level requires."""
    read = sum(p[5] for p in parts)
    if read != params.vertex_count:
        raise InconsistentStoreError(
            f"{params.level_path}/zarr.json: vertex_count is {params.vertex_count}, the level's vertex cells hold "
            f"{read} rows"
        )
    keys, sums, counts, inverse = combine_partials(
        [p[0] for p in parts], [p[1] for p in parts], [p[2] for p in parts], params.ndim
    )
    positions = centroids_in_bins(sums, counts, keys, params.grid, params.dtype)
    attributes = {}
    for spec in params.attributes:
        partials = [p[4][spec.name] for p in parts]
        if not partials:  # the empty partial of the reduction, whatever its shape
            none = np.zeros((0, *spec.row_shape), spec.dtype)
            partials = [reduce_rows(none, np.zeros(0, np.int64), 0, spec.reduction)]
        rows = np.concatenate(partials)
        attributes[spec.name] = combine_reduced(rows, inverse, len(keys), counts, spec.reduction, spec.dtype)
    return layout_metavertices(positions, keys, chunk_shape, counts, attributes)


def layout_summary(
    layout: MetavertexLayout, *sizes: tuple[Any, ...]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int]]:
    """What the client needs of a layout to plan the writes: coarse cells, rows and fine vertices per
    cell, and each group's surviving vertex count."""
    return layout.cells, layout.counts, layout.members, [int(s[3]) for s in sizes]


@dataclass(frozen=True, eq=False)
class MapState:
    """Every surviving fine vertex of a source group, by partial row, and the metavertex it became.

    All vertices of a partial row (one cell, one bin) fold into the same metavertex, so
    everything beyond the fine row -- coarse endpoint, ancestors at coarser levels --
    is per partial row.
    """

    first_rank: int
    cells: np.ndarray  # (g, D) the group's fine cells
    rows: np.ndarray  # (m,) fine row of every surviving vertex
    vertex_partial: np.ndarray  # (m,)
    partial_cell: np.ndarray  # (k,) index into ``cells``
    partial_mv: np.ndarray  # (k,) storage index at the coarse level
    frag_cell: np.ndarray
    frag_id: np.ndarray
    seq_offsets: np.ndarray
    seq: np.ndarray


def map_group(state: BinState, layout: MetavertexLayout) -> MapState:
    """A group's vertices and fragments mapped to the level's metavertices."""
    p = state.partials
    partial_mv = layout.storage_index(p.keys)
    if state.frag_members.size:
        seq_offsets, seq = fragment_sequences(state.frag_offsets, state.frag_members, partial_mv[p.vertex_partial])
    else:
        seq_offsets, seq = np.zeros(1, np.int64), np.zeros(0, np.int64)
    return MapState(
        state.first_rank, state.cells, state.rows, p.vertex_partial, p.cell, partial_mv, state.frag_cell,
        state.frag_id, seq_offsets, seq,
    )  # fmt: skip


def metavertices_of(state: MapState) -> np.ndarray:
    """Per partial row, its metavertex: the group's ancestors one level up."""
    return state.partial_mv


def sequences_of(state: MapState) -> tuple[np.ndarray, ...]:
    """A group's fragments and their metavertex sequences: the coarse manifests' input."""
    return state.frag_cell, state.frag_id, state.seq_offsets, state.seq


def parent_map(starts: np.ndarray, total: int, *states: MapState) -> np.ndarray:
    """Level N-1 storage index -> level N metavertex (-1: in no surviving object)."""
    parent = np.full(total, -1, dtype=np.int64)
    for st in states:
        vp = st.vertex_partial
        parent[starts[st.first_rank + st.partial_cell[vp]] + st.rows] = st.partial_mv[vp]
    return parent
