"""Sharding (docs/format.md §9, docs/decisions.md D14/D15): the shard codec, shard_store / unshard_store.

* the shard object: byte-identical to what zarr-python writes for the same vlen cells
  and codecs (Morton data order, C-order index, CRC32C), the FORMAT worked example;
* every kind written by the public writers reads back identically once sharded
  (whole and bbox reads, dense and sparse shard fetches), and zarr-python reads the
  sharded arrays too;
* shard -> unshard gives the original files byte for byte; the compressor survives;
* refusals (wrong rank, bad values, unreconciled presence lists) leave the store
  byte-for-byte untouched;
* crashes in the pack and the commit stages, then a re-run, give the same store as an
  uninterrupted run;
* readers' failure modes: a bad CRC, writing into a sharded array.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import shutil
import warnings
from pathlib import Path

import dask
import numcodecs
import numpy as np
import pytest
from file_tree import tree

import zarr_vectors as zv
from zarr_vectors import links_api
from zarr_vectors.encoding import frame_single
from zarr_vectors.errors import (
    ArrayError,
    EncodingError,
    InconsistentStoreError,
    InputError,
    MetadataError,
    StorageObjectError,
)
from zarr_vectors.sharding import PresenceMismatchError, shard
from zarr_vectors.sharding.journal import STAGING
from zarr_vectors.sharding.layout import grid_array_paths, open_grid_arrays
from zarr_vectors.store.backend import LocalStorage, Storage
from zarr_vectors.store.codecs import ShardingSpec, crc32c, morton_codes
from zarr_vectors.store.consolidated import is_consolidated
from zarr_vectors.store.grid import GridArray
from zarr_vectors.store.groups import open_store

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")

ZSTD = numcodecs.Zstd(level=0, checksum=False)


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------
def doc(root: Path, rel: str) -> dict:
    return json.loads((root / rel / "zarr.json").read_bytes())


def assert_same_data(a: zv.VectorData, b: zv.VectorData) -> None:
    assert a.kind == b.kind
    for name in ("positions", "object_ids", "objects", "edges", "faces", "offsets"):
        x, y = getattr(a, name), getattr(b, name)
        if x is None:
            assert y is None, name
        else:
            np.testing.assert_array_equal(x, y, err_msg=name)
    for group in ("attributes", "object_attributes", "edge_attributes"):
        x, y = getattr(a, group), getattr(b, group)
        assert sorted(x) == sorted(y), group
        for k in x:
            np.testing.assert_array_equal(x[k], y[k], err_msg=f"{group}[{k}]")


def grid_docs(root: Path) -> dict[str, dict]:
    storage = Storage(str(root))
    levels = sorted(int(n) for n in os.listdir(root) if n.isdigit())
    paths = [p for n in levels for p in grid_array_paths(storage, n)]
    return {p: doc(root, p) for p in paths if (root / p / "zarr.json").exists()}


RNG = np.random.default_rng(7)
N = 400
POS = RNG.uniform(-20, 100, (N, 3)).astype(np.float32)
IDS = RNG.integers(0, 9, N)
VATTR = {"t": RNG.standard_normal(N).astype(np.float32), "rgb": RNG.integers(0, 256, (N, 3)).astype(np.uint8)}


def near_pairs(k: int) -> np.ndarray:
    """Each vertex with its k nearest neighbours: edges that mostly stay in or next to a chunk."""
    d = ((POS[:, None, :] - POS[None, :, :]) ** 2).sum(-1)
    np.fill_diagonal(d, np.inf)
    nbr = np.argsort(d, axis=1)[:, :k]
    return np.stack([np.repeat(np.arange(N), k), nbr.ravel()], axis=1)


def write_kind(kind: str, url: str, **kw) -> None:
    rng = np.random.default_rng(11)
    if kind == "points":
        zv.write_points(url, POS, chunk_shape=25, bin_shape=12.5, attributes=VATTR, **kw)
    elif kind == "points_ids":
        zv.write_points(url, POS, chunk_shape=25, object_ids=IDS, attributes=VATTR,
                        object_attributes={"w": np.arange(9, dtype=np.float32)}, **kw)
    elif kind == "graph_duplicate":
        edges = near_pairs(2)
        zv.write_graph(url, POS, edges, chunk_shape=30, store="duplicate", object_ids=IDS,
                       edge_attributes={"w": rng.standard_normal(len(edges)).astype(np.float32)}, **kw)
    elif kind == "mesh":
        pairs = near_pairs(3)
        faces = np.stack([pairs[0::3, 0], pairs[0::3, 1], pairs[1::3, 1]], axis=1)
        zv.write_mesh(url, POS, faces, chunk_shape=30, face_attributes={"a": np.arange(len(faces), dtype=np.int32)},
                      **kw)
    elif kind == "polylines":
        lengths = rng.integers(2, 30, 25)
        steps = rng.normal(0, 6, (int(lengths.sum()), 3))
        pos = (np.cumsum(steps, axis=0) % 100).astype(np.float32)
        offsets = np.r_[0, np.cumsum(lengths)]
        zv.write_polylines(url, pos, offsets, chunk_shape=20, attributes={"s": np.arange(len(pos), dtype=np.float32)},
                           **kw)
    elif kind == "skeleton":
        d = ((POS[:, None, :] - POS[None, :, :]) ** 2).sum(-1)
        parents = np.array([-1] + [int(np.argmin(d[i, :i])) for i in range(1, N)])  # nearest earlier node
        parents[200] = -1
        zv.write_skeleton(url, POS, parents, chunk_shape=30, object_ids=(np.arange(N) >= 200).astype(int), **kw)
    else:  # pragma: no cover
        raise AssertionError(kind)


KINDS = ["points", "points_ids", "graph_duplicate", "mesh", "polylines", "skeleton"]


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("originals")
    out = {}
    for kind in KINDS:
        write_kind(kind, str(base / f"{kind}.zv"))
        out[kind] = base / f"{kind}.zv"
    return out


def copy_of(src: Path, tmp_path: Path, name: str = "s.zv") -> Path:
    dst = tmp_path / name
    shutil.copytree(src, dst)
    return dst


# ---------------------------------------------------------------------------
# the shard object
# ---------------------------------------------------------------------------
def test_crc32c_known_value():
    # RFC 3720 test vector: 32 bytes of zeros
    assert crc32c(bytes(32)) == 0x8A9136AA
    assert crc32c(b"123456789") == 0xE3069283


def test_format_worked_example():
    """docs/format.md §9: cells (0,0,0), (1,0,0), (1,1,1) of a 2x2x2 shard -> entries 0, 4, 7."""
    spec = ShardingSpec((2, 2, 2), None, ())  # type: ignore[arg-type]
    cells = {0: frame_single(b"a" * 36), 4: frame_single(b"b" * 12), 7: frame_single(b"c" * 12)}
    obj = spec.encode_shard(cells)
    index = np.frombuffer(obj[-(16 * 8 + 4) : -4], "<u8").reshape(8, 2)
    assert index[0].tolist() == [0, 44] and index[4].tolist() == [44, 20] and index[7].tolist() == [64, 20]
    empty = [1, 2, 3, 5, 6]
    assert (index[empty] == 0xFFFF_FFFF_FFFF_FFFF).all()
    assert obj[-(16 * 8 + 4) : -4] == bytes(obj[84 : 84 + 128])
    assert int.from_bytes(obj[-4:], "little") == crc32c(obj[84:-4])
    assert len(obj) == 84 + 16 * 8 + 4
    decoded = spec.decode_index(obj[-spec.index_nbytes :], where="x")
    assert spec.present_many(decoded[None])[1].tolist() == [0, 4, 7]


def test_many_indexes_decode_as_each_alone():
    """``decode_indexes`` keeps what ``decode_index`` keeps and refuses each bad one with its own error."""
    spec = ShardingSpec((2, 2, 2), None, ())  # type: ignore[arg-type]
    n = spec.index_nbytes

    def index_of(cells: dict[int, bytes]) -> bytes:
        return spec.encode_shard(cells)[-n:]

    good = [index_of({0: frame_single(b"a")}), index_of({3: frame_single(b"b"), 7: frame_single(b"cc")})]
    crc = bytearray(good[0])
    crc[2] ^= 1
    half = np.frombuffer(good[1][:-4], "<u8").reshape(8, 2).copy()
    half[3, 1] = np.uint64(2**64 - 1)
    half_raw = half.tobytes() + crc32c(half.tobytes()).to_bytes(4, "little")
    raws = [good[0], good[1][:-1], bytes(crc), good[1], half_raw]
    wheres = [f"s{i}" for i in range(len(raws))]
    indexes, kept, failed = spec.decode_indexes(raws, wheres)
    assert kept == [0, 3] and sorted(failed) == [1, 2, 4]
    for i in kept:
        assert np.array_equal(indexes[kept.index(i)], spec.decode_index(raws[i], where=wheres[i]))
    for i, exc in failed.items():
        with pytest.raises(EncodingError) as alone:
            spec.decode_index(raws[i], where=wheres[i])
        assert type(exc) is EncodingError and str(exc) == str(alone.value) and wheres[i] in str(exc)
    rows, entries = spec.present_many(indexes)
    assert list(zip(rows.tolist(), entries.tolist())) == [(0, 0), (1, 3), (1, 7)]
    empty, kept, failed = spec.decode_indexes([], [])
    assert empty.shape == (0, 8, 2) and kept == [] and failed == {}


def test_morton_order_matches_zarr():
    from zarr.core.indexing import _morton_order

    for shape in [(2, 2, 2), (3, 2, 5), (8, 1, 3), (4, 4), (1, 1, 1), (7,)]:
        order = np.asarray(_morton_order(shape))
        codes = morton_codes(order, shape)
        assert (np.diff(codes) > 0).all(), shape


@pytest.mark.parametrize("compressed", [False, True])
@pytest.mark.parametrize(("shape", "shards"), [((5, 3, 4), (2, 2, 2)), ((5, 3, 4), (4, 2, 8)), ((3, 6), (8, 8))])
def test_shard_objects_byte_identical_to_zarr(tmp_path, compressed, shape, shards):
    import zarr
    from zarr.codecs import VLenBytesCodec, ZstdCodec

    rng = np.random.default_rng(3)
    values = np.empty(shape, dtype=object)
    values[...] = b""
    payloads = {}
    for idx in np.ndindex(*shape):
        if rng.random() < 0.6:
            payloads[idx] = rng.bytes(int(rng.integers(1, 60)))
            values[idx] = payloads[idx]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        arr = zarr.create_array(
            str(tmp_path / "z"), shape=shape, chunks=(1,) * len(shape), shards=shards, dtype="bytes",
            serializer=VLenBytesCodec(), compressors=[ZstdCodec(level=0, checksum=False)] if compressed else [],
            fill_value=b"",
        )
        arr[...] = values
    ours_doc = shard.target_document(
        {"shape": list(shape), "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [1] * len(shape)}},
         "codecs": [{"name": "vlen-bytes", "configuration": {}}]
         + ([{"name": "zstd", "configuration": {"level": 0, "checksum": False}}] if compressed else [])},
        shards,
    )
    zdoc = json.loads((tmp_path / "z" / "zarr.json").read_bytes())
    assert ours_doc["codecs"] == zdoc["codecs"]
    assert ours_doc["chunk_grid"] == zdoc["chunk_grid"]
    spec = ShardingSpec.from_array({**zdoc, "shape": list(shape)}, file="z")
    written = {k: v for k, v in tree(tmp_path / "z").items() if k.startswith("c/")}
    expected = {}
    by_shard: dict[tuple, dict[int, bytes]] = {}
    for idx, payload in payloads.items():
        s = tuple(i // n for i, n in zip(idx, shards))
        entry = int(np.ravel_multi_index(tuple(i % n for i, n in zip(idx, shards)), shards))
        framed = frame_single(payload)
        by_shard.setdefault(s, {})[entry] = ZSTD.encode(framed) if compressed else framed
    for s, cells in by_shard.items():
        expected["c/" + "/".join(map(str, s))] = spec.encode_shard(cells)
    assert sorted(written) == sorted(expected)
    for key in written:
        assert written[key] == expected[key], key


# ---------------------------------------------------------------------------
# shard_store / unshard_store on every kind
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_reads_back_sharded_and_round_trips(stores, tmp_path, kind):
    store = copy_of(stores[kind], tmp_path)
    original = tree(store)
    before = zv.read(str(store))
    grids_before = grid_docs(store)

    result = zv.shard_store(str(store), 2)
    assert result.arrays == len(grids_before) and result.skipped == 0
    after_docs = grid_docs(store)
    for path, d in after_docs.items():
        assert d["chunk_grid"]["configuration"]["chunk_shape"] == [2, 2, 2], path
        assert d["codecs"][0]["name"] == "sharding_indexed", path
        assert d["attributes"] == grids_before[path]["attributes"], path  # presence, origin, ... unchanged
        assert d["shape"] == grids_before[path]["shape"], path
    # never sharded: object index, object attributes
    for rel, data in tree(store).items():
        if rel.startswith(("0/object_index/", "0/object_attributes/")) or rel.count("/") == 1:
            assert data == original[rel], rel
    assert not (store / STAGING).exists()
    assert_same_data(before, zv.read(str(store)))

    # a bbox read (sparse: fetches shard indexes, then inner chunks by range)
    box = [[0, 0, 0], [40, 40, 40]]
    assert_same_data(zv.read(str(stores[kind]), bbox=box), zv.read(str(store), bbox=box))

    # a shard shape beyond the array shape, and a reshard between shapes
    zv.shard_store(str(store), (16, 3, 64))
    assert_same_data(before, zv.read(str(store)))

    zv.unshard_store(str(store))
    assert tree(store) == original


def test_shard_shape_beyond_array_and_zarr_reads_it(stores, tmp_path):
    import zarr

    store = copy_of(stores["points"], tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = zarr.open_array(str(store / "0" / "vertices"), mode="r")[...]
        zv.shard_store(str(store), 64)
        sharded = zarr.open_array(str(store / "0" / "vertices"), mode="r")
        assert sharded.shards == (64, 64, 64)
        np.testing.assert_array_equal(sharded[...], plain)
    files = [k for k in tree(store) if k.startswith("0/vertices/c/")]
    assert files == ["0/vertices/c/0/0/0"]


def test_compression_preserved_inside_shards(stores, tmp_path):
    """D14: the store's zstd stays inside the shards (the reference drops it)."""
    store = copy_of(stores["points"], tmp_path)
    zv.shard_store(str(store), 4)
    d = doc(store, "0/vertices")
    inner = d["codecs"][0]["configuration"]["codecs"]
    assert inner == [{"name": "vlen-bytes", "configuration": {}},
                     {"name": "zstd", "configuration": {"level": 0, "checksum": False}}]
    grid = GridArray.open(Storage(str(store)), "0/vertices")
    key, entry = grid.shard_location(grid.nonempty_chunk_coords()[0])
    raw = (store / key).read_bytes()
    index = grid.sharding.decode_index(raw[-grid.sharding.index_nbytes :], where=key)
    lo, hi = grid.sharding.inner_slice(index, entry, where=key, object_size=len(raw))
    assert raw[lo : lo + 4] == b"\x28\xb5\x2f\xfd"  # a zstd frame


def test_uncompressed_store_stays_uncompressed(tmp_path):
    url = str(tmp_path / "p.zv")
    zv.write_points(url, POS, chunk_shape=25, compressor=None)
    zv.shard_store(url, 2)
    assert doc(tmp_path / "p.zv", "0/vertices")["codecs"][0]["configuration"]["codecs"] == [
        {"name": "vlen-bytes", "configuration": {}}
    ]
    np.testing.assert_array_equal(np.sort(zv.read(url).positions, axis=0), np.sort(POS, axis=0))


def test_idempotent_and_memory_store(stores, tmp_path):
    store = copy_of(stores["graph_duplicate"], tmp_path)
    zv.shard_store(str(store), 3)
    once = tree(store)
    again = zv.shard_store(str(store), 3)
    assert again.arrays == 0 and again.skipped > 0 and tree(store) == once

    # the same operations on a non-local (fsspec memory) store: ranged reads, copy + rm commits
    url = "memory://zv-shard-test/graph_duplicate.zv"
    Storage(url).put_many(tree(stores["graph_duplicate"]))
    try:
        before = zv.read(url)
        zv.shard_store(url, 3)
        mem = Storage(url)
        assert not mem.list_files(STAGING)
        assert_same_data(before, zv.read(url))
        box = [[0, 0, 0], [35, 35, 35]]
        zv.unshard_store(url)
        assert_same_data(zv.read(url, bbox=box), zv.read(str(stores["graph_duplicate"]), bbox=box))
        assert {k: v for k, v in ((k, mem.get(k)) for k in mem.list_files(""))} == tree(stores["graph_duplicate"])
    finally:
        Storage(url).delete_prefix("")


def test_links_api_and_presence_on_sharded_arrays(stores, tmp_path):
    store = copy_of(stores["graph_duplicate"], tmp_path)
    level = open_store(str(store)).level(0)
    records = links_api.read_links(level, 0)
    weights = links_api.read_link_attributes(level, "w", 0)
    zv.shard_store(str(store), 2)
    level = open_store(str(store)).level(0)
    np.testing.assert_array_equal(links_api.read_links(level, 0).vi, records.vi)
    np.testing.assert_array_equal(links_api.read_links(level, 0).chunks, records.chunks)
    np.testing.assert_array_equal(links_api.read_link_attributes(level, "w", 0), weights)
    for path in grid_docs(store):
        grid = GridArray.open(level.storage, path)
        assert grid.is_sharded
        assert grid.derive_nonempty_chunks() == grid.nonempty_chunks  # from the shard indexes
    before = tree(store)
    links_api.finalize_links(level, 0)  # reconcile works on a sharded family and changes nothing
    assert tree(store) == before

    grid = level.array("vertices")
    with pytest.raises(ArrayError, match="unshard_store"):
        grid.write_cells({grid.nonempty_chunk_coords()[0]: b"x"})


def test_dense_and_sparse_shard_reads_agree(stores, tmp_path):
    store = copy_of(stores["points"], tmp_path)
    zv.shard_store(str(store), 8)  # one shard holds every cell
    grid = GridArray.open(Storage(str(store)), "0/vertices")
    plain = GridArray.open(Storage(str(stores["points"])), "0/vertices")
    cells = plain.nonempty_chunk_coords()
    # all cells: whole shard fetched once; one cell: index + one range
    assert grid.read_cells(cells) == plain.read_cells(cells)
    assert grid.read_cells(cells[3:4]) == plain.read_cells(cells[3:4])
    absent = next(c for c in np.ndindex(*plain.shape) if tuple(np.add(c, plain.origin)) not in set(cells))
    assert grid.read_cell(tuple(np.add(absent, grid.origin))) == b""


def test_corrupt_index_crc_names_the_shard(stores, tmp_path):
    store = copy_of(stores["points"], tmp_path)
    zv.shard_store(str(store), 8)
    key = "0/vertices/c/0/0/0"
    raw = bytearray((store / key).read_bytes())
    raw[-10] ^= 0xFF
    (store / key).write_bytes(bytes(raw))
    with pytest.raises(EncodingError, match=r"0/vertices/c/0/0/0.*CRC32C"):
        zv.read(str(store))
    with pytest.raises(EncodingError, match="CRC32C"):
        GridArray.open(Storage(str(store)), "0/vertices").derive_nonempty_chunks()
    (store / key).write_bytes(bytes(raw[:100]))  # truncated
    with pytest.raises(EncodingError, match="0/vertices/c/0/0/0"):
        zv.read(str(store))


@pytest.mark.parametrize("sharded", [False, True])
@pytest.mark.parametrize("name", ["00", "\u0663", "\u00b2", str(2**62), "9" * 23])
def test_an_object_named_by_no_cell_is_refused_not_parsed(stores, tmp_path, name, sharded):
    """The hunt: names were taken by ``str.isdigit``: ``00`` and an Arabic-Indic 3 read as cells 0 and 3
    (a stray beside them passed the presence check and was deleted unsaid), a superscript 2 or a
    number past int64 raised a bare ValueError / OverflowError, and shard 2**62 of shape 4 wrapped to
    shard 0.  Only zarr's spelling of an index inside the array's grid names a cell or shard."""
    store = copy_of(stores["points"], tmp_path)
    if sharded:
        zv.shard_store(str(store), 4)
    cell = next(p for p in sorted((store / "0/vertices/c").rglob("*")) if p.is_file())
    stray = store / "0" / "vertices" / "c" / name / "0" / "0"
    stray.parent.mkdir(parents=True)
    stray.write_bytes(cell.read_bytes())
    before = tree(store)
    with pytest.raises(MetadataError, match=re.escape(f"unexpected object '0/vertices/c/{name}/0/0'")):
        (zv.unshard_store if sharded else zv.shard_store)(str(store), *(() if sharded else (2,)))
    assert tree(store) == before


def test_index_entry_beyond_the_array_names_the_shard(stores, tmp_path):
    store = copy_of(stores["points"], tmp_path)
    zv.shard_store(str(store), 8)  # one shard, reaching past the array on every axis
    grid = GridArray.open(Storage(str(store)), "0/vertices")
    assert all(n < 8 for n in grid.shape)
    key = "0/vertices/c/0/0/0"
    raw = (store / key).read_bytes()
    n = 16 * 8**3
    index = np.frombuffer(raw[-(n + 4) : -4], dtype="<u8").reshape(-1, 2).copy()
    present = np.flatnonzero(index[:, 0] != np.uint64(2**64 - 1))
    index[-1] = index[present[0]]  # a valid byte range, at local cell (7, 7, 7)
    body = index.tobytes()
    (store / key).write_bytes(raw[: -(n + 4)] + body + crc32c(body).to_bytes(4, "little"))
    with pytest.raises(EncodingError, match=r"0/vertices/c/0/0/0: shard index lists cell \[7, 7, 7\] outside"):
        grid.derive_nonempty_chunks()


# ---------------------------------------------------------------------------
# refusals leave the store untouched
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [(2, 2), (2, 2, 2, 2), 0, -3, (2, 0, 2), True, 2.5, "8", (2, 2.0, 2), None, 1 << 12])
def test_bad_shard_shape_refused_store_untouched(stores, tmp_path, bad):
    store = copy_of(stores["points"], tmp_path)
    before = tree(store)
    with pytest.raises(InputError) as info:
        zv.shard_store(str(store), bad)
    if isinstance(bad, tuple) and len(bad) != 3:
        assert "rank" in str(info.value)
    assert tree(store) == before


@pytest.mark.parametrize("damage", ["unlisted_cell", "missing_cell"])
def test_unreconciled_store_refused_untouched(stores, tmp_path, damage):
    store = copy_of(stores["graph_duplicate"], tmp_path)
    path = store / "0" / "vertices" / "zarr.json"
    d = json.loads(path.read_bytes())
    victim = d["attributes"]["nonempty_chunks"][1]
    if damage == "unlisted_cell":
        d["attributes"]["nonempty_chunks"].remove(victim)
        path.write_bytes(json.dumps(d, indent=2).encode())
    else:
        grid = GridArray.open(Storage(str(store)), "0/link_fragments")
        os.remove(store / grid.cell_key(grid.nonempty_chunk_coords()[0]))
    before = tree(store)
    with pytest.raises(PresenceMismatchError, match="reconcile") as info:
        zv.shard_store(str(store), 2)
    assert ("0/vertices" if damage == "unlisted_cell" else "0/link_fragments") in str(info.value)
    assert "D15" in str(info.value)
    assert tree(store) == before


@pytest.mark.parametrize("damage", ["empty_cell", "linked_cell", "inner_cell_past_the_data"])
def test_a_cell_the_pack_refuses_leaves_the_store_as_it_was(stores, tmp_path, damage):
    """The hunt: damage the presence check cannot see (it compares keys) is refused by the pack
    tasks, and by then the consolidated copy had been dropped and the staged shards stayed: the
    repaired store sharded unconsolidated.  The copy now goes just before the first commit, and
    a failed pack removes what it staged."""
    store = copy_of(stores["points"], tmp_path)
    if damage == "inner_cell_past_the_data":
        zv.shard_store(str(store), 2)
    zv.consolidate_store(str(store))
    cell = next(p for p in sorted((store / "0/vertices/c").rglob("*")) if p.is_file())
    if damage == "empty_cell":
        cell.write_bytes(b"")
    elif damage == "linked_cell":
        twin = tmp_path / "elsewhere"
        twin.write_bytes(cell.read_bytes())
        cell.unlink()
        cell.symlink_to(twin)
    else:
        raw = cell.read_bytes()
        n = 16 * 2**3
        index = np.frombuffer(raw[-(n + 4) : -4], dtype="<u8").reshape(-1, 2).copy()
        entry = int(np.flatnonzero(index[:, 0] != np.uint64(2**64 - 1))[0])
        index[entry, 1] = len(raw) * 10  # within a cell's limit, past the shard's data (CRC kept valid)
        body = index.tobytes()
        cell.write_bytes(raw[: -(n + 4)] + body + crc32c(body).to_bytes(4, "little"))
    before = tree(store)
    with pytest.raises((EncodingError, StorageObjectError)):
        (zv.unshard_store if damage == "inner_cell_past_the_data" else zv.shard_store)(str(store), *(
            () if damage == "inner_cell_past_the_data" else (2,)))
    assert tree(store) == before
    assert is_consolidated(Storage(str(store)))


@pytest.mark.parametrize("sharded", [False, True])
def test_every_list_empty_with_cells_on_disk_is_refused_untouched(stores, tmp_path, sharded):
    """The review: with nothing listed there is no pack task, and the check was reached only through
    them: the commit then deleted every cell on disk as stale.  The check is asked for itself now."""
    store = copy_of(stores["points"], tmp_path)
    if sharded:
        zv.shard_store(str(store), 2)
    for path in store.rglob("zarr.json"):
        d = json.loads(path.read_bytes())
        if d.get("attributes", {}).get("nonempty_chunks"):
            d["attributes"]["nonempty_chunks"] = []
            path.write_bytes(json.dumps(d, indent=2).encode())
    before = tree(store)
    with pytest.raises(PresenceMismatchError, match="0/vertices"):
        zv.unshard_store(str(store)) if sharded else zv.shard_store(str(store), 2)
    assert tree(store) == before


def test_unreconciled_sharded_store_refuses_unshard(stores, tmp_path):
    store = copy_of(stores["points"], tmp_path)
    zv.shard_store(str(store), 2)
    path = store / "0" / "vertices" / "zarr.json"
    d = json.loads(path.read_bytes())
    d["attributes"]["nonempty_chunks"].pop()
    path.write_bytes(json.dumps(d, indent=2).encode())
    before = tree(store)
    with pytest.raises(PresenceMismatchError):
        zv.unshard_store(str(store))
    assert tree(store) == before


# ---------------------------------------------------------------------------
# crash safety
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def reference_sharded(stores, tmp_path_factory) -> Path:
    """What an uninterrupted shard_store(…, 2) of the graph store gives."""
    ref = copy_of(stores["graph_duplicate"], tmp_path_factory.mktemp("reference"), "reference.zv")
    zv.shard_store(str(ref), 2)
    return ref


def test_crash_during_pack_then_rerun(stores, tmp_path, monkeypatch, reference_sharded):
    store = copy_of(stores["graph_duplicate"], tmp_path)
    original = tree(store)
    before = zv.read(str(store))
    many_tasks = {"zarr_vectors.shard.min-cells-per-task": 8, "zarr_vectors.plan-threads": 16}  # many pack tasks
    real = shard._pack_task
    calls = []

    def flaky(storage, jobs, cells_per_batch):
        jobs = getattr(jobs, "value", jobs)
        calls.append(1)
        if len(calls) > 3:  # write half of this task's shards, then die
            real(storage, jobs[: max(1, len(jobs) // 2)], cells_per_batch)
            raise RuntimeError("worker killed")
        return real(storage, jobs, cells_per_batch)

    monkeypatch.setattr(shard, "_pack_task", flaky)
    monkeypatch.setattr(shard, "_drop_staging", lambda storage, failure: None)  # a dead process cleans nothing
    # synchronous: nothing keeps running after the failure (as when the process dies)
    with pytest.raises(RuntimeError, match="worker killed"), dask.config.set(many_tasks, scheduler="sync"):
        zv.shard_store(str(store), 2)
    # nothing of the store itself changed: only orphan staging, which readers ignore
    now = tree(store)
    assert any(k.startswith(STAGING + "/") for k in now)
    assert {k: v for k, v in now.items() if not k.startswith(STAGING + "/")} == original
    assert_same_data(before, zv.read(str(store)))

    monkeypatch.setattr(shard, "_pack_task", real)
    with dask.config.set(many_tasks):
        zv.shard_store(str(store), 2)
    assert tree(store) == tree(reference_sharded)
    assert_same_data(before, zv.read(str(store)))


@pytest.mark.parametrize("rerun", ["shard", "unshard"])
def test_crash_during_commit_then_rerun(stores, tmp_path, monkeypatch, reference_sharded, rerun):
    store = copy_of(stores["graph_duplicate"], tmp_path)
    original = tree(store)
    before = zv.read(str(store))
    real = LocalStorage.move_many
    calls = []

    def flaky(storage, pairs, **kwargs):
        calls.append(1)
        if len(calls) == 5:  # move part of one array's shards, then die mid-commit
            real(storage, pairs[: len(pairs) // 2], **kwargs)
            raise RuntimeError("node lost")
        return real(storage, pairs, **kwargs)

    monkeypatch.setattr(LocalStorage, "move_many", flaky)
    monkeypatch.setattr(shard, "split_commits", lambda weights: [slice(i, i + 1) for i in range(len(weights))])
    with pytest.raises(RuntimeError, match="node lost"), dask.config.set(scheduler="sync"):
        zv.shard_store(str(store), 2)
    journals = [k for k in tree(store) if k.endswith("/commit.json")]
    assert len(journals) >= 1
    monkeypatch.setattr(LocalStorage, "move_many", real)
    if rerun == "shard":
        result = zv.shard_store(str(store), 2)
        assert result.recovered == len(journals)
        assert tree(store) == tree(reference_sharded)
    else:  # the other operation finishes the interrupted commit first, then does its own
        zv.unshard_store(str(store))
        assert tree(store) == original
    assert_same_data(before, zv.read(str(store)))


# ---------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------
def test_cli_shard_and_unshard(stores, tmp_path, capsys):
    from pipeline.cli import main

    store = copy_of(stores["points_ids"], tmp_path)
    original = tree(store)
    assert main(["shard", str(store), "--shard-shape", "2,3,4"]) == 0
    assert "shards of [2, 3, 4]" in capsys.readouterr().out
    assert doc(store, "0/vertices")["chunk_grid"]["configuration"]["chunk_shape"] == [2, 3, 4]
    assert main(["shard", str(store), "--shard-shape", "2,2"]) == 2
    assert "rank" in capsys.readouterr().err
    assert main(["shard", str(store)]) == 2
    assert main(["shard", str(store), "--unshard"]) == 0
    assert tree(store) == original


# ---------------------------------------------------------------------------
# S3 (a real moto server on loopback): suffix range reads, server-side copy commits
# ---------------------------------------------------------------------------
@pytest.mark.s3
def test_shard_and_unshard_on_s3(s3_bucket, tmp_path):
    bucket, options = s3_bucket
    url = f"s3://{bucket}/prefix/small.zv"
    kw = dict(chunk_shape=50, object_ids=IDS[:150], attributes={"t": VATTR["t"][:150]})
    zv.write_points(url, POS[:150], storage_options=options, **kw)
    zv.write_points(str(tmp_path / "small.zv"), POS[:150], **kw)
    before = zv.read(url, storage_options=options)
    zv.shard_store(url, 2, storage_options=options)
    remote = Storage(url, options)
    assert not remote.list_files(STAGING)
    assert remote.get("0/vertices/c/0/0/0") is not None
    assert_same_data(before, zv.read(url, storage_options=options))
    box = [[0, 0, 0], [30, 30, 30]]
    assert_same_data(zv.read(str(tmp_path / "small.zv"), bbox=box), zv.read(url, bbox=box, storage_options=options))
    zv.unshard_store(url, storage_options=options)
    assert {k: remote.get(k) for k in remote.list_files("")} == tree(tmp_path / "small.zv")


def test_refused_consolidated_store_keeps_its_copy_and_its_staging(stores, tmp_path):
    """Regression (issue 13, one graph per relayout): the consolidated copy and stale staging are
    dropped by a task that runs only after the presence check passed, never before it."""
    store = copy_of(stores["graph_duplicate"], tmp_path)
    zv.consolidate_store(str(store))
    (store / STAGING / "0" / "vertices" / "c").mkdir(parents=True)
    (store / STAGING / "0" / "vertices" / "c" / "orphan").write_bytes(b"x")
    path = store / "0" / "link_fragments" / "zarr.json"
    d = json.loads(path.read_bytes())
    d["attributes"]["nonempty_chunks"] = d["attributes"]["nonempty_chunks"][1:]
    path.write_bytes(json.dumps(d, indent=2).encode())
    before = tree(store)
    with pytest.raises(PresenceMismatchError, match="0/link_fragments"):
        zv.shard_store(str(store), 2)
    assert tree(store) == before


def test_every_unreconciled_array_is_named_from_the_check_tasks(stores, tmp_path):
    """The check tasks return only mismatch lines; the verdict names every array that disagrees."""
    store = copy_of(stores["graph_duplicate"], tmp_path)
    for rel in ("0/vertices", "0/link_fragments"):
        path = store / rel / "zarr.json"
        d = json.loads(path.read_bytes())
        d["attributes"]["nonempty_chunks"] = d["attributes"]["nonempty_chunks"][1:]
        path.write_bytes(json.dumps(d, indent=2).encode())
    with pytest.raises(PresenceMismatchError, match="2 grid array") as info, \
            dask.config.set({"zarr_vectors.shard.min-cells-per-task": 1}):
        zv.shard_store(str(store), 2)
    assert "0/vertices" in str(info.value) and "0/link_fragments" in str(info.value)


def test_pack_tasks_are_even_in_stored_bytes_as_well_as_in_cells(stores):
    """A points store's vertex cells are megabytes, its other cells far smaller: pack tasks cut by
    cells alone gave one task every vertex shard (0.39 s of a 10^7-point build's 0.49 s shard
    chain).  The plan weighs the check's listing too: here the vertex cells are made to weigh
    1000x their size, and the four tasks share them."""
    store = open_store(Storage(str(stores["points"])))
    grids = [g for g in open_grid_arrays(store, [0]) if g.nonempty_chunks]
    assert "0/vertices" in [g.path for g in grids] and len(grids) >= 4
    listings = [g.stored_objects() for g in grids]
    sizes = {k: n * (1000 if k.startswith("0/vertices/") else 1) for listing in listings for k, n in listing.items()}

    def loads(tasks):
        return [sum(sizes[posixpath.join(job.source.path, "c", *map(str, c))]
                    for job in task for _, cells in job.groups for c in cells.tolist()) for task in tasks]

    weighed = loads(shard._plan(grids, (2, 2, 2), 4, [{k: sizes[k] for k in listing} for listing in listings]))
    by_cells = loads(shard._plan(grids, (2, 2, 2), 4, [dict.fromkeys(listing, 1) for listing in listings]))
    total = sum(sizes.values())
    assert len(weighed) == 4 and sum(weighed) == sum(by_cells) == total
    assert max(by_cells) > 0.9 * total  # cut by cells alone, one task holds (nearly) every vertex cell
    assert max(weighed) <= 0.5 * total, [round(x / total, 2) for x in weighed]


def test_a_failed_plan_changes_nothing_and_a_refused_store_gets_the_check_verdict(stores, tmp_path, monkeypatch):
    """The pack plan is made by a task from the presence check's listings: its failure is raised only after
    the check passed (the verdict is a refused store's error, whichever task ends first) and before
    the staging area or the consolidated copy is touched."""
    store = copy_of(stores["graph_duplicate"], tmp_path)
    zv.consolidate_store(str(store))
    before = tree(store)

    def broken_plan(*args):
        raise RuntimeError("the plan broke")

    monkeypatch.setattr(shard, "_plan", broken_plan)
    with pytest.raises(RuntimeError, match="the plan broke"):
        zv.shard_store(str(store), 2)
    assert tree(store) == before  # the consolidated copy is still there
    path = store / "0" / "vertices" / "zarr.json"
    d = json.loads(path.read_bytes())
    d["attributes"]["nonempty_chunks"] = d["attributes"]["nonempty_chunks"][1:]
    path.write_bytes(json.dumps(d, indent=2).encode())
    for _ in range(3):
        with pytest.raises(PresenceMismatchError, match="0/vertices"):
            zv.shard_store(str(store), 2)


def test_an_applied_commit_leaves_no_journal_behind(tmp_path, monkeypatch):
    """Each array's journal goes with its commit (a later crash must not replay a finished array),
    though the first commit listed the staging before writing the journal."""
    from zarr_vectors.sharding import journal

    url = str(tmp_path / "p.zv")
    zv.write_points(url, np.random.default_rng(0).uniform(0, 1000, (5000, 3)), chunk_shape=250.0)
    applied = journal.apply_commits
    left: dict[str, list[str]] = {}

    def apply_and_look(storage, commits, *args, **kwargs):
        applied(storage, commits, *args, **kwargs)
        for path, _, _ in commits:
            left[path] = storage.list_files(journal.staging_dir(path))

    monkeypatch.setattr(journal, "apply_commits", apply_and_look)
    zv.shard_store(url, 2)
    assert sorted(left) == grid_array_paths(Storage(url), 0)
    assert all(keys == [] for keys in left.values()), left


@pytest.mark.parametrize("journal_bytes", [
    b"{not json", b"[1, 2]", b'{"array": "0/vertices", "document": {}, "keys": [3]}',
    b'{"array": "0/vertices", "document": {}, "keys": []}',  # would delete every cell and write {} as the document
    b'{"array": "0/vertices", "document": {"zarr_format": 3, "node_type": "array"}, "keys": ["../../x"]}',
])  # fmt: skip
def test_a_journal_that_is_not_one_is_refused_untouched(stores, tmp_path, journal_bytes):
    """A replay trusts a journal to say what to delete; one that does not parse as a journal
    stops the run, naming it, before anything is deleted or moved."""
    from zarr_vectors.sharding.journal import JOURNAL, staging_dir

    store = copy_of(stores["graph_duplicate"], tmp_path)
    key = posixpath.join(staging_dir("0/vertices"), JOURNAL)
    (store / key).parent.mkdir(parents=True)
    (store / key).write_bytes(journal_bytes)
    before = tree(store)
    with pytest.raises((EncodingError, MetadataError)) as info:
        zv.shard_store(str(store), 2)
    assert key in str(info.value) or getattr(info.value, "file", None) == key
    assert tree(store) == before


@pytest.mark.parametrize("forged", ["not_a_grid_array", "no_keys", "another_document", "absent_array",
                                    "nothing_staged"])
def test_a_journal_the_store_could_not_have_written_is_refused_untouched(stores, tmp_path, forged):
    """Regression (hunt): a well-formed journal was replayed as found.  One naming
    ``0/object_index/manifests`` (which no relayout touches) with no keys deleted every manifest
    chunk, exit 0; a stale one (the store changed since) moved old cells over new ones.  A journal
    must name a grid array the store has, hold that array's document relaid out, and list exactly
    the objects of its present cells."""
    from zarr_vectors.sharding.journal import JOURNAL, staging_dir
    from zarr_vectors.sharding.layout import new_keys, target_document
    from zarr_vectors.store.grid import GridArray

    store = copy_of(stores["graph_duplicate"], tmp_path)
    path = "0/object_index/manifests" if forged == "not_a_grid_array" else "0/vertices"
    document = target_document(doc(store, "0/vertices"), (2, 2, 2))
    keys = new_keys(GridArray(Storage(str(store)), "0/vertices", document), (2, 2, 2))
    if forged == "not_a_grid_array":
        document, keys = doc(store, path), []
    elif forged == "no_keys":
        keys = []
    elif forged == "another_document":
        document["attributes"]["nonempty_chunks"] = document["attributes"]["nonempty_chunks"][:1]
        keys = keys[:1]
    elif forged == "absent_array":
        path = "7/vertices"
    key = posixpath.join(staging_dir(path), JOURNAL)
    (store / key).parent.mkdir(parents=True)
    (store / key).write_text(json.dumps({"array": path, "document": document, "keys": keys}))
    if forged == "nothing_staged":  # review: every key "in place" as an old cell of its name, recast as a shard
        assert any((store / path / k).is_file() for k in keys), keys
    before = tree(store)
    with pytest.raises(EncodingError, match="not replaying it") as info:
        zv.shard_store(str(store), 2)
    assert key in str(info.value)
    assert tree(store) == before


def test_an_interrupted_commit_of_an_array_with_a_nan_attribute_is_finished(tmp_path, monkeypatch):
    """Review: the journal's document was compared with ``!=``, and two parsed NaNs never compare
    equal, so an array carrying a NaN attribute (the strict reader allows one) could never be
    finished: zv shard refused the journal, and zv pyramid sent the user back to zv shard."""
    from zarr_vectors.sharding import journal

    url = str(tmp_path / "p.zv")
    rng = np.random.default_rng(0)
    zv.write_points(url, rng.uniform(0, 100, (300, 3)), chunk_shape=25, attributes={"intensity": rng.random(300)})
    path = tmp_path / "p.zv" / "0" / "vertex_attributes" / "intensity" / "zarr.json"
    doc = json.loads(path.read_text())
    doc["attributes"]["nodata"] = float("nan")
    path.write_text(json.dumps(doc, indent=2, allow_nan=True))
    real = journal.apply_commits

    def lost(*args, **kwargs):
        raise RuntimeError("node lost")

    monkeypatch.setattr(journal, "apply_commits", lost)
    with pytest.raises(RuntimeError, match="node lost"), dask.config.set(scheduler="sync"):
        zv.shard_store(url, 2)
    monkeypatch.setattr(journal, "apply_commits", real)
    assert zv.shard_store(url, 2).recovered == 3
    assert "NaN" in path.read_text() and zv.validate(url, level=5).ok


def test_a_commit_stopped_after_its_document_was_written_is_finished(stores, tmp_path, monkeypatch,
                                                                     reference_sharded):
    """A journal whose array already has its new document (the commit stopped before removing the
    journal) is still the array's own: it replays, and the run ends as an uninterrupted one."""
    from zarr_vectors.sharding import journal

    store = copy_of(stores["graph_duplicate"], tmp_path)
    real = journal.write_nodes

    def written_then_lost(storage, documents):
        real(storage, documents)
        raise RuntimeError("node lost")

    monkeypatch.setattr(journal, "write_nodes", written_then_lost)
    with pytest.raises(RuntimeError, match="node lost"), dask.config.set(scheduler="sync"):
        zv.shard_store(str(store), 2)
    assert any(k.endswith("/commit.json") for k in tree(store))
    # regression (hunt): a pyramid built over unfinished commits made their journals stale, and the
    # next zv shard moved the old staged cells over the new level, exit 0
    interrupted = tree(store)
    with pytest.raises(InconsistentStoreError, match="left [0-9]+ array commit.s. unfinished .* before building a"):
        zv.build_pyramid(str(store), factors=[2])
    # so did a links write (the single-process API) over them
    level = open_store(str(store)).level(0)
    records = links_api.read_links(level, 0)
    writes = [  # before the refusal, write_links replaced the family; the others failed on other grounds
        lambda: links_api.write_link_attributes(level, "w", 0, np.zeros(len(records.vi))),
        lambda: links_api.finalize_links(level, 0),  # a decentralised write's last step (cell writes are not checked)
        lambda: links_api.write_links(level, 0, records.chunks[:5], records.vi[:5]),
    ]
    for write in writes:
        with pytest.raises(InconsistentStoreError, match="unfinished .* before writing links"):
            write()
    assert tree(store) == interrupted
    monkeypatch.setattr(journal, "write_nodes", real)
    assert zv.shard_store(str(store), 2).recovered >= 1
    assert tree(store) == tree(reference_sharded)


def test_pack_tasks_the_plan_leaves_without_shards_write_nothing(tmp_path):
    """The graph's pack tasks are counted from the presence lists' lengths before a task plans
    which shards each owns; with fewer shards than tasks the rest write nothing, same bytes."""
    points = np.random.default_rng(3).uniform(0, 1000, (5000, 3))
    many, default = tmp_path / "many" / "s.zv", tmp_path / "default" / "s.zv"  # one name: the root names it
    for path in (many, default):
        zv.write_points(str(path), points, chunk_shape=250.0)
    with dask.config.set({"zarr_vectors.shard.min-cells-per-task": 1, "zarr_vectors.plan-threads": 16}):
        result = zv.shard_store(str(many), 4)  # 4 x 4 x 4 cells: one shard per array, 16 planned tasks
    zv.shard_store(str(default), 4)
    assert result.cells == 64 * result.arrays and result.objects == result.arrays
    assert result.tasks == result.arrays < 16
    assert tree(many) == tree(default)
