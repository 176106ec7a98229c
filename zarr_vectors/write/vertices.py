"""The vertex stage every writer shares, as Dask graph pieces.

scan (checks, extents, cells counted) -> plan (client side, before anything is written), then
route (per input block) -> owner writes (per group of whole cells) -> the vertex
half of reconcile.  How a cell's rows are grouped into fragments is the only thing
that differs between geometry kinds:

* ``bins``    -- point clouds without ids: one fragment per bin slot (docs/format.md §8);
* ``objects`` -- one fragment per object present, ascending id, input order within;
* ``runs``    -- polylines: input order; a fragment is a maximal run of consecutive
  input rows of one object inside one chunk; manifests list runs in traversal order.

Owners can also report where every input vertex landed (``placement``: cell rank and
chunk-local row per global input index), which link writers need to turn vertex
indices into ``(chunk, vi)`` endpoints.
"""

from __future__ import annotations

import math
import posixpath
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

import dask
import numpy as np

from zarr_vectors import config, reconcile
from zarr_vectors.encoding import FragmentIndex
from zarr_vectors.errors import InputError
from zarr_vectors.execution import runner
from zarr_vectors.execution.runner import current_client, task_runs
from zarr_vectors.format.objects import absence_fill, object_attribute_attributes
from zarr_vectors.format.paths import check_new_name, format_chunk_key
from zarr_vectors.format.points import cells_and_bins, chunk_coords, column_extent, stable_order, take_rows
from zarr_vectors.format.schema import attribute_dtype_problem
from zarr_vectors.reconcile import confirm_presence
from zarr_vectors.store.codecs import compressor_config
from zarr_vectors.store.grid import MAX_CELL_BYTES, GridArray, write_cells_many
from zarr_vectors.store.groups import Level
from zarr_vectors.store.nodes import group_document, write_nodes
from zarr_vectors.write.arguments import (
    as_declared,
    attribute_column,
    check_positions,
    input_array,
    is_dask_array,
    mapping_argument,
    shape_tuple,
)

FragmentMode = Literal["bins", "objects", "runs"]

MAX_BINS_PER_CHUNK = 1 << 20
MAX_OBJECT_ID = (1 << 26) - 1
DENSE_GRID_LIMIT = 1 << 22  # grids up to this many cells are counted with bincount / a lookup table


def index_dtype(n: int) -> type[np.integer]:
    """int32 for indices below ``n`` when they fit: input-sized index arrays are fresh
    pages, and on a cold process faulting them in costs more than filling them."""
    return np.int32 if n <= np.iinfo(np.int32).max else np.int64


# ---------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class VertexSpec:
    """Everything about a vertex write that is known before reading the data."""

    n: int
    ndim: int
    dtype: np.dtype
    chunk_shape: tuple[float, ...]
    bin_shape: tuple[float, ...] | None
    bins_per_chunk: tuple[int, ...]
    declared_bounds: tuple[tuple[float, ...], tuple[float, ...]] | None
    attributes: dict[str, tuple[np.dtype, tuple[int, ...]]]
    mode: FragmentMode
    compressor: dict[str, Any] | None

    @property
    def has_objects(self) -> bool:
        return self.mode != "bins"

    @property
    def n_bins(self) -> int:
        return math.prod(self.bins_per_chunk)

    def row_bytes(self) -> int:
        return max(
            [self.ndim * self.dtype.itemsize] + [dt.itemsize * math.prod(rs) for dt, rs in self.attributes.values()]
        )


@dataclass(frozen=True)
class InputBlocks:
    """The input split into row blocks, each a Dask-graph reference (delayed or future).

    Numpy inputs are published once -- scattered to the workers under a
    distributed client, named delayed objects otherwise -- so the several passes
    over the data never re-embed it in a graph.
    """

    offsets: list[int]
    pos: list[Any]
    ids: list[Any]
    attrs: list[dict[str, Any]]
    breaks: list[Any]  # per block: bool per row (a fragment starts there) or None

    def __len__(self) -> int:
        return len(self.pos)


def publish_blocks(x: Any, bounds: Sequence[int]) -> list[Any]:
    """Row blocks of one input column as graph references."""
    if is_dask_array(x):
        chunks = (tuple(np.diff(bounds).tolist()),) + tuple((s,) for s in x.shape[1:])
        return list(x.rechunk(chunks).to_delayed().ravel())
    parts = [x[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:])]
    if current_client() is not None:
        return runner.share(parts)  # scattered: one future per part
    token = uuid.uuid4().hex
    return [dask.delayed(part, name=f"zv-input-{token}-{i}") for i, part in enumerate(parts)]


def block_bounds(lengths: Sequence[int]) -> list[int]:
    """Row bounds of the scan and route blocks: each input partition (of ``lengths``) cut into
    near-equal blocks, about one per worker thread the graph is planned for.  A block holds
    at most ``write.block-rows`` rows (the hard limit, before the minimum) and, when its
    partition has that many, about ``write.min-block-rows`` at least.  Blocks follow the
    plan, not the input's partitions: a 32-thread cluster routing a 10M-point Parquet file
    of 1M-row row groups would otherwise leave 22 threads idle while 10 route."""
    largest, smallest = int(config.get("write.block-rows")), int(config.get("write.min-block-rows"))
    size = runner.task_size(sum(lengths), smallest, largest, tasks_per_thread=1)
    bounds = [0]
    for length in (int(v) for v in lengths):
        # nearest to the planned size, never below the minimum, never above the limit
        pieces = max(1, min(round(length / size), length // max(1, smallest)), -(-length // largest))
        bounds += (bounds[-1] + np.linspace(0, length, pieces + 1).round().astype(np.int64)[1:]).tolist()
    return bounds


def grid_shapes(
    chunk_shape: Sequence[float] | float, bin_shape: Sequence[float] | float | None, ndim: int
) -> tuple[tuple[float, ...], tuple[float, ...] | None, tuple[int, ...]]:
    """(chunk shape, bin shape, bins per chunk) for ``ndim`` axes, or InputError: a wrong
    number of entries, a bin shape that does not divide the chunk, too many bins per chunk.
    Needs no data, so ``zv build`` checks it before any cluster starts."""
    cs = shape_tuple(chunk_shape, ndim, "chunk_shape")
    bs = shape_tuple(bin_shape, ndim, "bin_shape") if bin_shape is not None else None
    if bs is not None:
        ratios = [c / b for c, b in zip(cs, bs)]
        if not all(abs(r - round(r)) <= 1e-9 * max(1.0, r) and round(r) >= 1 for r in ratios):
            raise InputError(f"bin_shape {list(bs)} does not divide chunk_shape {list(cs)} (ratios {ratios})")
        bpc = tuple(int(round(r)) for r in ratios)
    else:
        bpc = (1,) * ndim
    if math.prod(bpc) > MAX_BINS_PER_CHUNK:
        raise InputError(f"{math.prod(bpc)} bins per chunk exceeds {MAX_BINS_PER_CHUNK}: use a larger bin_shape")
    return cs, bs, bpc


def _signed_ids(ids: np.ndarray, block_info: dict[Any, Any] | None = None) -> np.ndarray:
    """uint64 object ids (a dask block of them) as int64, each within the format's limit."""
    if ids.size and ids.max() > MAX_OBJECT_ID:
        bad = int(np.argmax(ids > MAX_OBJECT_ID))
        row = bad + (block_info[None]["array-location"][0][0] if block_info else 0)
        raise InputError(f"object id {ids[bad]} at row {row} exceeds the format's limit of {MAX_OBJECT_ID}")
    return ids.astype(np.int64)


def normalise_vertex_inputs(
    positions: Any,
    *,
    chunk_shape: Sequence[float] | float,
    bin_shape: Sequence[float] | float | None,
    bounds: Any,
    object_ids: Any,
    attributes: Mapping[str, Any] | None,
    compressor: Any,
    mode: FragmentMode | None = None,
    breaks: np.ndarray | None = None,
) -> tuple[VertexSpec, InputBlocks]:
    """Check every argument that can be checked without reading the data.

    ``mode`` defaults to ``objects`` when ids are given, else ``bins``; writers of
    kinds whose vertices always belong to objects pass ``objects`` or ``runs`` and,
    without ids, every vertex belongs to object 0.  ``breaks`` (bool per vertex)
    forces a new fragment to start at the flagged rows (skeleton roots).
    """
    pos = check_positions(positions)
    n, ndim = int(pos.shape[0]), int(pos.shape[1])
    cs, bs, bpc = grid_shapes(chunk_shape, bin_shape, ndim)
    declared = None
    if bounds is not None:
        b = input_array(bounds, "bounds", np.float64)
        if b.shape != (2, ndim) or not np.isfinite(b).all() or (b[0] > b[1]).any():
            raise InputError(f"bounds must be [min[{ndim}], max[{ndim}]] with min <= max, found {bounds!r}")
        declared = (tuple(b[0].tolist()), tuple(b[1].tolist()))
    if is_dask_array(pos):
        pos = pos.rechunk({1: -1})
        rows = block_bounds(pos.chunks[0])
    else:
        rows = block_bounds((n,))

    mode = mode or ("objects" if object_ids is not None else "bins")
    if mode not in get_args(FragmentMode):
        raise InputError(f"fragment_mode must be one of {', '.join(get_args(FragmentMode))}, found {mode!r}")
    if mode == "bins" and object_ids is not None:
        raise InputError("fragment_mode 'bins' keeps no object ids: leave it unset, or pass 'objects' or 'runs'")
    ids_in: Any = None
    if object_ids is not None:
        ids_in = input_array(object_ids, "object_ids")
        if ids_in.ndim != 1 or ids_in.shape[0] != n:
            raise InputError(f"object_ids must have shape ({n},), found {tuple(ids_in.shape)}")
        if ids_in.dtype.kind not in "iu":
            raise InputError(f"object_ids dtype {ids_in.dtype} is unsupported: pass integers")
        if is_dask_array(ids_in):
            ids_in = ids_in.map_blocks(as_declared, what="object_ids", dtype=ids_in.dtype)
        if ids_in.dtype == np.uint64:  # checked before the cast, which wraps 2**64 - 1 to -1
            ids_in = ids_in.map_blocks(_signed_ids, dtype=np.int64) if is_dask_array(ids_in) else _signed_ids(ids_in)
        ids_in = ids_in.astype(np.int64, copy=False)  # int64 ids are used as given: only read
    elif mode != "bins":
        ids_in = np.zeros(n, dtype=np.int64)

    attrs_spec: dict[str, tuple[np.dtype, tuple[int, ...]]] = {}
    attrs_in: dict[str, Any] = {}
    for name, value in mapping_argument(attributes, "attributes").items():
        arr = attribute_column(value, name, n, "attribute")
        dtype = arr.dtype.newbyteorder("<") if arr.dtype.byteorder == ">" else arr.dtype
        attrs_spec[name] = (np.dtype(dtype), tuple(arr.shape[1:]))
        attrs_in[name] = arr.astype(dtype)
        if is_dask_array(arr):
            attrs_in[name] = attrs_in[name].map_blocks(as_declared, what=f"attribute {name!r}", dtype=dtype)

    spec = VertexSpec(
        n=n,
        ndim=ndim,
        dtype=np.dtype(pos.dtype),
        chunk_shape=cs,
        bin_shape=bs,
        bins_per_chunk=bpc,
        declared_bounds=declared,
        attributes=attrs_spec,
        mode=mode,
        compressor=compressor_config(compressor),
    )
    attr_blocks = {name: publish_blocks(arr, rows) for name, arr in attrs_in.items()}
    pos_blocks = publish_blocks(pos, rows)
    blocks = InputBlocks(
        offsets=rows[:-1],
        pos=pos_blocks,
        ids=publish_blocks(ids_in, rows) if ids_in is not None else [None] * len(pos_blocks),
        attrs=[{name: b[i] for name, b in attr_blocks.items()} for i in range(len(pos_blocks))],
        breaks=publish_blocks(np.asarray(breaks, bool), rows) if breaks is not None else [None] * len(pos_blocks),
    )
    return spec, blocks


# ---------------------------------------------------------------------------
# scan and plan
# ---------------------------------------------------------------------------
def _scan_block(
    pos: np.ndarray, ids: np.ndarray | None, offset: int, rows: int, lo_b: Any, hi_b: Any, cs: np.ndarray,
    dtype: np.dtype,
) -> dict[str, Any]:
    """A block's checks, extent and occupied cells, in one pass over its rows.

    The cells are absolute chunk coordinates (``cells``, with their row ``counts``), counted
    on the block's own grid: the store's grid depends on every block's extent, and waiting
    for it would read the input a second time.
    """
    out: dict[str, Any] = {"n": len(pos)}
    if pos.dtype != dtype or pos.shape != (rows, len(cs)):  # a dask array's block, not as declared
        out["block"] = (offset, str(pos.dtype), tuple(pos.shape))
        return out
    if len(pos):
        lo, hi = column_extent(pos)
        if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
            out["nonfinite"] = offset + int(np.argmax(~np.isfinite(pos).all(axis=1)))
            return out
        out["lo"], out["hi"] = lo, hi
        if lo_b is not None and ((lo < lo_b).any() or (hi > hi_b).any()):
            out["outside"] = offset + int(np.argmax(((pos < lo_b) | (pos > hi_b)).any(axis=1)))
            return out
        out["cells"], out["counts"] = _block_cells(pos, cs, lo, hi)
    if ids is not None and len(ids):
        out["id_min"], out["id_max"] = int(ids.min()), int(ids.max())
        if out["id_min"] < 0:
            out["negative_id"] = offset + int(np.argmax(ids < 0))
    return out


def _block_cells(pos: np.ndarray, cs: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The block's occupied cells (absolute chunk coordinates) and rows per cell; none when
    its own grid is too large to address (then so is the store's, which the plan refuses)."""
    grid = _grid_for((tuple(lo), tuple(hi)), cs)
    if grid is None:
        return np.zeros((0, len(lo)), np.int64), np.zeros(0, np.int64)
    origin, shape = grid
    lin, _ = cells_and_bins(pos, cs, origin, shape)
    if math.prod(shape) <= DENSE_GRID_LIMIT:
        counts = np.bincount(lin, minlength=math.prod(shape))
        cells = np.flatnonzero(counts)
        counts = counts[cells]
    else:
        cells, counts = np.unique(lin, return_counts=True)
    return np.stack(np.unravel_index(cells, shape), axis=1) + origin, counts


@dataclass(frozen=True)
class VertexPlan:
    """Which owner task writes which cells, and how many rows each cell gets."""

    origin: np.ndarray  # chunk coords of grid cell 0
    grid_shape: tuple[int, ...]  # the array shape (cells per axis)
    cells: np.ndarray  # occupied cells, linear C-order ids, ascending (= numeric chunk order)
    counts: np.ndarray  # rows per occupied cell
    owners: list[slice]  # runs of ``cells`` per owner task
    bounds: tuple[tuple[float, ...], tuple[float, ...]]
    num_objects: int

    def chunk_of(self, linear: np.ndarray) -> np.ndarray:
        return np.stack(np.unravel_index(linear, self.grid_shape), axis=1) + self.origin

    def chunks(self) -> np.ndarray:
        """Chunk coordinates of every occupied cell, in rank order."""
        return self.chunk_of(self.cells)

    def owner_cells(self, i: int) -> np.ndarray:
        return self.cells[self.owners[i]]

    def owner_starts(self) -> np.ndarray:
        """Rank of each owner's first cell, plus the total (cut points in rank order)."""
        return np.asarray([s.start for s in self.owners] + [len(self.cells)], dtype=np.int64)

    def rank_of(self, linear: np.ndarray) -> np.ndarray:
        """Position of each linear cell id in ``cells`` (every id must be occupied)."""
        if math.prod(self.grid_shape) <= DENSE_GRID_LIMIT:
            lut = np.zeros(math.prod(self.grid_shape), dtype=index_dtype(len(self.cells)))
            lut[self.cells] = np.arange(len(self.cells))
            return lut[linear]
        return np.searchsorted(self.cells, linear)


def _grid_for(
    bounds: tuple[tuple[float, ...], tuple[float, ...]], cs: np.ndarray
) -> tuple[np.ndarray, tuple[int, ...]] | None:
    """The chunk grid covering ``bounds``: origin (chunk coordinates of cell 0) and shape, or
    None when its cells cannot be addressed with int64 linear ids."""
    coords = chunk_coords(np.asarray(bounds, dtype=np.float64), cs)
    if coords is None:
        return None
    lo, hi = coords
    shape = tuple(int(v) for v in hi - lo + 1)
    return (lo, shape) if math.prod(shape) < 1 << 63 else None


def plan_vertices(spec: VertexSpec, blocks: InputBlocks) -> VertexPlan:
    """Scan the input and decide ownership; raises InputError before any write."""
    # compare in the positions' own dtype: float32(0.1) is inside bounds declared as 0.1
    lo_b = np.asarray(spec.declared_bounds[0], dtype=spec.dtype) if spec.declared_bounds else None
    hi_b = np.asarray(spec.declared_bounds[1], dtype=spec.dtype) if spec.declared_bounds else None
    cs = np.asarray(spec.chunk_shape)
    scans = runner.compute(
        "scan",
        *[dask.delayed(_scan_block)(p, i, o, r, lo_b, hi_b, cs, spec.dtype)
          for p, i, o, r in zip(blocks.pos, blocks.ids, blocks.offsets, np.diff([*blocks.offsets, spec.n]).tolist())],
    )
    for s in scans:
        if "block" in s:
            at, dtype, shape = s["block"]
            raise InputError(f"positions: the dask block at row {at} is {dtype} of shape {shape}, not as the array "
                             f"declares its rows ({spec.dtype}, {spec.ndim} columns; a map_blocks without the right "
                             "dtype= or chunks=?); nothing was written")
    for s in scans:
        if "nonfinite" in s:
            raise InputError(f"positions row {s['nonfinite']} is not finite (NaN or infinity); nothing was written")
    for s in scans:
        if "outside" in s:
            raise InputError(
                f"positions row {s['outside']} lies outside the declared bounds {spec.declared_bounds}; nothing was written"
            )
    if spec.n == 0:
        raise InputError("positions is empty: a store needs at least one vertex")
    lo = np.min([s["lo"] for s in scans], axis=0)
    hi = np.max([s["hi"] for s in scans], axis=0)
    bounds = spec.declared_bounds or (tuple(lo.tolist()), tuple(hi.tolist()))
    num_objects = 0
    if spec.has_objects:
        id_min = min(s["id_min"] for s in scans if "id_min" in s)
        id_max = max(s["id_max"] for s in scans if "id_max" in s)
        if id_min < 0:
            row = min(s["negative_id"] for s in scans if "negative_id" in s)
            raise InputError(f"object_ids must be >= 0, found {id_min} (first negative id at row {row})")
        if id_max > MAX_OBJECT_ID:
            raise InputError(f"object id {id_max} exceeds the format's limit of {MAX_OBJECT_ID} (2**26 rows)")
        num_objects = id_max + 1
    grid = _grid_for(bounds, cs)
    if grid is None:
        raise InputError(f"the chunk grid over {bounds} with chunk_shape {spec.chunk_shape} is too large to "
                         "address: use a larger chunk_shape. Nothing was written.")
    origin, shape = grid
    coords = np.concatenate([s["cells"] for s in scans if "cells" in s])
    outside = ((coords < origin) | (coords >= origin + np.asarray(shape))).any(axis=1)
    if outside.any():  # a value on a declared bound that float64 division puts past it
        chunk = format_chunk_key(coords[int(np.argmax(outside))].tolist())
        raise InputError(f"positions fall in chunk {chunk}, outside the chunk grid of the declared bounds "
                         f"{spec.declared_bounds} (a value on a bound, divided by chunk_shape in float64, "
                         "lands past it): widen the bounds slightly. Nothing was written.")
    all_cells = np.ravel_multi_index(tuple((coords - origin).T), shape)
    all_counts = np.concatenate([s["counts"] for s in scans if "counts" in s])
    cells, inverse = np.unique(all_cells, return_inverse=True)
    counts = np.bincount(inverse, weights=all_counts, minlength=len(cells)).astype(np.int64)
    worst = int(np.argmax(counts))
    if counts[worst] * spec.row_bytes() > MAX_CELL_BYTES:
        chunk = np.stack(np.unravel_index(cells[worst : worst + 1], shape), axis=1)[0] + origin
        raise InputError(
            f"chunk {format_chunk_key(chunk.tolist())} would hold {counts[worst]} vertices "
            f"({counts[worst] * spec.row_bytes()} bytes in one cell); a cell must stay below 4 GiB: "
            "use a smaller chunk_shape. Nothing was written."
        )
    # every routed piece waits in worker memory until the owners run, and an owner holds a
    # few copies of its rows while it merges and encodes them: on small workers (1 GiB)
    # owners must stay small (32 MiB of rows: ~1.2M float64 xyz points with an attribute)
    max_rows = config.get("write.max-task-bytes") // spec.row_bytes()
    owners = task_runs(counts, config.get("write.min-rows-per-task"), max_rows)
    return VertexPlan(origin, shape, cells, counts, owners, bounds, num_objects)


# ---------------------------------------------------------------------------
# init
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class VertexArrays:
    """The vertex grid arrays of a level, as created by init."""

    vertices: GridArray
    fragments: GridArray
    attributes: dict[str, GridArray]

    def all(self) -> list[GridArray]:
        return [self.vertices, self.fragments, *self.attributes.values()]


def create_vertex_arrays(
    level: Level, spec: VertexSpec, plan: VertexPlan, *, pending: Mapping[str, dict[str, Any]] | None = None
) -> VertexArrays:
    """Create ``vertices``, ``vertex_fragments`` and every vertex attribute (no cells), in one
    batch with the ``pending`` documents (the store's root and level, from ``create_store``)."""
    storage = level.storage
    shape, origin = plan.grid_shape, tuple(int(v) for v in plan.origin)

    def grid(relpath: str, attrs: dict[str, Any]) -> GridArray:
        return GridArray.new(
            storage, level.node_path(relpath), shape=shape, origin=origin, attributes=attrs, compressor=spec.compressor
        )

    vertices = grid("vertices", {"zv_array": "vertices", "dtype": spec.dtype.name, "encoding": "raw"})
    fragments = grid("vertex_fragments", {"zv_array": "vertex_fragments", "encoding": "fragment_index_v1"})
    attributes: dict[str, GridArray] = {}
    for name, (dtype, row_shape) in spec.attributes.items():
        attrs: dict[str, Any] = {"zv_array": "attribute", "name": name, "dtype": dtype.name, "row_shape": list(row_shape)}
        if row_shape:  # the reference reader takes the channel count from channel_names
            attrs["channel_names"] = [f"ch{i}" for i in range(math.prod(row_shape))]
        attributes[name] = grid(posixpath.join("vertex_attributes", name), attrs)
    arrays = VertexArrays(vertices, fragments, attributes)
    # the documents in one batch: on an object store one round, not one per document
    documents = {**(pending or {}), **{grid.path: grid.doc for grid in arrays.all()}}
    if spec.attributes:
        documents[level.node_path("vertex_attributes")] = group_document()
    write_nodes(storage, documents)
    return arrays


# ---------------------------------------------------------------------------
# route and write
# ---------------------------------------------------------------------------
def route_block(
    pos: np.ndarray,
    ids: np.ndarray | None,
    attrs: dict[str, np.ndarray],
    breaks: np.ndarray | None,
    offset: int,
    plan: VertexPlan,
    spec: VertexSpec,
    with_gid: bool,
) -> list[dict[str, np.ndarray] | None]:
    """Order a block's rows as they will sit in their cells, and split them by owner task.

    Block-sized arrays are few and short-lived (the cell ids are dropped once ranked; the
    sort keys, ids and row numbers are cut per piece): on a fresh process their pages
    cost more to fault in than the sorting costs.
    """
    binned = spec.mode == "bins"
    lin, bins = cells_and_bins(
        pos,
        np.asarray(spec.chunk_shape),
        plan.origin,
        plan.grid_shape,
        np.asarray(spec.bin_shape or spec.chunk_shape) if binned else None,
        spec.bins_per_chunk if binned else None,
    )
    rank = plan.rank_of(lin)
    del lin
    if spec.mode == "bins":
        assert bins is not None
        key_space = len(plan.cells) * spec.n_bins
        order = stable_order(rank.astype(index_dtype(key_space), copy=False) * spec.n_bins + bins, key_space)
        sub = bins
    elif spec.mode == "objects":
        assert ids is not None
        order = np.lexsort((ids, rank))
        sub = ids
    else:  # runs: input order inside a cell
        assert ids is not None
        order = stable_order(rank, len(plan.cells))
        sub = ids
    rows_per_rank = np.bincount(rank, minlength=len(plan.cells))
    del rank
    cuts = np.r_[0, np.cumsum(rows_per_rank)][plan.owner_starts()]
    keep_gid = with_gid or spec.mode == "runs"
    pieces: list[dict[str, np.ndarray] | None] = []
    for k in range(len(plan.owners)):
        lo, hi = int(cuts[k]), int(cuts[k + 1])
        if lo == hi:
            pieces.append(None)
            continue
        sel = order[lo:hi]
        # Copies, not views: a view pins the whole block's array in worker memory, where
        # dask counts only the view (unmanaged memory it can neither see nor spill).  Every
        # piece waits in memory until all blocks are routed, so it is kept small: rows per
        # owned cell instead of a rank per row, and bins / object ids (< 2**26) as int32.
        piece = {
            "cells": rows_per_rank[plan.owners[k]].copy(),
            "pos": take_rows(pos, sel),
            "sub": sub[sel].astype(np.int32, copy=False),
        }
        if keep_gid:
            piece["gid"] = sel.astype(index_dtype(spec.n))
            piece["gid"] += offset
        if breaks is not None:
            piece["brk"] = breaks[sel]
        for name, values in attrs.items():
            piece["attr/" + name] = take_rows(values, sel)
        pieces.append(piece)
    return pieces


def pick(routed: list[Any], k: int) -> Any:
    """Owner ``k``'s share of a routed block: under a distributed client only this moves."""
    return routed[k]


def _merge_pieces(spec: VertexSpec, parts: list[dict[str, np.ndarray]], n_cells: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """An owner's rows from every block, ordered as they sit in its cells; and rows per cell."""
    counts = np.sum([p["cells"] for p in parts], axis=0)
    data = {c: np.concatenate([p[c] for p in parts]) if len(parts) > 1 else parts[0][c] for c in parts[0] if c != "cells"}
    if len(parts) > 1:  # merge blocks: stable, so input order holds within a bin / object / cell
        local = np.concatenate([np.repeat(np.arange(n_cells), p["cells"]) for p in parts])
        if spec.mode == "bins":
            order = stable_order(local * spec.n_bins + data["sub"], n_cells * spec.n_bins)
        elif spec.mode == "objects":
            order = np.lexsort((data["sub"], local))
        else:  # runs: each part is in input order within a cell and the parts come in block order,
            order = stable_order(local, n_cells)  # so a stable sort by cell keeps input order
        data = {c: take_rows(v, order) for c, v in data.items()}
    return data, counts


def _cell_fragments(
    spec: VertexSpec, sub: np.ndarray, gid: np.ndarray | None, brk: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """(rows per fragment, first row of each fragment) for one cell's ordered rows."""
    if spec.mode == "bins":
        counts = np.bincount(sub, minlength=spec.n_bins)
        return counts, np.r_[0, np.cumsum(counts)[:-1]]
    breaks = sub[1:] != sub[:-1]
    if spec.mode == "runs":
        assert gid is not None
        breaks |= gid[1:] != gid[:-1] + 1
    if brk is not None:
        breaks |= brk[1:]
    starts = np.flatnonzero(np.r_[True, breaks])
    return np.diff(np.r_[starts, len(sub)]), starts


def write_owner(
    arrays: VertexArrays, spec: VertexSpec, plan: VertexPlan, k: int,
    *pieces: dict[str, np.ndarray] | list[dict[str, np.ndarray] | None] | None,
) -> dict[str, Any]:  # fmt: skip
    """Write every cell owner ``k`` owns and summarise what went where.

    A piece is a routed block's share for this owner, or (local threads: nothing to ship)
    the block's whole routing (:func:`route_block`'s list), of which it takes its share."""
    taken = [pick(p, k) if isinstance(p, list) else p for p in pieces]
    parts = [p for p in taken if p is not None]
    first_rank = plan.owners[k].start
    n_cells = plan.owners[k].stop - first_rank
    chunks = plan.chunk_of(plan.owner_cells(k))
    data, per_cell = _merge_pieces(spec, parts, n_cells)
    pos, sub, gid, brk = data["pos"], data["sub"], data.get("gid"), data.get("brk")
    ends = np.cumsum(per_cell)
    starts = np.r_[0, ends[:-1]]
    grids = arrays.all()
    cells: list[dict[tuple[int, ...], bytes]] = [{} for _ in grids]  # parallel to ``grids``
    attr_names = list(arrays.attributes)
    frag_tables = []
    for c, (s, e) in enumerate(zip(starts.tolist(), ends.tolist())):
        chunk = tuple(chunks[c].tolist())
        counts, first = _cell_fragments(
            spec, sub[s:e], gid[s:e] if gid is not None else None, brk[s:e] if brk is not None else None
        )
        cells[0][chunk] = pos[s:e].tobytes()
        cells[1][chunk] = FragmentIndex.from_counts(counts).encode()
        for i, name in enumerate(attr_names):
            cells[2 + i][chunk] = data["attr/" + name][s:e].tobytes()
        if spec.has_objects:
            f = np.arange(len(counts), dtype=np.int64)
            order_key = gid[s + first].astype(np.int64) if spec.mode == "runs" else np.full(len(counts), first_rank + c, np.int64)
            ids = sub[s + first].astype(np.int64)
            frag_tables.append((ids, np.repeat(chunks[c : c + 1], len(counts), axis=0), f, order_key))
    write_cells_many(list(zip(grids, cells)))
    summary: dict[str, Any] = {"keys": [format_chunk_key(c) for c in cells[0]], "rows": int(len(pos))}
    if frag_tables:
        summary["fragments"] = tuple(np.concatenate([t[i] for t in frag_tables]) for i in range(4))
    if gid is not None:  # input index per row and rows per cell: assemble_placement expands them
        summary["placement"] = (gid, first_rank, per_cell)
    return summary


def write_graph(
    arrays: VertexArrays, spec: VertexSpec, plan: VertexPlan, blocks: InputBlocks, *, with_gid: bool = False,
    plan_ref: Any = None,
) -> list[Any]:
    """The route and owner-write tasks; returns the owners' delayed summaries.

    The plan, spec and arrays are one shared node each: passed as they are, dask walks
    their fields (array documents, owner lists) once per task while the client builds
    the graph, with every worker idle.  ``plan_ref``: the plan already shared by a caller
    whose later stages take it too (under a client, one scatter instead of two)."""
    plan_ref = runner.share(plan) if plan_ref is None else plan_ref
    spec_ref, arrays_ref = runner.share(spec), runner.share(arrays)
    routed = [
        dask.delayed(route_block)(p, i, a, b, o, plan_ref, spec_ref, with_gid)
        for p, i, a, b, o in zip(blocks.pos, blocks.ids, blocks.attrs, blocks.breaks, blocks.offsets)
    ]
    shares = runner.shares(routed, pick, len(plan.owners))
    return runner.calls(write_owner, [(arrays_ref, spec_ref, plan_ref, k, *shares[k]) for k in range(len(plan.owners))])


# ---------------------------------------------------------------------------
# reconcile (the vertex half) and placement
# ---------------------------------------------------------------------------
def check_object_attributes(values: Mapping[str, Any] | None, *, has_ids: bool) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for name, value in mapping_argument(values, "object_attributes").items():
        check_new_name(name, "object attribute")
        if not has_ids:
            raise InputError("object_attributes need object_ids")
        arr = input_array(value, f"object attribute {name!r}", dask=False)
        if arr.ndim not in (1, 2) or (arr.ndim == 2 and arr.shape[1] < 1):
            raise InputError(f"object attribute {name!r} must be 1-D or 2-D with at least one channel, found shape "
                             f"{arr.shape}")
        absence_fill(arr.dtype, name)
        if problem := attribute_dtype_problem(arr.dtype):
            raise InputError(f"object attribute {name!r} has {problem}")
        out[name] = arr
    return out


def check_object_attribute_rows(values: Mapping[str, np.ndarray], num_objects: int) -> None:
    for name, arr in values.items():
        if arr.shape[0] != num_objects:
            raise InputError(
                f"object attribute {name!r} has {arr.shape[0]} rows; expected {num_objects} "
                "(one per object id 0..max id)"
            )


def set_vertex_presence(arrays: VertexArrays, *summaries: dict[str, Any]) -> None:
    """Every vertex array's ``nonempty_chunks``: the cells the owners report, checked
    against a listing.  Safe to run twice."""
    keys = {k for s in summaries for k in s["keys"]}
    arrays.vertices.storage.overlap(lambda grid: confirm_presence(grid, keys), arrays.all())


def write_objects(
    level: Level, spec: VertexSpec, plan: VertexPlan, object_attributes: Mapping[str, np.ndarray],
    *summaries: dict[str, Any],
) -> None:  # fmt: skip
    """The object index (from the owners' fragment tables) and the object attributes."""
    write_object_index(level, spec, plan, [s["fragments"] for s in summaries if "fragments" in s])
    write_object_attributes(level, spec, object_attributes)


def reconcile_tasks(
    level: Level,
    arrays: VertexArrays,
    spec: VertexSpec,
    plan: VertexPlan,
    object_attributes: Mapping[str, np.ndarray],
    summaries: Sequence[Any],
) -> list[Any]:
    """The vertex part of a level's reconcile step: presence lists and, with object ids,
    the object tables -- independent tasks (they touch disjoint files)."""
    tasks = [dask.delayed(set_vertex_presence)(arrays, *summaries)]
    if spec.has_objects:
        tasks.append(dask.delayed(write_objects)(level, spec, plan, object_attributes, *summaries))
    return tasks


def vertex_families(spec: VertexSpec) -> list[str]:
    """The vertex families a level written from ``spec`` holds (its ``arrays_present``)."""
    return ["vertices"] + (["vertex_attributes"] if spec.attributes else []) + (["object_index"] if spec.has_objects else [])


def write_object_index(level: Level, spec: VertexSpec, plan: VertexPlan, tables: list[tuple[np.ndarray, ...]]) -> None:
    """Manifests from the owners' fragment tables, in manifest order (id, then storage order)."""
    ids, chunks, frags, order_key = (np.concatenate([t[i] for t in tables]) for i in range(4))
    order = np.lexsort((frags, order_key, ids))
    reconcile.write_object_index(
        level, ids[order], chunks[order], frags[order], num_objects=plan.num_objects, sid_ndim=spec.ndim
    )


def write_object_attributes(level: Level, spec: VertexSpec, values: Mapping[str, np.ndarray]) -> None:
    reconcile.write_object_attributes(level, {
        name: reconcile.ObjectAttributeTable(
            arr, absence_fill(arr.dtype, name), object_attribute_attributes(name, arr), spec.compressor
        )
        for name, arr in values.items()
    })  # fmt: skip


@dataclass(frozen=True)
class Placement:
    """Where every input vertex landed, by input index: its cell and chunk-local row.

    The cell is a rank (position in ``VertexPlan.cells``, which is chunk order), never
    the chunk coordinates: equal ranks are equal chunks, and ``plan.chunks()[rank]``
    recovers the coordinates of the few vertices that need them (cross-chunk records).
    """

    rows: np.ndarray  # (n,) index_dtype(n)
    rank: np.ndarray  # (n,) index_dtype(n)


def assemble_placement(plan: VertexPlan, n: int, *summaries: dict[str, Any]) -> Placement:
    """The placement from the owners' reports (each: input index per row in storage order,
    its first cell's rank, rows per cell)."""
    dtype = index_dtype(n)
    rank = np.empty(n, dtype=dtype)
    rows = np.empty(n, dtype=dtype)
    for s in summaries:
        gid, first_rank, per_cell = s["placement"]
        cell_of_row = np.repeat(np.arange(len(per_cell), dtype=dtype), per_cell)
        rows[gid] = np.arange(len(gid), dtype=dtype) - np.r_[0, np.cumsum(per_cell)[:-1]].astype(dtype)[cell_of_row]
        cell_of_row += first_rank
        rank[gid] = cell_of_row
    return Placement(rows, rank)
