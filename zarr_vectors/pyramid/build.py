"""``build_pyramid``: coarser levels of a store (FORMAT.md §8.1), as a Dask graph level by level.

Every check runs before anything is written or removed (arguments, the store's kind and
level 0, reconciled presence lists, the object index, the bin/chunk nesting of every
new level; the presence lists of the level-0 arrays the pyramid does not read are
listed beside level 1's read-only bin stage).  Then levels >= 1 and every cross-level
family are removed and the levels are built one after the other.  Level ``N`` from
level ``N - 1``:

1. **bin** (one task per group of whole source cells): read the cells, keep the
   vertices of surviving objects, sum their positions per ``(cell, bin)``;
   **combine** (one task): one metavertex per occupied bin = the centroid of its
   surviving vertices, its coarse cell and row (:mod:`zarr_vectors.format.coarsen`, :mod:`zarr_vectors.format.crosslevel`);
   **map** (per source group): every surviving vertex's metavertex.  Kept in memory.
2. **init** (client, metadata only): the level group, its vertex arrays, the root's NGFF
   dataset and capability tokens.
3. one graph: a coordinator task creating every cross-level family and offsets array
   (their segments follow from the distinct cell pairs); per source group its ``+k``
   records (its own fine cells) and its ``-k`` records split by coarse owner, placed
   through ``partition_records_by_offset`` with the two levels' anchor ratios (``k >= 2``
   composes the single-step parent maps); writers owning whole cells
   (``record_presence=False``): coarse vertices, ``+k`` cells, ``-k`` cells; and one
   **reconcile** task: presence lists, manifests and object attributes, ``finalize_links``
   with the counts the tasks report.
"""

from __future__ import annotations

import math
import os
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import dask
import numpy as np

from zarr_vectors.encoding import FragmentIndex, encode_mode0_manifests
from zarr_vectors.errors import EncodingError, InputError
from zarr_vectors.execution import runner
from zarr_vectors.execution.runner import current_client, parallelism, split_by_weight
from zarr_vectors.format.coarsen import (
    BinGrid,
    CellPartials,
    MetavertexLayout,
    cell_partials,
    centroids_in_bins,
    combine_partials,
    layout_metavertices,
    select_objects,
    unique_sorted,
)
from zarr_vectors.format.crosslevel import (
    compose_parents,
    fragment_sequences,
    object_metavertices,
)
from zarr_vectors.format.links import (
    CrossLevelRecords,
    LinkCounts,
    LinkPartition,
    cross_level_segments,
    place_cross_level,
)
from zarr_vectors.format.metadata import GEOMETRY_TYPES, OBJECT_INDEX_LAYOUT, LevelMetadata, RootMetadata
from zarr_vectors.format.paths import format_chunk_key, format_delta, parse_delta
from zarr_vectors.reconcile import confirm_presence, finalize_links, require_reconciled
from zarr_vectors.store.consolidated import reconsolidating
from zarr_vectors.store.grid import GridArray, read_cells_many, write_cells_many
from zarr_vectors.store.groups import Level, ZVStore, open_store
from zarr_vectors.store.link_cells import write_link_cells
from zarr_vectors.store.link_family import create_links_family, create_links_segments
from zarr_vectors.store.nodes import fill_value_from_json, group_document, read_node, write_node
from zarr_vectors.store.object_index import read_object_index, write_object_index
from zarr_vectors.store.tables import read_table, write_table

__all__ = ["PyramidLevel", "PyramidResult", "build_pyramid"]

CROSS_LEVEL_STORAGES = ("none", "implicit", "explicit")
PYRAMID_TOKENS = ("preserved_object_ids", "shared_fragments", "multiscale_links")
ORDERED_KINDS = ("polyline", "streamline", "line")  # manifests keep traversal order
TASKS_PER_THREAD = 2
LINK_ROW_DTYPE = "int32"
"""Cross-level rows are chunk-local vertex rows, below 2**31 by the 4 GiB cell limit (D13)."""


# ---------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class PyramidLevel:
    """One level a build wrote."""

    level: int
    vertex_count: int
    cells: int
    bin_shape: tuple[float, ...]
    chunk_shape: tuple[float, ...]
    objects_kept: int | None  # None when the store has no object index


@dataclass(frozen=True)
class PyramidResult:
    """What :func:`build_pyramid` did."""

    url: str
    levels: list[PyramidLevel]
    cross_level_storage: str
    cross_level_depth: int
    families: list[tuple[int, int, int]]  # (level, delta, records)

    def __str__(self) -> str:
        lines = [f"pyramid of {self.url}: {len(self.levels)} new level(s)"]
        for lv in self.levels:
            kept = f", {lv.objects_kept} objects kept" if lv.objects_kept is not None else ""
            lines.append(
                f"  level {lv.level}: {lv.vertex_count} metavertices in {lv.cells} chunks, bin "
                f"{list(lv.bin_shape)}, chunk {list(lv.chunk_shape)}{kept}"
            )
        fams = ", ".join(f"{lv}/links/{format_delta(d)} ({n})" for lv, d, n in self.families) or "none"
        lines.append(f"  cross-level ({self.cross_level_storage}, depth {self.cross_level_depth}): {fams}")
        return "\n".join(lines)


# ---------------------------------------------------------------------------
# argument checks (nothing is opened or written)
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class _Factor:
    coarsen: float
    sparsity: float
    scale: Any  # int or a per-axis sequence, checked against the store's rank later


def _real(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def _check_factors(factors: Any, chunk_scale_factors: Any) -> list[_Factor]:
    if isinstance(factors, (str, bytes)) or not isinstance(factors, Sequence) or len(factors) == 0:
        raise InputError(
            f"factors must be a non-empty list of (coarsen, sparsity_factor) pairs, one per new level, got {factors!r}"
        )
    if chunk_scale_factors is not None:
        if isinstance(chunk_scale_factors, (str, bytes)) or not isinstance(chunk_scale_factors, Sequence):
            raise InputError(
                f"chunk_scale_factors must be a list with one entry per new level, got {chunk_scale_factors!r}"
            )
        if len(chunk_scale_factors) != len(factors):
            raise InputError(
                f"chunk_scale_factors has {len(chunk_scale_factors)} entries but factors has {len(factors)}: "
                "give one per new level"
            )
    out = []
    for i, entry in enumerate(factors):
        if _real(entry):
            coarsen, sparsity = entry, 1.0
        elif isinstance(entry, Sequence) and not isinstance(entry, (str, bytes)) and len(entry) == 2:
            coarsen, sparsity = entry
        else:
            raise InputError(f"factors[{i}] must be a (coarsen, sparsity_factor) pair, got {entry!r}")
        if not _real(coarsen) or not math.isfinite(float(coarsen)) or float(coarsen) < 1:
            raise InputError(
                f"factors[{i}]: coarsen factor {coarsen!r} must be a finite number >= 1 (a level's bins are at "
                "least its parent's)"
            )
        if not _real(sparsity) or not math.isfinite(float(sparsity)) or float(sparsity) < 1:
            raise InputError(
                f"factors[{i}]: sparsity factor {sparsity!r} must be a finite number in [1, inf) (1 keeps every "
                "object, 2 about half)"
            )
        scale = chunk_scale_factors[i] if chunk_scale_factors is not None else 1
        out.append(_Factor(float(coarsen), float(sparsity), scale))
    return out


def _check_scale(scale: Any, ndim: int, i: int) -> tuple[int, ...]:
    values = list(scale) if isinstance(scale, Sequence) and not isinstance(scale, (str, bytes)) else [scale] * ndim
    if len(values) != ndim:
        raise InputError(f"chunk_scale_factors[{i}] has {len(values)} entries, the store has {ndim} axes")
    out = []
    for v in values:
        if not _real(v) or not math.isfinite(float(v)) or float(v) != int(v) or int(v) < 1:
            raise InputError(
                f"chunk_scale_factors[{i}] = {scale!r}: every entry must be a positive integer (a level's chunk is "
                "an integer multiple of its parent's)"
            )
        out.append(int(v))
    return tuple(out)


def _check_options(storage: Any, depth: Any, seed: Any) -> None:
    if storage not in CROSS_LEVEL_STORAGES:
        raise InputError(f"cross_level_storage must be one of {list(CROSS_LEVEL_STORAGES)}, got {storage!r}")
    if not isinstance(depth, (int, np.integer)) or isinstance(depth, (bool, np.bool_)) or depth < -1:
        raise InputError(f"cross_level_depth must be an integer >= -1 (-1 = every pair of levels), got {depth!r}")
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, (bool, np.bool_)) or seed < 0:
        raise InputError(f"sparsity_seed must be a non-negative integer, got {seed!r}")


# ---------------------------------------------------------------------------
# the store: checks before anything is removed
# ---------------------------------------------------------------------------
def _delta_of(level: Level, name: str, where: str) -> int:
    try:
        return parse_delta(name)
    except ValueError:
        raise InputError(
            f"level {level.number}: {where}/{name} is not a level delta (the store is malformed)"
        ) from None


def _grid_array_paths(level: Level) -> list[str]:
    """Every grid array of a level that a rebuild keeps (delta != 0 families are replaced)."""
    out = [n for n in ("vertices", "vertex_fragments", "link_fragments") if level.has(n)]
    for group in ("vertex_attributes", "fragment_attributes"):
        out += [f"{group}/{n}" for n in level.children(group) if level.has(f"{group}/{n}")]
    for d in level.children("links"):
        if _delta_of(level, d, "links") == 0:
            out += [f"links/{d}/{s}" for s in level.children(f"links/{d}") if level.has(f"links/{d}/{s}")]
    for name in level.children("link_attributes"):
        for d in level.children(f"link_attributes/{name}"):
            if _delta_of(level, d, f"link_attributes/{name}") == 0:
                rel = f"link_attributes/{name}/{d}"
                out += [f"{rel}/{s}" for s in level.children(rel) if level.has(f"{rel}/{s}")]
    return out


def _check_reconciled(level: Level, rels: Sequence[str]) -> None:
    """Refuse the level when any of the grid arrays ``rels`` lists other cells than it holds."""
    grids = [level.array(rel) for rel in rels]
    listings = level.storage.overlap(GridArray.derive_nonempty_chunks, grids)
    require_reconciled(f"level {level.number}", grids, listings)


def _compressor(grid: GridArray) -> dict[str, Any] | None:
    """The store's compressor (D14): the one a cell of ``grid`` uses (inside the shards when sharded)."""
    comp = grid.pipeline.compressor
    return dict(comp.config) if comp is not None else None


def _store_dtype(grid: GridArray) -> np.dtype:
    return np.dtype(grid.attributes.get("dtype", "float32")).newbyteorder("<")


@dataclass
class _LevelState:
    """What the build knows about one level that exists on disk."""

    level: Level
    chunk_shape: tuple[float, ...]
    bin_shape: tuple[float, ...]
    ratios: tuple[int, ...]
    origin: tuple[int, ...]  # vertices grid
    shape: tuple[int, ...]
    cells: np.ndarray  # (c, D) occupied vertex cells, ascending
    counts: np.ndarray | None  # rows per cell (known for built levels)

    @property
    def number(self) -> int:
        return self.level.number

    def linear(self, chunks: np.ndarray) -> np.ndarray:
        return np.ravel_multi_index(tuple((chunks - np.asarray(self.origin)).T), self.shape)

    def rank(self, chunks: np.ndarray, what: str) -> np.ndarray:
        """Index into ``cells`` of each chunk (every one must be an occupied cell)."""
        if len(chunks) == 0:
            return np.zeros(0, dtype=np.int64)
        lo, hi = np.asarray(self.origin), np.asarray(self.origin) + np.asarray(self.shape)
        inside = ((chunks >= lo) & (chunks < hi)).all(axis=1)
        keys = self.linear(self.cells) if len(self.cells) else np.zeros(0, np.int64)
        q = self.linear(np.where(inside[:, None], chunks, lo))
        pos = np.minimum(np.searchsorted(keys, q), max(len(keys) - 1, 0))
        ok = inside & (keys[pos] == q) if len(keys) else np.zeros(len(chunks), bool)
        if not ok.all():
            i = int(np.argmin(ok))
            raise EncodingError(
                f"level {self.number}: {what} names chunk {format_chunk_key(chunks[i].tolist())}, which has no "
                "vertex cell"
            )
        return pos.astype(np.int64)


def _ratios(chunk_shape: Sequence[float], root_cs: Sequence[float]) -> tuple[int, ...]:
    return tuple(int(round(c / r)) for c, r in zip(chunk_shape, root_cs))


def _level0_state(store: ZVStore) -> _LevelState:
    level = store.level(0)
    if not level.has("vertices"):
        raise InputError(f"{store.url!r}: level 0 has no vertices array; nothing to coarsen")
    grid = level.array("vertices")
    ndim = store.root.sid_ndim
    if grid.ndim != ndim:
        raise InputError(
            f"{store.url!r}: level 0 is attribute-chunked (chunk keys of rank {grid.ndim}); pyramids of "
            "attribute-chunked levels are not supported"
        )
    cs = level.chunk_shape
    cells = np.asarray(sorted(grid.nonempty_chunk_coords()), dtype=np.int64).reshape(-1, ndim)
    return _LevelState(
        level=level,
        chunk_shape=tuple(cs),
        bin_shape=store.root.bin_shape(0),
        ratios=_ratios(cs, store.root.chunk_shape),
        origin=grid.origin,
        shape=grid.shape,
        cells=cells,
        counts=None,
    )


@dataclass(frozen=True)
class _NewLevel:
    number: int
    bin_shape: tuple[float, ...]
    chunk_shape: tuple[float, ...]
    sparsity: float


def _plan_levels(store: ZVStore, base: _LevelState, factors: list[_Factor]) -> list[_NewLevel]:
    ndim = store.root.sid_ndim
    out = []
    bin_shape, chunk_shape = base.bin_shape, base.chunk_shape
    for i, f in enumerate(factors):
        scale = _check_scale(f.scale, ndim, i)
        bin_shape = tuple(b * f.coarsen for b in bin_shape)
        chunk_shape = tuple(c * s for c, s in zip(chunk_shape, scale))
        for d, (b, c) in enumerate(zip(bin_shape, chunk_shape)):
            if b <= c:
                ratio = c / b
                if abs(ratio - round(ratio)) > 1e-9 * max(1.0, ratio):
                    raise InputError(
                        f"level {i + 1}: bin {b:g} (parent bin x {f.coarsen:g}) does not divide chunk {c:g} on axis "
                        f"{d}; a bin no larger than its chunk must divide it (VALIDATION.md L5). Choose a coarsening "
                        "factor (or chunk scale) so that the chunk is a whole number of bins"
                    )
        out.append(_NewLevel(i + 1, bin_shape, chunk_shape, f.sparsity))
    return out


def _clear_pyramid(store: ZVStore, level0: Level, storage_mode: str, depth: int) -> None:
    """Remove levels >= 1 and every cross-level family of level 0; reset the root's pyramid keys."""
    for n in store.level_numbers():
        if n >= 1:
            store.storage.delete_prefix(str(n))
    for d in level0.children("links"):
        if _delta_of(level0, d, "links") != 0:
            store.storage.delete_prefix(level0.node_path(f"links/{d}"))
    if level0.has("links") and not level0.children("links"):
        store.storage.delete_prefix(level0.node_path("links"))
    for name in level0.children("link_attributes"):
        rel = f"link_attributes/{name}"
        for d in level0.children(rel):
            if _delta_of(level0, d, rel) != 0:
                store.storage.delete_prefix(level0.node_path(f"{rel}/{d}"))
    root = store.root
    root.datasets = [d for d in root.datasets if d.path == "0"]
    root.format_capabilities = [c for c in root.format_capabilities if c not in PYRAMID_TOKENS]
    root.cross_level_storage = storage_mode
    root.cross_level_depth = int(depth)
    store.write_root()


# ---------------------------------------------------------------------------
# tasks: bin, combine, map
# ---------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class _BinState:
    """A source group after binning (kept in memory until its level is written)."""

    first_rank: int  # global rank of the group's first cell
    cells: np.ndarray  # (g, D)
    rows: np.ndarray  # (m,) row in its cell of every surviving vertex (cell order, then row)
    partials: CellPartials  # per (cell, bin); ``vertex_partial`` maps the m vertices to them
    frag_cell: np.ndarray  # (F,) global cell rank of every surviving fragment (objects only)
    frag_id: np.ndarray  # (F,)
    frag_offsets: np.ndarray  # (F + 1,) CSR into frag_members
    frag_members: np.ndarray  # vertex numbers (index into the m vertices), fragment row order


@dataclass(frozen=True)
class _BinParams:
    ndim: int
    dtype: np.dtype
    chunk_shape: tuple[float, ...]  # the source level's
    grid: BinGrid
    objects: bool


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


def _bin_group(
    vertices: GridArray,
    fragments: GridArray | None,
    params: _BinParams,
    first_rank: int,
    cells: np.ndarray,
    frag_cell: np.ndarray,
    frag_id: np.ndarray,
) -> _BinState:
    """Read a group of whole source cells and sum its surviving vertices per (cell, bin)."""
    ndim, dtype = params.ndim, params.dtype
    chunks = [tuple(c) for c in cells.tolist()]
    requests = [(vertices, c) for c in chunks]
    if params.objects:
        assert fragments is not None
        requests += [(fragments, c) for c in chunks]
    payloads = read_cells_many(requests)
    row_bytes = dtype.itemsize * ndim
    pos_parts, cell_parts, row_parts = [], [], []
    f_cell, f_id, f_len, members = [], [], [], []
    bounds = np.searchsorted(frag_cell, first_rank + np.arange(len(chunks) + 1)) if params.objects else None
    m = 0
    for ci, chunk in enumerate(chunks):
        raw = payloads[ci]
        if len(raw) % row_bytes:
            raise EncodingError(f"{vertices.path} cell {format_chunk_key(chunk)}: not a whole number of rows")
        pos = np.frombuffer(raw, dtype=dtype).reshape(-1, ndim)
        n = len(pos)
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
        pos_parts.append(pos)
        cell_parts.append(np.full(len(rows), ci, dtype=np.int64))
        row_parts.append(rows)
        m += len(rows)
    if len(pos_parts) == 1:
        positions = pos_parts[0]
    else:
        positions = np.concatenate(pos_parts) if pos_parts else np.zeros((0, ndim), dtype)
    vertex_cell = np.concatenate(cell_parts) if cell_parts else np.zeros(0, np.int64)
    partials = cell_partials(positions, vertex_cell, cells, params.chunk_shape, params.grid)
    lengths = np.concatenate(f_len) if f_len else np.zeros(0, np.int64)
    offsets = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return _BinState(
        first_rank=first_rank,
        cells=cells,
        rows=np.concatenate(row_parts) if row_parts else np.zeros(0, np.int64),
        partials=partials,
        frag_cell=np.concatenate(f_cell) if f_cell else np.zeros(0, np.int64),
        frag_id=np.concatenate(f_id) if f_id else np.zeros(0, np.int64),
        frag_offsets=offsets,
        frag_members=np.concatenate(members) if members else np.zeros(0, np.int64),
    )


def _partial_rows(state: _BinState) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    p = state.partials
    return p.keys, p.sums, p.counts, int(state.rows.size)


def _combine(
    grid: BinGrid, dtype: np.dtype, chunk_shape: tuple[float, ...], ndim: int, *parts: tuple[Any, ...]
) -> MetavertexLayout:
    keys, sums, counts = combine_partials([p[0] for p in parts], [p[1] for p in parts], [p[2] for p in parts], ndim)
    positions = centroids_in_bins(sums, counts, keys, grid, dtype)
    return layout_metavertices(positions, keys, chunk_shape, counts)


def _layout_summary(
    layout: MetavertexLayout, *sizes: tuple[Any, ...]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int]]:
    return layout.cells, layout.counts, layout.members, [int(s[3]) for s in sizes]


@dataclass(frozen=True, eq=False)
class _MapState:
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


def _map_group(state: _BinState, layout: MetavertexLayout) -> _MapState:
    p = state.partials
    partial_mv = layout.storage_index(p.keys)
    if state.frag_members.size:
        seq_offsets, seq = fragment_sequences(state.frag_offsets, state.frag_members, partial_mv[p.vertex_partial])
    else:
        seq_offsets, seq = np.zeros(1, np.int64), np.zeros(0, np.int64)
    return _MapState(
        state.first_rank, state.cells, state.rows, p.vertex_partial, p.cell, partial_mv, state.frag_cell,
        state.frag_id, seq_offsets, seq,
    )  # fmt: skip


def _mv_of(state: _MapState) -> np.ndarray:
    return state.partial_mv


def _sequences(state: _MapState) -> tuple[np.ndarray, ...]:
    return state.frag_cell, state.frag_id, state.seq_offsets, state.seq


def _parent_map(starts: np.ndarray, total: int, *states: _MapState) -> np.ndarray:
    """Level N-1 storage index -> level N metavertex (-1: in no surviving object)."""
    parent = np.full(total, -1, dtype=np.int64)
    for st in states:
        vp = st.vertex_partial
        parent[starts[st.first_rank + st.partial_cell[vp]] + st.rows] = st.partial_mv[vp]
    return parent


# ---------------------------------------------------------------------------
# tasks: cross-level families
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class _FamilySpec:
    k: int
    r_fine: tuple[int, ...]
    r_coarse: tuple[int, ...]
    explicit: bool
    owner_starts: tuple[int, ...]  # first coarse cell of every owner, plus the cell count


@dataclass(frozen=True, eq=False)
class _FamilyParts:
    plus: LinkPartition
    minus: list[CrossLevelRecords | None]  # per coarse owner; coarse cells relative to the owner's first


def _init_families(
    coarse: Level,
    origin: tuple[int, ...],
    shape: tuple[int, ...],
    coarse_cells: np.ndarray,
    compressor: dict[str, Any] | None,
    ndim: int,
    families: list[tuple[Level, tuple[int, ...], tuple[int, ...], np.ndarray, _FamilySpec, np.ndarray]],
) -> int:
    """The coordinator step of a level's cross-level families: every family group and offsets array."""
    for fine, fine_origin, fine_shape, fine_cells, spec, pairs in families:
        plus, minus = cross_level_segments(
            pairs, fine_cells, coarse_cells, delta=spec.k, anchor_ratios=(spec.r_fine, spec.r_coarse),
            explicit=spec.explicit,
        )
        create_links_family(fine, spec.k, link_width=2, directed=True, store="canonical", sid_ndim=ndim)
        if plus:
            create_links_segments(
                fine, spec.k, plus, extent=(fine_origin, fine_shape), dtype=LINK_ROW_DTYPE, compressor=compressor
            )
        if spec.explicit:
            create_links_family(coarse, -spec.k, link_width=2, directed=True, store="canonical", sid_ndim=ndim)
            if minus:
                create_links_segments(
                    coarse, -spec.k, minus, extent=(origin, shape), dtype=LINK_ROW_DTYPE, compressor=compressor
                )
    return len(families)


def _family_parts(
    state: _MapState,
    ancestor: np.ndarray,
    offset: int,
    total: int,
    target: MetavertexLayout,
    spec: _FamilySpec,
    ready: int = 0,
) -> _FamilyParts:
    """``+k`` records of a fine group (its own cells, placed) and its ``-k`` records split by coarse owner.

    ``ready`` (the family-init task) only orders the graph: init first, so writers can
    start as soon as their records are placed.

    ``ancestor`` (per partial row) is the metavertex at the coarse level, -1 when the
    partial row's vertices have none there (their object was dropped on the way).
    """
    valid_p = ancestor >= 0
    vp = state.vertex_partial
    if bool(valid_p.all()):
        anc, fine_cell = ancestor, state.partial_cell
        partial, fine_row = vp, state.rows
        number = np.arange(offset, offset + vp.size, dtype=np.int64)
    else:  # keep only the partial rows (and their vertices) that still have an ancestor
        kept = np.flatnonzero(valid_p)
        remap = np.full(valid_p.size, -1, dtype=np.int64)
        remap[kept] = np.arange(kept.size, dtype=np.int64)
        anc, fine_cell = ancestor[kept], state.partial_cell[kept]
        keep = np.flatnonzero(valid_p[vp])
        partial, fine_row, number = remap[vp[keep]], state.rows[keep], keep + offset
    coarse_cell = target.mv_cell[anc]
    coarse_row = target.mv_row[anc]
    records = CrossLevelRecords(fine_cell, coarse_cell, coarse_row, partial, fine_row, number)
    plus = place_cross_level(
        records, state.cells, target.cells, coarse_leads=False, delta=spec.k,
        anchor_ratios=(spec.r_fine, spec.r_coarse), total=total,
    )  # fmt: skip
    bounds = np.asarray(spec.owner_starts, dtype=np.int64)
    minus: list[CrossLevelRecords | None] = [None] * (len(bounds) - 1)
    if spec.explicit and number.size:
        owner_p = np.searchsorted(bounds, coarse_cell, side="right") - 1
        owner = owner_p[partial]
        if bool((owner[1:] < owner[:-1]).any()):
            order = np.argsort(owner.astype(np.uint16) if len(bounds) <= 1 << 16 else owner, kind="stable")
            partial, fine_row, number, owner = partial[order], fine_row[order], number[order], owner[order]
        cuts = np.searchsorted(owner, np.arange(len(bounds)))
        fine_global = fine_cell + state.first_rank
        for j in range(len(bounds) - 1):
            lo, hi = int(cuts[j]), int(cuts[j + 1])
            if lo == hi:
                continue
            mine = np.flatnonzero(owner_p == j)
            local = np.full(owner_p.size, -1, dtype=np.int64)
            local[mine] = np.arange(mine.size, dtype=np.int64)
            minus[j] = CrossLevelRecords(
                fine_global[mine], coarse_cell[mine] - bounds[j], coarse_row[mine],
                local[partial[lo:hi]], fine_row[lo:hi], number[lo:hi],
            )  # fmt: skip
    return _FamilyParts(plus, minus)


def _cell_pairs(state: _MapState, ancestor: np.ndarray, target: MetavertexLayout) -> np.ndarray:
    """Distinct (global fine cell, coarse cell) index pairs of a fine group's records, packed."""
    valid = ancestor >= 0
    fine = state.partial_cell[valid] + state.first_rank
    return unique_sorted(fine * max(len(target.cells), 1) + target.mv_cell[ancestor[valid]])


def _union_pairs(*parts: np.ndarray) -> np.ndarray:
    return unique_sorted(np.concatenate(parts)) if parts else np.zeros(0, np.int64)


def _minus_share(parts: _FamilyParts, k: int) -> CrossLevelRecords | None:
    return parts.minus[k]


def _write_plus(level: Level, delta: int, parts: _FamilyParts, ready: int = 0) -> int:
    """Write a fine group's ``+k`` cells (``ready``: the family-init task, which must run first)."""
    part = parts.plus
    if part.num_physical_records == 0:
        return 0
    return write_link_cells(level, delta, part).num_physical_records


def _minus_owner_partition(
    target: MetavertexLayout, fine_cells: np.ndarray, spec: _FamilySpec, total: int, j: int,
    *shares: CrossLevelRecords | _FamilyParts | None,
) -> LinkPartition | None:  # fmt: skip
    """Owner ``j``'s ``-k`` partition (its whole coarse cells), from every fine group's share.

    A share is the group's ``CrossLevelRecords`` for this owner, or (local threads: nothing to
    ship) the group's whole ``_FamilyParts``.
    """
    taken = [s.minus[j] if isinstance(s, _FamilyParts) else s for s in shares]
    parts = [s for s in taken if s is not None]
    if not parts:
        return None
    lo, hi = spec.owner_starts[j], spec.owner_starts[j + 1]
    return place_cross_level(
        CrossLevelRecords.concat(parts), fine_cells, target.cells[lo:hi], coarse_leads=True, delta=-spec.k,
        anchor_ratios=(spec.r_coarse, spec.r_fine), total=total,
    )  # fmt: skip


def _write_minus(level: Level, delta: int, part: LinkPartition | None, ready: int = 0) -> int:
    """Write a coarse owner's ``-k`` cells (after the family-init task)."""
    if part is None or part.num_physical_records == 0:
        return 0
    return write_link_cells(level, delta, part).num_physical_records


def _write_vertices(
    vertices: GridArray, fragments: GridArray, layout: MetavertexLayout, start: int, stop: int
) -> list[str]:
    """Write the coarse cells ``start:stop``: rows, and one 1-row fragment per metavertex."""
    cells, counts, positions = layout.slice_cells(start, stop)
    vcells: dict[tuple[int, ...], bytes] = {}
    fcells: dict[tuple[int, ...], bytes] = {}
    offset = 0
    for chunk, n in zip(cells.tolist(), counts.tolist()):
        key = tuple(chunk)
        vcells[key] = positions[offset : offset + n].tobytes()
        fcells[key] = FragmentIndex.from_counts(np.ones(n, dtype=np.int64)).encode()
        offset += n
    write_cells_many([(vertices, vcells), (fragments, fcells)])
    return [format_chunk_key(c) for c in vcells]


# ---------------------------------------------------------------------------
# reconcile
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class _ObjectPlan:
    """The coarse level's objects: parent slots, kept ids and the kept manifest blocks."""

    num_objects: int
    kept: np.ndarray  # ids, ascending
    block_object: np.ndarray  # kept blocks, manifest order
    block_cell: np.ndarray  # global source cell rank
    block_fragment: np.ndarray
    ordered: bool
    attributes: list[str]  # object attribute names at the source level


def _write_object_index(
    level: Level, source: Level, plan: _ObjectPlan, layout: MetavertexLayout, sequences: list[tuple[np.ndarray, ...]]
) -> None:
    frag_cell = np.concatenate([s[0] for s in sequences]) if sequences else np.zeros(0, np.int64)
    frag_id = np.concatenate([s[1] for s in sequences]) if sequences else np.zeros(0, np.int64)
    lengths = np.concatenate([np.diff(s[2]) for s in sequences]) if sequences else np.zeros(0, np.int64)
    seq = np.concatenate([s[3] for s in sequences]) if sequences else np.zeros(0, np.int64)
    offsets = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    keys = (frag_cell << 32) | frag_id  # groups are consecutive cell runs: already ascending
    wanted = (plan.block_cell << 32) | plan.block_fragment
    pos = np.searchsorted(keys, wanted)
    if wanted.size and (pos.max() >= keys.size or not np.array_equal(keys[pos], wanted)):
        raise RuntimeError("a kept manifest block names a fragment the bin tasks did not read")
    obj, mv = object_metavertices(
        plan.block_object, pos, offsets, seq, ordered=plan.ordered, num_metavertices=len(layout)
    )
    chunks, rows = layout.chunk_rows(mv)
    manifests = encode_mode0_manifests(obj, chunks, rows, plan.num_objects)
    write_object_index(
        level, manifests, num_objects=plan.num_objects, num_present=int(unique_sorted(obj).size),
        sid_ndim=level.store.root.sid_ndim,
    )
    if plan.attributes:
        write_node(level.storage, level.node_path("object_attributes"), group_document())
    for name in plan.attributes:
        src_path = source.node_path(f"object_attributes/{name}")
        values, attrs = read_table(source.storage, src_path)
        doc = read_node(source.storage, src_path) or {}
        fill = fill_value_from_json(doc.get("fill_value", 0), values.dtype)
        codecs = doc.get("codecs") or []
        out = values.copy()
        drop = np.ones(out.shape[0], dtype=bool)
        kept = plan.kept[plan.kept < out.shape[0]]
        drop[kept] = False
        out[drop] = fill
        write_table(
            level.storage,
            level.node_path(f"object_attributes/{name}"),
            out,
            fill_value=fill,
            attributes=attrs,
            compressor=codecs[1] if len(codecs) > 1 else None,
        )


def _reconcile(
    level: Level,
    source: Level,
    arrays: tuple[GridArray, GridArray],
    layout: MetavertexLayout,
    objects: _ObjectPlan | None,
    vertex_keys: list[list[str]],
    sequences: list[tuple[np.ndarray, ...]],
    families: list[tuple[Level, int, list[int]]],
    ready: int = 0,
) -> list[tuple[int, int, int]]:
    """The level's single coordinator step (after the family init, ``ready``); safe to run twice.

    Its parts touch disjoint files and are mostly listings and small writes, so they
    run side by side on a few threads.
    """
    keys = sorted({k for ks in vertex_keys for k in ks})

    def finalize(lvl: Level, delta: int, rows: list[int]) -> tuple[int, int, int]:
        n = int(sum(rows))
        finalize_links(lvl, delta, counts=LinkCounts(n, n))
        return lvl.number, delta, n

    with ThreadPoolExecutor(4) as pool:
        jobs = [pool.submit(confirm_presence, grid, keys) for grid in arrays]
        if objects is not None:
            jobs.append(pool.submit(_write_object_index, level, source, objects, layout, sequences))
        counted = [pool.submit(finalize, *fam) for fam in families]
        for job in jobs:
            job.result()
        out = [job.result() for job in counted]
    level.write_metadata()
    return out


# ---------------------------------------------------------------------------
# the driver
# ---------------------------------------------------------------------------
def _publish(value: Any) -> Any:
    """A large client-side value as one graph node (scattered under a distributed client)."""
    client = current_client()
    if value is None:
        return None
    if client is not None:
        return client.scatter(value, hash=False)
    return dask.delayed(value, name=f"zv-pyramid-{uuid.uuid4().hex}", traverse=False)


def _runs(n: int, groups: int) -> list[slice]:
    if n == 0:
        return []
    groups = max(1, min(n, groups))
    edges = np.linspace(0, n, groups + 1).round().astype(int)
    return [slice(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:]) if b > a]


def _coarse_grid(
    bounds: tuple[tuple[float, ...], tuple[float, ...]], cs: Sequence[float], cells: np.ndarray
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(origin, shape) of a new level's arrays: the root bounds' chunks, and every occupied cell."""
    c = np.asarray(cs, dtype=np.float64)
    lo = np.floor(np.asarray(bounds[0], dtype=np.float64) / c).astype(np.int64)
    hi = np.floor(np.asarray(bounds[1], dtype=np.float64) / c).astype(np.int64)
    if len(cells):
        lo = np.minimum(lo, cells.min(axis=0))
        hi = np.maximum(hi, cells.max(axis=0))
    return tuple(int(v) for v in lo), tuple(int(v) for v in hi - lo + 1)


class _Builder:
    def __init__(
        self,
        store: ZVStore,
        base: _LevelState,
        kind: str,
        has_objects: bool,
        storage_mode: str,
        depth: int,
        n_levels: int,
        seed: int,
    ) -> None:
        self.store = store
        self.root = store.root
        self.ndim = store.root.sid_ndim
        self.kind = kind
        self.has_objects = has_objects
        self.storage_mode = storage_mode
        self.storage_mode_arg, self.depth_arg = storage_mode, depth
        self.max_delta = 0 if storage_mode == "none" else (n_levels if depth == -1 else int(depth))
        self.seed = seed
        vertices = base.level.array("vertices")
        self.compressor = _compressor(vertices)
        self.levels: dict[int, _LevelState] = {0: base}
        self.maps: dict[int, list[Any]] = {}  # fine level -> persisted _MapState per group
        self.ancestors: dict[int, list[Any]] = {}  # fine level -> persisted ancestor arrays
        self.offsets: dict[int, tuple[list[int], int]] = {}  # fine level -> (group offsets, total)
        self.threads = parallelism()
        self.indexes: dict[int, Any] = {}  # object indexes already read (level 0's, by the checks)
        self.pending_check: Any = None  # the reconciled-store check, to pass before anything is removed

    # -- objects ------------------------------------------------------------
    def _object_plan(self, src: _LevelState, new: _NewLevel) -> tuple[_ObjectPlan | None, np.ndarray, np.ndarray]:
        """Kept objects and their blocks; and the surviving (cell rank, fragment) pairs, sorted."""
        if not self.has_objects:
            return None, np.zeros(0, np.int64), np.zeros(0, np.int64)
        index = self.indexes.pop(src.number, None) or read_object_index(src.level)
        if index is None:
            raise EncodingError(f"level {src.number} has no object_index but its parent has one")
        ids = index.ids[index.block_row]  # rows ascend, so do v1 ids
        present = ids[np.r_[True, ids[1:] != ids[:-1]]] if index.layout == OBJECT_INDEX_LAYOUT else unique_sorted(ids)
        kept = select_objects(present, new.sparsity, self.seed, new.number)
        if kept.size == present.size:
            keep = slice(None)
        else:
            wanted = np.zeros(int(index.ids.max()) + 1 if index.ids.size else 0, dtype=bool)
            wanted[kept] = True
            keep = wanted[ids]
        cell = src.rank(index.block_chunk[keep], "a manifest")
        frag = index.block_fragment[keep]
        plan = _ObjectPlan(
            num_objects=int(index.ids.size),
            kept=kept,
            block_object=ids[keep],
            block_cell=cell,
            block_fragment=frag,
            ordered=self.kind in ORDERED_KINDS,
            attributes=sorted(
                n for n in src.level.children("object_attributes") if src.level.has(f"object_attributes/{n}")
            ),
        )
        surviving = unique_sorted((cell << 32) | frag)
        return plan, surviving >> 32, surviving & 0xFFFFFFFF

    # -- one level ------------------------------------------------------------
    def build_level(self, new: _NewLevel) -> tuple[PyramidLevel, list[tuple[int, int, int]]]:
        n = new.number
        src = self.levels[n - 1]
        objects, frag_cell, frag_id = self._object_plan(src, new)
        vertices = src.level.array("vertices")
        fragments = src.level.array("vertex_fragments") if self.has_objects else None
        grid = BinGrid.covering(new.bin_shape, src.chunk_shape, src.origin, src.shape)
        params = _BinParams(self.ndim, _store_dtype(vertices), src.chunk_shape, grid, self.has_objects)
        if src.counts is not None and len(src.cells):
            target = max(1, -(-int(src.counts.sum()) // (TASKS_PER_THREAD * self.threads)))
            groups = split_by_weight(src.counts, target)
        else:
            groups = _runs(len(src.cells), TASKS_PER_THREAD * self.threads)
        fc, fi = _publish(frag_cell), _publish(frag_id)
        v_ref, f_ref, p_ref = _publish(vertices), _publish(fragments), _publish(params)
        bins = [dask.delayed(_bin_group)(v_ref, f_ref, p_ref, g.start, src.cells[g], fc, fi) for g in groups]
        partials = [dask.delayed(_partial_rows)(b) for b in bins]
        combined = dask.delayed(_combine)(_publish(grid), params.dtype, new.chunk_shape, self.ndim, *partials)
        # one graph: bin -> combine -> map; only the layout, the maps and a small summary stay in memory
        checks = [self.pending_check] if self.pending_check is not None else []
        layout, summary, *maps = runner.persist(
            f"pyramid level {n}: bin",
            combined, dask.delayed(_layout_summary)(combined, *partials), *checks,
            *[dask.delayed(_map_group)(b, combined) for b in bins],
        )  # fmt: skip
        ((cells, counts, members, sizes), *_) = runner.compute(
            f"pyramid level {n}: layout", summary, *maps[: len(checks)]
        )
        maps = maps[len(checks) :]
        if n == 1:  # every check passed (the deferred one raises otherwise): only now is anything removed
            self.pending_check = None
            _clear_pyramid(self.store, self.levels[0].level, self.storage_mode_arg, self.depth_arg)

        # init: the level group, its arrays, the root's dataset and tokens
        cs = tuple(float(c) for c in new.chunk_shape)
        meta = LevelMetadata(
            level=n,
            vertex_count=int(counts.sum()),
            arrays_present=["vertices"] + (["object_index"] if self.has_objects else []),
            object_sparsity=1.0 / new.sparsity,
            coarsening_method="per_object",
            parent_level=n - 1,
            chunk_shape=cs if any(abs(a - b) > 1e-9 for a, b in zip(cs, self.root.chunk_shape)) else None,
            preserves_object_ids=self.has_objects,
            inherited_num_objects=objects.num_objects if objects is not None else None,
            shared_fragments=True,
            fragments_tile=True,
        )
        level = Level(self.store, n, meta)
        level.write_metadata()
        origin, shape = _coarse_grid(self.root.bounds, cs, cells)
        arrays = tuple(
            GridArray.create(
                self.store.storage, level.node_path(rel), shape=shape, origin=origin, attributes=attrs,
                compressor=self.compressor,
            )
            for rel, attrs in (
                ("vertices", {"zv_array": "vertices", "dtype": params.dtype.name, "encoding": "raw"}),
                ("vertex_fragments", {"zv_array": "vertex_fragments", "encoding": "fragment_index_v1"}),
            )
        )  # fmt: skip
        self.root.datasets.append(
            RootMetadata.level_transform(n, new.bin_shape, self.root.effective_base_bin_shape)
        )
        tokens = (["preserved_object_ids"] if self.has_objects else []) + ["shared_fragments"]
        if self.max_delta > 0:
            tokens.append("multiscale_links")
        for t in tokens:
            if t not in self.root.format_capabilities:
                self.root.format_capabilities.append(t)
        self.store.write_root()
        # coarse owners write the metavertices and the -k records of their cells: size them by the latter
        weight = members + counts
        owners = split_by_weight(weight, max(1, -(-int(weight.sum()) // self.threads)))
        state = _LevelState(
            level=level,
            chunk_shape=cs,
            bin_shape=tuple(new.bin_shape),
            ratios=_ratios(cs, self.root.chunk_shape),
            origin=origin,
            shape=shape,
            cells=cells,
            counts=counts,
        )
        self.levels[n] = state

        # parent maps and their compositions
        total = int(sum(sizes))
        self.maps[n - 1] = list(maps)
        self.offsets[n - 1] = ([int(v) for v in np.cumsum([0] + list(sizes))[:-1]], total)
        self.ancestors[n - 1] = [dask.delayed(_mv_of)(m) for m in maps]
        deeper = [i for i in self.ancestors if i <= n - 2 and n - i <= self.max_delta]
        if deeper:
            starts = np.r_[0, np.cumsum(src.counts)[:-1]].astype(np.int64)
            (parent,) = runner.persist(
                f"pyramid level {n}: parents", dask.delayed(_parent_map)(starts, int(src.counts.sum()), *maps)
            )
            for i in deeper:
                self.ancestors[i] = list(
                    runner.persist(
                        f"pyramid level {n}: ancestors of level {i}",
                        *[dask.delayed(compose_parents)(parent, a) for a in self.ancestors[i]],
                    )
                )

        # cross-level families ending at this level.  Their offsets segments follow from the distinct
        # (fine cell, coarse cell) pairs, so one coordinator task creates every family and array
        # (metadata only) while the records are being placed; writers wait for it.
        owner_starts = tuple(int(v) for v in [s.start for s in owners] + [len(cells)])
        level_ref = _publish(level)
        ks = list(range(1, min(self.max_delta, n) + 1))
        specs = {k: _FamilySpec(k, self.levels[n - k].ratios, state.ratios, self.storage_mode == "explicit",
                                owner_starts) for k in ks}  # fmt: skip
        spec_refs = {k: _publish(specs[k]) for k in ks}
        fine_refs = {k: (_publish(self.levels[n - k].level), _publish(self.levels[n - k].cells)) for k in ks}
        families_init = [
            (
                fine_refs[k][0], self.levels[n - k].origin, self.levels[n - k].shape, fine_refs[k][1], spec_refs[k],
                dask.delayed(_union_pairs)(
                    *[dask.delayed(_cell_pairs)(m, a, layout) for m, a in zip(self.maps[n - k], self.ancestors[n - k])]
                ),
            )  # fmt: skip
            for k in ks
        ]
        ready = dask.delayed(_init_families)(
            level_ref, origin, shape, _publish(cells), self.compressor, self.ndim, families_init
        )
        # under a distributed client a coarse owner fetches only its share of each group's records;
        # on local threads nothing moves, so it reads the groups' results directly
        distributed = current_client() is not None
        share = (lambda p, j: dask.delayed(_minus_share)(p, j)) if distributed else (lambda p, j: p)  # noqa: E731
        writers = []
        for k in ks:
            spec, spec_ref = specs[k], spec_refs[k]
            fine_ref, fine_cells = fine_refs[k]
            offs, tot = self.offsets[n - k]
            parts = [
                dask.delayed(_family_parts)(m, a, o, tot, layout, spec_ref, ready)
                for m, a, o in zip(self.maps[n - k], self.ancestors[n - k], offs)
            ]
            writers.append((fine_ref, k, [(_write_plus, p) for p in parts]))
            if spec.explicit:
                minus = [
                    dask.delayed(_minus_owner_partition)(
                        layout, fine_cells, spec_ref, tot, j, *[share(p, j) for p in parts]
                    )
                    for j in range(len(owners))
                ]
                writers.append((level_ref, -k, [(_write_minus, m) for m in minus]))
        fam_rows = [
            (lv, d, [dask.delayed(fn)(lv, d, part, ready) for fn, part in jobs]) for lv, d, jobs in writers
        ]

        v_out, f_out = _publish(arrays[0]), _publish(arrays[1])
        vertex_keys = [dask.delayed(_write_vertices)(v_out, f_out, layout, s.start, s.stop) for s in owners]
        sequences = [dask.delayed(_sequences)(m) for m in maps] if objects is not None else []
        (families,) = runner.compute(
            f"pyramid level {n}: write",
            dask.delayed(_reconcile)(
                level_ref, _publish(src.level), _publish(arrays), layout, _publish(objects), vertex_keys, sequences,
                fam_rows, ready,
            )  # fmt: skip
        )
        # what the next levels still need
        for i in [i for i in self.ancestors if n + 1 - i > self.max_delta]:
            self.ancestors.pop(i)
            self.maps.pop(i, None)
            self.offsets.pop(i, None)
        result = PyramidLevel(
            level=n,
            vertex_count=int(counts.sum()),
            cells=len(cells),
            bin_shape=tuple(new.bin_shape),
            chunk_shape=cs,
            objects_kept=int(objects.kept.size) if objects is not None else None,
        )
        return result, families


def build_pyramid(
    url: str | os.PathLike[str],
    *,
    factors: Sequence[Any],
    chunk_scale_factors: Sequence[Any] | None = None,
    cross_level_storage: str = "explicit",
    cross_level_depth: int = 1,
    sparsity_seed: int = 0,
    storage_options: Mapping[str, Any] | None = None,
) -> PyramidResult:
    """Build (or rebuild) the coarser levels of a store, as a Dask graph on the current scheduler.

    Args:
        url: the store (local path, ``file://``, ``memory://``, ``s3://bucket/prefix``).
        factors: one ``(coarsen, sparsity_factor)`` pair per new level (a bare number
            means sparsity 1).  Level N's bin = level N-1's bin x ``coarsen`` (>= 1);
            ``sparsity_factor`` (>= 1) keeps ``max(1, round(objects / sparsity_factor))``
            of the parent's objects, chosen at random (seeded).
        chunk_scale_factors: one entry per new level, an int or a per-axis tuple of
            positive ints: level N's chunk = level N-1's chunk x the factor (default 1).
        cross_level_storage: ``"explicit"`` (``+N`` at the fine level and ``-N`` at the
            coarse one), ``"implicit"`` (``+N`` only) or ``"none"``.
        cross_level_depth: the largest ``|N|`` linked (``-1``: every pair of levels;
            ``0``: no cross-level family).
        sparsity_seed: seed of the object selection (non-negative int).
        storage_options: fsspec options (e.g. an S3 ``endpoint_url``).

    Levels >= 1 and every cross-level family are replaced; the same inputs give the same
    bytes.  Every check runs before anything is removed or written.
    """
    parsed = _check_factors(factors, chunk_scale_factors)
    _check_options(cross_level_storage, cross_level_depth, sparsity_seed)
    store = open_store(url, storage_options=storage_options)
    kinds = store.root.geometry_types
    if len(kinds) != 1 or kinds[0] not in GEOMETRY_TYPES:
        raise InputError(f"{store.url!r}: pyramids need a store of one known geometry type, found {kinds}")
    base = _level0_state(store)
    rels = _grid_array_paths(base.level)
    read_here = [r for r in rels if r in ("vertices", "vertex_fragments")]
    _check_reconciled(base.level, read_here)  # the arrays the pyramid reads: before anything else
    has_objects = base.level.has("object_index")
    index = read_object_index(base.level) if has_objects else None  # decodes; refuses layouts but v1 (D1)
    if not has_objects and any(f.sparsity != 1 for f in parsed):
        raise InputError(
            f"{store.url!r} has no object ids, so there are no objects to drop: object sparsity needs an "
            "object index (use sparsity factor 1)"
        )
    plan = _plan_levels(store, base, parsed)

    builder = _Builder(
        store, base, kinds[0], has_objects, cross_level_storage, int(cross_level_depth), len(plan), int(sparsity_seed)
    )
    if index is not None:
        builder.indexes[0] = index
    # the presence-list check (it lists every cell of level 0) runs beside level 1's read-only bin
    # stage; levels >= 1 are removed only once it has passed (``build_level``)
    rest = [r for r in rels if r not in read_here]
    builder.pending_check = dask.delayed(_check_reconciled)(_publish(base.level), rest) if rest else None
    levels, families = [], []
    with reconsolidating(store.storage):
        for new in plan:
            result, fams = builder.build_level(new)
            levels.append(result)
            families += fams
    return PyramidResult(store.url, levels, cross_level_storage, int(cross_level_depth), families)
