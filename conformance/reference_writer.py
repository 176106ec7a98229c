"""Write the corpus's reference-written fixtures with zarr-vectors (the reference) itself.

Run by the reference's own interpreter in its side environment, never by ours:
``<refenv>/bin/python -I conformance/reference_writer.py OUTDIR``
(``python -m zarr_vectors.conformance.generate --reference`` does this).  Prints one JSON
line: the reference's version and the stores written.  Inputs are tiny and seeded.
"""

import json
import os
import shutil
import sys

import numpy as np

import zarr_vectors as zv
from zarr_vectors.core.arrays import write_link_attributes, write_links
from zarr_vectors.core.store import get_resolution_level, open_store
from zarr_vectors.multiresolution.coarsen import build_pyramid
from zarr_vectors.types.graphs import write_graph
from zarr_vectors.types.lines import write_lines
from zarr_vectors.types.meshes import write_mesh
from zarr_vectors.types.points import write_points
from zarr_vectors.types.polylines import write_polylines

BOUNDS = ([-40.0, -40.0, 0.0], [50.0, 50.0, 50.0])  # x and y span two chunks, z one
CS = (50.0, 50.0, 50.0)


def local_rows(chunks):
    _, inverse = np.unique(chunks, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    order = np.argsort(inverse, kind="stable")
    counts = np.bincount(inverse)
    starts = np.cumsum(counts) - counts
    local = np.empty(len(chunks), dtype=np.int64)
    local[order] = np.arange(len(chunks)) - np.repeat(starts, counts)
    return local


def policy_graph(store, pos, edges, weights, directed, policy):
    write_graph(store, pos, edges, chunk_shape=CS, bounds=BOUNDS, compressor="zstd")
    for name in ("links", "link_fragments", "link_attributes"):
        shutil.rmtree(os.path.join(store, "0", name), ignore_errors=True)
    chunks = np.floor(pos.astype(np.float64) / CS[0]).astype(np.int64)
    local = local_rows(chunks)
    records = [[(tuple(int(v) for v in chunks[a]), int(local[a])), (tuple(int(v) for v in chunks[b]), int(local[b]))]
               for a, b in edges.tolist()]
    level = get_resolution_level(open_store(store, "r+"), 0)
    part = write_links(level, records, pos.shape[1], directed=directed, store=policy)
    write_link_attributes(level, "weight", weights, num_links=len(edges), partition=part)


def main(out):
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    rng = np.random.default_rng(14)
    n = 30
    lo, hi = np.array([-39.0, -39.0, 1.0]), np.full(3, 49.0)
    pos = rng.uniform(lo, hi, (n, 3)).astype(np.float32)
    edges = rng.integers(0, n, (40, 2))
    edges = edges[edges[:, 0] != edges[:, 1]]
    ids = rng.integers(0, 4, n)
    faces = np.array([rng.choice(n, 3, replace=False) for _ in range(20)])
    parent = np.array([-1] + [int(rng.integers(max(0, i - 3), i)) for i in range(1, n)])
    tree = np.array([[i, parent[i]] for i in range(1, n)])
    lines = [np.clip(np.cumsum(rng.normal(0, 8, (int(rng.integers(2, 8)), 3)), axis=0) + 10, lo, hi)
             .astype(np.float32) for _ in range(6)]
    v = rng.standard_normal(n).astype(np.float32)
    p = lambda name: os.path.join(out, name)

    write_points(p("ref-points"), pos, chunk_shape=CS, bin_shape=(25.0,) * 3, bounds=BOUNDS,
                 vertex_attributes={"v": v, "rgb": rng.integers(0, 255, (n, 3)).astype(np.uint8)}, compressor="zstd")
    write_points(p("ref-points-ids"), pos, chunk_shape=CS, bounds=BOUNDS, object_ids=ids,
                 vertex_attributes={"v": v}, object_attributes={"w": rng.standard_normal(4).astype(np.float32)})
    write_points(p("ref-points-2d"), rng.uniform(-39, 49, (n, 2)).astype(np.float32), chunk_shape=(50.0, 50.0),
                 bin_shape=(12.5, 12.5), bounds=([-40.0, -40.0], [50.0, 50.0]))
    write_graph(p("ref-graph"), pos, edges, chunk_shape=CS, bounds=BOUNDS,
                link_attributes={"weight": rng.standard_normal(len(edges)).astype(np.float32)},
                vertex_attributes={"v": v}, compressor="zstd")
    write_graph(p("ref-skeleton"), pos, tree, chunk_shape=CS, bounds=BOUNDS, kind="skeleton")
    write_mesh(p("ref-mesh"), pos, faces, chunk_shape=CS, bounds=BOUNDS, compressor="zstd")
    write_polylines(p("ref-polyline"), lines, chunk_shape=CS, bounds=BOUNDS, geometry_type="polyline")
    write_polylines(p("ref-streamline"), lines, chunk_shape=CS, bounds=BOUNDS, geometry_type="streamline",
                    vertex_attributes={"fa": [rng.random(len(x)).astype(np.float32) for x in lines]})
    write_lines(p("ref-lines"), rng.uniform(lo, hi, (8, 2, 3)).astype(np.float32), chunk_shape=CS, bounds=BOUNDS)
    write_points(p("ref-points-pyramid"), pos, chunk_shape=CS, bin_shape=(25.0,) * 3, bounds=BOUNDS)
    build_pyramid(p("ref-points-pyramid"), factors=[(2, 1)])
    write_graph(p("ref-graph-pyramid-depth2"), pos, edges, chunk_shape=CS, bin_shape=(12.5,) * 3,
                bounds=BOUNDS, object_ids=ids)
    build_pyramid(p("ref-graph-pyramid-depth2"), factors=[(2, 1), (2, 1)], chunk_scale_factors=[1, 2],
                  cross_level_depth=2)
    write_mesh(p("ref-mesh-pyramid-implicit"), pos, faces, chunk_shape=CS, bounds=BOUNDS)
    build_pyramid(p("ref-mesh-pyramid-implicit"), factors=[(2, 1)], cross_level_storage="implicit")
    write_polylines(p("ref-streamline-pyramid-none"), lines, chunk_shape=CS, bounds=BOUNDS, geometry_type="streamline")
    build_pyramid(p("ref-streamline-pyramid-none"), factors=[(2, 2)], cross_level_storage="none", sparsity_seed=1)
    weights = rng.standard_normal(len(edges)).astype(np.float32)
    for directed in (False, True):
        for policy in ("canonical", "duplicate"):
            name = f"ref-graph-{'directed' if directed else 'undirected'}-{policy}"
            policy_graph(p(name), pos, edges, weights, directed, policy)
    ds = zv.create(p("ref-composite-point-cloud-polyline"), schema=zv.Schema(bounds=BOUNDS))
    ds.add_polylines(lines, object_attributes={"w": np.arange(len(lines), dtype=np.float32)})
    ds = zv.create(p("ref-composite-streamline-polyline"), schema=zv.Schema(bounds=BOUNDS, kind="streamline"))
    ds.add_polylines(lines, streamlines=True)
    ds = zv.create(p("ref-composite-point-cloud-graph"), schema=zv.Schema(bounds=BOUNDS))
    ds.add_graph(pos, edges)
    print(json.dumps({"version": zv.__version__, "stores": sorted(os.listdir(out))}))


if __name__ == "__main__":
    main(sys.argv[1])
