"""The reader checks what it relies on: one defect class per test, a typed error naming the node and cell.

Each test writes a valid store with this project's writers, applies one defect with raw
edits (cells through the grid-array API, documents as JSON), and asserts that
``zv.read`` raises the documented error type, that the message names the node (and the
cell, where there is one), and that ``validate`` reports the same store as an error --
the reader and the validator agree (issue 12, classes 5-7).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.encoding import FragmentIndex
from zarr_vectors.errors import (
    EncodingError,
    InconsistentStoreError,
    MetadataError,
    UnsupportedLayoutError,
    ZarrVectorsError,
)
from zarr_vectors.format.paths import format_chunk_key, parse_chunk_key
from zarr_vectors.store.backend import Storage
from zarr_vectors.store.grid import GridArray
from zarr_vectors.store.link_cells import decode_link_cell, encode_link_cell
from zarr_vectors.validation import validate


# ---------------------------------------------------------------------------
# stores (written once) and raw edits
# ---------------------------------------------------------------------------
def _points(path: Path, *, ids: bool) -> None:
    rng = np.random.default_rng(1)
    n = 900
    zv.write_points(
        str(path), rng.uniform(0, 100, (n, 3)).astype("f4"), chunk_shape=25.0, bin_shape=12.5,
        object_ids=rng.integers(0, 9, n) if ids else None,
        attributes={"value": rng.standard_normal(n).astype("f4")},
        object_attributes={"w": rng.standard_normal(9).astype("f4")} if ids else None,
    )  # fmt: skip


def _graph(path: Path, *, shard: bool = False) -> None:
    rng = np.random.default_rng(2)
    pos = rng.uniform(0, 100, (300, 3)).astype("f4")
    near = np.arange(299)  # consecutive ids: many edges inside one chunk (the flat intra array)
    edges = np.concatenate([np.stack([near, near + 1], 1), rng.integers(0, 300, (400, 2))])
    edges = edges[edges[:, 0] != edges[:, 1]]
    zv.write_graph(str(path), pos, edges, chunk_shape=50.0,
                   edge_attributes={"w": rng.standard_normal(len(edges)).astype("f4")})
    if shard:
        zv.shard_store(str(path), 2)


def _mesh(path: Path) -> None:
    side = 20
    xs, ys = np.meshgrid(np.arange(side, dtype="f4"), np.arange(side, dtype="f4"))
    pos = np.stack([xs.ravel() * 5, ys.ravel() * 5, 5 + np.sin(xs.ravel())], 1).astype("f4")
    idx = np.arange(side * side).reshape(side, side)
    a, b, c, d = idx[:-1, :-1].ravel(), idx[:-1, 1:].ravel(), idx[1:, :-1].ravel(), idx[1:, 1:].ravel()
    zv.write_mesh(str(path), pos, np.concatenate([np.stack([a, b, c], 1), np.stack([b, d, c], 1)]), chunk_shape=30.0)


def _skeleton(path: Path) -> None:
    rng = np.random.default_rng(3)
    n = 300
    pos = (np.cumsum(rng.normal(0, 2, (n, 3)), axis=0) + 50).astype("f4")
    parents = np.arange(-1, n - 1)
    parents[150] = -1
    parents[200] = 40  # a branch: an explicit record
    zv.write_skeleton(str(path), pos, parents, chunk_shape=10.0, object_ids=np.repeat([0, 1], n // 2))


def _polylines(path: Path) -> None:
    rng = np.random.default_rng(4)
    walks = (rng.uniform(20, 80, (20, 1, 3)) + np.cumsum(rng.normal(0, 2, (20, 15, 3)), axis=1)).astype("f4")
    zv.write_polylines(str(path), walks.reshape(-1, 3), np.arange(0, 301, 15), chunk_shape=15.0, kind="streamline")


BUILDERS: dict[str, Callable[[Path], None]] = {
    "points": lambda p: _points(p, ids=False),
    "points_ids": lambda p: _points(p, ids=True),
    "graph": _graph,
    "graph_sharded": lambda p: _graph(p, shard=True),
    "mesh": _mesh,
    "skeleton": _skeleton,
    "polylines": _polylines,
}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("read-checks")
    out = {}
    for name, build in BUILDERS.items():
        out[name] = root / f"{name}.zv"
        build(out[name])
    return out


@pytest.fixture
def store(built: dict[str, Path], tmp_path: Path) -> Callable[[str], Path]:
    def copy(name: str) -> Path:
        dst = tmp_path / f"{name}.zv"
        shutil.copytree(built[name], dst)
        return dst

    return copy


def doc(path: Path, node: str) -> dict:
    return json.loads((path / node / "zarr.json").read_text())


def edit(path: Path, node: str, fn: Callable[[dict], object]) -> None:
    d = doc(path, node)
    fn(d)
    (path / node / "zarr.json").write_text(json.dumps(d))


def grid(path: Path, node: str) -> GridArray:
    return GridArray.open(Storage(str(path)), node)


def listed(path: Path, node: str) -> list[tuple[int, ...]]:
    return [parse_chunk_key(k) for k in doc(path, node)["attributes"]["nonempty_chunks"]]


def intra(path: Path) -> str:
    """The flat all-zero delta-0 links array (its cells are bare rows)."""
    return next(f"0/links/0/{p.name}" for p in sorted((path / "0/links/0").iterdir()) if set(p.name) <= set("0._"))


def edit_link_rows(path: Path, node: str, chunk: tuple[int, ...], fn: Callable[[np.ndarray], None]) -> None:
    """Rewrite one links cell's stored rows (flat or blob, write groups kept) after ``fn`` edits them in place."""
    g = grid(path, node)
    width = g.attributes["link_width"] + int(g.attributes["has_perm"])
    flat = node == intra(path)
    dtype = np.dtype("<i8")
    rows, starts = decode_link_cell(g.read_cell(chunk), flat=flat, width=width, dtype=dtype, where=node)
    fn(rows)
    groups = [rows] if flat else [rows[a:b] for a, b in zip(starts[:-1], starts[1:])]
    g.write_cells({chunk: encode_link_cell(groups, flat=flat, dtype=dtype)[0]}, record_presence=False)


def populated(path: Path) -> str:
    """A delta-0 links array with cells: the intra one if it has any."""
    arrays = [f"0/links/0/{p.name}" for p in sorted((path / "0/links/0").iterdir()) if p.is_dir()]
    return next(a for a in sorted(arrays, key=lambda a: a != intra(path)) if listed(path, a))


def drop_vertex_chunk(path: Path, chunk: tuple[int, ...], arrays: tuple[str, ...]) -> None:
    """Remove a chunk's cells and listings from ``arrays`` and keep the level's vertex_count true."""
    for a in arrays:
        (path / grid(path, a).cell_key(chunk)).unlink()
        edit(path, a, lambda d: d["attributes"]["nonempty_chunks"].remove(format_chunk_key(chunk)))
    total = sum(len(grid(path, "0/vertices").read_cell(c)) // 12 for c in listed(path, "0/vertices"))
    edit(path, "0", lambda d: d["attributes"]["zarr_vectors_level"].__setitem__("vertex_count", total))


def read_fails(path: Path, error: type[ZarrVectorsError], *names: str, **kw: object) -> ZarrVectorsError:
    """``zv.read`` raises ``error`` (exactly that type or a subclass) and the message names every ``names``."""
    with pytest.raises(error) as info:
        zv.read(str(path), **kw)
    for name in names:
        assert name in str(info.value), (name, str(info.value))
    return info.value


def validator_errors(path: Path) -> set[str]:
    return {f.code for f in validate(str(path), 5).findings if f.severity == "error"}


# ---------------------------------------------------------------------------
# a cell the presence list names but storage lacks
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(("kind", "node"), [("points", "0/vertices"), ("points", "0/vertex_attributes/value"),
                                            ("mesh", "links"), ("graph", "0/link_attributes/w/0")])
def test_missing_listed_cell_is_refused(store, kind: str, node: str) -> None:
    path = store(kind)
    if node == "links":  # a cross-chunk (blob) links array of the mesh
        node = next(f"0/links/0/{p.name}" for p in sorted((path / "0/links/0").iterdir()) if p.is_dir()
                    and f"0/links/0/{p.name}" != intra(path))
    elif node.startswith("0/link_attributes"):
        node = f"{node}/{intra(path).rsplit('/', 1)[1]}"
    chunk = listed(path, node)[0]
    (path / grid(path, node).cell_key(chunk)).unlink()
    read_fails(path, InconsistentStoreError, grid(path, node).cell_key(chunk), "missing on storage")
    assert "L3_NONEMPTY_MISSING" in validator_errors(path)


def test_missing_inner_chunk_of_a_shard_is_refused(store) -> None:
    """A listed cell whose shard exists but whose index marks it empty (the shard rewritten without it)."""
    path = store("graph_sharded")
    g = grid(path, "0/vertices")
    spec = g.sharding
    chunk = next(c for c in listed(path, "0/vertices")
                 if sum(g.shard_location(d)[0] == g.shard_location(c)[0] for d in listed(path, "0/vertices")) > 1)
    key, entry = g.shard_location(chunk)
    raw = (path / key).read_bytes()
    start, end = spec.index_range()
    index = spec.decode_index(raw[start:end] if end is not None else raw[start:], where=key)
    kept = {}
    for e in spec.present_many(index[None])[1].tolist():
        lo, hi = spec.inner_slice(index, e, where=key, object_size=len(raw))
        if e != entry:
            kept[e] = raw[lo:hi]
    (path / key).write_bytes(spec.encode_shard(kept))
    read_fails(path, InconsistentStoreError, key, f"chunk {format_chunk_key(chunk)}", "shard index marks it empty")
    assert "L3_NONEMPTY_MISSING" in validator_errors(path)


def test_cell_and_its_listing_both_removed_is_refused_by_the_family_count(store) -> None:
    """Deleting a links cell and its nonempty_chunks entry leaves num_physical_records to disagree."""
    path = store("mesh")
    node = intra(path)
    chunk = listed(path, node)[0]
    (path / grid(path, node).cell_key(chunk)).unlink()
    key = format_chunk_key(chunk)
    edit(path, node, lambda d: d["attributes"]["nonempty_chunks"].remove(key))
    for attr in ("0/link_fragments",):
        (path / grid(path, attr).cell_key(chunk)).unlink()
        edit(path, attr, lambda d: d["attributes"]["nonempty_chunks"].remove(key))
    read_fails(path, InconsistentStoreError, "0/links/0", "num_physical_records")
    assert "L3_FAMILY_PHYSICAL_COUNT" in validator_errors(path)


# ---------------------------------------------------------------------------
# link records naming rows that do not exist
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(("kind", "value"), [("graph", "past"), ("graph", -1), ("mesh", "past"), ("skeleton", "past")])
def test_out_of_range_link_vertex_index_is_refused(store, kind: str, value: object) -> None:
    """A graph edge, a mesh face or a skeleton parent naming a row past its chunk's vertex cell (or negative)."""
    path = store(kind)
    node = populated(path)
    chunk = listed(path, node)[0]
    rows = len(grid(path, "0/vertices").read_cell(chunk)) // 12
    perm = int(doc(path, node)["attributes"]["has_perm"])

    def corrupt(r: np.ndarray) -> None:  # stored endpoint 0 lies in the cell's own chunk
        r[0, perm] = rows if value == "past" else value

    edit_link_rows(path, node, chunk, corrupt)
    err = read_fails(path, InconsistentStoreError, f"{node} cell {format_chunk_key(chunk)} (row 0)",
                     f"chunk {format_chunk_key(chunk)}")
    if value == "past":
        assert f"has {rows} rows" in str(err)
    assert "L3_LINK_VI_OUT_OF_RANGE" in validator_errors(path)


def test_endpoint_in_a_chunk_without_vertices_is_refused(store) -> None:
    """A record whose endpoint chunk has no vertex cell would silently vanish from the answer."""
    path = store("graph")
    shutil.rmtree(path / "0/object_index")  # else its manifests name the chunk first
    edit(path, "0", lambda d: d["attributes"]["zarr_vectors_level"].__setitem__("arrays_present", [
        a for a in d["attributes"]["zarr_vectors_level"].get("arrays_present", []) if a != "object_index"]))
    node = intra(path)
    chunk = listed(path, node)[0]
    drop_vertex_chunk(path, chunk, ("0/vertices", "0/vertex_fragments"))
    with pytest.raises(InconsistentStoreError) as info:
        zv.read(str(path))
    assert "0/links/0/" in str(info.value) and "no vertex cell" in str(info.value)
    assert "L3_LINK_ENDPOINT_CHUNK_MISSING" in validator_errors(path)


# ---------------------------------------------------------------------------
# presence lists: listed twice, malformed
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("node", ["0/vertices", "links"])
def test_duplicated_nonempty_chunks_key_is_refused(store, node: str) -> None:
    path = store("graph")
    node = intra(path) if node == "links" else node
    key = doc(path, node)["attributes"]["nonempty_chunks"][0]
    edit(path, node, lambda d: d["attributes"]["nonempty_chunks"].insert(1, key))
    read_fails(path, InconsistentStoreError, f"{node}/zarr.json#/attributes/nonempty_chunks/1", key, "listed twice")
    assert "L2_NONEMPTY_CHUNKS" in validator_errors(path)


def test_a_presence_list_longer_than_its_grid_is_refused_before_it_is_parsed(store) -> None:
    """Regression (hunt): a list of 4e6 keys for a 4x4x4 array took readers to 3.7 GB and the
    validator 43 s and 1,999,936 findings before saying the keys lie outside the array."""
    path = store("graph")
    shape = doc(path, "0/vertices")["shape"]
    cells = int(np.prod(shape))
    edit(path, "0/vertices", lambda d: d["attributes"].__setitem__(
        "nonempty_chunks", [f"{i}.{j}.0" for i in range(cells + 1) for j in range(2)]))
    # the first wrong entry among the first cells + 1 is named, as for a short list
    read_fails(path, MetadataError, "0/vertices/zarr.json", "nonempty_chunks/", "lies outside the array")
    found = [f.message for f in zv.validate(str(path), 2).findings if f.code == "L2_NONEMPTY_CHUNKS"]
    assert any(f"lists {2 * cells + 2} cells, more than the {cells} of the array's shape" in e for e in found)
    assert 2 <= len(found) <= cells + 2, found  # not one finding per listed key


@pytest.mark.parametrize(
    ("entry", "pointer"),
    [(5, "/0"), ("1..2", "/0"), ("..", "/0"), ("0.0", "/0"), ("01.0.0", "/0"), ("0.0.0.0", "/0"),
     ("999.0.0", "/0"), ("99999999999999999999.0.0", "/0"), ("every", ""), ({"0.0.0": 1}, ""), (None, "")],
    ids=["int", "empty-component", "dotdot", "short", "leading-zero", "long", "outside-grid", "past-int64", "string",
         "dict", "null"],
)
def test_malformed_nonempty_chunks_entry_is_a_metadata_error(store, entry: object, pointer: str) -> None:
    path = store("graph")
    node = intra(path)

    def put(d: dict) -> None:
        if pointer:
            d["attributes"]["nonempty_chunks"][0] = entry
        else:
            d["attributes"]["nonempty_chunks"] = entry

    edit(path, node, put)
    err = read_fails(path, MetadataError, node)
    assert (err.file, err.pointer) == (f"{node}/zarr.json", "/attributes/nonempty_chunks" + pointer)
    assert validator_errors(path) & {"L2_NONEMPTY_CHUNKS", "L1_JSON_ENVELOPE", "L2_ARRAY_ATTRIBUTES"}, entry


# ---------------------------------------------------------------------------
# counts that disagree with the rows read
# ---------------------------------------------------------------------------
def test_rows_appended_to_a_vertex_cell_are_refused(store) -> None:
    """The level's vertex_count (whole read) and the attribute rows (bbox read) disagree with the rows decoded."""
    path = store("points")
    g = grid(path, "0/vertices")
    chunk = listed(path, "0/vertices")[0]
    payload = g.read_cell(chunk)
    g.write_cells({chunk: payload + payload[:12]}, record_presence=False)
    read_fails(path, InconsistentStoreError, "0/zarr.json", "vertex_count")
    box = [list(np.asarray(chunk) * 25.0), list(np.asarray(chunk) * 25.0 + 1)]
    read_fails(path, InconsistentStoreError, "0/vertex_attributes/value", format_chunk_key(chunk), bbox=box)
    assert {"L3_VERTEX_COUNT", "L3_ATTRIBUTE_ROWS"} <= validator_errors(path)


def _same_count_cells(path: Path) -> tuple[tuple[int, ...], tuple[int, ...]]:
    g = grid(path, "0/vertices")
    seen: dict[int, tuple[int, ...]] = {}
    for c in listed(path, "0/vertices"):
        n = len(g.read_cell(c))
        if n in seen:
            return seen[n], c
        seen[n] = c
    raise AssertionError("the store has no two vertex cells of one size")


def test_vertex_cells_swapped_with_as_many_rows_are_refused(store) -> None:
    """Every count still agrees; only the positions tell that the cells hold another place's points."""
    path = store("points")
    a, b = _same_count_cells(path)
    g = grid(path, "0/vertices")
    g.write_cells({a: g.read_cell(b), b: g.read_cell(a)}, record_presence=False)
    first = min(a, b)
    read_fails(path, InconsistentStoreError, f"0/vertices cell {format_chunk_key(first)}", "outside the cell's chunk")
    box = [list(np.asarray(b) * 25.0), list(np.asarray(b) * 25.0 + 1)]
    read_fails(path, InconsistentStoreError, f"0/vertices cell {format_chunk_key(b)}", bbox=box)
    findings = [f for f in validate(str(path), 4).findings if f.code == "L4_POINT_OUTSIDE_BIN"]
    assert {f.cell for f in findings} == {format_chunk_key(a), format_chunk_key(b)}
    assert all("outside the cell's chunk" in f.message for f in findings)


def test_vertex_cells_swapped_are_caught_without_bins(store) -> None:
    """With no vertex_fragments to name bins, the chunk alone still places every vertex."""
    path = store("points")
    a, b = _same_count_cells(path)
    g = grid(path, "0/vertices")
    g.write_cells({a: g.read_cell(b), b: g.read_cell(a)}, record_presence=False)
    shutil.rmtree(path / "0/vertex_fragments")
    assert "L4_POINT_OUTSIDE_BIN" in {f.code for f in validate(str(path), 4).findings}


def test_a_nan_row_does_not_hide_a_swapped_cell(store) -> None:
    """One NaN coordinate in each swapped cell: the cell's extent ignores it (NaN is L3's finding)."""
    path = store("points")
    a, b = _same_count_cells(path)
    g = grid(path, "0/vertices")
    rows = {c: np.frombuffer(g.read_cell(c), "<f4").reshape(-1, 3).copy() for c in (a, b)}
    for c in (a, b):
        rows[c][0, 0] = np.nan
    g.write_cells({a: rows[b].tobytes(), b: rows[a].tobytes()}, record_presence=False)
    read_fails(path, InconsistentStoreError, "outside the cell's chunk")
    assert "L4_POINT_OUTSIDE_BIN" in validator_errors(path)
    assert "L3_NONFINITE_VERTEX" in {f.code for f in validate(str(path), 4).findings}


def test_a_null_coarsening_method_is_an_uncoarsened_level_to_both(store) -> None:
    """JSON null (the reference may write it) reads as no coarsening in the reader as in the validator."""
    path = store("points")
    a, b = _same_count_cells(path)
    g = grid(path, "0/vertices")
    g.write_cells({a: g.read_cell(b), b: g.read_cell(a)}, record_presence=False)
    edit(path, "0", lambda d: d["attributes"]["zarr_vectors_level"].__setitem__("coarsening_method", None))
    read_fails(path, InconsistentStoreError, "outside the cell's chunk")
    assert "L4_POINT_OUTSIDE_BIN" in validator_errors(path)


@pytest.mark.parametrize("name", ["points_ids", "graph", "mesh", "skeleton", "polylines"])
def test_a_vertex_moved_out_of_its_chunk_is_refused_for_every_kind(store, name: str) -> None:
    """Regression (hunt): in a point cloud with object ids or a graph, a cell's vertices moved far away
    read back whole while a bbox read of where they lie missed them, and the validator passed it."""
    path = store(name)
    g = grid(path, "0/vertices")
    dtype = np.dtype(doc(path, "0/vertices")["attributes"].get("dtype", "float32")).newbyteorder("<")
    cell = listed(path, "0/vertices")[0]
    rows = np.frombuffer(g.read_cell(cell), dtype).reshape(-1, 3).copy()
    rows[:] = 1e6  # far outside every chunk of the store
    g.write_cells({cell: rows.tobytes()}, record_presence=False)
    read_fails(path, InconsistentStoreError, f"0/vertices cell {format_chunk_key(cell)}", "outside the cell's chunk")
    findings = [f for f in validate(str(path), 4).findings if f.code == "L4_POINT_OUTSIDE_BIN"]
    assert [f.cell for f in findings] == [format_chunk_key(cell)], findings
    assert "outside the cell's chunk (row 0" in findings[0].message  # no bins named where fragments are not bins


def test_placement_is_checked_where_the_format_states_it(store) -> None:
    """Every kind's uncoarsened level holds its vertices in their chunks; only point clouds without
    object ids hold them in the bins their fragments stand for."""
    from zarr_vectors.format.points import chunk_placement_checked, placement_checked

    assert chunk_placement_checked(1, "none", 3, 3) and chunk_placement_checked(1, None, 3, 3)
    assert not chunk_placement_checked(1, "grid_metavertex", 3, 3) and not chunk_placement_checked(1, None, 5, 3)
    assert chunk_placement_checked(0, "manual", 3, 3)  # level 0 is never coarsened, whatever its label
    assert chunk_placement_checked(0, "none", 4, 3)  # keys chunked along an attribute axis too

    assert placement_checked(True, False, 1, "none", 3, 3) and placement_checked(True, False, 1, None, 3, 3)
    assert not placement_checked(True, True, 1, "none", 3, 3)
    assert not placement_checked(True, False, 1, "grid_metavertex", 3, 3)
    assert not placement_checked(True, False, 1, "None", 3, 3)  # a string, not JSON null
    assert placement_checked(True, False, 0, "None", 3, 3)
    assert not placement_checked(False, False, 0, "none", 3, 3)
    assert not placement_checked(True, False, 0, "none", 4, 3)  # bins: only where every key axis is a position


@pytest.mark.parametrize("name", ["points", "graph"])
def test_level_0_is_uncoarsened_whatever_its_label_says(store, name: str) -> None:
    """Regression (hunt): level 0 labelled ``coarsening_method: "manual"`` turned the placement check
    off, so a vertex moved out of its cell passed level 5 and a bbox read of where it lay missed it."""
    path = store(name)
    g = grid(path, "0/vertices")
    cell = listed(path, "0/vertices")[-1]
    rows = np.frombuffer(g.read_cell(cell), "<f4").reshape(-1, 3).copy()
    rows[0] = 0.5  # in chunk 0.0.0, which the last cell is not
    g.write_cells({cell: rows.tobytes()}, record_presence=False)
    edit(path, "0", lambda d: d["attributes"]["zarr_vectors_level"].__setitem__("coarsening_method", "manual"))
    read_fails(path, InconsistentStoreError, f"0/vertices cell {format_chunk_key(cell)}", "outside the cell's chunk")
    assert "L4_POINT_OUTSIDE_BIN" in validator_errors(path)


def _chunk_by_attribute(path: Path) -> None:
    """Make level 0 of a point cloud without object ids attribute-chunked (format.md §4) with one
    attribute value: every grid array gains a leading key axis, its cells move under ``c/0/``."""
    for node in ("0/vertices", "0/vertex_fragments", "0/vertex_attributes/value"):
        def lead(d: dict) -> None:
            d["shape"] = [1, *d["shape"]]
            d["chunk_grid"]["configuration"]["chunk_shape"] = [1, *d["chunk_grid"]["configuration"]["chunk_shape"]]
            d["attributes"]["nonempty_chunks"] = ["0." + k for k in d["attributes"]["nonempty_chunks"]]
        edit(path, node, lead)
        cells = path / node / "c"
        cells.rename(path / node / "c0")
        cells.mkdir()
        (path / node / "c0").rename(cells / "0")
    edit(path, "0", lambda d: d["attributes"]["zarr_vectors_level"].update(
        chunk_dims=["gene", "x", "y", "z"], chunk_attribute_name="gene", chunk_attribute_values=["a"]))


def test_an_attribute_chunked_level_is_read_by_box_and_its_placement_checked(built, store) -> None:
    """Regression (hunt): a bbox read of an attribute-chunked level (keys lead with the attribute's
    index) crashed with numpy's broadcast error, and its vertices' placement was never checked:
    a cell moved into another chunk passed level 5 and read back."""
    box = [[0, 0, 0], [40, 30, 60]]
    expected = zv.read(str(built["points"]), bbox=box)
    path = store("points")
    _chunk_by_attribute(path)
    assert validator_errors(path) == set()
    got = zv.read(str(path), bbox=box)
    assert len(got.positions) == len(expected.positions) > 0
    np.testing.assert_array_equal(np.sort(got.positions, axis=0), np.sort(expected.positions, axis=0))

    g = grid(path, "0/vertices")
    cell = listed(path, "0/vertices")[-1]
    g.write_cells({cell: (np.frombuffer(g.read_cell(cell), "<f4") - 25.0).tobytes()}, record_presence=False)
    read_fails(path, InconsistentStoreError, f"0/vertices cell {format_chunk_key(cell)}", "outside the cell's chunk")
    assert "L4_POINT_OUTSIDE_BIN" in validator_errors(path)


def test_a_vertex_on_the_chunk_face_is_within_the_tolerance() -> None:
    """float32 positions round onto (or a hair past) the upper face; NaN is its own finding (L3)."""
    from zarr_vectors.format.points import PLACEMENT_TOLERANCE, cells_outside_chunks

    tol = PLACEMENT_TOLERANCE * 1000.0
    chunk = np.array([[3, 0, 0]])
    for x, outside in [(750.0, False), (1000.0 + tol / 2, False), (1000.0 + 2 * tol, True), (750.0 - 2 * tol, True),
                       (float("nan"), False)]:
        pos = np.array([[800.0, 1.0, 1.0], [x, 1.0, 1.0]])
        got = cells_outside_chunks(pos, np.array([2]), chunk, np.array([250.0, 250.0, 250.0]))
        assert got.tolist() == ([0] if outside else []), x
    assert cells_outside_chunks(np.zeros((0, 3)), np.array([0]), chunk, np.full(3, 250.0)).tolist() == []


def test_rows_appended_under_a_tiling_claim_are_refused(store) -> None:
    """A bbox read of an object level: the FragmentIndex no longer tiles the cell the level says it tiles."""
    path = store("points_ids")
    edit(path, "0", lambda d: d["attributes"]["zarr_vectors_level"].__setitem__("fragments_tile", True))
    shutil.rmtree(path / "0/vertex_attributes")
    edit(path, "0", lambda d: d["attributes"]["zarr_vectors_level"].__setitem__("arrays_present", [
        a for a in d["attributes"]["zarr_vectors_level"].get("arrays_present", []) if a != "vertex_attributes"]))
    g = grid(path, "0/vertices")
    chunk = listed(path, "0/vertices")[0]
    payload = g.read_cell(chunk)
    frags = FragmentIndex.decode(grid(path, "0/vertex_fragments").read_cell(chunk))
    assert frags.is_tiling(len(payload) // 12)
    g.write_cells({chunk: payload + payload[:12]}, record_presence=False)
    box = [list(np.asarray(chunk) * 25.0), list(np.asarray(chunk) * 25.0 + 1)]
    read_fails(path, InconsistentStoreError, f"0/vertex_fragments cell {format_chunk_key(chunk)}", "fragments_tile",
               bbox=box)
    assert "L3_FRAGMENTS_TILE" in validator_errors(path)


def test_link_attribute_rows_must_match_their_records(store) -> None:
    path = store("graph")
    node = f"0/link_attributes/w/0/{intra(path).rsplit('/', 1)[1]}"
    chunk = listed(path, node)[0]
    g = grid(path, node)
    g.write_cells({chunk: g.read_cell(chunk)[:-4]}, record_presence=False)
    read_fails(path, InconsistentStoreError, f"{node} cell {format_chunk_key(chunk)}", "attribute rows")
    assert "L3_LINK_ATTRIBUTE_ROWS" in validator_errors(path)


def test_manifest_naming_a_chunk_without_vertices_is_refused(store) -> None:
    path = store("points_ids")
    chunk = listed(path, "0/vertices")[0]
    drop_vertex_chunk(path, chunk, ("0/vertices", "0/vertex_fragments", "0/vertex_attributes/value"))
    read_fails(path, InconsistentStoreError, "0/object_index/manifests", format_chunk_key(chunk), "no vertex cell")
    assert "L3_MANIFEST_CHUNK_MISSING" in validator_errors(path)


def test_object_attribute_rows_must_match_the_object_index(store) -> None:
    path = store("points_ids")
    node = "0/object_attributes/w"
    edit(path, node, lambda d: (d.__setitem__("shape", [d["shape"][0] - 1]),
                                d["attributes"].__setitem__("shape", [d["shape"][0]])))
    read_fails(path, InconsistentStoreError, node, "the object index has 9")
    # the validator has no rule for object_attributes yet (their shape, their chunks): not asserted


# ---------------------------------------------------------------------------
# corrupt cells: typed errors naming the cell
# ---------------------------------------------------------------------------
def test_intra_links_cell_written_as_a_blob_is_refused(store) -> None:
    """Bytes that decode as more flat rows than the attribute cell holds (was an IndexError in read.py)."""
    from zarr_vectors.encoding import encode_ragged_blob

    path = store("graph")
    node = intra(path)
    chunk = listed(path, node)[0]
    g = grid(path, node)
    rows, _ = decode_link_cell(g.read_cell(chunk), flat=True, width=2, dtype=np.dtype("<i8"), where=node)
    g.write_cells({chunk: encode_ragged_blob([rows], np.dtype("<i8"))}, record_presence=False)
    with pytest.raises((InconsistentStoreError, EncodingError)) as info:
        zv.read(str(path))
    assert format_chunk_key(chunk) in str(info.value) and "0/l" in str(info.value)
    assert validator_errors(path) & {"L3_LINK_ENCODING", "L3_LINK_CELL_BYTES"}


def test_corrupt_object_attributes_chunk_is_an_encoding_error(store) -> None:
    """A zstd chunk that does not decode (was the codec's RuntimeError)."""
    path = store("points_ids")
    chunk = path / "0/object_attributes/w/c/0"
    chunk.write_bytes(chunk.read_bytes()[:-5] + b"\x00" * 5)
    read_fails(path, EncodingError, "0/object_attributes/w/c/0")
    # the validator does not read object_attributes chunks yet: not asserted


def test_corrupt_skeleton_fragment_index_names_the_cell(store) -> None:
    path = store("skeleton")
    chunk = listed(path, "0/vertex_fragments")[0]
    g = grid(path, "0/vertex_fragments")
    g.write_cells({chunk: g.read_cell(chunk)[:-3]}, record_presence=False)
    read_fails(path, EncodingError, f"0/vertex_fragments cell {format_chunk_key(chunk)}")
    assert "L3_FRAGMENT_INDEX_UNDECODABLE" in validator_errors(path)


# ---------------------------------------------------------------------------
# spec rules: zv_array discriminators, required capabilities, object_index layout
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("node", ["0/vertices", "0/vertex_attributes/value", "0/object_index", "0/object_attributes/w"])
def test_unknown_zv_array_is_refused(store, node: str) -> None:
    path = store("points_ids")
    edit(path, node, lambda d: d["attributes"].__setitem__("zv_array", "vertices_v7"))
    err = read_fails(path, UnsupportedLayoutError, node, "vertices_v7")
    assert err.pointer == "/attributes/zv_array"
    assert "L1_ZV_ARRAY_UNKNOWN" in validator_errors(path)


@pytest.mark.parametrize(("kind", "node", "value"), [
    ("points_ids", "0/vertex_fragments", "vertices"), ("points", "0/vertex_attributes/value", "fragment_attribute"),
    ("graph", "links", "link_attribute"), ("graph", "0/links/0", "link_attribute_family"),
])  # fmt: skip
def test_zv_array_of_another_path_is_refused(store, kind: str, node: str, value: str) -> None:
    path = store(kind)
    node = intra(path) if node == "links" else node
    edit(path, node, lambda d: d["attributes"].__setitem__("zv_array", value))
    err = read_fails(path, MetadataError, node, repr(value))
    assert not isinstance(err, UnsupportedLayoutError) and err.pointer == "/attributes/zv_array"
    assert "L1_ZV_ARRAY_WRONG_PATH" in validator_errors(path)


def test_missing_zv_array_is_refused(store) -> None:
    path = store("points")
    edit(path, "0/vertices", lambda d: d["attributes"].pop("zv_array"))
    read_fails(path, MetadataError, "0/vertices", "no zv_array")
    assert "L1_ZV_ARRAY_MISSING" in validator_errors(path)


def test_unknown_required_capability_is_refused(store) -> None:
    path = store("points")
    edit(path, "", lambda d: d["attributes"]["zarr_vectors"].__setitem__(
        "required_capabilities", ["multiscale_links", "time_slices", "draco"]))
    err = read_fails(path, UnsupportedLayoutError, "['draco', 'time_slices']")
    assert (err.file, err.pointer) == ("zarr.json", "/attributes/zarr_vectors/required_capabilities")
    # the validator has no rule for required_capabilities yet (docs/decisions.md D9): not asserted here


def test_the_root_is_refused_before_the_level_read_beside_it(store) -> None:
    """The level's walk runs beside the root's read; a bad root still decides the error, and
    nothing of the level (here: not even its document) gets used."""
    path = store("points")
    edit(path, "", lambda d: d["attributes"]["zarr_vectors"].__setitem__("required_capabilities", ["draco"]))
    (path / "0" / "zarr.json").unlink()
    read_fails(path, UnsupportedLayoutError, "['draco']")


def test_the_root_error_comes_before_an_error_of_the_walk_beside_it(store, tmp_path) -> None:
    """A root this reader must refuse is what the user hears about, even when the level's
    walk (run beside the root's read) hit a hostile node of its own."""
    path = store("points")
    edit(path, "", lambda d: d["attributes"]["zarr_vectors"].__setitem__("required_capabilities", ["draco"]))
    outside = tmp_path / "outside.json"
    outside.write_text("{}")
    (path / "0" / "vertices" / "zarr.json").unlink()
    (path / "0" / "vertices" / "zarr.json").symlink_to(outside)
    read_fails(path, UnsupportedLayoutError, "['draco']")


def test_known_required_capability_reads(store) -> None:
    path = store("points")
    edit(path, "", lambda d: d["attributes"]["zarr_vectors"].__setitem__("required_capabilities", ["fragment_index"]))
    assert len(zv.read(str(path))) == 900


def test_missing_object_index_layout_is_refused(store) -> None:
    path = store("points_ids")
    edit(path, "0/object_index", lambda d: d["attributes"].pop("layout"))
    err = read_fails(path, UnsupportedLayoutError, "0/object_index", "no layout")
    assert (err.file, err.pointer) == ("0/object_index/zarr.json", "/attributes/layout")
    assert "L2_OBJECT_INDEX_LAYOUT" in validator_errors(path)


# ---------------------------------------------------------------------------
# the checks refuse nothing valid
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_valid_stores_read_whole_and_in_a_box(built: dict[str, Path], kind: str) -> None:
    whole = zv.read(str(built[kind]))
    assert len(whole) > 0
    part = zv.read(str(built[kind]), bbox=[[0, 0, 0], [40, 40, 40]])
    assert len(part) <= len(whole)


def test_cells_far_apart_are_still_ranked_exactly() -> None:
    """Endpoint lookup stays exact when the read cells span more than an int64 linear index (sparse huge grid)."""
    from zarr_vectors.read import VertexTable

    cells = [(-5, 0, 0), (0, 0, 0), (0, 2**40, 7), (2**61, 1, 1)]
    table = VertexTable(cells, {}, np.zeros((0, 3), "f4"), {}, None, None, None)
    query = np.array([(0, 0, 0), (2**61, 1, 1), (0, 2**40, 7), (0, 2**40, 8), (-5, 0, 0), (3, 3, 3), (2**62, 0, 0)])
    np.testing.assert_array_equal(table.cell_rank(query), [1, 3, 2, -1, 0, -1, -1])


@pytest.mark.parametrize(("kind", "family"), [("graph", "links"), ("points_ids", "object_index")])
def test_a_family_arrays_present_lists_but_the_level_lacks_is_refused(store, kind: str, family: str) -> None:
    """Regression (silent wrong answer, found by the fuzzer): a deleted links/ read as no edges,
    a deleted object_index/zarr.json as no objects, though the level document lists them."""
    path = store(kind)
    assert family in doc(path, "0")["attributes"]["zarr_vectors_level"]["arrays_present"]
    if family == "links":
        shutil.rmtree(path / "0" / "links")
    else:
        (path / "0" / family / "zarr.json").unlink()
    read_fails(path, InconsistentStoreError, "arrays_present", family)
    assert validator_errors(path)


@pytest.mark.parametrize("keys", [
    ["0.0.0", "-1.10.3", "12.0.-7"], [], ["99999999999999999999.0.0"], ["1..2"], [5], ["0.0"], ["01.0.0"],
    ["0.0.0,1.1.1"], ["0.0.0", "1.1.1,"], ["+1.0.0"], [" 1.0.0"], ["-0.0.0"], ["0.0.0\n"], ["١.0.0"],
])  # fmt: skip
def test_parse_chunk_keys_accepts_exactly_what_parse_chunk_key_accepts(keys: list) -> None:
    """The list parser the reader uses (one regex for the list) agrees with the key-by-key rule."""
    from zarr_vectors.errors import InputError
    from zarr_vectors.format.paths import parse_chunk_keys

    try:
        expected = np.array([parse_chunk_key(k, 3) for k in keys], dtype=np.int64).reshape(-1, 3)
    except InputError as exc:
        with pytest.raises(InputError, match=re.escape(str(exc))):
            parse_chunk_keys(keys, 3)
        return
    np.testing.assert_array_equal(parse_chunk_keys(keys, 3), expected)


@pytest.mark.parametrize(("node", "pointer", "value"), [
    ("0/vertices", "dtype", 5e-324),  # not a data type
    ("0/vertex_attributes/value", "row_shape", -1),  # not a shape
    ("0/vertex_attributes/value", "row_shape", {"0": None}),
])  # fmt: skip
def test_documents_read_in_the_level_walk_are_read_strictly(store, node: str, pointer: str, value: object) -> None:
    """Regression (untyped TypeError, found by the full fuzz corpus): the reader's one-walk
    snapshot of a level handed documents on without the per-node format rules read_node applies."""
    path = store("points_ids")
    edit(path, node, lambda d: d["attributes"].__setitem__(pointer, value))
    err = read_fails(path, MetadataError, node)
    assert err.pointer == f"/attributes/{pointer}"


def test_a_hostile_nesting_in_a_level_walk_is_a_metadata_error(store) -> None:
    """Regression (RecursionError out of the snapshot's group test): 10^5 nested lists in a node document."""
    path = store("points_ids")
    node = path / "0" / "object_index" / "zarr.json"
    text = node.read_text()
    node.write_text(text.replace('"node_type": "group"', '"node_type": ' + "[" * 100000 + "]" * 100000, 1))
    read_fails(path, MetadataError, "object_index")


@pytest.mark.parametrize("which", ["family", "array"])
def test_a_links_node_without_its_zarr_json_is_refused(store, which: str) -> None:
    """Regression (silent wrong answer, found by the full fuzz corpus): deleting
    links/0/zarr.json read a skeleton back with 216 of its 236 edges."""
    path = store("graph")
    family = path / "0" / "links" / "0"
    target = family if which == "family" else next(p for p in sorted(family.iterdir()) if p.is_dir())
    (target / "zarr.json").unlink()
    read_fails(path, InconsistentStoreError, "links/0", "zarr.json")
    assert validator_errors(path)


def test_a_store_whose_writer_was_killed_before_its_level_was_finished_reads_as_nothing(tmp_path):
    """Regression (hunt): a write killed before its last step leaves level 0's document as the
    writer first wrote it (no families, 0 vertices) beside cells already on disk.  ``read`` and
    ``zv export`` returned 0 vertices, ``zv info`` printed "0 vertices", and a store killed early
    passed level-5 validation.  A level whose document lists no vertices is now unfinished:
    read refuses it, info says so and validation fails at level 2."""
    import os
    import subprocess
    import sys
    import textwrap

    from pipeline.summary import levels_summary

    url = tmp_path / "killed.zv"
    child = textwrap.dedent(f"""
        import os
        import numpy as np
        import zarr_vectors as zv
        from zarr_vectors import reconcile
        reconcile.finish_level = lambda *args, **kwargs: os._exit(9)  # killed at the last step
        pos = np.random.default_rng(0).uniform(0, 100, (2000, 3))
        zv.write_points({str(url)!r}, pos, chunk_shape=25.0, object_ids=np.arange(2000) % 7)
    """)
    run = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 9, run.stderr[-2000:]
    assert any(name.isdigit() for name in os.listdir(url / "0/vertices/c"))  # cells were written
    with pytest.raises(InconsistentStoreError, match=r"0/zarr\.json: level 0 is not finished \(its arrays_present does "
                                                     "not list 'vertices'\\): a write still running"):
        zv.read(str(url))
    assert levels_summary(zv.open_store(str(url)))[0].startswith("level 0: NOT FINISHED")
    report = zv.validate(str(url), level=5)
    assert not report.ok
    assert any(f.code == "L2_ARRAYS_PRESENT" and "does not list 'vertices'" in f.message for f in report.findings)


@pytest.mark.parametrize("chunk_shape", [[25.0, 25.0], [25.0]])
def test_a_level_chunk_shape_of_another_rank_is_a_metadata_error(store, chunk_shape: list) -> None:
    """Regression (hunt): the level document's per-axis members were read without the root's axes, so
    a 2-entry chunk_shape in a 3-D store reached numpy (a broadcast ValueError in read, an IndexError
    in the pyramid) and the commands failed as a crashed stage, exit 1."""
    path = store("points")
    edit(path, "0", lambda d: d["attributes"]["zarr_vectors_level"].__setitem__("chunk_shape", chunk_shape))
    read_fails(path, MetadataError, f"chunk_shape has {len(chunk_shape)} entries, sid_ndim is 3")
    with pytest.raises(MetadataError, match="0/zarr.json#/attributes/zarr_vectors_level/chunk_shape"):
        zv.build_pyramid(str(path), factors=[2])


@pytest.mark.parametrize("damage", ["fragment_named_twice", "row_in_no_fragment"])
def test_a_level_0_vertex_of_no_object_or_of_two_is_refused(store, damage: str) -> None:
    """Regression (hunt): at level 0 each vertex belongs to one object; a manifest naming another
    object's fragment made ``--object-id`` return that object's vertices, and a row left out of
    every fragment read back with object id -1."""
    from zarr_vectors.conformance.rawfiles import ZSTD
    from zarr_vectors.encoding import decode_manifest, encode_manifest, frame_items, unframe_items

    path = store("points_ids")
    if damage == "fragment_named_twice":
        cell = path / "0/object_index/manifests/c/0"
        items = unframe_items(ZSTD.decode(cell.read_bytes()))
        runs = [[(b.chunk, b.fragments.tolist()) for b in decode_manifest(row, 3)] for row in items]
        runs[1] = runs[1] + runs[0][:1]  # object 1 also names object 0's first fragment
        cell.write_bytes(ZSTD.encode(frame_items([encode_manifest(r, 3) for r in runs])))
    else:
        edit(path, "0", lambda d: d["attributes"]["zarr_vectors_level"].pop("fragments_tile"))
        g = grid(path, "0/vertex_fragments")
        chunk = listed(path, "0/vertex_fragments")[0]
        parts = FragmentIndex.decode(g.read_cell(chunk)).fragment_rows()
        parts[0] = parts[0][:-1]
        g.write_cells({chunk: FragmentIndex.from_fragments(parts).encode()}, record_presence=False)
    owners = "2 objects" if damage == "fragment_named_twice" else "0 objects"
    read_fails(path, InconsistentStoreError, owners, "at level 0 each vertex belongs to one")
