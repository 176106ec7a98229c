"""Inputs of ``zv build``: files in any registered format (zarr_vectors.io.registry), local or ``s3://``.

Formats with a partitioned reader (Parquet, CSV, NPZ, edge lists, LAS/LAZ) are read
lazily with dask.dataframe; vertex columns become dask arrays, so no worker holds the
whole input and the writers' own shuffle routes rows to their cell owners.  Record
tables that name vertices by an id column are resolved to vertex rows on the cluster:
a broadcast join against the sorted vertex ids, or a dataframe merge when the vertex
table is too large to broadcast.  Other formats are read whole, in the client, by
their reader (:func:`load_geometry`).

Which column is what comes from a :class:`~zarr_vectors.io.columns.ColumnMap` (the
``zv build`` column options); the defaults (all tables):

* points / vertices: ``x, y[, z]``, optional ``object_id``, every other numeric
  column a per-vertex attribute;
* graph vertices additionally ``id``; edges ``src, dst`` plus attribute columns;
* mesh faces: ``a, b, c[, d...]`` (vertex ids);
* polylines / streamlines: vertices with ``line`` (polyline id) and ``order``;
* skeleton nodes: ``id, parent`` (parent -1 for roots).

Graph, mesh and skeleton vertex ids are kept as the vertex attribute ``id``, so results
map back to input rows.  Columns that cannot be stored are reported (``dropped``).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import dask
import dask.array as da
import dask.dataframe as dd
import numpy as np

from zarr_vectors import config
from zarr_vectors.errors import InputError
from zarr_vectors.format.headers import with_count, without_file_details
from zarr_vectors.io import registry
from zarr_vectors.io.columns import ID_ATTRIBUTE, ColumnMap, dropped_warning
from zarr_vectors.io.tables import column_values
from zarr_vectors.io.types import Geometry
from zarr_vectors.store.backend import local_path


@dataclass
class VertexTable:
    """Vertex columns as dask arrays (row order = input order)."""

    positions: da.Array
    object_ids: da.Array | None = None
    attributes: dict[str, da.Array] = field(default_factory=dict)
    ids: da.Array | None = None  # the id column, when the kind names vertices by id (also attribute ``id``)
    dropped: list[str] = field(default_factory=list)  # columns that cannot be stored


def read_table(paths: str | Sequence[str], *, storage_options: Mapping[str, Any] | None = None,
               kind: str | None = None) -> dd.DataFrame:
    """One lazy dataframe from files of one partitioned format (Parquet, CSV, NPZ, edge list, LAS/LAZ)."""
    paths = [paths] if isinstance(paths, str) else list(paths)
    if not paths:
        raise InputError("no input files")
    found = {registry.format_for(p, kind).name: p for p in paths}
    if len(found) != 1:
        raise InputError(f"inputs mix formats {sorted(found)}: give one format per table")
    fmt = registry.format_for(paths[0], kind)
    reader = registry.frame_reader(fmt)
    if reader is None:
        raise InputError(f"{paths[0]!r}: a {fmt.name} file is read whole, not as a table")
    return reader(paths, storage_options=storage_options)


_LAST: dict[tuple, Geometry] = {}  # the last whole-file inputs read: preflight's, reused by the write stage


def load_geometry(paths: Sequence[str], kind: str, columns: ColumnMap | None = None,
                  storage_options: Mapping[str, Any] | None = None) -> Geometry:
    """Files of a whole-file format (GraphML, meshes, SWC, streamlines...) as one geometry.

    Several files are combined by :func:`concat` (objects kept apart, indices shifted).
    Input ids become the attribute ``id``.  A local file unchanged since the
    last call is not read again: preflight reads it, before any cluster starts, and the
    write stage reuses the result.
    """
    keys = [(p, _stamp(p), kind, repr(columns), repr(sorted((storage_options or {}).items()))) for p in paths]
    unchanged = all(k[1] is not None for k in keys)
    if unchanged and tuple(keys) in _LAST:  # combined once: what combining warns of is said once
        return _LAST[tuple(keys)]
    parts = [_LAST.get(k) if k[1] is not None else None for k in keys]
    parts = [g if g is not None else _read_whole(p, kind, columns, storage_options) for p, g in zip(paths, parts)]
    _LAST.clear()
    _LAST.update(zip(keys, parts))
    combined = parts[0] if len(parts) == 1 else concat(parts, paths)
    if unchanged:
        _LAST[tuple(keys)] = combined
    return combined


def _read_whole(path: str, kind: str, columns: ColumnMap | None, storage_options: Mapping[str, Any] | None
                ) -> Geometry:
    """One file through its format's reader, given the column mapping and storage options if it takes them."""
    import inspect

    fmt = registry.format_for(path, kind)
    if fmt.read is None:
        raise InputError(f"{path!r}: {fmt.name} files can be written, not read")
    takes = inspect.signature(fmt.read).parameters
    options = {name: value for name, value in (("columns", columns), ("storage_options", storage_options))
               if value is not None and name in takes}
    g = fmt.read(path, **options)
    if g.ids is not None and ID_ATTRIBUTE not in g.attributes:
        g.attributes[ID_ATTRIBUTE] = np.asarray(g.ids)
    return g


def _stamp(path: str) -> tuple[float, int] | None:
    local = local_path(path)
    if local is None:
        return None
    st = os.stat(local)
    return st.st_mtime, st.st_size


def concat(parts: Sequence[Geometry], paths: Sequence[str]) -> Geometry:
    """Several files' geometry as one, indices shifted.

    Object ids: ids from the data (a column) are kept, so one object may span files; a
    file without ids is one object, and objects its reader numbered (SWC trees,
    tractogram lines) are numbered on from the files before it -- two SWC files' first
    trees are two objects.  Object attributes travel with their objects.
    """
    paths = list(paths)
    names = _same_names([g.attributes for g in parts], "attributes", paths)
    own = [g.object_ids is not None and not g.numbered_objects for g in parts]
    if any(own) and not all(own):
        raise InputError(f"some inputs of {paths} carry object ids in their data and some do not")
    starts = [0] * len(parts) if all(own) else _object_starts(parts)
    sizes = np.cumsum([0] + [len(g.positions) for g in parts])
    out = Geometry(
        kind=parts[0].kind,
        positions=np.concatenate([g.positions for g in parts]),
        object_ids=np.concatenate([np.full(len(g.positions), s, np.int64) if g.object_ids is None
                                   else np.asarray(g.object_ids, np.int64) + s for g, s in zip(parts, starts)]),
        attributes={k: np.concatenate([g.attributes[k] for g in parts]) for k in names},
        axes=parts[0].axes,
        dropped=tuple(dict.fromkeys(d for g in parts for d in g.dropped)),
    )
    _concat_objects(out, parts, starts, paths)
    for name in ("edges", "faces"):
        held = [getattr(g, name) is not None for g in parts]
        if any(held) and not all(held):
            raise InputError(f"some inputs of {paths} hold {name} and some do not")
        if all(held):
            setattr(out, name, np.concatenate([getattr(g, name) + s for g, s in zip(parts, sizes)]))
            record_names = _same_names([g.edge_attributes for g in parts], f"{name[:-1]} attributes", paths)
            out.edge_attributes = {k: np.concatenate([g.edge_attributes[k] for g in parts]) for k in record_names}
    if all(g.offsets is not None for g in parts):
        out.offsets = np.concatenate([[0]] + [np.asarray(g.offsets[1:]) + s for g, s in zip(parts, sizes)])
    out.headers = _shared_headers(parts, paths, len(out.offsets) - 1 if out.offsets is not None else 0)
    return out


def _shared_headers(parts: Sequence[Geometry], paths: list[str], lines: int) -> dict[str, dict[str, Any]]:
    """The files' headers when every file has the same (a TRK's count made the files' total); else
    none, with a warning: the positions are combined as they are, but no one header (reference
    space, volume geometry) describes them all."""
    if not any(g.headers for g in parts):
        return {}
    alike = [{name: without_file_details(h) for name, h in g.headers.items()} for g in parts]
    if any(a != alike[0] for a in alike[1:]):
        warnings.warn(f"inputs {paths} do not all have the same file header (reference space, volume geometry): "
                      "none is kept, so an export will need one given", UserWarning, stacklevel=3)
        return {}
    return {name: with_count(header, lines) for name, header in parts[0].headers.items()}


def _object_starts(parts: Sequence[Geometry]) -> list[int]:
    """Where each file's object numbers start: past every object of the files before it."""
    starts, start = [], 0
    for g in parts:
        starts.append(start)
        if g.object_ids is None:
            start += 1
            continue
        counts = [int(np.max(a)) + 1 for a in (g.object_ids, g.objects) if a is not None and len(a)]
        start += max(counts, default=0)
    return starts


def _concat_objects(out: Geometry, parts: Sequence[Geometry], starts: Sequence[int], paths: list[str]) -> None:
    """The files' object rows and object attributes, shifted as their object ids were."""
    names = _same_names([g.object_attributes for g in parts], "object attributes", paths)
    if not names:
        return
    if any(g.objects is None for g in parts):
        raise InputError(f"inputs {paths}: object attributes without the objects they belong to")
    objects = np.concatenate([np.asarray(g.objects, np.int64) + s for g, s in zip(parts, starts)])
    unique, counts = np.unique(objects, return_counts=True)
    if (counts > 1).any():
        raise InputError(f"inputs {paths}: object {unique[counts > 1][0]} has object attributes in more than one "
                         "file; they cannot be combined")
    out.objects = objects
    out.object_attributes = {k: np.concatenate([np.asarray(g.object_attributes[k]) for g in parts]) for k in names}


def _same_names(mappings: Sequence[Mapping[str, Any]], what: str, paths: list[str]) -> list[str]:
    """The names every file has (sorted); files that differ are refused, listing each file's."""
    names = [sorted(m) for m in mappings]
    if any(n != names[0] for n in names):
        raise InputError(f"inputs {paths} have different {what} {names}")
    return names[0]


def _column_block(part: Any, names: Sequence[str], dtype: Any, rows: int) -> np.ndarray:
    """One partition's columns as a numpy block: (rows,) for one name, (rows, k) for several
    (a value the dtype cannot hold is an InputError naming the column: :func:`column_values`)."""
    _check_rows(part, rows)
    return column_values(part, names, dtype)


def _check_rows(part: Any, rows: int) -> None:
    """A partition has the rows its arrays were planned with (from its file's footer, or counted)."""
    if len(part) != rows:
        raise InputError(f"an input partition with columns {list(part.columns)} has {len(part)} rows where {rows} "
                         "were planned: the input changed while the job ran, or its Parquet footers (or _metadata "
                         "file) disagree with its data (setting zarr_vectors.sources.lengths-from-metadata to False "
                         "counts the rows instead)")


def partition_lengths(frame: dd.DataFrame, parts: Sequence[Any]) -> list[int]:
    """Rows of each of ``parts`` (``frame.to_delayed()``): from the Parquet footers when dask knows
    them without reading, else counted in one pass over the input.

    The footers save that pass (a 10^7-point Parquet file: 4 ms instead of 0.45 s on two
    threads, and one graph less before the write).  dask has no public call for them: its
    ``Lengths`` expression becomes a literal when its reader knows the lengths.  Anything
    else -- another reader, another partition count than ``parts``, a dask without it, any error
    asking it -- counts the rows, and every task checks its partition's rows against the plan
    (:func:`_check_rows`), so lengths that were wrong fail the build rather than its bytes.
    """
    if config.get("sources.lengths-from-metadata"):
        try:
            from dask.dataframe.dask_expr._expr import Lengths, Literal

            known = Lengths(frame.expr).optimize()
            if isinstance(known, Literal) and isinstance(known.value, tuple) and len(known.value) == len(parts):
                return [int(n) for n in known.value]
        except Exception:  # noqa: BLE001 - another dask, or footers it could not read: the rows are counted
            pass
    return [int(n) for n in dask.compute(*[dask.delayed(len)(p) for p in parts])]


@dataclass(frozen=True)
class VertexColumns:
    """Which vertex-table columns are what (decided from the dataframe's schema alone)."""

    axes: list[str]
    object_id: str | None
    id: str | None
    attributes: list[str]
    dropped: list[str]


def vertex_columns(df: dd.DataFrame, columns: ColumnMap, *, what: str, with_ids: bool, taken: Sequence[str] = ()
                   ) -> VertexColumns:
    """The mapping applied to a vertex table's schema; raises InputError naming a missing column."""
    names = [str(c) for c in df.columns]
    axes = columns.axes(names, f"{what} table")
    oid = columns.named("object_id", names, f"{what} table")
    vid = columns.named("id", names, f"{what} table", required=with_ids)
    used = axes + [c for c in (oid, vid) if c] + list(taken)
    attrs, dropped = columns.attributes(dict(df.dtypes.items()), used, f"{what} table")
    return VertexColumns(axes, oid, vid, attrs, dropped)


def vertex_table(df: dd.DataFrame, *, what: str = "vertex", with_ids: bool = False,
                 columns: ColumnMap | None = None, taken: Sequence[str] = ()) -> VertexTable:
    """Split a vertex dataframe into positions, object ids and attribute arrays.

    ``taken`` names columns another role uses (a skeleton's parent, a polyline's line
    and order).  With ``with_ids`` the id column is required, and kept as attribute ``id``.

    Every array is built from the partitions of *one* ``to_delayed`` of the frame,
    whose lengths are counted from those same partitions.  Deriving each column with
    ``df[name].to_dask_array(lengths=...)`` instead is wrong: dask-expr re-plans a
    column projection, and a Parquet read of fewer columns may fuse files into fewer
    partitions than the lengths were counted on (a graph with missing keys).
    """
    roles = vertex_columns(df, columns or ColumnMap(), what=what, with_ids=with_ids, taken=taken)
    axes, attr_names = roles.axes, roles.attributes
    if roles.id is not None and roles.id != ID_ATTRIBUTE and ID_ATTRIBUTE in attr_names:
        raise InputError(f"{what} table: column {ID_ATTRIBUTE!r} would clash with the ids of {roles.id!r} kept "
                         f"as attribute {ID_ATTRIBUTE!r}; leave it out with --columns")
    extra = [c for c in (roles.object_id, roles.id) if c]
    frame = df[list(dict.fromkeys(axes + attr_names + extra))]
    parts = frame.to_delayed()
    lengths = partition_lengths(frame, parts)

    def column(names: Sequence[str], dtype: Any) -> da.Array:
        dtype = np.dtype(dtype)
        width = () if len(names) == 1 else (len(names),)
        blocks = [
            da.from_delayed(dask.delayed(_column_block)(p, list(names), dtype, n), shape=(n,) + width, dtype=dtype)
            for p, n in zip(parts, lengths)
        ]
        return da.concatenate(blocks, axis=0) if len(blocks) > 1 else blocks[0]

    pos_dtype = np.float32 if all(df[a].dtype == np.float32 for a in axes) else np.float64
    attributes = {c: column([c], df[c].dtype) for c in attr_names}
    if roles.id is not None:
        attributes[ID_ATTRIBUTE] = column([roles.id], df[roles.id].dtype)
    return VertexTable(
        positions=column(axes, pos_dtype),
        object_ids=column([roles.object_id], np.int64) if roles.object_id else None,
        attributes=attributes,
        ids=column([roles.id], np.int64) if with_ids else None,
        dropped=roles.dropped,
    )


def warnings_for(what: str, dropped: Sequence[str], df: Any = None) -> list[str]:
    """The warning lines for dropped columns (none when nothing was dropped)."""
    return [dropped_warning(what, dropped, dict(df.dtypes.items()) if df is not None else None)] if dropped else []


@dataclass
class PolylineTable:
    """Polyline vertices ordered by (line, order), and the polylines' CSR offsets into them."""

    vertices: VertexTable
    offsets: np.ndarray  # (lines + 1,) int64


def _ambiguous(what: str, line: Any, order: Any) -> InputError:
    return InputError(f"{what} {line} has two vertices with order {order!r}: the order is ambiguous")


def _line_runs(part: Any, what: str, line_column: str = "line", order_column: str = "order"
               ) -> tuple[int, tuple[Any, Any] | None, tuple[Any, Any] | None, np.ndarray]:
    """One sorted partition: its length, first and last (line, order), where a new line starts."""
    line, order = part[line_column].to_numpy(), part[order_column].to_numpy()
    if line.dtype.kind not in "iu":
        raise InputError(f"{what} column {line_column!r} must hold integer polyline ids, found {line.dtype}")
    if order.dtype.kind not in "iuf" or (order.dtype.kind == "f" and not np.isfinite(order).all()):
        raise InputError(f"{what} column {order_column!r} must hold finite numbers, found {order.dtype} with gaps "
                         "or NaN")
    if len(line) == 0:
        return 0, None, None, np.zeros(0, np.int64)
    same_line = line[1:] == line[:-1]
    repeated = np.flatnonzero(same_line & (order[1:] == order[:-1]))
    if repeated.size:
        k = int(repeated[0])
        raise _ambiguous(what, int(line[k]), order[k].item())
    ends = (line[0].item(), order[0].item()), (line[-1].item(), order[-1].item())
    return len(line), ends[0], ends[1], np.flatnonzero(~same_line) + 1


def polyline_table(df: dd.DataFrame, *, what: str = "polyline", columns: ColumnMap | None = None) -> PolylineTable:
    """Vertices sorted by (``line``, ``order``) on the cluster, and the polyline offsets.

    The sort is dask's (sample, shuffle, sort within partitions); the sorted partitions
    are kept in cluster memory (spilled if need be) so that counting them and reading
    their columns does not sort again.  Only the offsets -- one integer per polyline --
    reach the client.
    """
    from zarr_vectors.execution import runner

    columns = columns or ColumnMap()
    names = [str(c) for c in df.columns]
    keys = [columns.named(role, names, f"{what} table", required=True) for role in ("line", "order")]
    ordered = df.sort_values(keys)
    parts = runner.persist(f"sort {what} vertices", *ordered.to_delayed())
    runs = runner.compute(f"count {what}s", *[dask.delayed(_line_runs)(p, what, *keys) for p in parts])
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
    vertices = vertex_table(dd.from_delayed(parts, meta=ordered._meta), what=what, columns=columns, taken=keys)
    return PolylineTable(vertices, offsets)


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
    """Skeleton ``parent`` ids -> parent rows (-1 for roots, any negative id), vectorised.  A negative
    vertex id is refused: its children's parent would read as a root, their edges lost."""
    if ids.dtype.kind not in "iu" or parents.dtype.kind not in "iu":
        raise InputError(f"skeleton columns 'id' and 'parent' must hold integers, found {ids.dtype} and {parents.dtype}")
    if len(ids) and ids.min() < 0:
        raise InputError(f"skeleton vertex id {int(ids.min())} is negative; a negative parent marks a root, so no "
                         "vertex could name it as its parent")
    lookup = _id_lookup(config.get("sources.dense-id-span"), ids)
    out = np.full(len(parents), -1, dtype=np.int64)
    linked = parents >= 0
    rows, found = lookup.rows_of(parents[linked].astype(np.int64, copy=False))
    if not found.all():
        raise InputError(f"skeleton parent id {int(parents[linked][np.argmin(found)])} is not a node id")
    out[linked] = rows
    return out


def record_attributes(records: dd.DataFrame, columns: Sequence[str], what: str) -> tuple[list[str], list[str]]:
    """(attribute columns, dropped columns) of a record table whose ``columns`` name vertex ids."""
    names = [str(c) for c in records.columns]
    missing = [c for c in columns if c not in names]
    if missing:
        raise InputError(f"{what} table lacks column(s) {missing}; it has {names}")
    return ColumnMap().attributes(dict(records.dtypes.items()), list(columns), f"{what} table")


def _resolve_block(part: Any, lookup: IdLookup, columns: Sequence[str], attrs: Sequence[str], first_row: int,
                   rows: int, what: str) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """One record partition: id columns -> input vertex rows, attribute columns as arrays."""
    _check_rows(part, rows)
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
    attrs = record_attributes(records, columns, what)[0]
    if vertices.ids is None:
        raise InputError("the vertex table has no id column; records can only name vertices by id")
    if vertices.ids.shape[0] > config.get("sources.broadcast-lookup-rows"):
        return _resolve_by_merge(records, vertices, columns, attrs, what=what)
    lookup = dask.delayed(_id_lookup)(config.get("sources.dense-id-span"), *vertices.ids.to_delayed().ravel())
    frame = records[list(columns) + attrs]
    parts = frame.to_delayed()
    lengths = partition_lengths(frame, parts)
    starts = np.r_[0, np.cumsum(lengths)].astype(int)
    resolved = [
        dask.delayed(_resolve_block, nout=2)(p, lookup, list(columns), attrs, int(a), int(n), what)
        for p, a, n in zip(parts, starts[:-1], lengths)
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


def _unused(name: str, taken: set[str]) -> str:
    """``name``, underscored until no column of the records has it (taken into ``taken``)."""
    while name in taken:
        name = f"_{name}"
    taken.add(name)
    return name


def _resolve_by_merge(
    records: dd.DataFrame, vertices: VertexTable, columns: Sequence[str], attrs: Sequence[str], *, what: str
) -> tuple[da.Array, dict[str, da.Array]]:
    """The shuffle join for vertex tables too large to broadcast: merge on id, then sort by record."""
    if int(dd.from_dask_array(vertices.ids).nunique().compute()) != vertices.ids.shape[0]:
        raise InputError("vertex ids are not unique")
    taken = set(records.columns)
    rec, idx_cols = _unused("_rec", taken), [_unused(f"_idx_{c}", taken) for c in columns]  # never a user's column
    lookup = dd.from_dask_array(
        da.stack([vertices.ids, da.arange(vertices.ids.shape[0], chunks=vertices.ids.chunks[0], dtype=np.int64)], axis=1),
        columns=["id", "row"],
    )
    merged = records.assign(**{rec: 1}).assign(**{rec: lambda d: d[rec].cumsum() - 1})
    for c, idx in zip(columns, idx_cols):
        merged = merged.merge(lookup.rename(columns={"id": c, "row": idx}), on=c, how="left")
    merged = merged.sort_values(rec)

    def checked(part: Any) -> Any:
        missing = part[idx_cols].isna().any(axis=1)
        if missing.any():
            first = part[missing].iloc[:1]
            named = first[list(columns)].to_numpy()[0].tolist()
            raise InputError(f"{what} row {int(first[rec].iloc[0])} names vertex id(s) {named} not in the vertex table")
        return part

    merged = merged.map_partitions(checked, meta=merged._meta)
    index = merged[idx_cols].astype(np.int64).to_dask_array(lengths=True)
    return index, {c: merged[c].to_dask_array(lengths=True) for c in attrs}
