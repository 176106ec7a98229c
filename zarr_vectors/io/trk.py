"""TrackVis streamlines (``.trk``), through ``nibabel.streamlines``.

Read: one streamline per object (file order), ``data_per_point`` ("scalars") as vertex
attributes and ``data_per_streamline`` ("properties") as object attributes.  Positions
are in RAS+ millimetres (``space="rasmm"``, nibabel's convention: the header's
``voxel_to_rasmm`` applied), or with ``space="voxmm"`` as TrackVis stores them (voxel
coordinates times voxel size, origin at the corner of the first voxel).

Write: positions taken as RAS+ mm; the header's space is that of ``reference`` (a
NIfTI image or TRK file, by path or as a nibabel object), else ``affine`` (4x4
voxel-to-RAS+mm), ``dimensions`` and ``voxel_sizes``; by default the identity affine
with 1 mm voxels over the data's extent.  TRK stores float32 (positions and every
attribute, at most 10 scalar and 10 property names of up to 20 characters; nibabel
refuses more, which is reported as an InputError).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from zarr_vectors.io import geometry_parts as gp
from zarr_vectors.io import tractograms
from zarr_vectors.io.types import FileFormat, Geometry

SPACES = ("rasmm", "voxmm")


def read(path: str, *, space: str = "rasmm", **options: Any) -> Geometry:
    """Read a TRK file; ``space`` ``"rasmm"`` (default) or ``"voxmm"`` (as stored)."""
    from nibabel.affines import apply_affine
    from nibabel.streamlines.trk import get_affine_trackvis_to_rasmm

    gp.no_options(path, "TRK read", options)
    if space not in SPACES:
        raise gp.input_error(path, f"space must be one of {', '.join(SPACES)}, found {space!r}")
    trk = tractograms.load(path, "TRK")
    _check_names(path, trk.header)
    geometry = tractograms.geometry(path, trk.tractogram)
    _check_count(path, trk.header, geometry.offsets)
    if space == "voxmm":
        to_voxmm = np.linalg.inv(get_affine_trackvis_to_rasmm(trk.header))
        geometry.positions = apply_affine(to_voxmm, geometry.positions).astype(np.float32)
    return geometry


def _check_count(path: str, header: Any, offsets: np.ndarray) -> None:
    """The streamlines read are the file's: nibabel reads as many as the header counts and stops,
    so a count below the body's dropped the rest without a word (and one above it was silent
    too).  The records read must end where the file does: each is its point count, its points
    with their scalars, then its properties, all 4 bytes a value."""
    import os
    import struct

    from nibabel.streamlines.trk import Field

    with open(path, "rb") as f:  # nibabel's header holds the count it read, not the file's
        raw = f.read(1000)
    order = "<" if struct.unpack_from("<i", raw, 996)[0] == 1000 else ">"  # hdr_size tells the byte order
    count, lines = struct.unpack_from(f"{order}i", raw, 988)[0], len(offsets) - 1
    per_point, per_line = 3 + int(header[Field.NB_SCALARS_PER_POINT]), int(header[Field.NB_PROPERTIES_PER_STREAMLINE])
    end = int(header["hdr_size"]) + 4 * (lines * (1 + per_line) + per_point * int(offsets[-1]))
    after = os.path.getsize(path) - end
    # nibabel drops a streamline of no points: its record is a count of 0 and its properties
    empty, rest = divmod(after, 4 * (1 + per_line)) if after > 0 else (0, after)
    if rest == 0 and empty and count in (0, lines + empty):
        warnings.warn(f"{path}: {empty} streamline(s) of no points skipped (nibabel reads none of them)",
                      UserWarning, stacklevel=3)
    elif count > 0 and count != lines:
        raise gp.input_error(path, f"the header counts {count} streamlines, the file holds {lines}")
    elif after:
        raise gp.input_error(path, f"{after} bytes follow its {lines} streamlines (the header counts {count}): "
                                   "the count is wrong or the file is damaged")


def _check_names(path: str, header: Any) -> None:
    """Each scalar and property name at most once, and no more values named than the header
    counts: nibabel maps a name to its columns in a dict, so a name given twice kept only its
    last columns, a name ``scalars`` / ``properties`` lost its columns to the unnamed ones,
    which nibabel files under it, and a name past the count got no columns."""
    from nibabel.streamlines.trk import Field, decode_value_from_name

    for kind, names, total, unnamed in (
        ("scalar", header["scalar_name"], header[Field.NB_SCALARS_PER_POINT], "scalars"),
        ("property", header["property_name"], header[Field.NB_PROPERTIES_PER_STREAMLINE], "properties"),
    ):
        if total <= 0:  # nibabel reads no names then
            continue
        counts = [decode_value_from_name(name) for name in names]
        named, values = [name for name, count in counts if count > 0], sum(count for _, count in counts)
        if values > total:
            raise gp.input_error(path, f"the {kind} names declare {values} values, the header's count is {total}")
        if values < total:
            named.append(unnamed)
        twice = sorted({name for name in named if named.count(name) > 1})
        if twice:
            raise gp.input_error(path, f"{kind} name {twice[0]!r} is given twice; TRK names each {kind} once")


def write(
    path: str,
    data: Any,
    *,
    reference: Any = None,
    affine: Any = None,
    dimensions: Any = None,
    voxel_sizes: Any = None,
    **options: Any,
) -> None:
    """Write streamlines (RAS+ mm) as TRK in the space of ``reference`` or ``affine`` (default identity)."""
    from nibabel.orientations import aff2axcodes
    from nibabel.streamlines.trk import Field, TrkFile

    gp.no_options(path, "TRK write", options)
    geometry, object_attributes = gp.polylines(data, path, "TRK")
    positions = np.asarray(geometry.positions)
    aff, dims, sizes = tractograms.space(positions, reference, affine, dimensions, voxel_sizes)
    hdr = {
        Field.VOXEL_TO_RASMM: aff.astype(np.float32),
        Field.DIMENSIONS: dims.astype(np.int16),
        Field.VOXEL_SIZES: sizes.astype(np.float32),
        Field.VOXEL_ORDER: "".join(aff2axcodes(aff)),
    }
    tractogram = tractograms.tractogram(positions, geometry.offsets, geometry.attributes, object_attributes)
    with gp.os_errors(path, "written"):
        try:
            TrkFile(tractogram, header=hdr).save(path)
        except ValueError as exc:
            raise gp.input_error(path, f"TRK cannot hold this data ({exc})") from exc


FORMAT = FileFormat(
    name="trk",
    extensions=(".trk",),
    kinds=("streamline",),
    read=read,
    write=write,
    description="TrackVis streamlines (nibabel): scalars as attributes, properties as object attributes",
)
