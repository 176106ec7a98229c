"""What each geometry kind looks like on one 2-D projection: matplotlib artists built from whole arrays.

Every function takes the positions already projected onto the two plotted axes (``xy``),
the depth along the dropped axis where it matters (mesh shading and painter's order),
index arrays of the records to draw, and optional per-vertex values to colour by; it
adds its artists to an ``Axes`` and returns the mappable a colour bar should describe
(None when the colours carry no scale).  No per-record Python loop: segments and
polygons are fancy-indexed out of the position array.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zarr_vectors import config

CMAP = "viridis"


def points(ax: Any, xy: np.ndarray, values: np.ndarray | None) -> Any:
    """A scatter for a few points, a density (hexbin) for many -- coloured by the mean value per hexagon."""
    n = len(xy)
    if n > int(config.get("plot.density-points")):
        gridsize = int(config.get("plot.hexbin-gridsize"))
        if values is None:
            return ax.hexbin(xy[:, 0], xy[:, 1], gridsize=gridsize, bins="log", cmap=CMAP, mincnt=1)
        return ax.hexbin(xy[:, 0], xy[:, 1], C=values, reduce_C_function=np.mean, gridsize=gridsize, cmap=CMAP,
                         mincnt=1)
    size = float(np.clip(2e4 / max(n, 1), 0.5, 30.0))  # fewer points, larger markers
    if values is None:
        ax.scatter(xy[:, 0], xy[:, 1], s=size, c="tab:blue", linewidths=0)
        return None
    return ax.scatter(xy[:, 0], xy[:, 1], s=size, c=values, cmap=CMAP, linewidths=0)


def segments(ax: Any, xy: np.ndarray, pairs: np.ndarray, values: np.ndarray | None, rgb: np.ndarray | None = None) -> Any:
    """Edges ``pairs`` (k, 2) as one LineCollection: a value per edge (the mean of its ends), else ``rgb`` per edge."""
    from matplotlib.collections import LineCollection

    lines = xy[pairs]  # (k, 2 ends, 2 coords)
    width = float(np.clip(300.0 / max(np.sqrt(len(pairs)), 1.0), 0.3, 1.5))
    if values is not None:
        coll = LineCollection(lines, array=values[pairs].mean(axis=1), cmap=CMAP, linewidths=width)
        ax.add_collection(coll)
        return coll
    ax.add_collection(LineCollection(lines, colors=rgb if rgb is not None else "0.2", linewidths=width))
    return None


def direction_rgb(positions: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Per segment, the tractography colour: RGB = |unit tangent| along x, y, z (a 2-D store has no blue)."""
    d = positions[pairs[:, 1]].astype(np.float64) - positions[pairs[:, 0]]
    norm = np.linalg.norm(d, axis=1, keepdims=True)
    unit = np.abs(d) / np.where(norm > 0, norm, 1.0)
    rgb = np.zeros((len(pairs), 3))
    k = min(3, unit.shape[1])
    rgb[:, :k] = unit[:, :k]
    return rgb


def faces(
    ax: Any, xy: np.ndarray, depth: np.ndarray, normal_axis: int, positions: np.ndarray, tris: np.ndarray,
    values: np.ndarray | None,
) -> Any:
    """Triangles, far to near (painter's order), shaded by how squarely they face the viewer, or by value.

    A wireframe is drawn over them while there are few enough faces to see it.
    """
    from matplotlib.collections import PolyCollection

    order = np.argsort(depth[tris].mean(axis=1), kind="stable")
    tris = tris[order]
    edge = "0.15" if len(tris) <= int(config.get("plot.wireframe-faces")) else "none"
    coll = PolyCollection(xy[tris], edgecolors=edge, linewidths=0.2)
    if values is not None:
        coll.set_array(values[tris].mean(axis=1))
        coll.set_cmap(CMAP)
        ax.add_collection(coll)
        return coll
    p = positions.astype(np.float64)
    if p.shape[1] == 3:
        n = np.cross(p[tris[:, 1]] - p[tris[:, 0]], p[tris[:, 2]] - p[tris[:, 0]])
        length = np.linalg.norm(n, axis=1)
        facing = np.abs(n[:, normal_axis]) / np.where(length > 0, length, 1.0)
    else:
        facing = np.ones(len(tris))
    shade = 0.35 + 0.6 * facing
    coll.set_facecolor(np.column_stack([shade * 0.55, shade * 0.7, shade, np.ones_like(shade)]))
    ax.add_collection(coll)
    return None
