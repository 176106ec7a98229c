"""Resource bounds derived from metadata (issue 12, classes 2 and 3): hostile stores cost bounded work.

One named regression test per defect class, each through ``validate(level=5)`` (a finding,
no ``*_CHECK_CRASHED``, bounded time) and ``zv.read`` (a typed error):

* decompression bombs made on the fly -- a zstd frame without a content size, a gzip
  member, a blosc header lying about its size -- decode no further than their limit
  (``zarr_vectors.limits.max-decoded-bytes``, or a table chunk's exact size), and a
  real-size 196 KB zstd frame describing 6 GiB fails fast under an address-space cap;
* a manifest mode-1 block naming 2^30 fragments is refused before anything is expanded;
* a FragmentIndex range whose start + count passes 2^63 - 1 is refused (max_row wrapped);
* a manifests shape of 10^12 rows (or 2^20 declared chunks of which one is stored) plans
  no work per declared chunk;
* ``cross_level_depth`` = 2^31 does not loop to the depth.

The decoders themselves must give numcodecs' bytes for valid data: their parity tests
are here too (the round trips of every store are the rest of the suite).
"""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
import textwrap
import time
import tracemalloc
import zlib
from collections.abc import Callable
from pathlib import Path

import dask.config
import numcodecs
import numpy as np
import pytest
from conftest import ZSTD, cell_file, edit_attrs, edit_json, first_chunk, read_json

import zarr_vectors as zv
from zarr_vectors.encoding import FragmentIndex, frame_items, unframe_items
from zarr_vectors.errors import EncodingError, InconsistentStoreError, ResourceLimitError
from zarr_vectors.store.codecs import Pipeline
from zarr_vectors.store.inflate import zstd_content_size
from zarr_vectors.validation import validate

REPO = Path(__file__).resolve().parents[2]
MIB = 1 << 20
SMALL = {"zarr_vectors.limits.max-decoded-bytes": MIB}


# ---------------------------------------------------------------------------------------
# bombs, made on the fly
# ---------------------------------------------------------------------------------------
def zstd_rle_bomb(total: int, byte: int = 0) -> bytes:
    """A zstd frame without a content size: RLE blocks of 128 KiB, 4 bytes each (6 GiB in 196 KB)."""
    parts = [struct.pack("<I", 0xFD2FB528), bytes([0x00, 0x38])]  # no FCS, window 128 KiB
    block = 128 * 1024
    n = -(-total // block)
    for i in range(n):
        size = min(block, total - i * block)
        parts.append(((size << 3) | (1 << 1) | (i == n - 1)).to_bytes(3, "little") + bytes([byte]))
    return b"".join(parts)


def gzip_bomb(total: int) -> bytes:
    """One gzip member of ``total`` zero bytes (about 1000:1)."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    step = bytes(4 * MIB)
    out = [comp.compress(step) for _ in range(total // len(step))]
    return b"".join(out) + comp.flush()


def set_blosc_nbytes(raw: bytes, nbytes: int) -> bytes:
    out = bytearray(raw)
    struct.pack_into("<I", out, 4, nbytes)
    return bytes(out)


# ---------------------------------------------------------------------------------------
# stores
# ---------------------------------------------------------------------------------------
COMPRESSORS: dict[str, object] = {
    "zstd": "zstd",
    "gzip": {"name": "gzip", "configuration": {"level": 5}},
    "blosc": "blosc",
}


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A point store with object ids and an object attribute, per compressor."""
    rng = np.random.default_rng(12)
    n = 1000
    positions = rng.uniform(0.0, 100.0, (n, 3)).astype(np.float32)
    ids = rng.integers(0, 12, n)
    root = tmp_path_factory.mktemp("bounds")
    out = {}
    for name, compressor in COMPRESSORS.items():
        path = root / f"{name}.zv"
        zv.write_points(str(path), positions, chunk_shape=50.0, object_ids=ids, compressor=compressor,
                        object_attributes={"weight": rng.standard_normal(12).astype(np.float32)})
        out[name] = path
    return out


@pytest.fixture
def copy(stores: dict[str, Path], tmp_path: Path) -> Callable[[str], Path]:
    import shutil

    def make(name: str, as_name: str | None = None) -> Path:
        dst = tmp_path / f"{as_name or name}.zv"
        shutil.copytree(stores[name], dst)
        return dst

    return make


def vertex_cell(store: Path) -> tuple[Path, str]:
    """The first vertex cell's file and its key in the store."""
    path = cell_file(store, "0/vertices", first_chunk(store, "0/vertices"))
    return path, path.relative_to(store).as_posix()


def assert_finding(store: Path, code: str, *, cell: str | None = None, seconds: float = 120.0) -> None:
    """validate(level=5) reports ``code`` (at ``cell``), crashes nowhere, and returns in bounded time."""
    start = time.monotonic()
    result = validate(str(store), 5)
    elapsed = time.monotonic() - start
    hits = [f for f in result.findings if f.code == code and (cell is None or f.cell == cell)]
    assert hits, result.summary()
    assert not [f for f in result.findings if f.code.endswith("_CHECK_CRASHED")], result.summary()
    assert elapsed < seconds, f"validate took {elapsed:.1f}s"


# ---------------------------------------------------------------------------------------
# decoders: numcodecs' bytes for valid data
# ---------------------------------------------------------------------------------------
def _pipeline(compressor: dict) -> Pipeline:
    return Pipeline.from_codecs(Pipeline.codecs_json("vlen-bytes", compressor), file="t")


DATA = [b"x", bytes(1000), np.random.default_rng(3).random(300_000).astype(np.float32).tobytes(),
        np.arange(1_000_000, dtype=np.int32).tobytes()]


@pytest.mark.parametrize("config", [
    {"name": "zstd", "configuration": {"level": 0, "checksum": False}},
    {"name": "zstd", "configuration": {"level": 5, "checksum": True}},
    {"name": "gzip", "configuration": {"level": 1}},
    {"name": "gzip", "configuration": {"level": 9}},
    {"name": "blosc", "configuration": {"typesize": 4, "cname": "zstd", "clevel": 5, "shuffle": "bitshuffle",
                                        "blocksize": 0}},
    {"name": "blosc", "configuration": {"typesize": 1, "cname": "lz4", "clevel": 1, "shuffle": "noshuffle",
                                        "blocksize": 0}},
], ids=lambda c: f"{c['name']}-{'-'.join(str(v) for v in c['configuration'].values())}")
def test_bounded_decoders_give_numcodecs_bytes(config: dict) -> None:
    pipe = _pipeline(config)
    for data in DATA:
        stored = pipe.compress(data)
        assert pipe.decompress(stored, max_size=len(data), where="c") == bytes(pipe.compressor.impl.decode(stored))
        with pytest.raises(ResourceLimitError, match=f"c: .*more than {len(data) - 1} bytes"):
            pipe.decompress(stored, max_size=len(data) - 1, where="c")


def test_zstd_framings_numcodecs_accepts_decode_alike() -> None:
    """Concatenated and skippable frames, with and without content sizes, as numcodecs decodes them."""
    from backports import zstd as stream  # the streaming decoder's own encoder writes no content size

    known = [bytes(numcodecs.Zstd(level=3).encode(d)) for d in DATA[:3]]
    unknown = []
    for d in DATA[:3]:
        c = stream.ZstdCompressor()
        unknown.append(c.compress(d) + c.flush())
    assert all(zstd_content_size(u) is None for u in unknown) and zstd_content_size(known[2]) == len(DATA[2])
    skippable = struct.pack("<II", 0x184D2A53, 3) + b"abc"
    pipe = _pipeline({"name": "zstd", "configuration": {"level": 0}})
    for stored in (known[0] + known[2], unknown[2], unknown[0] + unknown[1], known[1] + unknown[2],
                   skippable + known[2], unknown[1] + skippable):
        assert pipe.decompress(stored) == bytes(numcodecs.zstd.decompress(stored))
    for bad in (b"", known[2][:-1], unknown[2][:-1], known[0] + b"\0", unknown[0] + b"junk"):
        with pytest.raises(EncodingError):
            pipe.decompress(bad)


def test_gzip_accepts_exactly_what_numcodecs_accepts() -> None:
    gz = numcodecs.GZip(level=5)
    member = bytes(gz.encode(DATA[2]))
    pipe = _pipeline({"name": "gzip", "configuration": {"level": 5}})
    for stored in (member, member + member, member + b"\0\0\0", b""):
        assert pipe.decompress(stored) == bytes(gz.decode(stored))
    for bad in (member + b"xy", b"\0" + member, member[:-4], b"\0\0"):
        with pytest.raises(Exception):  # noqa: B017 - numcodecs refuses it too (BadGzipFile, EOFError)
            gz.decode(bad)
        with pytest.raises(EncodingError):
            pipe.decompress(bad)


# ---------------------------------------------------------------------------------------
# decompression bombs in stores
# ---------------------------------------------------------------------------------------
def test_zstd_bomb_without_content_size_is_refused(copy: Callable[[str], Path]) -> None:
    store = copy("zstd")
    path, key = vertex_cell(store)
    bomb = zstd_rle_bomb(64 * MIB)
    assert len(bomb) < 3000 and zstd_content_size(bomb) is None
    path.write_bytes(bomb)
    with dask.config.set(SMALL):
        with pytest.raises(ResourceLimitError, match=rf"{key}: decodes to more than {MIB} bytes"):
            zv.read(str(store))
        assert_finding(store, "L1_RESOURCE_LIMIT", cell=".".join(map(str, first_chunk(store, "0/vertices"))))


def test_zstd_bomb_declaring_its_size_is_refused_before_decoding(copy: Callable[[str], Path]) -> None:
    store = copy("zstd")
    path, key = vertex_cell(store)
    path.write_bytes(bytes(ZSTD.encode(bytes(64 * MIB))))
    with dask.config.set(SMALL):
        tracemalloc.start()
        with pytest.raises(ResourceLimitError, match=rf"{key}: declares {64 * MIB} decoded bytes"):
            zv.read(str(store))
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 32 * MIB
        assert_finding(store, "L1_RESOURCE_LIMIT")


def test_gzip_bomb_is_refused(copy: Callable[[str], Path]) -> None:
    store = copy("gzip")
    path, key = vertex_cell(store)
    path.write_bytes(gzip_bomb(64 * MIB))
    with dask.config.set(SMALL):
        with pytest.raises(ResourceLimitError, match=rf"{key}: decodes to more than {MIB} bytes"):
            zv.read(str(store))
        assert_finding(store, "L1_RESOURCE_LIMIT")


def test_blosc_header_lying_about_size_is_refused(copy: Callable[[str], Path]) -> None:
    """The header's uncompressed size is what blosc allocates: checked first."""
    store = copy("blosc")
    path, key = vertex_cell(store)
    path.write_bytes(set_blosc_nbytes(path.read_bytes(), 2**31))
    with dask.config.set(SMALL):
        with pytest.raises(ResourceLimitError, match=rf"{key}: declares {2**31} decoded bytes"):
            zv.read(str(store))
        assert_finding(store, "L1_RESOURCE_LIMIT")


def test_blosc_table_chunk_lying_about_size_is_refused_at_default_limits(copy: Callable[[str], Path]) -> None:
    """A table chunk's decoded size is exact (chunk shape x item size): no ceiling needed."""
    store = copy("blosc")
    chunk = store / "0/object_attributes/weight/c/0"
    chunk.write_bytes(set_blosc_nbytes(chunk.read_bytes(), 2**32 - 1))
    expected = read_json(store, "0/object_attributes/weight")["chunk_grid"]["configuration"]["chunk_shape"][0] * 4
    with pytest.raises(ResourceLimitError, match=rf"weight/c/0: declares {2**32 - 1} decoded bytes.*{expected}"):
        zv.read(str(store))


_REAL_SIZE = """
import json, resource, sys, time
cap = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
import zarr_vectors as zv
from zarr_vectors.errors import ResourceLimitError
start = time.monotonic()
try:
    zv.read(sys.argv[1])
    outcome = "read"
except ResourceLimitError as exc:
    outcome = "ResourceLimitError: " + str(exc)
except MemoryError:
    outcome = "MemoryError"
print(json.dumps({"outcome": outcome, "seconds": time.monotonic() - start,
                  "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def _read_capped(store: Path, cap: int, env: dict[str, str] | None = None) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_REAL_SIZE), str(store), str(cap)],
        capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_real_size_zstd_bomb_fails_fast_with_bounded_memory(copy: Callable[[str], Path]) -> None:
    """196 KB describing 6 GiB, read under a 2.5 GiB address-space cap: refused, never materialised.

    At default settings both are refused at their size from metadata: a table chunk's exact
    size, a vertex cell's the level's ``vertex_count`` rows (format/bounds.py); with the
    ceiling below that (set through the environment, as a deployment sets it for its
    workers) the ceiling is the limit.
    """
    bomb = zstd_rle_bomb(6 << 30)
    assert 190_000 < len(bomb) < 200_000
    cap = 2560 * MIB
    table = copy("zstd")
    (table / "0/object_attributes/weight/c/0").write_bytes(bomb)
    got = _read_capped(table, cap)
    assert got["outcome"].startswith("ResourceLimitError: 0/object_attributes/weight/c/0: decodes to more than")
    assert got["seconds"] < 30 and got["peak_rss"] < 1536 * MIB

    cell = copy("zstd", "zstd-cell")
    vertex_cell(cell)[0].write_bytes(bomb)
    bound = 1000 * 3 * 4 + MIB + 8  # vertex_count x (3 x float32) + the allowance + the vlen framing
    got = _read_capped(cell, cap)
    assert got["outcome"].startswith(f"ResourceLimitError: {vertex_cell(cell)[1]}: decodes to more than {bound}")
    assert got["seconds"] < 30 and got["peak_rss"] < 1536 * MIB
    got = _read_capped(cell, cap, {"DASK_ZARR_VECTORS__LIMITS__MAX_DECODED_BYTES": str(MIB // 2)})
    assert got["outcome"].startswith(f"ResourceLimitError: {vertex_cell(cell)[1]}: decodes to more than {MIB // 2}")


# ---------------------------------------------------------------------------------------
# counts and arithmetic on stored values
# ---------------------------------------------------------------------------------------
def _rewrite_manifest_row(store: Path, row: int, value: bytes) -> None:
    f = store / "0/object_index/manifests/c/0"
    items = unframe_items(ZSTD.decode(f.read_bytes()))
    items[row] = value
    f.write_bytes(bytes(ZSTD.encode(frame_items(items))))


def test_manifest_block_count_2_30_is_not_expanded(copy: Callable[[str], Path]) -> None:
    """A mode-1 block of 2^30 fragments is 16 bytes; expanded it would be 8 GiB (40 GiB as a table)."""
    store = copy("zstd")
    chunk = first_chunk(store, "0/vertices")
    row = struct.pack("<I", 1) + struct.pack("<3q", *chunk) + bytes([1]) + struct.pack("<qq", 0, 2**30)
    _rewrite_manifest_row(store, 0, row)
    tracemalloc.start()
    with pytest.raises(ResourceLimitError, match=f"manifests: manifest row 0: .*names {2**30} fragments"):
        zv.read(str(store))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 64 * MIB
    assert_finding(store, "L3_MANIFEST_FRAGMENT_OUT_OF_RANGE")  # the validator compares the run's end, unexpanded


def _fragment_index_bytes(start: int, count: int) -> bytes:
    """FragmentIndex v1 with one range fragment, written by hand (the constructor refuses it)."""
    header = struct.pack("<IHHII", 0x5A564647, 1, 0, 1, 1)
    return header + bytes([1]) + bytes(7) + struct.pack("<qq", start, count) + struct.pack("<I", 0)


def test_fragment_index_range_overflowing_int64_is_refused(copy: Callable[[str], Path]) -> None:
    """(2^63 - 2^29, 2^30): start + count wrapped negative, so max_row() passed the bounds check."""
    start, count = 2**63 - 2**29, 2**30
    blob = _fragment_index_bytes(start, count)
    with pytest.raises(EncodingError, match=r"range #0 .* ends past 2\*\*63 - 1"):
        FragmentIndex.decode(blob)
    store = copy("zstd")
    chunk = first_chunk(store, "0/vertex_fragments")
    f = cell_file(store, "0/vertex_fragments", chunk)
    f.write_bytes(bytes(ZSTD.encode(struct.pack("<II", 1, len(blob)) + blob)))
    with pytest.raises(EncodingError, match=r"ends past 2\*\*63 - 1"):
        zv.read(str(store))
    assert_finding(store, "L3_FRAGMENT_INDEX_UNDECODABLE", cell=".".join(map(str, chunk)))


def test_overlapping_fragments_expanding_past_the_limit_are_refused() -> None:
    """1000 ranges over the same 10^6 rows select 10^9 rows from a 16 KB index."""
    index = FragmentIndex.from_ranges(np.zeros(1000, np.int64), np.full(1000, 10**6, np.int64))
    assert index.max_row() == 10**6 - 1
    with dask.config.set({"zarr_vectors.limits.max-decoded-bytes": 256 * MIB}):
        with pytest.raises(ResourceLimitError, match="select 1000000000 rows"):
            index.expand()


def test_huge_manifests_shape_plans_no_work_per_declared_chunk(copy: Callable[[str], Path]) -> None:
    store = copy("zstd")
    edit_json(store, "0/object_index/manifests", lambda d: d["shape"].__setitem__(0, 10**12))
    start = time.monotonic()
    with pytest.raises(ResourceLimitError, match="declares .* chunks, more than zarr_vectors.limits.max-declared"):
        zv.read(str(store))
    assert time.monotonic() - start < 10
    assert_finding(store, "L1_RESOURCE_LIMIT", seconds=30)


def test_declared_but_unstored_manifest_chunks_are_found_by_listing(copy: Callable[[str], Path]) -> None:
    """2^20 declared chunks (within the limit), one stored: one listing, no 2^20 requests or rows."""
    store = copy("zstd")
    doc = read_json(store, "0/object_index/manifests")
    rows = doc["chunk_grid"]["configuration"]["chunk_shape"][0]
    edit_json(store, "0/object_index/manifests", lambda d: d["shape"].__setitem__(0, rows << 20))
    start = time.monotonic()
    with pytest.raises(EncodingError, match=rf"row {rows} of {rows << 20} is not stored"):
        zv.read(str(store))
    assert time.monotonic() - start < 10
    assert_finding(store, "L1_MANIFEST_UNDECODABLE", cell="1", seconds=30)


def test_huge_object_attribute_shape_is_refused_before_allocating(copy: Callable[[str], Path]) -> None:
    store = copy("zstd")
    edit_json(store, "0/object_attributes/weight", lambda d: d["shape"].__setitem__(0, 10**12))
    with pytest.raises(ResourceLimitError, match=r"weight/zarr.json: declares|weight/zarr.json: the array declares"):
        zv.read(str(store))


def test_cross_level_depth_2_31_does_not_loop_to_the_depth(copy_store: Callable[[str], Path]) -> None:
    store = copy_store("pyramid")
    edit_attrs(store, "", lambda a: a["zarr_vectors"].__setitem__("cross_level_depth", 2**31))
    start = time.monotonic()
    result = validate(str(store), 5)
    assert time.monotonic() - start < 60
    storage = [f for f in result.findings if f.code == "L5_CROSS_LEVEL_STORAGE"]
    assert any("needs links/+2 at level 0" in f.message for f in storage), result.summary()  # levels 0 and 2
    assert not [f for f in result.findings if f.code.endswith("_CHECK_CRASHED")]
    assert len(zv.read(str(store), level=2).positions) > 0  # the reader never loops on the depth


def test_link_fragment_groups_are_one_bounded_pass() -> None:
    """A flat link cell's groups come from one expansion (was one O(F) scan per fragment, O(F^2) in all)."""
    index = FragmentIndex.from_fragments([(0, 3), [5, 2, 9], (3, 0), [1]])
    assert [g.tolist() for g in index.fragment_rows()] == [index.rows(f).tolist() for f in range(4)]
    many = FragmentIndex.from_counts(np.ones(200_000, np.int64))
    start = time.monotonic()
    assert len(many.fragment_rows()) == 200_000
    assert time.monotonic() - start < 5
    overlapping = FragmentIndex.from_ranges(np.zeros(100, np.int64), np.full(100, 10**6, np.int64))
    with dask.config.set(SMALL), pytest.raises(ResourceLimitError):
        overlapping.fragment_rows()


# ---------------------------------------------------------------------------------------
# bombs at default settings: every cell decodes with its size from metadata (format/bounds.py)
# ---------------------------------------------------------------------------------------
BOMB_BYTES = 256 * MIB  # 8 KB of zstd; fully inflated it would pass every peak asserted below


def _first_cell_of(store: Path, family: str) -> str:
    """The array (relative to the store) of the first grid array under ``family`` holding a cell."""
    for doc in sorted((store / family).rglob("zarr.json")):
        node = doc.parent.relative_to(store).as_posix()
        if read_json(store, node).get("attributes", {}).get("nonempty_chunks"):
            return node
    raise AssertionError(f"no cell under {family}")


def _bomb_target(store: Path, what: str) -> Path:
    if what == "manifest":
        return store / "0/object_index/manifests/c/0"
    array = {"vertex": "0/vertices", "attribute": "0/vertex_attributes/rgb"}.get(what) or _first_cell_of(
        store, {"link": "0/links/0", "link attribute": "0/link_attributes/weight/0"}[what])
    return cell_file(store, array, first_chunk(store, array))


def _peak(fn: Callable[[], object]) -> tuple[object, int]:
    tracemalloc.start()
    try:
        return fn(), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(("builder", "what"), [
    ("points_ids", "vertex"), ("points_ids", "attribute"), ("points_ids", "manifest"),
    ("graph", "link"), ("graph", "link attribute"),
])
def test_bomb_in_a_cell_is_refused_at_its_size_from_metadata(
    copy_store: Callable[[str], Path], builder: str, what: str
) -> None:
    """A vertex, attribute, link, link-attribute or manifests cell inflating to 256 MiB, at the
    default 4 GiB ceiling: read() raises ResourceLimitError naming the cell and validate() reports
    L1_RESOURCE_LIMIT at its node, each having decoded no more than the cell's bound (~1 MiB)."""
    store = copy_store(builder)
    target = _bomb_target(store, what)
    target.write_bytes(zstd_rle_bomb(BOMB_BYTES))
    key = target.relative_to(store).as_posix()

    def read() -> str:
        with pytest.raises(ResourceLimitError, match=re.escape(key) + r": decodes to more than \d+ bytes") as info:
            zv.read(str(store))
        return str(info.value)

    message, peak = _peak(read)
    limit = int(str(message).split("more than ")[1].split(" ")[0])
    assert limit < 4 * MIB and peak < 16 * MIB, (message, peak)
    result, peak = _peak(lambda: validate(str(store), 5))
    node = key.rsplit("/c/", 1)[0]
    assert [f for f in result.findings if f.code == "L1_RESOURCE_LIMIT" and f.node == node], result.summary()
    assert not [f for f in result.findings if f.code.endswith("_CHECK_CRASHED")], result.summary()
    assert peak < 64 * MIB, peak


def test_cell_bounds_allow_a_count_that_is_merely_wrong(copy_store: Callable[[str], Path]) -> None:
    """vertex_count 1 on a 1200-row level: the cells still decode (the allowance), so the count's
    own rule and the reader's count check report it, not a resource limit."""
    store = copy_store("points_ids")
    edit_attrs(store, "0", lambda a: a["zarr_vectors_level"].__setitem__("vertex_count", 1))
    with pytest.raises(InconsistentStoreError, match="vertex_count is 1"):
        zv.read(str(store))
    result = validate(str(store), 5)
    assert "L3_VERTEX_COUNT" in {f.code for f in result.findings}, result.summary()
    assert "L1_RESOURCE_LIMIT" not in {f.code for f in result.findings}, result.summary()


@pytest.mark.parametrize("builder", ["points", "points_ids", "pyramid", "points_sharded", "graph",
                                     "graph_directed_duplicate", "points_fattr"])
def test_valid_stores_decode_within_their_cell_bounds_without_the_allowance(
    base_stores: dict[str, Path], builder: str
) -> None:
    """The bounds are upper bounds of what valid stores hold, not just the allowance hiding a
    bound too tight: with no allowance every store still reads and validates clean."""
    with dask.config.set({"zarr_vectors.limits.decode-allowance-bytes": 0}):
        for level in zv.open_store(str(base_stores[builder])).level_numbers():
            zv.read(str(base_stores[builder]), level=level)
        result = validate(str(base_stores[builder]), 5)
    assert not [f for f in result.findings if f.severity == "error"], result.summary()
