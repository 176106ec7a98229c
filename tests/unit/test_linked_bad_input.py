"""Bad input to the writers of the linked kinds and to the links API: the right error
type, a message naming the problem and where, and nothing written -- or, over an
existing store (``overwrite=True`` or a refused links-API call), nothing changed."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from file_tree import tree

import zarr_vectors as zv
from zarr_vectors import links_api as A
from zarr_vectors.errors import ArrayError, InputError, StoreExistsError
from zarr_vectors.store.groups import open_store

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")

POS = np.array([[1, 1, 1], [2, 2, 2], [60, 1, 1], [61, 70, 1], [5, 90, 99], [3, 3, 3]], "f4")
EDGES = np.array([[0, 1], [1, 2], [2, 3], [3, 4], [4, 5]])
FACES = np.array([[0, 1, 2], [2, 3, 4], [1, 4, 5]])
PARENTS = np.array([-1, 0, 1, 1, 3, -1])
OFFSETS = np.array([0, 2, 5, 6])


def call(kind: str, url: str, **kw):
    """One writer call with good defaults for everything not given."""
    kw.setdefault("chunk_shape", 50)
    pos = kw.pop("positions", POS)
    if kind == "graph":
        return zv.write_graph(url, pos, kw.pop("edges", EDGES), **kw)
    if kind == "mesh":
        return zv.write_mesh(url, pos, kw.pop("faces", FACES), **kw)
    if kind == "skeleton":
        return zv.write_skeleton(url, pos, kw.pop("parents", PARENTS), **kw)
    return zv.write_polylines(url, pos, kw.pop("offsets", OFFSETS), kind=kind, **kw)


def refuses(tmp_path: Path, kind: str, error: type[Exception], *patterns: str, **kw) -> Exception:
    """The call must raise ``error`` with every pattern in its message and write nothing."""
    target = tmp_path / "out.zv"
    with pytest.raises(error) as info:
        call(kind, str(target), **kw)
    message = str(info.value)
    for p in patterns:
        assert p in message, f"{p!r} not in {message!r}"
    assert not target.exists(), "something was written"
    assert os.listdir(tmp_path) == []
    return info.value


# ---------------------------------------------------------------------------
# records naming vertices out of range
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("edges", "texts"),
    [
        ([[0, 1], [1, 2], [2, 6]], ["edges row 2 names vertex 6", "outside 0..5"]),
        ([[0, 1], [-1, 2]], ["edges row 1 names vertex -1"]),
        ([[0, 1], [1, 2], [3, 4], [99, 1]], ["edges row 3 names vertex 99"]),
    ],
)
def test_graph_edges_out_of_range(tmp_path, edges, texts):
    refuses(tmp_path, "graph", InputError, *texts, edges=np.array(edges))


@pytest.mark.parametrize("kind", ["graph", "mesh", "skeleton", "polyline"])
def test_positions_are_checked_before_the_records_measured_against_them(tmp_path, kind):
    """Regression (hunt): 1-D positions were reported as the records' fault ("faces ... outside
    0..-1", "parents must have shape (0,)", "offsets must end at 0")."""
    refuses(tmp_path, kind, InputError, "positions must have shape (n, ndim), found (6,)", positions=POS[:, 0])
    refuses(tmp_path, kind, InputError, "positions is not an array of numbers", positions=[[0, 0, 0], [1, 1]])


def test_ragged_records_and_attribute_mappings_are_named(tmp_path):
    """Regressions (hunt): numpy's "inhomogeneous shape" ValueError, an AttributeError on a list."""
    refuses(tmp_path, "mesh", InputError, "faces is not an array of numbers", faces=[[0, 1, 2], [0, 1, 2, 3]])
    refuses(tmp_path, "graph", InputError, "edge_attributes must be a mapping of names to columns, found list",
            edge_attributes=[("w", np.ones(5))])


def test_dask_records_are_checked_per_block_before_anything_is_written(tmp_path):
    import dask.array as da

    edges = da.from_array(np.array([[0, 1], [1, 2], [2, 3], [3, 9], [4, 5]]), chunks=(2, 2))
    refuses(tmp_path, "graph", InputError, "edges row 3 names vertex 9", "outside 0..5", edges=edges,
            edge_attributes={"w": da.from_array(np.arange(5.0), chunks=2)})
    faces = da.from_array(np.array([[0, 1, 2], [2, 3, 4], [1, 4, 1]]), chunks=(2, 3))
    refuses(tmp_path, "mesh", InputError, "faces row 2 repeats a vertex", faces=faces)
    refuses(tmp_path, "graph", InputError, "dtype float64", edges=da.from_array(np.zeros((3, 2)), chunks=2))


@pytest.mark.parametrize(
    ("edges", "text"),
    [
        (np.array([0, 1, 2]), "edges must have shape (m, L)"),
        (np.array([[0, 1, 2]]), "edges must have 2 columns, found 3"),
        (np.array([[0.0, 1.0]]), "edges dtype float64 is unsupported"),
    ],
)
def test_graph_edges_bad_shape_or_dtype(tmp_path, edges, text):
    refuses(tmp_path, "graph", InputError, text, edges=edges)


def test_mesh_faces_out_of_range(tmp_path):
    refuses(tmp_path, "mesh", InputError, "faces row 1 names vertex 7", faces=np.array([[0, 1, 2], [1, 7, 3]]))
    refuses(tmp_path, "mesh", InputError, "faces row 0 names vertex -2", faces=np.array([[0, -2, 2]]))


@pytest.mark.parametrize(
    ("faces", "row"),
    [([[0, 1, 2], [3, 4, 3]], 1), ([[0, 0, 1]], 0), ([[0, 1, 2, 3], [1, 2, 3, 4], [5, 4, 2, 4]], 2)],
)
def test_mesh_faces_repeat_a_vertex(tmp_path, faces, row):
    refuses(tmp_path, "mesh", InputError, f"faces row {row} repeats a vertex", faces=np.array(faces))


@pytest.mark.parametrize("faces", [np.array([[0, 1], [1, 2]]), np.array([[0], [1]])])
def test_mesh_faces_with_fewer_than_three_vertices(tmp_path, faces):
    refuses(tmp_path, "mesh", InputError, "at least 3 vertices", faces=faces)


# ---------------------------------------------------------------------------
# skeleton parents
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("parents", "texts"),
    [
        ([-1, 0, 1, 6, 3, -1], ["node 3 has parent 6"]),
        ([-1, 0, 1, 1, -2, -1], ["node 4 has parent -2"]),
        ([-1, 0, 2, 1, 3, -1], ["node 2 has parent 2"]),  # self-parent
        ([1, 2, 0, 1, 3, -1], ["cycle"]),  # 0 -> 1 -> 2 -> 0
        ([-1, 0, 3, 4, 2, -1], ["cycle"]),  # 2 -> 3 -> 4 -> 2 beside a good tree
        ([-1, 0, 1], ["parents must be an integer array of shape (6,)"]),
        ([-1.0, 0, 1, 1, 3, -1], ["parents must be an integer array"]),
    ],
)
def test_skeleton_bad_parents(tmp_path, parents, texts):
    refuses(tmp_path, "skeleton", InputError, *texts, parents=np.array(parents))


def test_skeleton_cycle_names_a_node_on_it(tmp_path):
    err = refuses(tmp_path, "skeleton", InputError, "cycle", parents=np.array([-1, 0, 3, 4, 2, -1]))
    node = int(str(err).split("through node ")[1].split(":")[0])
    assert node in (2, 3, 4)


# ---------------------------------------------------------------------------
# polyline offsets
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("offsets", "texts"),
    [
        ([1, 2, 6], ["offsets must start at 0 and end at 6"]),
        ([0, 2, 5], ["offsets must start at 0 and end at 6", "0..5"]),
        ([0, 2, 7], ["end at 6"]),
        ([0, 4, 2, 6], ["polyline 1 has -2 vertices"]),
        ([0, 2, 2, 6], ["polyline 1 has 0 vertices"]),
        ([0], ["offsets must be a 1-D integer array"]),
        ([[0, 6]], ["offsets must be a 1-D integer array"]),
        ([0.0, 6.0], ["offsets must be a 1-D integer array"]),
    ],
)
@pytest.mark.parametrize("kind", ["polyline", "streamline"])
def test_bad_offsets(tmp_path, kind, offsets, texts):
    refuses(tmp_path, kind, InputError, *texts, offsets=np.array(offsets))


@pytest.mark.parametrize(("offsets", "line"), [([0, 2, 5, 6], 1), ([0, 2, 4, 6][:2] + [3, 6], 1), ([0, 1, 3, 6], 0)])
def test_lines_must_have_two_vertices(tmp_path, offsets, line):
    refuses(tmp_path, "line", InputError, f"line {line} has", "exactly 2", offsets=np.array(offsets))


def test_unknown_polyline_kind(tmp_path):
    refuses(tmp_path, "ribbon", InputError, "kind must be 'polyline', 'streamline' or 'line'")


# ---------------------------------------------------------------------------
# policies and record attributes
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kw", "text"),
    [
        ({"store": "both"}, "store must be 'canonical' or 'duplicate', found 'both'"),
        ({"store": None}, "store must be 'canonical' or 'duplicate'"),
        ({"directed": "yes"}, "directed must be True or False, found 'yes'"),
        ({"directed": 1}, "directed must be True or False, found 1"),
        ({"directed": np.bool_(True)}, "directed must be True or False"),
    ],
)
def test_bad_policy_arguments(tmp_path, kw, text):
    refuses(tmp_path, "graph", InputError, text, **kw)


@pytest.mark.parametrize(
    ("kind", "kw", "texts"),
    [
        ("graph", {"edge_attributes": {"w": np.ones(4)}}, ["edge attribute 'w' has shape (4,)", "one row per record"]),
        ("graph", {"edge_attributes": {"w": np.ones((6, 2))}}, ["edge attribute 'w' has shape (6, 2)"]),
        ("graph", {"edge_attributes": {"w": np.ones((5, 2, 2))}}, ["edge attribute 'w' has shape (5, 2, 2)"]),
        ("graph", {"edge_attributes": {"w": np.ones((5, 0))}}, ["edge attribute 'w' has shape (5, 0)", "one channel"]),
        ("graph", {"edge_attributes": {"w": np.array(["a"] * 5)}}, ["edge attribute 'w'", "unsupported dtype"]),
        ("graph", {"edge_attributes": {"a/b": np.ones(5)}}, ["invalid edge attribute name 'a/b'"]),
        ("graph", {"edge_attributes": {"a\nb": np.ones(5)}}, ["invalid edge attribute name 'a\\nb'"]),
        ("mesh", {"face_attributes": {"area": np.ones(2)}}, ["face attribute 'area' has shape (2,)"]),
        ("graph", {"attributes": {"v": np.ones(5)}}, ["attribute 'v' has shape (5,)"]),
        ("skeleton", {"attributes": {"v": np.ones(7)}}, ["attribute 'v' has shape (7,)"]),
        ("polyline", {"attributes": {"v": np.ones(2)}}, ["attribute 'v' has shape (2,)"]),
        ("polyline", {"object_attributes": {"w": np.ones(4)}}, ["object attribute 'w' has 4 rows; expected 3"]),
        ("graph", {"object_ids": np.zeros(5, int)}, ["object_ids must have shape (6,)"]),
        ("skeleton", {"object_ids": np.zeros(5, int)}, ["object_ids must have shape (6,)"]),
        ("graph", {"object_ids": [0, 0, 1, 1, 2, 2], "object_attributes": {"w": np.ones(2)}},
         ["object attribute 'w' has 2 rows; expected 3"]),
    ],
)  # fmt: skip
def test_attribute_lengths_differ_from_the_records(tmp_path, kind, kw, texts):
    refuses(tmp_path, kind, InputError, *texts, **kw)


@pytest.mark.parametrize("kind", ["graph", "mesh", "skeleton", "polyline", "streamline", "line"])
def test_bad_positions_for_every_kind(tmp_path, kind):
    pos = POS.copy()
    pos[4, 2] = np.nan
    kw = {"offsets": np.arange(0, 7, 2)} if kind == "line" else {}
    refuses(tmp_path, kind, InputError, "positions row 4", "not finite", positions=pos, **kw)


# ---------------------------------------------------------------------------
# an existing store is never changed by a refused call
# ---------------------------------------------------------------------------
@pytest.fixture
def existing(tmp_path):
    path = tmp_path / "old.zv"
    zv.write_graph(str(path), POS, EDGES, chunk_shape=50, store="duplicate",
                   edge_attributes={"w": np.arange(5.0)}, attributes={"v": np.arange(6)})
    return path, tree(path)


def test_existing_store_without_overwrite(existing):
    path, before = existing
    with pytest.raises(StoreExistsError):
        zv.write_mesh(str(path), POS, FACES, chunk_shape=50)
    assert tree(path) == before


@pytest.mark.parametrize(
    ("kind", "kw"),
    [
        ("graph", {"edges": np.array([[0, 6]])}),
        ("graph", {"store": "triple"}),
        ("graph", {"directed": None}),
        ("graph", {"edge_attributes": {"w": np.ones(3)}}),
        ("mesh", {"faces": np.array([[0, 1, 1]])}),
        ("mesh", {"faces": np.array([[0, 1]])}),
        ("skeleton", {"parents": np.array([1, 0, -1, -1, -1, -1])}),
        ("skeleton", {"parents": np.array([-1, 0, 9, -1, -1, -1])}),
        ("polyline", {"offsets": np.array([0, 3, 2, 6])}),
        ("line", {"offsets": np.array([0, 3, 6])}),
        ("streamline", {"positions": np.where(np.arange(18).reshape(6, 3) == 4, np.inf, POS)}),
    ],
)
def test_overwrite_with_bad_input_keeps_the_old_store(existing, kind, kw):
    path, before = existing
    with pytest.raises(InputError):
        call(kind, str(path), overwrite=True, **kw)
    assert tree(path) == before
    data = zv.read(str(path))
    np.testing.assert_array_equal(np.sort(data.edge_attributes["w"]), [0, 1, 1, 2, 2, 3, 3, 4, 4])


def test_overwrite_with_good_input_replaces(existing):
    path, _ = existing
    zv.write_polylines(str(path), POS, OFFSETS, chunk_shape=50, overwrite=True)
    data = zv.read(str(path))
    assert data.kind == "polyline" and data.edges is None
    assert not (path / "0" / "link_attributes").exists() and not (path / "0" / "link_fragments").exists()
    np.testing.assert_array_equal(data.offsets, OFFSETS)


# ---------------------------------------------------------------------------
# the links API: families keep one policy, one width, one arity
# ---------------------------------------------------------------------------
def _records(width: int, ndim: int = 3):
    chunks = np.array([[[0] * ndim, [1] + [0] * (ndim - 1), [0, 1] + [0] * (ndim - 2)][:width]] * 2)
    vi = np.array([[0] * width, [1] * width])
    return chunks, vi


@pytest.fixture
def linked_store(tmp_path):
    """A graph store (undirected canonical family, width 2, sid_ndim 3) with a link attribute."""
    path = tmp_path / "api.zv"
    zv.write_graph(str(path), POS, EDGES, chunk_shape=50, edge_attributes={"w": np.arange(5.0)})
    return path, tree(path)


def _level(path: Path):
    return open_store(str(path)).level(0)


@pytest.mark.parametrize(("chunks", "vi", "message"), [
    ([[[0, 0, 0], [0, 0, 0]]], [[0, 999]], "links record 0 endpoint 1 names row 999 of chunk 0.0.0 of level 0, which "
                                           "holds 3 vertices"),
    ([[[0, 0, 0], [0, 0, 0]]], [[-1, 0]], "vi of record 0 is negative"),
    ([[[0, 0, 0], [9, 9, 9]]], [[0, 0]], "names row 0 of chunk 9.9.9 of level 0, which holds 0 vertices"),
])  # fmt: skip
def test_links_naming_vertices_a_chunk_does_not_hold_are_refused(linked_store, chunks, vi, message):
    """Regression (hunt): such records were written (a store no reader opens), and mode="replace"
    had removed the family's real records first."""
    path, before = linked_store
    for mode in ("replace", "append"):
        with pytest.raises(InputError, match=message):
            A.write_links(_level(path), 0, chunks, vi, mode=mode)
        assert tree(path) == before
    records = len(A.read_links(_level(path), 0))
    A.write_links(_level(path), 0, [[[0, 0, 0], [0, 0, 0]]], [[0, 2]], mode="append")  # row 2 of 3: taken
    assert len(A.read_links(_level(path), 0)) == records + 1


def test_append_with_a_conflicting_policy(linked_store):
    path, before = linked_store
    chunks, vi = _records(2)
    for kw in ({"directed": True}, {"store": "duplicate"}, {"directed": True, "store": "duplicate"}):
        with pytest.raises(ArrayError, match="cannot append to links/0 with a different policy") as info:
            A.write_links(_level(path), 0, chunks, vi, mode="append", **kw)
        assert ("directed" in str(info.value)) == ("directed" in kw)
        assert tree(path) == before


def test_restamping_a_family_with_arrays_is_refused(linked_store):
    path, before = linked_store
    for kw in ({"link_width": 2, "directed": True}, {"link_width": 3}, {"link_width": 2, "store": "duplicate"},
               {"link_width": 2, "sid_ndim": 2}):
        args = {"sid_ndim": 3} | kw
        with pytest.raises(ArrayError, match="already holds offset arrays"):
            A.create_links_family(_level(path), 0, **args)
        assert tree(path) == before


def test_mixed_link_widths_in_one_family(linked_store):
    path, before = linked_store
    chunks, vi = _records(3)
    with pytest.raises(ArrayError) as info:
        A.write_links(_level(path), 0, chunks, vi, mode="append")
    assert "link_width" in str(info.value)
    assert tree(path) == before
    # records of differing widths in one call
    ragged_chunks = [[[0, 0, 0], [1, 0, 0]], [[0, 0, 0], [1, 0, 0], [0, 1, 0]]]
    with pytest.raises(ArrayError, match="differing arity"):
        A.write_links(_level(path), 0, ragged_chunks, [[0, 0], [0, 0, 0]], mode="append")
    with pytest.raises(ArrayError, match="differing arity"):
        A.partition_records_by_offset(ragged_chunks, [[0, 0], [0, 0, 0]])
    assert tree(path) == before


def test_endpoint_chunk_tuple_of_the_wrong_arity(linked_store):
    path, before = linked_store
    chunks, vi = _records(2, ndim=2)
    with pytest.raises(ArrayError, match="2 components but the family/level uses sid_ndim 3"):
        A.write_links(_level(path), 0, chunks, vi, mode="append")
    assert tree(path) == before
    with pytest.raises(ArrayError, match="2 components but the vertices array has 3 dimensions"):
        A.write_links(_level(path), 0, chunks, vi, mode="replace")
    assert tree(path) == before
    ragged = [[[0, 0, 0], [1, 0]]]
    with pytest.raises(ArrayError, match="differing arity"):
        A.write_links(_level(path), 0, ragged, [[0, 0]], mode="append")
    assert tree(path) == before
    with pytest.raises(ArrayError, match="has 2 coordinates, the family uses sid_ndim 3"):
        A.read_chunk_links(_level(path), (0, 0), delta=0, offsets="0.0.0")
    with pytest.raises(ArrayError):
        A.read_links_for_tuple(_level(path), delta=0, chunk_tuple=[(0, 0, 0), (1, 0)])


def test_link_attribute_length_differs_from_the_records(linked_store):
    path, before = linked_store
    chunks, vi = _records(2)
    part = A.partition_records_by_offset(chunks, vi)
    with pytest.raises(ArrayError, match="3 rows but the partition covers 2 input records"):
        A.write_link_attributes(_level(path), "w", 0, np.ones(3), partition=part)
    assert tree(path) == before
    with pytest.raises(ArrayError, match="4 rows given, links/0 stores 5 records"):
        A.write_link_attributes(_level(path), "w", 0, np.ones(4))
    assert tree(path) == before


def test_good_append_still_works_after_refusals(linked_store):
    path, _ = linked_store
    level = _level(path)
    chunks, _ = _records(2)
    vi = np.array([[0, 0], [2, 0]])  # rows that exist: chunk 1.0.0 holds one vertex (the reader checks)
    part = A.write_links(level, 0, chunks, vi, mode="append")
    A.write_link_attributes(level, "w", 0, np.array([10.0, 11.0]), partition=part)
    data = zv.read(str(path))
    assert len(data.edges) == 7
    assert sorted(data.edge_attributes["w"].tolist()) == [0, 1, 2, 3, 4, 10, 11]


# ---------------------------------------------------------------------------
# the record checks themselves, past their first block and at the edges of the index range
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("width", [3, 6])  # column comparisons, then the row-wise sort
def test_a_repeated_vertex_far_into_the_records_is_named_by_its_row(width):
    from zarr_vectors.format import topology

    records = np.arange(50_000 * width, dtype=np.int64).reshape(-1, width)
    topology.check_distinct(records, what="faces")  # all distinct: passes
    records[40_123, width - 1] = records[40_123, 0]
    with pytest.raises(InputError, match="faces row 40223 repeats a vertex"):
        topology.check_distinct(records, what="faces", first_row=100)


@pytest.mark.parametrize(
    ("bad", "text"),
    [(-1, "names vertex -1"), (10, "names vertex 10"), (np.iinfo(np.int64).min, "names vertex -9223372036854775808")],
)
def test_an_index_out_of_range_is_found_in_a_strided_array(bad, text):
    from zarr_vectors.format import topology

    records = np.zeros((30_000, 4), dtype=np.int64)[:, ::2]  # not contiguous
    records[:] = 9  # the largest index allowed
    topology.check_records(records, 10, what="edges")
    records[29_999, 1] = bad
    with pytest.raises(InputError, match=f"edges row 29999 {text}"):
        topology.check_records(records, 10, what="edges")


def test_unsigned_indices_past_the_signed_range_are_refused():
    from zarr_vectors.format import topology

    records = np.array([[0, 1], [2, np.iinfo(np.uint64).max]], dtype=np.uint64)
    with pytest.raises(InputError, match="edges row 1 names vertex 18446744073709551615"):
        topology.check_records(records, 5, what="edges")
    assert topology.check_records(np.zeros((0, 2), np.int64), 5, what="edges").shape == (0, 2)
