"""Level-5 validation, this project against the reference validator, on the same stores, in one run.

Stores (seeded, written once into a temporary directory):

* points  -- 2M uniform points in [0, 1000)^3 with a float32 attribute, chunk 250, bin 62.5
             (the settings of ``benchmarks/points.py``), written by the reference
             (``bench-points``) and, separately, by this project;
* graph   -- 10^6 vertices, 3*10^6 random edges with a float32 edge attribute;
* mesh    -- a 2M-vertex, ~4M-face triangulated height field;
* streamline -- 10^5 streamlines of 20 points (2M points).

Those three are written by the reference (``refdriver.py write-bench``); the stores of the
issue's benchmarks (``benchmarks/graph.py``, ``mesh.py``, ``streamlines.py`` inputs:
10^6 / 3*10^6 graph with ids and a weight, 1000x1000 height-field mesh, 2*10^4
streamlines of 100 points) are also written by this project and validated by both.

Ours runs on the default (threaded) Dask scheduler with ``allow_layouts=("vlen_manifests_v2",)``
(reference stores carry the v2 object index); the reference runs ``validate(level=5)`` in its own
virtual environment, timed inside that process (imports excluded), over the same stores.

    .venv/bin/python benchmarks/validate.py [--repeat 3] [--only points,graph,mesh,streamline]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
from pathlib import Path

import numpy as np
from _common import ensure_reference_env, report, run_reference, timed

import zarr_vectors as zv
from zarr_vectors.validation import validate

KINDS = ("points", "graph", "mesh", "streamline")


def _write_ours(kind: str, path: Path) -> None:
    """The store of the matching write benchmark, written by this project."""
    import graph as graph_bench
    import mesh as mesh_bench
    import streamlines as streamline_bench

    if kind == "graph":
        d = graph_bench.make_inputs(1_000_000)
        zv.write_graph(str(path), d["positions"], d["edges"], chunk_shape=250.0, object_ids=d["object_ids"],
                       edge_attributes={"weight": d["lattr__weight"]})
    elif kind == "mesh":
        d = mesh_bench.make_inputs(1000)
        zv.write_mesh(str(path), d["positions"], d["faces"], chunk_shape=250.0)
    else:
        d = streamline_bench.make_inputs(20_000, 100)
        zv.write_polylines(str(path), d["positions"], d["offsets"], chunk_shape=250.0, kind="streamline")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", default=",".join(KINDS))
    parser.add_argument("--workdir", default=None, help="keep the stores here (default: a temporary directory)")
    args = parser.parse_args()
    kinds = [k for k in args.only.split(",") if k]
    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="zv-bench-validate-"))
    work.mkdir(parents=True, exist_ok=True)
    ensure_reference_env()
    try:
        stores: dict[str, Path] = {}
        if "points" in kinds:
            info = run_reference("bench-points", "--n", "2000000", "--repeat", "1", "--seed", "0", "--keep",
                                 "--workdir", str(work / "ref-points"), timeout=1800)
            stores["points (ref-written)"] = Path(info["store"])
            ours = work / "ours-points.zv"
            if not ours.exists():
                rng = np.random.default_rng(0)
                positions = rng.uniform(0, 1000, (2_000_000, 3)).astype(np.float32)
                value = rng.standard_normal(2_000_000).astype(np.float32)
                zv.write_points(str(ours), positions, chunk_shape=250.0, bin_shape=62.5,
                                bounds=[[0, 0, 0], [1000, 1000, 1000]], attributes={"value": value})
            stores["points (ours-written)"] = ours
        for kind, n in (("graph", 1_000_000), ("mesh", 2_000_000), ("streamline", 2_000_000)):
            if kind in kinds:
                path = work / f"ref-{kind}.zv"
                if not path.exists():
                    run_reference("write-bench", kind, str(path), "--n", str(n), timeout=3600)
                stores[f"{kind} (ref-written)"] = path
                ours = work / f"ours-{kind}.zv"
                if not ours.exists():
                    _write_ours(kind, ours)
                stores[f"{kind} (ours-written)"] = ours

        ref = run_reference("validate-many", *[str(p) for p in stores.values()], "--level", "5",
                            "--repeat", str(args.repeat), timeout=3600)["results"]
        rows = []
        for name, path in stores.items():
            result = validate(str(path), 5, allow_layouts=("vlen_manifests_v2",))  # warm-up, and the verdict
            assert result.ok, result.summary()
            r = ref[str(path)]
            assert r["ok"], r["errors"][:3]
            ours_s = timed(lambda p=path: validate(str(p), 5, allow_layouts=("vlen_manifests_v2",)), args.repeat)
            rows.append((f"validate L5 {name}", ours_s, r["seconds"]))
        print(f"level-5 validation, {args.repeat} runs each (median seconds); store sizes: "
              + ", ".join(f"{k} {sum(f.stat().st_size for f in p.rglob('*') if f.is_file()) / 2**20:.0f} MiB"
                          for k, p in stores.items()))
        report(rows)
        worst = min(statistics.median(r) / statistics.median(o) for _, o, r in rows)
        print(f"smallest speed-up: {worst:.1f}x (target >= 5x)")
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
