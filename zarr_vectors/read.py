"""High-level reading: one result type for every geometry kind.

Vertex order is storage order (DECISIONS.md D18): chunks in ascending numeric
coordinate order, then rows in cell order -- the order the reference reader uses.
"""

from __future__ import annotations

import posixpath
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zarr_vectors.core.grid import GridArray, read_cells_many
from zarr_vectors.core.objects import read_object_index
from zarr_vectors.core.store import Level, open_store
from zarr_vectors.core.tables import read_table
from zarr_vectors.encoding import FragmentIndex
from zarr_vectors.errors import EncodingError, InputError, MetadataError


@dataclass
class VectorData:
    """What :func:`read` returns.

    ``positions`` (n, D); ``object_ids`` per vertex (None when the level has no
    object index); ``attributes`` per vertex; ``objects`` the object ids of the
    level's object-index rows and ``object_attributes`` aligned with them.
    """

    kind: str
    positions: np.ndarray
    object_ids: np.ndarray | None = None
    attributes: dict[str, np.ndarray] = field(default_factory=dict)
    objects: np.ndarray | None = None
    object_attributes: dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.positions)


def _bbox(bbox: Any, ndim: int) -> tuple[np.ndarray, np.ndarray] | None:
    if bbox is None:
        return None
    try:
        b = np.asarray(bbox, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"bbox must be [min[{ndim}], max[{ndim}]] numbers, found {bbox!r}") from None
    if b.shape != (2, ndim) or np.isnan(b).any() or (b[0] > b[1]).any():
        raise InputError(f"bbox must be [min[{ndim}], max[{ndim}]] with min <= max, found {bbox!r}")
    return b[0], b[1]


def _cells_in_box(chunks: list[tuple[int, ...]], chunk_shape: np.ndarray, box: tuple[np.ndarray, np.ndarray] | None) -> list[tuple[int, ...]]:
    ordered = sorted(chunks)
    if box is None or not ordered:
        return ordered
    c = np.asarray(ordered, dtype=np.int64)
    lo_edge = c * chunk_shape
    keep = ((lo_edge <= box[1]) & (lo_edge + chunk_shape >= box[0])).all(axis=1)
    return [ordered[i] for i in np.flatnonzero(keep)]


def _rows(payload: bytes, dtype: np.dtype, width: int, where: str) -> np.ndarray:
    row = dtype.itemsize * width
    if len(payload) % row:
        raise EncodingError(f"{where}: {len(payload)} bytes is not a whole number of {width}-wide {dtype} rows")
    return np.frombuffer(payload, dtype=dtype).reshape(-1, width)


def read(
    url: str,
    *,
    level: int = 0,
    bbox: Any = None,
    allow_layouts: Collection[str] = (),
    storage_options: Mapping[str, Any] | None = None,
) -> VectorData:
    """Read one level of a store (optionally only the vertices inside ``bbox``, bounds inclusive)."""
    store = open_store(url, storage_options=storage_options)
    lvl = store.level(level)
    kinds = store.root.geometry_types
    if kinds != ["point_cloud"]:
        raise InputError(f"{url!r}: reading geometry {kinds} is not supported yet")
    return _read_points(lvl, _bbox(bbox, store.root.sid_ndim), allow_layouts)


def _vertex_attribute_arrays(lvl: Level) -> dict[str, GridArray]:
    return {name: lvl.array(posixpath.join("vertex_attributes", name)) for name in lvl.children("vertex_attributes")}


def _read_points(lvl: Level, box: tuple[np.ndarray, np.ndarray] | None, allow_layouts: Collection[str]) -> VectorData:
    ndim = lvl.store.root.sid_ndim
    vertices = lvl.array("vertices")
    dtype = np.dtype(vertices.attributes.get("dtype", "float32")).newbyteorder("<")
    cells = _cells_in_box(vertices.nonempty_chunk_coords(), np.asarray(lvl.chunk_shape), box)
    attr_grids = _vertex_attribute_arrays(lvl)
    objects = read_object_index(lvl, allow_layouts=allow_layouts)
    grids: list[GridArray] = [vertices, *attr_grids.values()]
    if objects is not None:
        grids.append(lvl.array("vertex_fragments"))
    payloads = read_cells_many([(g, c) for g in grids for c in cells])
    per_grid = [payloads[i * len(cells) : (i + 1) * len(cells)] for i in range(len(grids))]

    pos_parts = [_rows(p, dtype, ndim, f"{vertices.path} cell {c}") for p, c in zip(per_grid[0], cells)]
    positions = np.concatenate(pos_parts) if pos_parts else np.zeros((0, ndim), dtype)
    attributes: dict[str, np.ndarray] = {}
    for (name, grid), parts in zip(attr_grids.items(), per_grid[1:]):
        a_dtype = np.dtype(grid.attributes["dtype"]).newbyteorder("<")
        row_shape = tuple(grid.attributes.get("row_shape", []))
        width = int(np.prod(row_shape)) if row_shape else 1
        arrs = []
        for p, c, v in zip(parts, cells, pos_parts):
            a = _rows(p, a_dtype, width, f"{grid.path} cell {c}")
            if len(a) != len(v):
                raise EncodingError(f"{grid.path} cell {c}: {len(a)} rows but the vertex cell has {len(v)}")
            arrs.append(a)
        values = np.concatenate(arrs) if arrs else np.zeros((0, width), a_dtype)
        attributes[name] = values.reshape((-1,) + row_shape)

    object_ids = None
    object_attrs: dict[str, np.ndarray] = {}
    if objects is not None:
        object_ids = _vertex_object_ids(objects, cells, per_grid[-1], [len(v) for v in pos_parts], lvl)
        for name in lvl.children("object_attributes"):
            object_attrs[name], _ = read_table(lvl.storage, lvl.node_path(posixpath.join("object_attributes", name)))

    if box is not None and len(positions):
        keep = ((positions >= box[0]) & (positions <= box[1])).all(axis=1)
        positions = positions[keep]
        attributes = {k: v[keep] for k, v in attributes.items()}
        object_ids = object_ids[keep] if object_ids is not None else None
    return VectorData(
        kind="point_cloud",
        positions=positions,
        object_ids=object_ids,
        attributes=attributes,
        objects=objects.ids if objects is not None else None,
        object_attributes=object_attrs,
    )


def _vertex_object_ids(objects, cells, fragment_payloads, row_counts, lvl: Level) -> np.ndarray:  # noqa: ANN001
    """Object id of every vertex row, from the manifests and each cell's FragmentIndex."""
    ids, chunks, frags = objects.blocks_table()
    out = []
    for c, payload, n in zip(cells, fragment_payloads, row_counts):
        where = f"{lvl.node_path('vertex_fragments')} cell {c}"
        if not payload:
            raise MetadataError(f"{where}: missing, but the level has an object index", file=where)
        index = FragmentIndex.decode(payload)
        frag_object = np.full(index.num_fragments, -1, dtype=np.int64)
        mine = (chunks == np.asarray(c)).all(axis=1) if len(chunks) else np.zeros(0, bool)
        f = frags[mine]
        if len(f) and (f.max() >= index.num_fragments):
            raise EncodingError(f"{where}: a manifest names fragment {int(f.max())}, the cell has {index.num_fragments}")
        frag_object[f] = ids[mine]
        vid = np.full(n, -1, dtype=np.int64)
        frag_of_row, row = index.expand()
        if len(row) and row.max() >= n:
            raise EncodingError(f"{where}: fragment rows reach {int(row.max())}, the cell has {n} vertices")
        vid[row] = frag_object[frag_of_row]
        out.append(vid)
    return np.concatenate(out) if out else np.zeros(0, np.int64)
