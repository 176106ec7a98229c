"""Commands on stores damaged by hand, from the fourteenth session's hunt through ``zv pyramid``,
``shard``, ``plot``, ``info``, ``validate`` and ``export``: each a typed error naming what and
where (exit 2), never a traceback, never wrong data with exit 0."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import dask
import numpy as np
import pytest

import zarr_vectors as zv

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")


@pytest.fixture(autouse=True)
def in_process():
    with dask.config.set(scheduler="threads"):
        yield


@pytest.fixture
def points(tmp_path) -> Path:
    rng = np.random.default_rng(0)
    store = tmp_path / "s.zv"
    zv.write_points(str(store), rng.uniform(0, 40, (500, 3)), chunk_shape=10,
                    attributes={"intensity": rng.random(500)}, object_ids=np.arange(500) % 7)
    return store


def _edit(path: Path, fn) -> None:
    doc = json.loads(path.read_text())
    fn(doc)
    path.write_text(json.dumps(doc))


def test_names_str_isdigit_takes_but_int_refuses_are_not_levels(cli, points, tmp_path):
    """Regression: '²' passes ``str.isdigit`` and fails ``int()``, and so does a 5,000-digit name:
    as a multiscales dataset path they crashed ``zv info`` (traceback) and the validator's level-2
    checks (``L2_CHECK_CRASHED``); as a root folder holding a ``zarr.json``, ``zv validate`` failed
    ordering its findings (exit 1)."""
    import shutil

    for name in ("²", "1" * 5000):
        store = tmp_path / f"{len(name)}.zv"
        shutil.copytree(points, store)

        def add(doc, name=name):
            datasets = doc["attributes"]["multiscales"][0]["datasets"]
            datasets.append({**copy.deepcopy(datasets[0]), "path": name})

        _edit(store / "zarr.json", add)
        run = cli("info", store)
        assert run.rc == 0 and "Traceback" not in run.err, run.err
        result = zv.validate(str(store), level=2)
        assert [f.code for f in result.findings if f.severity == "error"] == ["L2_MULTISCALES_DATASETS"], \
            result.errors
    (points / "²").mkdir()
    shutil.copy(points / "0" / "zarr.json", points / "²" / "zarr.json")
    run = cli("validate", points)
    assert run.rc == 0 and "L1_UNKNOWN_ROOT_CHILD" in run.out, (run.out, run.err)


def test_an_object_id_past_int64_is_not_in_the_object_index(cli, points, tmp_path):
    """Regression: ``--object-id 99999999999999999999`` reached ``np.asarray(..., int64)``: a failed
    stage (OverflowError, exit 1) in ``zv export``, a traceback in ``zv plot``."""
    big = str(2**66)
    run = cli("export", points, tmp_path / "o.csv", "--object-id", "3", big)
    assert run.rc == 2 and f"object id(s) [{big}] are not in the store's object index" in run.err, run.err
    assert not (tmp_path / "o.csv").exists()
    run = cli("plot", points, "--out", tmp_path / "p.png", "--object-id", big)
    assert run.rc == 2 and f"[{big}] are not in the level's object index" in run.err, run.err
    assert cli("export", points, tmp_path / "o.csv", "--object-id", "3").rc == 0


@pytest.mark.parametrize("written,labelled", [("graph", "mesh"), ("mesh", "graph"), ("mesh", "streamline")])
def test_links_of_another_kind_than_the_label_are_refused(cli, tmp_path, written, labelled):
    """Regression: a single listed kind was read as itself whatever its links held: a graph labelled
    ``["mesh"]`` exported '99 faces' to an STL of none (exit 0), a mesh labelled ``["graph"]`` wrote
    the first two corners of each triangle as edges, one labelled ``["streamline"]`` a polyline."""
    rng = np.random.default_rng(1)
    store = tmp_path / "s.zv"
    pos = rng.uniform(0, 40, (100, 3))
    if written == "graph":
        zv.write_graph(str(store), pos, rng.integers(0, 100, (99, 2)), chunk_shape=20)
    else:
        faces = np.stack([rng.permutation(100)[:3] for _ in range(60)])  # three distinct corners each
        zv.write_mesh(str(store), pos, faces, chunk_shape=20)
    _edit(store / "zarr.json", lambda d: d["attributes"]["zarr_vectors"].__setitem__("geometry_types", [labelled]))
    with pytest.raises(zv.InconsistentStoreError, match=f"0/links/0: link_width is {2 if written == 'graph' else 3}"):
        zv.read(str(store))
    out = tmp_path / ("o.stl" if labelled == "mesh" else "o.csv")
    run = cli("export", store, out)
    assert run.rc == 2 and f"geometry type '{labelled}'" in run.err and not out.exists(), run.err
    run = cli("plot", store, "--out", tmp_path / "p.png")
    assert run.rc == 2 and "Traceback" not in run.err, run.err


def test_a_nan_vertex_is_named_by_the_pyramid_and_left_out_of_a_picture(cli, points, tmp_path):
    """Regression: a NaN vertex (a warning to the validator, L3_NONFINITE_VERTEX; read returns it)
    crashed the pyramid's binning (numpy's 'list argument must have no negative elements', exit 1)
    and zv plot (matplotlib's 'Axis limits cannot be NaN', a traceback)."""
    from zarr_vectors.store.backend import Storage
    from zarr_vectors.store.grid import GridArray

    cells = GridArray.open(Storage(str(points)), "0/vertices")
    first = cells.nonempty_chunk_coords()[0]
    rows = np.frombuffer(cells.read_cell(first), "<f8").reshape(-1, 3).copy()
    rows[0, 0] = np.nan
    cells.write_cells({first: rows.tobytes()}, record_presence=False)
    with pytest.raises(zv.EncodingError, match="0/vertices: a vertex of cell .* is NaN along axis 0: it lies in no"):
        zv.build_pyramid(str(points), factors=[2])
    assert sorted(p.name for p in points.iterdir() if p.name.isdigit()) == ["0"]
    run = cli("plot", points, "--out", tmp_path / "p.png")
    assert run.rc == 0 and (tmp_path / "p.png").stat().st_size > 0, run.err
    assert "zv plot: warning: 1 vertices have NaN coordinates (the validator's L3_NONFINITE_VERTEX): not drawn" \
        in run.err, run.err
    run = cli("export", points, tmp_path / "o.csv")  # written as read, and said
    assert run.rc == 0 and "zv export: warning: 1 vertices have NaN coordinates" in run.err, run.err


@pytest.mark.parametrize("declared", [2**21, 2**40])
def test_a_pyramid_over_a_grid_declared_larger_than_its_cells(points, tmp_path, declared):
    """Regression: the format lets a writer declare any grid shape covering its cells (validate
    passes), but the pyramid sized its keys from the declared grid: numpy's 'array size defined
    by dims is larger than the maximum possible size' (exit 1), or a refusal saying the level spans
    549,755,813,893 bins where its cells span 4 chunks a side.  It addresses the occupied cells."""
    import shutil

    plain = tmp_path / "plain.zv"
    shutil.copytree(points, plain)
    for rel in ("vertices", "vertex_fragments", "vertex_attributes/intensity"):
        _edit(points / "0" / rel / "zarr.json", lambda d: d.__setitem__("shape", [declared] * 3))
    assert zv.validate(str(points), level=5).ok
    zv.build_pyramid(str(points), factors=[2])
    zv.build_pyramid(str(plain), factors=[2])
    assert zv.validate(str(points), level=5).ok
    ours, theirs = zv.read(str(points), level=1), zv.read(str(plain), level=1)
    np.testing.assert_array_equal(np.sort(ours.positions, axis=0), np.sort(theirs.positions, axis=0))
