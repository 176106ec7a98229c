"""Point clouds on S3 (a real moto server on loopback, through s3fs)."""

from __future__ import annotations

import re

import time
from datetime import timedelta

import numpy as np
import pytest
from file_tree import tree as local_tree

import zarr_vectors as zv
from tests.s3server import boto_client
from zarr_vectors.errors import InputError, StorageObjectError, StoreExistsError, StoreNotFoundError

pytestmark = [pytest.mark.s3, pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")]

FAST_FAIL = {"connect_timeout": 1, "read_timeout": 1, "retries": {"max_attempts": 1}}


def s3_client(options):
    return boto_client(options["endpoint_url"])


def s3_tree(options, bucket: str, prefix: str) -> dict[str, bytes]:
    client = s3_client(options)
    out = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
        for obj in page.get("Contents", []):
            out[obj["Key"][len(prefix) + 1 :]] = client.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
    return out


def storage_order(pos, cs, ids):
    ch = np.floor(pos.astype(np.float64) / cs).astype(np.int64)
    return np.lexsort((np.arange(len(pos)), ids, ch[:, 2], ch[:, 1], ch[:, 0]))


@pytest.fixture
def cloud():
    rng = np.random.default_rng(31)
    n = 1200
    pos = rng.uniform(-30, 90, (n, 3)).astype("f4")
    ids = rng.integers(0, 12, n)
    attrs = {"rgb": rng.integers(0, 256, (n, 3)).astype("u1"), "t": rng.random(n)}
    obj = {"w": np.arange(12, dtype="i4")}
    return pos, ids, attrs, obj


def test_write_and_read_on_s3(s3_bucket, cloud, tmp_path):
    bucket, options = s3_bucket
    pos, ids, attrs, obj = cloud
    url = f"s3://{bucket}/prefix/store.zv"
    kw = dict(chunk_shape=60, object_ids=ids, attributes=attrs, object_attributes=obj)
    result = zv.write_points(url, pos, storage_options=options, **kw)
    assert result.url == url and result.num_vertices == len(pos) and result.num_objects == 12

    data = zv.read(url, storage_options=options)
    order = storage_order(pos, 60, ids)
    np.testing.assert_array_equal(data.positions, pos[order])
    np.testing.assert_array_equal(data.object_ids, ids[order])
    for name, values in attrs.items():
        np.testing.assert_array_equal(data.attributes[name], values[order])
    np.testing.assert_array_equal(data.object_attributes["w"], obj["w"])

    box = [[0, 0, 0], [30, 45, 60]]
    sub = zv.read(url, bbox=box, storage_options=options)
    mask = ((data.positions >= box[0]) & (data.positions <= box[1])).all(axis=1)
    np.testing.assert_array_equal(sub.positions, data.positions[mask])
    np.testing.assert_array_equal(sub.object_ids, data.object_ids[mask])

    # the same bytes as the same write to a local directory
    zv.write_points(str(tmp_path / "store.zv"), pos, **kw)
    remote = s3_tree(options, bucket, "prefix/store.zv")
    assert sorted(remote) == sorted(local_tree(tmp_path / "store.zv"))
    assert remote == local_tree(tmp_path / "store.zv")
    assert "0/vertices/zarr.json" in remote and "0/object_index/manifests/c/0" in remote

    store = zv.open_store(url, storage_options=options)
    assert store.root.geometry_types == ["point_cloud"]
    assert zv.get_resolution_level(store, 0).meta.vertex_count == len(pos)


#: attribute names a user may give that mean something in a URL (escape, query, fragment, form
#: encoding) or are not ASCII: each must be its own key on S3, byte for byte as on disk
ODD_NAMES = ["a b", "p%20q", "pct%", "h#x", "q?y", "plus+1", "amp&x", "üñí"]


@pytest.mark.parametrize("s3_backend", ["obstore", "s3fs"])
def test_names_that_mean_something_in_a_url_are_keys_as_written(s3_bucket, zv_config, s3_backend, tmp_path):
    """Store and attribute names are keys as the user wrote them, with either backend: the same
    objects as the same write to a directory, read back and valid.  (The test server stored a
    key holding ``%`` under another key until it passed moto the path as sent.)"""
    bucket, options = s3_bucket
    zv_config("s3.backend", s3_backend)
    rng = np.random.default_rng(5)
    pos = rng.uniform(0, 100, (500, 3)).astype("f4")
    attrs = {name: rng.standard_normal(500).astype("f4") for name in ODD_NAMES}
    url = f"s3://{bucket}/odd store%2F.zv"
    zv.write_points(url, pos, attributes=attrs, chunk_shape=50, storage_options=options)
    local_url = tmp_path / "odd store%2F.zv"  # the store's name is the root's OME-Zarr name
    zv.write_points(str(local_url), pos, attributes=attrs, chunk_shape=50)
    assert s3_tree(options, bucket, "odd store%2F.zv") == local_tree(local_url)
    assert {f"0/vertex_attributes/{name}/zarr.json" for name in ODD_NAMES} <= set(local_tree(local_url))
    data, local = zv.read(url, storage_options=options), zv.read(str(local_url))
    assert sorted(data.attributes) == sorted(ODD_NAMES)
    for name in ODD_NAMES:
        np.testing.assert_array_equal(data.attributes[name], local.attributes[name])
    result = zv.validate(url, level=5, storage_options=options)
    assert result.ok and not result.warnings, result.errors + result.warnings


def test_overwrite_refused_then_allowed_on_s3(s3_bucket, cloud):
    bucket, options = s3_bucket
    pos, ids, attrs, obj = cloud
    url = f"s3://{bucket}/p/store.zv"
    zv.write_points(url, pos, chunk_shape=60, object_ids=ids, object_attributes=obj, storage_options=options)
    before = s3_tree(options, bucket, "p/store.zv")
    with pytest.raises(StoreExistsError, match="overwrite=True"):
        zv.write_points(url, pos[:10], chunk_shape=60, storage_options=options)
    assert s3_tree(options, bucket, "p/store.zv") == before
    with pytest.raises(InputError, match="positions row 0"):  # bad input with overwrite: old store intact
        zv.write_points(url, np.full((3, 3), np.nan, "f4"), chunk_shape=60, storage_options=options, overwrite=True)
    assert s3_tree(options, bucket, "p/store.zv") == before

    zv.write_points(url, pos[:10], chunk_shape=60, storage_options=options, overwrite=True)
    after = s3_tree(options, bucket, "p/store.zv")
    assert not any(k.startswith("0/object_index") or k.startswith("0/object_attributes") for k in after)
    data = zv.read(url, storage_options=options)
    assert len(data) == 10 and data.object_ids is None


def test_missing_bucket(s3_bucket, cloud):
    _, options = s3_bucket
    pos = cloud[0]
    with pytest.raises(StoreNotFoundError) as info:
        zv.write_points("s3://no-such-bucket-zv/p/store.zv", pos, chunk_shape=60, storage_options=options)
    assert "'no-such-bucket-zv'" in str(info.value) and "does not exist" in str(info.value)
    names = [b["Name"] for b in s3_client(options).list_buckets()["Buckets"]]
    assert "no-such-bucket-zv" not in names
    with pytest.raises(StoreNotFoundError, match="no-such-bucket-zv"):
        zv.read("s3://no-such-bucket-zv/p/store.zv", storage_options=options)


def test_missing_store_in_existing_bucket(s3_bucket):
    bucket, options = s3_bucket
    with pytest.raises(StoreNotFoundError, match="no Zarr Vectors store"):
        zv.read(f"s3://{bucket}/nothing/here.zv", storage_options=options)


def test_unreachable_endpoint(s3_bucket, cloud):
    bucket, options = s3_bucket
    endpoint = "http://127.0.0.1:9"  # closed port on loopback
    bad = dict(options, endpoint_url=endpoint, config_kwargs=FAST_FAIL)
    url = f"s3://{bucket}/p/store.zv"
    t0 = time.monotonic()
    with pytest.raises(StoreNotFoundError) as info:
        zv.write_points(url, cloud[0], chunk_shape=60, storage_options=bad)
    message = str(info.value)
    assert f"'{bucket}'" in message and endpoint in message and "cannot reach" in message
    assert "does not exist" not in message  # unreachable is not the same as missing
    with pytest.raises(StoreNotFoundError, match="cannot reach"):
        zv.read(url, storage_options=bad)
    assert time.monotonic() - t0 < 20
    assert s3_tree(options, bucket, "p/store.zv") == {}


def test_s3fs_backend_names_an_unreachable_endpoint_given_in_client_kwargs(s3_bucket, zv_config):
    """Regression: the probe's message looked the endpoint up with ``os``, which the s3fs backend's
    module had lost in a move: a NameError instead of "cannot reach"."""
    bucket, options = s3_bucket
    zv_config("s3.backend", "s3fs")
    bad = {"key": "test", "secret": "test", "config_kwargs": FAST_FAIL,
           "client_kwargs": {"endpoint_url": "http://127.0.0.1:9", "region_name": "us-east-1"}}  # fmt: skip
    with pytest.raises(StoreNotFoundError, match=f"cannot reach bucket '{bucket}'"):
        zv.read(f"s3://{bucket}/p/store.zv", storage_options=bad)


def test_s3fs_backend_refuses_config_kwargs_of_the_wrong_form(zv_config):
    zv_config("s3.backend", "s3fs")
    with pytest.raises(InputError, match=r"^storage option 'config_kwargs' must be a mapping, not 5$"):
        zv.read("s3://b/p.zv", storage_options={"config_kwargs": 5})


#: every request method of the storage contract, called once
REQUESTS = {
    "get": lambda s: s.get("0/zarr.json"),
    "get_many": lambda s: s.get_many(["a", "b"]),
    "get_decoded": lambda s: s.get_decoded(["a", "b"], lambda i, raw: raw),
    "get_ranges": lambda s: s.get_ranges([("a", 0, 4), ("b", -4, None)]),
    "exists": lambda s: s.exists("a"),
    "list_dir": lambda s: s.list_dir("0"),
    "list_files": lambda s: s.list_files("0"),
    "object_sizes": lambda s: s.object_sizes(),
    "put": lambda s: s.put("a", b"1"),
    "put_many": lambda s: s.put_many({"a": b"1", "b": b"2"}),
    "delete": lambda s: s.delete("a"),
    "delete_many": lambda s: s.delete_many(["a"]),
    "delete_prefix": lambda s: s.delete_prefix("0"),
    "move_many": lambda s: s.move_many([("a", "b")], sources_present=True),
}


def _fast_failing(storage):
    """``storage`` with obstore's retries off, so each failing request fails at once."""
    storage._store = storage._client({"max_retries": 0, "retry_timeout": timedelta(seconds=5)})
    return storage


@pytest.mark.parametrize("call", REQUESTS.values(), ids=REQUESTS.keys())
def test_a_storage_that_stops_answering_is_a_typed_error_naming_store_request_and_cause(s3_bucket, zv_config, call):
    """Mid-job (past the reachability probe) a refused connection is a StorageRequestError on one
    line naming the store, the request and the cause, not obstore's many-line GenericError."""
    from zarr_vectors.errors import StorageRequestError
    from zarr_vectors.store.backend import Storage

    bucket, options = s3_bucket
    zv_config("s3.backend", "obstore")
    url = f"s3://{bucket}/p/store.zv"
    gone = _fast_failing(Storage(url, dict(options, endpoint_url="http://127.0.0.1:9")))
    with pytest.raises(StorageRequestError) as info:
        call(gone)
    message = str(info.value)
    assert message.startswith(f"store {url!r}: GenericError: ") and "Error performing" in message, message
    assert message.endswith("[Connection refused]") and "\n" not in message and isinstance(info.value, OSError)


def test_an_s3_error_code_is_named_and_absence_is_not_an_error(s3_bucket, zv_config):
    from zarr_vectors.errors import StorageRequestError
    from zarr_vectors.store.backend import Storage

    bucket, options = s3_bucket
    zv_config("s3.backend", "obstore")
    assert Storage(f"s3://{bucket}/p/store.zv", options).get("missing") is None
    gone = _fast_failing(Storage("s3://no-such-bucket-here/p/store.zv", options))
    with pytest.raises(StorageRequestError, match=r"\[NoSuchBucket\]$"):
        gone.list_files("0")
    # a write meets the vanished bucket as a 404, which obstore raises as FileNotFoundError
    for write in (lambda: gone.put("a", b"1"), lambda: gone.put_many({"a": b"1", "b": b"2"}),
                  lambda: gone.delete_many(["a"]), lambda: gone.move_many([("a", "b")], sources_present=True)):
        with pytest.raises(StorageRequestError, match=r"^store 's3://no-such-bucket-here/p/store.zv': "
                                                      r"FileNotFoundError: .*\[NoSuchBucket\]$"):
            write()


@pytest.mark.parametrize("call", REQUESTS.values(), ids=REQUESTS.keys())
def test_s3fs_backend_too_makes_a_storage_that_stops_answering_a_typed_error(s3_bucket, zv_config, call):
    """s3fs lets botocore's connection errors through as they come (not even OSErrors): the
    s3fs backend raises them as the same one-line StorageRequestError as the obstore one."""
    from zarr_vectors.errors import StorageRequestError
    from zarr_vectors.store.backend import Storage
    from zarr_vectors.store.fsspec_backend import FsspecStorage

    bucket, options = s3_bucket
    zv_config("s3.backend", "s3fs")
    url = f"s3://{bucket}/p/store.zv"
    gone = Storage(url, dict(options, endpoint_url="http://127.0.0.1:9", config_kwargs=FAST_FAIL))
    assert isinstance(gone, FsspecStorage)
    with pytest.raises(StorageRequestError) as info:
        call(gone)
    message = str(info.value)
    # a GET and a PUT name their object too, a copy its source and target, and a listing its
    # prefix (the s3fs backend's own requests); the deletes, in bulk, name the store
    objects = [REQUESTS[k] for k in ("get", "get_many", "get_decoded", "get_ranges", "put", "put_many")]
    listings = [REQUESTS[k] for k in ("list_dir", "list_files", "object_sizes", "delete_prefix")]
    where = (rf"s3://{bucket}/p/store\.zv/\S+: " if call in objects
             else rf"s3://{bucket}/p/store\.zv/\S+ -> s3://{bucket}/p/store\.zv/\S+: " if call is REQUESTS["move_many"]
             else rf"the listing of '{bucket}/p/store\.zv(/0)?': " if call in listings else "")
    assert re.match(rf"store '{re.escape(url)}': {where}EndpointConnectionError: Could not connect to the endpoint "
                    "URL", message), message
    assert "\n" not in message and isinstance(info.value, OSError)


def test_s3fs_backend_names_a_vanished_bucket_on_writes_and_reads_absence_as_none(s3_bucket, zv_config):
    from zarr_vectors.errors import StorageRequestError
    from zarr_vectors.store.backend import Storage

    bucket, options = s3_bucket
    zv_config("s3.backend", "s3fs")
    here = Storage(f"s3://{bucket}/p/store.zv", options)
    assert here.get("missing") is None and here.get_many(["missing"]) == [None] and not here.exists("missing")
    with pytest.raises(StorageObjectError):  # a refused key is the package's own error, not a failed request
        here.get("../outside")
    gone = Storage("s3://no-such-bucket-here/p/store.zv", options)
    for write in (lambda: gone.put("a", b"1"), lambda: gone.put_many({"a": b"1", "b": b"2"}), lambda: gone.delete("a"),
                  lambda: gone.delete_many(["a"]), lambda: gone.move_many([("a", "b")], sources_present=True)):
        with pytest.raises(StorageRequestError, match=r"^store 's3://no-such-bucket-here/p/store.zv': "
                                                      r"FileNotFoundError: The specified bucket does not exist$"):
            write()


@pytest.mark.parametrize("s3_backend", ["obstore", "s3fs"])
def test_delete_prefix_removes_what_is_below_it_and_nothing_beside(s3_bucket, zv_config, s3_backend):
    """Regression: the s3fs backend asked ``exists`` (a HEAD of an object) before deleting a
    prefix, so it deleted nothing below the root (a second pyramid build failed on the first's
    cross-level family)."""
    from zarr_vectors.store.backend import Storage

    bucket, options = s3_bucket
    zv_config("s3.backend", s3_backend)
    storage = Storage(f"s3://{bucket}/p/store.zv", options)
    storage.put_many({"1/zarr.json": b"{}", "1/links/c/0": b"x", "10/zarr.json": b"{}", "zarr.json": b"{}"})
    storage.delete_prefix("1")
    assert storage.list_files("") == ["10/zarr.json", "zarr.json"]
    storage.delete("missing")  # no error
    storage.delete("zarr.json")
    assert storage.list_files("") == ["10/zarr.json"]
    beside = {"p/store.zv.zvjob.json": b"{}", "p/store.zv2/zarr.json": b"{}"}  # a journal, another store
    for key, body in beside.items():
        s3_client(options).put_object(Bucket=bucket, Key=key, Body=body)
    storage.delete_prefix("")
    assert storage.list_files("") == [] and s3_tree(options, bucket, "p/store.zv") == {}
    assert s3_tree(options, bucket, "p") == {k[2:]: v for k, v in beside.items()}


def test_s3fs_backend_builds_a_second_pyramid_over_the_first(s3_bucket, zv_config, cloud):
    bucket, options = s3_bucket
    zv_config("s3.backend", "s3fs")
    url = f"s3://{bucket}/p/rebuilt.zv"
    zv.write_points(url, cloud[0], chunk_shape=30, storage_options=options)
    zv.build_pyramid(url, factors=[2, 2], storage_options=options)
    zv.build_pyramid(url, factors=[2], storage_options=options)  # replaces levels 1-2 and level 0's +k families
    assert zv.validate(url, level=5, storage_options=options).ok
    assert not any(k.startswith("2/") for k in s3_tree(options, bucket, "p/rebuilt.zv"))


@pytest.mark.parametrize("retries", [0, 3])
def test_unreachable_endpoint_probe_retries_follow_the_setting(s3_bucket, zv_config, retries):
    """The obstore backend probes with ``s3.probe-retries`` retries (obstore says how many it made)."""
    bucket, options = s3_bucket
    zv_config("s3.backend", "obstore")
    zv_config("s3.probe-retries", retries)
    bad = dict(options, endpoint_url="http://127.0.0.1:9")
    with pytest.raises(StoreNotFoundError, match="cannot reach") as info:
        zv.read(f"s3://{bucket}/p/store.zv", storage_options=bad)
    message = str(info.value)
    assert (f"max_retries: {retries}" in message) == (retries > 0), message
    assert f"after {retries} retries" in message or retries == 0, message


def test_refuses_bucket_root(s3_bucket, cloud):
    bucket, options = s3_bucket
    for url in (f"s3://{bucket}", f"s3://{bucket}/"):
        with pytest.raises(InputError, match=f"root of bucket '{bucket}'"):
            zv.write_points(url, cloud[0], chunk_shape=60, storage_options=options)
    assert s3_client(options).list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0


def test_latency_server_charges_every_request_and_counts_it(s3_latency_server, s3_latency_bucket):
    """The 20 ms fixture the S3 benchmarks and tests rely on: each round trip waits, each is counted."""
    name, options = s3_latency_bucket
    s3_latency_server.reset()
    store = f"s3://{name}/lat.zv"
    started = time.perf_counter()
    zv.write_points(store, np.zeros((10, 3)), chunk_shape=(1, 1, 1), storage_options=options)
    elapsed = time.perf_counter() - started
    counts = s3_latency_server.requests()
    assert counts.get("PUT", 0) >= 3, counts
    # every request waited 20 ms; the writer overlaps some of them, never all
    assert elapsed >= 0.02 * 2, (elapsed, counts)
    s3_latency_server.reset()
    assert s3_latency_server.requests() == {}


def test_server_answers_an_empty_put_that_expects_100_continue(s3_bucket):
    """boto3 sends ``Expect: 100-continue`` with every PUT, an empty one (a console's folder
    marker) too; waitress alone never served it and the client timed out."""
    from botocore.config import Config

    bucket, options = s3_bucket
    client = boto_client(options["endpoint_url"], Config(read_timeout=5, retries={"max_attempts": 1}))
    client.put_object(Bucket=bucket, Key="folder/", Body=b"")
    assert [o["Key"] for o in client.list_objects_v2(Bucket=bucket)["Contents"]] == ["folder/"]


BAD_OPTIONS = [
    ({"endpoint_url": "notaurl"}, "S3 endpoint 'notaurl' is not an http:// or https:// URL with a host"),
    ({"key": 5}, "storage options of store 's3://b/p.zv': TypeError: "),
    ({"client_kwargs": 5}, "storage option 'client_kwargs' must be a mapping, not 5"),
]


def _cli(argv, capsys) -> tuple[int, str]:
    from pipeline.cli import main

    capsys.readouterr()
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    return rc, capsys.readouterr().err


@pytest.mark.parametrize("options, message", BAD_OPTIONS)
def test_storage_options_of_the_wrong_form_are_bad_input_not_a_crash(options, message, capsys):
    """Regression: obstore panicked on an endpoint it could not parse (a BaseException, past
    every handler: a traceback from every command) and raised TypeError on a value of the wrong type."""
    with pytest.raises(InputError) as info:
        zv.read("s3://b/p.zv", storage_options=options)
    assert str(info.value).startswith(message)
    rc, err = _cli(["info", "s3://b/p.zv", *[f"--storage-option={k}={v}" for k, v in options.items()]], capsys)
    assert rc == 2 and err.startswith(f"zv info: error: {message}") and len(err.strip().splitlines()) == 1, err


def test_a_scheme_whose_package_is_missing_is_bad_input(capsys):
    """(gcsfs is no dependency: gs:// has no package here.)"""
    message = "store 'gs://b/p.zv': gs:// needs a package that is not installed"
    with pytest.raises(InputError, match=f"^{message}"):
        zv.read("gs://b/p.zv")
    rc, err = _cli(["info", "gs://b/p.zv"], capsys)
    assert rc == 2 and err.startswith(f"zv info: error: {message}") and len(err.strip().splitlines()) == 1, err
