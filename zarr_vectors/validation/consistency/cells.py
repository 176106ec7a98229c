"""Level 3 — the cells of grid arrays: which exist, where their bytes are, batched reads.

Shared by the vertex and link tasks: small picklable array descriptions, the shard indexes
of sharded arrays, one concurrent read of many cells, the greedy batching of cells
into tasks of a target size, and one 64-bit hash of integer rows.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarr_vectors import config
from zarr_vectors.errors import EncodingError, InternalError, ResourceLimitError, ZarrVectorsError
from zarr_vectors.execution.runner import parallelism
from zarr_vectors.format.paths import (
    format_chunk_key,
    parse_chunk_key,
    parse_chunk_keys,
)
from zarr_vectors.store.backend import Storage
from zarr_vectors.store.codecs import ShardingSpec
from zarr_vectors.store.groups import Level
from zarr_vectors.store.link_read import read_links
from zarr_vectors.validation.findings import Finding, crashed, make
from zarr_vectors.validation.structure import CellCodec, Node, StoreModel, origin_of

Chunk = tuple[int, ...]
_MIX, _MUL = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9)


def row_hashes(rows: np.ndarray | Sequence[np.ndarray], seed: int = 0) -> np.ndarray:
    """One 64-bit hash per row of an ``(n, k)`` integer array, or of ``k`` columns of n integers
    (no stacked copy): rows compared, counted or sorted as one number each (equal rows hash alike;
    two unequal ones collide about once in 2**64).  ``seed`` starts the mixing elsewhere: hashes
    no one can compute before it is drawn."""
    n = len(rows[0]) if isinstance(rows, (list, tuple)) else len(rows)
    h = np.full(n, _MIX ^ np.uint64(seed), dtype=np.uint64)
    if not n:
        return h
    columns = list(rows) if isinstance(rows, (list, tuple)) else list(np.asarray(rows).reshape(n, -1).T)
    with np.errstate(over="ignore"):
        for column in columns:
            column = np.asarray(column)
            column = column.view(np.uint64) if column.dtype == np.int64 else column.astype(np.uint64)
            h = (h ^ (column + _MIX + (h << np.uint64(6)) + (h >> np.uint64(2)))) * _MUL
            h ^= h >> np.uint64(31)
    return h


@dataclass(frozen=True)
class Digest:
    """A multiset of rows in three numbers: its size and two sums, mod 2**64, of independent
    64-bit hashes of each row.  Equal multisets have equal digests, and digests add, so a check
    spread over many tasks sums a few numbers from each instead of gathering and sorting one
    hash per row (two sorted arrays of 10^7 hashes: 2.3 s in one task on a pyramid's critical
    path).  Unequal multisets collide only where both sums do; the hashes are seeded with a number
    drawn for each validation (:func:`digest_seed`), so a store cannot be built to make them.  Only
    a mismatch is worked out row by row."""

    rows: int = 0
    first: int = 0
    second: int = 0

    @classmethod
    def of(cls, rows: np.ndarray | Sequence[np.ndarray], seed: int) -> Digest:
        h = row_hashes(rows, seed)
        with np.errstate(over="ignore"):
            z = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)  # splitmix64's finalizer
            z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
            z ^= z >> np.uint64(31)
        return cls(len(h), int(h.sum(dtype=np.uint64)), int(z.sum(dtype=np.uint64)))

    def __add__(self, other: Digest) -> Digest:
        return Digest(self.rows + other.rows, (self.first + other.first) % 2**64, (self.second + other.second) % 2**64)


def cell_rows(chunk: Chunk, rows: np.ndarray, seed: int) -> np.ndarray:
    """One cell's rows as ``(cell tag, row)`` pairs for a :class:`Digest`: the chunk is hashed once
    into a seeded 64-bit tag, not hashed again with every row."""
    tag = row_hashes(np.asarray([chunk], dtype=np.int64), seed).view(np.int64)[0]
    return np.column_stack([np.full(len(rows), tag, dtype=np.int64), np.asarray(rows, dtype=np.int64)])


def vertex_rows(raw: bytes | None, dtype: np.dtype, ndim: int) -> np.ndarray | None:
    """A decoded vertex cell as its ``(n, ndim)`` rows in the stored dtype (a view), or None where
    it is absent or not whole rows (level 3 names such a cell; the cross-level checks leave it out)."""
    if raw is None or len(raw) % (dtype.itemsize * ndim):
        return None
    return np.frombuffer(raw, dtype=dtype).reshape(-1, ndim)


#: the bin key of a position that is not there (a record's metavertex out of its cell's range, or
#: in a cell that did not decode: level 3's findings), or not finite; never the key of a bin
NO_BIN = np.iinfo(np.int64).min


def bin_keys(positions: np.ndarray, bin_shape: Sequence[float], seed: int) -> np.ndarray:
    """One int64 per position: its bin ``floor(position / bin_shape)`` (float64, as the pyramid
    bins), the axes packed with an odd multiplier drawn from ``seed`` (mod 2**64; no store can be
    built knowing it), so a digest row carries the bin in one column.  A position that is not
    finite, or whose bin an int64 cannot hold, gets :data:`NO_BIN`."""
    p = np.asarray(positions)
    n = len(p)
    mult = row_hashes(np.asarray([[len(bin_shape)]], dtype=np.int64), seed)[0] | np.uint64(1)
    key = np.zeros(n, dtype=np.uint64)
    scratch = np.empty(n, dtype=np.float64)
    bad = None
    with np.errstate(over="ignore", invalid="ignore"):
        for d, b in enumerate(bin_shape):  # column by column: no (n, D) float64 copy
            scratch[:] = p[:, d]
            scratch /= b
            np.floor(scratch, out=scratch)
            if n and not np.abs(scratch).max() < 2.0**62:  # NaN fails it too
                wrong = ~(np.abs(scratch) < 2.0**62)
                bad = wrong if bad is None else bad | wrong
                scratch[wrong] = 0
            key *= mult
            key += scratch.astype(np.int64).view(np.uint64)
    out = key.view(np.int64)
    if bad is not None:
        out[bad] = NO_BIN
    return out


def digest_sum(digests: Iterable[Digest]) -> Digest:
    return sum(digests, Digest())


def digest_seed() -> int:
    """A fresh 64-bit seed for one validation's digests (every task of it gets the same)."""
    return secrets.randbits(64)


def stored_pairs(level: Level, delta: int) -> np.ndarray:
    """A width-2 family's records as rows ``(chunk_0, vi_0, chunk_1, vi_1)``, endpoints in input
    order, read again through the store's own API (what a check names once digests disagreed);
    another width reads as no rows, which its own rule reports."""
    records = read_links(level, delta)
    if records.vi.ndim != 2 or records.vi.shape[1] != 2:
        return np.zeros((0, 0), dtype=np.int64)
    columns = [records.chunks[:, 0], records.vi[:, 0], records.chunks[:, 1], records.vi[:, 1]]
    return np.column_stack(columns).astype(np.int64)


def multiset_difference(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Rows of ``left`` not matched one for one by rows of ``right`` (exact: what a check names
    once the rows' hashes disagreed)."""
    if not len(left) or not len(right) or left.shape[1] != right.shape[1]:
        return left
    rows, inverse = np.unique(np.concatenate([left, right]), axis=0, return_inverse=True)
    inverse = inverse.ravel()
    have = np.bincount(inverse[: len(left)], minlength=len(rows))
    take = np.bincount(inverse[len(left) :], minlength=len(rows))
    return np.repeat(rows, np.maximum(have - take, 0), axis=0)


MAX_EXAMPLES = 3  # cells named per finding kind before "... and N more" (output format, not tuning)


# ---------------------------------------------------------------------------
# array descriptions shipped to tasks (small, picklable)
# ---------------------------------------------------------------------------
@dataclass
class ArraySpec:
    path: str
    doc: dict[str, Any]
    cells: dict[Chunk, tuple[str, int]]  # absolute chunk -> (key, size); sharded: (shard key, inner chunk size)
    # sharded arrays: absolute chunk -> offset of the inner chunk in its shard object; the cells of
    # a corrupt shard (already an L3_SHARD_CORRUPT finding) are in ``cells`` but have no offset
    offsets: dict[Chunk, int] | None = None
    # the most a cell's payload may decode to, from metadata (format/bounds.py); None: the ceiling
    limit: int | None = None

    def codec(self) -> CellCodec:
        return CellCodec(self.doc, file=f"{self.path}/zarr.json")

    @property
    def attrs(self) -> dict[str, Any]:
        return self.doc.get("attributes", {})

    @property
    def unreadable(self) -> int:
        """Cells known to exist whose bytes cannot be located (in a corrupt shard)."""
        return 0 if self.offsets is None else len(self.cells) - len(self.offsets)


def array_spec(model: StoreModel, path: str) -> ArraySpec | None:
    node = model.nodes.get(path)
    if node is None or node.doc is None or node.node_type != "array":
        return None
    if path in model.shards:
        cells, offsets = model.shards[path]
        return ArraySpec(path, node.doc, cells, offsets)
    origin = origin_of(node) or ()
    cells = {
        tuple(i + o for i, o in zip(index, origin)): entry for index, entry in model.cells.get(path, {}).items()
    }
    return ArraySpec(path, node.doc, cells)


# ---------------------------------------------------------------------------
# sharded arrays (docs/format.md §9): the present cells come from the shard indexes
# ---------------------------------------------------------------------------
def load_shards(model: StoreModel, out: list[Finding]) -> None:
    """Read every shard index of every sharded grid array (one concurrent batch of suffix reads) into
    ``model.shards``: {path: (cells, offsets)} as :class:`ArraySpec` takes them.  A shard whose index
    is truncated, fails its CRC32C, or points outside the object or the array is an L3_SHARD_CORRUPT
    finding; the cells ``nonempty_chunks`` lists in it then count as present but unreadable, so that
    one defect is one finding."""
    jobs: list[tuple[Node, ShardingSpec, list[tuple[tuple[int, ...], tuple[str, int]]]]] = []
    for number in sorted(model.levels):
        for node in model.grid_arrays(number):
            try:
                sharding = CellCodec(node.doc, file=f"{node.path}/zarr.json").sharding
            except Exception:  # noqa: BLE001 - an L2 finding; level 3 does not run after one
                continue
            if sharding is not None:
                jobs.append((node, sharding, sorted(model.cells.get(node.path, {}).items())))
    requests = [(key, *sharding.index_range()) for _, sharding, shards in jobs for _, (key, _) in shards]
    raws = iter(model.storage.get_ranges(requests))
    for node, sharding, shards in jobs:
        model.shards[node.path] = _shard_cells(node, sharding, [(s, k, n, next(raws)) for s, (k, n) in shards], out)


def _shard_cells(node: Node, spec: ShardingSpec, shards: list[tuple[tuple[int, ...], str, int, bytes | None]],
                 out: list[Finding]) -> tuple[dict[Chunk, tuple[str, int]], dict[Chunk, int]]:
    """The cells the array's shard indexes list: {chunk: (shard key, size)} and {chunk: offset},
    every shard's index checked at once (one shard's defect is that shard's finding)."""
    origin = np.asarray(origin_of(node) or (0,) * len(spec.shard_shape), dtype=np.int64)
    shape = np.asarray(node.doc.get("shape"), dtype=np.int64)
    ss = np.asarray(spec.shard_shape, dtype=np.int64)
    shards = [s for s in shards if s[3] is not None]  # None: vanished since the listing, nothing present
    wheres = [f"shard {key}" for _, key, _, _ in shards]
    indexes, good, refused = spec.decode_indexes([raw for *_, raw in shards], wheres)  # type: ignore[misc]
    failed: dict[int, ZarrVectorsError] = dict(refused)
    row, entry = spec.present_many(indexes)
    sizes = [shards[g][2] for g in good]
    bounds = np.asarray([spec.data_bounds(n) for n in sizes], dtype=np.int64).reshape(-1, 2)
    lo, hi = np.maximum(bounds, 0).astype(np.uint64).T
    start, nbytes = indexes[row, entry, 0], indexes[row, entry, 1]
    lo_, hi_ = lo[row], hi[row]
    bad = (start < lo_) | (start > hi_) | (nbytes > hi_ - np.minimum(start, hi_))
    coords = np.asarray([shards[g][0] for g in good], dtype=np.int64).reshape(len(good), len(ss))
    grid = -(-shape // ss)  # shards per axis: a shard past them is refused before its cells are computed
    for r in np.flatnonzero((coords >= grid).any(axis=1)).tolist():
        failed[good[r]] = EncodingError(f"{wheres[good[r]]}: lies outside the array's {grid.tolist()} shards")
    coords = np.minimum(coords, grid - 1)  # (its cells are not kept) no product past int64
    index_of = spec.grid_cells(row, entry, coords)
    outside = (index_of >= shape).any(axis=1)
    for r in np.unique(row[bad | outside]).tolist():  # shards whose entries point outside the object or the array
        mine = np.flatnonzero(row == r)
        where, position = wheres[good[r]], good[r]
        if position in failed:
            continue
        if bad[mine].any():
            failed[position] = _spec_error(spec, indexes[r], int(entry[mine[np.argmax(bad[mine])]]), where, sizes[r])
        else:
            cell = index_of[mine[np.argmax(outside[mine])]]
            failed[position] = EncodingError(f"{where}: index lists cell {cell.tolist()} outside the array shape "
                                             f"{shape.tolist()}")
    corrupt: dict[tuple[int, ...], str] = {}
    for position, exc in sorted(failed.items()):
        out.append(make("L3_SHARD_CORRUPT", node.path, str(exc)))
        corrupt[shards[position][0]] = shards[position][1]
    keep = ~np.isin(row, [r for r, g in enumerate(good) if g in failed])
    keys = [shards[g][1] for g in good]
    chunks: list[Chunk] = list(map(tuple, (index_of[keep] + origin).tolist()))
    cells = dict(zip(chunks, zip([keys[r] for r in row[keep].tolist()], nbytes[keep].tolist())))
    offsets = dict(zip(chunks, start[keep].tolist()))
    listed = node.attrs.get("nonempty_chunks")
    if corrupt and isinstance(listed, list):
        for k in listed:
            try:
                c = parse_chunk_key(k, len(ss))
            except (ValueError, TypeError):
                continue
            shard = tuple(int(v) for v in (np.asarray(c) - origin) // ss)
            if shard in corrupt:
                cells[c] = (corrupt[shard], 0)
    return cells, offsets


def _spec_error(spec: ShardingSpec, index: np.ndarray, entry: int, where: str, size: int) -> ZarrVectorsError:
    """The error :meth:`ShardingSpec.inner_slice` gives an inner cell outside its shard's data (one
    declaring more bytes than a cell may hold is refused for that first)."""
    try:
        spec.inner_slice(index, entry, where=where, object_size=size)
    except (EncodingError, ResourceLimitError) as exc:
        return exc
    raise InternalError(f"{where}: inner cell {entry} refused in a batch but accepted alone")


def _read_raw(storage: Storage, keys: list[str], nbytes: int) -> list[bytes | None]:
    """Raw objects of many keys: one concurrent batch, or plain reads when that would cost more."""
    if storage.protocol == "file" and (len(keys) < 8 or nbytes < int(config.get("io.sequential-read-bytes"))):
        return [storage.get(k) for k in keys]
    return storage.get_many(keys)


def prefetch(storage: Storage, wanted: list[tuple[ArraySpec | None, Sequence[Chunk]]],
              out: list[Finding]) -> list[dict[Chunk, bytes]]:
    """Decoded payloads of the given cells of several arrays, read in one batch (absent cells left out).

    An unsharded cell is its own object; a sharded one is a byte range of its shard object (located
    by the shard indexes read in :func:`load_shards`).  Cells of a corrupt shard are skipped: they
    are already an L3_SHARD_CORRUPT finding."""
    plan: list[tuple[ArraySpec, list[Chunk]]] = []
    keys: list[str] = []
    ranges: list[tuple[str, int, int]] = []
    nbytes = 0
    for spec, chunks in wanted:
        present = [c for c in chunks if spec is not None and c in spec.cells
                   and (spec.offsets is None or c in spec.offsets)]
        plan.append((spec, present))
        for c in present:
            key, size = spec.cells[c]
            if spec.offsets is None:
                keys.append(key)
            else:
                ranges.append((key, spec.offsets[c], spec.offsets[c] + size))
            nbytes += size
    raws = iter(_read_raw(storage, keys, nbytes)) if keys else iter(())
    inner = iter(storage.get_ranges(ranges)) if ranges else iter(())
    results: list[dict[Chunk, bytes]] = []
    for spec, present in plan:
        payloads: dict[Chunk, bytes] = {}
        results.append(payloads)
        if not present:
            continue
        source = raws if spec.offsets is None else inner
        try:
            codec = spec.codec()
        except Exception as exc:  # noqa: BLE001 - already an L2 finding; never reached when L2 passed
            out.append(crashed(3, spec.path, exc, what="codec"))
            for _ in present:
                next(source)
            continue
        for c in present:
            raw = next(source)
            if raw is None:
                out.append(make("L3_NONEMPTY_MISSING", spec.path, "cell vanished while validating", cell=format_chunk_key(c)))
                continue
            if spec.offsets is not None and len(raw) != spec.cells[c][1]:
                out.append(make("L3_SHARD_CORRUPT", spec.path, f"shard {spec.cells[c][0]}: inner chunk at bytes "
                                f"[{spec.offsets[c]}, {spec.offsets[c] + spec.cells[c][1]}) lies past the end of "
                                "the shard object", cell=format_chunk_key(c)))
                continue
            try:
                payloads[c] = codec.payload(raw, spec.limit)
            except ResourceLimitError as exc:
                out.append(make("L1_RESOURCE_LIMIT", spec.path, f"cell is not decoded: {exc}", cell=format_chunk_key(c)))
            except Exception as exc:  # noqa: BLE001
                out.append(make("L3_CELL_UNDECODABLE", spec.path, f"cell does not decode: {exc}", cell=format_chunk_key(c)))
    return results


def batches(units: list[tuple[Any, int]], target: int) -> list[list[Any]]:
    """Greedy runs of units whose summed size is about ``target`` bytes."""
    out: list[list[Any]] = []
    current: list[Any] = []
    size = 0
    for unit, n in units:
        if current and size + n > target:
            out.append(current)
            current, size = [], 0
        current.append(unit)
        size += n
    if current:
        out.append(current)
    return out


def batch_limits() -> tuple[int, int]:
    """(min, max) bytes of cells one level-3 task reads: ``zarr_vectors.validation.{min,max}-batch-bytes``.

    Read in the client while the graph is planned; tasks get sizes, never settings."""
    return int(config.get("validate.min-batch-bytes")), int(config.get("validate.max-batch-bytes"))


def batch_target(total: int, limits: tuple[int, int]) -> int:
    """Bytes per task: about three tasks per worker thread, within ``limits`` = (min, max)."""
    lo, hi = limits
    return int(min(hi, max(lo, total // max(1, 3 * parallelism()))))


def listed_cells(listed: list[Any], ndim: int) -> set[Chunk]:
    """The cells a presence list names: the whole list parsed at once, or, when a key is bad (an
    L2 finding), key by key, leaving the bad ones out."""
    try:
        return set(map(tuple, parse_chunk_keys(listed, ndim).tolist()))
    except (ValueError, TypeError):
        pass
    keys = set()
    for k in listed:
        try:
            keys.add(parse_chunk_key(k, ndim))
        except (ValueError, TypeError):
            continue
    return keys


def check_presence(model: StoreModel, spec: ArraySpec, out: list[Finding]) -> None:
    """nonempty_chunks against the cells on disk."""
    listed = spec.attrs.get("nonempty_chunks")
    if not isinstance(listed, list):
        return
    keys = listed_cells(listed, len(spec.doc.get("shape", [])))
    present = set(spec.cells)
    missing = sorted(keys - present)
    extra = sorted(present - keys)
    for code, chunks, what in (("L3_NONEMPTY_MISSING", missing, "listed in nonempty_chunks but has no cell on disk"),
                               ("L3_NONEMPTY_EXTRA", extra, "has a cell on disk but is not listed in "
                                                            "nonempty_chunks")):
        for c in chunks[:MAX_EXAMPLES]:
            out.append(make(code, spec.path, what, cell=format_chunk_key(c)))
        if len(chunks) > MAX_EXAMPLES:
            out.append(make(code, spec.path, f"... and {len(chunks) - MAX_EXAMPLES} more cells"))
