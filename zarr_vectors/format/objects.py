"""Object attributes (docs/format.md §6.8): one row per object id, absent ids hold a sentinel."""

from __future__ import annotations

from typing import Any

import numpy as np

from zarr_vectors.errors import InputError


def absence_fill(dtype: np.dtype, name: str = "") -> Any:
    """The sentinel an absent object's row holds: NaN, or the integer type's far end."""
    if dtype.kind == "f":
        return np.nan
    if dtype.kind == "i":
        return np.iinfo(dtype).min
    if dtype.kind == "u":
        return np.iinfo(dtype).max
    raise InputError(f"object attribute {name!r} of dtype {dtype} has no absence sentinel (use a numeric dtype)")


def object_attribute_attributes(name: str, values: np.ndarray) -> dict[str, Any]:
    """The ``attributes`` of an ``object_attributes/<name>`` array holding ``values``."""
    return {
        "zv_array": "object_attribute",
        "name": name,
        "dtype": values.dtype.name,
        "shape": list(values.shape),
        "fill_sentinel_meaning": "absent",
    }
