"""FreeSurfer surfaces, through ``nibabel.freesurfer.read_geometry`` / ``write_geometry``.

FreeSurfer names surfaces by what they are rather than by a fixed extension
(``lh.white``, ``rh.pial``); the names recognised are ``.white .pial .inflated .sphere
.orig .smoothwm`` -- another surface file is read by naming the format explicitly.

Read: vertex coordinates (float32 in the file, tkregister RAS: no transform applied) and
triangles.  The file's volume geometry (``volume_info``: where tkregister RAS sits in the
scanner's space) is kept as ``Geometry.headers["freesurfer"]`` (a store's
``headers/freesurfer``).

Write: triangles (polygons fanned); ``create_stamp`` the header comment line and
``volume_info`` a dict as :func:`nibabel.freesurfer.read_geometry` returns it, else the
one the data's headers keep (both optional).  Vertex and face attributes are named in a
warning (the format holds none).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from zarr_vectors.errors import MetadataError
from zarr_vectors.format.headers import FREESURFER, freesurfer_header, stored_volume_info
from zarr_vectors.io import geometry_parts as gp
from zarr_vectors.io.types import FileFormat, Geometry

EXTENSIONS = (".white", ".pial", ".inflated", ".sphere", ".orig", ".smoothwm")


def read(path: str, **options: Any) -> Geometry:
    """Read a FreeSurfer surface (no options)."""
    from nibabel.freesurfer import read_geometry

    gp.no_options(path, "FreeSurfer read", options)
    damaged = None
    with gp.parsing(path, "FreeSurfer surface", (ValueError, IndexError, EOFError)), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # nibabel warns about absent volume info: no problem here
        try:
            coords, faces, volume_info = read_geometry(path, read_metadata=True)
        except (OSError, ValueError, OverflowError) as exc:  # a damaged volume-info footer ("Error parsing
            coords, faces = read_geometry(path)  # volume info", a number or text it cannot parse): the
            damaged, volume_info = exc, {}  # surface before it may be whole, read as it was before
    geometry = gp.mesh_geometry(path, np.asarray(coords), faces)
    if damaged is not None:
        warnings.warn(f"{path}: its volume geometry cannot be read ({damaged}) and is not kept", UserWarning,
                      stacklevel=2)
    if volume_info:
        geometry.headers = gp.kept_header(path, FREESURFER, freesurfer_header(volume_info), "volume geometry")
    return geometry


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
    if volume_info is None and geometry.headers:
        try:
            volume_info = stored_volume_info(geometry.headers)
        except MetadataError as exc:
            raise gp.input_error(path, f"the data's volume geometry cannot be written: {exc}") from None
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
    headers=(FREESURFER,),
)
