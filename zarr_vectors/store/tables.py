"""Object-level arrays: typed numeric tables and 1-D vlen row arrays.

``object_attributes/<n>`` and ``object_index/object_ids`` are ordinary numeric
arrays (docs/format.md §2.3, §6.8); ``object_index/manifests`` is a 1-D vlen array with
many rows per chunk (§2.2, §6.7).  Chunks equal to the fill value are not stored;
edge chunks are stored full size, padded with the fill value, as zarr does.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from typing import Any

import numpy as np

from zarr_vectors.encoding import frame_items, unframe_items
from zarr_vectors.errors import EncodingError, MetadataError, ZarrVectorsError
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


def read_table(storage: Storage, path: str) -> tuple[np.ndarray, dict[str, Any]]:
    """A whole numeric array and its attributes."""
    doc = require_node(storage, path, "array")
    file = meta_key(path)
    try:
        dtype = np.dtype(doc["data_type"]).newbyteorder("<")
    except TypeError as exc:
        raise MetadataError(f"unsupported data_type {doc['data_type']!r}", file=file, pointer="/data_type") from exc
    shape = tuple(doc["shape"])
    chunk_shape = tuple(doc["chunk_grid"]["configuration"]["chunk_shape"])
    if chunk_shape[1:] != shape[1:]:
        raise MetadataError("object-level arrays must be chunked along the first axis only", file=file,
                            pointer="/chunk_grid/configuration/chunk_shape")
    pipeline = Pipeline.from_codecs(doc["codecs"], file=file)
    fill = fill_value_from_json(doc["fill_value"], dtype)
    out = np.full(shape, fill, dtype=dtype)
    n_chunks = -(-shape[0] // chunk_shape[0]) if shape[0] else 0
    keys = [_chunk_key(path, (i,) + (0,) * (len(shape) - 1)) for i in range(n_chunks)]
    expected = int(np.prod(chunk_shape)) * dtype.itemsize
    for i, raw in enumerate(storage.get_many(keys)):
        if raw is None:
            continue
        try:
            buf = pipeline.decompress(raw)
        except ZarrVectorsError:
            raise
        except Exception as exc:  # a codec library's own error (zstd raises RuntimeError)
            raise EncodingError(f"{keys[i]}: chunk does not decode: {exc}") from exc
        if len(buf) != expected:
            raise EncodingError(f"{keys[i]}: chunk holds {len(buf)} bytes, expected {expected}")
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
    """Write a 1-D vlen array, ``min(chunk_rows, len(rows))`` rows per chunk."""
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
        part = list(rows[start : start + rows_per_chunk])
        if not any(part):
            continue
        part += [b""] * (rows_per_chunk - len(part))
        puts[_chunk_key(path, (i,))] = pipeline.compress(frame_items(part))
    storage.put_many(puts)
    write_node(storage, path, doc)


def read_vlen_rows(storage: Storage, path: str) -> list[bytes]:
    doc = require_node(storage, path, "array")
    file = meta_key(path)
    if doc.get("data_type") != "variable_length_bytes" or len(doc["shape"]) != 1:
        raise MetadataError("expected a 1-D variable_length_bytes array", file=file, pointer="/data_type")
    n = doc["shape"][0]
    rows_per_chunk = doc["chunk_grid"]["configuration"]["chunk_shape"][0]
    pipeline = Pipeline.from_codecs(doc["codecs"], file=file)
    n_chunks = -(-n // rows_per_chunk) if n else 0
    keys = [_chunk_key(path, (i,)) for i in range(n_chunks)]
    out: list[bytes] = []
    for i, raw in enumerate(storage.get_many(keys)):
        count = min(rows_per_chunk, n - i * rows_per_chunk)
        if raw is None:
            out.extend([b""] * count)
            continue
        try:
            items = unframe_items(pipeline.decompress(raw))
        except Exception as exc:
            raise EncodingError(f"{keys[i]}: chunk does not decode: {exc}") from exc
        if len(items) != rows_per_chunk:
            raise EncodingError(f"{keys[i]}: chunk holds {len(items)} rows, expected {rows_per_chunk}")
        out.extend(bytes(x) for x in items[:count])
    return out
