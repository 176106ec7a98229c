"""Parquet tables (pyarrow): read lazily by row groups on the cluster, written one table per role."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from zarr_vectors import config
from zarr_vectors.io.columns import ColumnMap
from zarr_vectors.io.tables import companions, geometry_from_frame, remote_options, unreadable, write_tables
from zarr_vectors.io.types import FileFormat, Geometry

KINDS = ("points", "graph", "mesh", "skeleton", "polylines", "streamlines")


def frame(paths: Sequence[str], *, storage_options: Mapping[str, Any] | None = None) -> Any:
    """One dask dataframe over the files' row groups (partitions of about ``sources.parquet-blocksize``;
    a row group is never split).  A missing or corrupt file is an InputError naming it, raised here."""
    import dask.dataframe as dd

    opts = remote_options(paths, storage_options)
    try:  # the footers are read here, in the client, not by the first task
        return dd.read_parquet(list(paths), storage_options=opts or None, split_row_groups="adaptive",
                               blocksize=config.get("sources.parquet-blocksize"))
    except Exception as exc:  # pyarrow's ArrowInvalid / OSError for a file that is not Parquet
        raise unreadable(", ".join(paths), exc) from exc


def read(path: str, *, columns: ColumnMap | None = None, storage_options: Mapping[str, Any] | None = None) -> Geometry:
    """A Parquet vertex table as point geometry (the whole file, in this process)."""
    return geometry_from_frame(frame([path], storage_options=storage_options).compute(scheduler="sync"), path, columns)


def write(path: str, data: Any, **_: Any) -> None:
    """``path`` the vertices; graph edges / mesh faces beside it (``NAME.edges.parquet``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    write_tables(path, data, lambda out, table: pq.write_table(pa.table(table), out))


FORMAT = FileFormat("parquet", (".parquet", ".pq"), KINDS, read, write,
                    "Apache Parquet table (a directory of them is one dataset)", companions)
