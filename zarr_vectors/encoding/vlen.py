"""The zarr ``vlen-bytes`` chunk framing (docs/format.md §2.2).

An uncompressed chunk object is ``u32 item_count`` followed, per item, by ``u32 byte_len``
and the bytes. Grid arrays hold exactly one item per chunk (one spatial cell), so they get
a fast path; 1-D vlen arrays (manifests, groups) hold one item per row.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

from zarr_vectors.errors import EncodingError, InputError

MAX_ITEM_BYTES = 2**32 - 1
"""Largest item a ``u32`` length can describe (docs/format.md §2.2, docs/decisions.md D13)."""

_U32 = struct.Struct("<I")
_SINGLE = struct.Struct("<II")


def framed_size(num_items: int, payload_bytes: int) -> int:
    """Bytes of a vlen-bytes chunk of ``num_items`` items holding ``payload_bytes`` in all."""
    return 4 + 4 * int(num_items) + int(payload_bytes)


def frame_items(items: Sequence[bytes | memoryview]) -> bytes:
    """Frame ``items`` as one vlen-bytes chunk.

    Headers and payloads are interleaved with one vectorised scatter rather than a
    per-item join, because manifest chunks hold up to 16 384 rows.
    """
    n = len(items)
    if n > MAX_ITEM_BYTES:
        raise InputError(f"vlen framing: {n} items exceed the u32 item count")
    lengths = np.fromiter(map(len, items), dtype=np.int64, count=n)
    if n and int(lengths.max()) > MAX_ITEM_BYTES:
        big = int(np.argmax(lengths))
        raise InputError(
            f"vlen framing: item {big} has {int(lengths[big])} bytes, more than the "
            f"{MAX_ITEM_BYTES}-byte u32 limit"
        )
    payload = b"".join(items)
    if int(lengths.sum()) != len(payload):
        raise InputError("vlen framing: items must be byte buffers (bytes or 1-byte memoryviews)")
    out = np.empty(4 + 4 * n + len(payload), dtype=np.uint8)
    before = np.cumsum(lengths) - lengths
    header_pos = (4 + 4 * np.arange(n) + before)[:, None] + np.arange(4)
    is_header = np.zeros(out.size, dtype=bool)
    is_header[:4] = True
    is_header[header_pos.ravel()] = True
    out[:4] = np.frombuffer(_U32.pack(n), dtype=np.uint8)
    out[header_pos.ravel()] = lengths.astype("<u4").view(np.uint8)
    out[~is_header] = np.frombuffer(payload, dtype=np.uint8)
    return out.tobytes()


def unframe_items(buf: bytes | memoryview) -> list[bytes]:
    """Split a vlen-bytes chunk into its items; truncation or trailing bytes raise.

    Item positions depend on every earlier length, so this walks the items one by one.
    """
    mv = memoryview(buf).cast("B")
    size = len(mv)
    if size < 4:
        raise EncodingError(f"vlen framing: {size} bytes, shorter than the 4-byte item count")
    (n,) = _U32.unpack_from(mv, 0)
    if 4 + 4 * n > size:
        raise EncodingError(
            f"vlen framing: {n} items need at least {4 + 4 * n} bytes, chunk has {size}"
        )
    items: list[bytes] = []
    pos = 4
    for i in range(n):
        if pos + 4 > size:
            raise EncodingError(f"vlen framing: truncated in the length of item {i}")
        (length,) = _U32.unpack_from(mv, pos)
        pos += 4
        if pos + length > size:
            raise EncodingError(
                f"vlen framing: item {i} declares {length} bytes, only {size - pos} remain"
            )
        items.append(bytes(mv[pos : pos + length]))
        pos += length
    if pos != size:
        raise EncodingError(f"vlen framing: {size - pos} trailing bytes after item {n - 1}")
    return items


def frame_single(payload: bytes | memoryview) -> bytes:
    """Frame one grid-cell payload (``01000000 <len> <payload>``)."""
    mv = memoryview(payload).cast("B")
    if len(mv) > MAX_ITEM_BYTES:
        raise InputError(
            f"vlen framing: cell payload of {len(mv)} bytes exceeds the "
            f"{MAX_ITEM_BYTES}-byte u32 limit; use a smaller chunk_shape"
        )
    return b"".join((_SINGLE.pack(1, len(mv)), mv))


def unframe_single(buf: bytes | memoryview) -> memoryview:
    """Return the one item of a grid-cell chunk as a zero-copy view; anything else raises."""
    mv = memoryview(buf).cast("B")
    size = len(mv)
    if size < 8:
        raise EncodingError(f"vlen framing: {size} bytes, shorter than a one-item header (8)")
    n, length = _SINGLE.unpack_from(mv, 0)
    if n != 1:
        raise EncodingError(f"vlen framing: grid cell holds {n} items, expected exactly 1")
    if 8 + length != size:
        what = "truncated" if 8 + length > size else f"{size - 8 - length} trailing bytes"
        raise EncodingError(
            f"vlen framing: item declares {length} bytes, chunk has {size - 8} ({what})"
        )
    return mv[8:]
