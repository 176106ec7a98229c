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

#: One run of the workload; ``sys.argv[1]`` is the scale, ``[2]`` a fresh work folder, ``[3]``
#: the folder of ``datasets.py`` (the same inputs for both trees).
WORKLOAD = r'''
import json, os, shutil, sys, time
from pathlib import Path
import zarr_vectors as zv
validate = getattr(zv, "validate", None) or __import__("zarr_vectors.validate", fromlist=["validate"]).validate

scale, work = float(sys.argv[1]), Path(sys.argv[2])
sys.path.insert(0, sys.argv[3])
import datasets
out = {}

def timed(name, fn):
    os.sync()
    t0 = time.perf_counter()
    fn()
    out[name] = time.perf_counter() - t0

for name, make in datasets.ALL.items():
    writer, args, kwargs = make(scale)
    path = str(work / f"{name}.zv")
    timed(f"{name} write", lambda: getattr(zv, writer)(path, *args, **kwargs))
    timed(f"{name} read", lambda: zv.read(path))

for name in ("points", "graph"):
    shutil.copytree(work / f"{name}.zv", work / f"{name}-pyr.zv")
timed("points pyramid", lambda: zv.build_pyramid(str(work / "points-pyr.zv"), factors=[(2.0, 1.0)]))
timed("graph pyramid", lambda: zv.build_pyramid(str(work / "graph-pyr.zv"), factors=[(2.0, 1.0)]))
timed("graph validate 5", lambda: validate(str(work / "graph-pyr.zv"), level=5))
timed("points shard", lambda: zv.shard_store(str(work / "points-pyr.zv"), shard_shape=2))
print(json.dumps(out))
'''


def _run(tree: Path, scale: float, work: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    argv = [sys.executable, "-c", WORKLOAD, str(scale), str(work), str(REPO / "benchmarks")]
    proc = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, check=False)
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
