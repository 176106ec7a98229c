"""``zv export`` and ``zv build`` from the formats: files the libraries write -> store -> export -> the library reads
the same data; exporting a store and building it again gives the same store (read results and array bytes)."""

from __future__ import annotations

import dask
import laspy
import networkx as nx
import numpy as np
import pandas as pd
import pytest

import zarr_vectors as zv


@pytest.fixture(autouse=True)
def in_process():
    """Tiny inputs: dask's threads in this process, no cluster (the CLI honours dask.config's scheduler)."""
    with dask.config.set(scheduler="threads"):
        yield


def _points(n=300, seed=2):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"x": rng.uniform(0, 100, n), "y": rng.uniform(0, 100, n), "z": rng.uniform(0, 100, n),
                         "object_id": rng.integers(0, 5, n), "mass": rng.random(n), "label": rng.integers(0, 9, n)})


def _arrays(store) -> dict[str, bytes]:
    """Every file of a store but the job journal beside it, by path."""
    return {str(p.relative_to(store)): p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file()}


def _same_read(a, b):
    assert a.kind == b.kind
    np.testing.assert_array_equal(a.positions, b.positions)
    assert sorted(a.attributes) == sorted(b.attributes)
    for k in a.attributes:
        np.testing.assert_array_equal(a.attributes[k], b.attributes[k])
        assert a.attributes[k].dtype == b.attributes[k].dtype
    for name in ("object_ids", "edges", "faces", "offsets"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            np.testing.assert_array_equal(x, y)
    for k in a.edge_attributes:
        np.testing.assert_array_equal(a.edge_attributes[k], b.edge_attributes[k])


def _rebuild_is_identical(cli, tmp_path, kind, store, out_name, *inputs_of_export):
    run = cli("export", store, tmp_path / out_name)
    assert run.rc == 0, run.err
    again = tmp_path / f"again-{out_name}" / store.name  # the same name: the root's multiscales name is the store's
    run = cli("build", kind, *[tmp_path / n for n in (inputs_of_export or (out_name,))], again, "--chunk-shape", "25")
    assert run.rc == 0, run.err
    _same_read(zv.read(str(store)), zv.read(str(again)))
    assert _arrays(store) == _arrays(again)


@pytest.mark.parametrize("name", ["p.parquet", "p.csv", "p.npz"])
def test_points_table_export_builds_the_same_store(tmp_path, cli, name):
    df = _points()
    df.to_parquet(tmp_path / "in.parquet", index=False)
    store = tmp_path / "pts.zv"
    assert cli("build", "points", tmp_path / "in.parquet", store, "--chunk-shape", "25").rc == 0
    _rebuild_is_identical(cli, tmp_path, "points", store, name)
    if name.endswith(".parquet"):  # and the library reads what the store holds
        back = pd.read_parquet(tmp_path / name)
        assert len(back) == len(df) and set(back.columns) == set(df.columns)
        key = ["x", "y", "z"]
        pd.testing.assert_frame_equal(back.sort_values(key).reset_index(drop=True)[list(df.columns)],
                                      df.sort_values(key).reset_index(drop=True))


def test_laz_written_by_laspy_builds_exports_and_rebuilds(tmp_path, cli):
    rng = np.random.default_rng(7)
    n = 250
    header = laspy.LasHeader(point_format=1, version="1.2")
    header.scales, header.offsets = [0.001] * 3, [0.0, 0.0, 0.0]
    header.add_extra_dims([laspy.ExtraBytesParams("amplitude", np.float32)])
    las = laspy.LasData(header)
    las.x, las.y, las.z = rng.uniform(0, 100, n), rng.uniform(0, 100, n), rng.uniform(0, 100, n)
    las.intensity, las.classification = rng.integers(0, 999, n), rng.integers(0, 9, n)
    las.gps_time, las.amplitude = rng.random(n), rng.random(n).astype(np.float32)
    las.write(str(tmp_path / "in.laz"))
    store = tmp_path / "cloud.zv"
    with dask.config.set({"zarr_vectors.sources.las-chunk-points": 64}):  # four point ranges
        run = cli("build", "points", tmp_path / "in.laz", store, "--chunk-shape", "25")
    assert run.rc == 0, run.err
    data = zv.read(str(store))
    order = np.lexsort(data.positions.T)
    truth = laspy.read(str(tmp_path / "in.laz"))
    t_order = np.lexsort(np.stack([truth.x, truth.y, truth.z]))
    np.testing.assert_array_equal(data.attributes["amplitude"][order], np.asarray(truth.amplitude)[t_order])
    np.testing.assert_array_equal(data.attributes["gps_time"][order], np.asarray(truth.gps_time)[t_order])
    _rebuild_is_identical(cli, tmp_path, "points", store, "out.laz")
    back = laspy.read(str(tmp_path / "out.laz"))
    np.testing.assert_array_equal(np.asarray(back.X)[np.lexsort(np.stack([back.x, back.y, back.z]))],
                                  np.asarray(truth.X)[t_order])


@pytest.mark.slow  # four builds and three exports: 9 s on a loaded 2-core machine
def test_graph_exports_build_the_same_store(tmp_path, cli):
    rng = np.random.default_rng(3)
    ids = rng.choice(np.arange(100, 10_000), 60, replace=False)
    vertices = pd.DataFrame({"id": ids, "x": rng.uniform(0, 100, 60), "y": rng.uniform(0, 100, 60),
                             "z": rng.uniform(0, 100, 60), "mass": rng.random(60), "name": ["v"] * 60})
    pairs = np.unique(np.sort(rng.integers(0, 60, (150, 2)), axis=1), axis=0)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    edges = pd.DataFrame({"src": ids[pairs[:, 0]], "dst": ids[pairs[:, 1]], "weight": rng.random(len(pairs))})
    vertices.to_csv(tmp_path / "v.csv", index=False)
    edges.to_parquet(tmp_path / "e.parquet", index=False)
    store = tmp_path / "g.zv"
    run = cli("build", "graph", tmp_path / "v.csv", tmp_path / "e.parquet", store, "--chunk-shape", "25", "--json")
    assert run.rc == 0, run.err
    assert "'name' (" in run.err and "cannot be stored" in run.err  # named, not dropped silently
    text = cli("build", "graph", tmp_path / "v.csv", tmp_path / "e.parquet", tmp_path / "t.zv", "--chunk-shape", "25")
    assert text.rc == 0 and text.err.splitlines()[0].startswith("running on ")  # where first, then the warning
    assert "cannot be stored" in text.err.splitlines()[1], text.err
    data = zv.read(str(store))
    assert sorted(data.attributes) == ["id", "mass"]  # input ids kept: results map back to input rows
    assert {tuple(p) for p in np.sort(data.attributes["id"][data.edges], axis=1)} == \
        {tuple(p) for p in np.sort(edges[["src", "dst"]].to_numpy(), axis=1)}
    _rebuild_is_identical(cli, tmp_path, "graph", store, "t.parquet", "t.parquet", "t.edges.parquet")
    run = cli("export", store, tmp_path / "g.graphml")
    assert run.rc == 0, run.err
    back = nx.read_graphml(tmp_path / "g.graphml", node_type=int)
    assert sorted(back.nodes) == sorted(ids.tolist())
    assert {frozenset(e) for e in back.edges} == {frozenset(e) for e in edges[["src", "dst"]].to_numpy().tolist()}
    again = tmp_path / "from-graphml.zv"
    assert cli("build", "graph", tmp_path / "g.graphml", again, "--chunk-shape", "25").rc == 0
    rebuilt = zv.read(str(again))
    assert sorted(rebuilt.attributes) == ["id", "mass"]
    back_ids = {tuple(p) for p in np.sort(rebuilt.attributes["id"][rebuilt.edges], axis=1)}
    assert back_ids == {tuple(p) for p in np.sort(data.attributes["id"][data.edges], axis=1)}


def test_export_filters_and_refusals(tmp_path, cli):
    df = _points()
    df.to_parquet(tmp_path / "in.parquet", index=False)
    store = tmp_path / "pts.zv"
    assert cli("build", "points", tmp_path / "in.parquet", store, "--chunk-shape", "25").rc == 0
    run = cli("export", store, tmp_path / "box.csv", "--bbox", "0,0,0,50,50,50", "--object-id", "1", "3")
    assert run.rc == 0, run.err
    part = pd.read_csv(tmp_path / "box.csv")
    want = df[(df[["x", "y", "z"]] <= 50).all(axis=1) & df["object_id"].isin([1, 3])]
    assert len(part) == len(want) > 0 and set(part["object_id"]) <= {1, 3}
    for argv, message in [
        (("export", store, tmp_path / "x.graphml"), "a graphml file holds graph; the store's kind is points"),
        (("export", store, tmp_path / "x.txt"), "unknown file format"),
        (("export", store, tmp_path / "x.csv", "--bbox", "1,2,3"), "--bbox expects 2 x D numbers"),
        (("export", store, tmp_path / "x.csv", "--bbox", "0,0,0,100"),  # corners of 2: the store is 3-D
         "bbox corners hold 2 numbers each, but the store's positions are 3-D"),
        (("export", store, tmp_path / "x.csv", "--bbox", "0,0,0,-1,1,1"), "a minimum exceeds its maximum"),
        (("export", store, tmp_path / "x.csv", "--level", "4"), "--level 4: the store has levels [0]"),
        (("export", store, tmp_path / "box.csv"), "exists; pass --overwrite"),
        (("export", tmp_path / "nothing.zv", tmp_path / "y.csv"), "zv export: error:"),
    ]:
        run = cli(*argv)
        assert run.rc == 2 and message in run.err and len(run.err.strip().splitlines()) == 1, (argv, run.err)


def test_build_refuses_unreadable_inputs_and_missing_columns_before_anything_runs(tmp_path, cli):
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 garbage")
    _points(20).to_csv(tmp_path / "p.csv", index=False)
    for argv, message in [
        (("build", "points", tmp_path / "bad.parquet", tmp_path / "o.zv"), "bad.parquet' cannot be read"),
        (("build", "points", tmp_path / "p.csv", tmp_path / "o.zv", "--position-columns", "x,q"), "['q']"),
        (("build", "points", tmp_path / "p.csv", tmp_path / "o.zv", "--columns", "mass,nope"), "['nope']"),
        (("build", "graph", tmp_path / "p.csv", tmp_path / "p.csv", tmp_path / "o.zv"), "['id']"),
        (("build", "mesh", tmp_path / "p.laz", tmp_path / "o.zv"), "a las file holds points, not mesh"),
    ]:
        if str(argv[2]).endswith(".laz"):
            (tmp_path / "p.laz").write_bytes(b"")
        run = cli(*argv)
        assert run.rc == 2 and message in run.err and len(run.err.strip().splitlines()) == 1, (argv, run.err)
        assert not (tmp_path / "o.zv").exists() and not (tmp_path / "o.zv.zvjob.json").exists()


def test_column_options_map_a_table(tmp_path, cli):
    df = _points(100).rename(columns={"x": "east", "y": "north", "z": "up", "object_id": "tree"})
    df.to_csv(tmp_path / "p.csv", index=False)
    store = tmp_path / "m.zv"
    run = cli("build", "points", tmp_path / "p.csv", store, "--chunk-shape", "25", "--position-columns",
              "east,north,up", "--object-id-column", "tree", "--columns", "mass")
    assert run.rc == 0, run.err
    data = zv.read(str(store))
    assert sorted(data.attributes) == ["mass"] and len(data) == 100
    assert sorted(data.object_ids.tolist()) == sorted(df["tree"].tolist())


def test_several_whole_files_are_several_objects_read_once(tmp_path, cli, monkeypatch):
    from pipeline import sources

    for i in range(2):
        g = nx.path_graph(4 + i)
        nx.set_node_attributes(g, {n: {"x": float(n) + 10 * i, "y": 1.0, "z": 2.0} for n in g.nodes})
        nx.write_graphml(g, tmp_path / f"g{i}.graphml")
    reads = []
    real = sources._read_whole
    monkeypatch.setattr(sources, "_read_whole", lambda path, *a: reads.append(path) or real(path, *a))
    store = tmp_path / "two.zv"
    run = cli("build", "graph", tmp_path / "g0.graphml", tmp_path / "g1.graphml", store, "--chunk-shape", "25")
    assert run.rc == 0, run.err
    data = zv.read(str(store))
    assert len(data) == 9 and len(data.edges) == 3 + 4
    assert sorted(data.object_ids.tolist()) == [0] * 4 + [1] * 5
    assert sorted(reads) == [str(tmp_path / "g0.graphml"), str(tmp_path / "g1.graphml")]  # once each: preflight's
    # read is the write stage's


@pytest.mark.slow  # workers import laspy and the package on first use (about 10 s on a loaded 2-core machine)
def test_a_laz_file_is_read_in_point_ranges_by_the_cluster_workers(tmp_path, local_cluster):
    from zarr_vectors.io import las as las_format

    rng = np.random.default_rng(11)
    header = laspy.LasHeader(point_format=6, version="1.4")
    header.scales, header.offsets = [0.01] * 3, [0.0] * 3
    las = laspy.LasData(header)
    n = 400
    las.x, las.y, las.z = rng.uniform(0, 60, n), rng.uniform(0, 60, n), rng.uniform(0, 60, n)
    las.intensity = rng.integers(0, 999, n)
    las.write(str(tmp_path / "c.laz"))
    with dask.config.set({"scheduler": None, "zarr_vectors.sources.las-chunk-points": 100}):
        frame = las_format.frame([str(tmp_path / "c.laz")])
        assert frame.npartitions == 4
        parts = local_cluster.compute(frame.to_delayed(), sync=True)  # each range read by a worker process
    truth = laspy.read(str(tmp_path / "c.laz"))
    assert [len(p) for p in parts] == [100] * 4
    got = pd.concat(parts)
    np.testing.assert_array_equal(got["x"].to_numpy(), np.asarray(truth.x))
    np.testing.assert_array_equal(got["intensity"].to_numpy(), np.asarray(truth.intensity))


def test_a_graph_from_a_vertex_table_and_an_edge_list(tmp_path, cli):
    pd.DataFrame({"id": [3, 8, 9, 12], "x": [1.0, 20.0, 40.0, 60.0], "y": [5.0, 5.0, 30.0, 30.0],
                  "z": [0.0, 1.0, 2.0, 3.0]}).to_csv(tmp_path / "v.csv", index=False)
    (tmp_path / "e.edgelist").write_text("# src dst weight\n3 8 0.5\n8 9 1.5\n9 12 2.5\n")
    run = cli("build", "graph", tmp_path / "v.csv", tmp_path / "e.edgelist", tmp_path / "g.zv", "--chunk-shape", "25")
    assert run.rc == 0, run.err
    data = zv.read(str(tmp_path / "g.zv"))
    ids = data.attributes["id"]
    got = {tuple(sorted(ids[e].tolist())): w for e, w in zip(data.edges, data.edge_attributes["weight"])}
    assert got == {(3, 8): 0.5, (8, 9): 1.5, (9, 12): 2.5}


@pytest.mark.parametrize("kind", ["mesh", "streamlines"])
def test_mesh_and_streamline_tables_export_builds_the_same_store(tmp_path, cli, kind):
    from pipeline_helpers import mesh_frames, polyline_frame

    if kind == "mesh":
        m = mesh_frames(6)
        m.vertices.to_parquet(tmp_path / "v.parquet", index=False)
        m.faces.to_parquet(tmp_path / "f.parquet", index=False)
        inputs, again = ("v.parquet", "f.parquet"), ("t.parquet", "t.faces.parquet")
    else:
        polyline_frame(lines=8).to_parquet(tmp_path / "l.parquet", index=False)
        inputs, again = ("l.parquet",), ("t.parquet",)
    store = tmp_path / f"{kind}.zv"
    assert cli("build", kind, *[tmp_path / n for n in inputs], store, "--chunk-shape", "25").rc == 0
    _rebuild_is_identical(cli, tmp_path, kind, store, "t.parquet", *again)


def test_export_names_what_a_format_cannot_hold_and_writes_a_point_cloud_as_ply(tmp_path, cli):
    """Object attributes were dropped without a word by GraphML and LAS, and a point-cloud store
    could not be exported to PLY at all (its kind is ``point_cloud``, the format's ``points``)."""
    import plyfile

    rng = np.random.default_rng(4)
    objects = {"label": np.arange(5, dtype=np.int32)}
    points, graph = tmp_path / "p.zv", tmp_path / "g.zv"
    zv.write_points(str(points), rng.uniform(0, 100, (200, 3)).astype(np.float32), chunk_shape=50.0,
                    bounds=[[0] * 3, [100] * 3], object_ids=np.repeat(np.arange(5), 40), object_attributes=objects)
    zv.write_graph(str(graph), rng.uniform(0, 100, (50, 3)).astype(np.float32), rng.integers(0, 50, (80, 2)),
                   chunk_shape=50.0, bounds=[[0] * 3, [100] * 3], object_ids=np.repeat(np.arange(5), 10),
                   object_attributes=objects)
    for store, out, what in ((graph, "g.graphml", "GraphML"), (points, "p.las", "LAS"), (points, "p.ply", "PLY")):
        run = cli("export", store, tmp_path / out)
        assert run.rc == 0, run.err
        assert f"zv export: warning: {tmp_path / out}: {what} cannot hold label" in run.err, run.err
    cloud = plyfile.PlyData.read(str(tmp_path / "p.ply"))
    assert [e.name for e in cloud.elements] == ["vertex"] and len(cloud["vertex"].data) == 200
    run = cli("export", points, tmp_path / "p.parquet")  # tables keep them, in a table of their own
    assert run.rc == 0 and "warning" not in run.err, run.err
    back = pd.read_parquet(tmp_path / "p.objects.parquet")
    assert back.to_dict("list") == {"object_id": [0, 1, 2, 3, 4], "label": [0, 1, 2, 3, 4]}


def test_overwrite_covers_the_files_beside_out_and_compressed_tables_keep_their_extension(tmp_path, cli):
    """``--overwrite`` used to look at OUT alone: an old export's ``OUT.objects.*`` was replaced
    without asking, or left behind to pass for the new one's; ``OUT.tsv.gz``'s companions were
    named ``OUT.tsv.objects.gz``; an empty box of a store with a 2-D attribute failed."""
    rng = np.random.default_rng(5)
    labelled, plain = tmp_path / "labelled.zv", tmp_path / "plain.zv"
    zv.write_points(str(labelled), rng.uniform(0, 100, (200, 3)).astype(np.float32), chunk_shape=50.0,
                    bounds=[[0] * 3, [100] * 3], object_ids=np.repeat(np.arange(5), 40),
                    object_attributes={"label": np.arange(5, dtype=np.int32)},
                    attributes={"normal": rng.standard_normal((200, 3)).astype(np.float32)})
    zv.write_points(str(plain), rng.uniform(0, 100, (50, 3)).astype(np.float32), chunk_shape=50.0,
                    bounds=[[0] * 3, [100] * 3])
    out = tmp_path / "t.tsv.gz"
    run = cli("export", labelled, out)
    assert run.rc == 0, run.err
    objects = tmp_path / "t.objects.tsv.gz"
    assert sorted(p.name for p in tmp_path.glob("t.*")) == ["t.objects.tsv.gz", "t.tsv.gz"]
    assert pd.read_csv(objects, sep="\t").to_dict("list") == {"object_id": [0, 1, 2, 3, 4], "label": [0, 1, 2, 3, 4]}
    assert pd.read_csv(out, sep="\t").shape == (200, 7)  # x y z object_id normal_0..2

    out.unlink()  # only the companion is left: still refused, and named
    run = cli("export", plain, out)
    assert run.rc == 2 and repr(str(objects)) in run.err and "--overwrite" in run.err, run.err
    run = cli("export", plain, out, "--overwrite")
    assert run.rc == 0, run.err
    assert not objects.exists()  # the old objects table no longer sits beside a table it does not describe
    assert len(pd.read_csv(out, sep="\t")) == 50

    edges = tmp_path / "g.edgelist"
    (tmp_path / "g.vertices.csv").write_text("someone else's table\n")
    graph = tmp_path / "g.zv"
    zv.write_graph(str(graph), rng.uniform(0, 100, (20, 3)).astype(np.float32), rng.integers(0, 20, (30, 2)),
                   chunk_shape=50.0, bounds=[[0] * 3, [100] * 3])
    run = cli("export", graph, edges)
    assert run.rc == 2 and "g.vertices.csv" in run.err, run.err
    assert (tmp_path / "g.vertices.csv").read_text() == "someone else's table\n" and not edges.exists()

    run = cli("export", labelled, tmp_path / "none.parquet", "--bbox", "200,200,200,300,300,300")
    assert run.rc == 0, run.err
    empty = pd.read_parquet(tmp_path / "none.parquet")
    assert len(empty) == 0 and list(empty.columns) == ["x", "y", "z", "object_id", "normal_0", "normal_1", "normal_2"]


@pytest.mark.timeout(60)
def test_export_says_a_writers_warnings_and_shows_the_others(tmp_path, cli, monkeypatch):
    """Regression (review): export showed a writer's non-UserWarning while still recording them, so
    it was recorded again and the loop over the record never ended (a FutureWarning hung the
    export); it is now shown once the recording stops, and the UserWarning is a line of ours."""
    import dataclasses
    import warnings

    from zarr_vectors.io import registry

    store = tmp_path / "p.zv"
    zv.write_points(str(store), np.random.default_rng(8).uniform(0, 100, (50, 3)), chunk_shape=50.0)
    fmt = registry.by_name("csv")

    def noisy(path, data, **options):
        warnings.warn("a library will change", FutureWarning, stacklevel=1)
        warnings.warn(f"{path}: CSV cannot hold something", UserWarning, stacklevel=1)
        return fmt.write(path, data, **options)

    monkeypatch.setattr(registry, "format_for", lambda path, kind=None: dataclasses.replace(fmt, write=noisy))
    with pytest.warns(FutureWarning) as shown:  # shown to Python's warning machinery: pytest records it here
        run = cli("export", store, tmp_path / "p.csv")
    assert run.rc == 0, run.err
    assert f"zv export: warning: {tmp_path / 'p.csv'}: CSV cannot hold something" in run.err
    assert [str(w.message) for w in shown if w.category is FutureWarning] == ["a library will change"]
    assert "a library will change" not in run.err  # not one of our lines


def test_a_failed_overwrite_keeps_the_old_export_and_odd_outputs_are_refused(tmp_path, cli):
    """``--overwrite`` once removed the old companions before a write that could still fail;
    a dangling link, a folder and ``.NPZ`` (which ``np.savez`` renamed ``.NPZ.npz``) slipped
    past the existence check."""
    rng = np.random.default_rng(6)
    good, clash = tmp_path / "good.zv", tmp_path / "clash.zv"
    pos = rng.uniform(0, 100, (20, 3)).astype(np.float32)
    edges = np.array([[i, (i + 1) % 20] for i in range(20)])
    zv.write_graph(str(good), pos, edges, chunk_shape=50.0, bounds=[[0] * 3, [100] * 3])
    zv.write_graph(str(clash), pos, edges, chunk_shape=50.0, bounds=[[0] * 3, [100] * 3],
                   edge_attributes={"src": np.arange(20, dtype=np.float32)})  # refused as a column: the write fails
    out = tmp_path / "c.csv"
    assert cli("export", good, out).rc == 0
    before = {p.name: p.read_bytes() for p in tmp_path.glob("c.*")}
    assert sorted(before) == ["c.csv", "c.edges.csv"]
    run = cli("export", clash, out, "--overwrite")
    assert run.rc == 2 and "'src'" in run.err, run.err
    assert {p.name: p.read_bytes() for p in tmp_path.glob("c.*")} == before  # the old export, whole
    assert not [p for p in tmp_path.iterdir() if "zv-export" in p.name]  # nothing left aside

    (tmp_path / "e.vertices.csv").symlink_to(tmp_path / "elsewhere.csv")  # dangling
    run = cli("export", good, tmp_path / "e.edgelist")
    assert run.rc == 2 and "e.vertices.csv" in run.err and not (tmp_path / "elsewhere.csv").exists(), run.err
    run = cli("export", good, tmp_path / "e.edgelist", "--overwrite")
    assert run.rc == 0 and not (tmp_path / "elsewhere.csv").exists(), run.err
    assert not (tmp_path / "e.vertices.csv").is_symlink() and len(pd.read_csv(tmp_path / "e.vertices.csv")) == 20

    (tmp_path / "f.edges.parquet").mkdir()
    run = cli("export", good, tmp_path / "f.parquet", "--overwrite")
    assert run.rc == 2 and "is a folder" in run.err and not (tmp_path / "f.parquet").exists(), run.err

    assert cli("export", good, tmp_path / "u.NPZ").rc == 0
    assert sorted(p.name for p in tmp_path.glob("u.*")) == ["u.NPZ", "u.edges.NPZ"]
    run = cli("export", good, tmp_path / "u.NPZ")
    assert run.rc == 2 and "--overwrite" in run.err, run.err


@pytest.mark.parametrize("directed", [True, False])
def test_graphml_export_keeps_every_edge_and_its_direction(tmp_path, cli, directed):
    """Regression (hunt): a directed graph of 4 edges (1->2 twice, 2->1, 2->3) was exported as an
    undirected GraphML of 2 edges while the command said "4 edges"."""
    pd.DataFrame({"id": [1, 2, 3], "x": [0.0, 1, 2], "y": [0.0, 1, 2], "z": [0.0, 1, 2]}).to_csv(tmp_path / "v.csv",
                                                                                           index=False)
    pd.DataFrame({"src": [1, 2, 2, 1], "dst": [2, 1, 3, 2], "w": [0.5, 0.7, 0.9, 0.1]}).to_csv(tmp_path / "e.csv",
                                                                                        index=False)
    store, out = tmp_path / "g.zv", tmp_path / "g.graphml"
    flags = ["--directed"] if directed else []
    assert cli("build", "graph", tmp_path / "v.csv", tmp_path / "e.csv", store, *flags).rc == 0
    run = cli("export", store, out)
    assert run.rc == 0 and "4 edges" in run.out, run.err
    graph = nx.read_graphml(out)
    assert graph.is_directed() is directed and graph.number_of_edges() == 4
    got = sorted((int(u), int(v), round(w, 3)) for u, v, w in graph.edges(data="w"))
    want = [(1, 2, 0.1), (1, 2, 0.5), (2, 1, 0.7), (2, 3, 0.9)]
    assert got == (want if directed else sorted((min(u, v), max(u, v), w) for u, v, w in want))
    again = tmp_path / "again.zv"
    assert cli("build", "graph", out, again, *flags).rc == 0
    assert len(zv.read(str(again)).edges) == 4


@pytest.mark.parametrize(("kind", "vertices", "message"), [
    ("points", "x,y,z,object_id\n1,2,3,1.5\n4,5,6,7\n", "column 'object_id': 1.5 is not a whole number"),
    ("points", "x,y,z,object_id\n1,2,3,1e23\n4,5,6,7\n", "column 'object_id': 1e+23 is not a whole number"),
    ("points", "x,y,z\n1,2,3\nfoo,5,6\n", "columns 'x', 'y', 'z': cannot be read as float"),
    ("graph", "id,x,y,z\n1.5,0,0,0\n2,1,1,1\n3,2,2,2\n", "column 'id': 1.5 is not a whole number"),
])
def test_build_refuses_values_a_column_cannot_hold(tmp_path, cli, kind, vertices, message):
    """Regression (hunt): object id 1.5 was stored as 1, vertex id 1.5 was matched by edges naming 1, and
    text in a coordinate column ended in an untyped ValueError naming no column."""
    (tmp_path / "v.csv").write_text(vertices)
    (tmp_path / "e.edgelist").write_text("1 2\n2 3\n")
    inputs = [tmp_path / "v.csv"] + ([tmp_path / "e.edgelist"] if kind == "graph" else [])
    run = cli("build", kind, *inputs, tmp_path / "s.zv")
    assert run.rc == 2 and f"InputError: {message}" in run.err, run.err
    assert not (tmp_path / "s.zv").exists()
