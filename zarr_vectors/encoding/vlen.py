"""The zarr ``vlen-bytes`` chunk framing (docs/format.md §2.2).

An uncompressed chunk object is ``u32 item_count`` followed, per item, by ``u32 byte_len``
and the bytes. Grid arrays hold exactly one item per chunk (one spatial cell), so they get
a fast path; 1-D vlen arrays (manifests, groups) hold one item per row.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import overload

import numpy as np

from zarr_vectors.errors import EncodingError, InputError

MAX_ITEM_BYTES = 2**32 - 1
"""Largest item a ``u32`` length can describe (docs/format.md §2.2, docs/decisions.md D13)."""

_U32 = struct.Struct("<I")
_SINGLE = struct.Struct("<II")


def framed_size(num_items: int, payload_bytes: int) -> int:
    """Bytes of a vlen-bytes chunk of ``num_items`` items holding ``payload_bytes`` in all."""
    return 4 + 4 * int(num_items) + int(payload_bytes)


def frame_items(items: Sequence[bytes | memoryview], *, count: int | None = None) -> bytes:
    """Frame ``items`` as one vlen-bytes chunk, padded with empty items to ``count`` items.

    Headers and payloads are interleaved with one vectorised scatter rather than a
    per-item join, because manifest chunks hold up to 16 384 rows; :class:`FramedItems`
    are framed from their buffer, without a bytes object per item.
    """
    framed = FramedItems.of(items)
    n = len(framed) if count is None else count
    if n > MAX_ITEM_BYTES:
        raise InputError(f"vlen framing: {n} items exceed the u32 item count")
    if n < len(framed):
        raise InputError(f"vlen framing: {len(framed)} items do not fit in {n}")
    _refuse_long_items(framed.lengths)
    lengths = np.zeros(n, dtype=np.int64)
    lengths[: len(framed)] = framed.lengths
    out, _ = u32_led(lengths, lengths, framed.payload(), skip=4)
    out[:4] = np.frombuffer(_U32.pack(n), dtype=np.uint8)
    return out.tobytes()


def _refuse_long_items(lengths: np.ndarray) -> None:
    if len(lengths) and int(lengths.max()) > MAX_ITEM_BYTES:
        big = int(np.argmax(lengths))
        raise InputError(
            f"vlen framing: item {big} has {int(lengths[big])} bytes, more than the "
            f"{MAX_ITEM_BYTES}-byte u32 limit"
        )


def u32_led(
    words: np.ndarray, sizes: np.ndarray, bodies: bytes | memoryview | np.ndarray, *, skip: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``bodies`` (back to back, ``sizes[i]`` bytes each), each led by the little-endian u32 ``words[i]``,
    after ``skip`` bytes left to the caller: ``(bytes as uint8, where each word starts)``.  One
    vectorised scatter, not a join per body: the layout of vlen items (their lengths) and of a
    manifest row (its block count)."""
    ends = np.cumsum(4 + sizes)
    starts = skip + ends - (4 + sizes)
    out = np.empty(skip + (int(ends[-1]) if len(ends) else 0), dtype=np.uint8)
    word_bytes = (starts[:, None] + np.arange(4)).ravel()
    is_word = np.zeros(out.size, dtype=bool)
    is_word[:skip] = True
    is_word[word_bytes] = True
    out[word_bytes] = words.astype("<u4").view(np.uint8)
    out[~is_word] = np.frombuffer(bodies, dtype=np.uint8)
    return out, starts


class FramedItems(Sequence[bytes]):
    """The items of vlen-bytes chunks in one buffer: item ``i`` is ``buffer[starts[i]:starts[i] + lengths[i]]``.

    What a reader of many rows decodes from (the manifests of a streamline level: ~2*10^4
    rows) without a bytes object per row; indexing gives an item's bytes, slicing a view.
    """

    __slots__ = ("buffer", "lengths", "starts")

    def __init__(self, buffer: bytes, starts: np.ndarray, lengths: np.ndarray) -> None:
        self.buffer, self.starts, self.lengths = buffer, starts, lengths

    @classmethod
    def of(cls, items: Sequence[bytes | memoryview]) -> FramedItems:
        """Items given one by one, joined into one buffer."""
        if isinstance(items, FramedItems):
            return items
        lengths = np.fromiter(map(len, items), dtype=np.int64, count=len(items))
        _refuse_long_items(lengths)  # before the join: refusing a 4 GiB item must not read it
        buffer = b"".join(items)
        if int(lengths.sum()) != len(buffer):
            raise InputError("vlen framing: items must be byte buffers (bytes or 1-byte memoryviews)")
        return cls(buffer, np.cumsum(lengths) - lengths, lengths)

    @classmethod
    def concat(cls, parts: Sequence[FramedItems]) -> FramedItems:
        """The items of ``parts`` in order, in one buffer (one copy; none for a single part)."""
        if len(parts) == 1:
            return parts[0]
        shift = np.cumsum([0] + [len(p.buffer) for p in parts[:-1]]).tolist()
        none = [np.zeros(0, np.int64)]
        return cls(
            b"".join(p.buffer for p in parts),
            np.concatenate([p.starts + k for p, k in zip(parts, shift)] or none),
            np.concatenate([p.lengths for p in parts] or none),
        )

    def __len__(self) -> int:
        return len(self.starts)

    def payload(self) -> bytes | memoryview:
        """The items' bytes end to end: a view of the buffer where they lie so, else a join."""
        if not len(self.starts):
            return b""
        first = int(self.starts[0])
        if np.array_equal(self.starts[1:], first + np.cumsum(self.lengths[:-1])):
            return memoryview(self.buffer).cast("B")[first : first + int(self.lengths.sum())]
        return b"".join(self)

    def __iter__(self) -> Iterator[bytes]:
        buffer = self.buffer
        return (buffer[start : start + length] for start, length in zip(self.starts.tolist(), self.lengths.tolist()))

    @overload
    def __getitem__(self, index: int) -> bytes: ...

    @overload
    def __getitem__(self, index: slice) -> FramedItems: ...

    def __getitem__(self, index: int | slice) -> bytes | FramedItems:
        if isinstance(index, slice):
            return FramedItems(self.buffer, self.starts[index], self.lengths[index])
        start = int(self.starts[index])
        return self.buffer[start : start + int(self.lengths[index])]


def item_spans(buf: bytes | memoryview) -> FramedItems:
    """The items of a vlen-bytes chunk, where they lie in it; truncation or trailing bytes raise.

    Item positions depend on every earlier length, so this walks the lengths one by one
    (lists: a numpy element store per item costs more than the walk) -- except along a run of
    items of one length (a manifest's rows, an object index's absent ids), whose length words
    are gathered at the item stride, a doubling window at a time: 1M absent ids took 0.67 s
    one by one.
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
    starts: list[np.ndarray] = []
    lengths: list[np.ndarray] = []
    pos, i = 4, 0
    while i < n:
        walked_starts: list[int] = []
        walked_lengths: list[int] = []
        pos, i = _walk(mv, pos, i, n, walked_starts, walked_lengths)
        starts.append(np.array(walked_starts, dtype=np.int64))
        lengths.append(np.array(walked_lengths, dtype=np.int64))
        if i < n:  # a run of one length starts at item i
            length, stride = walked_lengths[-1], 4 + walked_lengths[-1]
            count = _same_length_run(mv, pos, n - i, length)
            starts.append(np.arange(pos + 4, pos + 4 + count * stride, stride, dtype=np.int64))
            lengths.append(np.full(count, length, dtype=np.int64))
            pos, i = pos + count * stride, i + count
    if pos != size:
        raise EncodingError(f"vlen framing: {size - pos} trailing bytes after item {n - 1}")
    data = buf if isinstance(buf, bytes) else mv.tobytes()
    none = np.zeros(0, dtype=np.int64)
    return FramedItems(data, np.concatenate(starts or [none]), np.concatenate(lengths or [none]))


_RUN_ITEM_BYTES = 256  # longest item whose runs are gathered (a manifest row of one 3-D block is 37)
_RUN_START = 32  # equal lengths in a row that start a gathered run


def _walk(mv: memoryview, pos: int, first: int, n: int, starts: list[int], lengths: list[int]) -> tuple[int, int]:
    """Items from ``first`` one by one (appended to ``starts`` and ``lengths``), until the end or
    until :data:`_RUN_START` items in a row have declared one length (a run: cheaper gathered at
    its stride); where it stopped.  A gather costs ~10 us, ~50 items' walk: short runs stay in
    the walk."""
    size, unpack, most, start = len(mv), _U32.unpack_from, _RUN_ITEM_BYTES, _RUN_START
    add_start, add_length = starts.append, lengths.append
    before, same = -1, 0
    for i in range(first, n):
        if pos + 4 > size:
            raise EncodingError(f"vlen framing: truncated in the length of item {i}")
        (length,) = unpack(mv, pos)
        pos += 4
        if pos + length > size:
            raise EncodingError(f"vlen framing: item {i} declares {length} bytes, only {size - pos} remain")
        add_start(pos)
        add_length(length)
        pos += length
        if length == before:
            same += 1
            if same >= start and length <= most and i + 1 < n:
                return pos, i + 1
        else:
            before, same = length, 1
    return pos, n


def _same_length_run(mv: memoryview, pos: int, most: int, length: int) -> int:
    """How many of the (at most ``most``) items from ``pos`` on also declare ``length`` bytes:
    their length words read at the item stride in doubling windows, each a strided view of the
    chunk (whole items only: each is checked to fit before it is counted)."""
    stride = 4 + length  # bytes of one item, its length word included
    data = np.frombuffer(mv, dtype=np.uint8)
    window, count = 16, 0
    while count < most:
        at = pos + count * stride
        fits = min(most - count, (len(mv) - at) // stride, window)
        if fits <= 0:
            break
        rows = np.lib.stride_tricks.as_strided(data[at:], shape=(fits, 4), strides=(stride, 1), writeable=False)
        other = np.flatnonzero(np.ascontiguousarray(rows).view("<u4").ravel() != length)
        count += int(other[0]) if other.size else fits
        if other.size:
            break
        window *= 2
    return count


def unframe_items(buf: bytes | memoryview) -> list[bytes]:
    """Split a vlen-bytes chunk into its items; truncation or trailing bytes raise."""
    return list(item_spans(buf))


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
