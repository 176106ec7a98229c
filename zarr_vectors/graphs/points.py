"""``write_points`` as a Dask graph: scan -> plan -> init -> route -> owner writes -> reconcile.

* scan (per input block): finiteness, bounds, id checks, extents;
* histogram (per block): points per occupied chunk; the plan groups whole cells into
  owner tasks and checks every cell fits a vlen item (D13) -- all before anything is
  written;
* init (here, metadata only): root, level 0 and every array, never cells;
* route (per block): split the block's rows by owner task;
* write (per owner): concatenate its pieces, order rows, encode and write its cells
  with ``record_presence=False``, return a small summary;
* reconcile (one task): ``nonempty_chunks`` from the summaries, checked against a
  listing, object manifests and attributes, level metadata.  Safe to run twice.
"""

from __future__ import annotations

import math
import posixpath
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dask
import dask.array as da
import numpy as np

from zarr_vectors.core.codecs import compressor_config
from zarr_vectors.core.grid import MAX_CELL_BYTES, GridArray, write_cells_many
from zarr_vectors.core.metadata import OBJECT_INDEX_LAYOUT
from zarr_vectors.core.paths import format_chunk_key
from zarr_vectors.core.storage import Storage
from zarr_vectors.core.store import Level, create_store
from zarr_vectors.core.tables import write_table, write_vlen_rows
from zarr_vectors.encoding import encode_mode0_manifests
from zarr_vectors.errors import InputError
from zarr_vectors.geometry.points import (
    CellPayloads,
    cells_and_bins,
    chunk_coords,
    column_extent,
    encode_binned_cell,
    encode_object_cell,
    stable_order,
    take_rows,
)
from zarr_vectors.graphs.runner import current_client, parallelism, split_by_weight

BLOCK_ROWS = 1_000_000
MIN_ROWS_PER_TASK = 250_000
MAX_BINS_PER_CHUNK = 1 << 20
MAX_OBJECT_ID = (1 << 26) - 1
ATTRIBUTE_KINDS = "biuf"
DENSE_GRID_LIMIT = 1 << 22  # grids up to this many cells are counted with bincount / a lookup table


# ---------------------------------------------------------------------------
# input normalisation (client side, before anything runs)
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class PointsSpec:
    """Everything about a point-cloud write that is known before reading the data."""

    n: int
    ndim: int
    dtype: np.dtype
    chunk_shape: tuple[float, ...]
    bin_shape: tuple[float, ...] | None
    bins_per_chunk: tuple[int, ...]
    declared_bounds: tuple[tuple[float, ...], tuple[float, ...]] | None
    attributes: dict[str, tuple[np.dtype, tuple[int, ...]]]
    has_ids: bool
    compressor: dict[str, Any] | None

    @property
    def n_bins(self) -> int:
        return math.prod(self.bins_per_chunk)

    def row_bytes(self) -> int:
        return max(
            [self.ndim * self.dtype.itemsize]
            + [dt.itemsize * math.prod(rs) for dt, rs in self.attributes.values()]
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

    def __len__(self) -> int:
        return len(self.pos)


def _row_blocks(x: Any, bounds: list[int]) -> list[Any]:
    """Row blocks of one input column as graph references."""
    if isinstance(x, da.Array):
        chunks = (tuple(np.diff(bounds).tolist()),) + tuple((s,) for s in x.shape[1:])
        return list(x.rechunk(chunks).to_delayed().ravel())
    parts = [x[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:])]
    client = current_client()
    if client is not None:
        return client.scatter(parts, hash=False)
    token = uuid.uuid4().hex
    return [dask.delayed(part, name=f"zv-input-{token}-{i}") for i, part in enumerate(parts)]


def _shape_tuple(value: Sequence[float] | float, ndim: int, what: str) -> tuple[float, ...]:
    values = (value,) * ndim if np.isscalar(value) else tuple(value)  # type: ignore[arg-type]
    if len(values) != ndim:
        raise InputError(f"{what} has {len(values)} entries but positions have {ndim} columns")
    out = tuple(float(v) for v in values)
    if not all(math.isfinite(v) and v > 0 for v in out):
        raise InputError(f"{what} entries must be finite and > 0, found {list(values)}")
    return out


def normalise_inputs(
    positions: Any,
    *,
    chunk_shape: Sequence[float] | float,
    bin_shape: Sequence[float] | float | None,
    bounds: Any,
    object_ids: Any,
    attributes: Mapping[str, Any] | None,
    compressor: Any,
) -> tuple[PointsSpec, InputBlocks]:
    """Check every argument that can be checked without reading the data."""
    pos = positions if isinstance(positions, da.Array) else np.asarray(positions)
    if pos.ndim != 2 or pos.shape[1] < 1:
        raise InputError(f"positions must have shape (n, ndim), found {tuple(pos.shape)}")
    if pos.dtype not in (np.float32, np.float64):
        raise InputError(f"positions dtype {pos.dtype} is unsupported: pass float32 or float64")
    n, ndim = int(pos.shape[0]), int(pos.shape[1])
    cs = _shape_tuple(chunk_shape, ndim, "chunk_shape")
    bs = _shape_tuple(bin_shape, ndim, "bin_shape") if bin_shape is not None else None
    if bs is not None:
        ratios = [c / b for c, b in zip(cs, bs)]
        if not all(abs(r - round(r)) <= 1e-9 * max(1.0, r) and round(r) >= 1 for r in ratios):
            raise InputError(f"bin_shape {list(bs)} does not divide chunk_shape {list(cs)} (ratios {ratios})")
        bpc = tuple(int(round(r)) for r in ratios)
    else:
        bpc = (1,) * ndim
    if math.prod(bpc) > MAX_BINS_PER_CHUNK:
        raise InputError(f"{math.prod(bpc)} bins per chunk exceeds {MAX_BINS_PER_CHUNK}: use a larger bin_shape")
    declared = None
    if bounds is not None:
        b = np.asarray(bounds, dtype=np.float64)
        if b.shape != (2, ndim) or not np.isfinite(b).all() or (b[0] > b[1]).any():
            raise InputError(f"bounds must be [min[{ndim}], max[{ndim}]] with min <= max, found {bounds!r}")
        declared = (tuple(b[0].tolist()), tuple(b[1].tolist()))
    if isinstance(pos, da.Array):
        bounds_rows = np.r_[0, np.cumsum(pos.chunks[0])].astype(int).tolist()
    else:
        bounds_rows = list(range(0, n, BLOCK_ROWS)) + [n] if n else [0, 0]

    ids_in = None
    if object_ids is not None:
        ids_in = object_ids if isinstance(object_ids, da.Array) else np.asarray(object_ids)
        if ids_in.ndim != 1 or ids_in.shape[0] != n:
            raise InputError(f"object_ids must have shape ({n},), found {tuple(ids_in.shape)}")
        if ids_in.dtype.kind not in "iu":
            raise InputError(f"object_ids dtype {ids_in.dtype} is unsupported: pass integers")
        ids_in = ids_in.astype(np.int64)

    attrs_spec: dict[str, tuple[np.dtype, tuple[int, ...]]] = {}
    attrs_in: dict[str, Any] = {}
    for name, value in (attributes or {}).items():
        if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
            raise InputError(f"invalid attribute name {name!r}")
        arr = value if isinstance(value, da.Array) else np.asarray(value)
        if arr.ndim not in (1, 2) or arr.shape[0] != n:
            raise InputError(f"attribute {name!r} has shape {tuple(arr.shape)}; expected ({n},) or ({n}, channels)")
        if arr.dtype.kind not in ATTRIBUTE_KINDS:
            raise InputError(f"attribute {name!r} has unsupported dtype {arr.dtype} (numeric or bool only)")
        dtype = arr.dtype.newbyteorder("<") if arr.dtype.byteorder == ">" else arr.dtype
        attrs_spec[name] = (np.dtype(dtype), tuple(arr.shape[1:]))
        attrs_in[name] = arr.astype(dtype)

    spec = PointsSpec(
        n=n,
        ndim=ndim,
        dtype=np.dtype(pos.dtype),
        chunk_shape=cs,
        bin_shape=bs,
        bins_per_chunk=bpc,
        declared_bounds=declared,
        attributes=attrs_spec,
        has_ids=ids_in is not None,
        compressor=compressor_config(compressor),
    )
    attr_blocks = {name: _row_blocks(arr, bounds_rows) for name, arr in attrs_in.items()}
    pos_blocks = _row_blocks(pos, bounds_rows)
    blocks = InputBlocks(
        offsets=bounds_rows[:-1],
        pos=pos_blocks,
        ids=_row_blocks(ids_in, bounds_rows) if ids_in is not None else [None] * len(pos_blocks),
        attrs=[{name: b[i] for name, b in attr_blocks.items()} for i in range(len(pos_blocks))],
    )
    return spec, blocks



# ---------------------------------------------------------------------------
# scan and plan
# ---------------------------------------------------------------------------
def _scan_block(pos: np.ndarray, ids: np.ndarray | None, offset: int, lo_b: Any, hi_b: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"n": len(pos)}
    if len(pos):
        lo, hi = column_extent(pos)
        if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
            out["nonfinite"] = offset + int(np.argmax(~np.isfinite(pos).all(axis=1)))
            return out
        out["lo"], out["hi"] = lo, hi
        if lo_b is not None and ((lo < lo_b).any() or (hi > hi_b).any()):
            out["outside"] = offset + int(np.argmax(((pos < lo_b) | (pos > hi_b)).any(axis=1)))
    if ids is not None and len(ids):
        out["id_min"], out["id_max"] = int(ids.min()), int(ids.max())
    return out


@dataclass(frozen=True)
class PointPlan:
    """Which owner task writes which cells, and how many rows each cell gets."""

    origin: np.ndarray  # chunk coords of grid cell 0
    grid_shape: tuple[int, ...]  # the array shape (cells per axis)
    cells: np.ndarray  # occupied cells, linear C-order ids, ascending
    counts: np.ndarray  # rows per occupied cell
    owners: list[slice]  # runs of ``cells`` per owner task
    bounds: tuple[tuple[float, ...], tuple[float, ...]]
    num_objects: int

    def chunk_of(self, linear: np.ndarray) -> np.ndarray:
        return np.stack(np.unravel_index(linear, self.grid_shape), axis=1) + self.origin

    def owner_cells(self, i: int) -> np.ndarray:
        return self.cells[self.owners[i]]

    def owner_starts(self) -> np.ndarray:
        """Rank of each owner's first cell, plus the total (cut points in rank order)."""
        return np.asarray([s.start for s in self.owners] + [len(self.cells)], dtype=np.int64)

    def rank_of(self, linear: np.ndarray) -> np.ndarray:
        """Position of each linear cell id in ``cells`` (every id must be occupied)."""
        if math.prod(self.grid_shape) <= DENSE_GRID_LIMIT:
            lut = np.zeros(math.prod(self.grid_shape), dtype=np.int64)
            lut[self.cells] = np.arange(len(self.cells))
            return lut[linear]
        return np.searchsorted(self.cells, linear)

    def describe(self) -> dict[str, Any]:
        return {
            "cells": len(self.cells),
            "owners": [
                {"cells": int(s.stop - s.start), "rows": int(self.counts[s].sum())} for s in self.owners
            ],
        }


def _grid_for(bounds: tuple[tuple[float, ...], tuple[float, ...]], cs: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
    lo = chunk_coords(np.asarray([bounds[0]]), cs)[0]
    hi = chunk_coords(np.asarray([bounds[1]]), cs)[0]
    return lo, tuple(int(v) for v in hi - lo + 1)


def _histogram_block(pos: np.ndarray, cs: np.ndarray, origin: np.ndarray, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    lin, _ = cells_and_bins(pos, cs, origin, shape)
    if math.prod(shape) <= DENSE_GRID_LIMIT:
        counts = np.bincount(lin, minlength=math.prod(shape))
        cells = np.flatnonzero(counts)
        return cells, counts[cells]
    return np.unique(lin, return_counts=True)


def plan_points(spec: PointsSpec, blocks: InputBlocks) -> PointPlan:
    """Scan the input and decide ownership; raises InputError before any write."""
    lo_b = np.asarray(spec.declared_bounds[0]) if spec.declared_bounds else None
    hi_b = np.asarray(spec.declared_bounds[1]) if spec.declared_bounds else None
    scans = dask.compute(
        *[dask.delayed(_scan_block)(p, i, o, lo_b, hi_b) for p, i, o in zip(blocks.pos, blocks.ids, blocks.offsets)]
    )
    for s in scans:
        if "nonfinite" in s:
            raise InputError(f"positions row {s['nonfinite']} is not finite (NaN or infinity); nothing was written")
    for s in scans:
        if "outside" in s:
            raise InputError(
                f"positions row {s['outside']} lies outside the declared bounds {spec.declared_bounds}; nothing was written"
            )
    if spec.n == 0:
        raise InputError("positions is empty: a point cloud needs at least one point")
    lo = np.min([s["lo"] for s in scans], axis=0)
    hi = np.max([s["hi"] for s in scans], axis=0)
    bounds = spec.declared_bounds or (tuple(lo.tolist()), tuple(hi.tolist()))
    num_objects = 0
    if spec.has_ids:
        id_min = min(s["id_min"] for s in scans if "id_min" in s)
        id_max = max(s["id_max"] for s in scans if "id_max" in s)
        if id_min < 0:
            raise InputError(f"object_ids must be >= 0, found {id_min}")
        if id_max > MAX_OBJECT_ID:
            raise InputError(f"object id {id_max} exceeds the format's limit of {MAX_OBJECT_ID} (2**26 rows)")
        num_objects = id_max + 1
    cs = np.asarray(spec.chunk_shape)
    origin, shape = _grid_for(bounds, cs)
    try:
        np.ravel_multi_index(tuple(np.zeros((len(shape), 1), dtype=np.int64)), shape)
    except ValueError as exc:
        raise InputError(f"a chunk grid of {list(shape)} cells is too large to address: use a larger chunk_shape") from exc
    hists = dask.compute(*[dask.delayed(_histogram_block)(p, cs, origin, shape) for p in blocks.pos])
    all_cells = np.concatenate([h[0] for h in hists])
    all_counts = np.concatenate([h[1] for h in hists])
    cells, inverse = np.unique(all_cells, return_inverse=True)
    counts = np.bincount(inverse, weights=all_counts, minlength=len(cells)).astype(np.int64)
    worst = int(np.argmax(counts))
    if counts[worst] * spec.row_bytes() > MAX_CELL_BYTES:
        chunk = np.stack(np.unravel_index(cells[worst : worst + 1], shape), axis=1)[0] + origin
        raise InputError(
            f"chunk {format_chunk_key(chunk.tolist())} would hold {counts[worst]} points "
            f"({counts[worst] * spec.row_bytes()} bytes in one cell); a cell must stay below 4 GiB: "
            "use a smaller chunk_shape. Nothing was written."
        )
    target = max(MIN_ROWS_PER_TASK, -(-spec.n // (4 * parallelism())))
    return PointPlan(origin, shape, cells, counts, split_by_weight(counts, target), bounds, num_objects)


# ---------------------------------------------------------------------------
# route and write
# ---------------------------------------------------------------------------
def _route_block(
    pos: np.ndarray, ids: np.ndarray | None, attrs: dict[str, np.ndarray], plan: PointPlan, spec: PointsSpec
) -> list[dict[str, np.ndarray] | None]:
    """Order a block's rows by (cell, bin or object id) and split them by owner task."""
    binned = not spec.has_ids
    lin, bins = cells_and_bins(
        pos,
        np.asarray(spec.chunk_shape),
        plan.origin,
        plan.grid_shape,
        np.asarray(spec.bin_shape or spec.chunk_shape) if binned else None,
        spec.bins_per_chunk if binned else None,
    )
    rank = plan.rank_of(lin)
    if bins is not None:
        order = stable_order(rank * spec.n_bins + bins, len(plan.cells) * spec.n_bins)
        sub = bins[order]
    else:
        assert ids is not None
        order = np.lexsort((ids, rank))
        sub = ids[order]
    rank = rank[order]
    cuts = np.searchsorted(rank, plan.owner_starts())
    pieces: list[dict[str, np.ndarray] | None] = []
    for k in range(len(plan.owners)):
        lo, hi = int(cuts[k]), int(cuts[k + 1])
        if lo == hi:
            pieces.append(None)
            continue
        sel = order[lo:hi]
        piece = {"pos": take_rows(pos, sel), "rank": rank[lo:hi], "sub": sub[lo:hi]}
        for name, values in attrs.items():
            piece["attr/" + name] = take_rows(values, sel)
        pieces.append(piece)
    return pieces


def _piece(routed: list[dict[str, np.ndarray] | None], k: int) -> dict[str, np.ndarray] | None:
    return routed[k]


@dataclass(frozen=True)
class PointArrays:
    """The grid arrays of a point-cloud level, as created by init."""

    vertices: GridArray
    fragments: GridArray
    attributes: dict[str, GridArray]

    def all(self) -> list[GridArray]:
        return [self.vertices, self.fragments, *self.attributes.values()]


def _write_owner(
    arrays: PointArrays, spec: PointsSpec, plan: PointPlan, k: int, *pieces: dict[str, np.ndarray] | None
) -> dict[str, Any]:
    """Write every cell owner ``k`` owns; rows arrive ordered within each piece."""
    parts = [p for p in pieces if p is not None]
    first_rank = plan.owners[k].start
    n_cells = plan.owners[k].stop - first_rank
    chunks = plan.chunk_of(plan.owner_cells(k))
    columns = ["pos", "rank", "sub"] + ["attr/" + name for name in spec.attributes]
    data = {c: np.concatenate([p[c] for p in parts]) if len(parts) > 1 else parts[0][c] for c in columns}
    if len(parts) > 1:  # merge blocks: stable, so input order holds within a bin / object
        local = data["rank"] - first_rank
        if spec.has_ids:
            order = np.lexsort((data["sub"], local))
        else:
            order = stable_order(local * spec.n_bins + data["sub"], n_cells * spec.n_bins)
        data = {c: take_rows(v, order) for c, v in data.items()}
    pos, sub = data["pos"], data["sub"]
    attrs = {name: data["attr/" + name] for name in spec.attributes}
    ends = np.searchsorted(data["rank"], np.arange(first_rank, first_rank + n_cells), side="right")
    starts = np.r_[0, ends[:-1]]
    vert_cells: dict[tuple[int, ...], bytes] = {}
    frag_cells: dict[tuple[int, ...], bytes] = {}
    attr_cells: dict[str, dict[tuple[int, ...], bytes]] = {name: {} for name in spec.attributes}
    manifest_ids, manifest_chunks, manifest_frags = [], [], []
    for c, (s, e) in enumerate(zip(starts.tolist(), ends.tolist())):
        chunk = tuple(chunks[c].tolist())
        cell_attrs = {name: v[s:e] for name, v in attrs.items()}
        payload: CellPayloads
        if spec.has_ids:  # ``sub`` holds object ids
            payload = encode_object_cell(pos[s:e], sub[s:e], cell_attrs)
            assert payload.object_ids is not None
            manifest_ids.append(payload.object_ids)
            manifest_chunks.append(np.repeat(chunks[c : c + 1], len(payload.object_ids), axis=0))
            manifest_frags.append(np.arange(len(payload.object_ids), dtype=np.int64))
        else:
            payload = encode_binned_cell(pos[s:e], sub[s:e], spec.n_bins, cell_attrs)
        vert_cells[chunk] = payload.vertices
        frag_cells[chunk] = payload.fragments
        for name, encoded in payload.attributes.items():
            attr_cells[name][chunk] = encoded
    write_cells_many(
        [(arrays.vertices, vert_cells), (arrays.fragments, frag_cells)]
        + [(grid, attr_cells[name]) for name, grid in arrays.attributes.items()]
    )
    summary: dict[str, Any] = {"keys": [format_chunk_key(c) for c in vert_cells], "rows": int(len(pos))}
    if manifest_ids:
        summary["manifest"] = (
            np.concatenate(manifest_ids),
            np.concatenate(manifest_chunks),
            np.concatenate(manifest_frags),
        )
    return summary


# ---------------------------------------------------------------------------
# init and reconcile
# ---------------------------------------------------------------------------
def init_points_store(
    storage: Storage,
    spec: PointsSpec,
    plan: PointPlan,
    *,
    overwrite: bool,
) -> tuple[Level, PointArrays]:
    """Create root, level 0 and every array (metadata only; no cells)."""
    store = create_store(
        storage,
        chunk_shape=spec.chunk_shape,
        bounds=plan.bounds,
        geometry_type="point_cloud",
        base_bin_shape=spec.bin_shape,
        links_convention="implicit_sequential",
        overwrite=overwrite,
    )
    level = store.level(0)
    shape, origin = plan.grid_shape, tuple(int(v) for v in plan.origin)

    def grid(relpath: str, attrs: dict[str, Any]) -> GridArray:
        return GridArray.create(
            storage, level.node_path(relpath), shape=shape, origin=origin, attributes=attrs, compressor=spec.compressor
        )

    vertices = grid("vertices", {"zv_array": "vertices", "dtype": spec.dtype.name, "encoding": "raw"})
    fragments = grid("vertex_fragments", {"zv_array": "vertex_fragments", "encoding": "fragment_index_v1"})
    attributes: dict[str, GridArray] = {}
    if spec.attributes:
        from zarr_vectors.core.nodes import group_document, write_node

        write_node(storage, level.node_path("vertex_attributes"), group_document())
        for name, (dtype, row_shape) in spec.attributes.items():
            attrs: dict[str, Any] = {"zv_array": "attribute", "name": name, "dtype": dtype.name, "row_shape": list(row_shape)}
            if row_shape:  # the reference reader takes the channel count from channel_names
                attrs["channel_names"] = [f"ch{i}" for i in range(math.prod(row_shape))]
            attributes[name] = grid(posixpath.join("vertex_attributes", name), attrs)
    return level, PointArrays(vertices, fragments, attributes)


def absence_fill(dtype: np.dtype) -> Any:
    """The object-attribute absence sentinel of FORMAT.md §6.8."""
    if dtype.kind == "f":
        return np.nan
    if dtype.kind == "i":
        return np.iinfo(dtype).min
    if dtype.kind == "u":
        return np.iinfo(dtype).max
    raise InputError(f"object attribute dtype {dtype} has no absence sentinel (use a numeric dtype)")


def check_object_attributes(values: Mapping[str, Any] | None, num_objects: int | None) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for name, value in (values or {}).items():
        if num_objects is None:
            raise InputError("object_attributes need object_ids")
        arr = np.asarray(value)
        if arr.ndim not in (1, 2):
            raise InputError(f"object attribute {name!r} must be 1-D or 2-D, found shape {arr.shape}")
        absence_fill(arr.dtype)
        out[name] = arr
    return out


def _reconcile(
    level: Level,
    arrays: PointArrays,
    spec: PointsSpec,
    plan: PointPlan,
    object_attributes: dict[str, np.ndarray],
    *summaries: dict[str, Any],
) -> dict[str, Any]:
    keys = sorted(k for s in summaries for k in s["keys"])
    for grid in arrays.all():
        listed = grid.derive_nonempty_chunks()
        if listed != sorted(set(keys)):
            missing = sorted(set(keys) - set(listed))
            extra = sorted(set(listed) - set(keys))
            raise RuntimeError(
                f"{grid.path}: cells on disk disagree with the write tasks' summaries "
                f"(missing {missing[:5]}, unexpected {extra[:5]}); the store is not complete"
            )
        grid.set_nonempty_chunks(keys)
    present = ["vertices"]
    if spec.attributes:
        present.append("vertex_attributes")
    storage = level.storage
    if spec.has_ids:
        blocks = [s["manifest"] for s in summaries if "manifest" in s]
        ids = np.concatenate([b[0] for b in blocks])
        chunks = np.concatenate([b[1] for b in blocks])
        frags = np.concatenate([b[2] for b in blocks])
        order = np.lexsort(tuple(chunks[:, d] for d in range(chunks.shape[1] - 1, -1, -1)) + (ids,))
        rows = encode_mode0_manifests(ids[order], chunks[order], frags[order], plan.num_objects)
        from zarr_vectors.core.nodes import group_document, write_node

        num_present = int(len(np.unique(ids)))
        write_node(
            storage,
            level.node_path("object_index"),
            group_document(
                {
                    "zv_array": "object_index",
                    "num_objects": plan.num_objects,
                    "num_present": num_present,
                    "sid_ndim": spec.ndim,
                    "layout": OBJECT_INDEX_LAYOUT,
                }
            ),
        )
        write_vlen_rows(storage, level.node_path("object_index/manifests"), rows)
        present.append("object_index")
        if object_attributes:
            write_node(storage, level.node_path("object_attributes"), group_document())
        for name, values in object_attributes.items():
            fill = absence_fill(values.dtype)
            write_table(
                storage,
                level.node_path(posixpath.join("object_attributes", name)),
                values,
                fill_value=fill,
                attributes={
                    "zv_array": "object_attribute",
                    "name": name,
                    "dtype": values.dtype.name,
                    "shape": list(values.shape),
                    "fill_sentinel_meaning": "absent",
                },
                compressor=spec.compressor,
            )
    level.meta.vertex_count = int(sum(s["rows"] for s in summaries))
    level.meta.arrays_present = present
    level.meta.fragments_tile = True  # every cell's fragments are ranges tiling its rows
    level.write_metadata()
    return {"cells": len(keys), "rows": level.meta.vertex_count}


# ---------------------------------------------------------------------------
# the public entry point
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class WriteResult:
    """What a write did: where, how many records and cells, and the plan it ran."""

    url: str
    kind: str
    num_vertices: int
    num_cells: int
    num_tasks: int
    num_objects: int

    def __str__(self) -> str:
        return (
            f"{self.kind}: {self.num_vertices} vertices in {self.num_cells} chunks "
            f"({self.num_tasks} write tasks) -> {self.url}"
        )


def write_points(
    url: str,
    positions: Any,
    *,
    chunk_shape: Sequence[float] | float,
    bin_shape: Sequence[float] | float | None = None,
    bounds: Any = None,
    object_ids: Any = None,
    attributes: Mapping[str, Any] | None = None,
    object_attributes: Mapping[str, Any] | None = None,
    compressor: str | dict[str, Any] | None = "zstd",
    storage_options: Mapping[str, Any] | None = None,
    overwrite: bool = False,
) -> WriteResult:
    """Write a point cloud as a Dask graph on the current scheduler.

    ``positions`` (n, D) float32/float64, numpy or dask.  Without ``object_ids``
    each chunk holds one fragment per bin; with them, one fragment per object, and
    an object index (layout v1, row = id) is written.  Every input check, the
    bounds check and the 4 GiB cell check run before anything is written.
    """
    spec, blocks = normalise_inputs(
        positions,
        chunk_shape=chunk_shape,
        bin_shape=bin_shape,
        bounds=bounds,
        object_ids=object_ids,
        attributes=attributes,
        compressor=compressor,
    )
    obj_attrs = check_object_attributes(object_attributes, 0 if spec.has_ids else None)
    storage = Storage(url, storage_options)
    storage.check_reachable()
    plan = plan_points(spec, blocks)
    for name, values in obj_attrs.items():
        if values.shape[0] != plan.num_objects:
            raise InputError(
                f"object attribute {name!r} has {values.shape[0]} rows; expected {plan.num_objects} "
                "(one per object id 0..max id)"
            )
    level, arrays = init_points_store(storage, spec, plan, overwrite=overwrite)

    routed = [
        dask.delayed(_route_block)(p, i, a, plan, spec) for p, i, a in zip(blocks.pos, blocks.ids, blocks.attrs)
    ]
    owners = [
        dask.delayed(_write_owner)(arrays, spec, plan, k, *[dask.delayed(_piece)(r, k) for r in routed])
        for k in range(len(plan.owners))
    ]
    reconcile = dask.delayed(_reconcile)(level, arrays, spec, plan, obj_attrs, *owners)
    (done,) = dask.compute(reconcile)
    return WriteResult(storage.url, "point_cloud", done["rows"], done["cells"], len(plan.owners), plan.num_objects)
