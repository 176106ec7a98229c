"""Helpers for the ``zv`` pipeline tests: input tables on disk, store snapshots, multisets.

Every table here is small enough to check exactly: the tests compare what
``zarr_vectors.read`` gives back with the rows written here, as multisets (a store
keeps its own row order, D18).  Imported by name from worker processes too (the
test folder is on ``sys.path`` before the session cluster spawns its workers), so
it imports nothing from ``conftest``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd


@dataclass
class Run:
    rc: int
    out: str
    err: str

    def json(self) -> dict:
        lines = [line for line in self.out.splitlines() if line.strip()]
        assert len(lines) == 1, f"expected one JSON line on stdout, got {self.out!r}"
        return json.loads(lines[0])


# ---------------------------------------------------------------------------
# store snapshots
# ---------------------------------------------------------------------------
def rows(*columns: np.ndarray) -> list[tuple]:
    """Columns (1-D or 2-D) side by side as a sorted list of row tuples: a multiset."""
    parts = [np.asarray(c, dtype=np.float64).reshape(len(c), -1) for c in columns]
    return sorted(map(tuple, np.concatenate(parts, axis=1).tolist()))


def sorted_rows(*columns: np.ndarray) -> np.ndarray:
    """Like :func:`rows` for large inputs: the rows as one float64 array, sorted lexicographically."""
    table = np.concatenate([np.asarray(c, dtype=np.float64).reshape(len(c), -1) for c in columns], axis=1)
    return table[np.lexsort(table.T[::-1])]


def wait_for(predicate: Callable[[], object], timeout: float, interval: float = 0.05, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def journal(store: Path | str) -> dict:
    return json.loads(Path(str(store) + ".zvjob.json").read_text())


# ---------------------------------------------------------------------------
# input tables
# ---------------------------------------------------------------------------
def points_frame(n: int = 3000, seed: int = 7, *, objects: int = 0, float32: bool = False) -> pd.DataFrame:
    """Unique random positions in [0, 100)^3, an ``intensity`` and an integer ``label`` column."""
    rng = np.random.default_rng(seed)
    dtype = np.float32 if float32 else np.float64
    pos = rng.uniform(0, 100, (n, 3)).astype(dtype)
    df = pd.DataFrame({"x": pos[:, 0], "y": pos[:, 1], "z": pos[:, 2]})
    df["intensity"] = rng.random(n).astype(np.float32)
    df["label"] = rng.integers(-50, 50, n).astype(np.int32)
    if objects:
        df["object_id"] = rng.integers(0, objects, n).astype(np.int64)
    return df


def write_parquet_parts(df: pd.DataFrame, directory: Path, parts: int) -> Path:
    """``df`` as a directory of ``parts`` Parquet files (one dask partition each)."""
    directory.mkdir(parents=True)
    for i, part in enumerate(np.array_split(np.arange(len(df)), parts)):
        df.iloc[part].to_parquet(directory / f"part-{i:03d}.parquet", index=False)
    return directory


@dataclass
class GraphTables:
    vertices: pd.DataFrame  # id, x, y, z, mass
    edges: pd.DataFrame  # src, dst, weight (ids)


def graph_frames(n: int = 800, m: int = 2400, seed: int = 3) -> GraphTables:
    """Vertex ids non-contiguous (random, unique, shuffled) and edges naming them, with a weight."""
    rng = np.random.default_rng(seed)
    ids = rng.choice(np.arange(10_000, 10_000_000, dtype=np.int64), n, replace=False)
    pos = rng.uniform(0, 100, (n, 3))
    vertices = pd.DataFrame({"id": ids, "x": pos[:, 0], "y": pos[:, 1], "z": pos[:, 2], "mass": rng.random(n)})
    src = rng.integers(0, n, m)
    dst = (src + rng.integers(1, n, m)) % n  # no self loops
    pairs = np.unique(np.stack([np.minimum(src, dst), np.maximum(src, dst)], 1), axis=0)
    flip = rng.random(len(pairs)) < 0.5
    pairs[flip] = pairs[flip][:, ::-1]  # endpoints in both orders
    pairs = pairs[rng.permutation(len(pairs))]
    edges = pd.DataFrame({"src": ids[pairs[:, 0]], "dst": ids[pairs[:, 1]], "weight": rng.random(len(pairs))})
    return GraphTables(vertices, edges)


@dataclass
class MeshTables:
    vertices: pd.DataFrame  # id, x, y, z
    faces: pd.DataFrame  # a, b, c (ids)


def mesh_frames(side: int = 18, seed: int = 5) -> MeshTables:
    """A triangulated height field on a side x side lattice, vertex ids offset and shuffled."""
    rng = np.random.default_rng(seed)
    gx, gy = np.meshgrid(np.arange(side), np.arange(side), indexing="ij")
    n = side * side
    pos = np.stack([gx.ravel() * 5.0, gy.ravel() * 5.0, rng.uniform(0, 40, n)], axis=1)
    ids = np.arange(n, dtype=np.int64) * 7 + 1000
    lattice = np.arange(n).reshape(side, side)
    a, b = lattice[:-1, :-1].ravel(), lattice[1:, :-1].ravel()
    c, d = lattice[1:, 1:].ravel(), lattice[:-1, 1:].ravel()
    tri = np.concatenate([np.stack([a, b, c], 1), np.stack([a, c, d], 1)])
    tri = tri[rng.permutation(len(tri))]
    perm = rng.permutation(n)
    vertices = pd.DataFrame({"id": ids[perm], "x": pos[perm, 0], "y": pos[perm, 1], "z": pos[perm, 2]})
    faces = pd.DataFrame({"a": ids[tri[:, 0]], "b": ids[tri[:, 1]], "c": ids[tri[:, 2]]})
    return MeshTables(vertices, faces)


def polyline_frame(lines: int = 30, seed: int = 11) -> pd.DataFrame:
    """Random walks with line ids (non-contiguous) and order values (non-contiguous), rows shuffled."""
    rng = np.random.default_rng(seed)
    frames = []
    line_ids = rng.choice(np.arange(100, 100_000), lines, replace=False)
    for line in line_ids:
        k = int(rng.integers(2, 60))
        steps = rng.normal(0, 4, (k, 3))
        pos = rng.uniform(10, 90, 3) + np.cumsum(steps, axis=0)
        order = np.sort(rng.choice(np.arange(10 * k), k, replace=False))
        frames.append(pd.DataFrame({"line": line, "order": order, "x": pos[:, 0], "y": pos[:, 1], "z": pos[:, 2],
                                    "speed": rng.random(k).astype(np.float32)}))
    df = pd.concat(frames, ignore_index=True)
    return df.iloc[rng.permutation(len(df))].reset_index(drop=True)


def skeleton_frame(n: int = 600, roots: int = 3, seed: int = 13) -> pd.DataFrame:
    """A forest: node ids non-contiguous, each non-root's parent an earlier node of its tree; rows shuffled."""
    rng = np.random.default_rng(seed)
    ids = rng.choice(np.arange(1, 1_000_000), n, replace=False)
    parent_idx = np.full(n, -1)
    pos = np.zeros((n, 3))
    for i in range(n):
        if i < roots:
            pos[i] = rng.uniform(20, 80, 3)
        else:
            parent_idx[i] = int(rng.integers(max(0, i - 20), i)) if i >= roots else -1
            pos[i] = pos[parent_idx[i]] + rng.normal(0, 2.5, 3)
    parent = np.where(parent_idx >= 0, ids[np.maximum(parent_idx, 0)], -1)
    df = pd.DataFrame({"id": ids, "parent": parent, "x": pos[:, 0], "y": pos[:, 1], "z": pos[:, 2],
                       "radius": rng.random(n)})
    return df.iloc[rng.permutation(n)].reset_index(drop=True)


def position_index(positions: np.ndarray) -> dict[tuple, int]:
    """Row of each (unique) position, for mapping read-back vertices to input rows."""
    index = {tuple(p): i for i, p in enumerate(np.asarray(positions).tolist())}
    assert len(index) == len(positions), "test inputs must have unique positions"
    return index


def input_rows_of(read_positions: np.ndarray, input_positions: np.ndarray) -> np.ndarray:
    """For each read-back vertex, the input row with the same position."""
    index = position_index(input_positions)
    return np.asarray([index[tuple(p)] for p in np.asarray(read_positions).tolist()], dtype=np.int64)


def edge_set(pairs: Sequence[Sequence[int]], *, directed: bool) -> list[tuple]:
    pairs = np.asarray(pairs).reshape(-1, 2)
    if not directed:
        pairs = np.sort(pairs, axis=1)
    return sorted(map(tuple, pairs.tolist()))


# ---------------------------------------------------------------------------
# run on workers (``client.run``): importable there by this module's name
# ---------------------------------------------------------------------------
def endpoint_env() -> str | None:
    """The calling process's AWS_ENDPOINT_URL (``os.environ.get`` itself would pickle the caller's environ)."""
    return os.environ.get("AWS_ENDPOINT_URL")


def flaky_filesystem_class():
    """A local filesystem under the ``flaky://`` protocol whose first write of a matching key fails.

    Built on first use (fsspec is imported lazily).  "First" is across every process:
    the failure claims a marker file with ``O_EXCL``, so exactly one write in the whole
    cluster raises, and the retry (another try of the same task, maybe on another
    worker) succeeds.  Options: ``fail_dir`` (where the marker goes) and ``fail_on``
    (a substring of the path to fail on).  ``hold_on``: the first write of a matching
    path (across the cluster, claimed the same way, marker ``held``: "pid path") waits
    until a file ``release`` appears in ``fail_dir`` (at most two minutes), so a test can
    kill that worker or cancel that task while it runs.
    """
    global _FLAKY
    if _FLAKY is None:
        from fsspec.implementations.local import LocalFileSystem

        class FlakyLocalFileSystem(LocalFileSystem):
            protocol = ("flaky",)

            def __init__(self, fail_dir: str = "", fail_on: str = "", hold_on: str = "", **kwargs):
                kwargs.setdefault("auto_mkdir", True)  # like an object store: no directories to make
                super().__init__(**kwargs)
                self.fail_dir, self.fail_on, self.hold_on = fail_dir, fail_on, hold_on

            def _claim(self, name: str, path: str) -> bool:
                try:
                    fd = os.open(os.path.join(self.fail_dir, name), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                except FileExistsError:
                    return False
                os.write(fd, f"{os.getpid()} {path}".encode())
                os.close(fd)
                return True

            def pipe_file(self, path, value, mode="overwrite", **kwargs):
                if self.hold_on and self.hold_on in path and self._claim("held", path):
                    deadline = time.monotonic() + 120
                    while not os.path.exists(os.path.join(self.fail_dir, "release")) and time.monotonic() < deadline:
                        time.sleep(0.05)
                if self.fail_on and self.fail_on in path and self._claim("failed-once", path):
                    raise OSError(f"injected fault: write of {path} failed")
                return super().pipe_file(path, value, mode=mode, **kwargs)

        _FLAKY = FlakyLocalFileSystem
    return _FLAKY


_FLAKY = None


def register_flaky() -> str:
    """Register ``flaky://`` in this process (run it on the workers with ``client.run``)."""
    import fsspec

    fsspec.register_implementation("flaky", flaky_filesystem_class(), clobber=True)
    return "flaky"
