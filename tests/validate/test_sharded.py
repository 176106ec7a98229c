"""Sharded stores (docs/format.md §9) are validated exactly as well as unsharded ones.

* every kind the project writes, sharded with ``zv.shard_store``, passes level 5 with no
  error and no warning (the inner cells are read, so every level-3/4 check runs on them);
* level 2 accepts only the ``sharding_indexed`` pipeline docs/format.md §9 describes;
* raw-byte defects of a shard object (CRC mismatch, truncation, an index entry outside
  the object) are one L3_SHARD_CORRUPT finding naming the shard, never an exception;
* a defect that has an unsharded twin (presence list, absent cell, undecodable cell)
  gives the same error codes sharded as unsharded.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable
from pathlib import Path

import google_crc32c
import numpy as np
import pytest
from conftest import assert_clean, cell_file, edit_json, error_codes, first_chunk, read_json, set_nonempty_raw

import zarr_vectors as zv
from zarr_vectors.validation import validate

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")

EMPTY = 0xFFFF_FFFF_FFFF_FFFF
RNG = np.random.default_rng(23)
N = 300
POS = RNG.uniform(-20.0, 100.0, (N, 3)).astype(np.float32)
IDS = RNG.integers(0, 7, N)


def _near_pairs(k: int) -> np.ndarray:
    d = ((POS[:, None, :] - POS[None, :, :]) ** 2).sum(-1)
    np.fill_diagonal(d, np.inf)
    nbr = np.argsort(d, axis=1)[:, :k]
    return np.stack([np.repeat(np.arange(N), k), nbr.ravel()], axis=1)


def _write(kind: str, url: str) -> None:
    rng = np.random.default_rng(5)
    attrs = {"t": rng.standard_normal(N).astype(np.float32), "rgb": rng.integers(0, 256, (N, 3)).astype(np.uint8)}
    if kind == "points":
        zv.write_points(url, POS, chunk_shape=25, bin_shape=12.5, attributes=attrs)
    elif kind == "points_raw":
        zv.write_points(url, POS, chunk_shape=25, bin_shape=12.5, attributes=attrs, compressor="none")
    elif kind == "points_ids":
        zv.write_points(url, POS, chunk_shape=25, object_ids=IDS, attributes=attrs,
                        object_attributes={"w": np.arange(7, dtype=np.float32)})
    elif kind == "graph":
        edges = _near_pairs(2)
        zv.write_graph(url, POS, edges, chunk_shape=30, object_ids=IDS,
                       edge_attributes={"w": rng.standard_normal(len(edges)).astype(np.float32)})
    elif kind == "mesh":
        pairs = _near_pairs(3)
        faces = np.stack([pairs[0::3, 0], pairs[0::3, 1], pairs[1::3, 1]], axis=1)
        zv.write_mesh(url, POS, faces, chunk_shape=30, face_attributes={"a": np.arange(len(faces), dtype=np.int32)})
    elif kind == "polylines":
        lengths = rng.integers(2, 25, 20)
        pos = (np.cumsum(rng.normal(0, 6, (int(lengths.sum()), 3)), axis=0) % 100).astype(np.float32)
        zv.write_polylines(url, pos, np.r_[0, np.cumsum(lengths)], chunk_shape=20,
                           attributes={"s": np.arange(len(pos), dtype=np.float32)})
    elif kind == "skeleton":
        d = ((POS[:, None, :] - POS[None, :, :]) ** 2).sum(-1)
        parents = np.array([-1] + [int(np.argmin(d[i, :i])) for i in range(1, N)])
        parents[150] = -1
        zv.write_skeleton(url, POS, parents, chunk_shape=30, object_ids=(np.arange(N) >= 150).astype(int))
    else:  # pragma: no cover
        raise AssertionError(kind)


KINDS = ["points", "points_raw", "points_ids", "graph", "mesh", "polylines", "skeleton"]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each kind unsharded, as written."""
    root = tmp_path_factory.mktemp("unsharded")
    out = {}
    for kind in KINDS:
        out[kind] = root / f"{kind}.zv"
        _write(kind, str(out[kind]))
    return out


@pytest.fixture(scope="module")
def sharded(written: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each kind sharded 2x2x2 with shard_store."""
    root = tmp_path_factory.mktemp("sharded")
    out = {}
    for kind, src in written.items():
        out[kind] = root / f"{kind}.zv"
        shutil.copytree(src, out[kind])
        zv.shard_store(str(out[kind]), 2)
    return out


CopyOf = Callable[[Path, str], Path]


@pytest.fixture
def copy_of(tmp_path: Path) -> CopyOf:
    def copy(src: Path, name: str) -> Path:
        dst = tmp_path / name
        shutil.copytree(src, dst)
        return dst

    return copy


# ---------------------------------------------------------------------------
# raw shard helpers (docs/format.md §9 byte layout, never the library's writer)
# ---------------------------------------------------------------------------
def shard_location(store: Path, array: str, chunk: tuple[int, ...]) -> tuple[Path, int, int]:
    """(shard object file, C-order index entry of the chunk's cell, number of entries)."""
    doc = read_json(store, array)
    ss = doc["chunk_grid"]["configuration"]["chunk_shape"]
    origin = doc["attributes"].get("chunk_grid_origin", [0] * len(chunk))
    index = [c - o for c, o in zip(chunk, origin)]
    entry = int(np.ravel_multi_index(tuple(i % s for i, s in zip(index, ss)), ss))
    return store / array / "c" / Path(*[str(i // s) for i, s in zip(index, ss)]), entry, math.prod(ss)


def split_shard(raw: bytes, n: int) -> tuple[bytes, np.ndarray]:
    """(data region, writable (n, 2) index) of a shard object with its index at the end."""
    body = raw[-(16 * n + 4):-4]
    return raw[: len(raw) - (16 * n + 4)], np.frombuffer(body, "<u8").reshape(n, 2).copy()


def join_shard(data: bytes, index: np.ndarray) -> bytes:
    body = index.astype("<u8").tobytes()
    return data + body + google_crc32c.value(body).to_bytes(4, "little")


def edit_shard(store: Path, array: str, chunk: tuple[int, ...],
               fn: Callable[[bytes, np.ndarray, int], bytes]) -> None:
    """Rewrite the shard holding ``chunk`` as ``fn(data, index, entry)`` returns it, with a valid CRC32C."""
    path, entry, n = shard_location(store, array, chunk)
    data, index = split_shard(path.read_bytes(), n)
    data = fn(data, index, entry)
    path.write_bytes(join_shard(data, index))


def replace_inner(new: bytes) -> Callable[[bytes, np.ndarray, int], bytes]:
    def fn(data: bytes, index: np.ndarray, entry: int) -> bytes:
        assert index[entry, 0] != EMPTY
        index[entry] = (len(data), len(new))
        return data + new

    return fn


def empty_entry(data: bytes, index: np.ndarray, entry: int) -> bytes:
    assert index[entry, 0] != EMPTY
    index[entry] = (EMPTY, EMPTY)
    return data


def corrupt_findings(result) -> list:  # noqa: ANN001
    return [f for f in result.findings if f.code == "L3_SHARD_CORRUPT"]


def where(result) -> list[tuple[str, str, str | None]]:  # noqa: ANN001
    return sorted((f.code, f.node, f.cell) for f in result.findings)


def assert_no_crash(result) -> None:  # noqa: ANN001
    assert not [f for f in result.findings if f.code.endswith("_CHECK_CRASHED")], result.summary()


# ---------------------------------------------------------------------------
# valid sharded stores
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_every_sharded_kind_passes_level_5(sharded: dict[str, Path], kind: str) -> None:
    doc = read_json(sharded[kind], "0/vertices")
    assert doc["codecs"][0]["name"] == "sharding_indexed"
    result = validate(str(sharded[kind]), 5)
    assert result.errors == [] and result.warnings == [], result.summary()
    assert result.levels_run == [1, 2, 3, 4, 5]
    assert any("[L3_SHARD_CORRUPT]" in line for line in result.passed)


def test_shard_shape_beyond_the_array_and_per_axis(written: dict[str, Path], copy_of: CopyOf) -> None:
    store = copy_of(written["graph"], "g.zv")
    zv.shard_store(str(store), (16, 3, 64))
    assert read_json(store, "0/vertices")["chunk_grid"]["configuration"]["chunk_shape"] == [16, 3, 64]
    assert_clean(store)


# ---------------------------------------------------------------------------
# level 2: only the docs/format.md §9 pipeline
# ---------------------------------------------------------------------------
def _sharding_conf(d: dict) -> dict:
    return d["codecs"][0]["configuration"]


L2_DEFECTS: dict[str, Callable[[dict], object]] = {
    "index_at_start": lambda d: _sharding_conf(d).__setitem__("index_location", "start"),
    "index_without_crc": lambda d: _sharding_conf(d).__setitem__("index_codecs", _sharding_conf(d)["index_codecs"][:1]),
    "index_big_endian": lambda d: _sharding_conf(d)["index_codecs"][0].__setitem__("configuration",
                                                                                    {"endian": "big"}),
    "inner_chunk_not_one_cell": lambda d: _sharding_conf(d).__setitem__("chunk_shape", [2, 1, 1]),
    "inner_codecs_not_vlen": lambda d: _sharding_conf(d)["codecs"][0].update(name="bytes",
                                                                             configuration={"endian": "little"}),
    "inner_two_compressors": lambda d: _sharding_conf(d)["codecs"].append(_sharding_conf(d)["codecs"][1]),
    "two_array_codecs": lambda d: d["codecs"].append({"name": "zstd", "configuration": {"level": 0}}),
}


@pytest.mark.parametrize("defect", sorted(L2_DEFECTS))
def test_other_sharding_pipelines_are_l2_codecs(sharded: dict[str, Path], copy_of: CopyOf, defect: str) -> None:
    store = copy_of(sharded["points"], "p.zv")
    edit_json(store, "0/vertices", L2_DEFECTS[defect])
    result = validate(str(store), 5)
    hits = [f for f in result.findings if f.code == "L2_CODECS"]
    assert hits and all(f.node == "0/vertices" for f in hits), result.summary()
    assert result.levels_run == [1, 2]
    assert_no_crash(result)


def test_l2_message_names_the_expected_shard_index(sharded: dict[str, Path], copy_of: CopyOf) -> None:
    store = copy_of(sharded["points"], "p.zv")
    edit_json(store, "0/vertices", L2_DEFECTS["index_without_crc"])
    (hit,) = [f for f in validate(str(store), 2).findings if f.code == "L2_CODECS"]
    assert "crc32c" in hit.message and "index_location 'end'" in hit.message


# ---------------------------------------------------------------------------
# level 3: shard objects
# ---------------------------------------------------------------------------
def _flip_index_byte(store: Path) -> str:
    path, entry, n = shard_location(store, "0/vertices", first_chunk(store, "0/vertices"))
    raw = bytearray(path.read_bytes())
    raw[len(raw) - (16 * n + 4) + 16 * entry + 3] ^= 0x40  # a byte of the entry's offset
    path.write_bytes(bytes(raw))
    return path.relative_to(store).as_posix()


def _truncate(store: Path) -> str:
    path, _, _ = shard_location(store, "0/vertex_fragments", first_chunk(store, "0/vertex_fragments"))
    path.write_bytes(path.read_bytes()[:-7])
    return path.relative_to(store).as_posix()


def _entry_outside(store: Path) -> str:
    chunk = first_chunk(store, "0/vertices")

    def fn(data: bytes, index: np.ndarray, entry: int) -> bytes:
        index[entry, 1] = len(data) + 1  # runs into the index (CRC recomputed: the index itself is valid)
        return data

    edit_shard(store, "0/vertices", chunk, fn)
    return shard_location(store, "0/vertices", chunk)[0].relative_to(store).as_posix()


def _entry_too_large(store: Path) -> str:
    chunk = first_chunk(store, "0/vertices")

    def fn(data: bytes, index: np.ndarray, entry: int) -> bytes:
        index[entry, 1] = 2**40  # more than any cell may hold: refused before its range is compared
        return data

    edit_shard(store, "0/vertices", chunk, fn)
    return shard_location(store, "0/vertices", chunk)[0].relative_to(store).as_posix()


def _tiny_object(store: Path) -> str:
    path, _, _ = shard_location(store, "0/vertex_fragments", first_chunk(store, "0/vertex_fragments"))
    path.write_bytes(b"\x00" * 5)
    return path.relative_to(store).as_posix()


SHARD_DEFECTS = {"crc_mismatch": _flip_index_byte, "truncated": _truncate, "entry_outside_object": _entry_outside,
                 "entry_larger_than_a_cell": _entry_too_large, "object_smaller_than_index": _tiny_object}


@pytest.mark.parametrize("kind", ["points", "graph"])
@pytest.mark.parametrize("defect", sorted(SHARD_DEFECTS))
def test_corrupt_shard_is_one_finding_naming_it(sharded: dict[str, Path], copy_of: CopyOf, defect: str,
                                                kind: str) -> None:
    store = copy_of(sharded[kind], "s.zv")
    key = SHARD_DEFECTS[defect](store)
    result = validate(str(store), 5)
    hits = corrupt_findings(result)
    assert len(hits) == 1, result.summary()
    (hit,) = hits
    assert hit.level == 3 and hit.severity == "error" and key in hit.message
    assert hit.line() in result.errors and not result.ok
    assert_no_crash(result)
    # the shard's cells count as present but unreadable: no presence finding on top
    assert not {"L3_NONEMPTY_MISSING", "L3_NONEMPTY_EXTRA", "L3_VERTEX_COUNT"} & error_codes(result), result.summary()


@pytest.mark.parametrize("name", [str(2**62), "00", "\u0663"])
def test_a_shard_named_past_the_grid_or_spelled_otherwise_is_not_a_shard(written: dict[str, Path], copy_of: CopyOf,
                                                                       name: str) -> None:
    """The hunt: a copy of shard 0 named 2**62 (shard shape 4: 2**62 * 4 wraps int64 to 0) read as shard
    0's cells, so the store validated clean; ``00`` or an Arabic-Indic 3 read as shards 0 and 3."""
    store = copy_of(written["points"], "p.zv")
    zv.shard_store(str(store), 4)
    stray = store / "0" / "vertices" / "c" / name / "0" / "0"
    stray.parent.mkdir(parents=True)
    stray.write_bytes((store / "0/vertices/c/0/0/0").read_bytes())
    result = validate(str(store), 5)
    assert_no_crash(result)
    if name == str(2**62):  # an index zarr could write, of a shard past the array's grid
        (hit,) = corrupt_findings(result)
        assert f"0/vertices/c/{name}/0/0: lies outside the array's" in hit.message and not result.ok
    else:  # no index at all: a stray, as any object that is no chunk
        assert result.ok and not corrupt_findings(result)
        assert any(f"unexpected object '0/vertices/c/{name}/0/0'" in w for w in result.warnings), result.summary()


def test_index_entry_outside_the_array(written: dict[str, Path], copy_of: CopyOf) -> None:
    """A shard reaching past the array (16x3x64 cells) whose index lists a cell beyond the array's shape."""
    store = copy_of(written["points"], "p.zv")
    zv.shard_store(str(store), (16, 3, 64))
    chunk = first_chunk(store, "0/vertices")
    shape = read_json(store, "0/vertices")["shape"]
    path, _, _ = shard_location(store, "0/vertices", chunk)
    assert path.name == "0" and shape[0] < 16

    def fn(data: bytes, index: np.ndarray, entry: int) -> bytes:
        beyond = int(np.ravel_multi_index((15, 0, 0), (16, 3, 64)))
        assert index[beyond, 0] == EMPTY
        index[beyond] = index[entry]  # a valid byte range, at a cell past the array's first axis
        return data

    edit_shard(store, "0/vertices", chunk, fn)
    result = validate(str(store), 5)
    (hit,) = corrupt_findings(result)
    assert "outside the array shape" in hit.message and "0/vertices/c/0/0/0" in hit.message
    assert_no_crash(result)


# ---------------------------------------------------------------------------
# level 3: defects with an unsharded twin give the same codes
# ---------------------------------------------------------------------------
def _drop_listed(store: Path, sharded_store: bool) -> None:
    set_nonempty_raw(store, "0/vertex_attributes/rgb", lambda keys: keys[1:])


def _absent_cell(store: Path, sharded_store: bool) -> None:
    array = "0/vertex_attributes/t"
    chunk = first_chunk(store, "0/vertices")
    if sharded_store:
        edit_shard(store, array, chunk, empty_entry)
    else:
        cell_file(store, array, chunk).unlink()


def _garbage_vertex_cell(store: Path, sharded_store: bool) -> None:
    chunk = first_chunk(store, "0/vertices")
    if sharded_store:
        edit_shard(store, "0/vertices", chunk, replace_inner(b"not zstd at all"))
    else:
        cell_file(store, "0/vertices", chunk).write_bytes(b"not zstd at all")


def _short_vertex_cell(store: Path, sharded_store: bool) -> None:
    """A vertex cell that frames and decompresses but is not a whole number of rows (uncompressed store)."""
    chunk = first_chunk(store, "0/vertices")
    payload = b"\x00" * 14
    framed = np.array([1, len(payload)], "<u4").tobytes() + payload
    if sharded_store:
        edit_shard(store, "0/vertices", chunk, replace_inner(framed))
    else:
        cell_file(store, "0/vertices", chunk).write_bytes(framed)


TWINS = {
    "not_listed": (_drop_listed, "points", "L3_NONEMPTY_EXTRA"),
    "listed_but_absent": (_absent_cell, "points", "L3_NONEMPTY_MISSING"),
    "garbage_vertex_cell": (_garbage_vertex_cell, "points", "L3_CELL_UNDECODABLE"),
    "vertex_cell_rows": (_short_vertex_cell, "points_raw", "L3_VERTEX_ROWS"),
}


@pytest.mark.parametrize("twin", sorted(TWINS))
def test_sharded_defect_reported_like_unsharded(written: dict[str, Path], sharded: dict[str, Path], copy_of: CopyOf,
                                                twin: str) -> None:
    apply, base, code = TWINS[twin]
    plain = copy_of(written[base], "plain.zv")
    packed = copy_of(sharded[base], "packed.zv")
    apply(plain, False)
    apply(packed, True)
    r_plain, r_packed = validate(str(plain), 5), validate(str(packed), 5)
    assert code in error_codes(r_plain), r_plain.summary()
    assert error_codes(r_packed) == error_codes(r_plain), r_packed.summary() + "\n" + r_plain.summary()
    assert "L3_SHARD_CORRUPT" not in error_codes(r_packed)
    assert where(r_packed) == where(r_plain)
    assert_no_crash(r_packed)

