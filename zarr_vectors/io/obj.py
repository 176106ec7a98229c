"""Wavefront OBJ meshes (``.obj``), read and written by hand from the format's definition.

Read: ``v x y z`` vertices (a fourth value ``w`` is ignored and named in
``Geometry.dropped``; the common ``v x y z r g b`` colour extension becomes the
attributes ``red green blue``); ``f`` faces in every corner form (``v``, ``v/vt``,
``v//vn``, ``v/vt/vn``), 1-based or negative (relative to the vertices defined so far);
polygons of one size kept as they are, mixed sizes fanned into triangles with a face
attribute ``polygon`` naming the input face.  ``#`` comments and ``\\`` line
continuations are honoured.  Texture coordinates and normals (``vt``, ``vn``), which OBJ
indexes per face corner rather than per vertex, and groupings (``o``, ``g``, ``usemtl``,
...), lines and points (``l``, ``p``) are named in ``Geometry.dropped``.

Write: ``v`` and ``f`` lines (1-based, full float precision); attributes are named in a
warning (OBJ holds none).
"""

from __future__ import annotations

import io
import re
from itertools import repeat
from typing import Any

import numpy as np

from zarr_vectors.io import geometry_parts as gp
from zarr_vectors.io.types import FileFormat, Geometry

_COMMENT = re.compile(r"#[^\n]*")
_BLANKS = re.compile(r"[ \t\f\v]+")  # line ends are \n alone (gp.read_text)
_EDGES = re.compile(r"^ | $", re.MULTILINE)  # after _BLANKS a line has at most one space at either end
_V = re.compile(r"^v (.*)$", re.MULTILINE)
_F = re.compile(r"^f (.*)$", re.MULTILINE)
_V_OR_F = re.compile(r"^([vf]) ", re.MULTILINE)
_OTHER = re.compile(r"^(?![vf] )(\S+)", re.MULTILINE)
_CORNER_TAIL = re.compile(r"/[^ \n]*")  # the /vt/vn part of a face corner
_IGNORED = {"mtllib", "s"}  # shading and material library: no geometry


def read(path: str, **options: Any) -> Geometry:
    """Read an OBJ file's vertices and faces (no options).

    Whole-text regular expressions and numpy, no loop over lines (200k vertices and 200k
    faces: 1.3 s on a busy 2-core machine, 6.4 s with per-line numpy string arrays).
    """
    gp.no_options(path, "OBJ read", options)
    text = _normalised(gp.read_text(path, "OBJ"))
    positions, attributes, dropped = _vertices(_V.findall(text), path)
    bodies = _F.findall(text)
    counts = _widths(bodies)
    try:
        index = np.array(_CORNER_TAIL.sub("", " ".join(bodies)).split(), dtype=np.int64)
    except (ValueError, OverflowError) as exc:  # OverflowError: an index past int64
        raise gp.input_error(path, f"a face has a vertex index that is not an int64 integer ({exc})") from exc
    if len(index) != counts.sum():
        raise gp.input_error(path, "a face line is malformed")
    if (index == 0).any():
        raise gp.input_error(path, "a face refers to vertex 0 (OBJ indices start at 1; negative ones count back)")
    given = index
    if (index < 0).any():  # relative to the vertices defined before each face line
        is_v = np.array(_V_OR_F.findall(text)) == "v"
        index = np.where(index > 0, index, index + 1 + np.repeat(np.cumsum(is_v)[~is_v], counts))
    outside = (index < 1) | (index > len(positions))
    if outside.any():  # named as the file counts them, from 1 (the 0-based check said "vertex 5" of `f 1 2 6`)
        at = int(np.argmax(outside))
        face = int(np.searchsorted(np.cumsum(counts), at, side="right")) + 1
        raise gp.input_error(path, f"face {face} (counting from 1) refers to vertex {int(given[at])}, but the file "
                                   f"has {len(positions)} vertices")
    others = sorted(set(_OTHER.findall(text)) - _IGNORED)
    faces, polygon = gp.polygon_faces(index - 1, counts, path)
    face_attributes = {"polygon": polygon} if len(polygon) != len(counts) else {}
    return gp.mesh_geometry(
        path, positions, faces, attributes=attributes, face_attributes=face_attributes, dropped=dropped + others
    )


def _normalised(text: str) -> str:
    """Comments removed, continuations joined, single spaces between values and none at
    line ends -- each pass only where the text needs it (a plain exporter's file needs none)."""
    if "#" in text:
        text = _COMMENT.sub("", text)
    if "\\" in text:
        text = text.replace("\\\n", " ")
    if any(c in text for c in ("\t", "\f", "\v", "  ")):
        text = _BLANKS.sub(" ", text)
    if text.startswith(" ") or "\n " in text or " \n" in text or text.endswith(" "):
        text = _EDGES.sub("", text)
    return text


def _widths(bodies: list[str]) -> np.ndarray:
    """Values on each line (its single spaces plus one)."""
    return np.fromiter(map(str.count, bodies, repeat(" ")), dtype=np.int64, count=len(bodies)) + 1


def _vertices(bodies: list[str], path: str) -> tuple[np.ndarray, dict[str, np.ndarray], list[str]]:
    """Positions (and ``v x y z r g b`` colours) from the ``v`` lines' values."""
    if len(bodies) == 0:
        return np.zeros((0, 3)), {}, []
    width = _widths(bodies)
    if not (width == width[0]).all() or width[0] not in (3, 4, 6, 7):
        bad = int(np.argmax(width != width[0])) if not (width == width[0]).all() else 0
        raise gp.input_error(path, f"vertex {bad + 1} has {width[bad]} values (3, 4 or 6 expected, the same for all)")
    try:
        values = np.array(" ".join(bodies).split(), dtype=np.float64).reshape(len(bodies), int(width[0]))
    except ValueError as exc:
        raise gp.input_error(path, f"a vertex has a value that is not a number ({exc})") from exc
    if width[0] in (3, 4):
        dropped = ["v.w"] if width[0] == 4 else []
        return values[:, :3], {}, dropped
    colour = values[:, 3:6] if width[0] == 6 else values[:, 4:7]
    dropped = ["v.w"] if width[0] == 7 else []
    return values[:, :3], {c: colour[:, i] for i, c in enumerate(("red", "green", "blue"))}, dropped


def write(path: str, data: Any, **options: Any) -> None:
    """Write a mesh as OBJ ``v`` and ``f`` lines (no options)."""
    gp.no_options(path, "OBJ write", options)
    geometry = gp.mesh_parts(data, path, "OBJ")
    gp.warn_unstored(path, "OBJ", [*geometry.attributes, *geometry.edge_attributes])
    buffer = io.StringIO()
    np.savetxt(buffer, np.asarray(geometry.positions, dtype=np.float64), fmt="v %.17g %.17g %.17g")
    faces = np.asarray(geometry.faces, dtype=np.int64) + 1
    np.savetxt(buffer, faces, fmt="f" + " %d" * faces.shape[1])
    with gp.os_errors(path, "written"), open(path, "w", encoding="utf-8") as f:
        f.write(buffer.getvalue())


FORMAT = FileFormat(
    name="obj",
    extensions=(".obj",),
    kinds=("mesh",),
    read=read,
    write=write,
    description="Wavefront OBJ mesh (v and f lines; polygons, negative indices)",
)
