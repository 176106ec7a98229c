"""The store layer: create_store / open_store / get_resolution_level, strict root and
level metadata, grid arrays (shape, origin, presence, codecs) and numeric tables."""

from __future__ import annotations

import json
import os
import pickle
import struct
import uuid
from pathlib import Path

import dask
import numpy as np
import pytest
from file_tree import tree

import zarr_vectors as zv
from zarr_vectors.errors import (
    ArrayError,
    InputError,
    MetadataError,
    ResourceLimitError,
    StoreExistsError,
    StoreNotFoundError,
)
from zarr_vectors.store.backend import LocalStorage, RangeRequest, Storage
from zarr_vectors.store.fsspec_backend import FsspecStorage, MemoryStorage
from zarr_vectors.store.codecs import ZSTD_DEFAULT, compressor_config
from zarr_vectors.store.grid import GridArray
from zarr_vectors.store.obstore_backend import ObstoreStorage
from zarr_vectors.store.tables import read_table, read_vlen_rows, write_table, write_vlen_rows

ZSTD = {"name": "zstd", "configuration": {"level": 0, "checksum": False}}


def make_store(path: Path, **kw):
    args = dict(chunk_shape=(10, 20), bounds=([0, -5], [100, 50]), geometry_type="point_cloud")
    args.update(kw)
    return zv.create_store(str(path), **args)


def edit_root(path: Path, change) -> None:
    doc = json.loads((path / "zarr.json").read_bytes())
    change(doc["attributes"]["zarr_vectors"])
    (path / "zarr.json").write_text(json.dumps(doc))


# ---------------------------------------------------------------------------
# create / open / levels
# ---------------------------------------------------------------------------
def test_create_store_writes_root_and_empty_level(tmp_path):
    store = make_store(tmp_path / "s.zv")
    assert sorted(tree(tmp_path / "s.zv")) == ["0/zarr.json", "zarr.json"]
    assert store.url == str(tmp_path / "s.zv")
    level_doc = json.loads((tmp_path / "s.zv/0/zarr.json").read_bytes())
    assert level_doc == {
        "attributes": {
            "zarr_vectors_level": {
                "level": 0,
                "object_sparsity": 1.0,
                "vertex_count": 0,
                "coarsening_method": "none",
                "parent_level": None,
                "arrays_present": [],
            }
        },
        "zarr_format": 3,
        "node_type": "group",
    }
    zvb = json.loads((tmp_path / "s.zv/zarr.json").read_bytes())["attributes"]["zarr_vectors"]
    assert "base_bin_shape" not in zvb  # omitted unless passed
    assert zvb["chunk_shape"] == [10.0, 20.0]
    assert zvb["bounds"] == [[0.0, -5.0], [100.0, 50.0]]


def test_open_store_and_get_resolution_level(tmp_path):
    make_store(tmp_path / "s.zv", base_bin_shape=(5, 5), links_convention="explicit", geometry_type="graph")
    store = zv.open_store(str(tmp_path / "s.zv"))
    root = store.root
    assert root.chunk_shape == (10.0, 20.0)
    assert root.bounds == ((0.0, -5.0), (100.0, 50.0))
    assert root.geometry_types == ["graph"]
    assert root.links_convention == "explicit"
    assert root.base_bin_shape == (5.0, 5.0)
    assert root.sid_ndim == 2
    assert root.zv_version == "0.9.2"
    assert store.level_numbers() == [0]
    level = zv.get_resolution_level(store, 0)
    assert level.number == 0 and level.path == "0"
    assert level.meta.level == 0 and level.meta.vertex_count == 0 and level.meta.parent_level is None
    assert level.chunk_shape == (10.0, 20.0)
    assert level.bin_shape == (5.0, 5.0)  # from the NGFF translation x 2
    with pytest.raises(InputError, match=r"no level 3 \(levels: \[0\]\)"):
        zv.get_resolution_level(store, 3)
    # regression (hunt): given a store's path, as open_store is, it raised AttributeError
    assert zv.get_resolution_level(str(tmp_path / "s.zv"), 0).meta == level.meta


def test_open_store_accepts_storage_and_file_url(tmp_path):
    make_store(tmp_path / "s.zv")
    assert zv.open_store(f"file://{tmp_path}/s.zv").root.chunk_shape == (10.0, 20.0)
    assert zv.open_store(Storage(str(tmp_path / "s.zv"))).root.chunk_shape == (10.0, 20.0)


def test_memory_store():
    url = f"memory://zvstore-{uuid.uuid4().hex[:8]}/s.zv"
    make_store(url)
    try:
        assert zv.open_store(url).root.bounds == ((0.0, -5.0), (100.0, 50.0))
        with pytest.raises(StoreExistsError):
            make_store(url)
    finally:
        Storage(url).delete_prefix("")


def test_open_missing_store(tmp_path):
    with pytest.raises(StoreNotFoundError, match="no root zarr.json"):
        zv.open_store(str(tmp_path / "nothing.zv"))
    assert not (tmp_path / "nothing.zv").exists()


def test_open_store_that_is_not_zarr_vectors(tmp_path):
    (tmp_path / "g").mkdir()
    (tmp_path / "g/zarr.json").write_text(json.dumps({"attributes": {}, "zarr_format": 3, "node_type": "group"}))
    with pytest.raises(MetadataError) as info:
        zv.open_store(str(tmp_path / "g"))
    assert (info.value.file, info.value.pointer) == ("zarr.json", "/attributes")


def test_create_refuses_existing_store_and_deletes_nothing(tmp_path):
    path = tmp_path / "s.zv"
    make_store(path)
    (path / "0" / "extra").write_bytes(b"keep me")
    before = tree(path)
    with pytest.raises(StoreExistsError, match="overwrite=True"):
        make_store(path, chunk_shape=(1, 1))
    assert tree(path) == before
    make_store(path, chunk_shape=(1, 2), overwrite=True)
    after = tree(path)
    assert sorted(after) == ["0/zarr.json", "zarr.json"]  # the old content is gone
    assert zv.open_store(str(path)).root.chunk_shape == (1.0, 2.0)


def test_create_refuses_non_empty_directory(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "data.txt").write_text("x")
    with pytest.raises(StoreExistsError):
        make_store(tmp_path / "d")
    assert tree(tmp_path / "d") == {"data.txt": b"x"}


def test_create_into_empty_directory(tmp_path):
    (tmp_path / "d").mkdir()
    make_store(tmp_path / "d")
    assert zv.open_store(str(tmp_path / "d")).root.sid_ndim == 2


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"links_convention": "bogus"}, "links_convention 'bogus'"),
        ({"geometry_type": "polygon"}, "unknown geometry type 'polygon'"),
        ({"chunk_shape": (10, 20, 30)}, "bounds"),
        ({"bounds": ([5, 0], [0, 1])}, "min exceeds max"),
        ({"chunk_shape": (0, 1)}, "finite and > 0"),
        ({"base_bin_shape": (5, -1)}, "finite and > 0"),
        ({"base_bin_shape": (5, 5, 5)}, "base_bin_shape"),
    ],
)
def test_create_store_checks_metadata_before_writing(tmp_path, kw, match):
    with pytest.raises(InputError, match=match):
        make_store(tmp_path / "bad.zv", **kw)
    assert not (tmp_path / "bad.zv").exists()


# ---------------------------------------------------------------------------
# strict root / level metadata
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("links_convention", "implicit"),
        ("object_index_convention", "sorted"),
        ("cross_chunk_strategy", "dedupe"),
        ("cross_level_storage", "sometimes"),
    ],
)
def test_unknown_enumeration_value_is_refused(tmp_path, key, value):
    make_store(tmp_path / "s.zv")
    edit_root(tmp_path / "s.zv", lambda z: z.__setitem__(key, value))
    with pytest.raises(MetadataError) as info:
        zv.open_store(str(tmp_path / "s.zv"))
    assert info.value.file == "zarr.json"
    assert info.value.pointer == f"/attributes/zarr_vectors/{key}"
    assert repr(value) in str(info.value)
    assert str(info.value).startswith(f"zarr.json#/attributes/zarr_vectors/{key}: ")


@pytest.mark.parametrize("version", ["0.8.1", "1.0.0", "abc", "0.9", "", 92])
def test_bad_zv_version_is_refused(tmp_path, version):
    make_store(tmp_path / "s.zv")
    edit_root(tmp_path / "s.zv", lambda z: z.__setitem__("zv_version", version))
    with pytest.raises(MetadataError) as info:
        zv.open_store(str(tmp_path / "s.zv"))
    assert (info.value.file, info.value.pointer) == ("zarr.json", "/attributes/zarr_vectors/zv_version")


def test_missing_zv_version_is_refused(tmp_path):
    make_store(tmp_path / "s.zv")
    edit_root(tmp_path / "s.zv", lambda z: z.pop("zv_version"))
    with pytest.raises(MetadataError, match="zv_version") as info:
        zv.open_store(str(tmp_path / "s.zv"))
    assert info.value.pointer == "/attributes/zarr_vectors"


@pytest.mark.parametrize("version", ["0.9.0", "0.9.2", "0.10.0", "0.12.3"])
def test_versions_compare_numerically(tmp_path, version):
    make_store(tmp_path / "s.zv")
    edit_root(tmp_path / "s.zv", lambda z: z.__setitem__("zv_version", version))
    assert zv.open_store(str(tmp_path / "s.zv")).root.zv_version == version


def test_unknown_capabilities_and_extra_keys_are_kept(tmp_path):
    make_store(tmp_path / "s.zv")

    def change(z):
        z["format_capabilities"] = ["shared_fragments", "future_thing"]
        z["crs"] = {"name": "EPSG:4326"}

    edit_root(tmp_path / "s.zv", change)
    root = zv.open_store(str(tmp_path / "s.zv")).root
    assert root.format_capabilities == ["shared_fragments", "future_thing"]
    assert root.to_attributes()["zarr_vectors"]["crs"] == {"name": "EPSG:4326"}


def test_bad_level_metadata_names_file_and_pointer(tmp_path):
    make_store(tmp_path / "s.zv")
    path = tmp_path / "s.zv/0/zarr.json"
    doc = json.loads(path.read_bytes())
    doc["attributes"]["zarr_vectors_level"]["object_sparsity"] = 2
    path.write_text(json.dumps(doc))
    store = zv.open_store(str(tmp_path / "s.zv"))
    with pytest.raises(MetadataError) as info:
        zv.get_resolution_level(store, 0)
    assert (info.value.file, info.value.pointer) == ("0/zarr.json", "/attributes/zarr_vectors_level/object_sparsity")


def test_duplicate_key_in_root_is_refused(tmp_path):
    make_store(tmp_path / "s.zv")
    raw = (tmp_path / "s.zv/zarr.json").read_text()
    raw = raw.replace('"zv_version": "0.9.2",', '"zv_version": "0.9.2", "zv_version": "0.9.2",', 1)
    assert raw.count('"zv_version"') == 2
    (tmp_path / "s.zv/zarr.json").write_text(raw)
    with pytest.raises(MetadataError) as info:
        zv.open_store(str(tmp_path / "s.zv"))
    assert info.value.file == "zarr.json"


# ---------------------------------------------------------------------------
# grid arrays and tables
# ---------------------------------------------------------------------------
def test_grid_array_negative_origin_presence_and_cells(tmp_path):
    store = make_store(tmp_path / "s.zv")
    storage = store.storage
    grid = GridArray.create(
        storage, "0/things", shape=(4, 5), origin=(-2, 0), attributes={"zv_array": "vertices"}, compressor=None
    )
    grid.write_cells({(-2, 0): b"abc", (1, 4): b"\x01\x02"})
    assert grid.nonempty_chunks == ["-2.0", "1.4"]
    assert (tmp_path / "s.zv/0/things/c/0/0").read_bytes() == struct.pack("<II", 1, 3) + b"abc"
    assert (tmp_path / "s.zv/0/things/c/3/4").read_bytes() == struct.pack("<II", 1, 2) + b"\x01\x02"
    reopened = GridArray.open(storage, "0/things")
    assert reopened.origin == (-2, 0) and reopened.shape == (4, 5)
    assert reopened.nonempty_chunks == ["-2.0", "1.4"]
    assert reopened.read_cells([(-2, 0), (1, 4), (0, 0)]) == [b"abc", b"\x01\x02", b""]
    doc = json.loads((tmp_path / "s.zv/0/things/zarr.json").read_bytes())
    assert doc["attributes"]["chunk_grid_origin"] == [-2, 0]
    assert doc["codecs"] == [{"name": "vlen-bytes", "configuration": {}}]
    # record_presence=False leaves the list alone; a listing finds the cell
    reopened.write_cells({(-1, 2): b"zz"}, record_presence=False)
    assert GridArray.open(storage, "0/things").nonempty_chunks == ["-2.0", "1.4"]
    assert reopened.derive_nonempty_chunks() == ["-1.2", "-2.0", "1.4"]
    # an empty payload removes the cell
    reopened.write_cells({(-2, 0): b""})
    assert not (tmp_path / "s.zv/0/things/c/0/0").exists()
    assert GridArray.open(storage, "0/things").nonempty_chunks == ["1.4"]
    with pytest.raises(ArrayError, match=r"chunk -3\.0 lies outside the array"):
        reopened.cell_key((-3, 0))
    with pytest.raises(ArrayError, match="has 3 coordinates"):
        reopened.cell_key((0, 0, 0))


@pytest.mark.parametrize("compressor", ["zstd", "blosc", "none"])
def test_grid_array_codecs_round_trip(tmp_path, compressor):
    store = make_store(tmp_path / "s.zv")
    config = compressor_config(compressor)
    grid = GridArray.create(store.storage, "0/a", shape=(1, 1), origin=(0, 0), attributes={}, compressor=config)
    payload = bytes(range(256)) * 40
    grid.write_cells({(0, 0): payload})
    doc = json.loads((tmp_path / "s.zv/0/a/zarr.json").read_bytes())
    assert doc["codecs"][1:] == ([config] if config else [])
    assert GridArray.open(store.storage, "0/a").read_cell((0, 0)) == payload
    raw = (tmp_path / "s.zv/0/a/c/0/0").read_bytes()
    assert (raw == struct.pack("<II", 1, len(payload)) + payload) == (config is None)


@pytest.mark.parametrize(("compressor", "sharded"), [("zstd", False), ("blosc", False), ("none", False),
                                                     ("zstd", True)])
def test_grid_cells_decode_within_the_callers_payload_limit(tmp_path, compressor, sharded):
    """A caller that knows a cell's rows bounds its decode: one byte over is refused, naming the cell."""
    from zarr_vectors.store.grid import read_cells_many

    store = make_store(tmp_path / "s.zv")
    grid = GridArray.create(store.storage, "0/a", shape=(2, 2), origin=(0, 0), attributes={},
                            compressor=compressor_config(compressor))
    payload = bytes(range(256)) * 40
    grid.write_cells({(0, 0): payload, (1, 1): b"x"})
    if sharded:
        zv.shard_store(str(tmp_path / "s.zv"), 2)
    grid = GridArray.open(store.storage, "0/a")
    assert grid.read_cells([(0, 0)], max_payload_bytes=len(payload)) == [payload]
    with pytest.raises(ResourceLimitError, match=rf"0/a/c/0/0.*: .*more than {len(payload) + 7} bytes"):
        grid.read_cells([(0, 0)], max_payload_bytes=len(payload) - 1)
    assert read_cells_many([(grid, (0, 0)), (grid, (1, 1))], max_payload_bytes=[None, 1]) == [payload, b"x"]
    with pytest.raises(InputError, match="1 payload limits for 2 cells"):
        read_cells_many([(grid, (0, 0)), (grid, (1, 1))], max_payload_bytes=[1])


def test_grid_array_refuses_unknown_codec(tmp_path):
    store = make_store(tmp_path / "s.zv")
    GridArray.create(store.storage, "0/a", shape=(1, 1), origin=(0, 0), attributes={}, compressor=None)
    path = tmp_path / "s.zv/0/a/zarr.json"
    doc = json.loads(path.read_bytes())
    doc["codecs"].append({"name": "lz77", "configuration": {}})
    path.write_text(json.dumps(doc))
    with pytest.raises(MetadataError) as info:
        GridArray.open(store.storage, "0/a")
    assert (info.value.file, info.value.pointer) == ("0/a/zarr.json", "/codecs/1")


def test_unsupported_compressor_argument():
    with pytest.raises(InputError, match="unsupported compressor 'lz4'"):
        compressor_config("lz4")
    assert compressor_config("zstd") == ZSTD
    assert compressor_config(None) is None and compressor_config("none") is None


def test_tables_fill_and_edge_chunks(tmp_path):
    store = make_store(tmp_path / "s.zv")
    data = np.array([[1, 2], [3, 4], [5, 6], [-32768, -32768], [7, 8]], "i2")
    write_table(store.storage, "0/t", data, fill_value=-32768, attributes={"k": 1}, compressor=None, chunk_rows=2)
    files = sorted(p.relative_to(tmp_path / "s.zv/0/t").as_posix() for p in (tmp_path / "s.zv/0/t/c").rglob("*") if p.is_file())
    assert files == ["c/0/0", "c/1/0", "c/2/0"]
    # the edge chunk is stored full size, padded with the fill value
    assert (tmp_path / "s.zv/0/t/c/2/0").read_bytes() == np.array([[7, 8], [-32768, -32768]], "<i2").tobytes()
    back, attrs = read_table(store.storage, "0/t")
    np.testing.assert_array_equal(back, data)
    assert attrs == {"k": 1}
    # a chunk equal to the fill value is not stored
    write_table(store.storage, "0/u", np.array([-1.0, np.nan, np.nan]), fill_value=np.nan, attributes={}, compressor=None, chunk_rows=1)
    assert sorted(os.listdir(tmp_path / "s.zv/0/u/c")) == ["0"]
    assert json.loads((tmp_path / "s.zv/0/u/zarr.json").read_bytes())["fill_value"] == "NaN"


def test_vlen_rows_pad_last_chunk(tmp_path):
    store = make_store(tmp_path / "s.zv")
    rows = [b"a", b"", b"ccc", b"dd", b"e"]
    write_vlen_rows(store.storage, "0/v", rows, compressor=None, chunk_rows=2)
    last = (tmp_path / "s.zv/0/v/c/2").read_bytes()
    assert last == struct.pack("<II", 2, 1) + b"e" + struct.pack("<I", 0)  # padded with a zero-length item
    stored = read_vlen_rows(store.storage, "0/v")
    assert stored.num_rows == 5 and list(stored.rows) == rows and stored.row_numbers.tolist() == [0, 1, 2, 3, 4]


# ---------------------------------------------------------------------------
# storage URLs
# ---------------------------------------------------------------------------
def test_storage_urls(tmp_path):
    assert Storage(str(tmp_path / "a")).root == str(tmp_path / "a")
    assert Storage(f"file://{tmp_path}/a/").root == str(tmp_path / "a")
    assert Storage("memory://x/y/").root == "/x/y"
    # '~' is the home folder, as fsspec and a shell read it (it made a folder named '~' in the
    # working directory); './~' stays a folder of that name
    home = os.path.expanduser("~")
    assert Storage("~/a.zv").root == Storage("file://~/a.zv").root == os.path.join(home, "a.zv")
    assert Storage("./~").root == os.path.join(os.getcwd(), "~")
    s3 = Storage("s3://bucket/some/prefix/", {"anon": True})
    assert (s3.protocol, s3.root, s3.bucket) == ("s3", "bucket/some/prefix", "bucket")
    with pytest.raises(InputError, match="names no bucket"):
        Storage("s3://")
    with pytest.raises(InputError, match="empty"):
        Storage("")


def test_storage_backend_by_protocol_survives_pickling(tmp_path):
    """Storage(url) picks the backend; a pickled one (as shipped to Dask workers) is rebuilt the same."""
    cases = [
        (str(tmp_path / "a"), None, LocalStorage, False, "obstore"),
        ("memory://x/y", None, MemoryStorage, False, "obstore"),
        ("s3://bucket/p", {"anon": True}, ObstoreStorage, True, "obstore"),
        ("s3://bucket/p", {"anon": True}, FsspecStorage, True, "s3fs"),
    ]
    for url, options, cls, remote, s3_backend in cases:
        with dask.config.set({"zarr_vectors.s3.backend": s3_backend}):
            storage = Storage(url, options)
        again = pickle.loads(pickle.dumps(storage))  # the class travels, whatever the worker's setting
        assert type(storage) is cls and type(again) is cls and isinstance(again, Storage)
        assert (again.url, again.root, again.storage_options, again.is_remote) == (
            storage.url, storage.root, storage.storage_options, remote
        )
        assert repr(again) == f"Storage({url!r})"
    with dask.config.set({"zarr_vectors.s3.backend": "boto"}), pytest.raises(InputError, match="s3.backend"):
        Storage("s3://bucket/p")


@pytest.mark.parametrize("where", ["local", "memory"])
def test_storage_ranges_moves_and_deletes(tmp_path, where):
    url = str(tmp_path / "s") if where == "local" else f"memory://zvranges-{uuid.uuid4().hex[:8]}"
    storage = Storage(url)
    try:
        storage.put_many({"a/0": b"0123456789", "a/1": b"abc"})
        got = storage.get_ranges([RangeRequest("a/0", -3), ("a/0", 2, 5), RangeRequest("a/1", 0, 10), ("nope", 0, 1)])
        assert got == [b"789", b"234", b"abc", None]
        storage.move_many([("a/0", "b/c/0")])
        storage.move_many([("a/0", "b/c/0")])  # replayed: the source was already moved
        assert storage.list_files("") == ["a/1", "b/c/0"] and storage.get("b/c/0") == b"0123456789"
        assert storage.file_sizes("") == {"a/1": 3, "b/c/0": 10} and storage.file_sizes("b") == {"b/c/0": 10}
        storage.delete_many(["a/1"])
        storage.remove_empty_dirs(["a"], floor="")
        assert storage.list_files("") == ["b/c/0"] and storage.list_dir("") == ["b"]
    finally:
        storage.delete_prefix("")


def test_a_failed_requests_message_is_one_bounded_line_with_the_original_as_cause():
    """A server's error text is not ours to print whole (a hostile one may send megabytes)."""
    from zarr_vectors.errors import StorageRequestError
    from zarr_vectors.store.backend import REASON_CHARS, typed_request_failures

    class Remote:  # what the decorator asks of a storage
        is_remote = True
        url = "s3://bucket/s.zv"

        @typed_request_failures(lambda: (OSError,))
        def get(self, key):
            raise OSError("Access Denied\n" + "x" * 100_000)

    with pytest.raises(StorageRequestError) as info:
        Remote().get("k")
    message = str(info.value)
    assert message.startswith("store 's3://bucket/s.zv': OSError: Access Denied xxx") and message.endswith("…")
    assert "\n" not in message and len(message) < REASON_CHARS + 100
    assert len(str(info.value.__cause__)) > 100_000  # the whole text stays with the cause


def test_memory_storage_errors_are_about_keys_and_its_check_runs_every_time():
    """memory:// is not remote: an error there is about the keys, never a failed request, a missing
    key is no error to delete, and where tasks run is asked again at every check (not cached)."""
    from zarr_vectors.errors import StorageRequestError

    storage = Storage(f"memory://zvkeys-{uuid.uuid4().hex[:8]}")
    try:
        storage.put("a", b"1")
        with pytest.raises(OSError) as info:
            storage.put("a/b", b"2")  # "a" is an object: fsspec's memory filesystem refuses a child
        assert not isinstance(info.value, StorageRequestError)
        storage.delete_many(["missing", "a"])
        assert storage.list_files("") == []
        storage.check_reachable()
        with dask.config.set(scheduler="processes"), pytest.raises(InputError, match="memory://"):
            storage.check_reachable()
    finally:
        storage.delete_prefix("")


def test_tables_with_many_chunks_read_the_stored_chunks_found_by_listing(tmp_path):
    """More than a few declared chunks: one listing names the stored ones (fill chunks are not stored)."""
    store = make_store(tmp_path / "s.zv")
    data = np.zeros((300, 2), dtype=np.int16)
    data[::4] = np.arange(1, 76, dtype=np.int16)[:, None]
    write_table(store.storage, "0/t", data, fill_value=0, attributes={}, compressor=ZSTD_DEFAULT, chunk_rows=3)
    stored = sorted((tmp_path / "s.zv/0/t/c").iterdir())
    assert 64 < len(stored) < 100  # chunks of three zero rows are not written
    (tmp_path / "s.zv/0/t/c/stray").write_bytes(b"x")  # not a chunk of the array: not part of it
    (tmp_path / "s.zv/0/t/c/500").mkdir()
    (tmp_path / "s.zv/0/t/c/500/0").write_bytes(b"x")  # outside the declared grid
    values, _ = read_table(store.storage, "0/t")
    np.testing.assert_array_equal(values, data)
    rows = [bytes([i % 251]) * (i % 5 + 1) for i in range(200)]
    write_vlen_rows(store.storage, "0/v", rows, compressor=ZSTD_DEFAULT, chunk_rows=2)
    got = read_vlen_rows(store.storage, "0/v")
    assert got.num_rows == 200 and list(got.rows) == rows and got.row_numbers.tolist() == list(range(200))


@pytest.mark.parametrize("threshold", [0, 1 << 30], ids=["pool", "calling-thread"])
def test_local_range_reads_answer_the_same_on_the_pool_and_on_the_calling_thread(tmp_path, zv_config, monkeypatch,
                                                                                 threshold):
    """``io.sequential-read-bytes`` only decides where a batch of local range reads runs."""
    from zarr_vectors.store import backend

    pooled = []
    monkeypatch.setattr(backend, "map_batched", lambda fn, n: pooled.append(n) or [fn(i) for i in range(n)])
    zv_config("io.sequential-read-bytes", threshold)
    storage = LocalStorage(tmp_path / "s")
    a, b = bytes(range(256)) * 4, b"0123456789"
    storage.put_many({"x/a": a, "b": b})
    bounded = [("x/a", 10, 20), ("x/a", -5, None), ("b", 3, 99), ("missing", 0, 4), ("b", 4, 4)]
    assert storage.get_ranges(bounded) == [a[10:20], a[-5:], b[3:], None, b""]
    assert pooled == ([] if threshold else [5])
    # a read to an end it does not know is never counted small
    assert storage.get_ranges([("x/a", 1000, None), ("b", 0, 2)]) == [a[1000:], b[:2]]
    assert pooled[-1] == 2
    # what the ranges ask for at most: a suffix its length, a range ending before its start nothing
    assert backend._range_bytes(bounded) == 10 + 5 + 96 + 4 + 0
    assert backend._range_bytes([("b", 5, 2)]) == 0 and backend._range_bytes([("b", 0, None)]) == float("inf")
