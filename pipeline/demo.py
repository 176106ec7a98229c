"""The first main job: synthesise a point cloud, write it on the embedded cluster, read a box back."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

import zarr_vectors as zv
from pipeline.cluster import connect


def run_demo(out: str = "demo-output/points.zv", n_points: int = 1_000_000, seed: int = 0) -> int:
    rng = np.random.default_rng(seed)
    positions = rng.uniform(0.0, 1000.0, size=(n_points, 3)).astype(np.float32)
    intensity = rng.standard_normal(n_points).astype(np.float32)
    store = str(Path(out).resolve())
    print(f"synthesised {n_points:,} points in [0, 1000)^3 with a float32 attribute 'intensity'")
    with connect() as client:
        print(f"embedded Dask cluster: {len(client.scheduler_info()['workers'])} workers, dashboard {client.dashboard_link}")
        t0 = time.perf_counter()
        result = zv.write_points(
            store,
            positions,
            chunk_shape=(250.0, 250.0, 250.0),
            bin_shape=(62.5, 62.5, 62.5),
            attributes={"intensity": intensity},
            overwrite=True,
        )
        t_write = time.perf_counter() - t0
    print(f"wrote {result} in {t_write:.2f} s")
    box = [[100.0, 100.0, 100.0], [300.0, 300.0, 300.0]]
    t0 = time.perf_counter()
    data = zv.read(store, bbox=box)
    t_read = time.perf_counter() - t0
    expected = int(((positions >= box[0]) & (positions <= box[1])).all(axis=1).sum())
    print(f"read bbox {box}: {len(data):,} points in {t_read:.3f} s (expected {expected:,})")
    if len(data) != expected:
        print("ERROR: the bbox read does not match the input")
        return 1
    print(f"store: {store}")
    return 0
