"""The ``zv`` command line."""

from __future__ import annotations

import argparse
import sys


def _demo(args: argparse.Namespace) -> int:
    from pipeline.demo import run_demo

    return run_demo(args.out, args.points)


def _info(args: argparse.Namespace) -> int:
    import zarr_vectors as zv

    store = zv.open_store(args.store)
    root = store.root
    print(f"store:          {store.url}")
    print(f"geometry:       {', '.join(root.geometry_types)}")
    print(f"chunk_shape:    {list(root.chunk_shape)}")
    print(f"bounds:         {[list(root.bounds[0]), list(root.bounds[1])]}")
    for n in store.level_numbers():
        level = store.level(n)
        print(f"level {n}:        {level.meta.vertex_count} vertices, arrays {level.meta.arrays_present}")
    return 0


def _storage_options(pairs: list[str]) -> dict:
    """``KEY=VALUE`` pairs; values parse as JSON when they can (numbers, booleans), dotted keys nest."""
    import json

    out: dict = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"zv validate: error: --storage-option expects KEY=VALUE, got {pair!r}")
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        target = out
        *parents, leaf = key.split(".")
        for part in parents:
            target = target.setdefault(part, {})
        target[leaf] = value
    return out


def _validate(args: argparse.Namespace) -> int:
    """Exit 0 when the store has no error, 1 when it has, 2 for usage errors or an unreachable store."""
    import json

    from zarr_vectors.errors import ZarrVectorsError
    from zarr_vectors.validate import validate

    try:
        options = _storage_options(args.storage_option)
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return 2
    try:
        result = validate(args.store, args.level, allow_layouts=tuple(args.allow_layout), storage_options=options)
    except (ZarrVectorsError, OSError) as exc:
        print(f"zv validate: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.to_json()))
    else:
        print(result.summary())
    return 0 if result.ok else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="zv", description="Zarr Vectors stores on Dask.")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="synthesise a point cloud, write it on the embedded cluster, read a box back")
    demo.add_argument("--out", default="demo-output/points.zv", help="store to write (default: %(default)s)")
    demo.add_argument("--points", type=int, default=1_000_000, help="number of points (default: %(default)s)")
    demo.set_defaults(func=_demo)
    info = sub.add_parser("info", help="summarise a store")
    info.add_argument("store")
    info.set_defaults(func=_info)
    check = sub.add_parser("validate", help="check a store against the format (levels 1-5); exit 1 on errors")
    check.add_argument("store", help="path or URL (file://, memory://, s3://bucket/prefix)")
    check.add_argument("--level", type=int, choices=range(1, 6), default=5, metavar="N",
                       help="conformance level 1..5, cumulative (default: %(default)s)")
    check.add_argument("--json", action="store_true", help="print one JSON object instead of a summary")
    check.add_argument("--allow-layout", action="append", default=[], metavar="NAME",
                       help="also read this object_index layout (e.g. vlen_manifests_v2); repeatable")
    check.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE",
                       help="fsspec storage option (VALUE parsed as JSON when possible; dotted KEY nests); repeatable")
    check.set_defaults(func=_validate)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except Exception as exc:  # the command line reports, it does not trace back
        from zarr_vectors.errors import ZarrVectorsError

        if isinstance(exc, ZarrVectorsError):
            print(f"zv: error: {exc}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
