"""SWC neuron morphologies (``.swc``), read and written by hand from the format's definition.

An SWC file is whitespace-separated lines ``n T x y z R P``: sample number, structure
type, position, radius and the parent's sample number (-1, or any negative number, for a
root); ``#`` starts a comment.  Sample numbers need not be contiguous nor sorted, and
parents may come after their children, but are not negative: no parent could name one.

Read: positions ``x y z``; ``ids`` the sample numbers (so results map back to the
file's rows); attributes ``type`` (int32) and ``radius`` (float64); edges
``[child, parent]`` (row indices) for every sample with a parent; each tree (a root and
its descendants) is one object, numbered in the order of the roots in the file (files
read together are numbered on from one another).  Columns
after the seventh become attributes ``column_8``, ``column_9``, ...  A parent that is not
a sample of the file, a negative or repeated sample number or a cycle is refused, naming the sample.

Write: one line per vertex, parents before children (depth-first from each root, roots
and siblings in the data's order, as most SWC tools expect; ``parents_first=False``
keeps the data's order), its sample number from ``ids``, else the attribute named by
``id_attribute`` (``"id"``: what a store built from SWC keeps), else 1..n (sample numbers
given twice, or negative, are refused); ``type`` and ``radius`` from those attributes (defaults
``type_default`` 0 = undefined and ``radius_default`` 1.0).  Other attributes are named
in a warning.
"""

from __future__ import annotations

import io
import warnings
from typing import Any

import numpy as np

from zarr_vectors.errors import InputError
from zarr_vectors.format import topology
from zarr_vectors.format.coarsen import unique_sorted
from zarr_vectors.io import geometry_parts as gp
from zarr_vectors.io.types import FileFormat, Geometry, as_geometry


def read(path: str, **options: Any) -> Geometry:
    """Read an SWC file (no options)."""
    gp.no_options(path, "SWC read", options)
    text = gp.read_text(path, "SWC", fallback="latin-1")  # as numpy read bytes: old tools write Latin-1
    with warnings.catch_warnings():  # numpy warns on an empty file; that is an empty skeleton here
        warnings.simplefilter("ignore", UserWarning)
        try:
            table = np.loadtxt(io.StringIO(text), comments="#", ndmin=2, dtype=np.float64)
        except ValueError as exc:
            raise gp.input_error(path, f"not an SWC table of numbers ({exc})") from exc
    if table.size == 0:
        table = np.zeros((0, 7))
    if table.shape[1] < 7:
        raise gp.input_error(path, f"SWC lines have {table.shape[1]} values; 7 expected (n T x y z R P)")
    integral = table[:, [0, 1, 6]]
    if (integral != np.round(integral)).any():
        row = int(np.argwhere(integral != np.round(integral))[0, 0])
        raise gp.input_error(path, f"data line {row + 1}: sample number, type and parent must be integers")
    # the integer types they are kept in: a cast past them wrapped (parent 1e20 became a root)
    for column, what, dtype in ((0, "sample number", np.int64), (6, "parent", np.int64), (1, "type", np.int32)):
        info = np.iinfo(dtype)
        outside = ~((table[:, column] >= info.min) & (table[:, column] < -float(info.min)))
        if outside.any():
            row = int(np.argmax(outside))
            raise gp.input_error(path, f"data line {row + 1}: {what} {table[row, column]:g} is outside the "
                                       f"{np.dtype(dtype).name} range")
    ids = table[:, 0].astype(np.int64)
    parents = _parent_rows(ids, table[:, 6].astype(np.int64), path)
    object_ids = _trees(ids, parents, path)
    child = np.flatnonzero(parents >= 0)
    attributes = {"type": table[:, 1].astype(np.int32), "radius": table[:, 5].copy()}
    attributes.update({f"column_{k + 1}": table[:, k].copy() for k in range(7, table.shape[1])})
    return Geometry(
        kind="skeleton",
        positions=table[:, 2:5].copy(),
        object_ids=object_ids,
        attributes=attributes,
        edges=np.stack([child, parents[child]], axis=1),
        ids=ids,
        axes=("x", "y", "z"),
        numbered_objects=True,
    )


def _parent_rows(ids: np.ndarray, parent_ids: np.ndarray, path: str) -> np.ndarray:
    """Each sample's parent as a row index (-1 for a root); unknown parents and repeated ids refused,
    and negative ids: a negative parent is a root, so a child of sample -3 became a root (its edge lost)."""
    negative = ids < 0
    if negative.any():
        row = int(np.argmax(negative))
        raise gp.input_error(path, f"data line {row + 1}: sample number {ids[row]} is negative; a negative parent "
                                   "marks a root, so no sample could name it as its parent")
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    repeated = np.flatnonzero(sorted_ids[1:] == sorted_ids[:-1])
    if len(repeated):
        raise gp.input_error(path, f"sample number {sorted_ids[repeated[0]]} appears more than once")
    at = np.minimum(np.searchsorted(sorted_ids, parent_ids), max(len(ids) - 1, 0))
    has_parent = parent_ids >= 0
    found = np.zeros(len(ids), dtype=bool)
    if len(ids):
        found = sorted_ids[at] == parent_ids
    missing = has_parent & ~found
    if missing.any():
        i = int(np.argmax(missing))
        raise gp.input_error(path, f"sample {ids[i]} has parent {parent_ids[i]}, which is not a sample of the file")
    return np.where(has_parent, order[at] if len(ids) else -1, -1)


def _trees(ids: np.ndarray, parents: np.ndarray, path: str) -> np.ndarray:
    """The tree (object id, numbered by its root's row order) of every sample; cycles refused."""
    n = len(parents)
    jump = np.where(parents < 0, np.arange(n), parents)
    for _ in range(max(1, int(np.ceil(np.log2(max(n, 2))))) + 1):  # pointer jumping: log2(n) rounds reach the root
        jump = jump[jump]
    on_cycle = parents[jump] >= 0
    if on_cycle.any():
        i = int(np.argmax(on_cycle))
        raise gp.input_error(path, f"sample {ids[i]} lies on a cycle of parents: an SWC file holds trees")
    tree = np.full(n, -1, dtype=np.int64)
    roots = np.flatnonzero(parents < 0)
    tree[roots] = np.arange(len(roots))
    return tree[jump]


def write(
    path: str,
    data: Any,
    *,
    id_attribute: str = "id",
    type_default: int = 0,
    radius_default: float = 1.0,
    parents_first: bool = True,
    **options: Any,
) -> None:
    """Write a skeleton as SWC, one sample per vertex (depth-first unless ``parents_first=False``)."""
    gp.no_options(path, "SWC write", options)
    geometry = as_geometry(data)
    positions = gp.positions_3d(geometry, path)
    if geometry.edges is None:
        raise gp.input_error(path, f"SWC holds skeletons; the data is a {geometry.kind} without edges")
    n = len(positions)
    edges = np.asarray(geometry.edges, dtype=np.int64).reshape(-1, 2)
    if len(unique_sorted(edges[:, 0])) != len(edges):
        raise gp.input_error(path, "a vertex has two parents: SWC holds trees")
    parents = np.full(n, -1, dtype=np.int64)
    parents[edges[:, 0]] = edges[:, 1]
    try:
        topology.check_parents(parents, n)
    except InputError as exc:
        raise gp.input_error(path, f"the data is no forest: {exc}") from exc
    attrs = geometry.attributes
    if geometry.ids is not None:
        ids = np.asarray(geometry.ids)
    elif id_attribute in attrs:
        ids = np.asarray(attrs[id_attribute])
    else:
        ids = np.arange(1, n + 1)
    if ids.shape != (n,) or (ids.dtype.kind == "f" and (ids != np.round(ids)).any()):
        raise gp.input_error(path, "sample numbers must be one integer per vertex")
    ids = ids.astype(np.int64)
    unique, counts = np.unique(ids, return_counts=True)
    if (counts > 1).any():
        raise gp.input_error(path, f"sample number {unique[counts > 1][0]} is given to {counts.max()} vertices")
    if len(unique) and unique[0] < 0:  # its children would read back as roots
        raise gp.input_error(path, f"sample number {unique[0]} is negative; SWC reads a negative parent as a root")
    parent_ids = np.where(parents >= 0, ids[np.maximum(parents, 0)], -1)
    types = np.asarray(attrs.get("type", np.full(n, type_default)))
    radius = np.asarray(attrs.get("radius", np.full(n, radius_default)), dtype=np.float64)
    gp.warn_unstored(path, "SWC", [*(set(attrs) - {"type", "radius", id_attribute}), *geometry.object_attributes])
    digits = "%.9g" if np.asarray(positions).dtype == np.float32 else "%.17g"
    rows = topology.depth_first_order(parents) if parents_first else np.arange(n)
    table = np.empty((n, 7), dtype=object)  # object columns: ids keep all 64 bits, positions their precision
    for k, column in enumerate((ids, types, *np.asarray(positions).T, radius, parent_ids)):
        table[:, k] = column[rows].tolist()
    with gp.os_errors(path, "written"):
        np.savetxt(
            path, table, fmt=["%d", "%d", digits, digits, digits, "%.17g", "%d"],
            header="SWC written by zarr-vectors\nn T x y z R P", comments="# ",
        )  # fmt: skip


FORMAT = FileFormat(
    name="swc",
    extensions=(".swc",),
    kinds=("skeleton",),
    read=read,
    write=write,
    description="SWC morphology (n T x y z R P): sample numbers kept as ids, type and radius as attributes",
)
