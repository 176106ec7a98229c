"""``zv build`` entirely on S3 (moto's server on loopback), on a 2-worker LocalCluster, and read back.

Two ways of reaching the endpoint, both of which must reach the workers:

* the standard AWS environment variables, set *before* a dedicated LocalCluster starts
  (workers copy the environment at start-up; s3fs/botocore honour ``AWS_ENDPOINT_URL``);
* ``--storage-option`` pairs, on the session cluster whose workers have no AWS
  environment at all: the options travel inside the pickled ``Storage`` objects.
"""

from __future__ import annotations

import io
import os
import time

import numpy as np
import pandas as pd
import pytest
from pipeline_helpers import endpoint_env, graph_frames, input_rows_of, points_frame, rows

from tests.s3server import boto_client
import zarr_vectors as zv
from zarr_vectors.store.nodes import read_node
from zarr_vectors.validation import validate

pytestmark = [pytest.mark.s3, pytest.mark.slow,
              pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")]

AWS_ENV = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1"}
FAST_FAIL = ["--storage-option", "config_kwargs.connect_timeout=1", "--storage-option", "config_kwargs.read_timeout=1",
             "--storage-option", "config_kwargs.retries.max_attempts=1"]


@pytest.fixture(scope="module")
def env_cluster(local_cluster, s3_endpoint):
    """A 2-worker LocalCluster started with the AWS environment pointing at the moto server.

    Depends on ``local_cluster`` so that the session cluster exists first, without it.
    """
    from distributed import Client, LocalCluster

    saved = {k: os.environ.get(k) for k in [*AWS_ENV, "AWS_ENDPOINT_URL"]}
    os.environ.update(AWS_ENV, AWS_ENDPOINT_URL=s3_endpoint)
    try:
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
                Client(cluster, set_as_default=False) as client:
            assert set(client.run(endpoint_env).values()) == {s3_endpoint}
            yield client
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def upload(options, bucket: str, key: str, data: bytes) -> str:
    boto_client(options["endpoint_url"]).put_object(Bucket=bucket, Key=key, Body=data)
    return f"s3://{bucket}/{key}"


def s3_keys(options, bucket: str, prefix: str) -> list[str]:
    out = []
    pages = boto_client(options["endpoint_url"]).get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    for page in pages:
        out += [o["Key"] for o in page.get("Contents", [])]
    return out


def parquet_bytes(df: pd.DataFrame, tmp_path, name: str) -> bytes:
    path = tmp_path / name
    df.to_parquet(path, index=False)
    return path.read_bytes()


def build_points_on_s3(tmp_path, cli, s3_bucket, env_cluster, name: str, *stages: str):
    bucket, options = s3_bucket
    df = points_frame(20_000, seed=31, objects=40, float32=True)
    src = upload(options, bucket, f"inputs/{name}.parquet", parquet_bytes(df, tmp_path, "p.parquet"))
    url = f"s3://{bucket}/stores/{name}.zv"
    run = cli("build", "points", src, url, "--chunk-shape", "50", "--json", *stages,
              "--scheduler-address", env_cluster.scheduler.address)  # no --storage-option: the environment only
    return df, url, run


def test_points_on_s3_through_the_aws_environment(tmp_path, cli, s3_bucket, env_cluster):
    bucket, options = s3_bucket
    df, url, run = build_points_on_s3(tmp_path, cli, s3_bucket, env_cluster, "points", "--pyramid", "2",
                                      "--validate", "5")
    assert run.rc == 0, run.err
    summary = run.json()
    assert list(summary["stages"]) == ["write", "pyramid", "validate"]
    assert all(s["status"] == "done" for s in summary["stages"].values())
    assert summary["stages"]["validate"]["errors"] == 0
    # everything is in the bucket, nothing local
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "p.parquet"]
    keys = s3_keys(options, bucket, "stores/")
    assert "stores/points.zv/zarr.json" in keys and "stores/points.zv.zvjob.json" in keys
    # read back with explicit options, without the environment
    saved = os.environ.pop("AWS_ENDPOINT_URL")
    try:
        data = zv.read(url, storage_options=options)
        assert validate(url, 5, storage_options=options).ok
        store = zv.open_store(url, storage_options=options)
        coarse = zv.read(url, level=1, storage_options=options)
    finally:
        os.environ["AWS_ENDPOINT_URL"] = saved
    assert rows(data.positions, data.attributes["intensity"], data.attributes["label"], data.object_ids) == rows(
        df[["x", "y", "z"]].to_numpy(), df["intensity"].to_numpy(), df["label"].to_numpy(), df["object_id"].to_numpy())
    assert store.level_numbers() == [0, 1]
    assert 0 < len(coarse) <= len(df)
    assert set(np.unique(coarse.object_ids)) <= set(range(40))
    status = cli("status", url, "--json")  # the journal on S3, through the environment
    assert status.rc == 0 and status.json()["status"] == "done"
    info = cli("info", url)
    assert info.rc == 0 and "20000 vertices" in info.out


def test_points_on_s3_pyramid_shard_consolidate_validate(tmp_path, cli, s3_bucket, env_cluster):
    """The whole job on S3: write -> pyramid -> shard -> consolidate -> validate 5, then every record reads back."""
    bucket, options = s3_bucket
    df, url, run = build_points_on_s3(tmp_path, cli, s3_bucket, env_cluster, "full",
                                      "--pyramid", "2", "--shard-shape", "2", "--consolidate", "--validate", "5")
    assert run.rc == 0, run.err
    stages = run.json()["stages"]
    assert list(stages) == ["write", "pyramid", "shard", "consolidate", "validate"]
    assert all(s["status"] == "done" for s in stages.values()) and stages["validate"]["errors"] == 0
    store = zv.open_store(url, storage_options=options)
    assert store.level_numbers() == [0, 1]
    assert all(store.level(n).array("vertices").is_sharded for n in (0, 1))
    copy = read_node(store.storage, "")["consolidated_metadata"]["metadata"]  # the sharded documents
    assert copy["1/vertices"] == read_node(store.storage, "1/vertices")
    assert stages["consolidate"]["nodes"] == len(copy)
    data = zv.read(url, storage_options=options)
    assert rows(data.positions, data.attributes["intensity"], data.object_ids) == rows(
        df[["x", "y", "z"]].to_numpy(), df["intensity"].to_numpy(), df["object_id"].to_numpy())
    assert validate(url, 5, storage_options=options).ok


def test_graph_on_s3_through_storage_options(tmp_path, cli, s3_bucket, local_cluster, monkeypatch):
    """The session cluster's workers have no AWS environment: only the options can get them there."""
    for name in ("AWS_ENDPOINT_URL", *AWS_ENV):
        monkeypatch.delenv(name, raising=False)
    assert set(local_cluster.run(endpoint_env).values()) == {None}
    bucket, options = s3_bucket
    g = graph_frames(300, 700, seed=32)
    vsrc = upload(options, bucket, "in/vertices.parquet", parquet_bytes(g.vertices, tmp_path, "v.parquet"))
    edges_csv = g.edges.to_csv(index=False)
    esrc = upload(options, bucket, "in/edges.csv", edges_csv.encode())
    edges_in = pd.read_csv(io.StringIO(edges_csv))  # what the text holds
    url = f"s3://{bucket}/out/graph.zv"
    opts = ["--storage-option", f"endpoint_url={options['endpoint_url']}", "--storage-option", "key=test",
            "--storage-option", "secret=test", "--storage-option", "client_kwargs.region_name=us-east-1"]
    stages = ["--pyramid", "2", "--shard-shape", "2"]
    run = cli("build", "graph", vsrc, esrc, url, "--chunk-shape", "50", "--json", *stages, "--validate", "5", *opts,
              "--scheduler-address", local_cluster.scheduler.address)
    assert run.rc == 0, run.err
    assert [s["status"] for s in run.json()["stages"].values()] == ["done"] * (2 + len(stages) // 2)
    data = zv.read(url, storage_options=options)
    assert validate(url, 5, storage_options=options).ok
    store = zv.open_store(url, storage_options=options)
    assert store.level_numbers() == [0, 1]
    assert store.level(0).array("vertices").is_sharded
    ids = g.vertices["id"].to_numpy()
    back = input_rows_of(data.positions, g.vertices[["x", "y", "z"]].to_numpy())
    assert sorted(back.tolist()) == list(range(len(ids)))
    np.testing.assert_array_equal(data.attributes["mass"], g.vertices["mass"].to_numpy()[back])
    got = np.sort(np.stack([ids[back[data.edges[:, 0]]], ids[back[data.edges[:, 1]]]], 1), axis=1)
    want = np.sort(edges_in[["src", "dst"]].to_numpy(), axis=1)
    assert rows(got, data.edge_attributes["weight"]) == rows(want, edges_in["weight"].to_numpy())
    status = cli("status", url, "--json", *opts)
    assert status.rc == 0 and status.json()["status"] == "done"


def test_unreachable_endpoint_fails_fast_and_writes_nothing(tmp_path, cli, s3_bucket, scheduler):
    bucket, _ = s3_bucket
    df = points_frame(500, seed=33)
    src = tmp_path / "p.parquet"
    df.to_parquet(src, index=False)
    endpoint = "http://127.0.0.1:9"  # a closed port on loopback
    url = f"s3://{bucket}/stores/p.zv"
    t0 = time.monotonic()
    run = cli("build", "points", src, url, "--storage-option", f"endpoint_url={endpoint}", *FAST_FAIL,
              "--scheduler-address", scheduler)
    elapsed = time.monotonic() - t0
    assert run.rc == 2
    assert f"cannot reach bucket {bucket!r}" in run.err and endpoint in run.err
    assert "Traceback" not in run.err
    assert elapsed < 20
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "p.parquet"]
    assert not list((tmp_path / "home").rglob("*.json"))  # no job remembered
    # the real endpoint shows nothing was written in the bucket either
    assert s3_keys(s3_bucket[1], bucket, "") == []
    for argv in (["validate", url], ["status", url], ["info", url]):
        other = cli(*argv, "--storage-option", f"endpoint_url={endpoint}", *FAST_FAIL)
        assert other.rc == 2, argv
        assert endpoint in other.err, argv
