"""``zv build``'s input options: the column mapping, and the help text of the input conventions.

The help lists the registered formats when it is printed (not when the parser is
built), so ``zv`` pays for importing the format modules only on ``zv build --help``.
"""

from __future__ import annotations

import argparse
from typing import Any

CONVENTIONS = """\
input columns (tables: Parquet, CSV, NPZ; defaults in brackets, each renamed by its option):
  points       one table: positions [x, y, z] (--position-columns), object id [object_id]
               (--object-id-column), attributes: every other numeric column (--columns)
  graph        vertex table with ids [id] (--id-column) + positions, then an edge table
               [src, dst] (--edge-columns; other numeric columns are edge attributes)
               or an edge list (.edgelist/.edges: 'src dst [value...]' lines)
  mesh         vertex table with ids, then a face table [a, b, c, ...] (--face-columns)
  skeleton     one table: [id], [parent] (--parent-column; -1 for roots), positions
  polylines,   one table: polyline id [line] (--line-column), vertex order [order]
  streamlines  (--order-column), positions
  Whole-file formats (GraphML, meshes, SWC, streamlines) hold everything in each file;
  several files are several objects.  Graph, mesh and skeleton input ids are kept as the
  vertex attribute 'id'.  Columns that cannot be stored (text, nested) are named in a
  warning.  A missing named column or an unreadable file exits 2 before anything runs.
"""


def _names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"expected comma-separated column names, got {text!r}")
    return names


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The column options of ``zv build``, and its epilog (formats + conventions) on demand."""
    g = parser.add_argument_group("input columns (see below for the defaults of each kind)")
    g.add_argument("--position-columns", type=_names, metavar="X,Y[,Z]", help="position columns, in axis order")
    g.add_argument("--object-id-column", metavar="C", help="per-vertex object id column")
    g.add_argument("--id-column", metavar="C", help="vertex id column (graph, mesh, skeleton)")
    g.add_argument("--columns", type=_names, metavar="A,B,...", help="the attribute columns (default: every other "
                   "numeric column)")
    g.add_argument("--edge-columns", type=_names, metavar="SRC,DST", help="edge endpoint columns (graph)")
    g.add_argument("--face-columns", type=_names, metavar="A,B,C", help="face corner columns (mesh)")
    g.add_argument("--parent-column", metavar="C", help="parent id column (skeleton)")
    g.add_argument("--line-column", metavar="C", help="polyline id column (polylines, streamlines)")
    g.add_argument("--order-column", metavar="C", help="vertex order column (polylines, streamlines)")
    plain = parser.format_help

    def format_help() -> str:
        parser.epilog = formats_text() + "\n" + CONVENTIONS
        return plain()

    parser.format_help = format_help  # type: ignore[method-assign]


#: the file formats' kind names (the library's) where ``zv build`` spells them otherwise
CLI_KINDS = {"streamline": "streamlines", "polyline": "polylines"}


def formats_text() -> str:
    from zarr_vectors.io import registry

    lines = ["input formats (by extension):"]
    for fmt in registry.formats():
        if fmt.read is not None:
            kinds = ", ".join(CLI_KINDS.get(k, k) for k in fmt.kinds)  # as zv build names them
            lines.append(f"  {', '.join(fmt.extensions):<24} {fmt.description}\n  {'':<24}   holds: {kinds}")
    return "\n".join(lines) + "\n"


ROLES = {"position_columns": "positions", "object_id_column": "object_id", "id_column": "id", "columns": "columns",
         "edge_columns": "edges", "face_columns": "faces", "parent_column": "parent", "line_column": "line",
         "order_column": "order"}


def columns(args: argparse.Namespace) -> dict[str, Any]:
    """The options given, as ``ColumnMap.to_json()`` (plain data for the job spec)."""
    return {role: getattr(args, option) for option, role in ROLES.items() if getattr(args, option, None) is not None}
