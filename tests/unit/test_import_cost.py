"""What ``import zarr_vectors`` and a local numpy write load: first-use costs a script pays.

A script's first write is timed with its imports (issue 13 item 7), so the public API
loads its heavy parts on first use and a numpy write never imports ``dask.array``
(which pulls xarray and pandas where installed) nor ``distributed`` (dask imports it to
look for a client unless told the scheduler), nor ``fsspec`` (only object and memory
stores need it), nor ``numpy.ma`` (a plain ``np.unique`` imports it: ~55 ms, more than
the write of a small store; and numpy 2.4's plain ``np.unique`` of a million distinct
values takes 15x a sort).  Each check runs in a fresh interpreter.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import zarr_vectors as zv

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("dask.array", "distributed", "fsspec", "pandas", "xarray", "numpy.ma")


def _fresh(code: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_import_loads_no_pyramid_validator_or_heavy_dependency_and_read_stays_the_function():
    """Nothing heavy at import; ``zarr_vectors.read`` is also a submodule, and importing it
    (or the validator) afterwards must not rebind the API's ``read``."""
    got = _fresh(
        "import json, sys; import zarr_vectors as zv; "
        f"loaded = sorted(m for m in sys.modules if m in {HEAVY!r} or m.startswith(("
        "'zarr_vectors.pyramid', 'zarr_vectors.validation', 'zarr_vectors.sharding'))); "
        "import zarr_vectors.read; import zarr_vectors.validation; "
        "print(json.dumps([loaded, type(zv.read).__name__, callable(zv.validate)]))"
    )
    assert got == [[], "function", True]


def test_numpy_writes_import_no_heavy_module(tmp_path):
    got = _fresh(
        "import json, sys; import numpy as np; import zarr_vectors as zv; "
        "pos = np.array([[0.1, 0.1, 0.1], [1.5, 0.2, 0.3], [0.4, 1.6, 0.2], [1.2, 1.3, 0.9]], np.float32); "
        f"m, s = {str(tmp_path / 'm.zv')!r}, {str(tmp_path / 's.zv')!r}; "
        "zv.write_mesh(m, pos, np.array([[0, 1, 2], [1, 2, 3]]), chunk_shape=1.0); "
        "zv.write_polylines(s, pos, np.array([0, 2, 4]), chunk_shape=1.0, kind='streamline'); "
        f"p = {str(tmp_path / 'p.zv')!r}; zv.write_points(p, pos, chunk_shape=1.0, object_ids=np.array([3, 0, 3, 1])); "
        f"g = {str(tmp_path / 'g.zv')!r}; "
        "zv.write_graph(g, pos, np.array([[0, 1], [1, 2], [2, 3], [3, 0]]), chunk_shape=1.0, store='duplicate'); "
        f"print(json.dumps([len(zv.read(m)), len(zv.read(s)), zv.read(p).object_ids.tolist(), len(zv.read(g).edges), "
        f"sorted(m for m in sys.modules if m in {HEAVY!r})]))"
    )
    assert got[:2] == [4, 4] and sorted(got[2]) == [0, 1, 3, 3] and got[3] == 8  # each edge crosses chunks: two copies
    assert got[4] == []


def test_task_sizing_imports_no_numpy_ma():
    """Every stage cuts its work with ``split_by_weight``; the small writes above make one run."""
    got = _fresh(
        "import json, sys; from zarr_vectors.execution.runner import split_by_weight; "
        "runs = split_by_weight([1, 1, 1, 1], 2); "
        "print(json.dumps([[(r.start, r.stop) for r in runs], 'numpy.ma' in sys.modules]))"
    )
    assert got == [[[0, 2], [2, 4]], False]


def test_every_public_name_resolves():
    for name in zv.__all__:
        assert getattr(zv, name) is not None, name
    assert set(zv.__all__) <= set(dir(zv))
    with pytest.raises(AttributeError):
        zv.no_such_name  # noqa: B018
