"""A tractogram's reference space kept in the store (``headers/trk``, ``headers/trx``) and given back.

A TRK or TRX file places its streamlines in a reference image's grid (voxel-to-RAS+ mm affine,
dimensions, voxel sizes, TRK's voxel order).  Reading keeps that header in
``Geometry.headers``; a writer's ``headers=`` stores it beside the levels; a TRK / TRX / TCK
writer given a store's data takes the space (and the positions' space) from it.  Files are
written and read back by nibabel and trx-python.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import replace

import numpy as np
import pytest
from test_streamlines import AFFINE, OFFSETS, POS, nib_tractogram

import zarr_vectors as zv
from zarr_vectors.errors import InputError, MetadataError
from zarr_vectors.io import tck, trk, trx
from zarr_vectors.io.types import as_geometry
from zarr_vectors.store.backend import Storage
from zarr_vectors.store.groups import open_store
from zarr_vectors.store.headers import read_headers

DEEP: list = []
for _ in range(300):  # deeper than the strict reader takes (so the validator and consolidate refused the store)
    DEEP = [DEEP]
LAS_AFFINE = np.array([[-1.25, 0, 0, 90], [0, 1.25, 0, -126], [0, 0, 1.25, -72], [0, 0, 0, 1]])


def oblique_trk(path, order: str = "LAS", dims=(145, 174, 145)) -> None:
    """A TRK whose grid is not the identity: flipped x, 1.25 mm voxels, an offset origin."""
    from nibabel.streamlines.trk import Field, TrkFile

    TrkFile(nib_tractogram(), header={
        Field.VOXEL_TO_RASMM: LAS_AFFINE, Field.DIMENSIONS: dims, Field.VOXEL_SIZES: (1.25, 1.25, 1.25),
        Field.VOXEL_ORDER: order,
    }).save(str(path))  # fmt: skip


def written(tmp_path, geometry, name="s.zv", **extra):
    url = str(tmp_path / name)
    zv.write_polylines(url, geometry.positions, geometry.offsets, kind="streamline", chunk_shape=4.0,
                       attributes=geometry.attributes, object_attributes=geometry.object_attributes or None,
                       headers=geometry.headers or None, **extra)
    return url


def exported(url: str):
    """The store's level 0 as an exporter gets it: data and the store's headers."""
    store = open_store(url)
    return replace(as_geometry(zv.read(url)), headers=read_headers(store.storage, crs=store.root.extra.get("crs")))


def test_trk_read_keeps_its_header(tmp_path):
    oblique_trk(tmp_path / "t.trk")
    got = trk.read(str(tmp_path / "t.trk"))
    header = got.headers["trk"]
    assert header["vox_to_ras"] == LAS_AFFINE.reshape(-1).tolist()
    assert header["dimensions"] == [145, 174, 145] and header["voxel_size"] == [1.25] * 3
    assert header["voxel_order"] == "LAS" and header["space"] == "rasmm"
    assert header["n_count"] == 3 and header["scalar_names"] == ["fa"] and header["property_names"] == ["weight"]
    assert trk.read(str(tmp_path / "t.trk"), space="voxmm").headers["trk"]["space"] == "voxmm"


def test_the_space_survives_a_store_and_comes_back_in_trk_trx_and_tck(tmp_path):
    import nibabel as nib
    import trx.trx_file_memmap as tmm

    oblique_trk(tmp_path / "in.trk")
    url = written(tmp_path, trk.read(str(tmp_path / "in.trk")))
    doc = json.loads((tmp_path / "s.zv" / "headers" / "trk" / "zarr.json").read_text())
    assert doc["node_type"] == "group" and doc["attributes"]["vox_to_ras"] == LAS_AFFINE.reshape(-1).tolist()
    assert json.loads((tmp_path / "s.zv" / "headers" / "zarr.json").read_text())["node_type"] == "group"
    assert zv.validate(url, 5).ok

    data = exported(url)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a kept space: no "identity" warning
        trk.write(str(tmp_path / "back.trk"), data)
        trx.write(str(tmp_path / "back.trx"), data)
    back = nib.streamlines.load(str(tmp_path / "back.trk"))
    np.testing.assert_array_equal(back.header["voxel_to_rasmm"], LAS_AFFINE)
    assert back.header["dimensions"].tolist() == [145, 174, 145] and back.header["voxel_order"] == b"LAS"
    np.testing.assert_allclose(back.streamlines.get_data(), POS, atol=1e-5)
    moved = tmm.load(str(tmp_path / "back.trx"))
    np.testing.assert_array_equal(moved.header["VOXEL_TO_RASMM"], LAS_AFFINE)
    assert np.asarray(moved.header["DIMENSIONS"]).tolist() == [145, 174, 145]
    moved.close()


def test_voxmm_positions_are_taken_to_rasmm_on_export(tmp_path):
    """A store kept in TrackVis voxel mm (``space: voxmm``) exports RAS+ mm to every streamline file."""
    import nibabel as nib

    oblique_trk(tmp_path / "in.trk")
    voxmm = trk.read(str(tmp_path / "in.trk"), space="voxmm")
    assert not np.allclose(voxmm.positions, POS, atol=1)  # the store really holds other numbers
    url = written(tmp_path, voxmm)
    data = exported(url)
    trk.write(str(tmp_path / "back.trk"), data)
    tck.write(str(tmp_path / "back.tck"), data)
    for name in ("back.trk", "back.tck"):
        np.testing.assert_allclose(nib.streamlines.load(str(tmp_path / name)).streamlines.get_data(), POS, atol=1e-4)


@pytest.mark.parametrize("order", ["LPS", "SAL", "RAS"])
def test_voxmm_through_a_voxel_order_other_than_the_affines(tmp_path, order):
    """The voxel order flips axes across the grid (its dimensions count): each order reads and
    writes back the file's RAS+ mm streamlines."""
    import nibabel as nib

    oblique_trk(tmp_path / "in.trk", order=order, dims=(40, 50, 60))
    voxmm = trk.read(str(tmp_path / "in.trk"), space="voxmm")
    url = written(tmp_path, voxmm)
    trk.write(str(tmp_path / "back.trk"), exported(url))
    back = nib.streamlines.load(str(tmp_path / "back.trk"))
    np.testing.assert_allclose(back.streamlines.get_data(), POS, atol=1e-4)
    assert back.header["voxel_order"] == order.encode()


def test_a_reference_given_wins_over_the_kept_one(tmp_path):
    import nibabel as nib

    oblique_trk(tmp_path / "in.trk")
    url = written(tmp_path, trk.read(str(tmp_path / "in.trk")))
    trk.write(str(tmp_path / "back.trk"), exported(url), affine=AFFINE, dimensions=(8, 8, 8))
    back = nib.streamlines.load(str(tmp_path / "back.trk"))
    np.testing.assert_array_equal(back.header["voxel_to_rasmm"], AFFINE)
    np.testing.assert_allclose(back.streamlines.get_data(), POS, atol=1e-5)


def test_no_space_kept_says_so(tmp_path):
    url = str(tmp_path / "s.zv")
    zv.write_polylines(url, POS, OFFSETS, kind="streamline", chunk_shape=4.0)
    assert not (tmp_path / "s.zv" / "headers").exists()
    with pytest.warns(UserWarning, match="keeps no reference space"):
        trk.write(str(tmp_path / "back.trk"), exported(url))


def test_a_trx_grid_too_large_for_trk_is_refused_not_wrapped(tmp_path):
    space = {"format_name": "trx", "voxel_to_rasmm": np.eye(4).reshape(-1).tolist(), "dimensions": [40000, 8, 8],
             "dpv_names": [], "dps_names": [], "dpg_names": []}
    url = str(tmp_path / "s.zv")
    zv.write_polylines(url, POS, OFFSETS, kind="streamline", chunk_shape=4.0, headers={"trx": space})
    with pytest.raises(InputError, match="up to 32767"):
        trk.write(str(tmp_path / "back.trk"), exported(url))
    assert not (tmp_path / "back.trk").exists()
    trx.write(str(tmp_path / "back.trx"), exported(url))  # TRX holds it


def test_trx_read_keeps_its_space(tmp_path):
    oblique_trk(tmp_path / "in.trk")
    trx.write(str(tmp_path / "t.trx"), trk.read(str(tmp_path / "in.trk")))
    got = trx.read(str(tmp_path / "t.trx"))
    assert got.headers["trx"]["voxel_to_rasmm"] == LAS_AFFINE.reshape(-1).tolist()
    assert got.headers["trx"]["dimensions"] == [145, 174, 145] and got.headers["trx"]["dps_names"] == ["weight"]


def test_a_trk_whose_space_is_unusable_reads_without_it(tmp_path):
    oblique_trk(tmp_path / "t.trk", dims=(0, 8, 8))
    with pytest.warns(UserWarning, match="reference space is not kept.*dimensions"):
        got = trk.read(str(tmp_path / "t.trk"))
    assert got.headers == {} and len(got.offsets) == 4


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({"../up": {}}, "header name"),
        ({"trk": {"vox_to_ras": [1.0] * 15}}, "vox_to_ras must be a list of 16"),
        ({"trk": {"vox_to_ras": np.eye(4).reshape(-1).tolist(), "dimensions": [8, 8, 8], "voxel_size": [1, 1, 1],
                  "space": "mm"}}, "space must be one of"),
        ({"notes": {"x": float("nan")}}, "finite JSON"),
        ({"notes": "text"}, "must be an object"),
        ({"notes": {"x": DEEP}}, "header 'notes': headers/notes/zarr.json#/attributes/x/0/0"),  # review: L1 refused it
    ],
)
def test_headers_a_reader_would_refuse_are_not_written(tmp_path, headers, message):
    url = str(tmp_path / "s.zv")
    with pytest.raises(InputError, match=message):
        zv.write_polylines(url, POS, OFFSETS, kind="streamline", chunk_shape=4.0, headers=headers)
    assert not (tmp_path / "s.zv").exists()


GOOD = {"vox_to_ras": LAS_AFFINE.reshape(-1).tolist(), "dimensions": [8, 8, 8], "voxel_size": [1.25] * 3,
        "voxel_order": "LAS", "space": "rasmm"}


@pytest.mark.parametrize(
    ("change", "pointer", "message"),
    [
        ({"vox_to_ras": [1] * 16}, "vox_to_ras", "last row"),
        ({"vox_to_ras": [float("nan")] + [0.0] * 14 + [1.0]}, "vox_to_ras", "16 finite numbers"),
        ({"vox_to_ras": [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]}, "vox_to_ras", "voxel sizes"),
        # found by the review: each passed, and an export wrote NaN or inf positions (exit 0) or crashed
        ({"voxel_size": [1e-300, 1, 1]}, "voxel_size", "voxel sizes from"),
        ({"vox_to_ras": [1, 0, 0, 1e300, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]}, "vox_to_ras", "magnitude at most"),
        ({"vox_to_ras": [10**400] + [0] * 14 + [1]}, "vox_to_ras", "magnitude at most"),
        ({"voxel_size": [10**400, 1, 1]}, "voxel_size", "magnitude at most"),
        ({"vox_to_ras": [1e6, 1e6, 0, 0, 0, 1e-10, 0, 0, 0, 0, 1e6, 0, 0, 0, 0, 1]}, "vox_to_ras",
         "distinct directions"),
        ({"voxel_order": None, "space": "voxmm"}, "voxel_order", "is needed"),
        ({"vox_to_ras": "eye"}, "vox_to_ras", "16 finite numbers"),
        ({"dimensions": [8, 8]}, "dimensions", "3 integers"),
        ({"dimensions": [8, 8, True]}, "dimensions", "3 integers"),
        ({"dimensions": [8, 8, 0]}, "dimensions", "3 integers"),
        ({"voxel_size": [1, 1, -1]}, "voxel_size", "positive"),
        ({"voxel_order": "XYZ"}, "voxel_order", "three letters"),
        ({"voxel_order": "LLS"}, "voxel_order", "three letters"),
        ({"space": 3}, "space", "must be one of"),
    ],
)
def test_a_stores_broken_header_is_refused_naming_it(tmp_path, change, pointer, message):
    """A header read from a store is data from elsewhere: each field an export uses is checked."""
    url = str(tmp_path / "s.zv")
    zv.write_polylines(url, POS, OFFSETS, kind="streamline", chunk_shape=4.0, headers={"trk": {**GOOD}})
    doc_path = tmp_path / "s.zv" / "headers" / "trk" / "zarr.json"
    doc = json.loads(doc_path.read_text())
    doc["attributes"].update(change)
    doc_path.write_text(json.dumps(doc))
    with pytest.raises(MetadataError, match=message) as info:
        read_headers(Storage(url))
    assert info.value.file == "headers/trk/zarr.json" and info.value.pointer == f"/attributes/{pointer}"


def test_a_header_that_is_not_a_group_is_refused(tmp_path):
    url = str(tmp_path / "s.zv")
    zv.write_polylines(url, POS, OFFSETS, kind="streamline", chunk_shape=4.0, headers={"trk": {**GOOD}})
    doc_path = tmp_path / "s.zv" / "headers" / "trk" / "zarr.json"
    doc_path.write_text(json.dumps({"zarr_format": 3, "node_type": "group", "attributes": [1]}))
    with pytest.raises(MetadataError, match="attributes"):
        read_headers(Storage(url))
    array = (tmp_path / "s.zv" / "0" / "vertices" / "zarr.json").read_text()  # a valid document, of an array
    doc_path.write_text(array)
    with pytest.raises(MetadataError, match="node_type must be 'group' for a header") as info:
        read_headers(Storage(url))
    assert info.value.file == "headers/trk/zarr.json"


def test_a_root_saying_voxmm_without_a_trk_header_is_refused(tmp_path):
    """A store whose positions are TrackVis voxel mm with no header to take them to RAS+ mm would
    otherwise export them as RAS+ mm."""
    url = str(tmp_path / "s.zv")
    zv.write_polylines(url, POS, OFFSETS, kind="streamline", chunk_shape=4.0)
    with pytest.raises(MetadataError, match="no TRK header") as info:
        read_headers(Storage(url), crs={"input_space": "voxmm"})
    assert (info.value.file, info.value.pointer) == ("zarr.json", "/attributes/crs/input_space")
    assert read_headers(Storage(url), ("gifti",), crs={"input_space": "voxmm"}) == {}  # a surface export: no matter


def test_the_roots_crs_says_voxmm_for_a_header_that_does_not(tmp_path):
    """The reference's parallel TRK ingest records the positions' space as ``crs.input_space``."""
    url = str(tmp_path / "s.zv")
    header = {k: v for k, v in GOOD.items() if k != "space"}
    zv.write_polylines(url, POS, OFFSETS, kind="streamline", chunk_shape=4.0, headers={"trk": header})
    assert read_headers(Storage(url))["trk"].get("space") is None
    assert read_headers(Storage(url), crs={"input_space": "voxmm"})["trk"]["space"] == "voxmm"


# ---------------------------------------------------------------------------
# FreeSurfer: the surface's volume geometry (``headers/freesurfer``)
# ---------------------------------------------------------------------------
def _volume_info():
    from collections import OrderedDict

    return OrderedDict(head=np.array([2, 0, 20], np.int32), valid="1  # volume info valid",
                       filename="/subjects/bert/mri/orig.mgz", volume=np.array([256, 256, 256]),
                       voxelsize=np.array([1.0, 1.0, 1.0]), xras=np.array([-1.0, 0, 0]),
                       yras=np.array([0, 0, -1.0]), zras=np.array([0, 1.0, 0]), cras=np.array([5.5, -17.25, 3.0]))


def _surface(path):
    from nibabel.freesurfer import write_geometry

    rng = np.random.default_rng(4)
    write_geometry(str(path), rng.uniform(-50, 50, (5, 3)), np.array([[0, 1, 2], [1, 2, 3], [2, 3, 4]], np.int32),
                   volume_info=_volume_info())


def test_a_surfaces_volume_geometry_survives_a_store(tmp_path):
    from nibabel.freesurfer import read_geometry

    from zarr_vectors.io import freesurfer

    _surface(tmp_path / "lh.white")
    got = freesurfer.read(str(tmp_path / "lh.white"))
    assert got.headers["freesurfer"]["volume_info"]["cras"] == [5.5, -17.25, 3.0]
    url = str(tmp_path / "s.zv")
    zv.write_mesh(url, got.positions, got.faces, chunk_shape=50.0, headers=got.headers)
    store = open_store(url)
    data = replace(as_geometry(zv.read(url)), headers=read_headers(store.storage, ("freesurfer",)))
    freesurfer.write(str(tmp_path / "back.white"), data)
    *_, info = read_geometry(str(tmp_path / "back.white"), read_metadata=True)
    for name, value in _volume_info().items():
        assert np.array_equal(info[name], value) if not isinstance(value, str) else info[name] == value, name


@pytest.mark.parametrize(
    ("member", "value", "message"),
    [
        ("head", [1, 2, 3], r"\[2, 0, 20\] or \[20\]"),
        ("filename", "a\nvalid = 0", "one line of text"),
        ("volume", [256, 256], "3 integers"),
        ("voxelsize", [1, 0, 1], "positive"),
        ("cras", [1, "x", 2], "3 finite numbers"),
    ],
)
def test_a_stores_broken_volume_geometry_is_refused_naming_it(tmp_path, member, value, message):
    from zarr_vectors.format.headers import freesurfer_header

    url = str(tmp_path / "s.zv")
    zv.write_mesh(url, POS[:3], np.array([[0, 1, 2]]), chunk_shape=4.0,
                  headers={"freesurfer": freesurfer_header(_volume_info())})
    doc_path = tmp_path / "s.zv" / "headers" / "freesurfer" / "zarr.json"
    doc = json.loads(doc_path.read_text())
    doc["attributes"]["volume_info"][member] = value
    doc_path.write_text(json.dumps(doc))
    with pytest.raises(MetadataError, match=message) as info:
        read_headers(Storage(url), ("freesurfer",))
    assert info.value.pointer == f"/attributes/volume_info/{member}"


# ---------------------------------------------------------------------------
# GIfTI: the file's metadata and the pointset's coordinate system (``headers/gifti``)
# ---------------------------------------------------------------------------
def _gifti_surface(path):
    from nibabel import gifti

    rng = np.random.default_rng(5)
    points = gifti.GiftiDataArray(
        rng.uniform(-50, 50, (5, 3)).astype(np.float32), intent="NIFTI_INTENT_POINTSET",
        meta=gifti.GiftiMetaData({"AnatomicalStructurePrimary": "CortexLeft", "GeometricType": "Anatomical"}),
        coordsys=gifti.GiftiCoordSystem("NIFTI_XFORM_TALAIRACH", "NIFTI_XFORM_SCANNER_ANAT", LAS_AFFINE),
    )  # fmt: skip
    triangles = gifti.GiftiDataArray(np.array([[0, 1, 2], [1, 2, 3], [2, 3, 4]], np.int32),
                                     intent="NIFTI_INTENT_TRIANGLE",
                                     meta=gifti.GiftiMetaData({"TopologicalType": "Open"}))
    gifti.GiftiImage(darrays=[points, triangles], meta=gifti.GiftiMetaData({"UserName": "lab"})).to_filename(str(path))


def test_a_gifti_surfaces_metadata_and_coordinate_system_survive_a_store(tmp_path):
    from nibabel import gifti as nib_gifti

    from zarr_vectors.io import gifti

    _gifti_surface(tmp_path / "lh.surf.gii")
    got = gifti.read(str(tmp_path / "lh.surf.gii"))
    assert got.headers["gifti"]["pointset_meta"]["AnatomicalStructurePrimary"] == "CortexLeft"
    url = str(tmp_path / "s.zv")
    zv.write_mesh(url, got.positions, got.faces, chunk_shape=50.0, headers=got.headers)
    store = open_store(url)
    data = replace(as_geometry(zv.read(url)), headers=read_headers(store.storage, ("gifti",)))
    gifti.write(str(tmp_path / "back.surf.gii"), data)
    back = nib_gifti.GiftiImage.from_filename(str(tmp_path / "back.surf.gii"))
    assert dict(back.meta) == {"UserName": "lab"} and dict(back.darrays[1].meta) == {"TopologicalType": "Open"}
    assert dict(back.darrays[0].meta) == {"AnatomicalStructurePrimary": "CortexLeft", "GeometricType": "Anatomical"}
    system = back.darrays[0].coordsys
    assert (system.dataspace, system.xformspace) == (3, 1)  # TALAIRACH, SCANNER_ANAT
    np.testing.assert_array_equal(system.xform, LAS_AFFINE)


@pytest.mark.parametrize(
    ("change", "pointer", "message"),
    [
        ({"meta": ["UserName"]}, "meta", "object of names"),
        ({"pointset_meta": {"GeometricType": "Anat\x00omical"}}, "pointset_meta/GeometricType", "control"),
        ({"triangle_meta": {"TopologicalType": 3}}, "triangle_meta/TopologicalType", "text"),
        ({"coordsys": {"dataspace": "MNI", "xformspace": "NIFTI_XFORM_UNKNOWN", "xform": [0] * 16}},
         "coordsys/dataspace", "must be one of"),
        ({"coordsys": {"dataspace": "NIFTI_XFORM_UNKNOWN", "xformspace": "NIFTI_XFORM_UNKNOWN", "xform": [0] * 9}},
         "coordsys/xform", "16 finite numbers"),
        # the hunt: nibabel wrote these into files no XML parser reads back (exit 0)
        ({"meta": {"Name": "a\uffffb"}}, "meta/Name", "control"),
        ({"meta": {"\ufffe": "x"}}, "meta/\ufffe", "control"),
        ({"pointset_meta": {"Name": "\ud800"}}, "pointset_meta/Name", "control"),
    ],
)
def test_a_stores_broken_gifti_header_is_refused_naming_it(tmp_path, change, pointer, message):
    from zarr_vectors.format.headers import gifti_header

    url = str(tmp_path / "s.zv")
    zv.write_mesh(url, POS[:3], np.array([[0, 1, 2]]), chunk_shape=4.0,
                  headers={"gifti": gifti_header({}, {"GeometricType": "Anatomical"}, {}, None)})
    doc_path = tmp_path / "s.zv" / "headers" / "gifti" / "zarr.json"
    doc = json.loads(doc_path.read_text())
    doc["attributes"].update(change)
    doc_path.write_text(json.dumps(doc))
    with pytest.raises(MetadataError, match=message) as info:
        read_headers(Storage(url), ("gifti",))
    assert info.value.pointer == f"/attributes/{pointer}"


@pytest.mark.parametrize("footer", [
    b"\x00\x00\x00\x14valid = 1\nfilename = x\nvolume = 1 2\n",  # nibabel: OSError
    # the hunt: ValueError, UnicodeDecodeError and OverflowError from nibabel's footer parser
    b"\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x14valid = 1  # volume info valid\nfilename = /s\xfcbj/orig.mgz\n",
    b"\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x14valid = 1\nfilename = x\nvolume = 256 256 abc\n",
    b"\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x14valid = 1\nfilename = x\nvolume = 99999999999999999999 1 1\n",
])
def test_a_surface_whose_volume_geometry_is_damaged_still_reads(tmp_path, footer):
    """The footer is read since the volume geometry is kept: a damaged one must not cost the surface,
    which read before."""
    from nibabel.freesurfer import write_geometry

    from zarr_vectors.io import freesurfer

    write_geometry(str(tmp_path / "lh.white"), POS[:4].astype(np.float64), np.array([[0, 1, 2], [1, 2, 3]], np.int32))
    raw = (tmp_path / "lh.white").read_bytes()
    (tmp_path / "lh.white").write_bytes(raw + footer)
    with pytest.warns(UserWarning, match="volume geometry cannot be read"):
        got = freesurfer.read(str(tmp_path / "lh.white"))
    assert got.headers == {} and got.faces.tolist() == [[0, 1, 2], [1, 2, 3]]


def test_a_gifti_whose_transform_a_store_cannot_keep_still_reads(tmp_path):
    from nibabel import gifti as nib_gifti

    from zarr_vectors.io import gifti

    points = nib_gifti.GiftiDataArray(
        POS[:3], intent="NIFTI_INTENT_POINTSET", meta=nib_gifti.GiftiMetaData({"GeometricType": "Anatomical"}),
        coordsys=nib_gifti.GiftiCoordSystem("NIFTI_XFORM_TALAIRACH", "NIFTI_XFORM_SCANNER_ANAT",
                                            np.full((4, 4), np.nan)),
    )  # fmt: skip
    triangles = nib_gifti.GiftiDataArray(np.array([[0, 1, 2]], np.int32), intent="NIFTI_INTENT_TRIANGLE")
    nib_gifti.GiftiImage(darrays=[points, triangles]).to_filename(str(tmp_path / "nan.surf.gii"))
    with pytest.warns(UserWarning, match="its coordinate system is not kept .*coordsys/xform"):
        got = gifti.read(str(tmp_path / "nan.surf.gii"))
    assert got.faces.tolist() == [[0, 1, 2]]
    assert "coordsys" not in got.headers["gifti"]
    assert got.headers["gifti"]["pointset_meta"] == {"GeometricType": "Anatomical"}  # the rest is kept


def test_a_trx_whose_dimensions_trx_python_cannot_cast_is_refused_not_a_traceback(tmp_path):
    """The hunt: DIMENSIONS -1 or 70000 in header.json raised OverflowError inside trx-python."""
    import zipfile

    oblique_trk(tmp_path / "in.trk")
    trx.write(str(tmp_path / "t.trx"), trk.read(str(tmp_path / "in.trk")))
    zipfile.ZipFile(tmp_path / "t.trx").extractall(tmp_path / "d.trx")
    header = json.loads((tmp_path / "d.trx" / "header.json").read_text())
    header["DIMENSIONS"] = [-1, 8, 8]
    (tmp_path / "d.trx" / "header.json").write_text(json.dumps(header))
    with pytest.raises(InputError, match="not a readable TRX file .*OverflowError"):
        trx.read(str(tmp_path / "d.trx"))
