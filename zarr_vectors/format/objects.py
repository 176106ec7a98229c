"""Objects: which vertices each owns (docs/format.md §6.7, D20) and their attributes' absence
sentinel (§6.8: one row per object id, absent ids hold a sentinel).

A level's object index says which fragments each object owns.  At level 0 every vertex
belongs to one object, but on a pyramid level a metavertex stands for every kept object
whose vertices fell in its bin, so one vertex can belong to many.  :class:`ObjectVertices`
keeps that truth as a CSR table; a reader's one id per vertex is derived from it by one
stated rule (:data:`OBJECT_ID_RULE`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from zarr_vectors.errors import InputError


def wanted_objects(wanted: Any, known: np.ndarray, where: str, index: str = "the store's object index") -> np.ndarray:
    """The object ids ``wanted`` (a selection: ``zv export`` / ``zv plot --object-id``) as int64,
    every one of them among ``known`` (``index``'s ids); an :class:`InputError` naming those that are
    not (an id past int64 is in no object index, not a numpy ``OverflowError``)."""
    values = [int(v) for v in wanted]
    ids = np.asarray([v for v in values if -(1 << 63) <= v < 1 << 63], dtype=np.int64)
    unknown = [v for v in values if not -(1 << 63) <= v < 1 << 63] + np.setdiff1d(ids, known).tolist()
    if unknown:
        raise InputError(f"{where}object id(s) {unknown} are not in {index}")
    return ids


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


OBJECT_ID_RULE = "smallest_owner"
"""What ``VectorData.object_ids`` holds per vertex: the smallest id of the objects owning
it, ``-1`` where no object does.  Exact wherever each vertex has one owner (level 0, and
polylines at every level, whose shared metavertices repeat along each path)."""


@dataclass(frozen=True)
class ObjectVertices:
    """Which vertices each object owns: for row ``r`` of ``ids`` (the result's ``objects``),
    ``indices[offsets[r]:offsets[r + 1]]`` are indices into the result's ``positions``, in
    manifest order (a polyline's in traversal order).  Absent objects own nothing."""

    ids: np.ndarray  # int64 (O,)
    offsets: np.ndarray  # int64 (O + 1,)
    indices: np.ndarray  # int64, into positions
    num_vertices: int

    @classmethod
    def from_pairs(cls, ids: np.ndarray, rows: np.ndarray, vertices: np.ndarray, num_vertices: int) -> ObjectVertices:
        """From (object row, vertex) pairs grouped by row (the order manifests are decoded in)."""
        if len(rows) > 1 and (rows[1:] < rows[:-1]).any():
            order = np.argsort(rows, kind="stable")
            rows, vertices = rows[order], vertices[order]
        counts = np.bincount(rows, minlength=len(ids)) if len(rows) else np.zeros(len(ids), np.int64)
        offsets = np.r_[0, np.cumsum(counts)].astype(np.int64)
        return cls(np.asarray(ids, np.int64), offsets, np.asarray(vertices, np.int64), int(num_vertices))

    @classmethod
    def from_runs(cls, ids: np.ndarray, rows: np.ndarray, counts: np.ndarray) -> ObjectVertices:
        """Vertices numbered run by run: run ``i`` is ``counts[i]`` vertices of object row ``rows[i]``.

        :meth:`from_pairs` of every (row, vertex) pair, computed per run (a polyline read's
        ~10^5 runs, not its 2*10^6 vertices) when the runs come grouped by row.
        """
        total = int(counts.sum())
        if len(rows) > 1 and (rows[1:] < rows[:-1]).any():
            return cls.from_pairs(ids, np.repeat(rows, counts), np.arange(total, dtype=np.int64), total)
        per_row = np.bincount(rows, weights=counts, minlength=len(ids)).astype(np.int64) if len(rows) else \
            np.zeros(len(ids), np.int64)
        offsets = np.r_[0, np.cumsum(per_row)].astype(np.int64)
        return cls(np.asarray(ids, np.int64), offsets, np.arange(total, dtype=np.int64), total)

    def kept(self, keep: np.ndarray) -> ObjectVertices:
        """The view after the result kept the vertices ``keep`` (a mask over the old positions)."""
        new_index = np.cumsum(keep) - 1
        inside = keep[self.indices]
        rows = np.repeat(np.arange(len(self.ids)), np.diff(self.offsets))[inside]
        return ObjectVertices.from_pairs(self.ids, rows, new_index[self.indices[inside]], int(keep.sum()))

    def counts(self) -> np.ndarray:
        """Vertices owned per object row (0 for an absent or dropped object)."""
        return np.diff(self.offsets)

    def vertices_of(self, object_id: int) -> np.ndarray:
        """Indices into ``positions`` of the vertices ``object_id`` owns (empty for an id not in ``ids``)."""
        rows = np.flatnonzero(self.ids == object_id)
        if not len(rows):
            return np.zeros(0, np.int64)
        r = int(rows[0])  # the first row of an id a v2 table repeats (the validator reports the repeat)
        return self.indices[self.offsets[r] : self.offsets[r + 1]]

    def objects_of(self, vertex: int) -> np.ndarray:
        """Ids of the objects owning vertex ``vertex``, ascending."""
        offsets, owners = self.owners
        if not 0 <= vertex < self.num_vertices:
            raise InputError(f"vertex {vertex} is not in [0, {self.num_vertices})")
        return owners[offsets[vertex] : offsets[vertex + 1]]

    @cached_property
    def owners(self) -> tuple[np.ndarray, np.ndarray]:
        """The transposed table ``(offsets, owner_ids)``: ``owner_ids[offsets[v]:offsets[v + 1]]`` are the
        ids owning vertex v, ascending."""
        owner = np.repeat(self.ids, np.diff(self.offsets))
        order = np.lexsort((owner, self.indices))
        counts = np.bincount(self.indices, minlength=self.num_vertices)
        return np.r_[0, np.cumsum(counts)].astype(np.int64), owner[order]

    def smallest_owner(self) -> np.ndarray:
        """Per vertex, the smallest id owning it; -1 where none (:data:`OBJECT_ID_RULE`)."""
        owner = np.repeat(self.ids, np.diff(self.offsets))
        n, index = self.num_vertices, self.indices
        if not len(owner):
            return np.full(n, -1, dtype=np.int64)
        # ascending indices in [0, n) share no vertex, and n of them are every vertex in order (a
        # polyline read): one comparison pass instead of a count per vertex.  Anything else (a
        # table built inconsistently by hand) takes the general path, which refuses it
        ascending = len(index) == len(owner) and 0 <= index[0] and index[-1] < n
        ascending = ascending and bool((index[1:] > index[:-1]).all())
        if ascending and len(index) == n:
            return owner
        out = np.full(n, -1, dtype=np.int64)
        if ascending or np.bincount(index, minlength=n).max() <= 1:  # no vertex shared
            out[index] = owner
            return out
        big = np.iinfo(np.int64).max
        out[:] = big
        np.minimum.at(out, self.indices, owner)
        out[out == big] = -1
        return out

    def shared(self) -> int:
        """How many vertices more than one object owns (where ``object_ids`` tells one owner of several)."""
        return int((np.bincount(self.indices, minlength=self.num_vertices) > 1).sum())
