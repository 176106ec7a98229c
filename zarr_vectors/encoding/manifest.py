"""Per-object manifests of ``object_index/manifests`` (docs/format.md §6.7).

A manifest row is ``u32 B`` then B blocks ``i64 chunk[D], u8 mode, payload``; mode 0 names
one fragment, mode 1 a run ``start, count``, mode 2 an explicit ``u32 n, i64[n]`` list.
Writers emit modes 0 and 1 only; readers accept all three.
"""

from __future__ import annotations

import functools
import math
import operator
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import overload

import numpy as np

from zarr_vectors import config
from zarr_vectors.encoding.vlen import FramedItems, u32_led
from zarr_vectors.errors import EncodingError, InputError, ResourceLimitError

MODE_SINGLE = 0
MODE_RANGE = 1
MODE_EXPLICIT = 2
_FRAGMENT_LIMIT = 2**32
"""Fragment indices address a cell's FragmentIndex, whose F is a u32."""
MAX_SID_NDIM = (2**31 - 1 - 9) // 8
"""Largest sid_ndim whose mode-0 block record (coords, mode, fragment) numpy can describe."""

_ITER_ROWS = 16384  # rows made at a time when a table of manifests is iterated
_U32 = struct.Struct("<I")
_I64 = struct.Struct("<q")
_RANGE = struct.Struct("<qq")


@dataclass(frozen=True, eq=False)
class ManifestBlock:
    """One block: absolute chunk coords, the fragments it names (expanded) and its mode."""

    chunk: tuple[int, ...]
    fragments: np.ndarray
    mode: int

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ManifestBlock):
            return NotImplemented
        return (
            self.chunk == other.chunk
            and self.mode == other.mode
            and np.array_equal(self.fragments, other.fragments)
        )


@functools.lru_cache(maxsize=None)
def _mode0_dtype(sid_ndim: int) -> np.dtype:
    """Packed record of one mode-0 block (33 bytes for D = 3)."""
    return np.dtype([("chunk", "<i8", (sid_ndim,)), ("mode", "u1"), ("fragment", "<i8")])


def _check_fragments(frags: np.ndarray, block: int | None) -> None:
    """Raise naming the first fragment outside [0, 2**32); ``block=None`` means frags[i] is block i."""
    if frags.size and (frags.min() < 0 or frags.max() >= _FRAGMENT_LIMIT):
        i = int(np.argmax((frags < 0) | (frags >= _FRAGMENT_LIMIT)))
        where = i if block is None else block
        raise EncodingError(f"manifest: block {where} names fragment {int(frags[i])}, outside [0, 2**32)")


def _check_sid_ndim(sid_ndim: object) -> None:
    """A decoder's sid_ndim: an integer >= 1 small enough for a block record to be a numpy type."""
    if not isinstance(sid_ndim, int) or isinstance(sid_ndim, bool) or not 1 <= sid_ndim <= MAX_SID_NDIM:
        raise InputError(f"manifest: sid_ndim must be an integer in [1, {MAX_SID_NDIM}], got {sid_ndim!r}")


def fragment_budget(sid_ndim: int) -> int:
    """Most fragments a decode may expand to: ``zarr_vectors.limits.max-decoded-bytes`` over the
    bytes :func:`decode_manifest_table` spends on each (its row, chunk coords and index, int64).

    A mode-1 block names ``count`` fragments in 16 bytes, so the stored bytes bound nothing:
    this does, before anything is allocated.
    """
    return int(config.get("limits.max-decoded-bytes")) // (8 * (2 + sid_ndim))


def manifest_row_max_size(fragments: int, sid_ndim: int) -> int:
    """Most bytes a manifest row naming at most ``fragments`` fragments can take: the block
    count, then at most one block per fragment, each at most ``8 D + 17`` bytes (a mode-1 run
    or a one-entry mode-2 list; a mode-0 block is ``8 D + 9``).  Blocks naming no fragment
    (a zero-length run or list) are not something a writer emits."""
    return 4 + max(0, int(fragments)) * (8 * int(sid_ndim) + 17)


def decode_manifest(buf: bytes | memoryview, sid_ndim: int, *, max_fragments: int | None = None) -> list[ManifestBlock]:
    """Blocks of one manifest row, in order; anything but an exact, valid row raises.

    Rows made only of mode-0 blocks (all the reference writes) are decoded in one
    vectorised pass; other rows are walked block by block.  Expanded mode-1/2 blocks may
    name at most ``max_fragments`` fragments in all (default :func:`fragment_budget`):
    more raises ResourceLimitError before the expansion is allocated.
    """
    _check_sid_ndim(sid_ndim)
    budget = fragment_budget(sid_ndim) if max_fragments is None else max_fragments
    mv = memoryview(buf).cast("B")
    size = len(mv)
    num_blocks = _block_count(mv, sid_ndim)
    mode0 = _mode0_dtype(sid_ndim)
    if size == 4 + num_blocks * mode0.itemsize:
        rec = np.frombuffer(mv[4:], dtype=mode0)
        if not rec["mode"].any():
            frags = rec["fragment"].astype(np.int64)
            _check_fragments(frags, None)
            return [
                ManifestBlock(tuple(c), frags[b : b + 1], MODE_SINGLE)
                for b, c in enumerate(rec["chunk"].tolist())
            ]
    blocks: list[ManifestBlock] = []
    for b, (chunk, mode, named) in enumerate(_walk_row(mv, sid_ndim, num_blocks)):
        count = named[1] if isinstance(named, tuple) else len(named)
        if count > budget:
            raise ResourceLimitError(
                f"manifest: block {b} (mode {mode}) names {count} fragments, more than the {budget} "
                "zarr_vectors.limits.max-decoded-bytes leaves for this decode"
            )
        budget -= count
        frags = np.arange(named[0], named[0] + count, dtype=np.int64) if isinstance(named, tuple) else named
        blocks.append(ManifestBlock(chunk, frags, mode))
    return blocks


def _block_count(mv: memoryview, sid_ndim: int) -> int:
    """A row's block count, checked against the bytes the row has (every block takes at least 8D + 9)."""
    size = len(mv)
    if size < 4:
        raise EncodingError(f"manifest: {size} bytes, shorter than the 4-byte block count")
    (num_blocks,) = _U32.unpack_from(mv, 0)
    if 4 + num_blocks * (8 * sid_ndim + 5) > size:
        raise EncodingError(
            f"manifest: truncated: {num_blocks} blocks need at least "
            f"{4 + num_blocks * (8 * sid_ndim + 5)} bytes, row has {size}"
        )
    return num_blocks


def _walk_row(
    mv: memoryview, sid_ndim: int, num_blocks: int
) -> list[tuple[tuple[int, ...], int, np.ndarray | tuple[int, int]]]:
    """Every block of a row, checked, unexpanded: ``(chunk, mode, fragments)`` where a mode-1
    run stays ``(start, count)`` -- 16 bytes may name 2**32 fragments, so nothing is expanded here.
    """
    size = len(mv)
    coords_bytes = 8 * sid_ndim
    coords = struct.Struct(f"<{sid_ndim}q")
    blocks: list[tuple[tuple[int, ...], int, np.ndarray | tuple[int, int]]] = []
    pos = 4
    for b in range(num_blocks):
        if pos + coords_bytes + 1 > size:
            raise EncodingError(f"manifest: truncated in the chunk coords or mode of block {b}")
        chunk = coords.unpack_from(mv, pos)
        mode = mv[pos + coords_bytes]
        pos += coords_bytes + 1
        named: np.ndarray | tuple[int, int]
        if mode == MODE_SINGLE:
            if pos + 8 > size:
                raise EncodingError(f"manifest: truncated in the fragment of block {b} (mode 0)")
            named = np.array(_I64.unpack_from(mv, pos), dtype=np.int64)
            pos += 8
        elif mode == MODE_RANGE:
            if pos + 16 > size:
                raise EncodingError(f"manifest: truncated in the start/count of block {b} (mode 1)")
            start, count = _RANGE.unpack_from(mv, pos)
            pos += 16
            if count < 0:
                raise EncodingError(f"manifest: block {b} (mode 1) has negative count {count}")
            if start < 0 or start + count > _FRAGMENT_LIMIT:
                raise EncodingError(
                    f"manifest: block {b} (mode 1) run {start}..{start + count - 1} is outside [0, 2**32)"
                )
            named = (start, count)
        elif mode == MODE_EXPLICIT:
            if pos + 4 > size:
                raise EncodingError(f"manifest: truncated in the count of block {b} (mode 2)")
            (n,) = _U32.unpack_from(mv, pos)
            pos += 4
            if pos + 8 * n > size:
                raise EncodingError(
                    f"manifest: block {b} (mode 2) lists {n} fragments, only {size - pos} bytes remain"
                )
            named = np.frombuffer(mv[pos : pos + 8 * n], "<i8").astype(np.int64)
            pos += 8 * n
        else:
            raise EncodingError(f"manifest: block {b} has unknown mode {mode}")
        if not isinstance(named, tuple):
            _check_fragments(named, b)
        blocks.append((chunk, mode, named))
    if pos != size:
        last = f"block {num_blocks - 1}" if num_blocks else "the block count"
        raise EncodingError(f"manifest: {size - pos} trailing bytes after {last}")
    return blocks


def encode_manifest(
    blocks: Sequence[tuple[Sequence[int], Sequence[int] | np.ndarray]], sid_ndim: int
) -> bytes:
    """One manifest row as the reference writes it (modes 0 and 1 only).

    Each ``(chunk, fragments)`` pair becomes one block per maximal run of consecutive
    fragments: mode 0 for a single fragment, mode 1 for a run of two or more. Order is kept.
    """
    if sid_ndim < 1:
        raise InputError(f"manifest: sid_ndim must be >= 1, got {sid_ndim}")
    coords = struct.Struct(f"<{sid_ndim}q")
    parts: list[bytes] = []
    for b, (chunk, fragments) in enumerate(blocks):
        if len(chunk) != sid_ndim:
            raise InputError(f"manifest: block {b} chunk {tuple(chunk)} does not have {sid_ndim} coords")
        frags = np.asarray(fragments)
        if frags.ndim != 1 or frags.size == 0 or frags.dtype.kind not in "iu":
            raise InputError(f"manifest: block {b} fragments must be a non-empty 1-D integer list")
        if frags.min() < 0 or frags.max() >= _FRAGMENT_LIMIT:
            raise InputError(f"manifest: block {b} fragments must lie in [0, 2**32)")
        try:
            head = coords.pack(*(operator.index(c) for c in chunk))
        except (TypeError, struct.error) as err:
            raise InputError(f"manifest: block {b} chunk {tuple(chunk)} is not int64 coords: {err}") from None
        frags = frags.astype(np.int64)
        cuts = np.flatnonzero(np.diff(frags) != 1) + 1
        starts = np.concatenate(([0], cuts)).tolist()
        ends = np.concatenate((cuts, [frags.size])).tolist()
        for s, e in zip(starts, ends):
            if e - s == 1:
                parts.append(head + bytes((MODE_SINGLE,)) + _I64.pack(int(frags[s])))
            else:
                parts.append(head + bytes((MODE_RANGE,)) + _RANGE.pack(int(frags[s]), e - s))
    return _U32.pack(len(parts)) + b"".join(parts)


def encode_mode0_manifests(
    object_rows: np.ndarray, chunks: np.ndarray, fragments: np.ndarray, num_objects: int
) -> Mode0Manifests:
    """All manifest rows of a level, every block mode 0 (the writer hot path).

    Block i is ``(chunks[i], fragments[i])`` of row ``object_rows[i]``; blocks must be
    sorted by row (stable, so each object's blocks keep their order). Rows with no block
    are the empty manifest ``00000000``. The blocks are checked here; the rows are made
    when asked for (:class:`Mode0Manifests`).
    """
    rows = np.asarray(object_rows)
    chunk_arr = np.asarray(chunks)
    frags = np.asarray(fragments)
    if chunk_arr.ndim != 2 or chunk_arr.shape[1] < 1:
        raise InputError(f"manifest: chunks must have shape (blocks, sid_ndim), got {chunk_arr.shape}")
    num_blocks = chunk_arr.shape[0]
    if rows.shape != (num_blocks,) or frags.shape != (num_blocks,):
        raise InputError(
            f"manifest: {num_blocks} chunks but object_rows {rows.shape} and fragments {frags.shape}"
        )
    if num_objects < 0:
        raise InputError(f"manifest: num_objects must be >= 0, got {num_objects}")
    if num_blocks:
        for name, arr in (("object_rows", rows), ("chunks", chunk_arr), ("fragments", frags)):
            if arr.dtype.kind not in "iu":
                raise InputError(f"manifest: {name} must be integers, got dtype {arr.dtype}")
        if rows.min() < 0 or rows.max() >= num_objects:
            raise InputError(f"manifest: object_rows must lie in [0, {num_objects})")
        if np.any(np.diff(rows) < 0):
            raise InputError("manifest: blocks must be sorted by object row")
        if frags.min() < 0 or frags.max() >= _FRAGMENT_LIMIT:
            raise InputError("manifest: fragments must lie in [0, 2**32)")
    record = np.zeros(num_blocks, dtype=_mode0_dtype(chunk_arr.shape[1]))
    record["chunk"] = chunk_arr
    record["fragment"] = frags
    return Mode0Manifests(rows.astype(np.int64), record, num_objects)


class Mode0Manifests(Sequence[bytes]):
    """A level's manifest rows, all blocks mode 0, made a slice of rows at a time.

    The index has a row for every id up to the largest, each absent one the 4-byte empty
    manifest, so the rows are encoded only when a writer asks for a chunk's worth: memory
    follows the blocks and one chunk, never the largest id (a bytes object per id took
    885 MB for ids up to 4*10^6).  A slice is :class:`FramedItems`, an index its bytes.
    """

    __slots__ = ("_record", "_rows", "num_objects")

    def __init__(self, rows: np.ndarray, record: np.ndarray, num_objects: int) -> None:
        self._rows, self._record, self.num_objects = rows, record, num_objects

    def __len__(self) -> int:
        return self.num_objects

    def __iter__(self) -> Iterator[bytes]:
        """Every row, made a block of rows at a time (a row at a time searched the blocks each time)."""
        for start in range(0, self.num_objects, _ITER_ROWS):
            yield from self._encode(start, min(self.num_objects, start + _ITER_ROWS))

    @overload
    def __getitem__(self, index: int) -> bytes: ...

    @overload
    def __getitem__(self, index: slice) -> FramedItems: ...

    def __getitem__(self, index: int | slice) -> bytes | FramedItems:
        if isinstance(index, slice):
            start, stop, step = index.indices(self.num_objects)
            if step != 1:
                raise InputError(f"manifest rows are sliced with step 1, got {step}")
            return self._encode(start, max(start, stop))
        row = operator.index(index) + (self.num_objects if index < 0 else 0)
        if not 0 <= row < self.num_objects:
            raise IndexError(f"manifest row {index} outside {self.num_objects} rows")
        return self._encode(row, row + 1)[0]

    def _encode(self, start: int, stop: int) -> FramedItems:
        """Rows ``[start, stop)`` in one buffer: each row's block count, then its records."""
        lo, hi = np.searchsorted(self._rows, [start, stop])
        record = self._record[lo:hi]
        counts = np.bincount(self._rows[lo:hi] - start, minlength=stop - start)
        body = counts * record.dtype.itemsize
        out, starts = u32_led(counts, body, record.view(np.uint8))
        return FramedItems(out.tobytes(), starts, 4 + body)


def _u32_at(buffer: bytes, offsets: np.ndarray) -> np.ndarray:
    """The little-endian u32 words at byte ``offsets`` (each whole inside ``buffer``), read
    through the buffer's four word alignments: no index array four times the offsets' size."""
    out = np.empty(len(offsets), dtype=np.uint32)
    shift = offsets & 3
    whole = memoryview(buffer)
    for k in range(4):
        take = shift == k
        if take.any():
            words = np.frombuffer(whole[k : k + (len(buffer) - k) // 4 * 4], dtype="<u4")
            out[take] = words[(offsets[take] - k) >> 2]
    return out


def _mode0_blocks(
    rows: Sequence[bytes | memoryview], sid_ndim: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The rows made only of mode-0 blocks, gathered in one vectorised pass.

    Returns ``(fast, counts, block_row, blocks)``: which rows are all mode 0, each row's
    block count (as its header says), and the blocks of the ``fast`` rows (records of
    :func:`_mode0_dtype`, rows in order) with the row each belongs to.  Every other row
    (short, odd-sized or mixed-mode) needs :func:`decode_manifest`.
    """
    framed = FramedItems.of(rows)
    n = len(framed)
    rec = _mode0_dtype(sid_ndim)
    lens, starts = framed.lengths, framed.starts
    counts = np.zeros(n, dtype=np.int64)
    long_enough = lens >= 4
    if long_enough.any():
        counts[long_enough] = _u32_at(framed.buffer, starts[long_enough])
    body = np.maximum(lens - 4, 0)  # by division: counts * itemsize may wrap int64 for a hostile count
    fast = long_enough & (body % rec.itemsize == 0) & (body // rec.itemsize == counts)
    fast_rows = np.flatnonzero(fast & (counts > 0))  # a row of no block (an absent id) has no body to join
    block_row = np.repeat(fast_rows, counts[fast_rows])
    if block_row.size:  # the fast rows' bodies back to back are their records, in row order
        # joined row by row (a slice of the one buffer each, one copy): a byte mask over the whole
        # chunk took 3-4x as long, a gather by byte index 1.3x
        whole = memoryview(framed.buffer)
        bodies = bytearray().join(
            whole[start + 4 : start + length]
            for start, length in zip(starts[fast_rows].tolist(), lens[fast_rows].tolist())
        )
        blocks = np.frombuffer(bodies, dtype=np.uint8).view(rec)
    else:  # no block: nothing to gather (a record may be wide, an empty gather still allocates its width)
        blocks = np.zeros(0, dtype=rec)
    bad_mode = blocks["mode"] != MODE_SINGLE
    if bad_mode.any():  # mixed-mode rows: left to the exact decoder
        fast[np.unique(block_row[bad_mode])] = False
        keep = fast[block_row]
        block_row, blocks = block_row[keep], blocks[keep]
    return fast, counts, block_row, blocks


def decode_manifest_table(
    rows: Sequence[bytes | memoryview], sid_ndim: int, *, max_fragments: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every fragment named by many manifest rows, as flat arrays in manifest order.

    Returns ``(row, chunk (F, sid_ndim), fragment)``: one entry per referenced
    fragment, rows in order and each row's blocks in order (mode-1/2 blocks
    expanded).  Rows made only of mode-0 blocks -- all that writers emit -- are
    decoded together in one vectorised pass; any other row goes through
    :func:`decode_manifest`, so the checks are the same.  ``max_fragments`` bounds the
    expansion below :func:`fragment_budget` (a caller that knows how many there can be).
    """
    _check_sid_ndim(sid_ndim)
    fast, _, block_row, blocks = _mode0_blocks(rows, sid_ndim)
    if not fast.all():
        parts_row, parts_chunk, parts_frag = [block_row], [blocks["chunk"].reshape(-1, sid_ndim)], [blocks["fragment"]]
        budget = fragment_budget(sid_ndim) if max_fragments is None else min(fragment_budget(sid_ndim), max_fragments)
        budget -= len(blocks)
        for r in np.flatnonzero(~fast).tolist():
            try:
                decoded = decode_manifest(rows[r], sid_ndim, max_fragments=budget)
            except ResourceLimitError as exc:
                raise ResourceLimitError(f"manifest row {r}: {exc}") from None
            budget -= sum(len(b.fragments) for b in decoded)
            for b in decoded:
                parts_row.append(np.full(len(b.fragments), r, dtype=np.int64))
                parts_chunk.append(np.repeat(np.asarray([b.chunk], dtype=np.int64), len(b.fragments), axis=0))
                parts_frag.append(np.asarray(b.fragments, dtype=np.int64))
        row = np.concatenate(parts_row)
        _check_fragments(parts_frag[0], None)
        order = np.argsort(row, kind="stable")
        return row[order], np.concatenate(parts_chunk)[order], np.concatenate(parts_frag)[order]
    _check_fragments(blocks["fragment"], None)
    return block_row, blocks["chunk"].reshape(-1, sid_ndim).astype(np.int64), blocks["fragment"].astype(np.int64)


# ---------------------------------------------------------------------------
# summaries: what a consistency check needs from many rows, never the rows
# ---------------------------------------------------------------------------
NamedRuns = dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]]  # chunk -> (first fragment, count) per block


@dataclass
class ManifestSummary:
    """Many manifest rows reduced to small tables (one per manifests chunk, then merged).

    ``max_fragment`` maps each chunk named to the largest fragment named in it and the
    row naming it (-1 where only empty runs name the chunk); ``problems`` holds one message
    per row that does not decode (a fragment outside [0, 2**32) included), so one bad row
    does not hide the others.
    """

    nonempty: int = 0
    max_fragment: dict[tuple[int, ...], tuple[int, int]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    #: With ``count_named``: per chunk, every block's named fragments as runs (first, count), never
    #: expanded -- a 16-byte mode-1 block may name 2**32 of them.  Whoever knows the chunk's
    #: fragment count turns them into how often each fragment is named (:func:`named_coverage`).
    named: NamedRuns = field(default_factory=dict)
    #: Which rows name anything (an object present at the level): (first row, rows, packed bits)
    #: per summarised chunk, for :meth:`present_rows`.
    present_parts: list[tuple[int, int, np.ndarray]] = field(default_factory=list)

    def present_rows(self, total: int) -> np.ndarray:
        """One bool per row of the array (``total`` rows): whether its manifest names anything;
        rows of no summarised chunk are False."""
        out = np.zeros(total, dtype=bool)
        for first, n, bits in self.present_parts:
            n = max(0, min(n, total - first))
            out[first : first + n] = np.unpackbits(bits, count=n).astype(bool)
        return out


def summarize_manifest_rows(
    rows: Sequence[bytes], sid_ndim: int, *, first_row: int = 0, count_named: bool = False
) -> ManifestSummary:
    """Summarise manifest rows numbered from ``first_row``; a bad row is a problem, not an exception.

    Mode-0 rows are summarised in one vectorised pass, any other row through
    :func:`decode_manifest`.  ``count_named`` also counts how often each fragment is named.
    """
    _check_sid_ndim(sid_ndim)
    out = ManifestSummary()
    named_chunks: list[np.ndarray] = []
    named_starts: list[np.ndarray] = []
    named_counts: list[np.ndarray] = []
    fast, counts, block_row, blocks = _mode0_blocks(rows, sid_ndim)
    out.nonempty = int(np.count_nonzero(counts[fast] > 0))
    present = fast & (counts > 0)
    if block_row.size:
        frags = blocks["fragment"].astype(np.int64)
        chunks = blocks["chunk"].reshape(len(blocks), sid_ndim)
        outside = (frags < 0) | (frags >= _FRAGMENT_LIMIT)
        if outside.any():  # as a row through decode_manifest: one problem per bad row, and the row left out
            at = np.flatnonzero(outside)
            bad_rows, first = np.unique(block_row[at], return_index=True)  # rows ascend, so do their blocks
            at = at[first]
            for r, b, f in zip(bad_rows.tolist(), (at - np.searchsorted(block_row, bad_rows)).tolist(),
                               frags[at].tolist()):
                out.problems.append(f"row {first_row + r}: manifest: block {b} names fragment {f}, outside [0, 2**32)")
            out.nonempty -= len(bad_rows)
            present[bad_rows] = False
            keep = ~np.isin(block_row, bad_rows)
            frags, chunks, block_row = frags[keep], chunks[keep], block_row[keep]
        if block_row.size:
            _merge_max(out.max_fragment, chunks, frags, block_row + first_row)
            named_chunks.append(chunks)
            named_starts.append(frags)
            named_counts.append(np.ones(len(frags), dtype=np.int64))
    for r in np.flatnonzero(~fast).tolist():
        mv = memoryview(rows[r]).cast("B")
        try:
            walked = _walk_row(mv, sid_ndim, _block_count(mv, sid_ndim))
        except EncodingError as exc:
            out.problems.append(f"row {first_row + r}: {exc}")
            continue
        if walked:
            out.nonempty += 1
            present[r] = any((n[1] if isinstance(n, tuple) else len(n)) > 0 for _, _, n in walked)
        for chunk, _, named in walked:  # the largest fragment of a run is its end: nothing is expanded
            if isinstance(named, tuple):
                top = named[0] + named[1] - 1 if named[1] else -1
            else:
                top = int(named.max()) if len(named) else -1
            # an empty run (-1) names no fragment, but still a chunk, which must exist
            _merge_max(out.max_fragment, np.asarray([chunk], dtype=np.int64), np.asarray([top]),
                       np.asarray([first_row + r]))
            if count_named:  # a run stays one (start, count); a list is as long as its stored bytes
                starts = np.asarray([named[0]] if isinstance(named, tuple) else named, dtype=np.int64)
                named_starts.append(starts)
                named_counts.append(np.asarray([named[1]], dtype=np.int64) if isinstance(named, tuple)
                                    else np.ones(len(starts), dtype=np.int64))
                named_chunks.append(np.tile(np.asarray(chunk, dtype=np.int64), (len(starts), 1)))
    if count_named and named_starts:
        out.named = _runs_by_chunk(np.concatenate(named_chunks), np.concatenate(named_starts),
                                   np.concatenate(named_counts))
    out.present_parts.append((first_row, len(rows), np.packbits(present)))
    return out


def group_rows(group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``group`` (n, D) -- chunk coordinates, say -- by distinct row, ascending as
    ``np.unique(axis=0)`` orders them (a sort, not its row compare): the stable order and where
    each distinct row's run starts in it."""
    order = np.lexsort(group.T[::-1]) if len(group) else np.zeros(0, dtype=np.int64)
    ordered = group[order]
    starts = np.flatnonzero(np.r_[True, (ordered[1:] != ordered[:-1]).any(axis=1)]) if len(group) else order
    return order, starts


def _runs_by_chunk(chunks: np.ndarray, starts: np.ndarray, counts: np.ndarray) -> NamedRuns:
    """The blocks' runs grouped by chunk: one sort of the chunk coordinates, a loop over chunks."""
    order, first = group_rows(chunks)
    chunks, starts, counts = chunks[order], starts[order], counts[order]
    ends = np.r_[first[1:], len(chunks)]
    return {tuple(chunks[a].tolist()): (starts[a:b], counts[a:b]) for a, b in zip(first.tolist(), ends.tolist())}


def named_coverage(runs: tuple[np.ndarray, np.ndarray] | None, fragments: int) -> np.ndarray:
    """How many blocks name each of a chunk's ``fragments`` fragments: a difference array over the
    runs clipped to the fragments that exist (past them is ``L3_MANIFEST_FRAGMENT_OUT_OF_RANGE``),
    so its size is the chunk's, never a run's."""
    cover = np.zeros(fragments + 1, dtype=np.int64)
    if runs is not None and fragments:
        starts, counts = runs
        np.add.at(cover, np.clip(starts, 0, fragments), 1)
        np.add.at(cover, np.clip(starts + counts, 0, fragments), -1)
    return np.cumsum(cover[:-1])


def _merge_max(table: dict[tuple[int, ...], tuple[int, int]], chunks: np.ndarray, frags: np.ndarray, rows: np.ndarray) -> None:
    """Fold (chunk, fragment, row) triples into ``table``: the largest fragment named per chunk.

    Any int64 coordinates are chunk coordinates (docs/format.md §2.1), so the span is computed
    in Python integers: ``max - min + 1`` of coordinates near +-2**63 does not fit an int64.
    """
    chunks = np.asarray(chunks, dtype=np.int64)
    frags = np.asarray(frags, dtype=np.int64)
    lo = chunks.min(axis=0)
    span = [h - low + 1 for h, low in zip(chunks.max(axis=0).tolist(), lo.tolist())]
    n_keys = math.prod(span)
    if n_keys < 1 << 62:
        key = np.ravel_multi_index(tuple((chunks - lo).T), tuple(span))
    else:  # absurdly spread coordinates: fall back to row-wise unique
        key = np.unique(chunks, axis=0, return_inverse=True)[1].ravel()
        n_keys = int(key.max()) + 1
    if n_keys <= 4 * len(key) + 1024:  # a slot per chunk: the largest fragment without sorting the blocks
        top = np.full(n_keys, np.iinfo(np.int64).min, dtype=np.int64)
        np.maximum.at(top, key, frags)
        hits = np.flatnonzero(frags == top[key])
        at = np.full(n_keys, -1, dtype=np.int64)
        np.maximum.at(at, key[hits], hits)  # of equal fragments, the last block (as the sort below)
        last = at[at >= 0]
    else:
        order = np.lexsort((frags, key))
        k = key[order]
        last = order[np.flatnonzero(np.r_[k[1:] != k[:-1], True])]
    for pos in last.tolist():
        chunk = tuple(int(v) for v in chunks[pos])
        f, r = int(frags[pos]), int(rows[pos])
        prev = table.get(chunk)
        if prev is None or f > prev[0]:
            table[chunk] = (f, r)


def merge_manifest_summaries(parts: Iterable[ManifestSummary]) -> ManifestSummary:
    """One summary of many (the chunks of one manifests array); runs of one chunk are joined once."""
    out = ManifestSummary()
    pending: dict[tuple[int, ...], list[tuple[np.ndarray, np.ndarray]]] = {}
    for p in parts:
        out.problems.extend(p.problems)
        out.nonempty += p.nonempty
        for chunk, runs in p.named.items():
            pending.setdefault(chunk, []).append(runs)
        out.present_parts.extend(p.present_parts)
        for chunk, (f, r) in p.max_fragment.items():
            prev = out.max_fragment.get(chunk)
            if prev is None or f > prev[0]:
                out.max_fragment[chunk] = (f, r)
    out.named = {chunk: (np.concatenate([r[0] for r in runs]), np.concatenate([r[1] for r in runs]))
                 for chunk, runs in pending.items()}
    return out
