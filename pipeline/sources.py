"""Input tables for ``zv build``: Parquet, CSV and NPZ, local or ``s3://``.

Tables are read lazily in partitions with dask.dataframe; vertex columns become
dask arrays, so no worker holds the whole input and the writers' own shuffle routes
rows to their cell owners.  Record tables that name vertices by an id column are
resolved to vertex rows on the cluster: a broadcast join against the sorted vertex
ids, or a dataframe merge when the vertex table is too large to broadcast.

Column conventions (all tables; the names and the columns each kind needs are in :mod:`pipeline.columns`):

* points / vertices: ``x, y[, z]``, optional ``object_id``, every other numeric
  column a per-vertex attribute;
* graph vertices additionally ``id``; edges ``src, dst`` plus attribute columns;
* mesh faces: ``a, b, c[, d...]`` (vertex ids);
* polylines / streamlines: vertices with ``line`` (polyline id) and ``order``;
* skeleton nodes: ``id, parent`` (parent -1 for roots).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import dask
import dask.array as da
import dask.dataframe as dd
import numpy as np

from pipeline.columns import AXES, RESERVED, attribute_names, numeric
from zarr_vectors import config
from zarr_vectors.errors import InputError


@dataclass
class VertexTable:
    """Vertex columns as dask arrays (row order = input order)."""

    positions: da.Array
    object_ids: da.Array | None = None
    attributes: dict[str, da.Array] = field(default_factory=dict)
    ids: da.Array | None = None  # the ``id`` column, when the kind names vertices by id


def input_format(path: str) -> str:
    """``parquet``, ``csv`` or ``npz`` from the name (a local directory is a Parquet dataset)."""
    lower = path.lower()
    if lower.endswith((".parquet", ".pq")) or os.path.isdir(path):
        return "parquet"
    if lower.endswith((".csv", ".csv.gz", ".tsv")):
        return "csv"
    if lower.endswith(".npz"):
        return "npz"
    raise InputError(f"{path!r}: unknown input format (expected .parquet, .csv or .npz)")


def read_table(paths: str | Sequence[str], *, storage_options: Mapping[str, Any] | None = None) -> dd.DataFrame:
    """One lazy dataframe from Parquet / CSV / NPZ files (all of one format)."""
    paths = [paths] if isinstance(paths, str) else list(paths)
    if not paths:
        raise InputError("no input files")
    kinds = {input_format(p) for p in paths}
    if len(kinds) != 1:
        raise InputError(f"inputs mix formats {sorted(kinds)}: give one format per table")
    kind = kinds.pop()
    remote = all("://" in p and not p.startswith("file://") for p in paths)
    opts = dict(storage_options or {}) if remote else {}  # S3 options do not apply to local files
    try:
        if kind == "parquet":
            return dd.read_parquet(paths, storage_options=opts or None, split_row_groups="adaptive",
                                   blocksize=config.get("sources.parquet-blocksize"))
        if kind == "csv":
            return dd.read_csv(paths, storage_options=opts or None, blocksize=config.get("sources.csv-blocksize"))
    except FileNotFoundError as exc:
        raise InputError(f"input not found: {exc}") from exc
    frames = []
    for p in paths:
        import fsspec

        with fsspec.open(p, "rb", **opts) as f, np.load(f) as data:
            columns = {}
            for key in data.files:
                arr = data[key]
                if arr.ndim == 2 and key == "positions":
                    columns.update({AXES[i] if arr.shape[1] <= 3 else f"d{i}": arr[:, i] for i in range(arr.shape[1])})
                elif arr.ndim == 1:
                    columns[key] = arr
                else:
                    raise InputError(f"{p}: array {key!r} has shape {arr.shape}; NPZ inputs hold 1-D columns or 'positions'")
            import pandas as pd

            frames.append(dd.from_pandas(pd.DataFrame(columns), npartitions=max(1, len(next(iter(columns.values()))) // 1_000_000)))
    return dd.concat(frames) if len(frames) > 1 else frames[0]


def _require(df: dd.DataFrame, columns: Sequence[str], what: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputError(f"{what} table lacks column(s) {missing}; it has {list(df.columns)}")


def _column_block(part: Any, names: Sequence[str], dtype: Any) -> np.ndarray:
    """One partition's columns as a numpy block: (rows,) for one name, (rows, k) for several."""
    if len(names) == 1:
        return part[names[0]].to_numpy(dtype=dtype)
    return part[list(names)].to_numpy(dtype=dtype)


def vertex_table(df: dd.DataFrame, *, what: str = "vertex", with_ids: bool = False) -> VertexTable:
    """Split a vertex dataframe into positions, object ids and attribute arrays.

    Every array is built from the partitions of *one* ``to_delayed`` of the frame,
    whose lengths are counted from those same partitions.  Deriving each column with
    ``df[name].to_dask_array(lengths=...)`` instead is wrong: dask-expr re-plans a
    column projection, and a Parquet read of fewer columns may fuse files into fewer
    partitions than the lengths were counted on (a graph with missing keys).
    """
    axes = [a for a in AXES if a in df.columns]
    if len(axes) < 2 and "x" not in df.columns:
        raise InputError(f"{what} table needs coordinate columns x, y[, z]; it has {list(df.columns)}")
    if with_ids:
        _require(df, ["id"], what)
    attr_names = attribute_names({c: df[c].dtype for c in df.columns})
    extra = (["object_id"] if "object_id" in df.columns else []) + (["id"] if with_ids else [])
    parts = df[axes + attr_names + extra].to_delayed()
    lengths = [int(n) for n in dask.compute(*[dask.delayed(len)(p) for p in parts])]  # one pass

    def column(names: Sequence[str], dtype: Any) -> da.Array:
        dtype = np.dtype(dtype)
        width = () if len(names) == 1 else (len(names),)
        blocks = [
            da.from_delayed(dask.delayed(_column_block)(p, list(names), dtype), shape=(n,) + width, dtype=dtype)
            for p, n in zip(parts, lengths)
        ]
        return da.concatenate(blocks, axis=0) if len(blocks) > 1 else blocks[0]

    pos_dtype = np.float32 if all(df[a].dtype == np.float32 for a in axes) else np.float64
    return VertexTable(
        positions=column(axes, pos_dtype),
        object_ids=column(["object_id"], np.int64) if "object_id" in df.columns else None,
        attributes={c: column([c], df[c].dtype) for c in attr_names},
        ids=column(["id"], np.int64) if with_ids else None,
    )


@dataclass
class PolylineTable:
    """Polyline vertices ordered by (line, order), and the polylines' CSR offsets into them."""

    vertices: VertexTable
    offsets: np.ndarray  # (lines + 1,) int64


def _ambiguous(what: str, line: Any, order: Any) -> InputError:
    return InputError(f"{what} {line} has two vertices with order {order!r}: the order is ambiguous")


def _line_runs(part: Any, what: str) -> tuple[int, tuple[Any, Any] | None, tuple[Any, Any] | None, np.ndarray]:
    """One sorted partition: its length, first and last (line, order), where a new line starts."""
    line, order = part["line"].to_numpy(), part["order"].to_numpy()
    if line.dtype.kind not in "iu":
        raise InputError(f"{what} column 'line' must hold integer polyline ids, found {line.dtype}")
    if order.dtype.kind not in "iuf" or (order.dtype.kind == "f" and not np.isfinite(order).all()):
        raise InputError(f"{what} column 'order' must hold finite numbers, found {order.dtype} with gaps or NaN")
    if len(line) == 0:
        return 0, None, None, np.zeros(0, np.int64)
    same_line = line[1:] == line[:-1]
    repeated = np.flatnonzero(same_line & (order[1:] == order[:-1]))
    if repeated.size:
        k = int(repeated[0])
        raise _ambiguous(what, int(line[k]), order[k].item())
    ends = (line[0].item(), order[0].item()), (line[-1].item(), order[-1].item())
    return len(line), ends[0], ends[1], np.flatnonzero(~same_line) + 1


def polyline_table(df: dd.DataFrame, *, what: str = "polyline") -> PolylineTable:
    """Vertices sorted by (``line``, ``order``) on the cluster, and the polyline offsets.

    The sort is dask's (sample, shuffle, sort within partitions); the sorted partitions
    are kept in cluster memory (spilled if need be) so that counting them and reading
    their columns does not sort again.  Only the offsets -- one integer per polyline --
    reach the client.
    """
    from zarr_vectors.execution import runner

    _require(df, ["line", "order"], what)
    ordered = df.sort_values(["line", "order"])
    parts = runner.persist(f"sort {what} vertices", *ordered.to_delayed())
    runs = runner.compute(f"count {what}s", *[dask.delayed(_line_runs)(p, what) for p in parts])
    starts, last, breaks = 0, None, [np.zeros(1, np.int64)]
    for length, first, final, local in runs:
        if not length:
            continue
        if last is not None:
            if first == last:
                raise _ambiguous(what, *first)
            if first[0] != last[0]:
                breaks.append(np.asarray([starts], np.int64))
        breaks.append(local.astype(np.int64) + starts)
        starts, last = starts + length, final
    offsets = np.concatenate(breaks + [np.asarray([starts], np.int64)]) if starts else np.zeros(1, np.int64)
    return PolylineTable(vertex_table(dd.from_delayed(parts, meta=ordered._meta), what=what), offsets)


@dataclass(frozen=True)
class IdLookup:
    """Vertex id -> input row: a direct table over ``[low, low + len(table))`` when the
    ids are dense enough (-1 marks a hole), else the ids sorted with their rows."""

    low: int
    table: np.ndarray | None
    ids: np.ndarray | None
    rows: np.ndarray | None

    def rows_of(self, named: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rows, found) of an integer array of ids."""
        if self.table is not None:
            offset = named - self.low
            inside = (offset >= 0) & (offset < len(self.table))
            rows = self.table[np.where(inside, offset, 0)] if len(self.table) else np.full(named.shape, -1)
            return rows, inside & (rows >= 0)
        assert self.ids is not None and self.rows is not None
        at = np.minimum(np.searchsorted(self.ids, named), len(self.ids) - 1)
        return self.rows[at], self.ids[at] == named


def _id_lookup(dense_span: int, *blocks: np.ndarray) -> IdLookup:
    ids = np.concatenate(blocks).astype(np.int64, copy=False) if blocks else np.zeros(0, np.int64)
    if ids.size == 0:
        return IdLookup(0, np.zeros(0, np.int64), None, None)
    low, high = int(ids.min()), int(ids.max())
    if high - low < dense_span * ids.size:  # dense enough for a direct table
        table = np.full(high - low + 1, -1, dtype=np.int64)
        table[ids - low] = np.arange(ids.size)
        if int((table >= 0).sum()) != ids.size:  # a later row overwrote an earlier one
            counts = np.bincount(ids - low)
            raise InputError(f"vertex ids are not unique: id {low + int(np.argmax(counts > 1))} appears more than once")
        return IdLookup(low, table, None, None)
    order = np.argsort(ids, kind="stable")
    ids = ids[order]
    same = np.flatnonzero(ids[1:] == ids[:-1])
    if same.size:
        raise InputError(f"vertex ids are not unique: id {int(ids[same[0]])} appears more than once")
    return IdLookup(low, None, ids, order.astype(np.int64))


def parent_rows(ids: np.ndarray, parents: np.ndarray) -> np.ndarray:
    """Skeleton ``parent`` ids -> parent rows (-1 for roots, any negative id), vectorised."""
    if ids.dtype.kind not in "iu" or parents.dtype.kind not in "iu":
        raise InputError(f"skeleton columns 'id' and 'parent' must hold integers, found {ids.dtype} and {parents.dtype}")
    lookup = _id_lookup(config.get("sources.dense-id-span"), ids)
    out = np.full(len(parents), -1, dtype=np.int64)
    linked = parents >= 0
    rows, found = lookup.rows_of(parents[linked].astype(np.int64, copy=False))
    if not found.all():
        raise InputError(f"skeleton parent id {int(parents[linked][np.argmin(found)])} is not a node id")
    out[linked] = rows
    return out


def _resolve_block(part: Any, lookup: IdLookup, columns: Sequence[str], attrs: Sequence[str], first_row: int, what: str) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """One record partition: id columns -> input vertex rows, attribute columns as arrays."""
    named = part[list(columns)].to_numpy()
    if named.dtype.kind not in "iu":
        raise InputError(f"{what} columns {list(columns)} must hold integer vertex ids, found {named.dtype}")
    rows, found = lookup.rows_of(named.astype(np.int64, copy=False))
    if not found.all():
        row = int(np.argmax(~found.all(axis=1)))
        raise InputError(f"{what} row {first_row + row} names vertex id(s) {named[row].tolist()} not in the vertex table")
    return rows, {c: part[c].to_numpy() for c in attrs}


def resolve_ids(
    records: dd.DataFrame, vertices: VertexTable, columns: Sequence[str], *, what: str
) -> tuple[da.Array, dict[str, da.Array]]:
    """Record columns naming vertex ids -> input vertex indices, lazily, on the cluster.

    Returns the (m, len(columns)) index array in the records' input order, one block
    per record partition, and the records' remaining numeric columns (attributes),
    aligned block for block.  Nothing is gathered on the client: an unknown or
    repeated id raises :class:`InputError` when the blocks are computed (the writers
    check records in a stage of their own, before anything is written).
    """
    _require(records, columns, what)
    if vertices.ids is None:
        raise InputError("the vertex table has no id column; records can only name vertices by id")
    attrs = [c for c in records.columns if c not in RESERVED and c not in columns and numeric(records[c].dtype)]
    if vertices.ids.shape[0] > config.get("sources.broadcast-lookup-rows"):
        return _resolve_by_merge(records, vertices, columns, attrs, what=what)
    lookup = dask.delayed(_id_lookup)(config.get("sources.dense-id-span"), *vertices.ids.to_delayed().ravel())
    parts = records[list(columns) + attrs].to_delayed()
    lengths = [int(n) for n in dask.compute(*[dask.delayed(len)(p) for p in parts])]
    starts = np.r_[0, np.cumsum(lengths)].astype(int)
    resolved = [
        dask.delayed(_resolve_block, nout=2)(p, lookup, list(columns), attrs, int(a), what)
        for p, a in zip(parts, starts[:-1])
    ]
    width = len(columns)
    index = da.concatenate(
        [da.from_delayed(r[0], shape=(k, width), dtype=np.int64) for r, k in zip(resolved, lengths)], axis=0
    )
    attr_arrays = {
        c: da.concatenate(
            [da.from_delayed(r[1][c], shape=(k,), dtype=records[c].dtype) for r, k in zip(resolved, lengths)]
        )
        for c in attrs
    }
    return index, attr_arrays


def _resolve_by_merge(
    records: dd.DataFrame, vertices: VertexTable, columns: Sequence[str], attrs: Sequence[str], *, what: str
) -> tuple[da.Array, dict[str, da.Array]]:
    """The shuffle join for vertex tables too large to broadcast: merge on id, then sort by record."""
    if int(dd.from_dask_array(vertices.ids).nunique().compute()) != vertices.ids.shape[0]:
        raise InputError("vertex ids are not unique")
    lookup = dd.from_dask_array(
        da.stack([vertices.ids, da.arange(vertices.ids.shape[0], chunks=vertices.ids.chunks[0], dtype=np.int64)], axis=1),
        columns=["id", "_row"],
    )
    merged = records.assign(_rec=1).assign(_rec=lambda d: d["_rec"].cumsum() - 1)
    for c in columns:
        merged = merged.merge(lookup.rename(columns={"id": c, "_row": f"_idx_{c}"}), on=c, how="left")
    merged = merged.sort_values("_rec")
    idx_cols = [f"_idx_{c}" for c in columns]

    def checked(part: Any) -> Any:
        missing = part[idx_cols].isna().any(axis=1)
        if missing.any():
            first = part[missing].iloc[:1]
            named = first[list(columns)].to_numpy()[0].tolist()
            raise InputError(f"{what} row {int(first['_rec'].iloc[0])} names vertex id(s) {named} not in the vertex table")
        return part

    merged = merged.map_partitions(checked, meta=merged._meta)
    index = merged[idx_cols].astype(np.int64).to_dask_array(lengths=True)
    return index, {c: merged[c].to_dask_array(lengths=True) for c in attrs}
