"""Object-level arrays: typed numeric tables and 1-D vlen row arrays.

``object_attributes/<n>`` and ``object_index/object_ids`` are ordinary numeric
arrays (docs/format.md §2.3, §6.8); ``object_index/manifests`` is a 1-D vlen array with
many rows per chunk (§2.2, §6.7).  Chunks equal to the fill value are not stored;
edge chunks are stored full size, padded with the fill value, as zarr does.
"""

from __future__ import annotations

import math
import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarr_vectors import config
from zarr_vectors.encoding import FramedItems, frame_items, item_spans
from zarr_vectors.errors import EncodingError, MetadataError, ResourceLimitError
from zarr_vectors.format.paths import grid_indices
from zarr_vectors.store.backend import Storage
from zarr_vectors.store.codecs import ZSTD_DEFAULT, Pipeline
from zarr_vectors.store.nodes import (
    array_document,
    fill_value_from_json,
    fill_value_json,
    meta_key,
    require_node,
    write_node,
)

MANIFEST_CHUNK_ROWS = 16384
OBJECT_ATTRIBUTE_CHUNK_ROWS = 65536
_ASK_DIRECTLY = 64  # up to this many declared chunks are requested by key; more are found by a listing


def _chunk_key(path: str, index: Sequence[int]) -> str:
    return posixpath.join(path, "c", *map(str, index))


def write_table(
    storage: Storage,
    path: str,
    data: np.ndarray,
    *,
    fill_value: Any,
    attributes: dict[str, Any],
    compressor: dict[str, Any] | None,
    chunk_rows: int = OBJECT_ATTRIBUTE_CHUNK_ROWS,
) -> None:
    """Write a whole numeric array chunked along its first axis."""
    dtype = data.dtype.newbyteorder("<") if data.dtype.byteorder == ">" else data.dtype
    data = np.ascontiguousarray(data, dtype=dtype)
    chunk_shape = (max(1, chunk_rows),) + data.shape[1:]
    doc = array_document(
        shape=data.shape,
        data_type=str(np.dtype(dtype).name),
        chunk_shape=chunk_shape,
        fill_value=fill_value_json(fill_value, np.dtype(dtype)),
        codecs=Pipeline.codecs_json("bytes", compressor),
        attributes=attributes,
    )
    pipeline = Pipeline.from_codecs(doc["codecs"], file=meta_key(path))
    fill = np.full(chunk_shape, fill_value, dtype=dtype)
    puts = {}
    for i, start in enumerate(range(0, data.shape[0], chunk_shape[0])):
        block = fill.copy()
        part = data[start : start + chunk_shape[0]]
        block[: len(part)] = part
        if np.array_equal(block, fill, equal_nan=dtype.kind == "f"):
            continue
        puts[_chunk_key(path, (i,) + (0,) * (data.ndim - 1))] = pipeline.compress(block.tobytes())
    storage.put_many(puts)
    write_node(storage, path, doc)


def _declared_grid(doc: dict[str, Any], file: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(shape, chunk_shape) of an object-level array, checked: non-negative / positive integers, one per axis."""
    shape = doc.get("shape")
    grid = (doc.get("chunk_grid") or {}).get("configuration", {}).get("chunk_shape") if isinstance(
        doc.get("chunk_grid"), dict) else None
    if not isinstance(shape, list) or not shape or not all(_is_int(v) and v >= 0 for v in shape):
        raise MetadataError(f"shape must be non-negative integers, found {shape!r}", file=file, pointer="/shape")
    if not isinstance(grid, list) or len(grid) != len(shape) or not all(_is_int(v) and v >= 1 for v in grid):
        raise MetadataError(f"chunk_shape must be {len(shape)} positive integers, found {grid!r}", file=file,
                            pointer="/chunk_grid/configuration/chunk_shape")
    return tuple(shape), tuple(grid)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_declared(file: str, n_chunks: int, nbytes: int = 0) -> None:
    """Refuse a declared grid of more chunks, or more decoded bytes, than ``zarr_vectors.limits`` allow.

    Checked before anything is listed, fetched or allocated: a shape is a number in a
    document, and a reader must not plan work or memory in proportion to it unchecked.
    """
    max_chunks = int(config.get("limits.max-declared-chunks"))
    if n_chunks > max_chunks:
        raise ResourceLimitError(
            f"{file}: declares {n_chunks} chunks, more than zarr_vectors.limits.max-declared-chunks ({max_chunks})"
        )
    ceiling = int(config.get("limits.max-decoded-bytes"))
    if nbytes > ceiling:
        raise ResourceLimitError(
            f"{file}: the array declares {nbytes} bytes, more than zarr_vectors.limits.max-decoded-bytes ({ceiling})"
        )


def present_chunks(storage: Storage, path: str, n_chunks: int, ndim: int) -> list[int]:
    """First-axis indices of the stored chunks of an array chunked along its first axis, ascending.

    A few chunks are simply asked for; more are found by one listing, so the requests made
    follow what is stored, never the declared shape.  Objects that are not chunks of the
    declared grid are not part of the array (as in zarr) and are left out.
    """
    if n_chunks <= _ASK_DIRECTLY:
        return list(range(n_chunks))
    prefix = posixpath.join(path, "c") + "/"
    tail = "/0" * (ndim - 1)
    found = []
    for key in storage.list_files(posixpath.join(path, "c")):
        rel = key[len(prefix):] if key.startswith(prefix) else ""
        head = rel[: len(rel) - len(tail)] if rel.endswith(tail) else ""
        index = grid_indices([head])
        if index is not None and index[0] < n_chunks:
            found.append(index[0])
    return sorted(found)


def read_table(storage: Storage, path: str) -> tuple[np.ndarray, dict[str, Any]]:
    """A whole numeric array and its attributes.

    Each chunk decodes with its exact size (chunk shape x item size) as the limit, and the
    whole array must fit ``zarr_vectors.limits.max-decoded-bytes``.
    """
    doc = require_node(storage, path, "array")
    file = meta_key(path)
    try:
        dtype = np.dtype(doc["data_type"]).newbyteorder("<")
    except TypeError as exc:
        raise MetadataError(f"unsupported data_type {doc['data_type']!r}", file=file, pointer="/data_type") from exc
    shape, chunk_shape = _declared_grid(doc, file)
    if chunk_shape[1:] != shape[1:]:
        raise MetadataError("object-level arrays must be chunked along the first axis only", file=file,
                            pointer="/chunk_grid/configuration/chunk_shape")
    n_chunks = -(-shape[0] // chunk_shape[0])
    expected = math.prod(chunk_shape) * dtype.itemsize
    _check_declared(file, n_chunks, max(math.prod(shape) * dtype.itemsize, expected))
    pipeline = Pipeline.from_codecs(doc["codecs"], file=file)
    fill = fill_value_from_json(doc["fill_value"], dtype)
    out = np.full(shape, fill, dtype=dtype)
    indices = present_chunks(storage, path, n_chunks, len(shape))
    keys = [_chunk_key(path, (i,) + (0,) * (len(shape) - 1)) for i in indices]
    for i, key, raw in zip(indices, keys, storage.get_many(keys)):
        if raw is None:
            continue
        try:
            buf = pipeline.decompress(raw, max_size=expected, where=key)
        except EncodingError as exc:
            raise EncodingError(f"{key}: chunk does not decode: {exc}") from None
        if len(buf) != expected:
            raise EncodingError(f"{key}: chunk holds {len(buf)} bytes, expected {expected}")
        block = np.frombuffer(buf, dtype=dtype).reshape(chunk_shape)
        start = i * chunk_shape[0]
        out[start : start + chunk_shape[0]] = block[: shape[0] - start]
    return out, doc.get("attributes", {})


def write_vlen_rows(
    storage: Storage,
    path: str,
    rows: Sequence[bytes],
    *,
    attributes: dict[str, Any] | None = None,
    compressor: dict[str, Any] | None = ZSTD_DEFAULT,
    chunk_rows: int = MANIFEST_CHUNK_ROWS,
) -> None:
    """Write a 1-D vlen array, ``min(chunk_rows, len(rows))`` rows per chunk.

    ``rows`` is sliced a chunk at a time: a sequence whose slices are :class:`FramedItems`
    (``encoding.Mode0Manifests``) makes each chunk's rows only then."""
    n = len(rows)
    rows_per_chunk = max(1, min(chunk_rows, n))
    doc = array_document(
        shape=(n,),
        data_type="variable_length_bytes",
        chunk_shape=(rows_per_chunk,),
        fill_value="",
        codecs=Pipeline.codecs_json("vlen-bytes", compressor),
        attributes=attributes or {},
    )
    pipeline = Pipeline.from_codecs(doc["codecs"], file=meta_key(path))
    puts = {}
    for i, start in enumerate(range(0, n, rows_per_chunk)):
        part = FramedItems.of(rows[start : start + rows_per_chunk])
        if not part.lengths.any():
            continue
        puts[_chunk_key(path, (i,))] = pipeline.compress(frame_items(part, count=rows_per_chunk))
    storage.put_many(puts)
    write_node(storage, path, doc)


@dataclass(frozen=True)
class VlenRows:
    """The stored rows of a 1-D vlen array: what its present chunks hold, never its declared length.

    ``rows`` are the rows of every stored chunk in row order (padding past the array's
    end left out), ``row_numbers`` the row each one is; rows of chunks not stored are the
    fill value ``b""`` and are not listed.
    """

    num_rows: int
    rows: FramedItems
    row_numbers: np.ndarray


def read_vlen_rows(
    storage: Storage, path: str, *, chunk_limit: Callable[[int, int], int | None] | None = None
) -> VlenRows:
    """The rows of a 1-D vlen array (``object_index/manifests``), chunk by stored chunk.

    ``chunk_limit(rows in the chunk, rows per chunk)`` is the most a chunk may decode to, as
    the caller knows it from metadata (:func:`zarr_vectors.format.bounds.manifest_chunk_bound`);
    None, or no function, leaves the global ceiling.
    """
    doc = require_node(storage, path, "array")
    file = meta_key(path)
    if doc.get("data_type") != "variable_length_bytes" or not isinstance(doc.get("shape"), list) or len(
            doc["shape"]) != 1:
        raise MetadataError("expected a 1-D variable_length_bytes array", file=file, pointer="/data_type")
    (n,), (rows_per_chunk,) = _declared_grid(doc, file)
    n_chunks = -(-n // rows_per_chunk)
    _check_declared(file, n_chunks)
    pipeline = Pipeline.from_codecs(doc["codecs"], file=file)
    indices = present_chunks(storage, path, n_chunks, 1)
    keys = [_chunk_key(path, (i,)) for i in indices]
    parts: list[FramedItems] = []
    firsts: list[int] = []
    counts: list[int] = []
    for i, key, raw in zip(indices, keys, storage.get_many(keys)):
        if raw is None:
            continue
        limit = chunk_limit(min(rows_per_chunk, n - i * rows_per_chunk), rows_per_chunk) if chunk_limit else None
        try:
            items = item_spans(pipeline.decompress(raw, max_size=limit, where=key))
        except ResourceLimitError:
            raise
        except Exception as exc:
            raise EncodingError(f"{key}: chunk does not decode: {exc}") from exc
        if len(items) != rows_per_chunk:
            raise EncodingError(f"{key}: chunk holds {len(items)} rows, expected {rows_per_chunk}")
        count = min(rows_per_chunk, n - i * rows_per_chunk)
        parts.append(items[:count])
        firsts.append(i * rows_per_chunk)
        counts.append(count)
    rows = FramedItems.concat(parts)
    first = np.asarray(firsts, dtype=np.int64)
    lengths = np.asarray(counts, dtype=np.int64)
    numbers = np.repeat(first - (np.cumsum(lengths) - lengths), lengths) + np.arange(len(rows), dtype=np.int64)
    return VlenRows(n, rows, numbers)
