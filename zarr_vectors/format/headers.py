"""Format headers beside the levels (``headers/<format>``): what a source file said that the arrays cannot.

A streamline file places its streamlines in a reference image's grid -- a voxel-to-RAS+ mm
affine, the grid's dimensions and voxel sizes (TRK also its voxel order) -- and tools that load
a tractogram against a volume check the file's header against the image.  The store keeps
that header so that an export gives it back.  The layout is the reference implementation's
(its ``HeaderRegistry``), so either side's exports find the other's headers: a plain group
``headers``, and under it one group per format whose attributes are the header:

* ``headers/trk``: ``vox_to_ras`` (16 numbers, the 4x4 row by row), ``dimensions`` (3),
  ``voxel_size`` (3), ``voxel_order`` (e.g. ``"RAS"``), ``space`` -- ``"rasmm"`` or
  ``"voxmm"``: which space the stored positions are in -- and the file's ``n_count``,
  ``n_scalars`` / ``scalar_names``, ``n_properties`` / ``property_names``, ``origin``,
  ``version``;
* ``headers/trx``: ``voxel_to_rasmm`` (16), ``dimensions`` (3) and the file's ``dpv_names``,
  ``dps_names``, ``dpg_names``;
* ``headers/freesurfer`` (ours; the reference keeps none): ``volume_info``, a FreeSurfer
  surface's volume geometry as nibabel reads it (``head``, ``valid``, ``filename``,
  ``volume``, ``voxelsize``, ``xras``, ``yras``, ``zras``, ``cras``) -- where the surface's
  tkregister RAS sits in scanner space;
* ``headers/gifti`` (ours): a GIfTI surface's metadata -- the file's ``meta``, the pointset's
  and the triangles' ``meta`` (``AnatomicalStructurePrimary``, ``GeometricType``...: what
  Connectome Workbench places a surface by) -- and the pointset's coordinate system
  (``dataspace``, ``xformspace``, ``xform``: 16 numbers).

Reading a store's header is reading data from elsewhere: :func:`stored_space` checks every
field it uses and names the document and member it refuses.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarr_vectors.errors import MetadataError
from zarr_vectors.format.schema import short

HEADERS_GROUP = "headers"
#: Header names this project writes and reads back (others are kept as they are, never read).
TRK, TRX, FREESURFER, GIFTI = "trk", "trx", "freesurfer", "gifti"
READ_BACK = (TRK, TRX, FREESURFER, GIFTI)
#: The NIfTI transform spaces a GIfTI coordinate system names (nibabel's ``xform_codes``).
XFORM_SPACES = ("NIFTI_XFORM_UNKNOWN", "NIFTI_XFORM_SCANNER_ANAT", "NIFTI_XFORM_ALIGNED_ANAT", "NIFTI_XFORM_TALAIRACH",
                "NIFTI_XFORM_MNI_152", "NIFTI_XFORM_TEMPLATE_OTHER")
#: A FreeSurfer volume geometry's members, in the order nibabel writes them: (name, kind, length).
VOLUME_INFO = (("head", "tag", None), ("valid", "text", None), ("filename", "text", None), ("volume", "int", 3),
               ("voxelsize", "size", 3), ("xras", "float", 3), ("yras", "float", 3), ("zras", "float", 3),
               ("cras", "float", 3))
#: A header's name: one path segment, lower case, as the reference names its formats.
HEADER_NAME = re.compile(r"[a-z0-9][a-z0-9_]{0,63}")
#: Which space stored positions are in: RAS+ millimetres, or TrackVis voxel millimetres.
POSITION_SPACES = ("rasmm", "voxmm")
_ORDER_LETTERS = ("LR", "PA", "IS")
#: Bounds on a header's numbers: no image is a million kilometres across, no voxel below a nanometre
#: or above a kilometre -- past them, the float32 a TRK or TRX file holds rounds the space to 0 or inf.
_LARGEST, _VOXEL_SIZES = 1e12, (1e-6, 1e6)
#: The smallest singular value of an affine's column-normalised 3x3 part: below it two voxel axes
#: point (nearly) the same way, and no orientation can be read from it (nibabel refuses such a file).
_DISTINCT_AXES = 1e-3


def header_path(name: str) -> str:
    """The node path of a header (``headers/trk``)."""
    return f"{HEADERS_GROUP}/{name}"


@dataclass(frozen=True)
class ReferenceSpace:
    """A reference image grid: ``affine`` voxel to RAS+ mm (4x4), ``dimensions`` in voxels,
    ``voxel_sizes`` in mm, ``voxel_order`` (TrackVis' three letters; None when the header
    does not say, so the writer takes the affine's)."""

    affine: np.ndarray
    dimensions: tuple[int, int, int]
    voxel_sizes: tuple[float, float, float]
    voxel_order: str | None = None


@dataclass(frozen=True)
class StoredSpace:
    """A store's reference space, the header it came from, and the space of its positions."""

    space: ReferenceSpace
    source: str
    positions: str  # one of POSITION_SPACES


def trk_header(
    space: ReferenceSpace,
    *,
    positions: str,
    count: int,
    scalar_names: Sequence[str] = (),
    property_names: Sequence[str] = (),
    n_scalars: int | None = None,
    n_properties: int | None = None,
    origin: Sequence[float] | None = None,
    version: int | None = None,
) -> dict[str, Any]:
    """The ``headers/trk`` attributes of a TRK file's header (``n_scalars`` / ``n_properties``:
    the values per point / streamline the file counts, a name may stand for several)."""
    out: dict[str, Any] = {
        "format_name": TRK,
        "voxel_size": [float(v) for v in space.voxel_sizes],
        "dimensions": [int(v) for v in space.dimensions],
        "vox_to_ras": [float(v) for v in np.asarray(space.affine, np.float64).reshape(-1)],
        "voxel_order": space.voxel_order,
        "n_scalars": len(scalar_names) if n_scalars is None else int(n_scalars),
        "scalar_names": list(scalar_names),
        "n_properties": len(property_names) if n_properties is None else int(n_properties),
        "property_names": list(property_names),
        "n_count": int(count),
        "space": positions,
    }
    if origin is not None and all(math.isfinite(float(v)) for v in origin):
        out["origin"] = [float(v) for v in origin]
    if version is not None:
        out["version"] = int(version)
    return out


def trx_header(
    affine: np.ndarray, dimensions: Sequence[int], *, dpv_names: Sequence[str] = (), dps_names: Sequence[str] = (),
    dpg_names: Sequence[str] = (),
) -> dict[str, Any]:
    """The ``headers/trx`` attributes of a TRX file's header (its voxel sizes are its affine's)."""
    return {
        "format_name": TRX,
        "voxel_to_rasmm": [float(v) for v in np.asarray(affine, np.float64).reshape(-1)],
        "dimensions": [int(v) for v in dimensions],
        "dpv_names": list(dpv_names),
        "dps_names": list(dps_names),
        "dpg_names": list(dpg_names),
    }


def freesurfer_header(volume_info: Mapping[str, Any]) -> dict[str, Any]:
    """The ``headers/freesurfer`` attributes of a surface's volume geometry (nibabel's dict)."""
    return {"format_name": FREESURFER,
            "volume_info": {k: np.asarray(v).tolist() if not isinstance(v, str) else v for k, v in volume_info.items()}}


def stored_volume_info(headers: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    """The volume geometry ``headers/freesurfer`` keeps, checked, as nibabel's writer takes it (arrays
    and strings), or None.  Each member is checked: nibabel writes the text members as lines of the
    file's footer, and numbers it cannot format end its write half-way."""
    if FREESURFER not in headers:
        return None
    file, info = f"{header_path(FREESURFER)}/zarr.json", headers[FREESURFER].get("volume_info")
    if not isinstance(info, dict) or list(info) != [name for name, _, _ in VOLUME_INFO]:
        raise _bad(file, "volume_info", f"must be an object of {', '.join(n for n, _, _ in VOLUME_INFO)} in this "
                                        f"order, found {short(info)}")
    out: dict[str, Any] = {}
    for name, kind, length in VOLUME_INFO:
        member, value = f"volume_info/{name}", info[name]
        if kind == "text":
            if not isinstance(value, str) or len(value) > 1024 or any(ord(c) < 32 or 0xD800 <= ord(c) <= 0xDFFF
                                                                     for c in value):  # a surrogate: no UTF-8
                raise _bad(file, member, f"must be one line of text, found {short(value)}")
            out[name] = value
        elif name == "head":  # the footer's tag: nibabel reads no other
            if value not in ([2, 0, 20], [20]) or any(isinstance(v, bool) for v in value):
                raise _bad(file, member, f"must be [2, 0, 20] or [20], found {short(value)}")
            out[name] = np.asarray(value, np.int32)
        elif kind == "int":
            if not isinstance(value, list) or len(value) != length or not all(
                isinstance(v, int) and not isinstance(v, bool) and 1 <= v < 2**31 for v in value
            ):
                raise _bad(file, member, f"must be a list of {length} integers from 1 to 2^31-1, found {short(value)}")
            out[name] = np.asarray(value, np.int64)
        else:
            numbers = _sizes(value, file, member) if kind == "size" else _numbers(value, 3, file, member)
            out[name] = np.asarray(numbers, np.float64)
    return out


def gifti_header(
    meta: Mapping[str, str], pointset_meta: Mapping[str, str], triangle_meta: Mapping[str, str],
    coordsys: tuple[str, str, np.ndarray] | None,
) -> dict[str, Any]:
    """The ``headers/gifti`` attributes: metadata of the file, its pointset and its triangles, and
    the pointset's coordinate system ``(dataspace, xformspace, xform)`` (None: it has none)."""
    out: dict[str, Any] = {"format_name": GIFTI, "meta": dict(meta), "pointset_meta": dict(pointset_meta),
                           "triangle_meta": dict(triangle_meta)}
    if coordsys is not None:
        dataspace, xformspace, xform = coordsys
        out["coordsys"] = {"dataspace": dataspace, "xformspace": xformspace,
                           "xform": [float(v) for v in np.asarray(xform, np.float64).reshape(-1)]}
    return out


def stored_gifti(headers: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    """What ``headers/gifti`` keeps, checked (``coordsys`` with ``xform`` as a 4x4 array), or None.
    Metadata is written into the file's XML: text only, no control characters."""
    if GIFTI not in headers:
        return None
    attrs, file = headers[GIFTI], f"{header_path(GIFTI)}/zarr.json"
    out: dict[str, Any] = {name: _meta(attrs.get(name, {}), file, name) for name in
                           ("meta", "pointset_meta", "triangle_meta")}
    coordsys = attrs.get("coordsys")
    if coordsys is not None:
        if not isinstance(coordsys, dict):
            raise _bad(file, "coordsys", f"must be an object, found {short(coordsys)}")
        for member in ("dataspace", "xformspace"):
            if coordsys.get(member) not in XFORM_SPACES:
                raise _bad(file, f"coordsys/{member}", f"must be one of {', '.join(XFORM_SPACES)}, "
                                                       f"found {short(coordsys.get(member))}")
        xform = np.asarray(_numbers(coordsys.get("xform"), 16, file, "coordsys/xform"), np.float64).reshape(4, 4)
        out["coordsys"] = {"dataspace": coordsys["dataspace"], "xformspace": coordsys["xformspace"], "xform": xform}
    return out


def _meta(value: Any, file: str, member: str) -> dict[str, str]:
    """A metadata object: names to text that XML holds (no control characters but tab and newlines)."""
    if not isinstance(value, dict):
        raise _bad(file, member, f"must be an object of names to text, found {short(value)}")
    for key, text in value.items():
        if not isinstance(text, str) or any(xml_problem(t) for t in (key, text)):
            raise _bad(file, f"{member}/{key}", "key and value must be text XML 1.0 holds (no control character, "
                       f"lone surrogate, U+FFFE or U+FFFF), found {short(text)}")
    return dict(value)


#: what XML 1.0 cannot hold, not even as a character reference: control characters but tab, LF and CR,
#: lone surrogates, U+FFFE and U+FFFF (nibabel and networkx write them, and no parser reads the file back)
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_problem(text: str) -> str | None:
    """The first character of ``text`` that XML 1.0 cannot hold, or None."""
    found = _NOT_XML.search(text)
    return found.group() if found else None


def with_count(header: Mapping[str, Any], count: int) -> dict[str, Any]:
    """A header describing ``count`` streamlines (several files' headers kept as one)."""
    return {**header, "n_count": int(count)} if "n_count" in header else dict(header)


def without_file_details(header: Mapping[str, Any]) -> dict[str, Any]:
    """A header without what one file of several may differ in and still share the others' space: its
    count, and TRK's ``origin`` and ``version`` (neither nibabel nor TrackVis places anything by them)."""
    return {k: v for k, v in header.items() if k not in ("n_count", "origin", "version")}


def with_root_hint(headers: Mapping[str, Mapping[str, Any]], crs: Any) -> dict[str, dict[str, Any]]:
    """``headers`` (the TRK one among them, if the store has one) with a TRK header that does not
    say its positions' ``space`` taking it from the root's ``crs.input_space``, where the
    reference's parallel TRK ingest records it.  Positions that root says are voxel mm, with no
    TRK header to take them to RAS+ mm, are refused: a streamline file would hold them as RAS+ mm."""
    out = {name: dict(attrs) for name, attrs in headers.items()}
    hint = crs.get("input_space") if isinstance(crs, Mapping) else None
    if isinstance(hint, str) and hint.lower() == "voxmm":
        if TRK not in out:
            raise MetadataError("says the positions are TrackVis voxel mm, and the store keeps no TRK header "
                                "(headers/trk) to take them to RAS+ mm", file="zarr.json",
                                pointer="/attributes/crs/input_space")
        out[TRK].setdefault("space", "voxmm")
    return out


def stored_space(headers: Mapping[str, Mapping[str, Any]]) -> StoredSpace | None:
    """The reference space a store's headers give (TRK's first, then TRX's), or None.

    ``headers``: the attributes of ``headers/trk`` / ``headers/trx`` that exist.  Positions are
    in RAS+ mm unless the TRK header's ``space`` says ``voxmm``.
    """
    if TRK in headers:
        attrs, file = headers[TRK], f"{header_path(TRK)}/zarr.json"
        positions = attrs.get("space", "rasmm")
        if positions not in POSITION_SPACES:
            raise _bad(file, "space", f"must be one of {', '.join(POSITION_SPACES)}, found {positions!r}")
        affine = _affine(attrs, "vox_to_ras", file)
        order = attrs.get("voxel_order")
        if order is not None and not _is_voxel_order(order):
            raise _bad(file, "voxel_order", f"must be three letters naming each axis once (e.g. 'RAS'), "
                                            f"found {order!r}")
        if order is None and positions == "voxmm":  # the reference's readers assume LAS or RAS: no guess
            raise _bad(file, "voxel_order", "is needed to take positions in TrackVis voxel mm to RAS+ mm")
        space = ReferenceSpace(affine, _dimensions(attrs, file), _sizes(attrs.get("voxel_size"), file, "voxel_size"),
                               order)
        return StoredSpace(space, TRK, positions)
    if TRX in headers:
        attrs, file = headers[TRX], f"{header_path(TRX)}/zarr.json"
        affine = _affine(attrs, "voxel_to_rasmm", file)
        norms = np.sqrt((affine[:3, :3] ** 2).sum(axis=0))
        sizes = (float(norms[0]), float(norms[1]), float(norms[2]))
        return StoredSpace(ReferenceSpace(affine, _dimensions(attrs, file), sizes), TRX, "rasmm")
    return None


def check_headers(headers: Mapping[str, Mapping[str, Any]]) -> None:
    """Every member of the headers this project reads back that a reader would use (MetadataError)."""
    stored_space(headers)
    stored_volume_info(headers)
    stored_gifti(headers)


def header_problems(headers: Mapping[str, Mapping[str, Any]]) -> dict[str, MetadataError]:
    """Each header's first problem as :func:`check_headers` finds it, by name (those that pass are
    not named): what an export leaves out, and what the validator warns of."""
    problems: dict[str, MetadataError] = {}
    for name, attrs in headers.items():
        try:
            check_headers({name: attrs})
        except MetadataError as exc:
            problems[name] = exc
    return problems


def _bad(file: str, member: str, message: str) -> MetadataError:
    return MetadataError(f"{member} {message}", file=file, pointer=f"/attributes/{member}")


def _numbers(value: Any, count: int, file: str, member: str) -> list[float]:
    """``count`` finite numbers of magnitude at most 1e12 (a huge JSON integer included, which
    ``math.isfinite`` cannot even take)."""
    if not isinstance(value, list) or len(value) != count or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and (isinstance(v, int) or math.isfinite(v))
        and abs(v) <= _LARGEST for v in value
    ):
        raise _bad(file, member, f"must be a list of {count} finite numbers of magnitude at most {_LARGEST:g}, "
                                 f"found {short(value)}")
    return [float(v) for v in value]


def _affine(attrs: Mapping[str, Any], member: str, file: str) -> np.ndarray:
    affine = np.asarray(_numbers(attrs.get(member), 16, file, member), np.float64).reshape(4, 4)
    if not np.array_equal(affine[3], [0.0, 0.0, 0.0, 1.0]):
        raise _bad(file, member, f"is not an affine: its last row is {affine[3].tolist()}, not [0, 0, 0, 1]")
    norms = np.sqrt((affine[:3, :3] ** 2).sum(axis=0))
    low, high = _VOXEL_SIZES
    if not ((norms >= low) & (norms <= high)).all():
        raise _bad(file, member, f"gives voxel sizes {norms.tolist()} mm, outside {low:g} to {high:g}")
    if np.linalg.svd(affine[:3, :3] / norms, compute_uv=False).min() < _DISTINCT_AXES:
        raise _bad(file, member, "does not map the three voxel axes onto three distinct directions")
    return affine


def _dimensions(attrs: Mapping[str, Any], file: str) -> tuple[int, int, int]:
    value = attrs.get("dimensions")
    if not isinstance(value, list) or len(value) != 3 or not all(
        isinstance(v, int) and not isinstance(v, bool) and 1 <= v < 2**31 for v in value
    ):
        raise _bad(file, "dimensions", f"must be a list of 3 integers from 1 to 2^31-1, found {short(value)}")
    return (value[0], value[1], value[2])


def _sizes(value: Any, file: str, member: str) -> tuple[float, float, float]:
    sizes, (low, high) = _numbers(value, 3, file, member), _VOXEL_SIZES
    if not all(low <= v <= high for v in sizes):
        raise _bad(file, member, f"must be positive voxel sizes from {low:g} to {high:g} mm, found {sizes}")
    return (sizes[0], sizes[1], sizes[2])


def _is_voxel_order(value: Any) -> bool:
    if not isinstance(value, str) or len(value) != 3:
        return False
    axes = [next((i for i, pair in enumerate(_ORDER_LETTERS) if c in pair), -1) for c in value.upper()]
    return sorted(axes) == [0, 1, 2]
