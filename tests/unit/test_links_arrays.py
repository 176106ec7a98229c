"""The links API on disk: docs/format.md §6.5/§6.6/§7/§10a byte for byte, policies, refusals."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from zarr_vectors import links_api as A
from zarr_vectors.encoding import lehmer_encode
from zarr_vectors.errors import ArrayError, InputError, MetadataError
from zarr_vectors.format.metadata import LevelMetadata
from zarr_vectors.store.grid import GridArray
from zarr_vectors.store.groups import Level, create_store, open_store


# -- helpers --------------------------------------------------------------------------------
def make_store(tmp_path, *, chunk_shape=(50.0, 50.0, 50.0), bounds=None, vertices=((0, 0, 0), (2, 2, 2)), levels=()):
    """A store with level 0 (optionally a raw ``vertices`` grid) and extra empty levels."""
    d = len(chunk_shape)
    url = str(tmp_path / "g.zarrvectors")
    store = create_store(
        url,
        chunk_shape=chunk_shape,
        bounds=bounds or ((0.0,) * d, (100.0,) * d),
        geometry_type="graph",
    )
    if vertices is not None:
        GridArray.create(
            store.storage,
            "0/vertices",
            shape=vertices[1],
            origin=vertices[0],
            attributes={"zv_array": "vertices", "dtype": "float32", "encoding": "raw"},
            compressor=None,
        )
    for number, cs in levels:
        Level(store, number, LevelMetadata(level=number, chunk_shape=cs, parent_level=number - 1)).write_metadata()
    return open_store(url)


def level0(tmp_path, **kw):
    return make_store(tmp_path, **kw).level(0)


def raw(level, key):
    return level.storage.get(f"{level.path}/{key}")


def meta(level, rel):
    return json.loads(raw(level, f"{rel}/zarr.json"))


def frame(payload: bytes) -> bytes:
    return struct.pack("<II", 1, len(payload)) + payload


def i64(*values: int) -> bytes:
    return np.array(values, dtype="<i8").tobytes()


def blob(*groups) -> bytes:
    data = [i64(*[v for row in g for v in row]) for g in groups]
    offsets = np.cumsum([0] + [len(x) for x in data[:-1]]).tolist()
    return i64(len(groups), *offsets) + b"".join(data)


def cell_files(level, prefix):
    return sorted(k[len(level.path) + 1 :] for k in level.storage.list_files(f"{level.path}/{prefix}") if "/c/" in k)


# §10a input: chunk rows 0.0.0 = [v0, v1, v4], 1.0.0 = [v2], 1.1.1 = [v3]
CHUNK = {0: (0, 0, 0), 1: (0, 0, 0), 4: (0, 0, 0), 2: (1, 0, 0), 3: (1, 1, 1)}
LOCAL = {0: 0, 1: 1, 4: 2, 2: 0, 3: 0}
EDGES = [(0, 1), (2, 0), (1, 4), (3, 2), (4, 3)]
WEIGHTS = np.array([0.5, 1.5, 2.5, 3.5, 4.5], dtype=np.float32)


def graph_records(edges=EDGES):
    chunks = np.array([[CHUNK[a], CHUNK[b]] for a, b in edges], dtype=np.int64)
    vi = np.array([[LOCAL[a], LOCAL[b]] for a, b in edges], dtype=np.int64)
    return chunks, vi


# -- docs/format.md §10a, byte for byte --------------------------------------------------------
def test_section_10a_graph_example_byte_for_byte(tmp_path):
    lv = level0(tmp_path)
    chunks, vi = graph_records()
    part = A.write_links(lv, 0, chunks, vi, compressor=None)
    A.write_link_attributes(lv, "weight", 0, WEIGHTS, partition=part, compressor=None)

    fragment_index_0_2 = bytes.fromhex(
        "4746565a 01000000 01000000 01000000 0100000000000000 0000000000000000 0200000000000000 00000000".replace(" ", "")
    )
    expected = {
        "links/0/0.0.0/c/0/0/0": frame(i64(0, 1, 1, 2)),
        "link_fragments/c/0/0/0": frame(fragment_index_0_2),
        "links/0/+1.0.0/c/0/0/0": frame(blob([(1, 0, 0)])),
        "links/0/0.+1.+1/c/1/0/0": frame(blob([(1, 0, 0)])),
        "links/0/+1.+1.+1/c/0/0/0": frame(blob([(0, 2, 0)])),
        "link_attributes/weight/0/0.0.0/c/0/0/0": frame(bytes.fromhex("0000003f00002040")),
        "link_attributes/weight/0/+1.0.0/c/0/0/0": frame(bytes.fromhex("0000c03f")),
        "link_attributes/weight/0/0.+1.+1/c/1/0/0": frame(bytes.fromhex("00006040")),
        "link_attributes/weight/0/+1.+1.+1/c/0/0/0": frame(bytes.fromhex("00009040")),
    }
    # the §6.5 hex of the +1.0.0 cell, spelled out
    assert expected["links/0/+1.0.0/c/0/0/0"].hex() == (
        "01000000" "28000000" + "0100000000000000" + "0000000000000000" + "0100000000000000" + "00" * 16
    )
    files = cell_files(lv, "links") + cell_files(lv, "link_fragments") + cell_files(lv, "link_attributes")
    assert sorted(files) == sorted(expected)
    for key, value in expected.items():
        assert raw(lv, key) == value, key

    assert meta(lv, "links/0")["attributes"] == {
        "zv_array": "links_family", "level_delta": 0, "link_width": 2, "directed": False,
        "store": "canonical", "sid_ndim": 3, "num_links": 5, "num_physical_records": 5,
    }
    assert meta(lv, "links")["attributes"] == {}
    arr = meta(lv, "links/0/+1.0.0")
    assert arr["shape"] == [2, 2, 2]
    assert arr["codecs"] == [{"name": "vlen-bytes", "configuration": {}}]
    assert arr["attributes"] == {
        "nonempty_chunks": ["0.0.0"], "zv_array": "links", "dtype": "int64", "offsets": [[1, 0, 0]],
        "has_perm": True, "link_width": 2, "level_delta": 0,
    }
    assert meta(lv, "links/0/0.0.0")["attributes"]["has_perm"] is False
    assert meta(lv, "links/0/0.+1.+1")["attributes"]["nonempty_chunks"] == ["1.0.0"]
    assert meta(lv, "link_fragments")["attributes"] == {
        "nonempty_chunks": ["0.0.0"], "zv_array": "link_fragments", "encoding": "fragment_index_v1",
    }
    assert meta(lv, "link_attributes/weight/0")["attributes"] == {
        "zv_array": "link_attribute_family", "name": "weight", "level_delta": 0, "num_links": 5,
    }
    assert meta(lv, "link_attributes/weight/0/+1.0.0")["attributes"] == {
        "nonempty_chunks": ["0.0.0"], "zv_array": "link_attribute", "name": "weight", "dtype": "float32",
        "offsets": [[1, 0, 0]], "level_delta": 0, "row_shape": [],
    }

    # reading back in the §10a order (the family order +1.+1.+1, +1.0.0, 0.+1.+1, 0.0.0)
    assert A.list_link_offsets(lv, 0) == ["+1.+1.+1", "+1.0.0", "0.+1.+1", "0.0.0"]
    assert A.read_links(lv, 0).as_tuples() == [
        (((0, 0, 0), 2), ((1, 1, 1), 0)),
        (((1, 0, 0), 0), ((0, 0, 0), 0)),
        (((1, 1, 1), 0), ((1, 0, 0), 0)),
        (((0, 0, 0), 0), ((0, 0, 0), 1)),
        (((0, 0, 0), 1), ((0, 0, 0), 2)),
    ]
    assert A.read_link_attributes(lv, "weight", 0).tolist() == [4.5, 1.5, 3.5, 0.5, 2.5]
    assert A.finalize_links(lv, 0) == A.LinkCounts(5, 5)


# -- docs/format.md §7.3 duplicate record on disk -----------------------------------------------
def test_duplicate_l3_record_on_disk(tmp_path):
    lv = level0(tmp_path)
    chunks = np.array([[(1, 0, 0), (0, 0, 0), (0, 1, 0)]])
    vi = np.array([[1, 2, 0]])
    A.write_links(lv, 0, chunks, vi, store="duplicate", compressor=None)
    assert cell_files(lv, "links") == [
        "links/0/+1.-1.0_0.-1.0/c/0/1/0",
        "links/0/+1.0.0_0.+1.0/c/0/0/0",
        "links/0/-1.0.0_-1.+1.0/c/1/0/0",
    ]
    assert raw(lv, "links/0/+1.0.0_0.+1.0/c/0/0/0") == frame(blob([(2, 2, 1, 0)]))
    assert raw(lv, "links/0/+1.-1.0_0.-1.0/c/0/1/0") == frame(blob([(4, 0, 1, 2)]))
    assert raw(lv, "links/0/-1.0.0_-1.+1.0/c/1/0/0") == frame(blob([(0, 1, 2, 0)]))
    fam = meta(lv, "links/0")["attributes"]
    assert (fam["num_links"], fam["num_physical_records"]) == (1, 3)
    records = A.read_links(lv, 0).as_tuples()
    assert records == [(((1, 0, 0), 1), ((0, 0, 0), 2), ((0, 1, 0), 0))] * 3
    assert A.finalize_links(lv, 0) == A.LinkCounts(1, 3)
    assert not lv.has("link_fragments")


def test_mesh_faces_on_disk(tmp_path):
    lv = level0(tmp_path)
    chunks = np.array([[(1, 0, 0), (0, 0, 0), (0, 1, 0)], [(1, 1, 1), (1, 0, 0), (0, 1, 0)]])
    A.write_links(lv, 0, chunks, np.zeros((2, 3), int), compressor=None)
    assert raw(lv, "links/0/0.+1.0_+1.0.0/c/0/0/0") == frame(blob([(3, 0, 0, 0)]))
    assert raw(lv, "links/0/+1.-1.0_+1.0.+1/c/0/1/0") == frame(blob([(5, 0, 0, 0)]))
    assert A.read_links(lv, 0).chunks.tolist() == chunks[[1, 0]].tolist()


# -- directed x store ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("directed", "store", "perm", "rows"),
    [(False, "canonical", True, 5), (False, "duplicate", True, 8), (True, "canonical", False, 5), (True, "duplicate", True, 8)],
)
def test_four_policies(tmp_path, directed, store, perm, rows):
    lv = level0(tmp_path)
    chunks, vi = graph_records()
    part = A.write_links(lv, 0, chunks, vi, directed=directed, store=store)
    assert part.num_physical_records == rows
    fam = meta(lv, "links/0")["attributes"]
    assert (fam["directed"], fam["store"], fam["num_links"], fam["num_physical_records"]) == (directed, store, 5, rows)
    for segment in A.list_link_offsets(lv, 0):
        expected = perm and segment != "0.0.0"
        assert meta(lv, f"links/0/{segment}")["attributes"]["has_perm"] is expected
    got = A.read_links(lv, 0)
    assert got.chunks.tolist() == chunks[part.record].tolist()
    assert got.vi.tolist() == vi[part.record].tolist()
    A.write_link_attributes(lv, "w", 0, WEIGHTS, partition=part)
    assert A.read_link_attributes(lv, "w", 0).tolist() == WEIGHTS[part.record].tolist()
    assert A.finalize_links(lv, 0) == A.LinkCounts(5, rows)
    if directed and store == "canonical":
        # A->B and B->A file under opposite offsets in different cells
        assert "-1.0.0" in A.list_link_offsets(lv, 0)
    # the default compressor is zstd
    assert meta(lv, "links/0/0.0.0")["codecs"][1]["name"] == "zstd"


def test_duplicate_attributes_need_a_partition(tmp_path):
    lv = level0(tmp_path)
    chunks, vi = graph_records()
    A.write_links(lv, 0, chunks, vi, store="duplicate")
    with pytest.raises(ArrayError, match="partition"):
        A.write_link_attributes(lv, "w", 0, np.zeros(8, np.float32))


def test_attributes_in_enumeration_order_without_partition(tmp_path):
    lv = level0(tmp_path)
    chunks, vi = graph_records()
    A.write_links(lv, 0, chunks, vi, compressor=None)
    A.write_link_attributes(lv, "rank", 0, np.arange(5, dtype=np.int32), compressor=None)
    assert A.read_link_attributes(lv, "rank", 0).tolist() == [0, 1, 2, 3, 4]
    assert raw(lv, "link_attributes/rank/0/0.0.0/c/0/0/0") == frame(np.array([3, 4], "<i4").tobytes())
    with pytest.raises(ArrayError, match="5 records"):
        A.write_link_attributes(lv, "rank", 0, np.arange(4, dtype=np.int32))
    rgb = np.arange(15, dtype=np.uint8).reshape(5, 3)
    A.write_link_attributes(lv, "rgb", 0, rgb)
    assert A.read_link_attributes(lv, "rgb", 0).tolist() == rgb.tolist()
    assert meta(lv, "link_attributes/rgb/0/0.0.0")["attributes"]["row_shape"] == [3]


# -- enumeration order ---------------------------------------------------------------------
def test_cells_enumerate_numerically_d8(tmp_path):
    lv = level0(tmp_path, vertices=None)
    chunks = np.array([[(10, 0), (10, 0)], [(2, 0), (2, 0)], [(-1, 0), (-1, 0)]])
    vi = np.array([[0, 1], [2, 3], [4, 5]])
    A.write_links(lv, 0, chunks, vi)
    arr = meta(lv, "links/0/0.0")
    assert arr["attributes"]["nonempty_chunks"] == ["-1.0", "10.0", "2.0"]  # strings on disk
    assert arr["attributes"]["chunk_grid_origin"] == [-1, 0]
    assert arr["shape"] == [12, 1]
    assert A.read_links(lv, 0).vi.tolist() == [[4, 5], [2, 3], [0, 1]]  # numeric on read
    A.write_link_attributes(lv, "w", 0, np.array([7.0, 8.0, 9.0]))
    assert A.read_link_attributes(lv, "w", 0).tolist() == [7.0, 8.0, 9.0]


def test_segments_enumerate_as_ascii_intra_last(tmp_path):
    lv = level0(tmp_path)
    chunks = np.array([[(0, 0, 0), (0, 0, 0)], [(0, 0, 0), (0, 0, 1)], [(0, 0, 1), (0, 0, 0)], [(0, 0, 0), (1, 0, 0)], [(1, 0, 0), (0, 0, 0)]])
    A.write_links(lv, 0, chunks, np.zeros((5, 2), int), directed=True)
    assert A.list_link_offsets(lv, 0) == ["+1.0.0", "-1.0.0", "0.0.+1", "0.0.-1", "0.0.0"]
    assert A.read_links(lv, 0).chunks.tolist() == chunks[[3, 4, 1, 2, 0]].tolist()


def test_list_link_deltas_numeric(tmp_path):
    store = make_store(tmp_path, levels=[(1, None), (2, None)])
    lv = store.level(1)
    for d in (1, -1, 0):
        A.write_links(lv, d, np.zeros((1, 2, 3), int), np.zeros((1, 2), int), directed=True)
    assert A.list_link_deltas(lv) == [-1, 0, 1]
    assert A.list_link_deltas(store.level(0)) == []
    assert len(A.read_links(store.level(0), 0)) == 0


# -- policy refusals -----------------------------------------------------------------------
def test_create_links_family_refuses_flips_while_arrays_exist(tmp_path):
    lv = level0(tmp_path)
    A.create_links_family(lv, 0, link_width=2, directed=False, store="canonical", sid_ndim=3)
    # nothing materialised yet: re-stamping is allowed
    A.create_links_family(lv, 0, link_width=2, directed=True, store="canonical", sid_ndim=3)
    assert lv.children("links/0") == []
    chunks, vi = graph_records()
    A.write_links(lv, 0, chunks, vi)
    for flip in ({"directed": True}, {"store": "duplicate"}, {"link_width": 3}, {"sid_ndim": 2}):
        policy = {"link_width": 2, "directed": False, "store": "canonical", "sid_ndim": 3} | flip
        with pytest.raises(ArrayError, match="different policy"):
            A.create_links_family(lv, 0, **policy)
    # the same policy is idempotent and keeps the counts
    A.create_links_family(lv, 0, link_width=2, directed=False, store="canonical", sid_ndim=3)
    assert meta(lv, "links/0")["attributes"]["num_links"] == 5


def test_append_refuses_a_policy_flip_replace_rewrites(tmp_path):
    lv = level0(tmp_path)
    chunks, vi = graph_records()
    A.write_links(lv, 0, chunks, vi)
    A.write_link_attributes(lv, "w", 0, WEIGHTS)
    with pytest.raises(ArrayError, match="different policy"):
        A.write_links(lv, 0, chunks, vi, directed=True, mode="append")
    with pytest.raises(ArrayError, match="different policy"):
        A.write_links(lv, 0, chunks, vi, store="duplicate", mode="append")
    part = A.write_links(lv, 0, chunks, vi, directed=True)  # replace: the old family is gone
    assert meta(lv, "links/0")["attributes"]["directed"] is True
    assert not lv.has("link_attributes/w/0")
    assert A.read_links(lv, 0).chunks.tolist() == chunks[part.record].tolist()


def test_owner_writer_refuses_a_partition_of_another_policy(tmp_path):
    lv = level0(tmp_path)
    A.create_links_family(lv, 0, link_width=2, directed=True, store="canonical", sid_ndim=3)
    chunks, vi = graph_records()
    part = A.partition_records_by_offset(chunks, vi)
    with pytest.raises(ArrayError):
        A.create_links_arrays(lv, 0, part)
    with pytest.raises(ArrayError):
        A.write_link_cells(lv, 0, part)


def test_owner_writer_needs_arrays_created_by_the_coordinator(tmp_path):
    lv = level0(tmp_path)
    A.create_links_family(lv, 0, link_width=2, directed=False, store="canonical", sid_ndim=3)
    chunks, vi = graph_records()
    with pytest.raises(ArrayError, match="create_links_arrays"):
        A.write_link_cells(lv, 0, A.partition_records_by_offset(chunks, vi))


# -- arity, mixed levels, bad input --------------------------------------------------------
def test_arity_mismatches_are_array_errors(tmp_path):
    lv = level0(tmp_path)
    with pytest.raises(ArrayError, match="vertices"):
        A.write_links(lv, 0, np.zeros((1, 2, 2), int), np.zeros((1, 2), int))
    with pytest.raises(ArrayError, match="arity"):
        A.write_links(lv, 0, [[(0, 0, 0), (0, 0)]], [[0, 0]])
    chunks, vi = graph_records()
    A.write_links(lv, 0, chunks, vi)
    with pytest.raises(ArrayError):
        A.read_links_for_tuple(lv, delta=0, chunk_tuple=[(0, 0), (0, 0)])
    with pytest.raises(ArrayError):
        A.read_links_for_tuple(lv, delta=0, chunk_tuple=[(0, 0, 0)])
    with pytest.raises(ArrayError):
        A.write_chunk_links(lv, 0, "0.0.0", (0, 0), np.zeros((1, 2), int))
    with pytest.raises(ArrayError):
        A.write_chunk_links(lv, 0, "0.0", (0, 0, 0), np.zeros((1, 2), int))
    lv2 = level0(tmp_path / "other", vertices=None)
    A.write_links(lv2, 0, chunks, vi)
    with pytest.raises(ArrayError, match="sid_ndim"):
        A.write_links(lv2, 0, np.zeros((1, 2, 2), int), np.zeros((1, 2), int), mode="append")


def test_mixed_level_record_is_refused(tmp_path):
    store = make_store(tmp_path, levels=[(1, None)])
    lv = store.level(0)
    chunks = np.zeros((2, 3, 3), int)
    ok = np.array([[0, 1, 1], [0, 1, 1]])
    A.write_links(lv, 1, chunks, np.zeros((2, 3), int), directed=True, endpoint_deltas=ok)
    mixed = np.array([[0, 1, 1], [0, 0, 1]])
    with pytest.raises(ArrayError, match="mixes resolution levels"):
        A.write_links(lv, 1, chunks, np.zeros((2, 3), int), directed=True, endpoint_deltas=mixed, mode="append")
    with pytest.raises(ArrayError, match="record 0"):
        A.write_links(lv, 0, chunks[:1], np.zeros((1, 3), int), endpoint_deltas=[[1, 0, 0]])


def test_missing_target_level_is_refused(tmp_path):
    lv = level0(tmp_path)
    with pytest.raises(ArrayError, match="does not exist"):
        A.write_links(lv, 1, np.zeros((1, 2, 3), int), np.zeros((1, 2), int), directed=True)
    with pytest.raises(ArrayError, match="does not exist"):
        A.write_links(lv, -1, np.zeros((1, 2, 3), int), np.zeros((1, 2), int), directed=True)
    # an explicit ratio needs no target level
    A.write_links(lv, 1, np.zeros((1, 2, 3), int), np.zeros((1, 2), int), directed=True, anchor_ratios=((1,) * 3, (1,) * 3))
    assert len(A.read_links(lv, 1, anchor_ratios=((1,) * 3, (1,) * 3))) == 1


# -- the cross-level anchor on disk (root chunk 100, level-1 chunk 200) ------------------
def test_anchor_counter_example_on_disk(tmp_path):
    store = make_store(
        tmp_path, chunk_shape=(100.0,), bounds=((-1000.0,), (1000.0,)), vertices=((-10,), (20,)), levels=[(1, (200.0,))]
    )
    lv0, lv1 = store.level(0), store.level(1)
    assert A.link_anchor_ratios(lv0, 1) == ((1,), (2,))
    src = np.array([3, 1, 0, -1, -2, -3, -5])
    trg = np.array([2, 1, 1, 0, 0, -1, -2])
    chunks = np.stack([src, trg], axis=1)[:, :, None]
    vi = np.stack([np.arange(7), np.arange(7) + 10], axis=1)
    part = A.write_links(lv0, 1, chunks, vi, directed=True, compressor=None)
    assert A.list_link_offsets(lv0, 1) == ["+1"]  # naive differences would scatter over -1, 0, +1, +2, +3
    back = A.read_links(lv0, 1)
    assert back.chunks.tolist() == chunks[part.record].tolist()
    assert back.vi.tolist() == vi[part.record].tolist()
    assert sorted(back.as_tuples()) == sorted(
        tuple(((int(c),), int(v)) for c, v in zip(cs[:, 0], vs)) for cs, vs in zip(chunks, vi)
    )
    # cross-level cells are blobs even for a zero offset, and never carry a perm column
    A.write_links(lv0, 1, np.array([[[4], [2]]]), np.array([[0, 1]]), directed=True, compressor=None)
    assert A.list_link_offsets(lv0, 1) == ["0"]
    assert raw(lv0, "links/+1/0/c/14") == frame(blob([(0, 1)]))
    assert meta(lv0, "links/+1/0")["attributes"]["has_perm"] is False
    # and the reverse direction: level-1 chunk 1 = [200,400) -> level-0 chunk 3 = [300,400)
    A.write_links(lv1, -1, np.array([[[1], [3]], [[-2], [-3]]]), np.array([[0, 0], [1, 1]]), directed=True)
    assert A.list_link_offsets(lv1, -1) == ["+1"]
    assert A.read_links(lv1, -1).chunks[:, :, 0].tolist() == [[-2, -3], [1, 3]]


# -- append --------------------------------------------------------------------------------
def test_append_adds_one_group_per_cell(tmp_path):
    lv = level0(tmp_path)
    first = A.write_links(lv, 0, np.array([[(0, 0, 0), (1, 0, 0)], [(0, 0, 0), (0, 0, 0)]]), np.array([[2, 0], [0, 1]]), compressor=None)
    A.write_link_attributes(lv, "w", 0, np.array([1.0, 2.0], np.float32), partition=first)
    second = A.write_links(
        lv, 0, np.array([[(1, 0, 0), (0, 0, 0)], [(0, 0, 0), (0, 0, 0)]]), np.array([[1, 0], [1, 2]]), mode="append"
    )
    assert second.base_rows.tolist() == [1, 1]
    # docs/format.md §6.5 appended example: K=2, off=[0,24], rows [0,2,0] then [1,0,1]
    assert raw(lv, "links/0/+1.0.0/c/0/0/0") == frame(blob([(0, 2, 0)], [(1, 0, 1)]))
    assert raw(lv, "links/0/0.0.0/c/0/0/0") == frame(i64(0, 1, 1, 2))
    cell = A.read_chunk_links(lv, (0, 0, 0), delta=0, offsets="0.0.0")
    assert [g.tolist() for g in cell.groups] == [[[0, 1]], [[1, 2]]]
    assert [g.tolist() for g in A.read_chunk_links(lv, (0, 0, 0), delta=0, offsets=((1, 0, 0),)).groups] == [[[0, 2, 0]], [[1, 0, 1]]]
    fam = meta(lv, "links/0")["attributes"]
    assert (fam["num_links"], fam["num_physical_records"]) == (4, 4)
    A.write_link_attributes(lv, "w", 0, np.array([3.0, 4.0], np.float32), partition=second)
    assert A.read_link_attributes(lv, "w", 0).tolist() == [1.0, 3.0, 2.0, 4.0]
    assert meta(lv, "link_attributes/w/0")["attributes"]["num_links"] == 4
    assert A.read_links(lv, 0).as_tuples() == [
        (((0, 0, 0), 2), ((1, 0, 0), 0)),
        (((1, 0, 0), 1), ((0, 0, 0), 0)),
        (((0, 0, 0), 0), ((0, 0, 0), 1)),
        (((0, 0, 0), 1), ((0, 0, 0), 2)),
    ]
    assert A.finalize_links(lv, 0) == A.LinkCounts(4, 4)


def test_stale_attributes_are_detected(tmp_path):
    lv = level0(tmp_path)
    chunks, vi = graph_records()
    A.write_links(lv, 0, chunks, vi)
    A.write_link_attributes(lv, "w", 0, WEIGHTS)
    A.write_links(lv, 0, chunks[:1], vi[:1], mode="append")
    with pytest.raises(ArrayError, match="6 records"):
        A.read_link_attributes(lv, "w", 0)


# -- single cells and tuples ---------------------------------------------------------------
def test_read_links_for_tuple(tmp_path):
    lv = level0(tmp_path)
    chunks, vi = graph_records()
    A.write_links(lv, 0, chunks, vi)
    # undirected canonical: any order of the tuple
    for t in ([(0, 0, 0), (1, 0, 0)], [(1, 0, 0), (0, 0, 0)]):
        assert A.read_links_for_tuple(lv, delta=0, chunk_tuple=t).as_tuples() == [(((1, 0, 0), 0), ((0, 0, 0), 0))]
    assert len(A.read_links_for_tuple(lv, delta=0, chunk_tuple=[(0, 0, 0), (0, 0, 0)])) == 2
    assert len(A.read_links_for_tuple(lv, delta=0, chunk_tuple=[(0, 0, 0), (1, 1, 0)])) == 0
    # duplicate: the tuple leads with the chunk whose cell is scanned
    lv2 = level0(tmp_path / "dup")
    A.write_links(lv2, 0, chunks, vi, store="duplicate")
    assert A.read_links_for_tuple(lv2, delta=0, chunk_tuple=[(1, 0, 0), (0, 0, 0)]).as_tuples() == [(((1, 0, 0), 0), ((0, 0, 0), 0))]
    assert A.read_links_for_tuple(lv2, delta=0, chunk_tuple=[(0, 0, 0), (1, 0, 0)]).as_tuples() == [(((1, 0, 0), 0), ((0, 0, 0), 0))]
    # directed: input endpoint 0 leads
    lv3 = level0(tmp_path / "dir")
    A.write_links(lv3, 0, chunks, vi, directed=True)
    assert len(A.read_links_for_tuple(lv3, delta=0, chunk_tuple=[(1, 0, 0), (0, 0, 0)])) == 1
    assert len(A.read_links_for_tuple(lv3, delta=0, chunk_tuple=[(0, 0, 0), (1, 0, 0)])) == 0


def test_write_chunk_links_flat_and_blob(tmp_path):
    lv = level0(tmp_path)
    A.create_links_family(lv, 0, link_width=2, sid_ndim=3)
    A.write_chunk_links(lv, 0, "0.0.0", (1, 1, 1), np.array([[0, 1]]), compressor=None)
    A.write_chunk_links(lv, 0, "0.0.0", (1, 1, 1), np.array([[1, 2], [2, 0]]), mode="append", compressor=None)
    assert raw(lv, "links/0/0.0.0/c/1/1/1") == frame(i64(0, 1, 1, 2, 2, 0))
    cell = A.read_chunk_links(lv, (1, 1, 1), delta=0, offsets="0.0.0")
    assert [g.shape[0] for g in cell.groups] == [1, 2]
    assert meta(lv, "link_fragments")["attributes"]["nonempty_chunks"] == ["1.1.1"]
    A.write_chunk_links(lv, 0, [(0, 0, -1)], (1, 1, 1), np.array([[lehmer_encode([1, 0]), 3, 4]]), compressor=None)
    assert raw(lv, "links/0/0.0.-1/c/1/1/1") == frame(blob([(1, 3, 4)]))
    with pytest.raises(ArrayError):
        A.write_chunk_links(lv, 0, "0.0.-1", (1, 1, 1), np.array([[3, 4]]))
    assert A.read_chunk_links(lv, (1, 1, 1), delta=0, offsets="0.0.-1").records.as_tuples() == [(((1, 1, 0), 4), ((1, 1, 1), 3))]
    assert "num_links" not in meta(lv, "links/0")["attributes"]
    assert A.finalize_links(lv, 0) == A.LinkCounts(4, 4)
    assert len(A.read_chunk_links(lv, (0, 0, 0), delta=0, offsets="0.+1.0").groups) == 0


def test_has_perm_is_trusted_with_policy_fallback(tmp_path):
    lv = level0(tmp_path)
    chunks, vi = graph_records()
    A.write_links(lv, 0, chunks, vi)
    expected = A.read_links(lv, 0).as_tuples()
    # an array written before has_perm was stamped: the policy decides
    grid = lv.array("links/0/+1.0.0")
    grid.attributes.pop("has_perm")
    grid.update_attributes()
    assert A.read_links(lv, 0).as_tuples() == expected
    # the stamp wins over the policy: rows of a directed family stamped has_perm carry a perm
    lv2 = level0(tmp_path / "d")
    A.create_links_family(lv2, 0, link_width=2, directed=True, sid_ndim=3)
    A.write_chunk_links(lv2, 0, "+1.0.0", (0, 0, 0), np.array([[0, 5]]))
    grid = lv2.array("links/0/+1.0.0")
    grid.update_attributes(has_perm=True)
    A.write_chunk_links(lv2, 0, "+1.0.0", (0, 0, 0), np.array([[1, 5, 6]]))
    assert A.read_links(lv2, 0).as_tuples() == [(((1, 0, 0), 6), ((0, 0, 0), 5))]


def test_malformed_segments_fail_fast(tmp_path):
    lv = level0(tmp_path)
    chunks, vi = graph_records()
    A.write_links(lv, 0, chunks, vi)
    GridArray.create(lv.storage, "0/links/0/+0.0.0", shape=(1, 1, 1), origin=(0, 0, 0), attributes={}, compressor=None)
    with pytest.raises(MetadataError, match=r"\+0"):
        A.read_links(lv, 0)
    with pytest.raises(MetadataError):
        A.list_link_offsets(lv, 0)


def test_finalize_rebuilds_presence_after_decentralised_writes(tmp_path):
    lv = level0(tmp_path)
    chunks, vi = graph_records()
    part = A.partition_records_by_offset(chunks, vi)
    A.create_links_family(lv, 0, link_width=2, sid_ndim=3)
    A.create_links_arrays(lv, 0, part)
    A.create_link_attribute_arrays(lv, "w", 0, dtype="float32", partition=part)
    summary = A.write_link_cells(lv, 0, part)
    assert summary.num_physical_records == 5 and summary.cells["0.+1.+1"] == ["1.0.0"]
    A.write_link_attribute_cells(lv, "w", 0, WEIGHTS, part)
    assert meta(lv, "links/0/0.0.0")["attributes"]["nonempty_chunks"] == []
    assert "num_links" not in meta(lv, "links/0")["attributes"]
    assert "num_links" not in meta(lv, "link_attributes/w/0")["attributes"]
    assert len(A.read_links(lv, 0)) == 0  # the reader trusts nonempty_chunks
    for _ in range(2):  # safe to run twice
        assert A.finalize_links(lv, 0) == A.LinkCounts(5, 5)
    assert meta(lv, "link_fragments")["attributes"]["nonempty_chunks"] == ["0.0.0"]
    assert meta(lv, "link_attributes/w/0/0.+1.+1")["attributes"]["nonempty_chunks"] == ["1.0.0"]
    assert meta(lv, "link_attributes/w/0")["attributes"]["num_links"] == 5
    assert A.read_link_attributes(lv, "w", 0).tolist() == [4.5, 1.5, 3.5, 0.5, 2.5]


def test_finalize_counts_repeated_records_under_duplicate(tmp_path):
    lv = level0(tmp_path)
    chunks = np.array([[(0, 0, 0), (1, 0, 0)]] * 3 + [[(0, 0, 0), (0, 0, 0)]] * 2)
    part = A.write_links(lv, 0, chunks, np.zeros((5, 2), int), store="duplicate")
    assert part.num_physical_records == 8
    assert A.finalize_links(lv, 0) == A.LinkCounts(5, 8)
    # an incomplete duplicate family is refused rather than miscounted
    lv.storage.delete(f"{lv.path}/links/0/-1.0.0/c/1/0/0")
    with pytest.raises(ArrayError, match="incomplete"):
        A.finalize_links(lv, 0)


def test_link_width_one_self_segment(tmp_path):
    lv = level0(tmp_path)
    A.write_links(lv, 0, np.array([[(1, 1, 1)], [(0, 0, 0)]]), np.array([[4], [2]]), compressor=None)
    assert A.list_link_offsets(lv, 0) == ["self"]
    assert raw(lv, "links/0/self/c/0/0/0") == frame(i64(2))
    assert meta(lv, "links/0/self")["attributes"]["offsets"] == []
    assert A.read_links(lv, 0).vi.tolist() == [[2], [4]]


def test_bad_arguments(tmp_path):
    lv = level0(tmp_path)
    chunks, vi = graph_records()
    with pytest.raises(InputError):
        A.write_links(lv, 0, chunks, vi, mode="merge")
    with pytest.raises(InputError):
        A.write_links(lv, 0, chunks, vi, dtype="float64")
    with pytest.raises(InputError):
        A.create_links_family(lv, 0, link_width=0, sid_ndim=3)
    with pytest.raises(ArrayError):
        A.write_link_attributes(lv, "w", 0, WEIGHTS)  # no family
    A.write_links(lv, 0, chunks, vi)
    with pytest.raises(ArrayError, match="outside"):
        A.write_links(lv, 0, np.array([[(5, 5, 5), (5, 5, 5)]]), np.zeros((1, 2), int), mode="append")
    assert len(A.read_links(lv, 0)) == 5  # nothing was written
