"""Streamline write and read-all, this project against the reference, cold and warm, in one run.

2*10^4 random-walk streamlines of 100 points each (2*10^6 vertices, float32) inside
[0, 1000)^3, chunk 250.  Both sides get the same arrays (made here, handed over as an
.npz) and run in their own processes (``_linked_run.py``: ours on the default
scheduler, the reference's ``write_polylines(geometry_type="streamline")`` /
``read_polylines`` in its own venv); cold and warm modes as in ``mesh.py``.

    .venv/bin/python benchmarks/streamlines.py [--count 20000] [--length 100] [--repeat 3]
        [--mode cold|warm|both] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

import numpy as np
from _common import existing_dir
from _linked_run import compare, report


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
    parser.add_argument("--mode", choices=("cold", "warm", "both"), default="both")
    parser.add_argument("--workdir", default=None, type=existing_dir,
                        help="where both sides write (default: the system's temporary folder); /dev/shm "
                             "takes the disk out of the figures, whose speed drifts on shared machines")
    args = parser.parse_args()

    data = make_inputs(args.count, args.length, args.seed)
    work = Path(tempfile.mkdtemp(prefix="zv-bench-streamlines-", dir=args.workdir))
    try:
        npz = work / "inputs.npz"
        np.savez(npz, **data)
        modes = ["cold", "warm"] if args.mode == "both" else [args.mode]
        timings = compare("streamline", npz, work, args.repeat, modes)
        if "warm" in timings:
            assert timings["warm"]["ours"]["counts"] == [len(data["positions"]), args.count], timings["warm"]
        report(f"streamlines: {args.count:,} x {args.length} points ({len(data['positions']):,} vertices), "
               f"chunk 250, {args.repeat} runs each", timings)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
