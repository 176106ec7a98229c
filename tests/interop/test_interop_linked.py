"""Graphs, skeletons, meshes, polylines, streamlines and lines across implementations.

(a) Every store of a linked kind this project writes -- graphs under all four
    policies, skeletons, meshes (triangles and quads), polylines, streamlines and
    lines -- passes the reference validator at level 5 with no error, and the
    reference's per-kind reader returns the same geometry: the same vertices, the
    same edges / faces / polylines (as multisets; every copy under
    ``store="duplicate"``), meshes with the same winding, skeleton edges as
    [child, parent].
(b) Stores of every kind written by the reference read back here with the same
    geometry.  Their object index is layout v2, read through the explicit
    ``allow_layouts`` opt-in of D1.

Vertices are matched across implementations by position (every test input has
distinct positions).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv

sys.path.insert(0, str(Path(__file__).resolve().parent))
from refenv import ensure_reference_env, run_reference  # noqa: E402

pytestmark = pytest.mark.interop

# Reference validator warnings we tolerate on our stores.  None so far: every store
# below validates at level 5 with no warning at all.  (The point-cloud quirk of D17,
# "Point cloud but links array exists", cannot fire: these are not point clouds.)
KNOWN_REFERENCE_WARNINGS: tuple[str, ...] = ()

V2 = ("vlen_manifests_v2",)
POLICIES = [(False, "canonical"), (False, "duplicate"), (True, "canonical"), (True, "duplicate")]


@pytest.fixture(scope="module", autouse=True)
def reference_env() -> Path:
    return ensure_reference_env()


# ---------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------
def _unique_positions(rng: np.random.Generator, n: int, ndim: int = 3, lo=-60.0, hi=110.0) -> np.ndarray:
    pos = rng.uniform(lo, hi, (n, ndim)).astype(np.float32)
    assert len(np.unique(pos, axis=0)) == n
    return pos


def _graph(rng, n=300, m=300, cs=50.0):
    """Uniform vertices; edges mostly between near vertices (few distinct chunk offsets,
    so few arrays: the reference pays dearly per array), a few between any two."""
    pos = _unique_positions(rng, n)
    order = np.lexsort(tuple(np.floor(pos[:, d] / cs) for d in range(3)))
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n)
    a = rng.integers(0, n, m)
    b = order[np.clip(rank[a] + rng.integers(1, 4, m), 0, n - 1)]
    edges = np.stack([a, b], 1)
    wild = rng.random(m) < 0.05
    edges[wild] = rng.integers(0, n, (int(wild.sum()), 2))
    edges[:3] = [[a[0], b[0]], [b[0], a[0]], [a[0], b[0]]]  # both directions and a repeat
    return pos, edges[edges[:, 0] != edges[:, 1]]


def _forest(rng, n=400, n_trees=4, shuffle=True):
    """A forest: chains with branches (crossing chunks), one root per tree; unshuffled,
    every parent has a smaller index than its children and each root leads its tree."""
    pos = np.zeros((n, 3), np.float32)
    parents = np.full(n, -1, np.int64)
    tree = np.repeat(np.arange(n_trees), n // n_trees)
    for i in range(n):
        if i % (n // n_trees) == 0:
            pos[i] = rng.uniform(-40, 60, 3)
            continue
        start = i - i % (n // n_trees)
        p = i - 1 if rng.random() < 0.8 else int(rng.integers(start, i))
        parents[i] = p
        pos[i] = pos[p] + rng.normal(0, 7, 3)
    # shuffle labels so parents are not always smaller than children
    perm = rng.permutation(n) if shuffle else np.arange(n)
    inv = np.empty(n, np.int64)
    inv[perm] = np.arange(n)
    new_parents = np.where(parents[perm] >= 0, inv[np.maximum(parents[perm], 0)], -1)
    assert len(np.unique(pos, axis=0)) == n
    return pos[perm], new_parents, tree[perm]


def _mesh(rng, quads: bool):
    side = 16
    xs, ys = np.meshgrid(np.arange(side), np.arange(side), indexing="ij")
    pos = np.stack([xs.ravel() * 6.5 - 40, ys.ravel() * 6.5 - 40, rng.uniform(-20, 20, side * side)], 1)
    pos = pos.astype(np.float32)
    idx = np.arange(side * side).reshape(side, side)
    a, b, c, d = idx[:-1, :-1].ravel(), idx[1:, :-1].ravel(), idx[1:, 1:].ravel(), idx[:-1, 1:].ravel()
    faces = np.stack([a, b, c, d], 1) if quads else np.concatenate([np.stack([a, b, c], 1), np.stack([a, c, d], 1)])
    shift = rng.integers(0, faces.shape[1], len(faces))  # start each face at a random corner
    cols = (np.arange(faces.shape[1])[None, :] + shift[:, None]) % faces.shape[1]
    return pos, np.take_along_axis(faces, cols, axis=1)


def _polylines(rng, ndim=3):
    lengths = rng.integers(1, 30, 40)
    lengths[:2] = 1
    offsets = np.r_[0, np.cumsum(lengths)].astype(np.int64)
    walks = [rng.uniform(-50, 80, ndim) + np.cumsum(rng.normal(0, 8, (k, ndim)), axis=0) for k in lengths]
    pos = np.concatenate(walks).astype(np.float32)
    assert len(np.unique(pos, axis=0)) == len(pos)
    return pos, offsets


def _lines(rng, ndim=3):
    pos = _unique_positions(rng, 2 * 150, ndim)
    return pos, np.arange(0, len(pos) + 1, 2, dtype=np.int64)


# ---------------------------------------------------------------------------
# comparison helpers
# ---------------------------------------------------------------------------
def _index_of(reference: np.ndarray, got: np.ndarray) -> np.ndarray:
    """Input index of every row of ``got`` (matched by exact position)."""
    lookup = {tuple(p): i for i, p in enumerate(reference.tolist())}
    assert len(lookup) == len(reference)
    return np.asarray([lookup[tuple(p)] for p in np.asarray(got, reference.dtype).tolist()], np.int64)


def _multiset(records) -> list[tuple[int, ...]]:
    return sorted(tuple(int(v) for v in r) for r in np.asarray(records).tolist())


def _rotation(face) -> tuple[int, ...]:
    """A face up to cyclic rotation (same winding): start at its smallest vertex."""
    face = list(face)
    k = face.index(min(face))
    return tuple(face[k:] + face[:k])


def _chunk_count(records: np.ndarray, pos: np.ndarray, cs: float) -> np.ndarray:
    ch = np.floor(pos.astype(np.float64) / cs).astype(np.int64)[records]
    return np.asarray([len({tuple(c) for c in r}) for r in ch.tolist()])


def _polylines_of(pos: np.ndarray, offsets: np.ndarray) -> list[list[tuple[float, ...]]]:
    return [[tuple(p) for p in pos[a:b].tolist()] for a, b in zip(offsets[:-1], offsets[1:])]


def _assert_clean(validation: dict) -> None:
    assert validation["errors"] == [], validation["errors"]
    unexpected = [w for w in validation["warnings"] if not any(k in w for k in KNOWN_REFERENCE_WARNINGS)]
    assert unexpected == [], unexpected


# ---------------------------------------------------------------------------
# (a) our stores through the reference: written once, validated and read in one
#     reference process
# ---------------------------------------------------------------------------
OURS = [f"graph-{d}-{s}" for d, s in POLICIES] + [
    "skeleton", "mesh-tris", "mesh-quads", "polyline-2d", "polyline-3d", "streamline-2d", "streamline-3d", "line",
]  # fmt: skip


def _write_ours(name: str, path: Path) -> dict:
    """Write one of OURS; return its inputs."""
    rng = np.random.default_rng(OURS.index(name))
    if name.startswith("graph"):
        directed, store = POLICIES[OURS.index(name)]
        pos, edges = _graph(rng)
        w = rng.standard_normal(len(edges)).astype(np.float32)
        zv.write_graph(str(path), pos, edges, chunk_shape=50, directed=directed, store=store,
                       edge_attributes={"w": w}, attributes={"t": np.arange(len(pos), dtype=np.float32)})
        return {"pos": pos, "edges": edges, "w": w, "store": store, "cs": 50.0}
    if name == "skeleton":
        pos, parents, trees = _forest(rng)
        zv.write_skeleton(str(path), pos, parents, chunk_shape=25, object_ids=trees % 2)  # two trees per object
        return {"pos": pos, "parents": parents}
    if name.startswith("mesh"):
        pos, faces = _mesh(rng, name.endswith("quads"))
        zv.write_mesh(str(path), pos, faces, chunk_shape=30, face_attributes={"a": np.arange(len(faces))})
        return {"pos": pos, "faces": faces}
    if name == "line":
        pos, offsets = _lines(rng)
        # line 0 inside one chunk, line 1 leaving it: its endpoint is row 2 but fragment 1 (D12)
        pos[:4] = [[1, 1, 1], [2, 2, 2], [3, 3, 3], [60, 3, 3]]
        zv.write_polylines(str(path), pos, offsets, chunk_shape=50, kind="line",
                           attributes={"t": np.arange(len(pos), dtype=np.float32)})
        return {"pos": pos, "offsets": offsets, "t": np.arange(len(pos), dtype=np.float32)}
    kind, dims = name.split("-")
    pos, offsets = _polylines(rng, int(dims[0]))
    t = rng.random(len(pos)).astype(np.float32)
    zv.write_polylines(str(path), pos, offsets, chunk_shape=25, kind=kind, attributes={"t": t},
                       object_attributes={"len": np.diff(offsets).astype(np.float64)})
    return {"pos": pos, "offsets": offsets, "t": t}


@pytest.fixture(scope="module")
def ours(tmp_path_factory) -> dict[str, tuple[dict, dict, dict]]:
    """name -> (inputs, reference validation at level 5, (read info, read arrays))."""
    base = tmp_path_factory.mktemp("ours")
    inputs = {name: _write_ours(name, base / f"{name}.zv") for name in OURS}
    result = run_reference("read-linked-many", str(base / "read"), *[str(base / f"{n}.zv") for n in OURS],
                           "--validate-level", "5")["results"]
    out = {}
    for name in OURS:
        entry = result[str(base / f"{name}.zv")]
        out[name] = (inputs[name], entry["validate"], entry["read"], dict(np.load(entry["read"]["out"])))
    return out


@pytest.mark.parametrize("name", OURS)
def test_reference_validates_our_store_at_level_5(ours, name):
    _assert_clean(ours[name][1])


@pytest.mark.parametrize("name", [n for n in OURS if n.startswith("graph")])
def test_reference_reads_our_graph(ours, name):
    inp, _, info, got = ours[name]
    pos, edges, w = inp["pos"], inp["edges"], inp["w"]
    assert info["kind"] == "graph"
    idx = _index_of(pos, got["positions"])
    assert sorted(idx.tolist()) == list(range(len(pos)))
    copies = _chunk_count(edges, pos, inp["cs"]) if inp["store"] == "duplicate" else np.ones(len(edges), int)
    expected = sorted(tuple(e) for e, k in zip(edges.tolist(), copies.tolist()) for _ in range(k))
    got_edges = idx[got["edges"]]
    # the reference undoes perm_idx too: input endpoint order under every policy, every copy
    assert _multiset(got_edges) == expected
    # and keeps link attributes aligned with the records it returns
    assert info["link_attributes"] == ["w"] and info["link_attributes_aligned"]
    weights: dict[tuple[int, ...], set[float]] = {}
    for e, x in zip(edges.tolist(), w.tolist()):
        weights.setdefault(tuple(e), set()).add(x)
    assert len(got["lattr__w"]) == len(got_edges)
    assert all(x in weights[tuple(e)] for e, x in zip(got_edges.tolist(), got["lattr__w"].tolist()))


def test_reference_reads_our_skeleton(ours):
    inp, _, info, got = ours["skeleton"]
    pos, parents = inp["pos"], inp["parents"]
    assert info["kind"] == "skeleton"
    idx = _index_of(pos, got["positions"])
    child = np.flatnonzero(parents >= 0)
    assert _multiset(idx[got["edges"]]) == sorted(zip(child.tolist(), parents[child].tolist()))


@pytest.mark.parametrize("name", ["mesh-tris", "mesh-quads"])
def test_reference_reads_our_mesh(ours, name):
    inp, _, info, got = ours[name]
    pos, faces = inp["pos"], inp["faces"]
    assert info["kind"] == "mesh"
    idx = _index_of(pos, got["positions"])
    got_faces = idx[got["faces"]]
    # the same faces with the same winding (a face may start at another corner) ...
    assert sorted(map(_rotation, got_faces.tolist())) == sorted(map(_rotation, faces.tolist()))
    # ... in fact the very same corner order: the reference undoes perm_idx as well
    assert _multiset(got_faces) == _multiset(faces)
    np.testing.assert_array_equal(faces[got["lattr__a"]], got_faces)


@pytest.mark.parametrize("name", ["polyline-2d", "polyline-3d", "streamline-2d", "streamline-3d", "line"])
def test_reference_reads_our_polylines(ours, name):
    inp, _, info, got = ours[name]
    pos, offsets = inp["pos"], inp["offsets"]
    assert info["kind"] == name.split("-")[0]
    if "object_ids" in got:
        np.testing.assert_array_equal(got["object_ids"], np.arange(len(offsets) - 1))
    assert _polylines_of(got["positions"], got["offsets"]) == _polylines_of(pos, offsets)
    np.testing.assert_array_equal(got["vattr__t"], inp["t"])


# ---------------------------------------------------------------------------
# (b) reference stores read here: written in one reference process
# ---------------------------------------------------------------------------
THEIRS = [f"graph-{d}-{s}" for d, s in POLICIES] + [
    "skeleton", "skeleton-shuffled", "mesh-tris", "mesh-quads", "polyline", "streamline", "line",
]  # fmt: skip


def _reference_job(name: str, base: Path) -> tuple[dict, dict]:
    """(inputs, write-linked job) of one of THEIRS."""
    rng = np.random.default_rng(100 + THEIRS.index(name))
    job: dict = {"store": str(base / f"{name}.zv"), "npz": str(base / f"{name}.npz")}
    if name.startswith("graph"):
        directed, store = POLICIES[THEIRS.index(name)]
        pos, edges = _graph(rng)
        arrays = {"positions": pos, "edges": edges, "lattr__w": rng.standard_normal(len(edges)).astype(np.float32),
                  "object_ids": rng.integers(0, 5, len(pos)), "vattr__t": np.arange(len(pos), dtype=np.float32)}
        job |= {"kind": "graph", "chunk_shape": 50, "directed": directed, "store_policy": store}
        inputs = arrays | {"cs": 50.0, "store": store}
    elif name.startswith("skeleton"):
        # one rooted tree per object, as the reference requires
        pos, parents, trees = _forest(rng, shuffle=name.endswith("shuffled"))
        arrays = {"positions": pos, "parents": parents, "object_ids": trees}
        job |= {"kind": "skeleton", "chunk_shape": 25, "readback": str(base / f"{name}.readback.npz")}
        inputs = arrays
    elif name.startswith("mesh"):
        pos, faces = _mesh(rng, name.endswith("quads"))
        arrays = {"positions": pos, "faces": faces}
        job |= {"kind": "mesh", "chunk_shape": 30}
        inputs = arrays
    elif name == "line":
        pos, offsets = _lines(rng)
        pos[:4] = [[1, 1, 1], [2, 2, 2], [3, 3, 3], [60, 3, 3]]  # see test_we_read_reference_lines
        arrays = {"positions": pos, "offsets": offsets, "vattr__t": np.arange(len(pos), dtype=np.int32)}
        job |= {"kind": "line", "chunk_shape": 50}
        inputs = arrays
    else:
        pos, offsets = _polylines(rng)
        arrays = {"positions": pos, "offsets": offsets, "vattr__t": rng.random(len(pos)).astype(np.float32)}
        job |= {"kind": name, "chunk_shape": 25}
        inputs = arrays
    np.savez(job["npz"], **arrays)
    return inputs, job


@pytest.fixture(scope="module")
def theirs(tmp_path_factory) -> dict[str, tuple[dict, Path, dict]]:
    """name -> (inputs, store written by the reference, write report)."""
    import json

    base = tmp_path_factory.mktemp("theirs")
    made = {name: _reference_job(name, base) for name in THEIRS}
    (base / "jobs.json").write_text(json.dumps([job for _, job in made.values()]))
    results = run_reference("write-linked-many", str(base / "jobs.json"))["results"]
    return {name: (made[name][0], Path(made[name][1]["store"]), r) for name, r in zip(THEIRS, results)}


def _read_v2(store: Path):
    with pytest.raises(zv.errors.UnsupportedLayoutError, match="vlen_manifests_v2"):
        zv.read(str(store))  # refused without the explicit opt-in (D1)
    return zv.read(str(store), allow_layouts=V2)


@pytest.mark.parametrize("name", [n for n in THEIRS if n.startswith("graph")])
def test_we_read_reference_graph(theirs, name):
    inp, path, _ = theirs[name]
    pos, edges, w, ids = inp["positions"], inp["edges"], inp["lattr__w"], inp["object_ids"]
    data = _read_v2(path)
    assert data.kind == "graph"
    idx = _index_of(pos, data.positions)
    assert sorted(idx.tolist()) == list(range(len(pos)))
    np.testing.assert_array_equal(data.attributes["t"], idx.astype(np.float32))
    np.testing.assert_array_equal(data.object_ids, ids[idx])
    copies = _chunk_count(edges, pos, inp["cs"]) if inp["store"] == "duplicate" else np.ones(len(edges), int)
    # endpoint order is restored through perm_idx under every policy: ordered pairs, every copy
    expected = sorted(tuple(e) for e, k in zip(edges.tolist(), copies.tolist()) for _ in range(k))
    got = idx[data.edges]
    assert _multiset(got) == expected
    # edge attributes stay aligned with the records
    weights: dict[tuple[int, ...], set[float]] = {}
    for e, x in zip(edges.tolist(), w.tolist()):
        weights.setdefault(tuple(e), set()).add(x)
    assert all(x in weights[tuple(e)] for e, x in zip(got.tolist(), data.edge_attributes["w"].tolist()))


def test_we_read_reference_skeleton(theirs):
    inp, path, _ = theirs["skeleton"]
    pos, parents, trees = inp["positions"], inp["parents"], inp["object_ids"]
    data = _read_v2(path)
    assert data.kind == "skeleton"
    idx = _index_of(pos, data.positions)
    child = np.flatnonzero(parents >= 0)
    assert _multiset(idx[data.edges]) == sorted(zip(child.tolist(), parents[child].tolist()))
    np.testing.assert_array_equal(data.object_ids, trees[idx])


def test_we_read_reference_skeleton_as_the_reference_does(theirs):
    """Reference quirk: its skeleton writer orders only the first tree depth-first and the
    others by input index, so a root may land inside its object's fragment; it stores no
    record for a root, and the implicit rule then gives that root the previous row as its
    parent.  The reference's own reader returns that spurious edge, and so do we: we read
    what is on disk, identically."""
    inp, path, report = theirs["skeleton-shuffled"]
    pos, parents = inp["positions"], inp["parents"]
    data = _read_v2(path)
    idx = _index_of(pos, data.positions)
    ref = np.load(report["readback"]["out"])
    ref_idx = _index_of(pos, ref["positions"])
    mine, theirs_ = _multiset(idx[data.edges]), _multiset(ref_idx[ref["edges"]])
    assert mine == theirs_
    child = np.flatnonzero(parents >= 0)
    true_edges = set(zip(child.tolist(), parents[child].tolist()))
    assert true_edges <= set(mine)
    spurious = set(mine) - true_edges
    assert all(parents[c] == -1 for c, _ in spurious)  # only roots gained a parent


@pytest.mark.parametrize("name", ["mesh-tris", "mesh-quads"])
def test_we_read_reference_mesh(theirs, name):
    inp, path, _ = theirs[name]
    pos, faces = inp["positions"], inp["faces"]
    data = _read_v2(path)
    assert data.kind == "mesh"
    idx = _index_of(pos, data.positions)
    got = idx[data.faces]
    assert sorted(map(_rotation, got.tolist())) == sorted(map(_rotation, faces.tolist()))
    assert _multiset(got) == _multiset(faces)  # the exact corner order, through perm_idx


@pytest.mark.parametrize("name", ["polyline", "streamline"])
def test_we_read_reference_polylines(theirs, name):
    inp, path, _ = theirs[name]
    pos, offsets = inp["positions"], inp["offsets"]
    data = _read_v2(path)
    assert data.kind == name
    np.testing.assert_array_equal(data.offsets, offsets)
    np.testing.assert_array_equal(data.positions, pos)
    np.testing.assert_array_equal(data.attributes["t"], inp["vattr__t"])
    np.testing.assert_array_equal(data.object_ids, np.repeat(np.arange(len(offsets) - 1), np.diff(offsets)))


def test_we_read_reference_lines_despite_fragment_index_vi(theirs):
    """D12: the reference's line writer stores fragment indices in line links; we rebuild
    lines from the manifests, so the lines still come back right."""
    inp, path, _ = theirs["line"]
    pos, offsets = inp["positions"], inp["offsets"]
    data = _read_v2(path)
    assert data.kind == "line"
    np.testing.assert_array_equal(data.offsets, offsets)
    np.testing.assert_array_equal(data.positions, pos)
    np.testing.assert_array_equal(data.attributes["t"], np.arange(len(pos)))
    # the quirk is really there: line 1's endpoint in chunk 0.0.0 is row 2, stored as vi 1
    from zarr_vectors.store.groups import open_store
    from zarr_vectors.store.link_read import read_links

    records = read_links(open_store(str(path)).level(0), 0)
    stored = {tuple(map(tuple, c)): v for c, v in zip(records.chunks.tolist(), records.vi.tolist())}
    assert stored[((0, 0, 0), (1, 0, 0))] == [1, 0]
