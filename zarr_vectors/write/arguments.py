"""A writer's arguments as arrays and numbers, checked where they come in.

Numpy, lists and pandas become numpy arrays; dask arrays stay lazy.  Whatever numpy or Python
would refuse with an error naming no argument (a ragged list, a string where a number goes,
a list where a mapping goes) is an InputError naming it, and a dask array whose blocks are not
what it declares is refused at the block.
"""

from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from zarr_vectors.errors import InputError
from zarr_vectors.format.paths import check_new_name
from zarr_vectors.format.schema import attribute_dtype_problem


def is_dask_array(x: Any) -> bool:
    """Whether ``x`` is a dask array, without importing ``dask.array``.

    That import costs about half a second (it pulls in xarray and pandas where they are
    installed) and a numpy write never needs it: a dask array cannot exist unless its
    module was already imported.
    """
    module = sys.modules.get("dask.array")
    return module is not None and isinstance(x, module.Array)


def input_array(value: Any, what: str, dtype: Any = None, *, dask: bool = True) -> Any:
    """``value`` as a numpy array (a dask array as it is, where ``dask``): a ragged list, a
    string or another value numpy cannot make an array of numbers from is an InputError naming
    the argument, not numpy's own error."""
    if dask and is_dask_array(value):
        if value.ndim and any(math.isnan(c) for c in value.chunks[0]):
            raise InputError(f"{what} is a dask array of unknown chunk sizes (a dataframe's to_dask_array()): pass "
                             "lengths=True there, or call compute_chunk_sizes() first")
        return value
    try:
        arr = np.asarray(value, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{what} is not an array of numbers ({exc})") from None
    return arr


def attribute_column(value: Any, name: str, rows: int, what: str, per: str = "") -> Any:
    """Attribute ``name``'s values (numpy, or dask as they are): a new node's name, one row of
    ``rows`` each (``per`` what a row stands for, when it is not a vertex), at least one channel,
    of a dtype the format stores."""
    check_new_name(name, what)
    arr = input_array(value, f"{what} {name!r}")
    if arr.ndim not in (1, 2) or arr.shape[0] != rows or (arr.ndim == 2 and arr.shape[1] < 1):
        raise InputError(f"{what} {name!r} has shape {tuple(arr.shape)}; expected ({rows},) or ({rows}, channels), "
                         f"{f'one row per {per} and ' if per else ''}at least one channel")
    if problem := attribute_dtype_problem(arr.dtype):
        raise InputError(f"{what} {name!r} has {problem}")
    return arr


def as_declared(block: np.ndarray, what: str, block_info: dict[Any, Any] | None = None) -> np.ndarray:
    """A dask block as its array declares it: a block of another dtype, row count or row shape
    (a ``map_blocks`` without the right ``dtype=`` or ``chunks=``) would be stored as bytes the
    array's metadata misdescribes, or beside the wrong vertices."""
    assert block_info is not None
    declared = block_info[None]
    shape = tuple(declared["chunk-shape"])
    if block.dtype != declared["dtype"] or block.shape != shape:
        raise InputError(f"{what}: the dask block at row {declared['array-location'][0][0]} is {block.dtype} of "
                         f"shape {block.shape}, the array declares {np.dtype(declared['dtype'])} of shape {shape} "
                         "(a map_blocks without the right dtype= or chunks=?)")
    return block


def check_positions(positions: Any) -> Any:
    """``positions`` as an (n, ndim) float32 or float64 array (numpy, or dask as it is)."""
    pos = input_array(positions, "positions")
    if pos.ndim != 2 or pos.shape[1] < 1:
        raise InputError(f"positions must have shape (n, ndim), found {tuple(pos.shape)}")
    if pos.dtype not in (np.float32, np.float64):
        raise InputError(f"positions dtype {pos.dtype} is unsupported: pass float32 or float64")
    return pos


def mapping_argument(value: Any, what: str) -> Mapping[str, Any]:
    """``value`` (None: empty) as the mapping of names to columns it must be."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InputError(f"{what} must be a mapping of names to columns, found {type(value).__name__}")
    return value


def shape_tuple(value: Sequence[float] | float, ndim: int, what: str) -> tuple[float, ...]:
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    values = (value,) * ndim if np.isscalar(value) else tuple(value) if isinstance(value, Iterable) else None
    if values is None or not all(isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_)) for v in values):
        raise InputError(f"{what} must be a number or one number per axis, found {value!r}")
    if len(values) != ndim:
        raise InputError(f"{what} has {len(values)} entries but positions have {ndim} columns")
    out = tuple(float(v) for v in values)
    if not all(math.isfinite(v) and v > 0 for v in out):
        raise InputError(f"{what} entries must be finite and > 0, found {list(values)}")
    return out
