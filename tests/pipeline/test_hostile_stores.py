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
