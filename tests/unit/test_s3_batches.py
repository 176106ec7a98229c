"""A batch of S3 requests that fails stops at its first failure: no request of it goes on
behind the raised error, changing the store or asking a failing server again (the moto
server of ``s3server``, refusing on purpose through ``tests.s3server.Fault``)."""

from __future__ import annotations

import time

import numpy as np
import pytest

import zarr_vectors as zv
from tests.s3server import Fault, boto_client
from zarr_vectors.errors import StorageRequestError

pytestmark = [pytest.mark.s3, pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")]

BACKENDS = ["obstore", "s3fs"]

XML = [("Content-Type", "application/xml")]
DENIED = ("403 Forbidden", XML, b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code>'
                                b"<Message>Access Denied</Message></Error>")
BUSY = ("503 Slow Down", XML, b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
                              b"<Message>Please reduce your request rate.</Message></Error>")


def _storage(bucket, options, zv_config, backend):
    from zarr_vectors.store.backend import Storage

    zv_config("s3.backend", backend)
    zv_config("s3.concurrency", 2)
    return Storage(f"s3://{bucket}/p/s.zv", options)


def _settled(s3_server, method: str) -> tuple[int, int]:
    """Requests of ``method`` once the batch's last in-flight ones arrived, and a second later."""
    time.sleep(0.5)
    settled = s3_server.requests().get(method, 0)
    time.sleep(1.0)
    return settled, s3_server.requests().get(method, 0)


@pytest.mark.parametrize("s3_backend", BACKENDS)
def test_a_failed_batch_of_puts_stops_when_it_fails(s3_server, s3_bucket, s3_faults, zv_config, s3_backend):
    """Regression (review): the calls of a batch still waiting went on after the first failure was
    raised -- every PUT of a refused ``put_many`` was sent, retries and all, behind the error.
    The requests already sent when the first failure came back (at most ``s3.concurrency``: handed
    to obstore's Rust runtime, or written to s3fs's socket before its cancel) may still reach the
    server after the raise; nothing after them."""
    storage = _storage(*s3_bucket, zv_config, s3_backend)
    s3_faults.append(Fault(lambda m, path, q: m == "PUT" and "/p/s.zv/" in path, lambda query, moto: DENIED))
    s3_server.reset()
    with pytest.raises(StorageRequestError, match="Access Denied|Forbidden|403"):
        storage.put_many({f"k{i}": b"1" for i in range(100)})
    sent = s3_server.requests().get("PUT", 0)
    settled, later = _settled(s3_server, "PUT")
    assert later == settled <= sent + 2 and settled <= 4


@pytest.mark.parametrize("method", ["get_many", "get_ranges"])
@pytest.mark.parametrize("s3_backend", BACKENDS)
def test_a_failed_batch_of_gets_stops_when_it_fails(s3_server, s3_bucket, s3_faults, zv_config, s3_backend, method):
    """Regression (hunt): the s3fs backend gathered every answer of a batch before looking at
    them, so a server answering 503 got all 100 GETs of a batch, each retried (400 in 62 s;
    a ``zv.read`` of 1,000 cells sent 3,758).  obstore retries the two in flight, then stops."""
    storage = _storage(*s3_bucket, zv_config, s3_backend)
    storage.put_many({f"k{i}": b"12345678" for i in range(100)})
    s3_faults.append(Fault(lambda m, path, q: m == "GET" and "/p/s.zv/k" in path, lambda query, moto: BUSY))
    s3_server.reset()
    with pytest.raises(StorageRequestError, match=r"s3://.*/p/s\.zv/k\d+|reduce your request rate"):
        if method == "get_many":
            storage.get_many([f"k{i}" for i in range(100)])
        else:
            storage.get_ranges([(f"k{i}", 0, 4) for i in range(100)])
    settled, later = _settled(s3_server, "GET")
    assert later == settled <= 24  # two in flight, each with its client's retries


def test_s3fs_backend_a_missing_object_in_a_batch_is_still_none(s3_bucket, zv_config):
    """The other side of stopping at the first failure: a missing object is an answer, not one."""
    storage = _storage(*s3_bucket, zv_config, "s3fs")
    storage.put_many({"a": b"1", "c": b"345"})
    assert storage.get_many(["a", "b", "c"]) == [b"1", None, b"345"]
    assert storage.get_ranges([("c", 1, 3), ("b", 0, 1), ("a", 0, 1)]) == [b"45", None, b"1"]


@pytest.mark.parametrize("s3_backend", BACKENDS)
def test_a_failed_batch_of_moves_stops_when_it_fails_and_names_the_copy(s3_server, s3_bucket, s3_faults, zv_config,
                                                                        s3_backend):
    """Regression (hunt): the s3fs backend's ``move_many`` went through s3fs's ``copy``, which sent
    every copy of the batch (60 of 60 refused, 60 HEADs beside) whatever ``s3.concurrency`` said,
    and named no object ("PermissionError: Access Denied").  Nothing is deleted after a failed copy."""
    bucket, options = s3_bucket
    storage = _storage(bucket, options, zv_config, s3_backend)
    storage.put_many({f"src/k{i}": b"1" for i in range(60)})
    s3_faults.append(Fault(lambda m, path, q: m == "PUT" and "/p/s.zv/dst/" in path, lambda query, moto: DENIED))
    s3_server.reset()
    with pytest.raises(StorageRequestError, match=r"dst/k\d+.*(Access Denied|Forbidden|403)"):
        storage.move_many([(f"src/k{i}", f"dst/k{i}") for i in range(60)], sources_present=True)
    settled, later = _settled(s3_server, "PUT")
    assert later == settled <= 4
    assert s3_server.requests().get("DELETE", 0) == 0 and s3_server.requests().get("POST", 0) == 0
    assert len(storage.list_files("src")) == 60


def test_s3fs_backend_a_move_still_copies_then_deletes(s3_bucket, zv_config):
    storage = _storage(*s3_bucket, zv_config, "s3fs")
    storage.put_many({f"src/k{i}": bytes([i]) for i in range(5)})
    storage.move_many([(f"src/k{i}", f"dst/k{i}") for i in range(5)])
    assert storage.list_files("") == [f"dst/k{i}" for i in range(5)]
    assert storage.get_many([f"dst/k{i}" for i in range(5)]) == [bytes([i]) for i in range(5)]


def _delete_refused_naming(key: str | None):
    """One DeleteObjects answer listing ``key`` (no ``<Key>`` for None) as not deleted with a
    passing reason; then moto's own answers."""
    answered = []

    def answer(query, moto):
        if answered:
            return moto()
        answered.append(query)
        named = b"" if key is None else b"<Key>" + key.encode() + b"</Key>"
        return "200 OK", XML, (b'<?xml version="1.0" encoding="UTF-8"?><DeleteResult><Error>' + named
                               + b"<Code>SlowDown</Code><Message>slow</Message></Error></DeleteResult>")

    return answer


@pytest.mark.parametrize("named", ["victim/zarr.json", None], ids=["another-key", "no-key"])
def test_s3fs_backend_never_asks_again_to_delete_what_it_did_not_ask(s3_bucket, s3_faults, zv_config, named):
    """Regression (hunt): asking again for the keys a DeleteObjects answer lists as refused took
    the keys the answer named: ``victim/zarr.json`` outside the store was deleted, and for an
    entry without a key the object ``None``."""
    bucket, options = s3_bucket
    storage = _storage(bucket, options, zv_config, "s3fs")
    client = boto_client(options["endpoint_url"])
    victim = named or "None"
    client.put_object(Bucket=bucket, Key=victim, Body=b"precious")
    storage.put_many({"a": b"1", "b": b"2"})
    s3_faults.append(Fault(lambda m, path, q: m == "POST" and "delete" in q, _delete_refused_naming(named)))
    with pytest.raises(StorageRequestError, match=r"not asked to delete: the server is broken"):
        storage.delete_many(["a", "b"])
    assert client.get_object(Bucket=bucket, Key=victim)["Body"].read() == b"precious"


def _is_recursive_listing(bucket: str):
    return lambda m, path, q: (m == "GET" and path.rstrip("/") == f"/{bucket}" and "list-type=2" in q
                               and "delimiter" not in q)


@pytest.mark.parametrize("s3_backend", BACKENDS)
def test_an_empty_answer_to_a_listing_is_no_empty_listing(s3_bucket, s3_faults, zv_config, s3_backend):
    """Regression (hunt): the s3fs backend took a LIST answered 200 with an empty body for an
    empty page -- a store of 878 objects listed empty, and an overwrite deleted nothing and wrote
    the new store over the old one's cells.  Now a failed request (obstore's already was), and
    the old store is left as it was."""
    bucket, options = s3_bucket
    zv_config("s3.backend", s3_backend)
    url = f"s3://{bucket}/p/e.zv"
    points = np.random.default_rng(3).uniform(0, 100, (500, 3)).astype("float32")
    zv.write_points(url, points, chunk_shape=25.0, storage_options=options)
    s3_faults.append(Fault(_is_recursive_listing(bucket), lambda query, moto: ("200 OK", XML, b"")))
    from zarr_vectors.store.backend import Storage

    with pytest.raises(StorageRequestError):
        Storage(url, options).list_files("")
    with pytest.raises(StorageRequestError):
        zv.write_points(url, points[:100], chunk_shape=50.0, storage_options=options, overwrite=True)
    s3_faults.clear()
    assert zv.validate(url, level=5, storage_options=options).ok
    assert len(zv.read(url, storage_options=options)) == 500


def test_a_failed_write_raises_once_its_started_tasks_ended(s3_server, s3_bucket, s3_faults, zv_config):
    """Regression (hunt): a write whose one cell PUT was refused raised after 8 PUTs while its
    other tasks went on: 512 PUTs and 511 objects 5 s later, racing whoever cleans up or writes
    again.  The runner waits for the tasks dask had started (many small tasks here)."""
    bucket, options = s3_bucket
    zv_config("s3.backend", "s3fs")
    for key, value in {"write.block-rows": 2000, "write.min-block-rows": 1000, "write.min-rows-per-task": 1000,
                       "plan-threads": 8}.items():
        zv_config(key, value)
    client = boto_client(options["endpoint_url"])
    refused: list[str] = []

    def first_cell(method, path, query):
        if method == "PUT" and "/vertices/c/" in path and not refused:
            refused.append(path)
            return True
        return False

    def slowly(query, moto):
        time.sleep(0.05)
        return moto()

    s3_faults.append(Fault(first_cell, lambda query, moto: DENIED))
    s3_faults.append(Fault(lambda m, path, q: m == "PUT" and "/c/" in path, slowly))
    points = np.random.default_rng(5).uniform(0, 100, (20000, 3)).astype(np.float32)
    with pytest.raises(StorageRequestError, match="Access Denied"):
        zv.write_points(f"s3://{bucket}/p/z.zv", points, chunk_shape=5.0, storage_options=options)

    def stored() -> int:
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="p/z.zv/")
        return sum(page["KeyCount"] for page in pages)

    at_raise = stored()
    time.sleep(2.0)
    assert stored() == at_raise
