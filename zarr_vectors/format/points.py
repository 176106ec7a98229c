"""Point-cloud placement: chunk and bin assignment, and per-cell payloads (docs/format.md §8).

Pure, vectorised numpy: no I/O and no Dask here, so the same functions serve the
single-process call and every worker of a cluster job.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from zarr_vectors.encoding import FragmentIndex
from zarr_vectors.errors import InconsistentStoreError
from zarr_vectors.format.paths import format_chunk_key

#: chunk coordinates at or beyond this (in magnitude) would wrap in int64 arithmetic
MAX_CHUNK_COORD = 2.0**62


def chunk_coords(positions: np.ndarray, chunk_shape: np.ndarray) -> np.ndarray | None:
    """Absolute signed chunk coordinates ``floor(pos / chunk_shape)``, computed in float64;
    None when one lies beyond ``MAX_CHUNK_COORD``, where int64 arithmetic on them wraps."""
    coords = np.floor(positions.astype(np.float64, copy=False) / chunk_shape)
    return coords.astype(np.int64) if (np.abs(coords) < MAX_CHUNK_COORD).all() else None


def column_extent(positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-axis min and max (NaN or infinite when any value is); column-wise for speed."""
    lo = np.array([positions[:, d].min() for d in range(positions.shape[1])], dtype=np.float64)
    hi = np.array([positions[:, d].max() for d in range(positions.shape[1])], dtype=np.float64)
    return lo, hi


#: rows per strip of the per-column passes: their float64 temporaries stay in cache, and
#: their size, not the block's, is what those passes add to a task's memory
_STRIP_ROWS = 1 << 16


def cells_and_bins(
    positions: np.ndarray,
    chunk_shape: np.ndarray,
    origin: np.ndarray,
    grid_shape: tuple[int, ...],
    bin_shape: np.ndarray | None = None,
    bins_per_chunk: tuple[int, ...] | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """C-order linear cell index in the grid and, optionally, the bin index inside the cell.

    Chunks are ``floor(pos / chunk_shape)`` and bins ``floor(pos / bin_shape)`` in
    float64 (docs/format.md §8).  Rounding at a chunk face can put a bin one step
    outside its chunk, so local bin coordinates are clipped.  Computed column by
    column (contiguous 1-D passes are several times faster than strided 2-D ones) in
    strips of rows: a whole block's float64 temporaries would be fresh memory, which
    costs more to fault in than the arithmetic on it.
    """
    n = len(positions)
    cell = np.empty(n, dtype=np.int64)
    local = np.empty(n, dtype=np.int64) if bin_shape is not None else None
    strip = min(n, _STRIP_ROWS)
    col = np.empty(strip, dtype=np.float64)
    scratch = np.empty(strip, dtype=np.float64)
    chunk_d = np.empty(strip, dtype=np.int64)
    for lo in range(0, n, _STRIP_ROWS):
        hi = min(n, lo + _STRIP_ROWS)
        _strip_cells(positions[lo:hi], chunk_shape, origin, grid_shape, bin_shape, bins_per_chunk,
                     cell[lo:hi], None if local is None else local[lo:hi],
                     col[: hi - lo], scratch[: hi - lo], chunk_d[: hi - lo])  # fmt: skip
    return cell, local


def _strip_cells(
    positions: np.ndarray,
    chunk_shape: np.ndarray,
    origin: np.ndarray,
    grid_shape: tuple[int, ...],
    bin_shape: np.ndarray | None,
    bins_per_chunk: tuple[int, ...] | None,
    cell: np.ndarray,
    local: np.ndarray | None,
    col: np.ndarray,
    scratch: np.ndarray,
    chunk_d: np.ndarray,
) -> None:
    """:func:`cells_and_bins` of one strip, into ``cell`` / ``local`` (views of the outputs)."""
    cell[...] = 0
    if local is not None:
        local[...] = 0
    for d in range(positions.shape[1]):
        col[...] = positions[:, d]
        np.floor(np.divide(col, chunk_shape[d], out=scratch), out=scratch)
        chunk_d[...] = scratch
        cell *= grid_shape[d]
        cell += chunk_d
        cell -= origin[d]
        if local is not None:
            assert bin_shape is not None and bins_per_chunk is not None
            np.floor(np.divide(col, bin_shape[d], out=scratch), out=scratch)
            chunk_d *= bins_per_chunk[d]
            np.subtract(scratch, chunk_d, out=scratch)  # exact: small integers in float64
            np.clip(scratch, 0, bins_per_chunk[d] - 1, out=scratch)
            local *= bins_per_chunk[d]
            local += scratch.astype(np.int64)


#: a vertex may lie this far (relative to the box's largest coordinate or its size) outside
#: the box it is placed in: float32 positions near a face round across it
PLACEMENT_TOLERANCE = 1e-6


def chunk_placement_checked(level: int, coarsening_method: object, cell_rank: int, position_width: int) -> bool:
    """Whether a level's vertices must lie in the chunk their cell stands for: every kind's
    uncoarsened level -- level 0 whatever its label says (format.md §4: it is never coarsened),
    and any level labelled so (``coarsening_method`` absent, null or ``"none"``) -- whose cell
    keys have one coordinate per position axis, or one more leading it (an attribute-chunked
    level, :func:`spatial_cells`).  Every writer places a vertex in a cell by its position, and
    a bbox read prunes by cell: a vertex outside its cell's chunk reads back whole but is missed
    by a read of the box it lies in."""
    uncoarsened = level == 0 or coarsening_method in (None, "none")
    return uncoarsened and cell_rank in (position_width, position_width + 1)


def spatial_cells(cells: np.ndarray, position_width: int) -> np.ndarray:
    """The position axes of ``(m, rank)`` cell keys: an attribute-chunked level's keys lead
    with the attribute value's index (format.md §4), every other level's are all position."""
    return cells[:, cells.shape[1] - position_width :]


def placement_checked(
    point_cloud: bool, has_objects: bool, level: int, coarsening_method: object, cell_rank: int, position_width: int
) -> bool:
    """Whether a level's vertices must also lie in the bin their fragment stands for: point clouds
    without object ids, whose fragments are bins, where :func:`chunk_placement_checked` holds and
    every key axis is a position axis (the spec states it there); the validator (level 4) checks
    it exactly there."""
    chunked = chunk_placement_checked(level, coarsening_method, cell_rank, position_width)
    return point_cloud and not has_objects and chunked and cell_rank == position_width


def box_bounds(
    first: np.ndarray, size: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lo, hi, tolerance) of the half-open boxes ``[first * size, first * size + size)``."""
    lo = first * size
    hi = lo + size
    return lo, hi, PLACEMENT_TOLERANCE * np.maximum(np.maximum(np.abs(lo), np.abs(hi)), size)


def outside_box(p: np.ndarray, lo: np.ndarray, hi: np.ndarray, tol: np.ndarray) -> np.ndarray:
    """Rows of ``p`` outside their box on some axis (NaN is not outside: it is its own finding)."""
    return ((p < lo - tol) | (p >= hi + tol)).any(axis=1)


def cells_outside_chunks(
    positions: np.ndarray, counts: np.ndarray, chunks: np.ndarray, chunk_shape: np.ndarray
) -> np.ndarray:
    """Indices of the cells (``counts`` consecutive rows each, at ``chunks``) whose rows'
    extent (NaN rows aside: they are a finding of their own) leaves the cell's chunk: a
    per-cell min and max, column by column (twice as fast as over the rows), not a test per
    row."""
    used = np.flatnonzero(counts)
    if not used.size:
        return used
    starts = (np.cumsum(counts) - counts)[used]
    low = np.empty((len(used), positions.shape[1]), dtype=np.float64)
    high = np.empty_like(low)
    for d in range(positions.shape[1]):  # fmin / fmax: one NaN row must not hide the others
        column = np.ascontiguousarray(positions[:, d])
        low[:, d] = np.fmin.reduceat(column, starts)
        high[:, d] = np.fmax.reduceat(column, starts)
    lo, hi, tol = box_bounds(np.asarray(chunks, dtype=np.float64)[used], np.asarray(chunk_shape, dtype=np.float64))
    return used[((low < lo - tol) | (high >= hi + tol)).any(axis=1)]


def check_chunk_placement(
    where: str, positions: np.ndarray, counts: Sequence[int], cells: Sequence[tuple[int, ...]],
    chunk_shape: Sequence[float],
) -> None:
    """Refuse cells (``counts`` consecutive rows each, at ``cells``) whose vertices leave their
    chunk, naming the first, where :func:`chunk_placement_checked` holds: a cell swapped for
    another of as many rows would otherwise read back as another place's points (the reader and
    the pyramid's bin tasks; the validator reports the same as ``L4_POINT_OUTSIDE_BIN``)."""
    if not len(cells):
        return
    shape = np.asarray(chunk_shape, dtype=np.float64)
    spatial = spatial_cells(np.asarray(cells, dtype=np.int64), len(shape))
    bad = cells_outside_chunks(positions, np.asarray(counts, dtype=np.int64), spatial, shape)
    if bad.size:
        c = cells[int(bad[0])]
        lo = spatial[int(bad[0])].astype(np.float64) * shape
        raise InconsistentStoreError(
            f"{where} cell {format_chunk_key(c)}: vertices lie outside the cell's chunk [{lo.tolist()}, "
            f"{(lo + shape).tolist()}) ({len(bad)} such cell(s) read)"
        )


def take_rows(values: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``values[index]`` along axis 0; ``np.take`` is several times faster for multi-column rows."""
    return np.take(values, index, axis=0)


def stable_order(keys: np.ndarray, key_space: int) -> np.ndarray:
    """Stable argsort, using numpy's radix sort when the keys fit 16 bits."""
    if key_space <= 1 << 16:
        return np.argsort(keys.astype(np.uint16), kind="stable")
    return np.argsort(keys, kind="stable")


@dataclass
class CellPayloads:
    """The encoded payloads of one point-cloud chunk."""

    vertices: bytes
    fragments: bytes
    attributes: dict[str, bytes]
    n_rows: int
    # with object ids: ids present in the cell, ascending; fragment f holds ids[f]
    object_ids: np.ndarray | None = None


def encode_binned_cell(
    positions: np.ndarray, bins: np.ndarray, n_bins: int, attributes: Mapping[str, np.ndarray]
) -> CellPayloads:
    """One fragment per bin slot (every slot written; empty = zero-count range).

    The rows must already be ordered by bin (stable, so input order holds within a bin).
    """
    counts = np.bincount(bins, minlength=n_bins)
    return CellPayloads(
        vertices=positions.tobytes(),
        fragments=FragmentIndex.from_counts(counts).encode(),
        attributes={k: v.tobytes() for k, v in attributes.items()},
        n_rows=len(positions),
    )


def encode_object_cell(
    positions: np.ndarray, ids: np.ndarray, attributes: Mapping[str, np.ndarray]
) -> CellPayloads:
    """One fragment per object present, ascending id (rows already ordered by id)."""
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    counts = np.diff(np.r_[starts, len(ids)])
    return CellPayloads(
        vertices=positions.tobytes(),
        fragments=FragmentIndex.from_counts(counts).encode(),
        attributes={k: v.tobytes() for k, v in attributes.items()},
        n_rows=len(positions),
        object_ids=ids[starts],
    )
