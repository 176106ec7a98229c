"""Graph write and read-all, this project against the reference, in one run.

10^6 vertices uniform in [0, 1000)^3 (float32), 3*10^6 random edges with a float32
``weight``, object ids ``repeat(arange(10^4), 100)``, chunk 250.  Both sides get the
same arrays (generated here with one seed and handed to the reference driver as an
.npz).  Ours runs as a library call on the default (threaded) scheduler; the
reference in its own virtual environment (``write_graph`` / ``read_graph`` plus the
edge attribute through ``read_link_attributes``, so both read-alls return the same
things).

    .venv/bin/python benchmarks/graph.py [--n 1000000] [--repeat 3]
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


def make_inputs(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    m = 3 * n
    return {
        "positions": rng.uniform(0, 1000, (n, 3)).astype(np.float32),
        "edges": rng.integers(0, n, (m, 2)).astype(np.int64),
        "lattr__weight": rng.random(m).astype(np.float32),
        "object_ids": np.repeat(np.arange(max(1, n // 100), dtype=np.int64), 100)[:n],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    data = make_inputs(args.n, args.seed)
    work = Path(tempfile.mkdtemp(prefix="zv-bench-graph-"))
    try:
        def write(store: Path) -> None:
            zv.write_graph(str(store), data["positions"], data["edges"], chunk_shape=250.0, bounds=BOUNDS,
                           object_ids=data["object_ids"], edge_attributes={"weight": data["lattr__weight"]})

        write(work / "warm-up.zv")  # imports, thread pools
        ours_write, store = timed_fresh(write, work, "ours", args.repeat)
        got = zv.read(str(store))
        assert len(got) == args.n and len(got.edges) == len(data["edges"])
        ours_read = timed(lambda: zv.read(str(store)), args.repeat)

        ensure_reference_env()
        npz = work / "inputs.npz"
        np.savez(npz, **data)
        ref = run_reference("bench-linked", "graph", str(npz), "--repeat", str(args.repeat),
                            "--workdir", str(work / "ref"), timeout=3600)
        assert ref["counts"][:2] == [args.n, len(data["edges"])], ref["counts"]
        print(f"graph: {args.n:,} vertices, {len(data['edges']):,} edges (+ float32 weight), "
              f"{len(np.unique(data['object_ids'])):,} objects, chunk 250, {args.repeat} runs each")
        report([("write", ours_write, ref["write_s"]), ("read-all", ours_read, ref["read_s"])])
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
