"""MRtrix streamlines (``.tck``), through ``nibabel.streamlines``.

TCK stores positions only, in RAS+ millimetres (float32 by nibabel), one streamline per
object in file order; there is no voxel space to choose and no per-point or
per-streamline data (MRtrix keeps those in separate ``.tsf`` files), so on write every
attribute and object attribute is named in a warning.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

from zarr_vectors.io import geometry_parts as gp
from zarr_vectors.io import tractograms
from zarr_vectors.io.types import FileFormat, Geometry


def read(path: str, **options: Any) -> Geometry:
    """Read a TCK file (no options)."""
    gp.no_options(path, "TCK read", options)
    tck = tractograms.load(path, "TCK")
    geometry = tractograms.geometry(path, tck.tractogram)
    declared = str(tck.header.get("count", "")).strip()
    held = len(geometry.offsets) - 1
    # nibabel skips empty streamlines and reads past the count; ASCII digits only ('²' is a digit too)
    if re.fullmatch(r"[0-9]{1,18}", declared) and int(declared) != held:
        warnings.warn(f"{path}: its header says count: {int(declared)}, the file holds {held} streamlines: a stale "
                      "count, or empty streamlines, which are skipped (the streamlines after one are numbered lower)",
                      UserWarning, stacklevel=2)
    return geometry


def write(path: str, data: Any, **options: Any) -> None:
    """Write streamlines as TCK, in RAS+ mm (TrackVis voxel mm taken there when the data's TRK
    header says so; no options)."""
    from nibabel.streamlines.tck import TckFile

    gp.no_options(path, "TCK write", options)
    geometry, object_attributes = gp.polylines(data, path, "TCK")
    gp.warn_unstored(path, "TCK", [*geometry.attributes, *object_attributes])
    positions, _ = tractograms.rasmm_positions(path, geometry)
    with gp.os_errors(path, "written"):
        TckFile(tractograms.tractogram(positions, geometry.offsets, {}, {})).save(path)


FORMAT = FileFormat(
    name="tck",
    extensions=(".tck",),
    kinds=("streamline",),
    read=read,
    write=write,
    description="MRtrix streamlines (nibabel): positions only",
    headers=("trk", "trx"),
)
