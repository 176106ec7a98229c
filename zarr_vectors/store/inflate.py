"""Decompression with a ceiling: no stored cell inflates past the bytes it may hold.

Stores are data from elsewhere, and a compressed stream can describe far more output than
it occupies (a 196 KB zstd frame of RLE blocks is 6 GiB).  Each decoder here learns the
decoded size before allocating it, or decodes by streaming with a maximum output, and
raises :class:`~zarr_vectors.errors.ResourceLimitError` (naming ``where`` and the limit) as
soon as the output would pass ``limit``.  Valid data decodes to exactly the bytes
numcodecs (what zarr-python runs) produces, and at its speed: a zstd frame that declares
its content size -- every frame numcodecs, zarr-python and the reference write -- is
checked from its header and decoded by numcodecs itself; only frames without a content
size are streamed (docs/DESIGN.md, "Decompression bounds").
"""

from __future__ import annotations

import struct
import sys
import zlib
from collections.abc import Callable
from typing import Any

import numcodecs.zstd

from zarr_vectors.errors import EncodingError, ResourceLimitError

if sys.version_info >= (3, 14):
    from compression import zstd as _zstd_stream
else:  # the standard library's module, backported
    from backports import zstd as _zstd_stream

_ZSTD_MAGIC = 0xFD2FB528
_SKIPPABLE_MASK = 0xFFFFFFF0
_SKIPPABLE_MAGIC = 0x184D2A50
_DID_BYTES = (0, 1, 2, 4)
_FCS_BYTES = (0, 2, 4, 8)
_BLOSC_HEADER = struct.Struct("<BBBBIII")
_STEP = 32 << 20  # streamed output is produced in steps of this size, each checked against the limit


def too_large(where: str, limit: int, what: str = "decodes to") -> ResourceLimitError:
    """The error for output past ``limit``: names the cell (``where``, may be empty) and the bound."""
    message = (
        f"{what} more than {limit} bytes, the most it may hold "
        "(its expected size from the metadata, capped by zarr_vectors.limits.max-decoded-bytes)"
    )
    return ResourceLimitError(f"{where}: {message}" if where else message)


# ---------------------------------------------------------------------------------------
# zstd
# ---------------------------------------------------------------------------------------
def zstd_content_size(data: bytes | memoryview) -> int | None:
    """Total decoded size of a run of zstd frames as their headers declare it; None when a
    frame does not declare one.

    Walks the frame and block headers only (as libzstd's ``ZSTD_findDecompressedSize``
    does), so it costs one step per 128 KiB block.  Malformed framing raises EncodingError.
    """
    mv = memoryview(data).cast("B")
    size = len(mv)
    if size == 0:
        raise EncodingError("zstd: empty input is not a frame")
    total = 0
    pos = 0
    while pos < size:
        if pos + 4 > size:
            raise EncodingError(f"zstd: {size - pos} trailing bytes after the last frame")
        magic = int.from_bytes(mv[pos : pos + 4], "little")
        if magic & _SKIPPABLE_MASK == _SKIPPABLE_MAGIC:
            if pos + 8 > size:
                raise EncodingError("zstd: truncated skippable frame header")
            pos += 8 + int.from_bytes(mv[pos + 4 : pos + 8], "little")
            if pos > size:
                raise EncodingError("zstd: truncated skippable frame")
            continue
        if magic != _ZSTD_MAGIC:
            raise EncodingError(f"zstd: bad frame magic {bytes(mv[pos : pos + 4]).hex()} at byte {pos}")
        if pos + 5 > size:
            raise EncodingError("zstd: truncated frame header")
        fhd = mv[pos + 4]
        single_segment = (fhd >> 5) & 1
        fcs_bytes = _FCS_BYTES[fhd >> 6] or single_segment
        if fcs_bytes == 0:
            return None
        start = pos + 5 + (1 - single_segment) + _DID_BYTES[fhd & 3]
        end = start + fcs_bytes
        if end > size:
            raise EncodingError("zstd: truncated frame header")
        fcs = int.from_bytes(mv[start:end], "little") + (256 if fcs_bytes == 2 else 0)
        total += fcs
        pos = end
        while True:  # blocks: 3-byte headers, RLE blocks hold one byte
            if pos + 3 > size:
                raise EncodingError("zstd: truncated block header")
            header = int.from_bytes(mv[pos : pos + 3], "little")
            kind = (header >> 1) & 3
            if kind == 3:
                raise EncodingError(f"zstd: reserved block type at byte {pos}")
            pos += 3 + (1 if kind == 1 else header >> 3)
            if header & 1:
                break
        pos += 4 if fhd & 4 else 0
        if pos > size:
            raise EncodingError("zstd: truncated frame")
    return total


def inflate_zstd(data: bytes | memoryview, limit: int, where: str) -> bytes:
    """A zstd stream's output, at most ``limit`` bytes."""
    declared = zstd_content_size(data)
    if declared is not None:
        if declared > limit:
            raise too_large(where, limit, f"declares {declared} decoded bytes,")
        try:
            return bytes(numcodecs.zstd.decompress(data))
        except (RuntimeError, ValueError) as exc:
            raise EncodingError(f"zstd: {exc}") from None
    return _stream_zstd(data, limit, where)


def _stream_zstd(data: bytes | memoryview, limit: int, where: str) -> bytes:
    """Frames without a content size, decoded frame by frame in steps, at most ``limit`` bytes."""
    out = bytearray()
    rest: bytes | memoryview = data
    while rest:
        frame = _zstd_stream.ZstdDecompressor()
        pending = rest
        while not frame.eof:
            try:
                piece = frame.decompress(pending, max_length=min(_STEP, limit - len(out) + 1))
            except _zstd_stream.ZstdError as exc:
                raise EncodingError(f"zstd: {exc}") from None
            _grow(out, piece, limit, where)
            if not piece and not frame.eof and (frame.needs_input or not pending):
                raise EncodingError("zstd: truncated frame (the input ends inside it)")
            pending = b""
        rest = frame.unused_data
    return bytes(out)


def _grow(out: bytearray, piece: bytes, limit: int, where: str) -> None:
    """Append one step's output, refusing it past ``limit`` (so a bomb costs at most the limit plus a step)."""
    out += piece
    if len(out) > limit:
        raise too_large(where, limit)


# ---------------------------------------------------------------------------------------
# gzip
# ---------------------------------------------------------------------------------------
def inflate_gzip(data: bytes | memoryview, limit: int, where: str) -> bytes:
    """gzip members, at most ``limit`` bytes in all.

    Accepts exactly what numcodecs' GZip (Python's gzip module) accepts: one or more
    members, zero padding after a member, nothing else (an empty input is empty).
    """
    out = bytearray()
    rest = bytes(data)
    while rest:
        member = zlib.decompressobj(16 + zlib.MAX_WBITS)
        pending = rest
        while not member.eof:
            try:
                piece = member.decompress(pending, min(_STEP, limit - len(out) + 1))
            except zlib.error as exc:
                raise EncodingError(f"gzip: {exc}") from None
            _grow(out, piece, limit, where)
            pending = member.unconsumed_tail
            if not piece and not pending and not member.eof:
                raise EncodingError("gzip: truncated member (the input ends inside it)")
        rest = member.unused_data.lstrip(b"\0")
    return bytes(out)


# ---------------------------------------------------------------------------------------
# blosc
# ---------------------------------------------------------------------------------------
def inflate_blosc(
    data: bytes | memoryview, limit: int, where: str, decode: Callable[[bytes | memoryview], Any]
) -> bytes:
    """A blosc buffer decoded by ``decode`` (numcodecs), after its header is checked.

    blosc allocates the uncompressed size its 16-byte header declares, so that size is
    checked against ``limit``, and the compressed size against the bytes actually stored
    (blosc would otherwise read past them).
    """
    if len(data) < _BLOSC_HEADER.size:
        raise EncodingError(f"blosc: {len(data)} bytes, shorter than the 16-byte header")
    _, _, _, _, nbytes, _, cbytes = _BLOSC_HEADER.unpack_from(data, 0)
    if nbytes > limit:
        raise too_large(where, limit, f"declares {nbytes} decoded bytes,")
    if cbytes != len(data):
        raise EncodingError(f"blosc: header declares {cbytes} compressed bytes, {len(data)} are stored")
    try:
        return bytes(decode(data))
    except (RuntimeError, ValueError, SystemError) as exc:
        raise EncodingError(f"blosc: {exc}") from None
