"""VectorData.to_xarray: every part of a read result, labelled, and shared rather than copied."""

from __future__ import annotations

import numpy as np

import zarr_vectors as zv

RNG = np.random.default_rng(21)
POS = RNG.uniform(0, 100, (400, 3)).astype(np.float32)


def test_graph_with_objects_and_clashing_names():
    url = "memory://to-xarray/graph.zv"
    edges = RNG.integers(0, len(POS), (700, 2))
    zv.write_graph(url, POS, edges, chunk_shape=40, object_ids=np.arange(len(POS)) % 4,
                   attributes={"mass": RNG.random(len(POS)).astype(np.float32),
                               "rgb": RNG.random((len(POS), 3)).astype(np.float32)},
                   edge_attributes={"mass": RNG.random(len(edges)).astype(np.float32)},
                   object_attributes={"size": np.arange(4, dtype=np.float32)})
    data = zv.read(url)
    ds = data.to_xarray()
    assert ds.attrs["kind"] == "graph"
    assert ds["positions"].dims == ("vertex", "axis") and list(ds["axis"].values) == ["x", "y", "z"]
    assert np.shares_memory(ds["positions"].values, data.positions)
    np.testing.assert_array_equal(ds["positions"].sel(axis="y").values, data.positions[:, 1])
    np.testing.assert_array_equal(ds["object_id"].values, data.object_ids)
    assert ds["rgb"].dims == ("vertex", "rgb_component")
    np.testing.assert_array_equal(ds["mass"].values, data.attributes["mass"])
    np.testing.assert_array_equal(ds["edge_mass"].values, data.edge_attributes["mass"])  # the name was taken
    assert ds["edges"].dims == ("edge", "end") and ds.sizes["edge"] == len(data.edges)
    np.testing.assert_array_equal(ds["size"].values, data.object_attributes["size"])
    np.testing.assert_array_equal(ds["object"].values, data.objects)
    means = ds["mass"].groupby("object_id").mean()
    np.testing.assert_allclose(means.values, [data.attributes["mass"][data.object_ids == k].mean() for k in range(4)],
                               rtol=1e-6)


def test_mesh_points_and_polylines():
    zv.write_mesh("memory://to-xarray/mesh.zv", POS[:30], np.array([[0, 1, 2], [2, 3, 4], [5, 6, 7]]), chunk_shape=50)
    mesh = zv.read("memory://to-xarray/mesh.zv").to_xarray()
    assert mesh["faces"].dims == ("face", "corner") and mesh.sizes["face"] == 3

    zv.write_points("memory://to-xarray/points.zv", POS, chunk_shape=50)
    points = zv.read("memory://to-xarray/points.zv").to_xarray()
    assert set(points.data_vars) == {"positions"} and "object_id" not in points.coords

    zv.write_polylines("memory://to-xarray/lines.zv", POS[:60], np.array([0, 20, 45, 60]), chunk_shape=40)
    lines = zv.read("memory://to-xarray/lines.zv").to_xarray()
    assert list(lines["offsets"].values) == [0, 20, 45, 60]
    assert lines.attrs["kind"] == "polyline"
