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
shard-store STORE [--shard-shape N[,N,N]] [--unshard]      the reference's shard_store / unshard_store
shard-write-points IN.npz STORE --chunk-shape ... --shard-shape N   sharded at creation
shard-read-graph STORE --out FILE.npz [--level N]           read_graph: positions, edges
shard-write-pyramid STORE [--seed S]                        graph + 3-level pyramid, cross-level links
read-linked STORE --out FILE.npz [--level N]     any linked kind, per-kind reader
write-linked KIND IN.npz STORE --chunk-shape ... [--directed] [--store-policy P]
bench-linked graph|mesh|streamline IN.npz --workdir DIR [--repeat R]
read-linked-many OUTDIR STORE... [--validate-level N]    batch of the above
write-linked-many JOBS.json                      batch of write-linked jobs
pyramid-build STORE --factors C[,S];... [--chunk-scale N[,N,N];...] [--storage S] [--depth D] [--seed S]
pyramid-read STORE... --outdir DIR [--validate-level N]   every level (+ cross-level records) -> npz
pyramid-write OUTDIR [--seed S]                  small stores of four kinds, each with a reference pyramid
pyramid-bench points|graph|mesh|streamline IN.npz --workdir DIR [--repeat R]   build_pyramid timed
stored-space STORE                               the tools' reading of a streamline store's headers/
convert IN STORE --chunk-shape X,Y,Z             zvtools convert (file -> store)
api-stores OUTDIR [--seed S] [--validate-level N]   every (Schema kind, add_*) store and low-level writer,
                                                 validated and read back (kind lists: issue 12)
write-namespaced STORE [--seed S]                points + composite.add_geometry("graph")
write-twice STORE [--seed S]                     add_polylines then add_graph on one Dataset

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
        os.sync()  # the benchmarks' protocol: see benchmarks/_common.timed_fresh
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
        last = store
    if not args.keep:  # deleted only after every timed run, as ours
        for i in range(int(args.repeat) - 1):
            shutil.rmtree(workdir / f"ref_bench_{i}.zv", ignore_errors=True)
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


# ---------------------------------------------------------------- linked kinds
# read-linked / write-linked / bench-linked: graphs, skeletons, meshes, polylines,
# streamlines and lines through the reference's public per-kind API.
#
# npz keys (both directions), in addition to the point keys above:
# ``edges`` (graph / skeleton, skeleton rows = [child, parent]), ``faces`` (mesh),
# ``parents`` (skeleton input), ``offsets`` (polyline / streamline / line: CSR
# boundaries into ``positions``), ``lattr__<name>`` per link attribute (input
# record order on write; aligned with ``edges`` / ``faces`` on read where the
# reference reader keeps that alignment, see ``link_attributes_aligned``).


def _geometry_type(store: str) -> str:
    kinds = _root_attrs(store).get("geometry_types") or []
    if len(kinds) != 1:
        raise SystemExit(f"refdriver: expected one geometry type, found {kinds}")
    return kinds[0]


def _chunk_local_rows(positions: np.ndarray, chunk: list[float], object_ids: np.ndarray | None):
    """(chunk coords, row) of every vertex as the reference graph writer lays a chunk out:
    rows stably sorted by object id within a chunk, input order otherwise."""
    chunks = np.floor(positions.astype(np.float64) / np.asarray(chunk, np.float64)).astype(np.int64)
    ids = np.zeros(len(positions), np.int64) if object_ids is None else np.asarray(object_ids, np.int64)
    keys = (np.arange(len(positions)), ids) + tuple(chunks[:, d] for d in range(chunks.shape[1] - 1, -1, -1))
    order = np.lexsort(keys)
    sorted_chunks = chunks[order]
    new = np.r_[True, (sorted_chunks[1:] != sorted_chunks[:-1]).any(axis=1)]
    start = np.maximum.accumulate(np.where(new, np.arange(len(order)), 0))
    rows = np.empty(len(order), np.int64)
    rows[order] = np.arange(len(order)) - start
    return chunks, rows


def cmd_read_linked(args, zv, info) -> dict:
    return {**info, **_read_linked_one(args.store, args.out, args.level)}


def _read_linked_one(store: str, out_path: str, level_number: int = 0, kind: str | None = None) -> dict:
    """The per-kind reader of ``kind`` (default: the store's single geometry type) -> npz."""
    from zarr_vectors.core.arrays import read_link_attributes
    from zarr_vectors.core.store import get_resolution_level, open_store

    kind = kind or _geometry_type(store)
    out: dict[str, np.ndarray] = {}
    aligned = False
    if kind in ("graph", "skeleton"):
        from zarr_vectors.types.graphs import read_graph

        raw = read_graph(store, level=level_number)
        out["positions"] = np.asarray(raw["positions"])
        out["edges"] = np.asarray(raw["edges"], dtype=np.int64).reshape(-1, 2)
        aligned = kind == "graph"  # skeleton edges are rebuilt from a parent array
    elif kind == "mesh":
        from zarr_vectors.types.meshes import read_mesh

        raw = read_mesh(store, level=level_number)
        out["positions"] = np.asarray(raw["vertices"])
        out["faces"] = np.asarray(raw["faces"], dtype=np.int64)
        aligned = True
    elif kind in ("polyline", "streamline"):
        from zarr_vectors.types.polylines import read_polylines

        raw = read_polylines(store, level=level_number)
        ndim = int(raw.get("ndim") or 3)
        lines = [np.concatenate([np.asarray(s).reshape(-1, ndim) for s in p]) if len(p) else np.zeros((0, ndim))
                 for p in raw["polylines"]]
        out["positions"] = np.concatenate(lines) if lines else np.zeros((0, ndim), np.float32)
        out["offsets"] = np.r_[0, np.cumsum([len(x) for x in lines])].astype(np.int64)
        out["object_ids"] = np.asarray(raw["object_ids"], dtype=np.int64)
        for name, values in (raw.get("vertex_attributes") or {}).items():
            out[f"vattr__{name}"] = np.asarray(values)
    elif kind == "line":
        from zarr_vectors.types.lines import read_lines

        raw = read_lines(store, level=level_number)
        ends = np.asarray(raw["endpoints"])
        m = ends.shape[0]
        out["positions"] = ends.reshape(2 * m, ends.shape[2] if ends.ndim == 3 else 0)
        out["offsets"] = np.arange(0, 2 * m + 1, 2, dtype=np.int64)
        for name, values in (raw.get("vertex_attributes") or {}).items():
            values = np.asarray(values)
            out[f"vattr__{name}"] = values.reshape((2 * m,) + values.shape[2:])
    else:
        raise SystemExit(f"refdriver: read-linked does not read {kind!r}")

    lattrs: list[str] = []
    level = get_resolution_level(open_store(store), level_number)
    lattr_dir = os.path.join(store, str(level_number), "link_attributes")
    if os.path.isdir(lattr_dir):
        for name in sorted(os.listdir(lattr_dir)):
            if os.path.isdir(os.path.join(lattr_dir, name)):
                out[f"lattr__{name}"] = np.asarray(read_link_attributes(level, name, delta=0))
                lattrs.append(name)
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    np.savez(out_path, **out)
    return {
        "kind": kind,
        "n": int(len(out["positions"])),
        "records": int(len(out.get("edges", out.get("faces", np.zeros(0))))),
        "link_attributes": lattrs,
        "link_attributes_aligned": aligned,
        "vertex_attributes": sorted(k[len("vattr__"):] for k in out if k.startswith("vattr__")),
        "out": str(out_path),
    }


def cmd_write_linked(args, zv, info) -> dict:
    job = {"kind": args.kind, "npz": args.npz, "store": args.store, "chunk_shape": args.chunk_shape,
           "directed": bool(args.directed), "store_policy": args.store_policy, "compression": args.compression}
    return {**info, **_write_linked_one(job)}


def _write_linked_one(job: dict) -> dict:
    """One store written with the reference's per-kind writer; ``job`` keys: kind, npz, store,
    chunk_shape ("a,b,c" or one number), optional directed, store_policy, compression."""
    from types import SimpleNamespace

    args = SimpleNamespace(
        kind=job["kind"], npz=job["npz"], store=job["store"], chunk_shape=str(job["chunk_shape"]),
        directed=bool(job.get("directed", False)), store_policy=job.get("store_policy", "canonical"),
        compression=job.get("compression", "zstd"),
    )
    data = np.load(args.npz, allow_pickle=False)
    positions = np.asarray(data["positions"])
    ndim = positions.shape[1]
    chunk = _floats(args.chunk_shape)
    if len(chunk) == 1:
        chunk = chunk * ndim
    if len(chunk) != ndim:
        raise SystemExit(f"refdriver: --chunk-shape has {len(chunk)} axes, positions {ndim}")
    vattrs = {k[len("vattr__"):]: np.asarray(data[k]) for k in data.files if k.startswith("vattr__")}
    lattrs = {k[len("lattr__"):]: np.asarray(data[k]) for k in data.files if k.startswith("lattr__")}
    oattrs = {k[len("oattr__"):]: np.asarray(data[k]) for k in data.files if k.startswith("oattr__")}
    object_ids = np.asarray(data["object_ids"]) if "object_ids" in data.files else None
    compressor = None if args.compression in ("none", "") else args.compression
    if os.path.exists(args.store):
        shutil.rmtree(args.store)
    common = {"chunk_shape": tuple(chunk), "compressor": compressor}
    kind = args.kind
    report: dict = {}
    if kind == "graph":
        from zarr_vectors.types.graphs import write_graph

        edges = np.asarray(data["edges"], np.int64)
        policy = (args.directed, args.store_policy)
        report = write_graph(args.store, positions, edges, vertex_attributes=vattrs or None,
                             link_attributes=(lattrs or None) if policy == (False, "canonical") else None,
                             object_ids=object_ids, object_attributes=oattrs or None, **common)
        if policy != (False, "canonical"):
            # The graph writer files undirected canonical records only; the other
            # policies go through the reference's links API on the same vertices.
            from zarr_vectors.core.arrays import write_link_attributes, write_links
            from zarr_vectors.core.store import get_resolution_level, open_store

            for name in ("links", "link_fragments", "link_attributes"):
                shutil.rmtree(os.path.join(args.store, "0", name), ignore_errors=True)
            chunks, rows = _chunk_local_rows(positions, chunk, object_ids)
            records = [[(tuple(chunks[a].tolist()), int(rows[a])), (tuple(chunks[b].tolist()), int(rows[b]))]
                       for a, b in edges.tolist()]
            level = get_resolution_level(open_store(args.store, "r+"), 0)
            part = write_links(level, records, ndim, directed=args.directed, store=args.store_policy)
            for name, values in lattrs.items():
                write_link_attributes(level, name, values, num_links=len(edges), partition=part)
    elif kind == "skeleton":
        from zarr_vectors.types.graphs import write_graph

        parents = np.asarray(data["parents"], np.int64)
        child = np.flatnonzero(parents >= 0)
        edges = np.stack([child, parents[child]], axis=1)
        report = write_graph(args.store, positions, edges, kind="skeleton", vertex_attributes=vattrs or None,
                             object_ids=object_ids, object_attributes=oattrs or None, **common)
    elif kind == "mesh":
        from zarr_vectors.types.meshes import write_mesh

        report = write_mesh(args.store, positions, np.asarray(data["faces"], np.int64),
                            vertex_attributes=vattrs or None, object_ids=object_ids,
                            object_attributes=oattrs or None, **common)
    elif kind in ("polyline", "streamline"):
        from zarr_vectors.types.polylines import write_polylines

        off = np.asarray(data["offsets"], np.int64)
        pieces = [positions[a:b] for a, b in zip(off[:-1], off[1:])]
        per_line = {k: [v[a:b] for a, b in zip(off[:-1], off[1:])] for k, v in vattrs.items()}
        report = write_polylines(args.store, pieces, geometry_type=kind, vertex_attributes=per_line or None,
                                 object_attributes=oattrs or None, **common)
    elif kind == "line":
        from zarr_vectors.types.lines import write_lines

        off = np.asarray(data["offsets"], np.int64)
        if not np.array_equal(off, np.arange(0, len(positions) + 1, 2)):
            raise SystemExit("refdriver: lines need offsets 0, 2, 4, ...")
        ends = positions.reshape(-1, 2, ndim)
        per_end = {k: v.reshape((-1, 2) + v.shape[1:]) for k, v in vattrs.items()}
        report = write_lines(args.store, ends, vertex_attributes=per_end or None,
                             object_attributes=oattrs or None, **common)
    else:
        raise SystemExit(f"refdriver: write-linked does not write {kind!r}")
    return {"kind": kind, "n": int(len(positions)), "report": report, "store": str(args.store),
            "directed": bool(args.directed), "store_policy": args.store_policy}


def cmd_read_linked_many(args, zv, info) -> dict:
    """Optionally validate, then read, several stores in one process (``OUTDIR/<store name>.npz``)."""
    from zarr_vectors.validate import validate

    results = {}
    for store in args.stores:
        entry: dict = {}
        if args.validate_level:
            report = validate(store, level=args.validate_level)
            entry["validate"] = {"ok": bool(report.ok), "errors": [str(e) for e in report.errors],
                                 "warnings": [str(w) for w in report.warnings]}
        out = os.path.join(args.outdir, os.path.basename(store.rstrip("/")) + ".npz")
        entry["read"] = _read_linked_one(store, out, args.level)
        results[store] = entry
    return {**info, "results": results}


def cmd_write_linked_many(args, zv, info) -> dict:
    """Several ``write-linked`` jobs (a JSON list) in one process; a job may also name
    ``readback`` (an npz path) to dump the reference's own read of what it wrote."""
    with open(args.jobs, encoding="utf-8") as fh:
        jobs = json.load(fh)
    results = []
    for job in jobs:
        entry = _write_linked_one(job)
        if job.get("readback"):
            entry["readback"] = _read_linked_one(job["store"], job["readback"])
        results.append(entry)
    return {**info, "results": results}


def cmd_bench_linked(args, zv, info) -> dict:
    """Time the reference's write and read-all of one linked-kind benchmark input (an npz
    made by ``benchmarks/<kind>.py``, so both sides get the same data)."""
    from zarr_vectors.core.arrays import read_link_attributes
    from zarr_vectors.core.store import get_resolution_level, open_store

    data = np.load(args.npz, allow_pickle=False)
    positions = np.asarray(data["positions"])
    ndim = positions.shape[1]
    lo = _floats(args.bounds_lo) if args.bounds_lo else [0.0] * ndim
    hi = _floats(args.bounds_hi) if args.bounds_hi else [1000.0] * ndim
    common = {"chunk_shape": (float(args.chunk),) * ndim, "bounds": (lo, hi), "compressor": "zstd"}
    lattrs = {k[len("lattr__"):]: np.asarray(data[k]) for k in data.files if k.startswith("lattr__")}
    object_ids = np.asarray(data["object_ids"]) if "object_ids" in data.files else None
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)

    if args.kind == "graph":
        from zarr_vectors.types.graphs import read_graph, write_graph

        edges = np.asarray(data["edges"], np.int64)

        def write(store):
            write_graph(store, positions, edges, link_attributes=lattrs or None, object_ids=object_ids, **common)

        def read(store):
            raw = read_graph(store)
            level = get_resolution_level(open_store(store), 0)
            extra = [read_link_attributes(level, name, delta=0) for name in lattrs]
            return len(raw["positions"]), len(raw["edges"]), [len(x) for x in extra]
    elif args.kind == "mesh":
        from zarr_vectors.types.meshes import read_mesh, write_mesh

        faces = np.asarray(data["faces"], np.int64)

        def write(store):
            write_mesh(store, positions, faces, object_ids=object_ids, **common)

        def read(store):
            raw = read_mesh(store)
            return len(raw["vertices"]), len(raw["faces"]), []
    elif args.kind == "streamline":
        from zarr_vectors.types.polylines import read_polylines, write_polylines

        off = np.asarray(data["offsets"], np.int64)
        pieces = [positions[a:b] for a, b in zip(off[:-1], off[1:])]

        def write(store):
            write_polylines(store, pieces, geometry_type="streamline", **common)

        def read(store):
            raw = read_polylines(store)
            return int(raw["vertex_count"]), int(raw["polyline_count"]), []
    else:
        raise SystemExit(f"refdriver: bench-linked does not know {args.kind!r}")

    write_s: list[float] = []
    read_s: list[float] = []
    counts = None
    store_bytes = 0
    for i in range(int(args.repeat)):
        store = workdir / f"ref_{args.kind}_{i}.zv"
        if store.exists():
            shutil.rmtree(store)
        os.sync()  # the benchmarks' protocol: see benchmarks/_common.timed_fresh
        t0 = time.perf_counter()
        write(str(store))
        write_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        counts = read(str(store))
        read_s.append(time.perf_counter() - t0)
        store_bytes = _dir_bytes(str(store))
    if not args.keep:  # deleted only after every timed run, as ours
        for i in range(int(args.repeat)):
            shutil.rmtree(workdir / f"ref_{args.kind}_{i}.zv", ignore_errors=True)
    return {
        **info,
        "kind": args.kind,
        "repeat": int(args.repeat),
        "write_s": write_s,
        "read_s": read_s,
        "counts": counts,
        "store_bytes": int(store_bytes),
        "timed": {
            "write": {"graph": "write_graph", "mesh": "write_mesh"}.get(args.kind, "write_polylines")
            + " (store creation included)",
            "read": "per-kind reader (read_graph / read_mesh / read_polylines) + every link attribute",
        },
    }


def _add_linked_parsers(sub) -> None:
    rl = sub.add_parser("read-linked", help="any linked kind through the reference's per-kind reader")
    rl.add_argument("store")
    rl.add_argument("--out", required=True)
    rl.add_argument("--level", type=int, default=0)

    wl = sub.add_parser("write-linked", help="a linked kind through the reference's per-kind writer")
    wl.add_argument("kind", choices=("graph", "skeleton", "mesh", "polyline", "streamline", "line"))
    wl.add_argument("npz")
    wl.add_argument("store")
    wl.add_argument("--chunk-shape", required=True)
    wl.add_argument("--directed", action="store_true", help="graph: directed family (via write_links)")
    wl.add_argument("--store-policy", choices=("canonical", "duplicate"), default="canonical")
    wl.add_argument("--compression", default="zstd")

    rm = sub.add_parser("read-linked-many", help="validate (optional) and read several linked stores")
    rm.add_argument("outdir")
    rm.add_argument("stores", nargs="+")
    rm.add_argument("--validate-level", type=int, default=0)
    rm.add_argument("--level", type=int, default=0)

    wm = sub.add_parser("write-linked-many", help="several write-linked jobs from a JSON list")
    wm.add_argument("jobs")

    bl = sub.add_parser("bench-linked", help="time the reference's write + read-all of a linked kind")
    bl.add_argument("kind", choices=("graph", "mesh", "streamline"))
    bl.add_argument("npz")
    bl.add_argument("--workdir", required=True)
    bl.add_argument("--repeat", type=int, default=3)
    bl.add_argument("--chunk", type=float, default=250.0)
    bl.add_argument("--bounds-lo", default=None)
    bl.add_argument("--bounds-hi", default=None)
    bl.add_argument("--keep", action="store_true")


LINKED_COMMANDS = {
    "read-linked": cmd_read_linked,
    "write-linked": cmd_write_linked,
    "bench-linked": cmd_bench_linked,
    "read-linked-many": cmd_read_linked_many,
    "write-linked-many": cmd_write_linked_many,
}


# ---------------------------------------------------------------- main


# ---------------------------------------------------------------- sharding (issue 5)


def cmd_shard_store(args, zv, info) -> dict:
    """The reference's own ``shard_store`` (or ``unshard_store``) on an existing store."""
    from zarr_vectors.sharding import shard_store, unshard_store

    if args.unshard:
        stats = unshard_store(args.store)
    else:
        values = [int(v) for v in args.shard_shape.split(",")]
        stats = shard_store(args.store, shard_shape=values[0] if len(values) == 1 else tuple(values))
    return {**info, "stats": stats, "store": args.store}


def cmd_shard_write_points(args, zv, info) -> dict:
    """A point cloud the reference shards at creation (``write_points(shard_shape=...)``)."""
    from zarr_vectors.types.points import write_points

    data = np.load(args.npz, allow_pickle=False)
    positions = np.asarray(data["positions"])
    chunk = _floats(args.chunk_shape)
    vattrs = {k[len("vattr__"):]: np.asarray(data[k]) for k in data.files if k.startswith("vattr__")}
    object_ids = np.asarray(data["object_ids"]) if "object_ids" in data.files else None
    if os.path.exists(args.store):
        shutil.rmtree(args.store)
    values = [int(v) for v in args.shard_shape.split(",")]
    kw = {}
    if args.bounds is not None:
        kw["bounds"] = _split_box(_floats(args.bounds), "--bounds")
    stats = write_points(
        args.store, positions, chunk_shape=tuple(chunk), vertex_attributes=vattrs or None, object_ids=object_ids,
        compressor=None if args.compression == "none" else args.compression,
        shard_shape=values[0] if len(values) == 1 else tuple(values), **kw,
    )
    return {**info, "stats": stats, "store": args.store}


def cmd_shard_read_graph(args, zv, info) -> dict:
    """``types.graphs.read_graph`` (positions, edges) of a store, saved to an npz."""
    from zarr_vectors.types.graphs import read_graph

    raw = read_graph(args.store, level=args.level)
    positions = np.asarray(raw["positions"])
    edges = np.asarray(raw["edges"], dtype=np.int64).reshape(-1, 2)
    np.savez(args.out, positions=positions, edges=edges)
    return {**info, "n": int(len(positions)), "m": int(len(edges)), "out": args.out}


def cmd_shard_write_pyramid(args, zv, info) -> dict:
    """A graph with object ids and a 3-level pyramid with cross-level links (multi-level sharding input)."""
    from zarr_vectors.multiresolution.coarsen import build_pyramid
    from zarr_vectors.types.graphs import write_graph

    rng = np.random.default_rng(args.seed)
    n = 300
    pos = rng.uniform(0, 100, (n, 3)).astype(np.float32)
    edges = rng.integers(0, n, (600, 2))
    edges = edges[edges[:, 0] != edges[:, 1]]
    if os.path.exists(args.store):
        shutil.rmtree(args.store)
    write_graph(args.store, pos, edges, chunk_shape=(25.0,) * 3, bin_shape=(12.5,) * 3,
                bounds=([0.0] * 3, [100.0] * 3), object_ids=rng.integers(0, 5, n), compressor="zstd")
    build_pyramid(args.store, factors=[(2, 1), (2, 1)], chunk_scale_factors=[1, 2], cross_level_depth=2)
    return {**info, "store": args.store}


def _add_sharding_parsers(sub) -> None:
    ss = sub.add_parser("shard-store", help="the reference's shard_store / unshard_store on a store")
    ss.add_argument("store")
    ss.add_argument("--shard-shape", default="8", help="N or N,N,N")
    ss.add_argument("--unshard", action="store_true")
    sw = sub.add_parser("shard-write-points", help="reference write_points(shard_shape=...) from an npz")
    sw.add_argument("npz")
    sw.add_argument("store")
    sw.add_argument("--chunk-shape", required=True)
    sw.add_argument("--shard-shape", required=True, help="N or N,N,N")
    sw.add_argument("--bounds", default=None)
    sw.add_argument("--compression", default="zstd", help="zstd or none")
    sp = sub.add_parser("shard-write-pyramid", help="a graph with a 3-level pyramid and cross-level links")
    sp.add_argument("store")
    sp.add_argument("--seed", type=int, default=0)
    sr = sub.add_parser("shard-read-graph", help="reference read_graph -> npz (positions, edges)")
    sr.add_argument("store")
    sr.add_argument("--out", required=True)
    sr.add_argument("--level", type=int, default=0)


SHARDING_COMMANDS = {
    "shard-store": cmd_shard_store,
    "shard-write-points": cmd_shard_write_points,
    "shard-read-graph": cmd_shard_read_graph,
    "shard-write-pyramid": cmd_shard_write_pyramid,
}


# ---------------------------------------------------------------- pyramids (issue 5)


def _pyramid_factors(text: str) -> list[tuple[float, float]]:
    """``"2,1;2,2"`` -> ``[(2.0, 1.0), (2.0, 2.0)]``."""
    out = []
    for part in text.split(";"):
        values = [float(v) for v in part.split(",")]
        out.append((values[0], values[1] if len(values) > 1 else 1.0))
    return out


def _pyramid_scales(text: str | None):
    """``"1;2;1,2,1"`` -> ``[1, 2, (1, 2, 1)]``."""
    if not text:
        return None
    out = []
    for part in text.split(";"):
        values = [int(v) for v in part.split(",")]
        out.append(values[0] if len(values) == 1 else tuple(values))
    return out


def cmd_pyramid_build(args, zv, info) -> dict:
    """The reference's ``build_pyramid`` on an existing store (timed)."""
    from zarr_vectors.multiresolution.coarsen import build_pyramid

    t0 = time.perf_counter()
    summary = build_pyramid(args.store, factors=_pyramid_factors(args.factors),
                            chunk_scale_factors=_pyramid_scales(args.chunk_scale),
                            cross_level_storage=args.storage, cross_level_depth=args.depth,
                            sparsity_seed=args.seed)
    return {**info, "seconds": time.perf_counter() - t0, "levels_created": summary["levels_created"],
            "root": _root_attrs(args.store)}


def cmd_pyramid_read(args, zv, info) -> dict:
    """Validate (optionally) and read every level of several stores through the public reader:
    ``OUTDIR/<store name>/level<N>.npz`` with ``positions`` (read-all) and, for kinds the
    reference reads by object, ``obj_positions`` plus ``obj_ids`` (point clouds, per vertex) or
    ``obj_part_ids`` / ``obj_part_lengths`` (polylines, per part); every present object."""
    from zarr_vectors.core.store import list_resolution_levels, open_store
    from zarr_vectors.validate import validate

    results = {}
    for store in args.stores:
        out_dir = Path(args.outdir) / Path(store).name
        out_dir.mkdir(parents=True, exist_ok=True)
        validation = None
        if args.validate_level:
            result = validate(store, level=args.validate_level)
            validation = {"ok": bool(result.ok), "errors": [str(e) for e in result.errors],
                          "warnings": [str(w) for w in result.warnings]}
        ds = zv.open(store)
        levels = []
        for n in list_resolution_levels(open_store(store)):
            level = ds.level(n)
            res = level.read()
            out = {"positions": np.asarray(res.positions)}
            out.update({f"attr_{k}": np.asarray(v) for k, v in res.attributes.items()})  # vertex attributes
            entry = {"level": n, "n": int(res.vertex_count), "kind": res.kind, "object_slots": len(level.objects)}
            if entry["object_slots"] and res.kind in ("point_cloud", "polyline", "streamline", "line"):
                ids = [int(i) for i in level.objects.ids(present=True)]
                by_obj = level.read(objects=ids)
                out["obj_positions"] = np.asarray(by_obj.positions)
                if by_obj.object_ids is not None:  # point clouds: one id per vertex
                    out["obj_ids"] = np.asarray(by_obj.object_ids, dtype=np.int64)
                else:  # polylines: one part per object, in ``part_objects`` order
                    out["obj_part_ids"] = np.asarray(by_obj.part_objects, dtype=np.int64)
                    out["obj_part_lengths"] = np.asarray([len(q) for q in by_obj.polylines], dtype=np.int64)
                entry["present"] = len(ids)
            links_dir = os.path.join(store, str(n), "links")
            deltas = []
            if os.path.isdir(links_dir):
                from zarr_vectors.core.arrays import read_link_arrays
                from zarr_vectors.core.store import get_resolution_level

                lg = get_resolution_level(open_store(store), n)
                for name in sorted(os.listdir(links_dir)):
                    if name in ("0", "zarr.json") or not os.path.isdir(os.path.join(links_dir, name)):
                        continue
                    chunks, vi = read_link_arrays(lg, delta=int(name))
                    out[f"links_{name}_chunks"] = np.asarray(chunks, dtype=np.int64).reshape(len(vi), 2, -1)
                    out[f"links_{name}_vi"] = np.asarray(vi, dtype=np.int64)
                    deltas.append(name)
            entry["cross_level"] = deltas
            path = out_dir / f"level{n}.npz"
            np.savez(path, **out)
            entry["out"] = str(path)
            levels.append(entry)
        results[str(store)] = {"levels": levels, "validation": validation}
    return {**info, "stores": results}


def cmd_pyramid_write(args, zv, info) -> dict:
    """Small stores of points (with and without ids), graph, mesh and streamlines, each with a
    reference pyramid (explicit / implicit storage, per-level chunk scale, depth 2)."""
    from zarr_vectors.multiresolution.coarsen import build_pyramid
    from zarr_vectors.types.graphs import write_graph
    from zarr_vectors.types.meshes import write_mesh
    from zarr_vectors.types.points import write_points
    from zarr_vectors.types.polylines import write_polylines

    out = Path(args.outdir)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    rng = np.random.default_rng(args.seed)
    n = 200
    bounds = ([-50.0] * 3, [100.0] * 3)
    cs = (50.0,) * 3
    pos = rng.uniform(-50, 100, (n, 3)).astype(np.float32)
    edges = rng.integers(0, n, (300, 2))
    edges = edges[edges[:, 0] != edges[:, 1]]
    faces = np.array([rng.choice(n, 3, replace=False) for _ in range(100)])
    lines = [np.clip(np.cumsum(rng.normal(0, 8, (int(rng.integers(2, 20)), 3)), axis=0) + 20, -50, 100)
             .astype(np.float32) for _ in range(15)]
    ids = rng.integers(0, 5, n)
    stores = {}

    def p(name: str, **build) -> str:
        stores[name] = build
        return str(out / name)

    write_points(p("points.zv", factors=[(2, 1), (2, 1)], chunk_scale_factors=[1, 2]), pos, chunk_shape=cs,
                 bin_shape=(25.0,) * 3, bounds=bounds, compressor="zstd")
    write_points(p("points_ids.zv", factors=[(2, 2)], cross_level_storage="implicit", sparsity_seed=1), pos,
                 chunk_shape=cs, bin_shape=(25.0,) * 3, bounds=bounds, object_ids=ids)
    write_graph(p("graph.zv", factors=[(2, 1), (2, 1)], chunk_scale_factors=[(1, 2, 1), 2], cross_level_depth=2),
                pos, edges, chunk_shape=cs, bin_shape=(25.0,) * 3, bounds=bounds, object_ids=ids, compressor="zstd")
    write_mesh(p("mesh.zv", factors=[(2, 1)], cross_level_storage="implicit"), pos, faces, chunk_shape=cs,
               bounds=bounds)
    write_polylines(p("streamline.zv", factors=[(2, 2)], chunk_scale_factors=[2], sparsity_seed=1), lines,
                    chunk_shape=cs, bounds=bounds, geometry_type="streamline")
    for name, build in stores.items():
        build_pyramid(str(out / name), **build)
    return {**info, "outdir": str(out), "stores": {k: {kk: repr(vv) for kk, vv in v.items()} for k, v in stores.items()}}


def cmd_pyramid_bench(args, zv, info) -> dict:
    """Time the reference's ``build_pyramid(factors=[(2.0, 1.0)])`` on its own store of a benchmark
    input (an npz made by ``benchmarks/pyramid.py``); each run starts from a fresh copy (untimed)."""
    from zarr_vectors.multiresolution.coarsen import build_pyramid

    data = np.load(args.npz, allow_pickle=False)
    positions = np.asarray(data["positions"])
    ndim = positions.shape[1]
    common = {"chunk_shape": (float(args.chunk),) * ndim, "bounds": ([0.0] * ndim, [1000.0] * ndim),
              "compressor": "zstd"}
    object_ids = np.asarray(data["object_ids"]) if "object_ids" in data.files else None
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    base = workdir / f"ref_{args.kind}_base.zv"
    if base.exists():
        shutil.rmtree(base)
    t0 = time.perf_counter()
    if args.kind == "points":
        from zarr_vectors.types.points import write_points

        vattrs = {k[len("vattr__"):]: np.asarray(data[k]) for k in data.files if k.startswith("vattr__")}
        write_points(str(base), positions, bin_shape=(float(args.bin),) * ndim, vertex_attributes=vattrs or None,
                     object_ids=object_ids, **common)
    elif args.kind == "graph":
        from zarr_vectors.types.graphs import write_graph

        lattrs = {k[len("lattr__"):]: np.asarray(data[k]) for k in data.files if k.startswith("lattr__")}
        write_graph(str(base), positions, np.asarray(data["edges"], np.int64), link_attributes=lattrs or None,
                    object_ids=object_ids, **common)
    elif args.kind == "mesh":
        from zarr_vectors.types.meshes import write_mesh

        write_mesh(str(base), positions, np.asarray(data["faces"], np.int64), object_ids=object_ids, **common)
    elif args.kind == "streamline":
        from zarr_vectors.types.polylines import write_polylines

        off = np.asarray(data["offsets"], np.int64)
        write_polylines(str(base), [positions[a:b] for a, b in zip(off[:-1], off[1:])], geometry_type="streamline",
                        **common)
    else:
        raise SystemExit(f"refdriver: pyramid-bench does not know {args.kind!r}")
    write_s = time.perf_counter() - t0
    seconds = []
    level1 = None
    for i in range(int(args.repeat)):
        store = workdir / f"ref_{args.kind}_{i}.zv"
        if store.exists():
            shutil.rmtree(store)
        shutil.copytree(base, store)
        os.sync()  # the benchmarks' protocol: see benchmarks/_common.timed_fresh
        t0 = time.perf_counter()
        summary = build_pyramid(str(store), factors=[(2.0, 1.0)])
        seconds.append(time.perf_counter() - t0)
        level1 = summary["level_specs"][0].get("vertex_count")
    for i in range(int(args.repeat)):  # deleted only after every timed run, as ours
        shutil.rmtree(workdir / f"ref_{args.kind}_{i}.zv", ignore_errors=True)
    shutil.rmtree(base, ignore_errors=True)
    return {**info, "kind": args.kind, "repeat": int(args.repeat), "pyramid_s": seconds, "write_s": write_s,
            "level1_vertices": level1,
            "timed": "build_pyramid(store, factors=[(2.0, 1.0)]) on a fresh copy of the reference's own store"}


def _add_pyramid_parsers(sub) -> None:
    pb = sub.add_parser("pyramid-build", help="the reference's build_pyramid on a store")
    pb.add_argument("store")
    pb.add_argument("--factors", required=True, help='coarsen[,sparsity] per level, ";"-separated')
    pb.add_argument("--chunk-scale", default=None, help='N or N,N,N per level, ";"-separated')
    pb.add_argument("--storage", choices=("none", "implicit", "explicit"), default="explicit")
    pb.add_argument("--depth", type=int, default=1)
    pb.add_argument("--seed", type=int, default=0)
    pr = sub.add_parser("pyramid-read", help="validate (optional) and read every level of stores -> npz files")
    pr.add_argument("stores", nargs="+")
    pr.add_argument("--outdir", required=True)
    pr.add_argument("--validate-level", type=int, default=0)
    pw = sub.add_parser("pyramid-write", help="small reference stores of four kinds, each with a pyramid")
    pw.add_argument("outdir")
    pw.add_argument("--seed", type=int, default=0)
    pe = sub.add_parser("pyramid-bench", help="time the reference's build_pyramid(factors=[(2, 1)])")
    pe.add_argument("kind", choices=("points", "graph", "mesh", "streamline"))
    pe.add_argument("npz")
    pe.add_argument("--workdir", required=True)
    pe.add_argument("--repeat", type=int, default=3)
    pe.add_argument("--chunk", type=float, default=250.0)
    pe.add_argument("--bin", type=float, default=62.5, help="points only")


PYRAMID_COMMANDS = {
    "pyramid-build": cmd_pyramid_build,
    "pyramid-read": cmd_pyramid_read,
    "pyramid-write": cmd_pyramid_write,
    "pyramid-bench": cmd_pyramid_bench,
}


def cmd_bench_pipeline(args, zv, info) -> dict:
    """Time the reference's single-process graph write + build_pyramid([(2, 1)]) + validate(level=5)
    on the arrays of ``benchmarks/graph.py`` (the baseline of ``benchmarks/pipeline.py``)."""
    from zarr_vectors.multiresolution.coarsen import build_pyramid
    from zarr_vectors.types.graphs import write_graph
    from zarr_vectors.validate import validate

    data = np.load(args.npz, allow_pickle=False)
    positions = np.asarray(data["positions"])
    common = {"chunk_shape": (250.0,) * 3, "bounds": ([0.0] * 3, [1000.0] * 3), "compressor": "zstd"}
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    out: dict[str, list[float]] = {"write_s": [], "pyramid_s": [], "validate_s": [], "total_s": []}
    for i in range(int(args.repeat)):
        store = str(workdir / f"pipeline_{i}.zv")
        shutil.rmtree(store, ignore_errors=True)
        os.sync()  # the benchmarks' protocol: see benchmarks/_common.timed_fresh
        t0 = time.perf_counter()
        write_graph(store, positions, np.asarray(data["edges"], np.int64),
                    link_attributes={"weight": np.asarray(data["lattr__weight"])},
                    object_ids=np.asarray(data["object_ids"]), **common)
        t1 = time.perf_counter()
        build_pyramid(store, factors=[(2.0, 1.0)])
        t2 = time.perf_counter()
        result = validate(store, level=5)
        t3 = time.perf_counter()
        if result.errors:
            raise SystemExit(f"refdriver: the reference's own store failed validation: {result.errors[:3]}")
        out["write_s"].append(t1 - t0)
        out["pyramid_s"].append(t2 - t1)
        out["validate_s"].append(t3 - t2)
        out["total_s"].append(t3 - t0)
    for i in range(int(args.repeat)):  # deleted only after every timed run, as ours
        shutil.rmtree(workdir / f"pipeline_{i}.zv", ignore_errors=True)
    return {**info, **out}


def _add_pipeline_parsers(sub) -> None:
    b = sub.add_parser("bench-pipeline", help="reference write + build_pyramid + validate L5, timed")
    b.add_argument("npz")
    b.add_argument("--workdir", required=True)
    b.add_argument("--repeat", type=int, default=1)


PIPELINE_COMMANDS = {"bench-pipeline": cmd_bench_pipeline}


# ---------------------------------------------------------------- kind lists (issue 12)
# api-stores: a store for every (Schema kind, add_* call) of the reference's high-level
# API -- which writes geometry_types [schema kind, writer kind] -- and for each of its
# low-level writers, with and without attributes and object ids; each validated by the
# reference and read back with the reader of the kind its writer wrote.

API_SCHEMA_KINDS = ("default", "point_cloud", "line", "polyline", "streamline", "skeleton", "graph", "mesh")
API_CALLS = {  # call -> the kind its writer writes
    "points": "point_cloud", "points_ids": "point_cloud", "polylines": "polyline", "streamlines": "streamline",
    "lines": "line", "graph": "graph", "graph_ids": "graph", "tree": "skeleton", "mesh": "mesh", "mesh_ids": "mesh",
}
LOW_LEVEL_WRITERS = {  # name -> the kind it writes
    "write_points": "point_cloud", "write_points_ids": "point_cloud", "write_polylines": "polyline",
    "write_streamlines": "streamline", "write_lines": "line", "write_graph": "graph", "write_graph_ids": "graph",
    "write_graph_skeleton": "skeleton", "write_graph_tree": "skeleton", "write_mesh": "mesh", "write_mesh_ids": "mesh",
}


def _api_inputs(seed: int) -> dict:
    """Small seeded inputs with distinct positions in [0, 100)^3 (8 chunks of 50)."""
    rng = np.random.default_rng(seed)
    n = 60
    pos = rng.uniform(0, 100, (n, 3)).astype(np.float32)
    lengths = rng.integers(2, 10, 10)
    walks = [np.clip(rng.uniform(10, 90, 3) + np.cumsum(rng.normal(0, 9, (k, 3)), axis=0), 0, 99.9) for k in lengths]
    edges = rng.integers(0, n, (90, 2))
    parents = np.array([-1] + [int(rng.integers(0, i)) for i in range(1, n)])
    inputs = {
        "pos": pos, "t": rng.standard_normal(n).astype(np.float32), "ids": rng.integers(0, 5, n),
        "w5": np.arange(5, dtype=np.float32) + 0.5,
        "lines": [w.astype(np.float32) for w in walks], "lines_t": [rng.random(k).astype(np.float32) for k in lengths],
        "lines_w": np.arange(len(lengths), dtype=np.float32) * 2,
        "endpoints": rng.uniform(0, 100, (12, 2, 3)).astype(np.float32),
        "endpoints_t": rng.standard_normal((12, 2)).astype(np.float32),
        "edges": edges[edges[:, 0] != edges[:, 1]],
        "tree": np.stack([np.arange(1, n), parents[1:]], 1),
        "faces": np.array([rng.choice(n, 3, replace=False) for _ in range(40)]),
    }
    inputs["e"] = rng.standard_normal(len(inputs["edges"])).astype(np.float32)
    return inputs


def _api_add(ds, call: str, x: dict) -> None:
    """One ``Dataset.add_*`` call of ``API_CALLS``."""
    if call == "points":
        ds.add_points(x["pos"], attributes={"t": x["t"]})
    elif call == "points_ids":
        ds.add_points(x["pos"], attributes={"t": x["t"]}, object_ids=x["ids"], object_attributes={"w": x["w5"]})
    elif call in ("polylines", "streamlines"):
        ds.add_polylines(x["lines"], attributes={"t": x["lines_t"]}, object_attributes={"w": x["lines_w"]},
                         streamlines=call == "streamlines")
    elif call == "lines":
        ds.add_lines(x["endpoints"], attributes={"t": x["endpoints_t"]})
    elif call == "graph":
        ds.add_graph(x["pos"], x["edges"], attributes={"t": x["t"]}, edge_attributes={"e": x["e"]})
    elif call == "graph_ids":
        ds.add_graph(x["pos"], x["edges"], object_ids=x["ids"], object_attributes={"w": x["w5"]})
    elif call == "tree":
        ds.add_graph(x["pos"], x["tree"], tree=True, attributes={"t": x["t"]})
    elif call == "mesh":
        ds.add_mesh(x["pos"], x["faces"], attributes={"t": x["t"]})
    elif call == "mesh_ids":
        ds.add_mesh(x["pos"], x["faces"], object_ids=x["ids"], object_attributes={"w": x["w5"]})
    else:
        raise SystemExit(f"refdriver: unknown add call {call!r}")


def _api_low_level(store: str, name: str, x: dict) -> None:
    """One of ``LOW_LEVEL_WRITERS`` (the supported ``zarr_vectors.building`` writers)."""
    from zarr_vectors.building import write_graph, write_lines, write_mesh, write_points, write_polylines

    common = {"chunk_shape": (50.0,) * 3, "bounds": ([0.0] * 3, [100.0] * 3)}
    if name == "write_points":
        write_points(store, x["pos"], bin_shape=(25.0,) * 3, vertex_attributes={"t": x["t"]}, **common)
    elif name == "write_points_ids":
        write_points(store, x["pos"], vertex_attributes={"t": x["t"]}, object_ids=x["ids"],
                     object_attributes={"w": x["w5"]}, **common)
    elif name in ("write_polylines", "write_streamlines"):
        write_polylines(store, x["lines"], vertex_attributes={"t": x["lines_t"]}, object_attributes={"w": x["lines_w"]},
                        geometry_type="polyline" if name == "write_polylines" else "streamline", **common)
    elif name == "write_lines":
        write_lines(store, x["endpoints"], vertex_attributes={"t": x["endpoints_t"]}, **common)
    elif name == "write_graph":
        write_graph(store, x["pos"], x["edges"], vertex_attributes={"t": x["t"]}, link_attributes={"e": x["e"]},
                    **common)
    elif name == "write_graph_ids":
        write_graph(store, x["pos"], x["edges"], object_ids=x["ids"], object_attributes={"w": x["w5"]}, **common)
    elif name == "write_graph_skeleton":
        write_graph(store, x["pos"], x["tree"], kind="skeleton", vertex_attributes={"t": x["t"]}, **common)
    elif name == "write_graph_tree":
        write_graph(store, x["pos"], x["tree"], is_tree=True, **common)
    elif name == "write_mesh":
        write_mesh(store, x["pos"], x["faces"], vertex_attributes={"t": x["t"]}, **common)
    elif name == "write_mesh_ids":
        write_mesh(store, x["pos"], x["faces"], object_ids=x["ids"], object_attributes={"w": x["w5"]}, **common)
    else:
        raise SystemExit(f"refdriver: unknown low-level writer {name!r}")


def _child_groups(path: str) -> list[str]:
    """Names of the nodes below ``path`` (none when it does not exist)."""
    return sorted(n for n in os.listdir(path) if os.path.isdir(os.path.join(path, n))) if os.path.isdir(path) else []


def _api_readback(store: str, kind: str, out_path: str) -> dict:
    """What the reference reads back of a store whose data is ``kind``, whatever its label says:
    the per-kind reader (``read_linked_one``; ``read_points`` for point clouds), plus, for every
    kind, ``all_positions`` / ``vattr__*`` from ``read_points`` (storage order), the vertices of
    each present object (``member_ids`` / ``member_positions``, from ``read_object_vertices``) and
    the object attributes (``oattr__*`` with ``oattr_ids``)."""
    from zarr_vectors.building import get_resolution_level, open_store, read_object_attributes, read_object_vertices
    from zarr_vectors.types.points import read_points

    level = get_resolution_level(open_store(store), 0)
    names = _child_groups(os.path.join(store, "0", "vertex_attributes"))
    raw = read_points(store, attribute_names=names or None)
    extra: dict[str, np.ndarray] = {"all_positions": np.asarray(raw["positions"])}
    for name in names:
        extra[f"vattr__{name}"] = np.asarray(raw["vertex_attributes"][name])
    info: dict = {"kind": kind, "vertex_attributes": names, "out": out_path}
    if kind == "point_cloud":
        extra["positions"] = extra["all_positions"]
    else:
        info |= {k: v for k, v in _read_linked_one(store, out_path, 0, kind).items() if k != "vertex_attributes"}
        linked = dict(np.load(out_path))
        extra |= {k: v for k, v in linked.items() if not k.startswith("vattr__")}
    if os.path.isdir(os.path.join(store, "0", "object_index")):
        import zarr_vectors as zv

        objects = zv.open(store).level(0).objects
        present = [int(i) for i in objects.ids(present=True)]
        members = [(i, np.concatenate([np.asarray(f).reshape(-1, 3) for f in read_object_vertices(level, i)]))
                   for i in present]
        extra["member_ids"] = np.concatenate([np.full(len(p), i, np.int64) for i, p in members])
        extra["member_positions"] = np.concatenate([p for _, p in members])
        onames = _child_groups(os.path.join(store, "0", "object_attributes"))
        for name in onames:
            extra[f"oattr__{name}"] = np.asarray(read_object_attributes(level, name))
        extra["oattr_ids"] = np.asarray(objects.ids(present=False), dtype=np.int64)
        info["object_attributes"] = onames
    np.savez(out_path, **extra)
    return info


def cmd_api_stores(args, zv, info) -> dict:
    """Every store of ``API_SCHEMA_KINDS`` x ``API_CALLS`` and of ``LOW_LEVEL_WRITERS``, in OUTDIR:
    written, validated by the reference (``--validate-level``) and read back (``<store>.npz``)."""
    from zarr_vectors.validate import validate

    out = Path(args.outdir)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    x = _api_inputs(args.seed)
    jobs = [(f"api_{s}_{c}", s, c, k) for s in API_SCHEMA_KINDS for c, k in API_CALLS.items()]
    jobs += [(f"ll_{w}", None, w, k) for w, k in LOW_LEVEL_WRITERS.items()]
    stores = {}
    for name, schema_kind, call, kind in jobs:
        store = str(out / f"{name}.zv")
        if schema_kind is None:
            _api_low_level(store, call, x)
        else:
            kw = {} if schema_kind == "default" else {"kind": schema_kind}
            ds = zv.create(store, schema=zv.Schema(bounds=([0.0] * 3, [100.0] * 3), **kw))
            _api_add(ds, call, x)
        entry: dict = {"schema_kind": schema_kind, "call": call, "writer_kind": kind,
                       "geometry_types": _root_attrs(store).get("geometry_types")}
        if args.validate_level:
            report = validate(store, level=args.validate_level)
            entry["validate"] = {"ok": bool(report.ok), "errors": [str(e) for e in report.errors],
                                 "warnings": [str(w) for w in report.warnings]}
        entry["read"] = _api_readback(store, kind, str(out / f"{name}.npz"))
        stores[name] = entry | {"store": store}
    return {**info, "stores": stores}


def cmd_write_namespaced(args, zv, info) -> dict:
    """A point cloud plus a graph added by ``zarr_vectors.composite.add_geometry`` (the reference's
    undecided namespaced layout: ``vertices_graph``, ``links_graph``, ``geometry_index``)."""
    from zarr_vectors.building import write_points
    from zarr_vectors.composite import add_geometry

    x = _api_inputs(args.seed)
    if os.path.exists(args.store):
        shutil.rmtree(args.store)
    write_points(args.store, x["pos"], chunk_shape=(50.0,) * 3, bounds=([0.0] * 3, [100.0] * 3))
    add_geometry(args.store, "graph", positions=x["pos"][:20] + 0.5, edges=x["tree"][:19] % 20)
    return {**info, "store": args.store, "geometry_types": _root_attrs(args.store).get("geometry_types")}


def cmd_write_twice(args, zv, info) -> dict:
    """``add_polylines`` then ``add_graph`` on one default-schema Dataset: the graph replaces the
    polylines, the list grows to three kinds and ``links_convention`` stays the first writer's."""
    x = _api_inputs(args.seed)
    if os.path.exists(args.store):
        shutil.rmtree(args.store)
    ds = zv.create(args.store, schema=zv.Schema(bounds=([0.0] * 3, [100.0] * 3)))
    ds.add_polylines(x["lines"])
    ds.add_graph(x["pos"], x["edges"])
    root = _root_attrs(args.store)
    return {**info, "store": args.store, "geometry_types": root.get("geometry_types"),
            "links_convention": root.get("links_convention")}


def _add_api_parsers(sub) -> None:
    a = sub.add_parser("api-stores", help="stores of every high-level (Schema kind, add_*) pair and low-level writer")
    a.add_argument("outdir")
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--validate-level", type=int, default=5)
    t = sub.add_parser("write-twice", help="add_polylines then add_graph on one Dataset")
    t.add_argument("store")
    t.add_argument("--seed", type=int, default=0)
    n = sub.add_parser("write-namespaced", help="points + add_geometry('graph'): the namespaced composite layout")
    n.add_argument("store")
    n.add_argument("--seed", type=int, default=0)


API_COMMANDS = {"api-stores": cmd_api_stores, "write-namespaced": cmd_write_namespaced, "write-twice": cmd_write_twice}


# ---------------------------------------------------------------- S3 (benchmarks/s3.py)


def _s3_env(endpoint: str) -> None:
    """Point both of the reference's S3 backends at ``endpoint``: its write and read functions take
    no storage options, so obstore (``from_url``) and s3fs (botocore) read the environment."""
    os.environ.update({
        "AWS_ENDPOINT_URL": endpoint, "AWS_ENDPOINT": endpoint, "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1",
    })


def _server_requests(endpoint: str, reset: bool = False) -> dict:
    """The moto server's request counts by method (tests/s3server.py); ``reset`` then clears them."""
    import urllib.request

    with urllib.request.urlopen(endpoint + "/__zv_requests__", timeout=60) as answer:
        counts = json.loads(answer.read())
    if reset:
        urllib.request.urlopen(urllib.request.Request(endpoint + "/__zv_requests__", method="DELETE"), timeout=60).close()
    return counts


def cmd_bench_s3(args, zv, info) -> dict:
    """Time the reference's write and read-all of a benchmark input (npz) on an S3 server, with one
    of its S3 backends, and count the server's requests of each (the last run's)."""
    _s3_env(args.endpoint)
    data = np.load(args.npz, allow_pickle=False)
    positions = np.asarray(data["positions"])
    box = ([0.0, 0.0, 0.0], [1000.0, 1000.0, 1000.0])
    if args.kind == "points":
        from zarr_vectors.types.points import read_points, write_points

        def write(store):
            write_points(store, positions, chunk_shape=(250.0,) * 3, bin_shape=(62.5,) * 3, bounds=box,
                         vertex_attributes={"value": np.asarray(data["value"])}, backend=args.backend)

        def read(store):
            got = read_points(store, attribute_names=["value"], backend=args.backend)
            return [len(got["positions"]), len(got["vertex_attributes"]["value"])]
    elif args.kind == "graph":
        from zarr_vectors.core.arrays import read_link_attributes
        from zarr_vectors.core.store import get_resolution_level, open_store
        from zarr_vectors.types.graphs import read_graph, write_graph

        def write(store):
            write_graph(store, positions, np.asarray(data["edges"], np.int64), chunk_shape=(250.0,) * 3,
                        bounds=box, link_attributes={"weight": np.asarray(data["lattr__weight"])},
                        object_ids=np.asarray(data["object_ids"]), compressor="zstd", backend=args.backend)

        def read(store):
            got = read_graph(store, backend=args.backend)
            level = get_resolution_level(open_store(store, backend=args.backend), 0)
            return [len(got["positions"]), len(got["edges"]), len(read_link_attributes(level, "weight", delta=0))]
    else:
        raise SystemExit(f"refdriver: bench-s3 does not know {args.kind!r}")
    from zarr_vectors.core.store import open_store as open_group
    from zarr_vectors.multiresolution.coarsen import build_pyramid
    from zarr_vectors.sharding import shard_store
    from zarr_vectors.validate import validate

    factor = tuple(float(v) for v in args.pyramid_factor.split(","))

    def pyramid(store):
        return build_pyramid(open_group(store, mode="r+", backend=args.backend), factors=[factor])["levels_created"]

    def shard(store):
        return shard_store(open_group(store, mode="r+", backend=args.backend), shard_shape=int(args.shard_shape))

    def check(store):
        result = validate(open_group(store, backend=args.backend), level=5)
        return {"ok": bool(result.ok), "errors": [str(e) for e in result.errors][:5]}

    run = {"write": write, "read": read, "pyramid": pyramid, "shard": shard, "validate": check}
    stages = args.stages.split(",")
    out: dict = {f"{stage}_s": [] for stage in stages}
    out["counts"] = None
    for i in range(int(args.repeat)):
        store = f"{args.url.rstrip('/')}-{i}.zv"
        _server_requests(args.endpoint, reset=True)
        for stage in stages:
            t0 = time.perf_counter()
            answer = run[stage](store)
            out[f"{stage}_s"].append(time.perf_counter() - t0)
            out[f"{stage}_requests"] = _server_requests(args.endpoint, reset=True)
            if stage == "read":
                out["counts"] = answer
            elif stage == "validate":
                out["validate_result"] = answer
    return {**info, "kind": args.kind, "backend": args.backend, "repeat": int(args.repeat), **out}


def _add_s3_parsers(sub) -> None:
    b = sub.add_parser("bench-s3", help="stages (write, read-all, pyramid, shard, validate) of a benchmark npz "
                       "on an S3 server, one backend")
    b.add_argument("kind", choices=["points", "graph"])
    b.add_argument("npz")
    b.add_argument("--url", required=True, help="s3://bucket/name; runs write <url>-<i>.zv")
    b.add_argument("--endpoint", required=True)
    b.add_argument("--backend", choices=["obstore", "fsspec"], required=True)
    b.add_argument("--repeat", type=int, default=1)
    b.add_argument("--stages", default="write,read", help="in order on one store: write,read,pyramid,shard,validate")
    b.add_argument("--pyramid-factor", default="2,1", help="COARSEN,SPARSITY of the one pyramid level")
    b.add_argument("--shard-shape", default="2", help="inner chunks per shard on every axis")


S3_COMMANDS = {"bench-s3": cmd_bench_s3}


def _parity_call(fn, seconds: int) -> dict:
    """``fn()``'s result, or what it raised (a reference error class, or a crash), within ``seconds``."""
    import signal

    from zarr_vectors.exceptions import ZVError

    def expire(signum, frame):
        raise TimeoutError(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        return {"result": fn()}
    except Exception as exc:  # noqa: BLE001 - every outcome is recorded
        return {"raised": type(exc).__name__, "message": str(exc)[:300], "zv_error": isinstance(exc, ZVError)}
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _parity_read(zv, store: str, level: int, out: str) -> dict:
    """The reference's generic reader on one level -> npz (positions, ids, links, parts, attributes)."""
    res = zv.open(store).level(level).read()
    arrays: dict[str, np.ndarray] = {"positions": np.asarray(res.positions)}
    for name in ("object_ids", "edges", "faces", "part_objects"):
        if getattr(res, name) is not None:
            arrays[name] = np.asarray(getattr(res, name))
    if res.parts:
        arrays["part_offsets"] = np.asarray([sl.start for sl in res.parts] + [res.parts[-1].stop], dtype=np.int64)
    for name in list(res.attributes.names()) if res.attributes else []:
        arrays[f"attr__{name}"] = np.asarray(res.attributes[name])
    np.savez(out, **arrays)
    return {"kind": res.kind, "npz": out, "keys": sorted(arrays)}


def cmd_parity(args, zv, info) -> dict:
    """The reference's validator (level 5) and reader (each listed level) on every case of a manifest.

    Each call runs under an alarm and an address-space limit, so a hang or a runaway
    allocation is recorded as that case's crash rather than ending the run.
    """
    import resource

    from zarr_vectors.validate import validate

    limit = args.memory_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    cases = json.loads(Path(args.manifest).read_text())
    results = {}
    for case in cases:
        store = case["store"]
        entry = {"validate": _parity_call(lambda: _validate_summary(validate(store, level=5)), args.seconds)}
        entry["read"] = {}
        for level in case["levels"]:
            out = os.path.join(args.outdir, f"{case['id']}.{level}.npz")
            entry["read"][str(level)] = _parity_call(lambda: _parity_read(zv, store, int(level), out), args.seconds)
        results[case["id"]] = entry
    return {**info, "results": results}


def _validate_summary(result) -> dict:
    return {"ok": bool(result.ok), "errors": [str(e)[:300] for e in result.errors][:20],
            "warnings": len(result.warnings)}


def _add_parity_parsers(sub) -> None:
    pp = sub.add_parser("parity", help="validate and read conformance fixtures (tests/interop/parity.py)")
    pp.add_argument("manifest", help="JSON list of {id, store, levels}")
    pp.add_argument("outdir")
    pp.add_argument("--seconds", type=int, default=60, help="per call")
    pp.add_argument("--memory-mb", type=int, default=3072)


PARITY_COMMANDS = {"parity": cmd_parity}


def cmd_stored_space(args, zv, info) -> dict:
    """What the reference's tools take a streamline store's space to be (its ``headers/``)."""
    from zarr_vectors_tools.convert.export._streamlines import stored_space

    space, trk_header, trx_header = stored_space(args.store)
    header = trk_header if trk_header is not None else trx_header
    return {**info, "space": space, "source": getattr(header, "format_name", None),
            "affine": None if header is None else header.affine.tolist(),
            "dimensions": None if header is None else [int(v) for v in header.dimensions],
            "voxel_order": getattr(header, "voxel_order", None)}


def cmd_convert(args, zv, info) -> dict:
    """The reference tools' ``zvtools convert IN OUT --chunk-shape ...`` (its TRK ingest keeps voxel mm)."""
    from zarr_vectors_tools.cli import main as zvtools

    rc = zvtools(["convert", args.input, args.store, "--chunk-shape", args.chunk_shape])
    if rc:
        raise RuntimeError(f"zvtools convert exited {rc}")
    return {**info, "store": args.store}


def _add_header_parsers(sub) -> None:
    ss = sub.add_parser("stored-space", help="the reference tools' stored_space of a streamline store")
    ss.add_argument("store")
    cv = sub.add_parser("convert", help="zvtools convert IN STORE --chunk-shape X,Y,Z")
    cv.add_argument("input")
    cv.add_argument("store")
    cv.add_argument("--chunk-shape", required=True)


HEADER_COMMANDS = {"stored-space": cmd_stored_space, "convert": cmd_convert}


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
    _add_linked_parsers(sub)
    _add_sharding_parsers(sub)
    _add_pyramid_parsers(sub)
    _add_pipeline_parsers(sub)
    _add_api_parsers(sub)
    _add_s3_parsers(sub)
    _add_parity_parsers(sub)
    _add_header_parsers(sub)
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


COMMANDS.update(LINKED_COMMANDS)
COMMANDS.update(SHARDING_COMMANDS)
COMMANDS.update(PYRAMID_COMMANDS)
COMMANDS.update(PIPELINE_COMMANDS)
COMMANDS.update(API_COMMANDS)
COMMANDS.update(S3_COMMANDS)
COMMANDS.update(PARITY_COMMANDS)
COMMANDS.update(HEADER_COMMANDS)


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
