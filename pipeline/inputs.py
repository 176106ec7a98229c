"""``zv build``'s inputs per kind: which files play which part, checked before anything runs,
and the writer call that reads them.

Partitioned formats (tables, edge lists, LAS/LAZ) follow the table conventions of
:mod:`pipeline.sources`: points, polylines, streamlines and skeletons take one table
(several files of it), graphs and meshes a vertex table then a record table.  Whole-file
formats (GraphML, meshes, SWC, streamlines...) carry everything in each file; several
files are several objects.  :func:`check_inputs` applies the column mapping to every
input's schema (and reads whole-file inputs) in the client, before a cluster starts,
and returns the warnings naming columns that cannot be stored.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import numpy as np

import zarr_vectors as zv
from zarr_vectors.errors import InputError
from zarr_vectors.io import registry
from zarr_vectors.io.columns import ID_ATTRIBUTE, ColumnMap
from zarr_vectors.io.types import Geometry

TWO_TABLES = ("graph", "mesh")  # a vertex table and a record table


def column_map(spec: Any) -> ColumnMap:
    return ColumnMap.from_json(getattr(spec, "columns", None))


def _partitioned(spec: Any) -> bool:
    """Whether the inputs are read lazily in partitions (else whole, by their format's reader)."""
    return registry.frame_reader(registry.format_for(spec.inputs[0], spec.kind)) is not None


@functools.lru_cache(maxsize=1)  # preflight and the write stage read it once
def _small_csv_points(paths: tuple[str, ...], threshold: int, eager: int) -> tuple[Any, Any, dict[str, Any]] | None:
    from pipeline.columns import csv_header, local_csv, local_file, read_csv_whole, read_numeric_csv

    if not all(local_csv(p) for p in paths):
        return None
    size = sum(os.path.getsize(local_file(p)) for p in paths)
    if size >= threshold:
        return None  # a large input: read lazily, in partitions
    tables = [read_numeric_csv(p) if size <= eager else read_csv_whole(p) for p in paths]
    if any(t is None or list(t) != csv_header(p) for t, p in zip(tables, paths)):
        return None  # text or missing values: the dataframe path decides, and names what it cannot store
    if len({tuple(t) for t in tables}) != 1:
        return None  # files with different columns: the dataframe reader's own error
    columns = {c: np.concatenate([t[c] for t in tables]) for c in tables[0]}
    where = f"{', '.join(paths)}: vertex table"
    mapping, names = ColumnMap(), list(columns)  # the dataframe path's roles, on the same names
    axes = mapping.axes(names, where)
    oid, vid = mapping.named("object_id", names, where), mapping.named("id", names, where)
    if any(columns[a].dtype.kind != "f" for a in axes) or (oid is not None and columns[oid].dtype.kind != "i"):
        return None  # integer coordinates or fractional ids: the dataframe path's own rules and errors
    attrs, dropped = mapping.attributes({c: v.dtype for c, v in columns.items()}, axes + [c for c in (oid, vid) if c],
                                        where)
    if dropped:
        return None
    attributes = {c: columns[c] for c in attrs}
    if vid is not None:
        attributes[ID_ATTRIBUTE] = columns[vid]
    return np.column_stack([columns[a] for a in axes]), columns.get(oid) if oid else None, attributes


def _small_points(spec: Any) -> tuple[Any, Any, dict[str, Any]] | None:
    """Points from small local all-numeric CSVs with the default columns, read whole, for a job on
    local threads (so they fit in memory), else None.

    dask.dataframe and dask.array -- whose imports alone take longer than a 100-point build --
    stay unloaded and the writer gets arrays; read once per process (preflight and the write).
    """
    from dask.utils import parse_bytes

    from zarr_vectors import config
    from zarr_vectors.execution import runner

    if spec.kind != "points" or getattr(spec, "columns", None) or runner.current_client() is not None:
        return None
    return _small_csv_points(tuple(spec.inputs), parse_bytes(config.get("cli.cluster-threshold")),
                             parse_bytes(config.get("sources.eager-csv-bytes")))


def check_arity(spec: Any) -> None:
    """The number of inputs the kind takes in their format (no file is opened)."""
    if not spec.inputs:
        raise InputError("no input files")
    if _partitioned(spec) and spec.kind in TWO_TABLES and len(spec.inputs) != 2:
        raise InputError(f"zv build {spec.kind} takes two inputs (a vertex table and a record table), "
                         f"got {len(spec.inputs)}")


def check_inputs(spec: Any, size: int) -> list[str]:
    """Open every input's schema (a whole-file input: read it) and apply the column mapping.

    Raises InputError naming the file and the problem (unreadable, no rows, a missing column,
    chunk or bin shapes that do not fit its coordinate axes); returns one warning per table
    with columns that cannot be stored.  ``size``: the inputs' bytes, as preflight measured them.
    """
    small = _small_points(spec)
    if small is not None:
        _refuse_empty(len(small[0]), spec.inputs)
        _check_grid(spec, small[0].shape[1])
        _check_aggregate(spec, small[2])
        return []  # every column a number: nothing to warn about
    from pipeline import sources  # dask.dataframe: imported only when a table is read

    columns, opts = column_map(spec), spec.storage_options
    if not _partitioned(spec):
        g = sources.load_geometry(spec.inputs, spec.kind, columns, opts)
        _refuse_empty(len(g.positions), spec.inputs)
        _structure(spec, g)
        _check_grid(spec, g.positions.shape[1])
        _check_aggregate(spec, g.attributes)
        return sources.warnings_for(", ".join(spec.inputs), g.dropped)
    if spec.kind in TWO_TABLES:
        vdf = sources.read_table(spec.inputs[0], storage_options=opts, kind=spec.kind)
        _refuse_empty(_rows_known_cheaply(vdf, spec.inputs[:1], size), spec.inputs[:1])
        rdf = sources.read_table(spec.inputs[1], storage_options=opts, kind=spec.kind)
        roles = sources.vertex_columns(vdf, columns, what=f"{spec.inputs[0]}: vertex", with_ids=True)
        _check_grid(spec, len(roles.axes))
        _check_aggregate(spec, roles.attributes)
        names = [str(c) for c in rdf.columns]
        what = "edge" if spec.kind == "graph" else "face"
        ends = columns.edge_columns(names, spec.inputs[1]) if spec.kind == "graph" else \
            columns.face_columns(names, spec.inputs[1])
        dropped = sources.record_attributes(rdf, ends, f"{spec.inputs[1]}: {what}")[1]
        return sources.warnings_for(spec.inputs[0], roles.dropped, vdf) + sources.warnings_for(spec.inputs[1], dropped, rdf)
    df = sources.read_table(spec.inputs, storage_options=opts, kind=spec.kind)
    _refuse_empty(_rows_known_cheaply(df, spec.inputs, size), spec.inputs)
    names, where = [str(c) for c in df.columns], ", ".join(spec.inputs)
    taken = _structure_columns(spec.kind, columns, names, where)
    roles = sources.vertex_columns(df, columns, what=where, with_ids=spec.kind == "skeleton", taken=taken)
    _check_grid(spec, len(roles.axes))
    _check_aggregate(spec, roles.attributes)
    return sources.warnings_for(where, roles.dropped, df)


def _rows_known_cheaply(frame: Any, paths: list[str], size: int) -> int | None:
    """A table's row count where it costs no pass over the data: a Parquet input's (from the
    footers, read already), or that of inputs of ``size`` bytes in all (preflight's figure)
    below ``cli.cluster-threshold``; None otherwise (a large text input, which is not empty)."""
    from dask.utils import parse_bytes

    from zarr_vectors import config

    if all(registry.format_for(p).name == "parquet" for p in paths) or \
            size < parse_bytes(config.get("cli.cluster-threshold")):
        return len(frame)
    return None


def _refuse_empty(rows: int | None, paths: list[str] | tuple[str, ...]) -> None:
    """An input of no vertices is refused here, before the journal and the store are touched
    (the writer refuses it too, but only once the job has started)."""
    if rows == 0:
        raise InputError(f"{', '.join(paths)}: the input has no vertices (no rows): a store needs at least one")


def _check_aggregate(spec: Any, attributes: Any) -> None:
    """``--aggregate`` names vertex attributes the input has (the columns the mapping leaves as
    attributes, or a whole file's; ``id``, which ids become): refused here, before the write
    replaces anything, not by the pyramid stage after it."""
    unknown = sorted(set(getattr(spec, "aggregate", None) or {}) - set(attributes) - {ID_ATTRIBUTE})
    if unknown:
        raise InputError(f"--aggregate names {unknown}, which the input has no vertex attribute of "
                         f"(it has {sorted(set(attributes)) or 'none'})")


def _check_grid(spec: Any, ndim: int) -> None:
    """The chunk and bin shapes against the input's coordinate axes (rank, a bin that does not divide the chunk)."""
    from zarr_vectors.write.vertices import grid_shapes

    grid_shapes(spec.chunk_shape, spec.bin_shape, ndim)


def _structure_columns(kind: str, columns: ColumnMap, names: list[str], where: str) -> list[str]:
    """The columns a one-table kind uses for its structure (required)."""
    roles = {"skeleton": ("parent",), "polylines": ("line", "order"), "streamlines": ("line", "order")}.get(kind, ())
    return [columns.named(r, names, f"{where}", required=True) for r in roles]


def writer_for(spec: Any) -> Callable[[], zv.WriteResult]:
    """Read the inputs (lazily where the format allows) and return the writer call for the kind."""
    common: dict[str, Any] = {
        "chunk_shape": spec.chunk_shape,
        "bin_shape": spec.bin_shape,
        "compressor": spec.compressor,
        "storage_options": spec.storage_options,
        "overwrite": spec.overwrite,
    }
    check_arity(spec)
    if not _partitioned(spec):
        from pipeline import sources  # dask.dataframe: imported only when a table is read

        g = sources.load_geometry(spec.inputs, spec.kind, column_map(spec), spec.storage_options)
        return lambda: write_geometry(spec, g, common)
    if spec.kind in TWO_TABLES:
        return _two_tables(spec, common)
    return _one_table(spec, common)


def write_geometry(spec: Any, g: Geometry, common: dict[str, Any]) -> zv.WriteResult:
    """A whole-file input's geometry through the kind's writer (with what its file said of its space)."""
    common = {**common, "headers": g.headers or None}
    shared = {"object_ids": g.object_ids, "attributes": g.attributes, **common}
    kind = spec.kind
    records = _structure(spec, g)
    if kind == "points":
        return zv.write_points(spec.out, g.positions, object_attributes=g.object_attributes or None, **shared)
    if kind in ("polylines", "streamlines"):
        return zv.write_polylines(spec.out, g.positions, g.offsets, kind=kind[:-1], attributes=g.attributes,
                                  object_attributes=g.object_attributes or None, **common)
    if kind == "graph":
        return zv.write_graph(spec.out, g.positions, records, directed=spec.directed, store=spec.link_store,
                              edge_attributes=g.edge_attributes, **shared)
    if kind == "mesh":
        return zv.write_mesh(spec.out, g.positions, records, face_attributes=g.edge_attributes, **shared)
    parents = np.full(len(g.positions), -1, dtype=np.int64)
    parents[records[:, 0]] = records[:, 1]  # skeleton edges are [child, parent]
    return zv.write_skeleton(spec.out, g.positions, parents, **shared)


def _structure(spec: Any, g: Geometry) -> Any:
    """What the kind is built from besides the vertices (offsets, faces or edges), refused when the
    input has none -- in preflight, before a journal or a cluster, as in the write stage."""
    if spec.kind == "points":
        return None
    if spec.kind in ("polylines", "streamlines"):
        if g.offsets is None:
            raise InputError(f"{spec.inputs[0]!r}: holds no polylines (no offsets)")
        return g.offsets
    mesh = spec.kind == "mesh"
    records = g.faces if mesh else g.edges
    if records is None or (mesh and not len(records)):
        raise InputError(f"{spec.inputs[0]!r}: holds no {'faces' if mesh else 'edges'} for a {spec.kind}")
    return records


def _input_table(paths: str | list[str], spec: Any):  # -> dask.dataframe.DataFrame
    """An input table, lazily; on local threads parsed once and kept in memory.

    The write makes several passes over its input (row counts, the scan, the route); a
    lazy CSV is parsed again by each, which on local threads -- where the command line
    runs only small jobs (:func:`pipeline.cluster.choose`) -- costs more than the write.
    Under a distributed client the table stays lazy: no worker holds a whole input.
    """
    from pipeline import sources
    from zarr_vectors.execution import runner

    df = sources.read_table(paths, storage_options=spec.storage_options, kind=spec.kind)
    if runner.current_client() is not None:
        return df
    return runner.persist("read input", df)[0]


def _two_tables(spec: Any, common: dict[str, Any]) -> Callable[[], zv.WriteResult]:
    from pipeline import sources  # dask.dataframe: imported only when a table is read

    columns = column_map(spec)
    vdf, rdf = _input_table(spec.inputs[0], spec), _input_table(spec.inputs[1], spec)
    table = sources.vertex_table(vdf, with_ids=True, columns=columns)
    names = [str(c) for c in rdf.columns]
    if spec.kind == "graph":
        ends = columns.edge_columns(names, spec.inputs[1])
        edges, edge_attrs = sources.resolve_ids(rdf, table, ends, what="edge")
        return lambda: zv.write_graph(
            spec.out, table.positions, edges, directed=spec.directed, store=spec.link_store,
            edge_attributes=edge_attrs, object_ids=table.object_ids, attributes=table.attributes, **common,
        )  # fmt: skip
    faces, face_attrs = sources.resolve_ids(rdf, table, columns.face_columns(names, spec.inputs[1]), what="face")
    return lambda: zv.write_mesh(
        spec.out, table.positions, faces, face_attributes=face_attrs,
        object_ids=table.object_ids, attributes=table.attributes, **common,
    )  # fmt: skip


def _one_table(spec: Any, common: dict[str, Any]) -> Callable[[], zv.WriteResult]:
    """Points; polylines / streamlines (``line``, ``order``); skeletons (``id``, ``parent``)."""
    small = _small_points(spec)
    if small is not None:
        positions, ids, attributes = small
        return lambda: zv.write_points(spec.out, positions, object_ids=ids, attributes=attributes, **common)
    from pipeline import sources  # dask.dataframe: imported only when a table is read

    columns = column_map(spec)
    df = _input_table(spec.inputs, spec)
    if spec.kind == "points":
        table = sources.vertex_table(df, columns=columns)
        return lambda: zv.write_points(
            spec.out, table.positions, object_ids=table.object_ids, attributes=table.attributes, **common
        )
    if spec.kind in ("polylines", "streamlines"):
        lines = sources.polyline_table(df, what=spec.kind[:-1], columns=columns)
        return lambda: zv.write_polylines(
            spec.out, lines.vertices.positions, lines.offsets, kind=spec.kind[:-1],
            attributes=lines.vertices.attributes, **common,
        )  # fmt: skip
    # skeleton: the storage order is a depth-first traversal of the whole forest, so the
    # structure (id, parent, object_id) comes to this process, read once; positions and
    # attributes stay lazy and are permuted on the cluster.
    names = [str(c) for c in df.columns]
    parent = _structure_columns("skeleton", columns, names, ", ".join(spec.inputs))[0]
    table = sources.vertex_table(df, columns=columns, with_ids=True, what="skeleton", taken=[parent])
    roles = sources.vertex_columns(df, columns, what="skeleton", with_ids=True, taken=[parent])
    structure = df[[roles.id, parent] + ([roles.object_id] if roles.object_id else [])].compute()
    parents = sources.parent_rows(structure[roles.id].to_numpy(), structure[parent].to_numpy())
    ids = structure[roles.object_id].to_numpy(dtype=np.int64) if roles.object_id else None
    return lambda: zv.write_skeleton(spec.out, table.positions, parents, object_ids=ids, attributes=table.attributes,
                                     **common)


def plan_table(spec: Any) -> tuple[Any, Any, dict[str, Any]]:
    """(positions, object ids, attributes) the write stage plans its vertices from (``--dry-run``)."""
    from pipeline import sources  # dask.dataframe: imported only when a table is read

    columns = column_map(spec)
    if not _partitioned(spec):
        g = sources.load_geometry(spec.inputs, spec.kind, columns, spec.storage_options)
        return g.positions, g.object_ids if spec.kind == "points" else None, g.attributes
    vertex_inputs = spec.inputs[:1] if spec.kind in TWO_TABLES else spec.inputs
    df = sources.read_table(vertex_inputs, storage_options=spec.storage_options, kind=spec.kind)
    taken = [] if spec.kind in TWO_TABLES or spec.kind == "points" else \
        _structure_columns(spec.kind, columns, [str(c) for c in df.columns], ", ".join(vertex_inputs))
    table = sources.vertex_table(df, with_ids=spec.kind in TWO_TABLES, columns=columns, taken=taken)
    return table.positions, table.object_ids if spec.kind == "points" else None, table.attributes

