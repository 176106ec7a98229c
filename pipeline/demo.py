"""The main job a new user runs (``make demo``).

Synthesises a point cloud and a graph as Parquet tables, builds both with
``zv build``'s job runner on an embedded Dask cluster -- write, one coarser pyramid
level, sharding, level-5 validation -- then reads a bounding box back and prints the
dashboard address, the performance report and a summary.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

import zarr_vectors as zv
from pipeline.cluster import connect
from pipeline.jobs import BuildSpec, run_build
from pipeline.progress import TextProgress
from zarr_vectors.execution.runner import callbacks


def _tables(out: Path, n_points: int, n_vertices: int, n_edges: int, seed: int) -> dict[str, Path]:
    rng = np.random.default_rng(seed)
    out.mkdir(parents=True, exist_ok=True)
    xyz = rng.uniform(0.0, 1000.0, size=(n_points, 3)).astype(np.float32)
    pd.DataFrame(
        {"x": xyz[:, 0], "y": xyz[:, 1], "z": xyz[:, 2], "intensity": rng.standard_normal(n_points).astype(np.float32)}
    ).to_parquet(out / "points.parquet", row_group_size=250_000)
    vxyz = rng.uniform(0.0, 1000.0, size=(n_vertices, 3)).astype(np.float32)
    ids = rng.permutation(n_vertices).astype(np.int64) * 7 + 100  # ids need not be row numbers
    pd.DataFrame(
        {"id": ids, "x": vxyz[:, 0], "y": vxyz[:, 1], "z": vxyz[:, 2], "object_id": np.arange(n_vertices) // 100}
    ).to_parquet(out / "vertices.parquet")
    pd.DataFrame(
        {
            "src": ids[rng.integers(0, n_vertices, n_edges)],
            "dst": ids[rng.integers(0, n_vertices, n_edges)],
            "weight": rng.random(n_edges).astype(np.float32),
        }
    ).to_parquet(out / "edges.parquet")
    return {"points": out / "points.parquet", "vertices": out / "vertices.parquet", "edges": out / "edges.parquet"}


def run_demo(
    out: str = "demo-output",
    n_points: int = 1_000_000,
    n_vertices: int = 100_000,
    n_edges: int = 300_000,
    seed: int = 0,
) -> int:
    root = Path(out).resolve()
    t0 = time.perf_counter()
    tables = _tables(root / "inputs", n_points, n_vertices, n_edges, seed)
    print(f"synthesised {n_points:,} points and a graph of {n_vertices:,} vertices / {n_edges:,} edges in {root / 'inputs'}")
    jobs = [
        BuildSpec(kind="points", inputs=[str(tables["points"])], out=str(root / "points.zv"), chunk_shape=250.0,
                  bin_shape=62.5, pyramid=[(2.0, 1.0)], shard_shape=2, consolidate=True, validate_level=5,
                  overwrite=True),
        BuildSpec(kind="graph", inputs=[str(tables["vertices"]), str(tables["edges"])], out=str(root / "graph.zv"),
                  chunk_shape=250.0, pyramid=[(2.0, 1.0)], shard_shape=2, consolidate=True, validate_level=5,
                  overwrite=True),
    ]  # fmt: skip
    report = root / "dask-report.html"
    results = []
    with connect() as client:
        print(f"embedded Dask cluster: {len(client.scheduler_info()['workers'])} workers; dashboard {client.dashboard_link}")
        from distributed import performance_report

        # inline, as `zv build --report` writes it: Bokeh's scripts inside the file, so it opens offline
        with performance_report(filename=str(report), mode="inline"), callbacks(TextProgress()):
            for spec in jobs:
                print(f"\nzv build {spec.kind} -> {spec.out}  (stages: {', '.join(spec.stages())})")
                results.append(run_build(spec))
    box = [[100.0, 100.0, 100.0], [300.0, 300.0, 300.0]]
    data = zv.read(jobs[0].out, bbox=box)
    graph = zv.read(jobs[1].out)
    print("\nsummary")
    for spec, result in zip(jobs, results):
        stages = ", ".join(f"{k} {v.get('seconds', 0):.2f}s" for k, v in result.stages.items())
        print(f"  {spec.kind:<7} {spec.out}: {stages}")
        checked = result.stages["validate"]  # a failed validation raised: this one passed
        warned = f", {checked['warnings']} warnings" if checked.get("warnings") else ""
        print(f"          validation (level {checked['level']}): PASS{warned}")
    print(f"  bbox {box}: {len(data):,} points read back; graph: {len(graph.positions):,} vertices, {len(graph.edges):,} edges")
    print(f"  performance report: {report}")
    print(f"  total {time.perf_counter() - t0:.1f} s")
    print(json.dumps({"stores": [s.out for s in jobs], "report": str(report)}))
    return 0
