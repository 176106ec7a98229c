"""``build_pyramid``: every kind validates at level 5 and reads; metavertices, manifests and
cross-level records agree with level 0 (recomputed here independently); anchors across
differing per-level chunk shapes and negative chunk coordinates; storage modes and depth;
codecs and object attributes carried; rebuilds give the same bytes; a LocalCluster build
gives the bytes of a local one; the ``zv pyramid`` command."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from file_tree import tree

import zarr_vectors as zv
from zarr_vectors.errors import InternalError
from zarr_vectors.format.coarsen import BinGrid, centroids_in_bins, select_objects
from zarr_vectors.format.crosslevel import fragment_sequences, object_metavertices
from zarr_vectors.format.links import CrossLevelRecords, partition_records_by_offset, place_cross_level
from zarr_vectors.pyramid.objects import ObjectPlan, write_objects
from zarr_vectors.store.link_family import link_family_policy
from zarr_vectors.store.link_read import read_links
from zarr_vectors.store.object_index import read_object_index
from zarr_vectors.validation import validate

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------
def level_cells(store: Path, number: int) -> dict[tuple[int, ...], np.ndarray]:
    """Rows of every vertex cell of a level, read through the grid arrays (not the reader)."""
    lvl = zv.open_store(str(store)).level(number)
    grid = lvl.array("vertices")
    dtype = np.dtype(grid.attributes["dtype"])
    chunks = sorted(grid.nonempty_chunk_coords())
    return {c: np.frombuffer(p, dtype=dtype).reshape(-1, 3) for c, p in zip(chunks, grid.read_cells(chunks))}


def endpoint_positions(cells: dict, chunks: np.ndarray, vi: np.ndarray) -> np.ndarray:
    return np.asarray([cells[tuple(c)][v] for c, v in zip(chunks.tolist(), vi.tolist())], dtype=np.float64)


def manifests(store: Path, number: int) -> dict[int, list[tuple[tuple[int, ...], int]]]:
    index = read_object_index(zv.open_store(str(store)).level(number))
    out: dict[int, list] = {int(i): [] for i in index.ids}
    for r, c, f in zip(index.block_row.tolist(), index.block_chunk.tolist(), index.block_fragment.tolist()):
        out[int(index.ids[r])].append((tuple(c), f))
    return out


def bins_of(pos: np.ndarray, bin_shape: float) -> np.ndarray:
    return np.floor(np.asarray(pos, dtype=np.float64) / bin_shape).astype(np.int64)


def centroid_table(pos: np.ndarray, bin_shape: float) -> dict[tuple[int, ...], np.ndarray]:
    b = bins_of(pos, bin_shape)
    uniq, inv = np.unique(b, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    sums = np.zeros((len(uniq), pos.shape[1]))
    np.add.at(sums, inv, np.asarray(pos, dtype=np.float64))
    means = sums / np.bincount(inv)[:, None]
    return {tuple(u): m for u, m in zip(uniq.tolist(), means)}


RNG = np.random.default_rng(11)
N = 400
POS = RNG.uniform(-70, 110, (N, 3)).astype(np.float32)
IDS = RNG.integers(0, 9, N)
EDGES = RNG.integers(0, N, (600, 2))
EDGES = EDGES[EDGES[:, 0] != EDGES[:, 1]]
FACES = np.array([RNG.choice(N, 3, replace=False) for _ in range(300)])
PARENTS = np.array([-1] + [int(RNG.integers(0, i)) for i in range(1, N)])
OFFSETS = np.r_[0, np.sort(RNG.choice(np.arange(1, N), 24, replace=False)), N]
KW = {"chunk_shape": 40, "bin_shape": 20}

SMALL_RNG = np.random.default_rng(12)
SMALL_POS = SMALL_RNG.uniform(0, 80, (200, 3)).astype(np.float32)  # 8 cells: stores of few objects
SMALL_IDS = SMALL_RNG.integers(0, 6, 200)
SMALL_EDGES = SMALL_RNG.integers(0, 200, (300, 2))

WRITERS = {
    "points": lambda p: zv.write_points(p, POS, **KW),
    "points_ids": lambda p: zv.write_points(p, POS, object_ids=IDS, **KW),
    "graph": lambda p: zv.write_graph(p, POS, EDGES, object_ids=IDS, **KW),
    "mesh": lambda p: zv.write_mesh(p, POS, FACES, **KW),
    "skeleton": lambda p: zv.write_skeleton(p, POS, PARENTS, **KW),
    "polyline": lambda p: zv.write_polylines(p, POS, OFFSETS, **KW),
    "streamline": lambda p: zv.write_polylines(p, POS, OFFSETS, kind="streamline", **KW),
    "line": lambda p: zv.write_polylines(p, POS, np.arange(0, N + 1, 2), kind="line", **KW),
}


# ---------------------------------------------------------------------------
# every kind
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_every_kind_validates_and_reads(tmp_path, kind):
    store = tmp_path / f"{kind}.zv"
    WRITERS[kind](str(store))
    objects = kind != "points"
    factors = [(2, 2 if objects else 1), (2, 1)]
    result = zv.build_pyramid(str(store), factors=factors, chunk_scale_factors=[1, (2, 1, 2)], cross_level_depth=-1)
    assert [lv.level for lv in result.levels] == [1, 2]
    report = validate(str(store), 5)
    assert report.ok, report.summary()
    root = json.loads((store / "zarr.json").read_text())["attributes"]
    zvb = root["zarr_vectors"]
    expected_caps = (["preserved_object_ids"] if objects else []) + ["shared_fragments", "multiscale_links"]
    assert zvb["format_capabilities"] == expected_caps
    assert zvb["cross_level_storage"] == "explicit" and zvb["cross_level_depth"] == -1
    datasets = root["multiscales"][0]["datasets"]
    assert [d["path"] for d in datasets] == ["0", "1", "2"]
    assert [d["coordinateTransformations"][0]["scale"] for d in datasets] == [[1.0] * 3, [2.0] * 3, [4.0] * 3]
    assert [d["coordinateTransformations"][1]["translation"] for d in datasets] == [[10.0] * 3, [20.0] * 3, [40.0] * 3]
    assert [n["name"] for n in root["ome"]["nodes"]] == ["0", "1", "2"]
    level0 = zv.open_store(str(store)).level(0).meta
    for number in (1, 2):
        meta = json.loads((store / str(number) / "zarr.json").read_text())["attributes"]["zarr_vectors_level"]
        assert meta["level"] == number and meta["parent_level"] == number - 1
        assert meta["coarsening_method"] == "per_object"
        assert meta["object_sparsity"] == 1.0 / factors[number - 1][1]
        assert meta["shared_fragments"] is True
        assert ("chunk_shape" in meta) == (number == 2)
        if number == 2:
            assert meta["chunk_shape"] == [80.0, 40.0, 80.0]
        if objects:
            parent = read_object_index(zv.open_store(str(store)).level(number - 1))
            assert meta["preserves_object_ids"] is True
            assert meta["inherited_num_objects"] == parent.ids.size
        else:
            assert "preserves_object_ids" not in meta and "inherited_num_objects" not in meta
        data = zv.read(str(store), level=number)
        if kind in ("polyline", "streamline", "line"):
            assert len(data) >= meta["vertex_count"]  # shared metavertices repeat along paths
        else:
            assert len(data) == meta["vertex_count"] == result.levels[number - 1].vertex_count
        if kind in ("graph", "skeleton"):
            assert data.edges.shape == (0, 2)  # delta-0 records are not carried
        if kind == "mesh":
            assert data.faces.shape == (0, 3)
    assert zv.open_store(str(store)).level(0).meta == level0  # level 0 metadata untouched


# ---------------------------------------------------------------------------
# metavertices against level 0
# ---------------------------------------------------------------------------
def test_point_cloud_metavertices_follow_level0(tmp_path):
    rng = np.random.default_rng(3)
    n = 3000
    pos = rng.uniform(-90, 110, (n, 3)).astype(np.float32)
    ids = rng.integers(0, 30, n)
    store = tmp_path / "p.zv"
    zv.write_points(str(store), pos, chunk_shape=40, bin_shape=10, object_ids=ids)
    zv.build_pyramid(str(store), factors=[(2, 2), (2, 1)], chunk_scale_factors=[(1, 2, 1), 2], sparsity_seed=7,
                     cross_level_depth=2)
    assert validate(str(store), 5).ok
    bins = {1: 20.0, 2: 40.0}
    man1, man2 = manifests(store, 1), manifests(store, 2)
    kept1 = sorted(o for o, blocks in man1.items() if blocks)
    assert len(kept1) == 15 and set(man1) == set(range(30))  # dropped ids keep their (empty) slot
    assert sorted(o for o, b in man2.items() if b) == kept1  # sparsity 1 keeps every survivor
    survivors = np.isin(ids, kept1)
    for number, man in ((1, man1), (2, man2)):
        cells = level_cells(store, number)
        expect = centroid_table(pos[survivors], bins[number]) if number == 1 else None
        if number == 2:  # centroids of the distinct level-1 metavertices of surviving objects
            level1 = level_cells(store, 1)
            named = {blk for o in kept1 for blk in man1[o]}
            mv1 = np.asarray([level1[c][f] for c, f in sorted(named)], dtype=np.float64)
            expect = centroid_table(mv1, bins[2])
        stored = np.concatenate(list(cells.values()))
        assert len(stored) == len(expect)
        got = {tuple(b): p for b, p in zip(bins_of(stored, bins[number]).tolist(), stored.astype(np.float64))}
        assert set(got) == set(expect)
        for b, p in got.items():
            np.testing.assert_allclose(p, expect[b], rtol=0, atol=2e-5)
        # every surviving object names exactly the metavertices of the bins its level-0 vertices fall in
        for o in kept1:
            named_bins = {tuple(bins_of(cells[c][f], bins[number]).tolist()) for c, f in man[o]}
            own = {tuple(b) for b in bins_of(pos[ids == o], bins[number]).tolist()}
            assert named_bins == own
            assert len(man[o]) == len(own)  # each once
        # each metavertex sits in the chunk its cell claims
        cs = np.asarray(zv.open_store(str(store)).level(number).chunk_shape)
        for c, rows in cells.items():
            assert (np.floor(rows.astype(np.float64) / cs).astype(int) == c).all()


def test_cross_level_records_resolve(tmp_path):
    rng = np.random.default_rng(5)
    n = 1000
    pos = rng.uniform(-90, 110, (n, 3)).astype(np.float32)
    ids = rng.integers(0, 12, n)
    store = tmp_path / "g.zv"
    zv.write_graph(str(store), pos, rng.integers(0, n, (200, 2)), chunk_shape=40, bin_shape=10, object_ids=ids)
    # differing per-level chunk shapes: 40 -> (40, 120, 40) -> (80, 120, 160)
    zv.build_pyramid(str(store), factors=[(2, 2), (2, 1)], chunk_scale_factors=[(1, 3, 1), (2, 1, 4)],
                     cross_level_depth=2, sparsity_seed=1)
    assert validate(str(store), 5).ok
    st = zv.open_store(str(store))
    cells = {n_: level_cells(store, n_) for n_ in (0, 1, 2)}
    kept = sorted(o for o, b in manifests(store, 1).items() if b)
    surviving = int(np.isin(ids, kept).sum())
    for fine, k, bin_shape in ((0, 1, 20.0), (1, 1, 40.0), (0, 2, 40.0)):
        plus = read_links(st.level(fine), k)
        minus = read_links(st.level(fine + k), -k)
        policy = link_family_policy(st.level(fine), k)
        assert policy.directed and policy.store == "canonical" and policy.link_width == 2
        f = endpoint_positions(cells[fine], plus.chunks[:, 0], plus.vi[:, 0])
        c = endpoint_positions(cells[fine + k], plus.chunks[:, 1], plus.vi[:, 1])
        assert (bins_of(f, bin_shape) == bins_of(c, bin_shape)).all()  # the fine vertex folded into that metavertex
        # decoded chunks are the chunks the rows really sit in, at both levels' own chunk shapes
        for ch, p, lvl in ((plus.chunks[:, 0], f, fine), (plus.chunks[:, 1], c, fine + k)):
            cs = np.asarray(st.level(lvl).chunk_shape)
            assert (np.floor(p / cs).astype(int) == ch).all()
        fine_keys = {(tuple(a), v) for a, v in zip(plus.chunks[:, 0].tolist(), plus.vi[:, 0].tolist())}
        assert len(fine_keys) == len(plus)  # one record per fine vertex
        if fine == 0:
            assert len(plus) == surviving
        pairs = {(tuple(a), x, tuple(b), y) for a, x, b, y in zip(
            plus.chunks[:, 0].tolist(), plus.vi[:, 0].tolist(), plus.chunks[:, 1].tolist(), plus.vi[:, 1].tolist())}
        mirrored = {(tuple(b), y, tuple(a), x) for a, x, b, y in zip(
            minus.chunks[:, 0].tolist(), minus.vi[:, 0].tolist(), minus.chunks[:, 1].tolist(), minus.vi[:, 1].tolist())}
        assert pairs == mirrored
    # depth 2 composes the single steps: level 0 -> 2 == (0 -> 1) then (1 -> 2)
    up1 = read_links(st.level(0), 1)
    up2 = read_links(st.level(1), 1)
    step = {(tuple(a), x): (tuple(b), y) for a, x, b, y in zip(
        up2.chunks[:, 0].tolist(), up2.vi[:, 0].tolist(), up2.chunks[:, 1].tolist(), up2.vi[:, 1].tolist())}
    composed = {(tuple(a), x): step[(tuple(b), y)] for a, x, b, y in zip(
        up1.chunks[:, 0].tolist(), up1.vi[:, 0].tolist(), up1.chunks[:, 1].tolist(), up1.vi[:, 1].tolist())
        if (tuple(b), y) in step}
    direct = read_links(st.level(0), 2)
    assert composed == {(tuple(a), x): (tuple(b), y) for a, x, b, y in zip(
        direct.chunks[:, 0].tolist(), direct.vi[:, 0].tolist(), direct.chunks[:, 1].tolist(), direct.vi[:, 1].tolist())}


def test_placement_matches_partitioning_every_record():
    """Placing each distinct chunk pair once gives the partition of every record, byte for byte."""
    rng = np.random.default_rng(9)
    fine_cells = np.unique(rng.integers(-6, 6, (40, 3)), axis=0)
    coarse_cells = np.unique(rng.integers(-3, 3, (15, 3)), axis=0)
    k = 300
    partials = (rng.integers(0, len(fine_cells), k), rng.integers(0, len(coarse_cells), k), rng.integers(0, 50, k))
    m = 5000
    partial = rng.integers(0, k, m)
    records = CrossLevelRecords(*partials, partial, rng.integers(0, 90, m), np.arange(m) * 3 + 7)
    ratios = ((1, 1, 1), (2, 3, 1))
    for coarse_leads in (False, True):
        ours = place_cross_level(records, fine_cells, coarse_cells, coarse_leads=coarse_leads,
                                 delta=-2 if coarse_leads else 2,
                                 anchor_ratios=ratios[::-1] if coarse_leads else ratios,
                                 total=3 * m + 7)
        fine_ch = fine_cells[partials[0][partial]]
        coarse_ch = coarse_cells[partials[1][partial]]
        coarse_row = partials[2][partial]
        if coarse_leads:
            chunks, vi = np.stack([coarse_ch, fine_ch], 1), np.stack([coarse_row, records.fine_row], 1)
        else:
            chunks, vi = np.stack([fine_ch, coarse_ch], 1), np.stack([records.fine_row, coarse_row], 1)
        ref = partition_records_by_offset(chunks, vi, delta=-2 if coarse_leads else 2, directed=True,
                                          store="canonical", anchor_ratios=ratios[::-1] if coarse_leads else ratios)
        assert ours.segments == ref.segments and ours.segment_offsets == ref.segment_offsets
        assert np.array_equal(ours.segment, ref.segment) and np.array_equal(ours.cell, ref.cell)
        assert np.array_equal(ours.vi, ref.vi) and np.array_equal(ours.perm, ref.perm)
        assert np.array_equal(ours.record, records.number[ref.record])
        assert np.array_equal(ours.group_starts, ref.group_starts) and np.array_equal(ours.base_rows, ref.base_rows)


# ---------------------------------------------------------------------------
# storage modes, rebuilds, codecs, attributes
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("storage,depth", [("none", 1), ("implicit", 1), ("explicit", 0), ("implicit", 2)])
def test_cross_level_storage_modes(tmp_path, storage, depth):
    store = tmp_path / "s.zv"
    WRITERS["points_ids"](str(store))
    result = zv.build_pyramid(str(store), factors=[(2, 1), (2, 1)], cross_level_storage=storage,
                              cross_level_depth=depth)
    assert validate(str(store), 5).ok
    st = zv.open_store(str(store))
    present = {(n, d) for n in (0, 1, 2) for d in (-2, -1, 1, 2) if link_family_policy(st.level(n), d) is not None}
    expected = set()
    if storage != "none":
        for fine in (0, 1, 2):
            for k in range(1, depth + 1):
                if fine + k <= 2:
                    expected.add((fine, k))
                    if storage == "explicit":
                        expected.add((fine + k, -k))
    assert present == expected == {(lv, d) for lv, d, _ in result.families}
    assert ("multiscale_links" in st.root.format_capabilities) == bool(expected)


def test_rebuild_replaces_levels_and_gives_the_same_bytes(tmp_path):
    store = tmp_path / "r.zv"
    zv.write_graph(str(store), SMALL_POS, SMALL_EDGES, object_ids=SMALL_IDS, **KW)
    before = tree(store)
    args = {"factors": [(2, 2), (2, 1)], "chunk_scale_factors": [2, 1], "cross_level_depth": -1, "sparsity_seed": 4}
    zv.build_pyramid(str(store), **args)
    first = tree(store)
    zv.build_pyramid(str(store), **args)
    assert tree(store) == first
    zv.build_pyramid(str(store), factors=[(4, 1)], cross_level_storage="none")  # replaces levels >= 1 ...
    other = tree(store)
    assert not any(k.startswith(("2/", "0/links/+", "1/links/-")) for k in other)
    assert {k for k in other if k.startswith("0/")} == {k for k in before if k.startswith("0/")}
    zv.build_pyramid(str(store), **args)  # ... and back
    assert tree(store) == first


@pytest.mark.parametrize("step", ["_write_vertices", "_finish"])  # a first task of the level's write, its last
@pytest.mark.parametrize("stop_at", [1, 2])
def test_a_build_that_stops_leaves_the_levels_the_root_names_as_built(tmp_path, monkeypatch, stop_at, step):
    """The root names a level only once all of it is written; building again mends the store."""
    from zarr_vectors.pyramid import build

    args = {"factors": [(2, 2), (2, 1)], "cross_level_depth": -1, "sparsity_seed": 4}
    whole, store = tmp_path / "whole" / "g.zv", tmp_path / "stopped" / "g.zv"  # the name is in the root
    for s in (whole, store):
        s.parent.mkdir()
        zv.write_graph(str(s), SMALL_POS, SMALL_EDGES, object_ids=SMALL_IDS, **KW)
    zv.build_pyramid(str(whole), **args)
    original = getattr(build, step)

    def killed_at_its_level(first, *rest):
        if (first.vertices.path if step == "_write_vertices" else first.path).startswith(f"{stop_at}"):
            raise RuntimeError("worker killed")
        return original(first, *rest)

    monkeypatch.setattr(build, step, killed_at_its_level)
    with pytest.raises(RuntimeError, match="worker killed") as info:
        zv.build_pyramid(str(store), **args)
    names = "level 0 only" if stop_at == 1 else "levels 0 to 1"
    assert info.value.__notes__ == [f"the pyramid of {zv.open_store(str(store)).url} stopped while building level "
                                    f"{stop_at}: the root names {names}; level {stop_at}'s partial data, and the "
                                    "cross-level families toward it, stay until the pyramid is built again"]
    root = json.loads((store / "zarr.json").read_text())
    assert [d["path"] for d in root["attributes"]["multiscales"][0]["datasets"]] == [str(n) for n in range(stop_at)]
    stopped, built = zv.open_store(str(store)), zv.open_store(str(whole))
    for n in range(stop_at):  # what the root names reads as the whole build's levels do ...
        got, want = zv.read(str(store), level=n), zv.read(str(whole), level=n)
        assert np.array_equal(got.positions, want.positions) and len(got.positions) > 0
        for delta in range(-n, stop_at - n):  # ... their families among them too
            if delta:
                assert read_links(stopped.level(n), delta) == read_links(built.level(n), delta)
        # a family toward the stopped level is what it wrote (the validator reports the store)
        assert (store / str(n) / "links" / f"+{stop_at - n}" / "zarr.json").exists() or step == "_write_vertices"
    assert (store / str(stop_at) / "zarr.json").exists()  # the stopped level's remains ...
    assert not validate(str(store), 5).ok
    monkeypatch.setattr(build, step, original)
    zv.build_pyramid(str(store), **args)  # ... which the next build removes
    assert tree(store) == tree(whole)
    assert validate(str(store), 5).ok


def test_a_rebuild_that_stops_while_removing_the_old_levels_leaves_a_root_naming_level_0(tmp_path, monkeypatch):
    """The root stops naming the old levels before any of them is removed."""
    from zarr_vectors.pyramid import build

    store = tmp_path / "g.zv"
    zv.write_graph(str(store), SMALL_POS, SMALL_EDGES, object_ids=SMALL_IDS, **KW)
    args = {"factors": [(2, 2), (2, 1)], "sparsity_seed": 4}
    zv.build_pyramid(str(store), **args)
    first = tree(store)

    def removes_one_then_fails(plan):
        plan.store.storage.delete_prefix(plan.removes[0])
        raise OSError("connection reset")

    monkeypatch.setattr(build, "clear_pyramid", removes_one_then_fails)
    with pytest.raises(OSError, match="connection reset") as info:
        zv.build_pyramid(str(store), **args)
    assert "the root names level 0 only" in info.value.__notes__[0]
    assert [d.path for d in zv.open_store(str(store)).root.datasets] == ["0"]
    assert len(zv.read(str(store), level=0).positions) == len(SMALL_POS)
    monkeypatch.undo()
    zv.build_pyramid(str(store), **args)
    assert tree(store) == first


def test_codecs_and_object_attributes_carried(tmp_path):
    store = tmp_path / "c.zv"
    w = np.arange(9, dtype=np.float32) + 0.5
    zv.write_points(str(store), POS, object_ids=IDS, object_attributes={"w": w}, compressor="blosc", **KW)
    zv.build_pyramid(str(store), factors=[(2, 3)], sparsity_seed=2)
    assert validate(str(store), 5).ok

    def codecs(rel: str) -> list:
        return json.loads((store / rel / "zarr.json").read_text())["codecs"]

    assert codecs("1/vertices") == codecs("0/vertices") == codecs("1/vertex_fragments")
    for fam in ("0/links/+1", "1/links/-1"):
        for seg in (store / fam).iterdir():
            if seg.is_dir():
                assert codecs(f"{fam}/{seg.name}") == codecs("0/vertices")
                attrs = json.loads((seg / "zarr.json").read_text())["attributes"]
                assert attrs["dtype"] == "int32" and attrs["has_perm"] is False  # rows are chunk-local
    kept = sorted(o for o, b in manifests(store, 1).items() if b)
    assert len(kept) == 3
    data = zv.read(str(store), level=1)
    got = data.object_attributes["w"]
    assert np.array_equal(got[kept], w[kept])
    dropped = np.setdiff1d(np.arange(9), kept)
    assert np.isnan(got[dropped]).all()
    assert codecs("1/object_attributes/w") == codecs("0/object_attributes/w")


def test_negative_coordinates_and_2d(tmp_path):
    rng = np.random.default_rng(2)
    pos = rng.uniform(-500, -10, (800, 2))
    store = tmp_path / "neg.zv"
    zv.write_points(str(store), pos, chunk_shape=(50, 30), bin_shape=(25, 10))
    zv.build_pyramid(str(store), factors=[(2, 1), (3, 1)], chunk_scale_factors=[(1, 2), (3, 1)], cross_level_depth=2)
    assert validate(str(store), 5).ok
    st = zv.open_store(str(store))
    assert st.level(2).chunk_shape == (150.0, 60.0)
    up = read_links(st.level(0), 2)
    assert len(up) == 800 and (up.chunks < 0).all()
    fine = zv.read(str(store), level=0)
    assert len(zv.read(str(store), level=2)) == st.level(2).meta.vertex_count
    assert len(fine) == 800


# ---------------------------------------------------------------------------
# the pure parts
# ---------------------------------------------------------------------------
def test_select_objects_is_seeded_and_sized():
    ids = np.arange(3, 103)
    a = select_objects(ids, 3.0, 5, 1)
    assert np.array_equal(a, select_objects(ids, 3.0, 5, 1)) and len(a) == 33 and np.all(np.diff(a) > 0)
    assert not np.array_equal(a, select_objects(ids, 3.0, 5, 2))  # another level, another draw
    assert np.array_equal(select_objects(ids, 1.0, 5, 1), ids)
    assert len(select_objects(ids[:1], 50.0, 0, 1)) == 1


def test_centroid_kept_inside_its_bin():
    grid = BinGrid((1.0,), (-3,), (10,))
    below_one = np.nextafter(1.0, 0.0)  # float64 mean in bin 0 that float32 rounds up to 1.0
    keys = grid.keys(np.array([[0]]))
    c = centroids_in_bins(np.array([[below_one * 3]]), np.array([3]), keys, grid, np.float32)
    assert c[0, 0] < 1.0 and math.floor(float(c[0, 0])) == 0


def test_fragment_sequences_and_object_lists():
    offsets, seq = fragment_sequences(np.array([0, 3, 3, 7]), np.array([0, 1, 2, 3, 4, 5, 6]),
                                      np.array([5, 5, 2, 2, 2, 5, 5]))
    assert offsets.tolist() == [0, 2, 2, 4] and seq.tolist() == [5, 2, 2, 5]
    obj, mv = object_metavertices(np.array([1, 1, 4]), np.array([0, 2, 2]), offsets, seq, ordered=True,
                                  num_metavertices=6)
    assert list(zip(obj.tolist(), mv.tolist())) == [(1, 5), (1, 2), (1, 5), (4, 2), (4, 5)]
    obj, mv = object_metavertices(np.array([1, 1, 4]), np.array([0, 2, 2]), offsets, seq, ordered=False,
                                  num_metavertices=6)
    assert list(zip(obj.tolist(), mv.tolist())) == [(1, 2), (1, 5), (4, 2), (4, 5)]



def test_manifest_block_the_bin_tasks_did_not_read_is_an_internal_error():
    """A kept block with no fragment among the map tasks' is a bug of the builder, reported before any write."""
    plan = ObjectPlan(num_objects=2, kept=np.array([1]), block_object=np.array([1]), block_cell=np.array([0]),
                      block_fragment=np.array([3]), ordered=False, attributes=[])
    read = (np.array([0]), np.array([2]), np.array([0, 1]), np.array([0]))  # cell 0 fragment 2 only
    with pytest.raises(InternalError, match="did not read"):
        write_objects(None, plan, None, read)  # type: ignore[arg-type] - raises before they are used

# ---------------------------------------------------------------------------
# cluster and command line
# ---------------------------------------------------------------------------
def test_cluster_build_equals_local_build(tmp_path, local_cluster):
    local, remote = tmp_path / "local" / "s.zv", tmp_path / "remote" / "s.zv"  # same name: same ome.name
    for s in (local, remote):
        WRITERS["streamline"](str(s))
    args = {"factors": [(2, 2), (2, 1)], "chunk_scale_factors": [1, 2], "cross_level_depth": -1}
    zv.build_pyramid(str(local), **args)
    with local_cluster.as_current():
        zv.build_pyramid(str(remote), **args)
    assert tree(local) == tree(remote)


def test_command_line(tmp_path, capsys):
    from pipeline.cli import main

    store = tmp_path / "cli.zv"
    WRITERS["points_ids"](str(store))
    assert main(["pyramid", str(store), "--factor", "2,2", "--factor", "2", "--chunk-scale", "1",
                 "--chunk-scale", "2,1,2", "--cross-level-depth", "-1", "--seed", "3"]) == 0
    assert "level 2" in capsys.readouterr().out
    assert zv.open_store(str(store)).level(2).chunk_shape == (80.0, 40.0, 80.0)
    snapshot = tree(store)
    assert main(["pyramid", str(store), "--factor", "0.5"]) == 2
    assert "coarsen factor" in capsys.readouterr().err
    assert main(["pyramid", str(store), "--factor", "2", "--chunk-scale", "1.5"]) == 2
    assert main(["pyramid", str(store), "--factor", "x"]) == 2
    assert tree(store) == snapshot


@pytest.mark.s3
def test_s3_build_equals_local_build(tmp_path, s3_bucket):
    from tests.s3server import boto_client

    bucket, options = s3_bucket
    url = f"s3://{bucket}/stores/s.zv"
    local = tmp_path / "stores" / "s.zv"  # same name: same ome.name
    zv.write_points(str(local), SMALL_POS, object_ids=SMALL_IDS, **KW)
    zv.write_points(url, SMALL_POS, object_ids=SMALL_IDS, storage_options=options, **KW)
    args = {"factors": [(2, 2)], "chunk_scale_factors": [2]}
    zv.build_pyramid(str(local), **args)
    zv.build_pyramid(url, storage_options=options, **args)
    assert validate(str(local), 5).ok
    s3 = boto_client(options["endpoint_url"])
    remote = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="stores/s.zv/"):
        for obj in page.get("Contents", []):
            remote[obj["Key"][len("stores/s.zv/"):]] = s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
    assert remote == tree(local)


def test_sharded_level0_is_read_through_its_shards(tmp_path):
    sharded, plain = tmp_path / "a" / "s.zv", tmp_path / "b" / "s.zv"
    for s in (sharded, plain):
        zv.write_points(str(s), SMALL_POS, object_ids=SMALL_IDS, **KW)
    zv.shard_store(str(sharded), 2)
    said = {s: str(zv.build_pyramid(str(s), factors=[(2, 2)], sparsity_seed=5)) for s in (sharded, plain)}
    assert validate(str(sharded), 5).ok
    # what it leaves unsharded is said, not left to be found
    note = "level 0 is sharded, but the new levels and level 0's cross-level links are written unsharded"
    assert note in said[sharded]
    assert "note:" not in said[plain] and said[plain].splitlines()[0].endswith(": 1 level built")
    # the new level and the level-0 cross-level family are written unsharded: the same bytes as from
    # the unsharded store (shard again afterwards: sharding is the last writer step)
    new = {k: v for k, v in tree(plain).items() if k.startswith(("1/", "0/links/"))}
    assert new and all(tree(sharded)[k] == v for k, v in new.items())


# ---------------------------------------------------------------------------
# the families' coordinator and reconcile trust nothing they did not write
# ---------------------------------------------------------------------------
def test_a_family_back_after_the_clear_is_refused(tmp_path, monkeypatch):
    """The coordinator writes every family document in one batch because the build removed
    them all; a family that is there again means another writer, and nothing is overwritten."""
    import zarr_vectors.pyramid.build as build
    from zarr_vectors.errors import ArrayError
    from zarr_vectors.store.link_family import create_links_family

    store = tmp_path / "p.zv"
    zv.write_points(str(store), SMALL_POS, **KW)
    clear = build.clear_pyramid

    family = store / "0" / "links" / "+1" / "zarr.json"
    intruder = []

    def clear_then_intrude(plan):
        clear(plan)
        create_links_family(plan.base.level, 1, link_width=2, directed=False, sid_ndim=3)
        intruder.append(family.read_bytes())

    monkeypatch.setattr(build, "clear_pyramid", clear_then_intrude)
    with pytest.raises(ArrayError, match=r"0/links/\+1 exists although this pyramid build removed it"):
        zv.build_pyramid(str(store), factors=[2])
    assert [family.read_bytes()] == intruder


def test_a_retried_family_init_finds_its_own_documents(tmp_path, monkeypatch):
    """Under a distributed client a task may run again (its result lost, a transient error
    after its writes): the coordinator's second run accepts what its first wrote, and the
    build gives the bytes of an undisturbed one."""
    import zarr_vectors.pyramid.build as build

    once, twice = tmp_path / "once" / "s.zv", tmp_path / "twice" / "s.zv"  # same name: same root document
    for path in (once, twice):
        zv.write_graph(str(path), SMALL_POS, SMALL_EDGES, object_ids=SMALL_IDS, **KW)
    zv.build_pyramid(str(once), factors=[(2, 1)])
    init = build.init_families

    def run_twice(*args):
        init(*args)
        return init(*args)

    monkeypatch.setattr(build, "init_families", run_twice)
    zv.build_pyramid(str(twice), factors=[(2, 1)])
    assert tree(twice) == tree(once)


def test_family_reconcile_checks_the_writers_reports_against_a_listing(tmp_path):
    """A cell a writer reports but storage lacks stamps nothing; agreeing reports stamp the
    presence lists and counts on the coordinator's documents."""
    from zarr_vectors.errors import PresenceMismatchError
    from zarr_vectors.format.links import LinkCounts, make_policy
    from zarr_vectors.reconcile import finalize_created_family
    from zarr_vectors.store.grid import write_cells_many
    from zarr_vectors.store.link_cells import LinkWriteSummary
    from zarr_vectors.store.link_family import compose_new_family
    from zarr_vectors.store.nodes import write_nodes

    store = tmp_path / "p.zv"
    zv.write_points(str(store), SMALL_POS, **KW)
    level = zv.open_store(str(store)).level(0)
    policy = make_policy(1, 2, True, "canonical", 3)
    created = compose_new_family(level, policy, ["0.0.0"], extent=((0, 0, 0), (2, 2, 2)), dtype="int32", compressor=None)
    write_nodes(level.storage, created.group_documents())
    grid = created.arrays["links/+1/0.0.0"]
    write_cells_many([(grid, {(0, 0, 0): b"\x01" * 8})])
    family = store / "0" / "links" / "+1" / "zarr.json"
    before = tree(store)
    claimed = [LinkWriteSummary({"0.0.0": ["0.0.0", "1.0.0"]}, 2)]  # 1.0.0 was never written
    with pytest.raises(PresenceMismatchError, match=r"1 listed but not on storage \['1.0.0'\]"):
        finalize_created_family(level, created, claimed, LinkCounts(2, 2))
    assert tree(store) == before  # not even the array's document
    finalize_created_family(level, created, [LinkWriteSummary({"0.0.0": ["0.0.0"]}, 1)], LinkCounts(1, 1))
    attrs = json.loads(family.read_text())["attributes"]
    assert (attrs["num_links"], attrs["num_physical_records"]) == (1, 1)
    array_doc = json.loads((store / "0" / "links" / "+1" / "0.0.0" / "zarr.json").read_text())
    assert array_doc["attributes"]["nonempty_chunks"] == ["0.0.0"]
    assert link_family_policy(zv.open_store(str(store)).level(0), 1) == policy


def test_a_rebuild_says_which_levels_it_replaced(tmp_path):
    store = tmp_path / "p.zv"
    zv.write_points(str(store), SMALL_POS, **KW)
    first = zv.build_pyramid(str(store), factors=[2, 2])
    assert first.replaced == () and str(first).splitlines()[0].endswith(": 2 levels built")
    again = zv.build_pyramid(str(store), factors=[2])
    assert again.replaced == (1, 2)
    assert str(again).splitlines()[0].endswith(": 1 level built (replacing levels 1, 2)")
    assert zv.open_store(str(store)).level_numbers() == [0, 1] and validate(str(store), 5).ok
