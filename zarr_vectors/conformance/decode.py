"""A level read whole, as the named arrays a case file pins (corpus conventions, cases.json).

Names: ``positions``, ``object_ids``, ``edges``, ``faces``, ``offsets``, ``objects``,
``attributes/<name>``, ``edge_attributes/<name>``, ``object_attributes/<name>``.  An
array the reader does not return is absent from the mapping.  Expected files live at
``expected/<case>/<level>/<name>.npy``; :func:`read_section` and :func:`section_names`
turn between the names and a case file's ``expect.read[level]`` object.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np

from zarr_vectors.read import read

SINGLE = ("positions", "object_ids", "edges", "faces", "offsets", "objects")
GROUPS = ("attributes", "edge_attributes", "object_attributes")


def decoded_level(url: str, level: int, allow_layouts: Collection[str] = ()) -> dict[str, np.ndarray]:
    """Every array ``read(url, level=level)`` returns, by name."""
    data = read(url, level=level, allow_layouts=allow_layouts)
    out: dict[str, np.ndarray] = {}
    for name in SINGLE:
        value = getattr(data, name)
        if value is not None:
            out[name] = np.asarray(value)
    for group in GROUPS:
        for key, value in sorted(getattr(data, group).items()):
            out[f"{group}/{key}"] = np.asarray(value)
    return out


def read_section(case_id: str, level: int, names: list[str]) -> dict[str, Any]:
    """The ``expect.read[level]`` object naming each array's ``.npy`` (paths relative to the corpus)."""
    base = f"expected/{case_id}/{level}"
    section: dict[str, Any] = {}
    for name in names:
        group, _, key = name.partition("/")
        if key:
            section.setdefault(group, {})[key] = f"{base}/{name}.npy"
        else:
            section[name] = f"{base}/{name}.npy"
    return section


def section_names(section: dict[str, Any]) -> dict[str, str]:
    """name -> .npy path, from an ``expect.read[level]`` object (the inverse of :func:`read_section`)."""
    out = {}
    for key, value in section.items():
        if isinstance(value, dict):
            out.update({f"{key}/{k}": str(v) for k, v in value.items()})
        else:
            out[key] = str(value)
    return out


def same(expected: np.ndarray, got: np.ndarray) -> str:
    """Why ``got`` differs from ``expected`` under the corpus tolerances (exact; NaN equals NaN), or ''."""
    if expected.shape != got.shape:
        return f"shape {got.shape}, expected {expected.shape}"
    if expected.dtype != got.dtype:
        return f"dtype {got.dtype}, expected {expected.dtype}"
    if expected.dtype.kind == "f":
        equal = (expected == got) | (np.isnan(expected) & np.isnan(got))
    else:
        equal = expected == got
    if not np.all(equal):
        bad = np.argwhere(~np.asarray(equal).reshape(expected.shape))
        return f"{len(bad)} values differ, first at {tuple(int(v) for v in bad[0])}"
    return ""
