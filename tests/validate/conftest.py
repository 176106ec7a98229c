"""Valid stores written by this project, built once per session and copied before each mutation."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv

# raw-file helpers used by the mutation tests (never the writer): the corpus generator's own
from zarr_vectors.conformance.rawfiles import (  # noqa: F401
    ZSTD,
    cell_file,
    edit_attrs,
    edit_json,
    first_chunk,
    read_json,
    read_payload,
    write_json,
    write_payload,
)
from zarr_vectors.conformance.rawfiles import set_nonempty as set_nonempty_raw  # noqa: F401
from zarr_vectors.validation import validate


def codes(result) -> set[str]:
    return {f.code for f in result.findings}


def error_codes(result) -> set[str]:
    return {f.code for f in result.findings if f.severity == "error"}


# ---------------------------------------------------------------------------
# valid stores written by this project
# ---------------------------------------------------------------------------
def _points(path: Path, *, ids: bool, bins: bool = True, compressor: str = "zstd") -> None:
    rng = np.random.default_rng(11)
    n = 1200
    positions = rng.uniform(-30.0, 70.0, (n, 3)).astype(np.float32)
    zv.write_points(
        str(path), positions, chunk_shape=50.0, bin_shape=25.0 if bins else None,
        object_ids=rng.integers(0, 12, n) if ids else None,
        attributes={"intensity": rng.standard_normal(n).astype(np.float32),
                    "rgb": rng.integers(0, 256, (n, 3), dtype=np.uint8)},
        object_attributes={"weight": rng.standard_normal(12).astype(np.float32)} if ids else None,
        compressor=compressor,
    )


def _local_rows(chunks: np.ndarray) -> np.ndarray:
    _, inverse = np.unique(chunks, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    order = np.argsort(inverse, kind="stable")
    counts = np.bincount(inverse)
    starts = np.cumsum(counts) - counts
    local = np.empty(len(chunks), dtype=np.int64)
    local[order] = np.arange(len(chunks)) - np.repeat(starts, counts)
    return local


def _graph(path: Path, *, directed: bool = False, store: str = "canonical") -> None:
    """A graph: vertices by the point writer (one fragment per chunk), links by the links API."""
    from zarr_vectors.links_api import write_link_attributes, write_links

    rng = np.random.default_rng(5)
    n = 300
    positions = rng.uniform(0.0, 100.0, (n, 3)).astype(np.float32)
    zv.write_points(str(path), positions, chunk_shape=50.0, bounds=[[0, 0, 0], [100, 100, 100]],
                    attributes={"v": rng.standard_normal(n).astype(np.float32)}, compressor="zstd")
    st = zv.open_store(str(path))
    st.root.geometry_types = ["graph"]
    st.root.links_convention = "explicit"
    st.write_root()
    level = st.level(0)
    # the point writer orders each chunk's rows by input order (one bin per chunk)
    chunks = np.floor(positions.astype(np.float64) / 50.0).astype(np.int64)
    local = _local_rows(chunks)
    near = rng.integers(0, n, (600, 2))
    near = near[near[:, 0] != near[:, 1]]
    # plus edges inside one chunk, so the intra array and link_fragments are populated
    same = [(a, b) for a in range(n) for b in range(a + 1, min(n, a + 40))
            if (chunks[a] == chunks[b]).all()][:300]
    edges = np.concatenate([near, np.asarray(same, dtype=np.int64)])
    part = write_links(level, 0, chunks[edges], local[edges], directed=directed, store=store)
    write_link_attributes(level, "weight", 0, rng.standard_normal(len(edges)).astype(np.float32), partition=part)


def _placement(positions: np.ndarray, ids: np.ndarray, cs: float) -> tuple[np.ndarray, np.ndarray]:
    """(chunk, row) of every input point as write_points(object_ids=...) stores it: by id, then input order."""
    chunks = np.floor(positions.astype(np.float64) / cs).astype(np.int64)
    _, lin = np.unique(chunks, axis=0, return_inverse=True)
    lin = lin.ravel()
    order = np.lexsort((np.arange(len(ids)), ids, lin))
    counts = np.bincount(lin)
    starts = np.cumsum(counts) - counts
    rows = np.empty(len(ids), dtype=np.int64)
    rows[order] = np.arange(len(ids)) - starts[lin[order]]
    return chunks, rows


def _pyramid(path: Path, levels: int = 3) -> None:
    """Three levels by this project's APIs: level k = per-(object, bin) centroids of level k-1 (bin x2),
    written by write_points and moved into place; +1/-1 families by the links API (directed, canonical)."""
    from zarr_vectors.format.metadata import RootMetadata
    from zarr_vectors.links_api import write_links

    rng = np.random.default_rng(3)
    n, cs, base = 800, 50.0, 25.0
    pos = rng.uniform(0.0, 200.0, (n, 3)).astype(np.float32)
    ids = rng.integers(0, 6, n)
    zv.write_points(str(path), pos, chunk_shape=cs, bin_shape=base, object_ids=ids,
                    bounds=[[0, 0, 0], [200, 200, 200]], compressor="zstd")
    store = zv.open_store(str(path))
    num_objects = int(ids.max()) + 1
    prev_pos, prev_ids = pos, ids
    for k in range(1, levels):
        bin_k = base * 2**k
        bins = np.floor(prev_pos.astype(np.float64) / bin_k).astype(np.int64)
        keys = np.column_stack([prev_ids, bins])
        uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
        inverse = inverse.ravel()
        cen = np.zeros((len(uniq), 3))
        np.add.at(cen, inverse, prev_pos.astype(np.float64))
        cen = (cen / np.bincount(inverse)[:, None]).astype(np.float32)
        cids = uniq[:, 0]
        tmp = path.parent / f"{path.name}.tmp{k}"
        zv.write_points(str(tmp), cen, chunk_shape=cs, object_ids=cids, bounds=[[0, 0, 0], [200, 200, 200]],
                        compressor="zstd")
        shutil.move(str(tmp / "0"), str(path / str(k)))
        shutil.rmtree(tmp)
        store.root.datasets.append(RootMetadata.level_transform(k, (bin_k,) * 3, (base,) * 3))
        lvl = store.level(k)
        lvl.number = k
        lvl.meta.level = k
        lvl.meta.parent_level = k - 1
        lvl.meta.coarsening_method = "per_object"
        lvl.meta.preserves_object_ids = True
        lvl.meta.inherited_num_objects = num_objects
        lvl.write_metadata()
        fine_c, fine_r = _placement(prev_pos, prev_ids, cs)
        coarse_c, coarse_r = _placement(cen, cids, cs)
        up_c = np.stack([fine_c, coarse_c[inverse]], axis=1)
        up_r = np.stack([fine_r, coarse_r[inverse]], axis=1)
        write_links(store.level(k - 1), 1, up_c, up_r, directed=True)
        write_links(store.level(k), -1, up_c[:, ::-1], up_r[:, ::-1], directed=True)
        prev_pos, prev_ids = cen, cids
    store.root.cross_level_storage = "explicit"
    store.root.cross_level_depth = 1
    store.root.format_capabilities = ["preserved_object_ids", "multiscale_links"]
    store.write_root()


def _fragment_attributes(path: Path) -> None:
    """The point store plus a fragment attribute (one int32 per bin fragment), via the grid-array API."""
    from zarr_vectors.conformance.fixtures import add_fragment_attribute

    _points(path, ids=False)
    add_fragment_attribute(path)


def _points_sharded(path: Path) -> None:
    _points(path, ids=False)
    zv.shard_store(str(path), 2)


def _points_pyramid(path: Path) -> None:
    """The point store with ids, and a level built by build_pyramid carrying its attributes (D22)."""
    _points(path, ids=True)
    zv.build_pyramid(str(path), factors=[2], aggregate={"intensity": "max"})


def _pyramid_consolidated(path: Path) -> None:
    _pyramid(path)
    zv.consolidate_store(str(path))


BUILDERS: dict[str, Callable[[Path], None]] = {
    "pyramid": _pyramid,
    "pyramid_consolidated": _pyramid_consolidated,
    "points_pyramid": _points_pyramid,
    "points_fattr": _fragment_attributes,
    "points": lambda p: _points(p, ids=False),
    "points_ids": lambda p: _points(p, ids=True),
    "points_raw": lambda p: _points(p, ids=False, bins=False, compressor="none"),
    "points_sharded": _points_sharded,
    "graph": lambda p: _graph(p),
    "graph_directed_duplicate": lambda p: _graph(p, directed=True, store="duplicate"),
}


@pytest.fixture(scope="session")
def base_stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("valid")
    out = {}
    for name, build in BUILDERS.items():
        path = root / f"{name}.zv"
        build(path)
        out[name] = path
    return out


@pytest.fixture
def copy_store(base_stores: dict[str, Path], tmp_path: Path) -> Callable[[str], Path]:
    def copy(name: str) -> Path:
        dst = tmp_path / f"{name}.zv"
        shutil.copytree(base_stores[name], dst)
        return dst

    return copy


def assert_clean(path: Path, **kw: object) -> None:
    result = validate(str(path), 5, **kw)
    assert result.errors == [], result.summary()
    assert result.warnings == [], result.summary()
