"""What the mesh, skeleton and streamline format modules share.

Errors that name the file; faces checked against the vertex count; polygons of mixed
sizes; the arrays a writer takes out of a :class:`~zarr_vectors.io.types.Geometry` (or
a store's :class:`~zarr_vectors.read.VectorData`), and the warning naming what a file
format cannot hold.  Pure numpy: the format libraries are imported by their modules.
"""

from __future__ import annotations

import codecs
import os
import warnings
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Any

import numpy as np

from zarr_vectors.errors import InputError, MetadataError
from zarr_vectors.format.headers import check_headers, xml_problem
from zarr_vectors.io.columns import TEXT_ENCODING
from zarr_vectors.io.registry import build_kind
from zarr_vectors.io.types import Geometry, as_geometry
from zarr_vectors.store.backend import local_path


def input_error(path: str, problem: str) -> InputError:
    return InputError(f"{path}: {problem}")


def refuse_non_xml(path: str, what: str, columns: Mapping[str, Any]) -> None:
    """A name or text value XML 1.0 cannot hold is refused, naming it (GraphML, GIfTI): the XML
    writers write it anyway (a control character as it is, a lone surrogate as a character
    reference), a file no XML parser reads back.  ``columns``: name -> values (an array, or
    one string)."""
    for name, values in columns.items():
        found = xml_problem(name)
        if found:
            raise input_error(path, f"{what} {name!r}: its name holds {found!r}, which XML 1.0 cannot "
                                    "hold; rename it to write this file")
        if isinstance(values, str):
            values = [values]
        elif np.asarray(values).dtype.kind not in "UO":  # numbers are written as digits
            continue
        text = np.asarray(values, dtype=object).ravel().tolist()
        row = next((i for i, v in enumerate(text) if isinstance(v, str) and xml_problem(v)), None)
        if row is not None:
            raise input_error(path, f"{what} {name!r}: its value {text[row]!r} (row {row}) holds a character "
                                    "XML 1.0 cannot hold")


def no_options(path: str, what: str, options: Mapping[str, Any]) -> None:
    """Refuse an option the format does not know (a misspelt one would otherwise be ignored)."""
    if options:
        raise input_error(path, f"unknown {what} option {min(options)!r}")


@contextmanager
def os_errors(path: str, doing: str = "read") -> Iterator[None]:
    """An operating-system failure on ``path`` as an InputError naming it."""
    try:
        yield
    except OSError as exc:
        raise input_error(path, f"cannot be {doing} ({exc.strerror or exc})") from exc


class FilesWritten:
    """The files one write puts side by side (a table and its companions), written through
    :meth:`file`: when one fails, the files this write wrote are removed (a file it wrote over
    too: its old content was gone once the write began), so a failed export leaves none of
    itself behind (a folder at a companion's path left the vertex table).  A file the write
    never reached is not touched.  Local files only (a path, ``~``, ``file://``)."""

    def __init__(self) -> None:
        self.written: list[str] = []

    @contextmanager
    def file(self, path: str) -> Iterator[None]:
        """Write ``path`` inside; an OS failure is an InputError naming it (:func:`os_errors`)."""
        local = local_path(path)
        new = local is not None and not os.path.lexists(local)
        try:
            with os_errors(path, "written"):
                yield
        except BaseException:
            if local is not None and new and os.path.isfile(local) and not os.path.islink(local):
                self.written.append(local)  # a part of it: removed with the others
            for done in self.written:
                with suppress(OSError):
                    os.remove(done)
            raise
        if local is not None:
            self.written.append(local)


@contextmanager
def parsing(path: str, what: str, errors: tuple[type[BaseException], ...]) -> Iterator[None]:
    """A format library reading ``path``: its parse ``errors`` as "not a readable <what>",
    an OS failure as "cannot be read", both InputErrors naming the file; so is a MemoryError
    (the libraries allocate what a header or record count says before reading it: a TRK
    streamline of 2**31 points in a small file)."""
    with os_errors(path):
        try:
            yield
        except (OSError, InputError):  # ours already names the file and what is wrong
            raise
        except errors as exc:
            raise input_error(path, f"not a readable {what} ({type(exc).__name__}: {exc})") from exc
        except MemoryError as exc:
            raise input_error(path, f"not a readable {what}: reading it asks for more memory than there is (a count "
                                    "in it larger than its data, or a file too large for this machine)") from exc


def read_bytes(path: str) -> bytes:
    with os_errors(path), open(path, "rb") as f:
        return f.read()


def read_text(path: str, what: str, fallback: str | None = None) -> str:
    r"""A text format's file as text with ``\n`` line ends: UTF-8 without a leading byte-order
    mark (TEXT_ENCODING), else the ``fallback`` encoding if one is given, and CR LF or lone CR
    (classic Mac) line ends as ``\n``, which the parsers split lines on -- a lone CR otherwise
    made one line of the file, and a comment on it took every line after."""
    raw = read_bytes(path)
    try:
        text = raw.decode(TEXT_ENCODING)
    except UnicodeDecodeError as exc:
        if fallback is None:
            raise input_error(path, f"not a text {what} file ({exc.reason} at byte {exc.start})") from exc
        text = raw.removeprefix(codecs.BOM_UTF8).decode(fallback)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def checked_faces(faces: np.ndarray, n_vertices: int, path: str) -> np.ndarray:
    """Faces as int64, every index in ``[0, n_vertices)``; else the first bad face is named."""
    faces = np.asarray(faces, dtype=np.int64)
    bad = (faces < 0) | (faces >= n_vertices)
    if bad.any():
        face, corner = np.argwhere(bad)[0]
        raise input_error(
            path, f"face {face} refers to vertex {faces[face, corner]}, but the file has {n_vertices} vertices"
        )
    return faces


def polygon_faces(flat: np.ndarray, counts: np.ndarray, path: str) -> tuple[np.ndarray, np.ndarray]:
    """Faces from concatenated polygon corners: one (m, L) array when every polygon has L
    corners, else every polygon fanned into triangles (corner 0, k, k+1).

    Returns the faces and, per face, the polygon it came from (a face attribute
    ``polygon`` when fanned, so each triangle maps back to its input polygon).
    """
    counts = np.asarray(counts, dtype=np.int64)
    if len(counts) and counts.min() < 3:
        raise input_error(path, f"face {int(np.argmax(counts < 3))} has {int(counts.min())} vertices (at least 3)")
    if len(counts) == 0:
        return np.zeros((0, 3), np.int64), np.zeros(0, np.int64)
    if (counts == counts[0]).all():
        return flat.reshape(len(counts), int(counts[0])), np.arange(len(counts))
    starts = np.r_[0, np.cumsum(counts)[:-1]]
    polygon = np.repeat(np.arange(len(counts)), counts - 2)
    k = np.arange(len(polygon)) - np.repeat(np.cumsum(counts - 2) - (counts - 2), counts - 2)  # triangle within polygon
    first = starts[polygon]
    return np.stack([flat[first], flat[first + k + 1], flat[first + k + 2]], axis=1), polygon


def fan_triangles(faces: np.ndarray) -> np.ndarray:
    """(m, L) polygons as (m * (L - 2), 3) triangles, for formats that hold triangles only."""
    faces = np.asarray(faces, dtype=np.int64)
    if faces.shape[1] == 3:
        return faces
    k = np.arange(1, faces.shape[1] - 1)
    return np.stack([np.repeat(faces[:, 0], len(k)), faces[:, k].ravel(), faces[:, k + 1].ravel()], axis=1)


def kept_header(path: str, name: str, header: dict[str, Any], what: str, after: str = ""
                ) -> dict[str, dict[str, Any]]:
    """``{name: header}`` for a Geometry's ``headers`` when a store can keep it (as a reader of the
    store will check it); else none, with a warning naming its ``what`` and the problem -- the
    file still reads: a header is not its geometry."""
    try:
        check_headers({name: header})
    except MetadataError as exc:
        warnings.warn(f"{path}: its {what} is not kept ({exc.reason}){after}", UserWarning, stacklevel=3)
        return {}
    return {name: header}


def refuse_clashes(path: str, what: str, names: Iterable[str], taken: Iterable[str]) -> None:
    """An attribute named like a field the format writes itself (a position, the faces, an id) is
    refused, never written over it or under it: which of the two a reader would see depends on
    the writer's order (exports never replace data silently)."""
    clash = sorted(set(names) & set(taken))
    if clash:
        raise InputError(f"{path}: {what} {', '.join(map(repr, clash))} would replace the field(s) this format "
                         "writes under that name; rename the attribute(s) to write this file")


def warn_unstored(path: str, what: str, names: Iterable[str]) -> None:
    """Name the columns a file format cannot hold (exports never drop data silently)."""
    names = sorted(names)
    if names:
        warnings.warn(f"{path}: {what} cannot hold {', '.join(names)}; not written", UserWarning, stacklevel=3)


def mesh_geometry(
    path: str,
    positions: np.ndarray,
    faces: np.ndarray | None,
    *,
    attributes: Mapping[str, np.ndarray] | None = None,
    face_attributes: Mapping[str, np.ndarray] | None = None,
    dropped: Iterable[str] = (),
) -> Geometry:
    """A mesh Geometry (faces checked against the vertices), or points when there are no faces."""
    positions = np.asarray(positions)
    has_faces = faces is not None and len(faces) > 0
    return Geometry(
        kind="mesh" if has_faces else "points",
        positions=positions,
        attributes=dict(attributes or {}),
        faces=checked_faces(faces, len(positions), path) if has_faces else None,
        edge_attributes=dict(face_attributes or {}) if has_faces else {},
        axes=("x", "y", "z"),
        dropped=tuple(dropped),
    )


def positions_3d(geometry: Geometry, path: str) -> np.ndarray:
    pos = np.asarray(geometry.positions)
    if pos.ndim != 2 or pos.shape[1] != 3:
        raise input_error(path, f"the format holds 3-D positions; the data has shape {pos.shape}")
    return pos


def mesh_parts(data: Any, path: str, what: str, *, points: bool = False) -> Geometry:
    """The Geometry of data to write as a mesh (``points``: the format also holds a bare point cloud).

    Object ids and object attributes, which no mesh format holds, are named in a warning.
    """
    geometry = as_geometry(data)
    positions_3d(geometry, path)
    if geometry.faces is None and not (points and build_kind(geometry.kind) == "points"):  # a store's: point_cloud
        raise input_error(path, f"{what} holds meshes; the data is a {geometry.kind} without faces")
    unstored = list(geometry.object_attributes)
    ids = None if geometry.object_ids is None else np.asarray(geometry.object_ids)
    if ids is not None and ids.size and bool((ids != ids[0]).any()):  # several objects
        unstored.append("object_ids")
    warn_unstored(path, what, unstored)
    return geometry


def polylines(data: Any, path: str, what: str) -> tuple[Geometry, dict[str, np.ndarray]]:
    """The Geometry of data to write as streamlines, with its object attributes one row per
    polyline (a store lists objects by id, and its polylines come in id order)."""
    geometry = as_geometry(data)
    positions_3d(geometry, path)
    if geometry.offsets is None:
        raise input_error(path, f"{what} holds streamlines; the data is a {geometry.kind} without offsets")
    n_lines = len(geometry.offsets) - 1
    attrs = geometry.object_attributes
    if attrs and geometry.objects is not None and len(geometry.objects) != n_lines:
        present = np.isin(geometry.objects, geometry.object_ids) if geometry.object_ids is not None else None
        if present is None or int(present.sum()) != n_lines:
            raise input_error(path, f"{len(geometry.objects)} object rows for {n_lines} polylines")
        order = np.argsort(geometry.objects[present], kind="stable")
        attrs = {k: np.asarray(v)[present][order] for k, v in attrs.items()}
    elif attrs and geometry.objects is not None:
        order = np.argsort(geometry.objects, kind="stable")
        attrs = {k: np.asarray(v)[order] for k, v in attrs.items()}
    return geometry, dict(attrs)


def streamline_geometry(
    path: str,
    positions: np.ndarray,
    offsets: np.ndarray,
    *,
    attributes: Mapping[str, np.ndarray] | None = None,
    object_attributes: Mapping[str, np.ndarray] | None = None,
    dropped: Iterable[str] = (),
) -> Geometry:
    """A streamline Geometry: polyline p is ``positions[offsets[p]:offsets[p+1]]``, object id p."""
    offsets = np.asarray(offsets, dtype=np.int64)
    m = len(offsets) - 1
    return Geometry(
        kind="streamline",
        positions=positions,
        object_ids=np.repeat(np.arange(m, dtype=np.int64), np.diff(offsets)),
        attributes=dict(attributes or {}),
        objects=np.arange(m, dtype=np.int64),
        object_attributes=dict(object_attributes or {}),
        offsets=offsets,
        axes=("x", "y", "z"),
        dropped=tuple(dropped),
        numbered_objects=True,
    )


def per_row(values: np.ndarray) -> np.ndarray:
    """An (n, 1) column as (n,): one-component data read from a file is stored as a plain attribute."""
    values = np.asarray(values)
    return values[:, 0] if values.ndim == 2 and values.shape[1] == 1 else values


def as_columns(values: np.ndarray) -> np.ndarray:
    """(n,) as (n, 1): the streamline libraries keep per-point data as 2-D arrays."""
    values = np.asarray(values)
    return values[:, None] if values.ndim == 1 else values.reshape(len(values), -1)
