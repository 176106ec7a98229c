"""What the TRK and TCK modules share: nibabel tractograms to and from a Geometry.

A nibabel ``ArraySequence`` is a CSR table like the writers' ``offsets``, so both ways
are array assignments (no per-streamline loop): ``data_per_point`` becomes vertex
attributes and ``data_per_streamline`` object attributes (one object per streamline,
in file order), each one-component column stored as a plain attribute.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from zarr_vectors.errors import MetadataError
from zarr_vectors.format.headers import TRK, ReferenceSpace, StoredSpace, stored_space, trk_header
from zarr_vectors.io import geometry_parts as gp
from zarr_vectors.io.types import Geometry

#: What nibabel raises for a file it cannot parse (besides OSError).
PARSE_ERRORS: tuple[type[BaseException], ...] = (ValueError, EOFError, IndexError, KeyError)


def load(path: str, what: str) -> Any:
    """The nibabel TractogramFile of ``path``, parse failures as an InputError naming it."""
    import struct

    import nibabel.streamlines as nibs
    from nibabel.streamlines.tractogram_file import DataError, HeaderError

    # a truncated TRK body surfaces as numpy's TypeError ("buffer is too small")
    with gp.parsing(path, f"{what} file", (HeaderError, DataError, struct.error, TypeError, *PARSE_ERRORS)):
        return nibs.load(path, lazy_load=False)


def sequence_parts(seq: Any) -> tuple[np.ndarray, np.ndarray]:
    """(data, offsets with the end appended) of an ArraySequence, data in offset order."""
    lengths = np.asarray(seq._lengths, dtype=np.int64)
    offsets = np.r_[0, np.cumsum(lengths)].astype(np.int64)
    starts = np.asarray(seq._offsets, dtype=np.int64)
    data = np.asarray(seq._data)
    if len(lengths) and not np.array_equal(starts, offsets[:-1]):  # a sliced or reordered sequence
        data = seq.get_data()
    return data[: offsets[-1]], offsets


def geometry(path: str, tractogram: Any, dropped: tuple[str, ...] = ()) -> Geometry:
    """A streamline Geometry from a nibabel Tractogram."""
    positions, offsets = sequence_parts(tractogram.streamlines)
    attributes = {name: gp.per_row(sequence_parts(seq)[0]) for name, seq in tractogram.data_per_point.items()}
    objects = {name: gp.per_row(np.asarray(v)) for name, v in tractogram.data_per_streamline.items()}
    return gp.streamline_geometry(
        path, positions, offsets, attributes=attributes, object_attributes=objects, dropped=dropped
    )


def sequence(data: np.ndarray, offsets: np.ndarray) -> Any:
    """An ArraySequence over ``data`` cut at ``offsets`` (data shared, not copied)."""
    from nibabel.streamlines import ArraySequence

    seq = ArraySequence()
    seq._data = data
    seq._offsets = np.asarray(offsets[:-1], dtype=np.int64)
    seq._lengths = np.diff(offsets).astype(np.int64)
    return seq


def tractogram(
    positions: np.ndarray,
    offsets: np.ndarray,
    attributes: Mapping[str, np.ndarray],
    object_attributes: Mapping[str, np.ndarray],
) -> Any:
    """A nibabel Tractogram in RAS+ mm (identity ``affine_to_rasmm``)."""
    from nibabel.streamlines import Tractogram

    offsets = np.asarray(offsets, dtype=np.int64)
    return Tractogram(
        sequence(np.asarray(positions, np.float32), offsets),
        data_per_point={k: sequence(gp.as_columns(v).astype(np.float32), offsets) for k, v in attributes.items()},
        data_per_streamline={k: gp.as_columns(v).astype(np.float32) for k, v in object_attributes.items()},
        affine_to_rasmm=np.eye(4),
    )


def float32_held(columns: Mapping[str, np.ndarray]) -> tuple[dict[str, np.ndarray], list[str]]:
    """(the columns float32 holds, the names of those it would change) for a format storing
    float32 alone: an integer past 2**24 it cannot hold exactly (16777217 became 16777216) or a
    finite number past its range (1e40 became inf).  Floats rounding to float32 is the format."""
    held, changed = {}, []
    for name, values in columns.items():
        values = np.asarray(values)
        with np.errstate(over="ignore"):  # past float32's range: inf, refused below
            as32 = values.astype(np.float32)
        if values.dtype.kind in "iu":
            info = np.iinfo(values.dtype)
            wide = as32.astype(np.float64)
            inside = (wide >= info.min) & (wide < float(info.max) + 1)  # else no integer of the type: changed
            with np.errstate(invalid="ignore"):
                same = inside & (as32.astype(values.dtype) == values)
        elif values.dtype.kind == "f":
            same = np.isfinite(as32) | ~np.isfinite(values)
        else:
            same = np.ones(values.shape, dtype=bool)
        if same.all():
            held[name] = values
        else:
            changed.append(name)
    return held, changed


def space(
    positions: np.ndarray,
    reference: Any = None,
    affine: Any = None,
    dimensions: Any = None,
    voxel_sizes: Any = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(voxel_to_rasmm, dimensions, voxel sizes) of a streamline file's header.

    From ``reference`` (a NIfTI image or TRK file, by path or as a nibabel object), else
    ``affine`` (default identity) with ``voxel_sizes`` (default the affine's column norms)
    and ``dimensions`` (default the voxel extent of ``positions``, RAS+ mm).
    """
    from nibabel.affines import apply_affine

    if reference is not None:
        ref = load_reference(reference) if isinstance(reference, str) else reference
        if hasattr(ref, "affine") and hasattr(ref, "shape"):  # an image
            return np.asarray(ref.affine, np.float64), np.asarray(ref.shape[:3]), np.asarray(ref.header.get_zooms()[:3])
        from nibabel.streamlines.trk import Field

        hdr = ref.header
        return (
            np.asarray(hdr[Field.VOXEL_TO_RASMM]),
            np.asarray(hdr[Field.DIMENSIONS]),
            np.asarray(hdr[Field.VOXEL_SIZES]),
        )
    aff = np.eye(4) if affine is None else np.asarray(affine, np.float64)
    sizes = np.sqrt((aff[:3, :3] ** 2).sum(axis=0)) if voxel_sizes is None else np.asarray(voxel_sizes, np.float64)
    if dimensions is None:
        vox = apply_affine(np.linalg.inv(aff), positions) if len(positions) else np.zeros((1, 3))
        dimensions = np.maximum(np.ceil(vox.max(axis=0)) + 1, 1)
    return aff, np.asarray(dimensions).astype(np.int64), sizes


#: what a file whose reference space a store cannot keep is told (its streamlines read all the same)
NOT_KEPT = "; an export to a streamline file will need one given"


def written_space(
    path: str,
    geometry: Geometry,
    what: str,
    dimension_type: type[np.integer],
    *,
    reference: Any = None,
    affine: Any = None,
    dimensions: Any = None,
    voxel_sizes: Any = None,
) -> tuple[np.ndarray, ReferenceSpace]:
    """(positions in RAS+ mm, the reference space of the ``what`` header) of streamlines to write.

    The space given (``reference``, or ``affine`` / ``dimensions`` / ``voxel_sizes``) wins; else
    the one the data's ``headers`` keep (a store's, or a file's as read); else the identity with
    1 mm voxels over the data's extent, with a warning.  Positions a TRK header says are TrackVis
    voxel mm (``space: voxmm``) are taken to RAS+ mm through that header first.  Grid dimensions
    past what the header's ``dimension_type`` holds are refused (they would wrap).
    """
    positions, stored = rasmm_positions(path, geometry)
    none_given = all(v is None for v in (reference, affine, dimensions, voxel_sizes))
    if none_given and stored is not None:
        space = stored.space
    else:
        if none_given:
            warnings.warn(f"{path}: the data keeps no reference space, so the {what} header gets the identity "
                          "affine with 1 mm voxels over the data's extent; give one (reference=, or zv export "
                          "--reference IMAGE)", UserWarning, stacklevel=3)
        space = given_space(path, positions, reference, affine, dimensions, voxel_sizes)
    largest = int(np.iinfo(dimension_type).max)
    if max(space.dimensions) > largest:
        raise gp.input_error(path, f"{what} holds grid dimensions up to {largest}; the reference space's are "
                                   f"{list(space.dimensions)}")
    return positions, space


def given_space(path: str, positions: np.ndarray, reference: Any = None, affine: Any = None, dimensions: Any = None,
                voxel_sizes: Any = None) -> ReferenceSpace:
    """The reference space :func:`space` gives (a TRK reference's voxel order too), checked as a
    stored header's is: a reference image of two dimensions, voxel sizes of 0 or an affine that
    maps two voxel axes one way would write a header of NaNs or one nibabel cannot orient."""
    which = "given" if any(v is not None for v in (reference, affine, dimensions, voxel_sizes)) else \
        "of the data's extent (the identity with 1 mm voxels)"
    try:
        ref = load_reference(reference) if isinstance(reference, str) else reference
        aff, dims, sizes = space(positions, ref, affine, dimensions, voxel_sizes)
        aff, dims, sizes = np.asarray(aff, np.float64), np.asarray(dims).reshape(-1), np.asarray(sizes).reshape(-1)
        if aff.shape != (4, 4) or dims.shape != (3,) or sizes.shape != (3,):
            raise ValueError(f"an affine of shape {aff.shape}, {dims.size} dimensions and {sizes.size} voxel sizes "
                             "(a reference space is 4x4, 3 and 3)")
        given = ReferenceSpace(aff, (int(dims[0]), int(dims[1]), int(dims[2])),
                               (float(sizes[0]), float(sizes[1]), float(sizes[2])), voxel_order_of(ref))
        stored_space({TRK: trk_header(given, positions="rasmm", count=0)})
    except MetadataError as exc:
        raise gp.input_error(path, f"the reference space {which} cannot be written: {exc.reason}") from None
    except (ValueError, TypeError, OverflowError) as exc:
        raise gp.input_error(path, f"the reference space {which} cannot be written: {exc}") from None
    return given


def voxel_order_of(ref: Any) -> str | None:
    """A TRK reference's own voxel order (an image has none: the affine's axes are taken)."""
    from nibabel.streamlines.trk import Field

    if ref is None or (hasattr(ref, "affine") and hasattr(ref, "shape")):
        return None
    order = ref.header[Field.VOXEL_ORDER]
    order = order.decode("latin1") if isinstance(order, bytes) else str(order)
    return order.strip("\x00 ").upper() or None


def rasmm_positions(path: str, geometry: Geometry) -> tuple[np.ndarray, StoredSpace | None]:
    """The positions in RAS+ mm, and the space the data's headers keep: positions a TRK header
    says are TrackVis voxel mm (``space: voxmm``) are taken through that header."""
    from nibabel.affines import apply_affine

    positions = np.asarray(geometry.positions)
    try:
        stored = stored_space(geometry.headers) if geometry.headers else None
    except MetadataError as exc:
        raise gp.input_error(path, f"the data's headers give no reference space: {exc}") from None
    if stored is not None and stored.positions == "voxmm":
        dtype = positions.dtype if positions.dtype.kind == "f" else np.float64
        positions = apply_affine(trackvis_to_rasmm(stored.space), positions).astype(dtype, copy=False)
        if not np.isfinite(positions).all():
            raise gp.input_error(path, "positions taken from TrackVis voxel mm to RAS+ mm through the data's TRK "
                                       "header are not finite: the header does not fit the positions")
    return positions, stored


def voxel_order(space: ReferenceSpace) -> str:
    """The space's TrackVis voxel order: its own, else the axes its affine points along."""
    from nibabel.orientations import aff2axcodes

    return space.voxel_order.upper() if space.voxel_order else "".join(aff2axcodes(space.affine))


def trackvis_to_rasmm(space: ReferenceSpace) -> np.ndarray:
    """The affine from TrackVis voxel mm (voxel corners, the header's voxel order) to RAS+ mm."""
    from nibabel.streamlines.trk import Field, get_affine_trackvis_to_rasmm

    return np.asarray(get_affine_trackvis_to_rasmm({
        Field.VOXEL_TO_RASMM: space.affine, Field.VOXEL_SIZES: np.asarray(space.voxel_sizes),
        Field.DIMENSIONS: np.asarray(space.dimensions), Field.VOXEL_ORDER: voxel_order(space).encode("latin1"),
    }), np.float64)


def load_reference(path: str) -> Any:
    """The nibabel object of a reference file: a TRK file's header (its streamlines are not read)
    or an image (its data is not read); only the header is used, so the file may move after."""
    if path.lower().endswith(".trk"):
        import struct

        import nibabel.streamlines as nibs
        from nibabel.streamlines.tractogram_file import DataError, HeaderError

        with gp.parsing(path, "TRK file", (HeaderError, DataError, struct.error, TypeError, *PARSE_ERRORS)):
            return nibs.load(path, lazy_load=True)
    return _image(path)


def _image(path: str) -> Any:
    import nibabel as nib
    from nibabel.filebasedimages import ImageFileError

    with gp.parsing(path, "reference image", (ImageFileError, *PARSE_ERRORS)):
        return nib.load(path)
