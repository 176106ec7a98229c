"""This project against an earlier commit of itself, in one run: is a change slower?

The side-by-side benchmarks compare us with the reference; this one guards a refactor.
The earlier commit is checked out in a temporary git worktree and both trees run the
same workload through the public API only (``write_*``, ``read``, ``build_pyramid``,
``shard_store``, ``validate``), in fresh subprocesses that alternate (base, head, base,
...) so the machine's drift hits both alike.  Every timed write goes to a new path after
an untimed ``sync`` (see ``_common.timed_fresh``).  Prints medians and head/base.

    .venv/bin/python benchmarks/regression.py --base <commit> [--repeat 5] [--scale 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: One run of the workload; ``sys.argv[1]`` is the scale, ``[2]`` a fresh work folder.
WORKLOAD = r'''
import json, os, shutil, sys, time
from pathlib import Path
import numpy as np
import zarr_vectors as zv
validate = getattr(zv, "validate", None) or __import__("zarr_vectors.validate", fromlist=["validate"]).validate

scale, work = float(sys.argv[1]), Path(sys.argv[2])
rng = np.random.default_rng(0)
out = {}

def timed(name, fn):
    os.sync()
    t0 = time.perf_counter()
    fn()
    out[name] = time.perf_counter() - t0

n = int(1_000_000 * scale)
pts = rng.uniform(0, 1000, (n, 3)).astype(np.float32)
val = rng.standard_normal(n).astype(np.float32)
box = [[0, 0, 0], [1000, 1000, 1000]]
timed("points write", lambda: zv.write_points(str(work / "p.zv"), pts, chunk_shape=250.0, bin_shape=62.5,
                                              bounds=box, attributes={"value": val}))
timed("points read", lambda: zv.read(str(work / "p.zv")))

nv = int(200_000 * scale)
gpos = rng.uniform(0, 1000, (nv, 3)).astype(np.float32)
edges = rng.integers(0, nv, (3 * nv, 2))
edges = edges[edges[:, 0] != edges[:, 1]]
w = rng.random(len(edges)).astype(np.float32)
timed("graph write", lambda: zv.write_graph(str(work / "g.zv"), gpos, edges, chunk_shape=250.0, bounds=box,
                                            edge_attributes={"weight": w}))
timed("graph read", lambda: zv.read(str(work / "g.zv")))

side = max(10, int(400 * scale ** 0.5))
xs, ys = np.meshgrid(np.arange(side, dtype=np.float32), np.arange(side, dtype=np.float32))
mpos = np.stack([xs.ravel() * 1000 / side, ys.ravel() * 1000 / side, 500 + 100 * np.sin(xs.ravel() / 50)], axis=1)
idx = np.arange(side * side).reshape(side, side)
a, b, c, d = idx[:-1, :-1].ravel(), idx[:-1, 1:].ravel(), idx[1:, :-1].ravel(), idx[1:, 1:].ravel()
faces = np.concatenate([np.stack([a, b, c], 1), np.stack([b, d, c], 1)])
timed("mesh write", lambda: zv.write_mesh(str(work / "m.zv"), mpos.astype(np.float32), faces, chunk_shape=250.0,
                                          bounds=box))
timed("mesh read", lambda: zv.read(str(work / "m.zv")))

count, length = int(5000 * scale), 100
steps = rng.normal(0, 2, (count, length, 3)).astype(np.float32)
walks = (rng.uniform(200, 800, (count, 1, 3)).astype(np.float32) + np.cumsum(steps, axis=1)).reshape(-1, 3)
offsets = np.arange(0, count * length + 1, length)
timed("streamlines write", lambda: zv.write_polylines(str(work / "s.zv"), walks, offsets, chunk_shape=250.0,
                                                      kind="streamline", bounds=[[-1000] * 3, [2000] * 3]))
timed("streamlines read", lambda: zv.read(str(work / "s.zv")))

for name in ("p", "g"):
    shutil.copytree(work / f"{name}.zv", work / f"{name}-pyr.zv")
timed("points pyramid", lambda: zv.build_pyramid(str(work / "p-pyr.zv"), factors=[(2.0, 1.0)]))
timed("graph pyramid", lambda: zv.build_pyramid(str(work / "g-pyr.zv"), factors=[(2.0, 1.0)]))
timed("graph validate 5", lambda: validate(str(work / "g-pyr.zv"), level=5))
timed("points shard", lambda: zv.shard_store(str(work / "p-pyr.zv"), shard_shape=2))
print(json.dumps(out))
'''


def _run(tree: Path, scale: float, work: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run(
        [sys.executable, "-c", WORKLOAD, str(scale), str(work)], cwd=tree, env=env, capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"workload failed in {tree}:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="the earlier commit (any git revision)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--scale", type=float, default=1.0, help="input size factor")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="zv-bench-regression-") as tmp:
        base = Path(tmp) / "base"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(base), args.base], check=True,
                       capture_output=True)  # fmt: skip
        try:
            times: dict[str, dict[str, list[float]]] = {"base": {}, "head": {}}
            for i in range(args.repeat):
                for side, tree in (("base", base), ("head", REPO)):
                    work = Path(tmp) / f"{side}-{i}"
                    work.mkdir()
                    for op, seconds in _run(tree, args.scale, work).items():
                        times[side].setdefault(op, []).append(seconds)
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(base)], check=False)
    print(f"base {args.base}, head {REPO} (working tree); medians of {args.repeat}, scale {args.scale}")
    print(f"{'operation':<22}{'base (s)':>12}{'head (s)':>12}{'head/base':>12}")
    for op in times["head"]:
        b, h = statistics.median(times["base"][op]), statistics.median(times["head"][op])
        print(f"{op:<22}{b:>12.3f}{h:>12.3f}{h / b:>12.3f}")


if __name__ == "__main__":
    main()
