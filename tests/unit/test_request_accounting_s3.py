"""Request accounting against what an S3 server saw: moto on loopback counts requests by
HTTP method (tests/s3server.py), our count is gathered from the tasks of two worker processes."""

from __future__ import annotations

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.execution.requests import count_requests
from zarr_vectors.store.accounting import RequestCounts

pytestmark = [pytest.mark.s3, pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")]


def served(server, fn) -> tuple[dict[str, int], RequestCounts]:
    """What the server saw while ``fn`` ran, and what we counted."""
    server.reset()
    with count_requests() as tally:
        fn()
    return server.requests(), tally.counts


def assert_matches(seen: dict[str, int], ours: RequestCounts, *, exact: bool) -> None:
    """PUTs and HEADs are one HTTP request each; a LIST is a GET with a list query on the wire.

    s3fs adds probes the contract does not ask for -- a listing after a HEAD that misses,
    a listing of the parent when a prefix lists empty -- each following one of our LISTs
    or HEADs, so the server may see up to that many more GETs where keys are missing.
    """
    assert seen.get("PUT", 0) == ours.puts
    assert seen.get("HEAD", 0) == ours.heads
    listed = ours.gets + ours.lists
    if exact:
        assert seen.get("GET", 0) == listed
    else:
        assert listed <= seen.get("GET", 0) <= listed + ours.lists + ours.heads
    assert seen.get("DELETE", 0) + seen.get("POST", 0) == ours.deletes  # bulk deletes are a POST on S3


def test_per_stage_counts_equal_what_the_server_saw(s3_server, s3_bucket, local_cluster):
    bucket, options = s3_bucket
    url = f"s3://{bucket}/p.zv"
    pos = np.random.default_rng(3).uniform(0, 1000, (20000, 3))
    stages = {
        "write": (lambda: zv.write_points(url, pos, chunk_shape=250, storage_options=options), False),
        "read": (lambda: zv.read(url, storage_options=options), False),
        "pyramid": (lambda: zv.build_pyramid(url, factors=[(2, 1)], storage_options=options), False),
        # the commit's moves once HEADed their sources behind the accounting's back (0 counted, 112 seen)
        "shard": (lambda: zv.shard_store(url, 2, storage_options=options), False),
        "validate": (lambda: zv.validate(url, 5, storage_options=options), True),
        "consolidate": (lambda: zv.consolidate_store(url, storage_options=options), True),
        "overwrite": (lambda: zv.write_points(url, pos, chunk_shape=250, storage_options=options, overwrite=True),
                      False),
    }
    with local_cluster.as_current():
        for name, (fn, exact) in stages.items():
            seen, ours = served(s3_server, fn)
            assert ours.requests > 0, name
            try:
                assert_matches(seen, ours, exact=exact)
            except AssertionError as exc:
                raise AssertionError(f"{name}: server saw {seen}, we counted {ours.by_kind()}") from exc


def test_bytes_counted_are_the_bytes_stored(s3_bucket, local_cluster):
    """A fresh write PUTs every object once or more; a read of everything GETs each cell once."""
    from tests.s3server import boto_client

    bucket, options = s3_bucket
    url = f"s3://{bucket}/p.zv"
    pos = np.random.default_rng(4).uniform(0, 1000, (5000, 3))
    with local_cluster.as_current():
        with count_requests() as write:
            zv.write_points(url, pos, chunk_shape=250, storage_options=options)
        with count_requests() as read:
            zv.read(url, storage_options=options)
    s3 = boto_client(options["endpoint_url"])
    sizes = {o["Key"]: o["Size"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="p.zv/")["Contents"]}
    assert write.counts.puts >= len(sizes) and write.counts.bytes_written >= sum(sizes.values())
    cells = sum(v for k, v in sizes.items() if "/c/" in k and k.split("/")[2] == "vertices")
    assert read.counts.bytes_read >= cells  # every vertex cell came through our count
    assert read.by_stage and write.by_stage["write vertices"].puts > 0
