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
write-zoo OUTDIR [--seed S]        small valid stores of every kind (validator interop)
validate-many STORE... [--level N] [--repeat R]   reference validator, timed
write-bench graph|mesh|streamline STORE [--n N] [--seed S]

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


def _local_rows(chunks: np.ndarray) -> np.ndarray:
    """Row of each vertex inside its chunk when a writer keeps input order within a chunk."""
    n = len(chunks)
    _, inverse = np.unique(chunks, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    order = np.argsort(inverse, kind="stable")
    counts = np.bincount(inverse)
    starts = np.cumsum(counts) - counts
    local = np.empty(n, dtype=np.int64)
    local[order] = np.arange(n) - np.repeat(starts, counts)
    return local


def _write_policy_graph(store: str, positions: np.ndarray, edges: np.ndarray, weights: np.ndarray,
                        chunk: float, bounds, directed: bool, policy: str) -> None:
    """A graph whose delta-0 family is rewritten with the reference's write_links under a policy."""
    from zarr_vectors.core.arrays import write_link_attributes, write_links
    from zarr_vectors.core.store import get_resolution_level, open_store
    from zarr_vectors.types.graphs import write_graph

    write_graph(store, positions, edges, chunk_shape=(chunk,) * positions.shape[1], bounds=bounds,
                compressor="zstd")
    for name in ("links", "link_fragments", "link_attributes"):
        shutil.rmtree(os.path.join(store, "0", name), ignore_errors=True)
    chunks = np.floor(positions.astype(np.float64) / chunk).astype(np.int64)
    local = _local_rows(chunks)
    records = [[(tuple(int(v) for v in chunks[a]), int(local[a])), (tuple(int(v) for v in chunks[b]), int(local[b]))]
               for a, b in edges.tolist()]
    level = get_resolution_level(open_store(store, "r+"), 0)
    part = write_links(level, records, positions.shape[1], directed=directed, store=policy)
    write_link_attributes(level, "weight", weights, num_links=len(edges), partition=part)


def cmd_write_zoo(args, zv, info) -> dict:
    """One small valid store of every kind the reference writes (for validator interop tests)."""
    from zarr_vectors.multiresolution.coarsen import build_pyramid
    from zarr_vectors.types.graphs import write_graph
    from zarr_vectors.types.lines import write_lines
    from zarr_vectors.types.meshes import write_mesh
    from zarr_vectors.types.points import write_points
    from zarr_vectors.types.polylines import write_polylines

    out = Path(args.outdir)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    rng = np.random.default_rng(args.seed)
    bounds = ([0.0, 0.0, 0.0], [100.0, 100.0, 100.0])
    cs3 = (50.0, 50.0, 50.0)
    n = 60
    pos = rng.uniform(0, 100, (n, 3)).astype(np.float32)
    edges = rng.integers(0, n, (150, 2))
    edges = edges[edges[:, 0] != edges[:, 1]]
    ids = rng.integers(0, 5, n)
    written = []

    def p(name: str) -> str:
        written.append(name)
        return str(out / name)

    write_graph(p("graph.zv"), pos, edges, chunk_shape=cs3, bin_shape=(25.0,) * 3, bounds=bounds,
                link_attributes={"weight": rng.standard_normal(len(edges)).astype(np.float32),
                                 "rgb": rng.integers(0, 255, (len(edges), 3)).astype(np.uint8)},
                vertex_attributes={"v": rng.standard_normal(n).astype(np.float32)},
                object_attributes={"w": rng.standard_normal(1).astype(np.float32)}, compressor="zstd")
    parent = np.array([-1] + [int(rng.integers(0, i)) for i in range(1, n)])
    tree = np.array([[i, parent[i]] for i in range(1, n)])
    write_graph(p("skeleton.zv"), pos, tree, chunk_shape=cs3, bounds=bounds, kind="skeleton")
    faces = np.array([rng.choice(n, 3, replace=False) for _ in range(80)])
    write_mesh(p("mesh.zv"), pos, faces, chunk_shape=cs3, bounds=bounds, compressor="zstd")
    lines = [np.clip(np.cumsum(rng.normal(0, 8, (int(rng.integers(2, 20)), 3)), axis=0) + 50, 0, 100)
             .astype(np.float32) for _ in range(15)]
    write_polylines(p("polyline.zv"), lines, chunk_shape=cs3, bounds=bounds, geometry_type="polyline")
    write_polylines(p("streamline.zv"), lines, chunk_shape=cs3, bounds=bounds, geometry_type="streamline",
                    vertex_attributes={"fa": [rng.random(len(x)).astype(np.float32) for x in lines]})
    write_lines(p("lines.zv"), rng.uniform(0, 100, (20, 2, 3)).astype(np.float32), chunk_shape=cs3, bounds=bounds)
    write_points(p("points.zv"), pos, chunk_shape=cs3, bin_shape=(25.0,) * 3, bounds=bounds,
                 vertex_attributes={"v": rng.standard_normal(n).astype(np.float32),
                                    "rgb": rng.integers(0, 255, (n, 3)).astype(np.uint8)})
    write_points(p("points_ids.zv"), pos, chunk_shape=cs3, bin_shape=(25.0,) * 3, bounds=bounds, object_ids=ids,
                 vertex_attributes={"v": rng.standard_normal(n).astype(np.float32)},
                 object_attributes={"w": rng.standard_normal(5).astype(np.float32)})
    pos2 = rng.uniform(-40, 260, (200, 2)).astype(np.float32)
    write_points(p("points_2d.zv"), pos2, chunk_shape=(50.0, 50.0), bin_shape=(12.5, 12.5),
                 bounds=([-40.0, -40.0], [260.0, 260.0]))
    write_points(p("points_pyramid.zv"), pos, chunk_shape=cs3, bin_shape=(25.0,) * 3, bounds=bounds)
    build_pyramid(p("points_pyramid.zv"), factors=[(2, 1)])
    written.pop()
    write_graph(p("graph_pyramid.zv"), pos, edges, chunk_shape=(25.0,) * 3, bin_shape=(12.5,) * 3, bounds=bounds,
                object_ids=ids)
    build_pyramid(p("graph_pyramid.zv"), factors=[(2, 1), (2, 1)], chunk_scale_factors=[1, 2], cross_level_depth=2)
    written.pop()
    write_mesh(p("mesh_pyramid_implicit.zv"), pos, faces, chunk_shape=cs3, bounds=bounds)
    build_pyramid(p("mesh_pyramid_implicit.zv"), factors=[(2, 1)], cross_level_storage="implicit")
    written.pop()
    write_polylines(p("streamline_pyramid_none.zv"), lines, chunk_shape=cs3, bounds=bounds,
                    geometry_type="streamline")
    build_pyramid(p("streamline_pyramid_none.zv"), factors=[(2, 2)], cross_level_storage="none", sparsity_seed=1)
    written.pop()
    weights = rng.standard_normal(len(edges)).astype(np.float32)
    for directed in (False, True):
        for policy in ("canonical", "duplicate"):
            name = f"graph_{'directed' if directed else 'undirected'}_{policy}.zv"
            _write_policy_graph(p(name), pos, edges, weights, 50.0, bounds, directed, policy)
    return {**info, "stores": written, "outdir": str(out)}


def cmd_validate_many(args, zv, info) -> dict:
    """The reference validator on several stores in one process (timed)."""
    from zarr_vectors.validate import validate

    results = {}
    for store in args.stores:
        times = []
        result = None
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            result = validate(store, level=args.level)
            times.append(time.perf_counter() - t0)
        results[store] = {"ok": bool(result.ok), "errors": [str(e) for e in result.errors],
                          "warnings": [str(w) for w in result.warnings], "seconds": times}
    return {**info, "level": args.level, "results": results}


def cmd_write_bench(args, zv, info) -> dict:
    """The graph / mesh / streamline benchmark stores (seeded), written by the reference."""
    from zarr_vectors.types.graphs import write_graph
    from zarr_vectors.types.meshes import write_mesh
    from zarr_vectors.types.polylines import write_polylines

    rng = np.random.default_rng(args.seed)
    store = args.store
    if os.path.exists(store):
        shutil.rmtree(store)
    bounds = ([0.0, 0.0, 0.0], [1000.0, 1000.0, 1000.0])
    cs = (250.0, 250.0, 250.0)
    t0 = time.perf_counter()
    if args.kind == "graph":
        n, m = args.n, 3 * args.n
        pos = rng.uniform(0, 1000, (n, 3)).astype(np.float32)
        edges = rng.integers(0, n, (m, 2))
        edges = edges[edges[:, 0] != edges[:, 1]]
        write_graph(store, pos, edges, chunk_shape=cs, bin_shape=(62.5,) * 3, bounds=bounds, compressor="zstd",
                    link_attributes={"weight": rng.standard_normal(len(edges)).astype(np.float32)})
    elif args.kind == "mesh":
        side = int(round(np.sqrt(args.n)))
        u, v = np.meshgrid(np.linspace(0, 1, side), np.linspace(0, 1, side), indexing="ij")
        pos = np.stack([u * 990 + 5, v * 990 + 5, 500 + 300 * np.sin(6 * u) * np.cos(5 * v)], axis=-1)
        pos = pos.reshape(-1, 3).astype(np.float32)
        idx = np.arange(side * side).reshape(side, side)
        a, b, c, d = idx[:-1, :-1].ravel(), idx[1:, :-1].ravel(), idx[:-1, 1:].ravel(), idx[1:, 1:].ravel()
        faces = np.concatenate([np.stack([a, b, c], 1), np.stack([b, d, c], 1)])
        write_mesh(store, pos, faces, chunk_shape=cs, bounds=bounds, compressor="zstd")
    elif args.kind == "streamline":
        length = args.length
        count = args.n // length
        starts = rng.uniform(100, 900, (count, 1, 3))
        steps = rng.normal(0, 4, (count, length, 3))
        lines = np.clip(starts + np.cumsum(steps, axis=1), 0, 1000).astype(np.float32)
        write_polylines(store, list(lines), chunk_shape=cs, bounds=bounds, geometry_type="streamline",
                        compressor="zstd")
    else:
        raise SystemExit(f"refdriver: unknown kind {args.kind!r}")
    return {**info, "kind": args.kind, "n": args.n, "store": store, "write_s": time.perf_counter() - t0}


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

    z = sub.add_parser("write-zoo", help="small valid stores of every kind (validator interop)")
    z.add_argument("outdir")
    z.add_argument("--seed", type=int, default=0)

    vm = sub.add_parser("validate-many")
    vm.add_argument("stores", nargs="+")
    vm.add_argument("--level", type=int, default=5)
    vm.add_argument("--repeat", type=int, default=1)

    wb = sub.add_parser("write-bench", help="graph / mesh / streamline benchmark store")
    wb.add_argument("kind", choices=("graph", "mesh", "streamline"))
    wb.add_argument("store")
    wb.add_argument("--n", type=int, default=1_000_000)
    wb.add_argument("--seed", type=int, default=0)
    wb.add_argument("--length", type=int, default=20, help="streamline: points per streamline")
    return p


COMMANDS = {
    "validate": cmd_validate,
    "read-points": cmd_read_points,
    "write-points": cmd_write_points,
    "bench-points": cmd_bench_points,
    "write-zoo": cmd_write_zoo,
    "validate-many": cmd_validate_many,
    "write-bench": cmd_write_bench,
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
