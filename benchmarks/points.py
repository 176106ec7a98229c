"""Point-cloud write and read-all, this project against the reference, in one run.

2M uniform points in [0, 1000)^3 with a float32 attribute, chunk 250, bin 62.5
(the reference's ``Layout(cells=4, subcells=4)``).  Ours runs as a library call on
the default (threaded) scheduler; the reference in its own virtual environment.

    .venv/bin/python benchmarks/points.py [--n 2000000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

import numpy as np
from _common import ensure_reference_env, report, run_reference, timed, timed_fresh

import zarr_vectors as zv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    rng = np.random.default_rng(0)  # the same recipe the reference driver uses
    positions = rng.uniform(0, 1000, (args.n, 3)).astype(np.float32)
    value = rng.standard_normal(args.n).astype(np.float32)
    work = Path(tempfile.mkdtemp(prefix="zv-bench-points-"))
    try:
        def write(store: Path) -> None:
            zv.write_points(str(store), positions, chunk_shape=250.0, bin_shape=62.5,
                            bounds=[[0, 0, 0], [1000, 1000, 1000]], attributes={"value": value})

        write(work / "warm-up.zv")  # imports, thread pools
        ours_write, store = timed_fresh(write, work, "ours", args.repeat)
        data = zv.read(str(store))
        assert len(data) == args.n and len(data.attributes["value"]) == args.n
        ours_read = timed(lambda: zv.read(str(store)), args.repeat)

        ensure_reference_env()
        ref = run_reference("bench-points", "--n", str(args.n), "--repeat", str(args.repeat),
                            "--seed", "0", "--workdir", str(work / "ref"))
        print(f"{args.n:,} points, chunk 250, bin 62.5, {args.repeat} runs each")
        report([("write", ours_write, ref["write_s"]), ("read-all", ours_read, ref["read_s"])])
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
