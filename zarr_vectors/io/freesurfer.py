"""FreeSurfer surfaces, through ``nibabel.freesurfer.read_geometry`` / ``write_geometry``.

FreeSurfer names surfaces by what they are rather than by a fixed extension
(``lh.white``, ``rh.pial``); the names recognised are ``.white .pial .inflated .sphere
.orig .smoothwm`` -- another surface file is read by naming the format explicitly.

Read: vertex coordinates (float32 in the file, tkregister RAS: no transform applied) and
triangles.  The file's volume geometry (``volume_info``) describes the scanner space; it
is no column, so it is not kept -- pass it back with ``write(..., volume_info=...)``.

Write: triangles (polygons fanned); ``create_stamp`` the header comment line and
``volume_info`` a dict as :func:`nibabel.freesurfer.read_geometry` returns it (both
optional).  Vertex and face attributes are named in a warning (the format holds none).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from zarr_vectors.io import geometry_parts as gp
from zarr_vectors.io.types import FileFormat, Geometry

EXTENSIONS = (".white", ".pial", ".inflated", ".sphere", ".orig", ".smoothwm")


def read(path: str, **options: Any) -> Geometry:
    """Read a FreeSurfer surface (no options)."""
    from nibabel.freesurfer import read_geometry

    gp.no_options(path, "FreeSurfer read", options)
    with gp.parsing(path, "FreeSurfer surface", (ValueError, IndexError, EOFError)), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # nibabel warns about absent volume info: no problem here
        coords, faces = read_geometry(path)
    return gp.mesh_geometry(path, np.asarray(coords), faces)


def write(
    path: str,
    data: Any,
    *,
    create_stamp: str | None = None,
    volume_info: Mapping[str, Any] | None = None,
    **options: Any,
) -> None:
    """Write a mesh as a FreeSurfer triangle surface."""
    from nibabel.freesurfer import write_geometry

    gp.no_options(path, "FreeSurfer write", options)
    geometry = gp.mesh_parts(data, path, "a FreeSurfer surface")
    gp.warn_unstored(path, "a FreeSurfer surface", [*geometry.attributes, *geometry.edge_attributes])
    with gp.os_errors(path, "written"):
        write_geometry(
            path,
            np.asarray(geometry.positions, np.float64),
            gp.fan_triangles(geometry.faces).astype(np.int32),
            create_stamp=create_stamp,
            volume_info=dict(volume_info) if volume_info else None,
        )


FORMAT = FileFormat(
    name="freesurfer",
    extensions=EXTENSIONS,
    kinds=("mesh",),
    read=read,
    write=write,
    description="FreeSurfer surface (nibabel): lh.white, rh.pial, ... (.white .pial .inflated .sphere .orig .smoothwm)",
)
