"""``zv build`` for every kind, in-process on the session LocalCluster: what is read back is the input."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from pipeline_helpers import (
    edge_set,
    graph_frames,
    input_rows_of,
    journal,
    mesh_frames,
    points_frame,
    polyline_frame,
    rows,
    skeleton_frame,
    write_parquet_parts,
)

import zarr_vectors as zv
from zarr_vectors.validation import validate

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")


def assert_points_read_back(store, df: pd.DataFrame, *, attrs=("intensity", "label"), ids: bool = False):
    data = zv.read(str(store))
    assert data.kind == "point_cloud"
    assert len(data) == len(df)
    pos = df[["x", "y", "z"]].to_numpy()
    assert data.positions.dtype == pos.dtype
    assert sorted(data.attributes) == sorted(attrs)
    cols_in = [pos] + [df[a].to_numpy() for a in attrs] + ([df["object_id"].to_numpy()] if ids else [])
    cols_out = [data.positions] + [data.attributes[a] for a in attrs] + ([data.object_ids] if ids else [])
    assert rows(*cols_out) == rows(*cols_in)
    for a in attrs:
        assert data.attributes[a].dtype == df[a].dtype
    if not ids:
        assert data.object_ids is None
    return data


# ---------------------------------------------------------------------------
# points
# ---------------------------------------------------------------------------
def test_points_from_parquet(tmp_path, cli, scheduler):
    df = points_frame(4000, objects=25, float32=True)
    src = write_parquet_parts(df, tmp_path / "in.parquet", parts=3)
    out = tmp_path / "pts.zv"
    run = cli("build", "points", src, out, "--chunk-shape", "25", "--bin-shape", "12.5",
             "--scheduler-address", scheduler, "--validate", "5")
    assert run.rc == 0, run.err
    assert f"store: {out}" in run.out
    journal_line = next(line for line in run.out.splitlines() if line.startswith("(journal)"))
    assert re.match(r"\(journal\)\s+0 GET, [1-9]\d* PUT,", journal_line), journal_line  # the job's saves, apart
    assert_points_read_back(out, df, ids=True)
    root = zv.open_store(str(out)).root
    assert list(root.chunk_shape) == [25.0, 25.0, 25.0]
    assert list(root.base_bin_shape) == [12.5, 12.5, 12.5]
    assert validate(str(out), 5).ok
    state = journal(out)
    assert state["status"] == "done"
    assert [s for s in state["stages"]] == ["write", "validate"]
    assert state["stages"]["write"]["num_vertices"] == 4000 and state["stages"]["write"]["num_objects"] == 25


def test_points_from_csv_and_several_files(tmp_path, cli, scheduler):
    df = points_frame(3000, seed=8)
    parts = [df.iloc[:1000], df.iloc[1000:2200], df.iloc[2200:]]
    paths = []
    for i, part in enumerate(parts):
        paths.append(tmp_path / f"pts-{i}.csv")
        part.to_csv(paths[-1], index=False)
    out = tmp_path / "pts.zv"
    run = cli("build", "points", *paths, out, "--chunk-shape", "30,30,50", "--scheduler-address", scheduler)
    assert run.rc == 0, run.err
    expected = pd.concat([pd.read_csv(p) for p in paths], ignore_index=True)  # what the text holds
    assert expected["intensity"].dtype == np.float64 and len(expected) == 3000
    assert_points_read_back(out, expected)
    assert list(zv.open_store(str(out)).root.chunk_shape) == [30.0, 30.0, 50.0]


def test_points_from_npz(tmp_path, cli, scheduler):
    df = points_frame(2500, seed=9)
    src = tmp_path / "pts.npz"
    np.savez(src, positions=df[["x", "y", "z"]].to_numpy(), intensity=df["intensity"].to_numpy(),
             label=df["label"].to_numpy())
    out = tmp_path / "pts.zv"
    run = cli("build", "points", src, out, "--chunk-shape", "40", "--scheduler-address", scheduler)
    assert run.rc == 0, run.err
    assert_points_read_back(out, df)


def test_embedded_default_cluster(tmp_path, cli):
    """No scheduler given: an embedded LocalCluster (one worker here) runs the job and stops with it."""
    df = points_frame(1500, seed=10, float32=True)
    src = tmp_path / "pts.parquet"
    df.to_parquet(src, index=False)
    out = tmp_path / "pts.zv"
    run = cli("build", "points", src, out, "--chunk-shape", "50", "--workers", "1", "--memory-limit", "1GiB",
             "--json")
    assert run.rc == 0, run.err
    summary = run.json()
    assert summary["ok"] is True and summary["stages"]["write"]["num_vertices"] == 1500
    assert_points_read_back(out, df)


# ---------------------------------------------------------------------------
# linked kinds
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("directed", [False, True])
def test_graph_parquet_vertices_csv_edges(tmp_path, cli, scheduler, directed):
    g = graph_frames()
    vsrc = write_parquet_parts(g.vertices, tmp_path / "vertices.parquet", parts=3)
    esrc = tmp_path / "edges.csv"
    g.edges.to_csv(esrc, index=False)
    edges_in = pd.read_csv(esrc)  # what the text holds (weights round-trip through CSV text)
    out = tmp_path / "graph.zv"
    run = cli("build", "graph", vsrc, esrc, out, "--chunk-shape", "35", "--scheduler-address", scheduler,
              *(["--directed"] if directed else []), "--validate", "5", "--json")
    assert run.rc == 0, run.err
    summary = run.json()
    assert summary["stages"]["write"]["num_links"] == len(g.edges)
    data = zv.read(str(out))
    assert data.kind == "graph" and len(data) == len(g.vertices)
    vpos = g.vertices[["x", "y", "z"]].to_numpy()
    back = input_rows_of(data.positions, vpos)  # read vertex -> input row
    assert sorted(back.tolist()) == list(range(len(g.vertices)))  # every vertex once
    ids = g.vertices["id"].to_numpy()
    np.testing.assert_array_equal(data.attributes["mass"], g.vertices["mass"].to_numpy()[back])
    assert sorted(data.attributes) == ["id", "mass"]
    np.testing.assert_array_equal(data.attributes["id"], ids[back])  # input ids kept: results map back
    # edges, as input vertex ids, each with its weight
    got = np.stack([ids[back[data.edges[:, 0]]], ids[back[data.edges[:, 1]]]], axis=1)
    weights = data.edge_attributes["weight"]
    assert len(got) == len(edges_in) == len(weights)
    want = edges_in[["src", "dst"]].to_numpy()
    if not directed:
        got, want = np.sort(got, axis=1), np.sort(want, axis=1)
    assert rows(got, weights) == rows(want, edges_in["weight"].to_numpy())
    assert edge_set(got, directed=directed) == edge_set(want, directed=directed)


def test_mesh_vertices_and_faces(tmp_path, cli, scheduler):
    m = mesh_frames()
    vsrc, fsrc = tmp_path / "v.parquet", tmp_path / "f.csv"
    m.vertices.to_parquet(vsrc, index=False)
    m.faces.to_csv(fsrc, index=False)
    out = tmp_path / "mesh.zv"
    run = cli("build", "mesh", vsrc, fsrc, out, "--chunk-shape", "30", "--scheduler-address", scheduler,
              "--validate", "5")
    assert run.rc == 0, run.err
    data = zv.read(str(out))
    assert data.kind == "mesh" and len(data) == len(m.vertices)
    back = input_rows_of(data.positions, m.vertices[["x", "y", "z"]].to_numpy())
    ids = m.vertices["id"].to_numpy()
    got = ids[back[data.faces]]
    want = m.faces[["a", "b", "c"]].to_numpy()
    assert got.shape == want.shape

    def canonical(faces):  # same triangle, same winding: rotate the smallest id first
        k = np.argmin(faces, axis=1)
        return sorted(tuple(np.roll(f, -i).tolist()) for f, i in zip(faces, k))

    assert canonical(got) == canonical(want)


@pytest.mark.parametrize("kind", ["polylines", "streamlines"])
def test_polylines_from_shuffled_rows(tmp_path, cli, scheduler, kind):
    df = polyline_frame()
    src = tmp_path / "lines.csv"
    df.to_csv(src, index=False)
    df = pd.read_csv(src)
    out = tmp_path / "lines.zv"
    run = cli("build", kind, src, out, "--chunk-shape", "25", "--scheduler-address", scheduler, "--validate", "5")
    assert run.rc == 0, run.err
    data = zv.read(str(out))
    assert data.kind == kind[:-1]
    line_ids = np.sort(df["line"].unique())
    assert len(data.offsets) == len(line_ids) + 1 and data.offsets[-1] == len(df)
    for p, line in enumerate(line_ids):  # polyline p is the p-th line id, vertices in ``order``
        want = df[df["line"] == line].sort_values("order")
        got = slice(data.offsets[p], data.offsets[p + 1])
        np.testing.assert_array_equal(data.positions[got], want[["x", "y", "z"]].to_numpy())
        np.testing.assert_array_equal(data.attributes["speed"][got], want["speed"].to_numpy())
    assert sorted(data.attributes) == ["speed"]


@pytest.mark.parametrize("objects", [False, True])
def test_skeleton_id_parent(tmp_path, cli, scheduler, objects):
    df = skeleton_frame()
    if objects:  # object ids travel with the structure (id, parent), not with the lazy columns
        df["object_id"] = df["id"] % 3
    srcs = [tmp_path / "nodes-0.csv", tmp_path / "nodes-1.csv"]  # two files: the row index repeats
    df.iloc[:250].to_csv(srcs[0], index=False)
    df.iloc[250:].to_csv(srcs[1], index=False)
    df = pd.concat([pd.read_csv(p) for p in srcs], ignore_index=True)
    out = tmp_path / "skel.zv"
    run = cli("build", "skeleton", *srcs, out, "--chunk-shape", "15", "--scheduler-address", scheduler,
              "--validate", "5")
    assert run.rc == 0, run.err
    data = zv.read(str(out))
    assert data.kind == "skeleton" and len(data) == len(df)
    back = input_rows_of(data.positions, df[["x", "y", "z"]].to_numpy())
    ids = df["id"].to_numpy()
    np.testing.assert_array_equal(data.attributes["radius"], df["radius"].to_numpy()[back])
    assert sorted(data.attributes) == ["id", "radius"]
    np.testing.assert_array_equal(data.attributes["id"], ids[back])  # input ids kept: results map back
    if objects:
        np.testing.assert_array_equal(data.object_ids, df["object_id"].to_numpy()[back])
    got = edge_set(ids[back[data.edges]], directed=True)  # [child, parent]
    has_parent = df["parent"].to_numpy() >= 0
    want = edge_set(np.stack([ids[has_parent], df["parent"].to_numpy()[has_parent]], 1), directed=True)
    assert got == want
