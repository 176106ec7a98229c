"""Object-store stages, this project against the reference, on moto with injected latency.

The issue-13 workloads: 5*10^5 points with a float32 attribute (chunk 250, bin 62.5) and a
graph of 2*10^5 vertices with 6*10^5 random edges, a float32 edge weight and object ids
(chunk 250), all over [0, 1000)^3.  Each side runs the stages in order on one store:
write, read-all, a pyramid level (factor 2), sharding (2 cells per shard and axis) and a
level-5 validation of the result.  For each latency a moto server (tests/s3server.py) runs
in its own process, so it never shares a GIL with either client; it counts requests by
method, and every figure here is the server's count of the last run.  Ours runs once per S3
backend (``zarr_vectors.s3.backend``: obstore, s3fs) in this process; the reference, in its
own virtual environment, once per backend of its own (obstore, fsspec).  Both get the same
arrays (an .npz made here).  Times are medians over ``--repeat`` runs, each on a fresh prefix;
the speed-up column is the reference's obstore time over ours with the default backend.

    .venv/bin/python benchmarks/s3.py [--points 500000] [--graph 200000] [--latency 0 20] [--repeat 1]
        [--stages write read pyramid shard validate]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Sequence
from pathlib import Path

import dask
import numpy as np
from _common import REPO, ensure_reference_env, run_reference

import zarr_vectors as zv

BOUNDS = [[0.0, 0.0, 0.0], [1000.0, 1000.0, 1000.0]]
#: every stage, in the order they run on one store: write, read it all, add a level, shard, validate
STAGES = ("write", "read", "pyramid", "shard", "validate")
PYRAMID_FACTOR = (2.0, 1.0)  # one coarser level: bins twice the size, every object kept
SHARD_SHAPE = 2  # cells per shard on every axis (the 4x4x4 grid becomes 2x2x2 shards)
OURS = ("obstore", "s3fs")  # zarr_vectors.s3.backend; the first is the default
REFS = ("obstore", "fsspec")  # the reference's backend names


class Server:
    """``python -m tests.s3server`` in its own process, with its request counts."""

    def __init__(self, latency_ms: float, work: Path) -> None:
        self.stderr = work / f"server-{latency_ms:g}ms.err"
        with self.stderr.open("w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.s3server", "--latency-ms", str(latency_ms), "--parent-pid", str(os.getpid())],
                cwd=REPO, stdout=subprocess.PIPE, stderr=err, text=True,
            )
        assert self.proc.stdout is not None
        self.endpoint = self.proc.stdout.readline().strip()
        if not self.endpoint.startswith("http"):
            raise RuntimeError(f"the S3 server did not start: {self.endpoint!r}")
        self.options = {"endpoint_url": self.endpoint, "key": "test", "secret": "test",
                        "client_kwargs": {"region_name": "us-east-1"}}

    def bucket(self) -> str:
        import boto3

        name = f"bench-{uuid.uuid4().hex[:10]}"
        boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id="test", aws_secret_access_key="test",
                     region_name="us-east-1").create_bucket(Bucket=name)
        return name

    def requests(self, reset: bool = True) -> dict[str, int]:
        """Requests since the last reset, by method; then reset."""
        with urllib.request.urlopen(self.endpoint + "/__zv_requests__", timeout=60) as answer:
            counts = json.loads(answer.read())
        if reset:
            urllib.request.urlopen(
                urllib.request.Request(self.endpoint + "/__zv_requests__", method="DELETE"), timeout=60
            ).close()
        return counts

    def stop(self) -> None:
        """Stop the server; if it had already exited, say so with what it printed (a client's
        failure, ours or the reference's, may have been the server's: main stops it either way)."""
        if self.proc.poll() is not None:
            raise RuntimeError(f"the S3 server exited ({self.proc.returncode}): "
                               f"{self.stderr.read_text()[-2000:]}")
        self.proc.terminate()
        self.proc.wait(timeout=30)


def make_inputs(kind: str, n: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    positions = rng.uniform(0, 1000, (n, 3)).astype(np.float32)
    if kind == "points":
        return {"positions": positions, "value": rng.standard_normal(n).astype(np.float32)}
    m = 3 * n
    return {
        "positions": positions,
        "edges": rng.integers(0, n, (m, 2)).astype(np.int64),
        "lattr__weight": rng.random(m).astype(np.float32),
        "object_ids": np.repeat(np.arange(max(1, n // 100), dtype=np.int64), 100)[:n],
    }


def ours(kind: str, data: dict[str, np.ndarray], server: Server, backend: str, repeat: int,
         stages: Sequence[str] = ("write", "read")) -> dict:
    """Our stages, in order on one store, with one S3 backend: seconds of each run, the last run's requests."""
    opts = server.options
    bucket = server.bucket()

    def write(url: str) -> None:
        if kind == "points":
            zv.write_points(url, data["positions"], chunk_shape=250.0, bin_shape=62.5, bounds=BOUNDS,
                            attributes={"value": data["value"]}, storage_options=opts)
        else:
            zv.write_graph(url, data["positions"], data["edges"], chunk_shape=250.0, bounds=BOUNDS,
                           object_ids=data["object_ids"], edge_attributes={"weight": data["lattr__weight"]},
                           storage_options=opts)

    def pyramid(url: str) -> None:
        zv.build_pyramid(url, factors=[PYRAMID_FACTOR], storage_options=opts)

    def shard(url: str) -> None:
        zv.shard_store(url, shard_shape=SHARD_SHAPE, storage_options=opts)

    def validate(url: str) -> None:
        result = zv.validate(url, level=5, storage_options=opts)
        assert result.ok, [str(f) for f in result.errors][:5]

    out: dict = {f"{stage}_s": [] for stage in STAGES}
    with dask.config.set({"zarr_vectors.s3.backend": backend}):
        for i in range(repeat):
            url = f"s3://{bucket}/ours-{kind}-{i}.zv"
            server.requests()
            for stage in stages:
                t0 = time.perf_counter()
                if stage == "read":
                    got = zv.read(url, storage_options=opts)
                else:
                    {"write": write, "pyramid": pyramid, "shard": shard, "validate": validate}[stage](url)
                out[f"{stage}_s"].append(time.perf_counter() - t0)
                out[f"{stage}_requests"] = server.requests()
                if stage == "read":
                    n = len(data["positions"])
                    assert len(got) == n, (len(got), n)
                    if kind == "graph":
                        assert len(got.edges) == len(data["edges"])
                        assert len(got.edge_attributes["weight"]) == len(got.edges)
                    else:
                        assert len(got.attributes["value"]) == n
    return out


def reference(kind: str, npz: Path, server: Server, backend: str, repeat: int,
              stages: Sequence[str] = ("write", "read")) -> dict:
    url = f"s3://{server.bucket()}/ref-{kind}"
    got = run_reference("bench-s3", kind, str(npz), "--url", url, "--endpoint", server.endpoint,
                        "--backend", backend, "--repeat", str(repeat), "--stages", ",".join(stages),
                        "--pyramid-factor", ",".join(map(str, PYRAMID_FACTOR)), "--shard-shape", str(SHARD_SHAPE),
                        timeout=7200)
    if "error" in got:
        raise RuntimeError(f"reference ({backend}) failed: {got['error']}")
    return got


def total(counts: dict[str, int]) -> int:
    return sum(counts.values())


def report(rows: list[dict]) -> None:
    """One line per (latency, workload, stage): seconds and requests of every side."""
    sides = [f"ours/{b}" for b in OURS] + [f"ref/{b}" for b in REFS]
    head = f"{'ms':>3} {'workload':<9}{'stage':<10}" + "".join(f"{s:>22}" for s in sides) + f"{'vs ref/obstore':>16}"
    print(head)
    for r in rows:
        cells = []
        for s in sides:
            if s in r["sides"]:
                sec, req = r["sides"][s]
                cells.append(f"{sec:>9.2f} s {req:>7,} req")
            else:
                cells.append(f"{'-':>22}")
        ours = r["sides"].get(f"ours/{OURS[0]}")
        ref = r["sides"].get("ref/obstore")
        ratio = f"{ref[0] / ours[0]:>15.2f}x" if ours and ref else f"{'-':>16}"
        print(f"{r['latency']:>3g} {r['workload']:<9}{r['stage']:<10}" + "".join(f"{c:>22}" for c in cells) + ratio)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=500_000, help="point count (0: skip)")
    parser.add_argument("--graph", type=int, default=200_000, help="graph vertex count (0: skip)")
    parser.add_argument("--latency", type=float, nargs="+", default=[0.0, 20.0], help="ms added per request")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--stages", nargs="+", default=list(STAGES), choices=STAGES,
                        help="stages to run, in this order on one store (default: all)")
    parser.add_argument("--ours", nargs="+", default=list(OURS), choices=OURS)
    parser.add_argument("--refs", nargs="*", default=list(REFS), choices=REFS,
                        help="the reference's backends (none: ours only)")
    parser.add_argument("--json", type=Path, help="also write every figure here")
    args = parser.parse_args()

    ensure_reference_env()
    work = Path(tempfile.mkdtemp(prefix="zv-bench-s3-"))
    workloads = [(k, n) for k, n in (("points", args.points), ("graph", args.graph)) if n > 0]
    inputs = {k: make_inputs(k, n) for k, n in workloads}
    npz = {}
    for kind, data in inputs.items():
        npz[kind] = work / f"{kind}.npz"
        np.savez(npz[kind], **data)
    rows: list[dict] = []
    raw: list[dict] = []
    for latency in args.latency:
        server = Server(latency, work)
        try:
            warm = make_inputs("points", 1000)
            ours("points", warm, server, args.ours[0], 1)  # imports, pools, connections
            for kind, _ in workloads:
                results = {}
                for b in args.ours:
                    results[f"ours/{b}"] = ours(kind, inputs[kind], server, b, args.repeat, args.stages)
                    print(f"{latency:g} ms {kind} ours/{b}: {results[f'ours/{b}']}", flush=True)
                for b in args.refs:
                    results[f"ref/{b}"] = reference(kind, npz[kind], server, b, args.repeat, args.stages)
                    print(f"{latency:g} ms {kind} ref/{b}: {results[f'ref/{b}']}", flush=True)
                raw.append({"latency_ms": latency, "workload": kind, "n": len(inputs[kind]["positions"]),
                            "results": results})
                done = [{
                    "latency": latency, "workload": kind, "stage": "read-all" if stage == "read" else stage,
                    "sides": {side: (statistics.median(r[f"{stage}_s"]), total(r[f"{stage}_requests"]))
                              for side, r in results.items() if f"{stage}_s" in r},
                } for stage in args.stages]
                report(done)  # as it goes: a full run takes a while
                rows += done
                if args.json:
                    args.json.write_text(json.dumps(raw, indent=1, default=str))
        finally:
            server.stop()
    sizes = ", ".join(f"{k} {len(inputs[k]['positions']):,}" for k, _ in workloads)
    print(f"S3 on moto ({sizes}; {args.repeat} run(s) each; requests counted by the server, last run)")
    report(rows)


if __name__ == "__main__":
    main()
