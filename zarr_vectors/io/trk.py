"""TrackVis streamlines (``.trk``), through ``nibabel.streamlines``.

Read: one streamline per object (file order), ``data_per_point`` ("scalars") as vertex
attributes and ``data_per_streamline`` ("properties") as object attributes.  Positions
are in RAS+ millimetres (``space="rasmm"``, nibabel's convention: the header's
``voxel_to_rasmm`` applied), or with ``space="voxmm"`` as TrackVis stores them (voxel
coordinates times voxel size, origin at the corner of the first voxel).

The file's header is kept as ``Geometry.headers["trk"]`` (a store's ``headers/trk``): its
reference space -- voxel-to-RAS+ mm affine, dimensions, voxel sizes and order -- and which
space the positions were read in.

Write: positions taken as RAS+ mm (TrackVis voxel mm when the data's TRK header says so);
the header's space is that of ``reference`` (a NIfTI image or TRK file, by path or as a
nibabel object), else ``affine`` (4x4 voxel-to-RAS+mm), ``dimensions`` and
``voxel_sizes``, else the one the data's headers keep (a store built from a TRK or TRX
file); failing all, the identity affine with 1 mm voxels over the data's extent, with a
warning.  TRK stores float32 (positions and every
attribute, at most 10 scalar and 10 property names of up to 20 characters; nibabel
refuses more, which is reported as an InputError): an attribute float32 would change
beyond rounding (an integer past 2**24, a number past float32's range) is named in a
warning and not written, as PLY and GIfTI do with what they cannot hold.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from zarr_vectors.format.headers import TRK, ReferenceSpace, trk_header
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
    geometry.headers = _header(path, trk, len(geometry.offsets) - 1, space)
    return geometry


def _header(path: str, trk: Any, count: int, space: str) -> dict[str, dict[str, Any]]:
    """The file's header as a store keeps it (``headers/trk``), when its reference space is usable."""
    from nibabel.streamlines.trk import Field

    hdr = trk.header
    dims, sizes = [int(v) for v in hdr[Field.DIMENSIONS]], [float(v) for v in hdr[Field.VOXEL_SIZES]]
    reference = ReferenceSpace(
        np.asarray(hdr[Field.VOXEL_TO_RASMM], np.float64), (dims[0], dims[1], dims[2]), (sizes[0], sizes[1], sizes[2]),
        tractograms.voxel_order_of(trk),
    )
    version = hdr.get("version")
    header = trk_header(
        reference, positions=space, count=count,
        scalar_names=list(trk.tractogram.data_per_point), property_names=list(trk.tractogram.data_per_streamline),
        n_scalars=int(hdr[Field.NB_SCALARS_PER_POINT]), n_properties=int(hdr[Field.NB_PROPERTIES_PER_STREAMLINE]),
        origin=hdr.get(Field.ORIGIN), version=None if version is None else int(version),
    )  # fmt: skip
    return gp.kept_header(path, TRK, header, "reference space", tractograms.NOT_KEPT)


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
    """Write streamlines as TRK in the space given, else the one the data keeps (default identity)."""
    from nibabel.streamlines.trk import Field, TrkFile

    gp.no_options(path, "TRK write", options)
    geometry, object_attributes = gp.polylines(data, path, "TRK")
    positions, ref = tractograms.written_space(path, geometry, "TRK", np.int16, reference=reference, affine=affine,
                                               dimensions=dimensions, voxel_sizes=voxel_sizes)
    hdr = {
        Field.VOXEL_TO_RASMM: ref.affine.astype(np.float32),
        Field.DIMENSIONS: np.asarray(ref.dimensions, np.int16),
        Field.VOXEL_SIZES: np.asarray(ref.voxel_sizes, np.float32),
        Field.VOXEL_ORDER: tractograms.voxel_order(ref),
    }
    attributes, unheld = tractograms.float32_held(geometry.attributes)
    object_attributes, unheld_objects = tractograms.float32_held(object_attributes)
    gp.warn_unstored(path, "TRK, whose values are float32,", unheld + unheld_objects)  # as PLY and GIfTI do
    tractogram = tractograms.tractogram(positions, geometry.offsets, attributes, object_attributes)
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
    headers=("trk", "trx"),
    records_space=True,
)
