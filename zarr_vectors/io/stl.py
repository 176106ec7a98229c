"""STL triangle meshes (``.stl``), ASCII and binary, read and written with numpy.

Binary STL is an 80-byte header, a little-endian ``uint32`` triangle count and 50
bytes per triangle (normal, three corners as ``float32``, a ``uint16`` attribute);
ASCII STL is ``solid`` / ``facet normal`` / ``outer loop`` / ``vertex x y z`` x3 /
``endloop`` / ``endfacet`` / ``endsolid``.  A file whose size is what its count
declares is binary; otherwise a file starting ``solid`` and ending ``endsolid`` is read
as ASCII, and anything else is refused (a truncated binary file names the sizes, also
when its free-text header happens to start with ``solid``).

STL stores every triangle's own corners, so the reader merges corners at exactly the
same position into one vertex (in order of first appearance): faces then index shared
vertices.  The facet normals become the face attribute ``normal`` and a non-zero binary
attribute word the face attribute ``attribute``.  A facet with two corners at one
position cannot be a face of distinct vertices; such facets are left out and counted
in ``Geometry.dropped``.

Write: binary unless ``ascii=True``; normals from the ``normal`` face attribute if
present, else computed from the corners; polygons are fanned into triangles.
"""

from __future__ import annotations

import codecs
import re
import warnings
from typing import Any

import numpy as np

from zarr_vectors.io import geometry_parts as gp
from zarr_vectors.io.types import FileFormat, Geometry

RECORD = np.dtype([("normal", "<f4", (3,)), ("corners", "<f4", (3, 3)), ("attribute", "<u2")])
HEADER_BYTES = 84
_NUMBER = r"([-+0-9.eEinfINFaA]+)"
_VERTEX = re.compile(rf"vertex\s+{_NUMBER}\s+{_NUMBER}\s+{_NUMBER}".encode())
_NORMAL = re.compile(rf"facet\s+normal\s+{_NUMBER}\s+{_NUMBER}\s+{_NUMBER}".encode())


def read(path: str, **options: Any) -> Geometry:
    """Read an ASCII or binary STL file (no options)."""
    gp.no_options(path, "STL read", options)
    raw = gp.read_bytes(path)
    declared = int(np.frombuffer(raw, "<u4", 1, 80)[0]) if len(raw) >= HEADER_BYTES else -1
    # an editor's UTF-8 byte-order mark before "solid" still makes a text file
    ascii_start = raw.removeprefix(codecs.BOM_UTF8).lstrip()[:5].lower() == b"solid"
    if declared >= 0 and len(raw) == HEADER_BYTES + declared * RECORD.itemsize:
        records = np.frombuffer(raw, RECORD, declared, HEADER_BYTES)
        corners, normals = records["corners"], records["normal"]
        extra = {"attribute": records["attribute"].copy()} if records["attribute"].any() else {}
    elif ascii_start and b"endsolid" in raw[-4096:]:
        corners, normals = _ascii(raw, path)
        extra = {}
    else:
        binary = (
            f"binary STL truncated or padded: its header declares {declared} triangles "
            f"({HEADER_BYTES + declared * RECORD.itemsize} bytes), the file has {len(raw)} bytes"
            if declared >= 0
            else f"not a binary STL: {len(raw)} bytes, shorter than its header"
        )
        raise gp.input_error(path, f"not ASCII STL (no endsolid) and {binary}" if ascii_start else binary)
    positions, faces = merged_corners(np.ascontiguousarray(corners, dtype=np.float32).reshape(-1, 3))
    distinct = (faces[:, 0] != faces[:, 1]) & (faces[:, 1] != faces[:, 2]) & (faces[:, 0] != faces[:, 2])
    if not distinct.all():  # said as what it is, not as a column that cannot be stored
        skipped = int((~distinct).sum())
        warnings.warn(f"{path}: {skipped} degenerate facet{'s' if skipped > 1 else ''} (two corners at one position) "
                      "left out: a stored face joins three distinct vertices", UserWarning, stacklevel=2)
    face_attributes = {
        "normal": np.asarray(normals, np.float32)[distinct],
        **{k: v[distinct] for k, v in extra.items()},
    }
    return gp.mesh_geometry(path, positions, faces[distinct], face_attributes=face_attributes)


def merged_corners(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One vertex per distinct position, in order of first appearance, and each triangle's
    three vertices.  Positions compare by their float32 bits (a sort of three integer
    keys: about 10x faster than ``np.unique(axis=0)``), with -0.0 taken as 0.0."""
    bits = (flat + np.float32(0)).view(np.uint32)  # -0.0 + 0.0 is 0.0: one position, one vertex
    order = np.lexsort((bits[:, 2], bits[:, 1], bits[:, 0]))  # stable: a run starts at its first appearance
    sorted_bits = bits[order]
    starts = np.r_[True, (sorted_bits[1:] != sorted_bits[:-1]).any(axis=1)] if len(flat) else np.zeros(0, bool)
    run = np.cumsum(starts) - 1
    first = order[starts]  # each distinct position's first corner
    by_appearance = np.argsort(first, kind="stable")
    rank = np.empty(len(first), np.int64)
    rank[by_appearance] = np.arange(len(first))
    vertex = np.empty(len(flat), np.int64)
    vertex[order] = rank[run]
    return flat[first[by_appearance]], vertex.reshape(-1, 3)


def _ascii(raw: bytes, path: str) -> tuple[np.ndarray, np.ndarray]:
    try:
        corners = np.array(_VERTEX.findall(raw), dtype=np.float32)
        normals = np.array(_NORMAL.findall(raw), dtype=np.float32)
    except ValueError as exc:
        raise gp.input_error(path, f"an ASCII STL value is not a number ({exc})") from exc
    if len(corners) != 3 * len(normals):
        raise gp.input_error(path, f"ASCII STL has {len(normals)} facets but {len(corners)} vertices (3 per facet)")
    if raw.count(b"endfacet") != len(normals):
        raise gp.input_error(path, "ASCII STL is truncated or malformed: facet and endfacet do not pair up")
    return corners.reshape(-1, 3, 3), normals.reshape(-1, 3)


def write(path: str, data: Any, *, ascii: bool = False, **options: Any) -> None:
    """Write a mesh as STL: binary, or ASCII with ``ascii=True``."""
    gp.no_options(path, "STL write", options)
    geometry = gp.mesh_parts(data, path, "STL")
    faces = np.asarray(geometry.faces, dtype=np.int64)
    triangles = gp.fan_triangles(faces)
    gp.warn_unstored(path, "STL", [*geometry.attributes, *(set(geometry.edge_attributes) - {"normal", "attribute"})])
    corners = np.asarray(geometry.positions, dtype=np.float32)[triangles]
    normal = geometry.edge_attributes.get("normal")
    if normal is not None and faces.shape[1] == 3 and np.shape(normal) == (len(faces), 3):
        normals = np.asarray(normal, np.float32)
    else:
        cross = np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0])
        length = np.linalg.norm(cross, axis=1, keepdims=True)
        normals = np.divide(cross, length, out=np.zeros_like(cross), where=length > 0)
    with gp.os_errors(path, "written"), open(path, "wb") as f:
        if ascii:
            _write_ascii(f, corners, normals)
        else:
            records = np.zeros(len(triangles), RECORD)
            records["normal"], records["corners"] = normals, corners
            attribute = geometry.edge_attributes.get("attribute")
            if attribute is not None and faces.shape[1] == 3:
                records["attribute"] = attribute
            f.write(b"binary STL written by zarr-vectors".ljust(80, b" "))
            f.write(np.uint32(len(records)).astype("<u4").tobytes())
            f.write(records.tobytes())


def _write_ascii(f: Any, corners: np.ndarray, normals: np.ndarray) -> None:
    facet = "facet normal %.9g %.9g %.9g\n outer loop\n" + "  vertex %.9g %.9g %.9g\n" * 3 + " endloop\nendfacet"
    f.write(b"solid zarr_vectors\n")
    np.savetxt(f, np.concatenate([normals, corners.reshape(-1, 9)], axis=1), fmt=facet)
    f.write(b"endsolid zarr_vectors\n")


FORMAT = FileFormat(
    name="stl",
    extensions=(".stl",),
    kinds=("mesh",),
    read=read,
    write=write,
    description="STL triangle mesh, ASCII or binary (corners merged by exact position)",
)
