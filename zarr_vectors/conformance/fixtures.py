"""The corpus's valid fixtures written by this project's writers: tiny, seeded, deterministic.

Each builder writes one store at ``path`` with the public writers (and the pyramid,
sharding and consolidation operations) on the current scheduler -- the generator runs
them on dask's synchronous scheduler, so nothing here needs a cluster.  Inputs come from
a fixed-seed generator; the stores are tens of vertices so the whole corpus stays small.
A few builders then edit one root field the way the reference's high-level writer spells
it (a composite ``geometry_types`` list, D19): that is data, not a defect.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from zarr_vectors.pyramid.build import build_pyramid
from zarr_vectors.sharding import shard_store
from zarr_vectors.store.groups import consolidate_store
from zarr_vectors.write.linked import write_graph, write_mesh, write_polylines, write_skeleton
from zarr_vectors.write.points import write_points

#: Chunks are 50 on every axis; the first ``mixed`` axes span negative and positive coordinates
#: (two chunks each), the others lie in one chunk -- so stores stay a handful of cells.
CHUNK = 50.0


def _box(dim: int, mixed: int) -> tuple[np.ndarray, np.ndarray]:
    lo = np.array([-39.0 if a < mixed else 1.0 for a in range(dim)])
    return lo, np.full(dim, 49.0)


def _bounds(dim: int, mixed: int) -> list[list[float]]:
    lo, _ = _box(dim, mixed)
    return [[-40.0 if v < 0 else 0.0 for v in lo], [50.0] * dim]


@dataclass(frozen=True)
class Fixture:
    id: str
    description: str
    kind: str
    build: Callable[[Path], None]


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _cloud(seed: int, n: int = 40, dim: int = 3, mixed: int = 1) -> np.ndarray:
    lo, hi = _box(dim, mixed)
    return _rng(seed).uniform(lo, hi, (n, dim)).astype(np.float32)


def _points(path: Path, *, seed: int = 1, dim: int = 3, ids: bool = False, attrs: bool = True,
            bins: bool = True, bin_size: float = 25.0, compressor: str | None = "zstd") -> None:
    rng = _rng(seed + 100)
    mixed = 1 if dim == 3 else 2
    pos = _cloud(seed, dim=dim, mixed=mixed)
    n = len(pos)
    write_points(
        str(path), pos, chunk_shape=CHUNK, bin_shape=bin_size if bins else None, bounds=_bounds(dim, mixed),
        object_ids=rng.integers(0, 5, n) if ids else None,
        attributes={"intensity": rng.standard_normal(n).astype(np.float32),
                    "rgb": rng.integers(0, 256, (n, 3), dtype=np.uint8)} if attrs else None,
        object_attributes={"weight": rng.standard_normal(5).astype(np.float32)} if ids else None,
        compressor=compressor,
    )


def _edges(seed: int, n: int, m: int) -> np.ndarray:
    e = _rng(seed).integers(0, n, (m, 2))
    return e[e[:, 0] != e[:, 1]]


def _graph(path: Path, *, directed: bool = False, store: str = "canonical", seed: int = 2, dim: int = 3,
           ids: bool = False, labels: bool = True) -> None:
    pos = _cloud(seed, n=30, dim=dim, mixed=2)
    edges = _edges(seed + 1, len(pos), 36)
    rng = _rng(seed + 2)
    write_graph(
        str(path), pos, edges, directed=directed, store=store, bounds=_bounds(dim, 2),
        edge_attributes={"weight": rng.standard_normal(len(edges)).astype(np.float32),
                         **({"label": rng.integers(0, 9, len(edges)).astype(np.int32)} if labels else {})},
        object_ids=rng.integers(0, 3, len(pos)) if ids else None,
        attributes={"v": rng.standard_normal(len(pos)).astype(np.float32)},
        object_attributes={"w": rng.standard_normal(3).astype(np.float32)} if ids else None,
        chunk_shape=CHUNK, compressor="zstd",
    )


def _mesh(path: Path, *, seed: int = 3, width: int = 3) -> None:
    pos = _cloud(seed, n=30)
    rng = _rng(seed + 1)
    faces = np.array([rng.choice(len(pos), width, replace=False) for _ in range(25)])
    write_mesh(str(path), pos, faces, bounds=_bounds(3, 1), chunk_shape=CHUNK,
               face_attributes={"area": rng.uniform(0, 1, len(faces)).astype(np.float32)},
               attributes={"n": rng.standard_normal(len(pos)).astype(np.float32)}, compressor="zstd")


def _skeleton(path: Path, *, seed: int = 4, ids: bool = True) -> None:
    rng = _rng(seed)
    n = 36
    pos = np.cumsum(rng.normal(0, 9, (n, 3)), axis=0).clip(*_box(3, 2)).astype(np.float32)
    parents = np.array([-1] + [int(rng.integers(max(0, i - 3), i)) for i in range(1, n)])
    parents[18] = -1  # two trees
    obj = (np.arange(n) >= 18).astype(np.int64) if ids else None
    write_skeleton(str(path), pos, parents, object_ids=obj, bounds=_bounds(3, 2), chunk_shape=CHUNK,
                   attributes={"radius": rng.uniform(0.5, 2, n).astype(np.float32)}, compressor="zstd")


def _lines(seed: int, count: int, lo: np.ndarray, hi: np.ndarray, fixed: int | None = None
           ) -> tuple[np.ndarray, np.ndarray]:
    rng = _rng(seed)
    sizes = np.full(count, fixed) if fixed else rng.integers(2, 9, count)
    parts = [(np.cumsum(rng.normal(0, 8, (int(k), len(lo))), axis=0) + (lo + hi) / 2).clip(lo, hi) for k in sizes]
    pos = np.concatenate(parts).astype(np.float32)
    return pos, np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def _polylines(path: Path, *, kind: str = "polyline", seed: int = 5, dim: int = 3, one_chunk: bool = False) -> None:
    if one_chunk:  # the TRX-shaped layout (spec §13.4): sid_ndim 1, a single spatial chunk
        pos, off = _lines(seed, 6, np.array([1.0]), np.array([99.0]))
        bounds, chunk = [[0.0], [100.0]], 100.0
    else:
        pos, off = _lines(seed, 7, *_box(dim, 2), fixed=2 if kind == "line" else None)
        bounds, chunk = _bounds(dim, 2), CHUNK
    rng = _rng(seed + 1)
    write_polylines(str(path), pos, off, kind=kind, bounds=bounds, chunk_shape=chunk,
                    attributes={"fa": rng.uniform(0, 1, len(pos)).astype(np.float32)},
                    object_attributes={"length": rng.uniform(1, 9, len(off) - 1).astype(np.float32)},
                    compressor="zstd")


def _then(build: Callable[[Path], None], *steps: Callable[[Path], object]) -> Callable[[Path], None]:
    def run(path: Path) -> None:
        build(path)
        for step in steps:
            step(path)

    return run


def _pyramid(levels: int, storage: str, depth: int = 1, chunk_scale: int = 1) -> Callable[[Path], object]:
    return lambda p: build_pyramid(str(p), factors=[2] * levels, cross_level_storage=storage,
                                   cross_level_depth=depth, chunk_scale_factors=[chunk_scale] * levels)


def _relabel(kinds: list[str]) -> Callable[[Path], None]:
    """Set ``geometry_types`` to a list the reference's high-level writer produces (D19)."""
    def run(path: Path) -> None:
        f = path / "zarr.json"
        doc = json.loads(f.read_text(encoding="utf-8"))
        doc["attributes"]["zarr_vectors"]["geometry_types"] = kinds
        f.write_text(json.dumps(doc, indent=2), encoding="utf-8")

    return run


def _shard(path: Path) -> None:
    shard_store(str(path), 2)


def _consolidate(path: Path) -> None:
    consolidate_store(str(path))


def _f(id: str, kind: str, description: str, build: Callable[[Path], None]) -> Fixture:
    return Fixture(id, description, kind, build)


FIXTURES: list[Fixture] = [
    _f("points-basic", "point_cloud", "3-D points with two vertex attributes, bins, zstd", lambda p: _points(p)),
    _f("points-bare", "point_cloud", "3-D points, no attributes, no bins, no compression",
       lambda p: _points(p, attrs=False, bins=False, compressor=None)),
    _f("points-ids", "point_cloud", "3-D points with object ids and an object attribute", lambda p: _points(p, ids=True)),
    _f("points-2d", "point_cloud", "2-D points with attributes and negative coordinates", lambda p: _points(p, dim=2)),
    _f("points-2d-ids", "point_cloud", "2-D points with object ids", lambda p: _points(p, dim=2, ids=True)),
    _f("line-3d", "line", "3-D lines (two vertices each) with object attributes",
       lambda p: _polylines(p, kind="line")),
    _f("polyline-3d", "polyline", "3-D polylines with vertex and object attributes", lambda p: _polylines(p)),
    _f("polyline-2d", "polyline", "2-D polylines", lambda p: _polylines(p, dim=2)),
    _f("streamline-3d", "streamline", "3-D streamlines (directed bridges, D4)",
       lambda p: _polylines(p, kind="streamline")),
    _f("streamline-1d-trx", "streamline", "1-D streamlines in one chunk: the TRX-shaped layout (spec 13.4)",
       lambda p: _polylines(p, kind="streamline", one_chunk=True)),
    _f("skeleton-3d", "skeleton", "a two-tree skeleton with object ids and a radius attribute", lambda p: _skeleton(p)),
    _f("skeleton-noids", "skeleton", "a two-root skeleton without object ids", lambda p: _skeleton(p, ids=False)),
    _f("graph-undirected-canonical", "graph", "graph, undirected canonical links, one link attribute",
       lambda p: _graph(p, labels=False)),
    _f("graph-undirected-duplicate", "graph", "graph, undirected duplicate links, two link attributes",
       lambda p: _graph(p, store="duplicate")),
    _f("graph-directed-canonical", "graph", "graph, directed canonical links, two link attributes",
       lambda p: _graph(p, directed=True)),
    _f("graph-directed-duplicate", "graph", "graph, directed duplicate links, two link attributes",
       lambda p: _graph(p, directed=True, store="duplicate")),
    _f("graph-2d-ids", "graph", "2-D graph with object ids and object attributes", lambda p: _graph(p, dim=2, ids=True)),
    _f("mesh-tri", "mesh", "triangle mesh with a face attribute", lambda p: _mesh(p)),
    _f("mesh-quad", "mesh", "quad mesh (link width 4)", lambda p: _mesh(p, width=4)),
    _f("points-pyramid-explicit", "point_cloud", "points with ids, 3 levels, explicit cross-level storage, depth 1",
       _then(lambda p: _points(p, ids=True), _pyramid(2, "explicit"))),
    _f("points-pyramid-implicit-depth2", "point_cloud", "points with ids, 3 levels, implicit storage, depth 2",
       _then(lambda p: _points(p, ids=True), _pyramid(2, "implicit", depth=2))),
    _f("points-pyramid-explicit-all", "point_cloud", "points with ids, 3 levels, explicit, depth -1 (all pairs)",
       _then(lambda p: _points(p, ids=True), _pyramid(2, "explicit", depth=-1))),
    _f("points-pyramid-fine-bins", "point_cloud", "points binned at a quarter chunk, 2 levels, implicit storage: "
       "several metavertices to a coarse cell", _then(lambda p: _points(p, bin_size=12.5), _pyramid(1, "implicit"))),
    _f("points-pyramid-none", "point_cloud", "points, 2 levels, no cross-level families",
       _then(lambda p: _points(p), _pyramid(1, "none", depth=0))),
    _f("graph-pyramid-chunkscale", "graph", "graph with ids, 2 levels, chunk scale 2, explicit",
       _then(lambda p: _graph(p, ids=True), _pyramid(1, "explicit", chunk_scale=2))),
    _f("mesh-pyramid-implicit", "mesh", "mesh, 2 levels, implicit cross-level storage",
       _then(lambda p: _mesh(p), _pyramid(1, "implicit"))),
    _f("streamline-pyramid", "streamline", "streamlines, 2 levels, explicit",
       _then(lambda p: _polylines(p, kind="streamline"), _pyramid(1, "explicit"))),
    _f("points-sharded", "point_cloud", "points sharded 2 chunks per shard axis", _then(lambda p: _points(p), _shard)),
    _f("graph-sharded", "graph", "graph sharded", _then(lambda p: _graph(p, labels=False), _shard)),
    _f("points-consolidated", "point_cloud", "points with consolidated metadata",
       _then(lambda p: _points(p, ids=True), _consolidate)),
    _f("pyramid-consolidated", "point_cloud", "2-level point pyramid with consolidated metadata",
       _then(lambda p: _points(p, ids=True), _pyramid(1, "explicit"), _consolidate)),
    _f("composite-point-cloud-polyline", "polyline",
       "polylines labelled ['point_cloud', 'polyline'] as the reference's default schema writes them (D19)",
       _then(lambda p: _polylines(p), _relabel(["point_cloud", "polyline"]))),
    _f("composite-streamline-polyline", "streamline",
       "streamlines labelled ['streamline', 'polyline'] (D19)",
       _then(lambda p: _polylines(p, kind="streamline"), _relabel(["streamline", "polyline"]))),
    _f("composite-point-cloud-graph", "graph", "a graph labelled ['point_cloud', 'graph'] (D19)",
       _then(lambda p: _graph(p, labels=False), _relabel(["point_cloud", "graph"]))),
]


def _fragment_attributes(path: Path) -> None:
    _points(path)
    add_fragment_attribute(path)


def add_fragment_attribute(path: Path) -> None:
    """Give level 0 a fragment attribute ``bin_id`` (one int32 per fragment), through the grid-array API."""
    from zarr_vectors.encoding import FragmentIndex
    from zarr_vectors.store.grid import GridArray
    from zarr_vectors.store.groups import open_store
    from zarr_vectors.store.nodes import group_document, write_node

    level = open_store(str(path)).level(0)
    frags = level.array("vertex_fragments")
    write_node(level.storage, level.node_path("fragment_attributes"), group_document())
    grid = GridArray.create(level.storage, level.node_path("fragment_attributes/bin_id"), shape=frags.shape,
                            origin=frags.origin, compressor=None,
                            attributes={"zv_array": "fragment_attribute", "name": "bin_id", "dtype": "int32",
                                        "row_shape": []})
    chunks = frags.nonempty_chunk_coords()
    grid.write_cells({c: np.arange(FragmentIndex.decode(payload).num_fragments, dtype="<i4").tobytes()
                      for c, payload in zip(chunks, frags.read_cells(chunks))})


FIXTURES.append(_f("points-fragment-attributes", "point_cloud", "points with a per-fragment attribute",
                   _fragment_attributes))
BY_ID = {f.id: f for f in FIXTURES}
assert len(BY_ID) == len(FIXTURES), "duplicate fixture id"
