"""LAS / LAZ point clouds (laspy; LAZ through its lazrs backend).

Positions are the scaled ``x, y, z``; every other point dimension -- the point
format's standard ones (intensity, classification, return bits, GPS time, colour...)
and every extra-bytes dimension -- is an attribute under its laspy name (an extra
dimension of k elements becomes ``name_0 .. name_{k-1}``).  Large files are read in
ranges of ``sources.las-chunk-points`` points, one task each, so no process holds
the whole cloud; the writer picks the smallest point format holding the standard
dimensions it is given and writes the other attributes as extra bytes.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from zarr_vectors import config
from zarr_vectors.errors import InputError
from zarr_vectors.io import geometry_parts as gp
from zarr_vectors.io.columns import ColumnMap
from zarr_vectors.io.tables import geometry_from_frame, remote_options, unreadable
from zarr_vectors.io.types import FileFormat, Geometry, as_geometry

RAW_AXES = ("X", "Y", "Z")  # the stored integers; the positions are their scaled x, y, z
WRITE_FORMATS = (0, 1, 2, 3, 6, 7, 8)
EXTRA_NAME_BYTES = 32  # an extra-bytes record's name field


#: the most points a LAZ file may claim per stored byte: far past any real compression (a few
#: bytes a point), so a header claiming billions of points in kilobytes is refused, not planned
LAZ_POINTS_PER_BYTE = 64


def _open(path: str, opts: Mapping[str, Any]) -> Any:
    import fsspec
    import laspy

    opened = fsspec.open(path, "rb", **opts)
    handle = opened.open()
    try:
        reader = laspy.open(handle, closefd=True)
    except Exception as exc:
        handle.close()
        raise unreadable(path, exc) from exc
    try:
        _check_header(path, reader.header, opened.fs.size(opened.path))
    except BaseException:
        reader.close()
        raise
    return reader


def _check_header(path: str, header: Any, size: int) -> None:
    """Refuse a header whose points cannot be what the file holds: a zero or non-finite scale
    (every point would collapse onto the offset), or more points than its bytes can store (a
    truncated file; a count of billions planned into as many read ranges)."""
    scales = np.asarray(header.scales, dtype=np.float64)
    if not (np.isfinite(scales).all() and (scales != 0).all()):
        raise InputError(f"{path!r}: the LAS header's scales {scales.tolist()} are not finite non-zero numbers; "
                         "every coordinate would be lost")
    count, room = int(header.point_count), size - int(header.offset_to_point_data)
    if header.are_points_compressed:
        if count > LAZ_POINTS_PER_BYTE * max(room, 0):
            raise InputError(f"{path!r}: the LAZ header claims {count} points, more than its {size} bytes can hold")
        return
    record = int(header.point_format.size)
    if count * record > room:
        raise InputError(f"{path!r}: the LAS header claims {count} points of {record} bytes, "
                         f"but the file has {max(room, 0)} bytes of points (truncated?)")
    # what may follow the points: waveform packets (1.3) and extended VLRs (1.4), where the header says
    after = [int(getattr(header, name, 0) or 0) for name in ("start_of_waveform_data_packet_record",
                                                              "start_of_first_evlr")]
    end = min([size, *(a for a in after if a >= int(header.offset_to_point_data))])  # == : no points at all
    more = (end - int(header.offset_to_point_data) - count * record) // record
    if more > 0:  # a count below the body read only the points it counts, without a word
        raise InputError(f"{path!r}: the LAS header claims {count} points, but {more * record} or more bytes follow "
                         "them: room for more point records (a wrong count, or data the header does not describe)")


def _columns(points: Any) -> dict[str, np.ndarray]:
    out = {"x": np.asarray(points.x, dtype=np.float64), "y": np.asarray(points.y, dtype=np.float64),
           "z": np.asarray(points.z, dtype=np.float64)}
    for name in points.point_format.dimension_names:
        if name in RAW_AXES:
            continue
        values = np.asarray(points[name])
        if values.ndim == 1:
            out[name] = values
        else:
            out.update({f"{name}_{i}": values[:, i] for i in range(values.shape[1])})
    return out


def _range(path: str, start: int, count: int, opts: Mapping[str, Any]) -> Any:
    """Points ``[start, start + count)`` of one file as a pandas frame (one task of :func:`frame`)."""
    with _open(path, opts) as reader:
        return _points(path, reader, start, count)


def _points(path: str, reader: Any, start: int, count: int) -> Any:
    """Points ``[start, start + count)`` as a pandas frame; what laspy or lazrs cannot read (a LAZ
    whose chunk table or chunks end early, a body cut short) as the InputError naming the file."""
    import pandas as pd

    with _unreadable_as_input(path):
        if count:  # laspy cannot seek in a file of no points
            reader.seek(start)
        return pd.DataFrame(_columns(reader.read_points(count)))


@contextmanager
def _unreadable_as_input(path: str) -> Iterator[None]:
    """What laspy or lazrs cannot read of ``path`` as the InputError naming it; the storage's or the
    machine's errors (``OSError``, ``MemoryError``) stay what they are: a job failure, not bad input."""
    try:
        yield
    except (OSError, MemoryError):
        raise
    except Exception as exc:
        raise unreadable(path, exc) from exc


def frame(paths: Sequence[str], *, storage_options: Mapping[str, Any] | None = None) -> Any:
    """The files' points as one dask dataframe, one partition per range of ``sources.las-chunk-points``.

    Headers are read here (point counts, dimensions): a file that is not LAS/LAZ is an
    InputError naming it before anything runs.
    """
    import dask.dataframe as dd

    opts = remote_options(paths, storage_options)
    step = int(config.get("sources.las-chunk-points"))
    ranges: list[tuple[str, int, int]] = []
    meta = None
    for p in paths:
        with _open(p, opts) as reader:
            n = int(reader.header.point_count)
            head = _points(p, reader, 0, 0)
        if meta is not None and list(head.columns) != list(meta.columns):
            raise InputError(f"{p!r}: point dimensions {list(head.columns)} differ from the first file's "
                             f"{list(meta.columns)}")
        meta = head if meta is None else meta
        ranges += [(p, s, min(step, n - s)) for s in range(0, n, step)] or [(p, 0, 0)]
    return dd.from_map(_range, [r[0] for r in ranges], [r[1] for r in ranges], [r[2] for r in ranges], opts=opts,
                       meta=meta, enforce_metadata=False)


def read(path: str, *, columns: ColumnMap | None = None, storage_options: Mapping[str, Any] | None = None) -> Geometry:
    """The whole file as point geometry, read with laspy's chunk iterator."""
    import pandas as pd

    step = int(config.get("sources.las-chunk-points"))
    with _open(path, remote_options([path], storage_options)) as reader:
        with _unreadable_as_input(path):
            blocks = [pd.DataFrame(_columns(chunk)) for chunk in reader.chunk_iterator(step)]
        blocks = blocks or [_points(path, reader, 0, 0)]
    return geometry_from_frame(pd.concat(blocks, ignore_index=True), path, columns)


def _point_format(path: str, attrs: Mapping[str, np.ndarray]) -> int:
    """The smallest point format that has every standard dimension named by ``attrs`` and holds
    their values exactly (classification 0..31 fits format 0's five bits, 0..255 needs 6)."""
    import laspy

    standard = {d for f in range(11) for d in laspy.PointFormat(f).dimension_names}
    wanted = sorted(set(attrs) & standard)
    misfit = None
    for fmt in WRITE_FORMATS:
        point_format = laspy.PointFormat(fmt)
        if not set(wanted) <= set(point_format.dimension_names):
            continue
        misfits = [m for k in wanted if (m := _misfit(path, k, attrs[k], point_format.dimension_by_name(k)))]
        if not misfits:
            return fmt
        misfit = misfits[0]  # formats come smallest first: the last is the widest that has the dimensions
    if misfit is not None:
        raise InputError(misfit)
    waveform = sorted(set(wanted) - {d for f in WRITE_FORMATS for d in laspy.PointFormat(f).dimension_names})
    if waveform:  # formats 4, 5, 9, 10 point into waveform data, which a store does not keep
        raise InputError(f"{path}: the waveform packet dimensions {waveform} point into waveform data a store does "
                         f"not keep, so no waveform point format (4, 5, 9, 10) is written; export to a table "
                         f"(.parquet) to keep them")
    raise InputError(f"no LAS point format holds the dimensions {wanted} together")


def _misfit(path: str, name: str, values: np.ndarray, dim: Any) -> str | None:
    """Why a standard LAS dimension of this name cannot hold the attribute exactly, or None
    (laspy would cast it: a float ``intensity`` in [0, 1] became 0 everywhere)."""
    floating = dim.kind.name == "FloatingPoint"
    if values.dtype.kind == "b" or not len(values) or (floating and values.dtype.kind == "f"):
        return None  # booleans fit every field; float32 and float64 fit a double
    v = values.astype(np.float64) if values.dtype.kind in "fc" else values
    low, high = v.min(), v.max()
    if values.dtype.kind in "iu":
        if floating and max(abs(int(low)), abs(int(high))) <= 2**53:
            return None
        if not floating and dim.min <= low and high <= dim.max:
            return None
    elif not floating and np.isfinite(v).all() and (v == np.round(v)).all() and dim.min <= low and high <= dim.max:
        return None
    held = "floating-point numbers" if floating else f"integers {dim.min}..{dim.max}"
    return (f"{path!r}: attribute {name!r} ({values.dtype}, values {low}..{high}) does not fit LAS's standard "
            f"{name!r} dimension, which holds {held}: convert it, or give it another name to write it as an "
            "extra-bytes dimension")


def _grid(path: str, positions: np.ndarray, scale: float | None) -> tuple[float, np.ndarray]:
    """``(scale, offsets)`` of the 32-bit integer grid the coordinates are written on.

    Offsets are 0 while the coordinates fit the integers, else the floor of the minimum.  A
    given ``scale`` grows by powers of ten until the extent fits.  Without one, the coarsest of
    0.001 .. 1e-9 on which every coordinate lies (to a thousandth of a step: a LAS input at
    0.0001 exported at a fixed 0.001 lost its last digit), else the finest that fits, else
    0.001 grown as a given scale.  Whichever way it is chosen, coordinates the grid does not
    hold are rounded with a warning naming the step and the largest change (an extent past
    2**31 thousandths was rounded to 0.01 or coarser without one)."""
    if not np.isfinite(positions).all():  # no grid holds them: the growing scale never fitted (a hang)
        row = int(np.argmin(np.isfinite(positions).all(axis=1)))
        raise InputError(f"{path!r}: point {row} has the position {positions[row].tolist()}; LAS holds finite "
                         "coordinates only")
    if scale is not None and not (np.isfinite(scale) and scale > 0):
        raise InputError(f"{path!r}: the LAS scale {scale!r} is not a finite positive number")
    low, high = (positions.min(axis=0), positions.max(axis=0)) if len(positions) else (np.zeros(3), np.zeros(3))

    def offsets_for(step: float) -> np.ndarray:
        with np.errstate(over="ignore"):
            return np.zeros(3) if max(abs(low).max(), abs(high).max()) / step < 2**31 - 1 else np.floor(low)

    def fits(step: float, offsets: np.ndarray) -> bool:
        with np.errstate(over="ignore"):  # an extent past float64's range is inf: fits no step
            return float((high - offsets).max()) / step < 2**31 - 1 and float((offsets - low).max()) / step < 2**31

    def change(step: float, offsets: np.ndarray) -> float:
        """The largest distance a coordinate moves on the grid (laspy rounds to the nearest integer)."""
        return float(np.abs(np.round((positions - offsets) / step) * step + offsets - positions).max(initial=0.0))

    chosen, why = None, "the given scale"
    if scale is None:
        for step in (1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9):
            offsets = offsets_for(step)
            if not fits(step, offsets):
                break
            chosen, why = (step, offsets), "the finest whose integers hold the extent"
            if change(step, offsets) <= step / 1000:
                return chosen
        if chosen is None:  # an extent past 2**31 thousandths: the given-scale rule from 0.001
            scale = 0.001
    if chosen is None:
        given, offsets = scale, offsets_for(scale)
        while not fits(scale, offsets) and scale < np.inf:  # bounded: about 300 steps reach inf
            scale *= 10
        if not fits(scale, offsets):
            raise InputError(f"{path!r}: the coordinates span {low.tolist()} .. {high.tolist()}, more than LAS's "
                             "32-bit integers hold at any scale")
        chosen = scale, offsets
        if scale != given:
            why = f"{given:g} grown by powers of ten until its integers hold the extent"
    moved = change(*chosen)
    if moved > chosen[0] / 1000:
        warnings.warn(f"{path}: LAS coordinates rounded to a step of {chosen[0]:g} ({why}); the largest change is "
                      f"{moved:.3g}", UserWarning, stacklevel=3)
    return chosen


def _extra_name(name: str) -> bool:
    """Whether an extra-bytes record can hold ``name``: at most 32 bytes of UTF-8 and no NUL.  A lone
    surrogate (a file name decoded with surrogateescape) has no UTF-8 spelling: it was a raw UnicodeEncodeError."""
    try:
        return len(name.encode()) <= EXTRA_NAME_BYTES and "\0" not in name
    except UnicodeEncodeError:
        return False


def write(path: str, data: Any, *, scale: float | None = None, **_: Any) -> None:
    """A point cloud as LAS (LAZ for ``.laz``) on the coordinate grid of :func:`_grid`: ``scale``
    fixes its step, else it is the coarsest on which the coordinates lie."""
    import laspy

    g = as_geometry(data)
    if g.positions.shape[1] != 3:
        raise InputError(f"{path!r}: LAS holds 3-D points; the store's are {g.positions.shape[1]}-D")
    attrs = {k: np.asarray(v) for k, v in g.attributes.items()}
    # laspy's scaled x, y, z and raw X, Y, Z are the coordinates: an attribute under one replaced them
    gp.refuse_clashes(path, "attributes", attrs, ("x", "y", "z", *RAW_AXES,
                                                  *(("object_id",) if g.object_ids is not None else ())))
    unfit = sorted(k for k in attrs if not _extra_name(k))
    if unfit:  # laspy raised its own "bytes too long"; a NUL would cut the name short on read
        raise InputError(f"{path!r}: attribute names {unfit} do not fit a LAS extra-bytes name ({EXTRA_NAME_BYTES} "
                         "bytes of UTF-8, which cannot spell a lone surrogate; no NUL); rename them to write this file")
    if g.object_ids is not None:
        attrs["object_id"] = np.asarray(g.object_ids, dtype=np.int64)
    bad = [k for k, v in attrs.items() if v.ndim != 1]
    if bad:
        raise InputError(f"{path!r}: attributes {bad} have several components; LAS dimensions hold one")
    gp.warn_unstored(path, "LAS", g.object_attributes)  # a point's dimensions; an object has no row
    fmt = _point_format(path, attrs)
    header = laspy.LasHeader(point_format=fmt, version="1.4" if fmt >= 6 else "1.2")
    step, offsets = _grid(path, np.asarray(g.positions, dtype=np.float64), scale)
    header.offsets, header.scales = offsets, np.full(3, step)
    standard = set(header.point_format.dimension_names)
    extra = [k for k in attrs if k not in standard]
    header.add_extra_dims([laspy.ExtraBytesParams(k, attrs[k].dtype if attrs[k].dtype != bool else np.uint8)
                           for k in extra])
    las = laspy.LasData(header)
    las.x, las.y, las.z = g.positions[:, 0], g.positions[:, 1], g.positions[:, 2]
    for k, v in attrs.items():
        las[k] = v
    with gp.os_errors(path, "written"):
        las.write(path)


FORMAT = FileFormat("las", (".las", ".laz"), ("points",), read, write,
                    "ASPRS LAS point cloud; .laz compressed (laspy with lazrs)")
