"""Part of a store's read data: the vertices of some objects, and the records and polylines among them.

:func:`zarr_vectors.read.read` cuts by bounding box; exporters also cut by object id.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from zarr_vectors.errors import InputError
from zarr_vectors.format.objects import wanted_objects
from zarr_vectors.io.types import Geometry, as_geometry
from zarr_vectors.read import keep_records


def objects(data: Any, wanted: Sequence[int]) -> Geometry:
    """The vertices the objects ``wanted`` own (every owner's, where a vertex is shared), and
    the edges, faces and polyline pieces whose vertices are all kept."""
    owners = getattr(data, "object_vertices", None)
    g = as_geometry(data)
    if owners is None and g.object_ids is None:
        raise InputError("the store has no object index: --object-id cannot select anything")
    ids = wanted_objects(wanted, owners.ids if owners is not None else np.unique(g.object_ids), "")
    keep = np.zeros(len(g.positions), dtype=bool)
    if owners is not None:
        for i in ids.tolist():  # one slice per requested object
            keep[owners.vertices_of(i)] = True
    else:
        keep = np.isin(g.object_ids, ids)
    return subset(g, keep, ids)


def subset(g: Geometry, keep: np.ndarray, object_ids: np.ndarray | None = None) -> Geometry:
    """``g`` restricted to the vertices ``keep`` (a mask); records need every endpoint kept."""
    new_index = np.cumsum(keep) - 1
    out = Geometry(kind=g.kind, positions=g.positions[keep], axes=g.axes, dropped=g.dropped,
                   object_ids=None if g.object_ids is None else np.asarray(g.object_ids)[keep],
                   attributes={k: np.asarray(v)[keep] for k, v in g.attributes.items()},
                   ids=None if g.ids is None else np.asarray(g.ids)[keep])
    out.edges, out.faces, out.edge_attributes = g.edges, g.faces, g.edge_attributes
    keep_records(out, keep, new_index)
    if g.offsets is not None:
        offsets = np.asarray(g.offsets)
        line = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))[keep]
        starts = np.flatnonzero(np.r_[True, line[1:] != line[:-1]]) if len(line) else np.zeros(0, np.int64)
        out.offsets = np.r_[starts, len(line)].astype(np.int64)
    if g.objects is not None:
        chosen = np.ones(len(g.objects), bool) if object_ids is None else np.isin(g.objects, object_ids)
        out.objects = np.asarray(g.objects)[chosen]
        out.object_attributes = {k: np.asarray(v)[chosen] for k, v in g.object_attributes.items()}
    return out
