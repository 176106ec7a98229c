"""Opening a store through zarr-python on S3, with and without consolidated metadata.

zarr-python -- which xarray and the reference implementation read through -- lists each
group and reads each node's ``zarr.json`` when it walks a hierarchy, unless the root
carries a consolidated copy.  On a moto S3 server on loopback this script uploads the
graph benchmark's store (10^6 vertices, 3*10^6 edges with a weight, one pyramid level),
then reports, medians of ``--repeat`` runs:

* the requests and seconds zarr needs to open the root and walk every node, without
  the copy and with it;
* what ``zv.consolidate_store`` costs on that store.

Loopback requests take a millisecond or two; a real S3 endpoint answers in ~10-50 ms, so
the request count is the figure that carries over.  The reference has no consolidation
of its own: with the copy present, it opens our stores the second way.

    .venv/bin/python benchmarks/consolidated.py [--repeat 5] [--vertices 1000000]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import boto3
import fsspec
import zarr
from moto.server import ThreadedMotoServer

import zarr_vectors as zv


def walk(url: str, options: dict, consolidated: bool) -> tuple[float, int, int]:
    """Seconds, S3 requests and nodes of opening ``url`` in zarr and listing every node."""
    store = zarr.storage.FsspecStore.from_url(url, storage_options={**options, "use_listings_cache": False},
                                              read_only=True)
    calls = [0]
    real = store.fs._call_s3

    async def counted(*args, **kwargs):  # every S3 request of s3fs goes through here
        calls[0] += 1
        return await real(*args, **kwargs)

    store.fs._call_s3 = counted
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zarr: consolidated metadata and vlen-bytes are not in the v3 spec
        group = zarr.open_group(store, mode="r", use_consolidated=consolidated)
        nodes = len(list(group.members(max_depth=None)))
    return time.perf_counter() - t0, calls[0], nodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--vertices", type=int, default=1_000_000)
    args = parser.parse_args()

    import graph as graph_bench

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's server logs every request

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    try:
        host, port = server.get_host_and_port()
        options = {"endpoint_url": f"http://{host}:{port}", "key": "test", "secret": "test",
                   "client_kwargs": {"region_name": "us-east-1"}}
        boto3.client("s3", endpoint_url=options["endpoint_url"], aws_access_key_id="test",
                     aws_secret_access_key="test", region_name="us-east-1").create_bucket(Bucket="bench")
        with tempfile.TemporaryDirectory() as tmp:
            local = Path(tmp) / "graph.zv"
            d = graph_bench.make_inputs(args.vertices)
            zv.write_graph(str(local), d["positions"], d["edges"], chunk_shape=250.0, object_ids=d["object_ids"],
                           edge_attributes={"weight": d["lattr__weight"]})
            zv.build_pyramid(str(local), factors=[2.0])
            fsspec.filesystem("s3", **options).put(str(local), "bench/graph.zv", recursive=True)
        url = "s3://bench/graph.zv"

        plain = [walk(url, options, consolidated=False) for _ in range(args.repeat)]
        spent = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            count = zv.consolidate_store(url, storage_options=options)
            spent.append(time.perf_counter() - t0)
        copied = [walk(url, options, consolidated=True) for _ in range(args.repeat)]
    finally:
        server.stop()

    nodes = {n for _, _, n in plain + copied}
    assert nodes == {count}, (nodes, count)  # both ways see every node of the store
    print(f"graph store, {args.vertices:,} vertices, one pyramid level: {count} nodes")
    print(f"{'zarr open + walk':<28}{'requests':>10}{'median s':>12}")
    for name, runs in (("without the copy", plain), ("with the copy", copied)):
        print(f"{name:<28}{statistics.median(r for _, r, _ in runs):>10.0f}{statistics.median(t for t, _, _ in runs):>12.3f}")
    print(f"zv.consolidate_store: median {statistics.median(spent):.3f} s")


if __name__ == "__main__":
    main()
