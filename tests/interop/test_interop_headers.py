"""A tractogram's reference space (``headers/trk``) between us and the reference's tools, both ways.

Ours -> reference: a store ``zv build`` made from a TRK is read by the tools' ``stored_space``
as the file's grid.  Reference -> ours: ``zvtools convert`` keeps a TRK in TrackVis voxel mm
(``space: voxmm``, object index layout v2); exported by our TRK and TCK writers it gives the
file's RAS+ mm streamlines and, for TRK, its header back.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import dask
import numpy as np
import pytest

import zarr_vectors as zv

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "io"))
from refenv import run_reference
from test_reference_space import LAS_AFFINE, oblique_trk
from test_streamlines import POS

pytestmark = pytest.mark.interop


def test_the_reference_reads_the_space_we_keep(tmp_path):
    from pipeline.cli import main

    oblique_trk(tmp_path / "in.trk")
    store = tmp_path / "s.zv"
    with dask.config.set(scheduler="threads"):
        assert main(["build", "streamlines", str(tmp_path / "in.trk"), str(store), "--chunk-shape", "4"]) == 0
    got = run_reference("stored-space", str(store))
    assert got["space"] == "rasmm" and got["source"] == "trk" and got["voxel_order"] == "LAS"
    np.testing.assert_array_equal(got["affine"], LAS_AFFINE)
    assert got["dimensions"] == [145, 174, 145]


def test_a_reference_voxmm_store_exports_in_rasmm_with_its_header(tmp_path):
    import nibabel as nib

    from zarr_vectors.io import tck, trk
    from zarr_vectors.io.types import as_geometry
    from zarr_vectors.store.groups import open_store
    from zarr_vectors.store.headers import read_headers

    oblique_trk(tmp_path / "in.trk")
    store = str(tmp_path / "ref.zv")
    run_reference("convert", str(tmp_path / "in.trk"), store, "--chunk-shape", "20,20,20")
    opened = open_store(store)
    headers = read_headers(opened.storage, crs=opened.root.extra.get("crs"))
    assert headers["trk"]["space"] == "voxmm"
    data = replace(as_geometry(zv.read(store, allow_layouts=("vlen_manifests_v2",))), headers=headers)
    assert np.abs(np.asarray(data.positions).mean(axis=0) - POS.mean(axis=0)).max() > 1  # voxel mm in the store
    trk.write(str(tmp_path / "back.trk"), data)
    tck.write(str(tmp_path / "back.tck"), data)
    for name in ("back.trk", "back.tck"):
        got = nib.streamlines.load(str(tmp_path / name)).streamlines.get_data()
        # the reference may store streamlines in another order: compare the vertex sets, row by row
        rows = [np.round(v, 3) for v in (got, POS)]
        rows = [v[np.lexsort(v.T[::-1])] for v in rows]
        np.testing.assert_allclose(rows[0], rows[1], atol=2e-3)
    header = nib.streamlines.load(str(tmp_path / "back.trk")).header
    np.testing.assert_array_equal(header["voxel_to_rasmm"], LAS_AFFINE)
    assert header["voxel_order"] == b"LAS"
