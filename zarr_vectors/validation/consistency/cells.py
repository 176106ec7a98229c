"""Level 3 — the cells of grid arrays: which exist, where their bytes are, batched reads.

Shared by the vertex and link tasks: small picklable array descriptions, the shard indexes
of sharded arrays, one concurrent read of many cells, and the greedy batching of cells
into tasks of a target size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarr_vectors import config
from zarr_vectors.errors import EncodingError, ResourceLimitError
from zarr_vectors.execution.runner import parallelism
from zarr_vectors.format.paths import (
    format_chunk_key,
    parse_chunk_key,
    parse_chunk_keys,
)
from zarr_vectors.store.backend import Storage
from zarr_vectors.store.codecs import ShardingSpec
from zarr_vectors.validation.findings import Finding, crashed, make
from zarr_vectors.validation.structure import CellCodec, Node, StoreModel, origin_of

Chunk = tuple[int, ...]
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
    origin = np.asarray(origin_of(node) or (0,) * len(spec.shard_shape), dtype=np.int64)
    shape = np.asarray(node.doc.get("shape"), dtype=np.int64)
    ss = np.asarray(spec.shard_shape, dtype=np.int64)
    cells: dict[Chunk, tuple[str, int]] = {}
    offsets: dict[Chunk, int] = {}
    corrupt: dict[tuple[int, ...], str] = {}
    for shard, key, size, raw in shards:
        if raw is None:  # vanished since the listing: nothing present
            continue
        try:
            where = f"shard {key}"
            index = spec.decode_index(raw, where=where)
            entries = spec.present(index)
            lo, hi = spec.data_bounds(size)
            start, nbytes = index[entries, 0], index[entries, 1]
            lo_, hi_ = np.uint64(max(lo, 0)), np.uint64(max(hi, 0))
            bad = (start < lo_) | (start > hi_) | (nbytes > hi_ - np.minimum(start, hi_))
            if bad.any():
                spec.inner_slice(index, int(entries[np.argmax(bad)]), where=where, object_size=size)  # raises
            index_of = np.stack(np.unravel_index(entries, spec.shard_shape), axis=1) + np.asarray(shard) * ss
            outside = (index_of >= shape).any(axis=1)
            if outside.any():
                raise EncodingError(f"{where}: index lists cell {index_of[int(np.argmax(outside))].tolist()} "
                                    f"outside the array shape {shape.tolist()}")
        except EncodingError as exc:
            out.append(make("L3_SHARD_CORRUPT", node.path, str(exc)))
            corrupt[shard] = key
            continue
        for c, o, n in zip((index_of + origin).tolist(), start.tolist(), nbytes.tolist()):
            cells[tuple(c)] = (key, int(n))
            offsets[tuple(c)] = int(o)
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


def _listed_cells(listed: list[Any], ndim: int) -> set[Chunk]:
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
    keys = _listed_cells(listed, len(spec.doc.get("shape", [])))
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
