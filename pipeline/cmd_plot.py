"""``zv plot STORE [--level N] [--bbox x0,y0,z0,x1,y1,z1] [--color-by NAME] --out FILE.png``.

A picture of one level (:func:`zarr_vectors.plot.save_plot`), read in this process: no
cluster.  Every argument (the --out suffix and directory included) is checked before the
store is opened; a bad one, or a store that cannot be read, exits 2 with one line.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def _plot(args: argparse.Namespace) -> int:
    from pipeline.cli import _storage_options, parse_bbox, user_warnings

    try:
        if args.level < 0:
            raise ValueError(f"--level must be >= 0, got {args.level}")
        box = parse_bbox(args.bbox, "plot")
        options = _storage_options(args.storage_option)
    except (ValueError, SystemExit) as exc:
        print(f"zv plot: error: {str(exc).removeprefix('zv: error: ').removeprefix('zv plot: error: ')}",
              file=sys.stderr)
        return 2
    from zarr_vectors.errors import ZarrVectorsError
    from zarr_vectors.plot import save_plot

    kwargs: dict[str, Any] = {"level": args.level, "bbox": box, "color_by": args.color_by, "storage_options": options}
    if args.object_id:
        kwargs["objects"] = args.object_id
    said: list[str] = []
    try:
        with user_warnings() as said:  # what the picture leaves out, said as export says it
            path = save_plot(args.store, args.out, **kwargs)  # refuses a bad --out before reading
    except ZarrVectorsError as exc:
        print(f"zv plot: error: {exc}", file=sys.stderr)
        return 2
    finally:
        for line in said:
            print(f"zv plot: warning: {line}", file=sys.stderr)
    print(f"wrote {path}")
    return 0


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "plot", help="draw one level of a store (points, edges, mesh faces, streamlines) to a .png/.svg/.pdf",
        description="Projections xy/xz/yz of a 3-D store: point clouds as points or a density, graphs and "
        "skeletons as edges, meshes shaded, streamlines coloured by direction (|unit tangent| as RGB); "
        "--color-by colours by a vertex attribute (coarse pyramid levels carry them aggregated).",
    )
    p.add_argument("store", help="the store (local path, file://, memory://, s3://...)")
    p.add_argument("--out", required=True, metavar="FILE", help="the picture: .png, .svg or .pdf")
    p.add_argument("--level", type=int, default=0, help="pyramid level (default: %(default)s)")
    p.add_argument("--bbox", metavar="x0,y0,z0,x1,y1,z1", help="draw only what lies in this box (inclusive)")
    p.add_argument("--color-by", metavar="NAME", help="colour by this vertex attribute")
    p.add_argument("--object-id", type=int, nargs="+", action="extend", metavar="ID",
                   help="draw only these objects (--object-id 3 7, or repeated)")
    p.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE",
                   help="an fsspec / S3 option for the store, e.g. endpoint_url=http://...; repeatable")
    p.set_defaults(func=_plot)
