"""Plain edge lists: one edge per line, ``src dst [value...]``, beside a vertex table.

Fields are separated by whitespace or commas; lines starting with ``#`` are comments,
except that a first line ``# src dst weight ...`` names the columns (else they are
``src, dst``, then ``weight``, ``weight_2``, ...).  ``src`` and ``dst`` are vertex
ids (each given to one row) of the vertex table -- a CSV, Parquet or NPZ table with
``id, x, y[, z]`` -- given as the first ``zv build graph`` input (read alone, :func:`read`
takes it as ``vertices``, by default ``NAME.vertices.csv`` beside the list, which
:func:`write` writes).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from zarr_vectors.errors import InputError
from zarr_vectors.io import geometry_parts as gp
from zarr_vectors.io.columns import TEXT_ENCODING, ColumnMap
from zarr_vectors.io.tables import remote_options, table_frames, unreadable
from zarr_vectors.io.types import FileFormat, Geometry, as_geometry

SEPARATOR = r"[\s,]+"


def vertices_path(path: str, role: str = "vertices") -> str:
    """Where the vertex table of an edge list goes by default: ``NAME.vertices.csv`` (its
    object attributes: ``NAME.objects.csv``)."""
    return re.sub(r"\.(edgelist|edges)$", "", path, flags=re.IGNORECASE) + f".{role}.csv"


def companions(path: str) -> tuple[str, ...]:
    """The files a write of ``path`` puts beside it: the vertex table and the object table."""
    return vertices_path(path), vertices_path(path, "objects")


def _names(path: str, opts: Mapping[str, Any]) -> list[str]:
    """Column names from the header comment, else ``src, dst, weight, weight_2, ...`` by the first line's width."""
    import fsspec

    header: list[str] | None = None
    try:
        with fsspec.open(path, "rt", encoding=TEXT_ENCODING, **opts) as f:
            for line in f:
                text = line.strip()
                if not text:
                    continue
                if text.startswith("#"):
                    header = header if header is not None else re.split(SEPARATOR, text.lstrip("#").strip())
                    continue
                width = len(re.split(SEPARATOR, text))
                break
            else:
                width = len(header or ("src", "dst"))
    except Exception as exc:
        raise unreadable(path, exc) from exc
    if width < 2:
        raise InputError(f"{path!r}: an edge line needs at least two fields (src dst), found {width}")
    if header is not None and len(header) == width:
        return header
    return ["src", "dst"] + ["weight" if i == 0 else f"weight_{i + 1}" for i in range(width - 2)]


def frame(paths: Sequence[str], *, storage_options: Mapping[str, Any] | None = None) -> Any:
    """The edge lists as one dask dataframe (columns as :func:`_names` says; one block per file)."""
    import dask.dataframe as dd

    opts = remote_options(paths, storage_options)
    names = _names(paths[0], opts)
    try:
        return dd.read_csv(list(paths), sep=SEPARATOR, engine="python", header=None, names=names, comment="#",
                           storage_options=opts or None, blocksize=None)
    except Exception as exc:
        raise unreadable(", ".join(paths), exc) from exc


def read(path: str, *, vertices: str | None = None, columns: ColumnMap | None = None,
         storage_options: Mapping[str, Any] | None = None) -> Geometry:
    """The edge list and its vertex table as graph geometry (``ids`` the vertex ids)."""
    from zarr_vectors.io.registry import format_for

    where = vertices or vertices_path(path)
    g = format_for(where).read(where, columns=columns, storage_options=storage_options)
    if g.ids is None:
        raise InputError(f"{where!r}: the vertex table of an edge list needs an id column (--id-column)")
    edges = frame([path], storage_options=storage_options).compute(scheduler="sync")
    columns = columns or ColumnMap()
    ends = columns.edge_columns(list(edges.columns), path)
    order = np.argsort(g.ids, kind="stable")
    ids = g.ids[order]
    repeated = np.flatnonzero(ids[1:] == ids[:-1]) + 1  # searchsorted would find one of the rows, the others none
    if len(repeated):
        first = int(order[repeated].min())  # the earliest row repeating an id above it
        raise InputError(f"{where!r}: vertex ids are not unique: id {g.ids[first]} appears more than once")
    named = edges[ends].to_numpy()
    at = np.minimum(np.searchsorted(ids, named), max(len(ids) - 1, 0))
    found = ids[at] == named if len(ids) else np.zeros(named.shape, dtype=bool)
    if not found.all():
        row = int(np.argmax(~found.all(axis=1)))
        raise InputError(f"{path!r}: edge {row} names vertex id(s) {named[row].tolist()} not in {where!r}")
    attrs, dropped = columns.attributes(dict(edges.dtypes.items()), ends, path)
    g.kind, g.edges = "graph", order[at]
    g.edge_attributes = {c: edges[c].to_numpy() for c in attrs}
    g.dropped = g.dropped + tuple(f"edge {c}" for c in dropped)
    return g


def write(path: str, data: Any, **_: Any) -> None:
    """The edges as ``src dst attributes...`` under a header comment, the vertices in :func:`vertices_path`
    (object attributes beside it, ``NAME.objects.csv``).  An edge attribute whose name the header
    cannot hold as one name (empty, or with whitespace or a comma) is refused before anything is written."""
    import pandas as pd

    g = as_geometry(data)
    if g.edges is None:
        raise InputError(f"{path!r}: an edge list holds graphs; the store has no edges")
    split_names = [name for name in g.edge_attributes if not name or re.search(SEPARATOR, name)]
    if split_names:  # '# src dst fiber count' reads back as four names for three columns
        raise InputError(f"{path!r}: edge attribute {split_names[0]!r} cannot be named in an edge list's header, "
                         "whose names are split at whitespace and commas; rename the attribute to write this file")
    tables = table_frames(g, path)
    edges = pd.DataFrame(tables["edges"])
    files = gp.FilesWritten()  # the list first: a path it cannot take fails before its companions
    with files.file(path), open(path, "w", encoding="utf-8") as f:  # UTF-8 as read, whatever the locale
        f.write("# " + " ".join(edges.columns) + "\n")
        edges.to_csv(f, sep=" ", header=False, index=False, float_format="%.17g")
    for role, where in (("", vertices_path(path)), ("objects", vertices_path(path, "objects"))):
        if role in tables:
            with files.file(where):
                pd.DataFrame(tables[role]).to_csv(where, index=False, float_format="%.17g")


FORMAT = FileFormat("edgelist", (".edgelist", ".edges"), ("graph",), read, write,
                    "plain edge list 'src dst [value...]' with a vertex table", companions)
