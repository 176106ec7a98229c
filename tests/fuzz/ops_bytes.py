"""Byte operators: stored objects, payload integers, decompression bombs, shard indexes.

``cell_*`` change a stored object as it is on disk.  ``payload``-family operators take the
object apart (shard, compressor, vlen framing), change one structure of the format --
a row count, a FragmentIndex range, a manifest block, a link's vertex index -- and put
every outer layer back consistently, so the case reaches the decoder it aims at.  Bombs
are made here, on the fly: a zstd frame of RLE blocks without a content size (256 KiB
inflating to 8 GiB), a gzip stream of repeated members (5 MiB to 5 GiB) and a blosc
header lying about its size.
"""

from __future__ import annotations

import gzip
import struct
from typing import Any

from .operators import Ctx, operator
from .storeio import (
    EMPTY,
    ArrayInfo,
    Inventory,
    compress,
    decompress,
    frame,
    inner_chunks,
    pack_shard,
    payload,
    read_index,
    replace_chunk,
    stored_from_payload,
    unframe,
    write_index,
)

Target = tuple[str, str]  # (array node, object key)

HOSTILE_U32 = (0, 2**31, 2**32 - 1)
HOSTILE_I64 = (-1, 2**31, 2**62, 2**63 - 1, -(2**63), 10**12)


# ---------------------------------------------------------------------------------------
# targets
# ---------------------------------------------------------------------------------------
def _objects(inv: Inventory, keep: Any = lambda a: True) -> list[Target]:
    return [(a.node, key) for a in inv.arrays if keep(a) for key in a.objects]


def all_objects(inv: Inventory) -> list[Target]:
    return _objects(inv)


def grid_rows(inv: Inventory) -> list[Target]:
    """Cells of fixed-size rows: vertices, vertex/link attributes, flat (intra-chunk) links."""
    return _objects(inv, lambda a: a.is_grid and _row_bytes(a) is not None)


def vlen_objects(inv: Inventory) -> list[Target]:
    return _objects(inv, lambda a: a.serializer == "vlen-bytes")


def fragment_cells(inv: Inventory) -> list[Target]:
    return _objects(inv, lambda a: a.zv_array in ("vertex_fragments", "link_fragments"))


def manifest_chunks(inv: Inventory) -> list[Target]:
    return _objects(inv, lambda a: a.zv_array == "manifests")


def link_cells(inv: Inventory) -> list[Target]:
    return _objects(inv, lambda a: a.zv_array == "links")


def blob_link_cells(inv: Inventory) -> list[Target]:
    return _objects(inv, lambda a: a.zv_array == "links" and not _flat(a))


def sharded_objects(inv: Inventory) -> list[Target]:
    return _objects(inv, lambda a: a.sharding is not None)


def multi_object_arrays(inv: Inventory) -> list[str]:
    return [a.node for a in inv.arrays if len(a.objects) >= 2]


def _flat(info: ArrayInfo) -> bool:
    attrs = info.attrs
    offsets = attrs.get("offsets") or []
    return attrs.get("level_delta") == 0 and all(not any(o) for o in offsets)


_ITEMSIZE = {"float32": 4, "float64": 8, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4,
             "int64": 8, "uint64": 8, "bool": 1, "float16": 2}


def _row_bytes(info: ArrayInfo) -> int | None:
    attrs = info.attrs
    size = _ITEMSIZE.get(str(attrs.get("dtype")))
    if size is None:
        return None
    if info.zv_array == "vertices":
        return size * len(info.doc.get("shape") or [])
    if info.zv_array in ("attribute", "link_attribute"):
        n = 1
        for s in attrs.get("row_shape") or []:
            n *= int(s)
        return size * n
    if info.zv_array == "links" and _flat(info):
        return size * (int(attrs.get("link_width", 2)) + int(bool(attrs.get("has_perm"))))
    return None


# ---------------------------------------------------------------------------------------
# editing helpers
# ---------------------------------------------------------------------------------------
def _entry(ctx: Ctx, info: ArrayInfo, raw: bytes) -> tuple[int, bytes]:
    chunks = inner_chunks(info, raw)
    entries = sorted(chunks)
    e = entries[ctx.rng.randrange(len(entries))]
    return e, chunks[e]


def edit_payload(ctx: Ctx, target: Target, fn: Any) -> str:
    """Replace one (inner) chunk's payload by ``fn(info, payload) -> (payload, description)``."""
    node, key = target
    info = ctx.array(node)
    raw = ctx.read(key)
    entry, stored = _entry(ctx, info, raw)
    new, what = fn(info, payload(info, stored))
    ctx.write(key, replace_chunk(info, raw, entry, stored_from_payload(info, new)))
    return f"{key}{'' if entry < 0 else f' inner {entry}'}: {what}"


def edit_raw_chunk(ctx: Ctx, target: Target, fn: Any) -> str:
    """Like :func:`edit_payload` on the decompressed chunk (vlen framing included)."""
    node, key = target
    info = ctx.array(node)
    raw = ctx.read(key)
    entry, stored = _entry(ctx, info, raw)
    new, what = fn(info, decompress(info, stored))
    ctx.write(key, replace_chunk(info, raw, entry, compress(info, new)))
    return f"{key}{'' if entry < 0 else f' inner {entry}'}: {what}"


def _choice(ctx: Ctx, values: Any) -> Any:
    values = list(values)
    return values[ctx.rng.randrange(len(values))]


# ---------------------------------------------------------------------------------------
# stored objects as they are on disk
# ---------------------------------------------------------------------------------------
@operator("cell_truncate", "cell", all_objects)
def _truncate(ctx: Ctx, target: Target) -> str:
    """a chunk object cut at a random byte"""
    raw = ctx.read(target[1])
    at = ctx.rng.randrange(len(raw)) if raw else 0
    ctx.write(target[1], raw[:at])
    return f"{target[1]} truncated to {at} of {len(raw)} bytes"


@operator("cell_flip", "cell", all_objects)
def _flip(ctx: Ctx, target: Target) -> str:
    """1-8 random bytes of a chunk object flipped"""
    raw = bytearray(ctx.read(target[1]))
    at = sorted({ctx.rng.randrange(len(raw)) for _ in range(ctx.rng.randint(1, 8))}) if raw else []
    for i in at:
        raw[i] ^= ctx.rng.randint(1, 255)
    ctx.write(target[1], bytes(raw))
    return f"{target[1]} bytes {at} flipped"


@operator("cell_append_garbage", "cell", all_objects)
def _append(ctx: Ctx, target: Target) -> str:
    """random bytes appended to a chunk object"""
    extra = bytes(ctx.rng.randrange(256) for _ in range(ctx.rng.randint(1, 64)))
    ctx.write(target[1], ctx.read(target[1]) + extra)
    return f"{target[1]} + {len(extra)} bytes"


@operator("cell_zero_fill", "cell", all_objects)
def _zero(ctx: Ctx, target: Target) -> str:
    """a chunk object's bytes all set to zero"""
    raw = ctx.read(target[1])
    ctx.write(target[1], bytes(len(raw)))
    return f"{target[1]} zero-filled ({len(raw)} bytes)"


@operator("cell_swap", "cell", multi_object_arrays)
def _swap(ctx: Ctx, node: str) -> str:
    """two chunk objects of one array swapped"""
    a, b = ctx.rng.sample(list(ctx.array(node).objects), 2)
    ra, rb = ctx.read(a), ctx.read(b)
    ctx.write(a, rb)
    ctx.write(b, ra)
    return f"{a} <-> {b}"


@operator("cell_from_other_array", "cell", all_objects)
def _other(ctx: Ctx, target: Target) -> str:
    """a chunk object replaced by a chunk object of another array"""
    others = [k for a in ctx.inv.arrays if a.node != target[0] for k in a.objects]
    if not others:
        return _zero(ctx, target)
    src = _choice(ctx, others)
    ctx.write(target[1], ctx.read(src))
    return f"{target[1]} = copy of {src}"


# ---------------------------------------------------------------------------------------
# payloads, behind consistent outer layers
# ---------------------------------------------------------------------------------------
@operator("payload_flip", "payload", all_objects)
def _payload_flip(ctx: Ctx, target: Target) -> str:
    """a random byte of a decoded payload flipped, then re-framed and re-compressed"""

    def fn(info: ArrayInfo, data: bytes) -> tuple[bytes, str]:
        if not data:
            return b"\x01", "empty payload -> 1 byte"
        buf = bytearray(data)
        i = ctx.rng.randrange(len(buf))
        buf[i] ^= 1 << ctx.rng.randrange(8)
        return bytes(buf), f"payload byte {i} of {len(buf)} flipped"

    return edit_payload(ctx, target, fn)


@operator("payload_append_rows", "payload", grid_rows)
def _append_rows(ctx: Ctx, target: Target) -> str:
    """1-3 rows appended to a cell of fixed-size rows (vertices, attributes, flat links), well framed"""

    def fn(info: ArrayInfo, data: bytes) -> tuple[bytes, str]:
        size = _row_bytes(info) or 1
        k = ctx.rng.randint(1, 3)
        rows = (data[:size] or bytes(size)) * k
        return data + rows, f"{len(data) // size} rows + {k} rows of {size} bytes"

    return edit_payload(ctx, target, fn)


@operator("payload_drop_rows", "payload", grid_rows)
def _drop_rows(ctx: Ctx, target: Target) -> str:
    """the last 1-3 rows of a cell of fixed-size rows removed, well framed"""

    def fn(info: ArrayInfo, data: bytes) -> tuple[bytes, str]:
        size = _row_bytes(info) or 1
        k = min(len(data) // size, ctx.rng.randint(1, 3))
        return data[: len(data) - k * size], f"{len(data) // size} rows - {k}"

    return edit_payload(ctx, target, fn)


@operator("vlen_item_count", "payload", vlen_objects)
def _vlen_count(ctx: Ctx, target: Target) -> str:
    """the vlen framing's u32 item count set to a hostile value"""

    def fn(info: ArrayInfo, raw: bytes) -> tuple[bytes, str]:
        (n,) = struct.unpack_from("<I", raw, 0)
        new = _choice(ctx, (*HOSTILE_U32, n + 1))
        return struct.pack("<I", new) + raw[4:], f"item count {n} -> {new}"

    return edit_raw_chunk(ctx, target, fn)


@operator("vlen_item_length", "payload", vlen_objects)
def _vlen_length(ctx: Ctx, target: Target) -> str:
    """the u32 byte length of a vlen item set to a hostile value"""

    def fn(info: ArrayInfo, raw: bytes) -> tuple[bytes, str]:
        (n,) = struct.unpack_from("<I", raw, 0)
        if n == 0:
            return struct.pack("<II", 1, 2**32 - 1), "no items -> one item of 2^32-1 bytes"
        i = ctx.rng.randrange(n)
        pos = 4
        for _ in range(i):
            pos += 4 + struct.unpack_from("<I", raw, pos)[0]
        (length,) = struct.unpack_from("<I", raw, pos)
        new = _choice(ctx, (*HOSTILE_U32, length + 1, max(0, length - 1)))
        return raw[:pos] + struct.pack("<I", new) + raw[pos + 4 :], f"item {i} length {length} -> {new}"

    return edit_raw_chunk(ctx, target, fn)


_FI_HEADER = struct.Struct("<IHHII")  # magic, version, flags, F, R


@operator("fragindex_header", "payload", fragment_cells)
def _fi_header(ctx: Ctx, target: Target) -> str:
    """a FragmentIndex's fragment count F or range count R set to a hostile value"""

    def fn(info: ArrayInfo, data: bytes) -> tuple[bytes, str]:
        magic, version, flags, f, r = _FI_HEADER.unpack_from(data, 0) if len(data) >= 16 else (0x5A564647, 1, 0, 0, 0)
        field = ctx.rng.randrange(2)
        new = _choice(ctx, (*HOSTILE_U32, f + 1))
        f, r = (new, r) if field == 0 else (f, new)
        return _FI_HEADER.pack(magic, version, flags, f, r) + data[16:], f"{'FR'[field]} -> {new}"

    return edit_payload(ctx, target, fn)


def _fi_layout(data: bytes) -> tuple[int, int, int]:
    """(F, R, byte offset of the range table)."""
    _, _, _, f, r = _FI_HEADER.unpack_from(data, 0)
    return f, r, 16 + (f + 63) // 64 * 8


@operator("fragindex_range", "payload", fragment_cells)
def _fi_range(ctx: Ctx, target: Target) -> str:
    """a FragmentIndex range (start, count) set to a hostile pair (overflowing, huge, negative)"""

    def fn(info: ArrayInfo, data: bytes) -> tuple[bytes, str]:
        if len(data) < 16:
            return data, "no header"
        f, r, table = _fi_layout(data)
        if r == 0:
            return _fi_header_only(data), "no ranges: F=R=1 header without a table"
        k = ctx.rng.randrange(r)
        pair = _choice(ctx, ((2**63 - 2**29, 2**30), (0, 2**40), (-1, 5), (2**62, 2**62), (0, -1), (2**31, 1)))
        at = table + 16 * k
        return data[:at] + struct.pack("<qq", *pair) + data[at + 16 :], f"range {k} -> {pair}"

    return edit_payload(ctx, target, fn)


def _fi_header_only(data: bytes) -> bytes:
    magic, version, flags, _, _ = _FI_HEADER.unpack_from(data, 0)
    return _FI_HEADER.pack(magic, version, flags, 1, 1) + b"\x01" + bytes(7)


@operator("fragindex_explicit", "payload", fragment_cells)
def _fi_explicit(ctx: Ctx, target: Target) -> str:
    """a FragmentIndex rewritten with an explicit fragment whose csr row indices are hostile"""

    def fn(info: ArrayInfo, data: bytes) -> tuple[bytes, str]:
        magic = 0x5A564647
        rows = _choice(ctx, ((2**62,), (-1,), (0, 0), (10**6,), (2**63 - 1, 0)))
        csr_end = _choice(ctx, (len(rows), 2**32 - 1))
        # F=1, R=0: bitmap all zero, no table, offsets [0, csr_end], indices
        out = _FI_HEADER.pack(magic, 1, 0, 1, 0) + bytes(8) + struct.pack("<II", 0, csr_end)
        out += struct.pack(f"<{len(rows)}q", *rows)
        return out, f"one explicit fragment rows {rows}, csr_offsets end {csr_end}"

    return edit_payload(ctx, target, fn)


def _manifest_rows(info: ArrayInfo, raw: bytes) -> list[bytes]:
    return unframe(raw)


@operator("manifest_block_count", "payload", manifest_chunks)
def _manifest_count(ctx: Ctx, target: Target) -> str:
    """an object manifest's u32 block count set to a hostile value (2^30 ... 2^32-1)"""

    def fn(info: ArrayInfo, raw: bytes) -> tuple[bytes, str]:
        rows = _manifest_rows(info, raw)
        i = ctx.rng.randrange(len(rows))
        row = rows[i] if len(rows[i]) >= 4 else bytes(4)
        (b,) = struct.unpack_from("<I", row, 0)
        new = _choice(ctx, (2**30, 2**32 - 1, b + 1, 0))
        rows[i] = struct.pack("<I", new) + row[4:]
        return frame(rows), f"row {i} block count {b} -> {new}"

    return edit_raw_chunk(ctx, target, fn)


def _sid_ndim(ctx: Ctx, info: ArrayInfo) -> int:
    group = info.node.rsplit("/", 1)[0]
    try:
        return int(ctx.doc(f"{group}/zarr.json")["attributes"]["sid_ndim"])
    except (KeyError, ValueError, TypeError):
        return 3


@operator("manifest_fragment", "payload", manifest_chunks)
def _manifest_fragment(ctx: Ctx, target: Target) -> str:
    """a manifest block's chunk coordinate or fragment number set to a hostile value"""
    node = target[0]
    d = _sid_ndim(ctx, ctx.array(node))

    def fn(info: ArrayInfo, raw: bytes) -> tuple[bytes, str]:
        rows = _manifest_rows(info, raw)
        i = ctx.rng.randrange(len(rows))
        row = bytearray(rows[i])
        if len(row) < 4 + 8 * d + 9:
            return raw, f"row {i} has no block"
        field = ctx.rng.randrange(d + 1)  # a coordinate, or (d) the mode-0 fragment
        at = 4 + 8 * field + (1 if field == d else 0)
        new = _choice(ctx, (*HOSTILE_I64, 2**32))
        row[at : at + 8] = struct.pack("<q", new)
        rows[i] = bytes(row)
        what = "fragment" if field == d else f"chunk coordinate {field}"
        return frame(rows), f"row {i} block 0 {what} -> {new}"

    return edit_raw_chunk(ctx, target, fn)


@operator("manifest_mode", "payload", manifest_chunks)
def _manifest_mode(ctx: Ctx, target: Target) -> str:
    """a manifest row rewritten as one mode-1 run or mode-2 list with hostile counts"""
    d = _sid_ndim(ctx, ctx.array(target[0]))

    def fn(info: ArrayInfo, raw: bytes) -> tuple[bytes, str]:
        rows = _manifest_rows(info, raw)
        i = ctx.rng.randrange(len(rows))
        chunk = rows[i][4 : 4 + 8 * d] if len(rows[i]) >= 4 + 8 * d else bytes(8 * d)
        if ctx.rng.randrange(2):
            start, count = _choice(ctx, ((2**63 - 2**29, 2**30), (0, 2**40), (0, 2**31), (5, -3)))
            rows[i] = struct.pack("<I", 1) + chunk + b"\x01" + struct.pack("<qq", start, count)
            what = f"mode 1 run ({start}, {count})"
        else:
            n = _choice(ctx, (2**32 - 1, 2**30, 3))
            rows[i] = struct.pack("<I", 1) + chunk + b"\x02" + struct.pack("<I", n) + struct.pack("<q", 0)
            what = f"mode 2 list of {n} (one present)"
        return frame(rows), f"row {i} -> {what}"

    return edit_raw_chunk(ctx, target, fn)


_INT_DTYPES = {"int64": "<q", "int32": "<i", "uint32": "<I", "uint64": "<Q", "int16": "<h", "uint16": "<H"}


def _hostile_for(fmt: str, ctx: Ctx) -> int:
    bits = struct.calcsize(fmt) * 8
    signed = fmt[1].islower()
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    values = [v for v in (-1, 10**6, 2**31 - 1, 2**31, 2**62, hi, lo) if lo <= v <= hi]
    return _choice(ctx, values)


@operator("link_vertex_index", "payload", link_cells)
def _link_index(ctx: Ctx, target: Target) -> str:
    """one vertex index of a link record set out of range (-1, 10^6, 2^31, 2^62, the dtype's extremes)"""

    def fn(info: ArrayInfo, data: bytes) -> tuple[bytes, str]:
        fmt = _INT_DTYPES.get(str(info.attrs.get("dtype")), "<q")
        size = struct.calcsize(fmt)
        start = 0
        if not _flat(info) and len(data) >= 8:
            (k,) = struct.unpack_from("<q", data, 0)
            start = 8 * (1 + k) if 0 <= k < len(data) else 8
        n = (len(data) - start) // size
        if n <= 0:
            return data, "no records"
        i = ctx.rng.randrange(n)
        new = _hostile_for(fmt, ctx)
        at = start + i * size
        return data[:at] + struct.pack(fmt, new) + data[at + size :], f"element {i} of {n} -> {new}"

    return edit_payload(ctx, target, fn)


@operator("ragged_blob_header", "payload", blob_link_cells)
def _blob_header(ctx: Ctx, target: Target) -> str:
    """a link blob's group count K or a group byte offset set to a hostile value"""

    def fn(info: ArrayInfo, data: bytes) -> tuple[bytes, str]:
        if len(data) < 16:
            return struct.pack("<q", 2**62) + data, "empty blob -> K = 2^62"
        (k,) = struct.unpack_from("<q", data, 0)
        field = ctx.rng.randrange(1 + max(0, min(k, 4)))
        new = _choice(ctx, (*HOSTILE_I64, k + 1, len(data)))
        return data[: 8 * field] + struct.pack("<q", new) + data[8 * field + 8 :], \
            f"{'K' if field == 0 else f'offset {field - 1}'} {k if field == 0 else ''} -> {new}"

    return edit_payload(ctx, target, fn)


# ---------------------------------------------------------------------------------------
# decompression bombs
# ---------------------------------------------------------------------------------------
ZSTD_BOMB_BYTES = 8 << 30
GZIP_BOMB_BYTES = 5 << 30
_GZIP_MEMBER = 64 << 20
_CACHE: dict[str, bytes] = {}


def zstd_bomb(total: int = ZSTD_BOMB_BYTES) -> bytes:
    """A zstd frame without a content size: RLE blocks of 128 KiB zeros (4 bytes each)."""
    block = 1 << 17
    head = struct.pack("<I", 0xFD2FB528) + bytes([0x00, 0x38])  # no FCS, no single segment; window 128 KiB
    rle = (1 << 1) | (block << 3)
    n = total // block
    return head + (rle.to_bytes(3, "little") + b"\0") * (n - 1) + (rle | 1).to_bytes(3, "little") + b"\0"


def gzip_bomb(total: int = GZIP_BOMB_BYTES) -> bytes:
    """Concatenated gzip members of 64 MiB zeros each (a gzip reader inflates them all)."""
    if "gzip" not in _CACHE:
        _CACHE["gzip"] = gzip.compress(bytes(_GZIP_MEMBER), 9, mtime=0)
    return _CACHE["gzip"] * (total // _GZIP_MEMBER)


def blosc_liar(size: int) -> bytes:
    """A small valid blosc frame whose header claims ``size`` uncompressed bytes."""
    import numcodecs

    frame_ = bytearray(numcodecs.Blosc(cname="zstd", clevel=5, shuffle=0).encode(bytes(range(256)) * 4))
    frame_[4:8] = struct.pack("<I", size)
    return bytes(frame_)


def prepare() -> None:
    """Build the cached bomb parts now (in the fork server, once, before any case forks)."""
    gzip_bomb(_GZIP_MEMBER)


BOMB_CODECS = {
    "zstd": {"name": "zstd", "configuration": {"level": 0, "checksum": False}},
    "gzip": {"name": "gzip", "configuration": {"level": 5}},
    "blosc": {"name": "blosc", "configuration": {"typesize": 1, "cname": "zstd", "clevel": 5, "shuffle": "noshuffle",
                                                 "blocksize": 0}},
}


def recode(ctx: Ctx, info: ArrayInfo, codec: dict[str, Any]) -> ArrayInfo:
    """Make ``codec`` the array's compressor, re-encoding every chunk: the array stays valid."""
    doc = ctx.doc(f"{info.node}/zarr.json")
    chain = [dict(info.codecs[0]), codec]
    if info.sharding is not None:
        doc["codecs"][0]["configuration"]["codecs"] = chain
    else:
        doc["codecs"] = chain
    new = ArrayInfo(info.node, doc, info.objects)
    for key in info.objects:
        raw = ctx.read(key)
        chunks = {e: compress(new, decompress(info, s)) for e, s in inner_chunks(info, raw).items()}
        ctx.write(key, pack_shard(new, chunks) if info.sharding is not None else chunks[-1])
    ctx.write_doc(f"{info.node}/zarr.json", doc)
    return new


def _bomb(ctx: Ctx, target: Target, codec: str, bomb: bytes, what: str) -> str:
    node, key = target
    info = recode(ctx, ctx.array(node), BOMB_CODECS[codec])
    raw = ctx.read(key)
    entry, _ = _entry(ctx, info, raw)
    ctx.write(key, replace_chunk(info, raw, entry, bomb))
    return f"{node} recoded to {codec}; {key}{'' if entry < 0 else f' inner {entry}'} = {what}"


@operator("zstd_bomb", "bomb", all_objects)
def _zstd_bomb(ctx: Ctx, target: Target) -> str:
    """a chunk replaced by a 256 KiB zstd frame without a content size that inflates to 8 GiB"""
    return _bomb(ctx, target, "zstd", zstd_bomb(), "zstd bomb (8 GiB, no content size)")


@operator("gzip_bomb", "bomb", all_objects)
def _gzip_bomb(ctx: Ctx, target: Target) -> str:
    """a chunk replaced by 5 MiB of gzip members that inflate to 5 GiB"""
    return _bomb(ctx, target, "gzip", gzip_bomb(), "gzip bomb (5 GiB)")


@operator("blosc_lying_header", "bomb", all_objects)
def _blosc_liar(ctx: Ctx, target: Target) -> str:
    """a chunk replaced by a blosc frame whose header claims 2 GiB (or 1 byte) of output"""
    size = _choice(ctx, (2**31 - 17, 2**31 - 1, 1))
    return _bomb(ctx, target, "blosc", blosc_liar(size), f"blosc frame claiming {size} bytes")


# ---------------------------------------------------------------------------------------
# shard indexes (the CRC is recomputed unless the operator is about the CRC)
# ---------------------------------------------------------------------------------------
def _edit_index(ctx: Ctx, target: Target, fn: Any, *, crc: bool = True) -> str:
    node, key = target
    info = ctx.array(node)
    raw = ctx.read(key)
    index = read_index(info, raw)
    what = fn(raw, index)
    body = raw[: len(raw) - 16 * info.cells_per_shard - 4]
    ctx.write(key, write_index(info, body, index, crc=crc))
    return f"{key}: {what}"


def _used(index: list[tuple[int, int]]) -> list[int]:
    return [e for e, (o, _) in enumerate(index) if o != EMPTY] or [0]


@operator("shard_offset_past_end", "shard", sharded_objects)
def _shard_past_end(ctx: Ctx, target: Target) -> str:
    """a shard index entry's offset set past the end of the object"""

    def fn(raw: bytes, index: list[tuple[int, int]]) -> str:
        e = _choice(ctx, _used(index))
        off = _choice(ctx, (len(raw), len(raw) + 1000, 2**62, 2**63))
        index[e] = (off, index[e][1] if index[e][1] != EMPTY else 16)
        return f"entry {e} offset -> {off}"

    return _edit_index(ctx, target, fn)


@operator("shard_overlap", "shard", sharded_objects)
def _shard_overlap(ctx: Ctx, target: Target) -> str:
    """two shard index entries pointing at the same (or overlapping) bytes"""

    def fn(raw: bytes, index: list[tuple[int, int]]) -> str:
        used = _used(index)
        a = _choice(ctx, used)
        b = _choice(ctx, [e for e in range(len(index)) if e != a] or [a])
        o, n = index[a]
        shift = _choice(ctx, (0, 1))
        index[b] = (o + shift if o != EMPTY else 0, n if n != EMPTY else 8)
        return f"entry {b} -> entry {a}'s bytes{' + 1' if shift else ''}"

    return _edit_index(ctx, target, fn)


@operator("shard_sentinel_misuse", "shard", sharded_objects)
def _shard_sentinel(ctx: Ctx, target: Target) -> str:
    """half of an index entry set to the 2^64-1 'empty' sentinel"""

    def fn(raw: bytes, index: list[tuple[int, int]]) -> str:
        e = _choice(ctx, _used(index))
        o, n = index[e]
        index[e] = (EMPTY, n) if ctx.rng.randrange(2) else (o, EMPTY)
        return f"entry {e} -> {index[e]}"

    return _edit_index(ctx, target, fn)


@operator("shard_nbytes_huge", "shard", sharded_objects)
def _shard_nbytes(ctx: Ctx, target: Target) -> str:
    """a shard index entry's nbytes set huge (2^40, 2^63, 2^64-2) or one past the object"""

    def fn(raw: bytes, index: list[tuple[int, int]]) -> str:
        e = _choice(ctx, _used(index))
        n = _choice(ctx, (2**40, 2**63, 2**64 - 2, len(raw)))
        index[e] = (index[e][0] if index[e][0] != EMPTY else 0, n)
        return f"entry {e} nbytes -> {n}"

    return _edit_index(ctx, target, fn)


@operator("shard_bad_crc", "shard", sharded_objects)
def _shard_crc(ctx: Ctx, target: Target) -> str:
    """a shard index whose CRC32C does not match it"""
    return _edit_index(ctx, target, lambda raw, index: "CRC32C wrong", crc=False)


@operator("shard_index_truncated", "shard", sharded_objects)
def _shard_short(ctx: Ctx, target: Target) -> str:
    """a shard object shorter than its index"""
    info = ctx.array(target[0])
    raw = ctx.read(target[1])
    at = ctx.rng.randrange(16 * info.cells_per_shard + 4)
    ctx.write(target[1], raw[-at:] if at else b"")
    return f"{target[1]}: only the last {at} bytes kept"
