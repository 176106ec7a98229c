"""Shared fixtures: hypothesis profiles, a real S3 endpoint on loopback, a real LocalCluster."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

# CI runs a fixed, derandomised profile with enough examples to matter; locally the
# default profile explores new examples each run.
settings.register_profile(
    "ci", max_examples=200, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture(scope="session")
def s3_server():
    """A moto S3 server on 127.0.0.1 (a real HTTP endpoint, not a mock of s3fs) that counts requests."""
    from tests.s3server import S3Server

    server = S3Server().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def s3_endpoint(s3_server):
    return s3_server.endpoint


@pytest.fixture
def s3_faults(s3_server):
    """The faults ``s3_server`` injects (a list of ``tests.s3server.Fault``), cleared when the test ends."""
    yield s3_server.middleware.faults
    s3_server.middleware.faults.clear()


@pytest.fixture(scope="session")
def s3_latency_server():
    """The same server with 20 ms added to every request, as an object store over a network costs."""
    from tests.s3server import S3Server

    server = S3Server(latency_ms=float(os.environ.get("ZV_TEST_S3_LATENCY_MS", "20"))).start()
    yield server
    server.stop()


def _bucket(endpoint: str):
    import uuid

    from tests.s3server import boto_client

    name = f"zv-{uuid.uuid4().hex[:12]}"
    boto_client(endpoint).create_bucket(Bucket=name)
    options = {"endpoint_url": endpoint, "key": "test", "secret": "test", "client_kwargs": {"region_name": "us-east-1"}}
    return name, options


@pytest.fixture
def s3_bucket(s3_endpoint):
    """A fresh bucket; yields (bucket name, storage_options)."""
    yield _bucket(s3_endpoint)


@pytest.fixture
def s3_latency_bucket(s3_latency_server):
    """A fresh bucket on the 20 ms server; yields (bucket name, storage_options)."""
    yield _bucket(s3_latency_server.endpoint)


@pytest.fixture(scope="session")
def local_cluster():
    """One real LocalCluster with two worker processes for integration tests."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0")
    client = Client(cluster, set_as_default=False)
    yield client
    client.close()
    cluster.close()


@pytest.fixture
def zv_config():
    """Change ``zarr_vectors.*`` settings for one test: ``zv_config("write.block-rows", 64)``.

    Through ``dask.config.set``, as a user would; restored when the test ends.
    """
    import contextlib

    import dask

    with contextlib.ExitStack() as stack:
        yield lambda key, value: stack.enter_context(dask.config.set({f"zarr_vectors.{key}": value}))
