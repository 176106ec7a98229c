"""GIfTI surfaces (``.surf.gii``, ``.gii``), through nibabel.

Read: the first ``NIFTI_INTENT_POINTSET`` data array is the positions (as stored: its
coordinate-system transform is not applied) and the first ``NIFTI_INTENT_TRIANGLE``
array the faces; every other data array with one row per vertex is a vertex attribute,
named by its ``Name`` metadata (else ``<intent>_<index>``).  Arrays that fit neither
are named in ``Geometry.dropped``.  A GIfTI file without a pointset (functional data
only) is refused.

Write: float32 positions, int32 triangles (polygons fanned), and each vertex attribute
as a ``NIFTI_INTENT_NONE`` array named by its ``Name`` metadata, in a type GIfTI holds
(float32 -- floats lose precision beyond it --, int32 or uint8); face attributes and
integers beyond int32 are named in a warning.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zarr_vectors.io import geometry_parts as gp
from zarr_vectors.io.types import FileFormat, Geometry

POINTSET = "NIFTI_INTENT_POINTSET"
TRIANGLE = "NIFTI_INTENT_TRIANGLE"


def read(path: str, **options: Any) -> Geometry:
    """Read a GIfTI surface's vertices, triangles and per-vertex arrays (no options)."""
    from nibabel import gifti
    from nibabel.nifti1 import intent_codes

    gp.no_options(path, "GIfTI read", options)
    # nibabel's XML parser raises many types (ExpatError, ValueError, KeyError, ...)
    with gp.parsing(path, "GIfTI file", (Exception,)):
        image = gifti.GiftiImage.from_filename(path)
        arrays = [(intent_codes.niistring[d.intent], d) for d in image.darrays]
    point = next((i for i, (intent, _) in enumerate(arrays) if intent == POINTSET), None)
    if point is None:
        raise gp.input_error(path, "has no NIFTI_INTENT_POINTSET array: not a surface")
    positions = np.asarray(arrays[point][1].data)
    triangle = next((i for i, (intent, _) in enumerate(arrays) if intent == TRIANGLE), None)
    faces = np.asarray(arrays[triangle][1].data) if triangle is not None else None
    attributes, dropped = {}, []
    for i, (intent, darray) in enumerate(arrays):
        if i in (point, triangle):
            continue
        name = darray.meta.get("Name") or f"{intent}_{i}"
        values = np.asarray(darray.data)
        if values.ndim in (1, 2) and len(values) == len(positions) and values.dtype.kind in "biuf":
            attributes[name] = values
        else:
            dropped.append(name)
    return gp.mesh_geometry(path, positions, faces, attributes=attributes, dropped=dropped)


def write(path: str, data: Any, **options: Any) -> None:
    """Write a mesh as a GIfTI surface (no options)."""
    from nibabel import gifti

    gp.no_options(path, "GIfTI write", options)
    geometry = gp.mesh_parts(data, path, "GIfTI")
    darrays = [
        gifti.GiftiDataArray(
            np.asarray(geometry.positions, np.float32), intent=POINTSET, datatype="NIFTI_TYPE_FLOAT32"
        ),
        gifti.GiftiDataArray(
            gp.fan_triangles(geometry.faces).astype(np.int32), intent=TRIANGLE, datatype="NIFTI_TYPE_INT32"
        ),
    ]
    unstored = list(geometry.edge_attributes)
    for name, values in geometry.attributes.items():
        values = _gifti_values(np.asarray(values))
        if values is None:
            unstored.append(name)
            continue
        darrays.append(gifti.GiftiDataArray(values, intent="NIFTI_INTENT_NONE", meta=gifti.GiftiMetaData(Name=name)))
    gp.warn_unstored(path, "GIfTI", unstored)
    with gp.os_errors(path, "written"):
        gifti.GiftiImage(darrays=darrays).to_filename(path)


def _gifti_values(values: np.ndarray) -> np.ndarray | None:
    """Values in a data type GIfTI holds (uint8, int32, float32), or None for integers int32 cannot hold."""
    if values.dtype == bool or values.dtype == np.uint8:
        return values.astype(np.uint8)
    if values.dtype.kind in "iu":
        info = np.iinfo(np.int32)
        if values.size and (values.min() < info.min or values.max() > info.max):
            return None
        return values.astype(np.int32)
    return values.astype(np.float32)


FORMAT = FileFormat(
    name="gifti",
    extensions=(".surf.gii", ".gii"),
    kinds=("mesh",),
    read=read,
    write=write,
    description="GIfTI surface (nibabel): pointset, triangles and per-vertex arrays",
)
