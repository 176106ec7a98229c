"""LAS / LAZ written by laspy (extra bytes too) -> read (whole, and in point ranges) -> written -> read by laspy."""

from __future__ import annotations

import re

import laspy
import numpy as np
import pytest

from zarr_vectors.errors import InputError
from zarr_vectors.io import las


def _cloud(path, n=50, seed=0):
    rng = np.random.default_rng(seed)
    header = laspy.LasHeader(point_format=3, version="1.2")
    header.scales, header.offsets = [0.001] * 3, [100.0, 200.0, 0.0]
    header.add_extra_dims([laspy.ExtraBytesParams("temperature", np.float32),
                           laspy.ExtraBytesParams("normal", "3f8")])
    data = laspy.LasData(header)
    data.x, data.y, data.z = 100 + rng.random(n) * 50, 200 + rng.random(n) * 50, rng.random(n) * 10
    data.intensity = rng.integers(0, 65535, n)
    data.classification = rng.integers(0, 20, n)
    data.return_number = rng.integers(1, 4, n)
    data.gps_time = rng.random(n) * 1e5
    data.red = rng.integers(0, 65535, n)
    data.temperature = rng.random(n).astype(np.float32)
    data.normal = rng.random((n, 3))
    data.write(str(path))
    return laspy.read(str(path))


@pytest.mark.parametrize("suffix", [".las", ".laz"])
def test_every_point_dimension_is_an_attribute(tmp_path, suffix):
    truth = _cloud(tmp_path / f"c{suffix}")
    g = las.read(str(tmp_path / f"c{suffix}"))
    np.testing.assert_array_equal(g.positions, np.stack([truth.x, truth.y, truth.z], axis=1))
    dims = [d for d in truth.point_format.dimension_names if d not in ("X", "Y", "Z", "normal")]
    assert set(g.attributes) == set(dims) | {"normal_0", "normal_1", "normal_2"}
    for d in dims:
        np.testing.assert_array_equal(g.attributes[d], np.asarray(truth[d]))
    np.testing.assert_array_equal(g.attributes["normal_1"], np.asarray(truth["normal"])[:, 1])
    assert g.dropped == ()


def test_large_files_are_read_in_point_ranges(tmp_path, zv_config):
    truth = _cloud(tmp_path / "c.laz", n=101)
    zv_config("sources.las-chunk-points", 20)
    frame = las.frame([str(tmp_path / "c.laz")])
    assert frame.npartitions == 6  # 5 x 20 + 1
    got = frame.compute(scheduler="sync")
    np.testing.assert_array_equal(got["x"].to_numpy(), np.asarray(truth.x))
    np.testing.assert_array_equal(got["temperature"].to_numpy(), np.asarray(truth.temperature))
    np.testing.assert_array_equal(las.read(str(tmp_path / "c.laz")).positions[:, 2], np.asarray(truth.z))


@pytest.mark.parametrize("suffix", [".las", ".laz"])
def test_written_files_read_back_by_laspy(tmp_path, suffix):
    _cloud(tmp_path / "c.las")
    g = las.read(str(tmp_path / "c.las"))
    g.object_ids = np.arange(len(g.positions), dtype=np.int64) % 3
    las.write(str(tmp_path / f"out{suffix}"), g)
    back = laspy.read(str(tmp_path / f"out{suffix}"))
    np.testing.assert_allclose(np.stack([back.x, back.y, back.z], axis=1), g.positions, rtol=0, atol=1e-9)
    for name in ("intensity", "classification", "return_number", "gps_time", "red", "temperature", "normal_2"):
        np.testing.assert_array_equal(np.asarray(back[name]), g.attributes[name])
    np.testing.assert_array_equal(np.asarray(back["object_id"]), g.object_ids)
    assert back.header.point_format.id == 3


def test_a_file_that_is_not_las_names_itself(tmp_path):
    (tmp_path / "bad.las").write_bytes(b"not a las file at all")
    with pytest.raises(InputError, match=r"bad\.las' cannot be read"):
        las.read(str(tmp_path / "bad.las"))


def _points(attributes, n=20):
    from zarr_vectors.io.types import Geometry

    return Geometry(kind="points", positions=np.random.default_rng(0).uniform(0, 10, (n, 3)), attributes=attributes)


def test_waveform_dimensions_say_why_no_format_holds_them(tmp_path):
    """Hunt: the message was "no LAS point format holds the dimensions [...] together"."""
    with pytest.raises(InputError, match=r"waveform packet dimensions \['wavepacket_index'\] .* export to a table"):
        las.write(str(tmp_path / "out.las"), _points({"wavepacket_index": np.arange(20, dtype=np.uint8)}))
    assert not (tmp_path / "out.las").exists()


@pytest.mark.parametrize(("name", "values", "held"), [
    ("intensity", np.linspace(0, 1, 20, dtype=np.float32), "integers 0..65535"),  # laspy cast it to 0 everywhere
    ("intensity", np.full(20, np.nan, dtype=np.float32), "integers 0..65535"),
    ("intensity", -np.arange(20), "integers 0..65535"),
    ("classification", np.full(20, 300), "integers 0..255"),  # the widest format's field is named
    ("return_number", np.arange(20), "integers 0..15"),
])
def test_an_attribute_a_standard_dimension_cannot_hold_is_refused_and_nothing_is_written(tmp_path, name, values, held):
    out = tmp_path / "out.las"
    with pytest.raises(InputError, match=rf"attribute '{name}' .* standard '{name}' dimension, which holds {held}"):
        las.write(str(out), _points({name: values}))
    assert not out.exists()


@pytest.mark.parametrize(("name", "values", "fmt"), [
    ("intensity", np.arange(20, dtype=np.float32), 0),  # whole numbers in range: held exactly
    ("classification", np.arange(20) * 10, 6),  # past format 0's five bits: a format with eight
    ("gps_time", np.arange(20, dtype=np.float32) / 3, 1),
    ("gps_time", np.arange(20), 1),
    ("synthetic", np.ones(20, dtype=bool), 0),
    ("temperature", np.arange(20, dtype=np.float32) / 7, 0),  # not a standard name: extra bytes
])
def test_attributes_are_written_exactly(tmp_path, name, values, fmt):
    las.write(str(tmp_path / "out.las"), _points({name: values}))
    back = laspy.read(str(tmp_path / "out.las"))
    np.testing.assert_array_equal(np.asarray(back[name]), values)
    assert back.header.point_format.id == fmt


def _patched(path, offset, data):
    raw = bytearray(path.read_bytes())
    raw[offset:offset + len(data)] = data
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("suffix", [".las", ".laz"])
def test_a_header_that_cannot_be_the_file_is_refused_before_any_read(tmp_path, suffix):
    """Regression (hunt): a zero scale read every point as the offset; a truncated file ended in
    laspy's ValueError; a 35 KB file claiming 4.3e9 points was planned into 2,148 read ranges."""
    import struct

    path = tmp_path / f"c{suffix}"
    _cloud(path)
    good = path.read_bytes()
    _patched(path, 131, struct.pack("<3d", 0.0, 0.0, 0.0))  # the x, y, z scale factors
    with pytest.raises(InputError, match=r"scales \[0\.0, 0\.0, 0\.0\] are not finite non-zero"):
        las.frame([str(path)])
    path.write_bytes(good)
    _patched(path, 107, struct.pack("<I", 0xFFFFFFF0))  # the (legacy) point count
    with pytest.raises(InputError, match=r"claims 4294967280 points"):
        las.frame([str(path)])
    with pytest.raises(InputError, match=r"claims 4294967280 points"):
        las.read(str(path))
    if suffix == ".las":
        path.write_bytes(good[: len(good) // 2])
        with pytest.raises(InputError, match=r"claims 50 points of \d+ bytes, but the file has \d+ bytes of points"):
            las.frame([str(path)])


def test_a_file_of_no_points_reads_as_no_points(tmp_path):
    """Regression (hunt): a valid LAS of 0 points ended the build in an IndexError traceback
    (its one read range seeked to point 0)."""
    laspy.LasData(laspy.LasHeader(point_format=1, version="1.2")).write(str(tmp_path / "e.las"))
    assert len(las.frame([str(tmp_path / "e.las")]).compute(scheduler="sync")) == 0
    assert len(las.read(str(tmp_path / "e.las")).positions) == 0


def test_a_count_below_the_points_stored_is_refused(tmp_path):
    """Regression (hunt): a LAS 1.2 header counting 10 of its 50 points read 10, without a word.
    Extended VLRs after the points (1.4) are no points."""
    import struct

    from laspy.vlrs.vlrlist import VLRList

    path = tmp_path / "c.las"
    _cloud(path)
    _patched(path, 107, struct.pack("<I", 10))  # the (legacy) point count
    with pytest.raises(InputError, match=r"claims 10 points, but \d+ or more bytes follow them: room for more"):
        las.frame([str(path)])
    header = laspy.LasHeader(point_format=6, version="1.4")
    data = laspy.LasData(header)
    data.x, data.y, data.z = np.arange(5.0), np.arange(5.0), np.arange(5.0)
    data.evlrs = VLRList([laspy.VLR(user_id="test", record_id=1, description="after", record_data=b"\0" * 200)])
    data.write(str(tmp_path / "e.las"))
    assert len(las.frame([str(tmp_path / "e.las")]).compute(scheduler="sync")) == 5
    empty = laspy.LasData(laspy.LasHeader(point_format=6, version="1.4"))  # no points: the EVLRs start where
    empty.evlrs = VLRList([laspy.VLR(user_id="test", record_id=1, description="after", record_data=b"\0" * 100)])
    empty.write(str(tmp_path / "n.las"))  # they would have (review: refused as 5 point records)
    assert len(las.frame([str(tmp_path / "n.las")]).compute(scheduler="sync")) == 0


@pytest.mark.parametrize("cut", ["truncated", "count"])
def test_a_laz_its_decompressor_cannot_read_names_the_file(tmp_path, cut):
    """Regression (hunt): a truncated LAZ, and one counting more points than its chunks hold, ended
    the build in a lazrs traceback."""
    import struct

    header = laspy.LasHeader(point_format=7, version="1.4")
    data = laspy.LasData(header)
    rng = np.random.default_rng(1)
    data.x, data.y, data.z = rng.random(1000) * 100, rng.random(1000) * 100, rng.random(1000) * 10
    data.write(str(tmp_path / "g.laz"))
    raw = bytearray((tmp_path / "g.laz").read_bytes())
    if cut == "truncated":
        raw = raw[: len(raw) // 2]
    else:
        struct.pack_into("<Q", raw, 247, 60_000)  # more than its one chunk of 50,000 (within: see DESIGN)
    (tmp_path / "b.laz").write_bytes(raw)
    with pytest.raises(InputError, match=r"b\.laz' cannot be read: LazrsError"):
        las.frame([str(tmp_path / "b.laz")]).compute(scheduler="sync")


def test_written_coordinates_keep_every_digit_the_grid_can_hold(tmp_path):
    """Regression (hunt): the writer's fixed scale of 0.001 rounded a survey cloud at 0.0001 (and
    every coordinate finer than a millimetre) without a word.  The grid is the coarsest power of
    ten the coordinates lie on; coordinates on none are rounded to the finest that holds the
    extent, with a warning."""
    import warnings

    from zarr_vectors.io.types import Geometry

    rng = np.random.default_rng(4)
    survey = np.column_stack([500_000 + rng.integers(0, 10**7, 300) * 1e-4,
                              4_000_000 + rng.integers(0, 10**7, 300) * 1e-4, rng.integers(0, 10**6, 300) * 1e-4])
    for name, positions, step in (("mm.las", np.round(rng.random((50, 3)) * 100, 3), 1e-3),
                                  ("survey.las", survey, 1e-4)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # on a grid: no warning
            las.write(str(tmp_path / name), Geometry(kind="points", positions=positions))
        back = laspy.read(str(tmp_path / name))
        assert back.header.scales.tolist() == [step] * 3
        np.testing.assert_allclose(np.column_stack([back.x, back.y, back.z]), positions, rtol=0, atol=step / 1000)
    fine = rng.random((50, 3)) * 1000  # on no grid: the finest whose integers hold 1000 units
    with pytest.warns(UserWarning, match=r"LAS coordinates rounded to a step of 1e-06"):
        las.write(str(tmp_path / "fine.las"), Geometry(kind="points", positions=fine))
    back = laspy.read(str(tmp_path / "fine.las"))
    assert np.abs(np.column_stack([back.x, back.y, back.z]) - fine).max() <= 5e-7
    with pytest.warns(UserWarning, match=r"rounded to a step of 0.01 \(the given scale\); the largest change is"):
        las.write(str(tmp_path / "given.las"), Geometry(kind="points", positions=fine), scale=0.01)  # kept
    assert laspy.read(str(tmp_path / "given.las")).header.scales.tolist() == [0.01] * 3


@pytest.mark.parametrize(("name", "object_ids"), [("X", None), ("x", None), ("Z", None), ("object_id", np.zeros(20))])
def test_an_attribute_named_like_the_coordinates_is_refused(tmp_path, name, object_ids):
    """Hunt: an attribute ``X`` (laspy's raw integer coordinates) replaced the written x; ``x`` was a
    raw IndexError; ``object_id`` beside the object ids was written over by them."""
    from zarr_vectors.io.types import Geometry

    g = _points({name: np.arange(20)})
    g = Geometry(kind="points", positions=g.positions, attributes=g.attributes, object_ids=object_ids)
    out = tmp_path / "out.las"
    with pytest.raises(InputError, match=rf"out\.las: attributes '{name}' would replace the field"):
        las.write(str(out), g)
    assert not out.exists()


@pytest.mark.parametrize("name", ["a_rather_long_attribute_name_of_40_chars", "é" * 17, "a\0b"])
def test_an_attribute_name_an_extra_bytes_record_cannot_hold_is_refused(tmp_path, name):
    """Hunt: a name past 32 bytes was laspy's raw ``ValueError: bytes too long``."""
    out = tmp_path / "out.las"
    with pytest.raises(InputError, match=r"out\.las'?: attribute names \[.*\] do not fit a LAS extra-bytes name"):
        las.write(str(out), _points({name: np.arange(20)}))
    assert not out.exists()
    las.write(str(out), _points({"é" * 16: np.arange(20)}))  # 32 bytes: held
    np.testing.assert_array_equal(laspy.read(str(out))["é" * 16], np.arange(20))


def test_an_attribute_name_utf8_cannot_spell_is_refused_naming_it(tmp_path):
    """Hunt: a lone surrogate (a name decoded from a file name with surrogateescape) was a raw
    ``UnicodeEncodeError`` from the check of the name's length."""
    out = tmp_path / "out.las"
    with pytest.raises(InputError, match=r"out\.las': attribute names \['a\\udc80b'\] do not fit a LAS extra-bytes "
                                         r"name \(32 bytes of UTF-8, which cannot spell a lone surrogate"):
        las.write(str(out), _points({"a\udc80b": np.arange(20)}))
    assert not out.exists()


def test_a_file_written_where_the_os_refuses_names_it(tmp_path):
    """Hunt: a missing folder, or a folder at OUT, was laspy's raw FileNotFoundError / IsADirectoryError."""
    missing = str(tmp_path / "missing" / "out.las")
    with pytest.raises(InputError, match=rf"^{re.escape(missing)}: cannot be written \(No such file or directory\)"):
        las.write(missing, _points({}))
    (tmp_path / "out.laz").mkdir()
    with pytest.raises(InputError, match=r"out\.laz: cannot be written \(Is a directory\)"):
        las.write(str(tmp_path / "out.laz"), _points({}))


@pytest.mark.timeout(20)
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("scale", [None, 0.001])
def test_non_finite_positions_are_refused_at_once(tmp_path, bad, scale):
    """Hunt: a NaN or infinite position never fitted the growing scale, and the writer never returned."""
    from zarr_vectors.io.types import Geometry

    positions = np.arange(12, dtype=np.float64).reshape(4, 3)
    positions[2, 1] = bad
    with pytest.raises(InputError, match=r"out\.las': point 2 has the position .* LAS holds finite coordinates"):
        las.write(str(tmp_path / "out.las"), Geometry(kind="points", positions=positions), scale=scale)
    with pytest.raises(InputError, match=r"the LAS scale 0.0 is not a finite positive number"):
        las.write(str(tmp_path / "out.las"), Geometry(kind="points", positions=positions[:2]), scale=0.0)
    assert not (tmp_path / "out.las").exists()


@pytest.mark.timeout(20)
def test_coordinates_past_any_grid_are_refused(tmp_path):
    """An extent past float64's range (inf) fits no scale: refused, not grown for ever."""
    from zarr_vectors.io.types import Geometry

    positions = np.array([[-1e308, 0, 0], [1e308, 0, 0]])
    with pytest.raises(InputError, match=r"more than LAS's 32-bit integers hold at any scale"):
        las.write(str(tmp_path / "out.las"), Geometry(kind="points", positions=positions))


def test_every_rounding_of_the_coordinates_is_warned_of(tmp_path):
    """Hunt: an extent past 2**31 thousandths (nanometres over 3 mm) was written at 0.01 with no
    warning, though every other rounding was warned of."""
    from zarr_vectors.io.types import Geometry

    positions = np.array([[0, 0, 0], [3_000_000, 10, 5], [1_234_567.891234, 2.345678, 1]])
    with pytest.warns(UserWarning, match=r"out\.las: LAS coordinates rounded to a step of 0.01 \(0.001 grown by "
                                         r"powers of ten .*\); the largest change is 0.00432"):
        las.write(str(tmp_path / "out.las"), Geometry(kind="points", positions=positions))
    assert laspy.read(str(tmp_path / "out.las")).header.scales.tolist() == [0.01] * 3
    with pytest.warns(UserWarning, match=r"step of 0.01 \(1e-05 grown by powers of ten"):
        las.write(str(tmp_path / "given.las"), Geometry(kind="points", positions=positions), scale=1e-5)
    on_grid = np.round(positions, 2)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # on the grown grid: nothing rounded, no warning
        las.write(str(tmp_path / "grid.las"), Geometry(kind="points", positions=on_grid))
