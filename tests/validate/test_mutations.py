"""One defect per case: the conformance corpus's invalid fixtures, each reported at its level with its code.

The defects themselves -- a valid store, one raw-file edit, one expected code -- live in the
package (``zarr_vectors/conformance/mutations*.py``) and their stores are committed in
``conformance/`` (docs/conformance.md); here every one is validated at level 5 and held to
the finding's contract (its level, its one-line message, errors vs warnings, nothing
crashed).  ``REF_MISSES`` marks the defects docs/validation.md says the reference
validator misses.  A symbolic link, which a committed corpus cannot carry portably, is
made here.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

import dask
import numpy as np
import pytest
from conftest import assert_clean, cell_file, edit_attrs, first_chunk, read_json, set_nonempty_raw, write_json

import zarr_vectors as zv
from zarr_vectors.conformance.corpus import Case, load_corpus
from zarr_vectors.conformance.rawfiles import ZSTD, raw_text_edit, read_payload, write_payload
from zarr_vectors.encoding import decode_ragged_blob, encode_ragged_blob, frame_items, unframe_items
from zarr_vectors.store.backend import Storage
from zarr_vectors.store.tables import write_table
from zarr_vectors.validation import ValidationResult, validate
from zarr_vectors.validation.findings import CATALOGUE

CORPUS = Path(__file__).resolve().parents[2] / "conformance"
INVALID: list[Case] = [c for c in load_corpus(CORPUS).cases if not c.valid]

REF_MISSES = {
    "bad-attribute-cell-missing", "bad-attribute-family-num-links-a-string", "bad-attribute-rows-short",
    "bad-attribute-segment-missing", "bad-bad-codec-name", "bad-bin-volume-decreases", "bad-bom-in-array-json",
    "bad-canonical-num-links-off", "bad-capability-unknown", "bad-chunk-keys-dotted", "bad-chunk-length-zero",
    "bad-cross-level-depth-minus-two", "bad-cross-level-storage-unknown", "bad-dimension-names-short",
    "bad-discriminator-for-another-path", "bad-duplicate-key", "bad-explicit-without-minus-family",
    "bad-fragment-attribute-short", "bad-fragment-range-past-end", "bad-fragments-tile-a-string",
    "bad-inherited-wrong", "bad-intra-vi-negative", "bad-layout-v2-not-allowed", "bad-layout-v3",
    "bad-link-fragments-cell-missing", "bad-manifest-trailing-byte", "bad-manifest-unknown-mode",
    "bad-must-understand-false", "bad-nan-fill-value", "bad-nesting-300", "bad-none-with-families",
    "bad-nonempty-lists-absent-cell", "bad-object-attribute-grid-not-regular",
    "bad-object-attribute-rows-not-objects", "bad-origin-two-entries", "bad-perm-idx-too-large",
    "bad-point-in-wrong-bin", "bad-sparsity-zero", "bad-truncated-array-json", "bad-unknown-discriminator",
    "bad-vertex-count-negative", "bad-vertex-count-off-by-one", "bad-vertices-data-type-not-vlen",
    "bad-vi-past-target-chunk", "bad-vlen-fill-value-not-empty", "bad-zarr-format-2", "bad-zv-version-garbage",
    "bad-zv-version-major-1", "bad-zv-version-old",
}



def _options(case: Case) -> dict:
    return {"allow_layouts": tuple(case.doc["expect"].get("options", {}).get("allow_layouts", ()))}


def assert_reported(result: ValidationResult, code: str) -> None:
    rule = CATALOGUE[code]
    hits = [f for f in result.findings if f.code == code]
    assert hits, f"expected {code}\n{result.summary()}"
    assert all(f.level == rule.level for f in hits)
    assert all(f.line().startswith(f"{rule.level}: ") and "\n" not in f.line() for f in hits)
    if rule.severity == "error":
        assert not result.ok
        assert any(line in result.errors for line in (f.line() for f in hits))
    else:
        assert any(line in result.warnings for line in (f.line() for f in hits))
    crashed = [f for f in result.findings if f.code.endswith("_CHECK_CRASHED")]
    assert not crashed, result.summary()


@pytest.mark.parametrize("case", INVALID, ids=[c.id for c in INVALID])
def test_defect_is_reported_at_its_level(case: Case) -> None:
    result = validate(str(CORPUS / case.fixture), 5, **_options(case))
    for code in case.doc["expect"]["validate"]["codes"]:
        assert_reported(result, code)


def test_a_level_chunk_shape_that_is_no_multiple_is_not_also_a_mirror_error() -> None:
    """Review: with level 2's chunk_shape no whole multiple of the root's, its cross-level records
    cannot be resolved, and the mirror check repeated L5_CHUNK_SHAPE_MULTIPLE as an error of its
    own ("could not be compared"); it leaves such a pair to that rule."""
    result = validate(str(CORPUS / "fixtures/bad-level-chunk-not-multiple"), 5)
    codes = {f.code for f in result.findings if f.severity == "error"}
    assert "L5_CHUNK_SHAPE_MULTIPLE" in codes and "L5_CROSS_LEVEL_MIRROR" not in codes, result.summary()
    assert "L5_CROSS_LEVEL_CENTROID" not in codes, result.summary()  # nor a centroid error (review)
    assert any("L5_CROSS_LEVEL_MIRROR" in rule for rule in result.passed)  # the other pair is compared


def test_chunk_is_symlink(copy_store: Callable[[str], Path]) -> None:
    s = copy_store("points")
    cell = cell_file(s, "0/vertices", first_chunk(s, "0/vertices"))
    outside = s.parent / f"{s.name}-outside-cell"
    outside.write_bytes(cell.read_bytes())  # a valid copy: following the link would validate ok
    cell.unlink()
    cell.symlink_to(outside)
    assert_reported(validate(str(s), 5), "L1_STORAGE_OBJECT")


def test_enough_distinct_defects() -> None:
    assert len(INVALID) >= 60
    covered = {code for c in INVALID for code in c.doc["expect"]["validate"]["codes"]}
    untested = {c for c in CATALOGUE if c not in covered and not c.endswith("_CHECK_CRASHED")}
    assert not untested, untested
    ids = {c.id for c in INVALID}
    assert REF_MISSES <= ids, REF_MISSES - ids
    misses = {code for c in INVALID if c.id in REF_MISSES for code in c.doc["expect"]["validate"]["codes"]}
    assert len(misses) >= 20


def root_zv(fn: Callable[[dict], object]) -> Callable[[Path], None]:
    return lambda s: edit_attrs(s, "", lambda a: fn(a["zarr_vectors"]))


@pytest.mark.parametrize("base", ["points", "points_ids", "points_raw", "points_fattr", "graph",
                                  "graph_directed_duplicate", "pyramid", "pyramid_consolidated", "points_pyramid"])
def test_untouched_store_is_clean(base_stores: dict[str, Path], base: str) -> None:
    assert_clean(base_stores[base])


def test_allowed_layout_is_a_warning(copy_store: Callable[[str], Path]) -> None:
    store = copy_store("points_ids")
    edit_attrs(store, "0/object_index", lambda a: a.__setitem__("layout", "vlen_manifests_v2"))
    # v2 needs its id table: ids 0..n-1, the same as v1's row = id (a table without its chunk
    # would read as all zeros, which L3_OBJECT_IDS refuses)
    rows = read_json(store, "0/object_index/manifests")["shape"][0]
    write_table(Storage(str(store)), "0/object_index/object_ids", np.arange(rows, dtype=np.int64), fill_value=0,
                attributes={}, compressor=None, chunk_rows=rows)
    result = validate(str(store), 5, allow_layouts=("vlen_manifests_v2",))
    assert result.ok, result.summary()
    assert [f.code for f in result.findings] == ["L2_OBJECT_INDEX_LAYOUT"]
    assert result.findings[0].severity == "warning"
    strict = validate(str(store), 5)
    assert "L2_OBJECT_INDEX_LAYOUT" in {f.code for f in strict.findings if f.severity == "error"}


def test_zv_version_compared_numerically(copy_store: Callable[[str], Path]) -> None:
    store = copy_store("points")
    root_zv(lambda z: z.__setitem__("zv_version", "0.10.0"))(store)
    assert_clean(store)


def test_nan_in_attributes_is_valid(copy_store: Callable[[str], Path]) -> None:
    store = copy_store("points")
    raw_text_edit(store, "0/vertices", '"attributes": {', '"attributes": {"note": NaN, "big": Infinity, ')
    assert_clean(store)


def test_coarse_bin_larger_than_chunk_is_valid(base_stores: dict[str, Path]) -> None:
    doc = read_json(base_stores["pyramid"], "")
    translation = doc["attributes"]["multiscales"][0]["datasets"][2]["coordinateTransformations"][1]["translation"]
    assert 2 * translation[0] > doc["attributes"]["zarr_vectors"]["chunk_shape"][0]
    assert_clean(base_stores["pyramid"])


def test_empty_link_fragments_and_intra_array_are_valid(copy_store: Callable[[str], Path]) -> None:
    store = copy_store("graph")
    # drop every intra record: the all-zero array and link_fragments become empty arrays
    for arr in ("0/links/0/0.0.0", "0/link_fragments", "0/link_attributes/weight/0/0.0.0"):
        shutil.rmtree(store / arr / "c")
        set_nonempty_raw(store, arr, lambda keys: [])
    doc = read_json(store, "0/links/0")["attributes"]
    result = validate(str(store), 5)
    # only the family counts can disagree now (they counted the removed records)
    assert {f.code for f in result.findings} <= {"L3_FAMILY_PHYSICAL_COUNT", "L3_FAMILY_NUM_LINKS"}, result.summary()
    assert doc["num_links"] > 0


def _duplicate_graph(path: Path) -> Path:
    """Five edges over three chunks, each edge stored once per distinct endpoint chunk."""
    pos = np.array([[10, 10, 10], [20, 20, 20], [60, 10, 10], [70, 80, 90], [15, 12, 11]], dtype=np.float32)
    zv.write_graph(str(path), pos, np.array([[0, 1], [2, 0], [1, 4], [3, 2], [4, 3]]), store="duplicate",
                   chunk_shape=(50, 50, 50), compressor="none")
    return path


def _drop_cells(store: Path, *segments: str) -> None:
    for segment in segments:
        shutil.rmtree(store / f"0/links/0/{segment}/c")
        set_nonempty_raw(store, f"0/links/0/{segment}", lambda keys: [])


@pytest.mark.parametrize("damage", ["two_records_one_copy_each", "one_record_two_copies_in_one_chunk"])
def test_every_duplicate_record_has_one_copy_per_endpoint_chunk(tmp_path: Path, damage: str) -> None:
    """Regression (hunt): copies were counted per span size (rows spanning K chunks a multiple of
    K), so two records each missing a copy, or a record with both copies led by one chunk, passed."""
    store = _duplicate_graph(tmp_path / "g.zv")
    assert_clean(store)
    if damage == "two_records_one_copy_each":
        _drop_cells(store, "-1.0.0", "0.-1.-1")  # edge 2-0's copy led by 1.0.0, edge 3-2's led by 1.1.1
        physical = 6
    else:  # edge 2-0: its copy led by 0.0.0 twice, none led by 1.0.0
        _drop_cells(store, "-1.0.0")
        rows, _ = decode_ragged_blob(read_payload(store, "0/links/0/+1.0.0", (0, 0, 0)), 3, np.dtype("<i8"))
        write_payload(store, "0/links/0/+1.0.0", (0, 0, 0), encode_ragged_blob([np.concatenate([rows, rows])]))
        physical = 8
    edit_attrs(store, "0/links/0", lambda a: a.__setitem__("num_physical_records", physical))
    errors = [f for f in validate(str(store), 5).findings if f.severity == "error"]
    assert [f.code for f in errors] == ["L3_FAMILY_NUM_LINKS"], errors
    assert "not stored once per distinct endpoint chunk" in errors[0].message


@pytest.mark.parametrize("change", [-1, 1])
def test_a_level_preserving_object_ids_keeps_its_parents_slots(copy_store: Callable[[str], Path], change: int) -> None:
    """Regression (hunt): only inherited_num_objects was compared with the parent, so a level that
    lost an object's slot, or gained an id its parent lacks, passed level 5 and read back so."""
    store = copy_store("pyramid")
    cell = store / "1/object_index/manifests/c/0"
    items = unframe_items(ZSTD.decode(cell.read_bytes()))
    items = items[:-1] if change < 0 else [*items, b"\0\0\0\0"]  # the last slot dropped, or an empty one added
    cell.write_bytes(bytes(ZSTD.encode(frame_items(items))))
    n = len(items)

    manifests = read_json(store, "1/object_index/manifests")
    manifests["shape"] = manifests["chunk_grid"]["configuration"]["chunk_shape"] = [n]
    write_json(store, "1/object_index/manifests", manifests)
    present = sum(i != b"\0\0\0\0" for i in items)
    edit_attrs(store, "1/object_index", lambda a: a.update(num_objects=n, num_present=present))
    errors = [f for f in validate(str(store), 5).findings if f.severity == "error"]
    # level 2 (7 slots) now disagrees too; a dropped slot's fragments belong to no object any more
    expected = {"L5_INHERITED_NUM_OBJECTS"} | ({"L3_VERTEX_OWNERS"} if change < 0 else set())
    assert {f.code for f in errors} == expected, errors
    assert "1/object_index" in {f.node for f in errors if f.code == "L5_INHERITED_NUM_OBJECTS"}


@pytest.mark.parametrize(("damage", "code"), [("big_endian", "L2_CODECS"), ("cut_chunk", "L3_CELL_UNDECODABLE")])
def test_object_attributes_the_reader_refuses_are_findings(copy_store: Callable[[str], Path], damage: str,
                                                          code: str) -> None:
    """Regression (hunt): the validator never decoded typed arrays, so an object attribute declared
    big-endian, or cut short, passed level 5 while ``zv.read`` refused the store."""
    store = copy_store("points_ids")
    node = "0/object_attributes/weight"
    chunk = store / node / "c" / "0"
    if damage == "big_endian":
        doc = read_json(store, node)
        doc["codecs"][0]["configuration"]["endian"] = "big"
        write_json(store, node, doc)
    else:
        chunk.write_bytes(ZSTD.encode(ZSTD.decode(chunk.read_bytes())[:24]))
    with pytest.raises(zv.ZarrVectorsError):
        zv.read(str(store))
    errors = [f for f in validate(str(store), 5).findings if f.severity == "error"]
    assert [(f.code, f.node) for f in errors] == [(code, node)], errors


def test_a_level_0_vertex_in_no_fragment_has_no_owner(copy_store: Callable[[str], Path]) -> None:
    """Regression (hunt): a FragmentIndex that left a row out of every fragment passed level 5, and
    the reader gave that vertex object id -1, though at level 0 every vertex has one owner."""
    from zarr_vectors.encoding import FragmentIndex

    store = copy_store("points_ids")
    edit_attrs(store, "0", lambda a: a["zarr_vectors_level"].pop("fragments_tile"))  # not a tiling claim's finding
    node = "0/vertex_fragments"
    c = first_chunk(store, node)
    index = FragmentIndex.decode(read_payload(store, node, c))
    parts = index.fragment_rows()
    parts[0] = parts[0][:-1]  # the first fragment's last row: in no fragment now
    write_payload(store, node, c, FragmentIndex.from_fragments(parts).encode())
    errors = [f for f in validate(str(store), 5).findings if f.severity == "error"]
    assert [(f.code, f.cell) for f in errors] == [("L3_VERTEX_OWNERS", ".".join(map(str, c)))], errors
    assert "1 vertices lie in no fragment" in errors[0].message


def test_a_link_attribute_family_has_one_row_layout(copy_store: Callable[[str], Path]) -> None:
    """Regression (hunt): one array of a link-attribute family declaring int32 among float32 ones
    passed level 5 while the reader refused the family ("differ across the family")."""
    store = copy_store("graph")
    family = "0/link_attributes/weight/0"
    filled = [p.name for p in sorted((store / family).iterdir())
              if p.is_dir() and read_json(store, f"{family}/{p.name}")["attributes"]["nonempty_chunks"]]
    assert len(filled) >= 2
    node = f"{family}/{filled[-1]}"
    edit_attrs(store, node, lambda a: a.__setitem__("dtype", "int32"))  # same row bytes as float32
    with pytest.raises(zv.ZarrVectorsError, match="differ across the family"):
        zv.read(str(store))
    errors = [f for f in validate(str(store), 5).findings if f.severity == "error"]
    assert [(f.code, f.node) for f in errors] == [("L2_ARRAY_DTYPE", node)], errors


def test_a_link_attribute_array_without_a_dtype_is_one_finding(copy_store: Callable[[str], Path]) -> None:
    """A link-attribute array must state its dtype (there is no default); the family's one-layout
    rule had compared it as float32, so a float64 family reported the same array twice."""
    store = copy_store("graph")
    family = "0/link_attributes/weight/0"
    filled = [p.name for p in sorted((store / family).iterdir())
              if p.is_dir() and read_json(store, f"{family}/{p.name}")["attributes"]["nonempty_chunks"]]
    node = f"{family}/{filled[-1]}"
    for name in filled:
        edit_attrs(store, f"{family}/{name}", lambda a: a.__setitem__("dtype", "float64"))
    edit_attrs(store, node, lambda a: a.pop("dtype"))
    with pytest.raises(zv.ZarrVectorsError, match="dtype"):
        zv.read(str(store))
    errors = [f for f in validate(str(store), 2).findings if f.severity == "error"]
    assert [(f.code, f.node, f.pointer) for f in errors] == [("L2_ARRAY_DTYPE", node, "/attributes")], errors


@pytest.mark.parametrize(("ids", "claims_sorted", "finding"), [
    ([0, 1, -7], False, "distinct and >= 0"), ([2, 1, 0], True, "object_ids_sorted is true, but row 1 holds 1 after 2")])
def test_a_v2_index_holds_usable_object_ids(copy_store: Callable[[str], Path], ids: list[int], claims_sorted: bool,
                                             finding: str) -> None:
    """Regression (hunt): a v2 index (allowed) whose ids repeat or go negative passed level 5 while
    the reader refused it; one claiming sorted ids that are not passed too."""
    store = copy_store("points_ids")
    n = read_json(store, "0/object_index")["attributes"]["num_objects"]
    column = np.arange(n, dtype=np.int64) + 10
    column[: len(ids)] = ids
    write_table(Storage(str(store)), "0/object_index/object_ids", column, fill_value=0, attributes={}, compressor=None)
    edit_attrs(store, "0/object_index", lambda a: a.update(layout="vlen_manifests_v2", object_ids_sorted=claims_sorted))
    allowed = ("vlen_manifests_v2",)
    errors = [f for f in validate(str(store), 5, allow_layouts=allowed).findings if f.severity == "error"]
    assert [(f.code, f.node) for f in errors] == [("L3_OBJECT_IDS", "0/object_index/object_ids")], errors
    assert finding in errors[0].message


@pytest.mark.parametrize("edit", ["base_bin_shape_removed", "base_bin_shape_doubled", "scale_four"])
def test_level_0_bins_are_stated_once(copy_store: Callable[[str], Path], edit: str) -> None:
    """Regression (hunt): base_bin_shape and level 0's NGFF transform could disagree (our readers go
    by the transform, another reader by base_bin_shape) and the store passed level 5."""
    store = copy_store("points")
    doc = read_json(store, "")
    zv_block, level0 = doc["attributes"]["zarr_vectors"], doc["attributes"]["multiscales"][0]["datasets"][0]
    assert "base_bin_shape" in zv_block and zv_block["base_bin_shape"] != zv_block["chunk_shape"]
    if edit == "base_bin_shape_removed":
        del zv_block["base_bin_shape"]  # so the bins are the chunks, while the translation says half a bin
    elif edit == "base_bin_shape_doubled":
        zv_block["base_bin_shape"] = [2 * b for b in zv_block["base_bin_shape"]]
    else:
        level0["coordinateTransformations"][0]["scale"] = [4.0] * len(zv_block["chunk_shape"])
    write_json(store, "", doc)
    errors = [f for f in validate(str(store), 5).findings if f.severity == "error"]
    assert [f.code for f in errors] == ["L2_MULTISCALES_DATASETS"], errors
    assert ("scale" if edit == "scale_four" else "translation") in errors[0].message


def test_streamline_bridges_that_contradict_the_manifests_are_found(tmp_path: Path) -> None:
    """Regression (hunt): two streamlines crossing from one chunk into another whose manifests
    swap their second runs passed level 5, and zv.read returned the spliced lines (the reader goes
    by the manifests); the bridges still joined each line's own runs."""
    from zarr_vectors.encoding import decode_manifest, encode_manifest

    lines = np.array([[1, 1, 0], [2, 1, 0], [3, 1, 0], [11, 1, 0], [12, 1, 0], [13, 1, 0],
                      [1, 5, 0], [2, 5, 0], [3, 5, 0], [11, 5, 0], [12, 5, 0], [13, 5, 0]], dtype="f4")
    store = tmp_path / "s.zv"
    zv.write_polylines(str(store), lines, np.array([0, 6, 12]), chunk_shape=10.0, kind="streamline")
    assert_clean(store)
    cell = store / "0/object_index/manifests/c/0"
    items = unframe_items(ZSTD.decode(cell.read_bytes()))
    runs = [[(b.chunk, b.fragments.tolist()) for b in decode_manifest(row, 3)] for row in items]
    assert [len(r) for r in runs] == [2, 2]
    runs[0][1], runs[1][1] = runs[1][1], runs[0][1]  # each line's second run is now the other's
    cell.write_bytes(ZSTD.encode(frame_items([encode_manifest(r, 3) for r in runs])))
    spliced = zv.read(str(store))
    assert spliced.positions[3].tolist() == [11, 5, 0]  # what the reader makes of the manifests
    errors = [f for f in validate(str(store), 5).findings if f.severity == "error"]
    assert [(f.code, f.node) for f in errors] == [("L4_POLYLINE_BRIDGES", "0/links/0")], errors
    assert "2 bridges the manifests' runs imply are not stored and 2 stored records" in errors[0].message


def test_a_bridge_task_expands_no_more_fragments_than_the_level_has(tmp_path: Path) -> None:
    """Review: each manifests chunk's bridge task had the whole decode budget of its own, so rows
    of 16-byte mode-1 blocks naming millions of fragments, one row a chunk, expanded millions of
    fragments per task (1.6 GB where one level-wide decode had refused).  A level whose fragments
    are not shared names at most its own fragments in any chunk: more is refused before expanding."""
    import struct

    from zarr_vectors.store.backend import Storage
    from zarr_vectors.validation.consistency.polylines import RunEnds, implied_bridges

    lines = np.array([[1, 1, 0], [2, 1, 0], [11, 1, 0], [12, 1, 0]], dtype="f4")
    store = tmp_path / "s.zv"
    zv.write_polylines(str(store), lines, np.array([0, 4]), chunk_shape=10.0, kind="streamline")
    cell = store / "0/object_index/manifests/c/0"
    items = list(unframe_items(ZSTD.decode(cell.read_bytes())))
    items[0] = struct.pack("<I", 1) + struct.pack("<qqq", 0, 0, 0) + bytes([1]) + struct.pack("<qq", 0, 10**7)
    cell.write_bytes(ZSTD.encode(frame_items(items)))  # one 41-byte row naming 10**7 fragments
    path = "0/object_index/manifests"
    job = (path, f"{path}/c/0", 0, read_json(store, path), 3, (1, 4))  # what manifest_jobs plans
    found = implied_bridges(Storage(str(store)), 0, job, True, False, 7, RunEnds({}, 4))  # the level: 4 fragments
    assert [(f.code, f.severity) for f in found] == [("L4_POLYLINE_BRIDGES", "warning")], found
    assert "were not compared" in found[0].message


@pytest.mark.parametrize("directed", [True, False])
@pytest.mark.parametrize("store", ["canonical", "duplicate"])
def test_streamline_bridges_are_compared_under_every_family_policy(tmp_path: Path, directed: bool,
                                                                   store: str) -> None:
    """The link tasks digest a family's records as bridges: unordered pairs when undirected, and
    under ``duplicate`` only the copy its first endpoint's chunk holds (each cross-chunk bridge is
    stored twice).  Rewritten under each policy the bridges pass; two of them swapping ends do not."""
    from zarr_vectors.links_api import write_links
    from zarr_vectors.store.link_read import read_links

    rng = np.random.default_rng(3)
    walks = (rng.uniform(20, 80, (30, 1, 3)) + np.cumsum(rng.normal(0, 4, (30, 12, 3)), axis=1)).astype("f4")
    path = str(tmp_path / "s.zv")
    zv.write_polylines(path, walks.reshape(-1, 3), np.arange(0, 361, 12), chunk_shape=15.0, kind="streamline")
    level = zv.open_store(path).level(0)
    records = read_links(level, 0)
    write_links(level, 0, records.chunks, records.vi, directed=directed, store=store)
    assert_clean(Path(path))
    vi, chunks = records.vi.copy(), records.chunks.copy()
    vi[[0, 1], 1], chunks[[0, 1], 1] = vi[[1, 0], 1], chunks[[1, 0], 1]  # two bridges swap their ends
    write_links(level, 0, chunks, vi, directed=directed, store=store)
    errors = [f for f in validate(path, 5).findings if f.severity == "error"]
    assert [f.code for f in errors] == ["L4_POLYLINE_BRIDGES"], errors


def test_streamline_bridges_are_compared_from_the_link_tasks(tmp_path: Path, monkeypatch) -> None:
    """The level-3 link tasks hash the records they decode; a valid level is checked from those
    hashes without reading its links a second time (the row-by-row comparison runs only on a mismatch)."""
    from zarr_vectors.validation.consistency import polylines

    rng = np.random.default_rng(7)
    walks = (rng.uniform(20, 80, (40, 1, 3)) + np.cumsum(rng.normal(0, 4, (40, 15, 3)), axis=1)).astype("f4")
    store = tmp_path / "s.zv"
    zv.write_polylines(str(store), walks.reshape(-1, 3), np.arange(0, 601, 15), chunk_shape=15.0, kind="streamline")
    assert read_json(store, "0/links/0")["attributes"]["num_links"] > 20  # runs to join

    def read_again(*args: object) -> None:
        raise AssertionError("a valid level's links were read a second time")

    monkeypatch.setattr(polylines, "stored_pairs", read_again)  # the row-by-row re-read of the links
    result = validate(str(store), 5)
    assert result.ok and any("L4_POLYLINE_BRIDGES" in rule for rule in result.passed), result.summary()


def _manifest_rows(store: Path, level: int) -> list[list[tuple[tuple[int, ...], list[int]]]]:
    from zarr_vectors.encoding import decode_manifest

    items = unframe_items(ZSTD.decode((store / f"{level}/object_index/manifests/c/0").read_bytes()))
    return [[(b.chunk, b.fragments.tolist()) for b in decode_manifest(row, 3)] for row in items]


def _set_manifest_rows(store: Path, level: int, rows: list) -> None:
    from zarr_vectors.encoding import encode_manifest

    items = [encode_manifest(r, 3) if r else np.zeros(1, "<u4").tobytes() for r in rows]
    (store / f"{level}/object_index/manifests/c/0").write_bytes(ZSTD.encode(frame_items(items)))


def _small_pyramid(path: Path, factors: list, **pyramid: object) -> Path:
    pos = np.array([[1, 1, 1], [2, 1, 1], [11, 1, 1], [12, 1, 1], [3, 1, 1], [13, 1, 1], [4, 4, 4], [14, 4, 4]], "f4")
    zv.write_points(str(path), pos, object_ids=np.array([0, 0, 1, 1, 2, 2, 3, 3]), chunk_shape=20.0, bin_shape=5.0)
    zv.build_pyramid(str(path), factors=factors, **pyramid)
    assert_clean(path)
    return path


def test_a_dropped_object_stays_dropped_up_the_pyramid(tmp_path: Path) -> None:
    """Regression (hunt): level 1 dropped an object (sparsity); level 2 naming it again passed
    level 5 and read back with vertices, though ids keep their meaning from level to level."""
    store = _small_pyramid(tmp_path / "p.zv", [(2, 2), (2, 1)])
    rows = _manifest_rows(store, 2)
    dropped, kept = next(i for i, r in enumerate(rows) if not r), next(i for i, r in enumerate(rows) if r)
    rows[dropped] = list(rows[kept])
    _set_manifest_rows(store, 2, rows)
    edit_attrs(store, "2/object_index", lambda a: a.update(num_present=a["num_present"] + 1))
    errors = [f for f in validate(str(store), 5).findings if f.severity == "error"]
    assert [(f.code, f.node) for f in errors] == [("L5_INHERITED_NUM_OBJECTS", "2/object_index/manifests")], errors
    assert f"object {dropped} (1 in all) has vertices here, but level 1 dropped it" in errors[0].message


def test_a_coarse_vertex_no_object_owns_is_found(tmp_path: Path) -> None:
    """Regression (hunt): a metavertex added at level 1 in a bin empty at level 0, with its own
    fragment named by no manifest, passed level 5 and read back (object id -1)."""
    from zarr_vectors.encoding import FragmentIndex

    store = _small_pyramid(tmp_path / "p.zv", [2])
    chunk = first_chunk(store, "1/vertices")
    cell = read_payload(store, "1/vertices", chunk)
    write_payload(store, "1/vertices", chunk, cell + np.array([[15, 15, 15]], "f4").tobytes())
    index = FragmentIndex.decode(read_payload(store, "1/vertex_fragments", chunk))
    rows = len(cell) // 12
    write_payload(store, "1/vertex_fragments", chunk,
                  FragmentIndex.from_fragments([*index.fragment_rows(), np.array([rows])]).encode())
    edit_attrs(store, "1", lambda a: a["zarr_vectors_level"].update(vertex_count=rows + 1))
    edit_attrs(store, "1", lambda a: a["zarr_vectors_level"].pop("fragments_tile", None))
    errors = [f for f in validate(str(store), 5).findings if f.severity == "error"]
    assert [(f.code, f.node) for f in errors] == [("L3_VERTEX_OWNERS", "1/object_index/manifests"),
                                                  ("L5_CROSS_LEVEL_CENTROID", "0/links/+1")], errors
    assert "named by no manifest" in errors[0].message
    assert "1 metavertex is named by no record (first: chunk 0.0.0 row 2)" in errors[1].message  # nor by a -1 record


def test_streamline_bridges_are_checked_on_s3(s3_bucket) -> None:
    """The bridge task opens its level through the store's own storage (a worker on an object store);
    a request or decode failing there would be a finding, not a pass."""
    bucket, options = s3_bucket
    url = f"s3://{bucket}/s.zv"
    rng = np.random.default_rng(4)
    walks = (rng.uniform(20, 80, (30, 1, 3)) + np.cumsum(rng.normal(0, 4, (30, 12, 3)), axis=1)).astype("f4")
    zv.write_polylines(url, walks.reshape(-1, 3), np.arange(0, 361, 12), chunk_shape=15.0, kind="streamline",
                       storage_options=options)
    result = validate(url, 5, storage_options=options)
    assert result.ok and any("L4_POLYLINE_BRIDGES" in rule for rule in result.passed), result.summary()


def test_digests_are_seeded_for_each_validation() -> None:
    """A digest's hashes start from a seed drawn per validation: equal multisets agree under one
    seed whatever their order, and the same rows digest differently under another seed, so no
    store can be built in advance to make two different multisets agree."""
    from zarr_vectors.validation.consistency.cells import Digest, digest_seed, digest_sum

    rows = np.arange(60, dtype=np.int64).reshape(20, 3)
    seed = digest_seed()
    split = digest_sum([Digest.of(rows[::-1][:7], seed), Digest.of(rows[::-1][7:], seed)])
    assert split == Digest.of(rows, seed) and split.rows == 20
    assert Digest.of(rows, seed) != Digest.of(rows, seed ^ 1)
    changed = rows.copy()
    changed[0, 2] += 1
    assert Digest.of(changed, seed) != Digest.of(rows, seed)


def _fine_records(store: Path) -> tuple[np.ndarray, np.ndarray]:
    """Level 0's links/+1 records: (n, 2, D) chunks and (n, 2) rows, fine end first."""
    from zarr_vectors.links_api import read_links

    records = read_links(zv.open_store(str(store)).level(0), 1)
    return records.chunks.copy(), records.vi.copy()


def _errors_with_records(store: Path, chunks: np.ndarray, vi: np.ndarray) -> list:
    """Level 5's errors once level 0's links/+1 and level 1's links/-1 hold these records."""
    from zarr_vectors.links_api import write_links

    pyramid = zv.open_store(str(store))
    write_links(pyramid.level(0), 1, chunks, vi, directed=True)
    write_links(pyramid.level(1), -1, chunks[:, ::-1], vi[:, ::-1], directed=True)
    return [f for f in validate(str(store), 5).findings if f.severity == "error"]


def test_a_vertex_named_twice_with_its_mirror_is_a_coverage_error(tmp_path: Path) -> None:
    """Gap (sixteenth session): a +1 record naming another fine row, its -1 mirror changed alike,
    passed level 5 -- rows in range, counts equal, every record mirrored -- though one vertex then
    has no metavertex going up and another two."""
    store = _small_pyramid(tmp_path / "p.zv", [2])
    chunks, vi = _fine_records(store)
    twin = next(i for i in range(1, len(vi)) if (chunks[i, 0] == chunks[0, 0]).all())  # a row in the same cell
    vi[0, 0] = vi[twin, 0]
    errors = _errors_with_records(store, chunks, vi)
    # the metavertex then stands for a vertex twice and another not at all: no longer their mean
    assert sorted((f.code, f.node) for f in errors) == [("L5_CROSS_LEVEL_CENTROID", "0/links/+1"),
                                                        ("L5_CROSS_LEVEL_COVERAGE", "0/links/+1")], errors
    coverage = next(f for f in errors if f.code == "L5_CROSS_LEVEL_COVERAGE")
    assert coverage.message.startswith("1 vertex of level 0 with no record here and 1 vertex named by more than one "
                                        "(first: chunk 0.0.0 row ")


def test_coverage_is_checked_from_the_digests_without_reading_the_links_again(tmp_path: Path, monkeypatch) -> None:
    from zarr_vectors.validation.consistency import crosslevel

    store = _small_pyramid(tmp_path / "p.zv", [2, 2])

    def read_again(*args: object) -> None:
        raise AssertionError("a valid family's records were read a second time")

    monkeypatch.setattr(crosslevel, "stored_pairs", read_again)
    monkeypatch.setattr(crosslevel, "_positions", read_again)
    result = validate(str(store), 5)
    assert result.ok and any("L5_CROSS_LEVEL_COVERAGE" in rule for rule in result.passed), result.summary()
    assert any("L5_CROSS_LEVEL_BIN" in rule for rule in result.passed), result.summary()


def test_a_record_naming_another_bins_metavertex_with_its_mirror_is_a_bin_error(tmp_path: Path) -> None:
    """Gap (seventeenth session): a +1 record (and its -1 mirror) naming the metavertex of another
    bin of the same coarse cell passed level 5 -- each vertex still has one record, every record a
    mirror, rows and counts hold -- though reading up the pyramid then puts the vertex where it
    does not coarsen.  Here level 1's bins are 10 wide: x < 10 and x >= 10 are two metavertices."""
    store = _small_pyramid(tmp_path / "p.zv", [2])
    chunks, vi = _fine_records(store)
    other = next(i for i in range(1, len(vi)) if vi[i, 1] != vi[0, 1] and (chunks[i, 1] == chunks[0, 1]).all())
    vi[0, 1] = vi[other, 1]  # the other metavertex of the coarse cell
    errors = _errors_with_records(store, chunks, vi)
    # both metavertices then stand for the wrong vertices
    assert [(f.code, f.node) for f in errors] == [("L5_CROSS_LEVEL_BIN", "0/links/+1"),
                                                  ("L5_CROSS_LEVEL_CENTROID", "0/links/+1")], errors
    assert errors[0].message.startswith("1 record names a metavertex outside its vertex's bin of level 1 (first: "
                                        "chunk 0.0.0 row "), errors[0].message


def test_a_bin_defect_beside_a_coverage_defect_is_reported_too(tmp_path: Path) -> None:
    """Review: once coverage had found its defect, the records were not compared with the bins,
    though the rule was listed as passed."""
    store = _small_pyramid(tmp_path / "p.zv", [2])
    chunks, vi = _fine_records(store)
    twin = next(i for i in range(1, len(vi)) if (chunks[i, 0] == chunks[0, 0]).all())
    vi[0, 0] = vi[twin, 0]  # a vertex named twice, another with no record
    last = len(vi) - 1
    other = next(i for i in range(len(vi)) if vi[i, 1] != vi[last, 1] and (chunks[i, 1] == chunks[last, 1]).all())
    vi[last, 1] = vi[other, 1]  # and a record naming another bin's metavertex
    errors = _errors_with_records(store, chunks, vi)
    assert sorted(f.code for f in errors) == ["L5_CROSS_LEVEL_BIN", "L5_CROSS_LEVEL_CENTROID",
                                              "L5_CROSS_LEVEL_COVERAGE"], errors


def test_a_vertex_cell_that_does_not_decode_is_level_3s_alone(tmp_path: Path) -> None:
    """Review: the bin rule's second read raised on the undecodable cell and reported it again as
    an L5 error; a cell level 3 names is left to it."""
    store = tmp_path / "p.zv"
    pos = np.array([[1, 1, 1], [2, 1, 1], [11, 1, 1], [12, 1, 1], [31, 1, 1], [33, 1, 1]], "f4")
    zv.write_points(str(store), pos, chunk_shape=20.0, bin_shape=5.0)
    zv.build_pyramid(str(store), factors=[2], cross_level_storage="implicit")
    chunk = first_chunk(store, "0/vertices")
    (cell_file(store, "0/vertices", chunk)).write_bytes(b"not a zstd frame")
    codes = {f.code for f in validate(str(store), 5).findings if f.severity == "error"}
    assert codes and all(code.startswith("L3_") for code in codes), codes


def test_a_metavertex_on_its_bins_far_face_is_within_the_tolerance(tmp_path: Path) -> None:
    """A centroid that rounding puts on the far face of its bin (our builder moves it back inside;
    another writer need not): the digests differ, and the records read again find it within the
    placement tolerance, as level 4's bin check does.  (So far from its vertices' mean, it breaks
    L5_CROSS_LEVEL_CENTROID alone.)"""
    store = _small_pyramid(tmp_path / "p.zv", [2])
    array = "1/vertices"
    chunk = first_chunk(store, array)
    cell = np.frombuffer(read_payload(store, array, chunk), dtype="<f4").reshape(-1, 3).copy()
    low = int(np.argmin(cell[:, 0]))  # the metavertex of bin x in [0, 10)
    assert cell[low, 0] < 10
    cell[low, 0] = 10.0
    write_payload(store, array, chunk, cell.tobytes())
    result = validate(str(store), 5)
    errors = [f for f in result.findings if f.severity == "error"]
    assert [(f.code, f.node) for f in errors] == [("L5_CROSS_LEVEL_CENTROID", "0/links/+1")], errors
    assert any("L5_CROSS_LEVEL_BIN" in rule for rule in result.passed), result.summary()


def _move_metavertex(store: Path, chunk: tuple[int, ...], row: int, move: Callable[[np.ndarray], np.ndarray],
                     level: int = 1) -> None:
    array = f"{level}/vertices"
    cell = np.frombuffer(read_payload(store, array, chunk), dtype="<f4").reshape(-1, 3).copy()
    cell[row] = move(cell[row])
    write_payload(store, array, chunk, cell.tobytes())


def _centroid_errors(store: Path) -> list[tuple[str, str]]:
    findings = validate(str(store), 5).findings
    return [(f.code, f.message) for f in findings if f.severity == "error"]


def test_a_metavertex_moved_within_its_bin_is_a_centroid_error(tmp_path: Path) -> None:
    """Gap (eighteenth session): a metavertex moved inside its own bin passed level 5 -- its bin,
    chunk, records and counts all hold -- though it no longer stands where its vertices are."""
    store = _small_pyramid(tmp_path / "p.zv", [2])  # level 1: bins 10 wide, (1.5|3.33, ...) metavertices
    chunk = first_chunk(store, "1/vertices")
    _move_metavertex(store, chunk, 0, lambda p: p + np.float32(0.25))
    errors = _centroid_errors(store)
    assert [code for code, _ in errors] == ["L5_CROSS_LEVEL_CENTROID"], errors
    assert errors[0][1].startswith("1 metavertex lies away from the mean of the vertices their records name (first: "
                                   "chunk 0.0.0 row 0 at "), errors


def test_a_metavertex_one_rounding_step_off_its_mean_is_within_the_tolerance(tmp_path: Path) -> None:
    """Another writer may round the mean otherwise (float32 sums, another order): one step of the
    stored dtype is not a defect; a move of a thousandth of the bin is."""
    store = _small_pyramid(tmp_path / "p.zv", [2])
    chunk = first_chunk(store, "1/vertices")
    _move_metavertex(store, chunk, 0, lambda p: np.nextafter(p, np.float32(np.inf)))
    assert _centroid_errors(store) == []
    _move_metavertex(store, chunk, 0, lambda p: p + np.float32(0.01))
    assert [code for code, _ in _centroid_errors(store)] == ["L5_CROSS_LEVEL_CENTROID"]


def test_a_coarse_cell_no_record_points_into_is_a_centroid_error(tmp_path: Path) -> None:
    """The +1 link cells pointing into a coarse cell all gone (their presence lists with them): no
    record names that cell's metavertices, so none stands for a vertex."""
    store = _small_pyramid(tmp_path / "p.zv", [2], cross_level_storage="implicit")
    family = store / "0/links/+1"
    coarse = first_chunk(store, "1/vertices")
    key = ".".join(map(str, coarse))
    for segment in sorted(p.name for p in family.iterdir() if p.is_dir()):
        array = f"0/links/+1/{segment}"
        offset = np.array(segment.split("."), dtype=int)
        for cell in list(read_json(store, array)["attributes"]["nonempty_chunks"]):
            if tuple((np.array(cell.split("."), dtype=int) + offset).tolist()) == coarse:  # chunk scale 1
                cell_file(store, array, tuple(int(x) for x in cell.split("."))).unlink()
                set_nonempty_raw(store, array, lambda keys, cell=cell: [k for k in keys if k != cell])
    found = [f.message for f in validate(str(store), 5).findings if f.code == "L5_CROSS_LEVEL_CENTROID"]
    assert len(found) == 1, found
    assert found[0].startswith(f"2 metavertices are named by no record (first: chunk {key} row 0)"), found


def test_the_centroid_rule_runs_where_every_vertex_has_its_record_and_nothing_is_shared(tmp_path: Path) -> None:
    """It rides on links/+1, which both storages write; sparsity drops vertices' records (and the
    reference writes some anyway), so a pyramid dropping objects is left out by design (so is a
    level whose objects share metavertices: the reference coarsens it once per object naming one)."""
    ran = {}
    for name, factors, storage in (("explicit", [2, 2], "explicit"), ("implicit", [2], "implicit"),
                                   ("sparse", [(2, 2)], "explicit")):
        store = _small_pyramid(tmp_path / f"{name}.zv", factors, cross_level_storage=storage)
        result = validate(str(store), 5)
        assert result.ok, result.errors
        ran[name] = [rule for rule in result.passed if "L5_CROSS_LEVEL_CENTROID" in rule]
    assert len(ran["explicit"]) == len(ran["implicit"]) == 1 and ran["sparse"] == [], ran


def _moved_point_errors(tmp_path: Path, pos: np.ndarray, factors: list, level: int, shift: float) -> list[str]:
    """Level 5's error codes once the first metavertex of ``level`` moved by ``shift`` on x."""
    store = tmp_path / "m.zv"
    zv.write_points(str(store), pos, chunk_shape=20.0, bin_shape=5.0)
    zv.build_pyramid(str(store), factors=factors)
    assert_clean(store)
    _move_metavertex(store, first_chunk(store, f"{level}/vertices"), 0,
                     lambda p: p + np.array([shift, 0, 0], dtype=np.float32), level)
    return [f.code for f in validate(str(store), 5).findings if f.severity == "error"]


def test_far_away_points_do_not_loosen_a_metavertexs_tolerance(tmp_path: Path) -> None:
    """Review: the tolerance followed the largest coordinate of the whole task, so points 1e5 away in
    another cell let a metavertex near the origin move by 0.08 (650,000 float32 steps) unseen."""
    pos = np.array([[1, 1, 1], [2, 1, 1], [3, 2, 1], [1e5 + 1, 1, 1], [1e5 + 2, 1, 1]], "f4")
    assert _moved_point_errors(tmp_path, pos, [2], 1, 0.08) == ["L5_CROSS_LEVEL_CENTROID"]


def test_levels_above_the_first_are_compared_where_there_are_no_objects(tmp_path: Path) -> None:
    """Review: every coarse level is stamped shared_fragments, points without ids too, so no pair
    above 0 -> 1 was compared; a level without an object index is one object and shares nothing."""
    pos = np.random.default_rng(3).uniform(0, 40, (300, 3)).astype("f4")
    assert _moved_point_errors(tmp_path, pos, [2, 2], 2, 0.5) == ["L5_CROSS_LEVEL_CENTROID"]


def test_a_metavertex_that_is_not_finite_is_a_centroid_error(tmp_path: Path) -> None:
    """Review: a NaN metavertex whose vertices are finite was only level 3's warning."""
    pos = np.array([[1, 1, 1], [2, 1, 1], [12, 1, 1]], "f4")
    assert _moved_point_errors(tmp_path, pos, [2], 1, np.nan) == ["L5_CROSS_LEVEL_CENTROID"]


def test_a_coarse_cell_without_metavertices_needs_no_record(tmp_path: Path) -> None:
    """Review: a listed coarse vertex cell of zero rows (valid: no metavertex needs a record) was
    reported as one no record names."""
    store = tmp_path / "p.zv"
    zv.write_points(str(store), np.array([[1, 1, 1], [2, 2, 2], [31, 31, 31]], "f4"), chunk_shape=20.0,
                    bin_shape=5.0)
    zv.build_pyramid(str(store), factors=[2])
    write_payload(store, "1/vertices", (0, 1, 0), b"")
    set_nonempty_raw(store, "1/vertices", lambda keys: sorted([*keys, "0.1.0"]))
    result = validate(str(store), 5)
    assert result.ok, result.summary()
    assert any("L5_CROSS_LEVEL_CENTROID" in rule for rule in result.passed), result.summary()


def test_a_listed_link_cell_gone_from_storage_is_level_3s_alone(tmp_path: Path) -> None:
    """Review: a +1 link cell deleted but still listed made the rule report its coarse cell's
    metavertices as named by no record, beside L3_NONEMPTY_MISSING."""
    store = _small_pyramid(tmp_path / "p.zv", [2])
    array = "0/links/+1/0.0.0"
    cell_file(store, array, first_chunk(store, array)).unlink()
    codes = {f.code for f in validate(str(store), 5).findings if f.severity == "error"}
    assert "L3_NONEMPTY_MISSING" in codes and "L5_CROSS_LEVEL_CENTROID" not in codes, codes


def test_a_chunk_shape_that_is_no_multiple_is_not_also_a_centroid_error(tmp_path: Path) -> None:
    """Review: with level 1's chunk_shape no whole multiple of the root's, the records point into
    the wrong cells, and the rule reported hundreds of metavertices away from their mean; as the
    mirror check does, it leaves such a pair to L5_CHUNK_SHAPE_MULTIPLE."""
    store = tmp_path / "p.zv"
    zv.write_points(str(store), np.random.default_rng(0).uniform(0, 200, (2000, 3)).astype("f4"), chunk_shape=20.0,
                    bin_shape=5.0)
    zv.build_pyramid(str(store), factors=[2], chunk_scale_factors=[3])
    edit_attrs(store, "1", lambda a: a["zarr_vectors_level"].update(chunk_shape=[50.0, 60.0, 60.0]))
    codes = {f.code for f in validate(str(store), 5).findings if f.severity == "error"}
    assert "L5_CHUNK_SHAPE_MULTIPLE" in codes and "L5_CROSS_LEVEL_CENTROID" not in codes, codes


def test_the_comparing_task_reads_the_coarse_level_in_runs(tmp_path: Path) -> None:
    """One task compares every metavertex with the link tasks' sums; it reads the coarse cells in runs
    of about max-batch-bytes (a review found a first form skipping levels of some 350,000
    metavertices at the default), so a small limit changes nothing found."""
    store = _small_pyramid(tmp_path / "p.zv", [2])
    chunk = first_chunk(store, "1/vertices")
    _move_metavertex(store, chunk, 0, lambda p: p + np.float32(0.25))
    with dask.config.set({"zarr_vectors.validate.max-batch-bytes": 64, "zarr_vectors.validate.min-batch-bytes": 64}):
        assert [code for code, _ in _centroid_errors(store)] == ["L5_CROSS_LEVEL_CENTROID"]


def test_sums_too_many_for_one_task_leave_the_level_out_with_a_warning(tmp_path: Path) -> None:
    """The sums are held whole, up to four times max-batch-bytes; past that the level is left out,
    and a warning says so."""
    store = _small_pyramid(tmp_path / "p.zv", [2])
    with dask.config.set({"zarr_vectors.validate.max-batch-bytes": 16, "zarr_vectors.validate.min-batch-bytes": 16}):
        result = validate(str(store), 5)
    assert result.ok, result.summary()
    warned = [f.message for f in result.findings if f.code == "L5_CROSS_LEVEL_CENTROID"]
    assert warned == [("level 1's metavertices not compared with their vertices: their 2 partial sums would need "
                       "more than four times 16 bytes in one task (zarr_vectors.validate.max-batch-bytes)")], warned


def test_a_pyramid_that_drops_objects_is_not_held_to_coverage(tmp_path: Path) -> None:
    """Sparsity 2 drops objects: their vertices have no +1 record, and which those are only the
    manifests say; the rule applies where every coarser level keeps every object."""
    store = _small_pyramid(tmp_path / "p.zv", [(2, 2)])  # assert_clean inside
    chunks, _ = _fine_records(store)
    assert len(chunks) < 8  # some vertex has no record: the rule would have fired
    result = validate(str(store), 5)
    assert not any("L5_CROSS_LEVEL_COVERAGE" in rule for rule in result.passed), result.summary()


def test_a_record_out_of_its_cells_range_is_level_3s_alone(tmp_path: Path) -> None:
    """Review: the vertex an out-of-range record was for was also reported as having no record,
    one defect under two rules; level 3 names the record, and which vertex lost it is unknown."""
    pos = np.array([[1, 1, 1], [2, 1, 1], [11, 1, 1], [12, 1, 1], [3, 1, 1], [13, 1, 1], [4, 4, 4], [14, 4, 4]], "f4")
    store = tmp_path / "p.zv"
    zv.write_points(str(store), pos, chunk_shape=20.0, bin_shape=5.0)
    zv.build_pyramid(str(store), factors=[2], cross_level_storage="implicit")  # no -1 to mirror
    array = "0/links/+1/0.0.0"
    chunk = first_chunk(store, array)
    dtype = read_json(store, array)["attributes"]["dtype"]
    rows, starts = decode_ragged_blob(read_payload(store, array, chunk), 2, dtype)
    rows = rows.copy()
    rows[0, 0] = -5
    write_payload(store, array, chunk, encode_ragged_blob([rows[a:b] for a, b in pairwise(starts)], dtype))
    errors = [f for f in validate(str(store), 5).findings if f.severity == "error"]
    assert [f.code for f in errors] == ["L3_LINK_VI_OUT_OF_RANGE"], errors
