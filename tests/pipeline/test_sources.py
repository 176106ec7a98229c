"""``pipeline.sources``: lazy tables in partitions, vertex columns, id resolution (local threads)."""

from __future__ import annotations

import dask
import numpy as np
import pandas as pd
import pytest
from pipeline_helpers import graph_frames, points_frame, polyline_frame, write_parquet_parts

from pipeline import sources
from zarr_vectors.errors import InputError

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning",
                                        "ignore:The inplace keyword in DataFrame.reset_index")


@pytest.mark.parametrize(("column", "first", "second", "message"), [
    ("w", np.int8([1, 2, 3]), np.int32([4, 70000, -5]), r"column 'w': 70000 \(int32\) cannot be held as int8"),
    ("x", np.float32([0, 1, 2]), np.float64([3, 300.1234567, 5]),
     r"column 'x': 300.1234567 \(float64\) cannot be held as float32"),
    # review: pandas' nullable Int64 (restored from Parquet) skipped the check; int64 -> float64 is
    # "safe" to numpy, and wrong past 2**53
    ("w", np.int8([1, 2, 3]), pd.array([4, 70000, -5], dtype="Int64"), r"column 'w': 70000 \(int64\) cannot be"),
    ("w", np.float64([1, 2, 3]), np.int64([4, 2**53 + 1, 5]), r"column 'w': 9007199254740993 \(int64\) cannot be"),
])
def test_inputs_whose_column_types_differ_lose_no_value(tmp_path, column, first, second, message):
    """Regression (hunt): a table of several files takes the first file's column types, and a later
    file's values were cast to them: int32 70000 stored as int8 112, float64 positions rounded to
    float32, exit 0.  A value the first file's type cannot hold is refused, naming the column;
    values it holds are read as they are."""
    def frame(values):
        n = len(values)
        base = {"x": np.float32(np.arange(n)), "y": np.zeros(n, np.float32), "z": np.zeros(n, np.float32),
                "w": np.int8(np.arange(n))}
        return pd.DataFrame({**base, column: values})

    frame(first).to_parquet(tmp_path / "a.parquet")
    frame(second).to_parquet(tmp_path / "b.parquet")
    table = sources.vertex_table(sources.read_table([str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")]))
    values = table.attributes["w"] if column == "w" else table.positions[:, 0]
    with pytest.raises(InputError, match=message):
        values.compute(scheduler="sync")
    frame(second[[0, 2]]).to_parquet(tmp_path / "b.parquet")  # values the first file's type holds
    table = sources.vertex_table(sources.read_table([str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")]))
    values = table.attributes["w"] if column == "w" else table.positions[:, 0]
    np.testing.assert_array_equal(values.compute(scheduler="sync"),
                                  np.concatenate([first, np.asarray(second[[0, 2]], dtype=first.dtype)]))


def test_vertex_columns_of_a_multi_file_parquet_dataset(tmp_path):
    """Regression: columns projected one by one re-plan the read (dask-expr fuses small
    files into fewer partitions), so their blocks no longer matched the row counts taken
    on the whole frame and the graph had missing keys."""
    df = points_frame(4000, objects=9, float32=True)
    df["name"] = [f"p{i}" for i in range(len(df))]  # a string column is not an attribute
    src = write_parquet_parts(df, tmp_path / "in.parquet", parts=3)
    frame = sources.read_table(str(src))
    table = sources.vertex_table(frame)
    pos, ids, intensity, label = dask.compute(table.positions, table.object_ids, table.attributes["intensity"],
                                              table.attributes["label"], scheduler="sync")
    np.testing.assert_array_equal(pos, df[["x", "y", "z"]].to_numpy())
    assert pos.dtype == np.float32 and ids.dtype == np.int64
    np.testing.assert_array_equal(ids, df["object_id"].to_numpy())
    np.testing.assert_array_equal(intensity, df["intensity"].to_numpy())
    np.testing.assert_array_equal(label, df["label"].to_numpy())
    assert sorted(table.attributes) == ["intensity", "label"]
    # every block of every column lines up with the same partitions
    assert table.positions.chunks[0] == table.object_ids.chunks[0] == table.attributes["label"].chunks[0]
    blocks = table.positions.to_delayed().ravel()
    assert [len(b) for b in dask.compute(*blocks, scheduler="sync")] == list(table.positions.chunks[0])


def test_parquet_partition_lengths_come_from_the_footers_and_other_inputs_are_counted(tmp_path, monkeypatch):
    """A Parquet input was read once just to count its partitions' rows; the footers say them.
    A CSV's reader knows no lengths: its rows are counted, as before."""
    df = points_frame(5000, objects=9, float32=True)
    src = write_parquet_parts(df, tmp_path / "in.parquet", parts=3)
    df.to_csv(tmp_path / "in.csv", index=False)
    counted: list[int] = []
    real = sources.dask.compute
    monkeypatch.setattr(sources.dask, "compute", lambda *a, **k: counted.append(len(a)) or real(*a, **k))
    for path, passes in ((src, 0), (tmp_path / "in.csv", 1)):
        counted.clear()
        frame = sources.read_table(str(path))[["x", "y", "z", "object_id"]]
        parts = frame.to_delayed()
        lengths = sources.partition_lengths(frame, parts)
        assert len(counted) == passes
        assert lengths == [len(p) for p in real(*parts, scheduler="sync")] and sum(lengths) == len(df)


def test_a_partition_whose_rows_are_not_the_planned_ones_fails_its_task(tmp_path):
    """Lengths from metadata are checked where the rows are read: wrong ones fail the build, never its bytes."""
    part = points_frame(10, objects=2, float32=True)
    assert sources._column_block(part, ["x", "y"], np.float32, 10).shape == (10, 2)
    with pytest.raises(InputError, match="has 10 rows where 11 were planned"):
        sources._column_block(part, ["x", "y"], np.float32, 11)
    records = pd.DataFrame({"src": [0, 1], "dst": [1, 0]})
    lookup = sources._id_lookup(4, np.arange(3, dtype=np.int64))
    assert sources._resolve_block(records, lookup, ["src", "dst"], [], 0, 2, "edge")[0].shape == (2, 2)
    with pytest.raises(InputError, match="has 2 rows where 3 were planned"):
        sources._resolve_block(records, lookup, ["src", "dst"], [], 0, 3, "edge")


def test_a_build_whose_parquet_footer_disagrees_with_its_data_fails_before_writing(tmp_path, cli, monkeypatch):
    """End to end: lengths that are not the data's (here the planned ones are off by one) fail the build with
    an InputError (exit 2) before a store exists."""
    df = points_frame(3000, objects=5, float32=True)
    df.to_parquet(tmp_path / "in.parquet", index=False)
    real = sources.partition_lengths
    monkeypatch.setattr(sources, "partition_lengths", lambda frame, parts: [n + 1 for n in real(frame, parts)])
    run = cli("build", "points", str(tmp_path / "in.parquet"), str(tmp_path / "out.zv"), "--chunk-shape", "25")
    assert run.rc == 2 and "rows where" in run.err and "were planned" in run.err, run.err
    assert not (tmp_path / "out.zv").exists()


def test_parquet_partitions_stay_small(tmp_path, zv_config):
    """A file's row groups are read as several partitions, not one (no task holds the whole file)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "rg.parquet"
    schema = pa.schema([("x", pa.float64()), ("y", pa.float64()), ("z", pa.float64())])
    with pq.ParquetWriter(path, schema) as writer:
        rng = np.random.default_rng(0)  # random values: dask sizes row groups by their encoded bytes
        for i in range(6):
            v = i + rng.random(50_000)
            writer.write_table(pa.table({"x": v, "y": v, "z": v}, schema=schema))
    zv_config("sources.parquet-blocksize", "1MiB")  # 1.2 MB per row group
    table = sources.vertex_table(sources.read_table(str(path)))
    assert table.positions.chunks[0] == (50_000,) * 6
    np.testing.assert_array_equal(np.floor(table.positions[:, 0].compute(scheduler="sync")), np.repeat(np.arange(6.0), 50_000))


def test_csv_and_npz_tables(tmp_path):
    df = points_frame(1000, seed=3)
    df.to_csv(tmp_path / "a.csv", index=False)
    np.savez(tmp_path / "a.npz", positions=df[["x", "y", "z"]].to_numpy(), label=df["label"].to_numpy())
    csv = sources.vertex_table(sources.read_table(str(tmp_path / "a.csv")))
    npz = sources.vertex_table(sources.read_table(str(tmp_path / "a.npz")))
    np.testing.assert_array_equal(csv.positions.compute(scheduler="sync"), pd.read_csv(tmp_path / "a.csv")[["x", "y", "z"]])
    np.testing.assert_array_equal(npz.positions.compute(scheduler="sync"), df[["x", "y", "z"]].to_numpy())
    assert sorted(npz.attributes) == ["label"] and npz.attributes["label"].dtype == df["label"].dtype


def test_a_csv_with_a_byte_order_mark_reads_as_without(tmp_path):
    """Regression (hunt): a spreadsheet's "CSV UTF-8" starts with a byte-order mark, which became part
    of the first column's name ('\ufeffx'), so the table had no x column; every CSV reader (the
    dataframe's and the small-job's) now drops it."""
    from pipeline.columns import csv_header, read_csv_whole, read_numeric_csv

    df = points_frame(200, seed=4)
    df.to_csv(tmp_path / "plain.csv", index=False)
    (tmp_path / "bom.csv").write_bytes(b"\xef\xbb\xbf" + (tmp_path / "plain.csv").read_bytes())
    plain, bom = str(tmp_path / "plain.csv"), str(tmp_path / "bom.csv")
    assert csv_header(bom) == csv_header(plain) == list(df.columns)
    for whole in (read_numeric_csv, read_csv_whole):
        got, want = whole(bom), whole(plain)
        assert list(got) == list(want)
        for name in want:
            np.testing.assert_array_equal(got[name], want[name])
    lazy = sources.vertex_table(sources.read_table(bom))
    np.testing.assert_array_equal(lazy.positions.compute(scheduler="sync"), df[["x", "y", "z"]].to_numpy())


@pytest.mark.parametrize("text, dtype", [
    ("x,seg\n1.5,18446744073709551615\n4.5,9223372036854775809\n", np.uint64),  # past int64: uint64
    ("x,seg\n1.5,7\n\n4.5,-2\n", np.int64),  # a blank line is skipped, without a warning
    ("x,seg\n1.5,-1\n4.5,18446744073709551615\n", None),  # the dataframe reader keeps these as text
    ("x,seg\n1.5,18446744073709551616\n4.5,1\n", None),
])
def test_a_small_csv_types_its_columns_as_the_dataframe_reader_does(tmp_path, text, dtype):
    """Regression (hunt): the small-CSV reader tried int64 then float64, so uint64 ids past int64
    were stored as float64, losing their low digits, where a larger file kept them exactly; a blank
    line printed numpy's warning about `max_rows` as a build warning."""
    import warnings

    from pipeline.columns import read_csv_whole, read_numeric_csv

    (tmp_path / "t.csv").write_text(text)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = read_numeric_csv(str(tmp_path / "t.csv"))
    want = read_csv_whole(str(tmp_path / "t.csv"))
    if dtype is None:
        assert got is None and want["seg"].dtype == object
        return
    assert got is not None and got["seg"].dtype == want["seg"].dtype == dtype
    np.testing.assert_array_equal(got["seg"], want["seg"])
    np.testing.assert_array_equal(got["x"], want["x"])


@pytest.mark.parametrize("text", [
    "x, y, z, val\n1.5, 2.5, 3.5, 7\n4.5, 5.5, 6.5, 8\n",  # spaces after the commas
    'x,y,"z",val\n1.5,2.5,3.5,7\n',  # a quoted name
    "x,y,z,val\n1.5,2.5,3.5,7\n# not a comment\n",  # '#' starts no comment
])
def test_every_csv_reader_reads_one_dialect(tmp_path, text):
    """Regression (hunt): the small-CSV reader stripped spaces from the header's names and took
    '#' lines for comments, where the dataframe readers kept ' y' as a name and '#...' as a row, so
    whether a file built depended on its size."""
    from pipeline.columns import csv_header, read_csv_whole, read_numeric_csv
    from zarr_vectors.io import csv as csv_format

    path = str(tmp_path / "t.csv")
    (tmp_path / "t.csv").write_text(text)
    lazy = csv_format.frame([path]).compute(scheduler="sync")
    whole, fast = read_csv_whole(path), read_numeric_csv(path)
    assert csv_header(path) == list(whole) == list(lazy.columns)
    assert list(whole)[:3] == ["x", "y", "z"]
    if "#" in text:
        assert fast is None and whole["x"].dtype == object  # text: the dataframe path names what it cannot store
        return
    assert fast is not None and list(fast) == list(whole)
    for name in whole:
        np.testing.assert_array_equal(fast[name], whole[name])
        np.testing.assert_array_equal(lazy[name].to_numpy(), whole[name])


@pytest.mark.parametrize("name, message", [
    ("a.txt", "unknown file format"),
])
def test_unknown_formats_are_refused(tmp_path, name, message):
    (tmp_path / name).write_text("x\n1\n")
    with pytest.raises(InputError, match=message):
        sources.read_table(str(tmp_path / name))


def test_mixed_formats_are_refused(tmp_path):
    points_frame(10).to_csv(tmp_path / "a.csv", index=False)
    points_frame(10).to_parquet(tmp_path / "b.parquet", index=False)
    with pytest.raises(InputError, match="inputs mix formats"):
        sources.read_table([str(tmp_path / "a.csv"), str(tmp_path / "b.parquet")])


def test_missing_coordinates_and_ids_are_refused(tmp_path):
    frame = sources.read_table(str(_csv(tmp_path, pd.DataFrame({"a": [1.0], "b": [2.0]}))))
    with pytest.raises(InputError, match="needs coordinate columns x, y"):
        sources.vertex_table(frame)
    frame = sources.read_table(str(_csv(tmp_path, pd.DataFrame({"x": [1.0], "y": [2.0]}))))
    with pytest.raises(InputError, match=r"lacks column\(s\) \['id'\]"):
        sources.vertex_table(frame, with_ids=True)


def _csv(tmp_path, df, name="t.csv"):
    df.to_csv(tmp_path / name, index=False)
    return tmp_path / name


@pytest.mark.parametrize("join", ["dense", "sorted", "merge"])
def test_resolve_ids_maps_non_contiguous_ids_to_rows(tmp_path, zv_config, join):
    if join == "merge":  # the shuffle join that vertex tables too large to broadcast take
        zv_config("sources.broadcast-lookup-rows", 10)
    zv_config("sources.dense-id-span", 10**6 if join == "dense" else 0)
    g = graph_frames(300, 700)
    vsrc = write_parquet_parts(g.vertices, tmp_path / "v.parquet", parts=3)
    n = len(g.edges)
    edges = g.edges.assign(_rec=np.arange(n)[::-1] * 3, _idx_src=np.arange(n) % 7)  # the join's own names
    write_parquet_parts(edges, tmp_path / "e.parquet", parts=4)
    vertices = sources.vertex_table(sources.read_table(str(vsrc)), with_ids=True)
    edges_in = pd.read_parquet(tmp_path / "e.parquet")
    with dask.config.set(scheduler="sync"):
        index, attrs = sources.resolve_ids(sources.read_table(str(tmp_path / "e.parquet")), vertices, ["src", "dst"],
                                           what="edge")
        assert index.numblocks[0] > 1 or join == "merge"  # one block per record partition, never gathered
        index, values = dask.compute(index, attrs)
    ids = g.vertices["id"].to_numpy()
    np.testing.assert_array_equal(ids[index], edges_in[["src", "dst"]].to_numpy())  # input order kept
    assert sorted(values) == ["_idx_src", "_rec", "weight"]
    for name, column in values.items():  # a user's column is never the join's bookkeeping
        np.testing.assert_array_equal(column, edges_in[name].to_numpy())


@pytest.mark.parametrize("join", ["dense", "sorted", "merge"])
def test_resolve_ids_refuses_unknown_and_duplicate_ids(tmp_path, zv_config, join):
    if join == "merge":
        zv_config("sources.broadcast-lookup-rows", 1)
    zv_config("sources.dense-id-span", 10**6 if join == "dense" else 0)
    vertices = sources.vertex_table(sources.read_table(str(_csv(
        tmp_path, pd.DataFrame({"id": [5, 9], "x": [0.0, 1.0], "y": [0.0, 1.0]}), "v.csv"))), with_ids=True)
    edges = sources.read_table(str(_csv(tmp_path, pd.DataFrame({"src": [5, 9], "dst": [9, 7]}), "e.csv")))
    with dask.config.set(scheduler="sync"), pytest.raises(InputError, match=r"edge row 1 names vertex id\(s\) \[9, 7\]"):
        dask.compute(sources.resolve_ids(edges, vertices, ["src", "dst"], what="edge"))
    dup = sources.vertex_table(sources.read_table(str(_csv(
        tmp_path, pd.DataFrame({"id": [5, 5], "x": [0.0, 1.0], "y": [0.0, 1.0]}), "d.csv"))), with_ids=True)
    with dask.config.set(scheduler="sync"), pytest.raises(InputError, match="vertex ids are not unique"):
        dask.compute(sources.resolve_ids(edges, dup, ["src", "dst"], what="edge"))


def test_a_build_naming_an_unknown_vertex_id_exits_2_and_writes_no_store(tmp_path, cli, scheduler):
    g = graph_frames(100, 200)
    g.vertices.to_parquet(tmp_path / "v.parquet", index=False)
    edges = g.edges.copy()
    edges.loc[17, "dst"] = 123  # no such vertex id
    edges.to_csv(tmp_path / "e.csv", index=False)
    out = tmp_path / "g.zv"
    run = cli("build", "graph", tmp_path / "v.parquet", tmp_path / "e.csv", out, "--chunk-shape", "50",
              "--scheduler-address", scheduler)
    assert run.rc == 2
    assert "edge row 17 names vertex id(s)" in run.err and "123" in run.err
    assert not out.exists()


def test_polyline_table_sorts_on_the_cluster_and_finds_every_line(tmp_path):
    df = polyline_frame(lines=40)
    src = write_parquet_parts(df, tmp_path / "lines.parquet", parts=5)  # every line spread over files
    with dask.config.set(scheduler="sync"):
        table = sources.polyline_table(sources.read_table(str(src)), what="polyline")
        assert table.vertices.positions.numblocks[0] > 1  # stays in partitions, never one block
        pos, speed = dask.compute(table.vertices.positions, table.vertices.attributes["speed"])
    want = df.sort_values(["line", "order"])
    np.testing.assert_array_equal(pos, want[["x", "y", "z"]].to_numpy())
    np.testing.assert_array_equal(speed, want["speed"].to_numpy())
    starts = np.flatnonzero(np.r_[True, want["line"].to_numpy()[1:] != want["line"].to_numpy()[:-1]])
    np.testing.assert_array_equal(table.offsets, np.r_[starts, len(df)])


@pytest.mark.parametrize(
    "rows, message",
    [
        ({"line": [1, 1, 2], "order": [3, 3, 0]}, r"line 1 has two vertices with order 3"),
        ({"line": [1.5, 1.5, 2.0], "order": [0, 1, 0]}, r"'line' must hold integer polyline ids"),
        ({"line": [1, 1, 2], "order": [0.0, np.nan, 0.0]}, r"'order' must hold finite numbers"),
    ],
)
def test_polyline_table_refuses_ambiguous_or_malformed_lines(tmp_path, rows, message):
    df = pd.DataFrame({**rows, "x": [0.0, 1.0, 2.0], "y": [0.0, 1.0, 2.0]})
    with dask.config.set(scheduler="sync"), pytest.raises(InputError, match=message):
        sources.polyline_table(sources.read_table(str(_csv(tmp_path, df))), what="polyline")


def test_a_repeated_order_in_a_line_spread_over_files_is_refused(tmp_path):
    df = pd.DataFrame({"line": [7] * 6, "order": [0, 1, 2, 2, 3, 4], "x": np.arange(6.0), "y": np.zeros(6)})
    src = write_parquet_parts(df, tmp_path / "lines.parquet", parts=3)
    with dask.config.set(scheduler="sync"), pytest.raises(InputError, match="line 7 has two vertices with order 2"):
        sources.polyline_table(sources.read_table(str(src)), what="polyline")


def test_parent_rows_maps_parent_ids_vectorised():
    ids = np.array([40, 7, 93, 12])
    np.testing.assert_array_equal(sources.parent_rows(ids, np.array([-1, 40, 7, -1])), [-1, 0, 1, -1])
    with pytest.raises(InputError, match="skeleton parent id 5 is not a node id"):
        sources.parent_rows(ids, np.array([-1, 40, 5, -1]))
    with pytest.raises(InputError, match="vertex ids are not unique"):
        sources.parent_rows(np.array([3, 3]), np.array([-1, 3]))


def test_parent_rows_refuses_a_negative_vertex_id():
    """Hunt: vertex 7's parent -2 read as a root, so its edge to vertex -2 was lost without a word."""
    with pytest.raises(InputError, match="skeleton vertex id -2 is negative; a negative parent marks a root"):
        sources.parent_rows(np.array([5, -2, 7]), np.array([-1, 5, -2]))


# ---------------------------------------------------------------------------
# several whole files in one store
# ---------------------------------------------------------------------------
def _trk(path, lines: list[np.ndarray], weights: np.ndarray) -> None:
    """A TRK file written by nibabel, with one value per streamline (``data_per_streamline``)."""
    import nibabel as nib
    from nibabel.streamlines import Tractogram

    tractogram = Tractogram(lines, affine_to_rasmm=np.eye(4), data_per_streamline={"w": weights[:, None]})
    header = {"dimensions": (100, 100, 100), "voxel_sizes": (1.0, 1.0, 1.0), "voxel_to_rasmm": np.eye(4)}
    nib.streamlines.save(tractogram, str(path), header=header)


def test_swc_files_built_together_are_distinct_skeletons(tmp_path, cli):
    """Regression: each SWC file numbers its trees from 0, and the files' first trees were
    merged into one object.  Trees are numbered on from file to file."""
    import zarr_vectors as zv

    (tmp_path / "a.swc").write_text("1 1 0 0 0 1 -1\n2 3 10 0 0 1 1\n3 3 20 0 0 1 2\n5 1 50 50 50 1 -1\n")
    (tmp_path / "b.swc").write_text("1 1 100 0 0 1 -1\n2 3 110 0 0 1 1\n")
    out = tmp_path / "s.zv"
    run = cli("build", "skeleton", tmp_path / "a.swc", tmp_path / "b.swc", out, "--chunk-shape", "250")
    assert run.rc == 0, run.err
    data = zv.read(str(out))
    by_x = np.argsort(data.positions[:, 0])
    np.testing.assert_array_equal(data.positions[by_x, 0], [0, 10, 20, 50, 100, 110])
    np.testing.assert_array_equal(data.object_ids[by_x], [0, 0, 0, 1, 2, 2])  # a's two trees, then b's
    np.testing.assert_array_equal(data.attributes["id"][by_x], [1, 2, 3, 5, 1, 2])  # sample numbers kept
    child_parent = {tuple(data.positions[e, 0]) for e in data.edges}
    assert child_parent == {(10, 0), (20, 10), (110, 100)}


def test_tractograms_built_together_keep_their_per_streamline_data(tmp_path, cli):
    """Regression: a second file's streamlines came through, their ``data_per_streamline``
    did not -- for no file -- and no warning said so."""
    import zarr_vectors as zv

    rng = np.random.default_rng(5)
    lines = [[rng.uniform(0, 100, (4 + k, 3)).astype(np.float32) for k in range(3)] for _ in range(2)]
    _trk(tmp_path / "t0.trk", lines[0], np.array([1.0, 2.0, 3.0], np.float32))
    _trk(tmp_path / "t1.trk", lines[1], np.array([10.0, 20.0, 30.0], np.float32))
    out = tmp_path / "t.zv"
    run = cli("build", "streamlines", tmp_path / "t0.trk", tmp_path / "t1.trk", out, "--chunk-shape", "250")
    assert run.rc == 0, run.err
    data = zv.read(str(out))
    assert len(data.offsets) == 7
    want = lines[0] + lines[1]
    for p, line in enumerate(want):  # streamline p is the p-th line of the files in order
        np.testing.assert_allclose(data.positions[data.offsets[p]:data.offsets[p + 1]], line, atol=1e-4)
    np.testing.assert_array_equal(data.objects, np.arange(6))
    np.testing.assert_array_equal(data.object_attributes["w"], [1, 2, 3, 10, 20, 30])


def test_a_reader_warning_is_a_line_of_the_build(tmp_path, cli):
    """A reader's UserWarning (a TCK whose count: its streamlines do not match) is said as
    'zv build: warning:', like the dropped columns, and lands in --json's warnings."""
    import json

    from nibabel.streamlines import Tractogram
    from nibabel.streamlines.tck import TckFile

    rng = np.random.default_rng(6)
    lines = [rng.uniform(0, 100, (3 + k, 3)).astype(np.float32) for k in range(2)]
    TckFile(Tractogram(lines, affine_to_rasmm=np.eye(4))).save(str(tmp_path / "t.tck"))
    raw = (tmp_path / "t.tck").read_bytes()
    (tmp_path / "t.tck").write_bytes(raw.replace(b"count: 0000000002", b"count: 0000000005"))
    run = cli("build", "streamlines", tmp_path / "t.tck", tmp_path / "t.zv", "--chunk-shape", "250")
    assert run.rc == 0, run.err
    assert "zv build: warning: " in run.err and "t.tck: its header says count: 5, the file holds 2" in run.err
    (tmp_path / "j.tck").write_bytes((tmp_path / "t.tck").read_bytes())  # not the file this process read last
    run = cli("build", "streamlines", tmp_path / "j.tck", tmp_path / "j.zv", "--chunk-shape", "250", "--json")
    assert run.rc == 0, run.err
    assert any("count: 5" in w for w in json.loads(run.out.strip().splitlines()[-1])["warnings"])


def test_files_whose_object_attributes_differ_are_refused(tmp_path, cli):
    rng = np.random.default_rng(6)
    _trk(tmp_path / "t0.trk", [rng.uniform(0, 100, (4, 3)).astype(np.float32)], np.array([1.0], np.float32))
    import nibabel as nib
    from nibabel.streamlines import Tractogram

    header = {"dimensions": (100, 100, 100), "voxel_sizes": (1.0, 1.0, 1.0), "voxel_to_rasmm": np.eye(4)}
    bare = Tractogram([rng.uniform(0, 100, (4, 3)).astype(np.float32)], affine_to_rasmm=np.eye(4))
    nib.streamlines.save(bare, str(tmp_path / "t1.trk"), header=header)
    out = tmp_path / "t.zv"
    run = cli("build", "streamlines", tmp_path / "t0.trk", tmp_path / "t1.trk", out, "--chunk-shape", "250")
    assert run.rc == 2, run.err
    assert "different object attributes" in run.err and "t1.trk" in run.err
    assert not out.exists()


def test_objects_with_attributes_in_two_files_are_refused():
    """Ids from the data are kept across files; an object given attributes twice cannot be combined."""
    from zarr_vectors.io.types import Geometry

    def part(ids):
        return Geometry(kind="points", positions=np.zeros((2, 3)), object_ids=np.array(ids),
                        objects=np.unique(ids), object_attributes={"w": np.ones(len(np.unique(ids)))})

    combined = sources.concat([part([4, 4]), part([7, 8])], ["a", "b"])
    np.testing.assert_array_equal(combined.object_ids, [4, 4, 7, 8])  # the data's own ids, unchanged
    np.testing.assert_array_equal(combined.objects, [4, 7, 8])
    with pytest.raises(InputError, match="object 4 has object attributes in more than one file"):
        sources.concat([part([4, 4]), part([4, 9])], ["a", "b"])


def test_files_whose_records_differ_are_refused():
    """Edges (faces) and their attributes must agree across files, as vertex attributes do."""
    from zarr_vectors.io.types import Geometry

    def mesh(face_attributes, faces=True):
        return Geometry(kind="mesh", positions=np.zeros((3, 3)), faces=np.array([[0, 1, 2]]) if faces else None,
                        edge_attributes={k: np.ones(1) for k in face_attributes})

    combined = sources.concat([mesh(["q"]), mesh(["q"])], ["a", "b"])
    np.testing.assert_array_equal(combined.faces, [[0, 1, 2], [3, 4, 5]])
    np.testing.assert_array_equal(combined.edge_attributes["q"], [1, 1])
    with pytest.raises(InputError, match="different face attributes"):
        sources.concat([mesh(["q"]), mesh(["q", "r"])], ["a", "b"])
    with pytest.raises(InputError, match="different face attributes"):
        sources.concat([mesh(["q", "r"]), mesh(["q"])], ["a", "b"])
    with pytest.raises(InputError, match="hold faces and some do not"):
        sources.concat([mesh([]), mesh([], faces=False)], ["a", "b"])
