"""The input column conventions of ``zv build`` (see :mod:`pipeline.sources`), and local CSVs read whole.

Apart from the dataframe readers so that a command can check an input's columns, and
read a local CSV whole for a job on local threads, without importing dask.dataframe and
dask.array (and, for a small all-numeric CSV read with numpy, pandas): about a second at
start-up, more than a 100-point build takes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from zarr_vectors.errors import InputError

AXES = ("x", "y", "z")

RESERVED = {"id", "object_id", "src", "dst", "line", "order", "parent", "_row"}

#: Columns each kind's tables must have besides coordinates: (vertex table, record table)
NEEDED = {
    "points": ((), None),
    "graph": (("id",), ("src", "dst")),
    "mesh": (("id",), ("a", "b", "c")),
    "polylines": (("line", "order"), None),
    "streamlines": (("line", "order"), None),
    "skeleton": (("id", "parent"), None),
}


def numeric(dtype: Any) -> bool:
    """A numpy numeric or bool dtype (string / object / extension columns are not attributes)."""
    try:
        return np.dtype(dtype).kind in "biuf"
    except TypeError:  # pandas extension dtypes (strings, nullable ints) have no numpy equivalent
        return False


def attribute_names(dtypes: Mapping[str, Any], skip: Sequence[str] = ()) -> list[str]:
    """The columns stored as attributes: every numeric one that is not reserved, a coordinate or in ``skip``."""
    return [c for c, t in dtypes.items() if c not in RESERVED and c not in AXES and c not in skip and numeric(t)]


def check_columns(kind: str, columns: Sequence[str], *, records: bool, path: str) -> int:
    """The columns ``kind`` needs in one input file, from its schema (no data read); returns
    the number of coordinate axes of a vertex table (0 for a record table).  InputError
    names the file and the missing column(s)."""
    vertex_cols, record_cols = NEEDED[kind]
    needed = list(record_cols if records else vertex_cols)
    if not records:
        needed = [a for a in AXES[:2]] + needed
    missing = [c for c in needed if c not in columns]
    if missing:
        what = "record" if records else "vertex"
        raise InputError(f"{path}: {kind} {what} table lacks column(s) {missing}; it has {list(columns)}")
    return 0 if records else sum(a in columns for a in AXES)


def local_csv(path: str) -> bool:
    """A plain (uncompressed, comma-separated) CSV file on this machine."""
    return path.lower().endswith(".csv") and ("://" not in path or path.startswith("file://")) \
        and os.path.isfile(path.removeprefix("file://"))


def csv_header(path: str) -> list[str]:
    """The column names of a local CSV (its first line)."""
    with open(path.removeprefix("file://"), encoding="utf-8", errors="replace") as f:
        return [name.strip().strip('"') for name in f.readline().rstrip("\r\n").split(",")]


def read_numeric_csv(path: str) -> dict[str, np.ndarray] | None:
    """A small local CSV whose columns are all numbers, read whole with numpy; None when a
    value is not a number or is missing (the dataframe reader then decides what it is).
    A column of integers comes back int64 and any other float64, as the dataframe reader
    types them, so a store's attribute types do not depend on the input's size."""
    names = csv_header(path)
    try:
        text = np.loadtxt(path.removeprefix("file://"), delimiter=",", skiprows=1, dtype=str, ndmin=2)
    except ValueError:  # ragged rows
        return None
    if text.size and text.shape[1] != len(names):
        return None
    out: dict[str, np.ndarray] = {}
    for i, name in enumerate(names):
        column = text[:, i] if text.size else np.zeros(0, dtype=str)
        for dtype in (np.int64, np.float64):
            try:
                out[name] = column.astype(dtype)
                break
            except (ValueError, OverflowError):
                continue
        else:
            return None
    return out


def read_csv_whole(path: str) -> dict[str, np.ndarray]:
    """A local CSV read whole by pandas' parser (the one dask.dataframe runs per block), as
    numpy columns; columns with no numpy type (strings) are left out, as the dataframe path
    leaves them out of the attributes."""
    import pandas as pd

    df = pd.read_csv(path.removeprefix("file://"))
    return {str(c): df[c].to_numpy() for c in df.columns if numeric(df[c].dtype)}
