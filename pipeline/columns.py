"""Local CSVs read whole, for a small job on local threads (``pipeline.inputs``).

Apart from the dataframe readers so that a small build reads its input without importing
dask.dataframe and dask.array (and, for a small all-numeric CSV read with numpy, pandas):
about a second at start-up, more than a 100-point build takes.
"""

from __future__ import annotations

import csv
import os
import warnings

import numpy as np

from zarr_vectors.errors import InputError
from zarr_vectors.io.columns import TEXT_ENCODING
from zarr_vectors.store.backend import local_path


def local_csv(path: str) -> bool:
    """A plain (uncompressed, comma-separated) CSV file on this machine."""
    local = local_path(path)
    return path.lower().endswith(".csv") and local is not None and os.path.isfile(local)


def local_file(path: str) -> str:
    """The file a local CSV's path or URL names (its callers have asked :func:`local_csv`)."""
    local = local_path(path)
    if local is None:
        raise InputError(f"{path!r} is not a file on this machine")
    return local


def csv_header(path: str) -> list[str]:
    """The column names of a local CSV (its first row that is not blank), as the dataframe reader
    names them: quotes undone and the spaces after a comma skipped (``x, y, z`` names ``y``)."""
    with open(local_file(path), encoding=TEXT_ENCODING, errors="replace", newline="") as f:
        return next((row for row in csv.reader(f, skipinitialspace=True) if row), [])


def read_numeric_csv(path: str) -> dict[str, np.ndarray] | None:
    """A small local CSV whose columns are all numbers, read whole with numpy; None when a
    value is not a number or is missing (the dataframe reader then decides what it is).
    Columns are typed as the dataframe reader types them, so a store's attribute types do not
    depend on the input's size: integers int64, or uint64 past int64 when none is negative
    (other integers that large are left to it: it keeps them as text), anything else float64.
    Blank lines are skipped, as it skips them; ``#`` starts no comment, as it does not."""
    names = csv_header(path)
    try:
        with warnings.catch_warnings():  # an empty input (preflight refuses it itself), a blank line
            warnings.filterwarnings("ignore", r"(loadtxt: input|Input line \d+) contained no data", UserWarning)
            text = np.loadtxt(local_file(path), delimiter=",", skiprows=1, dtype=str, ndmin=2, comments=None)
    except ValueError:  # ragged rows
        return None
    if text.size and text.shape[1] != len(names):
        return None
    out: dict[str, np.ndarray] = {}
    for i, name in enumerate(names):
        typed = _typed_column(text[:, i] if text.size else np.zeros(0, dtype=str))
        if typed is None:
            return None
        out[name] = typed
    return out


def _typed_column(column: np.ndarray) -> np.ndarray | None:
    """A column of number text as the dataframe reader types it, or None where it would not
    (no number, or integers that fit neither int64 nor uint64)."""
    try:
        return column.astype(np.int64)
    except OverflowError:  # integers, some past int64
        try:
            return column.astype(np.uint64)
        except (ValueError, OverflowError):
            return None
    except ValueError:
        pass
    try:
        return column.astype(np.float64)
    except (ValueError, OverflowError):
        return None


def read_csv_whole(path: str) -> dict[str, np.ndarray]:
    """A local CSV read whole by pandas' parser (the one dask.dataframe runs per block), as numpy
    columns (a text column comes back as objects: its caller leaves such a file to the dataframe path)."""
    import pandas as pd

    df = pd.read_csv(local_file(path), skipinitialspace=True)  # the dialect of io.csv.frame
    return {str(c): df[c].to_numpy() for c in df.columns}
