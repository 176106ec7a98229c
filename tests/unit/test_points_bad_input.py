"""Bad input to ``write_points`` / ``read``: the right error type, a message naming the
problem and where, and nothing written (or, over an existing store, nothing changed)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import zarr
from file_tree import tree

import zarr_vectors as zv
from zarr_vectors.errors import InputError, StoreExistsError, StoreNotFoundError, UnsupportedLayoutError
from zarr_vectors.write import vertices as vertex_stage

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")

POS = np.array([[1, 1, 1], [2, 2, 2], [60, 1, 1], [61, 70, 1], [5, 90, 99]], "f8")


def refuses(tmp_path: Path, error: type[Exception], *patterns: str, positions=POS, **kw) -> Exception:
    """write_points must raise ``error`` with every pattern in its message and write nothing."""
    target = tmp_path / "out.zv"
    kw.setdefault("chunk_shape", 50)
    with pytest.raises(error) as info:
        zv.write_points(str(target), positions, **kw)
    message = str(info.value)
    for p in patterns:
        assert p in message, f"{p!r} not in {message!r}"
    assert not target.exists(), "something was written"
    assert os.listdir(tmp_path) == []
    return info.value


# ---------------------------------------------------------------------------
# positions
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_position(tmp_path, bad):
    pos = POS.copy()
    pos[3, 1] = bad
    refuses(tmp_path, InputError, "positions row 3", "not finite", positions=pos)


def test_non_finite_position_in_a_later_dask_block(tmp_path):
    pos = np.random.default_rng(0).uniform(0, 100, (1000, 3)).astype("f4")
    pos[777, 2] = np.nan
    refuses(tmp_path, InputError, "positions row 777", "not finite", positions=da.from_array(pos, chunks=(100, 3)))


def test_dask_blocks_not_as_their_array_declares_are_refused(tmp_path):
    """Regression (hunt): a map_blocks returning float32 blocks of an array declared float64 was
    written as 4-byte rows the metadata called 8-byte ones: exit 0, a store no reader opens.
    Positions are checked by the scan, before anything is written; an attribute's blocks at the
    write, whose remains are removed."""
    pos = np.random.default_rng(0).uniform(0, 100, (1000, 3))
    as_f4 = da.from_array(pos, chunks=(100, 3)).map_blocks(lambda b: b.astype("f4"), dtype="f8")
    refuses(tmp_path, InputError, "positions: the dask block at row 0 is float32 of shape (100, 3), not as the "
            "array declares its rows (float64, 3 columns", "nothing was written", positions=as_f4)
    column = da.from_array(np.arange(1000.0), chunks=100).map_blocks(lambda b: b.astype("f4"), dtype="f8")
    refuses(tmp_path, InputError, "attribute 'a': the dask block at row", "is float32 of shape (100,), the array "
            "declares float64", positions=pos, attributes={"a": column})
    # a block of another row count: shifted every value onto another vertex (review), dropped a vertex, or
    # ended in an IndexError
    longer = da.from_array(np.arange(1000.0), chunks=100).map_blocks(lambda b: np.r_[b[:1] - 1, b], dtype="f8")
    refuses(tmp_path, InputError, "attribute 'a': the dask block at row", "is float64 of shape (101,), the array "
            "declares float64 of shape (100,)", positions=pos, attributes={"a": longer})
    shorter = da.from_array(pos, chunks=(100, 3)).map_blocks(lambda b: b[1:], dtype="f8")
    refuses(tmp_path, InputError, "positions: the dask block at row", "is float64 of shape (99, 3)", positions=shorter)
    ids = da.from_array(np.arange(1000), chunks=100).map_blocks(lambda b: b[1:], dtype="i8")
    refuses(tmp_path, InputError, "object_ids: the dask block at row", "is int64 of shape (99,)", positions=pos,
            object_ids=ids)


@pytest.mark.parametrize("given", ["directory", "link"])
def test_a_failed_write_removes_what_it_wrote_and_nothing_else(tmp_path, given):
    """A write failing after it began removes its documents (which read as an empty store), but a
    directory the user made (or linked), and what listings skip in it, stay (review)."""
    pos = np.random.default_rng(0).uniform(0, 100, (1000, 3))
    column = da.from_array(np.arange(1000.0), chunks=100).map_blocks(lambda b: b.astype("f4"), dtype="f8")
    (tmp_path / "made").mkdir()
    (tmp_path / "made" / ".tmp-notes.txt").write_text("keep")
    out = tmp_path / "made" if given == "directory" else tmp_path / "link"
    if given == "link":
        out.symlink_to(tmp_path / "made")
    with pytest.raises(InputError, match="the dask block at row"):
        zv.write_points(str(out), pos, chunk_shape=50, attributes={"a": column})
    assert os.listdir(out) == [".tmp-notes.txt"] and (out / ".tmp-notes.txt").read_text() == "keep"
    assert out.is_symlink() == (given == "link")
    with pytest.raises(InputError, match="the dask block at row"):  # a path that was not there: gone again
        zv.write_points(str(tmp_path / "new.zv"), pos, chunk_shape=50, attributes={"a": column})
    assert not (tmp_path / "new.zv").exists()


def test_names_beyond_the_writers_limits_in_a_store_still_read(monkeypatch):
    """A 300-byte edge attribute name (S3 and memory keys hold it) written by a writer without the
    255-byte limit: the limit is the writers', names found in a store read as they are (review)."""
    from zarr_vectors.format import paths

    url = f"memory://long-names/{os.getpid()}.zv"
    name = "w" * 300
    with monkeypatch.context() as patch:
        patch.setattr(paths, "MAX_NAME_BYTES", 1000)
        zv.write_graph(url, POS, np.array([[0, 1], [1, 2]]), chunk_shape=50, edge_attributes={name: np.ones(2)})
    got = zv.read(url)
    assert list(got.edge_attributes) == [name] and len(got.edges) == 2
    with pytest.raises(InputError, match="300 bytes in UTF-8"):
        zv.write_graph(url, POS, np.array([[0, 1]]), chunk_shape=50, edge_attributes={name: np.ones(1)},
                       overwrite=True)


def test_dask_arrays_of_unknown_chunk_sizes_are_refused_naming_them(tmp_path):
    """Regression (hunt): a dataframe's to_dask_array() ended in "cannot convert float NaN to integer"."""
    import dask.dataframe as dd
    import pandas as pd

    frame = dd.from_pandas(pd.DataFrame(POS, columns=list("xyz")), npartitions=2)
    refuses(tmp_path, InputError, "positions is a dask array of unknown chunk sizes", "lengths=True",
            positions=frame.to_dask_array())
    refuses(tmp_path, InputError, "attribute 'x' is a dask array of unknown chunk sizes",
            attributes={"x": frame["x"].to_dask_array()})


def test_non_finite_position_in_a_later_numpy_block(tmp_path, zv_config):
    zv_config("write.block-rows", 64)
    pos = np.random.default_rng(0).uniform(0, 100, (500, 2))
    pos[321, 0] = np.inf
    refuses(tmp_path, InputError, "positions row 321", positions=pos, chunk_shape=10)


@pytest.mark.parametrize("rows", [3, 1], ids=["one block", "a block per point"])
@pytest.mark.parametrize("far", [
    [1e18, 1e18, 1e18],  # a grid of 10^54 cells
    [1e19, 0, 0],  # one axis past int64
    [-1e19, 5, 5],  # below it: once taken with an origin of -2**63
    [3.4e38, 3.4e38, 3.4e38],  # float32's sentinel
], ids=["huge grid", "past int64", "below int64", "float32 max"])
def test_a_grid_too_large_to_address_is_refused(tmp_path, zv_config, rows, far):
    """Each block counts its cells on its own grid: one spanning the far point is itself
    too large; blocks of one point each are not, but the store's grid still is."""
    zv_config("write.block-rows", rows)
    zv_config("write.min-block-rows", 1)
    pos = np.array([[0, 0, 0], [1, 2, 3], far], "f4" if far[0] == 3.4e38 else "f8")
    refuses(tmp_path, InputError, "too large to address", positions=pos, chunk_shape=1)


def test_a_float32_value_on_a_declared_bound_that_rounds_past_it_is_refused(tmp_path):
    """float32(0.3) is on the bound 0.3 in its own dtype, but 0.30000001 / 0.1 is chunk 3 of a
    grid [0, 0.3] ends at chunk 2: a typed error, not an index error from numpy."""
    pos = np.array([[0.05, 0.05, 0.05], [0.3, 0.05, 0.05]], "f4")
    refuses(tmp_path, InputError, "outside the chunk grid of the declared bounds", "widen the bounds",
            positions=pos, chunk_shape=0.1, bounds=([0, 0, 0], [0.3, 0.3, 0.3]))


def test_position_outside_declared_bounds(tmp_path):
    refuses(
        tmp_path,
        InputError,
        "positions row 3",
        "outside the declared bounds",
        bounds=[[0, 0, 0], [100, 60, 100]],  # row 3 has y = 70
    )


def test_position_below_declared_bounds(tmp_path):
    pos = POS.copy()
    pos[4, 0] = -0.5
    refuses(tmp_path, InputError, "positions row 4", "outside the declared bounds", positions=pos, bounds=[[0, 0, 0], [100, 100, 100]])


def test_points_on_the_bounds_are_inside(tmp_path):
    zv.write_points(str(tmp_path / "ok.zv"), POS, chunk_shape=50, bounds=[[1, 1, 1], [61, 90, 99]])
    assert len(zv.read(str(tmp_path / "ok.zv"))) == 5


@pytest.mark.parametrize(
    ("bounds", "text"),
    [([[0, 0], [1, 1]], "bounds must be [min[3], max[3]]"), ([[5, 0, 0], [1, 1, 1]], "min <= max"),
     ([[0, 0, np.nan], [1, 1, 1]], "bounds"),
     # regressions (hunt): numpy's own errors, naming no argument
     ("abc", "bounds is not an array of numbers"), ({"lo": 0}, "bounds is not an array of numbers")],
)
def test_bad_bounds_argument(tmp_path, bounds, text):
    refuses(tmp_path, InputError, text, bounds=bounds)


@pytest.mark.parametrize(
    ("positions", "text"),
    [
        (POS.astype("i8"), "positions dtype int64 is unsupported"),
        (POS.astype("f2"), "positions dtype float16 is unsupported"),
        (POS[:, 0], "positions must have shape (n, ndim)"),
        (np.zeros((3, 0)), "positions must have shape (n, ndim)"),
        ([[0, 0, 0], [1, 1]], "positions is not an array of numbers"),  # regression (hunt): numpy's ValueError
    ],
)
def test_bad_positions_array(tmp_path, positions, text):
    refuses(tmp_path, InputError, text, positions=positions)


def test_empty_positions(tmp_path):
    refuses(tmp_path, InputError, "positions is empty", positions=np.zeros((0, 3), "f4"))


# ---------------------------------------------------------------------------
# chunk and bin shapes
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kw", "text"),
    [
        ({"chunk_shape": [50, 50]}, "chunk_shape has 2 entries but positions have 3 columns"),
        ({"chunk_shape": [50, 50, 50, 50]}, "chunk_shape has 4 entries"),
        ({"chunk_shape": [50, 0, 50]}, "chunk_shape entries must be finite and > 0"),
        ({"chunk_shape": -5}, "chunk_shape entries must be finite and > 0"),
        ({"chunk_shape": [50, np.inf, 50]}, "chunk_shape entries must be finite and > 0"),
        ({"bin_shape": [25, 25]}, "bin_shape has 2 entries but positions have 3 columns"),
        ({"bin_shape": [25, 30, 25]}, "bin_shape [25.0, 30.0, 25.0] does not divide chunk_shape [50.0, 50.0, 50.0]"),
        ({"bin_shape": 100}, "does not divide chunk_shape"),
        ({"bin_shape": [25, 25, -25]}, "bin_shape entries must be finite and > 0"),
        ({"bin_shape": 0.01}, "bins per chunk exceeds"),
        # regressions (hunt): Python's TypeError / ValueError, or a string or bool taken as a number
        ({"chunk_shape": None}, "chunk_shape must be a number or one number per axis, found None"),
        ({"chunk_shape": [50, "a", 50]}, "chunk_shape must be a number or one number per axis"),
        ({"chunk_shape": "50"}, "chunk_shape must be a number or one number per axis, found '50'"),
        ({"chunk_shape": True}, "chunk_shape must be a number or one number per axis, found True"),
        ({"bin_shape": [25, None, 25]}, "bin_shape must be a number or one number per axis"),
    ],
)
def test_bad_chunk_or_bin_shape(tmp_path, kw, text):
    refuses(tmp_path, InputError, text, **kw)


# ---------------------------------------------------------------------------
# attributes and ids
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("attributes", "texts"),
    [
        ({"rgb": np.zeros((4, 3), "u1")}, ["attribute 'rgb'", "(4, 3)", "expected (5,) or (5, channels)"]),
        ({"w": np.zeros(6)}, ["attribute 'w'", "(6,)"]),
        ({"cube": np.zeros((5, 2, 2))}, ["attribute 'cube'", "(5, 2, 2)"]),
        # regression (hunt): a TRK or TRX column of no values wrote a store no reader opens
        ({"none": np.zeros((5, 0))}, ["attribute 'none'", "(5, 0)", "at least one channel"]),
        ({"label": np.array(["a"] * 5)}, ["attribute 'label'", "unsupported dtype <U1"]),
        ({"z": np.zeros(5, "c8")}, ["attribute 'z'", "unsupported dtype complex64"]),
        ({"o": np.array([None] * 5)}, ["attribute 'o'", "unsupported dtype object"]),
        ({"a/b": np.zeros(5)}, ["invalid attribute name 'a/b'"]),
        ({"": np.zeros(5)}, ["invalid attribute name ''"]),
        ({"a\tb": np.zeros(5)}, ["invalid attribute name 'a\\tb'", "no control character"]),
        ({"a\x00": np.zeros(5)}, ["invalid attribute name 'a\\x00'"]),
        # regressions (hunt): written and validated, never read back (listings skip '.tmp-' names) ...
        ({".tmp-mass": np.zeros(5)}, ["invalid attribute name '.tmp-mass'", "names beginning '.tmp-'"]),
        # ... or failing half-way through the write, leaving an empty store that read and validated
        ({"zarr.json": np.zeros(5)}, ["invalid attribute name 'zarr.json'"]),
        ({"\ud800": np.zeros(5)}, ["not encodable as UTF-8"]),
        ({"y" * 256: np.zeros(5)}, ["256 bytes in UTF-8, more than the 255"]),
        ({"é" * 128: np.zeros(5)}, ["256 bytes in UTF-8"]),
        # float128 passed the dtype-kind check into a store no reader opens
        ({"ld": np.zeros(5, np.longdouble)}, ["attribute 'ld'", f"unsupported dtype {np.dtype(np.longdouble)}"]),
    ],
)
def test_bad_vertex_attribute(tmp_path, attributes, texts):
    refuses(tmp_path, InputError, *texts, attributes=attributes)


@pytest.mark.parametrize(
    ("ids", "text"),
    [
        (np.array([0, 1, 2, 3]), "object_ids must have shape (5,), found (4,)"),
        (np.zeros((5, 1), "i8"), "object_ids must have shape (5,), found (5, 1)"),
        (np.array([0.0, 1, 2, 3, 4]), "object_ids dtype float64 is unsupported"),
        (np.array(["a", "b", "c", "d", "e"]), "object_ids dtype <U1 is unsupported"),
    ],
)
def test_bad_object_ids(tmp_path, ids, text):
    refuses(tmp_path, InputError, text, object_ids=ids)


def test_negative_object_ids(tmp_path):
    refuses(tmp_path, InputError, "object_ids must be >= 0", "-3", object_ids=np.array([0, 1, -3, 2, -1]))


def test_negative_object_ids_names_the_row(tmp_path):
    refuses(tmp_path, InputError, "row 2", object_ids=np.array([0, 1, -3, 2, -1]))


def test_object_id_above_the_format_limit(tmp_path):
    refuses(tmp_path, InputError, "object id 67108864 exceeds", object_ids=np.array([0, 1, 2, 3, 2**26]))
    # regression (hunt): a dask uint64 id of 2**64 - 1 was cast to int64 first, and reported as "found -1"
    ids = np.array([0, 1, 2, 3, 2**64 - 1], np.uint64)
    for given in (ids, da.from_array(ids, chunks=2)):
        refuses(tmp_path, InputError, "object id 18446744073709551615 at row 4 exceeds the format's limit",
                object_ids=given)


def test_object_attributes_without_object_ids(tmp_path):
    refuses(tmp_path, InputError, "object_attributes need object_ids", object_attributes={"w": np.ones(3)})


def test_object_attribute_wrong_length(tmp_path):
    refuses(
        tmp_path,
        InputError,
        "object attribute 'w' has 4 rows; expected 6",
        object_ids=np.array([0, 5, 2, 2, 1]),
        object_attributes={"w": np.ones(4)},
    )


@pytest.mark.parametrize("shape", [(5, 2, 2), (5, 0)])
def test_object_attribute_wrong_rank(tmp_path, shape):
    """(5, 0): regression (hunt), a TRK or TRX per-streamline column of no values built a store
    whose object attribute array had a chunk length 0, which no reader opens."""
    refuses(
        tmp_path,
        InputError,
        "object attribute 'w' must be 1-D or 2-D with at least one channel",
        object_ids=np.arange(5),
        object_attributes={"w": np.ones(shape)},
    )


@pytest.mark.parametrize("values", [np.ones(5, bool), np.array(["a"] * 5)])
def test_object_attribute_without_absence_sentinel(tmp_path, values):
    refuses(tmp_path, InputError, "has no absence sentinel", object_ids=np.arange(5), object_attributes={"w": values})


def test_object_attribute_without_absence_sentinel_names_it(tmp_path):
    refuses(tmp_path, InputError, "'flag'", object_ids=np.arange(5), object_attributes={"flag": np.ones(5, bool)})


def test_unsupported_compressor(tmp_path):
    refuses(tmp_path, InputError, "unsupported compressor 'lz4'", compressor="lz4")
    refuses(tmp_path, InputError, "unsupported compressor {'id': 'zstd'}", compressor={"id": "zstd"})
    # regression (hunt): a MetadataError pointing into '<argument>'
    refuses(tmp_path, InputError, "compressor {'name': 'zstd', 'configuration': {'level': 99}}: ",
            compressor={"name": "zstd", "configuration": {"level": 99}})


def test_gzip_compressor_by_name_as_documented(tmp_path):
    """Regression (hunt): WriteOptions said "gzip"; only the codec object was taken."""
    zv.write_points(str(tmp_path / "g.zv"), POS, chunk_shape=50, compressor="gzip")
    codecs = json.loads((tmp_path / "g.zv" / "0" / "vertices" / "zarr.json").read_text())["codecs"]
    assert {"name": "gzip", "configuration": {"level": 5}} in codecs
    np.testing.assert_array_equal(np.sort(zv.read(str(tmp_path / "g.zv")).positions, axis=0), np.sort(POS, axis=0))


@pytest.mark.parametrize(("kw", "text"), [
    ({"attributes": [("a", np.zeros(5))]}, "attributes must be a mapping of names to columns, found list"),
    ({"storage_options": 5}, "storage_options must be a mapping of option names to values, found 5"),
    ({"compressor": 5}, "compressor must be a name, a codec object or None, found 5"),
])  # fmt: skip
def test_arguments_of_the_wrong_type_are_named(tmp_path, kw, text):
    """Regressions (hunt): AttributeError / TypeError from deep inside, naming no argument."""
    refuses(tmp_path, InputError, text, **kw)


@pytest.mark.parametrize("url", [None, b"/tmp/x.zv"])
def test_a_store_url_that_is_no_string_or_path_is_named(tmp_path, url):
    with pytest.raises(InputError, match="a store URL is a string or a path, found"):
        zv.write_points(url, POS, chunk_shape=50)


def test_a_store_path_below_a_file_is_named(tmp_path):
    """Regression (hunt): NotADirectoryError from the first write, naming a temporary file."""
    (tmp_path / "data.csv").write_text("x")
    with pytest.raises(InputError, match=r"data\.csv/out\.zv' is below '.*data\.csv', which is not a directory"):
        zv.write_points(str(tmp_path / "data.csv" / "out.zv"), POS, chunk_shape=50)
    with pytest.raises(InputError, match=r"data\.csv' is a file, not a directory"):
        zv.write_points(str(tmp_path / "data.csv"), POS, chunk_shape=50, overwrite=True)
    assert sorted(os.listdir(tmp_path)) == ["data.csv"] and (tmp_path / "data.csv").read_text() == "x"


# ---------------------------------------------------------------------------
# 4 GiB cells (D13)
# ---------------------------------------------------------------------------
def test_cell_that_would_reach_4_gib(tmp_path, monkeypatch):
    # 24 bytes per float64 row; chunk 1.0.0 holds 3 rows = 72 bytes, every other chunk fewer
    pos = np.array([[1, 1, 1], [60, 1, 1], [70, 2, 2], [80, 3, 3], [-10, 1, 1], [1, 60, 1]], "f8")
    monkeypatch.setattr(vertex_stage, "MAX_CELL_BYTES", 71)
    refuses(tmp_path, InputError, "chunk 1.0.0", "3 vertices", "72 bytes", "4 GiB", "smaller chunk_shape", positions=pos)
    monkeypatch.setattr(vertex_stage, "MAX_CELL_BYTES", 72)
    zv.write_points(str(tmp_path / "fits.zv"), pos, chunk_shape=50)
    assert len(zv.read(str(tmp_path / "fits.zv"))) == 6


def test_cell_size_counts_the_widest_attribute(tmp_path, monkeypatch):
    pos = np.array([[1, 1, 1], [2, 2, 2], [-60, 1, 1]], "f4")  # 12-byte rows
    monkeypatch.setattr(vertex_stage, "MAX_CELL_BYTES", 100)
    # an 8-channel float64 attribute makes rows 64 bytes: chunk 0.0.0 would hold 128
    refuses(tmp_path, InputError, "chunk 0.0.0", "128 bytes", positions=pos, attributes={"m": np.zeros((3, 8))})


# ---------------------------------------------------------------------------
# existing stores
# ---------------------------------------------------------------------------
@pytest.fixture
def existing(tmp_path):
    path = tmp_path / "old.zv"
    zv.write_points(str(path), POS, chunk_shape=50, object_ids=np.arange(5), object_attributes={"w": np.arange(5.0)})
    return path, tree(path)


def test_existing_store_without_overwrite(existing):
    path, before = existing
    with pytest.raises(StoreExistsError) as info:
        zv.write_points(str(path), POS[:2], chunk_shape=10)
    assert str(path) in str(info.value) and "overwrite=True" in str(info.value)
    assert tree(path) == before


@pytest.mark.parametrize(
    "kw",
    [
        {"positions": np.where(np.arange(15).reshape(5, 3) == 7, np.nan, POS)},
        {"bounds": [[0, 0, 0], [10, 10, 10]]},
        {"object_ids": np.arange(5), "object_attributes": {"w": np.ones(2)}},
        {"chunk_shape": [1, 2]},
        {"attributes": {"a": np.ones(3)}},
    ],
)
def test_overwrite_with_bad_input_keeps_the_old_store(existing, kw):
    path, before = existing
    args = {"positions": POS, "chunk_shape": 50} | kw
    with pytest.raises(InputError):
        zv.write_points(str(path), args.pop("positions"), overwrite=True, **args)
    assert tree(path) == before
    np.testing.assert_array_equal(zv.read(str(path)).object_attributes["w"], np.arange(5.0))


def test_overwrite_with_oversized_cell_keeps_the_old_store(existing, monkeypatch):
    path, before = existing
    monkeypatch.setattr(vertex_stage, "MAX_CELL_BYTES", 10)
    with pytest.raises(InputError, match="smaller chunk_shape"):
        zv.write_points(str(path), POS, chunk_shape=50, overwrite=True)
    assert tree(path) == before


@pytest.mark.parametrize("stranger", ["notes.txt", "sub/keep.txt", ".git/HEAD", "01/x",
                                      "0/results.csv", "1/run/log.txt",  # a folder of numbered runs
                                      "0/vertices/log.txt", "0/zarr.json"])  # ... whose names are a level's
def test_overwrite_never_empties_what_is_not_a_store(tmp_path, stranger):
    """Regression (hunt): ``overwrite`` deleted whatever the path held -- pointed at a project
    directory it emptied it, the build's own input included.  A store's top holds its levels,
    ``zarr.json`` and our ``.zv-`` working entries only; anything else is refused, untouched."""
    path = tmp_path / "here"
    (path / stranger).parent.mkdir(parents=True, exist_ok=True)
    (path / stranger).write_text("keep")
    (path / "0").mkdir(exist_ok=True)  # with a level beside it, as a store written into a used directory would have
    with pytest.raises(InputError, match=r"which no Zarr Vectors store holds: not deleting it"):
        zv.write_points(str(path), POS, chunk_shape=50, overwrite=True)
    assert (path / stranger).read_text() == "keep"


@pytest.mark.parametrize("value", ["False", "no", 1, None])
def test_overwrite_takes_only_true_or_false(existing, value):
    """Regression (hunt): any truthy value -- ``overwrite="False"`` -- replaced the store."""
    path, before = existing
    with pytest.raises(InputError, match=f"overwrite must be True or False, found {value!r}"):
        zv.write_points(str(path), POS[:2], chunk_shape=10, overwrite=value)
    assert tree(path) == before
    zv.write_points(str(path), POS[:2], chunk_shape=10, overwrite=np.True_)  # numpy's bool is a bool
    assert len(zv.read(str(path))) == 2


def test_overwrite_never_empties_another_zarr(tmp_path):
    """Regression (hunt): an OME-Zarr image has a root zarr.json and numbered levels, as a store
    does; ``overwrite=True`` deleted it."""
    image = zarr.open_group(str(tmp_path / "image.ome.zarr"), mode="w")
    image.attrs["ome"] = {"multiscales": [{"datasets": [{"path": "0"}]}]}
    image.create_array("0", shape=(8, 8), dtype="u1")[:] = 7
    before = tree(tmp_path / "image.ome.zarr")
    with pytest.raises(InputError, match=r"holds 'zarr.json \(not a Zarr Vectors root document\)'"):
        zv.write_points(str(tmp_path / "image.ome.zarr"), POS, chunk_shape=50, overwrite=True)
    assert tree(tmp_path / "image.ome.zarr") == before


def test_overwrite_replaces_a_half_written_store(tmp_path):
    """What a write stopped before its root document leaves (levels with their documents, which a
    level's first batch holds, and a staging area) is a store's."""
    zv.write_points(str(tmp_path / "other.zv"), POS, chunk_shape=50)
    path = tmp_path / "half.zv"
    (path / "0" / "vertices" / "c").mkdir(parents=True)
    (path / "0" / "vertices" / "c" / "0").write_bytes(b"x")
    (path / "0" / "zarr.json").write_bytes((tmp_path / "other.zv" / "0" / "zarr.json").read_bytes())
    (path / ".zv-shard-staging").mkdir()
    zv.write_points(str(path), POS, chunk_shape=50, overwrite=True)
    assert sorted(map(tuple, zv.read(str(path)).positions.tolist())) == sorted(map(tuple, POS.tolist()))
    assert not (path / ".zv-shard-staging").exists()


def test_overwrite_with_good_input_replaces(existing):
    path, _ = existing
    zv.write_points(str(path), POS[:2], chunk_shape=10, overwrite=True)
    assert not (path / "0" / "object_index").exists()
    assert not (path / "0" / "object_attributes").exists()
    np.testing.assert_array_equal(zv.read(str(path)).positions, POS[:2])


# ---------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("bbox", "message"),
    [
        ([[0, 0], [1, 1]], r"bbox corners hold 2 numbers each, but the store's positions are 3-D"),
        ([[0, 0, 0, 0], [1, 1, 1, 1]], r"bbox corners hold 4 numbers each, but the store's positions are 3-D"),
        ([[5, 0, 0], [1, 1, 1]], r"bbox must be \[min\[3\], max\[3\]\] with min <= max"),
        ([[np.nan, 0, 0], [1, 1, 1]], r"bbox must be \[min\[3\], max\[3\]\] with min <= max"),
        ([0, 0, 0, 1, 1, 1], r"bbox must be \[min\[3\], max\[3\]\] with min <= max"),
        ("everything", r"bbox must be \[min\[3\], max\[3\]\] numbers"),
    ],
)
def test_bad_bbox_on_read(existing, bbox, message):
    path, _ = existing
    with pytest.raises(InputError, match=message):
        zv.read(str(path), bbox=bbox)


def test_read_missing_store(tmp_path):
    with pytest.raises(StoreNotFoundError, match="no Zarr Vectors store"):
        zv.read(str(tmp_path / "missing.zv"))
    assert os.listdir(tmp_path) == []


def test_read_missing_level(existing):
    path, _ = existing
    with pytest.raises(InputError, match="no level 1"):
        zv.read(str(path), level=1)


# ---------------------------------------------------------------------------
# object_index layouts (D1)
# ---------------------------------------------------------------------------
def _set_layout(path: Path, layout: str) -> None:
    meta = path / "0/object_index/zarr.json"
    d = json.loads(meta.read_bytes())
    d["attributes"]["layout"] = layout
    meta.write_text(json.dumps(d))


@pytest.mark.parametrize("layout", ["vlen_manifests_v2", "foo", "vlen_manifests_v3"])
def test_unsupported_object_index_layout(existing, layout):
    path, _ = existing
    _set_layout(path, layout)
    with pytest.raises(UnsupportedLayoutError) as info:
        zv.read(str(path))
    assert repr(layout) in str(info.value)
    assert (info.value.file, info.value.pointer) == ("0/object_index/zarr.json", "/attributes/layout")
    if layout == "vlen_manifests_v2":
        assert "allow_layouts" in str(info.value)
    with pytest.raises(UnsupportedLayoutError):  # opting in to v2 does not admit anything else
        zv.read(str(path), allow_layouts=("vlen_manifests_v2", layout) if layout != "vlen_manifests_v2" else ())


def test_v2_layout_read_by_explicit_opt_in(tmp_path):
    path = tmp_path / "v2.zv"
    pos = np.array([[1, 1, 1], [60, 1, 1], [2, 2, 2], [61, 2, 2]], "f4")
    zv.write_points(str(path), pos, chunk_shape=50, object_ids=[0, 2, 2, 0], object_attributes={"w": np.array([1.0, 2.0, 3.0])})
    _set_layout(path, "vlen_manifests_v2")
    # v2: row r belongs to object_ids[r] (docs/format.md §6.7); written with zarr-python
    zarr.create_array(str(path / "0/object_index/object_ids"), data=np.array([10, 20, 30], "i8"), fill_value=0, compressors=None)
    data = zv.read(str(path), allow_layouts=("vlen_manifests_v2",))
    np.testing.assert_array_equal(data.positions, pos[[0, 2, 3, 1]])
    np.testing.assert_array_equal(data.object_ids, [10, 30, 10, 30])
    np.testing.assert_array_equal(data.objects, [10, 20, 30])
    np.testing.assert_array_equal(data.object_attributes["w"], [1.0, 2.0, 3.0])  # aligned with rows
