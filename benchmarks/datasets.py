"""The benchmark workloads' inputs, made the same way by every script that times them.

Numpy only, so a benchmark can import this module inside a subprocess that runs an
earlier commit of the project (``regression.py``, ``read.py``) without depending on it.
Each function returns the writer's name and its arguments for ``zarr_vectors.<writer>``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

BOX = [[0, 0, 0], [1000, 1000, 1000]]


def points(scale: float) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
    """``1e6 * scale`` uniform points in [0, 1000)^3 with one float attribute."""
    rng = np.random.default_rng(0)
    n = int(1_000_000 * scale)
    pts = rng.uniform(0, 1000, (n, 3)).astype(np.float32)
    val = rng.standard_normal(n).astype(np.float32)
    return "write_points", (pts,), {"chunk_shape": 250.0, "bin_shape": 62.5, "bounds": BOX, "attributes": {"value": val}}


def graph(scale: float) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
    """``2e5 * scale`` vertices and about three random edges per vertex, with a weight."""
    rng = np.random.default_rng(1)
    nv = int(200_000 * scale)
    pos = rng.uniform(0, 1000, (nv, 3)).astype(np.float32)
    edges = rng.integers(0, nv, (3 * nv, 2))
    edges = edges[edges[:, 0] != edges[:, 1]]
    weight = rng.random(len(edges)).astype(np.float32)
    return "write_graph", (pos, edges), {"chunk_shape": 250.0, "bounds": BOX, "edge_attributes": {"weight": weight}}


def mesh(scale: float) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
    """A wavy triangulated sheet of about ``1.6e5 * scale`` vertices."""
    side = max(10, int(400 * scale**0.5))
    xs, ys = np.meshgrid(np.arange(side, dtype=np.float32), np.arange(side, dtype=np.float32))
    pos = np.stack([xs.ravel() * 1000 / side, ys.ravel() * 1000 / side, 500 + 100 * np.sin(xs.ravel() / 50)], axis=1)
    idx = np.arange(side * side).reshape(side, side)
    a, b, c, d = idx[:-1, :-1].ravel(), idx[:-1, 1:].ravel(), idx[1:, :-1].ravel(), idx[1:, 1:].ravel()
    faces = np.concatenate([np.stack([a, b, c], 1), np.stack([b, d, c], 1)])
    return "write_mesh", (pos.astype(np.float32), faces), {"chunk_shape": 250.0, "bounds": BOX}


def streamlines(scale: float) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
    """``5e3 * scale`` random walks of 100 points each."""
    rng = np.random.default_rng(2)
    count, length = int(5000 * scale), 100
    steps = rng.normal(0, 2, (count, length, 3)).astype(np.float32)
    walks = (rng.uniform(200, 800, (count, 1, 3)).astype(np.float32) + np.cumsum(steps, axis=1)).reshape(-1, 3)
    offsets = np.arange(0, count * length + 1, length)
    return "write_polylines", (walks, offsets), {
        "chunk_shape": 250.0,
        "kind": "streamline",
        "bounds": [[-1000] * 3, [2000] * 3],
    }


ALL = {"points": points, "graph": graph, "mesh": mesh, "streamlines": streamlines}
