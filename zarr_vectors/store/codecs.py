"""The codec pipelines Zarr Vectors arrays declare, as small typed objects.

A grid array's pipeline is ``vlen-bytes`` optionally followed by one bytes->bytes
compressor, or -- sharded (docs/format.md §9) -- one ``sharding_indexed`` codec whose inner
chunks (one cell each) use such a pipeline (:class:`ShardingSpec`, which also encodes
and decodes shard objects); a typed (object-level) array's is ``bytes`` (little endian)
optionally followed by one.  Compressors are numcodecs' implementations, which are the ones
zarr-python itself runs, so the bytes on disk are what zarr would write.  Decoding is
bounded (:mod:`zarr_vectors.store.inflate`): every decode has a most-bytes limit, the
caller's expected size capped by ``zarr_vectors.limits.max-decoded-bytes``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numcodecs
import numpy as np

from zarr_vectors import config
from zarr_vectors.errors import EncodingError, InputError, MetadataError
from zarr_vectors.format.schema import short
from zarr_vectors.store.extensions import check_codec_configuration
from zarr_vectors.store.inflate import inflate_blosc, inflate_gzip, inflate_zstd, too_large
from zarr_vectors.store.strict_json import json_pointer

#: What ``compressor="zstd"`` writes: the reference's high-level default.
ZSTD_DEFAULT: dict[str, Any] = {"name": "zstd", "configuration": {"level": 0, "checksum": False}}
BLOSC_DEFAULT: dict[str, Any] = {
    "name": "blosc",
    "configuration": {
        "typesize": 4,
        "cname": "zstd",
        "clevel": 5,
        "shuffle": "bitshuffle",
        "blocksize": 0,
    },
}
GZIP_DEFAULT: dict[str, Any] = {"name": "gzip", "configuration": {"level": 5}}
_SHORT_NAMES = {"zstd": ZSTD_DEFAULT, "blosc": BLOSC_DEFAULT, "gzip": GZIP_DEFAULT}
_BLOSC_SHUFFLE = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}


def compressor_config(compressor: str | dict[str, Any] | None) -> dict[str, Any] | None:
    """Normalise the user's ``compressor`` argument to a codec JSON object (or None)."""
    if compressor is None or compressor == "none":
        return None
    if isinstance(compressor, str) and compressor in _SHORT_NAMES:
        return _SHORT_NAMES[compressor]
    if isinstance(compressor, Mapping) and compressor.get("name") in _SHORT_NAMES:
        compressor = dict(compressor)
        try:
            Compressor.from_config(compressor, file="<argument>")  # validates
        except MetadataError as exc:
            raise InputError(f"compressor {compressor!r}: {exc}") from None
        return compressor
    raise InputError(
        f"unsupported compressor {compressor!r}: use 'zstd' (default), 'blosc', 'gzip', 'none', or a Zarr v3 "
        "codec object {'name': 'zstd' | 'blosc' | 'gzip', 'configuration': {...}}"
    )


def _codec_object(codec: Any, *, file: str, pointer: str) -> dict[str, Any]:
    """A codec as ``{"name": ..., "configuration": {...}}`` (a bare name is the short form)."""
    if isinstance(codec, str):
        return {"name": codec, "configuration": {}}
    if not isinstance(codec, dict) or not isinstance(codec.get("configuration", {}), dict):
        raise MetadataError(f"a codec is a name or an object with a name and an object configuration, found "
                            f"{short(codec)}", file=file, pointer=pointer)
    return codec if "configuration" in codec else {**codec, "configuration": {}}


def json_pointer_below(pointer: str, *tokens: str | int) -> str:
    return pointer + json_pointer(*tokens)


@dataclass(frozen=True)
class Compressor:
    """One bytes->bytes codec."""

    config: dict[str, Any]
    impl: Any

    @classmethod
    def from_config(cls, config: Any, *, file: str, pointer: str = "") -> Compressor:
        """The compressor a codec object declares.

        Raises :class:`MetadataError` (file and JSON pointer) for an unsupported codec or any
        configuration its definition refuses (:mod:`zarr_vectors.store.extensions`: unknown
        keys, values out of range), before numcodecs sees a value.
        """
        codec = _codec_object(config, file=file, pointer=pointer)
        name, conf = codec.get("name"), codec.get("configuration", {})
        if name not in ("zstd", "blosc", "gzip"):
            raise MetadataError(f"unsupported codec {short(name)}", file=file, pointer=pointer)
        for where, message in check_codec_configuration(name, conf):
            raise MetadataError(message, file=file, pointer=json_pointer_below(pointer, "configuration", *where))
        try:
            if name == "zstd":
                impl = numcodecs.Zstd(level=conf.get("level", 0), checksum=conf.get("checksum", False))
            elif name == "blosc":
                impl = numcodecs.Blosc(
                    cname=conf.get("cname", "zstd"),
                    clevel=conf.get("clevel", 5),
                    shuffle=_BLOSC_SHUFFLE[conf.get("shuffle", "noshuffle")],
                    blocksize=conf.get("blocksize", 0),
                )
            else:
                impl = numcodecs.GZip(level=conf.get("level", 5))
        except (TypeError, ValueError) as exc:  # numcodecs refusing what the definition allows
            raise MetadataError(f"bad {name} codec configuration: {exc}", file=file, pointer=pointer) from exc
        return cls(codec, impl)

    def encode(self, data: bytes) -> bytes:
        return bytes(self.impl.encode(data))

    def decode(self, data: bytes, *, limit: int | None = None, where: str = "") -> bytes:
        """The decoded bytes, at most ``limit`` (default: the ``max-decoded-bytes`` ceiling).

        More output raises ResourceLimitError; undecodable input raises EncodingError.
        """
        if limit is None:
            limit = decode_limit(None)
        name = self.config.get("name")
        if name == "zstd":
            return inflate_zstd(data, limit, where)
        if name == "gzip":
            return inflate_gzip(data, limit, where)
        return inflate_blosc(data, limit, where, self.impl.decode)


@dataclass(frozen=True)
class Pipeline:
    """An array's declared codec list, reduced to what this format allows."""

    serializer: str  # "vlen-bytes" or "bytes"
    compressor: Compressor | None

    @classmethod
    def from_codecs(cls, codecs: Any, *, file: str, pointer: str = "/codecs") -> Pipeline:
        """The pipeline a codec list declares; :class:`MetadataError` at the first codec this format refuses."""
        if not isinstance(codecs, list) or not codecs:
            raise MetadataError(f"codecs must be a non-empty list, found {short(codecs)}", file=file, pointer=pointer)
        first = _codec_object(codecs[0], file=file, pointer=f"{pointer}/0")
        name = first.get("name")
        if name not in ("vlen-bytes", "bytes"):
            raise MetadataError(
                f"unsupported array->bytes codec {short(name)} (expected vlen-bytes or bytes)",
                file=file,
                pointer=f"{pointer}/0/name",
            )
        for where, message in check_codec_configuration(name, first.get("configuration", {})):
            raise MetadataError(message, file=file, pointer=json_pointer_below(f"{pointer}/0", "configuration", *where))
        if name == "bytes":
            endian = first.get("configuration", {}).get("endian", "little")
            if endian != "little":
                raise MetadataError(
                    f"unsupported endianness {endian!r}", file=file, pointer=f"{pointer}/0/configuration/endian"
                )
        if len(codecs) > 2:
            raise MetadataError(
                f"{len(codecs)} codecs declared; this format allows one compressor after {name}",
                file=file,
                pointer=pointer,
            )
        comp = Compressor.from_config(codecs[1], file=file, pointer=f"{pointer}/1") if len(codecs) == 2 else None
        return cls(name, comp)

    @staticmethod
    def codecs_json(serializer: str, compressor: dict[str, Any] | None) -> list[dict[str, Any]]:
        first: dict[str, Any] = (
            {"name": "vlen-bytes", "configuration": {}}
            if serializer == "vlen-bytes"
            else {"name": "bytes", "configuration": {"endian": "little"}}
        )
        return [first] + ([compressor] if compressor else [])

    def compress(self, framed: bytes) -> bytes:
        return self.compressor.encode(framed) if self.compressor else framed

    def decompress(self, stored: bytes, *, max_size: int | None = None, where: str = "") -> bytes:
        """Stored bytes decoded: at most ``max_size`` bytes (the expected size, when the
        metadata gives it), never more than ``zarr_vectors.limits.max-decoded-bytes``.

        ``where`` names the node and cell in errors: ResourceLimitError for output past
        the limit, EncodingError for input that does not decode.
        """
        limit = decode_limit(max_size)
        if self.compressor is None:
            if len(stored) > limit:
                raise too_large(where, limit, "holds")
            return stored
        return self.compressor.decode(stored, limit=limit, where=where)


def decode_limit(max_size: int | None) -> int:
    """The most bytes one decode may produce: ``max_size`` capped by the configured ceiling."""
    ceiling = int(config.get("limits.max-decoded-bytes"))
    return ceiling if max_size is None else min(int(max_size), ceiling)


# ---------------------------------------------------------------------------------------
# sharding_indexed (docs/format.md §9)
# ---------------------------------------------------------------------------------------
#: The index codecs this project writes: little-endian u64 pairs, then a CRC32C.
INDEX_CODECS: list[dict[str, Any]] = [
    {"name": "bytes", "configuration": {"endian": "little"}},
    {"name": "crc32c"},
]
#: Largest number of inner cells per shard accepted (a 64 MiB index).
MAX_CELLS_PER_SHARD = 1 << 22
_EMPTY = np.uint64(0xFFFF_FFFF_FFFF_FFFF)


def crc32c(data: bytes | memoryview) -> int:
    """CRC32C (Castagnoli) of ``data``.

    ``google-crc32c`` is the implementation zarr-python's own ``crc32c`` codec runs
    (a zarr dependency, C accelerated), so shard indexes checksum exactly as zarr's.
    """
    import google_crc32c

    return int(google_crc32c.value(bytes(data)))


def morton_codes(positions: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """zarr-python's (compressed) Morton code of each inner position (n, D) of a shard.

    Bit ``b`` of every axis that still has bits is interleaved in axis order, axis 0
    lowest; axes of length 1 contribute no bits.  zarr lays inner chunks out in the
    shard object in increasing code order, so writing them in this order gives the
    bytes zarr writes.
    """
    pos = np.asarray(positions, dtype=np.int64).reshape(-1, len(shape))
    bits = [(int(s) - 1).bit_length() for s in shape]
    code = np.zeros(len(pos), dtype=np.int64)
    out_bit = 0
    for b in range(max(bits, default=0)):
        for d, nb in enumerate(bits):
            if b < nb:
                code |= ((pos[:, d] >> b) & 1) << out_bit
                out_bit += 1
    return code


@dataclass(frozen=True)
class ShardingSpec:
    """A grid array's ``sharding_indexed`` codec: inner cells of one spatial chunk each.

    ``shard_shape`` is the array's outer chunk shape (cells per shard along each axis,
    may exceed the array shape); ``inner`` is the pipeline of every inner chunk
    (``vlen-bytes`` plus the store's compressor, docs/decisions.md D14); the index is
    ``prod(shard_shape)`` ``(u64 offset, u64 nbytes)`` pairs in C order of inner
    position, all-ones for an empty cell, optionally followed by a CRC32C of itself,
    at the end (written) or the start (read too) of the shard object.
    """

    shard_shape: tuple[int, ...]
    inner: Pipeline
    inner_codecs: tuple[dict[str, Any], ...]
    index_location: str = "end"
    index_crc: bool = True

    # -- metadata ------------------------------------------------------------------------
    @classmethod
    def from_array(cls, doc: dict[str, Any], *, file: str) -> ShardingSpec | None:
        """The spec of an array document whose first codec is ``sharding_indexed`` (else None)."""
        codecs = doc.get("codecs")
        if not isinstance(codecs, list) or not codecs or not isinstance(codecs[0], dict):
            return None
        if codecs[0].get("name") != "sharding_indexed":
            return None
        if len(codecs) != 1:
            raise MetadataError(
                "sharding_indexed must be the only array codec of a grid array", file=file, pointer="/codecs"
            )
        ndim = len(doc.get("shape") or [])
        conf = codecs[0].get("configuration") or {}
        where = "/codecs/0/configuration"
        inner_shape = conf.get("chunk_shape")
        if not isinstance(inner_shape, list) or len(inner_shape) != ndim or any(c != 1 for c in inner_shape):
            raise MetadataError(
                f"sharded grid arrays need inner chunk_shape {[1] * ndim} (one cell per inner chunk), "
                f"found {inner_shape!r}",
                file=file,
                pointer=f"{where}/chunk_shape",
            )
        grid = ((doc.get("chunk_grid") or {}).get("configuration") or {}).get("chunk_shape")
        if (
            not isinstance(grid, list)
            or len(grid) != ndim
            or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in grid)
        ):
            raise MetadataError(
                f"shard shape must be {ndim} positive integers, found {grid!r}",
                file=file,
                pointer="/chunk_grid/configuration/chunk_shape",
            )
        if math.prod(grid) > MAX_CELLS_PER_SHARD:
            raise MetadataError(
                f"shard shape {grid} has more than {MAX_CELLS_PER_SHARD} cells per shard",
                file=file,
                pointer="/chunk_grid/configuration/chunk_shape",
            )
        inner_codecs = conf.get("codecs")
        if not isinstance(inner_codecs, list):
            raise MetadataError("sharding_indexed needs a codecs list", file=file, pointer=f"{where}/codecs")
        inner = Pipeline.from_codecs(inner_codecs, file=file, pointer=f"{where}/codecs")
        if inner.serializer != "vlen-bytes":
            raise MetadataError(
                f"inner chunks of a grid array must be vlen-bytes, found {inner.serializer}",
                file=file,
                pointer=f"{where}/codecs/0",
            )
        index_codecs = conf.get("index_codecs")
        names = [c.get("name") if isinstance(c, dict) else c for c in index_codecs or []]
        if names not in (["bytes"], ["bytes", "crc32c"]):
            raise MetadataError(
                f"unsupported shard index codecs {names!r} (expected bytes, optionally then crc32c)",
                file=file,
                pointer=f"{where}/index_codecs",
            )
        endian = ((index_codecs[0] if isinstance(index_codecs[0], dict) else {}).get("configuration") or {}).get(
            "endian", "little"
        )
        if endian != "little":
            raise MetadataError(
                f"unsupported shard index endianness {endian!r}", file=file, pointer=f"{where}/index_codecs/0"
            )
        location = conf.get("index_location", "end")
        if location not in ("end", "start"):
            raise MetadataError(
                f"index_location must be 'end' or 'start', found {location!r}",
                file=file,
                pointer=f"{where}/index_location",
            )
        return cls(tuple(grid), inner, tuple(inner_codecs), location, len(names) == 2)

    @staticmethod
    def codec_json(ndim: int, inner_codecs: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """The ``sharding_indexed`` codec object this project writes (as zarr-python spells it)."""
        return {
            "name": "sharding_indexed",
            "configuration": {
                "chunk_shape": [1] * ndim,
                "codecs": [dict(c) for c in inner_codecs],
                "index_codecs": [dict(c) for c in INDEX_CODECS],
                "index_location": "end",
            },
        }

    # -- geometry ------------------------------------------------------------------------
    @property
    def cells_per_shard(self) -> int:
        return math.prod(self.shard_shape)

    @property
    def index_nbytes(self) -> int:
        return 16 * self.cells_per_shard + (4 if self.index_crc else 0)

    def index_range(self) -> tuple[int, int | None]:
        """``(start, end)`` of the index in a shard object, fsspec style (negative = from the end)."""
        if self.index_location == "end":
            return -self.index_nbytes, None
        return 0, self.index_nbytes

    def local_linear(self, local: np.ndarray) -> np.ndarray:
        """C-order index entry of inner positions (n, D)."""
        return np.ravel_multi_index(tuple(np.asarray(local, dtype=np.int64).T), self.shard_shape)

    # -- encoding ------------------------------------------------------------------------
    def encode_shard(self, cells: Mapping[int, bytes]) -> bytes | None:
        """A shard object from stored inner chunks keyed by C-order entry; None when all are empty.

        Inner chunks are laid out in zarr-python's Morton order and the index (C order)
        goes at the end with its CRC32C, so the object is byte-identical to what
        zarr-python writes for the same cells and codecs.
        """
        if self.index_location != "end" or not self.index_crc:
            raise InputError("this writer only writes shard indexes at the end, with a CRC32C")
        entries = np.asarray(sorted(e for e, v in cells.items() if len(v)), dtype=np.int64)
        if entries.size == 0:
            return None
        if entries[0] < 0 or entries[-1] >= self.cells_per_shard:
            raise InputError(f"inner cell entries must lie in [0, {self.cells_per_shard})")
        local = np.stack(np.unravel_index(entries, self.shard_shape), axis=1)
        order = entries[np.argsort(morton_codes(local, self.shard_shape), kind="stable")]
        index = np.full((self.cells_per_shard, 2), _EMPTY, dtype="<u8")
        parts = []
        offset = 0
        for e in order.tolist():
            value = cells[e]
            index[e] = (offset, len(value))
            parts.append(value)
            offset += len(value)
        index_bytes = index.tobytes()
        parts.append(index_bytes)
        parts.append(crc32c(index_bytes).to_bytes(4, "little"))
        return b"".join(parts)

    def decode_index(self, raw: bytes | memoryview, *, where: str) -> np.ndarray:
        """The (n, 2) u64 index from its stored bytes (index plus CRC), checked."""
        index = np.frombuffer(self._index_body(raw, where), dtype="<u8").reshape(-1, 2)
        empty = index == _EMPTY
        if (empty[:, 0] != empty[:, 1]).any():
            raise self._half_empty(index, where)
        return index

    def decode_indexes(
        self, raws: Sequence[bytes | memoryview], wheres: Sequence[str]
    ) -> tuple[np.ndarray, list[int], dict[int, EncodingError]]:
        """Many stored shard indexes at once, checked as :meth:`decode_index` checks one.

        Returns the good ones as one ``(k, cells_per_shard, 2)`` u64 array, their positions in
        ``raws``, and the error of each bad one by position: a store of 10^5 shards is not 10^5
        rounds of numpy calls on the client.
        """
        good: list[int] = []
        bodies: list[memoryview] = []
        failed: dict[int, EncodingError] = {}
        for i, raw in enumerate(raws):
            try:
                bodies.append(self._index_body(raw, wheres[i]))
            except EncodingError as exc:
                failed[i] = exc
                continue
            good.append(i)
        indexes = np.frombuffer(b"".join(bodies), dtype="<u8").reshape(len(good), self.cells_per_shard, 2)
        empty = indexes == _EMPTY
        half = (empty[:, :, 0] != empty[:, :, 1]).any(axis=1)
        if half.any():
            for j in np.flatnonzero(half).tolist():
                failed[good[j]] = self._half_empty(indexes[j], wheres[good[j]])
            indexes, good = indexes[~half], [g for g, h in zip(good, half.tolist()) if not h]
        return indexes, good, dict(sorted(failed.items()))

    def holds_index(self, raw: bytes | memoryview) -> bool:
        """Whether ``raw`` (an object's index range) is a shard index of this spec: its size and CRC32C
        (a relayout's recovery tells a shard it moved in from a cell of the same name by it)."""
        try:
            self._index_body(raw, "")
        except EncodingError:
            return False
        return True

    def _index_body(self, raw: bytes | memoryview, where: str) -> memoryview:
        """The entries' bytes of a stored index, its size and CRC32C checked."""
        if len(raw) != self.index_nbytes:
            raise EncodingError(
                f"{where}: shard index is {len(raw)} bytes, expected {self.index_nbytes} "
                f"({self.cells_per_shard} entries{' + CRC32C' if self.index_crc else ''}); truncated shard?"
            )
        body = memoryview(raw)[: 16 * self.cells_per_shard]
        if self.index_crc:
            stored = int.from_bytes(bytes(raw[-4:]), "little")
            computed = crc32c(body)
            if stored != computed:
                raise EncodingError(
                    f"{where}: shard index CRC32C mismatch (stored {stored:#010x}, computed {computed:#010x}); "
                    "the shard is corrupt"
                )
        return body

    @staticmethod
    def _half_empty(index: np.ndarray, where: str) -> EncodingError:
        """The error of an (n, 2) index with an entry empty in one field only (names the first)."""
        empty = index == _EMPTY
        e = int(np.argmax(empty[:, 0] != empty[:, 1]))
        return EncodingError(f"{where}: shard index entry {e} is half empty {index[e].tolist()}")

    def data_bounds(self, object_size: int) -> tuple[int, int]:
        """Byte range of a shard object that inner chunks may occupy."""
        if self.index_location == "end":
            return 0, object_size - self.index_nbytes
        return self.index_nbytes, object_size

    def present_many(self, indexes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(shard, C-order entry) of the non-empty inner cells of many indexes
        (:meth:`decode_indexes`), shard by shard in entry order."""
        return np.nonzero(indexes[:, :, 0] != _EMPTY)

    def grid_cells(self, rows: np.ndarray, entries: np.ndarray, shards: np.ndarray) -> np.ndarray:
        """Grid indices (n, D) of inner cells given as (row into ``shards``, C-order entry), where
        ``shards`` (k, D) are shard indices (small enough that no product passes int64)."""
        shape = np.asarray(self.shard_shape, dtype=np.int64)
        return np.stack(np.unravel_index(entries, self.shard_shape), axis=1) + shards[rows] * shape

    def inner_slice(self, index: np.ndarray, entry: int, *, where: str, object_size: int | None = None) -> tuple[int, int] | None:
        """``(start, stop)`` of inner cell ``entry`` in the shard object, or None when it is empty."""
        offset, nbytes = (int(v) for v in index[entry])
        if offset == int(_EMPTY):
            return None
        if nbytes > decode_limit(None):  # a range request would allocate this much before reading
            raise too_large(f"{where} (inner cell {entry})", decode_limit(None), f"declares {nbytes} stored bytes,")
        if object_size is not None:
            lo, hi = self.data_bounds(object_size)
            if offset < lo or offset + nbytes > hi:
                raise EncodingError(
                    f"{where}: inner cell {entry} at bytes [{offset}, {offset + nbytes}) lies outside the "
                    f"shard's data [{lo}, {hi})"
                )
        return offset, offset + nbytes
