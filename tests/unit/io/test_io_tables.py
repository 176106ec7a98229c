"""Parquet (pyarrow), CSV and NPZ tables -> geometry -> tables read back by their libraries; the column mapping."""

from __future__ import annotations

import gzip
import os
import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from geometry_roundtrip import assert_refused_where_the_os_refuses, through_store

from zarr_vectors.errors import InputError
from zarr_vectors.io import csv, npz, parquet
from zarr_vectors.io.columns import ColumnMap
from zarr_vectors.io.tables import companion, table_frames
from zarr_vectors.io.types import Geometry


def _table(n=40, seed=1):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"x": rng.random(n), "y": rng.random(n), "z": rng.random(n),
                         "object_id": rng.integers(0, 4, n), "mass": rng.random(n).astype(np.float32),
                         "label": rng.integers(0, 9, n).astype(np.int16), "name": ["n"] * n})


def test_parquet_written_by_pyarrow_reads_and_writes_back(tmp_path):
    df = _table()
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), tmp_path / "in.parquet", row_group_size=7)
    g = parquet.read(str(tmp_path / "in.parquet"))
    np.testing.assert_array_equal(g.positions, df[["x", "y", "z"]].to_numpy())
    np.testing.assert_array_equal(g.object_ids, df["object_id"].to_numpy())
    assert sorted(g.attributes) == ["label", "mass"] and g.attributes["label"].dtype == np.int16
    assert g.dropped == ("name",)
    parquet.write(str(tmp_path / "out.parquet"), g)
    back = pq.read_table(tmp_path / "out.parquet").to_pandas()
    pd.testing.assert_frame_equal(back, df.drop(columns="name")[["x", "y", "z", "object_id", "mass", "label"]])


@pytest.mark.parametrize("module, name", [(csv, "t.csv"), (csv, "t.tsv"), (npz, "t.npz")])
def test_csv_and_npz_round_trip_exactly(tmp_path, module, name):
    df = _table().drop(columns="name")
    g = Geometry("points", df[["x", "y", "z"]].to_numpy(), object_ids=df["object_id"].to_numpy(),
                 attributes={"mass": df["mass"].to_numpy(), "label": df["label"].to_numpy()}, axes=("x", "y", "z"))
    module.write(str(tmp_path / name), g)
    if name.endswith(".npz"):
        with np.load(tmp_path / name) as f:
            back = pd.DataFrame({k: f[k] for k in f.files})
    else:
        back = pd.read_csv(tmp_path / name, sep="\t" if name.endswith(".tsv") else ",")
    np.testing.assert_array_equal(back[["x", "y", "z"]].to_numpy(), g.positions)  # 17 digits: exact
    again = module.read(str(tmp_path / name))
    np.testing.assert_array_equal(again.positions, g.positions)
    np.testing.assert_array_equal(again.attributes["label"], g.attributes["label"])


def test_column_mapping_renames_roles_and_names_missing_columns(tmp_path):
    df = pd.DataFrame({"px": [1.0, 2.0], "py": [3.0, 4.0], "node": [7, 9], "obj": [1, 1], "w": [0.5, 0.25],
                       "extra": [1, 2]})
    df.to_csv(tmp_path / "v.csv", index=False)
    g = csv.read(str(tmp_path / "v.csv"), columns=ColumnMap(positions=("px", "py"), id="node", object_id="obj",
                                                            columns=("w",)))
    np.testing.assert_array_equal(g.positions, [[1, 3], [2, 4]])
    np.testing.assert_array_equal(g.ids, [7, 9])
    assert sorted(g.attributes) == ["id", "w"] and g.axes == ("px", "py")
    with pytest.raises(InputError, match=r"v\.csv: lacks column\(s\) \['q'\] \(--position-columns\)"):
        csv.read(str(tmp_path / "v.csv"), columns=ColumnMap(positions=("px", "q")))
    with pytest.raises(InputError, match=r"lacks column\(s\) \['oid'\] \(--object-id-column\)"):
        csv.read(str(tmp_path / "v.csv"), columns=ColumnMap(positions=("px", "py"), object_id="oid"))
    with pytest.raises(InputError, match="needs coordinate columns x, y"):
        csv.read(str(tmp_path / "v.csv"))


@pytest.mark.parametrize("first", ["positions", "x"])
def test_npz_column_given_twice_is_refused(tmp_path, first):
    """Regression (hunt): a 1-D 'x' beside a 2-D 'positions' replaced positions[:, 0], or not,
    by the members' order, silently."""
    members = {"positions": np.arange(12.0).reshape(4, 3), "x": np.arange(100.0, 104.0)}
    np.savez(tmp_path / "t.npz", **{k: members[k] for k in (first, *(set(members) - {first}))})
    with pytest.raises(InputError, match=r"t\.npz': column\(s\) \['x'\] given twice"):
        npz.read(str(tmp_path / "t.npz"))


def test_npz_structured_array_is_refused(tmp_path):
    """Regression (hunt): a structured member ended in a dask ValueError traceback."""
    np.savez(tmp_path / "s.npz", x=np.zeros(2), y=np.zeros(2), s=np.zeros(2, dtype=[("p", "f8"), ("q", "i4")]))
    with pytest.raises(InputError, match=r"s\.npz': array 's' has fields \['p', 'q'\]"):
        npz.read(str(tmp_path / "s.npz"))


def test_corrupt_parquet_and_npz_name_the_file(tmp_path):
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 but not really")
    (tmp_path / "bad.npz").write_bytes(b"no zip")
    with pytest.raises(InputError, match=r"bad\.parquet' cannot be read: .*magic bytes"):
        parquet.frame([str(tmp_path / "bad.parquet")])
    with pytest.raises(InputError, match=r"bad\.npz' cannot be read"):
        npz.read(str(tmp_path / "bad.npz"))


def test_graph_tables_keep_ids_and_name_their_records():
    g = Geometry("graph", np.zeros((3, 3)), attributes={"id": np.array([10, 20, 30])},
                 edges=np.array([[0, 1], [2, 1]]), edge_attributes={"w": np.array([1.0, 2.0])}, axes=("x", "y", "z"))
    tables = table_frames(g, "out.csv")
    np.testing.assert_array_equal(tables[""]["id"], [10, 20, 30])
    np.testing.assert_array_equal(tables["edges"]["src"], [10, 30])
    np.testing.assert_array_equal(tables["edges"]["dst"], [20, 20])
    assert companion("/d/out.parquet", "edges") == "/d/out.edges.parquet"
    assert companion("out.csv.gz", "faces") == "out.faces.csv.gz"


@pytest.mark.parametrize("module, name", [(parquet, "out.parquet"), (csv, "out.csv"), (npz, "out.npz")])
def test_object_attributes_get_a_table_of_their_own(tmp_path, module, name):
    """They were left out of every table export without a word: each is one row per object."""
    g = Geometry("points", np.zeros((4, 3)), object_ids=np.array([3, 3, 7, 7]), objects=np.array([3, 7]),
                 object_attributes={"label": np.array([5, 6], dtype=np.int16), "rgb": np.array([[1, 2, 3], [4, 5, 6]])},
                 axes=("x", "y", "z"))
    module.write(str(tmp_path / name), g)
    path = companion(str(tmp_path / name), "objects")
    back = (pd.read_parquet(path) if module is parquet else pd.read_csv(path) if module is csv
            else pd.DataFrame(dict(np.load(path))))
    assert list(back.columns) == ["object_id", "label", "rgb_0", "rgb_1", "rgb_2"]
    np.testing.assert_array_equal(back["object_id"], [3, 7])
    np.testing.assert_array_equal(back["label"], [5, 6])
    np.testing.assert_array_equal(back[["rgb_0", "rgb_1", "rgb_2"]].to_numpy(), [[1, 2, 3], [4, 5, 6]])
    points = Geometry("points", np.zeros((4, 3)), object_ids=np.array([3, 3, 7, 7]))
    assert "objects" not in table_frames(points, "o.csv")


@pytest.mark.parametrize("module, name", [(parquet, "out.parquet"), (csv, "out.csv"), (npz, "out.npz")])
def test_a_table_written_where_the_os_refuses_names_the_file(tmp_path, module, name):
    """Hunt: a missing folder, or a folder at OUT, was the library's raw OSError (pandas' 'Cannot save
    file into a non-existent directory', pyarrow's FileNotFoundError, IsADirectoryError)."""
    g = Geometry("points", np.zeros((4, 3)), axes=("x", "y", "z"))
    assert_refused_where_the_os_refuses(tmp_path, module.write, name, g, folder=".*Is a directory")


@pytest.mark.parametrize("module, name", [(parquet, "out.parquet"), (csv, "out.csv"), (npz, "out.npz")])
def test_tables_whose_companion_cannot_be_written_leave_no_file_of_themselves(tmp_path, module, name):
    """A folder at OUT's edges table: the vertex table was written, then the error raised, leaving
    half an export; the files a failed write made are removed with it, and a file it did not make
    stays."""
    g = Geometry("graph", np.arange(9.0).reshape(3, 3), edges=np.array([[0, 1], [1, 2]]))
    out = str(tmp_path / name)
    os.mkdir(companion(out, "edges"))
    with pytest.raises(InputError, match=rf"^{re.escape(companion(out, 'edges'))}: cannot be written"):
        module.write(out, g)
    assert sorted(p.name for p in tmp_path.iterdir()) == [os.path.basename(companion(out, "edges"))]
    os.rmdir(companion(out, "edges"))
    module.write(out, g)  # the same write where the OS takes it: both files
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([name, os.path.basename(companion(out, "edges"))])


@pytest.mark.parametrize("module, name", [(parquet, "out.parquet"), (csv, "out.csv")])
def test_a_failed_write_to_a_file_url_leaves_no_file_either(tmp_path, module, name):
    """Review: the clean-up looked for the URL's text as a path; the libraries write file:// URLs
    (and ~) to the file they name, which was left behind."""
    g = Geometry("graph", np.arange(9.0).reshape(3, 3), edges=np.array([[0, 1], [1, 2]]))
    os.mkdir(companion(str(tmp_path / name), "edges"))
    with pytest.raises(InputError, match="cannot be written"):
        module.write(f"file://{tmp_path / name}", g)
    assert sorted(p.name for p in tmp_path.iterdir()) == [os.path.basename(companion(name, "edges"))]


@pytest.mark.parametrize("module, name", [(parquet, "out.parquet"), (csv, "out.csv"), (npz, "out.npz")])
def test_a_skeleton_store_with_a_negative_vertex_id_is_refused_as_tables(tmp_path, module, name):
    """Hunt: write_skeleton keeps any vertex ids (attribute ``id``), negative ones too, and the export
    wrote them in ``id, parent``, a table ``zv build skeleton`` refuses (a negative parent marks a root,
    so the children of -5 would read back as roots): refused at export, as the SWC writer refuses it."""
    skeleton = Geometry("skeleton", np.arange(12.0).reshape(4, 3), edges=np.array([[1, 0], [2, 1], [3, 2]]),
                        ids=np.array([-5, -2, 3, 4]), object_ids=np.zeros(4, np.int64))
    data = through_store(tmp_path, skeleton)
    out = str(tmp_path / name)  # named: table writers are handed data, not the store it came from
    with pytest.raises(InputError, match=rf"^{re.escape(out)}: skeleton vertex id -5 is negative: the parent column "
                                         r"marks a root with any negative id.*zv build skeleton refuses it\); "
                                         "this store cannot be exported as tables"):
        module.write(out, data)
    assert not (tmp_path / name).exists()


def test_polyline_object_attributes_name_the_line_they_describe():
    """A polyline table numbers lines 0.. in order, not by object id: a row per line says its
    object and carries its attributes (a box can cut one polyline into two lines), then a row
    with line -1 per object with no vertices in the data."""
    g = Geometry("streamline", np.zeros((7, 3)), object_ids=np.array([4, 4, 9, 9, 9, 4, 4]), objects=np.array([2, 4, 9]),
                 object_attributes={"fa": np.array([0.1, 0.2, 0.3])}, offsets=np.array([0, 2, 5, 5, 7]),
                 axes=("x", "y", "z"))
    tables = table_frames(g, "out.csv")
    np.testing.assert_array_equal(tables[""]["line"], [0, 0, 1, 1, 1, 3, 3])  # line 2 is empty
    np.testing.assert_array_equal(tables["objects"]["line"], [0, 1, 3, -1])
    np.testing.assert_array_equal(tables["objects"]["object_id"], [4, 9, 4, 2])
    np.testing.assert_array_equal(tables["objects"]["fa"], [0.2, 0.3, 0.2, 0.1])


@pytest.mark.parametrize("role, name", [("attributes", "x"), ("object_attributes", "object_id"),
                                        ("object_attributes", "line"), ("edge_attributes", "src")])
def test_an_attribute_named_like_a_key_column_is_refused_not_written_over(role, name):
    """``object_id`` as an object attribute replaced the real ids in the objects table."""
    g = Geometry("streamline" if name == "line" else "graph", np.zeros((2, 3)), object_ids=np.array([0, 0]),
                 objects=np.array([0]), offsets=np.array([0, 2]) if name == "line" else None,
                 edges=None if name == "line" else np.array([[0, 1]]), axes=("x", "y", "z"))
    getattr(g, role)[name] = np.zeros(1 if role != "attributes" else 2)
    with pytest.raises(InputError, match=rf"^out\.csv: .*column\(s\) \['{name}'\] would replace the table's own"):
        table_frames(g, "out.csv")


def test_edge_list_writes_object_attributes_beside_its_vertices(tmp_path):
    from zarr_vectors.io import edgelist

    g = Geometry("graph", np.zeros((3, 3)), object_ids=np.array([0, 0, 1]), objects=np.array([0, 1]),
                 object_attributes={"w": np.array([1.5, 2.5])}, edges=np.array([[0, 1], [1, 2]]), axes=("x", "y", "z"))
    edgelist.write(str(tmp_path / "g.edgelist"), g)
    back = pd.read_csv(tmp_path / "g.objects.csv")
    assert back.to_dict("list") == {"object_id": [0, 1], "w": [1.5, 2.5]}


@pytest.mark.parametrize(("frame", "message"), [
    ({"x": [1.0, 2.0], "y": [0.0, 0.0], "z": [0.0, 0.0], "object_id": [1.5, 2.0]},
     r"'f\.csv': column 'object_id': 1\.5 is not a whole number in the int64 range"),
    ({"x": ["1", "foo"], "y": [0.0, 0.0], "z": [0.0, 0.0]},
     r"'f\.csv': columns 'x', 'y', 'z': cannot be read as float64 \(ValueError: could not convert string"),
    ({"x": [1 + 2j, 3.0], "y": [0.0, 0.0], "z": [0.0, 0.0]},  # its imaginary parts were dropped (hunt)
     r"'f\.csv': column 'x' holds complex numbers; float64 expected"),
    ({"x": [1.0, 2.0], "y": [0.0, 0.0], "z": [0.0, 0.0], "object_id": np.array([1, 2**64 - 1], np.uint64)},
     r"'f\.csv': column 'object_id': 18446744073709551615 \(uint64\) cannot be held as int64"),  # was 'found -1'
])
def test_a_whole_file_table_refuses_values_its_columns_cannot_hold(frame, message):
    """Regression (hunt): the whole-file path (GraphML, small tables) cast object id 1.5 to 1 and ended
    a text coordinate in an untyped ValueError."""
    from zarr_vectors.io.tables import geometry_from_frame

    with pytest.raises(InputError, match=message):
        geometry_from_frame(pd.DataFrame(frame), "f.csv")


def test_a_boolean_column_with_nulls_is_refused_not_read_as_false(tmp_path):
    """Regression (hunt): a Parquet boolean column with nulls (object dtype in pandas, bool in the
    schema dask plans with) stored [True, None, False, True] as [True, False, False, True]."""
    from pipeline import sources
    from zarr_vectors.io.tables import column_values

    table = pa.table({"x": [0.0, 1.0, 2.0, 3.0], "y": [0.0] * 4, "z": [0.0] * 4,
                      "b": pa.array([True, None, False, True], pa.bool_())})
    pq.write_table(table, tmp_path / "n.parquet")
    vertices = sources.vertex_table(sources.read_table(str(tmp_path / "n.parquet")))
    with pytest.raises(InputError, match=r"column 'b' has missing values, which a boolean column cannot hold"):
        vertices.attributes["b"].compute(scheduler="sync")
    frame = pd.DataFrame({"b": [True, None, False]}, dtype=object)
    with pytest.raises(InputError, match=r"'f\.parquet': column 'b' has missing values"):
        column_values(frame, ["b"], bool, "f.parquet")
    np.testing.assert_array_equal(column_values(frame.dropna(), ["b"], bool), [True, False])


def test_a_csv_header_naming_a_column_twice_is_refused(tmp_path):
    """Regression (hunt): pandas renames a repeated column (``x,y,z,x`` reads as x, y, z, x.1), so
    the second ``x`` was stored as an attribute ``x.1`` that no column is named, without a word.
    Parquet refuses such a schema itself; the same file with distinct names reads."""
    path = tmp_path / "twice.csv"
    path.write_text("x,y,z,x\n1,2,3,4\n")
    with pytest.raises(InputError, match=r"twice\.csv: the header row names column 'x' more than once"):
        csv.read(str(path))
    (tmp_path / "gz.csv.gz").write_bytes(gzip.compress(b"x,y,z,w,w\n1,2,3,4,5\n"))
    with pytest.raises(InputError, match="names column 'w' more than once"):
        csv.frame([str(tmp_path / "gz.csv.gz")])
    path.write_text("x,y,z,x.1\n1,2,3,4\n")  # a name that only looks like pandas' renaming is a name
    assert csv.read(str(path)).attributes["x.1"].tolist() == [4]
    # as pandas reads the header (review): after a byte-order mark or a blank line, in a glob's first file
    for n, text in enumerate(["\ufeffx,y,z,x\n1,2,3,4\n", "\nx,y,z,x\n1,2,3,4\n"]):
        (tmp_path / f"odd{n}.csv").write_text(text, encoding="utf-8")
        with pytest.raises(InputError, match="names column 'x' more than once"):
            csv.read(str(tmp_path / f"odd{n}.csv"))
    (tmp_path / "part").mkdir()
    for n in range(2):
        (tmp_path / "part" / f"p{n}.csv").write_text(f"x,y,z,w\n1,2,3,{n}\n")
    assert len(csv.frame([str(tmp_path / "part" / "p*.csv")]).compute()) == 2  # a glob reads
    (tmp_path / "part" / "p0.csv").write_text("x,y,z,z\n1,2,3,4\n")
    with pytest.raises(InputError, match="names column 'z' more than once"):
        csv.frame([str(tmp_path / "part" / "p*.csv")])
    path.write_text("x,y,z,,\n1,2,3,4,5\n")  # empty names are not repeats: pandas names each
    assert sorted(csv.read(str(path)).attributes) == ["Unnamed: 3", "Unnamed: 4"]


def test_a_column_named_like_internal_bookkeeping_is_an_attribute(tmp_path):
    """Regression (hunt): a column ``_row`` -- the name of a pipeline join's own column -- was left
    out of the attributes and of the dropped columns alike: lost without a word."""
    (tmp_path / "p.csv").write_text("x,y,z,_row,val\n1,2,3,7,0.5\n4,5,6,8,0.25\n")
    g = csv.read(str(tmp_path / "p.csv"))
    assert sorted(g.attributes) == ["_row", "val"] and not g.dropped
    np.testing.assert_array_equal(g.attributes["_row"], [7, 8])


@pytest.mark.parametrize("first", ["n", "n_0"])
def test_an_attribute_named_like_another_ones_component_is_refused(tmp_path, first):
    """Review of the hunt's PLY fix: a table split a 3-component ``n`` into columns ``n_0 n_1 n_2``
    over an attribute ``n_0`` (or under it, by order): one of the two was lost."""
    values = {"n": np.arange(6.0).reshape(2, 3), "n_0": np.array([7.0, 8.0])}
    g = Geometry("points", positions=np.zeros((2, 3)),
                 attributes={k: values[k] for k in (first, *(set(values) - {first}))})
    with pytest.raises(InputError, match=r"\['n_0'\] would be written twice"):
        csv.write(str(tmp_path / "t.csv"), g)
    assert not (tmp_path / "t.csv").exists()

