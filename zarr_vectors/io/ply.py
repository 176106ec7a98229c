"""PLY meshes and point clouds (``.ply``), through plyfile.

Read: the ``vertex`` element's ``x y z`` are the positions and every other scalar vertex
property an attribute of its own name (``nx``, ``red``, ...); the ``face`` element's
``vertex_indices`` (or ``vertex_index``) list the faces -- polygons of one size as they
are, mixed sizes fanned into triangles with a face attribute ``polygon`` naming the
input face; a list of floats is refused -- and its other scalar properties are face
attributes.  A file without faces is a point cloud (kind ``points``).  List properties
other than the faces and elements other than vertex and face are named in
``Geometry.dropped``.

Write: binary little-endian (``text=True`` for ASCII); attributes with several
components become properties ``name_0``, ``name_1``, ...; 64-bit integers are written as
32-bit when their values fit, else named in a warning like every column PLY cannot hold.
A property name that clashes (``x``, ``vertex_indices``, another attribute's ``n_0``) or that
PLY cannot spell (a space, non-ASCII) is refused.
"""

from __future__ import annotations

import os
import re
from typing import Any

import numpy as np

from zarr_vectors.io import geometry_parts as gp
from zarr_vectors.io.types import FileFormat, Geometry

_FACE_LISTS = ("vertex_indices", "vertex_index")
_PLY_KINDS = "iuf"
_NARROW = {np.dtype("int64"): np.dtype("int32"), np.dtype("uint64"): np.dtype("uint32")}


def read(path: str, **options: Any) -> Geometry:
    """Read a PLY file: a mesh when it has faces, else a point cloud (no options)."""
    import plyfile

    gp.no_options(path, "PLY read", options)
    with gp.parsing(path, "PLY file", _parse_errors()):
        ply = _load(path)
    names = [el.name for el in ply.elements]
    if "vertex" not in names:
        raise gp.input_error(path, "has no 'vertex' element")
    dropped = [name for name in names if name not in ("vertex", "face")]
    vertex = ply["vertex"]
    vertex_scalars, dropped_v = _scalars(vertex)
    dropped += dropped_v
    missing = [a for a in "xyz" if a not in vertex_scalars]
    if missing:
        raise gp.input_error(path, f"the vertex element has no {', '.join(missing)} property")
    positions = np.stack([vertex_scalars.pop(a) for a in "xyz"], axis=1)
    faces = None
    face_attributes: dict[str, np.ndarray] = {}
    if "face" in names:
        face = ply["face"]
        face_scalars, dropped_f = _scalars(face)
        lists = [p.name for p in face.properties if isinstance(p, plyfile.PlyListProperty)]
        corner_list = next((n for n in _FACE_LISTS if n in lists), None)
        if corner_list is None and len(face.data):
            raise gp.input_error(path, "the face element has no vertex_indices list")
        dropped += [f for f in dropped_f if f != f"face.{corner_list}"]
        if corner_list is not None and len(face.data):
            index_type = np.dtype(face.ply_property(corner_list).val_dtype)
            if index_type.kind not in "iu":  # as in GIfTI and TRX: a float index was truncated (2.9 became 2)
                raise gp.input_error(path, f"the face list {corner_list} holds {index_type}, not integers")
            corners = face.data[corner_list]
            if corners.dtype == object:  # one array per face: lengths may differ
                counts = np.fromiter(map(len, corners), dtype=np.int64, count=len(corners))
                corners = np.concatenate(corners)
            else:  # mapped as triangles, every stored length checked 3 by plyfile
                counts = np.full(len(corners), corners.shape[1], dtype=np.int64)
            faces, polygon = gp.polygon_faces(corners.reshape(-1).astype(np.int64), counts, path)
            face_attributes = {k: v[polygon] for k, v in face_scalars.items()}
            if len(polygon) != len(counts):
                if "polygon" in face_attributes:  # it was written over, silently
                    raise gp.input_error(path, "a face property is named 'polygon', the attribute that names each "
                                               "fanned triangle's input face")
                face_attributes["polygon"] = polygon
    return gp.mesh_geometry(
        path, positions, faces, attributes=vertex_scalars, face_attributes=face_attributes, dropped=dropped
    )


def _load(path: str) -> Any:
    """The PlyData of ``path``, a binary all-triangle file's faces memory-mapped.

    plyfile reads a list property row by row (about 1 s per 200k faces) unless told its
    length, and then maps the rows whole and checks every stored length; so a binary file
    is first read as all triangles, and read again row by row if it is not.
    """
    import plyfile

    with gp.os_errors(path), open(path, "rb") as f:
        head = f.read(_FIRST_READ)
        header = _header_lines(head)
        if header is None and len(head) == _FIRST_READ:  # a long header (comments): read on, up to the bound
            head += f.read(_HEADER_BYTES - len(head))
            header = _header_lines(head)
            if header is None and len(head) == _HEADER_BYTES:
                raise gp.input_error(path, f"no end_header line in its first {_HEADER_BYTES} bytes")
        size = os.fstat(f.fileno()).st_size
    ascii_file = header is not None and any(line.split()[:2] == [b"format", b"ascii"] for line in header[0])
    if header is not None:  # else no header at all: plyfile names what is wrong
        _check_counts(path, header, size, ascii_file)
    if not ascii_file:
        try:
            return plyfile.PlyData.read(path, known_list_len={"face": dict.fromkeys(_FACE_LISTS, 3)})
        except _parse_errors():
            pass  # not all triangles: read below row by row (a broken file fails there too)
    return plyfile.PlyData.read(path)


_FIRST_READ = 1 << 16  # a PLY header is text of a few lines: most end within this
_HEADER_BYTES = 1 << 24  # the most of a file read to find its end
_TYPE_BYTES = {"char": 1, "int8": 1, "uchar": 1, "uint8": 1, "short": 2, "int16": 2, "ushort": 2, "uint16": 2,
               "int": 4, "int32": 4, "uint": 4, "uint32": 4, "float": 4, "float32": 4, "double": 8, "float64": 8}


def _header_lines(head: bytes) -> tuple[list[bytes], int] | None:
    """The header's lines before ``end_header`` and the bytes up to its end (None: no such
    line in ``head``): the line itself, not the words anywhere (``comment end_header`` hid
    the counts from the check below)."""
    at = 0
    while (stop := head.find(b"\n", at)) >= 0:
        if head[at:stop].strip() == b"end_header":
            return head[:at].splitlines(), stop + 1
        at = stop + 1
    return None


def _check_counts(path: str, header: tuple[list[bytes], int], size: int, ascii_file: bool) -> None:
    """Refuse element counts the file's bytes cannot hold, before plyfile allocates them: a
    190-byte ASCII file declaring 4e9 vertices asked numpy for 44.7 GiB.  The least a row
    takes: each property's bytes in a binary file (a list its count), two characters (a digit
    and a separator) a property in an ASCII one."""
    lines, header_bytes = header
    body = size - header_bytes
    need, rows = 0, None
    for words in (line.decode("ascii", "replace").split() for line in lines):
        if len(words) == 3 and words[0] == "element" and re.fullmatch(r"[0-9]{1,18}", words[2]):
            rows = (words[1], int(words[2]))
        elif len(words) >= 3 and words[0] == "property" and rows is not None:
            kind = words[2] if words[1] == "list" else words[1]
            need += rows[1] * (2 if ascii_file else _TYPE_BYTES.get(kind, 1))
            if need > body:
                raise gp.input_error(path, f"declares {rows[1]} rows of element {rows[0]!r}, more than the "
                                           f"{max(body, 0)} bytes after its header can hold")


def _parse_errors() -> tuple[type[BaseException], ...]:
    import plyfile

    return (plyfile.PlyParseError, ValueError, EOFError, IndexError)


def _scalars(element: Any) -> tuple[dict[str, np.ndarray], list[str]]:
    """An element's scalar properties by name, and the names (``element.property``) of its lists."""
    import plyfile

    scalars, lists = {}, []
    for prop in element.properties:
        if isinstance(prop, plyfile.PlyListProperty):
            lists.append(f"{element.name}.{prop.name}")
        else:
            values = element.data[prop.name]
            scalars[prop.name] = np.array(values, dtype=values.dtype.newbyteorder("="))
    return scalars, lists


def write(path: str, data: Any, *, text: bool = False, **options: Any) -> None:
    """Write a mesh (or a point cloud: kind ``points``) as PLY; ``text`` for ASCII PLY."""
    import plyfile

    gp.no_options(path, "PLY write", options)
    geometry = gp.mesh_parts(data, path, "PLY", points=True)
    unstored: list[str] = []
    positions = np.asarray(geometry.positions)
    vertex_columns = {a: positions[:, i] for i, a in enumerate("xyz")}
    vertex_columns.update(_columns(path, "vertex attribute(s)", geometry.attributes, vertex_columns, unstored))
    elements = [plyfile.PlyElement.describe(_table(vertex_columns), "vertex")]
    if geometry.faces is not None:
        faces = np.asarray(geometry.faces)
        face_columns = {"vertex_indices": faces.astype(np.int32)}
        face_columns.update(_columns(path, "face attribute(s)", geometry.edge_attributes, face_columns, unstored))
        len_type = "u1" if faces.shape[1] < 256 else "u4"
        elements.append(
            plyfile.PlyElement.describe(_table(face_columns), "face", len_types={"vertex_indices": len_type})
        )
    gp.warn_unstored(path, "PLY", unstored)
    with gp.os_errors(path, "written"):
        plyfile.PlyData(elements, text=text).write(path)


def _columns(path: str, what: str, attributes: dict[str, np.ndarray], taken: dict[str, np.ndarray],
             unstored: list[str]) -> dict[str, np.ndarray]:
    """PLY scalar properties from attributes: components split, bools as uint8, int64 narrowed if it fits.

    A property named like one ``taken`` by the element (``x``, ``vertex_indices``), or like another
    attribute's component (``n_0`` beside a 3-component ``n``), is refused, not written over it.
    """
    out: dict[str, np.ndarray] = {}
    for name, values in attributes.items():
        values = np.asarray(values)
        if values.dtype == bool:
            values = values.astype(np.uint8)
        narrow = _NARROW.get(values.dtype)
        if narrow is not None:
            info = np.iinfo(narrow)
            if values.size and (values.min() < info.min or values.max() > info.max):
                unstored.append(name)
                continue
            values = values.astype(narrow)
        if values.dtype.kind not in _PLY_KINDS:
            unstored.append(name)
            continue
        _check_name(path, name)
        if values.ndim == 1:
            columns = {name: values}
        else:
            flat = values.reshape(len(values), -1)
            columns = {f"{name}_{k}": flat[:, k] for k in range(flat.shape[1])}
        gp.refuse_clashes(path, what, columns, [*taken, *out])
        out.update(columns)
    return out


def _check_name(path: str, name: str) -> None:
    """A PLY header is words split at whitespace, in ASCII: an attribute name must be one such word
    (plyfile refuses others with a bare ValueError that names no file)."""
    if not re.fullmatch(r"[!-~]+", name):
        raise gp.input_error(path, f"attribute {name!r} cannot be a PLY property name: PLY names are printable "
                                   "ASCII without spaces; rename the attribute to write this file")


def _table(columns: dict[str, np.ndarray]) -> np.ndarray:
    """Columns as one structured array (a 2-D column becomes a fixed-length list property)."""
    n = len(next(iter(columns.values())))
    dtype = [(name, v.dtype.newbyteorder("<").str, v.shape[1:]) for name, v in columns.items()]
    table = np.empty(n, dtype=dtype)
    for name, values in columns.items():
        table[name] = values
    return table


FORMAT = FileFormat(
    name="ply",
    extensions=(".ply",),
    kinds=("mesh", "points"),
    read=read,
    write=write,
    description="PLY mesh or point cloud (plyfile): vertex and face properties as attributes",
)
