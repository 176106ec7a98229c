"""Streamline files in and out: TRK and TCK (nibabel.streamlines), TRX (trx-python).

Files are written by the format's own library; ours are read back with it.  File ->
``write_polylines(kind="streamline")`` -> ``read`` -> our writer -> the library gives the
same streamlines, per-point and per-streamline data, TRX groups and per-group data.
TRK and TCK hold float32 in RAS+ mm after an affine, so their positions compare to float32
rounding; TRX stores positions as given and compares exactly.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from geometry_roundtrip import read_in_capped_child, through_store

from zarr_vectors.errors import InputError
from zarr_vectors.io import tck, tractograms, trk, trx

RNG = np.random.default_rng(15)
LENGTHS = np.array([4, 2, 5])
OFFSETS = np.r_[0, np.cumsum(LENGTHS)]
POS = (RNG.random((LENGTHS.sum(), 3)) * 6).astype(np.float32)
FA = RNG.random(LENGTHS.sum()).astype(np.float32)
WEIGHT = np.array([0.5, 1.5, 2.5], np.float32)
AFFINE = np.array([[2.0, 0, 0, -3], [0, 2, 0, -2], [0, 0, 2, 1], [0, 0, 0, 1]])


def lines(positions=POS, offsets=OFFSETS) -> list[np.ndarray]:
    return [positions[a:b] for a, b in itertools.pairwise(offsets)]


def nib_tractogram(with_data: bool = True):
    from nibabel.streamlines import Tractogram

    if not with_data:
        return Tractogram(lines(), affine_to_rasmm=np.eye(4))
    return Tractogram(
        lines(), data_per_point={"fa": [v[:, None] for v in lines(FA)]},
        data_per_streamline={"weight": WEIGHT[:, None]}, affine_to_rasmm=np.eye(4),
    )  # fmt: skip


def nib_trk(path) -> None:
    from nibabel.streamlines.trk import Field, TrkFile

    header = {Field.VOXEL_TO_RASMM: AFFINE, Field.DIMENSIONS: (8, 8, 8), Field.VOXEL_SIZES: (2, 2, 2),
              Field.VOXEL_ORDER: "RAS"}  # fmt: skip
    TrkFile(nib_tractogram(), header=header).save(str(path))


def assert_same_lines(seq, positions=POS, offsets=OFFSETS, exact=False) -> None:
    np.testing.assert_array_equal(np.r_[seq._offsets, len(seq._data)], offsets)
    if exact:
        np.testing.assert_array_equal(seq._data, positions)
    else:
        np.testing.assert_allclose(seq._data, positions, atol=1e-5)


# ---------------------------------------------------------------------------
# TRK
# ---------------------------------------------------------------------------
def test_trk_read_gives_nibabels_streamlines_and_data(tmp_path):
    import nibabel as nib

    nib_trk(tmp_path / "t.trk")
    got = trk.read(str(tmp_path / "t.trk"))
    assert got.kind == "streamline"
    loaded = nib.streamlines.load(str(tmp_path / "t.trk"))
    np.testing.assert_array_equal(got.positions, loaded.streamlines.get_data())
    np.testing.assert_allclose(got.positions, POS, atol=1e-5)
    np.testing.assert_array_equal(got.offsets, OFFSETS)
    np.testing.assert_array_equal(got.object_ids, np.repeat([0, 1, 2], LENGTHS))
    np.testing.assert_allclose(got.attributes["fa"], FA)
    np.testing.assert_allclose(got.object_attributes["weight"], WEIGHT)
    # voxmm: TrackVis's stored coordinates, (rasmm - translation) / 2 * 2 + half a voxel
    voxmm = trk.read(str(tmp_path / "t.trk"), space="voxmm").positions
    np.testing.assert_allclose(voxmm, POS - AFFINE[:3, 3] + 1.0, atol=1e-5)


def test_trk_written_reads_back_with_nibabel_in_the_reference_space(tmp_path):
    import nibabel as nib
    from nibabel.streamlines.trk import Field

    nib_trk(tmp_path / "ref.trk")
    trk.write(str(tmp_path / "back.trk"), trk.read(str(tmp_path / "ref.trk")), reference=str(tmp_path / "ref.trk"))
    back = nib.streamlines.load(str(tmp_path / "back.trk"))
    np.testing.assert_allclose(back.header[Field.VOXEL_TO_RASMM], AFFINE)
    assert_same_lines(back.streamlines)
    np.testing.assert_allclose(back.tractogram.data_per_point["fa"].get_data()[:, 0], FA)
    np.testing.assert_allclose(back.tractogram.data_per_streamline["weight"][:, 0], WEIGHT)


@pytest.mark.parametrize(("count", "tail", "message"), [
    (2, b"", r"bytes follow its 2 streamlines \(the header counts 2\)"),
    (9, b"", r"the header counts 9 streamlines, the file holds 3"),
    (3, b"\0" * 8, r"8 bytes follow its 3 streamlines \(the header counts 3\)"),
])
def test_trk_whose_count_is_not_its_body_is_refused(tmp_path, count, tail, message):
    """Regression (hunt): nibabel reads as many streamlines as the header counts, so a count of 2
    over a body of 4 stored 2 without a word (a count of 9 was silent too).  Scalars and properties
    count in each record's size; a count of 0 (unknown, as TrackVis allows) reads the body."""
    import struct

    nib_trk(tmp_path / "t.trk")
    raw = bytearray((tmp_path / "t.trk").read_bytes())
    assert trk.read(str(tmp_path / "t.trk")).offsets.tolist() == OFFSETS.tolist()
    struct.pack_into("<i", raw, 988, 0)
    (tmp_path / "unknown.trk").write_bytes(raw)
    assert trk.read(str(tmp_path / "unknown.trk")).offsets.tolist() == OFFSETS.tolist()
    struct.pack_into("<i", raw, 988, count)
    (tmp_path / "bad.trk").write_bytes(bytes(raw) + tail)
    with pytest.raises(InputError, match=message):
        trk.read(str(tmp_path / "bad.trk"))


def test_trk_streamlines_of_no_points_are_skipped_with_a_warning(tmp_path):
    """nibabel drops a streamline of no points; its record made the count check say "the header
    counts 4 streamlines, the file holds 3" (review).  Skipped with a warning, as TCK's are."""
    import struct

    from nibabel.streamlines.trk import TrkFile

    TrkFile(nib_tractogram(with_data=False)).save(str(tmp_path / "t.trk"))
    raw = bytearray((tmp_path / "t.trk").read_bytes())
    raw[1000:1000] = struct.pack("<i", 0)  # a first record of no points
    struct.pack_into("<i", raw, 988, 4)
    (tmp_path / "e.trk").write_bytes(raw)
    with pytest.warns(UserWarning, match=r"1 streamline\(s\) of no points skipped"):
        got = trk.read(str(tmp_path / "e.trk"))
    assert got.offsets.tolist() == OFFSETS.tolist()


def test_trk_corrupt_header_is_refused_naming_the_file(tmp_path):
    nib_trk(tmp_path / "t.trk")
    raw = bytearray((tmp_path / "t.trk").read_bytes())
    raw[996:1000] = b"\x07\x00\x00\x00"  # hdr_size must be 1000
    (tmp_path / "bad.trk").write_bytes(bytes(raw))
    with pytest.raises(InputError, match=r"bad\.trk: not a readable TRK file \(HeaderError"):
        trk.read(str(tmp_path / "bad.trk"))
    (tmp_path / "cut.trk").write_bytes((tmp_path / "t.trk").read_bytes()[:-10])  # a body cut short
    with pytest.raises(InputError, match=r"cut\.trk: not a readable TRK file \(TypeError: buffer is too small"):
        trk.read(str(tmp_path / "cut.trk"))
    with pytest.raises(InputError, match=r"space must be one of rasmm, voxmm"):
        trk.read(str(tmp_path / "t.trk"), space="vox")


def _trk_named(tmp_path, renames: dict[int, bytes]) -> str:
    """A TRK of scalars a, b and properties p, q, with the 20-byte name fields at the given
    header offsets replaced (scalar names start at byte 38, property names at 240)."""
    from nibabel.streamlines import Tractogram, TrkFile

    tractogram = Tractogram(
        lines(), data_per_point={"a": [v[:, None] for v in lines(FA)], "b": [v[:, None] + 10 for v in lines(FA)]},
        data_per_streamline={"p": WEIGHT[:, None], "q": WEIGHT[:, None] + 5}, affine_to_rasmm=np.eye(4),
    )  # fmt: skip
    TrkFile(tractogram).save(str(tmp_path / "names.trk"))
    raw = bytearray((tmp_path / "names.trk").read_bytes())
    for at, name in renames.items():
        raw[at : at + 20] = name.ljust(20, b"\0")
    (tmp_path / "renamed.trk").write_bytes(bytes(raw))
    return str(tmp_path / "renamed.trk")


@pytest.mark.parametrize(("renames", "message"), [
    ({58: b"a"}, "scalar name 'a' is given twice"),  # nibabel kept b's values under 'a'
    ({260: b"p"}, "property name 'p' is given twice"),
    ({38: b"scalars", 58: b""}, "scalar name 'scalars' is given twice"),  # the unnamed column is 'scalars' too
    ({38: b"a\x002"}, "the scalar names declare 3 values, the header's count is 2"),  # 'b' got no column
])
def test_trk_names_that_lose_values_are_refused(tmp_path, renames, message):
    """Regression (hunt): nibabel maps names to columns in a dict; these files read with some
    values gone, silently (or as a zero-width attribute the write refused without naming the file)."""
    with pytest.raises(InputError, match=rf"renamed\.trk: {message}"):
        trk.read(_trk_named(tmp_path, renames))
    got = trk.read(_trk_named(tmp_path, {}))
    np.testing.assert_array_equal(got.attributes["b"].ravel(), FA.astype(np.float32) + 10)
    np.testing.assert_array_equal(got.object_attributes["q"].ravel(), WEIGHT.astype(np.float32) + 5)


def test_trk_streamline_longer_than_memory_is_refused_naming_the_file(tmp_path):
    """Regression (hunt): a first streamline declaring 2**31 - 1 points made nibabel allocate
    ~26 GB before reading: a MemoryError traceback, exit 1.  Run in a child process whose
    address space is capped at 2 GB, so the allocation fails the same way on any machine."""
    nib_trk(tmp_path / "t.trk")
    raw = bytearray((tmp_path / "t.trk").read_bytes())
    raw[1000:1004] = (2**31 - 1).to_bytes(4, "little")  # the first streamline's point count
    (tmp_path / "huge.trk").write_bytes(bytes(raw))
    out = read_in_capped_child("trk", tmp_path / "huge.trk", 2 << 30)
    assert "huge.trk: not a readable TRK file: reading it asks for more memory than there is" in out, out


def test_trk_attributes_float32_would_change_are_named_and_not_written(tmp_path):
    """Hunt: every column was cast to float32 without a word, so an integer past 2**24 changed
    (16777217 -> 16777216, 123456789 -> 123456792).  Like PLY and GIfTI, what the format cannot
    hold is named in a warning and left out; what it holds (2**24, 2**30, bools) is written exactly."""
    from zarr_vectors.io.types import Geometry

    g = Geometry(kind="streamline", positions=POS, offsets=OFFSETS, object_ids=np.repeat(np.arange(3), LENGTHS),
                 attributes={"tag": np.arange(11, dtype=np.int64) + 2**24,  # 2**24 + 1 .. : not float32
                             "big": np.full(11, 2**30, dtype=np.uint64), "fa": FA,
                             "far": np.full(11, 1e40)},  # past float32's range: inf
                 objects=np.arange(3),
                 object_attributes={"fiber_id": np.array([16777217, 123456789, 3]), "seed": np.array([0, 1, 2]),
                                    "good": np.array([True, False, True])})
    with pytest.warns(UserWarning, match=r"f\.trk: TRK, whose values are float32, cannot hold far, fiber_id, tag; "
                                         r"not written"):
        trk.write(str(tmp_path / "f.trk"), g, affine=np.eye(4), dimensions=(10, 10, 10))
    back = trk.read(str(tmp_path / "f.trk"))
    assert sorted(back.attributes) == ["big", "fa"] and sorted(back.object_attributes) == ["good", "seed"]
    np.testing.assert_array_equal(back.attributes["big"], np.full(11, 2**30))
    np.testing.assert_array_equal(back.object_attributes["seed"], [0, 1, 2])
    np.testing.assert_array_equal(back.object_attributes["good"], [1, 0, 1])
    held, changed = tractograms.float32_held({"low": np.array([-2**63, 2**62], np.int64),
                                              "top": np.array([2**64 - 1], np.uint64), "nan": np.array([np.nan])})
    assert sorted(held) == ["low", "nan"] and changed == ["top"]  # 2**64 - 1 rounds to 2**64: no uint64


# ---------------------------------------------------------------------------
# TCK
# ---------------------------------------------------------------------------
def test_tck_read_and_written_back_with_nibabel(tmp_path):
    import nibabel as nib
    from nibabel.streamlines.tck import TckFile

    TckFile(nib_tractogram(with_data=False)).save(str(tmp_path / "t.tck"))
    got = tck.read(str(tmp_path / "t.tck"))
    np.testing.assert_array_equal(got.positions, POS)
    np.testing.assert_array_equal(got.offsets, OFFSETS)
    got.attributes["fa"] = FA
    with pytest.warns(UserWarning, match=r"TCK cannot hold fa"):
        tck.write(str(tmp_path / "back.tck"), got)
    assert_same_lines(nib.streamlines.load(str(tmp_path / "back.tck")).streamlines, exact=True)


def test_tck_count_other_than_the_streamlines_read_is_warned_of(tmp_path):
    """Regression (hunt): nibabel skips an empty streamline (two delimiters in a row) and ignores
    the header's count, so the streamlines after it were numbered one lower, silently."""
    from nibabel.streamlines.tck import TckFile

    TckFile(nib_tractogram(with_data=False)).save(str(tmp_path / "t.tck"))
    raw = (tmp_path / "t.tck").read_bytes()
    assert b"count: 0000000003\n" in raw
    nan_row = np.full(3, np.nan, "<f4").tobytes()
    first_end = raw.index(nan_row) + len(nan_row)
    empty = raw[:first_end] + nan_row + raw[first_end:]  # an empty second streamline: MRtrix counts it
    (tmp_path / "e.tck").write_bytes(empty.replace(b"count: 0000000003", b"count: 0000000004"))
    with pytest.warns(UserWarning, match=r"e\.tck: its header says count: 4, the file holds 3 streamlines: a stale "
                                         r"count, or empty streamlines"):
        got = tck.read(str(tmp_path / "e.tck"))
    np.testing.assert_array_equal(got.offsets, OFFSETS)


# ---------------------------------------------------------------------------
# TRX
# ---------------------------------------------------------------------------
def trx_file(path, compressed: bool = False) -> None:
    """A TRX file written by trx-python: dpv, dps, two groups (one empty) with per-group data."""
    import zipfile

    import trx.trx_file_memmap as tmm

    ref = tmm.TrxFile()
    ref.header["VOXEL_TO_RASMM"], ref.header["DIMENSIONS"] = AFFINE.astype(np.float32), np.array([8, 8, 8], np.uint16)
    t = tmm.TrxFile.from_tractogram(nib_tractogram(), reference=ref.header | {"NB_VERTICES": 0, "NB_STREAMLINES": 0})
    t.groups = {"CST": np.array([0, 2], np.uint32), "empty": np.zeros(0, np.uint32)}
    t.data_per_group = {"CST": {"mean_fa": np.array([0.25], np.float32), "colour": np.array([[1, 2, 3]], np.uint8)}}
    tmm.save(t, str(path), compression_standard=zipfile.ZIP_DEFLATED if compressed else zipfile.ZIP_STORED)
    t.close()


@pytest.mark.parametrize("compressed", [False, True], ids=["stored", "deflated"])
def test_trx_read_is_memory_mapped_and_keeps_groups_and_their_data(tmp_path, compressed):
    trx_file(tmp_path / "t.trx", compressed)
    got = trx.read(str(tmp_path / "t.trx"))
    assert isinstance(got.positions, np.memmap)  # not loaded whole
    np.testing.assert_array_equal(got.positions, POS)
    np.testing.assert_array_equal(got.offsets, OFFSETS)
    np.testing.assert_array_equal(got.attributes["fa"], FA)
    np.testing.assert_array_equal(got.object_attributes["weight"], WEIGHT)
    np.testing.assert_array_equal(got.object_attributes["group.CST"], [1, 0, 1])
    np.testing.assert_array_equal(got.object_attributes["group.empty"], [0, 0, 0])
    np.testing.assert_array_equal(got.object_attributes["dpg.CST.mean_fa"], [0.25, 0, 0.25])
    np.testing.assert_array_equal(got.object_attributes["dpg.CST.colour"], [[1, 2, 3], [0, 0, 0], [1, 2, 3]])


def assert_trx_back(path) -> None:
    import trx.trx_file_memmap as tmm

    back = tmm.load(str(path))
    try:
        assert_same_lines(back.streamlines, exact=True)
        np.testing.assert_array_equal(back.data_per_vertex["fa"]._data.reshape(-1), FA)
        np.testing.assert_array_equal(back.data_per_streamline["weight"].reshape(-1), WEIGHT)
        assert {k: v.tolist() for k, v in back.groups.items()} == {"CST": [0, 2], "empty": []}
        assert sorted(back.data_per_group) == ["CST"]
        np.testing.assert_array_equal(back.data_per_group["CST"]["mean_fa"], [[0.25]])  # as trx-python reads its own
        np.testing.assert_array_equal(back.data_per_group["CST"]["colour"], [[1, 2, 3]])
        np.testing.assert_allclose(back.header["VOXEL_TO_RASMM"], AFFINE)
    finally:
        back.close()


def test_trx_written_reads_back_with_trx_python(tmp_path):
    trx_file(tmp_path / "t.trx")
    trx.write(str(tmp_path / "back.trx"), trx.read(str(tmp_path / "t.trx")), affine=AFFINE)
    assert_trx_back(tmp_path / "back.trx")


def _trx_member_changed(tmp_path, name: str, new_name: str, values) -> str:
    """A TRX directory (trx-python reads one like the zip) with member ``name`` replaced by ``new_name``."""
    import zipfile

    trx_file(tmp_path / "t.trx")
    with zipfile.ZipFile(tmp_path / "t.trx") as z:
        z.extractall(tmp_path / "d.trx")
    (tmp_path / "d.trx" / name).unlink()
    (tmp_path / "d.trx" / new_name).write_bytes(np.asarray(values).tobytes())
    return str(tmp_path / "d.trx")


@pytest.mark.parametrize(("name", "new_name", "values", "message"), [
    # the offsets end at 10 of the header's 11 vertices: the last line was read 2 rows long, trx-python's 1
    ("offsets.uint32", "offsets.uint32", np.array([0, 4, 6, 10], np.uint32), "offsets do not cut the 11 vertices"),
    ("offsets.uint32", "offsets.float32", np.array([0, 4.5, 6, 11], np.float32), "offsets are float32, not integers"),
    ("groups/CST.uint32", "groups/CST.float32", np.array([0.9, 2.7], np.float32),
     "group 'CST' lists streamlines as float32, not integers"),  # was members 0 and 2
    ("groups/CST.uint32", "groups/CST.int32", np.array([0, -1], np.int32), r"group 'CST' lists streamline -1, of 3"),
])
def test_trx_offsets_and_groups_that_are_not_whole_indices_are_refused(tmp_path, name, new_name, values, message):
    """Regression (hunt): each of these read as other lines or other groups than the file's, silently."""
    path = _trx_member_changed(tmp_path, name, new_name, values)
    with pytest.raises(InputError, match=message):
        trx.read(path)


def test_trx_members_trx_python_passes_over_are_named(tmp_path):
    """Regression (hunt): a member in an unknown folder, or of an unknown data type, was left out
    with only trx-python's log line (or none): nothing is dropped silently."""
    path = _trx_member_changed(tmp_path, "dps/weight.float32", "dps/weight.float32", WEIGHT)
    assert not [d for d in trx.read(path).dropped if d.startswith("member")]
    (tmp_path / "d.trx" / "dvp").mkdir()
    (tmp_path / "d.trx" / "dvp" / "fa2.float32").write_bytes(FA.tobytes())  # a misspelt dpv
    got = trx.read(path)
    assert [d for d in got.dropped if d.startswith("member")] == ["member dvp/fa2.float32"]
    assert sorted(got.object_attributes) == ["dpg.CST.colour", "dpg.CST.mean_fa", "group.CST", "group.empty", "weight"]


def test_trx_read_and_write_leave_an_unconfigured_logging_unconfigured(tmp_path):
    """Regression: trx-python's ``logging.error()`` on a member it passes over (and a
    ``logging.debug()`` in its constructor, on write) configured the root logger
    (``basicConfig``): ``ERROR:root:`` on stderr beside our own warning, and every later record
    of any library printed that way.  A fresh process, so logging starts unconfigured;
    a record of another logger during the read still reaches stderr as it would have."""
    import subprocess
    import sys
    import textwrap

    path = _trx_member_changed(tmp_path, "dps/weight.float32", "dps/weight.float32", WEIGHT)
    (tmp_path / "d.trx" / "dvp").mkdir()
    (tmp_path / "d.trx" / "dvp" / "fa2.float32").write_bytes(FA.tobytes())
    child = textwrap.dedent(f"""
        import logging
        import trx.trx_file_memmap as tmm
        from zarr_vectors.io import trx

        load = tmm.load_from_directory
        def load_logging_elsewhere(*args, **kwargs):
            logging.getLogger("elsewhere").warning("a record of another library")
            return load(*args, **kwargs)
        tmm.load_from_directory = load_logging_elsewhere
        got = trx.read({path!r})
        tmm.load_from_directory = load
        trx.write({str(tmp_path / "back.trx")!r}, got)  # trx-python's constructor logs too
        print(got.dropped, logging.getLogger().handlers)
    """)
    run = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "('member dvp/fa2.float32',) []", run.stdout
    assert run.stderr == "a record of another library\n", run.stderr


def test_trx_float16_positions_read_as_float32(tmp_path):
    """Regression (hunt): TRX allows float16 positions; the write refused their dtype."""
    half = POS.astype(np.float16)
    path = _trx_member_changed(tmp_path, "positions.3.float32", "positions.3.float16", half)
    got = trx.read(path)
    assert got.positions.dtype == np.float32
    np.testing.assert_array_equal(got.positions, half.astype(np.float32))
    np.testing.assert_array_equal(through_store(tmp_path, got).offsets, OFFSETS)


@pytest.mark.parametrize("form", ["zip", "directory"])
def test_a_trx_its_reader_may_not_write_is_read_from_a_copy(tmp_path, monkeypatch, form):
    """Regression (hunt): trx-python maps every member read-write, so a TRX on a read-only share
    failed for any user but root ('Permission denied').  The refusal is simulated here (root may
    write anything); the copy goes to trx-python's temporary folder and is removed after the read,
    and a directory member that is not a regular file is not copied."""
    import zipfile

    import trx.trx_file_memmap as tmm

    trx_file(tmp_path / "t.trx")
    path = tmp_path / "t.trx"
    if form == "directory":
        with zipfile.ZipFile(path) as z:
            z.extractall(tmp_path / "d.trx")
        path = tmp_path / "d.trx"
    monkeypatch.setenv("TRX_TMPDIR", str(tmp_path / "scratch"))
    (tmp_path / "scratch").mkdir()
    real = tmm.load

    def read_only(name, *args, **kwargs):
        if str(name) == str(path):
            raise PermissionError(13, "Permission denied", str(name))
        return real(name, *args, **kwargs)

    monkeypatch.setattr(tmm, "load", read_only)
    copies: list[str] = []
    real_directory = tmm.load_from_directory
    monkeypatch.setattr(tmm, "load_from_directory", lambda d: copies.append(d) or real_directory(d))
    got = trx.read(str(path))
    assert len(copies) == 1 and copies[0].startswith(str(tmp_path / "scratch"))
    np.testing.assert_array_equal(got.positions, POS)
    np.testing.assert_array_equal(got.offsets, OFFSETS)
    np.testing.assert_array_equal(got.object_attributes["group.CST"], [1, 0, 1])
    assert not any((tmp_path / "scratch").rglob("*.float32"))  # the copy is gone, its maps still read
    if form == "directory":
        (tmp_path / "d.trx" / "dps" / "weight.float32").unlink()
        (tmp_path / "d.trx" / "dps" / "weight.float32").symlink_to("/dev/zero")
        with pytest.raises(InputError, match=r"d\.trx: not a readable TRX file \(ValueError: member .* is not a "
                                             "regular file"):
            trx.read(str(path))


def test_trx_broken_is_refused(tmp_path):
    (tmp_path / "bad.trx").write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(InputError, match=r"bad\.trx: not a readable TRX file"):
        trx.read(str(tmp_path / "bad.trx"))


# ---------------------------------------------------------------------------
# file -> store -> file
# ---------------------------------------------------------------------------
def test_trk_through_a_store_and_back_is_the_same_tractogram(tmp_path):
    import nibabel as nib

    nib_trk(tmp_path / "t.trk")
    stored = through_store(tmp_path, trk.read(str(tmp_path / "t.trk")))
    assert stored.kind == "streamline"
    trk.write(str(tmp_path / "back.trk"), stored, reference=str(tmp_path / "t.trk"))
    back = nib.streamlines.load(str(tmp_path / "back.trk"))
    assert_same_lines(back.streamlines)
    np.testing.assert_allclose(back.tractogram.data_per_point["fa"].get_data()[:, 0], FA)
    np.testing.assert_allclose(back.tractogram.data_per_streamline["weight"][:, 0], WEIGHT)


def test_tck_through_a_store_and_back_is_the_same_tractogram(tmp_path):
    import nibabel as nib
    from nibabel.streamlines.tck import TckFile

    TckFile(nib_tractogram(with_data=False)).save(str(tmp_path / "t.tck"))
    stored = through_store(tmp_path, tck.read(str(tmp_path / "t.tck")))
    tck.write(str(tmp_path / "back.tck"), stored)
    assert_same_lines(nib.streamlines.load(str(tmp_path / "back.tck")).streamlines, exact=True)


def test_trx_through_a_store_and_back_keeps_groups_and_group_data(tmp_path):
    trx_file(tmp_path / "t.trx")
    stored = through_store(tmp_path, trx.read(str(tmp_path / "t.trx")))
    np.testing.assert_array_equal(stored.object_attributes["group.CST"], [1, 0, 1])
    trx.write(str(tmp_path / "back.trx"), stored, affine=AFFINE)
    assert_trx_back(tmp_path / "back.trx")
