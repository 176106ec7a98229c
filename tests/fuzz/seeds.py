"""The fuzzer's seed stores: one small valid store of every kind, by the public writers.

Built once per run, deterministically (fixed generators, fixed settings), a few hundred
vertices and a handful of cells each so that one case costs milliseconds of I/O.  The
compressors differ between seeds (zstd, gzip, blosc, none) so that the cell operators
meet every codec a store may declare.  :func:`baseline` is what ``read`` returns for the
unmutated seed at every level: the reference a mutated store's read is compared with.
"""

from __future__ import annotations

import os
import pickle
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

#: fields of ``VectorData`` a silent wrong answer is looked for in (compared exactly)
COMPARED = ("positions", "object_ids", "attributes", "objects", "object_attributes", "edges",
            "edge_attributes", "faces", "offsets")

GZIP = {"name": "gzip", "configuration": {"level": 5}}


def _rng(name: str) -> np.random.Generator:
    return np.random.default_rng(sum(map(ord, name)))


def _cloud(rng: np.random.Generator, n: int, dims: int = 3) -> np.ndarray:
    return rng.uniform(0.0, 100.0, (n, dims)).astype(np.float32)


def _points(path: str) -> None:
    import zarr_vectors as zv

    rng = _rng("points")
    n = 300
    zv.write_points(path, _cloud(rng, n), chunk_shape=50.0, bin_shape=25.0, object_ids=rng.integers(0, 8, n),
                    attributes={"intensity": rng.standard_normal(n).astype(np.float32),
                                "rgb": rng.integers(0, 256, (n, 3), dtype=np.uint8)},
                    object_attributes={"weight": rng.standard_normal(8).astype(np.float32)})


def _points2d(path: str) -> None:
    import zarr_vectors as zv

    rng = _rng("points2d")
    n = 250
    zv.write_points(path, _cloud(rng, n, 2), chunk_shape=50.0, compressor="blosc",
                    attributes={"label": rng.integers(0, 5, n).astype(np.int32)})


def _graph(path: str) -> None:
    import zarr_vectors as zv

    rng = _rng("graph")
    n = 200
    edges = rng.integers(0, n, (300, 2))
    edges = edges[edges[:, 0] != edges[:, 1]]
    zv.write_graph(path, _cloud(rng, n), edges, chunk_shape=50.0, object_ids=rng.integers(0, 5, n),
                   edge_attributes={"weight": rng.standard_normal(len(edges)).astype(np.float32)})


def _mesh(path: str) -> None:
    import zarr_vectors as zv

    rng = _rng("mesh")
    side = 12  # a wavy grid surface: side^2 vertices, 2 (side-1)^2 triangles
    u, v = np.meshgrid(np.linspace(0, 99, side), np.linspace(0, 99, side), indexing="ij")
    pos = np.stack([u.ravel(), v.ravel(), 50 + 40 * np.sin(u.ravel() / 15)], axis=1).astype(np.float32)
    i = np.arange(side - 1)[:, None] * side + np.arange(side - 1)[None, :]
    i = i.ravel()
    faces = np.concatenate([np.stack([i, i + 1, i + side], 1), np.stack([i + 1, i + side + 1, i + side], 1)])
    zv.write_mesh(path, pos, faces, chunk_shape=50.0, compressor=GZIP, object_ids=(np.arange(len(pos)) % 3),
                  attributes={"curv": rng.standard_normal(len(pos)).astype(np.float32)})


def _skeleton(path: str) -> None:
    import zarr_vectors as zv

    rng = _rng("skeleton")
    n = 240
    parents = np.arange(-1, n - 1)
    parents[::60] = -1  # four trees
    branch = np.arange(30, n, 37)
    parents[branch] = branch - 17  # side branches
    steps = rng.normal(0, 6, (n, 3))
    pos = (np.cumsum(steps, axis=0) % 99.0).astype(np.float32)
    zv.write_skeleton(path, pos, parents, chunk_shape=50.0, compressor="blosc", object_ids=np.arange(n) // 60,
                      attributes={"radius": rng.uniform(0.5, 2, n).astype(np.float32)})


def _lines(path: str, kind: str, compressor: Any) -> None:
    import zarr_vectors as zv

    rng = _rng(kind)
    lengths = rng.integers(8, 30, 12)
    offsets = np.r_[0, np.cumsum(lengths)]
    walk = np.cumsum(rng.normal(0, 7, (int(offsets[-1]), 3)), axis=0)
    pos = (walk % 99.0).astype(np.float32)
    zv.write_polylines(path, pos, offsets, kind=kind, chunk_shape=50.0, compressor=compressor,
                       attributes={"fa": rng.uniform(0, 1, len(pos)).astype(np.float32)},
                       object_attributes={"len": lengths.astype(np.float32)})


def _pyramid(path: str) -> None:
    import zarr_vectors as zv

    rng = _rng("pyramid")
    n = 400
    zv.write_points(path, _cloud(rng, n), chunk_shape=50.0, bin_shape=12.5, object_ids=rng.integers(0, 10, n),
                    attributes={"intensity": rng.standard_normal(n).astype(np.float32)})
    zv.build_pyramid(path, factors=[2, (2, 2)])


def _sharded(path: str) -> None:
    import zarr_vectors as zv

    _graph(path)
    zv.shard_store(path, 2)


def _consolidated(path: str) -> None:
    import zarr_vectors as zv

    _lines(path, "polyline", "zstd")
    zv.consolidate_store(path)


#: name -> builder; every kind, 2-D, a pyramid, sharded and consolidated
SEEDS: dict[str, Callable[[str], None]] = {
    "points": _points,
    "points2d": _points2d,
    "graph": _graph,
    "mesh": _mesh,
    "skeleton": _skeleton,
    "polylines": lambda p: _lines(p, "polyline", None),
    "streamlines": lambda p: _lines(p, "streamline", "zstd"),
    "pyramid": _pyramid,
    "sharded": _sharded,
    "consolidated": _consolidated,
}


def _levels(path: str) -> list[int]:
    import zarr_vectors as zv

    return list(zv.open_store(path).level_numbers())


def snapshot(data: Any) -> dict[str, Any]:
    """The compared fields of a ``VectorData``, as plain numpy (picklable, comparable)."""
    out: dict[str, Any] = {}
    for name in COMPARED:
        value = getattr(data, name)
        out[name] = {k: np.asarray(v) for k, v in value.items()} if isinstance(value, dict) else (
            None if value is None else np.asarray(value))
    return out


def differs(a: dict[str, Any], b: dict[str, Any]) -> str | None:
    """The first compared field where two snapshots differ (exactly: dtype, shape, bytes), else None."""
    for name in COMPARED:
        x, y = a.get(name), b.get(name)
        if isinstance(x, dict) or isinstance(y, dict):
            if not isinstance(x, dict) or not isinstance(y, dict) or sorted(x) != sorted(y):
                return f"{name}: keys {sorted(x or {})} != {sorted(y or {})}"
            for key in x:
                why = _array_differs(x[key], y[key])
                if why:
                    return f"{name}[{key!r}]: {why}"
            continue
        why = _array_differs(x, y)
        if why:
            return f"{name}: {why}"
    return None


def _array_differs(x: np.ndarray | None, y: np.ndarray | None) -> str | None:
    if x is None or y is None:
        return None if x is None and y is None else f"{'None' if x is None else 'array'} vs {'None' if y is None else 'array'}"
    if x.dtype != y.dtype or x.shape != y.shape:
        return f"{x.dtype}{x.shape} vs {y.dtype}{y.shape}"
    if x.tobytes() != y.tobytes():
        return f"values differ at {int(np.argmax((x != y).reshape(len(x), -1).any(axis=1)) if x.ndim else 0)}"
    return None


def build(root: str) -> dict[str, Any]:
    """Write every seed under ``root`` and return ``{name: {"path", "levels", "baseline"}}``.

    Also pickled as ``root/seeds.pkl`` so that a later process can load it without rebuilding.
    """
    import zarr_vectors as zv

    if os.path.exists(root):
        shutil.rmtree(root)
    os.makedirs(root)
    out: dict[str, Any] = {}
    for name, builder in SEEDS.items():
        path = os.path.join(root, f"{name}.zv")
        builder(path)
        for stray in Path(root).glob(f"{name}.zv.*"):  # a writer's side files (journals), outside the store
            shutil.rmtree(stray) if stray.is_dir() else stray.unlink()
        result = zv.validate(path, 5)
        if not result.ok or result.warnings:
            raise AssertionError(f"seed {name} is not clean:\n{result.summary()}")
        levels = _levels(path)
        out[name] = {"path": path, "levels": levels,
                     "baseline": {n: snapshot(zv.read(path, level=n)) for n in levels}}
    with open(os.path.join(root, "seeds.pkl"), "wb") as f:
        pickle.dump(out, f)
    return out


def load(root: str) -> dict[str, Any]:
    with open(os.path.join(root, "seeds.pkl"), "rb") as f:
        return pickle.load(f)
