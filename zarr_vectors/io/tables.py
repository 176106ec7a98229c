"""What the table formats (Parquet, CSV, NPZ) share: a table as geometry, and geometry as tables.

A vertex table becomes a :class:`Geometry` through a :class:`ColumnMap`; a store's data
becomes one table per role for the table writers: the vertices (``OUT``), and for
graphs and meshes the records beside it (``OUT`` with ``.edges`` / ``.faces`` before
its extension), named so that ``zv build`` reads them back with its default columns.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from zarr_vectors.errors import InputError
from zarr_vectors.io.columns import DEFAULT_AXES, ID_ATTRIBUTE, ColumnMap
from zarr_vectors.io.geometry_parts import FilesWritten
from zarr_vectors.io.types import Geometry, as_geometry
from zarr_vectors.store.backend import local_path


def remote_options(paths: Sequence[str], storage_options: Mapping[str, Any] | None) -> dict[str, Any]:
    """fsspec options for the inputs: S3 options apply to remote inputs only, never to local files."""
    remote = all(local_path(p) is None for p in paths)
    return dict(storage_options or {}) if remote else {}


def unreadable(path: str, exc: BaseException) -> InputError:
    """A file its library refused (corrupt, truncated, not that format), as the error naming it."""
    if isinstance(exc, FileNotFoundError):
        return InputError(f"input not found: {path!r}")
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return InputError(f"{path!r} cannot be read: {type(exc).__name__}: {lines[-1] if lines else ''}".rstrip(": "))


def column_values(frame: Any, names: Sequence[str], dtype: Any, where: str = "") -> np.ndarray:
    """Columns of a pandas frame as one numpy block, (rows,) for one name, (rows, k) for several.

    A value the dtype cannot hold is an InputError naming the column (and ``where``), never a
    cast: ids that are not whole numbers (1.5 became 1), missing values (a boolean null became
    False), text in a number column."""
    frame = frame[list(names)]
    dtype = np.dtype(dtype)
    at = f"{where!r}: " if where else ""
    complex_columns = [c for c in names if getattr(frame[c].dtype, "kind", "") == "c"]
    if complex_columns and dtype.kind != "c":  # numpy would drop the imaginary parts with a warning
        raise InputError(f"{at}column {complex_columns[0]!r} holds complex numbers; {dtype.name} expected")
    if dtype.kind in "iu" and any(frame[c].dtype.kind not in "iu" for c in names):
        _check_whole(frame, names, at)
    if dtype.kind == "b":  # a null in a boolean column (object dtype in pandas) became False
        for c in names:
            if frame[c].isna().any():
                raise InputError(f"{at}column {c!r} has missing values, which a boolean column cannot hold")
    try:
        block = frame.to_numpy(dtype=dtype)
    except (ValueError, TypeError, OverflowError) as exc:
        raise InputError(f"{at}column{'s' if len(names) > 1 else ''} {', '.join(map(repr, names))}: cannot be read "
                         f"as {dtype.name} ({type(exc).__name__}: {exc})") from None
    for i, c in enumerate(names):
        _refuse_changed_values(frame[c], block[:, i], dtype, f"{at}column {c!r}")
    return block[:, 0] if len(names) == 1 else block


def _refuse_changed_values(column: Any, got: np.ndarray, dtype: np.dtype, what: str) -> None:
    """A column read as a type that cannot hold its own exactly must have lost nothing.

    Several inputs of one table take the first one's column types: a later file's int32
    1000 became int8 -24, its float64 positions float32.  Unsigned values past a signed
    type wrapped (2**64 - 1 became -1).  Only an unsafe cast costs a comparison."""
    src = getattr(column.dtype, "numpy_dtype", column.dtype)  # pandas' nullable Int64 / UInt64 and the like
    if not isinstance(src, np.dtype) or src.kind not in "iuf" or not len(got):
        return
    if np.can_cast(src, dtype, "safe") and not (src.kind in "iu" and dtype.kind == "f"):
        return  # numpy calls int64 -> float64 safe; past 2**53 it is not
    missing = column.isna().to_numpy()
    values = column.to_numpy(dtype=src, na_value=0 if src.kind in "iu" else np.nan)
    if src.kind in "iu" and dtype.kind in "iu":
        info = np.iinfo(dtype)
        lost = (values < info.min) | (values > info.max)
    elif src.kind in "iu" and len(values) and int(np.abs(values).max()) <= 2 ** (np.finfo(dtype).nmant + 1):
        return  # every integer up to 2**(mantissa + 1) is a float exactly
    else:
        with np.errstate(invalid="ignore", over="ignore"):
            lost = (got.astype(src) != values) & ~(np.isnan(values) & np.isnan(got))
    lost &= ~missing  # a missing value is the target's to refuse (integers) or hold (NaN)
    if lost.any():
        raise InputError(f"{what}: {values[lost][0].item()!r} ({src.name}) cannot be held as {dtype.name} without "
                         "change (several inputs of one table take the first input's column types: give every "
                         "input the same types)")


def _check_whole(frame: Any, names: Sequence[str], at: str) -> None:
    """Integer columns (ids) given as other numbers must hold whole numbers in the int64 range."""
    for c in names:
        try:
            values = frame[c].to_numpy(dtype=np.float64, na_value=np.nan)
        except (ValueError, TypeError) as exc:
            raise InputError(f"{at}column {c!r}: cannot be read as integers ({type(exc).__name__}: {exc})") from None
        bad = ~np.isfinite(values) | (values != np.round(values)) | (np.abs(values) >= 2.0**63)
        if bad.any():
            raise InputError(f"{at}column {c!r}: {float(values[bad][0])} is not a whole number in the int64 range "
                             "(ids and object ids are integers)")


def geometry_from_frame(df: Any, where: str, columns: ColumnMap | None = None) -> Geometry:
    """A vertex table (pandas) as point geometry: positions, object ids, ids, attributes, dropped."""
    columns = columns or ColumnMap()
    names = [str(c) for c in df.columns]
    axes = columns.axes(names, where)
    oid = columns.named("object_id", names, where)
    vid = columns.named("id", names, where)
    taken = axes + [c for c in (oid, vid) if c]
    attrs, dropped = columns.attributes(dict(df.dtypes.items()), taken, where)
    ids = df[vid].to_numpy() if vid else None
    attributes = {c: df[c].to_numpy() for c in attrs}
    if ids is not None:
        attributes[ID_ATTRIBUTE] = ids
    return Geometry(
        kind="points",
        positions=column_values(df, axes, np.float32 if all(df[a].dtype == np.float32 for a in axes) else np.float64,
                                where),
        object_ids=column_values(df, [oid], np.int64, where) if oid else None,
        attributes=attributes,
        ids=ids,
        axes=tuple(axes),
        dropped=tuple(dropped),
    )


#: the tables beside a table writer's ``OUT``, by role (``table_frames``' keys other than "")
COMPANION_ROLES = ("edges", "faces", "objects")
_COMPRESSED = (".gz", ".bz2", ".xz", ".zst")


def companion(path: str, role: str) -> str:
    """``out.parquet`` -> ``out.edges.parquet`` (``out.tsv.gz`` -> ``out.edges.tsv.gz``): where a
    table writer puts a store's records."""
    root, ext = os.path.splitext(path)
    if ext.lower() in _COMPRESSED:
        root, inner = os.path.splitext(root)
        ext = inner + ext
    return f"{root}.{role}{ext}"


def companions(path: str) -> tuple[str, ...]:
    """Every file a table writer may put beside ``path``."""
    return tuple(companion(path, role) for role in COMPANION_ROLES)


def _columns(values: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Attributes as 1-D columns: an attribute of k components becomes ``name_0 .. name_{k-1}``;
    a column named twice that way (``n_0`` beside a 3-component ``n``) is refused, not written over."""
    out: dict[str, np.ndarray] = {}
    for name, v in values.items():
        v = np.asarray(v)
        if v.ndim == 1:
            columns = {name: v}
        else:
            flat = v.reshape(len(v), int(np.prod(v.shape[1:])))  # not -1: an empty box has no rows
            columns = {f"{name}_{i}": flat[:, i] for i in range(flat.shape[1])}
        twice = sorted(set(columns) & set(out))
        if twice:
            raise InputError(f"attribute column(s) {twice} would be written twice (an attribute's components are "
                             "columns NAME_0, NAME_1, ...); rename the attribute(s) to export this store as tables")
        out.update(columns)
    return out


def vertex_ids(g: Geometry) -> np.ndarray:
    """The input's own vertex ids when the store kept them (attribute ``id``), else the row numbers."""
    if g.ids is not None:
        return np.asarray(g.ids)
    kept = g.attributes.get(ID_ATTRIBUTE)
    if kept is not None and np.asarray(kept).ndim == 1 and np.asarray(kept).dtype.kind in "iu":
        return np.asarray(kept, dtype=np.int64)
    return np.arange(len(g.positions), dtype=np.int64)


def write_tables(path: str, data: Any, write: Callable[[str, dict[str, np.ndarray]], None]) -> None:
    """Each table of :func:`table_frames` written by ``write(file, columns)``: the vertices to
    ``path``, the others beside it (:func:`companion`); a failure removes what the call wrote
    (:class:`~zarr_vectors.io.geometry_parts.FilesWritten`) and is an InputError naming the file."""
    files = FilesWritten()
    for role, table in table_frames(data, path).items():
        out = companion(path, role) if role else path
        with files.file(out):
            write(out, table)


def table_frames(data: Any, path: str) -> dict[str, dict[str, np.ndarray]]:
    """Columns of each table a store's data becomes: ``{"": vertices, "edges" | "faces": records,
    "objects": object attributes}``; data no table can hold is refused naming ``path``, the
    file the tables are for.

    Column names are ``zv build``'s defaults for the kind, so the tables build the same
    store again: ``x, y[, z]``, ``object_id``, attributes; graph and mesh vertices
    ``id`` and records ``src, dst`` / ``a, b, c``; skeletons ``id, parent``; polylines
    and streamlines ``line, order``.  Object attributes, which no vertex row can hold
    once, are a table of their own (``zv build`` does not read it).
    """
    try:
        return _frames(as_geometry(data))
    except InputError as exc:
        raise InputError(f"{path}: {exc}") from exc


def _frames(g: Geometry) -> dict[str, dict[str, np.ndarray]]:
    axes = list(g.axes) if len(g.axes) == g.positions.shape[1] else list(DEFAULT_AXES[: g.positions.shape[1]])
    vertices: dict[str, np.ndarray] = {a: g.positions[:, i] for i, a in enumerate(axes)}
    linked = g.edges is not None or g.faces is not None
    if linked:
        ids = vertex_ids(g)
        vertices["id"] = ids
    if g.offsets is not None:
        lengths = np.diff(np.asarray(g.offsets))
        vertices["line"] = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
        vertices["order"] = np.arange(len(g.positions), dtype=np.int64) - np.repeat(np.asarray(g.offsets)[:-1], lengths)
    elif g.object_ids is not None:
        vertices["object_id"] = np.asarray(g.object_ids, dtype=np.int64)
    if g.kind == "skeleton" and g.edges is not None:
        if len(ids) and ids.min() < 0:  # zv build skeleton refuses it, as the SWC writer does
            raise InputError(f"skeleton vertex id {int(ids.min())} is negative: the parent column marks a root with "
                             "any negative id, so no vertex could name it as its parent (zv build skeleton refuses "
                             "it); this store cannot be exported as tables")
        parent = np.full(len(g.positions), -1, dtype=np.int64)
        parent[g.edges[:, 0]] = ids[g.edges[:, 1]]
        vertices["parent"] = parent
    attrs = {k: v for k, v in g.attributes.items() if k != ID_ATTRIBUTE}
    out = {"": _with_columns(vertices, attrs, "vertex attribute")}
    if g.edges is not None and g.kind != "skeleton":
        ends = {"src": ids[g.edges[:, 0]], "dst": ids[g.edges[:, 1]]}
        out["edges"] = _with_columns(ends, g.edge_attributes, "edge attribute")
    elif g.faces is not None:
        corners = "abcdefghijklmnopqrstuvw"[: g.faces.shape[1]]
        ends = {c: ids[g.faces[:, i]] for i, c in enumerate(corners)}
        out["faces"] = _with_columns(ends, g.edge_attributes, "face attribute")
    if g.object_attributes:
        out["objects"] = _object_table(g)
    return out


def _with_columns(table: dict[str, np.ndarray], values: Mapping[str, Any], what: str) -> dict[str, np.ndarray]:
    """``table`` and the attributes' columns after it; an attribute whose column would replace
    one of the table's own (``x``, ``line``, ``object_id``...) is refused, never written over."""
    columns = _columns(values)
    clash = sorted(set(columns) & set(table))
    if clash:
        raise InputError(f"{what} column(s) {clash} would replace the table's own column(s) of that name; "
                         "rename the attribute(s) to export this store as tables")
    return {**table, **columns}


def _object_table(g: Geometry) -> dict[str, np.ndarray]:
    """The object attributes: a row per object with its ``object_id``; for polylines, whose vertex
    table numbers lines, a row per ``line`` with its object's id and attributes (a box may cut one
    polyline into several lines), then a row with ``line`` -1 per object with no vertices here."""
    first = next(iter(g.object_attributes.values()))
    ids = np.asarray(g.objects, dtype=np.int64) if g.objects is not None else np.arange(len(first), dtype=np.int64)
    keys: dict[str, np.ndarray] = {"object_id": ids}
    rows = np.arange(len(ids))
    if g.offsets is not None and g.object_ids is not None:
        offsets = np.asarray(g.offsets)
        lines = np.flatnonzero(np.diff(offsets) > 0)
        line_ids = np.asarray(g.object_ids, dtype=np.int64)[offsets[lines]]  # a line's id: its first vertex's
        if len(line_ids) and not len(ids):
            raise InputError("the polylines' objects have no rows in the object attributes")
        order = np.argsort(ids, kind="stable")
        at = order[np.minimum(np.searchsorted(ids[order], line_ids), max(len(ids) - 1, 0))]
        if bool((ids[at] != line_ids).any()):
            raise InputError("a polyline's object has no row in the object attributes")
        unused = np.ones(len(ids), dtype=bool)
        unused[at] = False
        rows = np.concatenate([at, np.flatnonzero(unused)])
        keys = {"line": np.concatenate([lines, np.full(int(unused.sum()), -1)]).astype(np.int64), "object_id": ids[rows]}
    return _with_columns(keys, {k: np.asarray(v)[rows] for k, v in g.object_attributes.items()}, "object attribute")
