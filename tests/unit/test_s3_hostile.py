"""What a broken or hostile S3 server gets: a typed error or the right answer, never a
delete outside the store, never a hang (the moto server of ``s3server``, misbehaving on
purpose through ``tests.s3server.Fault``)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import zarr_vectors as zv
from tests.s3server import DECLARED_LENGTH, Fault, boto_client
from zarr_vectors.errors import StorageRequestError

pytestmark = [pytest.mark.s3, pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")]

BACKENDS = ["obstore", "s3fs"]


def _points(n: int = 600) -> np.ndarray:
    return np.random.default_rng(8).uniform(0, 100, (n, 3)).astype(np.float32)


def _is_listing(bucket: str):
    return lambda method, path, query: method == "GET" and path.rstrip("/") == f"/{bucket}" and "list-type=2" in query


def _with_extra_key(key: str):
    """A LIST answer that also names ``key`` (after the answer's own keys, so they stay in order)."""
    item = (f"<Contents><Key>{key}</Key><LastModified>2026-01-01T00:00:00.000Z</LastModified>"
            f"<ETag>&quot;0&quot;</ETag><Size>2</Size><StorageClass>STANDARD</StorageClass></Contents>")  # fmt: skip

    def answer(query, moto):
        status, headers, body = moto()
        text = body.decode()
        at = text.rfind("</Contents>")
        at = at + len("</Contents>") if at >= 0 else text.rfind("</ListBucketResult>")
        return status, headers, (text[:at] + item + text[at:]).encode()

    return answer


@pytest.mark.parametrize("s3_backend", BACKENDS)
def test_a_listing_that_names_keys_outside_the_store_never_deletes_them(s3_bucket, s3_faults, zv_config, s3_backend):
    """Regression: the s3fs backend's ``delete_prefix`` deleted whatever the recursive listing named."""
    bucket, options = s3_bucket
    zv_config("s3.backend", s3_backend)
    victim = "p/victim.zv/zarr.json"
    boto_client(options["endpoint_url"]).put_object(Bucket=bucket, Key=victim, Body=b"{}")
    url = f"s3://{bucket}/p/me.zv"
    zv.write_points(url, _points(), chunk_shape=50.0, storage_options=options)
    s3_faults.append(Fault(_is_listing(bucket), _with_extra_key(victim)))
    zv.write_points(url, _points(), chunk_shape=25.0, storage_options=options, overwrite=True)
    assert zv.validate(url, level=5, storage_options=options).ok  # the stranger is not the store's either
    s3_faults.clear()
    assert boto_client(options["endpoint_url"]).get_object(Bucket=bucket, Key=victim)["Body"].read() == b"{}"
    assert len(zv.read(url, storage_options=options)) == 600


@pytest.mark.parametrize("s3_backend", BACKENDS)
@pytest.mark.parametrize("key, body", [("p/a", b"neighbour"), ("p/a/", b"")], ids=["neighbour", "folder-marker"])
def test_what_is_at_the_stores_own_name_is_not_the_store(s3_bucket, zv_config, s3_backend, key, body):
    """Neither a first write nor an overwrite of the store ``s3://b/p/a/`` touches these, and the
    store is valid without a warning:

    * the object ``s3://b/p/a`` beside it (the s3fs backend took it for an existing store, and
      both backends' overwrite deleted it);
    * its folder marker ``p/a/``, a console's "create folder": the folder the store goes in, not
      an entry of it (both backends' listings named the folder inside itself, so a first write
      there was refused as an existing store)."""
    bucket, options = s3_bucket
    zv_config("s3.backend", s3_backend)
    boto_client(options["endpoint_url"]).put_object(Bucket=bucket, Key=key, Body=body)
    url = f"s3://{bucket}/p/a"
    zv.write_points(url, _points(), chunk_shape=50.0, storage_options=options)
    zv.write_points(url, _points(), chunk_shape=25.0, storage_options=options, overwrite=True)
    assert boto_client(options["endpoint_url"]).get_object(Bucket=bucket, Key=key)["Body"].read() == body
    result = zv.validate(url, level=5, storage_options=options)
    assert result.ok and not result.warnings, result.errors + result.warnings
    assert len(zv.read(url, storage_options=options)) == 600


def _no_such_bucket(query, moto):
    return "404 Not Found", [("Content-Type", "application/xml")], (
        b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchBucket</Code>'
        b"<Message>The specified bucket does not exist</Message></Error>")  # fmt: skip


@pytest.mark.parametrize("s3_backend", BACKENDS)
def test_a_bucket_gone_mid_job_is_a_failed_request_not_a_broken_store(s3_bucket, s3_faults, zv_config, s3_backend):
    """Regression: a GET answered ``NoSuchBucket`` after the job's probe read as a missing
    object, so the reader and the validator blamed the store (objects "listed but missing",
    documents "not valid JSON")."""
    bucket, options = s3_bucket
    zv_config("s3.backend", s3_backend)
    url = f"s3://{bucket}/p/gone.zv"
    zv.write_points(url, _points(), chunk_shape=50.0, storage_options=options)
    s3_faults.append(Fault(lambda m, path, q: m == "GET" and "/0/" in path, _no_such_bucket))
    read, validate = zv.read, zv.validate
    for job in (lambda: read(url, storage_options=options), lambda: validate(url, level=5, storage_options=options)):
        with pytest.raises(StorageRequestError, match=rf"^store '{url}': .*\[NoSuchBucket\]$"):
            job()


def _truncated_without_token(query, moto):
    status, headers, body = moto()
    return status, headers, body.replace(b"<IsTruncated>false</IsTruncated>", b"<IsTruncated>true</IsTruncated>")


def test_s3fs_backend_types_a_listing_that_says_more_follows_but_not_where(s3_bucket, s3_faults, zv_config):
    """Regression: s3fs indexed the answer for its continuation token: a bare KeyError.  (obstore
    takes such a page for the last one.)  The backend's own page loop says what is wrong."""
    bucket, options = s3_bucket
    zv_config("s3.backend", "s3fs")
    url = f"s3://{bucket}/p/trunc.zv"
    zv.write_points(url, _points(), chunk_shape=50.0, storage_options=options)
    s3_faults.append(Fault(_is_listing(bucket), _truncated_without_token))
    with pytest.raises(StorageRequestError, match=rf"^store '{url}': the listing of .* says more follows but gives "
                       "no continuation token$"):
        zv.validate(url, level=5, storage_options=options)


@pytest.mark.slow
def test_s3fs_backend_gives_up_on_a_request_never_answered_in_bounded_time(s3_bucket, s3_faults, zv_config):
    """Regression: botocore's retries inside s3fs's nested tries (25) kept one unanswered GET
    going for more than 25 minutes; now 8 attempts, each bounded by ``s3.request-timeout`` (here 1 s)."""
    import threading
    import time

    bucket, options = s3_bucket
    zv_config("s3.backend", "s3fs")
    zv_config("s3.request-timeout", 1)
    url = f"s3://{bucket}/p/hang.zv"
    zv.write_points(url, _points(), chunk_shape=50.0, storage_options=options)
    released = threading.Event()

    def never(query, moto):
        released.wait(120)
        return moto()

    s3_faults.append(Fault(lambda m, path, q: m == "GET" and path.endswith("/vertices/c/0/0/0"), never))
    started = time.monotonic()
    try:
        with pytest.raises(StorageRequestError, match=f"store '{url}'.*(Timeout|timeout)"):
            zv.read(url, storage_options=options)
    finally:
        released.set()
    assert time.monotonic() - started < 30  # 2 x 2 tries x 2 attempts x 1 s, and s3fs's backoff


@pytest.mark.parametrize("s3_backend", BACKENDS)
def test_an_answer_larger_than_any_object_may_be_is_refused_before_its_body_is_read(s3_bucket, s3_faults, zv_config,
                                                                                    s3_backend):
    """A 3 kB cell answered with more than ``limits.max-decoded-bytes``: refused from the answer's
    length; read whole, a hostile 5 GiB answer took a validation to 10.5 GB."""
    from zarr_vectors.errors import ResourceLimitError

    bucket, options = s3_bucket
    zv_config("s3.backend", s3_backend)
    url = f"s3://{bucket}/p/big.zv"
    zv.write_points(url, _points(), chunk_shape=50.0, storage_options=options)
    zv_config("limits.max-decoded-bytes", 1 << 20)
    assert len(zv.read(url, storage_options=options)) == 600  # the store itself fits
    cell = "/p/big.zv/0/vertices/c/0/0/0"
    s3_faults.append(Fault(lambda m, path, q: m == "GET" and path == f"/{bucket}{cell}",
                           lambda query, moto: ("200 OK", [], b"\0" * (2 << 20))))
    with pytest.raises(ResourceLimitError, match=rf"s3://{bucket}{cell}: the server answers {2 << 20} bytes"):
        zv.read(url, storage_options=options)
    report = zv.validate(url, level=5, storage_options=options)
    limited = [f for f in report.findings if f.code == "L1_RESOURCE_LIMIT"]
    assert len(limited) == 1 and limited[0].cell == "0.0.0" and f"{cell}: the server answers" in limited[0].message


def _repeating_page():
    """A LIST answer that says more follows at a token that gives the same page again, forever."""
    first: list = []

    def answer(query, moto):
        if not first:
            status, headers, body = moto()
            body = body.replace(b"<IsTruncated>false</IsTruncated>",
                                b"<IsTruncated>true</IsTruncated><NextContinuationToken>again</NextContinuationToken>")
            first.append((status, headers, body))
        return first[0]

    return answer


#: what ends a listing that repeats its pages, by backend and kind of listing
REPEATED = {
    ("obstore", False): "the listing of 'the root' names .* three times: the server repeats its pages",
    # every job's reachability probe is a delimited listing: a store that cannot be used
    ("obstore", True): r"cannot reach bucket .*: the listing of 'the root' did not end within 2 s "
                       r"\(zarr_vectors.s3.listing-timeout, retries included\)",
    ("s3fs", False): "the listing of .* hands out continuation token 'again' twice: the server repeats its pages",
    ("s3fs", True): "the listing of .* hands out continuation token 'again' twice: the server repeats its pages",
}


@pytest.mark.timeout(90)
@pytest.mark.parametrize("delimited", [False, True], ids=["recursive", "delimited"])
@pytest.mark.parametrize("s3_backend", BACKENDS)
def test_a_listing_that_repeats_its_page_forever_ends(s3_bucket, s3_faults, zv_config, s3_backend, delimited):
    """A server that answers every continuation with the same page and token: a validation, an
    overwrite, a read and a pyramid build end with a StorageRequestError.  The obstore backend's
    recursive listing stops at the first path named a third time, its delimited one (obstore
    pages it, unseen) at a time bound, which the reachability probe meets first; the s3fs
    backend's page loop (ours) at the first token handed out twice."""
    bucket, options = s3_bucket
    zv_config("s3.backend", s3_backend)
    zv_config("s3.listing-timeout", 2)
    url = f"s3://{bucket}/p/loop.zv"
    zv.write_points(url, _points(), chunk_shape=50.0, storage_options=options)
    s3_faults.append(Fault(lambda m, path, q: _is_listing(bucket)(m, path, q) and ("delimiter" in q) == delimited,
                           _repeating_page()))
    from zarr_vectors.errors import StoreNotFoundError

    probe = (s3_backend, delimited) == ("obstore", True)
    refused, expected = (StoreNotFoundError, "^") if probe else (StorageRequestError, rf"^store '{url}': ")
    expected += REPEATED[s3_backend, delimited]
    if delimited:  # what opens a store lists its groups
        calls = [lambda: zv.read(url, storage_options=options),
                 lambda: zv.build_pyramid(url, factors=[2], storage_options=options)]
    else:  # a validation's scan, an overwrite's delete
        calls = [lambda: zv.validate(url, level=5, storage_options=options),
                 lambda: zv.write_points(url, _points(), chunk_shape=25.0, storage_options=options, overwrite=True)]
    for call in calls:
        with pytest.raises(refused, match=expected):
            call()
    s3_faults.clear()
    assert zv.validate(url, level=5, storage_options=options).ok  # nothing was deleted on the way


def test_a_folder_marker_beside_its_namesake_is_not_a_repeated_page(s3_bucket, zv_config):
    """obstore lists ``x`` and the folder marker ``x/`` as the same path: a legitimate listing."""
    from zarr_vectors.store.backend import Storage

    bucket, options = s3_bucket
    zv_config("s3.backend", "obstore")
    url = f"s3://{bucket}/p/marker.zv"
    zv.write_points(url, _points(), chunk_shape=50.0, storage_options=options)
    client = boto_client(options["endpoint_url"])
    client.put_object(Bucket=bucket, Key="p/marker.zv/extra", Body=b"x")
    client.put_object(Bucket=bucket, Key="p/marker.zv/extra/", Body=b"m")
    assert "extra" in Storage(url, options).list_files("")
    report = zv.validate(url, level=5, storage_options=options)  # strays are the store's finding, not a failed request
    assert {f.code for f in report.findings} and all(f.code.startswith("L1_") for f in report.findings)


CELL = "0/vertices/c/0/0/0"


def _range_answered(s3_bucket, s3_faults, zv_config, content_range: str, body: bytes):
    """A written store's storage, whose cell ``CELL`` is answered with a 206 of ``content_range`` and ``body``."""
    from zarr_vectors.store.backend import Storage

    bucket, options = s3_bucket
    zv_config("s3.backend", "obstore")
    url = f"s3://{bucket}/p/ranged.zv"
    zv.write_points(url, _points(), chunk_shape=50.0, storage_options=options)
    s3_faults.append(Fault(lambda m, path, q: m == "GET" and path == f"/{bucket}/p/ranged.zv/{CELL}",
                           lambda query, moto: ("206 Partial Content", [("Content-Range", content_range)], body)))
    return Storage(url, options)


def test_a_body_longer_than_its_answer_declares_is_refused(s3_bucket, s3_faults, zv_config):
    """A ranged GET answered ``Content-Range: bytes 0-9/10`` with megabytes behind it: obstore takes the
    range from the header and reads whatever follows; the backend counts the body as it streams."""
    storage = _range_answered(s3_bucket, s3_faults, zv_config, "bytes 0-9/10", b"\0" * (9 << 20))
    with pytest.raises(StorageRequestError, match=rf"{CELL}: the server sends more than the 10 bytes"):
        storage.get_ranges([(CELL, 0, 10)])


def test_a_body_shorter_than_its_answer_declares_is_refused(s3_bucket, s3_faults, zv_config):
    """A ranged GET answered ``Content-Range: bytes 0-99/100`` with 10 bytes: not a 10-byte object."""
    storage = _range_answered(s3_bucket, s3_faults, zv_config, "bytes 0-99/100", b"\0" * 10)
    with pytest.raises(StorageRequestError, match=rf"{CELL}: the server sends 10 of the 100 bytes"):
        storage.get_ranges([(CELL, 0, 100)])


def test_a_body_that_breaks_off_names_its_object(s3_bucket, s3_faults, zv_config):
    """A server that declares more body than it sends, then closes: obstore's "request or response body
    error" names no object; ours does."""
    bucket, options = s3_bucket
    zv_config("s3.backend", "obstore")
    url = f"s3://{bucket}/p/broken.zv"
    zv.write_points(url, _points(), chunk_shape=50.0, storage_options=options)
    cell = "p/broken.zv/0/vertices/c/0/0/0"
    s3_faults.append(Fault(lambda m, path, q: m == "GET" and path == f"/{bucket}/{cell}",
                           lambda query, moto: ("200 OK", [(DECLARED_LENGTH, "1000")], b"\0" * 10)))
    with pytest.raises(StorageRequestError, match=rf"^store '{url}': s3://{bucket}/{cell}: .*body error"):
        zv.read(url, storage_options=options)


@pytest.mark.parametrize("s3_backend", BACKENDS)
def test_a_server_that_ignores_the_range_asked_is_refused(s3_bucket, s3_faults, zv_config, s3_backend):
    """A ranged GET (a shard's index, an inner chunk) answered with the whole object, as a server
    that ignores the Range header answers: refused, never read past the range (s3fs's
    ``cat_ranges``, which the s3fs backend used, reads it whole; obstore refuses it itself)."""
    from zarr_vectors.store.backend import Storage

    bucket, options = s3_bucket
    zv_config("s3.backend", s3_backend)
    url = f"s3://{bucket}/p/ignored.zv"
    zv.write_points(url, _points(), chunk_shape=50.0, storage_options=options)
    storage = Storage(url, options)
    whole = storage.get(CELL)
    assert storage.get_ranges([(CELL, 2, 12), (CELL, -4, None), (CELL, 5, 5)]) == [whole[2:12], whole[-4:], b""]
    s3_faults.append(Fault(lambda m, path, q: m == "GET" and path == f"/{bucket}/p/ignored.zv/{CELL}",
                           lambda query, moto: ("200 OK", [], whole)))
    from zarr_vectors.errors import InputError

    for wrong in [(CELL, -8, -4), (CELL, 0, -4)]:  # outside RangeRequest's forms: refused, never misread
        with pytest.raises(InputError, match="a range from the end"):
            storage.get_ranges([wrong])
    for asked in [(CELL, 2, 12), (CELL, -4, None), (CELL, 2, len(whole) + 2)]:  # the last: no longer than asked
        refused = "it ignores the range" if s3_backend == "s3fs" else "non-partial response when range requested"
        with pytest.raises(StorageRequestError, match=rf"^store '{url}': .*{refused}"):
            storage.get_ranges([asked])


def _fresh_tokens():
    """A LIST answer that says more follows at a new token each time, and gives the same page."""
    sent: list = []
    tokens = itertools.count()

    def answer(query, moto):
        status, headers, body = moto() if not sent else sent[0]
        sent[:] = [(status, headers, body)]
        token = f"t{next(tokens)}".encode()
        return status, headers, body.replace(b"<IsTruncated>false</IsTruncated>", b"<IsTruncated>true</IsTruncated>"
                                             b"<NextContinuationToken>" + token + b"</NextContinuationToken>")

    return answer


@pytest.mark.timeout(60)
def test_s3fs_backend_ends_a_listing_that_repeats_its_page_under_fresh_tokens(s3_bucket, s3_faults, zv_config):
    """The same page behind a new token each time: no token repeats, so the s3fs backend's page
    loop ends it after pages in a row that name nothing new (not by key order, which S3's
    directory buckets do not keep)."""
    bucket, options = s3_bucket
    zv_config("s3.backend", "s3fs")
    url = f"s3://{bucket}/p/fresh.zv"
    zv.write_points(url, _points(), chunk_shape=50.0, storage_options=options)
    s3_faults.append(Fault(_is_listing(bucket), _fresh_tokens()))
    with pytest.raises(StorageRequestError, match=rf"^store '{url}': the listing of .* sends 100 pages in a row that "
                       "name nothing new"):
        zv.validate(url, level=5, storage_options=options)


@pytest.mark.timeout(60)
def test_obstore_backend_bounds_a_delimited_listing_inside_the_store_by_time(s3_bucket, s3_faults, zv_config):
    """Below the root (the probe passes), a read's delimited listing of a level's groups that
    repeats its page ends at ``s3.listing-timeout``."""
    bucket, options = s3_bucket
    zv_config("s3.backend", "obstore")
    zv_config("s3.listing-timeout", 2)
    url = f"s3://{bucket}/p/inner.zv"
    zv.write_points(url, _points(), chunk_shape=50.0, storage_options=options)
    s3_faults.append(Fault(lambda m, path, q: _is_listing(bucket)(m, path, q) and "delimiter" in q
                           and "prefix=p%2Finner.zv%2F0%2F" in q, _repeating_page()))
    with pytest.raises(StorageRequestError, match=rf"^store '{url}': the listing of '0.*' did not end within 2 s"):
        zv.read(url, storage_options=options)


def _page_entry_without_key(query, moto):
    status, headers, body = moto()
    return status, headers, body.replace(b"<Key>", b"<Nokey>", 1).replace(b"</Key>", b"</Nokey>", 1)


@pytest.mark.parametrize("s3_backend", BACKENDS)
def test_a_listing_of_a_bucket_gone_or_an_entry_without_its_key_is_a_failed_request(s3_bucket, s3_faults, zv_config,
                                                                                   s3_backend):
    """Regression (s3fs backend's own page loop, first version): NoSuchBucket on a LIST escaped as a
    bare FileNotFoundError, an entry without its key as a bare KeyError."""
    from zarr_vectors.store.backend import Storage

    bucket, options = s3_bucket
    zv_config("s3.backend", s3_backend)
    url = f"s3://{bucket}/p/gone.zv"
    zv.write_points(url, _points(), chunk_shape=50.0, storage_options=options)
    storage = Storage(url, options)
    s3_faults.append(Fault(_is_listing(bucket), _no_such_bucket))
    for listing in (storage.list_files, storage.object_sizes):
        with pytest.raises(StorageRequestError, match=rf"^store '{url}': .*NoSuchBucket|^store '{url}': .*does not"):
            listing("") if listing == storage.list_files else listing()
    s3_faults[:] = [Fault(_is_listing(bucket), _page_entry_without_key)]
    if s3_backend == "s3fs":  # obstore refuses such a page in its own words, or reads it as no entry
        with pytest.raises(StorageRequestError, match=rf"^store '{url}': the listing of .* names an entry without"):
            storage.list_files("")


def test_s3fs_backend_takes_pages_out_of_key_order_and_a_prefix_repeated_at_their_boundary(s3_bucket, zv_config,
                                                                                          monkeypatch):
    """What real servers send and a key-order check refused (the review's cases): S3 directory
    buckets do not list in key order, and some servers repeat a common prefix across pages."""
    from zarr_vectors.store.backend import Storage

    bucket, options = s3_bucket
    zv_config("s3.backend", "s3fs")
    storage = Storage(f"s3://{bucket}/s", options)
    pages = [
        {"CommonPrefixes": [{"Prefix": "s/z/"}, {"Prefix": "s/b/"}], "IsTruncated": True, "NextContinuationToken": "1"},
        {"CommonPrefixes": [{"Prefix": "s/b/"}, {"Prefix": "s/c/"}], "Contents": [{"Key": "s/a", "Size": 3}],
         "IsTruncated": False},
    ]
    asked = []

    async def answer(method, **kwargs):
        asked.append(kwargs.get("ContinuationToken"))
        return pages[len(asked) - 1]

    monkeypatch.setattr(storage.fs, "_call_s3", answer)  # fsspec shares the filesystem: undone after the test
    assert storage.list_dir("") == ["a", "b", "c", "z"] and asked == [None, "1"]


@pytest.mark.parametrize("s3_backend", BACKENDS)
def test_a_server_that_stays_busy_names_the_object_it_was_asked_for(s3_bucket, s3_faults, zv_config, s3_backend):
    """Regression: s3fs's failure after its retries of a GET answered 503 named no object."""
    bucket, options = s3_bucket
    zv_config("s3.backend", s3_backend)
    url = f"s3://{bucket}/p/busy.zv"
    zv.write_points(url, _points(), chunk_shape=50.0, storage_options=options)
    busy = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
            b"<Message>Please reduce your request rate.</Message></Error>")
    s3_faults.append(Fault(lambda m, path, q: m == "GET" and path == f"/{bucket}/p/busy.zv/{CELL}",
                           lambda query, moto: ("503 Slow Down", [("Content-Type", "application/xml")], busy)))
    with pytest.raises(StorageRequestError, match=rf"^store '{url}': .*p/busy.zv/{CELL}"):
        zv.read(url, storage_options=options)


def _marker_tree(options, bucket: str, prefix: str) -> list[str]:
    return sorted(o["Key"] for o in boto_client(options["endpoint_url"]).list_objects_v2(
        Bucket=bucket, Prefix=prefix).get("Contents", []) if o["Key"].endswith("/"))


@pytest.mark.parametrize("s3_backend", BACKENDS)
def test_folder_markers_inside_the_arrays_are_no_cells(s3_bucket, zv_config, s3_backend):
    """A store uploaded with its folders made first (``0/vertices/c/0/``...): the pyramid and
    the sharder refused it, each cell listing taking a marker for a cell ("unexpected object
    '0/vertices/c/0'", with obstore an object that does not exist).  The markers are no cells:
    both stages run, the markers stay where they are (strays the validator warns of), and the
    data read back is the data written."""
    bucket, options = s3_bucket
    zv_config("s3.backend", s3_backend)
    url = f"s3://{bucket}/p/mk.zv"
    pos = _points()
    zv.write_points(url, pos, chunk_shape=25.0, bounds=[[0, 0, 0], [100, 100, 100]],
                    attributes={"v": pos[:, 0].copy()}, storage_options=options)
    client = boto_client(options["endpoint_url"])
    cells = [o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix="p/mk.zv/0/vertices/c/")["Contents"]]
    folders = sorted({k.rsplit("/", n)[0] + "/" for k in cells for n in (1, 2, 3)})  # .../c/, .../c/i/, .../c/i/j/
    assert len(folders) > 3
    for key in ["p/mk.zv/0/", "p/mk.zv/0/vertex_attributes/v/c/", *folders]:
        client.put_object(Bucket=bucket, Key=key, Body=b"")
    zv.build_pyramid(url, factors=[2], storage_options=options)
    assert zv.shard_store(url, shard_shape=2, storage_options=options).cells > len(cells)
    result = zv.validate(url, level=5, storage_options=options)
    assert result.ok, result.errors
    assert any("unexpected object" in w for w in result.warnings), result.warnings
    assert len(_marker_tree(options, bucket, "p/mk.zv/")) == len(folders) + 2
    read = zv.read(url, storage_options=options)
    assert np.array_equal(np.sort(read.attributes["v"]), np.sort(pos[:, 0]))


@pytest.mark.parametrize("s3_backend", BACKENDS)
def test_a_listing_with_sizes_names_no_folder_marker_and_nothing_beside_its_prefix(s3_bucket, zv_config, s3_backend):
    """``file_sizes`` (the listing the sharder plans its tasks from): each object below the prefix
    with its size, not a folder marker, not the neighbour whose name the prefix begins."""
    from zarr_vectors.store.backend import Storage

    bucket, options = s3_bucket
    zv_config("s3.backend", s3_backend)
    client = boto_client(options["endpoint_url"])
    for key, body in [("p/fs.zv/0/c/0", b"12345"), ("p/fs.zv/0/c/", b""), ("p/fs.zv/0/c/1/2", b"ab"),
                      ("p/fs.zv/0c", b"neighbour"), ("p/fs.zv/1/x", b"xyz")]:
        client.put_object(Bucket=bucket, Key=key, Body=body)
    storage = Storage(f"s3://{bucket}/p/fs.zv", options)
    assert storage.file_sizes("0") == {"0/c/0": 5, "0/c/1/2": 2}
    assert storage.file_sizes("") == {"0/c/0": 5, "0/c/1/2": 2, "0c": 9, "1/x": 3}


@pytest.mark.parametrize("key", ["0//x", "0/./x", "0/../x", "0/a\tb"], ids=["empty-segment", "dot", "dot-dot", "tab"])
def test_a_key_obstore_cannot_name_is_refused_naming_what_can(s3_bucket, zv_config, key):
    """obstore fails a whole listing on a key with an empty segment, ``.``, ``..`` or a control
    character (its paths cannot hold one), so neither the validator nor an overwrite could get past such a store
    with it.  The error says so and names the backend that can: with s3fs the validator
    reports the key as a stray and an overwrite removes it."""
    bucket, options = s3_bucket
    url = f"s3://{bucket}/p/bad.zv"
    zv.write_points(url, _points(), chunk_shape=50.0, storage_options=options)
    boto_client(options["endpoint_url"]).put_object(Bucket=bucket, Key=f"p/bad.zv/{key}", Body=b"x")
    zv_config("s3.backend", "obstore")
    with pytest.raises(StorageRequestError, match=r"invalid path.*zarr_vectors\.s3\.backend: s3fs"):
        zv.validate(url, level=5, storage_options=options)
    zv_config("s3.backend", "s3fs")
    result = zv.validate(url, level=5, storage_options=options)
    assert result.ok and any(repr(key) in w for w in result.warnings), result.warnings  # as the report quotes it
    zv.write_points(url, _points(), chunk_shape=50.0, storage_options=options, overwrite=True)
    left = [o["Key"] for o in boto_client(options["endpoint_url"]).list_objects_v2(
        Bucket=bucket, Prefix="p/bad.zv/").get("Contents", [])]
    assert f"p/bad.zv/{key}" not in left
    zv_config("s3.backend", "obstore")
    assert zv.validate(url, level=5, storage_options=options).ok


@pytest.mark.parametrize("s3_backend", BACKENDS)
@pytest.mark.parametrize("then", ["reshard", "pyramid"])
def test_folder_markers_a_relayout_emptied_are_no_cells_either(s3_bucket, zv_config, s3_backend, then):
    """Review: sharding moves the cells out of their folders and leaves the markers, with nothing
    below them: obstore lists such a marker as ``.../c/0/2``, an object, which a cell listing
    that went by "has keys below it" took for a cell the next time."""
    bucket, options = s3_bucket
    zv_config("s3.backend", s3_backend)
    url = f"s3://{bucket}/p/mk.zv"
    pos = _points()
    zv.write_points(url, pos, chunk_shape=25.0, bounds=[[0, 0, 0], [100, 100, 100]], storage_options=options)
    client = boto_client(options["endpoint_url"])
    cells = [o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix="p/mk.zv/0/vertices/c/")["Contents"]]
    for key in sorted({k.rsplit("/", n)[0] + "/" for k in cells for n in (1, 2, 3)}):
        client.put_object(Bucket=bucket, Key=key, Body=b"")
    zv.shard_store(url, shard_shape=2, storage_options=options)
    if then == "reshard":
        zv.shard_store(url, shard_shape=4, storage_options=options)
    else:
        zv.build_pyramid(url, factors=[2], storage_options=options)
    assert zv.validate(url, level=5, storage_options=options).ok
    assert np.array_equal(np.sort(zv.read(url, storage_options=options).positions, axis=0), np.sort(pos, axis=0))


@pytest.mark.parametrize("s3_backend", BACKENDS)
def test_an_object_with_keys_below_it_is_still_listed(s3_bucket, zv_config, s3_backend):
    """Review: a listing that dropped every key other keys lie below (to pass over obstore's form
    of a folder marker) dropped a table chunk ``t/c/5`` with a stray ``t/c/5/stray`` below it,
    and the table read its fill value there, silently."""
    from zarr_vectors.store.backend import Storage
    from zarr_vectors.store.tables import present_chunks

    bucket, options = s3_bucket
    zv_config("s3.backend", s3_backend)
    storage = Storage(f"s3://{bucket}/st", options)
    storage.put_many({f"t/c/{i}": b"chunk" for i in range(100)})
    boto_client(options["endpoint_url"]).put_object(Bucket=bucket, Key="st/t/c/5/stray", Body=b"x")
    assert "t/c/5" in storage.list_files("t/c") and present_chunks(storage, "t", 100, 1) == list(range(100))


@pytest.mark.parametrize("s3_backend", BACKENDS)
def test_listings_never_name_the_folder_listed(s3_bucket, zv_config, s3_backend):
    """A folder's own marker is not one of its entries (it was, on both backends: ``a`` in ``a``)."""
    from zarr_vectors.store.backend import Storage

    bucket, options = s3_bucket
    zv_config("s3.backend", s3_backend)
    client = boto_client(options["endpoint_url"])
    for key in ("s/", "s/a/", "s/c/"):
        client.put_object(Bucket=bucket, Key=key, Body=b"")
    client.put_object(Bucket=bucket, Key="s/a/b", Body=b"x")
    storage = Storage(f"s3://{bucket}/s", options)
    assert [storage.list_dir(p) for p in ("", "a", "c")] == [["a", "c"], ["b"], []]
    assert "" not in storage.list_files("") and "" not in storage.object_sizes()


def test_s3fs_backend_overwrite_removes_the_folder_markers_inside_the_store(s3_bucket, zv_config):
    """Markers inside a store (``0/``, ``0/vertices/``) are the store's: an overwrite removes them
    with the s3fs backend, whose deletes s3fs's ``rm`` made of ``0`` (nothing).  (obstore cannot
    address a key that ends in ``/``: with it they stay, as strays the validator warns of.)"""
    bucket, options = s3_bucket
    zv_config("s3.backend", "s3fs")
    url = f"s3://{bucket}/p/st.zv"
    zv.write_points(url, _points(), chunk_shape=50.0, storage_options=options)
    for key in ("p/st.zv/0/", "p/st.zv/0/vertices/"):
        boto_client(options["endpoint_url"]).put_object(Bucket=bucket, Key=key, Body=b"")
    assert zv.validate(url, level=5, storage_options=options).warnings  # strays before
    zv.write_points(url, _points(), chunk_shape=25.0, storage_options=options, overwrite=True)
    assert _marker_tree(options, bucket, "p/") == []
    result = zv.validate(url, level=5, storage_options=options)
    assert result.ok and not result.warnings, result.errors + result.warnings


def _refuse_deletes(query, moto):
    """A DeleteObjects answer (200) listing every key as not deleted, deleting nothing."""
    return "200 OK", [("Content-Type", "application/xml")], (
        b'<?xml version="1.0" encoding="UTF-8"?><DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        b"<Error><Key>p/old.zv/zarr.json</Key><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
        b"</DeleteResult>")  # fmt: skip


@pytest.mark.parametrize("s3_backend", BACKENDS)
def test_an_overwrite_whose_deletes_are_refused_fails_and_says_so(s3_bucket, s3_faults, zv_config, s3_backend):
    """Regression: the s3fs backend took a DeleteObjects answer listing keys as not deleted for
    success (s3fs's ``rm`` drops them), so an overwrite reported a new store over the old one's
    objects."""
    bucket, options = s3_bucket
    zv_config("s3.backend", s3_backend)
    url = f"s3://{bucket}/p/old.zv"
    zv.write_points(url, _points(), chunk_shape=50.0, storage_options=options)
    s3_faults.append(Fault(lambda m, path, q: m == "POST" and "delete" in q, _refuse_deletes))
    with pytest.raises(StorageRequestError, match=rf"^store '{url}': .*p/old.zv/zarr.json.*Access Denied"):
        zv.write_points(url, _points(300), chunk_shape=25.0, storage_options=options, overwrite=True)
    s3_faults.clear()
    assert len(zv.read(url, storage_options=options)) == 600  # the old store, untouched


_BUSY = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
         b"<Message>Please reduce your request rate.</Message></Error>")


def _busy(query, moto):
    return "503 Slow Down", [("Content-Type", "application/xml")], _BUSY


@pytest.mark.parametrize("s3_backend", BACKENDS)
def test_a_server_that_stays_busy_names_the_object_written_and_the_listing(s3_bucket, s3_faults, zv_config,
                                                                           s3_backend):
    """Regression: after its retries, the s3fs backend's failed PUT named no object and its failed
    LIST no prefix (``store '…': OSError: [Errno 16] Please reduce your request rate.``)."""
    from zarr_vectors.store.backend import Storage

    bucket, options = s3_bucket
    zv_config("s3.backend", s3_backend)
    url = f"s3://{bucket}/p/busy.zv"
    s3_faults.append(Fault(lambda m, path, q: m == "PUT" and path == f"/{bucket}/p/busy.zv/zarr.json", _busy))
    with pytest.raises(StorageRequestError, match=rf"^store '{url}': .*p/busy.zv/zarr.json.*reduce your request rate"):
        zv.write_points(url, _points(), chunk_shape=50.0, storage_options=options)
    storage = Storage(url, options)
    storage.put("0/zarr.json", b"{}")
    s3_faults[:] = [Fault(lambda m, path, q: _is_listing(bucket)(m, path, q) and "busy.zv%2F0%2F" in q, _busy)]
    # obstore names the listing by its request's URL, where the prefix is escaped
    named = {"s3fs": r"the listing of .*p/busy.zv/0.*reduce your request", "obstore": r"prefix=p%2Fbusy.zv%2F0%2F.*503"}
    for listing in (storage.list_dir, storage.list_files):
        with pytest.raises(StorageRequestError, match=rf"^store '{url}': .*{named[s3_backend]}"):
            listing("0")


def test_s3fs_backend_deletes_keys_that_look_like_patterns_exactly(s3_bucket, zv_config):
    """Regression: s3fs's ``rm`` expanded ``?``, ``*`` and ``[`` in keys: deleting ``q?y/a`` deleted
    ``qay/a`` and left ``q?y/a`` (store and attribute names may hold them)."""
    from zarr_vectors.store.backend import Storage

    bucket, options = s3_bucket
    zv_config("s3.backend", "s3fs")
    storage = Storage(f"s3://{bucket}/p/s.zv", options)
    names = ["q?y/a", "qay/a", "s*t/a", "sxt/a", "br[a]/x", "bra/x"]
    storage.put_many({name: b"1" for name in names})
    storage.delete_many(["q?y/a", "s*t/a", "br[a]/x"])
    assert storage.list_files("") == ["bra/x", "qay/a", "sxt/a"]


def _delete_refused_for(code: str, times: int):
    """A DeleteObjects answer listing every key asked as not deleted with ``code``, ``times``
    times; then moto's own answer (the keys deleted)."""
    answered = []

    def answer(query, moto):
        if len(answered) >= times:
            return moto()
        answered.append(query)
        return "200 OK", [("Content-Type", "application/xml")], (
            b'<?xml version="1.0" encoding="UTF-8"?><DeleteResult>'
            + b"".join(b"<Error><Key>" + key.encode() + b"</Key><Code>" + code.encode()
                       + b"</Code><Message>Please reduce your request rate.</Message></Error>"
                       for key in ("p/s.zv/a", "p/s.zv/b"))
            + b"</DeleteResult>")  # fmt: skip

    return answer, answered


@pytest.mark.parametrize("refusals, deleted", [(2, True), (3, False)], ids=["mended", "stays"])
def test_s3fs_backend_asks_again_for_keys_refused_for_a_passing_reason(s3_bucket, s3_faults, zv_config,
                                                                         refusals, deleted):
    """A DeleteObjects answer may list keys as not deleted with ``SlowDown``: those are asked again
    (``s3.delete-retries``, 2), and still refused after that the call fails."""
    from zarr_vectors.store.backend import Storage

    bucket, options = s3_bucket
    zv_config("s3.backend", "s3fs")
    storage = Storage(f"s3://{bucket}/p/s.zv", options)
    storage.put_many({"a": b"1", "b": b"2"})
    answer, answered = _delete_refused_for("SlowDown", refusals)
    s3_faults.append(Fault(lambda m, path, q: m == "POST" and "delete" in q, answer))
    if deleted:
        storage.delete_many(["a", "b"])
        assert storage.list_files("") == [] and len(answered) == 2
    else:
        with pytest.raises(StorageRequestError, match=r"2 of 2 objects were not deleted; the first, "
                                                      rf"s3://{bucket}/p/s.zv/a: SlowDown"):
            storage.delete_many(["a", "b"])
        assert len(answered) == 3 and storage.list_files("") == ["a", "b"]
