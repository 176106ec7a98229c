"""CSV tables (a header row; ``.tsv`` tab separated, ``.csv.gz`` compressed): read lazily in blocks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from zarr_vectors import config
from zarr_vectors.errors import InputError
from zarr_vectors.io.columns import ColumnMap
from zarr_vectors.io.parquet import KINDS
from zarr_vectors.io.tables import companions, geometry_from_frame, remote_options, unreadable, write_tables
from zarr_vectors.io.types import FileFormat, Geometry


def frame(paths: Sequence[str], *, storage_options: Mapping[str, Any] | None = None) -> Any:
    """One dask dataframe over the files, in blocks of ``sources.csv-blocksize`` (gzip: one per file).
    The header and dtypes are read here from a sample: an unreadable file is an InputError naming it."""
    import dask.dataframe as dd

    opts = remote_options(paths, storage_options)
    gz = any(p.lower().endswith(".gz") for p in paths)
    sep = "\t" if all(p.lower().endswith((".tsv", ".tsv.gz")) for p in paths) else ","
    try:
        df = dd.read_csv(list(paths), storage_options=opts or None, sep=sep, skipinitialspace=True,  # 'x, y, z'
                         blocksize=None if gz else config.get("sources.csv-blocksize"))
    except Exception as exc:
        raise unreadable(", ".join(paths), exc) from exc
    _refuse_repeated_names(paths[0], sep, opts)
    return df


def _refuse_repeated_names(path: str, sep: str, opts: Mapping[str, Any]) -> None:
    """pandas renames a repeated column (``x, x`` becomes ``x, x.1``), so a second ``x`` was kept as
    an attribute named as no column is.  The header row as written (a glob: its first file, whose
    header dask takes), read as pandas reads it: a byte-order mark dropped, blank lines skipped.
    Empty names are not repeats: pandas names each on its own (``Unnamed: 3``)."""
    import csv
    from collections import Counter

    import fsspec

    try:
        (first, *_) = fsspec.open_files(path, "rt", compression="infer", newline="", encoding="utf-8-sig",
                                        errors="replace", expand=True, **opts)
        with first as f:
            names = next((row for row in csv.reader(f, delimiter=sep, skipinitialspace=True) if row), [])
    except Exception as exc:  # read by dask a moment ago: a failure here is the file's, and named
        raise unreadable(path, exc) from exc
    repeated = sorted(name for name, count in Counter(names).items() if count > 1 and name)
    if repeated:
        raise InputError(f"{path}: the header row names column {repeated[0]!r} more than once")


def read(path: str, *, columns: ColumnMap | None = None, storage_options: Mapping[str, Any] | None = None) -> Geometry:
    """A CSV vertex table as point geometry (the whole file, in this process)."""
    return geometry_from_frame(frame([path], storage_options=storage_options).compute(scheduler="sync"), path, columns)


def write(path: str, data: Any, **_: Any) -> None:
    """``path`` the vertices; graph edges / mesh faces beside it (``NAME.edges.csv``); floats written
    with 17 significant digits, so they read back exactly."""
    import pandas as pd

    sep = "\t" if path.lower().endswith((".tsv", ".tsv.gz")) else ","
    write_tables(path, data, lambda out, table: pd.DataFrame(table).to_csv(out, index=False, sep=sep,
                                                                            float_format="%.17g"))


FORMAT = FileFormat("csv", (".csv", ".csv.gz", ".tsv", ".tsv.gz"), KINDS, read, write,
                    "comma/tab separated table with a header row", companions)
