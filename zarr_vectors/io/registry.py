"""The list of file formats, and which one a file is.

Each name in :data:`MODULES` is a module of this package defining ``FORMAT`` (or a tuple
``FORMATS``) -- adding a format is adding its module and one line here.  A module may
also define ``frame(paths, *, storage_options=None)``: a lazy reader returning a
dask dataframe whose partitions the cluster reads (tables, LAS chunks); formats without
one are read whole by their ``FORMAT.read`` into a :class:`~zarr_vectors.io.types.Geometry`.
Modules are imported on first use, so ``import zarr_vectors`` pays for none of them.
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

from zarr_vectors.errors import InputError
from zarr_vectors.io.types import FileFormat, pick
from zarr_vectors.store.backend import local_path

MODULES: tuple[str, ...] = (
    "parquet",
    "csv",
    "npz",
    "las",
    "graphml",
    "edgelist",
    "ply",
    "obj",
    "stl",
    "gifti",
    "freesurfer",
    "swc",
    "trk",
    "tck",
    "trx",
)


@functools.cache
def _loaded() -> tuple[tuple[FileFormat, ModuleType], ...]:
    out = []
    for name in MODULES:
        module = importlib.import_module(f"{__package__}.{name}")
        found = getattr(module, "FORMATS", None) or (module.FORMAT,)
        out.extend((fmt, module) for fmt in found)
    return tuple(out)


def formats() -> tuple[FileFormat, ...]:
    """Every known format, in :data:`MODULES` order."""
    return tuple(fmt for fmt, _ in _loaded())


def extensions() -> list[str]:
    return sorted({ext for fmt in formats() for ext in fmt.extensions})


#: a store's kind (:attr:`zarr_vectors.read.VectorData.kind`) -> the name ``zv build`` and ``FileFormat.kinds`` use
BUILD_KINDS = {"point_cloud": "points", "polyline": "polylines", "line": "polylines", "streamline": "streamlines",
               "points": "points", "polylines": "polylines", "streamlines": "streamlines", "graph": "graph",
               "mesh": "mesh", "skeleton": "skeleton"}


def build_kind(kind: str) -> str:
    """The ``zv build`` name of a kind (``point_cloud`` -> ``points``, ``streamline`` -> ``streamlines``)."""
    return BUILD_KINDS.get(kind, kind)


def format_for(path: str, kind: str | None = None) -> FileFormat:
    """The format of ``path`` by its name (a local directory is a Parquet dataset).

    ``kind`` (a ``zv build`` kind: points, graph, ...) must be one the format holds.
    Raises :class:`InputError` naming the file and the known extensions.
    """
    found = pick(formats(), path)
    local = local_path(path)
    if found is None and local is not None and os.path.isdir(local):
        found = by_name("parquet")
    if found is None:
        raise InputError(f"{path!r}: unknown file format (known extensions: {', '.join(extensions())})")
    if kind is not None and build_kind(kind) not in {build_kind(k) for k in found.kinds}:
        raise InputError(f"{path!r}: a {found.name} file holds {', '.join(found.kinds)}, not {kind}")
    return found


def by_name(name: str) -> FileFormat:
    for fmt in formats():
        if fmt.name == name:
            return fmt
    raise InputError(f"unknown file format {name!r}; known: {', '.join(f.name for f in formats())}")


def frame_reader(fmt: FileFormat) -> Callable[..., Any] | None:
    """The format's partitioned reader (``frame``), or None when it is read whole."""
    for known, module in _loaded():
        if known is fmt:
            return getattr(module, "frame", None)
    return None
