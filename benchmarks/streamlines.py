"""Streamline write and read-all, this project against the reference, in one run.

2*10^4 random-walk streamlines of 100 points each (2*10^6 vertices, float32) inside
[0, 1000)^3, chunk 250.  Both sides get the same arrays (made here, handed to the
reference driver as an .npz).  Ours runs as a library call on the default (threaded)
scheduler; the reference in its own virtual environment (``write_polylines`` with
``geometry_type="streamline"`` / ``read_polylines``).

    .venv/bin/python benchmarks/streamlines.py [--count 20000] [--length 100] [--repeat 3]
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


def make_inputs(count: int, length: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    starts = rng.uniform(100, 900, (count, 1, 3))
    walks = starts + np.cumsum(rng.normal(0, 4, (count, length, 3)), axis=1)
    positions = np.clip(walks, 0, 999.999).astype(np.float32).reshape(-1, 3)
    offsets = np.arange(0, count * length + 1, length, dtype=np.int64)
    return {"positions": positions, "offsets": offsets}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--length", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    data = make_inputs(args.count, args.length, args.seed)
    work = Path(tempfile.mkdtemp(prefix="zv-bench-streamlines-"))
    try:
        def write(store: Path) -> None:
            zv.write_polylines(str(store), data["positions"], data["offsets"], chunk_shape=250.0, bounds=BOUNDS,
                               kind="streamline")

        write(work / "warm-up.zv")  # imports, thread pools
        ours_write, store = timed_fresh(write, work, "ours", args.repeat)
        got = zv.read(str(store))
        assert np.array_equal(got.offsets, data["offsets"]) and np.array_equal(got.positions, data["positions"])
        ours_read = timed(lambda: zv.read(str(store)), args.repeat)

        ensure_reference_env()
        npz = work / "inputs.npz"
        np.savez(npz, **data)
        ref = run_reference("bench-linked", "streamline", str(npz), "--repeat", str(args.repeat),
                            "--workdir", str(work / "ref"), timeout=3600)
        assert ref["counts"][:2] == [len(data["positions"]), args.count], ref["counts"]
        print(f"streamlines: {args.count:,} x {args.length} points ({len(data['positions']):,} vertices), "
              f"chunk 250, {args.repeat} runs each")
        report([("write", ours_write, ref["write_s"]), ("read-all", ours_read, ref["read_s"])])
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
