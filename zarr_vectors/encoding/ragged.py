"""Link cell encodings (docs/format.md §6.5).

The intra-chunk array (delta 0, all offsets zero) stores a flat row dump whose groups live
in the ``link_fragments`` sidecar; every other link array stores a self-describing blob
``i64 K, i64 off[K] (byte offsets into the data), data`` so that appends add groups
without touching a sidecar.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import DTypeLike

from zarr_vectors.errors import EncodingError, InputError


def _row_dtype(dtype: DTypeLike) -> np.dtype:
    """The on-disk element type: an integer type, always little-endian (docs/format.md §6)."""
    dt = np.dtype(dtype)
    if dt.kind not in "iu" or dt.byteorder == ">":
        raise InputError(f"ragged: element dtype must be a little-endian integer type, got {dt.str}")
    return dt.newbyteorder("<")


def _as_rows(rows: np.ndarray, dt: np.dtype, what: str) -> np.ndarray:
    """``rows`` as a C-contiguous 2-D array of ``dt``; values that do not fit raise."""
    arr = np.asarray(rows)
    if arr.ndim != 2:
        raise InputError(f"ragged: {what} must be 2-D (rows, width), got shape {arr.shape}")
    if arr.size == 0:
        return np.zeros(arr.shape, dtype=dt)
    if arr.dtype.kind not in "iu":
        raise InputError(f"ragged: {what} must be integers, got dtype {arr.dtype}")
    if not np.can_cast(arr.dtype, dt):
        info = np.iinfo(dt)
        lo, hi = int(arr.min()), int(arr.max())
        if lo < info.min or hi > info.max:
            raise InputError(f"ragged: {what} has values in [{lo}, {hi}], outside {dt}")
    return np.ascontiguousarray(arr, dtype=dt)


def encode_ragged_ints(rows: np.ndarray, dtype: DTypeLike = "<i8") -> bytes:
    """Flat row dump of a 2-D integer array (the intra-chunk link cell)."""
    return _as_rows(rows, _row_dtype(dtype), "rows").tobytes()


def decode_ragged_ints(buf: bytes | memoryview, width: int, dtype: DTypeLike = "<i8") -> np.ndarray:
    """Rows ``(n, width)`` of a flat dump, as a read-only view of ``buf``."""
    dt = _row_dtype(dtype)
    if width < 1:
        raise InputError(f"ragged: width must be >= 1, got {width}")
    mv = memoryview(buf).cast("B")
    row_bytes = dt.itemsize * width
    if len(mv) % row_bytes:
        raise EncodingError(
            f"ragged ints: {len(mv)} bytes is not a whole number of {row_bytes}-byte rows "
            f"(width {width} x {dt})"
        )
    return np.frombuffer(mv, dtype=dt).reshape(-1, width)


def encode_ragged_blob(groups: Sequence[np.ndarray], dtype: DTypeLike = "<i8") -> bytes:
    """Self-describing blob of ``K = len(groups)`` groups of equal-width rows."""
    dt = _row_dtype(dtype)
    arrays = [_as_rows(g, dt, f"group {k}") for k, g in enumerate(groups)]
    widths = sorted({a.shape[1] for a in arrays})
    if len(widths) > 1:
        raise InputError(f"ragged blob: groups have different widths {widths}")
    header = np.zeros(1 + len(arrays), dtype="<i8")
    header[0] = len(arrays)
    np.cumsum([a.nbytes for a in arrays[:-1]], out=header[2:])
    return b"".join([header.tobytes(), *(a.tobytes() for a in arrays)])


def ragged_blob_max_size(rows: int, row_bytes: int) -> int:
    """Most bytes a blob of at most ``rows`` rows can take: its ``i64 K, i64 off[K]`` header
    with ``K <= rows`` (writers store no empty group), then the rows."""
    n = max(0, int(rows))
    return 8 * (1 + n) + n * int(row_bytes)


def decode_ragged_blob(
    buf: bytes | memoryview, width: int, dtype: DTypeLike = "<i8"
) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``(n, width)`` and group row starts ``(K + 1,)`` of a blob.

    A payload shorter than 8 bytes, or one holding just ``K = 0``, is empty (as in the
    reference); otherwise the header must describe the data exactly.
    """
    dt = _row_dtype(dtype)
    if width < 1:
        raise InputError(f"ragged: width must be >= 1, got {width}")
    mv = memoryview(buf).cast("B")
    size = len(mv)
    row_bytes = dt.itemsize * width
    empty = (np.zeros((0, width), dtype=dt), np.zeros(1, dtype=np.int64))
    if size < 8:
        return empty
    num_groups = int(np.frombuffer(mv[:8], "<i8")[0])
    if num_groups < 0:
        raise EncodingError(f"ragged blob: negative group count K={num_groups}")
    if num_groups == 0:
        if size != 8:
            raise EncodingError(f"ragged blob: {size - 8} trailing bytes after K=0")
        return empty
    data_start = 8 * (1 + num_groups)
    if data_start > size:
        raise EncodingError(
            f"ragged blob: truncated: K={num_groups} needs a {data_start}-byte header, payload has {size}"
        )
    data_len = size - data_start
    if data_len % row_bytes:
        raise EncodingError(
            f"ragged blob: data section of {data_len} bytes is not a whole number of "
            f"{row_bytes}-byte rows (width {width} x {dt})"
        )
    offsets = np.frombuffer(mv[8:data_start], "<i8").astype(np.int64)
    if offsets[0] != 0:
        raise EncodingError(f"ragged blob: group 0 byte offset {int(offsets[0])} is not 0")
    checks = (
        (np.diff(offsets, prepend=0) < 0, "is smaller than the previous group's"),
        (offsets > data_len, f"lies beyond the {data_len}-byte data section"),
        (offsets % row_bytes != 0, f"is not a multiple of the {row_bytes}-byte row"),
    )
    for bad, why in checks:
        if bad.any():
            k = int(np.argmax(bad))
            raise EncodingError(f"ragged blob: group {k} byte offset {int(offsets[k])} {why}")
    rows = np.frombuffer(mv[data_start:], dtype=dt).reshape(-1, width)
    return rows, np.append(offsets // row_bytes, rows.shape[0])
