"""One coarser pyramid level (factor 2), this project against the reference, in one run.

For each benchmark store -- points (2M uniform points, float32 attribute, chunk 250,
bin 62.5), graph, mesh and streamlines (the inputs of ``benchmarks/graph.py``,
``mesh.py`` and ``streamlines.py``, chunk 250) -- each side writes its own store of the
same arrays once, then builds ``factors=[(2.0, 1.0)]`` (explicit cross-level storage,
depth 1: both defaults) on a fresh copy per run; the copy is not timed.  Ours runs as a
library call on the default (threaded) scheduler; the reference in its own virtual
environment (``refdriver.py pyramid-bench``).

    .venv/bin/python benchmarks/pyramid.py [--kinds points,graph,mesh,streamline] [--repeat 3]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

import numpy as np
from _common import ensure_reference_env, report, run_reference, timed_fresh

import zarr_vectors as zv

BOUNDS = [[0.0, 0.0, 0.0], [1000.0, 1000.0, 1000.0]]
KINDS = ("points", "graph", "mesh", "streamline")


def make_inputs(kind: str, scale: float = 1.0) -> dict[str, np.ndarray]:
    """The arrays of each kind's benchmark (``scale`` < 1 for a quick smoke run)."""
    if kind == "points":
        n = int(2_000_000 * scale)
        rng = np.random.default_rng(0)  # the recipe of benchmarks/points.py
        return {
            "positions": rng.uniform(0, 1000, (n, 3)).astype(np.float32),
            "vattr__value": rng.standard_normal(n).astype(np.float32),
        }
    if kind == "graph":
        from graph import make_inputs as graph_inputs

        return graph_inputs(int(1_000_000 * scale))
    if kind == "mesh":
        from mesh import make_inputs as mesh_inputs

        return mesh_inputs(int(round(1000 * scale**0.5)))
    if kind == "streamline":
        from streamlines import make_inputs as streamline_inputs

        return streamline_inputs(int(20_000 * scale), 100)
    raise ValueError(kind)


def write_ours(kind: str, data: dict[str, np.ndarray], store: Path) -> None:
    common = {"chunk_shape": 250.0, "bounds": BOUNDS}
    if kind == "points":
        zv.write_points(str(store), data["positions"], bin_shape=62.5, attributes={"value": data["vattr__value"]},
                        **common)
    elif kind == "graph":
        zv.write_graph(str(store), data["positions"], data["edges"], object_ids=data["object_ids"],
                       edge_attributes={"weight": data["lattr__weight"]}, **common)
    elif kind == "mesh":
        zv.write_mesh(str(store), data["positions"], data["faces"], **common)
    else:
        zv.write_polylines(str(store), data["positions"], data["offsets"], kind="streamline", **common)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0, help="input size factor (1 = the benchmark sizes)")
    parser.add_argument("--no-reference", action="store_true", help="time ours only")
    args = parser.parse_args()
    kinds = [k for k in args.kinds.split(",") if k]

    work = Path(tempfile.mkdtemp(prefix="zv-bench-pyramid-"))
    rows = []
    try:
        if not args.no_reference:
            ensure_reference_env()
        for kind in kinds:
            data = make_inputs(kind, args.scale)
            base = work / f"{kind}_base.zv"
            write_ours(kind, data, base)

            def copy_base(path: Path) -> None:
                shutil.copytree(base, path)

            def build(path: Path) -> None:
                zv.build_pyramid(str(path), factors=[(2.0, 1.0)])

            copy_base(work / f"{kind}-warm-up.zv")
            build(work / f"{kind}-warm-up.zv")  # imports, thread pools
            ours, store = timed_fresh(build, work, kind, args.repeat, prepare=copy_base)
            level1 = zv.open_store(str(store)).level(1).meta.vertex_count
            line = f"{kind}: {len(data['positions']):,} vertices -> {level1:,} metavertices"
            if args.no_reference:
                ref = ours
            else:
                npz = work / f"{kind}.npz"
                np.savez(npz, **data)
                result = run_reference("pyramid-bench", kind, str(npz), "--repeat", str(args.repeat),
                                       "--workdir", str(work / "ref"), timeout=3600)
                ref = result["pyramid_s"]
                line += f" (reference: {result['level1_vertices']:,})"
            print(line, flush=True)
            rows.append((f"pyramid {kind}", ours, ref))
            for path in work.glob(f"{kind}*.zv"):
                shutil.rmtree(path, ignore_errors=True)
        print(f"one coarser level, factors=[(2.0, 1.0)], explicit cross-level links, {args.repeat} runs each")
        report(rows)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
