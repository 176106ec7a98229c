"""Mesh write and read-all, this project against the reference, in one run.

A 1000 x 1000 height-field grid over [0, 1000)^2 (z a smooth surface around 500),
two triangles per grid cell: 10^6 vertices, 1,996,002 triangles, chunk 250.  Both
sides get the same arrays (made here, handed to the reference driver as an .npz).
Ours runs as a library call on the default (threaded) scheduler; the reference in
its own virtual environment (``write_mesh`` / ``read_mesh``).

    .venv/bin/python benchmarks/mesh.py [--side 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

import numpy as np
from _common import ensure_reference_env, report, run_reference, timed, timed_fresh

import zarr_vectors as zv

BOUNDS = [[0.0, 0.0, 0.0], [1000.0, 1000.0, 1000.0]]


def make_inputs(side: int) -> dict[str, np.ndarray]:
    u = (np.arange(side, dtype=np.float64) + 0.5) * (1000.0 / side)
    x, y = np.meshgrid(u, u, indexing="ij")
    z = 500.0 + 200.0 * np.sin(x / 97.0) * np.cos(y / 131.0)
    positions = np.stack([x.ravel(), y.ravel(), z.ravel()], axis=1).astype(np.float32)
    idx = np.arange(side * side, dtype=np.int64).reshape(side, side)
    a, b, c, d = idx[:-1, :-1].ravel(), idx[1:, :-1].ravel(), idx[1:, 1:].ravel(), idx[:-1, 1:].ravel()
    faces = np.concatenate([np.stack([a, b, c], axis=1), np.stack([a, c, d], axis=1)])
    return {"positions": positions, "faces": faces}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--side", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    data = make_inputs(args.side)
    work = Path(tempfile.mkdtemp(prefix="zv-bench-mesh-"))
    try:
        def write(store: Path) -> None:
            zv.write_mesh(str(store), data["positions"], data["faces"], chunk_shape=250.0, bounds=BOUNDS)

        write(work / "warm-up.zv")  # imports, thread pools
        ours_write, store = timed_fresh(write, work, "ours", args.repeat)
        got = zv.read(str(store))
        assert len(got) == len(data["positions"]) and len(got.faces) == len(data["faces"])
        ours_read = timed(lambda: zv.read(str(store)), args.repeat)

        ensure_reference_env()
        npz = work / "inputs.npz"
        np.savez(npz, **data)
        ref = run_reference("bench-linked", "mesh", str(npz), "--repeat", str(args.repeat),
                            "--workdir", str(work / "ref"), timeout=3600)
        assert ref["counts"][:2] == [len(data["positions"]), len(data["faces"])], ref["counts"]
        print(f"mesh: {args.side}x{args.side} height field, {len(data['positions']):,} vertices, "
              f"{len(data['faces']):,} triangles, chunk 250, {args.repeat} runs each")
        report([("write", ours_write, ref["write_s"]), ("read-all", ours_read, ref["read_s"])])
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
