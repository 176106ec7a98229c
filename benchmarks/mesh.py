"""Mesh write and read-all, this project against the reference, cold and warm, in one run.

A 1000 x 1000 height-field grid over [0, 1000)^2, z = 500 + 200 sin(x/97) cos(y/131),
two triangles per grid square: 10^6 vertices, 1,996,002 triangles, chunk 250 over
[0, 1000)^3.  Both sides get the same arrays (made here, handed over as an .npz) and
run in their own processes (``_linked_run.py``: ours on the default scheduler, the
reference's ``write_mesh`` / ``read_mesh`` in its own venv):

* cold -- one write per fresh process, timed from just before ``import zarr_vectors``
  to the write's return (imports, pools, first-use costs included), ``--repeat``
  processes per side, alternating ours / reference;
* warm -- one process per side: an untimed warm-up write, then ``--repeat`` timed
  writes and reads.

    .venv/bin/python benchmarks/mesh.py [--side 1000] [--repeat 3] [--mode cold|warm|both] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

import numpy as np
from _common import existing_dir
from _linked_run import compare, report


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
    parser.add_argument("--mode", choices=("cold", "warm", "both"), default="both")
    parser.add_argument("--workdir", default=None, type=existing_dir,
                        help="where both sides write (default: the system's temporary folder); /dev/shm "
                             "takes the disk out of the figures, whose speed drifts on shared machines")
    args = parser.parse_args()

    data = make_inputs(args.side)
    work = Path(tempfile.mkdtemp(prefix="zv-bench-mesh-", dir=args.workdir))
    try:
        npz = work / "inputs.npz"
        np.savez(npz, **data)
        modes = ["cold", "warm"] if args.mode == "both" else [args.mode]
        timings = compare("mesh", npz, work, args.repeat, modes)
        if "warm" in timings:
            assert timings["warm"]["ours"]["counts"] == [len(data["positions"]), len(data["faces"])], timings["warm"]
        report(f"mesh: {args.side}x{args.side} height field, {len(data['positions']):,} vertices, "
               f"{len(data['faces']):,} triangles, chunk 250, {args.repeat} runs each", timings)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
