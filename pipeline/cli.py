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
