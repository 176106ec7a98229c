"""Wall time of the command line against the reference's tools, on the same inputs, in one run.

Issue 15 item 3: a new user's first commands.  Each tool ingests the same CSV files
(``x, y, z, intensity`` over [0, 100)^3 at --small points, chunk 50, and over [0, 1000)^3
at --large points, chunk 250) -- ours with ``zv build points``, the reference with
``zvtools convert`` -- then validates and summarises the small store it wrote (``zv
validate`` at its default level 5, ``zvtools validate`` at its default level 3; ``zv info``
/ ``zvtools info``).  Each at its defaults: ours keeps the CSV's float64 positions and
compresses with zstd, the reference stores float32 positions raw; the large build is also
timed against ``zvtools convert --compressor zstd``.  Every figure is a whole fresh process, as a user runs it: start-up,
imports, the work and exit, each build on a new path.  Ours and the reference alternate
run by run so that the machine's drift hits both alike, after one untimed warm-up each
(bytecode caches, page cache).  Also the import time of ``zarr_vectors`` (``python -X
importtime``).  Prints medians and the speed-up (reference / ours; > 1: we are faster).

    .venv/bin/python benchmarks/cli.py [--small 100] [--large 2000000] [--repeat 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from _common import ensure_reference_env, report  # noqa: E402


def _env(ours: bool, pycache: Path) -> dict[str, str]:
    """A user's environment: bytecode caches allowed (an installed package has them); our tree on
    the path for ours, nothing of ours for the reference."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONDONTWRITEBYTECODE", "DASK_SCHEDULER_ADDRESS",
                        "DASK_SCHEDULER") and not k.startswith("ZARR_VECTORS_")}
    if ours:
        env.update(PYTHONPATH=str(REPO), PYTHONPYCACHEPREFIX=str(pycache))
    return env


def _table(path: Path, n: int, extent: float, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(rng.uniform(0, extent, (n, 3)), columns=["x", "y", "z"])
    df["intensity"] = rng.random(n).astype(np.float32)
    df.to_csv(path, index=False, float_format="%.6f")
    return path


def _run(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1800)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return seconds


def _import_seconds(env: dict[str, str]) -> float:
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", "import zarr_vectors"], env=env,
                          capture_output=True, text=True, timeout=120, check=True)
    last = [line for line in proc.stderr.splitlines() if re.search(r"\|\s*zarr_vectors$", line)][-1]
    return int(last.split("|")[1]) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=100, help="points of the small CSV")
    parser.add_argument("--large", type=int, default=2_000_000, help="points of the large CSV (0: skip)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write every figure here")
    args = parser.parse_args()
    ref_python = ensure_reference_env()
    zvtools = str(Path(ref_python).with_name("zvtools"))
    zv = [sys.executable, "-m", "pipeline.cli"]
    with tempfile.TemporaryDirectory(prefix="zv-bench-cli-") as tmp:
        work = Path(tmp)
        ours_env, ref_env = _env(True, work / "pycache"), _env(False, work / "pycache")
        cases = [("small", args.small, 100.0, 50)] + ([("large", args.large, 1000.0, 250)] if args.large else [])
        inputs = {name: (_table(work / f"{name}.csv", n, extent, seed=i), chunk)
                  for i, (name, n, extent, chunk) in enumerate(cases)}

        def build(side: str, name: str, i: int | str) -> float:
            src, chunk = inputs[name]
            out = work / f"{side}-{name}-{i}.zv"
            if side == "ours":
                return _run([*zv, "build", "points", str(src), str(out), "--chunk-shape", str(chunk)], ours_env)
            extra = ["--compressor", "zstd"] if side == "ref+zstd" else []
            return _run([zvtools, "convert", str(src), str(out), "--chunk-shape", ",".join([str(chunk)] * 3), *extra],
                        ref_env)

        store = {"ours": work / "ours-small-warm.zv", "ref": work / "ref-small-warm.zv"}
        commands = {
            "validate": {"ours": [*zv, "validate", str(store["ours"])], "ref": [zvtools, "validate", str(store["ref"])]},
            "info": {"ours": [*zv, "info", str(store["ours"])], "ref": [zvtools, "info", str(store["ref"])]},
        }
        times: dict[str, dict[str, list[float]]] = {}
        for name in inputs:  # warm-up: bytecode and page caches; the small stores are the ones validated
            for side in ("ours", "ref"):
                build(side, name, "warm")  # type: ignore[arg-type]
        for what, argv in commands.items():
            for side in ("ours", "ref"):
                _run(argv[side], ours_env if side == "ours" else ref_env)
        for i in range(args.repeat):
            for name in inputs:
                for side in ("ours", "ref") + (("ref+zstd",) if name == "large" else ()):
                    times.setdefault(f"build {name}", {}).setdefault(side, []).append(build(side, name, i))
            for what, argv in commands.items():
                for side in ("ours", "ref"):
                    times.setdefault(what, {}).setdefault(side, []).append(
                        _run(argv[side], ours_env if side == "ours" else ref_env))
            print(f"run {i + 1}/{args.repeat}: " + ", ".join(f"{k} {v['ours'][-1]:.2f}/{v['ref'][-1]:.2f} s"
                                                           for k, v in times.items()), flush=True)
        imports = [_import_seconds(ours_env) for _ in range(args.repeat)]
    sizes = {"small": args.small, "large": args.large}
    rows = [(f"{k} ({sizes[k.split()[1]]:,} pts)" if k.startswith("build") else f"{k} (small store)", v["ours"],
             v["ref"]) for k, v in times.items()]
    if "ref+zstd" in times.get("build large", {}):  # the reference's default stores raw; ours compresses (zstd)
        rows.append(("  vs ref --compressor zstd", times["build large"]["ours"], times["build large"]["ref+zstd"]))
    print(f"\n{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; medians of {args.repeat} runs")
    report(rows)
    print(f"import zarr_vectors: median {statistics.median(imports):.3f} s (python -X importtime)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"repeat": args.repeat, "points": sizes, "times": times,
                                         "import_s": imports, "load": os.getloadavg()}, indent=1))


if __name__ == "__main__":
    main()
