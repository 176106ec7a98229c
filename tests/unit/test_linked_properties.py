"""Property tests: random small graphs, meshes, skeletons and polylines, written and read
back through the public API, reproduce the input exactly.

Every vertex carries its input index (``vid``) and every record its input record index,
so the comparison is exact: endpoint order, winding, [child, parent] direction,
traversal order, and under ``store="duplicate"`` one copy per distinct endpoint chunk.
Coordinates are small multiples of a quarter chunk (1-3 axes, negative included), so
vertices share chunks, sit on chunk faces and records cross chunks often.  Stores live
in ``memory://`` and are removed after each example to keep examples cheap.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import fsspec
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import zarr_vectors as zv

# The CI profile (tests/conftest.py) runs 200 derandomised examples; locally fewer keep
# each test within a few seconds.
LOCAL = settings() if os.environ.get("CI") else settings(max_examples=25)

CHUNK = 4.0
POLICIES = st.sampled_from([(False, "canonical"), (False, "duplicate"), (True, "canonical"), (True, "duplicate")])


@contextmanager
def memory_store() -> Iterator[str]:
    url = f"memory://zv-props/{uuid.uuid4().hex}.zv"
    try:
        yield url
    finally:
        fs = fsspec.filesystem("memory")
        if fs.exists(url):
            fs.rm(url, recursive=True)


@st.composite
def vertex_sets(draw, min_n: int = 1, max_n: int = 12, ndim=None):
    d = draw(st.integers(1, 3)) if ndim is None else ndim
    n = draw(st.integers(min_n, max_n))
    quarters = draw(st.lists(st.integers(-8, 7), min_size=n * d, max_size=n * d))  # chunks -2..1 per axis
    jitter = draw(st.sampled_from([0.0, 0.125]))
    pos = (np.asarray(quarters, np.float64).reshape(n, d) * (CHUNK / 4) + jitter).astype(
        draw(st.sampled_from(["f4", "f8"]))
    )
    return pos


def chunk_count(records: np.ndarray, pos: np.ndarray) -> np.ndarray:
    ch = np.floor(pos.astype(np.float64) / CHUNK).astype(np.int64)[records]
    return np.asarray([len({tuple(c) for c in r}) for r in ch.tolist()], np.int64)


def check_records(got: np.ndarray, rid: np.ndarray, vid: np.ndarray, records: np.ndarray, copies) -> None:
    rid = rid.astype(np.int64)
    np.testing.assert_array_equal(vid[got].reshape(-1, records.shape[1]), records[rid])
    np.testing.assert_array_equal(np.bincount(rid, minlength=len(records)), copies)


@LOCAL
@given(data=st.data(), pos=vertex_sets(), policy=POLICIES)
def test_graph_roundtrip(data, pos, policy):
    n = len(pos)
    m = data.draw(st.integers(0, 15))
    edges = np.asarray(data.draw(st.lists(st.integers(0, n - 1), min_size=2 * m, max_size=2 * m)), np.int64)
    edges = edges.reshape(m, 2)
    directed, store = policy
    with memory_store() as url:
        zv.write_graph(url, pos, edges, chunk_shape=CHUNK, directed=directed, store=store,
                       attributes={"vid": np.arange(n)}, edge_attributes={"rid": np.arange(m, dtype=np.int32)})
        got = zv.read(url)
    vid = got.attributes["vid"]
    assert sorted(vid.tolist()) == list(range(n))
    np.testing.assert_array_equal(got.positions, pos[vid])
    copies = chunk_count(edges, pos) if store == "duplicate" else np.ones(m, np.int64)
    check_records(got.edges, got.edge_attributes["rid"], vid, edges, copies)


@st.composite
def meshes(draw):
    pos = draw(vertex_sets(min_n=4, max_n=10))
    n = len(pos)
    width = draw(st.integers(3, min(4, n)))
    m = draw(st.integers(1, 6))
    faces = [draw(st.permutations(range(n)))[:width] for _ in range(m)]
    return pos, np.asarray(faces, np.int64)


@LOCAL
@given(mesh=meshes())
def test_mesh_roundtrip_keeps_winding(mesh):
    pos, faces = mesh
    n, m = len(pos), len(faces)
    with memory_store() as url:
        zv.write_mesh(url, pos, faces, chunk_shape=CHUNK, attributes={"vid": np.arange(n)},
                      face_attributes={"rid": np.arange(m)})
        got = zv.read(url)
    vid = got.attributes["vid"]
    np.testing.assert_array_equal(got.positions, pos[vid])
    check_records(got.faces, got.edge_attributes["rid"], vid, faces, np.ones(m, np.int64))


@st.composite
def forests(draw):
    pos = draw(vertex_sets(min_n=1, max_n=14))
    n = len(pos)
    # node k of a topological numbering gets a parent among 0..k-1 (or none); then relabel
    raw = [-1] + [draw(st.integers(-1, k - 1)) for k in range(1, n)]
    perm = np.asarray(draw(st.permutations(range(n))), np.int64)  # new label of topological node k
    parents = np.full(n, -1, np.int64)
    for k, p in enumerate(raw):
        if p >= 0:
            parents[perm[k]] = perm[p]
    ids = np.asarray(draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)), np.int64)
    # a tree shares its root's object id (several trees may share one)
    for k in range(n):
        if raw[k] >= 0:
            ids[perm[k]] = ids[perm[raw[k]]]
    return pos, parents, ids


@LOCAL
@given(forest=forests(), box=st.tuples(st.integers(-8, 7), st.integers(0, 8)))
def test_skeleton_roundtrip_and_bbox(forest, box):
    pos, parents, ids = forest
    n, d = pos.shape
    lo = box[0] * CHUNK / 4
    hi = lo + box[1] * CHUNK / 4
    with memory_store() as url:
        zv.write_skeleton(url, pos, parents, chunk_shape=CHUNK, object_ids=ids, attributes={"vid": np.arange(n)})
        got = zv.read(url)
        part = zv.read(url, bbox=[[lo] * d, [hi] * d])
    vid = got.attributes["vid"]
    np.testing.assert_array_equal(got.positions, pos[vid])
    np.testing.assert_array_equal(got.object_ids, ids[vid])
    child = np.flatnonzero(parents >= 0)
    assert sorted(map(tuple, vid[got.edges].tolist())) == sorted(zip(child.tolist(), parents[child].tolist()))
    # a bbox read: the nodes inside, and exactly the [child, parent] edges among them
    keep = ((pos >= lo) & (pos <= hi)).all(axis=1)
    vid = part.attributes["vid"]
    assert sorted(vid.tolist()) == np.flatnonzero(keep).tolist()
    inside = child[keep[child] & keep[parents[child]]]
    assert sorted(map(tuple, vid[part.edges].tolist())) == sorted(zip(inside.tolist(), parents[inside].tolist()))


@st.composite
def polylines(draw):
    kind = draw(st.sampled_from(["polyline", "streamline", "line"]))
    count = draw(st.integers(1, 6))
    lengths = [2] * count if kind == "line" else draw(st.lists(st.integers(1, 6), min_size=count, max_size=count))
    pos = draw(vertex_sets(min_n=sum(lengths), max_n=sum(lengths)))
    return kind, pos, np.r_[0, np.cumsum(lengths)].astype(np.int64)


def pieces(offsets: np.ndarray, keep: np.ndarray) -> list[list[int]]:
    out = []
    for p in range(len(offsets) - 1):
        run: list[int] = []
        for i in range(offsets[p], offsets[p + 1]):
            if keep[i]:
                run.append(i)
            elif run:
                out.append(run)
                run = []
        if run:
            out.append(run)
    return out


@LOCAL
@given(case=polylines(), box=st.tuples(st.integers(-8, 7), st.integers(0, 8)))
def test_polylines_roundtrip_and_bbox(case, box):
    kind, pos, offsets = case
    n, d = pos.shape
    with memory_store() as url:
        zv.write_polylines(url, pos, offsets, chunk_shape=CHUNK, kind=kind, attributes={"vid": np.arange(n)})
        got = zv.read(url)
        lo = box[0] * CHUNK / 4
        hi = lo + box[1] * CHUNK / 4
        part = zv.read(url, bbox=[[lo] * d, [hi] * d])
    np.testing.assert_array_equal(got.offsets, offsets)
    np.testing.assert_array_equal(got.positions, pos)
    np.testing.assert_array_equal(got.attributes["vid"], np.arange(n))
    np.testing.assert_array_equal(got.object_ids, np.repeat(np.arange(len(offsets) - 1), np.diff(offsets)))
    # a bbox read: the runs of consecutive vertices inside the box, in traversal order
    keep = ((pos >= lo) & (pos <= hi)).all(axis=1)
    vid = part.attributes["vid"]
    assert [vid[a:b].tolist() for a, b in zip(part.offsets[:-1], part.offsets[1:])] == pieces(offsets, keep)
    np.testing.assert_array_equal(part.positions, pos[vid])
