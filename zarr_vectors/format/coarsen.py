"""Per-object coarsening (docs/format.md §8.1): bins, centroids, placement, sparsity.

A coarse level has one metavertex per occupied bin: the centroid of every surviving
source vertex in that bin, whatever object it belongs to.  The work is split so that
Dask tasks can each handle a disjoint group of source cells:

1. :func:`cell_partials` (per source-cell group): bin every surviving vertex and sum
   positions per ``(cell, bin)`` -- one partial row per occupied bin of each cell;
2. :func:`combine_partials` (one task): add the partial rows of the whole level, in cell
   order, into one sum per bin;
3. :func:`centroids_in_bins` and :func:`layout_metavertices`: the centroids, the coarse
   cell each falls in, and its row there (storage order: cells ascending as signed
   integer tuples, then bins ascending).

Partial sums are taken per cell, in row order, and combined in cell order, so the
floating-point result -- hence every byte of the coarse level -- does not depend on how
cells were grouped into tasks (i.e. on the number of workers).

Vertex attributes are carried the same way (docs/decisions.md D22): each one is reduced
per metavertex by its declared reduction (:data:`REDUCTIONS`), first per ``(cell, bin)``
(:func:`reduce_rows`), then per bin over the partial rows in cell order
(:func:`combine_reduced`); the level records the choice (:data:`AGGREGATION_MEMBER`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from zarr_vectors.errors import EncodingError, InputError, InternalError

DENSE_KEY_SPACE = 1 << 22
"""Per-task (cell, bin) key spaces up to this size are counted with bincount, not sorted."""

__all__ = [
    "AGGREGATION_MEMBER",
    "REDUCTIONS",
    "BinGrid",
    "CellPartials",
    "MetavertexLayout",
    "cell_partials",
    "centroids_in_bins",
    "combine_partials",
    "combine_reduced",
    "default_reduction",
    "layout_metavertices",
    "reduce_rows",
    "select_objects",
    "unique_inverse",
    "unique_sorted",
]


REDUCTIONS = ("mean", "min", "max", "first")
"""How a coarse level's vertex attribute is made from the rows its metavertex stands for (D22)."""
AGGREGATION_MEMBER = "attribute_aggregation"
"""The level metadata member naming each carried vertex attribute's reduction (D22)."""


def default_reduction(dtype: np.dtype) -> str:
    """``mean`` for a float attribute, ``first`` for an integer or boolean one (a label, a count, a flag)."""
    return "mean" if np.dtype(dtype).kind == "f" else "first"


def _group_starts(group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(stable order sorting rows by ``group``, index of each group's first row in that order)."""
    order = np.argsort(group, kind="stable")
    g = group[order]
    new = np.ones(g.size, dtype=bool)
    if g.size > 1:
        np.not_equal(g[1:], g[:-1], out=new[1:])
    return order, np.flatnonzero(new)


def _integer_mean(dtype: np.dtype) -> type[np.integer] | None:
    """The 64-bit type an integer mean's partial min and max travel as (None: a float or bool mean)."""
    kind = np.dtype(dtype).kind
    return np.int64 if kind == "i" else np.uint64 if kind == "u" else None


def _above(values: np.ndarray, low: np.ndarray) -> np.ndarray:
    """``values - low`` (64-bit integers, ``values >= low``) as float64: exact in uint64 modular
    arithmetic whatever the signs, rounded only past 2**53."""
    return (values.view(np.uint64) - low.view(np.uint64)).astype(np.float64)


def reduce_rows(values: np.ndarray, group: np.ndarray, n: int, reduction: str) -> np.ndarray:
    """Per group ``0..n-1`` (every one non-empty), the partial ``reduction`` of its rows, rows in order.

    ``mean`` gives float64 sums (the caller divides once every partial is in).  For an integer
    attribute a sum is of the rows above the group's min, and comes with that min, the max (their
    64-bit patterns as float64) and the row count, on a last axis of 4: float64 sums of the values
    themselves are not exact past 2**53.  The other reductions keep the attribute's dtype.
    """
    if reduction not in REDUCTIONS:
        raise InputError(f"unknown reduction {reduction!r}: use one of {list(REDUCTIONS)}")
    wide = _integer_mean(values.dtype) if reduction == "mean" else None
    if n == 0:
        shape = (0, *values.shape[1:], 4) if wide else (0, *values.shape[1:])
        return np.zeros(shape, dtype=np.float64 if reduction == "mean" else values.dtype)
    order, starts = _group_starts(group)
    if starts.size != n:
        raise InternalError(f"reduce_rows: {starts.size} of {n} groups have rows")
    rows = values[order]
    if reduction == "mean" and wide is None:
        return np.add.reduceat(rows.astype(np.float64), starts, axis=0)
    if reduction == "mean":
        rows = rows.astype(wide)
        low, high = np.minimum.reduceat(rows, starts, axis=0), np.maximum.reduceat(rows, starts, axis=0)
        sizes = np.diff(np.r_[starts, len(rows)])
        above = np.add.reduceat(_above(rows, np.repeat(low, sizes, axis=0)), starts, axis=0)
        count = np.broadcast_to(sizes.reshape((-1,) + (1,) * (above.ndim - 1)).astype(np.float64), above.shape)
        return np.stack([above, low.view(np.float64), high.view(np.float64), count], axis=-1)
    if reduction == "first":
        return rows[starts]
    ufunc = np.minimum if reduction == "min" else np.maximum
    return ufunc.reduceat(rows, starts, axis=0)


def combine_reduced(
    partials: np.ndarray, inverse: np.ndarray, n: int, counts: np.ndarray, reduction: str, dtype: np.dtype
) -> np.ndarray:
    """Per bin, the ``reduction`` of its partial rows (``inverse``: bin of each, partials in cell order).

    ``counts`` are the vertices per bin (the divisor of a mean).  A mean of an integer attribute
    is the bin's min plus the rounded mean of the rows above it, kept within the bin's max: exact
    while the bin's values span less than 2**53, and never outside them (float64 sums of the
    values rounded a uint64 mean near 2**64 up to 2**64, which wrapped to 0).  A boolean mean is
    rounded to False or True.
    """
    dt = np.dtype(dtype)
    wide = _integer_mean(dt) if reduction == "mean" else None
    if wide is None:
        out = reduce_rows(partials, inverse, n, "mean" if reduction == "mean" else reduction)
        if reduction != "mean":
            return out.astype(dt, copy=False)
        out /= counts.reshape((-1,) + (1,) * (out.ndim - 1))
        return out.astype(dt) if dt.kind == "f" else np.rint(out).astype(dt)
    part_low = np.ascontiguousarray(partials[..., 1]).view(wide)
    low = reduce_rows(part_low, inverse, n, "min")
    high = reduce_rows(np.ascontiguousarray(partials[..., 2]).view(wide), inverse, n, "max")
    shifted = partials[..., 0] + _above(part_low, low[inverse]) * partials[..., 3]
    above = reduce_rows(shifted, inverse, n, "mean") / counts.reshape((-1,) + (1,) * (low.ndim - 1))
    span = high.view(np.uint64) - low.view(np.uint64)
    odd = (low.view(np.uint64) & 1).astype(np.float64)  # half to even, as np.rint of the mean itself rounds
    step = np.rint(above + odd) - odd  # >= 0: the mean of rows at or above the min
    inside = step < span.astype(np.float64)  # these convert to uint64 as they are; the others are the max
    step = np.where(inside, np.where(inside, step, 0).astype(np.uint64), span)
    return (low.view(np.uint64) + np.minimum(step, span)).view(wide).astype(dt)


def _floor_div(values: np.ndarray, shape: np.ndarray) -> np.ndarray:
    """``floor(values / shape)`` per column in float64, as int64 (column by column: faster)."""
    out = np.empty(values.shape, dtype=np.int64)
    scratch = np.empty(values.shape[0], dtype=np.float64)
    for d in range(values.shape[1]):
        np.divide(values[:, d], shape[d], out=scratch, dtype=np.float64)
        np.floor(scratch, out=scratch)
        out[:, d] = scratch
    return out


def unique_sorted(values: np.ndarray) -> np.ndarray:
    """Distinct values ascending (sort + dedupe: numpy 2's ``np.unique`` without an inverse
    takes a much slower path on large integer arrays)."""
    v = np.sort(np.asarray(values).reshape(-1))
    if v.size < 2:
        return v
    keep = np.empty(v.size, dtype=bool)
    keep[0] = True
    np.not_equal(v[1:], v[:-1], out=keep[1:])
    return v[keep]


def unique_inverse(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(distinct values ascending, index of each value among them)``."""
    v = np.asarray(values).reshape(-1)
    order = np.argsort(v, kind="stable")
    sv = v[order]
    new = np.ones(v.size, dtype=bool)
    if v.size > 1:
        np.not_equal(sv[1:], sv[:-1], out=new[1:])
    inverse = np.empty(v.size, dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    return sv[new], inverse


@dataclass(frozen=True)
class BinGrid:
    """Absolute bin coordinates ``floor(pos / bin_shape)`` and one int64 key per bin.

    Keys are the C-order linearisation of ``bins - origin`` over ``spans``, so ascending
    keys are bins in lexicographic (axis 0 first) order.
    """

    bin_shape: tuple[float, ...]
    origin: tuple[int, ...]
    spans: tuple[int, ...]

    @classmethod
    def covering(
        cls,
        bin_shape: Sequence[float],
        chunk_shape: Sequence[float],
        chunk_origin: Sequence[int],
        grid_shape: Sequence[int],
    ) -> BinGrid:
        """The bins of every position inside a chunk grid (with a margin for rounding)."""
        bs = np.asarray(bin_shape, dtype=np.float64)
        cs = np.asarray(chunk_shape, dtype=np.float64)
        lo_chunk = np.asarray(chunk_origin, dtype=np.float64)
        hi_chunk = lo_chunk + np.asarray(grid_shape, dtype=np.float64)
        lo = np.floor(lo_chunk * cs / bs).astype(np.int64) - 2
        hi = np.floor(hi_chunk * cs / bs).astype(np.int64) + 2
        spans = tuple(int(v) for v in hi - lo + 1)
        if math.prod(spans) >= 1 << 62:
            raise InputError(
                f"the level spans {list(spans)} bins of {list(bin_shape)}: too many to address; use a larger "
                "coarsening factor"
            )
        return cls(tuple(float(b) for b in bs), tuple(int(v) for v in lo), spans)

    @property
    def ndim(self) -> int:
        return len(self.spans)

    def bins(self, positions: np.ndarray) -> np.ndarray:
        return _floor_div(positions, np.asarray(self.bin_shape, dtype=np.float64))

    def keys(self, bins: np.ndarray) -> np.ndarray:
        local = bins - np.asarray(self.origin, dtype=np.int64)
        spans = np.asarray(self.spans, dtype=np.int64)
        if local.size and ((local < 0) | (local >= spans)).any():
            i = int(np.argmax(((local < 0) | (local >= spans)).any(axis=1)))
            raise EncodingError(
                f"bin {bins[i].tolist()} lies outside the level's chunk grid: a vertex is not inside the "
                "chunk its cell claims"
            )
        key = np.zeros(len(bins), dtype=np.int64)
        for d in range(self.ndim):
            key *= self.spans[d]
            key += local[:, d]
        return key

    def unkey(self, keys: np.ndarray) -> np.ndarray:
        out = np.empty((len(keys), self.ndim), dtype=np.int64)
        rest = np.asarray(keys, dtype=np.int64).copy()
        for d in range(self.ndim - 1, -1, -1):
            out[:, d] = rest % self.spans[d] + self.origin[d]
            rest //= self.spans[d]
        return out


@dataclass(frozen=True, eq=False)
class CellPartials:
    """Per ``(cell, bin)`` position sums of one group of source cells.

    Rows are ordered by cell (the group's cell order), then bin key; ``vertex_partial``
    maps every input vertex to its row.
    """

    keys: np.ndarray  # (k,) int64 bin key of each partial row
    sums: np.ndarray  # (k, D) float64
    counts: np.ndarray  # (k,) int64
    cell: np.ndarray  # (k,) int64 index into ``cells`` of each partial row
    vertex_partial: np.ndarray  # (m,) int64


def cell_partials(
    positions: np.ndarray,
    cell_of_vertex: np.ndarray,
    cells: np.ndarray,
    chunk_shape: Sequence[float],
    grid: BinGrid,
    where: str,
) -> CellPartials:
    """Bin every vertex and sum positions per (cell, bin), in row order within each cell.

    ``positions`` (m, D) of the surviving vertices of ``cells`` (c, D), grouped by cell
    in cell order (``cell_of_vertex`` ascending, indices into ``cells``); ``where``: the array
    they come from, for the errors.
    """
    m, ndim = positions.shape
    bs = np.asarray(grid.bin_shape, dtype=np.float64)
    cs = np.asarray(chunk_shape, dtype=np.float64)
    if m == 0:
        empty = np.zeros(0, np.int64)
        return CellPartials(empty, np.zeros((0, ndim), np.float64), empty, empty, empty)
    # bins of a cell's vertices lie within [floor(c*cs/bs) - 1, floor((c+1)*cs/bs) + 1]
    cell_bin0 = np.floor(cells.astype(np.float64) * cs / bs).astype(np.int64) - 1
    span = np.floor(cs / bs).astype(np.int64) + 4
    per_cell = int(np.prod(span))
    per_vertex = np.bincount(cell_of_vertex, minlength=len(cells))
    if m > 1 and bool((cell_of_vertex[1:] < cell_of_vertex[:-1]).any()):
        raise InputError("cell_partials: vertices must be grouped by cell, in cell order")
    strides = [int(np.prod(span[d + 1 :])) for d in range(ndim)]
    # key = cell * per_cell + sum_d (bin_d - cell_bin0_d) * stride_d, accumulated exactly in float64
    base = np.arange(len(cells), dtype=np.float64) * per_cell - (cell_bin0 * np.asarray(strides)).sum(axis=1)
    fkey = np.repeat(base, per_vertex)
    occupied = np.flatnonzero(per_vertex)
    starts = (np.cumsum(per_vertex) - per_vertex)[occupied]
    scratch = np.empty(m, dtype=np.float64)
    for d in range(ndim):
        np.divide(positions[:, d], bs[d], out=scratch, dtype=np.float64)
        np.floor(scratch, out=scratch)
        lo = np.minimum.reduceat(scratch, starts) - cell_bin0[occupied, d]
        hi = np.maximum.reduceat(scratch, starts) - cell_bin0[occupied, d]
        bad = ~((lo >= 0) & (hi < span[d]))  # NaN compares false: a cell holding one is bad too
        if bad.any():
            c = int(occupied[np.argmax(bad)])
            if np.isnan(lo[np.argmax(bad)]) or np.isnan(hi[np.argmax(bad)]):
                raise EncodingError(f"{where}: a vertex of cell {cells[c].tolist()} is NaN along axis {d}: it lies "
                                    "in no bin")
            raise EncodingError(
                f"{where}: a vertex of cell {cells[c].tolist()} lies outside that chunk (bins along axis {d} reach "
                f"{int(lo[np.argmax(bad)] + cell_bin0[c, d])}..{int(hi[np.argmax(bad)] + cell_bin0[c, d])})"
            )
        if strides[d] != 1:
            scratch *= strides[d]
        fkey += scratch
    key = fkey.astype(np.int64)
    space = len(cells) * per_cell
    if space <= DENSE_KEY_SPACE:
        present = np.flatnonzero(np.bincount(key, minlength=space))
        lut = np.empty(space, dtype=np.int64)
        lut[present] = np.arange(present.size, dtype=np.int64)
        vertex_partial = lut[key]
    else:
        present, vertex_partial = unique_inverse(key)
    k = present.size
    counts = np.bincount(vertex_partial, minlength=k).astype(np.int64)
    sums = np.empty((k, ndim), dtype=np.float64)
    for d in range(ndim):
        sums[:, d] = np.bincount(vertex_partial, weights=positions[:, d].astype(np.float64), minlength=k)
    cell_idx = present // per_cell
    rest = present % per_cell
    local_bins = np.empty((k, ndim), dtype=np.int64)
    for d in range(ndim - 1, -1, -1):
        local_bins[:, d] = rest % span[d]
        rest //= span[d]
    keys = grid.keys(cell_bin0[cell_idx] + local_bins)
    return CellPartials(keys, sums, counts, cell_idx.astype(np.int64), vertex_partial)


def combine_partials(
    keys: Sequence[np.ndarray], sums: Sequence[np.ndarray], counts: Sequence[np.ndarray], ndim: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(bin keys ascending, sums, counts, bin of each partial row)`` of the whole level.

    The parts must come in cell order; bincount adds them sequentially in that order.
    """
    all_keys = np.concatenate(list(keys)) if len(keys) else np.zeros(0, np.int64)
    if all_keys.size == 0:
        empty = np.zeros(0, np.int64)
        return empty, np.zeros((0, ndim), np.float64), empty, empty
    all_sums = np.concatenate(list(sums))
    all_counts = np.concatenate(list(counts)).astype(np.float64)
    uniq, inverse = unique_inverse(all_keys)
    n = uniq.size
    out_sums = np.empty((n, ndim), dtype=np.float64)
    for d in range(ndim):
        out_sums[:, d] = np.bincount(inverse, weights=all_sums[:, d], minlength=n)
    out_counts = np.rint(np.bincount(inverse, weights=all_counts, minlength=n)).astype(np.int64)
    return uniq, out_sums, out_counts, inverse


def centroids_in_bins(
    sums: np.ndarray, counts: np.ndarray, keys: np.ndarray, grid: BinGrid, dtype: np.dtype
) -> np.ndarray:
    """Centroids ``sums / counts`` in ``dtype``, each kept inside its own bin.

    The float64 mean of a bin's members lies in the bin up to rounding; a centroid that
    rounding puts on the far side of a bin face is moved to the nearest value of
    ``dtype`` inside it, so re-binning a metavertex always finds its own bin.
    """
    dt = np.dtype(dtype)
    if len(keys) == 0:
        return np.zeros((0, grid.ndim), dtype=dt)
    out = (sums / counts[:, None]).astype(dt)
    bins = grid.unkey(keys)
    bs = np.asarray(grid.bin_shape, dtype=np.float64)
    for d in range(grid.ndim):
        col = out[:, d]
        bad = np.flatnonzero(np.floor(col.astype(np.float64) / bs[d]) != bins[:, d])
        if bad.size == 0:
            continue
        lo = (bins[bad, d] * bs[d]).astype(dt)
        hi = ((bins[bad, d] + 1) * bs[d]).astype(dt)
        for _ in range(64):
            low = np.floor(lo.astype(np.float64) / bs[d]) < bins[bad, d]
            high = np.floor(hi.astype(np.float64) / bs[d]) > bins[bad, d]
            if not (low.any() or high.any()):
                break
            lo[low] = np.nextafter(lo[low], dt.type(np.inf))
            hi[high] = np.nextafter(hi[high], dt.type(-np.inf))
        col[bad] = np.clip(col[bad], lo, hi)
    return out


@dataclass(frozen=True, eq=False)
class MetavertexLayout:
    """Where every metavertex of a coarse level is stored.

    Storage order = cells ascending as signed integer tuples, then bin key.  ``keys``
    are the bin keys ascending and ``mv_index`` the storage index of each.
    """

    keys: np.ndarray  # (n,) ascending bin keys
    mv_index: np.ndarray  # (n,) storage index of keys[i]
    positions: np.ndarray  # (n, D) in storage order
    cells: np.ndarray  # (c, D) occupied coarse cells, ascending
    counts: np.ndarray  # (c,) metavertices per cell
    starts: np.ndarray  # (c,) storage index of each cell's row 0
    mv_cell: np.ndarray  # (n,) cell index of each metavertex (storage order)
    mv_row: np.ndarray  # (n,) row in its cell (= its fragment: one 1-row fragment per metavertex)
    members: np.ndarray  # (c,) source vertices folded into each cell's metavertices (task sizing)
    attributes: dict[str, np.ndarray] = field(default_factory=dict)  # per vertex attribute, storage order

    def __len__(self) -> int:
        return int(self.keys.size)

    def storage_index(self, keys: np.ndarray) -> np.ndarray:
        """Storage index of the metavertex of each bin key (every key must exist)."""
        if len(keys) == 0:
            return np.zeros(0, dtype=np.int64)
        pos = np.searchsorted(self.keys, keys)
        pos = np.minimum(pos, max(len(self.keys) - 1, 0))
        if len(self.keys) == 0 or not np.array_equal(self.keys[pos], keys):
            raise InternalError("a source bin has no metavertex: the level's partial sums are incomplete")
        return self.mv_index[pos]

    def chunk_rows(self, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(chunk coords, row) of metavertices given by storage index."""
        return self.cells[self.mv_cell[index]], self.mv_row[index]

    def slice_cells(
        self, start: int, stop: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """(cells, counts, positions, attributes) of cells ``start:stop`` (an owner task's share)."""
        lo = int(self.starts[start]) if start < len(self.starts) else len(self)
        hi = int(self.starts[stop - 1] + self.counts[stop - 1]) if stop > start else lo
        attrs = {name: values[lo:hi] for name, values in self.attributes.items()}
        return self.cells[start:stop], self.counts[start:stop], self.positions[lo:hi], attrs


def layout_metavertices(
    positions: np.ndarray,
    keys: np.ndarray,
    chunk_shape: Sequence[float],
    members: np.ndarray | None = None,
    attributes: dict[str, np.ndarray] | None = None,
) -> MetavertexLayout:
    """Assign each metavertex to the coarse cell ``floor(pos / chunk_shape)`` and order them.

    ``members`` (per metavertex, in ``keys`` order) is how many source vertices each one
    stands for; the layout sums it per cell.  ``attributes`` (rows in ``keys`` order) are
    put in storage order.
    """
    n, ndim = positions.shape
    cs = np.asarray(chunk_shape, dtype=np.float64)
    chunks = _floor_div(positions, cs)
    order = np.lexsort([keys] + [chunks[:, d] for d in range(ndim - 1, -1, -1)]) if n else np.zeros(0, np.int64)
    chunks = chunks[order]
    mv_index = np.empty(n, dtype=np.int64)
    mv_index[order] = np.arange(n, dtype=np.int64)
    if n:
        new = np.ones(n, dtype=bool)
        new[1:] = (chunks[1:] != chunks[:-1]).any(axis=1)
        starts = np.flatnonzero(new).astype(np.int64)
    else:
        starts = np.zeros(0, dtype=np.int64)
    counts = np.diff(np.append(starts, n)).astype(np.int64)
    mv_cell = np.repeat(np.arange(starts.size, dtype=np.int64), counts)
    mv_row = np.arange(n, dtype=np.int64) - starts[mv_cell] if n else np.zeros(0, np.int64)
    return MetavertexLayout(
        keys=np.asarray(keys, dtype=np.int64),
        mv_index=mv_index,
        positions=np.ascontiguousarray(positions[order]),
        cells=chunks[starts] if n else np.zeros((0, ndim), np.int64),
        counts=counts,
        starts=starts,
        mv_cell=mv_cell,
        mv_row=mv_row,
        members=np.bincount(mv_cell, weights=np.asarray(members)[order], minlength=starts.size).astype(np.int64)
        if members is not None and n
        else counts.copy(),
        attributes={name: np.ascontiguousarray(v[order]) for name, v in (attributes or {}).items()},
    )


def select_objects(present_ids: np.ndarray, sparsity_factor: float, seed: int, level: int) -> np.ndarray:
    """The objects a coarse level keeps: ``max(1, round(n / sparsity_factor))`` of the present ones.

    Uniform random selection without replacement from ``np.random.default_rng((seed,
    level))`` -- reproducible, and different from level to level.  Returns ids ascending.
    """
    ids = np.asarray(present_ids, dtype=np.int64)
    n = ids.size
    if sparsity_factor == 1 or n == 0:
        return ids
    target = max(1, round(n / sparsity_factor))
    if target >= n:
        return ids
    rng = np.random.default_rng((int(seed), int(level)))
    chosen = np.sort(rng.choice(n, size=target, replace=False))
    return ids[chosen]
