"""Command-line driver for the reference implementation (zarr-vectors 0.9.2).

This script is executed by the *reference* virtual environment's python
(see ``refenv.run_reference``), never imported by our tests.  It must not
import anything from this project: the reference package has the same
import name as ours (``zarr_vectors``), so the two can never share an
interpreter.

Every subcommand prints exactly one JSON object on the last line of
stdout.  Each object carries ``zarr_vectors_file`` / ``zarr_vectors_version``
so the caller can see which package actually ran.

Subcommands
-----------
validate STORE --level N
read-points STORE --out FILE.npz [--level N] [--bbox lo..,hi..] [--mode auto|all|objects]
write-points IN.npz STORE --chunk-shape a,b(,c) [--bin-shape ...] [--bounds ...]
             [--compression auto|none|zstd|...]
bench-points --n N --repeat R --seed S --workdir DIR

npz key conventions (both directions): ``positions``; ``object_ids``;
``vattr__<name>`` per vertex attribute; ``oattr__<name>`` per object
attribute; ``oattr_ids`` = object id of each object-attribute row.
"""

from __future__ import annotations

import os
import sys

# Never let the directory of this script (inside OUR repository) or the
# current directory shadow the reference package.  ``-I`` already does
# this when the caller uses it; this covers a direct invocation too.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if p not in ("", ".") and os.path.abspath(p) != _HERE]

import argparse  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

EXPECTED_VERSION = "0.9.2"


# ---------------------------------------------------------------- helpers


def _load_reference():
    """Import the reference package and prove it came from this venv."""
    import zarr_vectors

    zv_file = Path(zarr_vectors.__file__).resolve()
    prefix = Path(sys.prefix).resolve()
    in_env = prefix in zv_file.parents and sys.prefix != sys.base_prefix
    info = {
        "zarr_vectors_file": str(zv_file),
        "zarr_vectors_version": str(getattr(zarr_vectors, "__version__", "?")),
        "sys_prefix": str(prefix),
        "in_reference_env": bool(in_env),
    }
    if not in_env:
        raise SystemExit(
            "refdriver: zarr_vectors was imported from "
            f"{zv_file}, which is not inside the reference venv {prefix}"
        )
    if info["zarr_vectors_version"] != EXPECTED_VERSION:
        raise SystemExit(
            f"refdriver: expected zarr-vectors {EXPECTED_VERSION}, "
            f"got {info['zarr_vectors_version']}"
        )
    return zarr_vectors, info


def _floats(text: str | None) -> list[float] | None:
    if text is None:
        return None
    return [float(v) for v in text.split(",") if v.strip() != ""]


def _split_box(values: list[float], what: str) -> tuple[list[float], list[float]]:
    if len(values) % 2 or not values:
        raise SystemExit(f"refdriver: {what} needs 2*D comma-separated numbers")
    half = len(values) // 2
    return values[:half], values[half:]


def _root_attrs(store: str) -> dict:
    with open(os.path.join(store, "zarr.json"), encoding="utf-8") as fh:
        return json.load(fh).get("attributes", {}).get("zarr_vectors", {})


def _dir_bytes(path: str) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(dirpath, name))
            except OSError:
                pass
    return total


def _layout(zv, chunk: list[float], bins: list[float] | None, compression: str):
    """A reference ``Layout`` with a fixed cell size and bins per cell."""
    kw: dict = {"cell_size": tuple(float(c) for c in chunk)}
    if bins is not None:
        if len(bins) != len(chunk):
            raise SystemExit("refdriver: --bin-shape must have as many axes as --chunk-shape")
        ratios = [c / b for c, b in zip(chunk, bins)]
        counts = {int(round(r)) for r in ratios}
        if len(counts) != 1 or any(abs(r - round(r)) > 1e-9 for r in ratios):
            raise SystemExit(
                "refdriver: the reference Layout expresses bins as one integer "
                f"'subcells' count for every axis; chunk/bin ratios {ratios} are not"
            )
        kw["subcells"] = counts.pop()
    if compression != "auto":
        kw["compression"] = None if compression in ("none", "") else compression
    return zv.Layout(**kw)


def _emit(payload: dict) -> None:
    sys.stdout.flush()
    print(json.dumps(payload, default=_json_default), flush=True)


def _json_default(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (tuple, set, frozenset)):
        return list(obj)
    if isinstance(obj, Path):
        return str(obj)
    return repr(obj)


# ---------------------------------------------------------------- commands


def cmd_validate(args, zv, info) -> dict:
    from zarr_vectors.validate import validate

    result = validate(args.store, level=args.level)
    return {
        **info,
        "level": args.level,
        "ok": bool(result.ok),
        "errors": [str(e) for e in result.errors],
        "warnings": [str(w) for w in result.warnings],
        "passed": [str(p) for p in result.passed],
    }


def cmd_read_points(args, zv, info) -> dict:
    ds = zv.open(args.store)
    level = ds.level(args.level)
    select: dict = {}
    if args.bbox is not None:
        select["bbox"] = _split_box(_floats(args.bbox), "--bbox")

    object_slots = len(level.objects)  # 0 when the level has no object_index
    has_objects = object_slots > 0
    mode = args.mode
    if mode == "auto":
        mode = "objects" if has_objects else "all"
    if mode == "objects" and not has_objects:
        raise SystemExit("refdriver: --mode objects on a level without an object index")

    if mode == "objects":
        # The public by-object read is the only reader path that returns a
        # per-vertex object id; points come back grouped by object, in the
        # order of the ids asked for (here: ascending present ids).
        ids = [int(i) for i in level.objects.ids(present=True)]
        result = level.read(objects=ids, **select)
    else:
        result = level.read(**select)

    out: dict[str, np.ndarray] = {"positions": np.asarray(result.positions)}
    if result.object_ids is not None:
        out["object_ids"] = np.asarray(result.object_ids, dtype=np.int64)
    vnames = list(result.attributes.names()) if result.attributes else []
    for name in vnames:
        out[f"vattr__{name}"] = np.asarray(result.attributes[name])

    onames: list[str] = []
    if has_objects:
        from zarr_vectors.building import read_object_attributes

        onames = list(level.attribute_names("object"))
        for name in onames:
            out[f"oattr__{name}"] = np.asarray(read_object_attributes(level.store, name))
        # Object-attribute rows are aligned with object_index rows; this is
        # the id of each row (the v2 ``object_ids`` table).
        out["oattr_ids"] = np.asarray(level.objects.ids(present=False), dtype=np.int64)

    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    np.savez(args.out, **out)
    return {
        **info,
        "n": int(result.vertex_count),
        "ndim": int(out["positions"].shape[1]) if out["positions"].ndim == 2 else 0,
        "positions_dtype": str(out["positions"].dtype),
        "mode": mode,
        "has_objects": has_objects,
        "object_slots": int(object_slots),
        "attributes": vnames,
        "attributes_read": bool(result.attributes_read),
        "attribute_dtypes": {n: str(out[f"vattr__{n}"].dtype) for n in vnames},
        "object_attributes": onames,
        "kind": result.kind,
        "out": str(args.out),
    }


def cmd_write_points(args, zv, info) -> dict:
    data = np.load(args.npz, allow_pickle=False)
    positions = np.asarray(data["positions"])
    ndim = positions.shape[1]
    chunk = _floats(args.chunk_shape)
    if len(chunk) != ndim:
        raise SystemExit(f"refdriver: --chunk-shape has {len(chunk)} axes, positions {ndim}")
    bins = _floats(args.bin_shape)
    if args.bounds is not None:
        lo, hi = _split_box(_floats(args.bounds), "--bounds")
    else:
        lo = [float(v) for v in positions.min(axis=0)]
        hi = [float(v) for v in positions.max(axis=0)]
    layout = _layout(zv, chunk, bins, args.compression)

    vattrs = {k[len("vattr__"):]: np.asarray(data[k]) for k in data.files if k.startswith("vattr__")}
    oattrs = {k[len("oattr__"):]: np.asarray(data[k]) for k in data.files if k.startswith("oattr__")}
    object_ids = np.asarray(data["object_ids"]) if "object_ids" in data.files else None

    if os.path.exists(args.store):
        if not args.overwrite:
            raise SystemExit(f"refdriver: {args.store} exists (pass --overwrite)")
        shutil.rmtree(args.store)
    schema = zv.Schema(bounds=(lo, hi), layout=layout)
    ds = zv.create(args.store, schema=schema)
    # ``add_points`` re-derives its layout from the store unless given one,
    # so the same Layout goes to both calls.
    report = ds.add_points(
        positions,
        attributes=vattrs or None,
        object_ids=object_ids,
        object_attributes=oattrs or None,
        layout=layout,
    )
    root = _root_attrs(args.store)
    return {
        **info,
        "n": int(positions.shape[0]),
        "report": report,
        "chunk_shape": root.get("chunk_shape"),
        "base_bin_shape": root.get("base_bin_shape"),
        "bounds": root.get("bounds"),
        "attributes": sorted(vattrs),
        "object_attributes": sorted(oattrs),
        "has_object_ids": object_ids is not None,
        "store": str(args.store),
    }


def cmd_bench_points(args, zv, info) -> dict:
    n = int(args.n)
    rng = np.random.default_rng(args.seed)
    positions = rng.uniform(0, 1000, (n, 3)).astype(np.float32)
    attribute = rng.standard_normal(n).astype(np.float32)
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    # chunk 250 over [0, 1000] = 4 cells per axis; 4 subcells -> bin 62.5.
    layout = zv.Layout(cells=4, subcells=4)
    schema = zv.Schema(bounds=([0.0, 0.0, 0.0], [1000.0, 1000.0, 1000.0]), layout=layout)

    write_s: list[float] = []
    read_s: list[float] = []
    store_bytes = 0
    last = None
    for i in range(int(args.repeat)):
        store = workdir / f"ref_bench_{i}.zv"
        if store.exists():
            shutil.rmtree(store)
        ds = zv.create(str(store), schema=schema)
        t0 = time.perf_counter()
        ds.add_points(positions, attributes={"value": attribute}, layout=layout)
        write_s.append(time.perf_counter() - t0)

        t0 = time.perf_counter()
        result = zv.open(str(store)).read()
        got_pos = result.positions
        got_attr = result.attributes["value"]
        read_s.append(time.perf_counter() - t0)
        if len(got_pos) != n or len(got_attr) != n:
            raise SystemExit(f"refdriver: bench read back {len(got_pos)} of {n} points")

        store_bytes = _dir_bytes(str(store))
        if last is not None and not args.keep:
            shutil.rmtree(last, ignore_errors=True)
        last = store
    root = _root_attrs(str(last)) if last is not None else {}
    return {
        **info,
        "n": n,
        "repeat": int(args.repeat),
        "seed": int(args.seed),
        "write_s": write_s,
        "read_s": read_s,
        "store_bytes": int(store_bytes),
        "store": str(last) if last is not None else None,
        "chunk_shape": root.get("chunk_shape"),
        "base_bin_shape": root.get("base_bin_shape"),
        "timed": {
            "write": "Dataset.add_points only (store created before the timer)",
            "read": "zv.open(store).read() incl. positions + attribute 'value'",
        },
    }


# ---------------------------------------------------------------- main


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="refdriver")
    sub = p.add_subparsers(dest="command", required=True)

    v = sub.add_parser("validate")
    v.add_argument("store")
    v.add_argument("--level", type=int, default=5)

    r = sub.add_parser("read-points")
    r.add_argument("store")
    r.add_argument("--out", required=True)
    r.add_argument("--level", type=int, default=0)
    r.add_argument("--bbox", default=None, help="minx,miny(,minz),maxx,maxy(,maxz)")
    r.add_argument("--mode", choices=("auto", "all", "objects"), default="auto",
                   help="auto: by-object read when the level has objects, else read-all")

    w = sub.add_parser("write-points")
    w.add_argument("npz")
    w.add_argument("store")
    w.add_argument("--chunk-shape", required=True)
    w.add_argument("--bin-shape", default=None,
                   help="omitted: the reference Layout default (4 subcells per axis)")
    w.add_argument("--bounds", default=None,
                   help="minx,miny(,minz),maxx,maxy(,maxz); default: the data's extent")
    w.add_argument("--compression", default="auto",
                   help="auto (reference default: zstd), none, or a codec name")
    w.add_argument("--overwrite", action="store_true")

    b = sub.add_parser("bench-points")
    b.add_argument("--n", type=int, default=2_000_000)
    b.add_argument("--repeat", type=int, default=5)
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--workdir", required=True)
    b.add_argument("--keep", action="store_true", help="keep every repeat's store")
    return p


COMMANDS = {
    "validate": cmd_validate,
    "read-points": cmd_read_points,
    "write-points": cmd_write_points,
    "bench-points": cmd_bench_points,
}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    zv, info = _load_reference()
    try:
        payload = COMMANDS[args.command](args, zv, info)
    except SystemExit:
        raise
    except Exception as exc:  # report, then fail with a non-zero exit
        traceback.print_exc()
        _emit({**info, "error": f"{type(exc).__name__}: {exc}"})
        return 1
    payload["command"] = args.command
    _emit(payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
