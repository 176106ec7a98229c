"""NumPy ``.npz`` tables: one 1-D array per column, or a 2-D ``positions`` array (columns x, y[, z])."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from zarr_vectors.errors import InputError
from zarr_vectors.io.columns import DEFAULT_AXES, ColumnMap
from zarr_vectors.io.parquet import KINDS
from zarr_vectors.io.tables import companions, geometry_from_frame, remote_options, unreadable, write_tables
from zarr_vectors.io.types import FileFormat, Geometry


def _table(path: str, opts: Mapping[str, Any]) -> Any:
    import fsspec
    import pandas as pd

    columns: dict[str, np.ndarray] = {}
    try:
        with fsspec.open(path, "rb", **opts) as f, np.load(f, allow_pickle=False) as data:
            for key in data.files:
                arr = data[key]
                if arr.dtype.names is not None:
                    raise InputError(f"{path!r}: array {key!r} has fields {list(arr.dtype.names)}; NPZ inputs hold "
                                     "plain 1-D columns or a 2-D 'positions'")
                if arr.ndim == 2 and key == "positions":
                    names = DEFAULT_AXES if arr.shape[1] <= 3 else [f"d{i}" for i in range(arr.shape[1])]
                    parts = {names[i]: arr[:, i] for i in range(arr.shape[1])}
                elif arr.ndim == 1:
                    parts = {key: arr}
                else:
                    raise InputError(f"{path!r}: array {key!r} has shape {arr.shape}; NPZ inputs hold 1-D "
                                     "columns or a 2-D 'positions'")
                clash = sorted(set(parts) & set(columns))
                if clash:  # which one won depended on the members' order
                    raise InputError(f"{path!r}: column(s) {clash} given twice: as a 1-D array and as a column of "
                                     "the 2-D 'positions'")
                columns.update(parts)
    except InputError:
        raise
    except Exception as exc:  # not a zip, a truncated member, pickled objects
        raise unreadable(path, exc) from exc
    lengths = {len(v) for v in columns.values()}
    if len(lengths) > 1:
        raise InputError(f"{path!r}: columns of different lengths {sorted(lengths)}")
    return pd.DataFrame(columns)


def frame(paths: Sequence[str], *, storage_options: Mapping[str, Any] | None = None) -> Any:
    """The files as one dask dataframe (an NPZ member is read whole: about a million rows per partition)."""
    import dask.dataframe as dd

    opts = remote_options(paths, storage_options)
    frames = []
    for p in paths:
        table = _table(p, opts)
        frames.append(dd.from_pandas(table, npartitions=max(1, len(table) // 1_000_000)))
    return dd.concat(frames) if len(frames) > 1 else frames[0]


def read(path: str, *, columns: ColumnMap | None = None, storage_options: Mapping[str, Any] | None = None) -> Geometry:
    """An NPZ vertex table as point geometry."""
    return geometry_from_frame(_table(path, remote_options([path], storage_options)), path, columns)


def write(path: str, data: Any, **_: Any) -> None:
    """One 1-D array per column (``x, y, z, ...``); graph edges / mesh faces in ``NAME.edges.npz``."""
    def savez(out: str, table: dict[str, np.ndarray]) -> None:
        with open(out, "wb") as f:  # a name, not a file: savez adds ".npz"
            np.savez(f, **table)

    write_tables(path, data, savez)


FORMAT = FileFormat("npz", (".npz",), KINDS, read, write, "NumPy archive of 1-D columns (or a 2-D 'positions')",
                    companions)
