"""What the mutation operators need to know about a store, read straight from its files.

An :class:`Inventory` lists a seed's documents, arrays and objects (taken once per seed,
before any case forks).  The cell helpers take a stored object apart -- shard objects
into inner chunks, compressors, vlen framing -- and put it back together, so that an
operator can change one integer deep inside a payload and leave every outer layer
consistent: the case then reaches the decoder it aims at instead of failing on a
checksum or a framing length.  Written from the format's byte layouts (docs/format.md),
with numcodecs' codecs and google-crc32c, never through the package under test.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numcodecs

EMPTY = 0xFFFF_FFFF_FFFF_FFFF


@dataclass(frozen=True)
class ArrayInfo:
    """One array node of a store."""

    node: str  # node path, e.g. "0/vertices"
    doc: dict[str, Any]
    objects: tuple[str, ...]  # store keys of its chunk (or shard) objects

    @property
    def attrs(self) -> dict[str, Any]:
        return self.doc.get("attributes") or {}

    @property
    def zv_array(self) -> str:
        if self.node.endswith("object_index/manifests"):
            return "manifests"
        return str(self.attrs.get("zv_array"))

    @property
    def sharding(self) -> dict[str, Any] | None:
        first = (self.doc.get("codecs") or [{}])[0]
        return first.get("configuration") if first.get("name") == "sharding_indexed" else None

    @property
    def codecs(self) -> list[dict[str, Any]]:
        """The codec list of one (inner) chunk."""
        sharding = self.sharding
        return list(sharding["codecs"]) if sharding else list(self.doc.get("codecs") or [])

    @property
    def serializer(self) -> str:
        return self.codecs[0]["name"]

    @property
    def is_grid(self) -> bool:
        """One vlen item per chunk: a spatial cell (the manifests array holds one item per row)."""
        return self.serializer == "vlen-bytes" and self.zv_array != "manifests"

    @property
    def cells_per_shard(self) -> int:
        shape = self.doc["chunk_grid"]["configuration"]["chunk_shape"]
        out = 1
        for s in shape:
            out *= int(s)
        return out


@dataclass(frozen=True)
class Inventory:
    """A store's files, documents and arrays (keys relative to the store root, sorted)."""

    root: str
    files: tuple[str, ...]
    dirs: tuple[str, ...]
    docs: tuple[str, ...]
    arrays: tuple[ArrayInfo, ...] = field(default_factory=tuple)

    @property
    def cells(self) -> list[tuple[ArrayInfo, str]]:
        return [(a, key) for a in self.arrays for key in a.objects]

    def array_of(self, key: str) -> ArrayInfo:
        return next(a for a in self.arrays if key in a.objects)

    def role(self, target: object) -> str:
        """What a target is, coarsely: the zv_array (or kind of group) of its node, and whether
        it is the node's document, a chunk, a directory... -- operators draw a role first, so
        that a graph's 26 links arrays do not drown its one object index."""
        key = target[-1] if isinstance(target, tuple) else str(target)
        node, part = key, "node"
        if key.endswith("zarr.json"):
            node, part = key[: -len("zarr.json")].rstrip("/"), "doc"
        elif "/c/" in f"/{key}/" or key.endswith("/c"):
            node, part = key.split("/c/")[0] if "/c/" in key else key[:-2], "chunk"
        while node and node not in self.roles:
            node, part = node.rpartition("/")[0], "below"
        return f"{self.roles.get(node, 'root')}:{part}"

    @property
    def roles(self) -> dict[str, str]:
        out = {}
        for key in self.docs:
            node = key[: -len("zarr.json")].rstrip("/")
            info = next((a for a in self.arrays if a.node == node), None)
            if info is not None:
                out[node] = info.zv_array
            elif not node:
                out[node] = "root"
            else:
                last = node.rsplit("/", 1)[-1]
                out[node] = "level" if last.isdigit() and "/" not in node else f"group:{last if not last[-1:].isdigit() else '#'}"
        return out


def inventory(root: str) -> Inventory:
    files, dirs = [], [""]
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root).replace(os.sep, "/")
        rel = "" if rel == "." else rel
        dirs += [f"{rel}/{d}" if rel else d for d in dirnames]
        files += [f"{rel}/{f}" if rel else f for f in filenames]
    files.sort()
    docs = [f for f in files if f == "zarr.json" or f.endswith("/zarr.json")]
    arrays = []
    for key in docs:
        doc = json.loads(Path(root, key).read_text())
        if doc.get("node_type") != "array":
            continue
        node = key[: -len("/zarr.json")] if "/" in key else ""
        prefix = f"{node}/c/"
        arrays.append(ArrayInfo(node, doc, tuple(f for f in files if f.startswith(prefix))))
    return Inventory(root, tuple(files), tuple(sorted(dirs)), tuple(docs), tuple(arrays))


# ---------------------------------------------------------------------------------------
# codecs
# ---------------------------------------------------------------------------------------
def compressor(config: dict[str, Any] | None) -> Any:
    """The numcodecs codec of one bytes->bytes codec object (None: no compressor)."""
    if config is None:
        return None
    name, conf = config["name"], config.get("configuration") or {}
    if name == "zstd":
        return numcodecs.Zstd(level=int(conf.get("level", 0)))
    if name == "gzip":
        return _GZip(level=int(conf.get("level", 5)))
    if name == "blosc":
        shuffle = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}.get(conf.get("shuffle"), 0)
        return numcodecs.Blosc(cname=str(conf.get("cname", "zstd")), clevel=int(conf.get("clevel", 5)),
                               shuffle=shuffle)
    raise ValueError(f"no compressor {name!r}")


class _GZip(numcodecs.GZip):
    """numcodecs' gzip, encoding with mtime 0: numcodecs stamps the current time into the
    header, which would make a recoded case differ from run to run."""

    def encode(self, buf: Any) -> bytes:
        import gzip

        return gzip.compress(bytes(memoryview(buf).cast("B")), self.level, mtime=0)


def chunk_compressor(info: ArrayInfo) -> Any:
    codecs = info.codecs
    return compressor(codecs[1]) if len(codecs) > 1 else None


def decompress(info: ArrayInfo, stored: bytes) -> bytes:
    comp = chunk_compressor(info)
    return bytes(comp.decode(stored)) if comp else stored


def compress(info: ArrayInfo, raw: bytes) -> bytes:
    comp = chunk_compressor(info)
    return bytes(comp.encode(raw)) if comp else raw


# ---------------------------------------------------------------------------------------
# vlen framing
# ---------------------------------------------------------------------------------------
def unframe(raw: bytes) -> list[bytes]:
    (n,) = struct.unpack_from("<I", raw, 0)
    items, pos = [], 4
    for _ in range(n):
        (length,) = struct.unpack_from("<I", raw, pos)
        items.append(raw[pos + 4 : pos + 4 + length])
        pos += 4 + length
    return items


def frame(items: list[bytes]) -> bytes:
    return struct.pack("<I", len(items)) + b"".join(struct.pack("<I", len(i)) + i for i in items)


# ---------------------------------------------------------------------------------------
# shards: inner chunks in an object, index (u64 offset, u64 nbytes) per entry + CRC32C at the end
# ---------------------------------------------------------------------------------------
def index_bytes(info: ArrayInfo) -> int:
    return 16 * info.cells_per_shard + 4


def read_index(info: ArrayInfo, raw: bytes) -> list[tuple[int, int]]:
    n = info.cells_per_shard
    body = raw[len(raw) - index_bytes(info) : len(raw) - 4]
    values = struct.unpack(f"<{2 * n}Q", body)
    return [(values[2 * i], values[2 * i + 1]) for i in range(n)]


def write_index(info: ArrayInfo, body: bytes, index: list[tuple[int, int]], *, crc: bool = True) -> bytes:
    import google_crc32c

    packed = struct.pack(f"<{2 * len(index)}Q", *[v for pair in index for v in pair])
    check = google_crc32c.value(packed) if crc else (google_crc32c.value(packed) ^ 0x5A5A5A5A)
    return body + packed + struct.pack("<I", check)


def inner_chunks(info: ArrayInfo, raw: bytes) -> dict[int, bytes]:
    """Stored inner chunks by index entry (non-sharded: the object itself as entry -1)."""
    if info.sharding is None:
        return {-1: raw}
    return {e: raw[o : o + n] for e, (o, n) in enumerate(read_index(info, raw)) if o != EMPTY}


def pack_shard(info: ArrayInfo, chunks: dict[int, bytes]) -> bytes:
    """A shard object holding ``chunks`` (entry -> stored inner chunk), index rebuilt with a valid CRC."""
    index, body = [(EMPTY, EMPTY)] * info.cells_per_shard, b""
    for e in sorted(chunks):
        index[e] = (len(body), len(chunks[e]))
        body += chunks[e]
    return write_index(info, body, index)


def replace_chunk(info: ArrayInfo, raw: bytes, entry: int, stored: bytes) -> bytes:
    if info.sharding is None:
        return stored
    chunks = inner_chunks(info, raw)
    chunks[entry] = stored
    return pack_shard(info, chunks)


def payload(info: ArrayInfo, stored: bytes) -> bytes:
    """A grid cell's item (unframed), a 1-D vlen chunk's framing, a typed chunk's raw bytes."""
    raw = decompress(info, stored)
    return raw[8:] if info.is_grid else raw


def stored_from_payload(info: ArrayInfo, data: bytes) -> bytes:
    return compress(info, struct.pack("<II", 1, len(data)) + data if info.is_grid else data)
