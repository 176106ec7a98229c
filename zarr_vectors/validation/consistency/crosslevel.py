"""Level 5 — a pyramid's ``-N`` records mirror its ``+N`` records.

Between a fine level N and a coarse level N + d, ``links/+d`` at level N holds a record
``[fine vi, coarse vi]`` per fine vertex and ``links/-d`` at level N + d the same pairs
turned around (``docs/format.md`` §8.1); a reader going down the pyramid follows the one, a
reader going up the other, so where they disagree the two directions give different
answers.  The level-3 link tasks of both families digest their records as ``(fine chunk,
fine vi, coarse chunk, coarse vi)`` (:func:`mirror_rows`, ``cells.Digest``); a task per pair
of families adds and compares the digests, and only when they differ reads both families
again to name the first record without its mirror.

Where every level up to the coarse one keeps every object (``object_sparsity`` 1), each fine
vertex coarsens into exactly one metavertex, so ``links/+d`` holds exactly one record per
fine vertex (``L5_CROSS_LEVEL_COVERAGE``): the fine level's vertex tasks digest each cell's
rows and the family's link tasks the fine ends of its records (``cells.cell_rows``), and a
task per pair compares them -- row by row only when they differ.

A metavertex is the centroid of the vertices in its bin, and the ``+1`` records naming it come
from exactly those vertices wherever every fine vertex has its record (``L5_CROSS_LEVEL_CENTROID``):
the ``+1`` family's link tasks sum, per metavertex, the fine vertices their records name
(:func:`centroid_sums`), and a task per family adds the sums and compares each metavertex with
the mean of its vertices (:func:`centroid_findings`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import numpy as np

from zarr_vectors.errors import MetadataError, ResourceLimitError, ZarrVectorsError
from zarr_vectors.format.paths import format_chunk_key, format_delta, parse_delta
from zarr_vectors.format.points import PLACEMENT_TOLERANCE, box_bounds, outside_box
from zarr_vectors.store.backend import Storage
from zarr_vectors.store.grid import GridArray
from zarr_vectors.store.groups import open_level
from zarr_vectors.validation.consistency.cells import (
    ArraySpec,
    Chunk,
    Digest,
    batches,
    digest_sum,
    multiset_difference,
    prefetch,
    stored_pairs,
    vertex_rows,
)
from zarr_vectors.validation.findings import Finding, crashed, make
from zarr_vectors.validation.manifests import shared_fragments
from zarr_vectors.validation.metadata import family_policy, level_bin_shape, vertices_dtype
from zarr_vectors.validation.structure import StoreModel

T = TypeVar("T")
#: one cross-level link cell's records for L5_CROSS_LEVEL_CENTROID: (coarse chunk, coarse rows, fine
#: chunk, fine rows); rows None where the cell is absent or does not decode (level 3's finding)
Centred = tuple[Chunk, np.ndarray | None, Chunk, np.ndarray | None]


class MirroredRecords(Protocol):
    """A level-3 link task's result: the digest of its cross-level records."""

    mirror: Digest


class CoveredRecords(Protocol):
    """A level-3 link task's result: the digest of its records' fine ends."""

    cover: Digest


class CoveredRows(Protocol):
    """A level's merged vertex table: rows per chunk, and the digests of every (cell, row) and
    of every (cell, row, the coarse bin of its vertex)."""

    rows: dict[tuple[int, ...], int]
    cover: Digest
    cover_bins: Digest


def mirror_rows(rows: np.ndarray, delta: int) -> np.ndarray:
    """Width-2 records ``(chunk_0, vi_0, chunk_1, vi_1)`` as ``(fine chunk, fine vi, coarse chunk,
    coarse vi)``: a ``-d`` record turned around, a ``+d`` one as stored."""
    half = rows.shape[1] // 2
    return rows if delta > 0 else np.concatenate([rows[:, half:], rows[:, :half]], axis=1)


def mirror_findings(storage: Storage, fine: int, delta: int, up_parts: int, *parts: MirroredRecords) -> list[Finding]:
    """``L5_CROSS_LEVEL_MIRROR`` for ``links/+delta`` at level ``fine`` and ``links/-delta`` at
    level ``fine + delta``, from their link tasks' digests (the first ``up_parts`` parts are +delta's)."""
    if digest_sum(p.mirror for p in parts[:up_parts]) == digest_sum(p.mirror for p in parts[up_parts:]):
        return []
    where = f"{fine + delta}/links/{format_delta(-delta)}"
    against = f"links/{format_delta(delta)} at level {fine}"
    both = _read_again("L5_CROSS_LEVEL_MIRROR", where, "do not mirror", against,
                       lambda: (_rows(storage, fine, delta), _rows(storage, fine + delta, -delta)))
    if isinstance(both, list):
        return both
    ups, downs = both
    missing, extra = multiset_difference(ups, downs), multiset_difference(downs, ups)
    if not (len(missing) or len(extra)):
        return []  # the digests missed a cell a level-3 task could not decode: that task's finding says so
    example = (missing if len(missing) else extra)[0].tolist()
    d = (len(example) - 2) // 2
    first = (f"fine {format_chunk_key(example[:d])} row {example[d]} <-> coarse "
             f"{format_chunk_key(example[d + 1 : -1])} row {example[-1]}")
    return [make("L5_CROSS_LEVEL_MIRROR", where, f"{len(missing)} records of links/{format_delta(delta)} at level "
                 f"{fine} have no mirror here and {len(extra)} here have none there (first: {first}, "
                 f"{'there' if len(missing) else 'here'}): going down and going up the pyramid disagree")]


def _read_again(rule: str, where: str, differ: str, against: str, read: Callable[[], T]) -> T | list[Finding]:
    """What ``read`` gives -- the records read again to name what the digests found different --
    or, if they cannot be read, the rule's finding that says why (never a silent pass)."""
    try:
        return read()
    except ResourceLimitError as exc:
        return [make(rule, where, f"the records {differ} {against} (their digests differ); too large to name "
                     f"them: {exc}")]
    except ZarrVectorsError as exc:  # a part level 3 reports too
        return [make(rule, where, f"could not be compared with {against}: {exc}")]
    except Exception as exc:  # noqa: BLE001
        return [crashed(5, where, exc, what=rule)]


def _rows(storage: Storage, number: int, delta: int) -> np.ndarray:
    return mirror_rows(stored_pairs(open_level(storage, number), delta), delta)


def coverage_pairs(model: StoreModel) -> list[tuple[int, int]]:
    """The ``(fine level, d)`` pairs ``L5_CROSS_LEVEL_COVERAGE`` compares: a width-2 ``+d`` family
    whose coarse level exists, every level up to it keeping every object (``object_sparsity``
    1: where objects are dropped, their vertices have no record, and which those are only the
    manifests say)."""
    out = []
    for number, lpath in sorted(model.levels.items()):
        links = f"{lpath}/links"
        for node in model.children(links) if links in model.nodes else []:
            try:
                delta = parse_delta(node.name)
            except ValueError:
                continue
            policy = family_policy(model, number, delta) if delta > 0 else None
            coarser = range(number + 1, number + delta + 1)
            if (policy is not None and policy["link_width"] == 2 and all(m in model.levels for m in coarser)
                    and all(model.level_attrs(m).get("object_sparsity", 1.0) == 1 for m in coarser)):
                out.append((number, delta))
    return out


def coarse_bins(model: StoreModel, fine: int, delta: int) -> tuple[float, ...] | None:
    """The coarse level's bin shape where ``L5_CROSS_LEVEL_BIN`` rides on the coverage of
    ``links/+delta`` at level ``fine``: only ``delta`` 1 (bins of non-integer factors do not nest, so
    a ``+2`` metavertex need not share its vertex's bin), finite and positive, one per axis; else
    None (a bad bin is level 2's)."""
    bins = level_bin_shape(model, fine + 1) if delta == 1 and fine + 1 in model.levels else None
    if bins is None or len(bins) != model.sid_ndim or not all(math.isfinite(b) and b > 0 for b in bins):
        return None
    return bins


@dataclass(frozen=True)
class CentroidSpec:
    """What ``L5_CROSS_LEVEL_CENTROID`` needs of a ``links/+1`` family: the coarse level, both levels' vertices, the
    width of a position (the store's D, not a chunk key's rank: attribute-chunked levels key cells
    by D + 1 coordinates), the largest side of a coarse bin (0 if unknown: a metavertex's vertices
    lie within it, so it bounds their coordinates beside the mean's), and the most bytes the one
    comparing task may hold (``zarr_vectors.validate.max-batch-bytes``, read while planning)."""

    level: int
    fine: ArraySpec
    coarse: ArraySpec
    ndim: int
    bin_side: float
    max_bytes: int


@dataclass
class CentroidSums:
    """A link task's share of ``L5_CROSS_LEVEL_CENTROID``: for each metavertex its records name, as
    (coarse cell, row), how many of its vertices they name and their float64 sums; and the coarse
    cells some of whose records it could not read (level 3's findings: their metavertices are left
    out)."""

    cells: np.ndarray  # (m, rank) int64
    rows: np.ndarray  # (m,) int64
    counts: np.ndarray  # (m,) int64
    sums: np.ndarray  # (m, D) float64
    spoiled: set[Chunk]


def centroid_checked(model: StoreModel, fine: int, covered: Collection[tuple[int, int]]) -> bool:
    """Whether ``L5_CROSS_LEVEL_CENTROID`` may compare level ``fine + 1``'s metavertices with the mean
    of the vertices whose ``links/+1`` records name them: ``links/+1`` at ``fine`` is one of
    ``covered`` (:func:`coverage_pairs`: every fine vertex has its record) and no fragment of the
    fine level may be shared between objects (where objects share a metavertex, the reference
    counts it once per object naming it when it coarsens again: docs/format.md §8.1; a level
    without an object index is one implicit object, whatever ``shared_fragments`` says)."""
    objects = f"{model.levels[fine]}/object_index" in model.nodes
    return (fine, 1) in covered and not (objects and shared_fragments(model, fine))


def centroid_sums(storage: Storage, spec: CentroidSpec, parts: Sequence[Centred],
                  coarse_rows: dict[Chunk, int]) -> CentroidSums:
    """A link task's :class:`CentroidSums` from its link cells' records (one :data:`Centred` per cell),
    reading the fine vertex cells they start in -- its own cells, so each is read once.
    ``coarse_rows``: the coarse level's rows per cell (its vertex table), to tell a record out of
    range (level 3's) from one naming a metavertex."""
    ndim, dtype = spec.ndim, vertices_dtype(spec.fine.attrs)
    spoiled: set[Chunk] = set()
    fine_chunks = sorted({f for _, rows, f, _ in parts if rows is not None})
    members = prefetch(storage, [(spec.fine, fine_chunks)], [])[0] if dtype is not None else {}  # bad cells: L3's
    cells = {c: vertex_rows(members.get(c), dtype, ndim) for c in fine_chunks} if dtype is not None else {}
    offsets: dict[Chunk, int] = {}  # each coarse cell named: where its rows start in a dense key space
    end = 0
    at: list[np.ndarray] = []
    points: list[np.ndarray] = []
    for coarse, c_rows, fine, f_rows in parts:
        vertex = cells.get(fine)
        if (c_rows is None or f_rows is None or vertex is None
                or not ((c_rows >= 0) & (c_rows < coarse_rows.get(coarse, 0))).all()
                or not ((f_rows >= 0) & (f_rows < len(vertex))).all()):
            spoiled.add(coarse)  # which of its metavertices a bad record was for is unknown: the cell's
            continue
        if coarse not in offsets:
            offsets[coarse], end = end, end + coarse_rows[coarse]
        at.append(offsets[coarse] + c_rows.astype(np.int64, copy=False))
        points.append(vertex[f_rows])  # the stored dtype: bincount sums each column in float64
    named = list(offsets)
    sizes = np.asarray([coarse_rows[c] for c in named], dtype=np.int64)
    if not named:
        return CentroidSums(np.zeros((0, 0), np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64),
                            np.zeros((0, ndim)), spoiled)
    index, members_at = np.concatenate(at), np.concatenate(points)
    total = int(sizes.sum())
    counts = np.bincount(index, minlength=total)
    used = np.flatnonzero(counts)
    sums = np.column_stack([np.bincount(index, weights=members_at[:, k], minlength=total)[used] for k in range(ndim)])
    cell = np.repeat(np.arange(len(named)), sizes)[used]
    rows = used - (np.cumsum(sizes) - sizes)[cell]
    return CentroidSums(np.asarray(named, dtype=np.int64)[cell], rows, counts[used], sums, spoiled)


def centroid_findings(storage: Storage, where: str, spec: CentroidSpec, table: CoveredRows,
                      *parts: CentroidSums | None) -> list[Finding]:
    """``L5_CROSS_LEVEL_CENTROID`` for a family, from its link tasks' :class:`CentroidSums` and the
    coarse level's vertex ``table``: each metavertex is named by a record and lies at the float64
    mean of the vertices whose records name it, within the placement tolerance of the largest of
    its coordinates, its mean's and its bin's side.  The coarse cells are read and compared in runs
    of about ``max_bytes``; the sums, held whole, may take four times that, else the level is left
    out with a warning."""
    shares = [p for p in parts if p is not None and len(p.rows)]
    spoiled = set().union(*(p.spoiled for p in parts if p is not None))
    ndim, rank = spec.ndim, len(next(iter(table.rows), ()))
    if any(len(c) != rank for c in spoiled) or any(p.cells.shape[1] != rank for p in shares):
        return []  # the families' chunk keys disagree with the level's: level 3 reports it
    cells = sorted(c for c, n in table.rows.items() if n > 0 and c not in spoiled)
    dtype = vertices_dtype(spec.coarse.attrs)
    if not cells or dtype is None:
        return []  # a bad dtype is level 2's
    share_rows = sum(len(p.rows) for p in shares)
    if share_rows * (ndim * 8 + 40) > 4 * spec.max_bytes:
        return [make("L5_CROSS_LEVEL_CENTROID", where, f"level {spec.level}'s metavertices not compared with their "
                     f"vertices: their {share_rows} partial sums would need more than four times "
                     f"{spec.max_bytes} bytes in one task (zarr_vectors.validate.max-batch-bytes)", severity="warning")]
    # every share row as (cell index into ``cells``, row), ordered by cell: each run takes a slice
    known = _cell_ids(np.asarray(cells, dtype=np.int64).reshape(len(cells), rank))
    order = np.argsort(known)
    ids = np.concatenate([_cell_ids(p.cells) for p in shares] or [known[:0]])
    slot = np.minimum(np.searchsorted(known[order], ids), len(order) - 1)
    cell = order[slot]
    ok = known[cell] == ids  # a spoiled cell's rows (another task's share) are left out with it
    by_cell = np.argsort(cell[ok], kind="stable")
    cell = cell[ok][by_cell]
    rows = np.concatenate([p.rows for p in shares] or [np.zeros(0, np.int64)])[ok][by_cell]
    counts = np.concatenate([p.counts for p in shares] or [np.zeros(0, np.int64)])[ok][by_cell]
    sums = np.concatenate([p.sums for p in shares] or [np.zeros((0, ndim))])[ok][by_cell]
    bounds = np.searchsorted(cell, np.arange(len(cells) + 1))
    per_row = ndim * 8 * 4 + 32  # a metavertex's positions, sums, mean, count and flags, float64
    found = {"lonely": [0, ""], "off": [0, ""]}
    for run in batches([(k, table.rows[c] * per_row) for k, c in enumerate(cells)], spec.max_bytes):
        raws = prefetch(storage, [(spec.coarse, [cells[k] for k in run])], [])[0]
        for k in run:
            stored = vertex_rows(raws.get(cells[k]), dtype, ndim)
            if stored is None:
                continue  # level 3's
            lo, hi = bounds[k], bounds[k + 1]
            total = np.bincount(rows[lo:hi], weights=counts[lo:hi], minlength=len(stored))
            summed = np.column_stack([np.bincount(rows[lo:hi], weights=sums[lo:hi, d], minlength=len(stored))
                                      for d in range(ndim)])
            _compare_cell(cells[k], stored.astype(np.float64), total, summed, spec.bin_side, found)
    out = []
    if found["lonely"][0]:
        alone = _count(found["lonely"][0], "metavertex is", "metavertices are")
        out.append(make("L5_CROSS_LEVEL_CENTROID", where, f"{alone} named by no record (first: {found['lonely'][1]}): "
                        "a metavertex stands for the vertices of an occupied bin"))
    if found["off"][0]:
        away = _count(found["off"][0], "metavertex lies", "metavertices lie")
        out.append(make("L5_CROSS_LEVEL_CENTROID", where, f"{away} away from the mean of the vertices their records "
                        f"name (first: {found['off'][1]}): a metavertex is the centroid of the vertices in its bin"))
    return out


def _compare_cell(cell: Chunk, stored: np.ndarray, counts: np.ndarray, sums: np.ndarray, bin_side: float,
                  found: dict[str, list]) -> None:
    """One coarse cell's metavertices against their vertices' means, counted into ``found``
    (``lonely``: named by no record; ``off``: away from their mean), each with its first example."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        means = sums / counts[:, None]
        scale = np.maximum(np.abs(np.concatenate([stored, means], axis=1)).max(axis=1, initial=0.0), bin_side)
        apart = (np.abs(means - stored) > (PLACEMENT_TOLERANCE * scale)[:, None]).any(axis=1)
        lost = ~np.isfinite(stored).all(axis=1)  # a mean of finite vertices is finite: the stored one too
        named = (counts > 0) & np.isfinite(means).all(axis=1)
    lonely, off = counts == 0, named & (apart | lost)
    where = f"chunk {format_chunk_key(cell)} row"
    if lonely.any():
        if not found["lonely"][0]:
            found["lonely"][1] = f"{where} {int(np.argmax(lonely))}"
        found["lonely"][0] += int(lonely.sum())
    if off.any():
        i = int(np.argmax(off))
        if not found["off"][0]:
            found["off"][1] = (f"{where} {i} at {stored[i].tolist()}, the mean of its {int(counts[i])} at "
                               f"{means[i].tolist()}")
        found["off"][0] += int(off.sum())


def coverage_findings(storage: Storage, fine: int, delta: int, bin_shape: tuple[float, ...] | None,
                      table: CoveredRows, *parts: CoveredRecords) -> list[Finding]:
    """``L5_CROSS_LEVEL_COVERAGE`` for ``links/+delta`` at level ``fine``, from the level's vertex
    table and the family's link tasks' digests; with ``bin_shape`` (``links/+1``, :func:`coarse_bins`)
    the digests hold each vertex's coarse bin too, for ``L5_CROSS_LEVEL_BIN``."""
    if (table.cover if bin_shape is None else table.cover_bins) == digest_sum(p.cover for p in parts):
        return []
    where = f"{fine}/links/{format_delta(delta)}"
    records = _read_again("L5_CROSS_LEVEL_COVERAGE", where, "do not name each vertex once", f"the vertices of level "
                          f"{fine}", lambda: stored_pairs(open_level(storage, fine), delta))
    if isinstance(records, list):
        return records
    found = _coverage(fine, delta, table, records, where)
    if bin_shape is None:
        return found
    return found + _bin_findings(storage, fine, bin_shape, table, records, where)


def _coverage(fine: int, delta: int, table: CoveredRows, records: np.ndarray, where: str) -> list[Finding]:
    """The coverage finding from the records read again (none: the digests differed on what
    level 3 reports, or on the bins)."""
    cells = sorted(table.rows)
    d = len(cells[0]) if cells else (records.shape[1] - 2) // 2
    expected = np.concatenate([np.zeros((0, d + 1), np.int64)] + [
        np.column_stack([np.tile(np.asarray(c, np.int64), (n, 1)), np.arange(n)]) for c in cells if (n := table.rows[c])
    ])
    ends = records[:, : d + 1] if records.size else np.zeros((0, d + 1), np.int64)
    known = np.isin(_cell_ids(ends[:, :d]), _cell_ids(np.asarray(cells, np.int64).reshape(-1, d)))
    ends = ends[known]  # a record in a cell of unknown rows is level 3's (undecodable, or no vertices there)
    in_range = (ends[:, d] >= 0) & (ends[:, d] < _sizes(table.rows, ends[:, :d]))
    reported = _cell_ids(ends[~in_range, :d])  # level 3 names these records: the vertex each was for is unknown
    ends = ends[in_range]
    missing, again = multiset_difference(expected, ends), multiset_difference(ends, expected)
    missing = missing[~np.isin(_cell_ids(missing[:, :d]), reported)]
    if not (len(missing) or len(again)):
        return []  # the digests differed on what level 3 reports (or on the bins: _bin_findings)
    example = (missing if len(missing) else again)[0].tolist()
    first = f"chunk {format_chunk_key(example[:d])} row {example[d]}"
    what = [f"{_count(len(missing), 'vertex', 'vertices')} of level {fine} with no record here"] if len(missing) else []
    twice = len(np.unique(again, axis=0))
    what += [f"{_count(twice, 'vertex', 'vertices')} named by more than one"] if twice else []
    return [make("L5_CROSS_LEVEL_COVERAGE", where, f"{' and '.join(what)} (first: {first}): every level up to "
                 f"{fine + delta} keeps every object, so each vertex coarsens into one metavertex")]


def _bin_findings(storage: Storage, fine: int, bin_shape: tuple[float, ...], table: CoveredRows,
                  records: np.ndarray, where: str) -> list[Finding]:
    """``L5_CROSS_LEVEL_BIN``: each ``+1`` record's metavertex lies in the coarse bin of its fine
    vertex (a metavertex is the centroid of the vertices in its bin), within the placement
    tolerance.  Records level 3 reports (a row out of range, a cell that does not decode) are left
    to it."""
    d = (records.shape[1] - 2) // 2 if records.size else 0
    if not d:
        return []
    fine_ends, coarse_ends = records[:, : d + 1], records[:, d + 1 :]
    known = [tuple(c) for c in table.rows]
    keep = np.isin(_cell_ids(fine_ends[:, :d]), _cell_ids(np.asarray(known, np.int64).reshape(-1, d)))
    fine_ends, coarse_ends = fine_ends[keep], coarse_ends[keep]
    both = _read_again("L5_CROSS_LEVEL_BIN", where, "name metavertices of other bins", f"the vertices of levels "
                       f"{fine} and {fine + 1}", lambda: (_positions(storage, fine, fine_ends),
                                                          _positions(storage, fine + 1, coarse_ends)))
    if isinstance(both, list):
        return both
    (vertex, v_ok), (meta, m_ok) = both  # a cell that does not decode: level 3 names it
    ok = v_ok & m_ok & np.isfinite(vertex).all(axis=1) & np.isfinite(meta).all(axis=1)
    bs = np.asarray(bin_shape, dtype=np.float64)
    lo, hi, tol = box_bounds(np.floor(vertex[ok] / bs), bs)
    outside = outside_box(meta[ok], lo, hi, tol)
    if not outside.any():
        return []  # the digests differed on what level 3 reports, or on a face within the tolerance
    i = int(np.argmax(outside))
    rows = np.flatnonzero(ok)
    v, m = fine_ends[rows[i]].tolist(), coarse_ends[rows[i]].tolist()
    first = (f"chunk {format_chunk_key(v[:d])} row {v[d]} at {vertex[ok][i].tolist()}, in the bin from "
             f"{lo[i].tolist()} to {hi[i].tolist()}, names chunk {format_chunk_key(m[:d])} row {m[d]} at "
             f"{meta[ok][i].tolist()}")
    return [make("L5_CROSS_LEVEL_BIN", where, f"{_count(int(outside.sum()), 'record names', 'records name')} a "
                 f"metavertex outside its vertex's bin of level {fine + 1} (first: {first}): a metavertex is the "
                 "centroid of the vertices in its bin")]


def _positions(storage: Storage, number: int, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The positions of level ``number``'s vertices at ``ends`` (rows ``(chunk..., row)``), float64,
    and which of them exist (a row out of its cell's range does not: level 3 names it)."""
    d = ends.shape[1] - 1
    grid = open_level(storage, number).array("vertices")
    dtype = vertices_dtype(grid.attributes)
    if dtype is None:
        raise MetadataError(f"{grid.path}: its rows' dtype is not one the format allows")
    out = np.full((len(ends), d), np.nan)
    found = np.zeros(len(ends), dtype=bool)
    chunks, inverse = np.unique(ends[:, :d], axis=0, return_inverse=True)
    order = np.argsort(inverse.ravel(), kind="stable")
    starts = np.searchsorted(inverse.ravel()[order], np.arange(len(chunks) + 1))
    present = set(grid.nonempty_chunk_coords())  # another chunk has no vertices: level 3's finding
    wanted = [k for k, c in enumerate(map(tuple, chunks.tolist())) if c in present]
    raws = _decoded_cells(grid, [tuple(chunks[k].tolist()) for k in wanted])
    for k, raw in zip(wanted, raws):
        cell = vertex_rows(raw, dtype, d)
        if cell is None:
            continue  # level 3's finding
        at = order[starts[k] : starts[k + 1]]
        rows = ends[at, d]
        good = (rows >= 0) & (rows < len(cell))
        out[at[good]] = cell[rows[good]]
        found[at[good]] = True
    return out, found


def _decoded_cells(grid: GridArray, chunks: list[tuple[int, ...]]) -> list[bytes | None]:
    """The cells' payloads, read together; None for a cell that does not decode (level 3 names
    it), found by reading one by one only when the batch fails."""
    try:
        return list(grid.read_cells(chunks))
    except ResourceLimitError:
        raise
    except ZarrVectorsError:
        out: list[bytes | None] = []
        for c in chunks:
            try:
                out.append(grid.read_cell(c))
            except ResourceLimitError:
                raise
            except ZarrVectorsError:
                out.append(None)
        return out


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _cell_ids(chunks: np.ndarray) -> np.ndarray:
    """One opaque item per chunk row, for membership tests (equal chunks, equal items)."""
    return np.ascontiguousarray(chunks, dtype=np.int64).view(np.dtype((np.void, 8 * chunks.shape[1]))).ravel()


def _sizes(rows: dict[tuple[int, ...], int], chunks: np.ndarray) -> np.ndarray:
    """The row count of each row's chunk (every chunk is in ``rows``)."""
    unique, inverse = np.unique(chunks, axis=0, return_inverse=True)
    return np.asarray([rows[tuple(c)] for c in unique.tolist()], dtype=np.int64)[inverse.ravel()]
