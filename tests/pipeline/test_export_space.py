"""``zv build`` keeps a tractogram's reference space, ``zv export`` gives it back (or ``--reference``'s).

Before: a TRK built into a store and exported again had the identity affine and the data's
extent as its grid, whatever the file said -- a tractogram no longer matching its image.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import dask
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "io"))
from test_reference_space import LAS_AFFINE, oblique_trk
from test_streamlines import AFFINE, POS, nib_trk


@pytest.fixture(autouse=True)
def in_process():
    with dask.config.set(scheduler="threads"):
        yield


def _header(path):
    import nibabel as nib

    return nib.streamlines.load(str(path)).header


def test_build_then_export_gives_the_files_space_back(cli, tmp_path):
    oblique_trk(tmp_path / "in.trk")
    store = tmp_path / "s.zv"
    assert cli("build", "streamlines", tmp_path / "in.trk", store, "--chunk-shape", "4").rc == 0
    info = cli("info", store)
    assert "reference:      TRK header: grid 145x174x145, voxels 1.25x1.25x1.25 mm, LAS; positions in RAS+ mm" \
        in info.out, info.out
    run = cli("export", store, tmp_path / "out.trk")
    assert run.rc == 0 and "warning" not in run.err, run.err
    header = _header(tmp_path / "out.trk")
    np.testing.assert_array_equal(header["voxel_to_rasmm"], LAS_AFFINE)
    assert header["dimensions"].tolist() == [145, 174, 145] and header["voxel_order"] == b"LAS"

    nib_trk(tmp_path / "other.trk")  # --reference wins
    assert cli("export", store, tmp_path / "ref.trk", "--reference", tmp_path / "other.trk").rc == 0
    np.testing.assert_array_equal(_header(tmp_path / "ref.trk")["voxel_to_rasmm"], AFFINE)
    import nibabel as nib

    np.testing.assert_allclose(nib.streamlines.load(str(tmp_path / "ref.trk")).streamlines.get_data(), POS, atol=1e-5)


def test_reference_is_refused_where_it_means_nothing(cli, tmp_path):
    oblique_trk(tmp_path / "in.trk")
    store = tmp_path / "s.zv"
    assert cli("build", "streamlines", tmp_path / "in.trk", store, "--chunk-shape", "4").rc == 0
    run = cli("export", store, tmp_path / "out.parquet", "--reference", tmp_path / "in.trk")
    assert run.rc == 2 and "holds no reference space" in run.err
    run = cli("export", store, tmp_path / "out.trk", "--reference", tmp_path / "none.nii")
    assert run.rc == 2 and "no such file" in run.err
    assert not (tmp_path / "out.parquet").exists() and not (tmp_path / "out.trk").exists()


def test_files_in_one_space_keep_it_files_in_two_keep_none(cli, tmp_path):
    oblique_trk(tmp_path / "a.trk")
    oblique_trk(tmp_path / "b.trk")
    nib_trk(tmp_path / "c.trk")
    same = tmp_path / "same.zv"
    assert cli("build", "streamlines", tmp_path / "a.trk", tmp_path / "b.trk", same, "--chunk-shape", "4").rc == 0
    kept = json.loads((same / "headers" / "trk" / "zarr.json").read_text())["attributes"]
    assert kept["n_count"] == 6 and kept["dimensions"] == [145, 174, 145]

    mixed = tmp_path / "mixed.zv"
    run = cli("build", "streamlines", tmp_path / "a.trk", tmp_path / "c.trk", mixed, "--chunk-shape", "4")
    assert run.rc == 0
    assert run.err.count("do not all have the same file header") == 1, run.err
    assert not (mixed / "headers").exists()
    run = cli("export", mixed, tmp_path / "out.trk")
    assert run.rc == 0 and "keeps no reference space" in run.err


def test_a_broken_header_is_left_out_where_the_data_does_not_need_it_and_stops_the_export_where_it_does(
        cli, tmp_path):
    """Positions in RAS+ mm do not need the header: an unusable one (the reference's ingest copies a
    file's dimensions of 0 as they are) is left out with a warning naming it.  Positions in voxel mm
    need it to be placed: the export stops, naming the document and member, and writes nothing."""
    oblique_trk(tmp_path / "in.trk")
    store = tmp_path / "s.zv"
    assert cli("build", "streamlines", tmp_path / "in.trk", store, "--chunk-shape", "4").rc == 0
    doc_path = store / "headers" / "trk" / "zarr.json"
    doc = json.loads(doc_path.read_text())
    doc["attributes"]["dimensions"] = [145, 174]
    doc_path.write_text(json.dumps(doc))
    for out in ("out.trk", "out.tck"):
        run = cli("export", store, tmp_path / out)
        assert run.rc == 0 and "headers/trk/zarr.json#/attributes/dimensions" in run.err \
            and "that header is not used" in run.err, run.err
    np.testing.assert_array_equal(_header(tmp_path / "out.trk")["voxel_to_rasmm"], np.eye(4))
    assert cli("export", store, tmp_path / "ref.trk", "--reference", tmp_path / "in.trk").rc == 0
    np.testing.assert_array_equal(_header(tmp_path / "ref.trk")["voxel_to_rasmm"], LAS_AFFINE)
    assert "reference:      UNREADABLE -- headers/trk/zarr.json#/attributes/dimensions" in cli("info", store).out

    doc["attributes"]["space"] = "voxmm"
    doc_path.write_text(json.dumps(doc))
    run = cli("export", store, tmp_path / "vox.trk")
    assert run.rc == 2 and "headers/trk/zarr.json#/attributes/dimensions" in run.err, run.err
    assert not (tmp_path / "vox.trk").exists()
    assert cli("export", store, tmp_path / "out.parquet").rc == 0  # a table does not need it


def test_a_freesurfer_surface_keeps_its_volume_geometry(cli, tmp_path):
    from nibabel.freesurfer import read_geometry
    from test_reference_space import _surface

    _surface(tmp_path / "lh.white")
    store = tmp_path / "s.zv"
    assert cli("build", "mesh", tmp_path / "lh.white", store, "--chunk-shape", "50").rc == 0
    assert "reference:      FreeSurfer volume geometry: 256x256x256 voxels, c_ras [5.5, -17.25, 3.0]" \
        in cli("info", store).out
    assert cli("export", store, tmp_path / "back.white").rc == 0
    *_, info = read_geometry(str(tmp_path / "back.white"), read_metadata=True)
    assert info["cras"].tolist() == [5.5, -17.25, 3.0] and info["filename"] == "/subjects/bert/mri/orig.mgz"


def test_a_gifti_surface_keeps_its_metadata(cli, tmp_path):
    from nibabel import gifti
    from test_reference_space import _gifti_surface

    _gifti_surface(tmp_path / "lh.surf.gii")
    store = tmp_path / "s.zv"
    assert cli("build", "mesh", tmp_path / "lh.surf.gii", store, "--chunk-shape", "50").rc == 0
    assert "reference:      GIfTI surface: structure 'CortexLeft'; coordinate system NIFTI_XFORM_TALAIRACH to " \
        "NIFTI_XFORM_SCANNER_ANAT" in cli("info", store).out
    assert cli("export", store, tmp_path / "back.surf.gii").rc == 0
    back = gifti.GiftiImage.from_filename(str(tmp_path / "back.surf.gii"))
    assert back.darrays[0].meta["AnatomicalStructurePrimary"] == "CortexLeft"


def test_a_reference_that_gives_no_space_is_refused_before_the_store_is_read(cli, tmp_path):
    """Review: a 2-D image failed the export with an unpacking ValueError (exit 1) after the read."""
    import nibabel as nib

    oblique_trk(tmp_path / "in.trk")
    store = tmp_path / "s.zv"
    assert cli("build", "streamlines", tmp_path / "in.trk", store, "--chunk-shape", "4").rc == 0
    nib.save(nib.Nifti1Image(np.zeros((4, 5), np.float32), np.eye(4)), str(tmp_path / "flat.nii"))
    raw = bytearray((tmp_path / "in.trk").read_bytes())
    raw[12:24] = np.zeros(3, "<f4").tobytes()  # the header's voxel_size: 0 0 0 (an all-NaN export before)
    (tmp_path / "zero.trk").write_bytes(bytes(raw))
    for image, message in (("flat.nii", "2 dimensions"), ("zero.trk", "voxel sizes from")):
        run = cli("export", store, tmp_path / "out.trk", "--reference", tmp_path / image)
        assert run.rc == 2 and message in run.err and "Traceback" not in run.err, run.err
        assert not (tmp_path / "out.trk").exists()


def test_the_space_survives_pyramid_shard_and_consolidate(cli, tmp_path):
    oblique_trk(tmp_path / "in.trk")
    store = tmp_path / "s.zv"
    assert cli("build", "streamlines", tmp_path / "in.trk", store, "--chunk-shape", "4", "--pyramid", "2",
               "--shard-shape", "2").rc == 0
    assert cli("consolidate", store).rc == 0
    assert cli("export", store, tmp_path / "out.trk", "--level", "1").rc == 0
    np.testing.assert_array_equal(_header(tmp_path / "out.trk")["voxel_to_rasmm"], LAS_AFFINE)


def test_overwriting_with_a_file_of_no_header_drops_the_old_one(cli, tmp_path):
    """A kept space describes the store's data: a rebuild from a file that has none must not leave it."""
    from nibabel.streamlines.tck import TckFile
    from test_streamlines import nib_tractogram

    oblique_trk(tmp_path / "in.trk")
    TckFile(nib_tractogram(with_data=False)).save(str(tmp_path / "in.tck"))
    store = tmp_path / "s.zv"
    assert cli("build", "streamlines", tmp_path / "in.trk", store, "--chunk-shape", "4").rc == 0
    assert (store / "headers" / "trk" / "zarr.json").exists()
    assert cli("build", "streamlines", tmp_path / "in.tck", store, "--chunk-shape", "4", "--overwrite").rc == 0
    assert not (store / "headers").exists()
    run = cli("export", store, tmp_path / "out.trk")
    assert run.rc == 0 and "keeps no reference space" in run.err


def test_a_reference_that_is_the_output_itself_with_overwrite(cli, tmp_path):
    """The hunt: --overwrite moved OUT aside before the writer read the reference, which was OUT."""
    oblique_trk(tmp_path / "in.trk")
    store = tmp_path / "s.zv"
    assert cli("build", "streamlines", tmp_path / "in.trk", store, "--chunk-shape", "4").rc == 0
    nib_trk(tmp_path / "out.trk")
    run = cli("export", store, tmp_path / "out.trk", "--reference", tmp_path / "out.trk", "--overwrite")
    assert run.rc == 0, run.err
    np.testing.assert_array_equal(_header(tmp_path / "out.trk")["voxel_to_rasmm"], AFFINE)


def test_files_differing_only_in_origin_keep_their_space(cli, tmp_path):
    """TRK's origin is not placed by (nibabel and TrackVis ignore it): files differing in it alone share
    one space (the hunt found the space dropped for it)."""
    oblique_trk(tmp_path / "a.trk")
    raw = bytearray((tmp_path / "a.trk").read_bytes())
    raw[24:36] = np.array([1.0, 2.0, 3.0], "<f4").tobytes()  # the header's origin
    (tmp_path / "b.trk").write_bytes(bytes(raw))
    store = tmp_path / "s.zv"
    run = cli("build", "streamlines", tmp_path / "a.trk", tmp_path / "b.trk", store, "--chunk-shape", "4")
    assert run.rc == 0 and "same file header" not in run.err, run.err
    assert json.loads((store / "headers" / "trk" / "zarr.json").read_text())["attributes"]["n_count"] == 6


def test_an_export_to_a_format_of_no_header_says_the_header_is_not_written(cli, tmp_path):
    """Regression (hunt): a TRK store exported to a table, or a FreeSurfer surface to GIfTI, dropped
    the file's reference space or volume geometry with exit 0 and nothing said."""
    from test_reference_space import _surface

    oblique_trk(tmp_path / "in.trk")
    assert cli("build", "streamlines", tmp_path / "in.trk", tmp_path / "s.zv", "--chunk-shape", "4").rc == 0
    run = cli("export", tmp_path / "s.zv", tmp_path / "out.csv")
    assert run.rc == 0 and "headers/trk, the header of the file it was built from, is not written: a csv file" \
        in run.err, run.err
    run = cli("export", tmp_path / "s.zv", tmp_path / "out.tck")  # TCK takes the space: RAS+ mm
    assert run.rc == 0 and "headers/" not in run.err, run.err
    _surface(tmp_path / "lh.white")
    assert cli("build", "mesh", tmp_path / "lh.white", tmp_path / "m.zv", "--chunk-shape", "50").rc == 0
    run = cli("export", tmp_path / "m.zv", tmp_path / "m.surf.gii")
    assert run.rc == 0 and "headers/freesurfer, the header of the file it was built from, is not written" \
        in run.err, run.err
    run = cli("export", tmp_path / "m.zv", tmp_path / "m.white")
    assert run.rc == 0 and "headers/" not in run.err, run.err


def test_the_validator_warns_of_a_header_an_export_cannot_use(cli, tmp_path):
    """Regression (hunt): the validator read ``headers/`` as Zarr JSON only, so a header every export
    leaves out (or, for voxel-mm positions, refuses) validated clean."""
    import zarr_vectors as zv

    oblique_trk(tmp_path / "in.trk")
    store = tmp_path / "s.zv"
    assert cli("build", "streamlines", tmp_path / "in.trk", store, "--chunk-shape", "4").rc == 0
    assert not [f for f in zv.validate(str(store), level=5).findings if f.code == "L2_HEADER_MEMBERS"]
    doc_path = store / "headers" / "trk" / "zarr.json"
    doc = json.loads(doc_path.read_text())
    doc["attributes"]["dimensions"] = [145, 174]
    doc_path.write_text(json.dumps(doc))
    result = zv.validate(str(store), level=2)
    found = [(f.node, f.pointer) for f in result.findings if f.code == "L2_HEADER_MEMBERS"]
    assert result.ok and found == [("headers/trk", "/attributes/dimensions")], result.warnings

    root_path = store / "zarr.json"  # positions the root says are voxel mm, and no TRK header to place them
    root = json.loads(root_path.read_text())
    root["attributes"]["crs"] = {"input_space": "voxmm"}
    root_path.write_text(json.dumps(root))
    doc_path.unlink()
    doc_path.parent.rmdir()
    result = zv.validate(str(store), level=2)
    found = [(f.node, f.pointer) for f in result.findings if f.code == "L2_HEADER_MEMBERS"]
    assert found == [("/", "/attributes/crs/input_space")], result.warnings
    assert cli("validate", store, "--level", "2").rc == 0
