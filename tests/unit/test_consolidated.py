"""Consolidated metadata: zarr-python's layout, byte for byte, kept current by every store operation."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import dask
import numpy as np
import pytest
import zarr
from file_tree import tree

import zarr_vectors as zv
from zarr_vectors.errors import InputError
from zarr_vectors.pyramid import build as pyramid_graph
from zarr_vectors.store.backend import Storage
from zarr_vectors.store.consolidated import consolidate, drop_consolidated, is_consolidated, node_documents
from zarr_vectors.store.nodes import read_node
from zarr_vectors.validation import validate

RNG = np.random.default_rng(11)
POS = RNG.uniform(0, 100, (1500, 3)).astype(np.float32)
EDGES = RNG.integers(0, len(POS), (3000, 2))


def graph_store(path: Path) -> str:
    zv.write_graph(str(path), POS, EDGES, chunk_shape=40, object_ids=np.arange(len(POS)) % 7,
                   edge_attributes={"w": RNG.standard_normal(len(EDGES)).astype(np.float32)})
    return str(path)


@pytest.fixture(scope="module")
def pyramided(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("consolidated") / "graph.zv"
    graph_store(path)
    zv.build_pyramid(str(path), factors=[2.0])
    return path


def copy_of(store: Path, tmp_path: Path) -> Path:
    out = tmp_path / store.name
    shutil.copytree(store, out)
    return out


def root_doc(store: Path) -> dict:
    return json.loads((store / "zarr.json").read_bytes())


def assert_current(store: Path) -> None:
    """The copy holds every node exactly as its own zarr.json, and the store validates clean."""
    storage = Storage(str(store))
    copy = root_doc(store)["consolidated_metadata"]["metadata"]
    nodes = node_documents(storage)
    assert list(copy) == list(nodes)
    for path, doc in nodes.items():
        entry = dict(copy[path])
        if doc["node_type"] == "group":
            assert entry.pop("consolidated_metadata") == {"kind": "inline", "must_understand": False, "metadata": {}}
        assert entry == doc, path
    result = validate(str(store), 5)
    assert result.ok and not result.warnings, result.summary()


def test_same_bytes_as_zarr_python(pyramided, tmp_path):
    ours, theirs = copy_of(pyramided, tmp_path / "ours"), copy_of(pyramided, tmp_path / "theirs")
    count = zv.consolidate_store(str(ours))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zarr: consolidated metadata and vlen-bytes are not in the v3 spec
        zarr.consolidate_metadata(str(theirs))
    assert (ours / "zarr.json").read_bytes() == (theirs / "zarr.json").read_bytes()
    assert count == len(root_doc(ours)["consolidated_metadata"]["metadata"]) > 40
    assert {k: v for k, v in tree(ours).items() if k != "zarr.json"} == {
        k: v for k, v in tree(pyramided).items() if k != "zarr.json"}  # only the root document changed
    assert_current(ours)


def test_zarr_opens_the_store_from_the_copy_alone(pyramided, tmp_path):
    store = copy_of(pyramided, tmp_path)
    zv.consolidate_store(str(store))
    expected = sorted(node_documents(Storage(str(store))))
    for doc in store.rglob("zarr.json"):  # zarr must not need the nodes' own documents
        if doc.parent != store:
            doc.write_text("not json")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        group = zarr.open_group(str(store), mode="r", use_consolidated=True)
        members = sorted(path for path, _ in group.members(max_depth=None))
    assert members == expected


def test_pyramid_and_sharding_keep_the_copy_current(tmp_path):
    store = tmp_path / "graph.zv"
    graph_store(store)
    zv.consolidate_store(str(store))
    zv.build_pyramid(str(store), factors=[2.0, 2.0])
    assert "2/vertices" in root_doc(store)["consolidated_metadata"]["metadata"]
    assert_current(store)
    zv.shard_store(str(store), 2)
    assert root_doc(store)["consolidated_metadata"]["metadata"]["0/vertices"]["codecs"][0]["name"] == "sharding_indexed"
    assert_current(store)
    zv.unshard_store(str(store))
    assert_current(store)
    before = zv.read(str(store))
    np.testing.assert_array_equal(np.sort(before.positions, axis=0), np.sort(POS, axis=0))


def test_an_unconsolidated_store_stays_unconsolidated(pyramided, tmp_path):
    store = copy_of(pyramided, tmp_path)
    zv.shard_store(str(store), 2)
    assert "consolidated_metadata" not in root_doc(store)


def test_an_interrupted_pyramid_leaves_no_stale_copy(tmp_path, monkeypatch):
    store = tmp_path / "graph.zv"
    graph_store(store)
    zv.consolidate_store(str(store))

    def crash(*args, **kwargs):
        raise RuntimeError("worker lost while writing level 1")

    monkeypatch.setattr(pyramid_graph, "write_cells_many", crash)
    with pytest.raises(RuntimeError, match="worker lost"), dask.config.set(scheduler="synchronous"):
        zv.build_pyramid(str(store), factors=[2.0])
    assert "consolidated_metadata" not in root_doc(store)  # dropped before the first change, not rewritten
    codes = {f.code for f in validate(str(store), 1).findings}
    assert not {c for c in codes if c.startswith("L1_CONSOLIDATED")}
    monkeypatch.undo()
    zv.build_pyramid(str(store), factors=[2.0])  # a re-run builds the level; consolidating is the caller's call
    zv.consolidate_store(str(store))
    assert_current(store)


def test_drop_and_memory_store():
    url = "memory://consolidated/graph.zv"
    graph_store(url)
    storage = Storage(url)
    assert not is_consolidated(storage)
    assert consolidate(storage) == len(node_documents(storage))
    assert is_consolidated(storage) and validate(url, 5).ok
    assert drop_consolidated(storage) and not drop_consolidated(storage)
    assert "consolidated_metadata" not in read_node(storage, "")
    storage.delete_prefix("")


def test_nothing_to_consolidate(tmp_path):
    with pytest.raises(InputError, match="no such store"):
        zv.consolidate_store(str(tmp_path / "missing.zv"))



def test_a_foreign_root_or_an_unfinished_level_is_not_consolidated(pyramided, tmp_path, capsys):
    """Regression (hunt): ``zv consolidate`` rewrote the root of a plain zarr group (every other
    command refuses it as not a Zarr Vectors store), and consolidated a store whose write was
    stopped before its level was finished, making it look whole.  Both are refused, unwritten."""
    from pipeline.cli import main
    from zarr_vectors.errors import InconsistentStoreError, MetadataError
    from zarr_vectors.store.groups import empty_level, open_store

    plain = tmp_path / "plain.zarr"
    zarr.open_group(str(plain), mode="w").create_array("a", data=np.arange(10))
    before = tree(plain)
    with pytest.raises(MetadataError, match="not a Zarr Vectors store"):
        zv.consolidate_store(str(plain))
    assert main(["consolidate", str(plain)]) == 2 and main(["consolidate", str(plain), "--drop"]) == 2
    assert "not a Zarr Vectors store" in capsys.readouterr().err
    assert tree(plain) == before
    unfinished = copy_of(pyramided, tmp_path)
    empty_level(open_store(str(unfinished))).write_metadata()  # level 0's document as a writer first writes it
    before = tree(unfinished)
    with pytest.raises(InconsistentStoreError, match="level 0 is not finished"):
        zv.consolidate_store(str(unfinished))
    assert tree(unfinished) == before

def test_command_line(pyramided, tmp_path, capsys):
    from pipeline.cli import main

    store = copy_of(pyramided, tmp_path)
    assert main(["consolidate", str(store)]) == 0
    assert "nodes consolidated" in capsys.readouterr().out
    assert main(["info", str(store)]) == 0
    assert "consolidated:   yes" in capsys.readouterr().out
    assert main(["consolidate", str(store), "--drop"]) == 0
    assert "consolidated_metadata" not in root_doc(store)
    assert main(["consolidate", str(tmp_path / "missing.zv")]) == 2


def _consolidated_copy(pyramided: Path, tmp_path: Path) -> Path:
    store = copy_of(pyramided, tmp_path)
    consolidate(Storage(str(store)))
    return store


def test_stale_consolidated_copy_naming_deleted_arrays_is_refused_by_read(pyramided, tmp_path):
    """Silent wrong answer (full fuzz corpus, ``consolidated:delete_dir``): object attributes deleted
    from storage but still in the copy read as a store without them; every zarr reader of the copy
    sees them.  The reader refuses the store instead."""
    store = _consolidated_copy(pyramided, tmp_path)
    assert zv.read(str(store)).positions.shape == POS.shape  # a current copy reads
    victim = next(p for p in sorted(store.joinpath("0").iterdir()) if p.is_dir() and p.name != "vertices")
    shutil.rmtree(victim)
    with pytest.raises(zv.InconsistentStoreError, match=rf"consolidated metadata is stale: the copy names '{victim.name}"):
        zv.read(str(store))
    assert any(f.code == "L1_CONSOLIDATED_STALE" for f in validate(str(store), level=1).findings)


def test_stale_consolidated_copy_of_an_edited_node_is_refused_by_read(pyramided, tmp_path):
    store = _consolidated_copy(pyramided, tmp_path)
    doc_path = store / "0" / "vertices" / "zarr.json"
    doc = json.loads(doc_path.read_bytes())
    doc["attributes"]["note"] = "edited after consolidation"
    doc_path.write_text(json.dumps(doc))
    with pytest.raises(zv.InconsistentStoreError, match="the copy of 'vertices' differs from its zarr.json"):
        zv.read(str(store))
    zv.consolidate_store(str(store))
    assert zv.read(str(store)).positions.shape == POS.shape


def test_malformed_consolidated_copy_is_refused_by_read(pyramided, tmp_path):
    store = _consolidated_copy(pyramided, tmp_path)
    doc = root_doc(store)
    doc["consolidated_metadata"]["kind"] = "external"
    (store / "zarr.json").write_text(json.dumps(doc))
    with pytest.raises(zv.MetadataError, match="consolidated_metadata must be"):
        zv.read(str(store))


def test_a_nan_attribute_survives_consolidation_and_a_number_for_a_boolean_does_not(tmp_path) -> None:
    """Regression (hunt): the copy was compared with ``!=``: a NaN attribute (valid) never equals
    itself, so our own consolidate made a valid store fail L1_CONSOLIDATED_STALE and the reader
    refuse it; and ``1 == True == 1.0``, so a copy saying ``directed: 1`` where the node says
    ``true`` (zarr-python then sees 1) passed.  Both now compare as JSON."""
    store = tmp_path / "p.zv"
    zv.write_points(str(store), np.array([[1, 1, 1], [30, 30, 30]], "f4"), chunk_shape=25.0,
                    attributes={"w": np.array([1, 2], "f4")})
    path = store / "0/vertex_attributes/w/zarr.json"
    doc = json.loads(path.read_text())
    doc["attributes"]["note"] = float("nan")
    path.write_text(json.dumps(doc, allow_nan=True))
    zv.consolidate_store(str(store))
    assert validate(str(store), 5).ok and len(zv.read(str(store)).positions) == 2

    graph = tmp_path / "g.zv"
    graph_store(graph)
    zv.consolidate_store(str(graph))
    root = root_doc(graph)
    copy = root["consolidated_metadata"]["metadata"]["0/links/0"]["attributes"]
    assert copy["directed"] is False
    copy["directed"] = 0
    (graph / "zarr.json").write_text(json.dumps(root))
    result = validate(str(graph), 5)
    assert [f.code for f in result.findings if f.severity == "error"] == ["L1_CONSOLIDATED_STALE"], result.summary()
    with pytest.raises(zv.ZarrVectorsError, match="consolidated metadata is stale"):
        zv.read(str(graph))


def test_the_links_api_leaves_no_stale_copy(tmp_path) -> None:
    """Regression (hunt): links_api.write_link_attributes on a consolidated store added five nodes
    and left the copy as it was: the store failed L1_CONSOLIDATED_STALE and the reader refused it.
    Every links write of the API drops the copy first and writes it again when it succeeds."""
    from zarr_vectors import links_api
    from zarr_vectors.store.groups import open_store

    store = tmp_path / "g.zv"
    graph_store(store)
    zv.consolidate_store(str(store))
    level = open_store(str(store)).level(0)
    records = links_api.read_links(level, 0)
    links_api.write_link_attributes(level, "score", 0, np.arange(len(records.vi), dtype="f4"))
    assert_current(store)
    level = open_store(str(store)).level(0)
    links_api.write_links(level, 0, records.chunks, records.vi)  # replaces the family (and drops "score")
    links_api.finalize_links(level, 0)
    assert_current(store)
    assert is_consolidated(Storage(str(store)))
