"""Grid ("per-chunk") arrays: one vlen-bytes cell per spatial chunk (FORMAT.md §2.1).

A cell is addressed by its absolute signed chunk coordinates; the array's own
``chunk_grid_origin`` and ``shape`` map them to a cell index and a key
``c/i/j/k``.  Cells are written whole; ``record_presence=False`` leaves the
array-wide ``nonempty_chunks`` list to a single reconcile step, which is what lets
many workers write disjoint cells of one array concurrently.
"""

from __future__ import annotations

import posixpath
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zarr_vectors.core.codecs import Pipeline
from zarr_vectors.core.nodes import array_document, meta_key, require_node, write_node
from zarr_vectors.core.paths import format_chunk_key, parse_chunk_key
from zarr_vectors.core.storage import Storage
from zarr_vectors.encoding import frame_single, unframe_single
from zarr_vectors.errors import ArrayError, EncodingError, InputError, MetadataError

Chunk = tuple[int, ...]
MAX_CELL_BYTES = 2**32 - 1


def sort_chunk_keys(keys: Iterable[str]) -> list[str]:
    """``nonempty_chunks`` order: dotted keys sorted as strings (FORMAT.md §2.1)."""
    return sorted(set(keys))


@dataclass
class GridArray:
    """An open grid array; its metadata document is held in ``doc``."""

    storage: Storage
    path: str
    doc: dict[str, Any]
    pipeline: Pipeline = field(init=False)

    def __post_init__(self) -> None:
        file = meta_key(self.path)
        if self.doc.get("data_type") != "variable_length_bytes":
            raise MetadataError(
                f"grid array must have data_type variable_length_bytes, found {self.doc.get('data_type')!r}",
                file=file,
                pointer="/data_type",
            )
        grid = self.doc["chunk_grid"]["configuration"]["chunk_shape"]
        if any(c != 1 for c in grid):
            raise MetadataError(
                "sharded or multi-cell chunk grids are not supported by this reader yet",
                file=file,
                pointer="/chunk_grid/configuration/chunk_shape",
            )
        self.pipeline = Pipeline.from_codecs(self.doc["codecs"], file=file)
        origin = self.attributes.get("chunk_grid_origin", [0] * self.ndim)
        if (
            not isinstance(origin, list)
            or len(origin) != self.ndim
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in origin)
        ):
            raise MetadataError(
                f"chunk_grid_origin must be {self.ndim} integers, found {origin!r}",
                file=file,
                pointer="/attributes/chunk_grid_origin",
            )

    # -- construction ---------------------------------------------------------
    @classmethod
    def create(
        cls,
        storage: Storage,
        path: str,
        *,
        shape: Sequence[int],
        origin: Sequence[int],
        attributes: Mapping[str, Any],
        compressor: dict[str, Any] | None,
    ) -> GridArray:
        """Write a new (empty) grid array's metadata; never touches cells."""
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
        write_node(storage, path, doc)
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

    def cell_key(self, chunk: Sequence[int]) -> str:
        if len(chunk) != self.ndim:
            raise ArrayError(f"{self.path}: chunk {tuple(chunk)} has {len(chunk)} coordinates, array has {self.ndim}")
        index = [int(c) - o for c, o in zip(chunk, self.origin)]
        if any(i < 0 or i >= s for i, s in zip(index, self.shape)):
            raise ArrayError(
                f"{self.path}: chunk {format_chunk_key(chunk)} lies outside the array "
                f"(origin {list(self.origin)}, shape {list(self.shape)})"
            )
        return posixpath.join(self.path, "c", *map(str, index))

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

    def read_cells(self, chunks: Sequence[Sequence[int]]) -> list[bytes]:
        """Payloads (decompressed, unframed) of the given cells; b"" where absent."""
        return read_cells_many([(self, c) for c in chunks])

    def read_cell(self, chunk: Sequence[int]) -> bytes:
        return self.read_cells([chunk])[0]

    def _decode(self, key: str, raw: bytes | None) -> bytes:
        if raw is None:
            return b""
        try:
            return bytes(unframe_single(self.pipeline.decompress(raw)))
        except Exception as exc:
            raise EncodingError(f"{key}: cell does not decode: {exc}") from exc

    # -- presence -----------------------------------------------------------
    @property
    def nonempty_chunks(self) -> list[str]:
        return list(self.attributes.get("nonempty_chunks", []))

    def nonempty_chunk_coords(self) -> list[Chunk]:
        return [parse_chunk_key(k, self.ndim) for k in self.nonempty_chunks]

    def set_nonempty_chunks(self, keys: Iterable[str]) -> None:
        self.attributes["nonempty_chunks"] = sort_chunk_keys(keys)
        write_node(self.storage, self.path, self.doc)

    def update_attributes(self, **values: Any) -> None:
        self.attributes.update(values)
        write_node(self.storage, self.path, self.doc)

    def derive_nonempty_chunks(self) -> list[str]:
        """The dotted keys of the cells actually present, from a listing."""
        prefix = posixpath.join(self.path, "c")
        keys = []
        for rel in self.storage.list_files(prefix):
            parts = rel[len(prefix) + 1 :].split("/")
            if len(parts) != self.ndim or not all(p.isdigit() for p in parts):
                raise MetadataError(f"unexpected object {rel!r} in grid array {self.path}", file=rel)
            keys.append(format_chunk_key([int(p) + o for p, o in zip(parts, self.origin)]))
        return sort_chunk_keys(keys)


def write_cells_many(batches: Sequence[tuple[GridArray, Mapping[Chunk, bytes]]]) -> None:
    """Write whole cells of several arrays of one store in one concurrent batch.

    Never touches ``nonempty_chunks``: this is the ``record_presence=False`` path
    that cell-owner tasks use.
    """
    puts: dict[str, bytes] = {}
    storage = None
    for grid, cells in batches:
        storage = grid.storage
        for chunk, payload in cells.items():
            key = grid.cell_key(chunk)
            if len(payload) == 0:
                grid.storage.delete(key)
            else:
                puts[key] = grid.encode_cell(chunk, payload)
    if storage is not None:
        storage.put_many(puts)


def read_cells_many(requests: Sequence[tuple[GridArray, Sequence[int]]]) -> list[bytes]:
    """Payloads of cells of possibly several arrays of one store, fetched and decoded concurrently."""
    if not requests:
        return []
    storage = requests[0][0].storage
    keys = [grid.cell_key(chunk) for grid, chunk in requests]
    if getattr(storage.fs, "async_impl", False) or len(requests) == 1:
        raws = storage.get_many(keys)
        return [grid._decode(k, raw) for (grid, _), k, raw in zip(requests, keys, raws)]
    with ThreadPoolExecutor(min(16, len(requests))) as pool:
        return list(pool.map(lambda i: requests[i][0]._decode(keys[i], storage.get(keys[i])), range(len(keys))))


def grid_extent(chunks: np.ndarray) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(origin, shape) of the smallest grid covering the given (n, D) chunk coords."""
    lo = chunks.min(axis=0)
    hi = chunks.max(axis=0)
    return tuple(int(v) for v in lo), tuple(int(v) for v in hi - lo + 1)
