"""Stores with kind lists: every store the reference's public writing APIs make reads here.

The reference's high-level API writes ``geometry_types: [schema kind, writer kind]``
(``zarr_vectors.create(schema=Schema(kind=K))`` puts K first; each ``add_*`` call appends
its own kind), so the default schema filled by ``add_polylines`` says
``["point_cloud", "polyline"]``.  ``refdriver.py api-stores`` writes one store for every
(Schema kind, ``add_*`` call) pair and one for each of the low-level
``zarr_vectors.building`` writers, with and without attributes and object ids, validates
each with the reference and reads it back with the reader of the kind its writer wrote.
Here each is read by ``zv.read`` (kind by docs/decisions.md D19; object index v2 by the
opt-in of D1) and judged by ``validate(level=5)``: the same positions, attributes, object
membership and object attributes as the reference reads back, and the same edges / faces
/ polylines where the reading has them.  Vertices are matched by position (every input
position is distinct).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv

sys.path.insert(0, str(Path(__file__).resolve().parent))
from refenv import ensure_reference_env, run_reference  # noqa: E402

pytestmark = pytest.mark.interop

V2 = ("vlen_manifests_v2",)
SCHEMA_KINDS = ("default", "point_cloud", "line", "polyline", "streamline", "skeleton", "graph", "mesh")
CALLS = {
    "points": "point_cloud", "points_ids": "point_cloud", "polylines": "polyline", "streamlines": "streamline",
    "lines": "line", "graph": "graph", "graph_ids": "graph", "tree": "skeleton", "mesh": "mesh", "mesh_ids": "mesh",
}
LOW_LEVEL = {
    "write_points": "point_cloud", "write_points_ids": "point_cloud", "write_polylines": "polyline",
    "write_streamlines": "streamline", "write_lines": "line", "write_graph": "graph", "write_graph_ids": "graph",
    "write_graph_skeleton": "skeleton", "write_graph_tree": "skeleton", "write_mesh": "mesh", "write_mesh_ids": "mesh",
}
STORES = [f"api_{s}_{c}" for s in SCHEMA_KINDS for c in CALLS] + [f"ll_{w}" for w in LOW_LEVEL]

# What each kind is also (D19's refinement tree, written out here independently of format/kinds.py).
LINEAGE = {
    "point_cloud": {"point_cloud"}, "polyline": {"polyline", "point_cloud"},
    "line": {"line", "polyline", "point_cloud"}, "streamline": {"streamline", "polyline", "point_cloud"},
    "graph": {"graph", "point_cloud"}, "skeleton": {"skeleton", "graph", "point_cloud"},
    "mesh": {"mesh", "point_cloud"},
}
# Where a store does not read as its writer's kind (D19): the label is the more specific
# of two kinds the metadata allows, or two sibling refinements read as what they share.
NOT_THE_WRITERS = {
    ("line", "polylines"): "line", ("streamline", "polylines"): "streamline",
    ("polyline", "streamlines"): "streamline", ("polyline", "lines"): "line",
    ("line", "streamlines"): "polyline", ("streamline", "lines"): "polyline",
    ("skeleton", "graph"): "skeleton", ("skeleton", "graph_ids"): "skeleton",
    ("line", "points_ids"): "line", ("polyline", "points_ids"): "polyline", ("streamline", "points_ids"): "streamline",
}
POLYLINE_KINDS = ("polyline", "streamline", "line")
# The reference's validator errors on a store whose schema kind the data contradicts; we
# read such a store as its data and warn instead (D19).  These are its only errors here.
REFERENCE_KIND_ERRORS = ("requires links in", "link_width")


def expected_kind(name: str) -> str:
    if name.startswith("ll_"):
        return LOW_LEVEL[name[3:]]
    schema, call = _split(name)
    return NOT_THE_WRITERS.get((schema, call), CALLS[call])


def _split(name: str) -> tuple[str, str]:
    rest = name[len("api_"):]
    schema = next(s for s in sorted(SCHEMA_KINDS, key=len, reverse=True) if rest.startswith(s + "_"))
    return schema, rest[len(schema) + 1:]


def warned(name: str) -> bool:
    """Whether the store's list names a kind its reading is not (L4_GEOMETRY_TYPES)."""
    if name.startswith("ll_"):
        return False
    schema, _ = _split(name)
    return schema != "default" and schema not in LINEAGE[expected_kind(name)]


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict[str, dict]:
    ensure_reference_env()
    base = tmp_path_factory.mktemp("kinds")
    stores = run_reference("api-stores", str(base / "stores"), "--validate-level", "5")["stores"]
    assert sorted(stores) == sorted(STORES)
    return stores


_READS: dict[str, tuple[dict, zv.VectorData, dict[str, np.ndarray]]] = {}


def _read(made: dict, name: str) -> tuple[dict, zv.VectorData, dict[str, np.ndarray]]:
    """(driver entry, our read, the reference's read back), read once per store."""
    if name not in _READS:
        entry = made[name]
        _READS[name] = entry, zv.read(entry["store"], allow_layouts=V2), dict(np.load(entry["read"]["out"]))
    return _READS[name]


def _lookup(positions: np.ndarray) -> dict[tuple[float, ...], int]:
    out = {tuple(p): i for i, p in enumerate(np.asarray(positions, np.float32).tolist())}
    assert len(out) == len(positions), "test inputs have distinct positions"
    return out


def _same(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


# ---------------------------------------------------------------------------
# the kind lists written
# ---------------------------------------------------------------------------
def test_the_high_level_api_writes_schema_kind_then_writer_kind(made):
    for name, entry in made.items():
        if name.startswith("ll_"):
            assert entry["geometry_types"] == [entry["writer_kind"]], name
            continue
        schema, call = _split(name)
        first = "point_cloud" if schema == "default" else schema
        want = [first] if first == CALLS[call] else [first, CALLS[call]]
        assert entry["geometry_types"] == want, name


# ---------------------------------------------------------------------------
# each store: what it reads as, and the validator's verdict
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", STORES)
def test_reference_store_reads_as_d19_says(made, name):
    _, data, _ = _read(made, name)
    assert data.kind == expected_kind(name)


@pytest.mark.parametrize("name", STORES)
def test_reference_store_validates_at_level_5(made, name):
    entry = made[name]
    result = zv.validate(entry["store"], 5, allow_layouts=V2)
    assert result.ok, result.summary()
    warnings = set(result.codes("warning"))
    has_v2 = (Path(entry["store"]) / "0" / "object_index").is_dir()
    assert warnings == ({"L2_OBJECT_INDEX_LAYOUT"} if has_v2 else set()) | (
        {"L4_GEOMETRY_TYPES"} if warned(name) else set())
    ref = entry["validate"]
    # where the reference disagrees, it is over the kind list only: it holds every listed
    # kind to its conventions, we the kind the store reads as (D19)
    assert all(any(k in e for k in REFERENCE_KIND_ERRORS) for e in ref["errors"]), ref


# ---------------------------------------------------------------------------
# each store: the data, against what the reference reads back
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", STORES)
def test_reference_store_positions_and_attributes(made, name):
    entry, data, ref = _read(made, name)
    ours = _lookup(data.positions) if data.kind not in POLYLINE_KINDS else None
    got = [tuple(p) for p in np.asarray(data.positions, np.float32).tolist()]
    assert sorted(got) == sorted(tuple(p) for p in np.asarray(ref["all_positions"], np.float32).tolist())
    if ours is not None:  # storage order, both (D18)
        np.testing.assert_array_equal(data.positions, ref["all_positions"])
    names = entry["read"]["vertex_attributes"]
    assert sorted(data.attributes) == names
    where = _lookup(ref["all_positions"])
    for n in names:
        expect = ref[f"vattr__{n}"][[where[p] for p in got]]
        np.testing.assert_array_equal(data.attributes[n], expect)


@pytest.mark.parametrize("name", STORES)
def test_reference_store_records(made, name):
    entry, data, ref = _read(made, name)
    kind, writer = data.kind, entry["writer_kind"]
    pos, rpos = np.asarray(data.positions, np.float32), np.asarray(ref["positions"], np.float32)

    def pairs(p, records):
        return sorted(tuple(tuple(p[v]) for v in r) for r in np.asarray(records).tolist())

    if kind in ("graph", "skeleton"):
        assert pairs(pos.tolist(), data.edges) == pairs(rpos.tolist(), ref["edges"])
        if writer == "graph" and "lattr__e" in ref:  # link attributes stay aligned with their records
            def weights(p, records, values):
                return {(tuple(p[a]), tuple(p[b])): x for (a, b), x in zip(records.tolist(), values.tolist())}

            assert weights(pos, data.edges, data.edge_attributes["e"]) == weights(rpos, ref["edges"], ref["lattr__e"])
    elif kind == "mesh":
        assert pairs(pos.tolist(), data.faces) == pairs(rpos.tolist(), ref["faces"])
    elif kind in POLYLINE_KINDS:
        lines = [[tuple(p) for p in pos[a:b].tolist()] for a, b in zip(data.offsets[:-1], data.offsets[1:])]
        owner = [int(data.object_ids[a]) for a in data.offsets[:-1]]
        if writer in POLYLINE_KINDS:
            want = [[tuple(p) for p in rpos[a:b].tolist()] for a, b in zip(ref["offsets"][:-1], ref["offsets"][1:])]
            assert lines == want
            want_ids = ref["object_ids"].tolist() if "object_ids" in ref else list(range(len(want)))
            assert owner == want_ids
        else:  # points with ids labelled a polyline kind: each object's points, in manifest order
            assert owner == sorted(set(ref["member_ids"].tolist()))
            for i, line in zip(owner, lines):
                assert line == [tuple(p) for p in ref["member_positions"][ref["member_ids"] == i].tolist()]
    else:
        assert kind == "point_cloud" and data.edges is None and data.faces is None and data.offsets is None


@pytest.mark.parametrize("name", STORES)
def test_reference_store_objects(made, name):
    entry, data, ref = _read(made, name)
    if "member_ids" not in ref:
        assert data.objects is None and data.object_vertices is None and data.object_ids is None
        return
    pos = np.asarray(data.positions, np.float32)
    ov = data.object_vertices
    present = sorted(set(ref["member_ids"].tolist()))
    assert sorted(int(i) for i, c in zip(ov.ids, ov.counts()) if c) == present
    for i in present:
        want = [tuple(p) for p in ref["member_positions"][ref["member_ids"] == i].tolist()]
        assert [tuple(p) for p in pos[ov.vertices_of(i)].tolist()] == want
        assert (data.object_ids[ov.vertices_of(i)] == i).all()  # level 0: one owner per vertex
    assert ov.shared() == 0 and (data.object_ids >= 0).all()
    assert sorted(data.object_attributes) == entry["read"].get("object_attributes", [])
    for n, values in data.object_attributes.items():
        got = dict(zip(data.objects.tolist(), values.tolist()))
        want = dict(zip(ref["oattr_ids"].tolist(), ref[f"oattr__{n}"].tolist()))
        assert got.keys() == want.keys() and all(_same(got[k], want[k]) for k in got), n


def test_namespaced_composite_store_is_refused_not_half_read(tmp_path):
    """The reference's undecided ``zarr_vectors.composite.add_geometry`` keeps the added kind in
    ``vertices_<kind>`` arrays beside the plain ones; reading only the plain arrays would drop
    it silently, so the reader refuses the store by name and the validator reports it (D19)."""
    store = tmp_path / "namespaced.zv"
    made = run_reference("write-namespaced", str(store))
    assert made["geometry_types"] == ["point_cloud", "graph"]
    with pytest.raises(zv.UnsupportedLayoutError, match="geometry_index"):
        zv.read(str(store))
    result = zv.validate(str(store), 5)
    assert not result.ok and "L1_UNEXPECTED_NODE" in result.codes("error")


def test_store_written_twice_is_refused_not_misread(tmp_path):
    """Two ``add_*`` calls on one Dataset: the graph replaces the polylines, but the list says
    [point_cloud, polyline, graph] and links_convention stays the polylines'.  No listed kind
    fits (a polyline has no link_fragments, a graph needs "explicit"), so rather than read
    the graph as one polyline the reader refuses it, naming each kind's contradiction (D19)."""
    store = tmp_path / "twice.zv"
    made = run_reference("write-twice", str(store))
    assert made["geometry_types"] == ["point_cloud", "polyline", "graph"]
    assert made["links_convention"] == "implicit_sequential"
    with pytest.raises(zv.MetadataError, match="polyline: level 0 has link_fragments"):
        zv.read(str(store), allow_layouts=V2)
    result = zv.validate(str(store), 5, allow_layouts=V2)
    assert "L4_GEOMETRY_TYPES_UNREADABLE" in result.codes("error")

