"""GIfTI surfaces (``.surf.gii``, ``.gii``), through nibabel.

Read: the first ``NIFTI_INTENT_POINTSET`` data array is the positions (as stored: its
coordinate-system transform is not applied) and the first ``NIFTI_INTENT_TRIANGLE``
array the faces; every other data array with one row per vertex is a vertex attribute,
named by its ``Name`` metadata (else ``<intent>_<index>``).  Arrays that fit neither
are named in ``Geometry.dropped``.  A GIfTI file without a pointset (functional data
only) is refused, as are a pointset not (vertices, 3), triangles not integer (triangles,
3), two attributes of one name, external data outside the file's folder, and compressed
data that inflates to more than its array declares.

The file's metadata (its own, the pointset's -- ``AnatomicalStructurePrimary``... -- and the
triangles') and the pointset's coordinate system are kept as ``Geometry.headers["gifti"]``
(a store's ``headers/gifti``) and written back.

Write: float32 positions, int32 triangles (polygons fanned), and each vertex attribute
as a ``NIFTI_INTENT_NONE`` array named by its ``Name`` metadata, in a type GIfTI holds
(float32 -- floats lose precision beyond it --, int32 or uint8); face attributes and
integers beyond int32 are named in a warning.
"""

from __future__ import annotations

import base64
import binascii
import math
import os
import re
import stat
import zlib
from collections.abc import Iterator
from typing import Any
from xml.etree import ElementTree

import numpy as np

from zarr_vectors import config
from zarr_vectors.errors import MetadataError, ResourceLimitError
from zarr_vectors.format.headers import GIFTI, gifti_header, stored_gifti
from zarr_vectors.io import geometry_parts as gp
from zarr_vectors.io.types import FileFormat, Geometry

POINTSET = "NIFTI_INTENT_POINTSET"
TRIANGLE = "NIFTI_INTENT_TRIANGLE"
_EXTERNAL = re.compile(rb"""ExternalFileName\s*=\s*(["'])(.*?)\1""", re.DOTALL)
_INFLATE_STEP = 16 << 20  # bytes of output per step of the bounded inflate
_XML_FEED = 1 << 20  # bytes of XML per step of the size check's parse


def _check_external_files(path: str, raw: bytes) -> None:
    """A data array stored in an external file (``ExternalFileBinary``) may name only a regular
    file in the GIfTI's folder or below: nibabel opens whatever the name says (``/dev/zero``,
    a file elsewhere on the machine), up to the sizes the file declares.  A name not read
    here as plain text (quoted otherwise, XML entities) resolves to nothing and is refused."""
    folder = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    at = raw.find(b"ExternalFileName")
    while at >= 0:
        match = _EXTERNAL.match(raw, at)
        name = match.group(2).decode("utf-8", "replace") if match else None
        if name != "":  # nibabel writes an empty name for arrays stored inline
            target = os.path.realpath(os.path.join(folder, name or "\0"))
            try:
                regular = os.path.commonpath([target, folder]) == folder and stat.S_ISREG(os.stat(target).st_mode)
            except (OSError, ValueError):
                regular = False
            if not regular:
                raise gp.input_error(path, f"a data array's external file {name!r} is not a regular file in the "
                                           "GIfTI's folder")
        at = raw.find(b"ExternalFileName", at + 1)


def _check_inflated_sizes(path: str, raw: bytes) -> None:
    """Each ``GZipBase64Binary`` array inflates to no more than its ``Dim``s and ``DataType``
    declare, checked in bounded steps: nibabel inflates an array whole before it compares, so
    1.5 MB of deflated zeros took 1.5 GB (twice: it copies the result).  What they declare in
    all is held to ``zarr_vectors.limits.max-decoded-bytes``: a small file may declare, and
    inflate to, any size."""
    limit, total = int(config.get("limits.max-decoded-bytes")), 0
    for name, deflated, declared in _deflated_arrays(raw):
        total += declared
        if total > limit:
            raise ResourceLimitError(f"{path}: its compressed data arrays, up to {name!r}, declare {total:,} bytes, "
                                     f"more than zarr_vectors.limits.max-decoded-bytes ({limit:,})")
        _bounded_inflate(path, deflated, declared, name)


def _deflated_arrays(raw: bytes) -> Iterator[tuple[str, bytes, int]]:
    """(name, deflated bytes, declared size) of each compressed array, in document order, up to
    the first thing this pass cannot read (a syntax error, an unknown type, bad dims or
    base64), where nibabel stops too."""
    from nibabel.gifti.util import gifti_encoding_codes
    from nibabel.nifti1 import data_type_codes

    parser = ElementTree.XMLPullParser(events=("end",))
    try:
        for start in range(0, max(len(raw), 1), _XML_FEED):
            parser.feed(raw[start : start + _XML_FEED])
            for _, element in parser.read_events():  # raises at the first syntax error, after what precedes it
                if _local(element.tag) != "DataArray":
                    continue
                attrs = element.attrib
                data = next((e for e in element if _local(e.tag) == "Data"), None)
                # nibabel's defaults: data without an Encoding is deflated, of DataType "none"
                compressed = gifti_encoding_codes.label[attrs.get("Encoding", "B64GZ")] == "B64GZ"
                if compressed and data is not None and data.text:
                    dims = [int(attrs[f"Dim{i}"]) for i in range(int(attrs.get("Dimensionality", 0)))]
                    declared = max(0, math.prod(dims)) * data_type_codes.dtype[attrs.get("DataType", "none")].itemsize
                    name = _meta_name(element) or attrs.get("Intent", "?")
                    yield name, base64.b64decode(data.text), declared
                element.clear()
    except (ElementTree.ParseError, KeyError, ValueError, binascii.Error):
        return


def _local(tag: str) -> str:
    """An element's name without its namespace: nibabel's expat parser ignores ``xmlns``, which
    ElementTree folds into every tag (``{urn:x}DataArray``)."""
    return tag.rpartition("}")[2]


def _meta_name(element: ElementTree.Element) -> str | None:
    """The ``Name`` metadata of a data array, if it has one."""
    for md in element.iter():
        if _local(md.tag) == "MD":
            fields = {_local(e.tag): e.text for e in md}
            if fields.get("Name") == "Name":
                return fields.get("Value")
    return None


def _bounded_inflate(path: str, deflated: bytes, declared: int, name: str) -> None:
    inflater, pending, total = zlib.decompressobj(), deflated, 0
    try:
        while not inflater.eof:
            piece = inflater.decompress(pending, _INFLATE_STEP)
            total += len(piece)
            if total > declared:
                raise gp.input_error(path, f"data array {name!r} inflates to more than the {declared:,} bytes its "
                                           "Dim and DataType attributes declare")
            pending = inflater.unconsumed_tail
            if not piece and not pending:
                return
    except zlib.error:  # nibabel's inflate stops at the same byte, and says so
        return


def read(path: str, **options: Any) -> Geometry:
    """Read a GIfTI surface's vertices, triangles and per-vertex arrays (no options)."""
    from nibabel import gifti
    from nibabel.nifti1 import intent_codes

    gp.no_options(path, "GIfTI read", options)
    raw = gp.read_bytes(path)
    _check_external_files(path, raw)
    _check_inflated_sizes(path, raw)
    del raw  # nibabel reads the file again (relative external names resolve against its folder)
    # nibabel's XML parser raises many types (ExpatError, ValueError, KeyError, ...)
    with gp.parsing(path, "GIfTI file", (Exception,)):
        image = gifti.GiftiImage.from_filename(path)
        arrays = [(intent_codes.niistring[d.intent], d) for d in image.darrays]
    point = next((i for i, (intent, _) in enumerate(arrays) if intent == POINTSET), None)
    if point is None:
        raise gp.input_error(path, "has no NIFTI_INTENT_POINTSET array: not a surface")
    positions = _native(arrays[point][1].data)
    if positions.ndim != 2 or positions.shape[1] != 3 or positions.dtype.kind not in "iuf":
        raise gp.input_error(path, f"the pointset is {positions.dtype} of shape {positions.shape}; a GIfTI surface's "
                                   "is numbers of shape (vertices, 3)")
    triangle = next((i for i, (intent, _) in enumerate(arrays) if intent == TRIANGLE), None)
    faces = _native(arrays[triangle][1].data) if triangle is not None else None
    if faces is not None and (faces.ndim != 2 or faces.shape[1] != 3 or faces.dtype.kind not in "iu"):
        raise gp.input_error(path, f"the triangles are {faces.dtype} of shape {faces.shape}; a GIfTI surface's are "
                                   "integers of shape (triangles, 3)")  # float indices were truncated
    attributes, dropped = {}, []
    for i, (intent, darray) in enumerate(arrays):
        if i in (point, triangle):
            continue
        name = darray.meta.get("Name") or f"{intent}_{i}"
        values = _native(darray.data)
        if values.ndim in (1, 2) and len(values) == len(positions) and values.dtype.kind in "biuf":
            if name in attributes:  # the last one replaced the first
                raise gp.input_error(path, f"two per-vertex data arrays are named {name!r}")
            attributes[name] = values
        else:
            dropped.append(name)
    geometry = gp.mesh_geometry(path, positions, faces, attributes=attributes, dropped=dropped)
    geometry.headers = _header(path, image, arrays[point][1], arrays[triangle][1] if triangle is not None else None)
    return geometry


def _header(path: str, image: Any, pointset: Any, triangles: Any) -> dict[str, dict[str, Any]]:
    """The file's metadata and the pointset's coordinate system as a store keeps them
    (``headers/gifti``), when a store can: else none, with a warning (a transform a store cannot
    keep costs only itself)."""
    from nibabel.nifti1 import xform_codes

    system = pointset.coordsys
    metadata = (dict(image.meta), dict(pointset.meta), dict(triangles.meta) if triangles is not None else {})
    if system is not None:
        coordsys = (xform_codes.niistring[system.dataspace], xform_codes.niistring[system.xformspace],
                    np.asarray(system.xform))
        kept = gp.kept_header(path, GIFTI, gifti_header(*metadata, coordsys), "coordinate system")
        if kept:
            return kept
    return gp.kept_header(path, GIFTI, gifti_header(*metadata, None), "metadata")


def _native(data: Any) -> np.ndarray:
    """A data array in this machine's byte order (``Endian="BigEndian"`` arrays come as ``>f4``)."""
    values = np.asarray(data)
    return values.astype(values.dtype.newbyteorder("=")) if values.dtype.byteorder not in ("=", "|") else values


def write(path: str, data: Any, **options: Any) -> None:
    """Write a mesh as a GIfTI surface, with the metadata and coordinate system the data's headers
    keep (no options)."""
    from nibabel import gifti

    gp.no_options(path, "GIfTI write", options)
    geometry = gp.mesh_parts(data, path, "GIfTI")
    try:
        kept = stored_gifti(geometry.headers) or {"meta": {}, "pointset_meta": {}, "triangle_meta": {}}
    except MetadataError as exc:
        raise gp.input_error(path, f"the data's GIfTI metadata cannot be written: {exc}") from None
    system = kept.get("coordsys")
    darrays = [
        gifti.GiftiDataArray(
            np.asarray(geometry.positions, np.float32), intent=POINTSET, datatype="NIFTI_TYPE_FLOAT32",
            meta=gifti.GiftiMetaData(kept["pointset_meta"]),
            coordsys=None if system is None else gifti.GiftiCoordSystem(
                system["dataspace"], system["xformspace"], system["xform"]),
        ),
        gifti.GiftiDataArray(
            gp.fan_triangles(geometry.faces).astype(np.int32), intent=TRIANGLE, datatype="NIFTI_TYPE_INT32",
            meta=gifti.GiftiMetaData(kept["triangle_meta"]),
        ),
    ]
    unstored = list(geometry.edge_attributes)
    for name, values in geometry.attributes.items():
        values = _gifti_values(np.asarray(values))
        if values is None:
            unstored.append(name)
            continue
        gp.refuse_non_xml(path, "attribute", {name: ""})  # its Name metadata (the file's own: stored_gifti)
        darrays.append(gifti.GiftiDataArray(values, intent="NIFTI_INTENT_NONE", meta=gifti.GiftiMetaData(Name=name)))
    gp.warn_unstored(path, "GIfTI", unstored)
    with gp.os_errors(path, "written"):
        gifti.GiftiImage(darrays=darrays, meta=gifti.GiftiMetaData(kept["meta"])).to_filename(path)


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
    headers=(GIFTI,),
)
