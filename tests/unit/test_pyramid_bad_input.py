"""``build_pyramid`` refuses bad input with a clear error and leaves the store exactly as it was
(every file, byte for byte) -- including an existing pyramid."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from file_tree import tree

import zarr_vectors as zv
from zarr_vectors.errors import (
    InconsistentStoreError,
    InputError,
    PresenceMismatchError,
    StoreNotFoundError,
    UnsupportedLayoutError,
)
from zarr_vectors.format.paths import format_chunk_key, parse_chunk_key
from zarr_vectors.store.backend import Storage
from zarr_vectors.store.grid import GridArray
from zarr_vectors.validation import validate

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """A graph store that already has a two-level pyramid."""
    rng = np.random.default_rng(1)
    pos = rng.uniform(-30, 70, (300, 3))
    store = tmp_path_factory.mktemp("bad") / "g.zv"
    zv.write_graph(str(store), pos, rng.integers(0, 300, (400, 2)), chunk_shape=100, bin_shape=50,
                   object_ids=rng.integers(0, 6, 300))
    zv.build_pyramid(str(store), factors=[(2, 2), (2, 1)], cross_level_depth=-1)
    return store


@pytest.fixture
def store(template, tmp_path) -> Path:
    import shutil

    target = tmp_path / "g.zv"
    shutil.copytree(template, target)
    return target


BAD = [
    ({"factors": [(0.5, 1)]}, "coarsen factor 0.5 must be a finite number >= 1"),
    ({"factors": [(2, 1), (0, 1)]}, "factors[1]: coarsen factor 0"),
    ({"factors": [(float("nan"), 1)]}, "coarsen factor"),
    ({"factors": [(2, 0.5)]}, "sparsity factor 0.5 must be a finite number in [1, inf)"),
    ({"factors": [(2, float("inf"))]}, "sparsity factor inf"),
    ({"factors": [(2, -1)]}, "sparsity factor -1"),
    ({"factors": [("2", 1)]}, "coarsen factor '2'"),
    ({"factors": [(2, 1, 3)]}, "must be a (coarsen, sparsity_factor) pair"),
    ({"factors": []}, "non-empty list"),
    ({"factors": "2"}, "non-empty list"),
    ({"factors": [(2, 1)], "chunk_scale_factors": [1.5]}, "every entry must be a positive integer"),
    ({"factors": [(2, 1)], "chunk_scale_factors": [(1, 2.5, 1)]}, "positive integer"),
    ({"factors": [(2, 1)], "chunk_scale_factors": [0]}, "positive integer"),
    ({"factors": [(2, 1)], "chunk_scale_factors": [True]}, "positive integer"),
    ({"factors": [(2, 1)], "chunk_scale_factors": [(1, 2)]}, "has 2 entries, the store has 3 axes"),
    ({"factors": [(2, 1)], "chunk_scale_factors": [1, 1]}, "chunk_scale_factors has 2 entries but factors has 1"),
    # regression (hunt): a scale past int64 passed, and the build failed after it had removed the old levels
    ({"factors": [(2, 1)], "chunk_scale_factors": [2**63]}, "level 1's chunk would be [9223372036854775808, "),
    ({"factors": [(2, 1), (2, 1)], "chunk_scale_factors": [(1, 2**16, 1), (1, 2**16, 1)]},
     "chunk_scale_factors[1]: level 2's chunk would be [1, 4294967296, 1] times level 0's; at most 2147483648"),
    ({"factors": [(2, 1)], "cross_level_depth": -2}, "cross_level_depth must be an integer >= -1"),
    ({"factors": [(2, 1)], "cross_level_depth": 1.0}, "cross_level_depth must be an integer"),
    ({"factors": [(2, 1)], "cross_level_storage": "both"}, "cross_level_storage must be one of"),
    ({"factors": [(2, 1)], "sparsity_seed": -1}, "sparsity_seed must be a non-negative integer"),
    ({"factors": [(3, 1)]}, ""),  # bin 150 > chunk 100: legal (D11); (1.5) below is not
    ({"factors": [(1.5, 1)]}, "bin 75 (parent bin x 1.5) does not divide chunk 100"),
    # regression (hunt): a finite factor whose bin overflows wrote scale [inf, inf, inf] into the root
    # document, and no level of the store could be read again
    ({"factors": [(1e307, 1)]}, "factors[0]: level 1's bin would be [inf, inf, inf], not finite"),
    ({"factors": [(1e200, 1), (1e200, 1)]}, "factors[1]: level 2's bin would be [inf, inf, inf]"),
]


@pytest.mark.parametrize("kwargs,message", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_arguments_leave_the_store_untouched(store, kwargs, message):
    if kwargs == {"factors": [(3, 1)]}:
        zv.build_pyramid(str(store), **kwargs)  # bin 150 > chunk 100: legal (D11)
        return
    before = tree(store)
    with pytest.raises(InputError) as info:
        zv.build_pyramid(str(store), **kwargs)
    assert message in str(info.value)
    assert tree(store) == before


def _edit_attrs(path: Path, **values) -> None:
    doc = json.loads(path.read_text())
    doc["attributes"].update(values)
    path.write_text(json.dumps(doc, indent=2))


@pytest.mark.parametrize("rel", ["0/vertices", "0/vertex_fragments"])
def test_unreconciled_store_is_refused(store, rel):
    meta = store / rel / "zarr.json"
    listed = json.loads(meta.read_text())["attributes"]["nonempty_chunks"]
    assert listed
    _edit_attrs(meta, nonempty_chunks=listed[1:])  # a cell on disk that the list does not name
    before = tree(store)
    with pytest.raises(PresenceMismatchError, match="not reconciled") as info:
        zv.build_pyramid(str(store), factors=[(2, 1)])
    assert rel in str(info.value) and listed[0] in str(info.value)
    assert tree(store) == before


def test_listed_but_absent_cell_is_refused(store):
    meta = store / "0" / "vertex_fragments" / "zarr.json"
    listed = json.loads(meta.read_text())["attributes"]["nonempty_chunks"]
    _edit_attrs(meta, nonempty_chunks=sorted(listed + ["99.99.99"]))
    before = tree(store)
    with pytest.raises(PresenceMismatchError, match="listed but not on storage \\['99.99.99'\\]"):
        zv.build_pyramid(str(store), factors=[(2, 1)])
    assert tree(store) == before


def test_sparsity_without_objects_is_refused(tmp_path):
    store = tmp_path / "p.zv"
    zv.write_points(str(store), np.random.default_rng(0).uniform(0, 10, (50, 3)), chunk_shape=5)
    before = tree(store)
    with pytest.raises(InputError, match="no object ids"):
        zv.build_pyramid(str(store), factors=[(2, 2)])
    assert tree(store) == before


def test_v2_object_index_is_refused(store):
    _edit_attrs(store / "0" / "object_index" / "zarr.json", layout="vlen_manifests_v2")
    before = tree(store)
    with pytest.raises(UnsupportedLayoutError, match="vlen_manifests_v2"):
        zv.build_pyramid(str(store), factors=[(2, 1)])
    assert tree(store) == before


def test_missing_store(tmp_path):
    with pytest.raises(StoreNotFoundError):
        zv.build_pyramid(str(tmp_path / "nothing.zv"), factors=[(2, 1)])
    assert not (tmp_path / "nothing.zv").exists()


def test_planning_decodes_no_manifest(store, monkeypatch):
    """Regression (issue 13, serial time): the client plans without decoding the object index;
    level 1's object-plan task decodes it."""
    from zarr_vectors.pyramid.plan import plan_pyramid
    from zarr_vectors.store import object_index

    def refuse(*args, **kwargs):
        raise AssertionError("the client decoded manifests")

    monkeypatch.setattr(object_index, "decode_manifest_table", refuse)
    plan = plan_pyramid(str(store), factors=[(2, 1)])
    assert plan.has_objects
    with pytest.raises(AssertionError, match="decoded manifests"):  # the task does, in-process here
        zv.build_pyramid(str(store), factors=[(2, 1)])


def test_two_unreconciled_arrays_are_both_named(store):
    """The verdict names every array the build reads whose presence list disagrees."""
    for rel in ("0/vertices", "0/vertex_fragments"):
        meta = store / rel / "zarr.json"
        listed = json.loads(meta.read_text())["attributes"]["nonempty_chunks"]
        _edit_attrs(meta, nonempty_chunks=listed[1:])
    before = tree(store)
    with pytest.raises(PresenceMismatchError, match="2 grid array") as info:
        zv.build_pyramid(str(store), factors=[(2, 1)])
    assert "0/vertices" in str(info.value) and "0/vertex_fragments" in str(info.value)
    assert tree(store) == before


@pytest.mark.parametrize("rel", ["0/links/0/0.0.0", "0/link_fragments"])
def test_an_array_the_build_does_not_read_is_left_to_the_validator(store, rel):
    """D26: the pyramid checks the presence lists of what it reads; a links array it never
    reads is neither listed nor touched, and the validator still reports it."""
    meta = store / rel / "zarr.json"
    listed = json.loads(meta.read_text())["attributes"]["nonempty_chunks"]
    _edit_attrs(meta, nonempty_chunks=listed[1:])
    edited = meta.read_bytes()
    zv.build_pyramid(str(store), factors=[(2, 1)])
    assert meta.read_bytes() == edited
    report = validate(str(store), 5)
    assert not report.ok and any(rel in str(e) for e in report.errors), [str(e) for e in report.errors][:5]


@pytest.mark.parametrize("array", ["vertices", "vertex_fragments"])
def test_a_cell_that_inflates_past_its_level_is_refused_at_its_bound(store, array):
    """Regression (hunt): the bin tasks decoded cells with only the global ceiling, so a 30 KB cell
    inflating to 1 GB took the build to 2 GB of memory before 'not a whole number of rows'; a reader
    refused the same cell from the level's vertex_count at once."""
    import struct

    import numcodecs

    from zarr_vectors.errors import ResourceLimitError

    cell = next(p for p in sorted((store / "0" / array / "c").rglob("*")) if p.is_file())
    n = 50_000_000  # far past 300 vertices' rows, far below the global ceiling
    payload = np.zeros(n + 8, np.uint8)
    payload[:8] = np.frombuffer(struct.pack("<II", 1, n), np.uint8)
    cell.write_bytes(numcodecs.Zstd(level=3).encode(payload))
    with pytest.raises(ResourceLimitError, match=rf"{array}/c/.*: declares {n + 8} decoded bytes, more than \d+ "
                                                 r"bytes, the most it may hold"):
        zv.build_pyramid(str(store), factors=[2])


@pytest.fixture(params=["graph with ids", "points"])
def either(request, store, tmp_path) -> Path:
    """The graph store with object ids and a pyramid, or a point cloud without ids (300 vertices each)."""
    if request.param == "points":
        store = tmp_path / "p.zv"
        zv.write_points(str(store), np.random.default_rng(2).uniform(-30, 70, (300, 3)), chunk_shape=100, bin_shape=50)
    return store


@pytest.mark.parametrize("claimed", [299, 301])
def test_a_vertex_count_its_cells_do_not_hold_is_refused(either, claimed):
    """Regression (hunt): level 0 claiming 299 or 301 vertices over 300 rows built a pyramid and
    exited 0, where a reader refuses the level; the build now checks what its bin tasks read."""
    store = either
    doc = json.loads((store / "0" / "zarr.json").read_text())
    doc["attributes"]["zarr_vectors_level"]["vertex_count"] = claimed
    (store / "0" / "zarr.json").write_text(json.dumps(doc))
    before = tree(store)
    with pytest.raises(InconsistentStoreError, match=f"0/zarr.json: vertex_count is {claimed}, the level's vertex "
                                                     "cells hold 300 rows"):
        zv.build_pyramid(str(store), factors=[2])
    assert tree(store) == before  # the existing pyramid is kept


def test_vertices_outside_their_cells_chunk_are_refused(either):
    """Regression (hunt): a level-0 cell whose vertices lie outside its chunk (a root chunk_shape
    rewritten, a cell swapped) was binned as if in place and the build exited 0; a reader refuses
    the cell (the chunk rule), and so does the build, before anything is removed."""
    store = either
    vertices = GridArray.open(Storage(str(store)), "0/vertices")
    cell = parse_chunk_key(json.loads((store / "0" / "vertices" / "zarr.json").read_text())
                           ["attributes"]["nonempty_chunks"][0])
    rows = np.frombuffer(vertices.read_cell(cell), "<f8").reshape(-1, 3).copy()
    rows[:, 0] += 1000.0  # ten chunks away
    vertices.write_cells({cell: rows.tobytes()}, record_presence=False)
    before = tree(store)
    with pytest.raises(InconsistentStoreError, match=f"0/vertices cell {format_chunk_key(cell)}: vertices lie "
                                                     "outside the cell's chunk"):
        zv.build_pyramid(str(store), factors=[2])
    assert tree(store) == before
