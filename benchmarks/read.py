"""Read time of this project against an earlier commit of itself, on the same stores.

Guards the reader's checks (presence against storage, vertex indices in range, counts):
they must not cost more than a few percent.  The four benchmark stores (``datasets.py``:
points with an attribute, a graph with an edge attribute, a mesh, streamlines) are written
once by the working tree; then fresh subprocesses, alternating earlier commit and working
tree so the machine's drift hits both alike, each read every store whole (and the points
in a box an eighth of the volume) ``--reads`` times through ``zarr_vectors.read``.  The
earlier commit runs from a temporary git worktree.  Prints medians and head/base.

    .venv/bin/python benchmarks/read.py --base <commit> [--repeat 5] [--reads 3] [--scale 1]
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
sys.path.insert(0, str(REPO / "benchmarks"))

import datasets  # noqa: E402

#: One process's reads; ``argv[1]`` the folder of stores, ``argv[2]`` reads per store.
READS = r"""
import json, sys, time
from pathlib import Path
import zarr_vectors as zv

work, reads = Path(sys.argv[1]), int(sys.argv[2])
cases = [(name, str(work / f"{name}.zv"), None) for name in ("points", "graph", "mesh", "streamlines")]
cases.append(("points bbox", str(work / "points.zv"), [[0, 0, 0], [500, 500, 500]]))
zv.read(str(work / "mesh.zv"))  # untimed: the first read of a process imports what reading uses
out = {}
for name, path, box in cases:
    for _ in range(reads):
        t0 = time.perf_counter()
        zv.read(path, bbox=box)
        out.setdefault(name, []).append(time.perf_counter() - t0)
print(json.dumps(out))
"""


def _write_stores(work: Path, scale: float) -> None:
    import zarr_vectors as zv

    for name, make in datasets.ALL.items():
        writer, args, kwargs = make(scale)
        getattr(zv, writer)(str(work / f"{name}.zv"), *args, **kwargs)


def _reads(tree: Path, work: Path, reads: int) -> dict[str, list[float]]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run([sys.executable, "-c", READS, str(work), str(reads)], cwd=tree, env=env,
                          capture_output=True, text=True, check=False)  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"reads failed in {tree}:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="the earlier commit (any git revision)")
    parser.add_argument("--repeat", type=int, default=5, help="subprocesses per side")
    parser.add_argument("--reads", type=int, default=3, help="reads of each store per subprocess")
    parser.add_argument("--scale", type=float, default=1.0, help="input size factor")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="zv-bench-read-") as tmp:
        work = Path(tmp) / "stores"
        work.mkdir()
        _write_stores(work, args.scale)
        base = Path(tmp) / "base"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(base), args.base], check=True,
                       capture_output=True)  # fmt: skip
        times: dict[str, dict[str, list[float]]] = {"base": {}, "head": {}}
        try:
            for _ in range(args.repeat):
                for side, tree in (("base", base), ("head", REPO)):
                    for name, seconds in _reads(tree, work, args.reads).items():
                        times[side].setdefault(name, []).extend(seconds)
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(base)], check=False)
    runs = args.repeat * args.reads
    print(f"base {args.base}, head {REPO} (working tree); medians of {runs} reads, scale {args.scale}")
    print(f"{'read':<16}{'base (s)':>12}{'head (s)':>12}{'head/base':>12}")
    for name in times["head"]:
        b, h = statistics.median(times["base"][name]), statistics.median(times["head"][name])
        print(f"{name:<16}{b:>12.3f}{h:>12.3f}{h / b:>12.3f}")


if __name__ == "__main__":
    main()
