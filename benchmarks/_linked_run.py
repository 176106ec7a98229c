"""Cold and warm timings of one linked-kind write, for this project or the reference.

Run as a script, it is one timed process (``--side ours`` under our venv with the
repository on ``PYTHONPATH``, ``--side ref`` under the reference's venv, so the two
packages, both imported as ``zarr_vectors``, never meet).  Numpy and the standard
library only before the import it times, so both sides pay exactly the same outside it:

* ``--mode cold``: the input is loaded from the .npz (untimed), then the clock starts
  just before ``import zarr_vectors`` and stops when the first write has returned --
  imports, pools and every other first-use cost count, interpreter start-up and the
  input's load do not.  One write per process.  Before the timed runs each side runs
  once untimed, so both import from compiled bytecode (the reference's was compiled when
  pip installed it; ours goes to a cache outside the repository, since this machine sets
  ``PYTHONDONTWRITEBYTECODE``) and from the page cache.
* ``--mode warm``: import and one untimed warm-up write, then ``--repeat`` timed writes
  (each to a new path after an untimed ``sync``, as ``_common.timed_fresh``) and
  ``--repeat`` timed reads of the last store.

It prints one JSON line.  :func:`compare` (imported by ``mesh.py`` / ``streamlines.py``)
runs both sides, cold runs alternating ours / reference, and returns their timings.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
BOUNDS = ([0.0, 0.0, 0.0], [1000.0, 1000.0, 1000.0])


def _writer(side: str, kind: str, data: Any) -> tuple[Any, Any]:
    """(write(store), read(store) -> (vertices, records)) of one side; imports inside."""
    positions = np.asarray(data["positions"])
    if side == "ours":
        import zarr_vectors as zv

        if kind == "mesh":
            faces = np.asarray(data["faces"])

            def write(store: str) -> None:
                zv.write_mesh(store, positions, faces, chunk_shape=250.0, bounds=[*BOUNDS])

            def read(store: str) -> tuple[int, int]:
                got = zv.read(store)
                return len(got), len(got.faces)
        else:
            offsets = np.asarray(data["offsets"])

            def write(store: str) -> None:
                zv.write_polylines(store, positions, offsets, chunk_shape=250.0, bounds=[*BOUNDS], kind="streamline")

            def read(store: str) -> tuple[int, int]:
                got = zv.read(store)
                return len(got), len(got.offsets) - 1
        return write, read
    common = {"chunk_shape": (250.0,) * 3, "bounds": BOUNDS, "compressor": "zstd"}
    if kind == "mesh":
        from zarr_vectors.types.meshes import read_mesh, write_mesh

        faces = np.asarray(data["faces"], np.int64)

        def write(store: str) -> None:
            write_mesh(store, positions, faces, **common)

        def read(store: str) -> tuple[int, int]:
            raw = read_mesh(store)
            return len(raw["vertices"]), len(raw["faces"])
    else:
        from zarr_vectors.types.polylines import read_polylines, write_polylines

        def write(store: str) -> None:
            write_polylines(store, data["pieces"], geometry_type="streamline", **common)

        def read(store: str) -> tuple[int, int]:
            raw = read_polylines(store)
            return int(raw["vertex_count"]), int(raw["polyline_count"])
    return write, read


def _origin(side: str) -> str:
    """Where ``zarr_vectors`` came from, refusing the wrong package for the side."""
    import zarr_vectors

    path = Path(zarr_vectors.__file__).resolve()
    expected = REPO if side == "ours" else Path(sys.prefix).resolve()
    if expected not in path.parents:
        raise SystemExit(f"_linked_run: side {side} imported zarr_vectors from {path}, not from {expected}")
    return str(path)


def _child(args: argparse.Namespace) -> dict[str, Any]:
    loaded = np.load(args.npz, allow_pickle=False)
    data: dict[str, Any] = {k: np.asarray(loaded[k]) for k in loaded.files}
    if args.kind == "streamline" and args.side == "ref":  # the reference takes one array per line
        off = data["offsets"]
        data["pieces"] = [data["positions"][a:b] for a, b in zip(off[:-1].tolist(), off[1:].tolist())]
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    if args.mode == "cold":
        store = work / f"{args.side}-cold-{args.index}.zv"
        os.sync()
        c0, t0 = time.process_time(), time.perf_counter()
        write, _ = _writer(args.side, args.kind, data)
        t1 = time.perf_counter()
        write(str(store))
        t2, c2 = time.perf_counter(), time.process_time()
        return {"write_s": [t2 - t0], "import_s": t1 - t0, "cpu_s": c2 - c0, "origin": _origin(args.side)}
    t0 = time.perf_counter()
    write, read = _writer(args.side, args.kind, data)
    import_s = time.perf_counter() - t0
    write(str(work / f"{args.side}-warm-up.zv"))
    write_s, read_s, cpu_s, counts = [], [], [], None
    for i in range(args.repeat):
        store = work / f"{args.side}-warm-{i}.zv"
        os.sync()
        c0, t0 = time.process_time(), time.perf_counter()
        write(str(store))
        write_s.append(time.perf_counter() - t0)
        cpu_s.append(time.process_time() - c0)
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        counts = read(str(store))
        read_s.append(time.perf_counter() - t0)
    return {"write_s": write_s, "read_s": read_s, "cpu_s": cpu_s, "import_s": import_s, "counts": counts,
            "origin": _origin(args.side)}


def _run(side: str, python: str, argv: list[str], pycache: Path) -> dict[str, Any]:
    drop = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    if side == "ours":
        # bytecode as an installed package has it (pip compiles the reference's at install);
        # kept outside the repository, made by an untimed first import (see ``compare``)
        env["PYTHONPATH"] = str(REPO)
        env["PYTHONPYCACHEPREFIX"] = str(pycache)
    else:  # the reference reads ZARR_VECTORS_* knobs: keep its documented defaults
        env = {k: v for k, v in env.items() if not k.startswith("ZARR_VECTORS_")}
        env["PYTHONNOUSERSITE"] = "1"
    cmd = [python, str(Path(__file__).resolve()), "--side", side, *argv]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def compare(kind: str, npz: Path, work: Path, repeat: int, modes: list[str]) -> dict[str, dict[str, Any]]:
    """Timings of both sides: ``{"cold": {"ours": [...], "ref": [...]}, "warm": {...}}``.

    Cold runs alternate (ours, reference, ours, ...) so the machine's drift hits both.
    """
    from _common import ensure_reference_env

    pythons = {"ours": sys.executable, "ref": str(ensure_reference_env())}
    common = ["--kind", kind, "--npz", str(npz)]
    pycache = work / "pycache"

    def run(side: str, *argv: str) -> dict[str, Any]:
        return _run(side, pythons[side], [*common, *argv], pycache)

    out: dict[str, dict[str, Any]] = {}
    if "cold" in modes:
        for side in ("ours", "ref"):  # untimed: bytecode written, files in the page cache
            run(side, "--mode", "cold", "--index", "0", "--workdir", str(work / f"{side}-prime"))
        cold: dict[str, Any] = {key: [] for key in ("ours", "ref", "ours_import", "ref_import", "ours_cpu", "ref_cpu")}
        for i in range(repeat):
            for side in ("ours", "ref"):
                res = run(side, "--mode", "cold", "--index", str(i), "--workdir", str(work / f"{side}-cold"))
                cold[side] += res["write_s"]
                cold[side + "_import"].append(res["import_s"])
                cold[side + "_cpu"].append(res["cpu_s"])
        out["cold"] = cold
    if "warm" in modes:
        out["warm"] = {
            side: run(side, "--mode", "warm", "--repeat", str(repeat), "--workdir", str(work / f"{side}-warm"))
            for side in ("ours", "ref")
        }
    return out


def report(title: str, timings: dict[str, dict[str, Any]]) -> None:
    """Medians of each mode and the reference/ours ratio (> 1: we are faster)."""
    from _common import report as table

    print(title)
    rows = []
    if "cold" in timings:
        cold = timings["cold"]
        rows.append(("write, cold", cold["ours"], cold["ref"]))
        rows.append(("  of it: import", cold["ours_import"], cold["ref_import"]))
        rows.append(("  CPU s (all threads)", cold["ours_cpu"], cold["ref_cpu"]))
    if "warm" in timings:
        ours, ref = timings["warm"]["ours"], timings["warm"]["ref"]
        assert ours["counts"] == ref["counts"], (ours["counts"], ref["counts"])
        rows += [("write, warm", ours["write_s"], ref["write_s"]),
                 ("  CPU s (all threads)", ours["cpu_s"], ref["cpu_s"]),
                 ("read-all, warm", ours["read_s"], ref["read_s"])]
    table(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--side", choices=("ours", "ref"), required=True)
    parser.add_argument("--kind", choices=("mesh", "streamline"), required=True)
    parser.add_argument("--npz", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--mode", choices=("cold", "warm"), required=True)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--index", type=int, default=0)
    print(json.dumps(_child(parser.parse_args())))


if __name__ == "__main__":
    main()
