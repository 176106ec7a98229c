"""TRX tractograms (``.trx``: a zip, or a directory of the same files), through trx-python.

Read (``trx.trx_file_memmap.load``): positions (RAS+ mm, the header's
``VOXEL_TO_RASMM`` describing the reference space; no transform applied) with one
streamline per object in file order; ``dpv`` (data per vertex) as vertex attributes and
``dps`` (data per streamline) as object attributes.  Groups and their data are object
attributes too, one per group and per group datum:

* ``group.<name>`` -- uint8, 1 where a streamline belongs to group ``<name>``;
* ``dpg.<name>.<key>`` -- the group's datum ``<key>`` on every member streamline
  (zero elsewhere), so a coarse level still carries it; a datum of an empty group has
  no member to carry it and is named in ``Geometry.dropped``.

The arrays are the library's memory maps of the file (of its extracted copy for a
deflated zip, whose temporary directory is removed at once: POSIX keeps mapped files
readable): nothing is loaded whole, pages are read as they are used, so a large TRX can
be handed to the writers (or cut into partitions) without copying it first.

Write (``trx.trx_file_memmap.save``): the same layout back -- ``group.*`` and ``dpg.*``
object attributes become groups and per-group data (a datum taken from the group's
first member), the rest dpv / dps in their own dtypes (bools as uint8); the header's
space from ``reference`` (a NIfTI image or TRK file), else ``affine`` / ``dimensions``,
else the one the data's headers keep (``headers/trx`` or ``headers/trk`` of a store built
from such a file; read, the header is kept as ``Geometry.headers["trx"]``), else the
identity over the data's extent, with a warning.  ``compressed=True`` deflates the zip.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from zarr_vectors.format.headers import TRX, trx_header
from zarr_vectors.io import geometry_parts as gp
from zarr_vectors.io import tractograms
from zarr_vectors.io.types import FileFormat, Geometry

GROUP = "group."
DPG = "dpg."


_ROOT_LENT = threading.Lock()


class _LastResortExceptTrx(logging.Handler):
    """On a root logger that has no handler: drops trx-python's own records and hands every
    other record that meets no other handler to ``logging.lastResort``, as before."""

    def __init__(self) -> None:
        super().__init__()
        import trx

        self._package = os.path.dirname(trx.__file__) + os.sep

    def emit(self, record: logging.LogRecord) -> None:
        if record.pathname.startswith(self._package):
            return
        logger: logging.Logger | None = logging.getLogger(record.name)
        while logger is not None:  # the handlers this record met besides this one (logging's own count)
            if any(h is not self for h in logger.handlers):
                return
            logger = logger.parent if logger.propagate else None
        if logging.lastResort is not None and record.levelno >= logging.lastResort.level:
            logging.lastResort.handle(record)


@contextmanager
def _root_unset() -> Iterator[None]:
    """trx-python logs through ``logging.error()`` and its kin, which call ``logging.basicConfig()``
    when the root logger has no handler: reading a TRX printed ``ERROR:root:...`` beside the
    read's own warning (which names the members it passed over), and a read or a write left every
    library's records printed that way in the user's process for good.  A root logger without
    handlers is lent one while trx-python runs; a configured one is the user's choice.  (A
    ``logging.basicConfig()`` of another thread in that window does nothing, as it would with
    any handler in place.)"""
    with _ROOT_LENT:  # one TRX at a time: a second, seeing the first's handler, would lend none
        root = logging.getLogger()
        if root.handlers:
            yield
            return
        handler = _LastResortExceptTrx()
        root.addHandler(handler)
        try:
            yield
        finally:
            root.removeHandler(handler)


@_root_unset()
def read(path: str, **options: Any) -> Geometry:
    """Read a TRX file or directory, memory-mapped (no options)."""
    import zipfile

    gp.no_options(path, "TRX read", options)
    # OverflowError: trx-python casts header.json's DIMENSIONS to uint16 (-1 or 70000 raised it)
    with gp.parsing(path, "TRX file", (*tractograms.PARSE_ERRORS, TypeError, OverflowError, zipfile.BadZipFile)):
        trx = _load(path)
    if trx._uncompressed_folder_handle is not None and os.name == "posix":
        # a deflated zip was extracted to a temporary directory: removed now, its files
        # stay readable through the memory maps (POSIX) and their space is freed with them
        trx._uncompressed_folder_handle.cleanup()
        trx._uncompressed_folder_handle = None
    n_lines = int(trx.header["NB_STREAMLINES"])
    positions, offsets = _parts(trx.streamlines, int(trx.header["NB_VERTICES"]), path)
    if positions.dtype == np.float16:  # TRX allows it; a store's positions are float32 or float64
        positions = positions.astype(np.float32)
    if len(offsets) != n_lines + 1:
        raise gp.input_error(path, f"header declares {n_lines} streamlines, the offsets hold {len(offsets) - 1}")
    attributes = {k: gp.per_row(_parts(v, len(positions), path)[0]) for k, v in trx.data_per_vertex.items()}
    objects = {k: gp.per_row(v) for k, v in trx.data_per_streamline.items()}
    dropped = _passed_over(path, trx)
    for name, members in trx.groups.items():
        members = np.asarray(members)
        if members.dtype.kind not in "iu":  # a float index was truncated (2.7 became 2)
            raise gp.input_error(path, f"group {name!r} lists streamlines as {members.dtype}, not integers")
        members = members.astype(np.int64)
        outside = members[(members < 0) | (members >= n_lines)]
        if len(outside):
            raise gp.input_error(path, f"group {name!r} lists streamline {outside[0]}, of {n_lines} (0..{n_lines - 1})")
        inside = np.zeros(n_lines, dtype=np.uint8)  # uint8, not bool: object attributes need an absence value
        inside[members] = 1
        objects[GROUP + name] = inside
        for key, value in trx.data_per_group.get(name, {}).items():
            if not len(members):
                dropped.append(f"{DPG}{name}.{key}")
                continue
            value = gp.per_row(np.asarray(value).reshape(1, -1))
            column = np.zeros((n_lines, *value.shape[1:]), dtype=value.dtype)
            column[members] = value
            objects[f"{DPG}{name}.{key}"] = column
    geometry = gp.streamline_geometry(
        path, positions, offsets, attributes=attributes, object_attributes=objects, dropped=dropped
    )
    geometry.headers = _header(path, trx)
    return geometry


def _header(path: str, trx: Any) -> dict[str, dict[str, Any]]:
    """The file's reference space as a store keeps it (``headers/trx``), when it is usable."""
    affine = np.asarray(trx.header["VOXEL_TO_RASMM"], np.float64)
    dims = np.asarray(trx.header["DIMENSIONS"]).reshape(-1)
    if affine.shape != (4, 4) or dims.shape != (3,):
        warnings.warn(f"{path}: its reference space is not kept (VOXEL_TO_RASMM {affine.shape}, DIMENSIONS "
                      f"{dims.shape}){tractograms.NOT_KEPT}", UserWarning, stacklevel=3)
        return {}
    header = trx_header(affine, dims.tolist(), dpv_names=list(trx.data_per_vertex),
                        dps_names=list(trx.data_per_streamline),
                        dpg_names=sorted({k for data in trx.data_per_group.values() for k in data}))
    return gp.kept_header(path, TRX, header, "reference space", tractograms.NOT_KEPT)


def _passed_over(path: str, trx: Any) -> list[str]:
    """The members trx-python passed over -- an unknown folder or data type, which it logs as an
    error or skips without a word -- as ``member <name>``, for ``Geometry.dropped``."""
    import zipfile

    if os.path.isdir(path):
        names = [os.path.relpath(os.path.join(folder, f), path).replace(os.sep, "/")
                 for folder, _, files in os.walk(path) for f in files]
    else:
        with zipfile.ZipFile(path) as zf:
            names = [n for n in zf.namelist() if not n.endswith("/")]
    read = {("", "header"), ("", "positions"), ("", "offsets")}
    read |= {("dpv", k) for k in trx.data_per_vertex} | {("dps", k) for k in trx.data_per_streamline}
    read |= {("groups", k) for k in trx.groups}
    read |= {(f"dpg/{g}", k) for g, data in trx.data_per_group.items() for k in data}
    # a member's key is its name up to the first dot, as trx-python reads it (name[.dim].dtype)
    return [f"member {n}" for n in names if (n.rpartition("/")[0], n.rpartition("/")[2].split(".")[0]) not in read]


def _load(path: str) -> Any:
    """trx-python's TrxFile of ``path``.  trx-python maps every member read-write (``r+``), so
    a TRX its reader may not write (a shared, read-only dataset) fails on PermissionError; such a
    file is read from a copy in trx-python's temporary folder, as a deflated one always is."""
    import zipfile

    import trx.trx_file_memmap as tmm

    try:
        return tmm.load(path)
    except PermissionError:
        if not os.access(path, os.R_OK):  # not ours to read at all
            raise
    copy = tmm.get_trx_tmp_dir()
    try:
        if os.path.isdir(path):
            shutil.copytree(path, copy.name, dirs_exist_ok=True, copy_function=_copy_regular)
        else:
            with zipfile.ZipFile(path) as zf:
                zf.extractall(copy.name)
        trx = tmm.load_from_directory(copy.name)
    except BaseException:
        copy.cleanup()
        raise
    trx._uncompressed_folder_handle = copy  # removed by read(), as a deflated file's is
    return trx


def _copy_regular(source: str, target: str) -> str:
    """Copy one member of a TRX directory, refusing anything but a regular file (a link to
    /dev/zero would be copied forever)."""
    if not stat.S_ISREG(os.stat(source).st_mode):
        raise ValueError(f"member {source!r} is not a regular file")
    return shutil.copyfile(source, target)


def _parts(seq: Any, n_vertices: int, path: str) -> tuple[np.ndarray, np.ndarray]:
    """(data, offsets with the end appended) of a TRX ArraySequence, the data still memory-mapped.

    The offsets file ends with the vertex count; trx-python keeps the starts and the lengths
    it computed from the whole file, so a last offset other than the header's count shows as
    a length that the starts and the count do not give (the last line was read 2 rows long)."""
    data, starts = seq._data, np.asarray(seq._offsets)
    if starts.dtype.kind not in "iu":  # float offsets were truncated (2.5 became 2)
        raise gp.input_error(path, f"offsets are {starts.dtype}, not integers")
    offsets = np.r_[starts.astype(np.int64), n_vertices]
    # trx-python's lengths are unsigned: equal to them, the steps cannot fall either
    if len(data) != n_vertices or offsets[0] != 0 or not np.array_equal(np.diff(offsets), seq._lengths):
        raise gp.input_error(path, f"offsets do not cut the {n_vertices} vertices ({len(data)} rows): the "
                                   "offsets file must rise from 0 to the header's NB_VERTICES")
    return data, offsets


@_root_unset()
def write(
    path: str,
    data: Any,
    *,
    reference: Any = None,
    affine: Any = None,
    dimensions: Any = None,
    compressed: bool = False,
    **options: Any,
) -> None:
    """Write streamlines (RAS+ mm) as TRX, groups from ``group.*`` object attributes."""
    import zipfile

    import trx.trx_file_memmap as tmm

    gp.no_options(path, "TRX write", options)
    geometry, object_attributes = gp.polylines(data, path, "TRX")
    positions, ref = tractograms.written_space(path, geometry, "TRX", np.uint16, reference=reference, affine=affine,
                                               dimensions=dimensions)
    if positions.dtype.kind != "f":
        positions = positions.astype(np.float32)
    offsets = np.asarray(geometry.offsets, dtype=np.int64)
    trx = tmm.TrxFile()
    trx.header = {
        "VOXEL_TO_RASMM": ref.affine.astype(np.float32),
        "DIMENSIONS": np.asarray(ref.dimensions, np.uint16),
        "NB_VERTICES": len(positions),
        "NB_STREAMLINES": len(offsets) - 1,
    }
    wide = np.uint64 if len(positions) > np.iinfo(np.uint32).max else np.uint32
    trx.streamlines = tractograms.sequence(positions, offsets)
    trx.streamlines._offsets = trx.streamlines._offsets.astype(wide)
    trx.data_per_vertex = {k: tractograms.sequence(_storable(v), offsets) for k, v in geometry.attributes.items()}
    groups = {
        k[len(GROUP) :]: np.flatnonzero(v).astype(np.uint32)
        for k, v in object_attributes.items()
        if k.startswith(GROUP)
    }
    trx.groups = groups
    trx.data_per_group = {}
    for key, values in object_attributes.items():
        if not key.startswith(DPG):
            continue
        group = max((g for g in groups if key.startswith(f"{DPG}{g}.")), key=len, default=None)
        if group is None:
            raise gp.input_error(path, f"object attribute {key!r} names no group (no {GROUP}<name> attribute)")
        members = groups[group]
        if not len(members):
            continue
        value = _storable(np.asarray(values)[members[0]]).reshape(-1)  # the first member's row
        # one value as (1,), several as (1, k): TRX names a multi-valued datum by its width
        trx.data_per_group.setdefault(group, {})[key[len(DPG) + len(group) + 1 :]] = (
            value if len(value) == 1 else value.reshape(1, -1)
        )
    trx.data_per_streamline = {k: _storable(v) for k, v in object_attributes.items() if not k.startswith((GROUP, DPG))}
    empty = sorted(g for g, m in groups.items() if not len(m))
    gp.warn_unstored(path, "TRX (data of an empty group)", [
        k for k in object_attributes if k.startswith(tuple(f"{DPG}{g}." for g in empty))
    ])  # fmt: skip
    with gp.os_errors(path, "written"):
        tmm.save(trx, path, compression_standard=zipfile.ZIP_DEFLATED if compressed else zipfile.ZIP_STORED)


def _storable(values: Any) -> np.ndarray:
    values = np.asarray(values)
    return values.astype(np.uint8) if values.dtype == bool else values


FORMAT = FileFormat(
    name="trx",
    extensions=(".trx",),
    kinds=("streamline",),
    read=read,
    write=write,
    description="TRX tractogram (trx-python, memory-mapped): dpv, dps, groups and per-group data",
    headers=("trk", "trx"),
    records_space=True,
)
