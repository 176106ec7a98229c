"""What a ``geometry_types`` list reads as (docs/decisions.md D19): the rule on metadata alone,
and the reader and the validator applying it to stores whose list names several kinds."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.errors import MetadataError, UnsupportedLayoutError
from zarr_vectors.format.kinds import KIND_CONVENTIONS, REFINES, StoreFacts, lineage, read_kind, refines
from zarr_vectors.format.schema import GEOMETRY_TYPES, LINKS_CONVENTIONS

EXPLICIT2 = StoreFacts("explicit", 2, True)  # a graph's (or skeleton's written explicitly)
EXPLICIT3 = StoreFacts("explicit", 3, True)  # a mesh's
BRANCHES = StoreFacts("implicit_sequential_with_branches", 2, True)  # a skeleton's
SEQUENTIAL = StoreFacts("implicit_sequential", None, True)  # polylines', or points with ids
POINTS = StoreFacts("implicit_sequential", None, False)  # points without ids


def test_every_geometry_type_has_a_place_in_the_rule():
    assert set(REFINES) == set(KIND_CONVENTIONS) == set(GEOMETRY_TYPES)
    assert all(lineage(k)[-1] == "point_cloud" for k in REFINES)


@pytest.mark.parametrize("listed, facts, kind", [
    (["point_cloud", "graph"], EXPLICIT2, "graph"),  # Schema() + add_graph: the common case
    (["point_cloud", "polyline"], SEQUENTIAL, "polyline"),
    (["streamline", "polyline"], SEQUENTIAL, "streamline"),  # the example
    (["graph", "skeleton"], BRANCHES, "skeleton"),
    (["skeleton", "graph"], EXPLICIT2, "skeleton"),
    (["graph", "point_cloud"], POINTS, "point_cloud"),  # Schema(kind="graph") + add_points
    (["polyline", "point_cloud"], POINTS, "point_cloud"),  # a polyline needs its object index
    (["polyline", "point_cloud"], SEQUENTIAL, "polyline"),  # with ids: what the list declares
    (["mesh", "graph"], EXPLICIT2, "graph"),  # the delta-0 width decides
    (["graph", "mesh"], EXPLICIT3, "mesh"),
    (["mesh", "polyline"], SEQUENTIAL, "polyline"),  # the convention decides
    (["line", "streamline"], SEQUENTIAL, "polyline"),  # sibling refinements: what both are
    (["point_cloud", "polyline", "streamline"], SEQUENTIAL, "streamline"),
])
def test_kind_lists_read_as_d19_says(listed, facts, kind):
    assert read_kind(listed, facts).kind == kind


def test_a_single_kind_reads_as_itself_without_looking_at_the_store():
    for k in GEOMETRY_TYPES:
        assert read_kind([k], None).kind == k
        assert read_kind([k, k], None).kind == k


def test_views_are_not_reported_but_contradicted_labels_are():
    assert read_kind(["point_cloud", "graph"], EXPLICIT2).set_aside == ()  # a graph is a point cloud
    assert read_kind(["graph", "skeleton"], BRANCHES).set_aside == ()  # a skeleton is a graph
    reading = read_kind(["mesh", "polyline"], SEQUENTIAL)
    assert [k for k, _ in reading.set_aside] == ["mesh"] and "links_convention" in reading.set_aside[0][1]
    assert read_kind(["line", "streamline"], SEQUENTIAL).unordered == ("line", "streamline")


def test_the_order_of_the_list_never_matters():
    widths = (None, 2, 3)
    for a, b in itertools.combinations(GEOMETRY_TYPES, 2):
        for convention, width, objects in itertools.product(LINKS_CONVENTIONS, widths, (False, True)):
            facts = StoreFacts(convention, width, objects)
            try:
                forward = read_kind([a, b], facts)
            except MetadataError:
                with pytest.raises(MetadataError):
                    read_kind([b, a], facts)
                continue
            backward = read_kind([b, a], facts)
            assert (forward.kind, set(forward.set_aside)) == (backward.kind, set(backward.set_aside))
            # the reading is always a kind both listed kinds' survivors refine, and is itself allowed
            survivors = [k for k in (a, b) if k not in dict(forward.set_aside) and refines(k, forward.kind)]
            assert survivors, (a, b, facts)


def test_polyline_kinds_have_no_intra_chunk_records():
    """A graph written over polylines in one Dataset keeps the polylines' convention."""
    facts = StoreFacts("implicit_sequential", 2, True, has_link_fragments=True)
    with pytest.raises(MetadataError, match="polyline: level 0 has link_fragments"):
        read_kind(["point_cloud", "polyline", "graph"], facts)
    assert read_kind(["point_cloud", "polyline"], StoreFacts("implicit_sequential", 2, True)).kind == "polyline"


def test_unknown_kind_and_no_fitting_kind_are_refused():
    with pytest.raises(UnsupportedLayoutError, match="hologram"):
        read_kind(["point_cloud", "hologram"], POINTS)
    with pytest.raises(MetadataError, match="contradicts every listed geometry type"):
        read_kind(["graph", "mesh"], POINTS)


# ---------------------------------------------------------------------------
# the reader and the validator on relabelled stores of ours
# ---------------------------------------------------------------------------
RNG = np.random.default_rng(4)
POS = RNG.uniform(0, 100, (300, 3)).astype(np.float32)
EDGES = RNG.integers(0, 300, (500, 2))
EDGES = EDGES[EDGES[:, 0] != EDGES[:, 1]]


def relabel(store: Path, kinds: list[str]) -> None:
    doc = json.loads((store / "zarr.json").read_text())
    doc["attributes"]["zarr_vectors"]["geometry_types"] = kinds
    (store / "zarr.json").write_text(json.dumps(doc))


def test_composite_store_reads_like_its_single_kind_twin(tmp_path):
    store = tmp_path / "g.zv"
    zv.write_graph(str(store), POS, EDGES, chunk_shape=40, edge_attributes={"w": np.arange(len(EDGES))})
    single = zv.read(str(store))
    relabel(store, ["point_cloud", "graph"])
    listed = zv.read(str(store))
    assert listed.kind == "graph"
    np.testing.assert_array_equal(listed.positions, single.positions)
    np.testing.assert_array_equal(listed.edges, single.edges)
    np.testing.assert_array_equal(listed.edge_attributes["w"], single.edge_attributes["w"])
    assert zv.validate(str(store), 5).ok


def test_explicit_skeleton_reads_its_records_verbatim(tmp_path):
    """Regression (silent wrong answer): a skeleton under links_convention "explicit" -- what
    the reference writes for Schema(kind="skeleton") + add_graph -- has every edge as a record;
    reading it must not invent parents from row order."""
    store = tmp_path / "g.zv"
    zv.write_graph(str(store), POS, EDGES, chunk_shape=40, object_ids=np.arange(300) // 30)
    graph = zv.read(str(store))
    relabel(store, ["skeleton", "graph"])
    skeleton = zv.read(str(store))
    assert skeleton.kind == "skeleton"
    np.testing.assert_array_equal(skeleton.edges, graph.edges)


def test_store_no_listed_kind_fits_is_refused_and_reported(tmp_path):
    store = tmp_path / "p.zv"
    zv.write_points(str(store), POS, chunk_shape=40)
    relabel(store, ["graph", "mesh"])
    with pytest.raises(MetadataError, match="contradicts every listed geometry type"):
        zv.read(str(store))
    result = zv.validate(str(store), 5)
    assert "L4_GEOMETRY_TYPES_UNREADABLE" in result.codes("error")


def test_unknown_geometry_type_is_refused_by_name(tmp_path):
    store = tmp_path / "p.zv"
    zv.write_points(str(store), POS, chunk_shape=40)
    relabel(store, ["point_cloud", "hologram"])
    with pytest.raises(UnsupportedLayoutError, match="hologram"):
        zv.read(str(store))


def test_contradicted_label_reads_as_the_data_with_a_warning(tmp_path):
    store = tmp_path / "p.zv"
    zv.write_points(str(store), POS, chunk_shape=40, bin_shape=20)
    relabel(store, ["graph", "point_cloud"])  # what Schema(kind="graph") + add_points writes
    data = zv.read(str(store))
    assert data.kind == "point_cloud" and data.edges is None
    result = zv.validate(str(store), 5)
    assert result.ok and result.codes("warning") == ["L4_GEOMETRY_TYPES"], result.summary()


def test_a_pyramid_builds_on_a_kind_list_as_on_its_single_kind_twin(tmp_path):
    """The pyramid plans by the kind the list reads as (D19), as the reader does."""
    single, listed = tmp_path / "single.zv", tmp_path / "listed.zv"
    for store in (single, listed):
        zv.write_graph(str(store), POS, EDGES, chunk_shape=40, edge_attributes={"w": np.arange(len(EDGES))})
    relabel(listed, ["point_cloud", "graph"])
    for store in (single, listed):
        zv.build_pyramid(str(store), factors=[2])
    a, b = zv.read(str(single), level=1), zv.read(str(listed), level=1)
    assert b.kind == "graph"
    np.testing.assert_array_equal(a.positions, b.positions)
    assert zv.validate(str(listed), 5).ok


def test_a_pyramid_refuses_a_kind_list_no_kind_fits(tmp_path):
    store = tmp_path / "p.zv"
    zv.write_points(str(store), POS, chunk_shape=40)
    relabel(store, ["graph", "mesh"])
    with pytest.raises(MetadataError, match="contradicts every listed geometry type"):
        zv.build_pyramid(str(store), factors=[2])
