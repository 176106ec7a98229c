"""The object <-> vertex view of a read (docs/decisions.md D20) at every level and for every kind
with objects: ``VectorData.object_vertices`` against what the pyramid's per-object coarsening
makes (recomputed here from level 0's input) and against the object index read raw; the
per-vertex ``object_ids`` rule where a metavertex is shared; bbox reads; ``to_xarray``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.encoding import FragmentIndex
from zarr_vectors.format.objects import OBJECT_ID_RULE, ObjectVertices
from zarr_vectors.store.object_index import read_object_index

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")

RNG = np.random.default_rng(21)
N, OBJECTS = 20000, 500
POS = RNG.uniform(0, 200, (N, 3)).astype(np.float32)
IDS = RNG.integers(0, OBJECTS, N)
BIN = 25.0  # base bin; level 1 bins are 50, level 2 bins 100


def bins_of(pos: np.ndarray, size: float) -> np.ndarray:
    return np.floor(np.asarray(pos, np.float64) / size).astype(np.int64)


def key(rows: np.ndarray) -> list[tuple[int, ...]]:
    return [tuple(r) for r in rows.tolist()]


@pytest.fixture(scope="module")
def pyramid(tmp_path_factory) -> Path:
    """500 objects over 64 level-1 bins: every coarse metavertex is shared by many objects;
    level 2 keeps half of the objects (sparsity 2)."""
    store = tmp_path_factory.mktemp("objects") / "p.zv"
    zv.write_points(str(store), POS, object_ids=IDS, chunk_shape=50, bin_shape=BIN)
    zv.build_pyramid(str(store), factors=[(2, 1), (2, 2)], sparsity_seed=3)
    return store


def expected_sets(pos: np.ndarray, ids: np.ndarray, coarse: np.ndarray, size: float, kept) -> dict[int, set[int]]:
    """Object -> the coarse vertices standing for its input vertices: those in its bins."""
    where = {b: i for i, b in enumerate(key(bins_of(coarse, size)))}
    assert len(where) == len(coarse)  # one metavertex per occupied bin
    out: dict[int, set[int]] = {}
    for o in kept:
        out[int(o)] = {where[b] for b in set(key(bins_of(pos[ids == o], size)))}
    return out


def test_coarse_metavertices_belong_to_every_object_that_reaches_them(pyramid):
    """Regression (silent wrong answer): read(level=1).object_ids gave one id per metavertex,
    10 distinct ids for 500 objects kept; the view now lists every owner."""
    data = zv.read(str(pyramid), level=1)
    ov = data.object_vertices
    assert isinstance(ov, ObjectVertices) and data.object_id_rule == OBJECT_ID_RULE == "smallest_owner"
    assert len(data) == 64 and ov.num_vertices == len(data)
    np.testing.assert_array_equal(ov.ids, data.objects)
    assert int((ov.counts() > 0).sum()) == OBJECTS  # every object kept at level 1 owns vertices
    want = expected_sets(POS, IDS, data.positions, 2 * BIN, range(OBJECTS))
    for o in range(OBJECTS):
        got = ov.vertices_of(o)
        assert len(got) == len(set(got.tolist())) and set(got.tolist()) == want[o], o
    assert ov.shared() == len(data)  # 500 objects, 64 bins: every metavertex is shared
    # the per-vertex id: the smallest owner, and every owner is listed by objects_of
    owners = {v: sorted(o for o in range(OBJECTS) if v in want[o]) for v in range(len(data))}
    np.testing.assert_array_equal(data.object_ids, [owners[v][0] for v in range(len(data))])
    for v in range(len(data)):
        assert ov.objects_of(v).tolist() == owners[v]


def test_view_equals_the_object_index_read_raw(pyramid):
    """Every level: object o owns exactly the rows of the (chunk, fragment)s its manifest names."""
    store = zv.open_store(str(pyramid))
    for number in (0, 1, 2):
        lvl = store.level(number)
        data = zv.read(str(pyramid), level=number)
        index = read_object_index(lvl)
        grid, frags = lvl.array("vertices"), lvl.array("vertex_fragments")
        chunks = sorted(grid.nonempty_chunk_coords())
        cells = dict(zip(chunks, (np.frombuffer(p, np.float32).reshape(-1, 3) for p in grid.read_cells(chunks))))
        fragments = dict(zip(chunks, (FragmentIndex.decode(p) for p in frags.read_cells(chunks))))
        lookup = {tuple(p): i for i, p in enumerate(data.positions.tolist())}
        named: dict[int, set[int]] = {int(i): set() for i in index.ids}
        for row, chunk, f in zip(index.block_row.tolist(), key(index.block_chunk), index.block_fragment.tolist()):
            fid, rows = fragments[chunk].expand()
            named[int(index.ids[row])] |= {lookup[tuple(p)] for p in cells[chunk][rows[fid == f]].tolist()}
        ov = data.object_vertices
        for o, vertices in named.items():
            assert set(ov.vertices_of(o).tolist()) == vertices, (number, o)


def test_sparsity_keeps_the_counted_objects(pyramid):
    data = zv.read(str(pyramid), level=2)
    ov = data.object_vertices
    kept = [int(o) for o, c in zip(ov.ids, ov.counts()) if c]
    index_doc = zv.open_store(str(pyramid)).storage.get("2/object_index/zarr.json")
    assert len(kept) == json.loads(index_doc)["attributes"]["num_present"] == OBJECTS // 2
    level1 = zv.read(str(pyramid), level=1)
    # each kept object's level-2 vertices are the level-2 bins of its level-0 vertices
    want = expected_sets(POS, IDS, data.positions, 4 * BIN, kept)
    for o in kept:
        assert set(ov.vertices_of(o).tolist()) == want[o]
    dropped = sorted(set(range(OBJECTS)) - set(kept))
    assert all(len(ov.vertices_of(o)) == 0 for o in dropped)
    assert set(data.object_ids.tolist()) <= set(kept)  # a dropped object owns nothing
    assert len(level1.object_vertices.vertices_of(dropped[0])) > 0


def test_bbox_read_keeps_each_objects_vertices_inside(pyramid):
    full = zv.read(str(pyramid), level=1)
    box = [[0, 0, 0], [120, 90, 200]]
    part = zv.read(str(pyramid), level=1, bbox=box)
    assert 0 < len(part) < len(full)
    inside = ((full.positions >= box[0]) & (full.positions <= box[1])).all(axis=1)
    for o in range(0, OBJECTS, 7):
        want = {tuple(p) for p in full.positions[full.object_vertices.vertices_of(o)][
            inside[full.object_vertices.vertices_of(o)]].tolist()}
        assert {tuple(p) for p in part.positions[part.object_vertices.vertices_of(o)].tolist()} == want
    assert part.object_vertices.num_vertices == len(part)


def test_to_xarray_carries_the_view(pyramid):
    data = zv.read(str(pyramid), level=1)
    ds = data.to_xarray()
    np.testing.assert_array_equal(ds["object_vertex_offsets"].values, data.object_vertices.offsets)
    np.testing.assert_array_equal(ds["object_vertex_index"].values, data.object_vertices.indices)
    assert ds.sizes["object_boundary"] == OBJECTS + 1
    assert ds.attrs["object_id_rule"] == "smallest_owner"
    np.testing.assert_array_equal(ds["object_id"].values, data.object_ids)


# ---------------------------------------------------------------------------
# every kind with objects, level 0 and a coarse level
# ---------------------------------------------------------------------------
SMALL = np.random.default_rng(8)
M = 600
SPOS = SMALL.uniform(-60, 140, (M, 3)).astype(np.float32)
SIDS = SMALL.integers(0, 12, M)
SEDGES = SMALL.integers(0, M, (900, 2))
SEDGES = SEDGES[SEDGES[:, 0] != SEDGES[:, 1]]
SFACES = np.array([SMALL.choice(M, 3, replace=False) for _ in range(400)])
# a forest whose trees are objects: every parent has the id of its child
SPARENTS = np.array([-1 if i % 50 == 0 else int(SMALL.integers(i - i % 50, i)) for i in range(M)])
TREE_IDS = np.arange(M) // 50
OFFSETS = np.r_[0, np.sort(SMALL.choice(np.arange(1, M), 30, replace=False)), M]
KINDS = {
    "points_ids": (lambda p: zv.write_points(p, SPOS, object_ids=SIDS, chunk_shape=40, bin_shape=20), SIDS),
    "graph": (lambda p: zv.write_graph(p, SPOS, SEDGES, object_ids=SIDS, chunk_shape=40, bin_shape=20), SIDS),
    "mesh": (lambda p: zv.write_mesh(p, SPOS, SFACES, object_ids=SIDS, chunk_shape=40, bin_shape=20), SIDS),
    "skeleton": (lambda p: zv.write_skeleton(p, SPOS, SPARENTS, object_ids=TREE_IDS, chunk_shape=40, bin_shape=20),
                 TREE_IDS),
    "polyline": (lambda p: zv.write_polylines(p, SPOS, OFFSETS, chunk_shape=40, bin_shape=20), None),
    "streamline": (lambda p: zv.write_polylines(p, SPOS, OFFSETS, kind="streamline", chunk_shape=40, bin_shape=20),
                   None),
}


def _input_ids(kind: str) -> np.ndarray:
    ids = KINDS[kind][1]
    return np.repeat(np.arange(len(OFFSETS) - 1), np.diff(OFFSETS)) if ids is None else ids


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_level0_view_is_each_objects_input_vertices(tmp_path, kind):
    store = tmp_path / f"{kind}.zv"
    KINDS[kind][0](str(store))
    data = zv.read(str(store))
    ids = _input_ids(kind)
    ov = data.object_vertices
    assert ov.shared() == 0 and (data.object_ids >= 0).all()
    for o in np.unique(ids).tolist():
        got = [tuple(p) for p in data.positions[ov.vertices_of(o)].tolist()]
        want = [tuple(p) for p in SPOS[ids == o].tolist()]
        if kind in ("polyline", "streamline"):
            assert got == want  # traversal order
        else:
            assert sorted(got) == sorted(want)
        assert (data.object_ids[ov.vertices_of(o)] == o).all()
    np.testing.assert_array_equal(np.unique(ov.indices), np.arange(len(data)))  # every vertex has an owner


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_coarse_view_matches_the_per_object_coarsening(tmp_path, kind):
    store = tmp_path / f"{kind}.zv"
    KINDS[kind][0](str(store))
    zv.build_pyramid(str(store), factors=[(2, 1)])
    data = zv.read(str(store), level=1)
    ids, ov = _input_ids(kind), data.object_vertices
    coarse_bins = key(bins_of(data.positions, 40.0))
    for o in np.unique(ids).tolist():
        own = set(key(bins_of(SPOS[ids == o], 40.0)))
        got = ov.vertices_of(o)
        assert {coarse_bins[v] for v in got.tolist()} == own, (kind, o)
        if kind in ("polyline", "streamline"):  # a path: its own rows, shared metavertices repeated
            assert (data.object_ids[got] == o).all()
            np.testing.assert_array_equal(got, np.arange(got[0], got[0] + len(got)))
        else:
            assert len(got) == len(own)
    if kind in ("polyline", "streamline"):
        assert ov.shared() == 0
    else:
        assert ov.shared() > 0
        for v in range(len(data)):
            assert data.object_ids[v] == ov.objects_of(v).min()


def test_the_table_on_its_own():
    """Two objects sharing vertex 1, an absent object, pairs given out of row order."""
    ov = ObjectVertices.from_pairs(np.array([4, 7, 9]), np.array([1, 0, 0, 1]), np.array([2, 0, 1, 1]), 4)
    np.testing.assert_array_equal(ov.offsets, [0, 2, 4, 4])
    assert ov.vertices_of(4).tolist() == [0, 1] and ov.vertices_of(7).tolist() == [2, 1]
    assert ov.vertices_of(9).tolist() == [] and ov.vertices_of(5).tolist() == []
    assert ov.objects_of(1).tolist() == [4, 7] and ov.objects_of(3).tolist() == []
    np.testing.assert_array_equal(ov.smallest_owner(), [4, 4, 7, -1])
    assert ov.shared() == 1
    kept = ov.kept(np.array([False, True, True, True]))
    assert kept.num_vertices == 3 and kept.vertices_of(4).tolist() == [0] and kept.vertices_of(7).tolist() == [1, 0]
    with pytest.raises(zv.InputError, match="vertex 4"):
        ov.objects_of(4)



@pytest.mark.parametrize(
    ("rows", "vertices", "n", "expected"),
    [
        ([0, 0, 1, 2], [0, 1, 2, 3], 4, [4, 4, 7, 9]),  # every vertex once, in order: the owners as they are
        ([0, 1, 2], [0, 2, 3], 4, [4, -1, 7, 9]),  # ascending with a gap: vertex 1 has no owner
        ([0, 1, 2], [1, 2, 3], 4, [-1, 4, 7, 9]),  # as many pairs as vertices would be, but vertex 0 unowned
        ([2, 0, 1], [0, 1, 2], 3, [9, 4, 7]),  # pairs out of row order, no vertex shared
        ([0, 1, 2], [2, 1, 2], 3, [-1, 7, 4]),  # vertex 2 shared by ids 4 and 9
    ],
)
def test_smallest_owner_in_each_of_its_paths(rows, vertices, n, expected):
    ov = ObjectVertices.from_pairs(np.array([4, 7, 9]), np.array(rows), np.array(vertices), n)
    got = ov.smallest_owner()
    np.testing.assert_array_equal(got, expected)
    assert got.dtype == np.int64 and not np.shares_memory(got, ov.ids)


def test_smallest_owner_refuses_a_table_that_does_not_hold_together():
    """Unreachable from a store (the reader builds the table): still never a silent wrap."""
    negative = ObjectVertices(np.array([4, 7]), np.array([0, 1, 2]), np.array([-1, 1]), 3)
    with pytest.raises(ValueError):
        negative.smallest_owner()
    short = ObjectVertices(np.array([4, 7]), np.array([0, 2, 4]), np.array([0, 1, 2]), 3)
    with pytest.raises(ValueError):
        short.smallest_owner()


def _rows_one_by_one(fragments, bases, named):
    """The oracle: each named (cell, fragment)'s rows from FragmentIndex.rows, shifted to global."""
    rows = [fragments[c].rows(f) + bases[c] for c, f in named]
    return (np.concatenate(rows) if rows else np.zeros(0, np.int64)), [len(r) for r in rows]


@pytest.mark.parametrize("seed", range(40))
def test_fragment_rows_equal_each_fragment_read_on_its_own(seed):
    """Mixed range and explicit fragments, overlapping ranges, empty fragments, repeats, any order."""
    from importlib import import_module

    read_module = import_module("zarr_vectors.read")
    rng = np.random.default_rng(seed)
    cells = sorted({tuple(rng.integers(0, 4, 3).tolist()) for _ in range(rng.integers(1, 6))})
    counts = rng.integers(1, 30, len(cells))
    fragments = []
    for n in counts.tolist():
        frags = [[n - 1, 0, 0]]  # never ascending by one: stored explicit
        for _ in range(rng.integers(0, 8)):
            if rng.random() < 0.5:
                start = int(rng.integers(0, n))
                frags.append((start, int(rng.integers(0, n - start + 1))))
            else:
                frags.append(rng.integers(0, n, rng.integers(0, 6)))
        fragments.append(FragmentIndex.from_fragments(frags))
    bases = np.r_[0, np.cumsum(counts)[:-1]].tolist()
    table = read_module.VertexTable(
        cells, dict(zip(cells, bases)), np.zeros((int(counts.sum()), 3), np.float32), {}, fragments, None,
        counts=counts.astype(np.int64),
    )
    picked = rng.integers(0, len(cells), 25).tolist()
    named = [(0, 0)] + [(c, int(rng.integers(0, fragments[c].num_fragments))) for c in picked]
    assert not fragments[0].is_range[0]
    chunks = np.asarray([cells[c] for c, _ in named], dtype=np.int64).reshape(-1, 3)
    frags = np.asarray([f for _, f in named], dtype=np.int64)
    rows, n_rows = read_module._fragment_rows(table, chunks, frags)
    expected_rows, expected_counts = _rows_one_by_one(fragments, bases, named)
    np.testing.assert_array_equal(rows, expected_rows)
    np.testing.assert_array_equal(n_rows, expected_counts)


def test_fragment_rows_refuse_what_the_cells_do_not_have(zv_config):
    from importlib import import_module

    read_module = import_module("zarr_vectors.read")
    overlapping = FragmentIndex.from_ranges(np.zeros(4, np.int64), np.full(4, 1000, np.int64))
    table = read_module.VertexTable([(0, 0, 0)], {(0, 0, 0): 0}, np.zeros((1000, 3), np.float32), {}, [overlapping],
                                    None, level="0", counts=np.array([1000]))
    with pytest.raises(zv.InconsistentStoreError, match="names fragment 4 of chunk 0.0.0, which has 4"):
        read_module._fragment_rows(table, np.zeros((1, 3), np.int64), np.array([4]))
    with pytest.raises(zv.InconsistentStoreError, match="names chunk 1.0.0, which has no vertex cell"):
        read_module._fragment_rows(table, np.array([[1, 0, 0]]), np.array([0]))
    # a cell whose overlapping ranges would expand past the limit is refused, named or not
    zv_config("limits.max-decoded-bytes", 32 << 10)  # 4 x 1000 rows, 16 bytes each expanded: 64 KB
    with pytest.raises(zv.ResourceLimitError, match="its 4 fragments select 4000 rows"):
        read_module._fragment_rows(table, np.array([[1, 0, 0]]), np.array([0]))
    zv_config("limits.max-decoded-bytes", 1 << 20)
    rows, n_rows = read_module._fragment_rows(table, np.zeros((3, 3), np.int64), np.array([0, 3, 0]))
    assert rows.tolist() == list(range(1000)) * 3 and n_rows.tolist() == [1000] * 3
