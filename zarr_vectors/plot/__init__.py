"""Pictures of one store level: points, edges, mesh faces, streamlines -- as a matplotlib Figure.

:func:`plot_level` reads the level through :func:`zarr_vectors.read.read` (``level``,
``bbox``) and draws it on up to three projections (``xy``, ``xz``, ``yz`` of a 3-D
store; ``xy`` of a 2-D one): point clouds as points or, when many, a density; graphs and
skeletons as their edges; meshes as shaded triangles (wireframe over them when small);
polylines and streamlines as segments coloured by direction (RGB = |unit tangent|, the
tractography convention).  ``color_by`` colours everything by a vertex attribute instead
(the mean of a record's vertices; an attribute with several components by its norm) --
coarse pyramid levels carry aggregated attributes (docs/decisions.md D22), so a
zoomed-out picture can be coloured too.  :func:`save_plot` writes a PNG, SVG or PDF.

matplotlib is imported only here, when plotting, and only its object API is used (a
``Figure`` with the Agg canvas): no pyplot state, no change to the session's backend, so
a notebook shows the returned figure as an image.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from zarr_vectors.errors import InputError
from zarr_vectors.format.objects import wanted_objects
from zarr_vectors.plot import draw
from zarr_vectors.read import LINKED_KINDS, POLYLINE_KINDS, VectorData, read

if TYPE_CHECKING:  # matplotlib is imported when a picture is drawn, not with the package
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["PLOT_SUFFIXES", "PROJECTIONS", "plot_level", "save_plot"]

PROJECTIONS = {"xy": (0, 1), "xz": (0, 2), "yz": (1, 2)}
"""Each projection's plotted axes (position columns); the remaining axis is the depth."""
PLOT_SUFFIXES = (".png", ".svg", ".pdf")
"""What :func:`save_plot` (and ``zv plot --out``) writes."""


def _projections(ndim: int, asked: Sequence[str] | None) -> list[str]:
    if asked is None:
        return list(PROJECTIONS) if ndim >= 3 else ["xy"]
    bad = [p for p in asked if p not in PROJECTIONS or max(PROJECTIONS[p]) >= ndim]
    if bad or not asked:
        usable = [p for p in PROJECTIONS if max(PROJECTIONS[p]) < ndim]
        raise InputError(f"projections {list(asked)}: choose from {usable} for a {ndim}-D store")
    return list(asked)


def _values(data: VectorData, color_by: str | None) -> np.ndarray | None:
    """The vertex attribute to colour by, one float per vertex (a multi-component one by its norm)."""
    if color_by is None:
        return None
    if color_by not in data.attributes:
        names = sorted(data.attributes) or "none"
        raise InputError(f"color_by {color_by!r}: the level has no such vertex attribute (it has {names})")
    v = np.asarray(data.attributes[color_by], dtype=np.float64)
    return np.linalg.norm(v.reshape(len(v), -1), axis=1) if v.ndim > 1 else v


def _kept(data: VectorData, objects: Sequence[int] | None) -> np.ndarray:
    """Mask of the vertices to draw: all, or those the given objects own."""
    n = len(data.positions)
    if objects is None:
        return np.ones(n, dtype=bool)
    ov = data.object_vertices
    if ov is None and data.object_ids is None:
        raise InputError("objects: the level has no object ids to select by")
    known = ov.ids if ov is not None else np.unique(data.object_ids)
    # refused as zv export refuses them: an empty picture would say nothing about why
    wanted = wanted_objects(objects, known, "objects: ", "the level's object index")
    if ov is None:
        return np.isin(data.object_ids, wanted)
    owner = np.repeat(ov.ids, np.diff(ov.offsets))  # the object of each (object, vertex) pair
    keep = np.zeros(n, dtype=bool)
    keep[ov.indices[np.isin(owner, wanted)]] = True
    return keep


def _polyline_pairs(data: VectorData) -> np.ndarray:
    """Consecutive vertices of each polyline as (k, 2) index pairs (no pair across two polylines)."""
    n = len(data.positions)
    if n < 2:
        return np.zeros((0, 2), dtype=np.int64)
    starts = np.zeros(n + 1, dtype=bool)
    if data.offsets is not None:
        starts[np.asarray(data.offsets, dtype=np.int64)] = True
    first = np.flatnonzero(~starts[1:n])  # i such that i + 1 does not start a polyline
    return np.column_stack([first, first + 1]).astype(np.int64)


def _records(data: VectorData) -> np.ndarray | None:
    """What joins the level's vertices, as rows of vertex indices: a polyline kind's consecutive
    pairs, a mesh's faces, a graph's or skeleton's edges (empty on a coarse level, which holds
    metavertices only); None for a point cloud.  Built once, for every projection."""
    if data.kind in POLYLINE_KINDS:
        return _polyline_pairs(data)
    if data.kind == "mesh":
        return np.asarray(data.faces, dtype=np.int64) if data.faces is not None else np.zeros((0, 3), np.int64)
    if data.kind in LINKED_KINDS:
        return np.asarray(data.edges, dtype=np.int64) if data.edges is not None else np.zeros((0, 2), np.int64)
    return None


def _draw(ax: Any, data: VectorData, keep: np.ndarray, values: np.ndarray | None, projection: str,
          records: np.ndarray | None) -> Any:  # fmt: skip
    a, b = PROJECTIONS[projection]
    pos = data.positions
    xy = np.ascontiguousarray(pos[:, [a, b]], dtype=np.float64)
    if records is None or not len(records):
        return draw.points(ax, xy[keep], values[keep] if values is not None else None)
    kept = records[keep[records].all(axis=1)]
    if data.kind in POLYLINE_KINDS:
        return draw.segments(ax, xy, kept, values, None if values is not None else draw.direction_rgb(pos, kept))
    if data.kind == "mesh":
        depth_axis = ({0, 1, 2} - {a, b}).pop() if pos.shape[1] == 3 else 0
        depth = pos[:, depth_axis].astype(np.float64) if pos.shape[1] == 3 else np.zeros(len(pos))
        return draw.faces(ax, xy, depth, depth_axis, pos, kept, values)
    return draw.segments(ax, xy, kept, values)


def _frame(ax: Any, data: VectorData, keep: np.ndarray, projection: str) -> None:
    a, b = PROJECTIONS[projection]
    names = list(data.axes) if len(data.axes) == data.positions.shape[1] else ["x", "y", "z"][: data.positions.shape[1]]
    ax.set_xlabel(names[a])
    ax.set_ylabel(names[b])
    ax.set_aspect("equal", adjustable="box")
    if keep.any():
        sel = data.positions[keep]
        lo, hi = sel[:, [a, b]].min(axis=0).astype(np.float64), sel[:, [a, b]].max(axis=0).astype(np.float64)
        # a flat axis (a height field seen edge-on, one point) gets a margin from the other axis,
        # so the panel is a strip rather than collapsed to a line of overlapping tick labels
        span = float((hi - lo).max())
        pad = np.maximum((hi - lo) * 0.03, 0.03 * span if span > 0 else 1.0)
        ax.set_xlim(lo[0] - pad[0], hi[0] + pad[0])
        ax.set_ylim(lo[1] - pad[1], hi[1] + pad[1])


def plot_level(
    url: str | os.PathLike[str],
    level: int = 0,
    *,
    bbox: Any = None,
    color_by: str | None = None,
    objects: Sequence[int] | None = None,
    projections: Sequence[str] | None = None,
    ax: Axes | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> Figure:
    """A picture of one level of a store; returns the ``Figure`` (``ax``'s, when given).

    ``bbox`` (``[[min...], [max...]]``, inclusive) and ``level`` go to the reader;
    ``objects`` keeps the vertices those object ids own (and the records among them);
    ``projections`` chooses among ``xy``, ``xz``, ``yz`` (default: all a 3-D store has);
    with ``ax`` only the first is drawn, on that Axes.  ``color_by`` names a vertex
    attribute; a colour bar shows its scale.
    """
    data = read(str(url), level=level, bbox=bbox, storage_options=storage_options)
    chosen = _projections(data.positions.shape[1], projections)
    values = _values(data, color_by)
    keep = _kept(data, objects)
    finite = np.isfinite(data.positions).all(axis=1)  # a reader returns NaN rows (L3_NONFINITE_VERTEX)
    if not finite[keep].all():
        warnings.warn(f"{int((keep & ~finite).sum())} vertices have NaN coordinates (the validator's "
                      "L3_NONFINITE_VERTEX): not drawn", UserWarning, stacklevel=2)
        keep &= finite
    if ax is not None:
        fig, axes = ax.figure, [ax]
        chosen = chosen[:1]
    else:
        from matplotlib.figure import Figure

        fig = Figure(figsize=(4.6 * len(chosen) + (0.8 if values is not None else 0), 4.8), layout="constrained")
        axes = list(np.atleast_1d(fig.subplots(1, len(chosen))))
    mappable, records = None, _records(data)
    for a, projection in zip(axes, chosen):
        mappable = _draw(a, data, keep, values, projection, records) or mappable
        _frame(a, data, keep, projection)
    if mappable is not None:
        label = color_by if color_by is not None else "points per bin (log)"
        fig.colorbar(mappable, ax=axes, label=label, shrink=0.85)
    title = f"{Path(str(url).rstrip('/')).name} level {level}: {data.kind}, {int(keep.sum()):,} vertices"
    if records is not None and not len(records):
        joins = {"mesh": "faces"}.get(data.kind, "lines" if data.kind in POLYLINE_KINDS else "edges")
        title += f" (no {joins} at this level: drawn as points)"
    if ax is None:
        fig.suptitle(title)
    else:
        ax.set_title(title, fontsize="medium")
    return fig


def save_plot(url: str | os.PathLike[str], out: str | os.PathLike[str], *, dpi: int = 120, **options: Any) -> Path:
    """:func:`plot_level` (``options`` are its arguments) written to ``out`` (.png, .svg or .pdf)."""
    path = Path(out)
    if path.suffix.lower() not in PLOT_SUFFIXES:
        raise InputError(f"{str(out)!r}: the picture must be a {', '.join(PLOT_SUFFIXES)} file")
    if not path.parent.is_dir():
        raise InputError(f"{str(out)!r}: no such directory {str(path.parent)!r}")
    fig = plot_level(url, **options)
    fig.savefig(path, dpi=dpi)
    return path
