"""Grid ("per-chunk") arrays: one vlen-bytes cell per spatial chunk (docs/format.md §2.1).

A cell is addressed by its absolute signed chunk coordinates; the array's own
``chunk_grid_origin`` and ``shape`` map them to a cell index and a key
``c/i/j/k``.  Cells are written whole; ``record_presence=False`` leaves the
array-wide ``nonempty_chunks`` list to a single reconcile step, which is what lets
many workers write disjoint cells of one array concurrently.

Sharded arrays (``sharding_indexed``, docs/format.md §9) read transparently: cell index
``i`` lives in the shard object ``c/<i // shard_shape>`` at inner entry
``i % shard_shape`` (C order).  Each shard's index is checked against its CRC32C.
A read wanting at least half of a shard's present cells fetches the whole shard
object once; a sparser one (a small bbox in a big shard) fetches the index with one
suffix range request and then only the wanted inner chunks -- on an object store
that is two round trips instead of megabytes.  Writing cells into a sharded array
is refused: ``unshard_store`` first (``shard_store`` packs whole shards itself).
"""

from __future__ import annotations

import math
import posixpath
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zarr_vectors.encoding import frame_single, unframe_single
from zarr_vectors.errors import (
    ArrayError,
    EncodingError,
    InconsistentStoreError,
    InputError,
    InternalError,
    MetadataError,
    ResourceLimitError,
)
from zarr_vectors.format.paths import format_chunk_key, grid_indices, parse_chunk_key, parse_chunk_keys
from zarr_vectors.store.backend import RangeRequest, Storage, map_batched
from zarr_vectors.store.codecs import Pipeline, ShardingSpec
from zarr_vectors.store.nodes import array_document, meta_key, require_node, write_node

Chunk = tuple[int, ...]
MAX_CELL_BYTES = 2**32 - 1
_FRAMING = 8  # a grid cell's one-item vlen framing (count, length)


def sort_chunk_keys(keys: Iterable[str]) -> list[str]:
    """``nonempty_chunks`` order: dotted keys sorted as strings (docs/format.md §2.1)."""
    return sorted(set(keys))


def grid_folder(tail: str, ndim: int) -> bool:
    """Whether ``tail``, a key below an array's ``c/``, names a folder of its chunk grid, not an
    object that could hold cells: a folder marker (``0/``, a console's "create folder"), or
    one as obstore lists it, its ``/`` dropped (``0``: fewer indices than the grid has axes).

    Neither is a cell or a shard, so the cell listings that check presence (the sharder's,
    the pyramid's) pass over them, where they refused the store; the validator's walk still
    reports them as strays, and a table's chunk listing (``tables.present_chunks``) is not
    concerned."""
    parts = tail.split("/")
    return tail.endswith("/") or (len(parts) < ndim and grid_indices(parts) is not None)


@dataclass
class GridArray:
    """An open grid array; its metadata document is held in ``doc``."""

    storage: Storage
    path: str
    doc: dict[str, Any]
    pipeline: Pipeline = field(init=False)  # of one cell (the inner chunks when sharded)
    sharding: ShardingSpec | None = field(init=False)
    _shard_counts: dict[tuple[int, ...], int] | None = field(init=False, default=None, repr=False)

    def __post_init__(self) -> None:
        file = meta_key(self.path)
        if self.doc.get("data_type") != "variable_length_bytes":
            raise MetadataError(
                f"grid array must have data_type variable_length_bytes, found {self.doc.get('data_type')!r}",
                file=file,
                pointer="/data_type",
            )
        self.sharding = ShardingSpec.from_array(self.doc, file=file)
        if self.sharding is not None:
            self.pipeline = self.sharding.inner
        else:
            grid = self.doc["chunk_grid"]["configuration"]["chunk_shape"]
            if any(c != 1 for c in grid):
                raise MetadataError(
                    f"grid arrays have one cell per chunk (chunk_shape all 1) unless sharded, found {grid}",
                    file=file,
                    pointer="/chunk_grid/configuration/chunk_shape",
                )
            self.pipeline = Pipeline.from_codecs(self.doc["codecs"], file=file)
        origin = self.attributes.get("chunk_grid_origin", [0] * self.ndim)
        if (
            not isinstance(origin, list)
            or len(origin) != self.ndim
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in origin)
            or not all(-(1 << 63) <= o and o + s < 1 << 63 for o, s in zip(origin, self.doc["shape"]))
        ):
            raise MetadataError(
                f"chunk_grid_origin must be {self.ndim} integers placing the grid in the int64 range, found {origin!r}",
                file=file,
                pointer="/attributes/chunk_grid_origin",
            )

    # -- construction ---------------------------------------------------------
    @classmethod
    def create(cls, storage: Storage, path: str, **spec: Any) -> GridArray:
        """Write a new (empty) grid array's metadata (``spec``: :meth:`new`'s keywords); never touches cells."""
        grid = cls.new(storage, path, **spec)
        write_node(storage, path, grid.doc)
        return grid

    @classmethod
    def new(
        cls,
        storage: Storage,
        path: str,
        *,
        shape: Sequence[int],
        origin: Sequence[int],
        attributes: Mapping[str, Any],
        compressor: dict[str, Any] | None,
    ) -> GridArray:
        """A new (empty) grid array whose document is not written yet (a caller writing several
        documents at once sends them in one batch)."""
        attrs: dict[str, Any] = {"nonempty_chunks": []}
        attrs.update(attributes)
        if any(int(o) != 0 for o in origin):
            attrs["chunk_grid_origin"] = [int(o) for o in origin]
        doc = array_document(
            shape=tuple(int(s) for s in shape),
            data_type="variable_length_bytes",
            chunk_shape=(1,) * len(shape),
            fill_value="",
            codecs=Pipeline.codecs_json("vlen-bytes", compressor),
            attributes=attrs,
        )
        return cls(storage, path, doc)

    @classmethod
    def open(cls, storage: Storage, path: str) -> GridArray:
        return cls(storage, path, require_node(storage, path, "array"))

    # -- geometry -------------------------------------------------------------
    @property
    def attributes(self) -> dict[str, Any]:
        return self.doc.setdefault("attributes", {})

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.doc["shape"])

    @property
    def ndim(self) -> int:
        return len(self.doc["shape"])

    @property
    def origin(self) -> tuple[int, ...]:
        return tuple(self.attributes.get("chunk_grid_origin", [0] * self.ndim))

    @property
    def is_sharded(self) -> bool:
        return self.sharding is not None

    def cell_index(self, chunk: Sequence[int]) -> tuple[int, ...]:
        """Index of a chunk's cell in the array (chunk coords minus origin), checked."""
        if len(chunk) != self.ndim:
            raise ArrayError(f"{self.path}: chunk {tuple(chunk)} has {len(chunk)} coordinates, array has {self.ndim}")
        index = tuple(int(c) - o for c, o in zip(chunk, self.origin))
        if any(i < 0 or i >= s for i, s in zip(index, self.shape)):
            raise ArrayError(
                f"{self.path}: chunk {format_chunk_key(chunk)} lies outside the array "
                f"(origin {list(self.origin)}, shape {list(self.shape)})"
            )
        return index

    def cell_key(self, chunk: Sequence[int]) -> str:
        """Key of the cell's own object (unsharded arrays)."""
        if self.sharding is not None:
            raise ArrayError(f"{self.path}: is sharded; a cell has no object of its own (see shard_location)")
        return posixpath.join(self.path, "c", *map(str, self.cell_index(chunk)))

    def shard_location(self, chunk: Sequence[int]) -> tuple[str, int]:
        """``(shard object key, C-order index entry)`` of a chunk's cell in a sharded array."""
        if self.sharding is None:
            raise ArrayError(f"{self.path}: is not sharded")
        index = self.cell_index(chunk)
        ss = self.sharding.shard_shape
        shard = [i // s for i, s in zip(index, ss)]
        entry = 0
        for i, s in zip(index, ss):
            entry = entry * s + i % s
        return posixpath.join(self.path, "c", *map(str, shard)), entry

    def object_key(self, chunk: Sequence[int]) -> str:
        """Key of the object holding a chunk's cell: the cell's own, or its shard's."""
        return self.shard_location(chunk)[0] if self.sharding is not None else self.cell_key(chunk)

    def shard_of_key(self, key: str) -> tuple[int, ...]:
        """Shard indices of a shard object key (relative to the store root): one of the array's shards."""
        if self.sharding is None:
            raise InternalError(f"{self.path}: not sharded, so {key!r} names no shard")
        shards = [-(-n // s) for n, s in zip(self.shape, self.sharding.shard_shape)]
        return self._indices_of(key, shards)

    def _indices_of(self, key: str, grid: Sequence[int]) -> tuple[int, ...]:
        """The indices the object ``key`` names in ``grid`` (cells, or shards); anything else is refused."""
        parts = key[len(self.path) + 3 :].split("/")
        indices = grid_indices(parts) if len(parts) == self.ndim else None
        if indices is None or any(i >= n for i, n in zip(indices, grid)):
            raise MetadataError(f"unexpected object {key!r} in grid array {self.path}", file=key)
        return indices

    def shard_cell_counts(self) -> dict[tuple[int, ...], int]:
        """Present cells (per ``nonempty_chunks``) of every shard (sharded arrays)."""
        if self._shard_counts is None:
            assert self.sharding is not None
            counts: dict[tuple[int, ...], int] = {}
            if self.nonempty_chunks:
                idx = np.asarray(self.nonempty_chunk_coords(), dtype=np.int64) - np.asarray(self.origin)
                shards, n = np.unique(idx // np.asarray(self.sharding.shard_shape), axis=0, return_counts=True)
                counts = {tuple(s): int(c) for s, c in zip(shards.tolist(), n.tolist())}
            self._shard_counts = counts
        return self._shard_counts

    def chunk_of_key(self, key: str) -> Chunk:
        """Inverse of :meth:`cell_key` for a key relative to the store root."""
        parts = key[len(self.path) + 3 :].split("/")
        return tuple(int(p) + o for p, o in zip(parts, self.origin))

    # -- cells ------------------------------------------------------------------
    def encode_cell(self, chunk: Sequence[int], payload: bytes) -> bytes:
        if len(payload) > MAX_CELL_BYTES:
            raise InputError(
                f"{self.path}: cell {format_chunk_key(chunk)} would hold {len(payload)} bytes; a vlen cell "
                "is limited to 4 GiB - 1 (its length is a u32): use a smaller chunk_shape"
            )
        return self.pipeline.compress(frame_single(payload))

    def write_cells(self, cells: Mapping[Chunk, bytes], *, record_presence: bool = True) -> None:
        """Write whole cells (empty payload = remove the cell, as zarr's fill "")."""
        write_cells_many([(self, cells)])
        if record_presence:
            present = set(self.nonempty_chunks)
            for chunk, payload in cells.items():
                (present.add if payload else present.discard)(format_chunk_key(chunk))
            self.set_nonempty_chunks(present)

    def read_cells(self, chunks: Sequence[Sequence[int]], *, max_payload_bytes: int | None = None) -> list[bytes]:
        """Payloads (decompressed, unframed) of the given cells; b"" where absent.

        ``max_payload_bytes`` bounds every payload (see :func:`read_cells_many`).
        """
        limits = None if max_payload_bytes is None else [max_payload_bytes] * len(chunks)
        return read_cells_many([(self, c) for c in chunks], max_payload_bytes=limits)

    def read_cell(self, chunk: Sequence[int]) -> bytes:
        return self.read_cells([chunk])[0]

    def _decode(self, key: str, raw: bytes | None, max_payload: int | None = None) -> bytes:
        if raw is None:
            return b""
        limit = None if max_payload is None else max_payload + _FRAMING
        try:
            return bytes(unframe_single(self.pipeline.decompress(raw, max_size=limit, where=key)))
        except ResourceLimitError:
            raise
        except Exception as exc:
            raise EncodingError(f"{key}: cell does not decode: {exc}") from exc

    def _decode_at(self, chunk: Sequence[int], raw: bytes | None, max_payload: int | None = None) -> bytes:
        """:meth:`_decode`, naming the cell (and its shard) only when it fails."""
        if raw is None:
            return b""
        limit = None if max_payload is None else max_payload + _FRAMING
        try:
            return bytes(unframe_single(self.pipeline.decompress(raw, max_size=limit)))
        except ResourceLimitError as exc:
            raise ResourceLimitError(f"{self._where(chunk)}: {exc}") from None
        except Exception as exc:
            raise EncodingError(f"{self._where(chunk)}: cell does not decode: {exc}") from exc

    def _where(self, chunk: Sequence[int]) -> str:
        """A cell's name in error messages: its object key, plus the shard entry when sharded."""
        if self.sharding is None:
            return self.cell_key(chunk)
        key, entry = self.shard_location(chunk)
        return f"{key} (shard entry {entry}, chunk {format_chunk_key(chunk)})"

    # -- presence -----------------------------------------------------------
    @property
    def nonempty_chunks(self) -> list[str]:
        keys = self.attributes.get("nonempty_chunks", [])
        if not isinstance(keys, list):
            raise MetadataError(
                f"nonempty_chunks must be a list of chunk keys, found {type(keys).__name__}",
                file=meta_key(self.path),
                pointer="/attributes/nonempty_chunks",
            )
        return list(keys)

    def nonempty_chunk_coords(self) -> list[Chunk]:
        """The listed cells, each checked: a canonical key of ``ndim`` components inside the grid, listed once.

        Readers visit exactly these cells, so a key that does not parse, lies outside the
        array or repeats (the cell would be read twice) is refused here, naming the entry.
        """
        keys = self.nonempty_chunks
        if not keys:
            return []
        file = meta_key(self.path)
        cells = math.prod(self.shape)
        if len(keys) > cells:
            # a repeat, a stray or a malformed key lies among the first cells + 1 (no more distinct cells
            # exist): those are checked and the one found named, millions never parsed
            self._check_keys(keys[: cells + 1], file)
            raise InconsistentStoreError(f"{file}#/attributes/nonempty_chunks: lists {len(keys)} cells, more than the "
                                         f"{cells} of the array's shape {list(self.shape)}")
        return self._check_keys(keys, file)

    def _check_keys(self, keys: list[Any], file: str) -> list[Chunk]:
        try:
            coords = parse_chunk_keys(keys, self.ndim)
        except InputError:
            for i, k in enumerate(keys):  # name the first bad entry
                try:
                    parse_chunk_key(k, self.ndim)
                except InputError as exc:
                    raise MetadataError(str(exc), file=file, pointer=f"/attributes/nonempty_chunks/{i}") from None
            raise
        if len(set(keys)) != len(keys):
            first: dict[str, int] = {}
            for i, k in enumerate(keys):
                if k in first:
                    raise InconsistentStoreError(
                        f"{file}#/attributes/nonempty_chunks/{i}: cell {k} is listed twice (entries {first[k]} "
                        f"and {i}): it would be read twice"
                    )
                first[k] = i
        index = coords - np.asarray(self.origin, dtype=np.int64)
        outside = ((index < 0) | (index >= np.asarray(self.shape, dtype=np.int64))).any(axis=1)
        if outside.any():
            i = int(np.argmax(outside))
            raise MetadataError(
                f"chunk key {keys[i]!r} lies outside the array (origin {list(self.origin)}, shape {list(self.shape)})",
                file=file,
                pointer=f"/attributes/nonempty_chunks/{i}",
            )
        return list(map(tuple, coords.tolist()))

    def set_nonempty_chunks(self, keys: Iterable[str]) -> None:
        self.note_nonempty_chunks(keys)
        write_node(self.storage, self.path, self.doc)

    def note_nonempty_chunks(self, keys: Iterable[str]) -> None:
        """Set the presence list in the document without writing it (the caller writes a batch)."""
        self.attributes["nonempty_chunks"] = sort_chunk_keys(keys)
        self._shard_counts = None

    def update_attributes(self, **values: Any) -> None:
        self.attributes.update(values)
        write_node(self.storage, self.path, self.doc)

    def stored_objects(self) -> dict[str, int]:
        """The array's objects (cells, or shards) with their sizes in bytes, from one listing;
        keys relative to the store root."""
        prefix = posixpath.join(self.path, "c")
        sizes = self.storage.file_sizes(prefix)
        return {rel: n for rel, n in sizes.items() if not grid_folder(rel[len(prefix) + 1 :], self.ndim)}

    def derive_nonempty_chunks(self, stored: Mapping[str, int] | None = None) -> list[str]:
        """The dotted keys of the cells actually present on disk (``stored``: the
        :meth:`stored_objects` listing, when the caller has it).

        Unsharded: from a listing of the cell objects.  Sharded: a listing names
        shards, not cells, so every shard's index is read (one suffix range request
        each, CRC checked) and its non-empty entries are the present cells.
        """
        listed = sorted(self.stored_objects() if stored is None else stored)
        if self.sharding is None:
            cells = (self._indices_of(rel, self.shape) for rel in listed)
            return sort_chunk_keys(format_chunk_key([i + o for i, o in zip(c, self.origin)]) for c in cells)
        spec = self.sharding
        shards = [self.shard_of_key(rel) for rel in listed]
        start, end = spec.index_range()
        raws = self.storage.get_ranges([RangeRequest(rel, start, end) for rel in listed])
        # a shard None was listed and has vanished since: nothing present
        found = [(rel, shard, raw) for rel, shard, raw in zip(listed, shards, raws) if raw is not None]
        indexes, good, failed = spec.decode_indexes([raw for *_, raw in found], [rel for rel, *_ in found])
        row, entry = spec.present_many(indexes)
        coords = np.asarray([found[g][1] for g in good], dtype=np.int64).reshape(len(good), self.ndim)
        index = spec.grid_cells(row, entry, coords)
        outside = (index >= np.asarray(self.shape, dtype=np.int64)).any(axis=1)
        if outside.any():
            first = int(np.argmax(outside))
            rel = found[good[int(row[first])]][0]
            failed.setdefault(good[int(row[first])], EncodingError(
                f"{rel}: shard index lists cell {index[first].tolist()} outside the array shape {self.shape}"))
        if failed:  # the first shard in listing order that is refused
            raise failed[min(failed)]
        return sort_chunk_keys(format_chunk_key(c) for c in (index + np.asarray(self.origin, dtype=np.int64)).tolist())


def write_cells_many(batches: Sequence[tuple[GridArray, Mapping[Chunk, bytes]]]) -> None:
    """Write whole cells of several arrays of one store in one concurrent batch.

    Never touches ``nonempty_chunks``: this is the ``record_presence=False`` path
    that cell-owner tasks use.
    """
    puts: dict[str, bytes] = {}
    storage = None
    for grid, cells in batches:
        if grid.sharding is not None and cells:
            raise ArrayError(
                f"{grid.path}: is sharded (sharding_indexed, shard shape {list(grid.sharding.shard_shape)}); "
                "cells of a sharded array cannot be written one by one: run unshard_store on the store first "
                "(and shard_store again afterwards)"
            )
        storage = grid.storage
        for chunk, payload in cells.items():
            key = grid.cell_key(chunk)
            if len(payload) == 0:
                grid.storage.delete(key)
            else:
                puts[key] = grid.encode_cell(chunk, payload)
    if storage is not None:
        storage.put_many(puts)


def read_cells_many(
    requests: Sequence[tuple[GridArray, Sequence[int]]],
    *,
    required: bool = False,
    max_payload_bytes: Sequence[int | None] | None = None,
) -> list[bytes]:
    """Payloads of cells of possibly several arrays of one store, fetched and decoded concurrently.

    Unsharded and sharded arrays may be mixed; each shard object (or its index) is
    fetched once however many of its cells are asked for.  An absent cell reads as b""
    unless ``required`` (readers asking for cells a presence list names): then it is an
    :class:`InconsistentStoreError` naming the cell, never an empty answer.
    ``max_payload_bytes`` (one per request, None for no bound of its own) is the most a
    payload may hold, as the caller knows it from metadata (rows x row size); every cell
    is also held to the ``zarr_vectors.limits.max-decoded-bytes`` ceiling.  A cell
    decoding to more raises ResourceLimitError naming it, before the excess is produced.
    """
    if not requests:
        return []
    limits = list(max_payload_bytes) if max_payload_bytes is not None else [None] * len(requests)
    if len(limits) != len(requests):
        raise InputError(f"{len(limits)} payload limits for {len(requests)} cells")
    storage = requests[0][0].storage
    if any(grid.sharding is not None for grid, _ in requests):
        raws = read_stored_cells_many(requests)
        if required and None in raws:
            grid, chunk = requests[raws.index(None)]
            raise _missing(grid._where(chunk), "the shard index marks it empty, or the shard is absent"
                           if grid.sharding is not None else "no such object")
        if len(requests) < 64:
            return [grid._decode_at(chunk, raw, lim) for (grid, chunk), raw, lim in zip(requests, raws, limits)]
        # decoding is leaf work (it never waits on the pool), so it may share the I/O threads
        return map_batched(lambda i: requests[i][0]._decode_at(requests[i][1], raws[i], limits[i]), len(requests))
    keys = [grid.cell_key(chunk) for grid, chunk in requests]
    if required:
        return storage.get_decoded(keys, lambda i, raw: requests[i][0]._decode(keys[i], _present(raw, keys[i]), limits[i]))
    return storage.get_decoded(keys, lambda i, raw: requests[i][0]._decode(keys[i], raw, limits[i]))


def _missing(where: str, detail: str) -> InconsistentStoreError:
    return InconsistentStoreError(f"{where}: the cell is listed but missing on storage ({detail})")


def _present(raw: bytes | None, key: str) -> bytes:
    if raw is None:
        raise _missing(key, "no such object")
    return raw


def read_stored_cells_many(requests: Sequence[tuple[GridArray, Sequence[int]]]) -> list[bytes | None]:
    """The stored (still compressed, framed) bytes of cells; None where a cell is absent.

    For an unsharded array that is the cell's object; for a sharded one its inner
    chunk.  This is what ``shard_store`` / ``unshard_store`` move between layouts:
    the inner codecs of a shard are the array's own, so the bytes never change.
    """
    if not requests:
        return []
    storage = requests[0][0].storage
    out: list[bytes | None] = [None] * len(requests)
    plain: list[tuple[int, str]] = []
    shards: dict[tuple[str, str], tuple[GridArray, list[tuple[int, int]]]] = {}
    for i, (grid, chunk) in enumerate(requests):
        if grid.sharding is None:
            plain.append((i, grid.cell_key(chunk)))
        else:
            key, entry = grid.shard_location(chunk)
            shards.setdefault((grid.path, key), (grid, []))[1].append((i, entry))
    if plain:
        for (i, _), raw in zip(plain, storage.get_many([k for _, k in plain])):
            out[i] = raw
    if not shards:
        return out
    whole, ranged = [], []
    for (_, key), (grid, wanted) in shards.items():
        present = grid.shard_cell_counts().get(grid.shard_of_key(key), 0)
        (whole if 2 * len(wanted) >= present > 0 else ranged).append((key, grid, wanted))
    # dense requests: one GET of the whole shard object
    for (key, grid, wanted), raw in zip(whole, storage.get_many([k for k, _, _ in whole])):
        if raw is None:
            continue
        spec = grid.sharding
        start, end = spec.index_range()
        index = spec.decode_index(raw[start:end] if end is not None else raw[start:], where=key)
        for i, entry in wanted:
            span = spec.inner_slice(index, entry, where=key, object_size=len(raw))
            out[i] = raw[span[0] : span[1]] if span is not None else None
    # sparse requests: the index by a suffix (or prefix) range, then only the wanted inner chunks
    if ranged:
        fetch = [RangeRequest(key, *grid.sharding.index_range()) for key, grid, _ in ranged]
        second: list[RangeRequest] = []
        targets: list[int] = []
        for (key, grid, wanted), raw in zip(ranged, storage.get_ranges(fetch)):
            if raw is None:
                continue
            index = grid.sharding.decode_index(raw, where=key)
            for i, entry in wanted:
                span = grid.sharding.inner_slice(index, entry, where=key)
                if span is not None:
                    second.append(RangeRequest(key, span[0], span[1]))
                    targets.append(i)
        for i, (key, lo, hi), raw in zip(targets, second, storage.get_ranges(second)):
            if raw is None or len(raw) != hi - lo:
                raise EncodingError(
                    f"{key}: inner chunk at bytes [{lo}, {hi}) lies past the end of the shard object"
                )
            out[i] = raw
    return out


def grid_extent(chunks: np.ndarray) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(origin, shape) of the smallest grid covering the given (n, D) chunk coords."""
    lo = chunks.min(axis=0)
    hi = chunks.max(axis=0)
    return tuple(int(v) for v in lo), tuple(int(v) for v in hi - lo + 1)
