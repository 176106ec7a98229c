"""What a file format module reads into and writes from, and how formats are found.

A reader returns a :class:`Geometry`: the arrays the writers take, named as
:class:`zarr_vectors.read.VectorData` names them, so a file read in and a store read
back compare field by field and an exporter accepts either.  Each format lives in one
module of ``zarr_vectors/io/`` that defines one :class:`FileFormat`; the registry
(:func:`formats`) lists them, and a file is matched to its format by its name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Geometry:
    """One file's geometry, ready for a writer (or taken from a store for an exporter).

    ``positions`` (n, D) float; ``object_ids`` one per vertex or None; ``attributes``
    per vertex; ``objects`` / ``object_attributes`` per object (aligned); ``edges``
    (graph; skeleton as ``[child, parent]``) and ``faces`` (mesh) index ``positions``,
    with ``edge_attributes`` aligned to whichever of them is set; ``offsets`` delimits
    polylines / streamlines in ``positions``; ``ids`` the input's own vertex ids (SWC
    sample numbers, graph node ids), kept so results map back to input rows; ``axes``
    names the position columns; ``dropped`` names input columns that could not be
    stored (the caller warns, never drops silently).  ``numbered_objects`` says the
    object ids are the reader's count of the file's objects (SWC trees, tractogram
    lines), not ids from the data: they mean nothing outside the file, so files read
    together are renumbered.  ``headers`` is what the file said that the arrays cannot,
    by format (``{"trk": ...}``: a tractogram's reference space), for a writer's
    ``headers=`` and, from a store, for an exporter.
    """

    kind: str
    positions: np.ndarray
    object_ids: np.ndarray | None = None
    attributes: dict[str, np.ndarray] = field(default_factory=dict)
    objects: np.ndarray | None = None
    object_attributes: dict[str, np.ndarray] = field(default_factory=dict)
    edges: np.ndarray | None = None
    edge_attributes: dict[str, np.ndarray] = field(default_factory=dict)
    faces: np.ndarray | None = None
    offsets: np.ndarray | None = None
    ids: np.ndarray | None = None
    axes: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    numbered_objects: bool = False
    headers: dict[str, dict[str, Any]] = field(default_factory=dict)


Reader = Callable[..., Geometry]
#: ``write(path, geometry_or_vector_data, **options)``
Writer = Callable[..., None]


def _alone(path: str) -> tuple[str, ...]:
    return ()


@dataclass(frozen=True)
class FileFormat:
    """A file format: its names, the kinds it holds, and its reader and writer (either may be None)."""

    name: str
    extensions: tuple[str, ...]  # lower case, with the dot; longest match wins (".csv.gz" before ".gz")
    kinds: tuple[str, ...]  # geometry kinds a file of this format can hold, the first the default
    read: Reader | None = None
    write: Writer | None = None
    description: str = ""
    #: the other files a write of ``path`` may create beside it (tables' edges and objects,
    #: an edge list's vertex table), so that a caller can refuse or clear them with ``path``
    companions: Callable[[str], tuple[str, ...]] = _alone
    #: the file says whether its edges are directed: the writer takes ``directed`` (the
    #: store's links policy), and an export that left it out would lose the direction
    records_direction: bool = False
    #: the store headers (``headers/<name>``) the writer takes from the data's ``headers``: an
    #: export that left them out would lose what they keep (a tractogram's reference space)
    headers: tuple[str, ...] = ()
    #: the file's header places the data in a reference image's space, which the writer also
    #: takes as ``reference`` (an image or a file of this kind)
    records_space: bool = False

    def matches(self, path: str) -> bool:
        return path.lower().rstrip("/").endswith(self.extensions)


def pick(candidates: Sequence[FileFormat], path: str) -> FileFormat | None:
    """The format whose longest extension ends ``path``, or None."""
    best: tuple[int, FileFormat] | None = None
    for fmt in candidates:
        for ext in fmt.extensions:
            if path.lower().rstrip("/").endswith(ext) and (best is None or len(ext) > best[0]):
                best = (len(ext), fmt)
    return None if best is None else best[1]


def as_geometry(data: Any) -> Geometry:
    """A :class:`Geometry` from a Geometry or a :class:`~zarr_vectors.read.VectorData` (exporters take both)."""
    if isinstance(data, Geometry):
        return data
    names = Geometry.__dataclass_fields__
    return Geometry(**{name: getattr(data, name) for name in names if hasattr(data, name)})
