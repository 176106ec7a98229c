"""``zv export STORE OUT``: one level of a store (or the part in a box, or some objects) to a file.

The format comes from OUT's extension through the io registry, and must hold the
store's kind; tables write graph edges / mesh faces and object attributes beside OUT
(``OUT.edges.parquet``, ``OUT.objects.parquet``), edge lists their vertices
(``OUT.vertices.csv``).  A TRK or TRX file's header takes the reference space
``--reference`` gives, else the one the store keeps from its TRK / TRX input
(``headers/``); a FreeSurfer surface the volume geometry the store keeps.  What the format
cannot hold is named in a warning on stderr.
Every argument is checked before the store is read; a bad one exits 2 with one line.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "export", help="write a store level (or a box / some objects of it) to a file: Parquet, CSV, NPZ, LAS/LAZ, "
        "GraphML, edge list, and the mesh, skeleton and streamline formats",
        description="Export one level of a store; the format is OUT's extension (zv build --help lists them).",
    )
    p.add_argument("store", help="path or URL of the store")
    p.add_argument("out", help="output file (.parquet, .csv, .npz, .las, .laz, .graphml, .edgelist, ...)")
    p.add_argument("--level", type=int, default=0, metavar="N", help="pyramid level (default: %(default)s)")
    p.add_argument("--bbox", metavar="X0,Y0,Z0,X1,Y1,Z1", help="keep what lies in this box (inclusive)")
    p.add_argument("--object-id", type=int, nargs="+", action="extend", metavar="ID",
                   help="keep the vertices of these objects (and the records among them): --object-id 3 7, "
                        "or repeated")
    p.add_argument("--overwrite", action="store_true",
                   help="replace OUT and the files a write puts beside it (for OUT=t.parquet: t.edges.parquet, "
                        "t.faces.parquet, t.objects.parquet; for g.edgelist: g.vertices.csv, g.objects.csv); "
                        "kept as they were if the export fails")
    p.add_argument("--reference", metavar="IMAGE",
                   help="TRK / TRX only: a NIfTI image or TRK file whose space (voxel-to-RAS affine, dimensions, "
                        "voxel sizes) the file's header takes (default: the space the store keeps from the TRK or "
                        "TRX file it was built from)")
    p.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE",
                   help="fsspec storage option of the store; repeatable")
    p.set_defaults(func=run)


def _graph_options(fmt: Any, store: Any, level: int) -> dict[str, Any]:
    """``directed`` from the level's links policy, for a format that records it (GraphML): a directed
    graph exported as undirected lost its edges' direction."""
    from zarr_vectors.store.link_family import family_document

    if not fmt.records_direction:
        return {}
    doc = family_document(store.level(level), 0)
    return {"directed": bool(((doc or {}).get("attributes") or {}).get("directed", False))}


def _headers(fmt: Any, store: Any) -> dict[str, dict[str, Any]] | None:
    """The store's headers (checked) that the format's writer takes (``FileFormat.headers``): a TRK or
    TRX header's reference space (an export that left it out wrote the identity; streamline files
    are RAS+ mm, where positions kept in TrackVis voxel mm are taken), a FreeSurfer surface's volume
    geometry, a GIfTI surface's metadata.  Read before the data, so a broken one costs no read; one
    the data does not depend on is left out with a warning (:func:`usable_headers`); tables take none."""
    from zarr_vectors.store.headers import usable_headers

    if not fmt.headers:
        return None
    usable, left_out = usable_headers(store.storage, fmt.headers, crs=store.root.extra.get("crs"))
    for exc in left_out:
        print(f"zv export: warning: {exc}; that header is not used", file=sys.stderr)
    return usable


def _not_written(fmt: Any, store: Any, kind: str) -> list[str]:
    """Warnings for the headers the store keeps that ``fmt`` cannot hold (a TRK header exported to a
    table): the file's reference space or metadata stay in the store only.  Asked (one listing of
    ``headers/``) only when a format holding the store's kind takes a header this one does not."""
    from zarr_vectors.format.headers import HEADERS_GROUP, header_path
    from zarr_vectors.io import registry

    others = {name for f in registry.formats() if kind in {registry.build_kind(k) for k in f.kinds}
              for name in f.headers} - set(fmt.headers)
    if not others:
        return []
    kept = sorted(others & set(store.storage.list_dir(HEADERS_GROUP)))
    return [f"the store's {header_path(name)}, the header of the file it was built from, is not written: a "
            f"{fmt.name} file holds none; positions are written as the store holds them" for name in kept]


def _say_not_finite(positions: Any) -> None:
    """Vertices a store holds with NaN coordinates (the validator's warning L3_NONFINITE_VERTEX) are
    written as read, and said: a file of them exported with nothing said looked whole."""
    import numpy as np

    bad = int((~np.isfinite(positions).all(axis=1)).sum()) if len(positions) else 0
    if bad:
        print(f"zv export: warning: {bad} vertices have NaN coordinates (the validator's L3_NONFINITE_VERTEX); "
              "written as the store holds them", file=sys.stderr)


def _with_space(data: Any, headers: dict[str, dict[str, Any]] | None, reference: Any
                ) -> tuple[Any, dict[str, Any]]:
    """The data with the store's headers, and the writer's ``reference`` when one was given."""
    from dataclasses import replace

    from zarr_vectors.io.types import as_geometry

    if headers is None:
        return data, {}
    return replace(as_geometry(data), headers=headers), ({"reference": reference} if reference is not None else {})


@contextlib.contextmanager
def _replacing(outputs: list[str], existing: list[str]) -> Iterator[None]:
    """Move ``existing`` (an earlier export: OUT and its companions) aside for the write, then
    drop them.  If the write fails, what it wrote of ``outputs`` is removed and the old files
    go back: an old export's edges or objects never sit beside a new table they do not
    describe, and a failed ``--overwrite`` loses nothing."""
    aside = {p: os.path.join(os.path.dirname(p), f".{os.path.basename(p)}.zv-export-{os.getpid()}") for p in existing}
    moved: list[str] = []
    try:
        for p, a in aside.items():
            os.replace(p, a)
            moved.append(p)
        yield
    except BaseException:
        for p in outputs:
            if p in moved:
                os.replace(aside[p], p)  # over what the failed write left there
            elif os.path.lexists(p) and p not in aside:  # written by the failed write
                os.remove(p)
        raise
    for p in moved:
        os.remove(aside[p])


def run(args: argparse.Namespace) -> int:
    """Exit 0 when written, 2 for a bad argument, an unsupported kind/format pair or a refused store."""
    from pipeline.cli import _on_store

    return _on_store("export", args, lambda options: _export(args, options))


def _export(args: argparse.Namespace, options: dict) -> int:
    from pipeline.cli import parse_bbox
    from zarr_vectors.io import registry, select
    from zarr_vectors.read import read as read_store
    from zarr_vectors.store.groups import open_store
    from zarr_vectors.store.kinds import store_kind

    box = parse_bbox(args.bbox, "export")
    fmt = registry.format_for(args.out)
    if fmt.write is None:
        raise SystemExit(f"zv export: error: {args.out!r}: {fmt.name} files can be read, not written")
    if args.reference is not None and not fmt.records_space:
        raise SystemExit(f"zv export: error: --reference: a {fmt.name} file holds no reference space "
                         "(TRK and TRX files do)")
    if args.reference is not None and not os.path.isfile(args.reference):
        raise SystemExit(f"zv export: error: --reference {args.reference!r}: no such file")
    reference = None
    if args.reference is not None:  # read and checked now, not after the store's data; handed to the
        import numpy as np  # writer as read, since --overwrite may move the file aside (OUT itself)

        from zarr_vectors.io.tractograms import given_space, load_reference

        reference = load_reference(args.reference)
        given_space(args.reference, np.zeros((0, 3)), reference=reference)
    outputs = [args.out, *fmt.companions(args.out)]
    folders = [p for p in outputs if os.path.isdir(p) and not os.path.islink(p)]
    if folders:
        raise SystemExit(f"zv export: error: {folders[0]!r} is a folder, where the export writes a file; "
                         "--overwrite replaces files only")
    existing = [p for p in outputs if os.path.lexists(p)]
    if existing and not args.overwrite:
        raise SystemExit(f"zv export: error: {', '.join(map(repr, existing))} exist{'s' if len(existing) == 1 else ''}; "
                         "pass --overwrite to replace " + ("it" if len(existing) == 1 else "them"))
    store = open_store(args.store, storage_options=options)
    kind = registry.build_kind(store_kind(store).kind)
    if kind not in {registry.build_kind(k) for k in fmt.kinds}:
        raise SystemExit(f"zv export: error: {args.out!r}: a {fmt.name} file holds {', '.join(fmt.kinds)}; "
                         f"the store's kind is {kind}")
    if args.level not in store.level_numbers():
        raise SystemExit(f"zv export: error: --level {args.level}: the store has levels {store.level_numbers()}")
    headers = _headers(fmt, store)
    for line in _not_written(fmt, store, kind):
        print(f"zv export: warning: {line}", file=sys.stderr)
    data = read_store(args.store, level=args.level, bbox=box, storage_options=options)
    if args.object_id:
        data = select.objects(data, args.object_id)
    _say_not_finite(data.positions)
    data, space = _with_space(data, headers, reference)
    from pipeline.cli import user_warnings

    said: list[str] = []
    try:  # what the format cannot hold, said as build says it
        with user_warnings() as said, _replacing(outputs, existing):
            fmt.write(args.out, data, **_graph_options(fmt, store, args.level), **space)
    finally:  # said even when the write then fails
        for line in said:
            print(f"zv export: warning: {line}", file=sys.stderr)
    records = f", {len(data.faces)} faces" if data.faces is not None else \
        f", {len(data.edges)} edges" if data.edges is not None else ""
    print(f"{args.out}: {len(data.positions)} vertices{records}"
          + (f", {len(data.offsets) - 1} polylines" if data.offsets is not None else "") + f" ({fmt.name})")
    return 0
